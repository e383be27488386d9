// agent-preset.mjs - a coding agent itself run through `vestibule-mcp run --agent NAME`, against
// the scripted stand-in model API (tests/clients/model-api.mjs) on 127.0.0.1. Run by
// agent-preset.test.sh as the test user, in a loopback-only network namespace, once per agent:
//   claude  Claude Code (`claude -p`, its Bash tool; Anthropic Messages)
//   codex   the Codex CLI (`codex exec`, its exec_command tool; a custom Responses-API provider
//           in ~/.codex/config.toml, as tests/clients/drivers.mjs writes it)
//   gemini  the Gemini CLI (`gemini -p --yolo`, its run_shell_command tool; GOOGLE_GEMINI_BASE_URL)
//
// The "model" asks the agent's own shell tool to (1) cat the planted ~/.ssh/id_ed25519,
// (2) edit the project's notes.txt, (3) fetch the model's host and another host through
// the proxy, (4) echo $GITHUB_TOKEN and whether the agent's key variable is set. A control run of
// the same CLI outside the sandbox shows the key and the token are readable there; inside, the
// key must not reach the model, the edit must land, the model's host must answer and the other
// host must be refused (403 from the egress proxy), the token must be gone and the agent's own
// key variable (passed by the preset) set, and the agent's state must land in its real folder.
//
// Usage: node agent-preset.mjs --agent claude|codex|gemini --vm VESTIBULE_MCP --bin AGENT_BIN
//        --modules NODE_MODULES --home DIR --proj DIR
// Exit 0 all passed, 1 a check failed.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { startModelApi } from '../clients/model-api.mjs';

const arg = (k) => { const i = process.argv.indexOf(k); return i > 0 ? process.argv[i + 1] : undefined; };
const agent = arg('--agent') ?? 'claude';
const vm = arg('--vm'), bin = arg('--bin'), modules = arg('--modules'), home = arg('--home'), proj = arg('--proj');
const KEY = fs.readFileSync(path.join(home, '.ssh/id_ed25519'), 'utf8').trim();
const MODEL_HOST = 'model.vestibule.test', OTHER_HOST = 'other.vestibule.test';
const PROMPT = 'Do the four steps.';
const QUIET = {
    DISABLE_TELEMETRY: '1', DISABLE_ERROR_REPORTING: '1', DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DO_NOT_TRACK: '1',
};

// The four shell commands; @keyVar is the agent's own API key variable.
const steps = (keyVar) => [
    'cat ~/.ssh/id_ed25519; echo "[cat exit $?]"',
    'sed -i s/before/edited-by-the-agent/ notes.txt && cat notes.txt',
    `curl -s -o /dev/null -w "model-host:%{http_code}\\n" http://${MODEL_HOST}/v1/models; curl -s -o /dev/null -w "other-host:%{http_code}\\n" http://${OTHER_HOST}/v1/models`,
    `echo "token=[$GITHUB_TOKEN] key=[\${${keyVar}:+set}]"`,
];

