#!/usr/bin/env node
// bench-setups.mjs - `scripts/bench --setups`: print(1) per local engine set-up (issue 23 item
// 8), each server started the way that user starts it: the docker-group user on rootful Docker
// (no RUN_AS), a root server with VESTIBULE_RUN_AS on rootful Podman, the test user's rootless
// Podman, and rootless Docker's own user (scripts/rootless-docker.sh start first). For each, in
// the same run and interleaved round by round (a change of load hits every set-up alike):
//   cold     run_code print(1) with VESTIBULE_WARM=0 (every sandbox made within its call)
//   warm     run_code print(1) from a warm spare (the default; the spare refilled between calls)
//   cell     print(1) as an in-session cell (session_start once, then cells)
//   allow    run_code print(1) with network "allowlist" (its own sandbox and proxy), minus cold:
//            the allowlist's set-up cost
//   docker   `docker run --rm --network none IMAGE python3 -c 'print(1)'` on the same engine as
//            the same user (`podman --remote --url` for Podman, through the same socket)
// and the ratio warm / docker (target <= 0.2). p50 of --runs rounds after --warmup.
// Usage: node scripts/bench-setups.mjs --bin PATH [--runs N] [--warmup N] [--out FILE]
//        [--setups docker-group,podman-rootful,podman-rootless,docker-rootless,desktop]
//        [--desktop-host unix://...] (the stand-in's socket; default /run/vestibule-desktop/docker.sock)
// Run as root (it starts each server as its user). Source: the MCP spec's tools/call
// (https://modelcontextprotocol.io/specification/2025-06-18/server/tools), docker-run(1).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
    options: {
        bin: { type: 'string' }, runs: { type: 'string', default: '15' }, warmup: { type: 'string', default: '2' },
        out: { type: 'string' }, setups: { type: 'string' }, 'desktop-host': { type: 'string' },
    },
});
if (process.getuid() !== 0) throw new Error('bench-setups: run as root (it starts each server as its user)');
const RUNS = Number(opt.runs), WARMUP = Number(opt.warmup);
const IMG = 'vestibule/python:bookworm', IMG_NODE = 'vestibule/node:bookworm';
const uidOf = (u) => spawnSync('id', ['-u', u], { encoding: 'utf8' }).stdout.trim();
const PATHS = '/usr/local/bin:/usr/bin:/bin';
const common = { VESTIBULE_IMAGE_PYTHON: IMG, VESTIBULE_IMAGE_NODE: IMG_NODE, VESTIBULE_IMAGE_SOURCE: 'debian', VESTIBULE_BACKEND: 'container', VESTIBULE_EGRESS_ALLOW: 'localhost' };
const tu = uidOf('vestibule-test'), rl = uidOf('vestibule-rl');
const SETUPS = {
    'docker-group': { user: 'vestibule-dg', host: 'unix:///var/run/docker.sock', env: {} },
    'podman-rootful': { user: 'root', host: 'unix:///run/podman/podman.sock', env: { VESTIBULE_RUN_AS: `${tu}:${tu}`, VESTIBULE_RUNTIME: 'podman' }, cliUser: 'root', podman: true },
    'podman-rootless': { user: 'vestibule-test', host: `unix:///run/user/${tu}/podman/podman.sock`, env: {}, dockerHost: true, podman: true },
    'docker-rootless': { user: 'vestibule-rl', host: `unix:///run/user/${rl}/docker.sock`, env: {}, dockerHost: true },
    // the Docker Desktop stand-in (scripts/desktop-standin.sh start first): the volume path, the
    // test user with only DOCKER_HOST; its sessions ride the attach connection (cells_attach.c)
    desktop: { user: 'vestibule-test', host: opt['desktop-host'] || 'unix:///run/vestibule-desktop/docker.sock', env: {}, dockerHost: true },
};
const names = opt.setups ? opt.setups.split(',') : Object.keys(SETUPS).filter((n) => n !== 'desktop');

