// Two servers on one container engine, as two MCP clients of one user (or two people's CI runs
// on one Docker Desktop) have them: one server restarting again and again while the other runs
// calls. Each start runs the start-up sweep (src/engine/sweep.c), which removes the sandboxes
// and volumes of servers that are gone (their owner label names a process no longer alive); it
// must never take those of a server that runs: its calls would end with exit 137 (the container
// removed under the run), its spare vanish, its hand-in volume be gone. The control: a server
// SIGKILLed mid-run leaves its running container, and the next start's sweep does remove it,
// so the restarts beside the calls run a sweep that really removes what it judges gone. And no
// container of ours is ever without an owner (the sweep takes such a one for a leftover): the
// engine's list is sampled all along, A's first call too (under runsc, its runtime check's own
// container, src/engine/runtime.c).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
    BACKEND, SLOW, assertExitCode, assertIsolation, connect, containersOf, makeWorld, ourContainers, runCode, serverGone, sleep, waitFor,
} from './lib.mjs';

const skip = BACKEND !== 'container' && `backend ${BACKEND}: the start-up sweep is the container backend's`;
const RESTARTS = 4;

test('a server restarting (its start-up sweep) kills nothing of another server on the same engine', { skip, timeout: 600_000 * SLOW }, async (t) => {
    const a = makeWorld(t);
    const b = makeWorld(t);
    const unowned = new Set();
    let sampling = true;
    const sampler = (async () => {
        while (sampling) {
            for (const c of await ourContainers().catch(() => [])) if (!c.owner) unowned.add(c.id.slice(0, 12));
            await sleep(100);
        }
    })();
    t.after(async () => { sampling = false; await sampler; });
    const connA = await connect(a);
    const first = await runCode(connA, 'python', 'print("a-first")');
    assert.equal(first.result.isError, false, `A's first call:\n${first.text}`);

    // The control, before A's loop: B SIGKILLed mid-run leaves its container running.
    const b0 = await connect(b);
    const long = runCode(b0, 'python', 'import time\nprint("b0", flush=True)\ntime.sleep(55)', { timeout_seconds: 60 }).catch(() => null);
    assert.ok(await waitFor(async () => (await containersOf(b0.pid)).some((c) => c.running), 60_000 * SLOW), 'B\'s long run has a running container');
    const killed = b0.pid;
    process.kill(killed, 'SIGKILL');
    assert.ok(await serverGone(killed, 10_000), 'B is gone after its SIGKILL');
    await long;
    await sleep(1000);
    assert.ok((await containersOf(killed)).length >= 1, 'control: the killed server\'s container is still there before the next start');

    // A's calls, one after the other, while B restarts: each one must run to its end.
    let stop = false;
    const calls = [];
    const loop = (async () => {
        while (!stop) {
            const r = await runCode(connA, 'python', 'import time\ntime.sleep(1.5)\nprint("a-ok")', { timeout_seconds: 60 });
            calls.push(r);
        }
    })();
    let swept = false;
    for (let i = 0; i < RESTARTS; i++) {
        const cb = await connect(b);
        const rb = await runCode(cb, 'python', `print("b${i + 1}")`);
        assert.equal(rb.result.isError, false, `B's call after restart ${i + 1}:\n${rb.text}`);
        if (i === 0) {
            swept = await waitFor(async () => (await containersOf(killed)).length === 0, 60_000 * SLOW, 500);
        }
        await cb.close();
        assert.ok(await serverGone(cb.pid, 30_000), `B's server ${i + 1} exited after its client closed`);
    }
    assert.ok(swept, 'control: the first restart\'s sweep removed the killed server\'s container');
    // A's calls go on until it has made two (B's four restarts can take less than one of A's
    // calls on an idle engine: 1 call in 3.7 s was seen), then stop
    await waitFor(() => calls.length >= 2, 60_000 * SLOW, 100);
    stop = true;
    await loop;
    assert.ok(calls.length >= 2, `A ran calls beside B's restarts (${calls.length})`);
    for (const [i, r] of calls.entries()) {
        assert.equal(r.result.isError, false, `A's call ${i + 1} of ${calls.length} failed beside B's restarts:\n${r.text}`);
        assertExitCode(r.text, 0);
        assert.match(r.text, /^a-ok$/m, `A's call ${i + 1} printed its line:\n${r.text}`);
        assertIsolation(r.text);
    }
    sampling = false;
    await sampler;
    assert.deepEqual([...unowned], [], 'every container of ours carries its owner (one without is any start-up sweep\'s to remove)');
    // and A's spare and server are still good after all of B's sweeps
    const last = await runCode(connA, 'python', 'print("a-last")');
    assert.equal(last.result.isError, false, `A's call after B's restarts:\n${last.text}`);
    assert.match(last.text, /^a-last$/m);
});
