// The egress allowlist (network: "allowlist"): the run's only way out is the proxy on
// 127.0.0.1:3128 of its own network namespace; the proxy lets through only the hosts and ports
// of VESTIBULE_EGRESS_ALLOW / VESTIBULE_EGRESS_PORTS, refuses private addresses behind a name
// unless VESTIBULE_EGRESS_PIN pins it, and every verdict reaches the model (the egress: line,
// structuredContent.egress) and the audit log. Nothing leaves this machine: the only upstream
// is a local HTTP server (a PyPI simple index with a wheel built here) reached through a pin;
// every other host is refused before the proxy resolves or connects anything.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';

import { BACKEND, REMOTE_ENGINE, assertBlocked, assertExitCode, assertIsolation, assertModelSees, callTool, connect, makeWorld, runCode, sleep, textOf, waitFor } from './lib.mjs';

const NATIVE = BACKEND === 'native';
const GVISOR = BACKEND === 'gvisor';
// The container backend serves the allowlist too; its runs of these tests come with the CI
// stage egress-container (E2E_EGRESS=1), which holds the images with pip, for time. The gvisor
// backend serves it with the container backend's relay (docs/design/egress.md, "gVisor").
const SERVES = NATIVE || GVISOR || (BACKEND === 'container' && process.env.E2E_EGRESS === '1');
const MIRROR = 'pypi.vst.test'; // .test never resolves (RFC 6761): only the pin makes it work
const PKG = 'vstegresspkg';

// A wheel built here with zipfile (PEP 427: the package, METADATA, WHEEL, RECORD).
function buildWheel(dir) {
    const py = `
import base64, hashlib, sys, zipfile
name, out = sys.argv[1], sys.argv[2]
files = {
    f"{name}/__init__.py": "VALUE = 'installed through the egress proxy'\\n",
    f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\\nName: {name}\\nVersion: 1.0\\n",
    f"{name}-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: vst-e2e\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
rec = []
with zipfile.ZipFile(out, "w") as z:
    for p, data in files.items():
        z.writestr(p, data)
        d = base64.urlsafe_b64encode(hashlib.sha256(data.encode()).digest()).rstrip(b"=").decode()
        rec.append(f"{p},sha256={d},{len(data.encode())}")
    rec.append(f"{name}-1.0.dist-info/RECORD,,")
    z.writestr(f"{name}-1.0.dist-info/RECORD", "\\n".join(rec) + "\\n")
`;
    const whl = path.join(dir, `${PKG}-1.0-py3-none-any.whl`);
    const r = spawnSync('python3', ['-c', py, PKG, whl], { encoding: 'utf8' });
    assert.equal(r.status, 0, `building the test wheel: ${r.stderr}`);
    return whl;
}

