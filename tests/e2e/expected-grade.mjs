#!/usr/bin/env node
// expected-grade.mjs - the isolation grade a backend must report on this host, taken from
// `vestibule-mcp doctor --json` and checked against kernel facts read here, independently of
// the server's code, so a wrong doctor cannot make a wrong e2e run pass.
//
// Usage: node expected-grade.mjs BACKEND      (native, container or gvisor)
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
//   gvisor     as native with a user manager on cgroup v2: exactly "gvisor" when memory, cpu
//              and pids are delegated, else degraded naming exactly the missing ones; without
//              one, "gvisor-degraded (limits not applied: memory, cpu, pids: ...)" naming
//              --ignore-cgroups (and cgroup v2 when there is none): runsc gets no cgroup then.
// Anything else (naive: always "none (naive: development only)") is not derived. The facts and
// the rules are in grade-facts.mjs (tests/e2e/grade.test.mjs checks that they refuse a wrong
// doctor).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

import { hostFacts, judge } from './grade-facts.mjs';

const backend = process.argv[2];
if (!['native', 'container', 'gvisor'].includes(backend) || process.argv.length !== 3) {
    console.error('usage: node expected-grade.mjs native|container|gvisor');
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

const engine = process.env.DOCKER_HOST || process.env.CONTAINER_HOST || '';
const f = hostFacts();
say(`facts: cgroup2 ${f.cgroup2 ? 'yes' : 'no'}, user bus ${f.bus ? 'yes' : 'no'}, delegated '${f.delegated.join(' ')}', Linux ${f.release}${backend === 'container' ? `, engine ${engine || '(default)'}` : ''}`);

// doctor, with exactly the environment an e2e server gets
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
const why = judge(backend, grade, f, engine);
if (why) fail(why);
say('doctor agrees with the facts');
console.log(grade);
