// agree.mjs - grade agreement in one environment: `vestibule-mcp doctor --json`, `vestibule-mcp
// verify --json` and one run_code call through the MCP server (the official SDK over stdio),
// all started with the same environment, must tell the same story:
//   - doctor's pick is the ladder's rule applied to its own two backend verdicts (recomputed
//     here, independently of src/service/ladder.c), and is the grade this host is known to give;
//   - verify ran through that backend, under that exact grade, and every probe the grade claims
//     held (a claimed probe NOT HELD or not tested fails; an unclaimed one is not applicable);
//   - the run's last line is "isolation: " and that same grade.
// When the environment is Blocked, all three are refused with the same Blocked: text, which
// names the fix and says retry or restart.
//
// Not a *.test.mjs: run.mjs does not pick it up by default; scripts/test.sh runs it once per
// environment: node run.mjs agree.mjs
//
// Environment (besides lib.mjs's VESTIBULE_BIN, E2E_BACKEND and the variables it passes on):
//   E2E_EXPECT_GRADE   the exact grade this environment must give, or "Blocked: TEXT" when
//                      every run must be refused with a message containing TEXT
//   AGREE_EXPECT_PICK  gvisor|native|container: the backend that must be picked (with a grade)
//   AGREE_LABEL        the environment's name, for the report
//   AGREE_KNOWN_NOT_HELD  probe ids known NOT HELD under this grade (comma-separated): left out
//                      of the strict check and each shown as a todo test (a known gap) whose
//                      reason is AGREE_KNOWN_WHY; never used to hide a new failure
//   AGREE_VERIFY_TRIES verify runs allowed while its only shortfall is "not tested" (a CPU
//                      quota cannot be measured on a host too busy to give a burn a core)
//                      (default 3)
//   AGREE_STRICT_CPU   1: a CPU quota still "not tested" after every try fails instead of
//                      being skipped (the systemd VM, where nothing else runs beside it)
//   AGREE_VERIFY_TIMEOUT_S  seconds one `verify --json` may take (default 480; the systemd VM
//                      gives 720: gVisor under emulation, its probes bounded at 180 s each)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import test from 'node:test';

import { BACKEND, BIN, EXPECT_GRADE, assertBlocked, assertIsolation, connect, makeWorld, runCode } from './lib.mjs';

const LABEL = process.env.AGREE_LABEL || `backend ${BACKEND}`;
const BLOCKED = EXPECT_GRADE.startsWith('Blocked: ') ? EXPECT_GRADE.slice('Blocked: '.length) : null;
const PICK = process.env.AGREE_EXPECT_PICK || null;
const KNOWN_GAPS = (process.env.AGREE_KNOWN_NOT_HELD || '').split(',').filter(Boolean);
const VERIFY_TRIES = Number(process.env.AGREE_VERIFY_TRIES || 3);
const VERIFY_TIMEOUT_MS = Number(process.env.AGREE_VERIFY_TIMEOUT_S || 480) * 1000;
if (!BLOCKED && !['gvisor', 'native', 'container'].includes(PICK)) {
    throw new Error('AGREE_EXPECT_PICK must be gvisor, native or container when a grade is expected');
}

// The ladder's rule (issue 6), written here again so a fault in ladder_decide() cannot hide:
// gvisor, native, then a full container, then gvisor-degraded, native-degraded, then
// container-degraded, else none (issue 26 put the gvisor rung first, grade for grade).
function ladderRule(nat, con, gv) {
    if (gv?.usable && !gv.degraded) return 'gvisor';
    if (nat?.usable && !nat.degraded) return 'native';
    if (con?.usable && !con.degraded) return 'container';
    if (gv?.usable) return 'gvisor';
    if (nat?.usable) return 'native';
    if (con?.usable) return 'container';
    return null;
}

// A fix must say what to do next: retry, or restart (the server or the agent).
const SAYS_RETRY_OR_RESTART = /\b(retry|restart)\b/;

