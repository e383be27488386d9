// Settings: an invalid value blocks every call (and touches nothing); the YAML file and the
// environment's precedence over it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { assertBlocked, assertIsolation, connect, connectV1, makeWorld, readWorkspace, runCode } from './lib.mjs';

const TOUCH = 'open("ran", "w").write("x")\nprint("ran")\n';

for (const [name, env, mustName] of [
    ['VESTIBULE_MEM_MB=abc', { VESTIBULE_MEM_MB: 'abc' }, ['VESTIBULE_MEM_MB', 'abc']],
    ['VESTIBULE_MAX_CONCURRENT=0', { VESTIBULE_MAX_CONCURRENT: '0' }, ['VESTIBULE_MAX_CONCURRENT']],
    ['VESTIBULE_BACKEND=bogus', { VESTIBULE_BACKEND: 'bogus' }, ['VESTIBULE_BACKEND', 'bogus']],
    ['VESTIBULE_WORKSPACE_RO=maybe', { VESTIBULE_WORKSPACE_RO: 'maybe' }, ['VESTIBULE_WORKSPACE_RO']],
]) {
    test(`an invalid setting (${name}) blocks every call and creates nothing`, async (t) => {
        const w = makeWorld(t, env);
        const conn = await connect(w);
        // The server still starts and lists its tools.
        assert.equal((await conn.client.listTools()).tools.length, 4);
        for (const lang of ['python', 'bash']) {
            const { result } = await runCode(conn, lang, lang === 'python' ? TOUCH : 'touch ran');
            const text = assertBlocked(result, ...mustName);
            assert.match(text, /restart/i, 'it says the server must be restarted after the fix');
        }
        fs.writeFileSync(path.join(w.ws, 'present.txt'), 'x');
        assertBlocked((await readWorkspace(conn, 'present.txt')).result, mustName[0]);
        assert.equal(fs.existsSync(path.join(w.ws, 'ran')), false, 'nothing ran');
        assert.equal(fs.existsSync(w.audit), false, 'no audit folder was created');
    });
}

test('the audit folder inside the workspace is refused: every call Blocked', async (t) => {
    const w = makeWorld(t);
    w.env.VESTIBULE_AUDIT_DIR = path.join(w.ws, 'audit');
    const conn = await connect(w);
    const { result } = await runCode(conn, 'python', TOUCH);
    assertBlocked(result, 'VESTIBULE_AUDIT_DIR');
    assert.equal(fs.existsSync(path.join(w.ws, 'ran')), false, 'nothing ran');
});

function writeYaml(w, text) {
    const dir = path.join(w.home, '.config', 'vestibule');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'config.yaml'), text);
}

const PRINT_300 = 'import sys\nsys.stdout.write("z" * 300)\n';

test('the YAML config file is read (~/.config/vestibule/config.yaml)', async (t) => {
    const w = makeWorld(t);
    writeYaml(w, 'max_output_bytes: 100\n');
    const { text } = await runCode(await connect(w), 'python', PRINT_300);
    assert.match(text, /\[stdout truncated: 200 of 300 bytes not shown/, text);
    assertIsolation(text);
});

test('the environment wins over the YAML file; VESTIBULE_CONFIG names another file', async (t) => {
    const w = makeWorld(t, { VESTIBULE_MAX_OUTPUT_BYTES: '250' });
    const file = path.join(w.root, 'other.yaml');
    fs.writeFileSync(file, 'max_output_bytes: 100\n');
    w.env.VESTIBULE_CONFIG = file;
    const { text } = await runCode(await connect(w), 'python', PRINT_300);
    assert.match(text, /\[stdout truncated: 50 of 300 bytes not shown/, text);
});

test('an invalid value in the YAML file blocks calls too, naming it', async (t) => {
    const w = makeWorld(t);
    writeYaml(w, 'mem_mb: lots\n');
    const { result } = await runCode(await connectV1(w), 'python', TOUCH);
    assert.match(assertBlocked(result, 'lots'), /mem_mb/i);
    assert.equal(fs.existsSync(path.join(w.ws, 'ran')), false);
});

test('a blank value counts as unset', async (t) => {
    const w = makeWorld(t, { VESTIBULE_MEM_MB: '', VESTIBULE_MAX_OUTPUT_BYTES: '' });
    const { text } = await runCode(await connect(w), 'python', 'print("fine")');
    assert.match(text, /^fine$/m);
    assertIsolation(text);
});