// The local mirror: /simple/<pkg>/ links the wheel; /hello says hello; anything else 404.
async function startMirror(t) {
    const dir = fs.mkdtempSync('/tmp/vst-e2e-mirror-');
    const whl = buildWheel(dir);
    const hits = [];
    const held = [];
    const server = http.createServer((req, res) => {
        hits.push(req.url);
        if (req.url === '/hold') { // answered by release(): a run that waits for the test
            held.push(res);
        } else if (req.url === `/simple/${PKG}/`) {
            res.writeHead(200, { 'content-type': 'text/html' });
            res.end(`<html><body><a href="/files/${path.basename(whl)}">${path.basename(whl)}</a></body></html>`);
        } else if (req.url === `/files/${path.basename(whl)}`) {
            res.writeHead(200, { 'content-type': 'application/octet-stream' });
            res.end(fs.readFileSync(whl));
        } else if (req.url.startsWith('/hello')) {
            res.writeHead(200, { 'content-type': 'text/plain' });
            res.end(`hello from the mirror ${req.url}\n`);
        } else {
            res.writeHead(404);
            res.end('not here\n');
        }
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    t.after(() => { server.close(); fs.rmSync(dir, { recursive: true, force: true }); });
    const release = () => held.splice(0).forEach((res) => { res.writeHead(200); res.end('go\n'); });
    t.after(release);
    return { port: server.address().port, hits, release };
}

// The settings a user would write into the client config's env.
const egressEnv = (port) => ({
    VESTIBULE_EGRESS_ALLOW: `${MIRROR},localhost`,
    VESTIBULE_EGRESS_PIN: `${MIRROR}=127.0.0.1:${port}`,
});

const run = (conn, code, opts = {}) => runCode(conn, 'python', code, { ...opts });
async function callNet(conn, code, { network = 'allowlist', timeout_seconds = 30 } = {}) {
    const result = await callTool(conn, 'run_code', { language: 'python', code, network, timeout_seconds });
    return { result, text: textOf(result) };
}

// A raw proxy request from inside, so no client library decides anything: the status line and
// the body (a refusal names the host and the reason).
const RAW = `
import socket, sys
def ask(line):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        s.sendall(line.encode() + b"\\r\\nHost: x\\r\\n\\r\\n")
        data = b""
        while True:
            b = s.recv(4096)
            if not b: break
            data += b
            if line.startswith("CONNECT") and b"\\r\\n\\r\\n" in data: break
        s.close()
        head, _, body = data.partition(b"\\r\\n\\r\\n")
        return head.split(b"\\r\\n")[0].decode() + " | " + body.decode().strip()
    except Exception as e:
        return "ERR " + type(e).__name__ + " " + str(e)
`;

function hostsOf(result) {
    const s = assertModelSees(result);
    assert.equal(typeof s.egress, 'object', `structuredContent.egress is there:\n${JSON.stringify(s, null, 1)}`);
    assert.equal(s.egress.policy, 'allowlist');
    return s.egress.hosts;
}

function auditEgress(world) {
    const files = fs.readdirSync(world.audit).filter((f) => f.endsWith('.jsonl'));
    const ends = files.flatMap((f) => fs.readFileSync(path.join(world.audit, f), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)))
        .filter((r) => r.egress);
    return ends.map((r) => r.egress);
}

test('network "allowlist" on a backend without the egress proxy is Blocked, never run open', { skip: (NATIVE || GVISOR) && `the ${BACKEND} backend serves the allowlist (tests below)` }, async (t) => {
    if (BACKEND === 'container') return t.skip('the container backend serves the allowlist (E2E_EGRESS=1 runs the tests below on it)');
    const conn = await connect(makeWorld(t, { VESTIBULE_EGRESS_ALLOW: MIRROR }));
    const r = await callNet(conn, 'print("ran")');
    assertBlocked(r.result, 'allowlist', BACKEND);
    // control: the same call without network runs
    const c = await run(conn, 'print("ran")');
    assertExitCode(c.text, 0);
});

test('an invalid egress setting blocks every call, naming it', async (t) => {
    const conn = await connect(makeWorld(t, { VESTIBULE_EGRESS_PORTS: '443,http' }));
    const r = await run(conn, 'print(1)');
    assertBlocked(r.result, 'VESTIBULE_EGRESS_PORTS', 'http');
    const conn2 = await connect(makeWorld(t, { VESTIBULE_EGRESS_ALLOW: 'a.example', VESTIBULE_EGRESS_PIN: 'b.example=127.0.0.1:1' }));
    assertBlocked((await run(conn2, 'print(1)')).result, 'VESTIBULE_EGRESS_PIN', 'b.example');
});

test('an allowed host is reached through the proxy; without network the same code has no route', { skip: !SERVES && `backend ${BACKEND}` }, async (t) => {
    const m = await startMirror(t);
    const w = makeWorld(t, egressEnv(m.port));
    const conn = await connect(w);
    const code = `
import os, urllib.request
print("proxy", os.environ.get("HTTPS_PROXY"))
try:
    print(urllib.request.urlopen("http://${MIRROR}/hello-allowed", timeout=10).read().decode().strip())
except Exception as e:
    print("FAILED", type(e).__name__, e)
`;
    const on = await callNet(conn, code);
    assertExitCode(on.text, 0);
    assert.match(on.text, /^hello from the mirror \/hello-allowed$/m, on.text);
    assert.match(on.text, /^proxy http:\/\/127\.0\.0\.1:3128$/m);
    assert.match(on.text, new RegExp(`^egress: allowlist; ${MIRROR.replace(/\./g, '\\.')}:80 allowed \\(1 connection, `, 'm'), on.text);
    const hosts = hostsOf(on.result);
    assert.equal(hosts.length, 1, JSON.stringify(hosts));
    assert.deepEqual({ ...hosts[0], bytes_up: hosts[0].bytes_up > 0, bytes_down: hosts[0].bytes_down > 0 },
        { host: MIRROR, port: 80, verdict: 'allowed', connections: 1, bytes_up: true, bytes_down: true });
    assert.ok(m.hits.includes('/hello-allowed'), 'the mirror saw the request');
    assertIsolation(on.text);
    const audit = auditEgress(w);
    assert.equal(audit.length, 1, 'the end record carries the egress decisions');
    assert.equal(audit[0].decisions[0].host, MIRROR);
    assert.equal(audit[0].decisions[0].verdict, 'allowed');

    // control: network none (the default): no proxy variable, no listener, no route
    const off = await run(conn, code);
    assert.match(off.text, /^proxy None$/m);
    assert.match(off.text, /^FAILED URLError/m, `no route without the allowlist:\n${off.text}`);
    assert.doesNotMatch(off.text, /^egress:/m, 'no egress line when the call asked for no network');
    assert.equal(off.result.structuredContent.egress, undefined);
});

test('node code (an image with no python3): an allowed host is reached, an unlisted one refused', { skip: !(SERVES && BACKEND === 'container' && REMOTE_ENGINE) && 'the bridge is the remote engine\'s (the local relay\'s node path: test_engine_egress relay_node_carries_bytes)' }, async (t) => {
    // our node image holds python3 (Debian's npm pulls it in): a copy without it, on the
    // run's engine, named for this test run and removed after it
    const tag = `vst-e2e-nopy-${process.pid}:test`;
    const df = 'FROM vestibule/node:bookworm\nUSER 0\nRUN rm -f /usr/bin/python3 /usr/bin/python3.*\nUSER 1000:1000\n';
    const b = spawnSync('docker', ['build', '-q', '-t', tag, '-'], { input: df, encoding: 'utf8', timeout: 120000 });
    if (b.error?.code === 'ENOENT') return t.skip('no docker CLI to derive the image');
    assert.equal(b.status, 0, `docker build: ${b.stderr}`);
    t.after(() => spawnSync('docker', ['rmi', '-f', tag]));
    const m = await startMirror(t);
    const w = makeWorld(t, { ...egressEnv(m.port), VESTIBULE_IMAGE_NODE: tag });
    const conn = await connect(w);
    // a raw proxy request from node: the status line and the body's first line
    const ask = (host, p) => `await new Promise((ok) => { const r = require('node:http').request({ host: '127.0.0.1', port: 3128, path: 'http://${host}${p}', headers: { host: '${host}' }, timeout: 10000 }, (res) => { let b = ''; res.on('data', (d) => { b += d; }); res.on('end', () => { console.log(res.statusCode, b.split('\\n')[0]); ok(); }); }); r.on('error', (e) => { console.log('ERR', e.code); ok(); }); r.end(); });`;
    const code = `(async () => {
try { require('child_process').execFileSync('python3', ['-c', '1']); console.log('python3: yes'); } catch { console.log('python3: no'); }
${ask(MIRROR, '/hello-node')}
${ask('unlisted.vst.test', '/x')}
})();`;
    const on = await callTool(conn, 'run_code', { language: 'node', code, network: 'allowlist', timeout_seconds: 60 });
    const text = textOf(on);
    assertExitCode(text, 0);
    assert.match(text, /^python3: no$/m, `the node image has no python3:\n${text}`);
    assert.match(text, /^200 hello from the mirror \/hello-node$/m, text);
    assert.match(text, /^403 .*unlisted\.vst\.test/m, text);
    assert.ok(m.hits.includes('/hello-node'), 'the mirror saw the request');
    assert.ok(!m.hits.includes('/x'), 'the refused request never reached the mirror');
    const hosts = hostsOf(on);
    assert.deepEqual(hosts.map((h) => [h.host, h.verdict]).sort(), [[MIRROR, 'allowed'], ['unlisted.vst.test', 'denied']].sort(), JSON.stringify(hosts));

    // control: network none: no listener, the same requests fail
    const off = await callTool(conn, 'run_code', { language: 'node', code, timeout_seconds: 60 });
    assert.match(textOf(off), /^ERR ECONNREFUSED$/m, textOf(off));
    assert.doesNotMatch(textOf(off), /hello from the mirror/);
});

test('refusals: an unlisted host, an IP literal, a listed host on an unlisted port, a private address behind an unpinned name; each with its reason in the result and the audit', { skip: !SERVES && `backend ${BACKEND}` }, async (t) => {
    const m = await startMirror(t);
    const w = makeWorld(t, egressEnv(m.port));
    const conn = await connect(w);
    const code = `${RAW}
print("unlisted:", ask("CONNECT evil.example:443 HTTP/1.1"))
print("literal:", ask("CONNECT 93.184.216.34:443 HTTP/1.1"))
print("port:", ask("CONNECT ${MIRROR}:8443 HTTP/1.1"))
print("private:", ask("GET http://localhost/hello HTTP/1.1"))
print("pinned:", ask("GET http://${MIRROR}/hello-pinned HTTP/1.0"))
# no route but the proxy: a direct connection to an address, and DNS, fail inside
try:
    socket.create_connection(("93.184.216.34", 443), timeout=3); print("direct: CONNECTED")
except OSError as e:
    print("direct:", e.errno, e.strerror)
try:
    socket.create_connection(("127.0.0.1", ${m.port}), timeout=3); print("host loopback: CONNECTED")
except OSError as e:
    print("host loopback:", e.errno, e.strerror)
try:
    print("dns:", socket.getaddrinfo("${MIRROR}", 80))
except OSError as e:
    print("dns: fails", type(e).__name__)
`;
    const r = await callNet(conn, code);
    assertExitCode(r.text, 0);
    assert.match(r.text, /^unlisted: HTTP\/1\.1 403 Forbidden \| vestibule egress: refused evil\.example:443: not in VESTIBULE_EGRESS_ALLOW$/m, r.text);
    assert.match(r.text, /^literal: HTTP\/1\.1 403 Forbidden \| vestibule egress: refused 93\.184\.216\.34:443: IP literal not in the allowlist$/m, r.text);
    assert.match(r.text, new RegExp(`^port: HTTP/1\\.1 403 Forbidden \\| vestibule egress: refused ${MIRROR}:8443: port not allowed$`, 'm'), r.text);
    assert.match(r.text, /^private: HTTP\/1\.1 403 Forbidden \| vestibule egress: refused localhost:80: resolves to a private address \(127\.0\.0\.1, loopback/m, r.text);
    // control: the pinned name (also 127.0.0.1) is let through, in the same run
    assert.match(r.text, /^pinned: HTTP\/1\.1 200 OK \| hello from the mirror \/hello-pinned$/m, r.text);
    // gVisor's netstack answers EHOSTUNREACH where Linux answers ENETUNREACH: no route either way
    assert.match(r.text, GVISOR ? /^direct: 113 No route to host$/m : /^direct: 101 Network is unreachable$/m, r.text);
    assert.match(r.text, /^host loopback: 111 Connection refused$/m, 'the host\'s loopback is not the run\'s');
    assert.match(r.text, /^dns: fails gaierror$/m, r.text);
    assert.ok(!m.hits.some((h) => h.includes('/hello') && !h.includes('pinned')), `only the pinned request reached the mirror: ${m.hits}`);

    const want = [
        ['evil.example', 443, 'not in VESTIBULE_EGRESS_ALLOW'],
        ['93.184.216.34', 443, 'IP literal not in the allowlist'],
        [MIRROR, 8443, 'port not allowed'],
        ['localhost', 80, 'resolves to a private address'],
    ];
    const hosts = hostsOf(r.result);
    const audit = auditEgress(w)[0].decisions;
    for (const [host, port, reason] of want) {
        const e = hosts.find((h) => h.host === host && h.port === port);
        assert.ok(e, `${host}:${port} in structuredContent.egress.hosts: ${JSON.stringify(hosts)}`);
        assert.equal(e.verdict, 'denied');
        assert.equal(e.reason, reason);
        assert.ok(r.text.includes(`${host}:${port} denied: ${reason} (1 connection)`), `${host}:${port} in the egress: line:\n${r.text}`);
        const a = audit.find((d) => d.host === host && d.port === port);
        assert.ok(a && a.verdict === 'denied' && a.reason === reason, `${host}:${port} in the audit: ${JSON.stringify(audit)}`);
    }
    const ok = hosts.find((h) => h.host === MIRROR && h.port === 80);
    assert.equal(ok?.verdict, 'allowed', 'the control went through and is listed allowed');
});

// pip through the proxy, into /workspace/.local, imported by the next call without network.
// The sandbox's own pip when the image has it (python3-pip); else the host's pip (pure
// Python) copied into the workspace and run from there; else a skip that says so.
test('pip install through the allowlist, then import in the next call without network', { skip: !SERVES && `backend ${BACKEND}` }, async (t) => {
    const m = await startMirror(t);
    const w = makeWorld(t, egressEnv(m.port));
    const conn = await connect(w);
    const probe = await run(conn, 'import importlib.util\nprint("pip:", importlib.util.find_spec("pip") is not None)');
    let prefix = '';
    if (/^pip: False$/m.test(probe.text)) {
        const host = spawnSync('python3', ['-c', 'import os, pip; print(os.path.dirname(pip.__file__))'], { encoding: 'utf8' });
        if (host.status !== 0) return t.skip('no pip in the python rootfs (python3-pip arrives with the image change) and none on the host to copy in');
        fs.cpSync(host.stdout.trim(), path.join(w.ws, '.pipsrc', 'pip'), { recursive: true });
        prefix = 'import sys; sys.path.insert(0, "/workspace/.pipsrc")\n';
    }
    const install = await callNet(conn, `${prefix}import sys, runpy
sys.argv = ["pip", "install", "--index-url", "http://${MIRROR}/simple/", "--trusted-host", "${MIRROR}", "${PKG}"]
try:
    runpy.run_module("pip", run_name="__main__")
except SystemExit as e:
    print("pip exit", e.code)
`, { timeout_seconds: 60 });
    assert.match(install.text, /^pip exit 0$/m, install.text);
    assert.match(install.text, new RegExp(`Successfully installed ${PKG}-1\\.0`), install.text);
    assert.ok(m.hits.includes(`/simple/${PKG}/`), `pip asked the mirror's index: ${m.hits}`);
    const hosts = hostsOf(install.result);
    assert.ok(hosts.some((h) => h.host === MIRROR && h.verdict === 'allowed'), JSON.stringify(hosts));
    const use = await run(conn, `import ${PKG}\nprint(${PKG}.VALUE, ${PKG}.__file__)`);
    assertExitCode(use.text, 0);
    assert.match(use.text, new RegExp(`^installed through the egress proxy /workspace/\\.local/lib/python3[.0-9]*/site-packages/${PKG}/__init__\\.py$`, 'm'), use.text);
});

// The container's relay decides nothing: code that kills it and speaks to the proxy's socket
// itself, or that then listens on 127.0.0.1:3128 in its place, reaches exactly what the proxy
// allows (docs/design/egress.md, "Container backend"). The control in the same run: the same
// socket carries an allowed request through, so the probe could have succeeded.
test('container, gvisor: code that kills the relay and uses the proxy socket itself gains nothing', { skip: (!(SERVES && (BACKEND === 'container' || GVISOR)) && `backend ${BACKEND}: the relay is the container and gvisor backends'`) || (REMOTE_ENGINE && 'a remote engine has no proxy socket in the code folder (the bridge test below)') }, async (t) => {
    const m = await startMirror(t);
    const w = makeWorld(t, egressEnv(m.port));
    const conn = await connect(w);
    const code = `
import os, signal, socket, time
def ask(line, family=socket.AF_UNIX, addr="/sandbox/.egress.sock"):
    try:
        s = socket.socket(family, socket.SOCK_STREAM); s.settimeout(10); s.connect(addr)
        s.sendall(line.encode() + b"\\r\\nHost: x\\r\\n\\r\\n")
        data = b""
        while b"\\r\\n\\r\\n" not in data:
            b = s.recv(4096)
            if not b: break
            data += b
        s.close()
        return data.split(b"\\r\\n")[0].decode()
    except Exception as e:
        return "ERR " + type(e).__name__ + " " + str(e)
killed = 0
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            c = open(f"/proc/{p}/cmdline", "rb").read()
            if c.split(b"\\0")[:2] in ([b"python3", b"-Ic"], [b"node", b"-e"]):
                os.kill(int(p), signal.SIGKILL); killed += 1
        except OSError:
            pass
print("relays killed:", killed)
print("unlisted via socket:", ask("CONNECT evil.example:443 HTTP/1.1"))
print("allowed via socket:", ask("GET http://${MIRROR}/hello-socket HTTP/1.1"))
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
for _ in range(300):  # the killed relay's listener goes once it has exited
    try:
        l.bind(("127.0.0.1", 3128)); break
    except OSError:
        time.sleep(0.01)
l.listen(1)
print("3128 is ours now")
print("direct:", ask("GET / HTTP/1.1", socket.AF_INET, ("93.184.216.34", 80)))
`;
    const r = await callNet(conn, code);
    assertExitCode(r.text, 0);
    assert.match(r.text, /^relays killed: [1-9]/m, r.text);
    assert.match(r.text, /^unlisted via socket: HTTP\/1\.1 403/m, r.text);
    assert.match(r.text, /^allowed via socket: HTTP\/1\.1 200/m, `the control: the socket carries an allowed request:\n${r.text}`);
    assert.ok(m.hits.includes('/hello-socket'), 'the allowed request reached the mirror');
    assert.match(r.text, /^3128 is ours now$/m, r.text);
    assert.match(r.text, /^direct: ERR .*(unreachable|Errno 101|Errno 113)/mi, r.text);
    const hosts = hostsOf(r.result);
    assert.ok(hosts.some((h) => h.host === 'evil.example' && h.verdict !== 'allowed'), `the refusal is in the verdicts:\n${JSON.stringify(hosts)}`);
});

// gVisor: the allowlist needs runsc --host-uds=open (the relay connects to the proxy's socket in
// /sandbox), and that flag is the whole sandbox's: the code may then connect(2) to any host unix
// socket whose path it sees in its mounts, the workspace's too (docs/design/egress.md, "gVisor
// backend"; tests/adversarial/server.md). This pins what that opens: a socket bound in the
// workspace by a host process answers an allowlist run (as on native, where a path is not tied
// to a network namespace), never a run without network (the flag is off there: the control that
// the probe reaches it only through the flag); the host's abstract sockets never (they belong to
// the host's network namespace, and the Sentry has its own).
test('gvisor: the host unix sockets an allowlist run can reach are those in its mounts; a run without network reaches none', { skip: !GVISOR && `backend ${BACKEND}: runsc --host-uds is gvisor's` }, async (t) => {
    const m = await startMirror(t);
    const w = makeWorld(t, egressEnv(m.port));
    const tag = `vst-e2e-abstract-${process.pid}`;
    const servers = [];
    for (const where of [path.join(w.ws, 'host.sock'), `\0${tag}`]) {
        const srv = net.createServer((c) => c.end(`HOST-UDS ${where.startsWith('\0') ? 'abstract' : 'workspace'}\n`));
        await new Promise((ok) => srv.listen(where, ok));
        servers.push(srv);
    }
    t.after(() => servers.forEach((srv) => srv.close()));
    const conn = await connect(w);
    const code = `
import socket
for name, addr in (("workspace", "/workspace/host.sock"), ("abstract", "\\0${tag}")):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    try:
        s.connect(addr); print(name + ":", s.recv(64).decode().strip())
    except OSError as e:
        print(name + ":", "ERR", e.errno, e.strerror)
`;
    const on = await callNet(conn, code);
    assertExitCode(on.text, 0);
    assert.match(on.text, /^workspace: HOST-UDS workspace$/m, `--host-uds=open reaches a socket in the workspace:\n${on.text}`);
    assert.match(on.text, /^abstract: ERR 111 /m, `the host's abstract sockets are not the Sentry's:\n${on.text}`);
    const off = await run(conn, code);
    assertExitCode(off.text, 0);
    assert.match(off.text, /^workspace: ERR 111 /m, `without network the flag is off: refused:\n${off.text}`);
    assert.match(off.text, /^abstract: ERR 111 /m, off.text);
});

// A remote engine (the volume path): the bridge is an exec of the server's, as another uid
// than the code. The code can neither signal it nor open its stdin/stdout (controls: it kills a
// child of its own; the bridge carries an allowed request); and when the bridge dies anyway (the
// test kills it through the engine, as code that could would), the code takes 127.0.0.1:3128
// itself and still has no way out: no route, no DNS, nothing listening for it.
test('remote engine: code cannot kill the bridge, and with the bridge killed it gains nothing', { skip: !(SERVES && BACKEND === 'container' && REMOTE_ENGINE) && 'the bridge is the remote engine\'s' }, async (t) => {
    const m = await startMirror(t);
    const w = makeWorld(t, egressEnv(m.port));
    const conn = await connect(w);
    const code = `${RAW}
import os, signal, socket, subprocess, time, urllib.request
me = os.getuid()
bridges = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            c = open(f"/proc/{p}/cmdline", "rb").read().split(b"\\0")
            if c[:2] == [b"python3", b"-Ic"] and os.stat(f"/proc/{p}").st_uid != me: bridges.append(int(p))
        except OSError:
            pass
print("bridges:", len(bridges))
for b in bridges:
    try: os.kill(b, signal.SIGKILL); print("kill bridge: done")
    except OSError as e: print("kill bridge:", type(e).__name__)
    for fd in (0, 1):
        try: open(f"/proc/{b}/fd/{fd}", "wb"); print("open bridge fd: done")
        except OSError as e: print("open bridge fd:", type(e).__name__)
child = subprocess.Popen(["sleep", "30"])
child.kill(); print("kill own child: rc", child.wait())
print("unlisted:", ask("CONNECT evil.example:443 HTTP/1.1"))
print("allowed:", ask("GET http://${MIRROR}/hello-bridge HTTP/1.1"))
urllib.request.urlopen(f"http://${MIRROR}/hello-ready-{socket.gethostname()}-{bridges[0] if bridges else 0}", timeout=10).read()
def listening():
    return " 0100007F:0C38 00000000:0000 0A " in open("/proc/net/tcp").read()
for _ in range(300):
    if not listening(): break
    time.sleep(0.05)
print("bridge gone:", not listening())
print("after:", ask("CONNECT ${MIRROR}:80 HTTP/1.1"))
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 3128)); l.listen(1); print("3128 is ours now")
for addr in (("93.184.216.34", 80), ("10.0.2.2", ${m.port}), ("172.17.0.1", ${m.port})):
    try: socket.create_connection(addr, timeout=3); print("direct", addr[0], ": CONNECTED")
    except OSError as e: print("direct", addr[0], ":", type(e).__name__, e.errno)
try: socket.getaddrinfo("example.com", 80); print("dns: RESOLVED")
except OSError as e: print("dns:", type(e).__name__)
`;
    const pending = callNet(conn, code, { timeout_seconds: 40 });
    let ready;
    assert.ok(await waitFor(() => (ready = m.hits.find((h) => h.startsWith('/hello-ready-'))), 30_000), `the run got going: ${m.hits}`);
    const [, host, pid] = /^\/hello-ready-(.+)-(\d+)$/.exec(ready);
    // the test kills the bridge through the engine as the bridge's own uid (the container's root
    // has no capability to), as code that could would
    const k = spawnSync('docker', ['exec', '-u', '65534:65534', host, 'bash', '-c', `kill -9 ${pid}`], { encoding: 'utf8', env: { ...process.env } });
    assert.equal(k.status, 0, `docker exec kill: ${k.stderr}`);
    const r = await pending;
    assertExitCode(r.text, 0);
    assert.match(r.text, /^bridges: 1$/m, r.text);
    assert.match(r.text, /^kill bridge: PermissionError$/m, r.text);
    assert.doesNotMatch(r.text, /^open bridge fd: done$/m, r.text);
    assert.match(r.text, /^kill own child: rc -9$/m, `the control: the code may kill what is its own:\n${r.text}`);
    assert.match(r.text, /^unlisted: HTTP\/1\.1 403/m, r.text);
    assert.match(r.text, /^allowed: HTTP\/1\.1 200/m, `the control: the bridge carries an allowed request:\n${r.text}`);
    assert.match(r.text, /^bridge gone: True$/m, r.text);
    assert.match(r.text, /^after: ERR .*(ConnectionRefused|Errno 111)/m, r.text);
    assert.match(r.text, /^3128 is ours now$/m, r.text);
    assert.doesNotMatch(r.text, /CONNECTED|RESOLVED/, r.text);
    assert.match(r.text, /^direct 93\.184\.216\.34 : OSError 101$/m, r.text);
    assert.match(r.text, /^dns: gaierror$/m, r.text);
    assert.ok(m.hits.includes('/hello-bridge'), 'the allowed request reached the mirror');
    const hosts = hostsOf(r.result);
    assert.ok(hosts.some((h) => h.host === 'evil.example' && h.verdict !== 'allowed'), `the refusal is in the verdicts:\n${JSON.stringify(hosts)}`);
});

// The proxy's death mid-run closes the run's only way out: the next connection is refused,
// and the result says the proxy ended.
test('the proxy killed in the middle of a run: the next connection is refused (fail closed)', { skip: !SERVES && `backend ${BACKEND}` }, async (t) => {
    const m = await startMirror(t);
    const w = makeWorld(t, egressEnv(m.port));
    const conn = await connect(w);
    // a remote engine's workspace is a volume the test cannot see while the run lives: there
    // the mirror's hit says "ready" and the run waits a fixed 4 s for the kill
    const code = `
import os, time, urllib.request
print("before:", urllib.request.urlopen("http://${MIRROR}/hello-before", timeout=10).read().decode().strip())
open("/workspace/ready", "w").close()
for _ in range(${REMOTE_ENGINE ? 80 : 200}):
    if os.path.exists("/workspace/go"): break
    time.sleep(0.05)
try:
    print("after:", urllib.request.urlopen("http://${MIRROR}/hello-after", timeout=10).read().decode().strip())
except Exception as e:
    print("after: FAILED", e)
try:
    print("again:", urllib.request.urlopen("http://${MIRROR}/hello-again", timeout=10).read().decode().strip())
except Exception as e:
    print("again: FAILED", e)
`;
    const pending = callNet(conn, code);
    assert.ok(await waitFor(() => (REMOTE_ENGINE ? m.hits.includes('/hello-before') : fs.existsSync(path.join(w.ws, 'ready'))), 20_000), 'the run got going');
    const proxies = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
        try {
            const st = fs.readFileSync(`/proc/${p}/stat`, 'latin1');
            const m2 = /^\d+ \((.*)\) \S (\d+) /.exec(st);
            return m2 && m2[1] === 'vst-egress' && Number(m2[2]) === conn.pid;
        } catch { return false; }
    }).map(Number);
    assert.equal(proxies.length, 1, `one proxy, a child of this server (${conn.pid}): ${proxies}`);
    process.kill(proxies[0], 'SIGKILL');
    await sleep(100);
    fs.writeFileSync(path.join(w.ws, 'go'), '');
    const r = await pending;
    assert.match(r.text, /^before: hello from the mirror \/hello-before$/m, r.text);
    // native: the listener died with the proxy (refused); a container: its relay finds the
    // proxy's socket refusing, resets that connection and ends (refused from then on)
    assert.match(r.text, /^after: FAILED .*(Connection refused|Errno 111|Connection reset|Errno 104)/m, `refused, not open:\n${r.text}`);
    assert.match(r.text, /^again: FAILED .*(Connection refused|Errno 111)/m, `refused from then on:\n${r.text}`);
    assert.ok(!m.hits.includes('/hello-after') && !m.hits.includes('/hello-again'), 'nothing reached the mirror after the kill');
    assert.match(r.text, /^egress: the egress proxy ended during the run \(killed by signal 9\)/m, r.text);
    const s = assertModelSees(r.result);
    assert.match(s.egress.note, /killed by signal 9/);
    assert.equal(s.egress.hosts.find((h) => h.host === MIRROR)?.verdict, 'allowed', 'the verdict made before the kill is kept');
});

