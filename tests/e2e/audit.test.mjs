// The audit log: one private JSONL file per server, start and end records, never the output;
// `vestibule-mcp audit` prints it escaped.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { BIN, assertIsolation, connect, makeWorld, runCode, sha256 } from './lib.mjs';

function auditFiles(w) {
    return fs.readdirSync(w.audit).filter((f) => f.endsWith('.jsonl')).map((f) => path.join(w.audit, f));
}

const records = (file) => fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

// The output is computed, so it appears nowhere in the code.
const CODE = 'x = "".join(chr(c) for c in [83, 69, 67, 82, 69, 84])\nprint(x + "-OUTPUT-" + str(7 * 191))\n';
const OUTPUT = 'SECRET-OUTPUT-1337';

test('a run leaves start and end records in a 0600 file in a 0700 folder, without its output', async (t) => {
    const w = makeWorld(t);
    const conn = await connect(w);
    assert.equal(fs.existsSync(w.audit), false, 'nothing is created before the first call');
    const { text } = await runCode(conn, 'python', CODE);
    assert.match(text, new RegExp(`^${OUTPUT}$`, 'm'));
    assertIsolation(text);
    assert.doesNotMatch(text, /^audit:/m, 'the audit write succeeded, so no audit: line');

    assert.equal(fs.statSync(w.audit).mode & 0o777, 0o700, 'the folder it created is 0700');
    const files = auditFiles(w);
    assert.equal(files.length, 1, 'one file per server process');
    assert.equal(fs.statSync(files[0]).mode & 0o777, 0o600, 'the file is 0600');
    const raw = fs.readFileSync(files[0], 'utf8');
    assert.ok(!raw.includes(OUTPUT), 'the output is never recorded');
    assert.ok(raw.includes(sha256(CODE)), 'the code\'s SHA-256 is recorded');
    const recs = records(files[0]);
    assert.equal(recs.length, 2, `a start and an end record: ${raw}`);
    const ids = recs.map((r) => r.id);
    assert.ok(ids[0] && ids[0] === ids[1], `start and end share one id: ${ids}`);
    assert.ok(JSON.stringify(recs[0]).includes('for c in [83'), 'the start record holds the code');
});

test('long code is recorded up to 4 KiB with its full size and hash', async (t) => {
    const w = makeWorld(t);
    const conn = await connect(w);
    const code = `print(len("${'q'.repeat(10000)}"))\n`;
    const { text } = await runCode(conn, 'python', code);
    assert.match(text, /^10000$/m);
    const raw = fs.readFileSync(auditFiles(w)[0], 'utf8');
    assert.ok(raw.includes(sha256(code)));
    assert.ok(raw.includes(String(Buffer.byteLength(code))), 'the full size is recorded');
    assert.ok(!raw.includes('q'.repeat(4097)), 'the code is cut at 4 KiB');
});

test('`vestibule-mcp audit` prints the calls, escaped; --json for machines', async (t) => {
    const w = makeWorld(t);
    const conn = await connect(w);
    await runCode(conn, 'bash', "# \x1b]0;owned\x07 \x1b[2J title\necho hi\n");
    await runCode(conn, 'python', 'print(2)');
    await conn.close();
    const env = { ...w.env };
    const plain = execFileSync(BIN, ['audit'], { env, encoding: 'utf8', timeout: 20_000 });
    assert.doesNotMatch(plain, /[\u0000-\u0008\u000b-\u001f\u007f]/, `no raw control bytes:\n${JSON.stringify(plain)}`);
    const lines = plain.split('\n').filter((l) => /bash|python/.test(l));
    assert.ok(lines.length >= 2, `one line per call:\n${plain}`);
    const json = execFileSync(BIN, ['audit', '--json'], { env, encoding: 'utf8', timeout: 20_000 });
    const objs = json.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    assert.equal(objs.length, 2, json);
    const one = execFileSync(BIN, ['audit', '1', '--json'], { env, encoding: 'utf8', timeout: 20_000 });
    assert.equal(one.split('\n').filter(Boolean).length, 1, 'audit N limits to the last N');
    assert.match(one, /python/, 'the last call is the python one');
});

test('a refused call leaves one blocked record', async (t) => {
    const w = makeWorld(t, { VESTIBULE_MAX_CODE_BYTES: '100' });
    const conn = await connect(w);
    const { result } = await runCode(conn, 'python', `print(1)  # ${'p'.repeat(300)}`);
    assert.equal(result.isError, true);
    const files = fs.existsSync(w.audit) ? auditFiles(w) : [];
    assert.equal(files.length, 1, 'the refusal is recorded');
    const recs = records(files[0]);
    assert.equal(recs.length, 1, JSON.stringify(recs));
    assert.match(JSON.stringify(recs[0]), /blocked/i);
});
