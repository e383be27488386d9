// A server started as root: refuses to run code unless VESTIBULE_RUN_AS names an unprivileged
// id, and then the code runs as that id, never as root. Runs only as root (CI runs this file
// as root and the rest of the suite as the unprivileged test user).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { assertBlocked, assertExitCode, assertIsolation, connect, makeWorld, runCode } from './lib.mjs';

const isRoot = process.getuid() === 0;
const RUN_AS = process.env.E2E_RUN_AS || '2000:2000';
const skip = isRoot ? false : 'not running as root';

test('as root without VESTIBULE_RUN_AS every call is Blocked, naming the fix', { skip }, async (t) => {
    const w = makeWorld(t, { VESTIBULE_RUN_AS: undefined });
    const conn = await connect(w);
    for (const lang of ['python', 'node', 'bash']) {
        const { result } = await runCode(conn, lang, lang === 'bash' ? 'touch ran' : lang === 'python' ? 'open("ran","w")' : 'require("fs").writeFileSync("ran","")');
        const text = assertBlocked(result, 'VESTIBULE_RUN_AS');
        assert.match(text, /root/i);
    }
    assert.equal(fs.existsSync(path.join(w.ws, 'ran')), false, 'nothing ran');
});

test(`as root with VESTIBULE_RUN_AS=${RUN_AS} code runs as that id`, { skip }, async (t) => {
    const w = makeWorld(t, { VESTIBULE_RUN_AS: RUN_AS });
    const [uid, gid] = RUN_AS.split(':').map(Number);
    fs.chmodSync(w.root, 0o711);
    fs.chownSync(w.ws, uid, gid);
    const conn = await connect(w);
    const { text } = await runCode(conn, 'bash', 'echo "ids=$(id -u):$(id -g) groups=$(id -G)"; touch ran; echo ok');
    assertExitCode(text, 0);
    assert.match(text, new RegExp(`^ids=${uid}:${gid} groups=${gid}$`, 'm'), `runs as ${RUN_AS} with no extra groups:\n${text}`);
    assert.equal(fs.statSync(path.join(w.ws, 'ran')).uid, uid, 'files it makes belong to that id');
    assertIsolation(text);
});
