// Shutdown: the server exits promptly when the client closes (stdin EOF), ending its runs.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';

import {
    BACKEND, BIN, GONE_WITHIN_MS, START_WITHIN_MS, MODERN_VERSION, alive, connectV1, connectV2, makeWorld, pidsWithMarker, runCode,
    serverGone, uniqueMarker, waitFor,
} from './lib.mjs';

for (const [name, open] of [
    ['v2 client', (w) => connectV2(w, { mode: { pin: MODERN_VERSION } })],
    ['v1 SDK', (w) => connectV1(w)],
]) {
    test(`the server exits promptly after client.close() (${name})`, async (t) => {
        const w = makeWorld(t);
        const conn = await open(w);
        await runCode(conn, 'bash', 'echo warm');
        const pid = conn.pid;
        assert.ok(alive(pid), 'server running before close');
        const t0 = performance.now();
        await conn.close();
        // The SDK escalates to SIGTERM after 2 s: exiting on EOF alone must beat that.
        assert.ok(await serverGone(pid, 1800), 'the server exited on stdin EOF');
        t.diagnostic(`server gone ${Math.round(performance.now() - t0)} ms after close()`);
        assert.deepEqual(conn.sanitizerReports(), [], conn.stderr());
    });
}

test('closing the client mid-run ends the run too', async (t) => {
    const w = makeWorld(t);
    const conn = await connectV2(w, { mode: { pin: MODERN_VERSION } });
    const m = uniqueMarker('close');
    const call = runCode(conn, 'bash', `(exec -a ${m} sleep 300) &\nexec -a ${m} sleep 300`, { timeout_seconds: 50 });
    call.catch(() => {});
    assert.ok(await waitFor(() => pidsWithMarker(m).length >= 2, START_WITHIN_MS), 'the run started');
    const pid = conn.pid;
    await conn.close();
    assert.ok(await serverGone(pid, 3000 + GONE_WITHIN_MS), 'the server exited');
    assert.ok(await waitFor(() => pidsWithMarker(m).length === 0, GONE_WITHIN_MS), `run left behind: ${pidsWithMarker(m)}`);
});

test('SIGTERM ends the server and its runs', async (t) => {
    const w = makeWorld(t);
    const m = uniqueMarker('term');
    const child = spawn(BIN, [], { env: w.env, stdio: ['pipe', 'pipe', 'pipe'] });
    t.after(() => child.kill('SIGKILL'));
    const exited = new Promise((r) => child.on('exit', (code, sig) => r({ code, sig })));
    const send = (o) => child.stdin.write(JSON.stringify(o) + '\n');
    const meta = { 'io.modelcontextprotocol/protocolVersion': MODERN_VERSION, 'io.modelcontextprotocol/clientCapabilities': {} };
    send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { _meta: meta, name: 'run_code', arguments: { language: 'bash', code: `exec -a ${m} sleep 300`, timeout_seconds: 50 } } });
    assert.ok(await waitFor(() => pidsWithMarker(m).length >= 1, START_WITHIN_MS), 'the run started');
    const t0 = performance.now();
    child.kill('SIGTERM');
    const { code, sig } = await exited;
    const ms = performance.now() - t0;
    assert.ok(ms < 3000 + GONE_WITHIN_MS, `exited ${Math.round(ms)} ms after SIGTERM`);
    assert.ok(code === 0 || sig === 'SIGTERM' || code === 143, `exit ${code} ${sig}`);
    assert.ok(await waitFor(() => pidsWithMarker(m).length === 0, GONE_WITHIN_MS), `run left behind: ${pidsWithMarker(m)}`);
});

