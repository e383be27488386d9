// read_workspace: regular files beneath the workspace only; symlinks, ".." and absolute paths
// are refused; binary content and big files are handled.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import {
    assertExitCode, BACKEND, callTool, connect, makeWorld, readWorkspace, REMOTE_ENGINE, runCode, sleep, textOf,
} from './lib.mjs';

// the naive backend is no sandbox: a sandbox's PATH and python start-up do not apply to it
const NO_SANDBOX = BACKEND === 'naive' && 'the naive backend runs the host\'s own interpreter, with no sandbox';

async function setup(t) {
    const w = makeWorld(t);
    // A secret outside the workspace, next to it.
    fs.writeFileSync(path.join(w.root, 'secret.txt'), 'TOP-SECRET-OUTSIDE');
    fs.mkdirSync(path.join(w.ws, 'sub'));
    fs.writeFileSync(path.join(w.ws, 'sub', 'notes.txt'), 'hello from the workspace\n');
    fs.symlinkSync(path.join(w.root, 'secret.txt'), path.join(w.ws, 'link.txt'));
    fs.symlinkSync('notes.txt', path.join(w.ws, 'sub', 'inner-link.txt'));
    fs.symlinkSync(w.root, path.join(w.ws, 'dirlink'));
    return { w, conn: await connect(w) };
}

function refused(r, re) {
    assert.equal(r.result.isError, true, r.text);
    assert.ok(!r.text.includes('TOP-SECRET-OUTSIDE'), 'nothing outside the workspace leaks');
    if (re) assert.match(r.text, re);
}

test('reads a file beneath the workspace, including one a run wrote', async (t) => {
    const { conn } = await setup(t);
    const r = await readWorkspace(conn, 'sub/notes.txt');
    assert.equal(r.result.isError ?? false, false, r.text);
    assert.ok(r.text.includes('hello from the workspace'), r.text);
    const run = await runCode(conn, 'python', 'open("from-run.txt", "w").write("written in the sandbox")');
    assertExitCode(run.text, 0);
    const back = await readWorkspace(conn, 'from-run.txt');
    assert.ok(back.text.includes('written in the sandbox'), back.text);
});

test('a symlink is refused, even one pointing inside', async (t) => {
    const { conn } = await setup(t);
    refused(await readWorkspace(conn, 'link.txt'), /symlink|symbolic link/i);
    refused(await readWorkspace(conn, 'sub/inner-link.txt'), /symlink|symbolic link/i);
    refused(await readWorkspace(conn, 'dirlink/secret.txt'), /symlink|symbolic link/i);
});

test('a symlink the sandboxed code made is refused', async (t) => {
    const { w, conn } = await setup(t);
    const run = await runCode(conn, 'bash', `ln -s ${JSON.stringify(path.join(w.root, 'secret.txt'))} made-link.txt && echo linked`);
    assert.match(run.text, /^linked$/m);
    refused(await readWorkspace(conn, 'made-link.txt'), /symlink|symbolic link/i);
});

test('".." escapes and absolute paths are refused', async (t) => {
    const { conn } = await setup(t);
    refused(await readWorkspace(conn, '../secret.txt'), /\.\.|outside|escape|beneath/i);
    refused(await readWorkspace(conn, 'sub/../../secret.txt'), /\.\.|outside|escape|beneath/i);
    refused(await readWorkspace(conn, '/etc/passwd'), /absolute|relative/i);
});

test('missing files, folders and binary files get clear answers', async (t) => {
    const { w, conn } = await setup(t);
    refused(await readWorkspace(conn, 'nope.txt'), /not found|no such|does not exist/i);
    refused(await readWorkspace(conn, 'sub'), /director|folder|not a regular file/i);
    fs.writeFileSync(path.join(w.ws, 'blob.bin'), Buffer.from([0, 1, 2, 0xff, 0xfe, 0, 0x1b, 0x5b]));
    const bin = await readWorkspace(conn, 'blob.bin');
    assert.match(bin.text, /binary/i, bin.text);
    assert.doesNotMatch(bin.text, /[\u0000\u001b]/, 'no raw bytes dumped');
    // what Claude Code's and Codex's model gets
    assert.deepEqual(bin.result.structuredContent, {
        path: 'blob.bin', bytes: 8, bytes_shown: 0, binary: true, text: '', note: 'binary file, 8 bytes: attached as an embedded resource (base64)',
    });
});

