#!/usr/bin/env node
// run.mjs - drive real MCP clients (pinned in package-lock.json) against vestibule-mcp and a
// scripted stand-in model API (model-api.mjs) on 127.0.0.1, and check what each client handed
// its model (facts.mjs). Prints one PASS/FAIL line per client with the failed facts, a table of
// what each model saw, and last "clients: N passed, N failed, N skipped".
//
// Each client starts the server exactly as it does for a user: from the MCP config a user
// writes (the command and an `env` block with VESTIBULE_* settings), with the client's own
// environment handling. The clients themselves get the caller's session variables (PATH,
// USER, LOGNAME, LANG, SHELL, TERM, XDG_RUNTIME_DIR, DBUS_SESSION_BUS_ADDRESS, TMPDIR), a
// HOME of their own, and what points them at the stand-in API. Nothing else.
//
// Everything (the stand-in API, the clients, the servers they start) runs in a network
// namespace of its own whose only interface is the loopback (unshare(1): a user namespace
// for the netns, then a nested one mapping our own uid and gid back), so nothing can leave
// the machine. --no-netns runs without it.
//
// Usage: node run.mjs [--only a,b] [--backend B] [--expect-grade G] [--rootfs DIR]
//                     [--results FILE] [--timeout S] [--keep] [--no-netns] [--no-controls] [--list]
//   --backend       VESTIBULE_BACKEND in every MCP config (default naive)
//   --expect-grade  the exact text after "isolation: " (default for naive:
//                   "none (naive: development only)"; required otherwise)
//   --rootfs        VESTIBULE_ROOTFS_DIR in every MCP config
//   --results       also write {passed, failed, skipped, failures} there as JSON (the format of
//                   tests/e2e/run.mjs, which scripts/test.sh's add_results reads)
//   --timeout       seconds each client may take, all its commands together (default 90;
//                   opencode gets twice that)
//   --keep          keep the scratch folder (printed) with every request the model API got
//   --no-controls   leave out the controls (a client without the approval its user must give
//                   must refuse; they do not depend on the backend)
// Environment: VESTIBULE_BIN, the server binary (required; not passed on to any client).
//
// CI (scripts/test.sh) runs every client on backends naive and native, the controls once. The
// systemd VM stage (scripts/vm/test-native.sh, step 3a) runs Claude Code expecting `native`,
// with this folder's node_modules installed on the host and read by the guest through the
// source share (the guest has unshare(1) and ip(8); emulation is ~50x slower, hence the long
// allowance; ~3 min there on a 2-core host at load 10):
//   VESTIBULE_BIN=$build/vestibule-mcp node tests/clients/run.mjs --only claude-code \
//       --backend native --expect-grade native --rootfs "$VESTIBULE_ROOTFS_DIR" \
//       --timeout 1200 --results "$counts_json"
// Exit status: 0 only when every client passed and at least one ran.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { startModelApi } from './model-api.mjs';
import { IMAGE_STEP, SCRIPT, PROMPT, OUTPUT_CAP, checkViews, imageReached, modelText, summarize } from './facts.mjs';
import { CLIENTS } from './drivers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
    const o = { controls: true, only: null, backend: 'naive', grade: '', rootfs: '', results: '', timeout: 90, keep: false, netns: true, inNetns: false, list: false };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i], v = () => {
            if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
            return argv[++i];
        };
        if (a === '--only') o.only = v().split(',').filter(Boolean);
        else if (a === '--backend') o.backend = v();
        else if (a === '--expect-grade') o.grade = v();
        else if (a === '--rootfs') o.rootfs = v();
        else if (a === '--results') o.results = v();
        else if (a === '--timeout') o.timeout = Number(v());
        else if (a === '--keep') o.keep = true;
        else if (a === '--no-controls') o.controls = false;
        else if (a === '--no-netns') o.netns = false;
        else if (a === '--in-netns') o.inNetns = true;
        else if (a === '--list') o.list = true;
        else throw new Error(`unknown argument ${a} (see the head of run.mjs)`);
    }
    if (!o.grade && o.backend === 'naive') o.grade = 'none (naive: development only)';
    return o;
}

let opts;
try {
    opts = parseArgs(process.argv.slice(2));
} catch (e) {
    console.error(`run.mjs: ${e.message}`);
    process.exit(2);
}
if (opts.list) {
    for (const c of CLIENTS) console.log(`${c.name}\t${c.what}`);
    process.exit(0);
}

function writeResults(c) {
    if (opts.results) fs.writeFileSync(opts.results, JSON.stringify(c) + '\n');
}
function fatal(msg) {
    console.log(`run.mjs: ${msg}`);
    writeResults({ passed: 0, failed: 1, skipped: 0, failures: [msg], todo: [] });
    console.log('clients: 0 passed, 1 failed, 0 skipped');
    process.exit(1);
}

