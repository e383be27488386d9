// Concurrency: calls run in parallel up to VESTIBULE_MAX_CONCURRENT; a further call waits up
// to 5 s for a slot, then is Blocked; the server keeps reading while runs are in flight.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { assertBlocked, assertExitCode, assertIsolation, connect, makeWorld, runCode } from './lib.mjs';

const SLEEP1 = 'import time\ntime.sleep(1)\nprint("slept")\n';

test('4 runs of 1 s at once finish together, not one after another', async (t) => {
    // No warm spares: the one run would take the spare made at start-up and the four would
    // mostly start cold, so the ratio would measure spares, not concurrency (rootful Podman in
    // the CI dry run, beside two other container runs: one 2,139 ms, four 5,741 ms).
    const conn = await connect(makeWorld(t, { VESTIBULE_WARM: '0' }));
    // One run alone first: its time includes this backend's start-up cost.
    const one = await runCode(conn, 'python', SLEEP1);
    assertExitCode(one.text, 0);
    const t0 = performance.now();
    const all = await Promise.all([1, 2, 3, 4].map(() => runCode(conn, 'python', SLEEP1)));
    const wall = performance.now() - t0;
    for (const r of all) {
        assert.match(r.text, /^slept$/m, r.text);
        assertIsolation(r.text);
    }
    t.diagnostic(`one run ${Math.round(one.ms)} ms; four at once ${Math.round(wall)} ms`);
    // Serially they would take 4x one run; concurrently well under that.
    assert.ok(wall < one.ms * 2.5, `4 parallel runs took ${Math.round(wall)} ms vs ${Math.round(one.ms)} ms for one`);
});

test('a call beyond VESTIBULE_MAX_CONCURRENT waits about 5 s, then is Blocked', async (t) => {
    const conn = await connect(makeWorld(t, { VESTIBULE_MAX_CONCURRENT: '1' }));
    const long = runCode(conn, 'python', 'import time\ntime.sleep(9)\nprint("long done")\n', { timeout_seconds: 30 });
    await new Promise((r) => setTimeout(r, 700)); // let the first call take the slot
    const t0 = performance.now();
    const second = await runCode(conn, 'python', 'print("second")');
    const waited = performance.now() - t0;
    const text = assertBlocked(second.result);
    assert.match(text, /VESTIBULE_MAX_CONCURRENT/, 'the refusal names the setting');
    assert.match(text, /retry|try again/i, 'the refusal says whether to retry');
    assert.ok(waited >= 4500 && waited < 8000, `waited ${Math.round(waited)} ms for a slot (expected ~5 s)`);
    const first = await long;
    assert.match(first.text, /^long done$/m, 'the run holding the slot was not disturbed');
    assertIsolation(first.text);
});

test('a queued call gets the slot as soon as it is freed', async (t) => {
    const conn = await connect(makeWorld(t, { VESTIBULE_MAX_CONCURRENT: '1' }));
    // Warm up first: the first call probes the backend while it holds the slot (Podman's
    // /info took 4-20 s on the loaded CI host), which is not what this test measures.
    await runCode(conn, 'python', 'print(0)');
    const a = runCode(conn, 'bash', 'sleep 1; echo a');
    await new Promise((r) => setTimeout(r, 500));
    const b = await runCode(conn, 'python', 'print("b")');
    assert.match(b.text, /^b$/m, `waited for the slot and ran:\n${b.text}`);
    assertIsolation(b.text);
    assert.match((await a).text, /^a$/m);
});

test('the server answers other requests while runs are in flight', async (t) => {
    const conn = await connect(makeWorld(t));
    let longDone = false;
    const long = runCode(conn, 'bash', 'sleep 8; echo done', { timeout_seconds: 40 }).then((r) => { longDone = true; return r; });
    await new Promise((r) => setTimeout(r, 500));
    const t0 = performance.now();
    const tools = await conn.client.listTools({}, { cacheMode: 'bypass' });
    const ms = performance.now() - t0;
    assert.equal(tools.tools.length, 4); // run_code, read_workspace, session_start, session_end
    assert.ok(ms < 2000, `tools/list answered in ${Math.round(ms)} ms while a run was going`);
    const quick = await runCode(conn, 'bash', 'echo quick');
    assert.match(quick.text, /^quick$/m);
    assert.equal(longDone, false, 'a second run finished while the first was still going');
    assert.match((await long).text, /^done$/m);
});
