// lib.mjs - shared helpers for the end-to-end suite: start the real vestibule-mcp binary
// (VESTIBULE_BIN) over stdio with the official MCP TypeScript SDK clients, each test in its
// own temporary workspace and audit folder, and read results the way an agent would.
//
// Environment:
//   VESTIBULE_BIN     the binary under test (required)
//   E2E_BACKEND       VESTIBULE_BACKEND for the servers the suite starts (default: naive)
//   E2E_EXPECT_GRADE  the exact text after "isolation: " every run must report
//                     (default for naive: "none (naive: development only)"; required otherwise)
//   E2E_SLOW_FACTOR   N > 1 on a machine N times slower (the VM under emulation): stretches the
//                     start-up and set-up allowances, never the kill-within bound
//   E2E_PASS_ENV      extra variable names to hand to the server (comma-separated), e.g.
//                     VESTIBULE_DEFAULT_TIMEOUT_S: only settings a user would write into the
//                     client's `env` for the server (VESTIBULE_*, DOCKER_HOST, DOCKER_TLS_VERIFY,
//                     DOCKER_CERT_PATH, CONTAINER_HOST)
//
// The server starts with exactly what an MCP client using the SDK gives it: the SDK's default
// environment (getDefaultEnvironment(): HOME, LOGNAME, PATH, SHELL, TERM, USER, from this
// process) plus the settings of the client config's `env`. Nothing else: no XDG_RUNTIME_DIR,
// DBUS_SESSION_BUS_ADDRESS or XDG_CONFIG_HOME, which such a client never passes, so the server
// must find the user bus and the runtime folder on its own (docs/design/environment.md).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as StdioV1, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Client as ClientV2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as StdioV2 } from '@modelcontextprotocol/client/stdio';

import { sleep, waitFor } from './wait.mjs';

export const BIN = process.env.VESTIBULE_BIN;
if (!BIN) throw new Error('VESTIBULE_BIN is not set: point it at the vestibule-mcp binary to test');
fs.accessSync(BIN, fs.constants.X_OK);

export const BACKEND = process.env.E2E_BACKEND || 'naive';
export const EXPECT_GRADE =
    process.env.E2E_EXPECT_GRADE || (BACKEND === 'naive' ? 'none (naive: development only)' : '');
if (!EXPECT_GRADE) throw new Error(`E2E_EXPECT_GRADE must name the isolation grade expected from backend ${BACKEND}`);

// E2E_SLOW_FACTOR (default 1): a machine that runs everything N times slower (the systemd VM
// under software emulation, ~50x slower CPU) stretches the set-up allowances below by N. It
// never stretches GONE_WITHIN_MS: how soon a killed run's processes are gone is the isolation
// claim, the same everywhere.
/**
 * Whether the container engine the servers use cannot see this machine's files, so the server
 * hands code and workspace in through volumes (docs/remote-engines.md): the same rule as the
 * server's engine_daemon_shares_files() (src/engine/volume.c), judged here on its own: a
 * tcp:// (or ssh://, http(s)://) endpoint; else a unix socket whose daemon's /info says
 * "Docker Desktop", or names another host than this one (a forwarded socket, or
 * scripts/desktop-standin.sh's daemon in its own UTS namespace). False for the other backends,
 * and when the socket does not answer (the server would then refuse every call anyway).
 */
async function engineIsRemote() {
    const host = process.env.DOCKER_HOST || process.env.CONTAINER_HOST || '';
    if (BACKEND !== 'container') return false;
    if (/^(tcp|ssh|http|https):/.test(host)) return true;
    if (!host.startsWith('unix://')) return false;
    const socketPath = host.slice('unix://'.length);
    if (socketPath.includes('/.local/share/containers/podman/machine/')) return true;
    const info = await new Promise((resolve) => {
        const req = http.get({ socketPath, path: '/info', timeout: 15_000 }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (d) => { body += d; });
            res.on('end', () => { try { resolve(JSON.parse(body)); } catch { resolve(null); } });
        });
        req.on('timeout', () => req.destroy());
        req.on('error', () => resolve(null));
    });
    if (!info) return false;
    if (/Docker Desktop|podman machine/i.test(info.OperatingSystem || '')) return true;
    return typeof info.Name === 'string' && info.Name !== os.hostname();
}
/** True when the servers' container engine is on the volume path (engineIsRemote above). */
export const REMOTE_ENGINE = await engineIsRemote();
// The container backend on gVisor's runsc (VESTIBULE_CONTAINER_RUNTIME): no sessions, spares or
// allowlist there (their FIFOs and socket in the code folder; src/engine/runtime.c says why).
export const RUNSC = BACKEND === 'container' && process.env.VESTIBULE_CONTAINER_RUNTIME === 'runsc';

