// mcp-wrap-client.mjs - the MCP client side of tests/run-cmd/mcp-wrap.test.sh, with the official
// SDK client (https://github.com/modelcontextprotocol/typescript-sdk) over stdio:
//   node mcp-wrap-client.mjs fs VESTIBULE NPMDIR DIR FILE  - server-filesystem on DIR, plain and
//        wrapped: tools/list and read_file FILE must be the same; the wrap's grade notification.
//   node mcp-wrap-client.mjs everything VESTIBULE NPMDIR DIR - server-everything (its `stdio`
//        transport), plain and wrapped: tools/list (names, input schemas), the calls echo,
//        get-sum, get-tiny-image (an image), get-structured-content and get-resource-reference
//        (an embedded resource), prompts/list + prompts/get, resources/list + resources/read
//        must be the same.
//   node mcp-wrap-client.mjs hostile VESTIBULE NPMDIR DIR plain|wrapped - one exfil call; prints
//        its result JSON on a line "RESULT {...}".
//   node mcp-wrap-client.mjs auditfail VESTIBULE NPMDIR DIR AUDITDIR - the hostile server wrapped:
//        one exfil call answered (the control), then AUDITDIR's files removed and AUDITDIR made
//        read-only (0500), and one more exfil call must be answered with a JSON-RPC error that
//        names the fix (fail closed), not relayed; AUDITDIR is made 0700 again.
//   node mcp-wrap-client.mjs rawcalls VESTIBULE NPMDIR DIR AUDITDIR - the hostile server wrapped,
//        driven with raw lines (as any client's JSON encoder may write them): a tools/call whose
//        method is written "tools\/call" is relayed and its arguments are in AUDITDIR's log;
//        then, with the log failing as in auditfail, four forms of tools/call must each be
//        answered with an error, not relayed: the escaped method, \u0074ools/call, arguments
//        nested 40 deep (past json-c's default 32) and a second "method\u0000" key (json-c
//        cuts a key at its NUL, JavaScript does not). Before those, with the log writable, a
//        call with a second "name\u0000" key (the log would name the wrong tool) is refused.
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

// The timestamp server-everything writes into its generated resources (toLocaleTimeString).
const untimed = (v) => JSON.parse(JSON.stringify(v).replace(/created at [0-9:]+( [AP]M)?/g, 'created at T'));

async function same(name, f, check) {
  try {
    const [a, b] = await Promise.all([f(everything.plain.client), f(everything.wrapped.client)]);
    assert.deepStrictEqual(untimed(b), untimed(a));
    check(a);
    ok(`${name} the same through the wrap`);
  } catch (e) {
    bad(name, e.message);
  }
}

