#!/usr/bin/env node
// bench.mjs - issue 7's benchmark suite, driven by scripts/bench (read its --help first).
//
// One run measures, on this machine at this moment, each case as sequential samples after a
// warm-up, interleaved round-robin so that a change of load on a shared machine hits every
// case alike:
//   floor    the rootfs's own interpreter, bare: chroot --userspec=UID:GID ROOTFS python3 -c ...
//   bwrap    bubblewrap --unshare-all over the same rootfs, as the unprivileged user
//   docker   `docker run --rm` with our flags, same image, same engine
//   podman   `podman run --rm` likewise (rootful CLI: the same storage as the rootful socket)
//   ours     run_code through vestibule-mcp, timed at the client from the request's first byte
//            to the response's last, per backend (native, container on Docker, on Podman), and
//            `vestibule-mcp run` as a process
// then scaling (concurrency 1/2/4/8: runs/s and p95; output 1 KiB..10 MiB: time and server
// RSS; code size up to the max), the server's footprint (VmRSS idle and with 4 runs in
// flight, VmHWM, CPU per run from /proc/PID/stat), and the per-phase breakdown parsed from
// the servers' VESTIBULE_TRACE=timing lines.
//
// The MCP client is a plain JSON-RPC-over-stdio driver written here (newline-delimited
// frames), not the SDK: less client overhead in the numbers. Nothing leaves the machine: the
// servers and engines are local, the sandboxes have no network. Every loop is bounded by a
// count, every request by a deadline.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
    options: {
        bin: { type: 'string' },
        baseline: { type: 'string' },
        runs: { type: 'string' },
        warmup: { type: 'string' },
        out: { type: 'string' },
        quick: { type: 'boolean', default: false },
        only: { type: 'string' },
        rootfs: { type: 'string', default: process.env.VESTIBULE_ROOTFS_DIR || '/var/tmp/vestibule-images/rootfs' },
        user: { type: 'string', default: 'vestibule-test' },
        'image-python': { type: 'string', default: 'vestibule/python:bookworm' },
        'image-node': { type: 'string', default: 'vestibule/node:bookworm' },
        'docker-host': { type: 'string', default: 'unix:///var/run/docker.sock' },
        'podman-host': { type: 'string', default: 'unix:///run/podman/podman.sock' },
        'desktop-host': { type: 'string', default: 'unix:///run/vestibule-desktop/docker.sock' },
        'podman-global': { type: 'string' },
    },
});
const QUICK = opt.quick;
const RUNS = Number(opt.runs ?? (QUICK ? 10 : 50));
const WARMUP = Number(opt.warmup ?? (QUICK ? 2 : 5));
const BIN = opt.bin;
// --baseline BIN: a second vestibule-mcp (e.g. main's build) measured in the same rounds, so a
// change is judged against its own baseline under the same load.
const BASE_BIN = opt.baseline;
const ROOTFS = opt.rootfs;
const only = opt.only ? new Set(opt.only.split(',')) : null;
const want = (k) => !only || only.has(k);
// A result whose stdout is "1\n": the fenced form (docs/design/results.md) or a baseline's older
// "stdout:" form.
const OUT_1 = /^stdout(?::| \([^)]*\) ---[0-9a-f]{16}---)\n1\n/;
if (!BIN) throw new Error('pass --bin (scripts/bench does)');
if (!(RUNS >= 1 && RUNS <= 10000 && WARMUP >= 0 && WARMUP <= 1000)) throw new Error('--runs 1..10000, --warmup 0..1000');

const isRoot = process.getuid() === 0;
let UID = process.getuid(), GID = process.getgid();
if (isRoot) {
    const r = spawnSync('id', ['-u', opt.user], { encoding: 'utf8' });
    const g = spawnSync('id', ['-g', opt.user], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`as root the bench runs code as '${opt.user}', which does not exist (scripts/ci-user.sh creates it)`);
    UID = Number(r.stdout); GID = Number(g.stdout);
}
// An unprivileged process: as root, through setpriv (one exec, like chroot's for the floor).
const asUser = (argv) => (isRoot ? ['setpriv', `--reuid=${UID}`, `--regid=${GID}`, '--clear-groups', '--', ...argv] : argv);
const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'vst-bench-'));
fs.chmodSync(tmp, 0o755);
const ws = path.join(tmp, 'ws');
fs.mkdirSync(ws, { mode: 0o700 });
if (isRoot) fs.chownSync(ws, UID, GID);

// ---- statistics ------------------------------------------------------------------------
const pct = (s, p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
function stats(ms) {
    const s = [...ms].sort((a, b) => a - b);
    if (!s.length) return null;
    return { n: s.length, p50_ms: +pct(s, 50).toFixed(2), p95_ms: +pct(s, 95).toFixed(2), min_ms: +s[0].toFixed(2), max_ms: +s.at(-1).toFixed(2) };
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor((s.length - 1) / 2)] : null; };

// ---- processes ----------------------------------------------------------------------------
function runProc(argv, expect, env) {
    const t0 = performance.now();
    const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', env: env ?? { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' }, timeout: 120000, maxBuffer: 1 << 20 });
    const ms = performance.now() - t0;
    if (r.status !== 0 || !expect.test(r.stdout)) throw new Error(`${argv.join(' ')} failed (status ${r.status}): ${r.stdout.slice(0, 300)} ${String(r.stderr).slice(0, 600)}`);
    return ms;
}