// the server as its user: env -i with a login's variables and the client config's settings
function serverArgv(s, extra, home, tmp) {
    const env = { PATH: PATHS, HOME: home, USER: s.user, LOGNAME: s.user, TMPDIR: tmp, LANG: 'C.UTF-8', ...common, ...s.env, ...extra };
    if (s.dockerHost) env.DOCKER_HOST = s.host;
    const kv = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    return ['runuser', '-u', s.user, '--', 'env', '-i', ...kv, opt.bin];
}

class Server {
    constructor(argv) {
        this.child = spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'pipe', 'ignore'] });
        this.pending = new Map(); this.next = 1; this.buf = '';
        this.child.stdout.setEncoding('utf8');
        this.child.stdout.on('data', (d) => {
            this.buf += d;
            let i;
            while ((i = this.buf.indexOf('\n')) >= 0) {
                const line = this.buf.slice(0, i); this.buf = this.buf.slice(i + 1);
                if (!line.trim()) continue;
                const m = JSON.parse(line), p = this.pending.get(m.id);
                if (p) { this.pending.delete(m.id); p(m); }
            }
        });
    }
    req(method, params) {
        const id = this.next++;
        return new Promise((res, rej) => {
            const t = setTimeout(() => rej(new Error(`${method} timed out`)), 120000);
            this.pending.set(id, (m) => { clearTimeout(t); res(m); });
            this.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
        });
    }
    async init() {
        await this.req('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench-setups', version: '1' } });
        this.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
    }
    async call(name, args) {
        const t0 = performance.now();
        const r = await this.req('tools/call', { name, arguments: args });
        const ms = performance.now() - t0;
        const text = (r.result?.content ?? []).map((c) => c.text ?? '').join('\n');
        if (r.error || r.result?.isError) throw new Error(`${name}: ${JSON.stringify(r.error) ?? text.slice(0, 400)}`);
        return { ms, text, sc: r.result?.structuredContent };
    }
    run(extra = {}) { return this.call('run_code', { language: 'python', code: 'print(1)', timeout_seconds: 30, ...extra }); }
    stop() { this.child.stdin.end(); return new Promise((r) => { this.child.on('exit', r); setTimeout(() => { this.child.kill('SIGKILL'); r(); }, 15000); }); }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const p50 = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor((s.length - 1) / 2)] : null; };
const dockerRun = (s) => {
    const t0 = performance.now();
    // the engine's own CLI (the docker CLI's attach fails on Podman's compat API: "unable to
    // upgrade to tcp, received 409"): podman --remote through the rootless service's socket; as
    // root the local podman with scripts/start-engines.sh's flags, as scripts/bench does (the
    // rootful service refuses a remote client's rlimits: "error setting rlimit type 6")
    const cli = !s.podman ? ['docker', '-H', s.host]
        : s.cliUser === 'root' ? ['podman', '--cgroup-manager=cgroupfs', '--events-backend=file', '--runtime', 'runc']
            : ['podman', '--remote', '--url', s.host];
    // our run's rlimits, as scripts/bench's peers (else root's podman, started from node, fails
    // "error setting rlimit type 7: operation not permitted")
    const as = s.cliUser === 'root' ? [] : ['runuser', '-u', s.user, '--'];
    const argv = [...as, 'env', '-i', `PATH=${PATHS}`, `HOME=${os.tmpdir()}`, ...cli, 'run', '--rm', '--network', 'none',
        '--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=4096:4096', IMG, 'python3', '-c', 'print(1)'];
    const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: 120000 });
    if (r.status !== 0 || r.stdout.trim() !== '1') throw new Error(`docker run --rm on ${s.host}: ${r.stderr.slice(0, 300)}`);
    return performance.now() - t0;
};

