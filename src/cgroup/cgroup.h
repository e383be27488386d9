/* cgroup.h - where a sandbox's limits and usage come from, for every backend that runs its
 * sandboxes as processes of this server (src/native, src/gvisor): a transient systemd scope per
 * run on the user manager (sd-bus StartTransientUnit), or a child of the server's own delegated
 * cgroup v2 subtree, or neither (rlimits only; the caller's grade says so). Usage is read from
 * the run's cgroup from outside, never from anything the code could write. The kernel's side:
 * Documentation/admin-guide/cgroup-v2.rst, https://docs.kernel.org/admin-guide/cgroup-v2.html
 * (memory.max, memory.peak, cpu.max, pids.max, cgroup.kill, cgroup.procs); systemd's:
 * org.freedesktop.systemd1(5), systemd.resource-control(5), systemd.scope(5). The limits come
 * from struct sbx_config: mem_mb (MiB), cpu_pct (percent of one CPU: 100 = one), pids_max.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "config/config.h"
#include "run/run.h"

enum cgroup_limits_path {
        CGROUP_LIMITS_NONE = 0,  /* rlimits only */
        CGROUP_LIMITS_SCOPE,     /* transient systemd scope on the user manager (sd-bus) */
        CGROUP_LIMITS_DELEGATED, /* our own cgroup v2 subtree, delegated and writable */
};

struct cgroup_limits_info {
        enum cgroup_limits_path path;
        char base[512];     /* DELEGATED: the directory runs are created under */
        char why_none[320]; /* NONE: why neither path is available (no systemd bus: ...) */
        char missing[64];   /* controllers not available: "memory, cpu" ("" = all three) */
};

/**
 * cgroup_limits_detect() - find how this host can give each run its own cgroup: a scope on
 * the user manager reached through @cfg's user bus (sbx_user_bus_resolve()), else the
 * server's own cgroup v2 subtree, set up here (the server moves into a leaf and enables the
 * controllers for its runs) so a subtree that is writable but not delegated is found now.
 * @cfg: borrowed for the call (cfg->engine_env: DBUS_SESSION_BUS_ADDRESS, XDG_RUNTIME_DIR).
 * @ret: overwritten (zeroed first): the path found; for SCOPE and DELEGATED the wanted
 *       controllers missing ("memory, cpu"; "" = none); for DELEGATED @ret->base, the
 *       absolute folder under /sys/fs/cgroup; for NONE @ret->why_none, both reasons.
 * Side effects, on the process for its life: the shared user bus connection is opened (a
 * Ping, 5 s at most; see cgroup_user_bus_opened()); on the delegated path, once per process,
 * the server moves into "<base>/vestibule-server" and writes "+memory", "+cpu", "+pids" to
 * <base>/cgroup.subtree_control (cgroup-v2.html, "No Internal Process Constraint",
 * "Delegation"). Never fails: whatever is unavailable is described in @ret->why_none.
 */
void cgroup_limits_detect(const struct sbx_config *cfg, struct cgroup_limits_info *ret);

/* One run's cgroup (a scope's or a child of the delegated subtree); owned by its caller, ended
 * with cgroup_run_remove(). */
struct cgroup_run {
        int dir_fd;     /* O_PATH|O_DIRECTORY of the run's cgroup, or -1 */
        char path[512]; /* its path under /sys/fs/cgroup */
        char unit[96];  /* SCOPE: the unit name */
        bool delegated; /* created by us under the delegated base (we rmdir it) */
};

/**
 * cgroup_run_create() - DELEGATED: mkdir a fresh cgroup for one run under @info->base
 * with memory.max, memory.swap.max=0, cpu.max and pids.max from @cfg. The child is born in
 * it (clone3 CLONE_INTO_CGROUP with @ret->dir_fd: clone(2)).
 * @info: from cgroup_limits_detect() with path DELEGATED; borrowed.
 * @cfg:  borrowed: memory.max = mem_mb MiB in bytes, cpu.max = "<cpu_pct * 1000> 100000" (µs
 *        of CPU per 100 ms period), pids.max = pids_max. A limit file that cannot be written
 *        (its controller not enabled) is logged at debug level and left out, not an error.
 * @ret:  zeroed first; on success "<base>/run-<server pid>-<n>" in @ret->path, @ret->delegated
 *        set and @ret->dir_fd an O_PATH|O_DIRECTORY|O_CLOEXEC fd of it, both owned by @ret:
 *        cgroup_run_remove() closes the fd and removes the folder. On error nothing is left
 *        (cgroup_run_remove() on it is still safe).
 * Return: 0 or -errno (mkdir(2), open(2), or the once-per-process set-up of
 * cgroup_limits_detect() when it failed then: -EACCES, -EBUSY...) with @err naming the file.
 */