// ---- the MCP driver ---------------------------------------------------------------------
class Server {
    constructor(name, argv, env, { uid } = {}) {
        this.name = name;
        this.child = spawn(argv[0], argv.slice(1), { env, stdio: ['pipe', 'pipe', 'pipe'] });
        this.pending = new Map();
        this.nextId = 1;
        this.buf = '';
        this.errbuf = '';
        this.trace = []; // {run, phase, us}
        this.child.stdout.setEncoding('utf8');
        this.child.stdout.on('data', (d) => {
            this.buf += d;
            let i;
            while ((i = this.buf.indexOf('\n')) >= 0) {
                const line = this.buf.slice(0, i);
                this.buf = this.buf.slice(i + 1);
                if (!line.trim()) continue;
                const msg = JSON.parse(line);
                const p = this.pending.get(msg.id);
                if (p) { this.pending.delete(msg.id); p(msg); }
            }
        });
        this.child.stderr.setEncoding('utf8');
        this.child.stderr.on('data', (d) => {
            this.errbuf += d;
            let i;
            while ((i = this.errbuf.indexOf('\n')) >= 0) {
                const line = this.errbuf.slice(0, i);
                this.errbuf = this.errbuf.slice(i + 1);
                const m = /trace run=(\d+) backend=(\S+) phase=(\S+) us=(\d+)/.exec(line);
                if (m) this.trace.push({ run: +m[1], backend: m[2], phase: m[3], us: +m[4] });
                else if (/error|warning/.test(line)) process.stderr.write(`[${name}] ${line}\n`);
            }
        });
        this.exited = new Promise((res) => this.child.on('exit', res));
    }
    get pid() { return this.child.pid; }
    request(method, params, timeoutMs = 120000) {
        const id = this.nextId++;
        const line = JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n';
        return new Promise((resolve, reject) => {
            const t = setTimeout(() => { this.pending.delete(id); reject(new Error(`${this.name}: ${method} timed out`)); }, timeoutMs);
            this.pending.set(id, (msg) => { clearTimeout(t); resolve(msg); });
            this.child.stdin.write(line);
        });
    }
    async init() {
        const r = await this.request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'vestibule-bench', version: '1' } }, 30000);
        if (r.error) throw new Error(`${this.name}: initialize: ${JSON.stringify(r.error)}`);
        this.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
    }
    // run_code; returns {ms, text}; throws unless @expect matches the stdout part.
    async run(language, code, expect = OUT_1, timeoutS = 30, allowError = false, session = undefined) {
        (this.calls ??= []).push(language); // the k-th call's language, for the breakdown
        const t0 = performance.now();
        const r = await this.request('tools/call', { name: 'run_code', arguments: { language, code, timeout_seconds: timeoutS, ...(session ? { session } : {}) } });
        const ms = performance.now() - t0;
        const text = (r.result?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
        if (r.error || (r.result?.isError && !allowError) || (expect && !expect.test(text))) throw new Error(`${this.name}: run_code ${language} did not run cleanly:\n${r.error ? JSON.stringify(r.error) : text.slice(0, 200) + ' ... ' + text.slice(-400)}`);
        const iso = /\nisolation: ([^\n]+)\s*$/.exec(text);
        if (iso) this.isolation = iso[1];
        return { ms, text };
    }
    // session_start then session_end; returns session_start's ms (issue 17: from a spare).
    async sessionStart(language) {
        const t0 = performance.now();
        const r = await this.request('tools/call', { name: 'session_start', arguments: { language } });
        const ms = performance.now() - t0;
        const sid = r.result?.structuredContent?.session;
        if (!sid) throw new Error(`${this.name}: session_start ${language}: ${JSON.stringify(r.error ?? r.result?.content).slice(0, 400)}`);
        const e = await this.request('tools/call', { name: 'session_end', arguments: { session: sid } });
        if (e.error || e.result?.isError) throw new Error(`${this.name}: session_end: ${JSON.stringify(e.error ?? e.result?.content).slice(0, 400)}`);
        return ms;
    }
    status() {
        const s = fs.readFileSync(`/proc/${this.pid}/status`, 'utf8');
        const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? NaN);
        return { rss_kib: kb('VmRSS'), rss_anon_kib: kb('RssAnon'), rss_file_kib: kb('RssFile'), hwm_kib: kb('VmHWM'), threads: Number(/^Threads:\s+(\d+)/m.exec(s)?.[1]) };
    }
    // Rss and the anonymous part of it per mapped file (smaps), largest first, in KiB.
    byFile() {
        const out = {};
        let cur = null;
        for (const l of fs.readFileSync(`/proc/${this.pid}/smaps`, 'utf8').split('\n')) {
            const m = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(l);
            if (m) { cur = path.basename(m[1]) || '[anon]'; out[cur] ??= { rss: 0, anon: 0 }; continue; }
            const r = /^(Rss|Anonymous):\s+(\d+) kB/.exec(l);
            if (r && cur) out[cur][r[1] === 'Rss' ? 'rss' : 'anon'] += Number(r[2]);
        }
        return Object.fromEntries(Object.entries(out).filter(([, v]) => v.rss).sort((a, b) => b[1].rss - a[1].rss));
    }
    // Which of the lazily loaded libraries (src/lazy) this server has mapped.
    lazyMapped() {
        const maps = fs.readFileSync(`/proc/${this.pid}/maps`, 'utf8');
        return ['libcurl.so', 'libarchive.so', 'libyaml-0.so', 'libsystemd.so', 'libcrypto.so'].filter((l) => maps.includes(l));
    }
    // The server's descendants (its sandboxes: warm spares when idle), apart from the server:
    // processes, and their Rss and Pss summed from /proc/PID/smaps_rollup, in KiB.
    descendants() { return rollupSum(descendantsOf(this.pid)); }
    // Its sandboxes one by one: each direct child is a sandbox's init (src/native/spawn.c);
    // {init pid: [pids of its tree, init first]}.
    sandboxes() { return Object.fromEntries(childrenOf(this.pid).map((p) => [p, [p, ...descendantsOf(p)]])); }
    cpuTicks() {
        const st = fs.readFileSync(`/proc/${this.pid}/stat`, 'utf8');
        const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
        return Number(f[11]) + Number(f[12]); // utime + stime, the server's own threads only
    }
    async close() {
        this.child.stdin.end();
        const t = setTimeout(() => this.child.kill('SIGKILL'), 10000);
        await this.exited;
        clearTimeout(t);
    }
}

// ---- process trees and their memory (/proc) --------------------------------------------------
// PID's children over all its threads (a spare's parent is the server's keeper thread).
function childrenOf(pid) {
    const out = [];
    try {
        for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
            const c = fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim();
            if (c) out.push(...c.split(/\s+/).map(Number));
        }
    } catch { /* gone */ }
    return out;
}
function descendantsOf(pid) {
    const all = [];
    const todo = childrenOf(pid);
    while (todo.length) { const p = todo.pop(); all.push(p); todo.push(...childrenOf(p)); }
    return all;
}
// One process's Rss, Pss and its anonymous part from /proc/PID/smaps_rollup, in KiB, with its
// name (comm; init and bash's waiting child are clones of the server: "vestibule-mcp"); null
// when it is gone or not readable.
function rollup(pid) {
    try {
        const r = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
        const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(r)?.[1] ?? 0);
        return { pid, comm: fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(), rss_kib: kb('Rss'), pss_kib: kb('Pss'), pss_anon_kib: kb('Pss_Anon'), pss_file_kib: kb('Pss_File') };
    } catch { return null; }
}
function rollupSum(pids) {
    const rs = pids.map(rollup).filter(Boolean);
    return { procs: rs.length, rss_kib: rs.reduce((a, r) => a + r.rss_kib, 0), pss_kib: rs.reduce((a, r) => a + r.pss_kib, 0) };
}