// Per agent: its shell tool (name, arguments), its key variable, the state folder it must
// write to, how to configure it for a base URL, and how to start it.
const AGENTS = {
    claude: {
        tool: 'Bash', args: (cmd) => ({ command: cmd, description: 'A step' }), keyVar: 'ANTHROPIC_API_KEY',
        state: '.claude', wrote: 'projects',
        env: (base) => ({ ANTHROPIC_API_KEY: 'sk-stand-in', ANTHROPIC_BASE_URL: base }),
        configure() {},
        argv: () => [bin, '-p', PROMPT, '--output-format', 'json', '--allowedTools', 'Bash'],
    },
    codex: {
        tool: 'exec_command', args: (cmd) => ({ cmd }), keyVar: 'OPENAI_API_KEY',
        state: '.codex', wrote: 'sessions',
        env: () => ({ OPENAI_API_KEY: 'sk-stand-in' }),
        // as tests/clients/drivers.mjs: a custom provider speaking the Responses API; its key is
        // read from OPENAI_API_KEY (the preset's env entry)
        configure(base) {
            fs.writeFileSync(path.join(home, '.codex/config.toml'), `model = "stand-in"
model_provider = "standin"
check_for_update_on_startup = false

[model_providers.standin]
name = "stand-in model API"
base_url = "${base}/v1"
wire_api = "responses"
env_key = "OPENAI_API_KEY"

[analytics]
enabled = false
`);
        },
        // Codex's own sandbox is off: vestibule is the sandbox here (docs/run-command.md)
        argv: () => [bin, 'exec', '--skip-git-repo-check', '--sandbox', 'danger-full-access', PROMPT],
        // a custom provider's base_url is in config.toml, not a variable the preset reads: the
        // user adds its host
        net: ['--net', `allowlist:${MODEL_HOST}`],
    },
    gemini: {
        tool: 'run_shell_command', args: (cmd) => ({ command: cmd, description: 'A step' }), keyVar: 'GEMINI_API_KEY',
        state: '.gemini', wrote: 'tmp',
        env: (base) => ({ GEMINI_API_KEY: 'stand-in', GOOGLE_GEMINI_BASE_URL: base }),
        // as tests/clients/drivers.mjs, and the project a trusted folder
        configure() {
            const dir = path.join(home, '.gemini');
            fs.writeFileSync(path.join(dir, 'settings.json'), JSON.stringify({
                security: { auth: { selectedType: 'gemini-api-key' } },
                privacy: { usageStatisticsEnabled: false },
                general: { disableAutoUpdate: true, disableUpdateNag: true },
                telemetry: { enabled: false },
            }, null, 2));
            fs.writeFileSync(path.join(dir, 'trustedFolders.json'), JSON.stringify({ [proj]: 'TRUST_FOLDER' }, null, 2));
        },
        argv: () => [bin, '-p', PROMPT, '--model', 'gemini-2.5-flash', '--yolo'],
    },
    opencode: {
        tool: 'bash', args: (cmd) => ({ command: cmd, description: 'A step' }), keyVar: 'OPENAI_API_KEY',
        state: '.local/share/opencode', wrote: 'opencode.db',
        env: () => ({ OPENAI_API_KEY: 'sk-stand-in', OPENCODE_DISABLE_AUTOUPDATE: '1' }),
        // as tests/clients/drivers.mjs: a provider on @ai-sdk/openai-compatible (bundled in
        // opencode, nothing to install), its key from OPENAI_API_KEY (the preset's env entry)
        configure(base) {
            fs.writeFileSync(path.join(proj, 'opencode.json'), JSON.stringify({
                $schema: 'https://opencode.ai/config.json', autoupdate: false, share: 'disabled', model: 'standin/stand-in',
                // `opencode run` rejects what would ask (a path outside the project: ~/.ssh)
                permission: { bash: 'allow', edit: 'allow', external_directory: 'allow' },
                provider: {
                    standin: {
                        npm: '@ai-sdk/openai-compatible', name: 'stand-in model API',
                        options: { baseURL: `${base}/v1`, apiKey: '{env:OPENAI_API_KEY}' },
                        models: { 'stand-in': { name: 'stand-in', tool_call: true } },
                    },
                },
            }, null, 2));
        },
        argv: () => [bin, 'run', PROMPT],
        // its base URL is in opencode.json, not a variable the preset reads: the user adds it
        net: ['--net', `allowlist:${MODEL_HOST}`],
    },
};
const A = AGENTS[agent];
if (!A) { console.log(`FAIL: unknown agent ${agent}`); process.exit(1); }
const SCRIPT = steps(A.keyVar).map((cmd) => ({ kind: A.tool, args: A.args(cmd) }));

let pass = 0, failed = 0;
const check = (ok, what, detail = '') => {
    if (ok) { pass++; console.log(`ok: ${agent}: ${what}`); } else { failed++; console.log(`FAIL: ${agent}: ${what}${detail ? ` (${detail})` : ''}`); }
};
const text = (seen) => (typeof seen === 'string' ? seen : JSON.stringify(seen));

function run(cmd, args, env) {
    return new Promise((resolve) => {
        const c = execFile(cmd, args, { cwd: proj, env, timeout: 120000, maxBuffer: 1 << 24 }, (e, stdout, stderr) =>
            resolve({ code: e ? (e.code ?? e.signal) : 0, stdout, stderr }));
        c.stdin.end(); // no prompt on stdin (claude -p waits 3 s for one otherwise)
    });
}

async function session(label, base, wrap) {
    const logPath = path.join(path.dirname(proj), `${agent}-${label}-api.log`);
    const api = await startModelApi({ script: SCRIPT, offers: (tools) => tools.includes(A.tool), log: (l) => fs.appendFileSync(logPath, `${l}\n`) });
    const url = base(api.port);
    A.configure(url);
    const env = {
        HOME: home, PATH: process.env.PATH, LANG: 'C.UTF-8', TERM: 'dumb', ...QUIET, ...A.env(url),
        GITHUB_TOKEN: 'PLANTED-GITHUB-TOKEN-61b2',
        // the stand-in's name is pinned to its loopback port for the egress proxy (as a user
        // pins a local gateway); the allowlist itself comes from the preset
        VESTIBULE_EGRESS_ALLOW: MODEL_HOST, VESTIBULE_EGRESS_PIN: `${MODEL_HOST}=127.0.0.1:${api.port}`,
    };
    const argv = A.argv();
    const t0 = Date.now();
    const r = wrap ? await run(vm, ['run', '--agent', agent, '--allow-read', modules, ...(A.net ?? []), '--', ...argv], env)
        : await run(argv[0], argv.slice(1), env);
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    await api.close();
    fs.writeFileSync(path.join(path.dirname(proj), `${agent}-${label}.log`), `${r.stdout}\n--- stderr\n${r.stderr}\n--- results\n${JSON.stringify(api.results, null, 1)}\n`);
    console.log(`${agent} ${label}: exited ${r.code} in ${secs} s; ${api.results.length} tool results reached the model`);
    const bodies = JSON.stringify(api.requests);
    return { r, seen: SCRIPT.map((_, i) => text(api.results.find((x) => x.step === i)?.seen ?? '')), bodies };
}