function cli(world, args, timeout) {
    const r = spawnSync(BIN, args, { env: world.env, encoding: 'utf8', timeout, maxBuffer: 16 << 20 });
    assert.equal(r.error, undefined, `${args.join(' ')} could not run: ${r.error}`);
    assert.doesNotMatch(r.stderr, /AddressSanitizer|LeakSanitizer|runtime error:/,
        `${args.join(' ')} printed sanitizer reports:\n${r.stderr}`);
    let json;
    try { json = JSON.parse(r.stdout); } catch (e) {
        assert.fail(`${args.join(' ')} did not print JSON (exit ${r.status}): ${e}\n${r.stdout}\n${r.stderr}`);
    }
    return { status: r.status, json, stderr: r.stderr };
}

// A claimed probe verify could not decide, for a reason its detail names: a CPU quota on a
// host too busy to give the burn a core; the pids cap under a memory cap that stopped the fork
// bomb first (gVisor: each fork costs ~5 MiB of the run's memory, so at the default 256 MiB
// and 128 pids both caps come at ~44 forks). Reported by their own tests below as skipped with
// verify's words, never as held.
function undecided(p) {
    if (p.verdict !== 'not_tested') return false;
    if (p.id === 'cpu') return /too busy/.test(p.detail);
    return p.id === 'pids' &&
        /^the memory cap \(\d+ MiB\) stopped the sandbox after \d+ forks, before the pids cap/.test(p.detail);
}

// Shared between the tests below (they run in order): what doctor said.
let doctor = null;

test(BLOCKED ? `${LABEL}: doctor --json is Blocked, naming the fix`
    : `${LABEL}: doctor --json picks by the ladder's rule, with the known grade`, (t) => {
    const world = makeWorld(t);
    const d = cli(world, ['doctor', '--json'], 120_000);
    const pick = d.json.pick;
    const nat = d.json.backends.native, con = d.json.backends.container, gv = d.json.backends.gvisor;
    doctor = pick;

    assert.equal(pick.setting, BACKEND, 'doctor reports the VESTIBULE_BACKEND it was given');
    assert.equal(d.status, pick.usable ? 0 : 1, 'doctor exits 0 exactly when a run would execute');
    // Each backend's verdict is explained: a grade when usable, the Blocked: text otherwise.
    for (const [name, b] of [['native', nat], ['container', con]]) {
        assert.ok(b.tried, `${name} was probed`);
        assert.ok(b.checks.length > 0, `${name}: its prerequisites are listed`);
        if (b.usable) {
            assert.match(b.grade, new RegExp(`^${name}( |$)|^${name}-degraded \\(`), `${name}'s grade names it`);
            assert.equal(b.degraded, b.grade !== name, `${name}: degraded exactly when the grade says so`);
        } else {
            assert.ok(b.blocked && SAYS_RETRY_OR_RESTART.test(b.blocked),
                `${name} is not usable, so its reason must name a fix and say retry or restart: ${b.blocked}`);
            // a failed prerequisite of its own, or of the host (a root server, a bad setting)
            assert.ok(b.checks.some((c) => c.status === 'FAIL') || d.json.host.some((c) => c.status === 'FAIL'),
                `${name}: a failed prerequisite explains the block: ${JSON.stringify(b.checks)}`);
        }
    }
    const expectPick = BACKEND === 'auto' ? ladderRule(nat, con, gv?.tried ? gv : null) : BACKEND;
    if (BLOCKED) {
        assert.equal(pick.usable, false, `expected Blocked, doctor picks ${pick.backend}: ${pick.grade}`);
        assert.ok(pick.blocked.includes(BLOCKED), `doctor's Blocked text names the fix "${BLOCKED}": ${pick.blocked}`);
        assert.match(pick.blocked, SAYS_RETRY_OR_RESTART, 'and says retry or restart');
        if (BACKEND === 'auto') assert.equal(expectPick, null, 'the ladder rule also finds nothing usable');
        return;
    }
    assert.equal(pick.usable, true, `doctor says a run would be Blocked: ${pick.blocked}`);
    assert.equal(pick.backend, expectPick, 'the pick is the ladder rule on the two verdicts');
    assert.equal(pick.backend, PICK, `this environment picks ${PICK}`);
    assert.equal(pick.grade, d.json.backends[pick.backend].grade, 'the pick carries that backend\'s grade');
    assert.equal(pick.grade, EXPECT_GRADE, 'the grade this environment is known to give');
});