const baseEnv = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8', VESTIBULE_TRACE: 'timing', VESTIBULE_LOG_LEVEL: 'warning' };
let nServers = 0;
function serverEnv(backend, extra = {}) {
    const dir = path.join(tmp, `srv${nServers++}`);
    fs.mkdirSync(dir, { mode: 0o755 });
    const env = { ...baseEnv, HOME: dir, VESTIBULE_BACKEND: backend, VESTIBULE_WORKSPACE: ws, VESTIBULE_AUDIT_DIR: path.join(dir, 'audit'), VESTIBULE_ROOTFS_DIR: ROOTFS, VESTIBULE_IMAGE_PYTHON: opt['image-python'], VESTIBULE_IMAGE_NODE: opt['image-node'], XDG_CONFIG_HOME: path.join(dir, 'xdg'), ...extra };
    if (isRoot && (backend === 'native' || backend === 'gvisor')) fs.chownSync(dir, UID, GID);
    return env;
}
// The native server runs as the unprivileged user (how it is deployed); a root server would
// need VESTIBULE_RUN_AS. Container servers run as root with VESTIBULE_RUN_AS (the engine
// sockets are root's), code as the unprivileged user.
async function startServer(name, backend, extra = {}) {
    const env = serverEnv(backend, extra);
    let argv = [BIN];
    if ((backend === 'native' || backend === 'gvisor') && isRoot) argv = asUser(argv); // runsc runs rootless
    else if (isRoot) env.VESTIBULE_RUN_AS = `${UID}:${GID}`;
    const s = new Server(name, argv, env);
    await s.init();
    return s;
}

// ---- cases --------------------------------------------------------------------------------
const PY = ['python3', '-c', 'print(1)'];
const NODE = ['node', '-e', 'console.log(1)'];
const BASH = ['bash', '-c', 'echo 1'];
const CODE = { python: 'print(1)', node: 'console.log(1)', bash: 'echo 1' };
const one = /^1\n/;
const langs = QUICK ? ['python'] : ['python', 'node', 'bash'];
const rootfsOf = (l) => path.join(ROOTFS, l === 'node' ? 'node' : 'python');
const interp = { python: PY, node: NODE, bash: BASH };

const cases = []; // {key, label, fn: async () => ms}
const skipped = {};
const notes = [];
const servers = {};

