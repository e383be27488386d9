/* ctrcg.h - the container's own cgroup (cgroup v1), read by the server from this host's
 * cgroupfs while the container lives (ctrcg.c): its exact watermarks (memory.max_usage_in_bytes,
 * pids.peak), the forks its pids cap refused (pids.events "max") and its CPU (cpuacct.usage).
 * For what no other source gives: rootful Podman's one-shot runs, whose parent cgroup also holds
 * the engine's monitor (hostcg.c), and every session cell on a local engine, root or not (the
 * files are 0444; a docker-group user reads them too). Sources: cgroups(7), the kernel's
 * Documentation/admin-guide/cgroup-v1/memory.rst, pids.rst and cpuacct.rst
 * (https://docs.kernel.org/admin-guide/cgroup-v1/memory.html, .../cgroup-v1/pids.html,
 * .../cgroup-v1/cpuacct.html). Private to src/engine. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "run/run.h"

#define ENGINE_CTRCG_POLL_MS 20 /* the least time between two polls of a live run */

/* One container's cgroup folders and the largest figures read from them; zeroed = nothing. */
struct engine_ctrcg {
        char mem[384], pids[384], cpu[384]; /* absolute folders; "" = not known */
        unsigned reads;                     /* polls that read any figure */
        bool has_mem, has_pids, has_refused, has_cpu;
        uint64_t mem_peak;     /* bytes: memory.max_usage_in_bytes */
        uint64_t pids_peak;    /* tasks: pids.peak */
        uint64_t pids_refused; /* forks refused at the cap: pids.events "max" */
        uint64_t cpu_ns;       /* nanoseconds of CPU, user and system: cpuacct.usage */
        uint64_t next_ms;      /* sbx_now_ms() before which a rate-limited poll reads nothing */
};

/**
 * engine_ctrcg_at() - the folders of cgroup @leaf (one path component: "libpod-<id>" for Podman's
 * cgroupfs manager) below parent cgroup @parent_rel ("/vestibule/..." as passed in
 * HostConfig.CgroupParent) in the memory, pids and cpuacct hierarchies, into @g (zeroed first).
 * Nothing is opened: the folders exist once the container started.
 * @g:          zeroed, then g->mem, g->pids and g->cpu set to "<mount><@parent_rel>/<@leaf>"
 *              (cut at 384 bytes); the caller's, nothing allocated. On error partly set.
 * @parent_rel: a cgroup path from the hierarchies' root, starting with '/'; copied.
 * @leaf:       copied; "", ".", ".." and any '/' are refused.
 * Return 0, or -EINVAL for a bad @leaf, or engine_hostcg_mount()'s -ENOENT (no such v1
 * hierarchy: a cgroup v2 host) / -EXDEV (mounted from a subtree) / -errno of opening
 * /proc/self/mountinfo (proc(5)).
 */
int engine_ctrcg_at(struct engine_ctrcg *g, const char *parent_rel, const char *leaf);

/**
 * engine_ctrcg_of_pid() - the folders of the cgroups of host process @pid (a process in the
 * container: proc(5) /proc/<pid>/cgroup, "ID:controllers:path" per hierarchy, cgroups(7)) into
 * @g (zeroed first): g->mem, g->pids and, when mounted, g->cpu (cpuacct) as absolute folders
 * (cut at 384 bytes); the caller's, nothing allocated, zeroed again on error.
 * Return 0; -ESRCH (@pid <= 0 or gone), -ENOENT (no v1 memory or pids hierarchy: cgroup v2 is
 * not read here), or -errno of opening /proc/<pid>/cgroup (-EACCES).
 */
int engine_ctrcg_of_pid(struct engine_ctrcg *g, pid_t pid);