int cgroup_run_create(const struct cgroup_limits_info *info, const struct sbx_config *cfg,
                      struct cgroup_run *ret, struct sbx_error *err);

/**
 * cgroup_scope_start() - SCOPE: start a transient scope holding @pid on the user manager
 * (StartTransientUnit with Delegate, MemoryMax, MemorySwapMax=0, CPUQuota, TasksMax) and wait
 * until systemd has moved @pid into it. cgroup_scope_start_pids() for the one process @pid;
 * @cfg, @ret, the errors and the sources as there.
 */
int cgroup_scope_start(const struct sbx_config *cfg, pid_t pid, struct cgroup_run *ret,
                       struct sbx_error *err);

/**
 * cgroup_scope_start_pids() - cgroup_scope_start() for @n (1 or 2) processes at once, all in
 * the one scope: a run whose own processes may all exit before its cgroup is read (gvisor's
 * runsc) puts a keeper beside them, which holds the scope (and its usage files) until killed.
 * @cfg:  borrowed: cfg->engine_env names the user bus; MemoryMax = mem_mb MiB in bytes,
 *        MemorySwapMax = 0, CPUQuotaPerSecUSec = cpu_pct * 10000 µs, TasksMax = pids_max,
 *        Delegate = yes, CollectMode = inactive-or-failed (systemd.resource-control(5)).
 * @pids: @n live processes of the caller's (children held before they exec), borrowed.
 * @ret:  zeroed first; on success the unit "vestibule-run-<server pid>-<n>.scope" in
 *        @ret->unit, the cgroup's absolute folder (from the first pid's /proc/PID/cgroup) in
 *        @ret->path and an O_PATH|O_DIRECTORY|O_CLOEXEC fd of it in @ret->dir_fd (-1 when it
 *        could not be opened); ended with cgroup_run_remove(), which closes the fd. systemd
 *        removes the scope itself once its processes are gone (CollectMode).
 * The call is StartTransientUnit(name, "fail", properties, []) on the shared user bus
 * connection (org.freedesktop.systemd1(5), 5 s at most; one reconnect when it had dropped),
 * then a poll of /proc/PID/cgroup every 1 ms, 2 s at most.
 * Return: 0 once systemd moved every one of @pids; -EINVAL (@n not 1 or 2); -ENOENT or
 * -ENOSYS (no usable libsystemd0: lazy_sdbus_load()); -errno from sd-bus when the bus cannot
 * be reached (@err names dbus-user-session) or systemd refuses the unit (@err quotes its
 * error); -ETIMEDOUT when the processes were not moved within 2 s.
 */
int cgroup_scope_start_pids(const struct sbx_config *cfg, const pid_t *pids, size_t n,
                            struct cgroup_run *ret, struct sbx_error *err);

/**
 * cgroup_run_move() - DELEGATED: move the process @pid into @cg (write it to cgroup.procs;
 * cgroup-v2.html "Processes" and "Delegation Containment": we own both the source's and the
 * target's common ancestor, the delegated base). For a child held before it execs, so all it
 * starts is born in @cg. @cg: from cgroup_run_create(), borrowed. @pid: a process of the
 * server's (its child), moved with every thread.
 * Return: 0, or -errno of open(2)/write(2) on "<@cg->path>/cgroup.procs" (-ESRCH: @pid gone;
 * -ENOENT: the cgroup removed; -EACCES/-EPERM: no common ancestor of ours) with @err naming
 * the file.
 */
int cgroup_run_move(const struct cgroup_run *cg, pid_t pid, struct sbx_error *err);