if (!opts.grade) fatal(`--expect-grade must name the isolation grade expected from backend ${opts.backend}`);
const BIN = process.env.VESTIBULE_BIN && path.resolve(process.env.VESTIBULE_BIN);
if (!BIN) fatal('VESTIBULE_BIN is not set: point it at the vestibule-mcp binary to test');
try { fs.accessSync(BIN, fs.constants.X_OK); } catch { fatal(`VESTIBULE_BIN '${BIN}' is not executable`); }
if (!fs.existsSync(path.join(here, 'node_modules'))) fatal(`no ${here}/node_modules: run \`npm ci\` there first`);

// ---------------------------------------------------------------- the loopback-only netns
if (opts.netns && !opts.inNetns) {
    const ip = ['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip'].find((p) => fs.existsSync(p));
    if (!ip) fatal('ip(8) is not installed (iproute2): it brings up the loopback of the tests\' network namespace');
    const uid = process.getuid(), gid = process.getgid();
    const inner = [process.execPath, fileURLToPath(import.meta.url), ...process.argv.slice(2), '--in-netns'];
    const r = spawnSync('unshare', ['--user', '--map-root-user', '--net', '--', '/bin/sh', '-c',
        `"${ip}" link set lo up && exec unshare --user --map-user=${uid} --map-group=${gid} -- "$@"`, 'sh', ...inner],
    { stdio: 'inherit' });
    if (r.error || r.status === null) fatal(`could not start in a network namespace (unshare): ${r.error?.message || r.signal}; --no-netns runs without one`);
    process.exit(r.status);
}

// ---------------------------------------------------------------- one client
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'vst-clients-'));
fs.chmodSync(scratch, 0o755);

// The caller's session, as a user's terminal would hand it to the client.
const SESSION_VARS = ['PATH', 'USER', 'LOGNAME', 'LANG', 'LC_ALL', 'SHELL', 'XDG_RUNTIME_DIR', 'DBUS_SESSION_BUS_ADDRESS', 'TMPDIR'];

async function runClient(client) {
    const dir = path.join(scratch, client.name);
    const home = path.join(dir, 'home'), project = path.join(dir, 'project'), ws = path.join(dir, 'workspace');
    for (const d of [home, project, ws]) fs.mkdirSync(d, { recursive: true, mode: 0o700 });
    const logPath = path.join(dir, 'api.log');
    const api = await startModelApi({ script: SCRIPT, log: (l) => fs.appendFileSync(logPath, `${l}\n`) });
    // The env block of the MCP config: what a user writes there.
    const serverEnv = {
        VESTIBULE_BACKEND: opts.backend,
        VESTIBULE_WORKSPACE: ws,
        VESTIBULE_AUDIT_DIR: path.join(dir, 'audit'),
        VESTIBULE_MAX_OUTPUT_BYTES: String(OUTPUT_CAP),
        ...(opts.rootfs ? { VESTIBULE_ROOTFS_DIR: opts.rootfs } : {}),
    };
    const env = { HOME: home, TERM: 'dumb' };
    for (const k of SESSION_VARS) if (process.env[k] !== undefined) env[k] = process.env[k];
    const ctx = {
        dir, home, project, ws, api, bin: BIN, serverEnv, env, prompt: PROMPT, here,
        modules: path.join(here, 'node_modules'),
        timeoutMs: opts.timeout * 1000,
        // Every command of this client shares its one deadline (--timeout), so a hanging CLI
        // costs at most that and the next client still runs.
        exec: (cmd, args, extra = {}) => execBounded(cmd, args, {
            cwd: project, env: { ...env, ...(extra.env || {}) },
            timeoutMs: Math.max(1000, Math.min(extra.timeoutMs ?? Infinity, deadline - Date.now())),
            logTo: path.join(dir, `exec-${++execs}-${path.basename(cmd)}.log`), input: extra.input, groups,
        }),
    };
    let execs = 0;
    const groups = [];
    const t0 = Date.now(), deadline = t0 + opts.timeout * 1000 * (client.timeoutScale ?? 1);
    let out, error;
    const spy = watchServerEnv(ws);
    try {
        out = await client.run(ctx);
    } catch (e) {
        error = e;
    } finally {
        clearInterval(spy.timer);
    }
    // The client is done: every server it started must be gone soon after (a client ends
    // stdin, then signals; the server must not linger or leave processes).
    let left = spy.scan();
    for (let i = 0; i < 50 && left.length; i++) {
        await new Promise((r) => setTimeout(r, 100));
        left = spy.scan();
    }
    const leftovers = left.length ? [`${left.length} server process(es) still running 5 s after ${client.name} was done (pids ${left.join(', ')})`] : [];
    for (const pid of left) try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
    for (const g of groups) try { process.kill(-g, 'SIGKILL'); } catch { /* gone */ }
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    fs.writeFileSync(path.join(dir, 'requests.json'), JSON.stringify(api.requests, null, 1));
    await api.close();
    // What the model saw per step: from the API log (CLIs) or from the driver (libraries).
    const seen = out?.seen ?? api.results.map((r) => r.seen);
    const views = SCRIPT.map((_, i) => (seen[i] === undefined ? undefined : modelText(seen[i])));
    fs.writeFileSync(path.join(dir, 'model-saw.json'), JSON.stringify(views, null, 1));
    const fails = [];
    if (error) fails.push(`${client.name}: ${error.message}`);
    fails.push(...leftovers);
    if (out?.extraFailures) fails.push(...out.extraFailures);
    if (!out?.skipViews) fails.push(...checkViews(views, opts.grade, { sessions: !client.noSessions }));
    // issue 15: the plot's PNG reached the model as an image block of its API (not as text);
    // required of the clients known to pass images on (client.images), reported for the rest
    const image = seen[IMAGE_STEP] !== undefined && imageReached(seen[IMAGE_STEP]);
    if (client.images && !out?.skipViews && !image) fails.push(`${SCRIPT[IMAGE_STEP].label}: the PNG did not reach the model as an image`);
    return { client, secs, fails, views, image, note: out?.note, shape: out?.shape, serverEnv: [...spy.names].sort() };
}

