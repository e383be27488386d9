// install-wrap.mjs - the client side of install-wrap.test.sh, as the test user: each client's
// file is written with a server-filesystem entry, `install-client --wrap fs CLIENT` rewrites it,
// the JSON is read back (and Claude Code's own `claude mcp get`/`list`, for the user scope and
// the project's .mcp.json), the wrapped entry is started from the file exactly as the client
// would and driven with the official SDK client, then `--unwrap` must give the original entry
// back. Codex's config.toml: only the command and args lines change, `codex mcp get --json` (the
// real CLI) reads the wrapped entry back with its env and settings, and --unwrap restores the
// file byte for byte.
//
// Usage: node install-wrap.mjs VESTIBULE NPMDIR CLAUDE HOME PROJ CODEX
// Lines "ok: ..." / "FAIL: ..."; exit 1 on any FAIL.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';

const [vm, npm, claude, home, proj, codex] = process.argv.slice(2);
let pass = 0, failed = 0;
const check = (ok, what, detail = '') => {
    if (ok) { pass++; console.log(`ok: ${what}`); } else { failed++; console.log(`FAIL: ${what}${detail ? ` (${detail})` : ''}`); }
};
const env = { HOME: home, PATH: process.env.PATH };
const ic = (...args) => spawnSync(vm, ['install-client', ...args], { env, encoding: 'utf8', cwd: proj });
const sha = (f) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');

