// mcp-call.mjs - one run_code call through a freshly installed vestibule-mcp, speaking MCP's
// stdio transport (newline-delimited JSON-RPC) by hand: the package tests run where no SDK is
// installed. Usage: node mcp-call.mjs EXPECTED_GRADE_PREFIX COMMAND [ARGS...]
// Starts COMMAND with the environment a client gives (HOME, LOGNAME, PATH, SHELL, TERM, USER),
// initializes, calls run_code (python: print(6*7)), checks the result's text holds 42 and ends
// with an isolation: line starting with EXPECTED_GRADE_PREFIX, and prints that line.
import { spawn } from 'node:child_process';

const [want, cmd, ...args] = process.argv.slice(2);
const env = {};
for (const k of ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER'])
  if (process.env[k] !== undefined) env[k] = process.env[k];
for (const [k, v] of Object.entries(process.env))
  if (k.startsWith('VESTIBULE_')) env[k] = v; // what the client config's "env" holds

const child = spawn(cmd, args, { env, stdio: ['pipe', 'pipe', 'inherit'] });
const pending = new Map();
let buf = '';
child.stdout.on('data', (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    if (!line.trim()) continue;
    const msg = JSON.parse(line);
    if (msg.id !== undefined && pending.has(msg.id)) {
      pending.get(msg.id)(msg);
      pending.delete(msg.id);
    }
  }
});
const timer = setTimeout(() => {
  console.error('mcp-call: no answer within 120 s');
  child.kill('SIGKILL');
  process.exit(1);
}, 120000);
let next = 1;
function request(method, params) {
  const id = next++;
  child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
  return new Promise((resolve) => pending.set(id, resolve));
}

const init = await request('initialize', {
  protocolVersion: '2025-06-18',
  capabilities: {},
  clientInfo: { name: 'vestibule-package-test', version: '1' },
});
if (!init.result) throw new Error(`initialize failed: ${JSON.stringify(init)}`);
child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
const res = await request('tools/call', {
  name: 'run_code',
  arguments: { language: 'python', code: 'print(6*7)' },
});
clearTimeout(timer);
child.stdin.end();
const text = (res.result?.content ?? []).map((c) => c.text ?? '').join('\n');
const iso = text.trim().split('\n').pop();
console.log(`server: ${init.result.serverInfo?.name} ${init.result.serverInfo?.version}`);
console.log(iso);
if (res.result?.isError || !/^42$/m.test(text) || !iso.startsWith(`isolation: ${want}`)) {
  console.error(`mcp-call: unexpected result:\n${JSON.stringify(res, null, 1)}`);
  process.exit(1);
}
await new Promise((r) => child.on('exit', r));
