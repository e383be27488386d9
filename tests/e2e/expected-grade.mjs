#!/usr/bin/env node
// expected-grade.mjs - the isolation grade a backend must report on this host, taken from
// `vestibule-mcp doctor --json` and checked against kernel facts read here, independently of
// the server's code, so a wrong doctor cannot make a wrong e2e run pass.
//
// Usage: node expected-grade.mjs BACKEND      (native or container)
// Environment: VESTIBULE_BIN, and the settings lib.mjs hands to a server (VESTIBULE_ROOTFS_DIR,
// DOCKER_HOST, VESTIBULE_RUN_AS, ...): doctor runs with exactly the environment the e2e
// servers get (lib.mjs makeWorld: the SDK's default environment plus those settings).
// Output: the grade on stdout (one line); on stderr the facts and doctor's answer.
// Exit status: 0 doctor's grade fits the facts, 1 it does not (or doctor failed), 2 usage.
//
// The facts (docs/design/vm.md, docs/design/environment.md; statfs(2), cgroups(7)):
//   cgroup2   /sys/fs/cgroup is a cgroup2 file system (statfs f_type CGROUP2_SUPER_MAGIC)
//   bus       /run/user/UID/bus is a socket owned by UID (the user manager's bus)
//   delegated the controllers in the user manager's cgroup.controllers
//             (/sys/fs/cgroup/user.slice/user-UID.slice/user@UID.service)
//   rootless  the engine socket (DOCKER_HOST or CONTAINER_HOST) lies under /run/user/
// What they require:
//   native     all three, with memory, cpu and pids delegated: exactly "native". Otherwise
//              "native-degraded (limits not applied: LIST: WHY)" where LIST is exactly the
//              limits the facts say are missing (memory, cpu, and pids before Linux 5.14,
//              when there is no cgroup of our own; else the undelegated controllers) and WHY
//              names each missing fact ("systemd user bus", "cgroup v2").
//   container  a rootful engine: exactly "container". Rootless on a host without cgroup v2:
//              exactly "container-degraded (limits not applied: memory, cpu, pids: rootless
//              ENGINE on cgroup v1)" (ENGINE Podman or Docker, from the socket's path).
//              Rootless on cgroup v2: "container" when memory, cpu and pids are delegated,
//              else degraded naming exactly the missing ones.
// Anything else (naive: always "none (naive: development only)") is not derived.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';

const backend = process.argv[2];
if (!['native', 'container'].includes(backend) || process.argv.length !== 3) {
    console.error('usage: node expected-grade.mjs native|container');
    process.exit(2);
}
process.env.E2E_BACKEND = backend;
process.env.E2E_EXPECT_GRADE ||= '(derived by expected-grade.mjs)';
const { BIN, makeWorld } = await import('./lib.mjs');

const say = (s) => console.error(`expected-grade: ${s}`);
function fail(s) {
    say(`FAILED: ${s}`);
    process.exit(1);
}

// ------------------------------------------------------------------ kernel facts
const CGROUP2_SUPER_MAGIC = 0x63677270;
const uid = process.getuid();
let cgroup2 = false;
try { cgroup2 = fs.statfsSync('/sys/fs/cgroup').type === CGROUP2_SUPER_MAGIC; } catch { /* no /sys/fs/cgroup */ }
let bus = false;
try {
    const st = fs.statSync(`/run/user/${uid}/bus`);
    bus = st.isSocket() && st.uid === uid;
} catch { /* none */ }
let delegated = [];
if (cgroup2) {
    try {
        delegated = fs.readFileSync(`/sys/fs/cgroup/user.slice/user-${uid}.slice/user@${uid}.service/cgroup.controllers`, 'utf8').trim().split(/\s+/);
    } catch { /* no user manager cgroup */ }
}
const [kmaj, kmin] = os.release().split('.').map(Number);
const nprocOk = kmaj > 5 || (kmaj === 5 && kmin >= 14);
const engine = process.env.DOCKER_HOST || process.env.CONTAINER_HOST || '';
const rootless = /^unix:\/\/\/run\/user\//.test(engine);
const undelegated = ['memory', 'cpu', 'pids'].filter((c) => !delegated.includes(c));
say(`facts: cgroup2 ${cgroup2 ? 'yes' : 'no'}, user bus ${bus ? 'yes' : 'no'}, delegated '${delegated.join(' ')}', Linux ${os.release()}${backend === 'container' ? `, engine ${engine || '(default)'}${rootless ? ' (rootless)' : ''}` : ''}`);

// ------------------------------------------------------------------ doctor
const world = makeWorld(undefined);
const r = spawnSync(BIN, ['doctor', '--json'], { env: world.env, cwd: world.root, encoding: 'utf8', timeout: 300_000, maxBuffer: 16 << 20 });
fs.rmSync(world.root, { recursive: true, force: true, maxRetries: 3 });
let grade;
try {
    const b = JSON.parse(r.stdout).backends[backend];
    if (!b.usable) fail(`doctor --json says backend ${backend} is not usable: ${b.blocked}`);
    grade = b.grade;
} catch (e) {
    fail(`doctor --json gave no grade for ${backend} (status ${r.status ?? r.signal}): ${e.message}: ${r.stderr.trim()}`);
}
say(`doctor --json: backend ${backend}: '${grade}'`);

// ------------------------------------------------------------------ the check
const degraded = (prefix) => new RegExp(`^${prefix}-degraded \\(limits not applied: ([a-z, ]+): (.+)\\)$`).exec(grade);
const sameList = (got, want) => got.split(', ').join() === want.join();
if (backend === 'native') {
    if (cgroup2 && bus && undelegated.length === 0) {
        if (grade !== 'native') fail(`the facts give every limit, so the grade must be exactly 'native'`);
    } else {
        const m = degraded('native');
        if (!m) fail(`a limit is missing by the facts, so the grade must be 'native-degraded (limits not applied: LIST: WHY)'`);
        const want = cgroup2 && bus ? undelegated : ['memory', 'cpu', ...(nprocOk ? [] : ['pids'])];
        if (!sameList(m[1], want)) fail(`the limits not applied must be exactly '${want.join(', ')}', not '${m[1]}'`);
        if (!bus && !m[2].includes('systemd user bus')) fail(`there is no user bus, and the reason does not say 'systemd user bus'`);
        if (!cgroup2 && !m[2].includes('cgroup v2')) fail(`there is no cgroup v2, and the reason does not say 'cgroup v2'`);
    }
} else if (!rootless || (cgroup2 && undelegated.length === 0)) {
    if (grade !== 'container') fail(`${rootless ? 'every controller is delegated' : 'a rootful engine applies every limit'}, so the grade must be exactly 'container'`);
} else if (!cgroup2) {
    const want = `container-degraded (limits not applied: memory, cpu, pids: rootless ${/podman/.test(engine) ? 'Podman' : 'Docker'} on cgroup v1)`;
    if (grade !== want) fail(`a rootless engine on cgroup v1 applies no limit: the grade must be exactly '${want}'`);
} else {
    const m = degraded('container');
    if (!m || !sameList(m[1], undelegated)) fail(`the limits not applied must be exactly '${undelegated.join(', ')}'`);
}
say('doctor agrees with the facts');
console.log(grade);
