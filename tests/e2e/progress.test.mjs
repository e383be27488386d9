// Progress notifications during a long run, only when the caller asked (onprogress).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MODERN_VERSION, assertIsolation, connectV1, connectV2, makeWorld, runCode } from './lib.mjs';

const LONG = 'import time\ntime.sleep(7)\nprint("finished")\n';

for (const [name, open] of [
    ['v2 client, 2026-07-28', (w) => connectV2(w, { mode: { pin: MODERN_VERSION } })],
    ['v1 SDK, 2025-11-25', (w) => connectV1(w)],
]) {
    test(`progress notifications on a long run (${name})`, async (t) => {
        const conn = await open(makeWorld(t));
        const seen = [];
        const { text } = await runCode(conn, 'python', LONG, {
            timeout_seconds: 30,
            onprogress: (p) => seen.push({ ...p, at: performance.now() }),
        });
        assert.match(text, /^finished$/m);
        assertIsolation(text);
        assert.ok(seen.length >= 1, 'at least one progress notification in 7 s');
        for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, 'progress increases');
        for (const p of seen) {
            assert.equal(typeof p.progress, 'number');
            if (p.total !== undefined) assert.ok(p.progress <= p.total);
        }
        t.diagnostic(`${seen.length} progress notifications: ${JSON.stringify(seen.map((p) => p.message ?? p.progress))}`);
    });
}

test('no progress notifications when the caller did not ask', async (t) => {
    const conn = await connectV2(makeWorld(t), { mode: { pin: MODERN_VERSION } });
    const { text } = await runCode(conn, 'python', LONG, { timeout_seconds: 30 });
    assert.match(text, /^finished$/m);
    const progress = conn.received.filter((m) => m.method === 'notifications/progress');
    assert.deepEqual(progress, []);
});
