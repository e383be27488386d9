// The expected grade scripts/test.sh and scripts/agree.sh derive from `doctor --json`
// (expected-grade.mjs) cannot come from a wrong doctor: grades the kernel facts contradict are
// refused (grade-facts.mjs judge(), and end to end through expected-grade.mjs with a stand-in
// doctor, a script printing doctor's JSON shape), and the right grade is accepted (the control:
// the check does not refuse everything). Once, on the native run (naive's grade is fixed).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { hostFacts, judge } from './grade-facts.mjs';
import { BACKEND } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const f = hostFacts();
const noBusNoV2 = 'native-degraded (limits not applied: memory, cpu: no systemd user bus and no cgroup v2 at /sys/fs/cgroup)';
// The right native grade where the facts make it plain: neither a bus nor cgroup v2 (this CI
// host), or both with every controller delegated (the systemd VM); null on a mixed host.
let right = null;
if (!f.cgroup2 && !f.bus && f.nprocOk) right = noBusNoV2;
else if (f.cgroup2 && f.bus && ['memory', 'cpu', 'pids'].every((c) => f.delegated.includes(c))) right = 'native';
const wrong = [
    'none (naive: development only)',
    'container',
    'native-degraded (limits not applied: memory: a reason naming nothing)',
    'native-degraded (limits not applied: memory, cpu, pids, seccomp: no systemd user bus and no cgroup v2)',
    'native-degraded (limits not applied: memory, cpu: a reason naming neither the bus nor cgroups)',
    ...[noBusNoV2, 'native'].filter((g) => g !== right),
];

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

const skip = BACKEND !== 'native' ? 'the derivation is checked once, on the native run' : false;

test('a native grade the kernel facts contradict is refused', { skip }, () => {
    for (const g of wrong) assert.notEqual(judge('native', g, f), null, `'${g}' was accepted on this host (${JSON.stringify(f)})`);
});

test('a container grade the kernel facts contradict is refused', { skip }, () => {
    const rootless = 'unix:///run/user/2000/podman/podman.sock';
    assert.notEqual(judge('container', 'container-degraded (limits not applied: memory: x)', f, ''), null, 'a rootful engine must be exactly container');
    assert.notEqual(judge('container', 'native', f, rootless), null);
    if (!f.cgroup2) assert.notEqual(judge('container', 'container', f, rootless), null, 'rootless on cgroup v1 cannot be full');
});

test('expected-grade.mjs: a wrong doctor fails it, the right one passes (the control)', { skip }, async () => {
    const [bad, good] = await Promise.all([withDoctor(wrong.at(-1)), right && withDoctor(right)]);
    assert.equal(bad.status, 1, `a doctor saying '${wrong.at(-1)}' was accepted: ${bad.stdout}${bad.stderr}`);
    assert.match(bad.stderr, /FAILED/);
    if (!right) return; // a mixed host: no grade the facts make plain
    assert.equal(good.status, 0, good.stderr);
    assert.equal(good.stdout.trim(), right);
});

test('the gvisor rule: exactly gvisor with every limit, else the missing ones named; anything else refused', () => {
    const full = { cgroup2: true, bus: true, delegated: ['memory', 'cpu', 'pids'], nprocOk: true, release: '6.1.0' };
    assert.equal(judge('gvisor', 'gvisor', full), null);
    assert.notEqual(judge('gvisor', 'gvisor-degraded (limits not applied: memory: x)', full), null, 'degraded where every limit applies');
    const partial = { ...full, delegated: ['cpu', 'pids'] };
    assert.equal(judge('gvisor', 'gvisor-degraded (limits not applied: memory: the controllers are not delegated to this user\'s cgroup)', partial), null);
    assert.notEqual(judge('gvisor', 'gvisor', partial), null, 'a full grade without the memory controller');
    const v1 = { cgroup2: false, bus: false, delegated: [], nprocOk: true, release: '6.1.0' };
    const good = 'gvisor-degraded (limits not applied: memory, cpu, pids: runsc runs with --ignore-cgroups and no cgroup of the run\'s own: no systemd user bus and no cgroup v2 at /sys/fs/cgroup (a v1 or v1/v2 hybrid hierarchy))';
    assert.equal(judge('gvisor', good, v1), null);
    assert.notEqual(judge('gvisor', 'gvisor', v1), null, 'a full gvisor grade is refused without a cgroup');
    assert.notEqual(judge('gvisor', good.replace('memory, cpu, pids', 'memory, cpu'), v1), null);
    assert.notEqual(judge('gvisor', good.replace('--ignore-cgroups', 'no cgroup'), v1), null);
    assert.notEqual(judge('gvisor', good.replace('cgroup v2', 'cgroups'), v1), null);
});