/**
 * engine_ctrcg_poll() - read the figures into @g, keeping the largest of each (a file that can
 * no longer be read, the container's cgroup removed at its exit, keeps what was read before).
 * Files: memory.max_usage_in_bytes (bytes) in g->mem, pids.peak (tasks) and pids.events "max"
 * (refused forks) in g->pids, cpuacct.usage (ns) in g->cpu; an empty folder is skipped.
 * @g:      from engine_ctrcg_at() or engine_ctrcg_of_pid(); its figures, has_* flags, reads
 *          (+1 when anything was read) and next_ms (@now_ms + ENGINE_CTRCG_POLL_MS) updated.
 * @now_ms: sbx_now_ms() (monotonic, ms) to rate-limit (nothing read before @g->next_ms), or 0
 *          to read now.
 * Return: true when any figure was read by this call; false (nothing changed but next_ms)
 * otherwise. Never fails otherwise: an unreadable file is a figure not read.
 */
bool engine_ctrcg_poll(struct engine_ctrcg *g, uint64_t now_ms);

/**
 * engine_ctrcg_usage() - the one-shot run's mem_peak and pids_peak from @g's polls into @u,
 * each marked a lower bound (a peak after the last poll, just before the exit, is not seen);
 * a figure @u holds already (measured: a lower bound too, engine_hostcg_read()'s on Podman)
 * stays when it is larger. Without a poll that read them they stay as @u has them. @pids_max > 0
 * and a refused fork (or a peak at @pids_max) fill @limits_hit (@size bytes) with
 * "pids (the cap of N was reached)".
 * @g:          borrowed, after engine_ctrcg_poll().
 * @pids_max:   the run's pids cap (tasks; 0 = none, then nothing is named).
 * @u:          u->mem_peak_bytes (bytes) and u->pids_peak (tasks) updated as above, with
 *              at_least set; the rest untouched.
 * @limits_hit: a NUL-terminated string of @size bytes; replaced whole by the text above
 *              unless it names "pids" already (the engine's runs put nothing else there).
 * No errors: nothing to return.
 */
void engine_ctrcg_usage(const struct engine_ctrcg *g, unsigned pids_max, struct run_usage *u,
                        char *limits_hit, size_t size);

/* What a session's cells saw of the container's cgroup so far. */
struct engine_ctrcg_cells {
        bool begun;
        uint64_t cpu_ns_seen;  /* cpuacct.usage at the last call */
        uint64_t refused_seen; /* pids.events "max" at the last call */
};

/**
 * engine_ctrcg_cells_begin() - the session's runner (host pid @pid) is ready: its start-up's
 * CPU and refused forks are counted in no cell. @st: zeroed, then on success the container's
 * cpuacct.usage (ns) and pids.events "max" so far, and begun set; the caller's, nothing held.
 * Return 0, or -errno as engine_ctrcg_of_pid(), or -ENODATA when no figure could be read.
 */
int engine_ctrcg_cells_begin(pid_t pid, struct engine_ctrcg_cells *st);

/**
 * engine_ctrcg_cell_usage() - a cell's usage from the container's own cgroup, found through
 * @pid (the runner's host pid): cpu since the last call (exact: cpuacct.usage), mem_peak and
 * pids_peak as the session's peaks so far (exact: the kernel's watermarks), and the pids cap
 * named in @res->limits_hit only when a fork was refused since the last call (pids.events
 * "max" counts refusals; a peak at the cap from an earlier cell says nothing of this one).
 * @pids_max: the cap in tasks (0 = none: never named).
 * @st:       from engine_ctrcg_cells_begin() (or zeroed: then the first cell's CPU counts from
 *            the container's start); updated on success to this call's counters.
 * @res:      on success res->usage.cpu_us (µs), mem_peak_bytes (bytes) and pids_peak (tasks)
 *            measured and exact; res->limits_hit replaced by "pids (the cap of N was
 *            reached)" for a refused fork, unless it names pids already.
 * Return 0 with @res's three figures set, or -errno (as engine_ctrcg_of_pid(), or -ENODATA
 * when the memory, pids or cpuacct figures could not all be read) with @res and @st untouched.
 */
int engine_ctrcg_cell_usage(pid_t pid, unsigned pids_max, struct engine_ctrcg_cells *st,
                            struct run_result *res);