/**
 * cgroup_run_populated() - does @cg still hold a live process (cgroup.events "populated 1",
 * which counts its descendants' too: cgroup-v2.html "Core Interface Files")? False once it is
 * empty or gone (a scope systemd collected), and for NULL or a removed @cg (empty path);
 * nothing is reported as an error. Bounds a wait after cgroup_run_kill().
 */
bool cgroup_run_populated(const struct cgroup_run *cg);

/**
 * cgroup_user_bus_opened() - how many connections to the systemd user bus this process has
 * opened so far (0 before the first; a fork(2) child counts on from its parent's figure). The
 * scopes of all runs share one connection (opened on first use, opened again only after it
 * dropped or in a forked child), so this stays at 1 on a healthy host. Thread-safe; never
 * fails. The bus: sd-bus(3), sd_bus_open_user(3).
 */
unsigned long cgroup_user_bus_opened(void);

/**
 * cgroup_user_bus_fd() - the shared user bus connection's socket (sd_bus_get_fd(3)), or -1
 * when this process has none open (none yet, or only its parent's, inherited through fork(2)).
 * Borrowed: the connection owns it; do not close it. For tests that cut the connection
 * (shutdown(2)) to prove the reconnect. Thread-safe.
 */
int cgroup_user_bus_fd(void);

/**
 * cgroup_run_kill() - SIGKILL every process in @cg and its descendants: write "1" to
 * cgroup.kill (Linux 5.14+; the kernel kills them all at once, forks racing it included:
 * cgroup-v2.html "cgroup.kill"), else kill(2) each pid cgroup.procs lists now (up to 8 KiB of
 * it; a process forked meanwhile escapes that round). Does not wait: cgroup_run_populated()
 * tells when they are gone. NULL or a removed @cg (empty path): nothing. Errors are ignored.
 */
void cgroup_run_kill(struct cgroup_run *cg);

/**
 * cgroup_run_read() - once nothing of the run is left but init: cpu (cpu.stat usage_usec),
 * mem_peak (memory.peak, 5.19+), pids_peak (pids.peak, 6.1+), the limits hit (cpu throttling,
 * pids.events max) and memory.events oom_kill into @res (usage figures, limits_hit,
 * oom_killed, mem_limit_bytes only). Files: cgroup-v2.html "CPU", "Memory", "PID".
 * @cg:  borrowed; NULL or a removed one (empty path) reads nothing.
 * @cfg: borrowed: pids_max for the text, mem_mb for @res->mem_limit_bytes.
 * @res: @res->usage.cpu_us (µs), mem_peak_bytes (bytes), pids_peak (processes), each a
 *       run_measure, measured or with its why ("Linux 5.19+ needed", "no memory controller in
 *       the run's cgroup"); @res->limits_hit replaced ("cpu (throttled in N of M periods of 100
 *       ms)", "pids (the cap of N was reached)", "" = none); oom_killed and mem_limit_bytes
 *       (mem_mb MiB in bytes) set only when memory.events counted an oom_kill. Untouched when
 *       false is returned.
 * Return: true when the cgroup could be read (its cpu.stat), false when it is gone (a scope
 * systemd collected) or unreadable: then nothing in it can be trusted.
 */
bool cgroup_run_read(const struct cgroup_run *cg, const struct sbx_config *cfg,
                     struct run_result *res);

/**
 * cgroup_run_cpu_us() - the CPU the run's cgroup used so far (cpu.stat usage_usec, µs, user and
 * system, its descendants' included; cgroup-v2.html "CPU Interface Files"): a warm spare's
 * start-up, taken away from its run's figure. @cg borrowed (NULL or removed: false);
 * @ret set only on success. Return: false when unreadable.
 */
bool cgroup_run_cpu_us(const struct cgroup_run *cg, uint64_t *ret);

/**
 * cgroup_run_remove() - close @cg->dir_fd and, when we created the cgroup (DELEGATED),
 * rmdir(2) it, retrying on EBUSY every 2 ms for up to 0.2 s while its last tasks are freed (a
 * scope's cgroup is systemd's to remove). Leaves @cg with dir_fd -1 and an empty path, so a
 * second call, cgroup_run_kill() and the readers do nothing. NULL is fine. A cgroup that is
 * still busy after that stays (not reported: the delegated base holds it).
 */
void cgroup_run_remove(struct cgroup_run *cg);