const st = {};
// the scratch folders go on every exit, a failed call's too (the servers die with their stdin)
process.on('exit', () => { for (const x of Object.values(st)) fs.rmSync(x.tmp, { recursive: true, force: true }); });
for (const n of names) {
    const s = SETUPS[n];
    if (!s) throw new Error(`unknown set-up ${n}`);
    const home = s.user === 'root' ? '/root' : spawnSync('sh', ['-c', `getent passwd ${s.user} | cut -d: -f6`], { encoding: 'utf8' }).stdout.trim();
    const tmp = fs.mkdtempSync('/tmp/vst-bench-setups-');
    fs.chownSync(tmp, Number(uidOf(s.user)), Number(uidOf(s.user)));
    const ws = path.join(tmp, 'ws');
    fs.mkdirSync(ws); fs.chownSync(ws, Number(uidOf(s.user)), Number(uidOf(s.user)));
    const extra = { VESTIBULE_WORKSPACE: ws };
    st[n] = { s, tmp, samples: { cold: [], warm: [], cell: [], allow: [], docker: [] } };
    st[n].warmS = new Server(serverArgv(s, extra, home, tmp));
    st[n].coldS = new Server(serverArgv(s, { ...extra, VESTIBULE_WARM: '0' }, home, tmp));
    await st[n].warmS.init(); await st[n].coldS.init();
    const sess = await st[n].warmS.call('session_start', { language: 'python' });
    st[n].sid = sess.sc?.session;
    if (!st[n].sid) throw new Error(`${n}: session_start gave no session: ${sess.text.slice(0, 300)}`);
    await st[n].warmS.run(); // the first call makes the first spare
}
for (let round = 0; round < WARMUP + RUNS; round++) {
    for (const n of names) {
        const x = st[n], keep = round >= WARMUP;
        await sleep(1500); // the spare of the previous call is ready again
        const w = await x.warmS.run();
        const c = await x.coldS.run();
        const cell = await x.warmS.run({ session: x.sid });
        const a = await x.coldS.run({ network: 'allowlist' });
        const d = dockerRun(x.s);
        if (keep) {
            x.samples.warm.push(w.ms); x.samples.cold.push(c.ms); x.samples.cell.push(cell.ms);
            x.samples.allow.push(a.ms); x.samples.docker.push(d);
            x.iso = /isolation: ([^\n]+)/.exec(w.text)?.[1];
        }
    }
    process.stderr.write(`round ${round + 1}/${WARMUP + RUNS}\n`);
}
const rows = [];
for (const n of names) {
    const x = st[n], m = Object.fromEntries(Object.entries(x.samples).map(([k, v]) => [k, p50(v)]));
    rows.push({ setup: n, ...m, allow_cost: m.allow - m.cold, warm_over_docker: m.warm / m.docker, isolation: x.iso });
    await x.warmS.call('session_end', { session: x.sid }).catch(() => {});
    await x.warmS.stop(); await x.coldS.stop();
    fs.rmSync(x.tmp, { recursive: true, force: true });
}
const f = (v) => v.toFixed(0).padStart(8);
console.log(`print(1), python, p50 ms of ${RUNS} interleaved rounds (${os.loadavg()[0].toFixed(1)} load at the end)`);
console.log(`${'set-up'.padEnd(18)}${'cold'.padStart(8)}${'warm'.padStart(8)}${'cell'.padStart(8)}${'allow+'.padStart(8)}${'docker'.padStart(8)}  warm/docker`);
for (const r of rows) console.log(`${r.setup.padEnd(18)}${f(r.cold)}${f(r.warm)}${f(r.cell)}${f(r.allow_cost)}${f(r.docker)}  ${r.warm_over_docker.toFixed(2)}  (${r.isolation})`);
if (opt.out) fs.writeFileSync(opt.out, JSON.stringify({ runs: RUNS, rows, samples: Object.fromEntries(names.map((n) => [n, st[n].samples])) }, null, 1) + '\n');
