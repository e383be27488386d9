// drivers.mjs - one driver per client: write the client's MCP config as its user would, start
// it against the stand-in model API, and hand back what reached the model.
//
// A CLI driver returns nothing special: the model API recorded the tool results the CLI sent
// (ctx.api.results). A library driver (no model of its own) returns { seen: [...] }: per step,
// what the library hands to the model-facing layer of the framework it belongs to.
//
// ctx (run.mjs): dir, home, project (the client's working folder), ws, api {url, results},
// bin (vestibule-mcp), serverEnv (the MCP config's env block), env (the client's own
// environment), prompt, modules (node_modules), timeoutMs, exec(cmd, args, {env}) -> {code,
// stdout, stderr, timedOut}.
import fs from 'node:fs';
import path from 'node:path';

import { SCRIPT } from './facts.mjs';

// The native binaries the npm packages ship (their postinstall scripts, which npm 11 does not
// run unless allowed, would only copy these over a placeholder).
export const bins = {
    claude: (m) => path.join(m, '@anthropic-ai/claude-code-linux-x64/claude'),
    codex: (m) => path.join(m, '@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex'),
    opencode: (m) => {
        const avx2 = /(^|\s)avx2(\s|$)/.test(fs.readFileSync('/proc/cpuinfo', 'utf8'));
        return path.join(m, avx2 ? 'opencode-linux-x64' : 'opencode-linux-x64-baseline', 'bin/opencode');
    },
    gemini: (m) => path.join(m, '@google/gemini-cli/bundle/gemini.js'),
};

function ranOk(r, what) {
    if (r.timedOut) throw new Error(`${what} timed out (see its log)`);
    if (r.code !== 0) throw new Error(`${what} exited ${r.code ?? r.signal}: ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' | ')}`);
}

// No telemetry, update checks or error reports from any client (the netns stops them anyway).
const QUIET = {
    DISABLE_TELEMETRY: '1', DISABLE_ERROR_REPORTING: '1', DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DO_NOT_TRACK: '1',
};

const claudeCode = {
    name: 'claude-code',
    images: true, // the plot reaches its model as an Anthropic image block (issue 15)
    what: '@anthropic-ai/claude-code: claude -p, server added with `claude mcp add --scope user`',
    async run(ctx, { allow = true } = {}) {
        const claude = bins.claude(ctx.modules);
        const env = {
            ...QUIET, ANTHROPIC_BASE_URL: ctx.api.url, ANTHROPIC_API_KEY: 'dummy',
            // MCP tools straight in the tool list, not behind the ToolSearch tool (the
            // stand-in model does not search); the results reach the model the same way.
            ENABLE_TOOL_SEARCH: 'false',
        };
        const add = ['mcp', 'add', '--scope', 'user', 'vestibule'];
        for (const [k, v] of Object.entries(ctx.serverEnv)) add.push('--env', `${k}=${v}`);
        add.push('--', ctx.bin);
        // half the client's budget: 45 s at the default --timeout 90. The first start of the
        // 400 MB binary reads it from disk: in CI, beside stages importing images, that once
        // took over 30 s (a third, the bound before). The systemd VM's emulated guest
        // (--timeout 1200) needs minutes for it. `claude -p` keeps the rest of the deadline.
        ranOk(await ctx.exec(claude, add, { env, timeoutMs: ctx.timeoutMs / 2 }), 'claude mcp add');
        const r = await ctx.exec(claude, ['-p', ctx.prompt, '--output-format', 'json',
            ...(allow ? ['--allowedTools', 'mcp__vestibule__run_code,mcp__vestibule__read_workspace,mcp__vestibule__session_start,mcp__vestibule__session_end'] : [])], { env });
        ranOk(r, 'claude -p');
        return { shape: 'tool_result content (Anthropic Messages)' };
    },
};

