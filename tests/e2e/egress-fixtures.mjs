// egress-fixtures.mjs - the package indexes the egress allowlist tests install from, both on
// 127.0.0.1 of the host and reached from a sandbox only through the proxy with
// VESTIBULE_EGRESS_PIN (nothing leaves the machine):
//   - a PyPI "simple" index (PEP 503) serving one wheel the test builds (python3's zipfile on
//     the host: a pure-Python wheel is a zip with a dist-info folder, PEP 427);
//   - a local npm registry: verdaccio (tests/egress/package-lock.json, installed by
//     scripts/test.sh), with NO uplink (a package it does not hold is a 404, never fetched from
//     the real registry); the test publishes its package to it with the host's npm.
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { waitFor } from './wait.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
export const VERDACCIO = path.resolve(here, '../egress/node_modules/verdaccio/bin/verdaccio');

/** A fresh 0755 temp folder (the test user may read it), removed after @t. */
function tmpDir(t, tag) {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), `vst-egress-${tag}-`));
    fs.chmodSync(d, 0o755);
    t.after(() => fs.rmSync(d, { recursive: true, force: true }));
    return d;
}

/**
 * startPypi() - a PEP 503 simple index on 127.0.0.1 (a free port) with one project @name whose
 * wheel holds a module printing @mark. Returns { port, hits: [paths requested], close }.
 */
export async function startPypi(t, { name = 'vstprobe', mark } = {}) {
    const dir = tmpDir(t, 'pypi');
    const whl = `${name}-1.0-py3-none-any.whl`;
    execFileSync('python3', ['-c', `
import base64, hashlib, sys, zipfile
name, mark, out = sys.argv[1:4]
di = f"{name}-1.0.dist-info"
files = {
    f"{name}/__init__.py": f"MARK = {mark!r}\\n",
    f"{di}/METADATA": f"Metadata-Version: 2.1\\nName: {name}\\nVersion: 1.0\\n",
    f"{di}/WHEEL": "Wheel-Version: 1.0\\nGenerator: vestibule-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
rec = []
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for p, s in files.items():
        b = s.encode()
        z.writestr(p, b)
        h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
        rec.append(f"{p},sha256={h},{len(b)}")
    rec.append(f"{di}/RECORD,,")
    z.writestr(f"{di}/RECORD", "\\n".join(rec) + "\\n")
`, name, mark, path.join(dir, whl)]);
    const body = fs.readFileSync(path.join(dir, whl));
    const digest = createHash('sha256').update(body).digest('hex');
    const hits = [];
    const srv = http.createServer((req, res) => {
        hits.push(req.url);
        if (req.url === '/simple/' || req.url === `/simple/${name}/`) {
            res.writeHead(200, { 'Content-Type': 'text/html' });
            res.end(req.url === '/simple/'
                ? `<html><body><a href="${name}/">${name}</a></body></html>\n`
                : `<html><body><a href="/files/${whl}#sha256=${digest}">${whl}</a></body></html>\n`);
        } else if (req.url === `/files/${whl}`) {
            res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length });
            res.end(body);
        } else {
            res.writeHead(404);
            res.end('not here\n');
        }
    });
    await new Promise((ok) => srv.listen(0, '127.0.0.1', ok));
    t.after(() => new Promise((ok) => srv.close(ok)));
    return { port: srv.address().port, hits };
}

async function freePort() {
    const s = http.createServer();
    await new Promise((ok) => s.listen(0, '127.0.0.1', ok));
    const { port } = s.address();
    await new Promise((ok) => s.close(ok));
    return port;
}

/**
 * startRegistry() - verdaccio on 127.0.0.1 (no uplink), with @pkg (name) published at 1.0.0:
 * its main module exports @mark. Returns { port, child }. Stopped (by its pid) after @t.
 */
export async function startRegistry(t, { pkg = 'vst-egress-probe', mark } = {}) {
    if (!fs.existsSync(VERDACCIO)) throw new Error(`${VERDACCIO} is missing: run \`npm ci\` in tests/egress`);
    const dir = tmpDir(t, 'npm');
    const port = await freePort();
    fs.writeFileSync(path.join(dir, 'config.yaml'), [
        `storage: ${dir}/storage`,
        'auth:',
        '  htpasswd:',
        `    file: ${dir}/htpasswd`,
        '    max_users: -1',
        '# no uplinks: nothing is ever fetched from the real registry',
        'uplinks: {}',
        'packages:',
        "  '**':",
        '    access: $all',
        '    publish: $anonymous $all',
        'log: { type: stdout, format: pretty, level: warn }',
        '',
    ].join('\n'));
    const child = spawn(process.execPath, [VERDACCIO, '--config', path.join(dir, 'config.yaml'), '--listen', `127.0.0.1:${port}`],
        { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout.on('data', (d) => { log += d; });
    child.stderr.on('data', (d) => { log += d; });
    t.after(() => { try { child.kill('SIGKILL'); } catch { /* gone */ } });
    const up = await waitFor(() => new Promise((ok) => {
        http.get(`http://127.0.0.1:${port}/-/ping`, (r) => { r.resume(); ok(r.statusCode === 200); }).on('error', () => ok(false));
    }), 30_000, 200);
    if (!up) throw new Error(`verdaccio did not answer on 127.0.0.1:${port}:\n${log}`);
    const src = path.join(dir, 'pkg');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'package.json'), JSON.stringify({ name: pkg, version: '1.0.0', main: 'index.js' }));
    fs.writeFileSync(path.join(src, 'index.js'), `module.exports = ${JSON.stringify(mark)};\n`);
    fs.writeFileSync(path.join(dir, '.npmrc'), `//127.0.0.1:${port}/:_authToken=local-test-token\n`);
    execFileSync('npm', ['publish', '--registry', `http://127.0.0.1:${port}/`, '--userconfig', path.join(dir, '.npmrc'),
        '--cache', path.join(dir, 'cache'), '--no-audit', '--no-fund'], { cwd: src, stdio: 'pipe' });
    return { port, child };
}