for (const l of langs) {
    if (!want('floor')) break;
    if (isRoot) cases.push({ key: `floor_${l}`, label: `floor: chroot ${interp[l][0]}`, fn: async () => runProc(['chroot', `--userspec=${UID}:${GID}`, '--groups=', rootfsOf(l), ...interp[l]], one) });
    else skipped[`floor_${l}`] = 'chroot needs root: run scripts/bench as root for the floor';
}
if (want('bwrap')) {
    if (have('bwrap')) for (const l of langs) cases.push({ key: `bwrap_${l}`, label: `bwrap --unshare-all ${interp[l][0]}`, fn: async () => runProc(asUser(['bwrap', '--unshare-all', '--die-with-parent', '--new-session', '--ro-bind', rootfsOf(l), '/', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--chdir', '/tmp', ...interp[l]]), one) });
    else skipped.bwrap = 'bwrap not installed (apt-get install bubblewrap)';
}

const DOCKER_FLAGS = (img, cli) => ['run', '--rm', '--network', 'none', '--ipc', 'none', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '--read-only', '--tmpfs', '/tmp:rw,nosuid,nodev,size=64m', '--user', `${UID}:${GID}`, '--memory', '256m', '--memory-swap', '256m', '--cpus', '0.75', '--pids-limit', '128', '--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=4096:4096', '--ulimit', 'core=0:0', '--init', '-v', `${ws}:/workspace`, '-w', '/workspace', img, 'timeout', '--kill-after=1', '10', ...PY];
const engineUp = (host) => spawnSync('curl', ['-sf', '--max-time', '5', '--unix-socket', host.replace('unix://', ''), 'http://x/_ping']).status === 0;

async function addServerCases() {
    // issue 26: the gvisor backend (runsc rootless, as the unprivileged user like native), a
    // fresh sandbox per call, in the same interleaved rounds as native and bwrap
    if (want('gvisor')) {
        if (!fs.existsSync('/usr/bin/runsc')) skipped.gvisor = 'runsc not installed (apt-get install runsc)';
        else {
            try {
                servers.gvisor = await startServer('gvisor', 'gvisor');
                for (const l of langs) cases.push({ key: `ours_gvisor_${l}`, label: `ours: gvisor run_code ${l}`, server: 'gvisor', fn: async () => (await servers.gvisor.run(l, CODE[l])).ms });
                // issue 26 #2: print(1) as a cell of a live gvisor session (ratio
                // gvisor_session_python_vs_fresh), in the same interleaved rounds
                const gst = await servers.gvisor.request('tools/call', { name: 'session_start', arguments: { language: 'python' } });
                const gsid = gst.result?.structuredContent?.session;
                if (gsid) cases.push({ key: 'ours_gvisor_session_python', label: 'ours: gvisor run_code in a session', server: 'gvisor', fn: async () => (await servers.gvisor.run('python', 'print(1)', OUT_1, 30, false, gsid)).ms });
                else skipped.gvisor_session = `session_start: ${JSON.stringify(gst.error ?? gst.result?.content)}`.slice(0, 400);
                // issue 26 #2's cold target (<= 400 ms p50): print(1) on a server that keeps no
                // spare (VESTIBULE_WARM=0), so every call starts its runsc sandbox
                servers.gvisor_cold = await startServer('gvisor_cold', 'gvisor', { VESTIBULE_WARM: '0' });
                cases.push({ key: 'ours_gvisor_cold_python', label: 'ours: gvisor run_code python, cold', server: 'gvisor_cold', fn: async () => (await servers.gvisor_cold.run('python', CODE.python)).ms });
            } catch (e) {
                skipped.gvisor = `gvisor server: ${e.message}`;
            }
        }
    }
    // `--only session`: the native servers with only their session cells (no fresh-sandbox
    // case whose next spare is built in the background while the cell runs)
    const fresh = want('native');
    if (want('native') || want('session')) {
        try {
            servers.native = await startServer('native', 'native');
            servers.native.idle = servers.native.status();
            servers.native.cpu0 = servers.native.cpuTicks();
            for (const l of fresh ? langs : []) cases.push({ key: `ours_native_${l}`, label: `ours: native run_code ${l}`, server: 'native', fn: async () => (await servers.native.run(l, CODE[l])).ms });
            // issue 14: print(1) as a cell of a live session, against the fresh-sandbox call
            // above, in the same interleaved rounds (ratio native_session_python_vs_fresh)
            const st = await servers.native.request('tools/call', { name: 'session_start', arguments: { language: 'python' } });
            const sid = st.result?.structuredContent?.session;
            if (sid) {
                cases.push({ key: 'ours_native_session_python', label: 'ours: native run_code in a session', server: 'native', fn: async () => (await servers.native.run('python', 'print(1)', OUT_1, 30, false, sid)).ms });
                // issue 17: session_start (then session_end, not timed) takes a session's spare.
                // Its spare is rebuilt in the background right after, which competes with the
                // cases that follow it: `--only native` without session-start leaves it out.
                if (want('session-start')) cases.push({ key: 'ours_native_session_start_python', label: 'ours: native session_start python', server: 'native', fn: async () => servers.native.sessionStart('python') });
            } else {
                skipped.native_session = `session_start: ${JSON.stringify(st.error ?? st.result?.content)}`.slice(0, 400);
            }
        } catch (e) { skipped.native = String(e.message).slice(0, 400); }
        if (!skipped.native && fresh) cases.push({ key: 'ours_native_run_process', label: 'ours: vestibule-mcp run (process)', fn: async () => runProc(isRoot ? asUser([BIN, 'run', '--language', 'python', '-c', 'print(1)']) : [BIN, 'run', '--language', 'python', '-c', 'print(1)'], OUT_1, serverEnv('native', { VESTIBULE_TRACE: 'off' })) });
    }
    // `--only native-cold`: the same server with VESTIBULE_WARM=0, so every call builds its
    // sandbox (ratios native_<language>_warm_vs_cold: what a spare saves)
    if (want('native-cold') && only) {
        try {
            servers.native_cold = await startServer('native-cold', 'native', { VESTIBULE_WARM: '0' });
            for (const l of langs) cases.push({ key: `ours_native_cold_${l}`, label: `ours: native run_code ${l}, cold (WARM=0)`, server: 'native_cold', fn: async () => (await servers.native_cold.run(l, CODE[l])).ms });
        } catch (e) { skipped.native_cold = String(e.message).slice(0, 400); }
    }
    if ((want('native') || want('session')) && BASE_BIN) {
        try {
            const env = serverEnv('native');
            const s = new Server('baseline-native', isRoot ? asUser([BASE_BIN]) : [BASE_BIN], env);
            await s.init();
            servers.baseline = s;
            for (const l of fresh ? langs : []) cases.push({ key: `baseline_native_${l}`, label: `baseline: native run_code ${l}`, server: 'baseline', fn: async () => (await servers.baseline.run(l, CODE[l])).ms });
            if (want('session-start')) cases.push({ key: 'baseline_native_session_start_python', label: 'baseline: native session_start python', server: 'baseline', fn: async () => servers.baseline.sessionStart('python') });
            const bst = await s.request('tools/call', { name: 'session_start', arguments: { language: 'python' } });
            const bsid = bst.result?.structuredContent?.session;
            if (bsid) cases.push({ key: 'baseline_native_session_python', label: 'baseline: native run_code in a session', server: 'baseline', fn: async () => (await servers.baseline.run('python', 'print(1)', OUT_1, 30, false, bsid)).ms });
            if (fresh) cases.push({ key: 'baseline_native_run_process', label: 'baseline: vestibule-mcp run (process)', fn: async () => runProc(isRoot ? asUser([BASE_BIN, 'run', '--language', 'python', '-c', 'print(1)']) : [BASE_BIN, 'run', '--language', 'python', '-c', 'print(1)'], OUT_1, serverEnv('native', { VESTIBULE_TRACE: 'off' })) });
        } catch (e) { skipped.baseline = String(e.message).slice(0, 400); }
    }
    if (!isRoot) {
        skipped.containers = 'the engines\' sockets are root\'s here: run scripts/bench as root for docker/podman';
        return;
    }
    // desktop: the Docker Desktop stand-in (scripts/desktop-standin.sh), the volume path: an
    // engine that sees neither this machine's files nor its processes (issue 23 #8)
    for (const [eng, host, runtime] of [['docker', opt['docker-host'], 'docker'], ['podman', opt['podman-host'], 'podman'], ['desktop', opt['desktop-host'], 'docker']]) {
        if (!want(eng)) continue;
        if (!engineUp(host)) { skipped[eng] = `no engine answering at ${host} (scripts/start-engines.sh)`; continue; }
        try {
            servers[eng] = await startServer(`container-${eng}`, 'container', { DOCKER_HOST: host, VESTIBULE_RUNTIME: runtime });
            servers[eng].cpu0 = servers[eng].cpuTicks();
            cases.push({ key: `ours_container_${eng}_python`, label: `ours: container (${eng}) run_code`, server: eng, fn: async () => (await servers[eng].run('python', CODE.python)).ms });
            // issue 14 on the container backend: print(1) as a cell of a live session's
            // container, against the fresh-container call above (container_<eng>_session_vs_fresh)
            const st = await servers[eng].request('tools/call', { name: 'session_start', arguments: { language: 'python' } });
            const sid = st.result?.structuredContent?.session;
            if (sid)
                cases.push({ key: `ours_container_${eng}_session_python`, label: `ours: container (${eng}) run_code in a session`, server: eng, fn: async () => (await servers[eng].run('python', 'print(1)', OUT_1, 30, false, sid)).ms });
            else
                skipped[`container_${eng}_session`] = `session_start: ${JSON.stringify(st.error ?? st.result?.content)}`.slice(0, 400);
        } catch (e) { skipped[`ours_container_${eng}`] = String(e.message).slice(0, 400); }
        // issue 17: the same server without warm spares (each call creates and starts its own
        // container), in the same interleaved rounds: what the spare takes off the call
        try {
            const k = `${eng}_cold`;
            servers[k] = await startServer(`container-${eng}-cold`, 'container', { DOCKER_HOST: host, VESTIBULE_RUNTIME: runtime, VESTIBULE_WARM: '0' });
            servers[k].cpu0 = servers[k].cpuTicks();
            cases.push({ key: `ours_container_${eng}_cold_python`, label: `ours: container (${eng}) cold, no spare`, server: k, fn: async () => (await servers[k].run('python', CODE.python)).ms });
        } catch (e) { skipped[`ours_container_${eng}_cold`] = String(e.message).slice(0, 400); }
        const cli = eng === 'desktop' ? 'docker' : eng;
        if (have(cli)) {
            const env = { ...baseEnv, HOME: tmp };
            if (cli === 'docker') env.DOCKER_HOST = host;
            // podman: the CLI on the rootful service's storage, with the service's own global
            // flags (scripts/start-engines.sh), so both run the same runtime the same way.
            const glob = eng === 'podman' ? (opt['podman-global'] || '--cgroup-manager=cgroupfs --events-backend=file --runtime runc').split(' ').filter(Boolean) : [];
            cases.push({ key: `peer_${eng}_cli_python`, label: `${cli} run --rm (CLI${eng === 'desktop' ? ', Desktop stand-in' : ''})`, fn: async () => runProc([cli, ...glob, ...DOCKER_FLAGS(opt['image-python'], cli)], one, env) });
        } else skipped[`peer_${eng}_cli`] = `no ${cli} CLI`;
    }
}

// ---- main ---------------------------------------------------------------------------------
const report = {
    what: 'issue 7 benchmark: print(1) per case, sequential, interleaved round-robin, after a warm-up',
    date: new Date().toISOString(), commit: process.env.BENCH_COMMIT || null, quick: QUICK, runs: RUNS, warmup: WARMUP,
    driver: 'plain JSON-RPC over stdio (newline-delimited), node ' + process.version,
    host: { cpus: os.cpus().length, cpu_model: os.cpus()[0]?.model, kernel: os.release(), mem_mib: Math.round(os.totalmem() / 1048576), loadavg_before: os.loadavg().map((x) => +x.toFixed(2)) },
    latency: {}, ratios: {}, breakdown: {}, scaling: {}, footprint: {}, skipped, notes,
};
const t_begin = performance.now();
const progress = (m) => process.stderr.write(`bench: ${((performance.now() - t_begin) / 1000).toFixed(1)} s: ${m}\n`);
await addServerCases();

// warm-up, then RUNS rounds of every case in turn
const samples = Object.fromEntries(cases.map((c) => [c.key, []]));
// A case that fails is dropped from the run with its reason (a slow engine must not sink the
// rest); it is listed under "skipped".
async function sample(c) {
    if (c.dead) return null;
    try { return await c.fn(); } catch (e) { c.dead = true; skipped[c.key] = `failed: ${String(e.message).slice(0, 400)}`; return null; }
}
progress(`warm-up and ${RUNS} rounds of ${cases.length} cases`);
for (let i = 0; i < WARMUP; i++) for (const c of cases) await sample(c);
const traceMark = Object.fromEntries(Object.entries(servers).map(([k, s]) => [k, s.trace.length]));
const cpuMark = Object.fromEntries(Object.entries(servers).map(([k, s]) => [k, s.cpuTicks()]));
for (let i = 0; i < RUNS; i++) for (const c of cases) { const ms = await sample(c); if (ms !== null) samples[c.key].push(ms); }
for (const c of cases) if (!c.dead) report.latency[c.key] = { label: c.label, ...stats(samples[c.key]) };
// warm spares: let the last call's spare be built, then read the servers' descendants
await new Promise((r) => setTimeout(r, 1500));
for (const s of Object.values(servers)) s.spares = s.descendants();

// breakdown: median µs per phase over the measured runs, from the trace lines
const HZ = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;
for (const [k, s] of Object.entries(servers)) {
    const lines = s.trace.slice(traceMark[k]);
    const phases = {};
    // a warm spare's setup is traced apart (backend "native-spare"): off the request path
    const label = (t) => (t.backend === 'service' ? `service.${t.phase}` : t.backend.endsWith('-spare') ? `spare.${t.phase}` : t.phase);
    for (const t of lines) (phases[label(t)] ??= []).push(t.us);
    report.breakdown[k] = { isolation: s.isolation, runs: phases.total?.length ?? 0, median_us: Object.fromEntries(Object.entries(phases).map(([p, v]) => [p, median(v)])) };
    // by language: the k-th service trace is the k-th call; a backend's lines belong to the
    // call whose service trace began last before them (calls on one server are sequential)
    const svc = [...new Set(s.trace.filter((t) => t.backend === 'service').map((t) => t.run))];
    const langOf = (run) => { let i = -1; for (let j = 0; j < svc.length && svc[j] <= run; j++) i = j; return i >= 0 ? s.calls?.[i] : undefined; };
    const byLang = {};
    for (const t of lines) {
        if (t.backend.endsWith('-spare')) continue;
        const l = langOf(t.run);
        if (l) ((byLang[l] ??= {})[label(t)] ??= []).push(t.us);
    }
    report.breakdown[k].by_language_median_us = Object.fromEntries(Object.entries(byLang).map(([l, ph]) => [l, Object.fromEntries(Object.entries(ph).map(([p, v]) => [p, median(v)]))]));
    const runs = samples[cases.filter((c) => c.server === k).map((c) => c.key)[0]]?.length ?? 0;
    const nCases = cases.filter((c) => c.server === k).length;
    report.footprint[k] = { cpu_ms_per_run: +(((s.cpuTicks() - cpuMark[k]) / HZ) * 1000 / Math.max(1, runs * nCases)).toFixed(2), rss_kib_after_latency: s.status().rss_kib, hwm_kib: s.status().hwm_kib };
    // the server's own memory and its sandboxes' apart: between calls, those are warm spares
    if (s.spares) report.footprint[k].spares_after_latency = s.spares;
}
if (servers.native) report.footprint.native.rss_kib_idle_before_first_run = servers.native.idle.rss_kib;

const L = report.latency;
const ratio = (a, b) => (L[a] && L[b] ? { p50: +(L[a].p50_ms / L[b].p50_ms).toFixed(2), p95: +(L[a].p95_ms / L[b].p95_ms).toFixed(2) } : null);
for (const l of langs) {
    report.ratios[`native_${l}_vs_bwrap`] = ratio(`ours_native_${l}`, `bwrap_${l}`);
    report.ratios[`native_${l}_vs_floor`] = ratio(`ours_native_${l}`, `floor_${l}`);
    if (L[`ours_native_${l}`] && L[`floor_${l}`]) report.ratios[`native_${l}_overhead_over_floor_p50_ms`] = +(L[`ours_native_${l}`].p50_ms - L[`floor_${l}`].p50_ms).toFixed(2);
    report.ratios[`bwrap_${l}_vs_floor`] = ratio(`bwrap_${l}`, `floor_${l}`);
    report.ratios[`native_${l}_warm_vs_cold`] = ratio(`ours_native_${l}`, `ours_native_cold_${l}`);
    report.ratios[`gvisor_${l}_vs_bwrap`] = ratio(`ours_gvisor_${l}`, `bwrap_${l}`);
    report.ratios[`gvisor_${l}_vs_native`] = ratio(`ours_gvisor_${l}`, `ours_native_${l}`);
    if (l === 'python') {
        report.ratios.gvisor_session_python_vs_fresh = ratio('ours_gvisor_session_python', 'ours_gvisor_python');
        report.ratios.gvisor_cold_python_vs_bwrap = ratio('ours_gvisor_cold_python', 'bwrap_python');
        report.ratios.gvisor_warm_python_vs_cold = ratio('ours_gvisor_python', 'ours_gvisor_cold_python');
    }
}
report.ratios.container_docker_vs_docker_cli = ratio('ours_container_docker_python', 'peer_docker_cli_python');
report.ratios.container_podman_vs_podman_cli = ratio('ours_container_podman_python', 'peer_podman_cli_python');
report.ratios.container_docker_cold_vs_docker_cli = ratio('ours_container_docker_cold_python', 'peer_docker_cli_python');
report.ratios.container_podman_cold_vs_podman_cli = ratio('ours_container_podman_cold_python', 'peer_podman_cli_python');
report.ratios.container_docker_warm_vs_cold = ratio('ours_container_docker_python', 'ours_container_docker_cold_python');
report.ratios.container_podman_warm_vs_cold = ratio('ours_container_podman_python', 'ours_container_podman_cold_python');
report.ratios.container_desktop_warm_vs_cold = ratio('ours_container_desktop_python', 'ours_container_desktop_cold_python');
report.ratios.container_desktop_cold_vs_docker_cli = ratio('ours_container_desktop_cold_python', 'peer_desktop_cli_python');
report.ratios.run_process_vs_native_run_code = ratio('ours_native_run_process', 'ours_native_python');
report.ratios.native_session_python_vs_fresh = ratio('ours_native_session_python', 'ours_native_python');
report.ratios.native_session_start_vs_baseline = ratio('ours_native_session_start_python', 'baseline_native_session_start_python');
report.ratios.native_session_python_vs_baseline = ratio('ours_native_session_python', 'baseline_native_session_python');
for (const eng of ['docker', 'podman', 'desktop'])
    report.ratios[`container_${eng}_session_python_vs_fresh`] = ratio(`ours_container_${eng}_session_python`, `ours_container_${eng}_python`);
for (const l of langs) {
    report.ratios[`native_${l}_vs_baseline`] = ratio(`ours_native_${l}`, `baseline_native_${l}`);
    if (L[`ours_native_${l}`] && L[`baseline_native_${l}`]) report.ratios[`native_${l}_minus_baseline_p50_ms`] = +(L[`ours_native_${l}`].p50_ms - L[`baseline_native_${l}`].p50_ms).toFixed(2);
}
report.ratios.run_process_vs_baseline = ratio('ours_native_run_process', 'baseline_native_run_process');

// The latency servers are done: closed before the fresh servers below, so that their spares
// neither compete with them nor share pages with theirs (a page two processes map counts half
// in each one's Pss: another node spare alive halved the node spare's libnode pages).
for (const s of Object.values(servers)) await s.close();

// ---- scaling and footprint on a fresh native server ---------------------------------------
if (servers.native && want('scaling')) {
    progress('scaling and footprint (native)');
    const s = await startServer('native-scaling', 'native', { VESTIBULE_MAX_CONCURRENT: '8', VESTIBULE_TRACE: 'off' });
    { const st = s.status(); report.footprint.native_fresh = { rss_kib_idle: st.rss_kib, rss_anon_kib_idle: st.rss_anon_kib, rss_file_kib_idle: st.rss_file_kib, threads_idle: st.threads }; }
    await s.run('python', 'print(1)');
    report.footprint.native_fresh.rss_kib_idle_after_one_run = s.status().rss_kib;
    // concurrency: K clients, each a bounded number of sequential runs
    const per = QUICK ? 5 : 15;
    report.scaling.concurrency = {};
    for (const k of QUICK ? [1, 4] : [1, 2, 4, 8]) {
        progress(`concurrency ${k}`);
        const lat = [];
        const t0 = performance.now();
        await Promise.all(Array.from({ length: k }, async () => { for (let i = 0; i < per; i++) lat.push((await s.run('python', 'print(1)')).ms); }));
        const secs = (performance.now() - t0) / 1000;
        report.scaling.concurrency[k] = { runs: lat.length, runs_per_s: +(lat.length / secs).toFixed(1), ...stats(lat) };
    }
    // 4 runs in flight: sample RSS while they sleep
    progress('4 in flight');
    const inflight = Array.from({ length: 4 }, () => s.run('python', 'import time; time.sleep(1.5); print(1)'));
    await new Promise((r) => setTimeout(r, 900));
    const mid = s.status();
    await Promise.all(inflight);
    report.footprint.native_fresh.rss_kib_4_in_flight = mid.rss_kib;
    report.footprint.native_fresh.rss_anon_kib_4_in_flight = mid.rss_anon_kib;
    report.footprint.native_fresh.threads_4_in_flight = mid.threads;
    // output size: time and server RSS per size, past the cap too
    report.scaling.output = {};
    progress('output sizes');
    for (const n of QUICK ? [1024, 10485760] : [1024, 16384, 65536, 1048576, 10485760]) {
        const lat = [];
        for (let i = 0; i < (QUICK ? 2 : 5); i++) lat.push((await s.run('python', `import sys; sys.stdout.write('x' * ${n}); sys.stdout.flush()`, /^stdout(?::| \([^)]*\) ---[0-9a-f]{16}---)\nx{1000}/, 30, true)).ms);
        const st = s.status();
        report.scaling.output[n] = { ...stats(lat), server_rss_kib: st.rss_kib, server_hwm_kib: st.hwm_kib };
    }
    // code size: print(1) after a comment, up to the 262144-byte default maximum
    report.scaling.code = {};
    progress('code sizes');
    for (const n of QUICK ? [1024, 262144] : [1024, 16384, 65536, 262144]) {
        const code = '#' + 'x'.repeat(n - 11) + '\nprint(1)\n';
        const lat = [];
        for (let i = 0; i < (QUICK ? 2 : 5); i++) lat.push((await s.run('python', code)).ms);
        report.scaling.code[n] = stats(lat);
    }
    report.footprint.native_fresh.hwm_kib_end = s.status().hwm_kib;
    await s.close();
}
// ---- egress: a 10 MB download through the egress proxy against the same download direct ----
// scripts/bench-egress.py: the real proxy process (`vestibule-mcp egress-proxy`), an upstream
// on 127.0.0.1, interleaved rounds; the ratio proxy/direct is the proxy's overhead (goal <= 1.05).
if (want('egress')) {
    progress('egress proxy: 10 MB through the proxy vs direct (loopback)');
    const r = spawnSync('python3', [path.join(path.dirname(new URL(import.meta.url).pathname), 'bench-egress.py'), BIN, String(QUICK ? 8 : 30)],
        { encoding: 'utf8', timeout: 600000 });
    if (r.status === 0) report.egress = JSON.parse(r.stdout.trim().split('\n').at(-1));
    else skipped.egress = `bench-egress.py failed (status ${r.status}): ${String(r.stderr).slice(-300)}`;
}
// ---- idle warm spares per language (issue 23 #8) -----------------------------------------
// A fresh native server, one call of each language in turn: the sandbox that appears after a
// language's call is that language's spare (the service keeps one per language, src/service/
// warm.c). Once its processes and their Rss have settled (the interpreter blocked before its
// program, docs/native.md "Warm spares"), each process's Rss and Pss (smaps_rollup) are read
// and summed per language. Target: <= 12288 KiB Pss per language.
const SPARE_PSS_TARGET_KIB = 12288;
async function settledTree(s, known, deadlineMs = 15000) {
    const t0 = performance.now();
    let last = '', same = 0, tree = null;
    while (performance.now() - t0 < deadlineMs) {
        await new Promise((r) => setTimeout(r, 150));
        const fresh = Object.entries(s.sandboxes()).filter(([init]) => !known.has(Number(init)));
        if (fresh.length !== 1 || fresh[0][1].length < 2) { same = 0; continue; }
        const rs = fresh[0][1].map(rollup).filter(Boolean);
        const key = rs.map((r) => `${r.pid}:${r.comm}:${r.rss_kib}`).join(' ');
        tree = { init: Number(fresh[0][0]), rs, unreadable: fresh[0][1].length - rs.length };
        same = key === last ? same + 1 : 0;
        last = key;
        if (same >= 3) return tree;
    }
    throw new Error(`no settled spare ${deadlineMs} ms after the call (last: ${last || 'none'})`);
}
// A tree's sums; @unreadable: its processes whose smaps_rollup was refused (as a normal user:
// init and bash's waiting clone are not dumpable, so only root reads them).
function summed({ rs, unreadable }) {
    const sum = (k) => rs.reduce((a, r) => a + r[k], 0);
    return { procs: rs.length, unreadable, rss_kib: sum('rss_kib'), pss_kib: sum('pss_kib'), pss_anon_kib: sum('pss_anon_kib'), pss_file_kib: sum('pss_file_kib'), processes: rs };
}
async function sparesByLanguage() {
    const s = await startServer('native-spares', 'native', { VESTIBULE_TRACE: 'off' });
    const out = {};
    try {
        const known = new Set();
        for (const l of ['python', 'node', 'bash']) {
            for (const p of Object.keys(s.sandboxes())) known.add(Number(p));
            await s.run(l, CODE[l]);
            const tree = await settledTree(s, known);
            known.add(tree.init);
            out[l] = summed(tree);
        }
        // a session's spare of each language (src/service/warm.h: kept after a session_start
        // of that language, its runner started and ready), with the live session ended
        out.session = {};
        for (const l of ['python', 'node', 'bash']) {
            for (const p of Object.keys(s.sandboxes())) known.add(Number(p));
            const st = await s.request('tools/call', { name: 'session_start', arguments: { language: l } });
            const sid = st.result?.structuredContent?.session;
            if (!sid) throw new Error(`session_start ${l}: ${JSON.stringify(st.error ?? st.result?.content).slice(0, 300)}`);
            await s.request('tools/call', { name: 'session_end', arguments: { session: sid } });
            const tree = await settledTree(s, known);
            known.add(tree.init);
            out.session[l] = summed(tree);
        }
        // all of them at once, read again: a page two spares share is then split between them
        const all = rollupSum(descendantsOf(s.pid));
        out.all = { ...all, server_rss_kib: s.status().rss_kib };
        out.target_pss_kib_le = SPARE_PSS_TARGET_KIB;
        out.targets_met = Object.fromEntries(['python', 'node', 'bash'].flatMap((l) => [[l, out[l].pss_kib <= SPARE_PSS_TARGET_KIB], [`${l}_session`, out.session[l].pss_kib <= SPARE_PSS_TARGET_KIB]]));
    } finally { await s.close(); }
    return out;
}

// ---- footprint: fresh servers, idle after initialize + tools/list, 4 runs in flight --------
if (want('footprint')) {
    progress('footprint (fresh servers)');
    const fp = (report.footprint.fresh = {});
    const snap = (s) => ({ ...s.status(), lazy_mapped: s.lazyMapped(), by_file_kib: s.byFile() });
    try {
        const s = await startServer('native-footprint', 'native', { VESTIBULE_TRACE: 'off' });
        await s.request('tools/list', {});
        await new Promise((r) => setTimeout(r, 200));
        fp.native_idle = snap(s);
        const inflight = Array.from({ length: 4 }, () => s.run('python', 'import time; time.sleep(1.5); print(1)'));
        await new Promise((r) => setTimeout(r, 900));
        fp.native_4_in_flight = snap(s);
        await Promise.all(inflight);
        fp.native_after = snap(s);
        await s.close();
    } catch (e) { skipped.footprint_native = String(e.message).slice(0, 400); }
    progress('footprint: idle spares per language (native)');
    try { fp.native_spares = await sparesByLanguage(); } catch (e) { skipped.footprint_native_spares = String(e.message).slice(0, 400); }
    if (isRoot && engineUp(opt['docker-host'])) {
        try {
            const s = await startServer('container-footprint', 'container', { DOCKER_HOST: opt['docker-host'], VESTIBULE_RUNTIME: 'docker', VESTIBULE_TRACE: 'off' });
            await s.request('tools/list', {});
            await new Promise((r) => setTimeout(r, 200));
            fp.container_idle = snap(s);
            await s.run('python', CODE.python);
            fp.container_after_one_run = snap(s);
            // 4 at once: the engine's pace varies, so the peak is read as VmHWM afterwards
            await Promise.all(Array.from({ length: 4 }, () => s.run('python', 'import time; time.sleep(1); print(1)')));
            fp.container_after_4_at_once = snap(s);
            await s.close();
        } catch (e) { skipped.footprint_container = String(e.message).slice(0, 400); }
    }
    fp.targets = {
        idle_rss_kib_le_4096: fp.native_idle ? fp.native_idle.rss_kib <= 4096 : null,
        in_flight_4_rss_kib_le_16384: fp.native_4_in_flight ? fp.native_4_in_flight.rss_kib <= 16384 : null,
    };
}
report.host.loadavg_after = os.loadavg().map((x) => +x.toFixed(2));
report.total_s = +((performance.now() - t_begin) / 1000).toFixed(1);
report.samples_ms = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, v.map((x) => +x.toFixed(2))]));

const out = opt.out || `bench-${report.date.replace(/[:.]/g, '-')}.json`;
fs.writeFileSync(out, JSON.stringify(report, null, 2) + '\n');
fs.rmSync(tmp, { recursive: true, force: true });

// ---- the table ------------------------------------------------------------------------------
const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s ?? '-').padStart(n);
console.log(`vestibule bench: ${RUNS} runs per case after ${WARMUP} warm-up, interleaved; ${report.host.cpus} CPUs, load ${report.host.loadavg_before.join(' ')} -> ${report.host.loadavg_after.join(' ')}`);
console.log(`${pad('case', 44)}${lpad('p50 ms', 10)}${lpad('p95 ms', 10)}`);
for (const [k, v] of Object.entries(L)) console.log(`${pad(v.label, 44)}${lpad(v.p50_ms, 10)}${lpad(v.p95_ms, 10)}`);
console.log('\nratios (p50 / p95)');
for (const [k, v] of Object.entries(report.ratios)) if (v !== null && v !== undefined) console.log(`${pad(k, 44)}${typeof v === 'object' ? `${lpad(v.p50, 10)}${lpad(v.p95, 10)}` : lpad(v, 10)}`);
for (const [k, b] of Object.entries(report.breakdown)) {
    console.log(`\nbreakdown ${k} (median us over ${b.runs} runs; isolation: ${b.isolation})`);
    for (const [p, us] of Object.entries(b.median_us)) console.log(`  ${pad(p, 40)}${lpad(us, 10)}`);
    const bl = b.by_language_median_us ?? {};
    const ls = Object.keys(bl);
    if (ls.length > 1) {
        console.log(`  by language (request path)               ${ls.map((l) => lpad(l, 10)).join('')}`);
        const ph = [...new Set(ls.flatMap((l) => Object.keys(bl[l])))];
        for (const p of ph) console.log(`  ${pad(p, 40)}${ls.map((l) => lpad(bl[l][p], 10)).join('')}`);
    }
}
if (report.scaling.concurrency) {
    console.log('\nconcurrency (native)        runs/s    p50 ms    p95 ms');
    for (const [k, v] of Object.entries(report.scaling.concurrency)) console.log(`  ${pad(k, 24)}${lpad(v.runs_per_s, 10)}${lpad(v.p50_ms, 10)}${lpad(v.p95_ms, 10)}`);
    console.log('output bytes (native)       p50 ms   rss KiB   hwm KiB');
    for (const [k, v] of Object.entries(report.scaling.output)) console.log(`  ${pad(k, 24)}${lpad(v.p50_ms, 10)}${lpad(v.server_rss_kib, 10)}${lpad(v.server_hwm_kib, 10)}`);
    console.log('code bytes (native)         p50 ms');
    for (const [k, v] of Object.entries(report.scaling.code)) console.log(`  ${pad(k, 24)}${lpad(v.p50_ms, 10)}`);
}
if (report.egress) {
    console.log(`\negress proxy, ${report.egress.bytes} bytes on loopback, ${report.egress.rounds} interleaved rounds   p50 ms    p95 ms    MB/s`);
    for (const [k, v] of Object.entries(report.egress.paths)) console.log(`  ${pad(k, 40)}${lpad(v.p50_ms, 10)}${lpad(v.p95_ms, 10)}${lpad(v.mb_per_s_p50, 8)}`);
    for (const [k, v] of Object.entries(report.egress.ratio_p50)) console.log(`  ${pad(`${k} / direct (p50; paired median ${report.egress.ratio_paired_median[k]})`, 56)}${lpad(v, 8)}`);
}
console.log('\nfootprint');
for (const [k, v] of Object.entries(report.footprint)) if (k !== 'fresh') console.log(`  ${pad(k, 24)}${Object.entries(v).map(([a, b]) => `${a}=${typeof b === 'object' ? JSON.stringify(b) : b}`).join(' ')}`);
if (report.footprint.fresh) {
    const f = report.footprint.fresh;
    console.log('fresh servers               VmRSS   anon   file  VmHWM  thr  lazily loaded libraries mapped');
    for (const [k, v] of Object.entries(f)) {
        if (k === 'targets' || k === 'native_spares') continue;
        console.log(`  ${pad(k, 24)}${lpad(v.rss_kib, 7)}${lpad(v.rss_anon_kib, 7)}${lpad(v.rss_file_kib, 7)}${lpad(v.hwm_kib, 7)}${lpad(v.threads, 5)}  ${v.lazy_mapped.join(' ') || 'none'}`);
    }
    if (f.native_idle) {
        console.log('native idle, Rss by mapping (KiB, anon part)');
        for (const [file, v] of Object.entries(f.native_idle.by_file_kib).slice(0, 12)) console.log(`  ${pad(file, 36)}${lpad(v.rss, 7)}${lpad(v.anon, 7)}`);
    }
    if (f.native_spares) {
        const sp = f.native_spares;
        console.log(`native idle spares, one per language after a call of each (KiB; target Pss <= ${sp.target_pss_kib_le})`);
        console.log(`  ${pad('language', 10)}${lpad('procs', 6)}${lpad('Rss', 8)}${lpad('Pss', 8)}${lpad('anon', 8)}${lpad('file', 8)}  processes (comm Pss)`);
        for (const l of ['python', 'node', 'bash']) {
            const v = sp[l];
            console.log(`  ${pad(l, 10)}${lpad(v.procs, 6)}${lpad(v.rss_kib, 8)}${lpad(v.pss_kib, 8)}${lpad(v.pss_anon_kib, 8)}${lpad(v.pss_file_kib, 8)}  ${v.processes.map((p) => `${p.comm} ${p.pss_kib}`).join(', ')}${sp.targets_met[l] ? '' : '  (over the target)'}`);
        }
        for (const l of ['python', 'node', 'bash']) {
            const v = sp.session?.[l];
            if (v) console.log(`  ${pad(`${l} session`, 14)}${lpad(v.procs, 2)}${lpad(v.rss_kib, 8)}${lpad(v.pss_kib, 8)}${lpad(v.pss_anon_kib, 8)}${lpad(v.pss_file_kib, 8)}  ${v.processes.map((p) => `${p.comm} ${p.pss_kib}`).join(', ')}${sp.targets_met[`${l}_session`] ? '' : '  (over the target)'}`);
        }
        const hidden = ['python', 'node', 'bash'].reduce((a, l) => a + sp[l].unreadable + (sp.session?.[l]?.unreadable ?? 0), 0);
        if (hidden) console.log(`  (${hidden} processes not read and not counted: a sandbox's init is not dumpable; run as root)`);
        console.log(`  ${pad('all', 10)}${lpad(sp.all.procs, 6)}${lpad(sp.all.rss_kib, 8)}${lpad(sp.all.pss_kib, 8)}  (read together; the server itself: Rss ${sp.all.server_rss_kib})`);
    }
    console.log(`targets: idle <= 4096 KiB: ${f.targets.idle_rss_kib_le_4096}; 4 in flight <= 16384 KiB: ${f.targets.in_flight_4_rss_kib_le_16384}`);
}
for (const [k, v] of Object.entries(skipped)) console.log(`skipped ${k}: ${v}`);
console.log(`\n${report.total_s} s; written: ${out}`);