const state = path.join(home, A.state);
fs.mkdirSync(state, { recursive: true, mode: 0o700 });
fs.writeFileSync(path.join(proj, 'notes.txt'), 'before\n');
const control = await session('control', (port) => `http://127.0.0.1:${port}`, false);
check(control.r.code === 0, 'control: the agent outside the sandbox ran', control.r.stderr.slice(-300));
check(control.seen[0].includes(KEY), 'control: outside, the model read the planted key through the shell tool', control.seen[0].slice(0, 200));
check(control.seen[3].includes('PLANTED-GITHUB-TOKEN'), 'control: outside, the shell tool sees GITHUB_TOKEN', control.seen[3].slice(0, 200));
// a fresh state folder, so what is in it after the sandboxed run was written from inside
fs.rmSync(state, { recursive: true, force: true });
fs.mkdirSync(state, { mode: 0o700 });

fs.writeFileSync(path.join(proj, 'notes.txt'), 'before\n');
const inside = await session('sandboxed', () => `http://${MODEL_HOST}`, true);
check(inside.r.code === 0, `sandboxed: vestibule-mcp run --agent ${agent} ran`, inside.r.stderr.slice(-400));
check(inside.seen.every((s) => s.length > 0), 'sandboxed: all four shell results reached the model (the agent talked to its API through the proxy)', JSON.stringify(inside.seen).slice(0, 300));
check(!inside.bodies.includes(KEY), 'sandboxed: the planted key never reached the model');
check(/\[cat exit [1-9]/.test(inside.seen[0]) || /No such file/.test(inside.seen[0]), 'sandboxed: cat ~/.ssh/id_ed25519 found no key', inside.seen[0].slice(0, 200));
const notes = fs.readFileSync(path.join(proj, 'notes.txt'), 'utf8');
check(notes.includes('edited-by-the-agent'), 'sandboxed: the project edit landed on the host', notes.trim());
check(inside.seen[2].includes('model-host:200'), 'sandboxed: the provider host (from the base URL) answered through the proxy', inside.seen[2].slice(0, 200));
check(/other-host:(403|000)/.test(inside.seen[2]) && !inside.seen[2].includes('other-host:200'), 'sandboxed: another host was refused', inside.seen[2].slice(0, 200));
check(inside.seen[3].includes('token=[]') && inside.seen[3].includes('key=[set]'), `sandboxed: GITHUB_TOKEN dropped, the preset passed ${A.keyVar} on`, inside.seen[3].slice(0, 200));
check(!inside.bodies.includes('PLANTED-GITHUB-TOKEN'), 'sandboxed: the planted token never reached the model');
// the agent's own writes (a new project's "mcpServers": {}, Claude Code's plugin store) are not
// taken for plants; tests/run-cmd/agent-guard.test.sh shows the line appears when one is made
check(!/planted what the agent would run/.test(inside.r.stderr), 'sandboxed: the guard of its files found nothing planted by the agent\'s own writes', inside.r.stderr.slice(-400));
check(fs.existsSync(path.join(state, A.wrote)), `sandboxed: the agent wrote its own state to the real ~/${A.state} (${A.wrote})`,
    fs.readdirSync(state).join(' '));
// The user's --net list is added to the preset's: allowed, the proxy tries the name (no DNS in
// this netns: 502), while a host on no list is refused by policy (403). Once, with claude.
if (agent === 'claude') {
    const env = { HOME: home, PATH: process.env.PATH, ANTHROPIC_API_KEY: 'sk-stand-in' };
    const curl = (h) => `curl -s -o /dev/null -w "${h}:%{http_code}\\n" http://${h}/`;
    const r = await run(vm, ['run', '-q', '--agent', 'claude', '--net', 'allowlist:extra.vestibule.test', '--', 'sh', '-c',
        `${curl('extra.vestibule.test')}; ${curl('api.anthropic.com')}; ${curl(OTHER_HOST)}`], env);
    check(/extra\.vestibule\.test:502/.test(r.stdout) && /api\.anthropic\.com:502/.test(r.stdout) && new RegExp(`${OTHER_HOST}:403`).test(r.stdout),
        '--net allowlist:HOST adds to the preset: its host and the provider\'s are tried (502, no DNS here), another is refused (403)', `${r.stdout} ${r.stderr}`.trim());
}
console.log(`agent-preset ${agent}: ${pass} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