// verify's result, shared with the known-gap test below.
let verified = null;

test(BLOCKED ? `${LABEL}: verify --json is Blocked with doctor's text`
    : `${LABEL}: verify --json ran under that grade and every claimed probe held`,
{ timeout: Math.max(1_500_000, VERIFY_TRIES * VERIFY_TIMEOUT_MS + 60_000) }, (t) => {
    assert.ok(doctor, 'doctor ran first');
    const world = makeWorld(t);
    let v, run, shortfall;
    // A CPU quota cannot be told apart from a host too busy to give the burn a core: verify
    // says "not tested" then, never "held". Only that is tried again (a few times); anything
    // NOT HELD fails at once.
    for (let attempt = 1; ; attempt++) {
        v = cli(world, ['verify', '--json'], VERIFY_TIMEOUT_MS);
        run = v.json.runs[0];
        assert.equal(v.json.runs.length, 1, 'one battery: the backend a run would use');
        if (!run?.ran) break;
        shortfall = run.probes.filter((p) => p.claimed && p.verdict !== 'held' && !KNOWN_GAPS.includes(p.id));
        if (attempt >= VERIFY_TRIES || shortfall.length === 0 || shortfall.some((p) => p.verdict !== 'not_tested')) break;
        t.diagnostic(`verify attempt ${attempt}: not tested: ${shortfall.map((p) => `${p.id}: ${p.detail}`).join('; ')}`);
    }
    if (BLOCKED) {
        assert.equal(v.status, 1, 'verify fails when nothing can run');
        assert.equal(run.ran, false, 'nothing ran');
        assert.equal(run.blocked, doctor.blocked, 'verify is Blocked with doctor\'s exact text');
        return;
    }
    assert.equal(run.ran, true, `verify ran nothing: ${run.blocked}`);
    verified = run;
    for (const p of run.probes.filter((q) => q.claimed)) t.diagnostic(`${p.id}: ${p.verdict}: ${p.detail}`);
    assert.equal(run.backend, doctor.backend, 'verify went through the backend doctor picks');
    assert.equal(run.grade, doctor.grade, 'verify ran under the grade doctor gives');
    const claimed = run.probes.filter((p) => p.claimed);
    // Still "not tested" after every try for a reason verify names (undecided() above):
    // reported by the CPU and pids tests below as skipped, never as held.
    const busy = shortfall.filter(undecided);
    assert.deepEqual(shortfall.filter((p) => !busy.includes(p)).map((p) => `${p.id}: ${p.verdict}: ${p.detail}`), [],
        `every probe the grade "${run.grade}" claims must hold`);
    for (const p of run.probes.filter((q) => !q.claimed)) {
        assert.equal(p.verdict, 'not_applicable', `${p.id} is not claimed, so not judged`);
    }
    // The isolation probes are claimed by every sandbox grade; limits only when not degraded.
    assert.ok(claimed.length >= 13, `a sandbox grade claims the isolation probes (got ${claimed.length})`);
    for (const id of ['memory', 'cpu', 'pids']) {
        const p = run.probes.find((q) => q.id === id);
        const named = new RegExp(`limits not applied: [a-z, ]*\\b${id}\\b`).test(run.grade);
        assert.equal(p.claimed, !named, `${id}: claimed exactly when the grade does not list it as not applied`);
    }
    const gapsOpen = claimed.filter((p) => KNOWN_GAPS.includes(p.id) && p.verdict !== 'held');
    assert.equal(run.summary.held, claimed.length - gapsOpen.length - busy.length);
    assert.equal(run.summary.not_tested, busy.length);
    // verify itself must say the same: ok (exit 0) exactly when no claimed probe fell short.
    const clean = gapsOpen.length === 0 && busy.length === 0;
    assert.equal(v.json.ok, clean, 'verify\'s own verdict agrees with its probes');
    assert.equal(v.status, clean ? 0 : 1, 'and its exit status');
});

