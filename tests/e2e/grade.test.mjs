// The expected grade scripts/test.sh derives from `doctor --json` (expected-grade.mjs) cannot
// come from a wrong doctor: a stand-in doctor (a script printing doctor's JSON shape) that
// claims a grade the kernel facts contradict is refused, and one that claims the right grade
// is accepted (the control: the check is not refusing everything). Backend native only
// (naive's grade is fixed; the container rules are the same code path).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { BACKEND } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const uid = process.getuid();
let cgroup2 = false, bus = false;
try { cgroup2 = fs.statfsSync('/sys/fs/cgroup').type === 0x63677270; } catch { /* none */ }
try { bus = fs.statSync(`/run/user/${uid}/bus`).isSocket(); } catch { /* none */ }
const [kmaj, kmin] = os.release().split('.').map(Number);
const noCgroup = 'native-degraded (limits not applied: memory, cpu: no systemd user bus and no cgroup v2 at /sys/fs/cgroup)';
// The right answer where the facts make it plain: a host with neither (this CI host), or one
// with both where the user manager delegates every controller (the systemd VM).
let right = null;
if (!cgroup2 && !bus && (kmaj > 5 || (kmaj === 5 && kmin >= 14))) right = noCgroup;
else if (cgroup2 && bus) {
    try {
        const c = fs.readFileSync(`/sys/fs/cgroup/user.slice/user-${uid}.slice/user@${uid}.service/cgroup.controllers`, 'utf8');
        if (['memory', 'cpu', 'pids'].every((x) => c.split(/\s+/).includes(x))) right = 'native';
    } catch { /* no user manager */ }
}

/** expected-grade.mjs native against a stand-in doctor saying @grade: {status, stdout, stderr}. */
async function withDoctor(grade) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vst-grade-'));
    const bin = path.join(dir, 'vestibule-mcp');
    const json = JSON.stringify({ backends: { native: { usable: true, grade } } });
    fs.writeFileSync(bin, `#!/bin/sh\n[ "$1 $2" = "doctor --json" ] || exit 2\ncat <<'EOF'\n${json}\nEOF\n`, { mode: 0o755 });
    const p = spawn(process.execPath, [path.join(here, 'expected-grade.mjs'), 'native'], {
        env: { ...process.env, VESTIBULE_BIN: bin }, timeout: 60_000,
    });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const status = await new Promise((resolve) => p.on('close', (code) => resolve(code)));
    fs.rmSync(dir, { recursive: true, force: true });
    return { status, stdout, stderr };
}

const skip = BACKEND !== 'native' ? 'expected-grade.mjs is checked once, on the native run' : false;

test('a doctor whose grade the kernel facts contradict is refused', { skip }, async () => {
    const wrong = [
        'none (naive: development only)',
        'native-degraded (limits not applied: memory: a reason naming nothing)',
        'native-degraded (limits not applied: memory, cpu, pids, seccomp: no systemd user bus and no cgroup v2)',
        ...[noCgroup, 'native'].filter((g) => g !== right),
    ];
    const answers = await Promise.all(wrong.map(withDoctor));
    for (const [i, g] of wrong.entries()) {
        const r = answers[i];
        assert.equal(r.status, 1, `a doctor saying '${g}' was accepted here: ${r.stdout}${r.stderr}`);
        assert.match(r.stderr, /FAILED/);
    }
});

test('a doctor whose grade fits the kernel facts is accepted (the control)', { skip: skip || (!right && 'this host is neither without cgroup v2 and bus nor fully delegated') }, async () => {
    const r = await withDoctor(right);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), right);
});