const codex = {
    name: 'codex',
    what: '@openai/codex: codex exec, a custom model provider (Responses API) in CODEX_HOME/config.toml',
    async run(ctx, { approve = true } = {}) {
        const codexHome = path.join(ctx.home, '.codex');
        fs.mkdirSync(codexHome, { recursive: true });
        const envToml = Object.entries(ctx.serverEnv).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(', ');
        fs.writeFileSync(path.join(codexHome, 'config.toml'), `model = "stand-in"
model_provider = "standin"
check_for_update_on_startup = false

[model_providers.standin]
name = "stand-in model API"
base_url = "${ctx.api.url}/v1"
wire_api = "responses"
env_key = "STANDIN_API_KEY"

[mcp_servers.vestibule]
command = ${JSON.stringify(ctx.bin)}
env = { ${envToml} }
${approve ? 'default_tools_approval_mode = "approve"' : ''}

[analytics]
enabled = false
`);
        const r = await ctx.exec(bins.codex(ctx.modules), ['exec', '--skip-git-repo-check', ctx.prompt],
            { env: { ...QUIET, CODEX_HOME: codexHome, STANDIN_API_KEY: 'dummy' } });
        ranOk(r, 'codex exec');
        return { shape: 'function_call_output (Responses API)' };
    },
};

const gemini = {
    name: 'gemini-cli',
    images: true, // the plot reaches its model as an inlineData part after the functionResponse (issue 24)
    what: '@google/gemini-cli: gemini -p, server in ~/.gemini/settings.json, GOOGLE_GEMINI_BASE_URL',
    async run(ctx, { trustFolder = true, trustServer = true } = {}) {
        const dir = path.join(ctx.home, '.gemini');
        fs.mkdirSync(dir, { recursive: true });
        fs.writeFileSync(path.join(dir, 'settings.json'), JSON.stringify({
            // no folderTrust setting: it is on by default (0.61.0: `folderTrust?.enabled ?? true`)
            security: { auth: { selectedType: 'gemini-api-key' } },
            privacy: { usageStatisticsEnabled: false },
            general: { disableAutoUpdate: true, disableUpdateNag: true },
            telemetry: { enabled: false },
            mcpServers: { vestibule: { command: ctx.bin, env: ctx.serverEnv, ...(trustServer ? { trust: true } : {}) } },
        }, null, 2));
        if (trustFolder) fs.writeFileSync(path.join(dir, 'trustedFolders.json'), JSON.stringify({ [ctx.project]: 'TRUST_FOLDER' }, null, 2));
        const r = await ctx.exec(process.execPath, [bins.gemini(ctx.modules), '-p', ctx.prompt, '--model', 'gemini-2.5-flash'],
            { env: { ...QUIET, GEMINI_API_KEY: 'dummy', GOOGLE_GEMINI_BASE_URL: ctx.api.url, GEMINI_CLI_NO_RELAUNCH: 'true' } });
        if (!trustFolder) return { result: r };
        ranOk(r, 'gemini -p');
        return { shape: 'functionResponse.response (Gemini API)' };
    },
};

const opencode = {
    name: 'opencode',
    what: 'opencode-ai: opencode run, server under "mcp" in opencode.json, provider @ai-sdk/openai-compatible',
    // opencode's own start-up takes 25-70 s of CPU on a loaded 2-core host (its log shows gaps
    // of 10-17 s between steps with nothing outstanding): twice the usual allowance
    timeoutScale: 2,
    async run(ctx) {
        fs.writeFileSync(path.join(ctx.project, 'opencode.json'), JSON.stringify({
            $schema: 'https://opencode.ai/config.json',
            autoupdate: false,
            share: 'disabled',
            model: 'standin/stand-in',
            provider: {
                standin: {
                    npm: '@ai-sdk/openai-compatible',
                    name: 'stand-in model API',
                    options: { baseURL: `${ctx.api.url}/v1`, apiKey: 'dummy' },
                    models: { 'stand-in': { name: 'stand-in', tool_call: true } },
                },
            },
            mcp: { vestibule: { type: 'local', command: [ctx.bin], environment: ctx.serverEnv, enabled: true } },
        }, null, 2));
        const r = await ctx.exec(bins.opencode(ctx.modules), ['run', ctx.prompt],
            { env: { ...QUIET, OPENCODE_DISABLE_AUTOUPDATE: '1', OPENCODE_DISABLE_MODELS_FETCH: '1', OPENCODE_DISABLE_LSP_DOWNLOAD: '1' } });
        ranOk(r, 'opencode run');
        return { shape: 'tool message content (Chat Completions)' };
    },
};

