// grade-facts.mjs - kernel facts about this host and what they require of a backend's
// isolation grade, read without the server's code (expected-grade.mjs has the rules in words;
// statfs(2), cgroups(7), docs/design/vm.md).
import fs from 'node:fs';
import os from 'node:os';

const CGROUP2_SUPER_MAGIC = 0x63677270;

/**
 * The facts for the calling user: { cgroup2, bus, delegated: [controller...], nprocOk, release }.
 * cgroup2: /sys/fs/cgroup is a cgroup2 file system; bus: /run/user/UID/bus is a socket owned by
 * UID; delegated: the user manager's cgroup.controllers (empty without cgroup2 or a manager);
 * nprocOk: Linux 5.14 or later (RLIMIT_NPROC counts per user namespace).
 */
export function hostFacts(uid = process.getuid()) {
    let cgroup2 = false, bus = false, delegated = [];
    try { cgroup2 = fs.statfsSync('/sys/fs/cgroup').type === CGROUP2_SUPER_MAGIC; } catch { /* none */ }
    try {
        const st = fs.statSync(`/run/user/${uid}/bus`);
        bus = st.isSocket() && st.uid === uid;
    } catch { /* none */ }
    if (cgroup2) {
        try {
            delegated = fs.readFileSync(`/sys/fs/cgroup/user.slice/user-${uid}.slice/user@${uid}.service/cgroup.controllers`, 'utf8').trim().split(/\s+/);
        } catch { /* no user manager cgroup */ }
    }
    const release = os.release();
    const [kmaj, kmin] = release.split('.').map(Number);
    return { cgroup2, bus, delegated, nprocOk: kmaj > 5 || (kmaj === 5 && kmin >= 14), release };
}

/**
 * Whether @grade (doctor's, for @backend "native" or "container", the engine at @engine, a
 * DOCKER_HOST URL or '') fits the facts @f (hostFacts()). Returns null when it does, else why not.
 */
export function judge(backend, grade, f, engine = '') {
    const undelegated = ['memory', 'cpu', 'pids'].filter((c) => !f.delegated.includes(c));
    const degraded = (prefix) => new RegExp(`^${prefix}-degraded \\(limits not applied: ([a-z, ]+): (.+)\\)$`).exec(grade);
    const sameList = (got, want) => got.split(', ').join() === want.join();
    if (backend === 'native') {
        if (f.cgroup2 && f.bus && undelegated.length === 0)
            return grade === 'native' ? null : `the facts give every limit, so the grade must be exactly 'native', not '${grade}'`;
        const m = degraded('native');
        if (!m) return `a limit is missing by the facts, so the grade must be 'native-degraded (limits not applied: LIST: WHY)', not '${grade}'`;
        const want = f.cgroup2 && f.bus ? undelegated : ['memory', 'cpu', ...(f.nprocOk ? [] : ['pids'])];
        if (!sameList(m[1], want)) return `the limits not applied must be exactly '${want.join(', ')}', not '${m[1]}'`;
        if (!f.bus && !m[2].includes('systemd user bus')) return `there is no user bus, and the reason does not say 'systemd user bus'`;
        if (!f.cgroup2 && !m[2].includes('cgroup v2')) return `there is no cgroup v2, and the reason does not say 'cgroup v2'`;
        return null;
    }
    if (backend === 'gvisor') {
        // src/gvisor puts runsc (its gofer and Sentry too) in a cgroup of the run's own, found as
        // native finds it (src/cgroup): with a user manager on cgroup v2 and every controller
        // delegated the grade is exactly 'gvisor'; without, every limit is missing (runsc runs
        // with --ignore-cgroups, no RLIMIT_NPROC stands in) and the grade says which and why.
        if (f.cgroup2 && f.bus && undelegated.length === 0)
            return grade === 'gvisor' ? null : `the facts give every limit, so the grade must be exactly 'gvisor', not '${grade}'`;
        const m = degraded('gvisor');
        if (!m) return `a limit is missing by the facts, so the grade must be 'gvisor-degraded (limits not applied: LIST: WHY)', not '${grade}'`;
        if (f.cgroup2 && f.bus) return sameList(m[1], undelegated) ? null : `the limits not applied must be exactly '${undelegated.join(', ')}', not '${m[1]}'`;
        if (!sameList(m[1], ['memory', 'cpu', 'pids'])) return `the limits not applied must be exactly 'memory, cpu, pids', not '${m[1]}'`;
        if (!f.cgroup2 && !m[2].includes('cgroup v2')) return `there is no cgroup v2, and the reason does not say 'cgroup v2'`;
        return m[2].includes('--ignore-cgroups') ? null : `the reason does not say runsc runs with --ignore-cgroups ('${m[2]}')`;
    }
    if (backend !== 'container') return `no rule for backend ${backend}`;
    const rootless = /^unix:\/\/\/run\/user\//.test(engine);
    if (!rootless || (f.cgroup2 && undelegated.length === 0))
        return grade === 'container' ? null : `${rootless ? 'every controller is delegated' : 'a rootful engine applies every limit'}, so the grade must be exactly 'container', not '${grade}'`;
    if (!f.cgroup2) {
        const want = `container-degraded (limits not applied: memory, cpu, pids: rootless ${/podman/.test(engine) ? 'Podman' : 'Docker'} on cgroup v1)`;
        return grade === want ? null : `a rootless engine on cgroup v1 applies no limit: the grade must be exactly '${want}', not '${grade}'`;
    }
    const m = degraded('container');
    return m && sameList(m[1], undelegated) ? null : `the limits not applied must be exactly '${undelegated.join(', ')}' ('${grade}')`;
}
