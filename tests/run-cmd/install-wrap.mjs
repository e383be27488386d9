// install-wrap.mjs - the client side of install-wrap.test.sh, as the test user: each client's
// file is written with a server-filesystem entry, `install-client --wrap fs CLIENT` rewrites it,
// the JSON is read back (and Claude Code's own `claude mcp get`/`list`), the wrapped entry is
// started from the file exactly as the client would and driven with the official SDK client,
// then `--unwrap` must give the original entry back.
//
// Usage: node install-wrap.mjs VESTIBULE NPMDIR CLAUDE HOME PROJ
// Lines "ok: ..." / "FAIL: ..."; exit 1 on any FAIL.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';

const [vm, npm, claude, home, proj] = process.argv.slice(2);
let pass = 0, failed = 0;
const check = (ok, what, detail = '') => {
    if (ok) { pass++; console.log(`ok: ${what}`); } else { failed++; console.log(`FAIL: ${what}${detail ? ` (${detail})` : ''}`); }
};
const env = { HOME: home, PATH: process.env.PATH };
const ic = (...args) => spawnSync(vm, ['install-client', ...args], { env, encoding: 'utf8' });
const sha = (f) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');

const server = path.join(npm, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const original = { command: process.execPath, args: [server, proj], env: { FS_NOTE: 'kept' } };
const clients = {
    'claude-code': { file: path.join(home, '.claude.json'), key: 'mcpServers', extra: { type: 'stdio' }, top: { numStartups: 2 } },
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

for (const [id, c] of Object.entries(clients)) {
    const entry = { ...(c.extra || {}), ...original };
    fs.mkdirSync(path.dirname(c.file), { recursive: true });
    fs.writeFileSync(c.file, JSON.stringify({ ...(c.top || {}), [c.key]: { fs: entry, other: { command: 'true' } } }, null, 2));
    const r = ic('--wrap', 'fs', '--allow-read', npm, '--allow', proj, id);
    const after = JSON.parse(fs.readFileSync(c.file, 'utf8'));
    const w = after[c.key]?.fs ?? {};
    const dd = (w.args || []).indexOf('--');
    check(r.status === 0 && w.command === vm && w.args[0] === 'mcp' && w.args[1] === 'wrap' && dd > 0 &&
        isDeepStrictEqual(w.args.slice(dd + 1), [original.command, ...original.args]) && isDeepStrictEqual(w.env, original.env) &&
        w.args.includes('--env') && isDeepStrictEqual(after[c.key].other, { command: 'true' }) && (!c.top || after.numStartups === 2),
    `${id}: --wrap fs rewrote the entry to vestibule-mcp mcp wrap ... -- its command, env kept, the rest of the file kept`, `${r.status} ${r.stderr} ${JSON.stringify(w)}`);
    check(/saved the old/.test(r.stdout) && fs.readdirSync(path.join(home, '.local/state/vestibule/backups')).some((f) => f.startsWith(path.basename(c.file))),
        `${id}: the old file was backed up`, r.stdout);
    const h = sha(c.file);
    const again = ic('--wrap', 'fs', '--allow', proj, id);
    check(again.status === 0 && /already wrapped/.test(again.stdout) && sha(c.file) === h, `${id}: wrapping twice changes nothing`, again.stdout + again.stderr);
    if (id === 'claude-desktop') await drive(w, id);
    if (id === 'claude-code') {
        const get = spawnSync(claude, ['mcp', 'get', 'fs'], { env, encoding: 'utf8', timeout: 60000 });
        check(get.status === 0 && get.stdout.includes(vm) && /mcp wrap/.test(get.stdout) && get.stdout.includes(server),
            'claude-code: `claude mcp get fs` shows the wrapped command', (get.stdout + get.stderr).slice(0, 400));
        const list = spawnSync(claude, ['mcp', 'list'], { env, encoding: 'utf8', timeout: 90000 });
        check(/fs: .*mcp wrap.*Connected/.test(list.stdout), 'claude-code: `claude mcp list` starts the wrapped server and reports it connected', (list.stdout + list.stderr).slice(0, 400));
    }
    const un = ic('--unwrap', 'fs', id);
    const back = JSON.parse(fs.readFileSync(c.file, 'utf8'))[c.key].fs;
    check(un.status === 0 && isDeepStrictEqual(back, entry), `${id}: --unwrap gives the original entry back`, `${un.status} ${un.stderr} ${JSON.stringify(back)}`);
}
const toml = path.join(home, '.codex/config.toml');
fs.mkdirSync(path.dirname(toml), { recursive: true });
fs.writeFileSync(toml, `[mcp_servers.fs]\ncommand = "${process.execPath}"\nargs = ["${server}"]\n`);
const ht = sha(toml), rt = ic('--wrap', 'fs', 'codex');
check(rt.status === 1 && /TOML/.test(rt.stderr) && sha(toml) === ht, 'codex: --wrap refuses the TOML, naming the fix, the file untouched', rt.stderr);
const rn = ic('--wrap', 'nope', 'cursor');
check(rn.status === 1 && /it has: fs, other/.test(rn.stderr), 'a missing name is refused, the names there listed', rn.stderr);
console.log(`install-wrap: ${pass} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
