// egress-install.test.mjs - the egress allowlist through run_code (issue 13), on whatever
// backend the suite runs (native, container on Docker or Podman): pip and npm installs from
// local indexes reached only through the proxy (VESTIBULE_EGRESS_PIN to 127.0.0.1), the
// package used by the next call (network none); refusals with their reasons in the result and
// the audit; and the controls: without the allowlist the proxy's address refuses, and with it
// a client that ignores the proxy still has no route.
//
// Runs only with E2E_EGRESS=1 (scripts/test.sh stage egress-container: it installs verdaccio from
// tests/egress/package-lock.json); E2E_EGRESS_NPM=0 leaves the npm test out, =only runs it
// alone. The images must hold pip and npm (images/build.sh).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { startPypi, startRegistry } from './egress-fixtures.mjs';
import { assertExitCode, BACKEND, callTool, connect, makeWorld, textOf } from './lib.mjs';

const skip = process.env.E2E_EGRESS !== '1'
    ? 'E2E_EGRESS=1 runs these (scripts/test.sh stage egress-container)'
    : BACKEND === 'naive' ? 'the naive backend has no network namespace to hold an allowlist' : false;

// E2E_EGRESS_NPM=0: all but the npm test; =only: the npm test alone (the CI stage runs it once
// verdaccio's packages are in, on one engine, for time)
const skipNpm = skip || (process.env.E2E_EGRESS_NPM === '0' ? 'E2E_EGRESS_NPM=0' : false);
const skipRest = skip || (process.env.E2E_EGRESS_NPM === 'only' ? 'E2E_EGRESS_NPM=only' : false);

async function run(conn, language, code, network) {
    const args = { language, code, timeout_seconds: 60 };
    if (network) args.network = network;
    const result = await callTool(conn, 'run_code', args);
    return { result, text: textOf(result), s: result.structuredContent };
}

/** The result's verdict for host:port: structuredContent.egress.hosts[] and the text's egress line. */
function verdict(r, host, port) {
    const list = r.s?.egress?.hosts;
    assert.ok(Array.isArray(list), `structuredContent.egress.hosts lists the verdicts:\n${JSON.stringify(r.s?.egress)}\n${r.text}`);
    const e = list.find((x) => x.host === host && x.port === port);
    assert.ok(e, `a verdict for ${host}:${port} in structuredContent:\n${JSON.stringify(r.s?.egress, null, 1)}\n${r.text}`);
    assert.match(r.text, new RegExp(`^egress: .*${host.replace(/\./g, '\\.')}:${port} ${e.verdict}`, 'm'), `the egress line names ${host}:${port}:\n${r.text}`);
    return { ...e, allowed: e.verdict === 'allowed' };
}

/** Every audit record's text, joined (the audit folder is the world's). */
function auditText(w) {
    const out = [];
    const walk = (d) => {
        for (const e of fs.readdirSync(d, { withFileTypes: true })) {
            const p = path.join(d, e.name);
            if (e.isDirectory()) walk(p);
            else if (e.isFile()) out.push(fs.readFileSync(p, 'utf8'));
        }
    };
    if (fs.existsSync(w.audit)) walk(w.audit);
    return out.join('\n');
}

test('pip install through the allowlist from a local index; the next call (no network) imports it', { skip: skipRest }, async (t) => {
    const mark = `pip-ok-${process.pid}-${Date.now()}`;
    const pypi = await startPypi(t, { mark });
    const w = makeWorld(t, {
        VESTIBULE_EGRESS_ALLOW: 'pypi.test',
        VESTIBULE_EGRESS_PIN: `pypi.test=127.0.0.1:${pypi.port}`,
    });
    const conn = await connect(w);
    const r1 = await run(conn, 'bash',
        'pip install --index-url http://pypi.test/simple/ --trusted-host pypi.test vstprobe 2>&1', 'allowlist');
    assertExitCode(r1.text, 0);
    assert.ok(pypi.hits.includes('/simple/vstprobe/'), `the index was asked through the proxy: ${pypi.hits}`);
    assert.ok(pypi.hits.some((h) => h.startsWith('/files/')), `the wheel was fetched: ${pypi.hits}`);
    const v = verdict(r1, 'pypi.test', 80);
    assert.equal(v.allowed, true, JSON.stringify(v));
    assert.ok(v.connections >= 1 && v.bytes_down > 0, JSON.stringify(v));
    const r2 = await run(conn, 'python', 'import vstprobe; print(vstprobe.MARK)');
    assertExitCode(r2.text, 0);
    assert.ok(r2.text.includes(mark), `the next call imports the installed package:\n${r2.text}`);
});


test('npm install through the allowlist from a local registry; the next call (no network) requires it', { skip: skipNpm }, async (t) => {
    const mark = `npm-ok-${process.pid}-${Date.now()}`;
    const reg = await startRegistry(t, { mark });
    const w = makeWorld(t, {
        VESTIBULE_EGRESS_ALLOW: 'npm.test',
        VESTIBULE_EGRESS_PIN: `npm.test=127.0.0.1:${reg.port}`,
    });
    const conn = await connect(w);
    // npm is in the node image (bash runs use the python one): run it from node, as an agent would
    const r1 = await run(conn, 'node', `require('child_process').execFileSync('npm',
        ['install', '--no-audit', '--no-fund', '--registry', 'http://npm.test/', 'vst-egress-probe'],
        { stdio: 'inherit' })`, 'allowlist');
    assertExitCode(r1.text, 0);
    assert.ok(fs.existsSync(path.join(w.ws, 'node_modules', 'vst-egress-probe', 'index.js')),
        `installed into /workspace/node_modules:\n${r1.text}`);
    assert.equal(verdict(r1, 'npm.test', 80).allowed, true);
    const r2 = await run(conn, 'node', "console.log(require('vst-egress-probe'))");
    assertExitCode(r2.text, 0);
    assert.ok(r2.text.includes(mark), `the next call requires the installed package:\n${r2.text}`);
});

