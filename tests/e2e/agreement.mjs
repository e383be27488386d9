#!/usr/bin/env node
// agreement.mjs - the three answers to "how isolated is a run here?" must be one answer.
// With the same settings (VESTIBULE_BACKEND=auto unless E2E_BACKEND says otherwise), ask:
//   1. `vestibule-mcp doctor --json`: the grade auto would pick (pick.grade), or its Blocked text;
//   2. `vestibule-mcp verify --json`: the grade the leak battery ran under, with every probe
//      that grade claims held (summary.not_held 0, ok true), or the Blocked text it stopped at;
//   3. a real run_code (python print) through the server, driven by the official MCP SDK
//      client: the result's last line "isolation: GRADE", or its "Blocked: ..." error text.
// They agree when all three name the same grade (string for string), or all three are Blocked
// with the same text. --expect-grade / --expect-blocked pin what the agreed answer must be, so
// a host where all three are wrong the same way still fails.
//
// Usage: node agreement.mjs [--expect-grade GRADE] [--expect-blocked WORDS]... [--must-hold TITLE]...
//   --expect-grade GRADE     the agreed grade must be exactly GRADE (e.g. native)
//   --expect-blocked WORDS   the agreed answer must be Blocked and name WORDS (repeatable)
//   --must-hold TITLE        verify's probe TITLE must be "held", not "not applicable"
//                            (repeatable; e.g. the limits a full grade claims)
// Environment: VESTIBULE_BIN (required), E2E_BACKEND (default auto), and the variables lib.mjs
// hands to the server (the SDK default environment, VESTIBULE_ROOTFS_DIR, DOCKER_HOST, ...).
// Output: each answer, then "agreement: ok (...)" or "agreement: FAILED: ..." lines.
// Exit status: 0 agree (and match the expectation), 1 not, 2 usage.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

let expectGrade = null;
const expectBlocked = [];
const mustHold = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--expect-grade' && i + 1 < argv.length) expectGrade = argv[++i];
    else if (argv[i] === '--expect-blocked' && i + 1 < argv.length) expectBlocked.push(argv[++i]);
    else if (argv[i] === '--must-hold' && i + 1 < argv.length) mustHold.push(argv[++i]);
    else {
        console.error('usage: node agreement.mjs [--expect-grade GRADE] [--expect-blocked WORDS]... [--must-hold TITLE]...');
        process.exit(2);
    }
}

// lib.mjs wants the backend and a grade before it loads; the grade here is measured, not assumed.
process.env.E2E_BACKEND ||= 'auto';
process.env.E2E_EXPECT_GRADE ||= expectGrade ?? '(measured by agreement.mjs)';
const { BIN, BACKEND, connect, makeWorld, runCode } = await import('./lib.mjs');

const problems = [];
const world = makeWorld(undefined);

/** Run a CLI subcommand with the world's environment; its stdout parsed as JSON. */
function cli(args) {
    const r = spawnSync(BIN, args, {
        env: world.env, cwd: world.root, encoding: 'utf8', timeout: 900_000,
        maxBuffer: 16 << 20,
    });
    let json = null;
    try { json = JSON.parse(r.stdout); } catch { /* reported below */ }
    if (!json) problems.push(`'${path.basename(BIN)} ${args.join(' ')}' printed no JSON (status ${r.status ?? r.signal}): ${r.stdout}${r.stderr}`);
    return { status: r.status, json, stderr: r.stderr };
}

// An answer is { grade } or { blocked }.
function show(name, a) {
    console.log(`${name}: ${a.grade !== undefined ? `grade '${a.grade}'` : `Blocked: ${a.blocked}`}`);
}

let code = 1;
try {
    // 1. doctor
    const d = cli(['doctor', '--json']);
    const pick = d.json?.pick ?? {};
    const doctor = pick.usable ? { grade: pick.grade } : { blocked: pick.blocked ?? '(no pick in doctor --json)' };
    show(`doctor (auto would pick ${pick.backend ?? 'nothing'})`, doctor);

    // 2. verify
    const v = cli(['verify', '--json']);
    const run = v.json?.runs?.[0] ?? {};
    const verify = run.ran ? { grade: run.grade } : { blocked: run.blocked ?? '(no run in verify --json)' };
    show(`verify (backend ${run.backend ?? '?'}, exit ${v.status})`, verify);
    if (run.ran) {
        const s = run.summary ?? {};
        console.log(`verify: ${s.held} held, ${s.not_held} NOT HELD, ${s.not_applicable} not applicable, ${s.not_tested} not tested`);
        for (const p of run.probes ?? []) if (p.verdict !== 'held') console.log(`  ${p.verdict}: ${p.title}: ${p.detail}`);
        if (s.not_held !== 0 || v.json.ok !== true || v.status !== 0)
            problems.push(`verify: a probe the grade '${run.grade}' claims did not hold (ok ${v.json.ok}, exit ${v.status})`);
    }
    for (const title of mustHold) {
        const p = (run.probes ?? []).find((x) => x.title === title);
        if (!p || p.verdict !== 'held') problems.push(`verify: '${title}' must be held, got ${p ? p.verdict : 'no such probe'}`);
    }

    // 3. a real run through the server, with the official SDK client
    const conn = await connect(world);
    const { result, text } = await runCode(conn, 'python', 'print(1)', { timeout_seconds: 60 });
    await conn.close();
    let server;
    if (result.isError) {
        server = { blocked: text.replace(/^Blocked: /, '') };
        if (!text.startsWith('Blocked: ')) problems.push(`run_code failed without a Blocked: text:\n${text}`);
    } else {
        const last = text.trimEnd().split('\n').at(-1);
        server = { grade: last.startsWith('isolation: ') ? last.slice('isolation: '.length) : `(no isolation line: ${last})` };
        if (!/^1$/m.test(text)) problems.push(`run_code did not print 1:\n${text}`);
    }
    show(`run_code through the server (VESTIBULE_BACKEND=${BACKEND})`, server);

    // Agreement: the same kind of answer and the same string, three times.
    const answers = { doctor, verify, run_code: server };
    const key = (a) => (a.grade !== undefined ? `grade ${a.grade}` : `Blocked: ${a.blocked}`);
    const distinct = new Set(Object.values(answers).map(key));
    if (distinct.size !== 1)
        problems.push(`the three answers differ:\n${Object.entries(answers).map(([k, a]) => `  ${k}: ${key(a)}`).join('\n')}`);
    if (expectGrade !== null && Object.values(answers).some((a) => a.grade !== expectGrade))
        problems.push(`expected every answer to be grade '${expectGrade}'`);
    for (const w of expectBlocked)
        for (const [k, a] of Object.entries(answers))
            if (a.blocked === undefined || !a.blocked.includes(w)) problems.push(`${k}: expected Blocked naming '${w}'`);
    if (problems.length === 0) {
        console.log(`agreement: ok (${key(doctor)}, the same from doctor, verify and run_code)`);
        code = 0;
    }
} catch (e) {
    problems.push(`agreement check crashed: ${e.stack ?? e}`);
} finally {
    for (const p of problems) console.log(`agreement: FAILED: ${p}`);
    for (const c of world.clients) await c.close().catch(() => {});
    fs.rmSync(world.root, { recursive: true, force: true, maxRetries: 3 });
}
process.exit(code);
