// Cancellation: an aborted call (notifications/cancelled) ends the run's whole process tree at
// once and frees its slot.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
    GONE_WITHIN_MS, START_WITHIN_MS, assertIsolation, connectV1, connectV2, makeWorld, pidsWithMarker, runCode,
    uniqueMarker, waitFor, MODERN_VERSION,
} from './lib.mjs';

const code = (m, daemon = false) => [
    `(exec -a ${m} sleep 300) &`,
    ...(daemon ? [`setsid bash -c 'exec -a ${m} sleep 300' &`] : [`bash -c '(exec -a ${m} sleep 300) & wait' &`]),
    `exec -a ${m} sleep 300`,
].join('\n');

const connectors = {
    'v2 client, 2026-07-28': (w) => connectV2(w, { mode: { pin: MODERN_VERSION } }),
    'v1 SDK, 2025-11-25': (w) => connectV1(w),
    'v1 SDK, 2024-11-05': (w) => connectV1(w, { version: '2024-11-05' }),
};

for (const [name, open] of Object.entries(connectors)) {
    test(`cancelling a run (${name}) kills its process tree and frees its slot`, async (t) => {
        // One slot: if the cancelled run kept it, the next call would wait 5 s and be Blocked.
        const conn = await open(makeWorld(t, { VESTIBULE_MAX_CONCURRENT: '1' }));
        const m = uniqueMarker('cancel');
        const ac = new AbortController();
        const call = runCode(conn, 'bash', code(m), { timeout_seconds: 50, signal: ac.signal });
        call.catch(() => {}); // observed below
        const seen = await waitFor(() => pidsWithMarker(m).length >= 4, START_WITHIN_MS);
        assert.ok(seen, `the run's marked processes were visible before cancelling (${pidsWithMarker(m)})`);
        const t0 = performance.now();
        ac.abort('e2e: cancel');
        await assert.rejects(call, 'the aborted call rejects on the client side');
        const gone = await waitFor(() => pidsWithMarker(m).length === 0, GONE_WITHIN_MS);
        assert.ok(gone, `processes still alive ${GONE_WITHIN_MS} ms after the cancel: ${pidsWithMarker(m)}`);
        const killMs = performance.now() - t0;

        // With one slot, a slot still held would make this call wait 5 s and be Blocked.
        const next = await runCode(conn, 'python', 'print("after cancel")');
        assert.match(next.text, /^after cancel$/m, `the slot was freed:\n${next.text}`);
        assertIsolation(next.text);
        t.diagnostic(`process tree gone ${Math.round(killMs)} ms after abort`);
    });
}

test('cancelling a run kills a setsid daemon it started too', async (t) => {
    const conn = await connectV2(makeWorld(t), { mode: { pin: MODERN_VERSION } });
    const m = uniqueMarker('canceld');
    const ac = new AbortController();
    const call = runCode(conn, 'bash', code(m, true), { timeout_seconds: 50, signal: ac.signal });
    call.catch(() => {});
    assert.ok(await waitFor(() => pidsWithMarker(m).length >= 3, START_WITHIN_MS), `started: ${pidsWithMarker(m)}`);
    ac.abort();
    await assert.rejects(call);
    assert.ok(await waitFor(() => pidsWithMarker(m).length === 0, GONE_WITHIN_MS), `still alive: ${pidsWithMarker(m)}`);
});

test('a cancelled request gets no reply (legacy: SHOULD NOT; 2026: MUST NOT)', async (t) => {
    const conn = await connectV2(makeWorld(t), { mode: { pin: MODERN_VERSION } });
    const m = uniqueMarker('noreply');
    const ac = new AbortController();
    const call = runCode(conn, 'bash', code(m), { timeout_seconds: 50, signal: ac.signal });
    call.catch(() => {});
    assert.ok(await waitFor(() => pidsWithMarker(m).length >= 1, START_WITHIN_MS));
    const before = conn.received.length;
    ac.abort();
    await assert.rejects(call);
    await waitFor(() => pidsWithMarker(m).length === 0, GONE_WITHIN_MS);
    // A ping-like round trip so anything the server still meant to send has arrived.
    await conn.client.listTools({}, { cacheMode: 'bypass' });
    const late = conn.received.slice(before).filter((x) => ('result' in x || 'error' in x) && !Array.isArray(x.result?.tools));
    assert.deepEqual(late, [], 'no result for the cancelled request');
});

// The probe's own control: a cancel is judged on the cancelled run's processes only. Another
// server's run, alive the whole time, must be seen alive while this one is seen gone. Under
// gvisor the probe once matched every runsc process of the host (the CI dry run's "still alive
// 3 s after a cancel" beside the agreement stage's gvisor runs: tests/adversarial/server.md).
test('a cancel is judged on its own run: another server\'s run is still seen alive', async (t) => {
    const other = await connectV2(makeWorld(t), { mode: { pin: MODERN_VERSION } });
    const mo = uniqueMarker('other');
    const acOther = new AbortController();
    const callOther = runCode(other, 'bash', code(mo), { timeout_seconds: 50, signal: acOther.signal });
    callOther.catch(() => {});
    assert.ok(await waitFor(() => pidsWithMarker(mo).length >= 1, START_WITHIN_MS), 'the other run started');
    const conn = await connectV2(makeWorld(t), { mode: { pin: MODERN_VERSION } });
    const m = uniqueMarker('mine');
    const ac = new AbortController();
    const call = runCode(conn, 'bash', code(m), { timeout_seconds: 50, signal: ac.signal });
    call.catch(() => {});
    assert.ok(await waitFor(() => pidsWithMarker(m).length >= 1, START_WITHIN_MS), `started: ${pidsWithMarker(m)}`);
    ac.abort();
    await assert.rejects(call);
    assert.ok(await waitFor(() => pidsWithMarker(m).length === 0, GONE_WITHIN_MS), `still alive: ${pidsWithMarker(m)}`);
    assert.ok(pidsWithMarker(mo).length >= 1, 'control: the other server\'s run is seen alive at the same time');
    acOther.abort();
    await assert.rejects(callOther);
    assert.ok(await waitFor(() => pidsWithMarker(mo).length === 0, GONE_WITHIN_MS), `other still alive: ${pidsWithMarker(mo)}`);
});