// Issue 24, High 1 (tests/adversarial/server.md): the proxy inherited every fd of the server
// that was not close-on-exec: on Docker (server as root, proxy as VESTIBULE_RUN_AS) its
// connections to dockerd, which any process of that uid could take with pidfd_getfd(2); on
// every backend the server's stdin and stdout. The proxy may share with the server only its
// record file, its stderr and /dev/null. Where /proc/PID/fd cannot be read (the test user: the
// proxy is not dumpable), that refusal is itself the check; the seccomp filter and no_new_privs
// are read from /proc/PID/status on both.
function linksOf(pid) {
    return fs.readdirSync(`/proc/${pid}/fd`).map((fd) => {
        try { return [fd, fs.readlinkSync(`/proc/${pid}/fd/${fd}`)]; } catch { return [fd, '']; }
    });
}
test('the proxy holds no fd of the server (no Engine API socket, not its stdin/stdout)', { skip: !SERVES && `backend ${BACKEND}` }, async (t) => {
    const m = await startMirror(t);
    const w = makeWorld(t, egressEnv(m.port));
    const conn = await connect(w);
    // a first run, so the server has opened what a run opens (on Docker its Engine API
    // connections); the second run holds its proxy while the test looks
    assertExitCode((await callNet(conn, 'print(1)')).text, 0);
    // a remote engine: the workspace is a volume, so the run says "ready" to the mirror and
    // waits on its /hold, which the test answers
    const code = REMOTE_ENGINE ? `
import urllib.request
print("held:", urllib.request.urlopen("http://${MIRROR}/hold", timeout=25).read().decode().strip())
print("done")
` : `
import os, time
open("/workspace/ready", "w").close()
for _ in range(400):
    if os.path.exists("/workspace/go"): break
    time.sleep(0.05)
print("done")
`;
    const pending = callNet(conn, code);
    assert.ok(await waitFor(() => (REMOTE_ENGINE ? m.hits.includes('/hold') : fs.existsSync(path.join(w.ws, 'ready'))), 20_000), 'the run got going');
    const proxies = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
        try {
            const m2 = /^\d+ \((.*)\) \S (\d+) /.exec(fs.readFileSync(`/proc/${p}/stat`, 'latin1'));
            return m2 && m2[1] === 'vst-egress' && Number(m2[2]) === conn.pid;
        } catch { return false; }
    }).map(Number);
    try {
        assert.equal(proxies.length, 1, `one proxy, a child of this server (${conn.pid}): ${proxies}`);
        const px = proxies[0];
        const status = fs.readFileSync(`/proc/${px}/status`, 'latin1');
        assert.match(status, /^NoNewPrivs:\s+1$/m, status);
        assert.match(status, /^Seccomp:\s+2$/m, status);
        let mine;
        try { mine = linksOf(px); } catch (e) {
            assert.equal(e.code, 'EACCES', `the proxy's fds: ${e}`);
            assert.notEqual(process.getuid(), 0, 'root reads any /proc/PID/fd');
            return; // not dumpable: no process of its uid reads its fds or takes them
        }
        const server = linksOf(conn.pid);
        const serverErr = server.find(([fd]) => fd === '2')?.[1];
        const shared = mine.filter(([, l]) => l && server.some(([, s]) => s === l))
            // anon_inode links name a kind, not an object (every eventfd reads the same)
            .filter(([, l]) => l !== '/dev/null' && l !== serverErr && !l.startsWith('anon_inode:') && !l.startsWith('/memfd:vst-egress-records'));
        assert.deepEqual(shared, [], `fds the proxy shares with the server: ${JSON.stringify(shared)}\nproxy: ${JSON.stringify(mine)}`);
        const sockets = mine.filter(([fd, l]) => fd !== '2' && l.startsWith('socket:'));
        // a remote engine's run holds its /hold connection open: that one's two ends as well
        assert.equal(sockets.length, REMOTE_ENGINE ? 3 : 1, `only its listener (and stderr, and a held connection) : ${JSON.stringify(mine)}`);
        // and every connection the server opened (libcurl's to the engine included) is
        // close-on-exec (O_CLOEXEC, 02000000 in fdinfo's octal flags): no later child inherits
        // it. libcurl 7.88's multi handle keeps a socketpair of its own without the flag (its
        // wakeup; no option reaches it): a pair whose both ends are the server's leaves nothing
        // of the engine, and close_range keeps it out of the proxy (checked above).
        const inodes = new Set(server.map(([, l]) => /^socket:\[(\d+)\]$/.exec(l)?.[1]).filter(Boolean));
        const peer = new Map();
        const ss = spawnSync('ss', ['-xn'], { encoding: 'utf8' });
        for (const line of (ss.stdout || '').split('\n')) {
            const f = line.trim().split(/\s+/);
            if (f.length >= 8) peer.set(f[5], f[7]);
        }
        const internal = (l) => { const i = /^socket:\[(\d+)\]$/.exec(l)?.[1]; return i && inodes.has(peer.get(i)); };
        const open = server.filter(([fd, l]) => Number(fd) > 2 && l.startsWith('socket:') && !internal(l)).filter(([fd]) => {
            try {
                const f = /^flags:\s+([0-7]+)$/m.exec(fs.readFileSync(`/proc/${conn.pid}/fdinfo/${fd}`, 'latin1'));
                return f && (parseInt(f[1], 8) & 0o2000000) === 0;
            } catch { return false; }
        });
        assert.deepEqual(open, [], `server sockets without close-on-exec: ${JSON.stringify(open)}`);
        assert.equal(mine.find(([fd]) => fd === '0')?.[1], '/dev/null', JSON.stringify(mine));
        assert.equal(mine.find(([fd]) => fd === '1')?.[1], '/dev/null', JSON.stringify(mine));
    } finally {
        fs.writeFileSync(path.join(w.ws, 'go'), '');
        m.release();
        const r = await pending;
        assert.match(r.text, /^done$/m, r.text);
    }
});