// CONNECT requests straight to the proxy's port (what an HTTPS client sends), one per case, so
// that NO_PROXY and client quirks play no part: the proxy's answer is printed per case.
const PROBE = (cases) => `
import socket
for name, target in ${JSON.stringify(cases)}:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(("CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n" % (target, target)).encode())
    line = s.recv(4096).split(b"\\r\\n")[0].decode(errors="replace")
    print("%s -> %s" % (name, line))
    s.close()
`;

test('refusals: an unlisted host, an IP literal, an unlisted port, a private address behind an unpinned name', { skip: skipRest }, async (t) => {
    const pypi = await startPypi(t, { mark: 'x' });
    const w = makeWorld(t, {
        // localhost is listed but not pinned: it resolves to 127.0.0.1, a loopback address
        VESTIBULE_EGRESS_ALLOW: 'pypi.test,localhost',
        VESTIBULE_EGRESS_PIN: `pypi.test=127.0.0.1:${pypi.port}`,
    });
    const conn = await connect(w);
    const cases = [
        ['listed', 'pypi.test:80'],
        ['unlisted', 'unlisted.test:443'],
        ['literal', '192.0.2.7:443'],
        ['port', 'pypi.test:8080'],
        ['private', 'localhost:80'],
    ];
    const r = await run(conn, 'python', PROBE(cases), 'allowlist');
    assertExitCode(r.text, 0);
    assert.match(r.text, /^listed -> HTTP\/1\.[01] 200/m, `the control: a listed host is tunnelled:\n${r.text}`);
    for (const name of ['unlisted', 'literal', 'port', 'private'])
        assert.match(r.text, new RegExp(`^${name} -> HTTP/1\\.[01] 403`, 'm'), `${name} is refused with 403:\n${r.text}`);
    const want = [
        ['unlisted.test', 443, /not in VESTIBULE_EGRESS_ALLOW/],
        ['192.0.2.7', 443, /IP literal/],
        ['pypi.test', 8080, /port not allowed/],
        ['localhost', 80, /private address/],
    ];
    const audit = auditText(w);
    for (const [host, port, why] of want) {
        const v = verdict(r, host, port);
        assert.equal(v.allowed, false, JSON.stringify(v));
        assert.match(v.reason, why, JSON.stringify(v));
        assert.match(r.text, new RegExp(`${host.replace(/\./g, '\\.')}:${port}[^\\n]*${why.source}`), `the reason on the egress line:\n${r.text}`);
        assert.match(audit, new RegExp(`${host.replace(/\./g, '\\.')}[^\\n]*${port}[^\\n]*${why.source}|${why.source}[^\\n]*${host.replace(/\./g, '\\.')}`),
            `the audit records the refusal of ${host}:${port} with its reason`);
    }
    assert.ok(verdict(r, 'pypi.test', 80).allowed);
});

/** A non-loopback IPv4 address of this host (the sandbox must not reach it), or null. */
function hostAddress() {
    for (const list of Object.values(os.networkInterfaces()))
        for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
    return null;
}

// What a client that ignores the proxy gets: the host's loopback listener (the index), the
// host's own address, and DNS. And the proxy's port, which answers only with the allowlist on.
const ROUTES = (port, hostIp) => `
import errno, socket
def tryc(name, addr):
    try:
        socket.create_connection(addr, timeout=5).close()
        print(name, "connected")
    except OSError as e:
        print(name, "failed", errno.errorcode.get(e.errno, e.errno))
tryc("proxy", ("127.0.0.1", 3128))
tryc("host-loopback", ("127.0.0.1", ${port}))
${hostIp ? `tryc("host-address", (${JSON.stringify(hostIp)}, ${port}))` : 'print("host-address failed none")'}
try:
    socket.getaddrinfo("pypi.test", 80)
    print("dns resolved")
except OSError as e:
    print("dns failed", e)
`;

test('control: without the allowlist nothing answers; with it only the proxy does (no route around it)', { skip: skipRest }, async (t) => {
    const pypi = await startPypi(t, { mark: 'x' });
    const w = makeWorld(t, {
        VESTIBULE_EGRESS_ALLOW: 'pypi.test',
        VESTIBULE_EGRESS_PIN: `pypi.test=127.0.0.1:${pypi.port}`,
    });
    const conn = await connect(w);
    const code = ROUTES(pypi.port, hostAddress());
    const none = await run(conn, 'python', code);
    assertExitCode(none.text, 0);
    assert.match(none.text, /^proxy failed ECONNREFUSED/m, `network none: no proxy listens:\n${none.text}`);
    const on = await run(conn, 'python', code, 'allowlist');
    assertExitCode(on.text, 0);
    assert.match(on.text, /^proxy connected/m, `the control: with the allowlist the proxy's port answers:\n${on.text}`);
    for (const r of [none, on]) {
        assert.match(r.text, /^host-loopback failed/m, `the host's loopback is not the sandbox's:\n${r.text}`);
        assert.match(r.text, /^host-address failed/m, `the host's address has no route:\n${r.text}`);
        assert.match(r.text, /^dns failed/m, `no DNS inside:\n${r.text}`);
    }
    assert.equal(pypi.hits.length, 0, `nothing reached the index: ${pypi.hits}`);
});