// The CPU quota, where the grade claims one: held, or (a host too busy to tell, after every
// try) skipped with verify's own words; never passed untested.
if (!BLOCKED && !/limits not applied: [a-z, ]*\bcpu\b/.test(EXPECT_GRADE)) {
    test(`${LABEL}: the CPU quota the grade claims was measured and held`, (t) => {
        assert.ok(verified, 'verify ran');
        const p = verified.probes.find((q) => q.id === 'cpu');
        assert.ok(p.claimed, `the grade ${verified.grade} claims a CPU quota`);
        if (p.verdict === 'not_tested' && /too busy/.test(p.detail) && process.env.AGREE_STRICT_CPU !== '1') {
            t.skip(`not measurable on this host now, after ${VERIFY_TRIES} tries: ${p.detail}`);
            return;
        }
        assert.equal(p.verdict, 'held', `cpu: ${p.verdict}: ${p.detail}`);
    });
}

// The pids cap, where the grade claims one: held, or (the memory cap stopped the fork bomb
// first in every try) skipped with verify's own words; never passed untested.
if (!BLOCKED && !/limits not applied: [a-z, ]*\bpids\b/.test(EXPECT_GRADE)) {
    test(`${LABEL}: the pids cap the grade claims was reached and held`, (t) => {
        assert.ok(verified, 'verify ran');
        const p = verified.probes.find((q) => q.id === 'pids');
        assert.ok(p.claimed, `the grade ${verified.grade} claims a pids cap`);
        if (undecided(p)) {
            t.skip(`not decidable under this memory cap, after ${VERIFY_TRIES} tries: ${p.detail}`);
            return;
        }
        assert.equal(p.verdict, 'held', `pids: ${p.verdict}: ${p.detail}`);
    });
}

// A probe this environment is known to fail under its grade (AGREE_KNOWN_NOT_HELD): a todo
// test, listed as a known gap in every run; it reports "passes now" once the gap is closed.
for (const id of KNOWN_GAPS) {
    test(`${LABEL}: probe ${id} holds under the grade`, { todo: process.env.AGREE_KNOWN_WHY || 'known gap' }, () => {
        assert.ok(verified, 'verify ran');
        const p = verified.probes.find((q) => q.id === id);
        assert.ok(p?.claimed, `${id} is claimed by ${verified.grade}`);
        assert.equal(p.verdict, 'held', `${id}: ${p.verdict}: ${p.detail}`);
    });
}

test(BLOCKED ? `${LABEL}: a run_code call through the server is Blocked with doctor's text`
    : `${LABEL}: a run_code call through the server ends with that isolation line`, { timeout: 300_000 }, async (t) => {
    assert.ok(doctor, 'doctor ran first');
    const world = makeWorld(t);
    const conn = await connect(world);
    const { result, text } = await runCode(conn, 'python', 'print(6*7)');
    if (BLOCKED) {
        const got = assertBlocked(result, BLOCKED);
        assert.ok(got.includes(doctor.blocked), `the run is Blocked with doctor's text:\n${got}\ndoctor: ${doctor.blocked}`);
        assert.match(got, SAYS_RETRY_OR_RESTART);
        return;
    }
    assert.notEqual(result.isError, true, `the run failed:\n${text}`);
    assert.match(text, /^42$/m, `the code ran:\n${text}`);
    assertIsolation(text, doctor.grade);
});
