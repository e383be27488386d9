#!/usr/bin/env node
// bench-run-cmd.mjs - `scripts/bench --run-cmd`: the overhead of `vestibule-mcp run -- true`
// (issue 27) against the peers a user would pick for the same job, measured in the same run,
// interleaved round by round (a change of load hits every case alike), as one unprivileged user:
//   ours          vestibule-mcp run -q -- true            (the host view, secrets masked, no network)
//   ours-overlay  vestibule-mcp run -q --overlay -- true  (the project read-only under a layer)
//   bwrap         bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc true
//   srt           srt true  (Anthropic's sandbox runtime, @anthropic-ai/sandbox-runtime from npm:
//                 bubblewrap plus its own proxies; needs ripgrep and socat)
// Each sample is the wall time of one process from spawn to exit, exit status 0 required. Prints
// p50 and p95 per case and the ratios ours / bwrap and ours / srt (p50), and writes every sample
// to --out as JSON.
// Usage: node scripts/bench-run-cmd.mjs --bin PATH [--srt PATH] [--runs N] [--warmup N]
//        [--user NAME] [--out FILE]
// --srt: the srt launcher (node_modules/.bin/srt of `npm install @anthropic-ai/sandbox-runtime`);
// default: srt on PATH; without one the case is skipped and the reason printed. As root, every
// case runs as --user (default vestibule-test) through setpriv, with that user's HOME.
// Sources: bwrap(1); https://github.com/anthropic-experimental/sandbox-runtime (srt's README).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
    options: {
        bin: { type: 'string' }, srt: { type: 'string' }, runs: { type: 'string', default: '20' },
        warmup: { type: 'string', default: '3' }, user: { type: 'string', default: 'vestibule-test' },
        out: { type: 'string' },
    },
});
const RUNS = Number(opt.runs), WARMUP = Number(opt.warmup);
if (!opt.bin) throw new Error('bench-run-cmd: pass --bin (scripts/bench does)');
if (!(RUNS >= 1 && RUNS <= 1000 && WARMUP >= 0 && WARMUP <= 100)) throw new Error('bench-run-cmd: --runs 1..1000, --warmup 0..100');

const isRoot = process.getuid() === 0;
const idOf = (flag) => spawnSync('id', [flag, opt.user], { encoding: 'utf8' });
if (isRoot && idOf('-u').status !== 0) throw new Error(`bench-run-cmd: no user '${opt.user}' (scripts/ci-user.sh creates vestibule-test)`);
const UID = isRoot ? Number(idOf('-u').stdout) : process.getuid();
const GID = isRoot ? Number(idOf('-g').stdout) : process.getgid();
const HOME = isRoot ? spawnSync('getent', ['passwd', opt.user], { encoding: 'utf8' }).stdout.split(':')[5] : os.homedir();
const asUser = (argv) => (isRoot ? ['setpriv', `--reuid=${UID}`, `--regid=${GID}`, '--init-groups', '--', ...argv] : argv);
const onPath = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).stdout.trim();

// A project folder the user owns, as `run --` would be started from it.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'vst-bench-runcmd-'));
fs.chmodSync(tmp, 0o755);
const project = path.join(tmp, 'project');
fs.mkdirSync(project);
fs.writeFileSync(path.join(project, 'README'), 'a project\n');
if (isRoot) { fs.chownSync(project, UID, GID); fs.chownSync(path.join(project, 'README'), UID, GID); }
const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME, USER: opt.user, LANG: 'C.UTF-8' };

const cases = [];
const skipped = {};
cases.push({ key: 'ours', argv: [opt.bin, 'run', '-q', '--', 'true'] });
cases.push({ key: 'ours-overlay', argv: [opt.bin, 'run', '-q', '--overlay', '--', 'true'] });
if (onPath('bwrap')) cases.push({ key: 'bwrap', argv: ['bwrap', '--unshare-all', '--die-with-parent', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', 'true'] });
else skipped.bwrap = 'bwrap not installed (apt-get install bubblewrap)';
const srt = opt.srt || onPath('srt');
if (srt) cases.push({ key: 'srt', argv: [srt, 'true'] });
else skipped.srt = 'no srt: npm install @anthropic-ai/sandbox-runtime, then --srt node_modules/.bin/srt (it needs apt-get install ripgrep socat)';

/** One process from spawn to exit: its wall time in ms, or an Error naming how it failed. */
function once(argv) {
    return new Promise((resolve) => {
        const t0 = process.hrtime.bigint();
        const [cmd, ...args] = asUser(argv);
        const p = spawn(cmd, args, { cwd: project, env, stdio: ['ignore', 'ignore', 'pipe'] });
        let err = '';
        p.stderr.on('data', (d) => { if (err.length < 4096) err += d; });
        const timer = setTimeout(() => p.kill('SIGKILL'), 60_000);
        p.on('close', (code, sig) => {
            clearTimeout(timer);
            const ms = Number(process.hrtime.bigint() - t0) / 1e6;
            resolve(code === 0 ? ms : new Error(`exit ${code ?? sig}: ${err.trim().split('\n').slice(-2).join(' | ')}`));
        });
    });
}

const pct = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
const samples = Object.fromEntries(cases.map((c) => [c.key, []]));
let live = cases;
for (let round = 0; round < WARMUP + RUNS; round++) {
    for (const c of live) {
        const r = await once(c.argv);
        if (r instanceof Error) { skipped[c.key] = `failed: ${r.message}`; continue; }
        if (round >= WARMUP) samples[c.key].push(r);
    }
    live = live.filter((c) => !skipped[c.key]);
}
fs.rmSync(tmp, { recursive: true, force: true });

const p50 = {};
console.log(`run -- true, ${RUNS} rounds after ${WARMUP} warm-up, as ${opt.user}, load ${os.loadavg()[0].toFixed(1)}`);
console.log('case           p50 ms   p95 ms');
for (const c of cases) {
    if (skipped[c.key]) { console.log(`${c.key.padEnd(14)} skipped: ${skipped[c.key]}`); continue; }
    p50[c.key] = pct(samples[c.key], 0.5);
    console.log(`${c.key.padEnd(14)} ${p50[c.key].toFixed(1).padStart(6)}   ${pct(samples[c.key], 0.95).toFixed(1).padStart(6)}`);
}
for (const peer of ['bwrap', 'srt']) if (p50.ours && p50[peer]) console.log(`ours / ${peer} (p50): ${(p50.ours / p50[peer]).toFixed(2)}`);
const out = opt.out || `bench-run-cmd-${new Date().toISOString().replace(/[:.]/g, '-')}.json`;
fs.writeFileSync(out, JSON.stringify({ runs: RUNS, warmup: WARMUP, user: opt.user, load: os.loadavg(), samples, skipped }, null, 1));
console.log(`samples: ${out}`);
