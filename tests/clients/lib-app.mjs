// lib-app.mjs - a stand-in app embedding one MCP client library, run as its own process (so
// the library sees an app's environment, not the test runner's). It connects to the server the
// way the library's docs show, calls the script's tools through the library's tool objects,
// and writes, per step, what the library hands to the model-facing layer of its framework:
//   ai-sdk     @ai-sdk/mcp: tool.execute(), then tool.toModelOutput() (what generateText puts in
//              the tool-result part it sends to the provider)
//   langchain  @langchain/mcp-adapters: the tools in LangGraph's prebuilt ToolNode, given an
//              AIMessage with the tool call -> the ToolMessage's content (what the agent
//              appends to the model's messages; ToolNode turns a tool's error into one too)
//   mastra     @mastra/mcp: tool.execute(), then the tool's toModelOutput() when it has one (a
//              tool with an outputSchema: the text blocks), else the result as JSON; a thrown
//              error (an isError result) as its message
//
// Usage: node lib-app.mjs LIBRARY CONFIG.json OUT.json
//   CONFIG: { command, env, script: [{kind, args}] }  (env: the MCP config's env block)
//   OUT:    { seen: [...], tools: [names] }
import fs from 'node:fs';
import { fillArgs, modelText } from './facts.mjs';

const [lib, cfgPath, outPath] = process.argv.slice(2);
const cfg = JSON.parse(fs.readFileSync(cfgPath, 'utf8'));
const seen = [];
let toolNames = [];

function pick(tools, kind) {
    const name = Object.keys(tools).find((n) => n === kind || n.endsWith(`_${kind}`));
    if (!name) throw new Error(`the library offers no tool like ${kind} (has: ${Object.keys(tools).join(', ')})`);
    return tools[name];
}

if (lib === 'ai-sdk') {
    const { createMCPClient } = await import('@ai-sdk/mcp');
    const { Experimental_StdioMCPTransport } = await import('@ai-sdk/mcp/mcp-stdio');
    const client = await createMCPClient({ transport: new Experimental_StdioMCPTransport({ command: cfg.command, args: [], env: cfg.env }) });
    try {
        const tools = await client.tools();
        toolNames = Object.keys(tools);
        for (const [i, s] of cfg.script.entries()) {
            const t = pick(tools, s.kind);
            const opts = { toolCallId: `call_${i}`, messages: [] };
            const args = fillArgs(s.args, seen.length ? modelText(seen.at(-1)) : '');
            const output = await t.execute(args, opts);
            const mo = t.toModelOutput ? await t.toModelOutput({ toolCallId: opts.toolCallId, input: args, output }) : { type: 'json', value: output };
            seen.push(mo.value);
        }
    } finally {
        await client.close();
    }
} else if (lib === 'langchain') {
    const { MultiServerMCPClient } = await import('@langchain/mcp-adapters');
    const { ToolNode } = await import('@langchain/langgraph/prebuilt');
    const { AIMessage } = await import('@langchain/core/messages');
    const client = new MultiServerMCPClient({ mcpServers: { vestibule: { transport: 'stdio', command: cfg.command, args: [], env: cfg.env } } });
    try {
        const list = await client.getTools();
        const tools = Object.fromEntries(list.map((t) => [t.name, t]));
        toolNames = Object.keys(tools);
        const node = new ToolNode(list);
        for (const [i, s] of cfg.script.entries()) {
            const name = pick(tools, s.kind).name;
            const args = fillArgs(s.args, seen.length ? modelText(seen.at(-1)) : '');
            const ai = new AIMessage({ content: '', tool_calls: [{ name, args, id: `call_${i}`, type: 'tool_call' }] });
            const out = await node.invoke({ messages: [ai] });
            seen.push(out.messages[0].content);
        }
    } finally {
        await client.close();
    }
} else if (lib === 'mastra') {
    const { MCPClient } = await import('@mastra/mcp');
    const mcp = new MCPClient({ id: 'vestibule-tests', servers: { vestibule: { command: cfg.command, args: [], env: cfg.env } } });
    try {
        const tools = await (mcp.listTools ? mcp.listTools() : mcp.getTools());
        toolNames = Object.keys(tools);
        for (const s of cfg.script) {
            const t = pick(tools, s.kind);
            let out;
            try {
                out = await t.execute(fillArgs(s.args, seen.length ? modelText(seen.at(-1)) : ''), {});
            } catch (e) {
                // an isError result is thrown (onToolError "throw", the default); the agent
                // hands the model the error's message
                seen.push(String(e?.message ?? e));
                continue;
            }
            // a tool with an outputSchema has toModelOutput (the text blocks when there are);
            // otherwise the model gets the value as JSON
            const mo = t.toModelOutput ? await t.toModelOutput(out) : { type: 'json', value: out };
            seen.push(mo.type === 'json' ? JSON.stringify(mo.value) : mo.value);
        }
    } finally {
        await mcp.disconnect();
    }
} else {
    throw new Error(`unknown library ${lib}`);
}
fs.writeFileSync(outPath, JSON.stringify({ seen, tools: toolNames }));
process.exit(0);
