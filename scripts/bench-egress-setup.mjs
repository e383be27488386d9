#!/usr/bin/env node
// bench-egress-setup.mjs - the network allowlist's set-up cost per call (issue 23 item 8): the
// same `print(1)` through run_code with network "none" and with "allowlist", interleaved
// (none, allowlist, none, ...) so a change of load hits both alike; p50 and p90 of each, timed
// at the client from the request's first byte to the response's last, and their difference.
//
// usage: node scripts/bench-egress-setup.mjs BIN [RUNS=9]
// The server gets this process's environment as a user's client would give it (DOCKER_HOST,
// VESTIBULE_*): e.g. DOCKER_HOST=unix:///run/vestibule-desktop/docker.sock for the Docker
// Desktop stand-in (scripts/desktop-standin.sh). VESTIBULE_EGRESS_ALLOW is set to a name that
// is never asked for; the code makes no connection (the cost measured is the set-up: proxy,
// relay or bridge, the wait for it). Warm spares are off (VESTIBULE_WARM=0) so both sides
// build their own sandbox. A plain JSON-RPC-over-stdio driver, as scripts/bench.mjs.
import { spawn } from 'node:child_process';
import readline from 'node:readline';

const bin = process.argv[2];
const runs = Number(process.argv[3] || 9);
if (!bin) {
    console.error('usage: node scripts/bench-egress-setup.mjs BIN [RUNS]');
    process.exit(2);
}
const env = { ...process.env, VESTIBULE_EGRESS_ALLOW: 'never-asked.vestibule.test', VESTIBULE_WARM: '0' };
const srv = spawn(bin, [], { env, stdio: ['pipe', 'pipe', 'inherit'] });
const waiting = new Map();
readline.createInterface({ input: srv.stdout }).on('line', (l) => {
    const m = JSON.parse(l);
    const w = waiting.get(m.id);
    if (w) { waiting.delete(m.id); w(m); }
});
let next = 1;
function rpc(method, params, timeoutMs = 60000) {
    const id = next++;
    return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`${method}: no answer in ${timeoutMs} ms`)), timeoutMs);
        waiting.set(id, (m) => { clearTimeout(t); resolve(m); });
        srv.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
}
async function call(network) {
    const t0 = process.hrtime.bigint();
    const m = await rpc('tools/call', { name: 'run_code', arguments: { language: 'python', code: 'print(1)', network, timeout_seconds: 30 } });
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    const text = (m.result?.content || []).map((c) => c.text).join('\n');
    if (m.error || m.result?.isError || !/^1$/m.test(text)) throw new Error(`${network}: ${JSON.stringify(m).slice(0, 600)}`);
    return ms;
}
const q = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
try {
    await rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench-egress-setup', version: '1' } });
    srv.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
    await call('none');
    await call('allowlist'); // warm-up: images, the engine's caches
    const t = { none: [], allowlist: [] };
    for (let i = 0; i < runs; i++)
        for (const n of ['none', 'allowlist']) t[n].push(await call(n));
    for (const n of ['none', 'allowlist'])
        console.log(`${n.padEnd(9)} p50 ${q(t[n], 0.5).toFixed(0)} ms  p90 ${q(t[n], 0.9).toFixed(0)} ms  (${runs} runs: ${t[n].map((x) => x.toFixed(0)).join(' ')})`);
    console.log(`allowlist set-up cost per call: p50 ${(q(t.allowlist, 0.5) - q(t.none, 0.5)).toFixed(0)} ms`);
} finally {
    srv.stdin.end();
    srv.kill();
}