test('four runs at once, each with its own proxy and its own verdicts', { skip: !SERVES && `backend ${BACKEND}` }, async (t) => {
    const m = await startMirror(t);
    const w = makeWorld(t, egressEnv(m.port));
    const conn = await connect(w);
    const code = (i) => `${RAW}
import urllib.request
print("ok:", urllib.request.urlopen("http://${MIRROR}/hello-${i}", timeout=10).read().decode().strip())
print("deny:", ask("CONNECT deny-${i}.example:443 HTTP/1.1"))
`;
    const all = await Promise.all([1, 2, 3, 4].map((i) => callNet(conn, code(i))));
    all.forEach((r, k) => {
        const i = k + 1;
        assert.match(r.text, new RegExp(`^ok: hello from the mirror /hello-${i}$`, 'm'), r.text);
        assert.match(r.text, new RegExp(`^deny: HTTP/1\\.1 403 Forbidden \\| vestibule egress: refused deny-${i}\\.example:443`, 'm'), r.text);
        const hosts = hostsOf(r.result);
        assert.deepEqual(hosts.map((h) => `${h.host}:${h.port} ${h.verdict} ${h.connections}`).sort(),
            [`${MIRROR}:80 allowed 1`, `deny-${i}.example:443 denied 1`].sort(),
            `run ${i} lists only its own verdicts: ${JSON.stringify(hosts)}`);
    });
});