const everything = {};
async function everythingMode() {
  const srv = [path.join(npm, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'];
  everything.plain = await open(process.execPath, srv);
  everything.wrapped = await open(...wrapArgs(srv));
  try {
    const a = await everything.plain.client.listTools();
    const b = await everything.wrapped.client.listTools();
    const shape = (r) => r.tools.map((t) => [t.name, t.inputSchema]);
    try {
      assert.deepStrictEqual(shape(b), shape(a));
      assert.deepStrictEqual(b, a);
      for (const t of ['echo', 'get-sum', 'get-tiny-image', 'get-resource-reference']) assert(a.tools.some((x) => x.name === t), `no tool ${t}`);
      ok(`tools/list the same through the wrap (${a.tools.length} tools, names and input schemas)`);
    } catch (e) {
      bad('tools/list', e.message);
    }
    const call = (name, args) => (c) => c.callTool({ name, arguments: args });
    await same('echo', call('echo', { message: 'hello-wrap-5c1e' }), (r) => assert.match(r.content[0].text, /hello-wrap-5c1e/));
    try { // the control: the comparison sees a changed argument, so it can fail
      const [a, b] = await Promise.all([call('echo', { message: 'a' })(everything.plain.client), call('echo', { message: 'b' })(everything.wrapped.client)]);
      assert.throws(() => assert.deepStrictEqual(b, a));
      ok('control: echo of another message through the wrap compares different');
    } catch (e) {
      bad('control: echo of another message', e.message);
    }
    await same('get-sum', call('get-sum', { a: 19, b: 23 }), (r) => assert.match(r.content[0].text, /\b42\b/));
    await same('get-tiny-image (image content)', call('get-tiny-image', {}), (r) => assert(r.content.some((c) => c.type === 'image' && c.data.length > 100)));
    await same('get-structured-content', call('get-structured-content', { location: 'Chicago' }), (r) => assert.strictEqual(typeof r.structuredContent.temperature, 'number'));
    await same('get-resource-reference (embedded blob resource)', call('get-resource-reference', { resourceType: 'Blob', resourceId: 2 }),
      (r) => assert(r.content.some((c) => c.type === 'resource' && c.resource.blob)));
    await same('prompts/list', (c) => c.listPrompts(), (r) => assert(r.prompts.some((p) => p.name === 'simple-prompt')));
    await same('prompts/get simple-prompt', (c) => c.getPrompt({ name: 'simple-prompt' }), (r) => assert(r.messages.length > 0));
    let uri;
    await same('resources/list', (c) => c.listResources(), (r) => { assert(r.resources.length > 0); uri = r.resources[0].uri; });
    if (uri) await same(`resources/read ${uri}`, (c) => c.readResource({ uri }), (r) => assert(r.contents[0].text || r.contents[0].blob));
  } finally {
    await everything.plain.client.close();
    await everything.wrapped.client.close();
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

async function auditFailMode() {
  const fs = await import('node:fs');
  const srv = [path.join(npm, 'hostile-server.mjs')];
  const { client } = await open(...wrapArgs(srv));
  try {
    const r = await client.callTool({ name: 'exfil', arguments: {} });
    if (r.content?.[0]?.text?.includes('"key"')) ok('control: a tools/call with the audit log writable is relayed and answered');
    else bad('control: first call', JSON.stringify(r));
    for (const f of fs.readdirSync(arg)) fs.rmSync(path.join(arg, f), { force: true });
    fs.chmodSync(arg, 0o500);
    try {
      const r2 = await client.callTool({ name: 'exfil', arguments: {} });
      bad('a tools/call whose audit record fails', `relayed and answered: ${JSON.stringify(r2).slice(0, 200)}`);
    } catch (e) {
      if (e.code === -32603 && /audit record/.test(e.message) && /VESTIBULE_AUDIT_DIR/.test(e.message)) ok(`a tools/call whose audit record fails gets a JSON-RPC error naming the fix: ${e.message.slice(0, 150)}...`);
      else bad('a tools/call whose audit record fails', `${e.code} ${e.message}`);
    }
  } finally {
    fs.chmodSync(arg, 0o700);
    await client.close();
  }
}

async function rawCallsMode() {
  const fs = await import('node:fs');
  const { spawn } = await import('node:child_process');
  const [cmd, args] = wrapArgs([path.join(npm, 'hostile-server.mjs')]);
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'], env: process.env });
  const waiting = new Map();
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    for (let i; (i = buf.indexOf('\n')) >= 0;) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      let m;
      try { m = JSON.parse(line); } catch { continue; }
      const w = waiting.get(m.id);
      if (w) { waiting.delete(m.id); w(m); }
    }
  });
  const send = (id, text) => new Promise((resolve) => {
    waiting.set(id, resolve);
    child.stdin.write(`${text}\n`);
    setTimeout(() => { if (waiting.delete(id)) resolve({ timeout: true }); }, 30000);
  });
  const call = (id, method, extra = '') => `{"jsonrpc":"2.0","id":${id},"method":"${method}"${extra},"params":{"name":"exfil","arguments":{"marker":"raw-${id}-7c1d"}}}`;
  try {
    const init = await send(0, JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1.0.0' } } }));
    if (!init.result) throw new Error(`initialize: ${JSON.stringify(init)}`);
    child.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
    const r1 = await send(1, call(1, 'tools\\/call'));
    const logged = fs.readdirSync(arg).some((f) => fs.readFileSync(path.join(arg, f), 'latin1').includes('raw-1-7c1d'));
    if (r1.result && logged) ok('control: a tools/call written "tools\\/call" is relayed, and its arguments are in the audit log');
    else bad('a tools/call written "tools\\/call"', `answered ${JSON.stringify(r1).slice(0, 120)}, in the audit log: ${logged}`);
    // json-c cut a key at its NUL: the log said the tool was "fine", the server ran exfil
    const spoof = '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"exfil","name\\u0000":"fine","arguments":{}}}';
    const r6 = await send(6, spoof);
    if (r6.error && /not relayed/.test(r6.error.message)) ok(`a tools/call with a second key "name\\u0000" is answered with an error, not relayed: ${r6.error.message.slice(0, 100)}...`);
    else bad('a tools/call with a second key "name\\u0000"', JSON.stringify(r6).slice(0, 200));
    for (const f of fs.readdirSync(arg)) fs.rmSync(path.join(arg, f), { force: true });
    fs.chmodSync(arg, 0o500);
    const deep = `${'{"a":'.repeat(40)}1${'}'.repeat(40)}`;
    const cases = [
      ['the method written "tools\\/call"', call(2, 'tools\\/call')],
      ['the method written "\\u0074ools/call"', call(3, '\\u0074ools/call')],
      ['arguments nested 40 deep', `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"exfil","arguments":{"deep":${deep}}}}`],
      ['a second key "method\\u0000" after the method', call(5, 'tools/call', ',"method\\u0000":"ping"')],
    ];
    for (const [i, [what, text]] of cases.entries()) {
      const r = await send(i + 2, text);
      if (r.error && /not sent|not relayed/.test(r.error.message)) ok(`with the audit log failing, a tools/call with ${what} is answered with an error, not relayed: ${r.error.message.slice(0, 100)}...`);
      else bad(`with the audit log failing, a tools/call with ${what}`, JSON.stringify(r).slice(0, 200));
    }
  } finally {
    fs.chmodSync(arg, 0o700);
    child.stdin.end();
    await new Promise((r) => child.on('exit', r));
  }
}

try {
  await ({ fs: fsMode, everything: everythingMode, auditfail: auditFailMode, rawcalls: rawCallsMode }[mode] ?? hostileMode)();
} catch (e) {
  bad(mode, e.stack);
}
process.exit(failed ? 1 : 0);