test('a big file is size-capped with a note', async (t) => {
    const w = makeWorld(t, { VESTIBULE_MAX_OUTPUT_BYTES: '1000' });
    fs.writeFileSync(path.join(w.ws, 'big.txt'), 'k'.repeat(5000));
    const conn = await connect(w);
    const r = await readWorkspace(conn, 'big.txt');
    assert.ok(r.text.includes('k'.repeat(1000)), 'up to the cap is returned');
    assert.ok(!r.text.includes('k'.repeat(1001)), 'not beyond the cap');
    assert.match(r.text, /\[truncated: 4000 of 5000 bytes not shown\]$/, r.text.slice(-300));
    // the structured view: the same facts, and no _meta of ours for clients (Mastra) that pass
    // the whole result to their model
    const s = r.result.structuredContent;
    assert.equal(s.text, 'k'.repeat(1000));
    assert.equal(s.bytes, 5000);
    assert.equal(s.bytes_shown, 1000);
    assert.equal(s.binary, false);
    assert.equal(s.truncated, '4000 of 5000 bytes not shown');
    assert.equal(s.path, 'big.txt');
    assert.equal(r.result._meta, undefined, 'no _meta in a tool result');
});

// Issue 24 #2 and #3: /workspace/.local/bin came first in PATH, so a run that wrote python3,
// timeout, ls and bash there made every later run, spare and session print what it liked and
// exit 0. The image's folders now come first; .local/bin stays last, so a pip-installed program
// the image lacks still runs, and a package in the user site still imports.
test('programs a run plants in .local/bin do not replace the image\'s in later runs', { skip: NO_SANDBOX }, async (t) => {
    const w = makeWorld(t);
    const conn = await connect(w);
    const plant = await runCode(conn, 'python', `
import os, sys
base = os.environ['PYTHONUSERBASE']
site = base + '/lib/python%d.%d/site-packages' % sys.version_info[:2]
os.makedirs(site + '/mypkg', exist_ok=True)
open(site + '/mypkg/__init__.py', 'w').write('X = 42\\n')
os.makedirs(base + '/bin', exist_ok=True)
for name in ('python3', 'timeout', 'ls', 'bash', 'node', 'sh', 'env', 'mytool'):
    p = base + '/bin/' + name
    open(p, 'w').write('#!/bin/sh\\necho PLANTED-' + name + '\\nexit 0\\n')
    os.chmod(p, 0o755)
print('planted')`);
    assertExitCode(plant.text, 0);
    assert.match(plant.text, /planted/);

    // control: the planted programs run when named by path, and one the image lacks is
    // found through PATH (pip's scripts keep working)
    const ctl = await runCode(conn, 'bash', '/workspace/.local/bin/ls; mytool; echo "PATH=$PATH"');
    assert.match(ctl.text, /PLANTED-ls/);
    assert.match(ctl.text, /PLANTED-mytool/);

    const py = await runCode(conn, 'python', 'import mypkg\nprint("py", mypkg.X)\nraise SystemExit(5)');
    assertExitCode(py.text, 5);
    assert.match(py.text, /^py 42$/m);
    const sh = await runCode(
        conn,
        'bash',
        // gVisor 20221219 (Debian's runsc) answers coreutils' statx of a path with EINVAL, so
        // `ls -d` cannot run there; the image's ls lists the current folder instead
        `${BACKEND === 'gvisor' ? 'cd /sandbox && ls >/dev/null && pwd' : 'ls -d /sandbox'}\npython3 -c "import mypkg; print(6 * 7, mypkg.X)"\ntimeout 5 true && echo timeout-ok\nexit 4`,
    );
    assertExitCode(sh.text, 4);
    assert.match(sh.text, /^\/sandbox$/m);
    assert.match(sh.text, /^42 42$/m);
    assert.match(sh.text, /^timeout-ok$/m);
    const js = await runCode(conn, 'node', 'console.log("node", 1 + 1); process.exitCode = 3');
    assertExitCode(js.text, 3);
    assert.match(js.text, /^node 2$/m);
    for (const r of [py, sh, js]) assert.doesNotMatch(r.text, /PLANTED/);
    assert.match(ctl.text, /PATH=\/usr\/local\/sbin:.*:\/bin:\/workspace\/\.local\/bin$/m);
});