/** The server's descendants (its sandboxes and proxies), as pids. */
function descendantPids(pid) {
    const out = [];
    const todo = [pid];
    while (todo.length) {
        const p = todo.pop();
        let tasks = [];
        try { tasks = fs.readdirSync(`/proc/${p}/task`); } catch { continue; }
        for (const t of tasks) {
            let kids = '';
            try { kids = fs.readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').trim(); } catch { continue; }
            for (const k of kids ? kids.split(/\s+/).map(Number) : []) { todo.push(k); out.push(k); }
        }
    }
    return out;
}

// A warm spare (network "none", built in the background after a call) must never serve an
// allowlist call: that call builds its own sandbox with its own egress listener and proxy.
test('with a warm spare ready, an allowlist call builds its own sandbox: its egress works and its verdicts are its own', { skip: !NATIVE && `backend ${BACKEND}: warm spares are native's` }, async (t) => {
    const m = await startMirror(t);
    const w = makeWorld(t, egressEnv(m.port));
    const conn = await connect(w);
    const code = `
import os, urllib.request
print("proxy", os.environ.get("HTTPS_PROXY"))
try:
    print(urllib.request.urlopen("http://${MIRROR}/hello-own", timeout=10).read().decode().strip())
except Exception as e:
    print("FAILED", type(e).__name__, e)
`;
    const first = await run(conn, 'print(1)');
    assertExitCode(first.text, 0);
    // the spare: the server's descendants once they stop changing (the first run's init and
    // its reaping may still be on their way out when the spare's processes appear)
    let spare = [];
    const settled = await waitFor(() => {
        const before = spare.join(' ');
        spare = descendantPids(conn.pid);
        return spare.length >= 2 && spare.join(' ') === before;
    }, 20000, 300);
    assert.ok(settled, `a python spare was built: ${spare}`);

    const on = await callNet(conn, code);
    assertExitCode(on.text, 0);
    assert.equal(on.result.structuredContent.usage.from_handover, undefined, `the allowlist call took the spare:\n${on.text}`);
    assert.match(on.text, /^hello from the mirror \/hello-own$/m, on.text);
    assert.match(on.text, /^proxy http:\/\/127\.0\.0\.1:3128$/m);
    const hosts = hostsOf(on.result);
    assert.deepEqual(hosts.map((h) => [h.host, h.port, h.verdict, h.connections]), [[MIRROR, 80, 'allowed', 1]], JSON.stringify(hosts));
    assert.ok(spare.every((p) => fs.existsSync(`/proc/${p}`)), 'the spare is still there, untouched');

    // control: a call without network takes that spare (so one was there to be taken), and it
    // has no proxy, no route and no egress line
    const off = await run(conn, code);
    assert.equal(off.result.structuredContent.usage.from_handover, true, `no spare taken:\n${off.text}`);
    assert.match(off.text, /^proxy None$/m);
    assert.match(off.text, /^FAILED URLError/m, off.text);
    assert.doesNotMatch(off.text, /^egress:/m);
    assert.equal(m.hits.filter((h) => h === '/hello-own').length, 1, `the mirror saw one request: ${m.hits}`);
});