const server = path.join(npm, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const original = { command: process.execPath, args: [server, proj], env: { FS_NOTE: 'kept' } };
const clients = {
    'claude-code': { file: path.join(home, '.claude.json'), key: 'mcpServers', extra: { type: 'stdio' }, top: { numStartups: 2 } },
    // the project scope: ./.mcp.json, as `claude mcp add --scope project` writes it
    'claude-code-project': { id: 'claude-code', scope: ['--scope', 'project'], file: path.join(proj, '.mcp.json'), key: 'mcpServers', extra: { type: 'stdio' } },
    'claude-desktop': { file: path.join(home, '.config/Claude/claude_desktop_config.json'), key: 'mcpServers' },
    cursor: { file: path.join(home, '.cursor/mcp.json'), key: 'mcpServers' },
    vscode: { file: path.join(home, '.config/Code/User/mcp.json'), key: 'servers', extra: { type: 'stdio' } },
};

async function drive(entry, label) {
    const logs = [];
    const client = new Client({ name: 'install-wrap-test', version: '1.0.0' });
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
    // the client's environment plus the entry's env block, as the clients do
    await client.connect(new StdioClientTransport({ command: entry.command, args: entry.args, env: { ...env, ...entry.env }, stderr: 'ignore' }));
    try {
        const tools = await client.listTools();
        const r = await client.callTool({ name: 'read_file', arguments: { path: path.join(proj, 'notes.txt') } });
        await new Promise((res) => setTimeout(res, 200));
        const grade = logs.find((l) => l.logger === 'vestibule' && /^isolation: native/.test(l.data));
        check(tools.tools.length > 3 && /install-wrap-notes-41c7/.test(JSON.stringify(r)) && grade,
            `${label}: the wrapped entry, started from the file, answers tools/list (${tools.tools.length} tools) and read_file through the SDK, with the wrap's grade notification`,
            JSON.stringify({ n: tools.tools.length, r, logs }).slice(0, 300));
    } finally {
        await client.close();
    }
}

for (const [label, c] of Object.entries(clients)) {
    const id = c.id ?? label, scope = c.scope ?? [];
    const entry = { ...(c.extra || {}), ...original };
    // the user scope's fs (from the case before) would hide the project's
    if (c.scope) fs.writeFileSync(path.join(home, '.claude.json'), JSON.stringify({ numStartups: 2 }));
    fs.mkdirSync(path.dirname(c.file), { recursive: true });
    fs.writeFileSync(c.file, JSON.stringify({ ...(c.top || {}), [c.key]: { fs: entry, other: { command: 'true' } } }, null, 2));
    const r = ic('--wrap', 'fs', '--allow-read', npm, '--allow', proj, ...scope, id);
    const after = JSON.parse(fs.readFileSync(c.file, 'utf8'));
    const w = after[c.key]?.fs ?? {};
    const dd = (w.args || []).indexOf('--');
    check(r.status === 0 && w.command === vm && w.args[0] === 'mcp' && w.args[1] === 'wrap' && dd > 0 &&
        isDeepStrictEqual(w.args.slice(dd + 1), [original.command, ...original.args]) && isDeepStrictEqual(w.env, original.env) &&
        w.args.includes('--env') && isDeepStrictEqual(after[c.key].other, { command: 'true' }) && (!c.top || after.numStartups === 2),
    `${label}: --wrap fs rewrote the entry to vestibule-mcp mcp wrap ... -- its command, env kept, the rest of the file kept`, `${r.status} ${r.stderr} ${JSON.stringify(w)}`);
    check(/saved the old/.test(r.stdout) && fs.readdirSync(path.join(home, '.local/state/vestibule/backups')).some((f) => f.startsWith(path.basename(c.file))),
        `${label}: the old file was backed up`, r.stdout);
    const h = sha(c.file);
    const again = ic('--wrap', 'fs', '--allow', proj, ...scope, id);
    check(again.status === 0 && /already wrapped/.test(again.stdout) && sha(c.file) === h, `${label}: wrapping twice changes nothing`, again.stdout + again.stderr);
    if (id === 'claude-desktop') await drive(w, id);
    if (id === 'claude-code') {
        // run in the project, where Claude Code reads .mcp.json
        const get = spawnSync(claude, ['mcp', 'get', 'fs'], { env, cwd: proj, encoding: 'utf8', timeout: 60000 });
        check(get.status === 0 && get.stdout.includes(vm) && /mcp wrap/.test(get.stdout) && get.stdout.includes(server) &&
            (!c.scope || /Project config|\.mcp\.json/i.test(get.stdout)),
        `${label}: \`claude mcp get fs\` shows the wrapped command${c.scope ? ' from the project\'s .mcp.json' : ''}`, (get.stdout + get.stderr).slice(0, 400));
        if (!c.scope) {
            const list = spawnSync(claude, ['mcp', 'list'], { env, cwd: proj, encoding: 'utf8', timeout: 90000 });
            check(/fs: .*mcp wrap.*Connected/.test(list.stdout), `${label}: \`claude mcp list\` starts the wrapped server and reports it connected`, (list.stdout + list.stderr).slice(0, 400));
        }
    }
    const un = ic('--unwrap', 'fs', ...scope, id);
    const back = JSON.parse(fs.readFileSync(c.file, 'utf8'))[c.key].fs;
    check(un.status === 0 && isDeepStrictEqual(back, entry), `${label}: --unwrap gives the original entry back`, `${un.status} ${un.stderr} ${JSON.stringify(back)}`);
    if (c.scope) fs.rmSync(c.file);
}
// Codex: a config.toml as a user keeps it (comments, settings, an inline env, env_vars, another
// server, a table after); only the two values may change.
const toml = path.join(home, '.codex/config.toml');
fs.mkdirSync(path.dirname(toml), { recursive: true });
const tomlText = `# my Codex settings
model = "stand-in"   # the model
approval_policy = "never"

[mcp_servers.fs]
command = "${process.execPath}"  # node
args = ["${server}", "${proj}"]
env = { FS_NOTE = "kept" }
env_vars = ["FS_TOKEN"]
startup_timeout_sec = 30

[mcp_servers.other]
command = "true"

[analytics]
enabled = false
`;
fs.writeFileSync(toml, tomlText);
const codexGet = () => {
    const g = spawnSync(codex, ['mcp', 'get', 'fs', '--json'], { env, encoding: 'utf8', timeout: 60000 });
    try { return JSON.parse(g.stdout); } catch { return { error: (g.stdout + g.stderr).slice(0, 300) }; }
};
const before = codexGet();
check(before.transport?.command === process.execPath, 'codex: control: `codex mcp get fs --json` reads the original entry', JSON.stringify(before).slice(0, 300));
const rt = ic('--wrap', 'fs', '--allow-read', npm, '--allow', proj, 'codex');
const wrappedText = fs.readFileSync(toml, 'utf8');
const changed = tomlText.split('\n').map((l, i) => [l, wrappedText.split('\n')[i]]).filter(([a, b]) => a !== b).map(([a]) => a.split(' ')[0]);
check(rt.status === 0 && wrappedText.split('\n').length === tomlText.split('\n').length && isDeepStrictEqual(changed, ['command', 'args']) &&
    wrappedText.includes(`"${proj}"]\n`) && wrappedText.includes('# node'),
'codex: --wrap fs changed only the values of command and args; every other line, comments included, is as it was', `${rt.status} ${rt.stderr} ${JSON.stringify(changed)}`);
const got = codexGet(), ta = got.transport?.args ?? [];
const dd = ta.indexOf('--');
check(got.transport?.command === vm && ta[0] === 'mcp' && ta[1] === 'wrap' && isDeepStrictEqual(ta.slice(dd + 1), [process.execPath, server, proj]) &&
    ta.join(' ').includes('--env FS_TOKEN') && ta.join(' ').includes('--env FS_NOTE') && isDeepStrictEqual(got.transport?.env, { FS_NOTE: 'kept' }) &&
    isDeepStrictEqual(got.transport?.env_vars, ['FS_TOKEN']) && got.startup_timeout_sec === 30,
'codex: `codex mcp get fs --json` (the real CLI) reads back vestibule-mcp mcp wrap ... -- the original command, env, env_vars (passed on with --env) and the timeout kept', JSON.stringify(got).slice(0, 500));
const listed = spawnSync(codex, ['mcp', 'list'], { env, encoding: 'utf8', timeout: 60000 });
check(listed.status === 0 && new RegExp(`^fs +${vm.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} +mcp wrap`, 'm').test(listed.stdout) && /^other +true/m.test(listed.stdout),
    'codex: `codex mcp list` lists the wrapped fs and the other server', listed.stdout.slice(0, 400));
await drive({ command: got.transport.command, args: ta, env: got.transport.env }, 'codex');
const ht = sha(toml), r2 = ic('--wrap', 'fs', 'codex');
check(r2.status === 0 && /already wrapped/.test(r2.stdout) && sha(toml) === ht, 'codex: wrapping twice changes nothing', r2.stdout + r2.stderr);
const ru = ic('--unwrap', 'fs', 'codex');
check(ru.status === 0 && fs.readFileSync(toml, 'utf8') === tomlText, 'codex: --unwrap restores the file byte for byte', ru.stdout + ru.stderr);
const rn = ic('--wrap', 'nope', 'cursor');
check(rn.status === 1 && /it has: fs, other/.test(rn.stderr), 'a missing name is refused, the names there listed', rn.stderr);
console.log(`install-wrap: ${pass} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