test('stdout carries only protocol frames', async (t) => {
    // Raw: every stdout line of a session that ran noisy code in all three languages is JSON-RPC.
    const w = makeWorld(t);
    const child = spawn(BIN, [], { env: w.env, stdio: ['pipe', 'pipe', 'pipe'] });
    t.after(() => child.kill('SIGKILL'));
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    const exited = new Promise((r) => child.on('exit', r));
    const meta = { 'io.modelcontextprotocol/protocolVersion': MODERN_VERSION, 'io.modelcontextprotocol/clientCapabilities': {} };
    const calls = [['python', 'print("py-out"); import os; os.write(1, b"raw\\n")'], ['node', 'console.log("js-out")'], ['bash', 'echo sh-out; echo >/dev/tty 2>/dev/null; true']];
    calls.forEach(([language, code], i) => child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: i + 1, method: 'tools/call', params: { _meta: meta, name: 'run_code', arguments: { language, code } } }) + '\n'));
    await waitFor(() => out.split('\n').filter((l) => l.includes('"id":')).length >= 3, 30_000);
    child.stdin.end();
    await exited;
    const lines = out.split('\n').filter(Boolean);
    assert.ok(lines.length >= 3, out);
    for (const l of lines) {
        const msg = JSON.parse(l);
        assert.equal(msg.jsonrpc, '2.0');
    }
    const ids = lines.map((l) => JSON.parse(l)).filter((m) => 'id' in m).map((m) => m.id).sort();
    assert.deepEqual(ids, [1, 2, 3]);
});

// A gvisor server killed mid-run (SIGKILL) cannot remove its sandbox folder
// (/tmp/vestibule-gvisor-XXXXXX, with "<folder>.owner" beside it naming the server); the next
// gvisor server's first probe removes the folders of servers that are gone, their processes
// first (src/gvisor/sweep.c). Control: the folder is still there after the SIGKILL.
test('gvisor: a SIGKILLed server\'s sandbox folder is removed by the next server', { skip: BACKEND !== 'gvisor' && 'the gvisor backend only' }, async (t) => {
    const fs = await import('node:fs');
    // the folders of server @pid's live sandboxes: runsc's command lines name the state folder
    // (--root=<folder>/state) and the sandbox id (vestibule-<server pid>-N)
    const foldersOf = (pid) => {
        const found = new Set();
        for (const p of fs.readdirSync('/proc').filter((x) => /^[0-9]+$/.test(x))) {
            let cmd = '';
            try { cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8'); } catch { continue; }
            const root = /--root=(\/tmp\/vestibule-gvisor-[A-Za-z0-9]{6})\/state/.exec(cmd);
            if (root && cmd.includes(`vestibule-${pid}-`)) found.add(root[1]);
        }
        return [...found];
    };
    const w = makeWorld(t);
    const conn = await connectV2(w, { mode: { pin: MODERN_VERSION } });
    const m = uniqueMarker('gvsweep');
    const call = runCode(conn, 'bash', `exec -a ${m} sleep 300`, { timeout_seconds: 50 });
    call.catch(() => {});
    const pid = conn.pid;
    assert.ok(await waitFor(() => pidsWithMarker(m).length >= 1 && foldersOf(pid).length >= 1, START_WITHIN_MS), 'control: the run started in a sandbox folder of its server');
    const dirs = foldersOf(pid);
    process.kill(pid, 'SIGKILL');
    assert.ok(await serverGone(pid, 3000), 'the server died');
    assert.ok(dirs.every((d) => fs.existsSync(d)), `control: the SIGKILLed server left its folders ${dirs.join(' ')}`);
    const next = await connectV2(makeWorld(t), { mode: { pin: MODERN_VERSION } });
    const r = await runCode(next, 'bash', 'echo next');
    assert.match(r.text, /^next$/m, r.text);
    assert.ok(await waitFor(() => dirs.every((d) => !fs.existsSync(d) && !fs.existsSync(`${d}.owner`)), GONE_WITHIN_MS),
        `left behind after the next server's first call: ${dirs.filter((d) => fs.existsSync(d)).join(' ')}`);
    // nothing names those folders any more (runsc, its gofer and sandbox)
    const naming = () => fs.readdirSync('/proc').filter((x) => /^[0-9]+$/.test(x)).filter((p) => {
        try { const cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8'); return dirs.some((d) => cmd.includes(`${d}/`)); } catch { return false; }
    });
    assert.ok(await waitFor(() => naming().length === 0, GONE_WITHIN_MS), `processes left behind: ${naming()}`);
    await next.close();
});