// The names of the variables the client started the server with (read from /proc while it
// runs: a server of this client's is one whose environment names this client's workspace).
function watchServerEnv(ws) {
    const names = new Set();
    const mark = `VESTIBULE_WORKSPACE=${ws}`;
    // returns the pids of this client's servers alive now
    const scan = () => {
        const alive = [];
        for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
            try {
                const env = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
                if (!env.includes(mark) || !fs.readlinkSync(`/proc/${pid}/exe`).startsWith(BIN)) continue;
                if (/^\S+ \([^)]*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))) continue; // a zombie
                alive.push(pid);
                for (const kv of env) if (kv) names.add(kv.slice(0, kv.indexOf('=')));
            } catch { /* gone, or not ours */ }
        }
        return alive;
    };
    return { names, scan, timer: setInterval(scan, 150) };
}

/** Run a command with a hard timeout (SIGTERM, then SIGKILL to its process group). */
function execBounded(cmd, args, { cwd, env, timeoutMs, logTo, input, groups }) {
    return new Promise((resolve) => {
        const p = spawn(cmd, args, { cwd, env, detached: true, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
        let stdout = '', stderr = '', timedOut = false;
        p.stdout.on('data', (d) => { stdout += d; });
        p.stderr.on('data', (d) => { stderr += d; });
        if (input !== undefined) p.stdin.end(input);
        const kill = (sig) => { try { process.kill(-p.pid, sig); } catch { /* gone */ } };
        const timer = setTimeout(() => { timedOut = true; kill('SIGTERM'); setTimeout(() => kill('SIGKILL'), 3000).unref(); }, timeoutMs);
        p.on('error', (e) => { stderr += String(e); });
        p.on('close', (code, signal) => {
            clearTimeout(timer);
            groups.push(p.pid); // killed after the leftover check (runClient)
            fs.writeFileSync(logTo, `$ ${cmd} ${args.join(' ')}\nexit ${code ?? signal}${timedOut ? ' (timed out)' : ''}\n--- stdout\n${stdout}\n--- stderr\n${stderr}\n`);
            resolve({ code, signal, stdout, stderr, timedOut });
        });
    });
}

// ---------------------------------------------------------------- all of them
const chosen = opts.only ? CLIENTS.filter((c) => opts.only.includes(c.name)) : CLIENTS.filter((c) => opts.controls || !c.control);
const unknown = (opts.only || []).filter((n) => !CLIENTS.some((c) => c.name === n));
if (unknown.length) fatal(`unknown client(s) ${unknown.join(', ')}; --list names them`);

console.log(`clients: backend ${opts.backend}, expecting "isolation: ${opts.grade}", server ${BIN}${opts.inNetns ? ', loopback-only network namespace' : ''}`);
const rows = [];
const counts = { passed: 0, failed: 0, skipped: 0, failures: [], todo: [] };
for (const c of chosen) {
    const r = await runClient(c);
    rows.push(r);
    if (r.fails.length === 0) {
        counts.passed++;
        console.log(`PASS ${c.name} (${r.secs} s)`);
    } else {
        counts.failed++;
        counts.failures.push(`${c.name}: ${r.fails[0]}${r.fails.length > 1 ? ` (+${r.fails.length - 1} more)` : ''}`);
        console.log(`FAIL ${c.name} (${r.secs} s)\n${r.fails.map((f) => `       ${f}`).join('\n')}`);
    }
}

console.log('\nwhat each model saw (per step; the facts checked are in facts.mjs):');
for (const r of rows) {
    if (r.client.control) { console.log(`  ${r.client.name} (control): ${r.shape}`); continue; }
    console.log(`  ${r.client.name}: ${r.shape || ''}${r.note ? ` ${r.note}` : ''}`);
    console.log(`    the server's environment: ${r.serverEnv.filter((n) => !n.startsWith('VESTIBULE_')).join(' ') || '(not seen)'} + the config's VESTIBULE_*`);
    r.views.forEach((v, i) => console.log(`    ${SCRIPT[i].label}: ${summarize(v)}`));
    console.log(`    the plot reached the model as an image: ${r.image ? 'yes' : 'no'}`);
}
if (opts.keep) console.log(`\nscratch kept: ${scratch}`);
else fs.rmSync(scratch, { recursive: true, force: true, maxRetries: 3 });
writeResults(counts);
console.log(`\nclients: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
process.exit(counts.failed === 0 && counts.passed > 0 ? 0 : 1);
