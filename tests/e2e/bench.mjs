#!/usr/bin/env node
// bench.mjs - issue 2's first benchmark: sequential run_code python `print(1)` calls through
// the MCP server (official v2 client over stdio) after a warm-up, timed at the client, with
// p50 and p95; and the bare interpreter (`python3 -c 'print(1)'`) measured the same way in
// the same run as the baseline. Prints a table and writes a JSON file.
//
// Usage: VESTIBULE_BIN=... node bench.mjs [--runs N] [--warmup N] [--out FILE]
// The server gets this environment's VESTIBULE_* settings (VESTIBULE_BACKEND picks the
// backend); the workspace and audit folder default to fresh temporary ones.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const { values: opt } = parseArgs({
    options: {
        runs: { type: 'string', default: '50' },
        warmup: { type: 'string', default: '3' },
        out: { type: 'string' },
    },
});
const RUNS = Number(opt.runs), WARMUP = Number(opt.warmup);
const bin = process.env.VESTIBULE_BIN;
if (!bin) throw new Error('set VESTIBULE_BIN to the vestibule-mcp binary');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'vst-bench-'));
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? tmp };
for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('VESTIBULE_') && k !== 'VESTIBULE_BIN') env[k] = v;
    if (['XDG_RUNTIME_DIR', 'DBUS_SESSION_BUS_ADDRESS', 'DOCKER_HOST', 'XDG_CONFIG_HOME', 'LANG'].includes(k)) env[k] = v;
}
env.VESTIBULE_WORKSPACE ??= path.join(tmp, 'ws');
env.VESTIBULE_AUDIT_DIR ??= path.join(tmp, 'audit');
fs.mkdirSync(env.VESTIBULE_WORKSPACE, { recursive: true, mode: 0o700 });

// Nearest-rank percentile of a sorted array.
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
const stats = (ms) => {
    const s = [...ms].sort((a, b) => a - b);
    return { n: s.length, p50_ms: +pct(s, 50).toFixed(1), p95_ms: +pct(s, 95).toFixed(1),
        min_ms: +s[0].toFixed(1), max_ms: +s.at(-1).toFixed(1) };
};

// --- through the server
const transport = new StdioClientTransport({ command: bin, args: [], env, stderr: 'pipe' });
const client = new Client({ name: 'vestibule-bench', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
await client.connect(transport);
let grade = '';
async function once() {
    const t0 = performance.now();
    const r = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: 'print(1)' } });
    const ms = performance.now() - t0;
    const text = r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n').trimEnd();
    const m = /\nisolation: ([^\n]+)$/.exec(text);
    if (r.isError || !m || !/^1$/m.test(text)) {
        throw new Error(`print(1) did not run cleanly, so there is nothing to time:\n${text}`);
    }
    grade = m[1];
    return ms;
}
for (let i = 0; i < WARMUP; i++) await once();
const server = [];
for (let i = 0; i < RUNS; i++) server.push(await once());
const protocol = client.getNegotiatedProtocolVersion();
await client.close();

// --- the bare interpreter, same machine, same moment
// The system interpreter, as the sandbox's minimal PATH finds it (not a version-manager shim).
const python = process.env.BENCH_PYTHON || (fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
function bare() {
    const t0 = performance.now();
    const r = spawnSync(python, ['-c', 'print(1)'], { encoding: 'utf8' });
    const ms = performance.now() - t0;
    if (r.status !== 0 || r.stdout.trim() !== '1') throw new Error(`${python} -c 'print(1)' failed: ${r.stderr}`);
    return ms;
}
for (let i = 0; i < WARMUP; i++) bare();
const baseline = [];
for (let i = 0; i < RUNS; i++) baseline.push(bare());

const s = stats(server), b = stats(baseline);
const loadavg = os.loadavg().map((x) => +x.toFixed(2));
const report = {
    what: 'run_code python print(1) through vestibule-mcp over stdio, sequential, timed at the MCP client',
    date: new Date().toISOString(),
    commit: process.env.BENCH_COMMIT || null,
    backend: env.VESTIBULE_BACKEND || 'auto',
    isolation: grade,
    protocol,
    warmup: WARMUP,
    server: s,
    bare_interpreter: { command: `${python} -c 'print(1)'`, ...b },
    ratio_p50: +(s.p50_ms / b.p50_ms).toFixed(2),
    ratio_p95: +(s.p95_ms / b.p95_ms).toFixed(2),
    host: { cpus: os.cpus().length, loadavg_after: loadavg, kernel: os.release(), node: process.version, user_id: process.getuid() },
    samples_ms: { server: server.map((x) => +x.toFixed(2)), bare_interpreter: baseline.map((x) => +x.toFixed(2)) },
};
const out = opt.out || `bench-${report.backend}-${report.date.replace(/[:.]/g, '-')}.json`;
fs.writeFileSync(out, JSON.stringify(report, null, 2) + '\n');
fs.rmSync(tmp, { recursive: true, force: true });

console.log(`backend ${report.backend}, isolation: ${grade}; ${RUNS} runs after ${WARMUP} warm-up`);
const row = (label, a, b2, unit) => console.log(`${label.padEnd(30)}${String(a).padStart(9)} ${unit}${String(b2).padStart(9)} ${unit}`);
console.log(`${''.padEnd(30)}${'p50'.padStart(12)}${'p95'.padStart(12)}`);
row('through the server', s.p50_ms, s.p95_ms, 'ms');
row(`bare ${python} -c`, b.p50_ms, b.p95_ms, 'ms');
row('ratio', report.ratio_p50, report.ratio_p95, 'x ');
console.log(`written: ${out}`);
