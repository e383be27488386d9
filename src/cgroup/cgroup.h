/* cgroup.h - where a sandbox's limits and usage come from, for every backend that runs its
 * sandboxes as processes of this server (src/native, src/gvisor): a transient systemd scope per
 * run on the user manager (sd-bus StartTransientUnit), or a child of the server's own delegated
 * cgroup v2 subtree, or neither (rlimits only; the caller's grade says so). Usage is read from
 * the run's cgroup from outside, never from anything the code could write. The kernel's side:
 * Documentation/admin-guide/cgroup-v2.rst (memory.max, memory.peak, cpu.max, pids.max,
 * cgroup.kill, cgroup.procs); systemd's: org.freedesktop.systemd1(5), systemd.resource-control(5).
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
 * Never fails: whatever is unavailable is described in @ret->why_none.
 */
void cgroup_limits_detect(const struct sbx_config *cfg, struct cgroup_limits_info *ret);

/* One run's cgroup (a scope's or a child of the delegated subtree). */
struct cgroup_run {
        int dir_fd;     /* O_PATH|O_DIRECTORY of the run's cgroup, or -1 */
        char path[512]; /* its path under /sys/fs/cgroup */
        char unit[96];  /* SCOPE: the unit name */
        bool delegated; /* created by us under the delegated base (we rmdir it) */
};

/**
 * cgroup_run_create() - DELEGATED: mkdir a fresh cgroup for one run under @info->base
 * with memory.max, memory.swap.max=0, cpu.max and pids.max from @cfg. The child is born in
 * it (clone3 CLONE_INTO_CGROUP with @ret->dir_fd).
 * Return: 0 or -errno with @err naming the file and the fix.
 */
int cgroup_run_create(const struct cgroup_limits_info *info, const struct sbx_config *cfg,
                      struct cgroup_run *ret, struct sbx_error *err);

/**
 * cgroup_scope_start() - SCOPE: start a transient scope holding @pid on the user manager
 * (StartTransientUnit with Delegate, MemoryMax, MemorySwapMax=0, CPUQuota, TasksMax) and wait
 * until systemd has moved @pid into it.
 * Return: 0 or -errno (sd-bus), @err naming the fix.
 */
int cgroup_scope_start(const struct sbx_config *cfg, pid_t pid, struct cgroup_run *ret,
                       struct sbx_error *err);

/**
 * cgroup_scope_start_pids() - cgroup_scope_start() for @n (1 or 2) processes at once, all in
 * the one scope: a run whose own processes may all exit before its cgroup is read (gvisor's
 * runsc) puts a keeper beside them, which holds the scope (and its usage files) until killed.
 * Return: 0 once systemd moved every one of @pids, or -errno with @err.
 */
int cgroup_scope_start_pids(const struct sbx_config *cfg, const pid_t *pids, size_t n,
                            struct cgroup_run *ret, struct sbx_error *err);

/**
 * cgroup_run_move() - DELEGATED: move the process @pid into @cg (write it to cgroup.procs;
 * cgroup-v2.rst "Migrating processes": we own both the source's and the target's common
 * ancestor, the delegated base). For a child held before it execs, so all it starts is born in
 * @cg. Return: 0, or -errno with @err naming the file.
 */
int cgroup_run_move(const struct cgroup_run *cg, pid_t pid, struct sbx_error *err);

/**
 * cgroup_run_populated() - does @cg still hold a live process (cgroup.events "populated 1")?
 * False once it is empty or gone (a scope systemd collected). Bounds a wait after
 * cgroup_run_kill().
 */
bool cgroup_run_populated(const struct cgroup_run *cg);

/**
 * cgroup_user_bus_opened() - how many connections to the systemd user bus this process has
 * opened so far. The scopes of all runs share one connection (opened on first use, opened
 * again only after it dropped or in a forked child), so this stays at 1 on a healthy host.
 */
unsigned long cgroup_user_bus_opened(void);

/**
 * cgroup_user_bus_fd() - the shared user bus connection's socket, or -1 when this process has
 * none open. For tests that cut the connection (shutdown(2)) to prove the reconnect.
 */
int cgroup_user_bus_fd(void);

/** cgroup_run_kill() - write 1 to cgroup.kill (5.14+), else SIGKILL each listed pid. */
void cgroup_run_kill(struct cgroup_run *cg);

/**
 * cgroup_run_read() - once nothing of the run is left but init: cpu (cpu.stat usage_usec),
 * mem_peak (memory.peak, 5.19+), pids_peak (pids.peak, 6.1+), the limits hit (cpu throttling,
 * pids.events max) and memory.events oom_kill into @res (usage figures, limits_hit,
 * oom_killed, mem_limit_bytes only). Return: true when the cgroup could be read.
 */
bool cgroup_run_read(const struct cgroup_run *cg, const struct sbx_config *cfg,
                     struct run_result *res);

/** cgroup_run_cpu_us() - the CPU the run's cgroup used so far (cpu.stat usage_usec, µs):
 * a warm spare's start-up, taken away from its run's figure. Return: false when unreadable. */
bool cgroup_run_cpu_us(const struct cgroup_run *cg, uint64_t *ret);

/** cgroup_run_remove() - close and (when we created it) remove the run's cgroup. */
void cgroup_run_remove(struct cgroup_run *cg);
