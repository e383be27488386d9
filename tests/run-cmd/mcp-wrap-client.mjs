// mcp-wrap-client.mjs - the MCP client side of tests/run-cmd/mcp-wrap.test.sh, with the official
// SDK client (https://github.com/modelcontextprotocol/typescript-sdk) over stdio:
//   node mcp-wrap-client.mjs fs VESTIBULE NPMDIR DIR FILE  - server-filesystem on DIR, plain and
//        wrapped: tools/list and read_file FILE must be the same; the wrap's grade notification.
//   node mcp-wrap-client.mjs hostile VESTIBULE NPMDIR DIR plain|wrapped - one exfil call; prints
//        its result JSON on a line "RESULT {...}".
// Lines "ok ..." / "FAIL ..."; exit 1 on any FAIL.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import assert from 'node:assert';
import path from 'node:path';

const [mode, vm, npm, dir, arg] = process.argv.slice(2);
let failed = 0;
const ok = (name) => console.log(`ok   ${name}`);
const bad = (name, e) => { failed++; console.log(`FAIL ${name}: ${e}`); };

async function open(cmd, args) {
  const logs = [];
  const client = new Client({ name: 'mcp-wrap-test', version: '1.0.0' });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
  const transport = new StdioClientTransport({ command: cmd, args, env: process.env, stderr: 'inherit' });
  await client.connect(transport);
  return { client, logs, transport };
}

const wrapArgs = (server) => [vm, ['mcp', 'wrap', '--name', path.basename(server[0]), '--allow-read', npm, '--allow', dir, '--', process.execPath, ...server]];

async function fsMode() {
  const srv = [path.join(npm, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js'), dir];
  const plain = await open(process.execPath, srv);
  const wrapped = await open(...wrapArgs(srv));
  try {
    const a = await plain.client.listTools();
    const b = await wrapped.client.listTools();
    try { assert.deepStrictEqual(b, a); assert(a.tools.length > 3); ok(`tools/list the same through the wrap (${a.tools.length} tools)`); } catch (e) { bad('tools/list', e.message); }
    const call = { name: 'read_file', arguments: { path: path.join(dir, arg) } };
    const ra = await plain.client.callTool(call);
    const rb = await wrapped.client.callTool(call);
    try { assert.deepStrictEqual(rb, ra); assert.match(JSON.stringify(ra), /project-notes-7f3a/); ok('read_file result the same through the wrap'); } catch (e) { bad('read_file', e.message); }
    await new Promise((r) => setTimeout(r, 200));
    const grades = wrapped.logs.filter((l) => l.logger === 'vestibule' && /^isolation: native/.test(l.data));
    if (grades.length === 1 && plain.logs.length === 0) ok(`one grade notification: ${grades[0].data.slice(0, 60)}...`);
    else bad('grade notification', JSON.stringify(wrapped.logs));
  } finally {
    await plain.client.close();
    await wrapped.client.close();
  }
}

async function hostileMode() {
  const srv = [path.join(npm, 'hostile-server.mjs')];
  const { client } = arg === 'wrapped' ? await open(...wrapArgs(srv)) : await open(process.execPath, srv);
  try {
    const r = await client.callTool({ name: 'exfil', arguments: {} });
    console.log(`RESULT ${r.content[0].text}`);
  } finally {
    await client.close();
  }
}

try {
  await (mode === 'fs' ? fsMode() : hostileMode());
} catch (e) {
  bad(mode, e.stack);
}
process.exit(failed ? 1 : 0);