// Issue 24 #3: Python processed the user site pip installs into (/workspace/.local/lib/
// python3.*/site-packages) at every start, so a .pth file, usercustomize.py or sitecustomize.py a
// run left there ran before every later Python program: `print("real"); raise SystemExit(3)`
// came back as what the planted file printed, exit 0. Python now starts with PYTHONNOUSERSITE=1
// and PYTHONPATH=/sandbox, where the server's own read-only sitecustomize.py puts the user site
// on sys.path without its start-up files: a fresh run, one from a warm spare, session cells and
// python3 called from bash print their real output and exit code, and a package in the user site
// (written by hand, as pip --user lays it out) still imports.
const PLANT = `
import os, sys
base = os.environ['PYTHONUSERBASE']
site = base + '/lib/python%d.%d/site-packages' % sys.version_info[:2]
os.makedirs(site + '/plantpkg', exist_ok=True)
open(site + '/plantpkg/__init__.py', 'w').write('X = 41 + 1\\n')
evil = 'import os, sys; sys.stdout.write("PLANTED-%s\\\\n"); sys.stdout.flush(); os._exit(0)'
open(site + '/zz-evil.pth', 'w').write(evil % 'pth' + '\\n')
open(site + '/usercustomize.py', 'w').write(evil.replace('; ', '\\n') % 'usercustomize' + '\\n')
open(site + '/sitecustomize.py', 'w').write(evil.replace('; ', '\\n') % 'sitecustomize' + '\\n')
open('/workspace/sitecustomize.py', 'w').write(evil.replace('; ', '\\n') % 'cwd-sitecustomize' + '\\n')
print('planted', sorted(os.listdir(site)))`;

// What a later Python program prints: its own line, the package, where sitecustomize came from,
// and whether the user site comes after the standard library.
const PROBE = `import os, sys, plantpkg, sitecustomize
site = [p for p in sys.path if p.startswith('/workspace/.local/')]
print("real", plantpkg.X, sitecustomize.__file__, site, sys.path.index(site[0]) > sys.path.index(os.path.dirname(os.__file__)))`;

function real(text, tag) {
    assert.doesNotMatch(text, /PLANTED/, text);
    assert.match(text, new RegExp(`^${tag} 42 /sandbox/sitecustomize\\.py \\['/workspace/\\.local/lib/python3\\.\\d+/site-packages'\\] True$`, 'm'), text);
}