export const SLOW = Number(process.env.E2E_SLOW_FACTOR || 1);
if (!(SLOW >= 1 && SLOW <= 20)) throw new Error(`E2E_SLOW_FACTOR must be between 1 and 20, got ${process.env.E2E_SLOW_FACTOR}`);
// How long a killed run's processes may linger after the result came back. A container
// engine tears down asynchronously (rootless Podman, three engines' e2e runs side by side on 2
// cores: a killed server's session shell was still there after 10 s, gone at once alone); the
// kernel-level backends must be immediate.
export const GONE_WITHIN_MS = BACKEND === 'container' ? 20_000 : 3_000;
// How long a run may take to get going (a container engine creates and starts a container).
export const START_WITHIN_MS = (BACKEND === 'container' ? 60_000 : 20_000) * SLOW;
// Extra time a whole call may take over the code's own time (sandbox set-up and tear-down).
export const SLACK_MS = (BACKEND === 'container' ? 30_000 : 6_000) * SLOW;

export const LEGACY_VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
export const MODERN_VERSION = '2026-07-28';

// Settings a user writes into the client config's `env` (the engine's location is one, as
// for the docker CLI), plus the sanitizer runtimes' options of a Debug build (read by the
// sanitizer, never by the server's code).
const PASS_ENV = [
    'VESTIBULE_ROOTFS_DIR', 'VESTIBULE_RUN_AS', 'VESTIBULE_RUNTIME', 'VESTIBULE_CONTAINER_RUNTIME',
    'VESTIBULE_IMAGE_PYTHON', 'VESTIBULE_IMAGE_NODE', 'VESTIBULE_IMAGE_SOURCE', 'VESTIBULE_LOG_LEVEL', 'DOCKER_HOST',
    'DOCKER_TLS_VERIFY', 'DOCKER_CERT_PATH', 'CONTAINER_HOST', 'ASAN_OPTIONS', 'UBSAN_OPTIONS',
    ...(process.env.E2E_PASS_ENV || '').split(',').filter(Boolean),
];
// Never handed over, whatever E2E_PASS_ENV says: a client started from a desktop menu or an
// IDE does not pass them, and the server must work without them.
const NEVER_PASS = ['XDG_RUNTIME_DIR', 'DBUS_SESSION_BUS_ADDRESS', 'XDG_CONFIG_HOME'];
for (const k of PASS_ENV) {
    if (NEVER_PASS.includes(k)) throw new Error(`E2E_PASS_ENV names ${k}, which an MCP client does not pass to the server`);
}

/** The SDK's default environment: what StdioClientTransport gives a server besides `env`. */
export const SDK_DEFAULT_ENV = getDefaultEnvironment();
/** Variables a test may hand the server besides SDK_DEFAULT_ENV (settings a user configures). */
export const CONFIG_ENV_NAMES = PASS_ENV;
export { NEVER_PASS };

/**
 * A private sandbox world for one test: a temp dir holding the workspace (created) and the
 * path of the audit folder (not created: the server must make it, 0700), a HOME of its own
 * (the SDK passes HOME; here it names this test's folder, so ~/.config/vestibule/config.yaml
 * and the ~/.vestibule defaults are the test's), and the environment the server is started
 * with: SDK_DEFAULT_ENV plus the client config's settings, nothing else.
 */