// A library: the stand-in app (lib-app.mjs) in its own process with the client's environment.
function library(name, lib, what, shape) {
    return {
        name, what,
        async run(ctx) {
            const cfg = path.join(ctx.dir, 'app-config.json'), out = path.join(ctx.dir, 'app-out.json');
            fs.writeFileSync(cfg, JSON.stringify({ command: ctx.bin, env: ctx.serverEnv, script: SCRIPT }));
            const r = await ctx.exec(process.execPath, [path.join(ctx.here, 'lib-app.mjs'), lib, cfg, out]);
            ranOk(r, `the ${lib} app`);
            return { seen: JSON.parse(fs.readFileSync(out, 'utf8')).seen, shape };
        },
    };
}

// MCP Inspector's CLI: `--strict` tools/list must report no portability problem, and each
// script step through `--method tools/call` must print the facts (its reader is a person).
const inspector = {
    name: 'inspector',
    // each --cli call starts its own server, so no session outlives the call that started it:
    // the session steps are left out (facts.mjs checkViews, sessions: false)
    noSessions: true,
    what: '@modelcontextprotocol/inspector --cli --strict, server in a --config file',
    async run(ctx) {
        const launcher = path.join(ctx.modules, '@modelcontextprotocol/inspector/clients/launcher/build/index.js');
        const config = path.join(ctx.dir, 'mcp.json');
        fs.writeFileSync(config, JSON.stringify({ mcpServers: { vestibule: { command: ctx.bin, env: ctx.serverEnv } } }, null, 2));
        const base = ['--cli', '--config', config, '--server', 'vestibule'];
        const extraFailures = [];
        // The secret store is named so the Inspector does not look for a keychain on the bus.
        const env = { MCP_INSPECTOR_SECRET_STORE: 'memory' };
        const list = await ctx.exec(process.execPath, [launcher, ...base, '--strict', '--method', 'tools/list'], { timeoutMs: 60_000, env });
        ranOk(list, 'inspector --cli --strict tools/list');
        // Its report: "Warning: tool ..." / "Error: tool ..." blocks, then "N errors, N warnings
        // across N tools." (the server's own log lines pass through on stderr too).
        const problems = list.stderr.split('\n').filter((l) => /^(Warning|Error):|\b[1-9]\d* (errors?|warnings?)\b/.test(l));
        if (problems.length) extraFailures.push(`--strict tools/list: ${problems.slice(-1)[0].trim()} (first: ${problems[0].trim()}: ${list.stderr.split('\n').find((l) => /Path:/.test(l))?.trim()})`);
        const seen = [];
        for (const s of SCRIPT) {
            if (s.kind.startsWith('session_')) {
                seen.push(undefined);
                continue;
            }
            const args = ['--method', 'tools/call', '--tool-name', s.kind];
            for (const [k, v] of Object.entries(s.args)) args.push('--tool-arg', `${k}=${v}`);
            const r = await ctx.exec(process.execPath, [launcher, ...base, ...args], { timeoutMs: 60_000, env });
            if (r.timedOut || r.signal) throw new Error(`inspector tools/call ${s.kind} did not finish`);
            seen.push(r.stdout);
        }
        return { seen, extraFailures, shape: 'the printed tools/call result' };
    },
};

