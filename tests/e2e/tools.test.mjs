// tools/list: the two tools, their schemas, descriptions and annotations, as each era sees them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { BACKEND, connect, connectV1, makeWorld } from './lib.mjs';

// Issue 11: MCP Inspector --cli --strict warns on type arrays such as ["integer","null"], which do
// not port across model providers; a field that does not apply is left out instead.
function assertPortable(schema, where) {
    assert.equal(typeof schema.type, 'string', `${where}: one type, not ${JSON.stringify(schema.type)}`);
    assert.notEqual(schema.type, 'null', where);
    for (const k of ['oneOf', 'anyOf', 'allOf']) assert.equal(schema[k], undefined, `${where}: no ${k}`);
    for (const [k, sub] of Object.entries(schema.properties ?? {})) assertPortable(sub, `${where}.${k}`);
    if (schema.items) assertPortable(schema.items, `${where}[]`);
}

function checkTools(tools, { annotations = true, outputSchemas = true } = {}) {
    assert.deepEqual(tools.map((t) => t.name).sort(), ['read_workspace', 'run_code', 'session_end', 'session_start']);
    for (const t of tools) {
        // Claude Desktop hides every tool of a server when one name breaks this.
        assert.match(t.name, /^[a-zA-Z0-9_-]{1,64}$/);
        assert.equal(typeof t.description, 'string');
        assert.ok(t.description.length > 40, `${t.name} has a real description`);
        assert.equal(t.inputSchema.type, 'object');
        for (const k of ['oneOf', 'anyOf', 'allOf']) assert.equal(t.inputSchema[k], undefined, `no top-level ${k}`);
        if (t.outputSchema) {
            assert.equal(t.outputSchema.type, 'object', 'a legacy outputSchema is an object');
            assertPortable(t.outputSchema, `${t.name}.outputSchema`);
        }
        if (annotations) {
            assert.equal(typeof t.annotations, 'object', `${t.name} has annotations`);
            for (const h of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
                assert.equal(typeof t.annotations[h], 'boolean', `${t.name}.annotations.${h}`);
            }
        }
    }
    const run = tools.find((t) => t.name === 'run_code');
    const p = run.inputSchema.properties;
    assert.deepEqual([...p.language.enum].sort(), ['bash', 'node', 'python']);
    assert.equal(p.code.type, 'string');
    assert.ok(['integer', 'number'].includes(p.timeout_seconds.type), 'timeout_seconds is a number');
    assert.deepEqual([...run.inputSchema.required].sort(), ['code', 'language']);
    assert.match(run.description, /read_workspace/, 'run_code tells the agent to use read_workspace');
    assert.match(run.description, /network/i, 'run_code says what the sandbox can reach');

    const rw = tools.find((t) => t.name === 'read_workspace');
    assert.equal(rw.inputSchema.properties.path.type, 'string');
    assert.deepEqual(rw.inputSchema.required, ['path']);
    if (annotations) {
        assert.equal(rw.annotations.readOnlyHint, true, 'read_workspace is read-only');
        assert.equal(run.annotations.readOnlyHint, false, 'run_code is not read-only');
        // run_code can overwrite and delete the workspace files it shares with the user
        assert.equal(run.annotations.destructiveHint, true, 'run_code is destructive (docs/design/results.md)');
        assert.equal(run.annotations.idempotentHint, false);
    }
    if (outputSchemas) {
        assert.equal(typeof run.outputSchema, 'object', 'run_code has an outputSchema');
        assert.equal(typeof rw.outputSchema, 'object', 'read_workspace has an outputSchema');
        for (const f of ['isolation', 'isolation_grade', 'outcome', 'outcome_text', 'stdout', 'stdout_bytes', 'stdout_bytes_shown', 'usage']) {
            assert.ok(run.outputSchema.required.includes(f), `run_code always gives ${f}`);
        }
    }
    // issue 12 item 7: never promise a limit the grade may not give
    assert.doesNotMatch(run.description, /Limits per run/);
    if (BACKEND !== 'naive') assert.match(run.description, /Limits requested per run: .*each result says so/s);
}

test('tools/list on the modern revision', async (t) => {
    const conn = await connect(makeWorld(t));
    checkTools((await conn.client.listTools()).tools);
});

test('tools/list on 2025-11-25', async (t) => {
    const conn = await connectV1(makeWorld(t));
    checkTools((await conn.client.listTools()).tools);
});

test('tools/list on 2024-11-05 (no annotations needed, schemas intact)', async (t) => {
    const conn = await connectV1(makeWorld(t), { version: '2024-11-05' });
    checkTools((await conn.client.listTools()).tools, { annotations: false, outputSchemas: false });
});

test('an unknown tool is a protocol error (-32602)', async (t) => {
    const conn = await connectV1(makeWorld(t));
    await assert.rejects(conn.client.callTool({ name: 'no_such_tool', arguments: {} }),
        (e) => e.code === -32602 || /-32602/.test(String(e.message)));
});