export function makeWorld(t, extraEnv = {}) {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'vst-e2e-'));
    const ws = path.join(root, 'ws');
    const audit = path.join(root, 'audit');
    const home = path.join(root, 'home');
    fs.mkdirSync(ws, { mode: 0o700 });
    fs.mkdirSync(home, { mode: 0o700 });
    const env = {
        ...SDK_DEFAULT_ENV,
        HOME: home,
        VESTIBULE_BACKEND: BACKEND,
        VESTIBULE_WORKSPACE: ws,
        VESTIBULE_AUDIT_DIR: audit,
    };
    for (const k of PASS_ENV) if (process.env[k] !== undefined) env[k] = process.env[k];
    Object.assign(env, extraEnv);
    for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
    for (const k of NEVER_PASS) {
        if (k in env) throw new Error(`the test hands ${k} to the server; an MCP client would not`);
    }
    // A server started as root runs code as VESTIBULE_RUN_AS: the workspace is that user's
    // folder, as on a real machine.
    const runAs = /^(\d+):(\d+)$/.exec(env.VESTIBULE_RUN_AS || '');
    if (process.getuid() === 0 && runAs) fs.chownSync(ws, Number(runAs[1]), Number(runAs[2]));
    const world = { root, ws, audit, home, env, clients: [] };
    t?.after(async () => {
        for (const c of world.clients) await c.close().catch(() => {});
        for (const c of world.clients) if (c.pid) await serverGone(c.pid, 3000);
        reapMarkers();
        const reports = world.clients.flatMap((c) => c.sanitizerReports());
        if (reports.length) {
            fs.rmSync(root, { recursive: true, force: true, maxRetries: 3 });
            throw new Error(`the server printed sanitizer reports:\n${world.clients.map((c) => c.stderr()).join('\n')}`);
        }
        // Sandboxed code may leave read-only folders behind.
        fs.rmSync(root, { recursive: true, force: true, maxRetries: 3 });
    });
    return world;
}

// Record every message the server sends, whatever the SDK does with it.
function tap(transport, log) {
    let handler;
    Object.defineProperty(transport, 'onmessage', {
        configurable: true,
        get: () => handler && ((m, extra) => { log.push(m); return handler(m, extra); }),
        set: (h) => { handler = h; },
    });
}

function collectStderr(transport) {
    const chunks = [];
    transport.stderr?.on('data', (d) => chunks.push(Buffer.from(d)));
    return () => Buffer.concat(chunks).toString('utf8');
}

/**
 * A connected SDK client plus what the test needs to look at: the raw messages received,
 * the server's stderr, its pid, and close() which also checks the server went away.
 */
class Conn {
    constructor(client, transport, received, stderr, sdk) {
        Object.assign(this, { client, transport, received, stderr, sdk });
        this.pid = transport.pid;
    }

    async close() {
        if (this.closed) return;
        this.closed = true;
        await this.client.close();
    }

    /**
     * The names of the variables the server process was started with, read from
     * /proc/PID/environ (the same user may read it): what the client really passed, after the
     * SDK merged its default environment with the config's `env`.
     */
    serverEnvNames() {
        const raw = fs.readFileSync(`/proc/${this.pid}/environ`, 'latin1');
        return raw.split('\0').filter(Boolean).map((kv) => kv.slice(0, kv.indexOf('=')));
    }

    /** The sanitizer or crash reports the server printed, if any. */
    sanitizerReports() {
        return this.stderr().split('\n').filter((l) =>
            /ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: (Address|Undefined)/.test(l));
    }
}

/**
 * connectV1() - the v1 SDK (@modelcontextprotocol/sdk), legacy handshake. @version forces
 * the protocolVersion the initialize request offers (the SDK always offers its newest).
 */
export async function connectV1(world, { version, timeout } = {}) {
    const transport = new StdioV1({ command: BIN, args: [], env: world.env, stderr: 'pipe' });
    const stderr = collectStderr(transport);
    const received = [];
    tap(transport, received);
    const send = transport.send.bind(transport);
    transport.send = (msg, opts) => {
        if (version && msg.method === 'initialize') msg = { ...msg, params: { ...msg.params, protocolVersion: version } };
        return send(msg, opts);
    };
    const client = new ClientV1({ name: 'vestibule-e2e-v1', version: '0.0.0' }, { capabilities: {} });
    await client.connect(transport, timeout ? { timeout } : undefined);
    const conn = new Conn(client, transport, received, stderr, 'v1');
    world.clients.push(conn);
    return conn;
}

/**
 * connectV2() - the v2 client (@modelcontextprotocol/client).
 * @mode: 'legacy' (initialize), 'auto' (server/discover probe, then the modern era if the
 *        server offers it) or { pin: '2026-07-28' } (stateless modern only).
 * @versions: supportedProtocolVersions; the legacy handshake offers the first 2025-era entry.
 */
