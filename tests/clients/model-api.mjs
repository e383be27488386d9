// model-api.mjs - a scripted stand-in for the model APIs the MCP clients talk to, on
// 127.0.0.1 only. It speaks:
//   - Anthropic Messages, POST /v1/messages (SSE when "stream": true; Claude Code, opencode)
//     https://docs.anthropic.com/en/api/messages-streaming
//   - OpenAI Responses, POST /v1/responses (SSE; Codex CLI)
//     https://platform.openai.com/docs/api-reference/responses-streaming
//   - OpenAI Chat Completions, POST /v1/chat/completions (SSE or JSON)
//   - Gemini, POST /v1beta/models/M:generateContent and :streamGenerateContent?alt=sse,
//     :countTokens (Gemini CLI) https://ai.google.dev/api/generate-content
//
// The "model" is a script: a list of tool calls (kind run_code or read_workspace, with
// arguments). It is stateless, as the APIs are: each request carries the whole conversation, so
// the number of tool results already in it says which step comes next. While steps remain the
// reply asks for the next tool call; then it answers with plain text and the conversation
// ends. Every tool result the client sends back is recorded, in order, exactly as it reached
// the "model" (the string or object the API request carried for it): that is what a real
// model would have read.
//
// A request that does not offer our tools (a title or a quota probe, a "next speaker" check)
// gets a short text answer (or a JSON object when the request asks for JSON).
import http from 'node:http';
import { fillArgs, modelText } from './facts.mjs';

/**
 * Start the stand-in API.
 * @param {object} opts
 * @param {Array<{kind:'run_code'|'read_workspace', args:object}>} opts.script  the tool calls
 * @param {(line:string)=>void} [opts.log]  one line per request (for a debug log)
 * @param {(tools:string[])=>boolean} [opts.offers]  whether a request's tool list is the
 *   conversation the script is for (default: it offers run_code); tests/run-cmd's agent
 *   preset test scripts the client's own Bash tool
 * @returns {Promise<{url:string, port:number, results:Array, requests:Array, close:()=>Promise<void>}>}
 *   results[i] = { step, api, name, id, seen } for the i-th tool result (first sighting);
 *   seen is what the request carried as the tool's output (string, array or object).
 */
