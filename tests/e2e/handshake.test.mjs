// Every protocol revision the official SDKs offer, each through a real run_code call.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SUPPORTED_PROTOCOL_VERSIONS as V1_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import { SUPPORTED_PROTOCOL_VERSIONS as V2_VERSIONS } from '@modelcontextprotocol/client';

import {
    LEGACY_VERSIONS, MODERN_VERSION, assertExitCode, assertIsolation, connectV1, connectV2, makeWorld,
    runCode,
} from './lib.mjs';

// The initialize answer as it came off the wire.
function initializeResult(conn) {
    const r = conn.received.find((m) => m.result && m.result.protocolVersion && m.result.serverInfo);
    assert.ok(r, 'an initialize result was received');
    return r.result;
}

// 2024-10-07 is a pre-release revision the SDKs still offer; the server treats it as 2024-11-05.
const expectedEcho = (v) => (v === '2024-10-07' ? ['2024-10-07', '2024-11-05'] : [v]);

async function smoke(conn) {
    const tools = await conn.client.listTools();
    assert.deepEqual(tools.tools.map((t) => t.name).sort(), ['read_workspace', 'run_code', 'session_end', 'session_start']);
    const { result, text } = await runCode(conn, 'python', 'print(6*7)');
    assert.equal(result.isError ?? false, false, text);
    assert.match(text, /42/);
    assertExitCode(text, 0);
    assertIsolation(text);
}

test('the SDKs offer the revisions this suite covers', () => {
    for (const v of LEGACY_VERSIONS) assert.ok(V1_VERSIONS.includes(v) && V2_VERSIONS.includes(v), v);
});

for (const version of V1_VERSIONS) {
    test(`v1 SDK, legacy initialize offering ${version}`, async (t) => {
        const w = makeWorld(t);
        const conn = await connectV1(w, { version });
        const init = initializeResult(conn);
        assert.ok(expectedEcho(version).includes(init.protocolVersion),
            `a supported requested version is echoed: asked ${version}, got ${init.protocolVersion}`);
        assert.ok(init.capabilities?.tools, 'capabilities.tools is declared');
        assert.equal(typeof init.serverInfo.name, 'string');
        assert.equal(typeof init.serverInfo.version, 'string');
        await conn.client.ping();
        await smoke(conn);
    });
}

test('v1 SDK, its default offer (newest legacy revision)', async (t) => {
    const w = makeWorld(t);
    const conn = await connectV1(w);
    assert.equal(initializeResult(conn).protocolVersion, V1_VERSIONS[0]);
    await conn.client.setLoggingLevel('warning');
    await smoke(conn);
});

test('v1 SDK, an unknown future version gets the newest legacy revision back', async (t) => {
    const w = makeWorld(t);
    const conn = await connectV1(w, { version: '2099-01-01' });
    assert.equal(initializeResult(conn).protocolVersion, '2025-11-25');
    await smoke(conn);
});

test('v1 SDK, asking for 2026-07-28 through initialize answers the newest legacy revision', async (t) => {
    const w = makeWorld(t);
    const conn = await connectV1(w, { version: MODERN_VERSION });
    assert.equal(initializeResult(conn).protocolVersion, '2025-11-25');
    await smoke(conn);
});

for (const version of V2_VERSIONS) {
    test(`v2 client, legacy mode offering ${version}`, async (t) => {
        const w = makeWorld(t);
        // The server may answer 2024-10-07 with 2024-11-05: the client must accept that too.
        const versions = version === '2024-10-07' ? [version, '2024-11-05'] : [version];
        const conn = await connectV2(w, { mode: 'legacy', versions });
        assert.ok(expectedEcho(version).includes(conn.client.getNegotiatedProtocolVersion()),
            `negotiated ${conn.client.getNegotiatedProtocolVersion()} for ${version}`);
        await smoke(conn);
    });
}

test('v2 client pinned to the stateless 2026-07-28 revision', async (t) => {
    const w = makeWorld(t);
    const conn = await connectV2(w, { mode: { pin: MODERN_VERSION } });
    assert.equal(conn.client.getNegotiatedProtocolVersion(), MODERN_VERSION);
    const d = conn.client.getDiscoverResult();
    assert.ok(d, 'server/discover was answered');
    assert.ok(d.supportedVersions.includes(MODERN_VERSION), JSON.stringify(d.supportedVersions));
    for (const v of LEGACY_VERSIONS) assert.ok(d.supportedVersions.includes(v), `discover lists ${v}`);
    await smoke(conn);
    // Every result of the modern revision carries resultType; tools/list carries cache hints.
    const results = conn.received.filter((m) => 'result' in m);
    assert.ok(results.length >= 2, 'tools/list and tools/call results were seen');
    for (const m of results) assert.equal(m.result.resultType, 'complete', JSON.stringify(m).slice(0, 300));
    const list = results.find((m) => Array.isArray(m.result.tools));
    assert.ok(Number.isInteger(list.result.ttlMs) && list.result.ttlMs >= 0, 'tools/list has ttlMs');
    assert.ok(['public', 'private'].includes(list.result.cacheScope), 'tools/list has cacheScope');
    assert.equal(typeof list.result._meta?.['io.modelcontextprotocol/serverInfo']?.name, 'string',
        'results carry _meta serverInfo');
    // A tool result carries only what the revision requires (resultType): clients such as
    // Mastra pass a whole tool result, _meta included, to their model.
    const call = results.find((m) => Array.isArray(m.result.content));
    assert.ok(call, 'a tools/call result was seen');
    assert.equal(call.result._meta, undefined, 'no _meta in a tool result (docs/design/results.md)');
});

test('v2 client in auto mode negotiates the modern revision', async (t) => {
    const w = makeWorld(t);
    const conn = await connectV2(w, { mode: 'auto' });
    assert.equal(conn.client.getNegotiatedProtocolVersion(), MODERN_VERSION);
    await smoke(conn);
});
