#!/usr/bin/env node
// scope-timing.mjs - how long the native backend takes to put one run into its systemd scope,
// per run, through one long-lived server: starts BIN with VESTIBULE_TRACE=timing and
// VESTIBULE_BACKEND=native, sends N sequential run_code calls (python print(1)) over stdio
// (newline-delimited JSON-RPC, legacy initialize), and reads the trace lines' phase=scope
// (StartTransientUnit on the user bus until the sandbox is in the scope's cgroup; for a warm
// spare, off the request path) and phase=total from its stderr. Used in the VM to compare two builds in the same boot.
//
// Usage: node scope-timing.mjs BIN [N=20] [LABEL]
// Prints: "scope-timing LABEL: N runs, scope p50 X ms p95 Y ms min .. max .., total p50 .. ms,
// first run's scope X ms" and exits 0, or 1 when a run failed or no scope phase was traced.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const [bin, nArg, label = path.basename(path.dirname(process.argv[2] || '.'))] = process.argv.slice(2);
const n = Number(nArg || 20);
if (!bin || !(n >= 1 && n <= 500)) {
    console.error('usage: node scope-timing.mjs BIN [N=20] [LABEL]');
    process.exit(2);
}
const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'vst-scope-timing-'));
// The environment an MCP client using the SDK gives (HOME, LOGNAME, PATH, SHELL, TERM, USER)
// plus the settings: the server finds the user bus itself.
const sdkDefault = Object.fromEntries(['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER']
    .filter((k) => process.env[k] !== undefined).map((k) => [k, process.env[k]]));
const settings = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('VESTIBULE_')));
const srv = spawn(bin, [], {
    env: {
        ...sdkDefault, ...settings, VESTIBULE_BACKEND: 'native', VESTIBULE_TRACE: 'timing',
        VESTIBULE_WORKSPACE: path.join(ws, 'ws'), VESTIBULE_AUDIT_DIR: path.join(ws, 'audit'),
    },
    stdio: ['pipe', 'pipe', 'pipe'],
});
let err = '';
srv.stderr.on('data', (d) => { err += d; });
let buf = '';
const waiting = new Map();
srv.stdout.on('data', (d) => {
    buf += d;
    for (let i; (i = buf.indexOf('\n')) >= 0;) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        let m;
        try { m = JSON.parse(line); } catch { continue; }
        if (m.id !== undefined && waiting.has(m.id)) { waiting.get(m.id)(m); waiting.delete(m.id); }
    }
});
let nextId = 1;
function call(method, params, ms = 300_000) {
    const id = nextId++;
    srv.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`${method}: no answer in ${ms} ms`)), ms);
        waiting.set(id, (m) => { clearTimeout(t); resolve(m); });
    });
}
const pct = (a, p) => a[Math.min(a.length - 1, Math.floor((a.length - 1) * p + 0.5))];
let rc = 1;
try {
    fs.mkdirSync(path.join(ws, 'ws'));
    await call('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'scope-timing', version: '0' } });
    srv.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
    for (let i = 0; i < n; i++) {
        const r = await call('tools/call', { name: 'run_code', arguments: { language: 'python', code: 'print(1)' } });
        const text = (r.result?.content ?? []).map((c) => c.text).join('\n');
        if (r.error || r.result?.isError || !/^isolation: native$/m.test(text))
            throw new Error(`run ${i + 1} did not run under grade native:\n${JSON.stringify(r)}`);
    }
    // backend "native": a sandbox the call built; "native-spare": one built ahead (a warm
    // spare, docs/design/lifecycle.md), whose scope is made before its call comes. Every run
    // is in a scope of its own: at least n (the spare built after the last call may be too).
    const phase = (name, which = 'native(?:-spare)?') => [...err.matchAll(new RegExp(`trace run=\\d+ backend=${which} phase=${name} us=(\\d+)`, 'g'))]
        .map((m) => Number(m[1]) / 1000);
    const scope = phase('scope');
    const total = phase('total', 'native');
    if (scope.length < n) throw new Error(`${scope.length} scope phases traced for ${n} runs:\n${err.slice(-2000)}`);
    const s = [...scope].sort((a, b) => a - b);
    const t = [...total].sort((a, b) => a - b);
    const f = (x) => x.toFixed(1);
    console.log(`scope-timing ${label}: ${n} runs, scope p50 ${f(pct(s, 0.5))} ms p95 ${f(pct(s, 0.95))} ms ` +
        `min ${f(s[0])} max ${f(s.at(-1))}, first run's scope ${f(scope[0])} ms, ` +
        `mean of the others ${f(scope.slice(1).reduce((a, b) => a + b, 0) / Math.max(1, n - 1))} ms; ` +
        `total p50 ${f(pct(t, 0.5))} ms`);
    rc = 0;
} catch (e) {
    console.log(`scope-timing ${label}: FAILED: ${e.message}`);
} finally {
    srv.stdin.end();
    await new Promise((r) => { const t = setTimeout(() => { srv.kill('SIGKILL'); r(); }, 20_000); srv.on('exit', () => { clearTimeout(t); r(); }); });
    fs.rmSync(ws, { recursive: true, force: true });
}
process.exit(rc);