export async function startModelApi({ script, log = () => {}, offers }) {
    const results = [];
    const requests = [];
    const seenIds = new Set();

    function record(api, items) {
        // items: [{id, name, seen}] in conversation order; the k-th is step k.
        items.forEach((it, k) => {
            const key = `${api}:${it.id ?? `#${k}`}`;
            if (seenIds.has(key)) return;
            seenIds.add(key);
            results.push({ step: k, api, name: it.name, id: it.id, seen: it.seen });
        });
    }

    // The next action for a conversation that has `done` tool results and offers `tools`
    // (names). Returns {tool: name, args, id} or {text}.
    function next(done, tools) {
        if (done >= script.length) return { text: `All ${script.length} calls are done.` };
        const s = script[done];
        const name = tools.find((t) => t === s.kind || t.endsWith(`_${s.kind}`) || t.endsWith(`__${s.kind}`) || t.endsWith(`.${s.kind}`));
        if (!name) return { text: `No tool named like ${s.kind} was offered (${tools.join(', ') || 'none'}).` };
        const prev = results.filter((r) => r.step === done - 1).at(-1);
        const args = fillArgs(s.args, prev ? modelText(prev.seen) : '');
        return { tool: name, args, id: `call_vst_${done}_${Math.random().toString(36).slice(2, 8)}` };
    }
    const offersOurs = offers ?? ((tools) => tools.some((t) => /run_code$/.test(t)));

    const server = http.createServer((req, res) => {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
            let body = {};
            const raw = Buffer.concat(chunks).toString('utf8');
            try { body = raw ? JSON.parse(raw) : {}; } catch { /* not JSON */ }
            const url = new URL(req.url, 'http://127.0.0.1');
            requests.push({ method: req.method, path: url.pathname, body });
            log(`${req.method} ${req.url} ${raw.length} bytes`);
            try {
                route(req, res, url, body);
            } catch (e) {
                log(`error: ${e.stack}`);
                if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
                res.end(JSON.stringify({ error: { message: String(e) } }));
            }
        });
    });

    // a request node's parser refuses (400 with no body) is logged with what it was
    server.on('clientError', (e, sock) => {
        log(`client error ${e.code}: ${JSON.stringify(String(e.rawPacket ?? '').slice(0, 300))}`);
        if (sock.writable) sock.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    });

    function route(req, res, url, body) {
        const p = url.pathname;
        if (req.method === 'GET' && /\/models\/?$/.test(p)) return json(res, { object: 'list', data: [{ id: 'stand-in', object: 'model', created: 0, owned_by: 'vestibule-tests' }], models: [] });
        if (req.method !== 'POST') return json(res, {}, 200);
        if (p.endsWith('/messages/count_tokens')) return json(res, { input_tokens: 100 });
        if (p.endsWith('/messages')) return anthropic(res, body);
        if (p.endsWith('/responses')) return responses(res, body);
        if (p.endsWith('/chat/completions')) return chat(res, body);
        const g = /\/models\/([^/:]+):(\w+)$/.exec(p);
        if (g && g[2] === 'countTokens') return json(res, { totalTokens: 100 });
        if (g && (g[2] === 'generateContent' || g[2] === 'streamGenerateContent')) return gemini(res, body, g[1], g[2] === 'streamGenerateContent');
        log(`unknown path ${p}`);
        return json(res, { error: { message: `the stand-in model API has no ${p}` } }, 404);
    }

    // ------------------------------------------------------------------ Anthropic Messages
    function anthropic(res, body) {
        const tools = (body.tools || []).map((t) => t.name).filter(Boolean);
        const items = [];
        for (const m of body.messages || [])
            if (Array.isArray(m.content))
                for (const b of m.content)
                    if (b.type === 'tool_result') items.push({ id: b.tool_use_id, seen: b.content, isError: b.is_error });
        let act;
        if (offersOurs(tools)) {
            record('anthropic', items);
            act = next(items.length, tools);
        } else {
            act = { text: 'ok' };
        }
        const model = body.model || 'stand-in';
        const content = act.tool ? [{ type: 'tool_use', id: act.id.replace('call_', 'toolu_'), name: act.tool, input: act.args }]
            : [{ type: 'text', text: act.text }];
        const stop = act.tool ? 'tool_use' : 'end_turn';
        const usage = { input_tokens: 100, output_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
        if (!body.stream)
            return json(res, { id: 'msg_vst', type: 'message', role: 'assistant', model, content, stop_reason: stop, stop_sequence: null, usage });
        sse(res);
        const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
        ev('message_start', { message: { id: 'msg_vst', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
        const b = content[0];
        if (b.type === 'tool_use') {
            ev('content_block_start', { index: 0, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
            ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) } });
        } else {
            ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
            ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: b.text } });
        }
        ev('content_block_stop', { index: 0 });
        ev('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 10 } });
        ev('message_stop', {});
        res.end();
    }

    // ------------------------------------------------------------------ OpenAI Responses
    function responses(res, body) {
        const toolNames = [];
        for (const t of body.tools || []) {
            if (t.name) toolNames.push(t.name);
            // a namespace of tools (Codex groups an MCP server's tools under one)
            for (const u of t.tools || []) if (u.name) toolNames.push(t.name ? `${t.name}.${u.name}` : u.name);
        }
        const input = Array.isArray(body.input) ? body.input : [];
        const items = input.filter((i) => i.type === 'function_call_output' || i.type === 'custom_tool_call_output')
            .map((i) => ({ id: i.call_id, seen: i.output }));
        let act;
        if (offersOurs(toolNames)) {
            record('openai-responses', items);
            act = next(items.length, toolNames);
        } else {
            act = { text: 'ok' };
        }
        const model = body.model || 'stand-in';
        let item;
        if (act.tool) {
            let name = act.tool, namespace;
            const dot = name.lastIndexOf('.');
            if (dot > 0) { namespace = name.slice(0, dot); name = name.slice(dot + 1); }
            item = { type: 'function_call', id: `fc_${act.id}`, call_id: act.id, name, arguments: JSON.stringify(act.args), status: 'completed', ...(namespace ? { namespace } : {}) };
        } else {
            item = { type: 'message', id: 'msg_vst', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: act.text, annotations: [] }] };
        }
        const usage = { input_tokens: 100, input_tokens_details: { cached_tokens: 0 }, output_tokens: 10, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 110 };
        const resp = { id: 'resp_vst', object: 'response', created_at: 0, model, status: 'completed', output: [item], usage };
        if (body.stream === false) return json(res, resp);
        sse(res);
        let seq = 0;
        const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`);
        ev('response.created', { response: { ...resp, status: 'in_progress', output: [] } });
        ev('response.output_item.added', { output_index: 0, item: item.type === 'message' ? { ...item, status: 'in_progress', content: [] } : { ...item, status: 'in_progress' } });
        if (item.type === 'message') ev('response.output_text.delta', { item_id: item.id, output_index: 0, content_index: 0, delta: act.text });
        ev('response.output_item.done', { output_index: 0, item });
        ev('response.completed', { response: resp });
        res.end();
    }

    // ------------------------------------------------------------------ OpenAI Chat Completions
    function chat(res, body) {
        const tools = (body.tools || []).map((t) => t.function?.name).filter(Boolean);
        const items = (body.messages || []).filter((m) => m.role === 'tool').map((m) => ({ id: m.tool_call_id, seen: m.content }));
        let act;
        if (offersOurs(tools)) {
            record('openai-chat', items);
            act = next(items.length, tools);
        } else {
            act = { text: 'ok' };
        }
        const model = body.model || 'stand-in';
        const msg = act.tool ? { role: 'assistant', content: null, tool_calls: [{ id: act.id, type: 'function', function: { name: act.tool, arguments: JSON.stringify(act.args) } }] }
            : { role: 'assistant', content: act.text };
        const finish = act.tool ? 'tool_calls' : 'stop';
        const usage = { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 };
        if (!body.stream) return json(res, { id: 'chatcmpl-vst', object: 'chat.completion', created: 0, model, choices: [{ index: 0, message: msg, finish_reason: finish }], usage });
        sse(res);
        const chunk = (choices, extra = {}) => res.write(`data: ${JSON.stringify({ id: 'chatcmpl-vst', object: 'chat.completion.chunk', created: 0, model, choices, ...extra })}\n\n`);
        if (act.tool) chunk([{ index: 0, delta: { role: 'assistant', content: null, tool_calls: [{ index: 0, ...msg.tool_calls[0] }] }, finish_reason: null }]);
        else chunk([{ index: 0, delta: { role: 'assistant', content: act.text }, finish_reason: null }]);
        chunk([{ index: 0, delta: {}, finish_reason: finish }]);
        chunk([], { usage });
        res.write('data: [DONE]\n\n');
        res.end();
    }

    // ------------------------------------------------------------------ Gemini
    function gemini(res, body, model, stream) {
        const tools = [];
        for (const t of body.tools || []) for (const f of t.functionDeclarations || []) tools.push(f.name);
        const items = [];
        for (const c of body.contents || []) {
            let last = null;
            for (const part of c.parts || []) {
                if (part.functionResponse) {
                    last = { id: part.functionResponse.id ?? `#${items.length}`, name: part.functionResponse.name, seen: part.functionResponse.response };
                    items.push(last);
                } else if (part.inlineData && last) {
                    // Gemini CLI sends a tool's image as an inlineData part after the
                    // functionResponse, in the same turn: it belongs to that result
                    last.seen = { ...last.seen, inlineParts: [...(last.seen.inlineParts || []), part] };
                }
            }
        }
        const gc = body.generationConfig || body.config || {};
        let act;
        if (offersOurs(tools)) {
            record('gemini', items);
            act = next(items.length, tools);
        } else if (gc.responseMimeType === 'application/json' || gc.responseSchema || gc.responseJsonSchema) {
            act = { text: JSON.stringify({ next_speaker: 'user', reasoning: 'the stand-in model is done', complexity_reasoning: 'simple', complexity_score: 1, model_choice: 'flash' }) };
        } else {
            act = { text: 'ok' };
        }
        const parts = act.tool ? [{ functionCall: { id: act.id, name: act.tool, args: act.args } }] : [{ text: act.text }];
        const out = { candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: 100, candidatesTokenCount: 10, totalTokenCount: 110 }, modelVersion: model };
        if (!stream) return json(res, out);
        sse(res);
        res.write(`data: ${JSON.stringify(out)}\r\n\r\n`);
        res.end();
    }

    function sse(res) {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    }
    function json(res, obj, status = 200) {
        const s = JSON.stringify(obj);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) });
        res.end(s);
    }

    await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', resolve);
    });
    const port = server.address().port;
    return {
        port,
        url: `http://127.0.0.1:${port}`,
        results,
        requests,
        close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }),
    };
}