// Controls: what the user must approve (README, "Connect a client"), shown by leaving the
// approval out. Each must fail the way the README says, so the approval is what made the
// client's run above work (and these checks can fail: a client that ran the code anyway).
function control(name, what, run) {
    return { name, what, control: true, run: async (ctx) => ({ skipViews: true, ...await run(ctx) }) };
}
const ranNothing = (ctx) => (fs.existsSync(path.join(ctx.ws, 'note.txt')) ? ['the python run ran all the same (note.txt is in the workspace)'] : []);
const controls = [
    control('claude-code:no-allowedTools', 'claude -p without --allowedTools: the model is told the permission was not granted', async (ctx) => {
        await claudeCode.run(ctx, { allow: false });
        const f = ranNothing(ctx);
        const seen = ctx.api.results.map((r) => JSON.stringify(r.seen));
        if (!seen.length || !seen.filter((_, i) => SCRIPT[i]?.kind === 'run_code').every((t) => /requested permissions to use mcp__vestibule__run_code, but you haven't granted it/.test(t)))
            f.push(`run_code was not refused for want of permission: ${seen[0]?.slice(0, 160)}`);
        return { extraFailures: f, shape: 'each run_code refused: "...you haven\'t granted it yet."' };
    }),
    control('codex:no-approval-mode', 'codex exec without default_tools_approval_mode: run_code refused, read_workspace (read-only) allowed', async (ctx) => {
        await codex.run(ctx, { approve: false });
        const f = ranNothing(ctx);
        const seen = ctx.api.results.map((r) => JSON.stringify(r.seen));
        SCRIPT.forEach((s, i) => {
            const refused = /requires approval, but approval policy is never/.test(seen[i] ?? '');
            if (s.kind === 'run_code' && !refused) f.push(`${s.label} was not refused: ${seen[i]?.slice(0, 160)}`);
            if (s.kind === 'read_workspace' && (refused || seen[i] === undefined)) f.push(`read_workspace (readOnlyHint) was refused too: ${seen[i]?.slice(0, 160)}`);
        });
        return { extraFailures: f, shape: 'run_code refused: "MCP tool call requires approval, but approval policy is never"' };
    }),
    control('gemini-cli:untrusted-folder', 'gemini -p in a folder not trusted, with no folderTrust setting: refuses to start (exit 55)', async (ctx) => {
        const { result: r } = await gemini.run(ctx, { trustFolder: false });
        const f = ranNothing(ctx);
        if (r.code !== 55 || !/not running in a trusted directory/.test(r.stdout + r.stderr)) f.push(`gemini did not refuse the untrusted folder with exit 55 (exit ${r.code})`);
        if (ctx.api.results.length) f.push('a tool result reached the model');
        return { extraFailures: f, shape: 'no run: "Gemini CLI is not running in a trusted directory"' };
    }),
    control('gemini-cli:server-not-trusted', 'gemini -p without "trust": true on the server: its tools are not offered to the model', async (ctx) => {
        await gemini.run(ctx, { trustServer: false });
        const f = ranNothing(ctx);
        const offered = ctx.api.requests.some((q) => JSON.stringify(q.body.tools ?? []).includes('run_code'));
        if (offered) f.push('run_code was offered to the model');
        if (ctx.api.results.length) f.push('a tool result reached the model');
        return { extraFailures: f, shape: 'tools not offered in -p mode' };
    }),
];

export const CLIENTS = [
    claudeCode, codex, gemini, opencode,
    // images: toModelOutput() carries the plot as {type: "file", mediaType: "image/png"} (issue 24)
    { ...library('ai-sdk', 'ai-sdk', '@ai-sdk/mcp: createMCPClient + Experimental_StdioMCPTransport, tools() -> execute, toModelOutput', 'toModelOutput() value'), images: true },
    { ...library('langchain', 'langchain', '@langchain/mcp-adapters: MultiServerMCPClient (stdio), getTools() -> invoke(tool_call)', 'ToolMessage content'), images: true },
    library('mastra', 'mastra', '@mastra/mcp: MCPClient, listTools() -> execute, toModelOutput', 'toModelOutput() value, else the result as JSON'),
    inspector,
    ...controls,
];
export { SCRIPT };