test('start-up files a run plants in the python user site do not run in later runs', { skip: NO_SANDBOX }, async (t) => {
    const w = makeWorld(t);
    const conn = await connect(w);
    const run = (await conn.client.listTools()).tools.find((x) => x.name === 'run_code');
    assert.match(run.description, /Python runs no \.pth file, sitecustomize or usercustomize from there/);
    assert.match(run.description, /\/workspace\/\.local\/bin comes after the image's folders in PATH/);
    const plant = await runCode(conn, 'python', PLANT);
    assertExitCode(plant.text, 0);
    assert.match(plant.text, /planted \['plantpkg', 'sitecustomize.py', 'usercustomize.py', 'zz-evil.pth'\]/);

    // control: the planted files are there, and run as soon as the user site is processed
    const ctl = await runCode(conn, 'bash', 'env -u PYTHONNOUSERSITE python3 -c \'print("real"); raise SystemExit(3)\'; echo "rc=$?"');
    assert.match(ctl.text, /^PLANTED-pth$/m, ctl.text);
    assert.match(ctl.text, /^rc=0$/m, ctl.text);
    // (with the .pth gone, the usercustomize; the sitecustomize files run as they are)
    const ctl2 = await runCode(conn, 'bash', 's=$(echo /workspace/.local/lib/python3.*/site-packages)\n' +
        'rm "$s/zz-evil.pth"; env -u PYTHONNOUSERSITE python3 -c \'print("real"); raise SystemExit(3)\'; echo "rc=$?"\n' +
        'python3 -s "$s/sitecustomize.py"; python3 -s /workspace/sitecustomize.py');
    assert.match(ctl2.text, /^PLANTED-usercustomize\nrc=0\nPLANTED-sitecustomize\nPLANTED-cwd-sitecustomize$/m, ctl2.text);
    const again = await runCode(conn, 'python', PLANT);
    assertExitCode(again.text, 0);

    const py = await runCode(conn, 'python', `${PROBE}\nraise SystemExit(3)`);
    assertExitCode(py.text, 3);
    real(py.text, 'real');
    const sh = await runCode(conn, 'bash', `python3 -c '${PROBE.replace(/'/g, '"').replace('"real"', '"real-bash"')}
raise SystemExit(4)'; echo "rc=$?"; exit 5`);
    assertExitCode(sh.text, 5);
    real(sh.text, 'real-bash');
    assert.match(sh.text, /^rc=4$/m);

    if (BACKEND === 'native' || (BACKEND === 'container' && !REMOTE_ENGINE)) {
        // a warm spare's interpreter started before its call: take one (none on a remote engine)
        let warm = null;
        for (let i = 0; i < 20 && !warm; i++) {
            await sleep(500);
            const r = await runCode(conn, 'python', `${PROBE.replace('"real"', '"real-warm"')}\nraise SystemExit(6)`);
            if (r.result.structuredContent.usage.from_handover) warm = r;
        }
        assert.ok(warm, 'a call took a warm spare');
        assertExitCode(warm.text, 6);
        real(warm.text, 'real-warm');
    }
    if (BACKEND === 'native' || (BACKEND === 'container' && !REMOTE_ENGINE)) {
        for (const [language, code, tag] of [
            ['python', PROBE.replace('"real"', '"real-cell"'), 'real-cell'],
            ['bash', `python3 -c '${PROBE.replace(/'/g, '"').replace('"real"', '"real-bcell"')}'`, 'real-bcell'],
        ]) {
            const s = await callTool(conn, 'session_start', { language });
            assert.equal(s.isError, false, textOf(s));
            const session = s.structuredContent.session;
            const c = await callTool(conn, 'run_code', { language, code, session });
            real(textOf(c), tag);
            await callTool(conn, 'session_end', { session });
        }
    }
});

// Issue 24 #2, the rest: the container's command named `timeout`, `python3`, `node` and `bash`
// by bare name, so only PATH's order kept a run's /workspace/.local/bin copies from standing in
// for them. The launcher now names them by absolute path (engine_interp_for()): what each
// program sees as its own argv[0], and its parent `timeout`'s, says so.
test('the container launcher starts timeout and the interpreter by absolute path', { skip: BACKEND !== 'container' && 'the container backend\'s command' }, async (t) => {
    const w = makeWorld(t);
    const conn = await connect(w);
    const argv = (pid) => `open("/proc/${pid}/cmdline").read().split("\\0")[:-1]`;
    const py = await runCode(conn, 'python', `import os\nprint("self", ${argv('self')})\nprint("parent", ${argv('" + str(os.getppid()) + "')})`);
    assertExitCode(py.text, 0);
    assert.match(py.text, /^self \['\/usr\/(local\/)?bin\/python3', '\/sandbox\/main\.py'\]$/m, py.text);
    assert.match(py.text, /^parent \['\/usr\/bin\/timeout', '--kill-after=1', '\d+', '\/usr\/(local\/)?bin\/python3', '\/sandbox\/main\.py'\]$/m, py.text);
    // control: a program started by bare name shows the bare name
    const sh = await runCode(conn, 'bash', 'tr "\\0" " " </proc/$$/cmdline; echo; tr "\\0" " " </proc/$PPID/cmdline; echo; python3 -c \'print(open("/proc/self/cmdline").read().split("\\0")[0])\'');
    assertExitCode(sh.text, 0);
    assert.match(sh.text, /^\/bin\/bash \/sandbox\/main\.sh $/m, sh.text);
    assert.match(sh.text, /^\/usr\/bin\/timeout --kill-after=1 \d+ \/bin\/bash \/sandbox\/main\.sh $/m, sh.text);
    assert.match(sh.text, /^python3$/m, sh.text);
    const js = await runCode(conn, 'node', 'console.log("self", require("fs").readFileSync("/proc/self/cmdline", "utf8").split("\\0")[0])');
    assertExitCode(js.text, 0);
    assert.match(js.text, /^self \/usr\/(local\/)?bin\/node$/m, js.text);
    if (!REMOTE_ENGINE) {
        const s = await callTool(conn, 'session_start', { language: 'python' });
        assert.equal(s.isError, false, textOf(s));
        const session = s.structuredContent.session;
        const c = await callTool(conn, 'run_code', { language: 'python', session, code: 'print("cell", open("/proc/self/cmdline").read().split("\\0")[0])' });
        assert.match(textOf(c), /^cell \/usr\/(local\/)?bin\/python3$/m, textOf(c));
        await callTool(conn, 'session_end', { session });
    }
});
