#!/usr/bin/env node
// demo.mjs - one real run through the MCP server, the way an agent's client does it: start
// vestibule-mcp over stdio with the official MCP TypeScript client, let it negotiate the
// protocol revision, call run_code with python `print(1)` and print the result text, whose
// last line is the isolation that actually applied.
//
// Usage: VESTIBULE_BIN=/path/to/vestibule-mcp node demo.mjs ['python code']
// Exit status: 0 when the code ran (the result ends with an isolation: line), 1 otherwise.
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const bin = process.env.VESTIBULE_BIN || 'vestibule-mcp';
const code = process.argv[2] ?? 'print(1)';

// The server gets what an MCP config's "env" would give it: this environment's VESTIBULE_*
// settings and the engine's location (DOCKER_HOST, CONTAINER_HOST). The SDK adds its default
// environment (HOME, LOGNAME, PATH, SHELL, TERM, USER) and nothing else, so the server finds
// the user bus and the runtime folder on its own, as it must for a real client.
const env = {};
for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('VESTIBULE_') && k !== 'VESTIBULE_BIN') env[k] = v;
    if (['DOCKER_HOST', 'CONTAINER_HOST'].includes(k)) env[k] = v;
}

const transport = new StdioClientTransport({ command: bin, args: [], env, stderr: 'inherit' });
const client = new Client({ name: 'vestibule-demo', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
await client.connect(transport);
const server = client.getServerVersion();
console.error(`connected to ${server?.name ?? 'vestibule-mcp'} ${server?.version ?? ''} ` +
    `(protocol ${client.getNegotiatedProtocolVersion()}); calling run_code with python: ${code}`);
const result = await client.callTool({ name: 'run_code', arguments: { language: 'python', code } });
const text = result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
console.log(text);
await client.close();
process.exit(/\nisolation: [^\n]+$/.test(text.trimEnd()) ? 0 : 1);
