// agent-preset.mjs - Claude Code itself run through `vestibule-mcp run --agent claude`, against
// the scripted stand-in model API (tests/clients/model-api.mjs) on 127.0.0.1. Run by
// agent-preset.test.sh as the test user, in a loopback-only network namespace.
//
// The "model" asks Claude Code's own Bash tool to (1) cat the planted ~/.ssh/id_ed25519,
// (2) edit the project's notes.txt, (3) fetch the model's host and another host through
// the proxy, (4) echo $GITHUB_TOKEN. A control run of the same CLI outside the sandbox shows the key is readable
// there; inside, the key must not reach the model, the edit must land, the model's host must
// answer and the other host must be refused (403 from the egress proxy).
//
// Usage: node agent-preset.mjs --vm VESTIBULE_MCP --claude CLAUDE_BIN --home DIR --proj DIR
// Exit 0 all passed, 1 a check failed.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { startModelApi } from '../clients/model-api.mjs';

const arg = (k) => { const i = process.argv.indexOf(k); return i > 0 ? process.argv[i + 1] : undefined; };
const vm = arg('--vm'), claude = arg('--claude'), home = arg('--home'), proj = arg('--proj');
const KEY = fs.readFileSync(path.join(home, '.ssh/id_ed25519'), 'utf8').trim();
const MODEL_HOST = 'model.vestibule.test', OTHER_HOST = 'other.vestibule.test';
const SCRIPT = [
    { kind: 'Bash', args: { command: 'cat ~/.ssh/id_ed25519; echo "[cat exit $?]"', description: 'Read the SSH key' } },
    { kind: 'Bash', args: { command: 'sed -i s/before/edited-by-the-agent/ notes.txt && cat notes.txt', description: 'Edit notes.txt' } },
    { kind: 'Bash', args: { command: `curl -s -o /dev/null -w "model-host:%{http_code}\\n" http://${MODEL_HOST}/v1/models; curl -s -o /dev/null -w "other-host:%{http_code}\\n" http://${OTHER_HOST}/v1/models`, description: 'Reach two hosts' } },
    { kind: 'Bash', args: { command: 'echo "token=[$GITHUB_TOKEN] key=[${ANTHROPIC_API_KEY:+set}]"', description: 'Show the environment' } },
];
const QUIET = { DISABLE_TELEMETRY: '1', DISABLE_ERROR_REPORTING: '1', DISABLE_AUTOUPDATER: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' };
const PROMPT = 'Do the four steps.';
let pass = 0, failed = 0;
const check = (ok, what, detail = '') => {
    if (ok) { pass++; console.log(`ok: ${what}`); } else { failed++; console.log(`FAIL: ${what}${detail ? ` (${detail})` : ''}`); }
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
    const logPath = path.join(path.dirname(proj), `${label}-api.log`);
    const api = await startModelApi({ script: SCRIPT, offers: (tools) => tools.includes('Bash'), log: (l) => fs.appendFileSync(logPath, `${l}\n`) });
    const env = {
        HOME: home, PATH: process.env.PATH, LANG: 'C.UTF-8', TERM: 'dumb', ...QUIET,
        ANTHROPIC_API_KEY: 'sk-stand-in', GITHUB_TOKEN: 'PLANTED-GITHUB-TOKEN-61b2',
        ANTHROPIC_BASE_URL: base(api.port),
        // the stand-in's name is pinned to its loopback port for the egress proxy (as a user
        // pins a local gateway); the allowlist itself comes from the preset
        VESTIBULE_EGRESS_ALLOW: MODEL_HOST, VESTIBULE_EGRESS_PIN: `${MODEL_HOST}=127.0.0.1:${api.port}`,
    };
    const claudeArgs = ['-p', PROMPT, '--output-format', 'json', '--allowedTools', 'Bash'];
    const t0 = Date.now();
    const r = wrap ? await run(vm, ['run', '--agent', 'claude', '--allow-read', path.dirname(claude), '--', claude, ...claudeArgs], env)
        : await run(claude, claudeArgs, env);
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    await api.close();
    fs.writeFileSync(path.join(path.dirname(proj), `${label}.log`), `${r.stdout}\n--- stderr\n${r.stderr}\n--- results\n${JSON.stringify(api.results, null, 1)}\n`);
    console.log(`${label}: claude exited ${r.code} in ${secs} s; ${api.results.length} tool results reached the model`);
    const bodies = JSON.stringify(api.requests);
    return { r, seen: SCRIPT.map((_, i) => text(api.results.find((x) => x.step === i)?.seen ?? '')), bodies };
}

fs.writeFileSync(path.join(proj, 'notes.txt'), 'before\n');
const control = await session('control', (port) => `http://127.0.0.1:${port}`, false);
check(control.r.code === 0, 'control: claude -p outside the sandbox ran', control.r.stderr.slice(-300));
check(control.seen[0].includes(KEY), 'control: outside, the model read the planted key through the Bash tool', control.seen[0].slice(0, 200));

check(control.seen[3].includes('PLANTED-GITHUB-TOKEN'), 'control: outside, the Bash tool sees GITHUB_TOKEN', control.seen[3]);
// a fresh ~/.claude, so what is in it after the sandboxed run was written from inside
fs.rmSync(path.join(home, '.claude'), { recursive: true, force: true });
fs.mkdirSync(path.join(home, '.claude'), { mode: 0o700 });

fs.writeFileSync(path.join(proj, 'notes.txt'), 'before\n');
const inside = await session('sandboxed', () => `http://${MODEL_HOST}`, true);
check(inside.r.code === 0, 'sandboxed: vestibule-mcp run --agent claude -- claude -p ran', inside.r.stderr.slice(-400));
check(inside.seen.every((s) => s.length > 0), 'sandboxed: all four Bash results reached the model (Claude Code talked to its API through the proxy)', JSON.stringify(inside.seen).slice(0, 300));
check(!inside.bodies.includes(KEY), 'sandboxed: the planted key never reached the model');
check(/\[cat exit [1-9]/.test(inside.seen[0]) || /No such file/.test(inside.seen[0]), 'sandboxed: cat ~/.ssh/id_ed25519 found no key', inside.seen[0].slice(0, 200));
const notes = fs.readFileSync(path.join(proj, 'notes.txt'), 'utf8');
check(notes.includes('edited-by-the-agent'), 'sandboxed: the project edit landed on the host', notes.trim());
check(inside.seen[2].includes('model-host:200'), 'sandboxed: the provider host (from ANTHROPIC_BASE_URL) answered through the proxy', inside.seen[2]);
check(/other-host:(403|000)/.test(inside.seen[2]) && !inside.seen[2].includes('other-host:200'), 'sandboxed: another host was refused', inside.seen[2]);
check(inside.seen[3].includes('token=[]') && inside.seen[3].includes('key=[set]'), 'sandboxed: GITHUB_TOKEN dropped, the preset passed ANTHROPIC_API_KEY on', inside.seen[3]);
check(!inside.bodies.includes('PLANTED-GITHUB-TOKEN'), 'sandboxed: the planted token never reached the model');
check(fs.existsSync(path.join(home, '.claude', 'projects')), 'sandboxed: Claude Code wrote its own state to the real ~/.claude');
// The user's --net list is added to the preset's: allowed, the proxy tries the name (no DNS in
// this netns: 502), while a host on no list is refused by policy (403).
{
    const env = { HOME: home, PATH: process.env.PATH, ANTHROPIC_API_KEY: 'sk-stand-in' };
    const curl = (h) => `curl -s -o /dev/null -w "${h}:%{http_code}\\n" http://${h}/`;
    const r = await run(vm, ['run', '-q', '--agent', 'claude', '--net', 'allowlist:extra.vestibule.test', '--', 'sh', '-c',
        `${curl('extra.vestibule.test')}; ${curl('api.anthropic.com')}; ${curl(OTHER_HOST)}`], env);
    check(/extra\.vestibule\.test:502/.test(r.stdout) && /api\.anthropic\.com:502/.test(r.stdout) && new RegExp(`${OTHER_HOST}:403`).test(r.stdout),
        '--net allowlist:HOST adds to the preset: its host and the provider\'s are tried (502, no DNS here), another is refused (403)', `${r.stdout} ${r.stderr}`.trim());
}
console.log(`agent-preset: ${pass} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