export async function connectV2(world, { mode = { pin: MODERN_VERSION }, versions, timeout } = {}) {
    const transport = new StdioV2({ command: BIN, args: [], env: world.env, stderr: 'pipe' });
    const stderr = collectStderr(transport);
    const received = [];
    tap(transport, received);
    const opts = { capabilities: {}, versionNegotiation: { mode } };
    if (versions) opts.supportedProtocolVersions = versions;
    const client = new ClientV2({ name: 'vestibule-e2e-v2', version: '0.0.0' }, opts);
    await client.connect(transport, timeout ? { timeout } : undefined);
    const conn = new Conn(client, transport, received, stderr, 'v2');
    world.clients.push(conn);
    return conn;
}

/** connect() - the client most tests use: v2 pinned to the stateless 2026-07-28 revision. */
export const connect = (world, o = {}) => connectV2(world, { mode: { pin: MODERN_VERSION }, ...o });

/** The text of a tool result (every text block, joined). */
export function textOf(result) {
    assert.ok(Array.isArray(result.content), 'content[] is always present');
    return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

/** runCode() - call run_code; returns { result, text, ms }. */
export async function runCode(conn, language, code, { timeout_seconds, ...opts } = {}) {
    const args = { language, code };
    if (timeout_seconds !== undefined) args.timeout_seconds = timeout_seconds;
    const t0 = performance.now();
    const result = await callTool(conn, 'run_code', args, opts);
    return { result, text: textOf(result), ms: performance.now() - t0 };
}

/** callTool() - one tools/call through either SDK (their signatures differ). */
export function callTool(conn, name, args, opts = {}) {
    const params = { name, arguments: args };
    // The SDKs' 60 s default is too tight for a slow engine on a loaded machine.
    opts = { timeout: 180_000, ...opts };
    return conn.sdk === 'v1' ? conn.client.callTool(params, undefined, opts) : conn.client.callTool(params, opts);
}

export async function readWorkspace(conn, p) {
    const result = await callTool(conn, 'read_workspace', { path: p });
    return { result, text: textOf(result) };
}

/** The result contract's tail: the last line is exactly "isolation: <expected grade>". */
export function assertIsolation(text, grade = EXPECT_GRADE) {
    const lines = text.trimEnd().split('\n');
    assert.equal(lines.at(-1), `isolation: ${grade}`, `last line of the result must be the isolation line:\n${text}`);
    assert.match(text, /^usage: wall /m, `a usage line:\n${text}`);
}

/**
 * assertModelSees() - what Claude Code 2.1.x and Codex CLI 0.17x give their model when a result
 * has structuredContent: that object alone (docs/design/results.md). Checks it holds the grade
 * and its reason as the text does, no null anywhere, each usage figure or why it was not
 * measured, and every fact string in the text's words. Returns structuredContent.
 */
export function assertModelSees(result, grade = EXPECT_GRADE) {
    const s = result.structuredContent;
    const text = textOf(result);
    assert.equal(typeof s, 'object', `run_code results carry structuredContent:\n${text}`);
    const noNull = (v, p) => {
        assert.notEqual(v, null, `${p} is null: a portable result leaves a field out instead`);
        if (typeof v === 'object') for (const [k, x] of Object.entries(v)) noNull(x, `${p}.${k}`);
    };
    noNull(s, 'structuredContent');
    assert.equal(s.isolation, grade, `structuredContent.isolation:\n${JSON.stringify(s, null, 1)}`);
    const m = /^([a-z-]+)(?: \((.*)\))?$/s.exec(grade);
    assert.equal(s.isolation_grade, m[1]);
    assert.equal(s.isolation_reason, m[2], 'the grade\'s reason, apart');
    assert.ok(typeof s.outcome_text === 'string' && text.includes(`\n${s.outcome_text}\n`), `outcome_text in the text:\n${text}`);
    assert.equal(typeof s.usage.wall_ms, 'number');
    for (const f of ['cpu_ms', 'mem_peak_bytes', 'pids_peak']) {
        const why = s.usage[`${f}_not_measured`];
        assert.ok((f in s.usage) !== (why !== undefined), `usage.${f} or usage.${f}_not_measured, exactly one`);
        if (why !== undefined) assert.ok(text.includes(`not measured: ${why}`), `the reason for ${f} in the text's words:\n${text}`);
    }
    for (const k of ['limits_hit', 'out_of_memory', 'blocked_syscalls', 'blocked_reporting_stopped', 'audit', 'stdout_truncated', 'stderr_truncated']) {
        if (s[k] !== undefined) assert.ok(text.includes(s[k]), `${k} "${s[k]}" in the text's words:\n${text}`);
    }
    for (const n of s.notes ?? []) assert.ok(text.includes(`\nnote: ${n}\n`), `note "${n}" in the text`);
    for (const st of ['stdout', 'stderr']) {
        assert.equal(typeof s[st], 'string');
        assert.ok(s[`${st}_bytes_shown`] <= s[`${st}_bytes`], `${st}: shown <= written`);
        assert.equal(s[`${st}_truncated`] !== undefined, s[`${st}_bytes_shown`] < s[`${st}_bytes`], `${st}: cut iff a truncation note`);
    }
    return s;
}

export function assertExitCode(text, code) {
    assert.match(text, new RegExp(`^exit code: ${code}$`, 'm'), `expected "exit code: ${code}" in:\n${text}`);
}

export function assertBlocked(result, ...mustName) {
    const text = textOf(result);
    assert.equal(result.isError, true, `a refused call is an error result:\n${text}`);
    assert.match(text, /^Blocked: /, `a refused call starts with "Blocked: ":\n${text}`);
    assert.doesNotMatch(text, /^isolation:/m, `a Blocked reply ran nothing and has no isolation line:\n${text}`);
    for (const s of mustName) assert.ok(text.includes(s), `the Blocked text must name ${s}:\n${text}`);
    return text;
}

/**
 * pids of host processes whose command line contains @marker (any pid namespace). On the gvisor
 * backend the run's processes are tasks of gVisor's Sentry, which the host never sees: there the
 * sandbox's own host processes (runsc, its user-namespace child, the gofer and the sandbox, each
 * naming the run's /tmp/vestibule-gvisor-* folder) stand for them, since every task dies with
 * the sandbox process (the files run one test at a time: run.mjs --test-concurrency=1).
 */
// gvisor: the program's processes live in the Sentry, invisible here; runsc's own processes name
// their sandbox's folder (/tmp/vestibule-gvisor-XXXXXX, src/gvisor/backend.c) on their command
// line. The folders of a marker's runs are the ones whose code/ holds the marker, remembered once
// seen (the folder goes at the end, the processes must go with it). Matching every
// /tmp/vestibule-gvisor- process instead counted other servers' sandboxes (CI runs the agreement
// stage's gvisor runs beside this one): "still alive 3 s after the cancel" in the 2026-12-02 dry run.
// A session's cells reach its sandbox through FIFOs, never as a file in code/: a session's folder
// (the one with a chan/ folder, src/gvisor/cells.c) is the marker's when its runsc descends from
// this test process (the server the test started), seen while it lives; the file runs one test
// at a time, so the live sessions of this process are the test's.
const gvisorFolders = new Map();
function descendsFromUs(pid) {
    for (let p = pid, n = 0; p > 1 && n < 64; n++) {
        if (p === process.pid) return true;
        let stat;
        try { stat = fs.readFileSync(`/proc/${p}/stat`, 'latin1'); } catch { return false; }
        p = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    }
    return false;
}
function gvisorSessionFolders() {
    const dirs = new Set();
    for (const e of fs.readdirSync('/proc')) {
        if (!/^\d+$/.test(e)) continue;
        let cmd;
        try { cmd = fs.readFileSync(`/proc/${e}/cmdline`, 'latin1'); } catch { continue; }
        const m = /\/tmp\/vestibule-gvisor-[A-Za-z0-9]{6}/.exec(cmd);
        if (m && !dirs.has(m[0]) && fs.existsSync(`${m[0]}/chan`) && descendsFromUs(Number(e))) dirs.add(m[0]);
    }
    return dirs;
}
function gvisorFoldersOf(marker) {
    let set = gvisorFolders.get(marker);
    if (!set) gvisorFolders.set(marker, (set = new Set()));
    let names = [];
    try { names = fs.readdirSync('/tmp').filter((e) => e.startsWith('vestibule-gvisor-')); } catch { /* none */ }
    for (const e of names) {
        const dir = `/tmp/${e}`;
        if (set.has(dir)) continue;
        try {
            for (const f of fs.readdirSync(`${dir}/code`))
                if (fs.readFileSync(`${dir}/code/${f}`, 'latin1').includes(marker)) set.add(dir);
        } catch { /* another user's, or gone */ }
    }
    if (set.size === 0) for (const d of gvisorSessionFolders()) set.add(d);
    return [...set];
}

export function pidsWithMarker(marker) {
    const found = [];
    const want = BACKEND === 'gvisor' ? gvisorFoldersOf(marker).map((d) => `${d}/`) : [marker];
    if (want.length === 0) return found;
    for (const e of fs.readdirSync('/proc')) {
        if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
        let cmd;
        try { cmd = fs.readFileSync(`/proc/${e}/cmdline`, 'latin1'); } catch { continue; }
        if (!want.some((w) => cmd.includes(w))) continue;
        if (BACKEND === 'gvisor' && gvisorSpareWaiting(cmd)) continue;
        found.push(Number(e));
    }
    return found;
}

export { sleep, waitFor }; // (wait.mjs)

/**
 * gvisor: does @cmd name a sandbox folder that is a warm spare still waiting for its code (no
 * program file in its code folder yet: src/gvisor/spare.h)? Such a sandbox ran nothing of any
 * call, and the server keeps one after each call: it is not a run's leftover.
 */
function gvisorSpareWaiting(cmd) {
    const m = /\/tmp\/vestibule-gvisor-[A-Za-z0-9]{6}/.exec(cmd);
    if (!m) return false;
    try {
        const names = fs.readdirSync(`${m[0]}/code`);
        return !names.some((n) => /^main\.(py|js|sh)$/.test(n));
    } catch { return false; }
}

const markers = new Set();

/** A unique string to put in a run's process names (argv[0]); left-overs are killed after the test. */
export function uniqueMarker(tag) {
    const m = `vst-e2e-${tag}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
    markers.add(m);
    return m;
}

// After a failed test: kill, by pid, what a broken server left running, so it cannot
// disturb the next tests (a test has already failed if any are found).
function reapMarkers() {
    for (const m of markers) {
        for (const pid of pidsWithMarker(m)) {
            try { process.kill(pid, 'SIGKILL'); } catch { /* gone, or not ours */ }
        }
    }
    markers.clear();
}

export const sha256 = (s) => createHash('sha256').update(s).digest('hex');

/** Is @pid alive (and not a zombie)? */
export function alive(pid) {
    try {
        const st = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
        return !/^\d+ \(.*\) Z /.test(st);
    } catch { return false; }
}

/** Wait for the server process @pid to exit; true when it did within @ms. */
export const serverGone = (pid, ms) => waitFor(() => !alive(pid), ms);

// The container engine's socket as the server picks it (DOCKER_HOST, else the runtime's).
export function engineSocket() {
    const h = process.env.DOCKER_HOST || process.env.CONTAINER_HOST || '';
    if (h.startsWith('unix://')) return h.slice('unix://'.length);
    return process.env.VESTIBULE_RUNTIME === 'podman' ? '/run/podman/podman.sock' : '/var/run/docker.sock';
}

/**
 * ourContainers() - every container (all states) labelled vestibule.run=1, of any server, asked
 * of the engine itself over its unix socket (GET /containers/json, Docker Engine API):
 * [{ id, running, owner }] where owner is the vestibule.owner label ("<host>:<pid>:<start>",
 * src/engine/conn.c; "" when it has none). Rejects when the answer is not a JSON list.
 */
export function ourContainers() {
    const filters = encodeURIComponent(JSON.stringify({ label: ['vestibule.run=1'] }));
    return new Promise((resolve, reject) => {
        http.get({ socketPath: engineSocket(), path: `/containers/json?all=1&filters=${filters}` }, (res) => {
            let body = '';
            res.on('data', (d) => { body += d; });
            res.on('end', () => {
                try {
                    resolve(JSON.parse(body).map((c) => ({ id: c.Id, running: c.State === 'running', owner: c.Labels?.['vestibule.owner'] || '' })));
                } catch (e) { reject(new Error(`engine answered ${res.statusCode}: ${body.slice(0, 200)}`)); }
            });
        }).on('error', reject);
    });
}

/** containersOf() - ourContainers() of server process @pid (the pid in their owner label): [{ id, running }]. */
export async function containersOf(pid) {
    return (await ourContainers()).filter((c) => c.owner.split(':')[1] === String(pid)).map(({ id, running }) => ({ id, running }));
}
