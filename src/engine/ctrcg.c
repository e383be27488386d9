/* ctrcg.c - the container's own cgroup v1 folders, read while the container lives (ctrcg.h).
 *
 * Measured with rootful Podman 4.3 + runc on this project's cgroup v1 host (2026-12-02), for a
 * run holding 100 MiB for 2 s then forking 30 children: its folder <CgroupParent>/libpod-<id>
 * gave memory.max_usage_in_bytes 108.6 MB and pids.peak 31 (exact), read in microseconds; the
 * engine's compat stats?stream=false answered in 360-660 ms with the current usage only (no
 * max_usage) and libpod's containers/stats?stream=false in 360-700 ms, current usage only. The
 * folder is removed as the container exits, before the engine's wait answers: a one-shot run
 * polls it while it lives and reports lower bounds; a session's cells read it between cells,
 * when it is there, and get exact figures. */
#include "engine/ctrcg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "engine/engine.h"

/* @dir/@file's first number (or the number after "@key " in a keyed file) into *@ret. */
static bool read_num(const char *dir, const char *file, const char *key, uint64_t *ret)
{
        char path[512], buf[256];
        const char *p = buf;
        char *end;

        if (!*dir)
                return false;
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        if (sbx_read_small_file(AT_FDCWD, path, SBX_READ_PREFIX, buf, sizeof(buf)) <= 0)
                return false;
        if (key) {
                size_t k = strlen(key);
                for (p = buf; p && !(strncmp(p, key, k) == 0 && p[k] == ' ');)
                        p = (p = strchr(p, '\n')) ? p + 1 : NULL;
                if (!p)
                        return false;
                p += k + 1;
        }
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || end == p)
                return false;
        *ret = v;
        return true;
}

int engine_ctrcg_at(struct engine_ctrcg *g, const char *parent_rel, const char *leaf)
{
        char mnt[256];
        struct {
                const char *ctrl;
                char *dir;
        } h[] = {{"memory", g->mem}, {"pids", g->pids}, {"cpuacct", g->cpu}};
        int r;

        *g = (struct engine_ctrcg){0};
        if (!*leaf || strchr(leaf, '/') || strcmp(leaf, "..") == 0 || strcmp(leaf, ".") == 0)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(h); i++) {
                r = engine_hostcg_mount(h[i].ctrl, mnt, sizeof(mnt));
                if (r < 0)
                        return r;
                snprintf(h[i].dir, sizeof(g->mem), "%s%s/%s", mnt, parent_rel, leaf);
        }
        return 0;
}

int engine_ctrcg_of_pid(struct engine_ctrcg *g, pid_t pid)
{
        char path[64], line[512], mnt[256];
        _cleanup_fclose_ FILE *f = NULL;
        int found = 0;

        *g = (struct engine_ctrcg){0};
        if (pid <= 0)
                return -ESRCH;
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? -ESRCH : -errno;
        /* "hierarchy-ID:controller-list:cgroup-path" per hierarchy (cgroups(7)) */
        while (fgets(line, sizeof(line), f)) {
                char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2)
                        continue;
                *c2 = '\0';
                c2[strcspn(c2 + 1, "\n") + 1] = '\0';
                const char *rel = c2 + 1;
                char *save = NULL;
                for (char *t = strtok_r(c1 + 1, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                        char *dir = strcmp(t, "memory") == 0    ? g->mem
                                    : strcmp(t, "pids") == 0    ? g->pids
                                    : strcmp(t, "cpuacct") == 0 ? g->cpu
                                                                : NULL;
                        if (!dir || engine_hostcg_mount(t, mnt, sizeof(mnt)) < 0)
                                continue;
                        snprintf(dir, sizeof(g->mem), "%s%s", mnt, strcmp(rel, "/") ? rel : "");
                        found++;
                }
        }
        if (!*g->mem || !*g->pids) {
                *g = (struct engine_ctrcg){0};
                return -ENOENT;
        }
        return found ? 0 : -ENOENT;
}

static void keep_max(bool ok, uint64_t v, bool *has, uint64_t *max)
{
        if (!ok)
                return;
        *max = *has && *max > v ? *max : v;
        *has = true;
}

bool engine_ctrcg_poll(struct engine_ctrcg *g, uint64_t now_ms)
{
        uint64_t v = 0;
        bool any = false, ok;

        if (now_ms && now_ms < g->next_ms)
                return false;
        g->next_ms = now_ms + ENGINE_CTRCG_POLL_MS;
        ok = read_num(g->mem, "memory.max_usage_in_bytes", NULL, &v);
        keep_max(ok, v, &g->has_mem, &g->mem_peak);
        any |= ok;
        ok = read_num(g->pids, "pids.peak", NULL, &v);
        keep_max(ok, v, &g->has_pids, &g->pids_peak);
        any |= ok;
        ok = read_num(g->pids, "pids.events", "max", &v);
        keep_max(ok, v, &g->has_refused, &g->pids_refused);
        any |= ok;
        ok = read_num(g->cpu, "cpuacct.usage", NULL, &v);
        keep_max(ok, v, &g->has_cpu, &g->cpu_ns);
        any |= ok;
        g->reads += any;
        return any;
}

/* @m becomes "at least" the larger of what it holds (when measured) and the polls' @v. */
static void lower_bound(struct run_measure *m, bool has, uint64_t v)
{
        if (m->measured && (!has || m->value > v)) {
                v = m->value;
                has = true;
        }
        if (has)
                *m = (struct run_measure){.measured = true, .at_least = true, .value = v};
}

static void name_pids_cap(unsigned pids_max, char *limits_hit, size_t size)
{
        if (!strstr(limits_hit, "pids"))
                snprintf(limits_hit, size, "pids (the cap of %u was reached)", pids_max);
}

void engine_ctrcg_usage(const struct engine_ctrcg *g, unsigned pids_max, struct run_usage *u,
                        char *limits_hit, size_t size)
{
        lower_bound(&u->mem_peak_bytes, g->has_mem, g->mem_peak);
        lower_bound(&u->pids_peak, g->has_pids, g->pids_peak);
        if (pids_max &&
            ((g->has_refused && g->pids_refused > 0) || (g->has_pids && g->pids_peak >= pids_max)))
                name_pids_cap(pids_max, limits_hit, size);
}

int engine_ctrcg_cells_begin(pid_t pid, struct engine_ctrcg_cells *st)
{
        struct engine_ctrcg g;
        int r = engine_ctrcg_of_pid(&g, pid);

        *st = (struct engine_ctrcg_cells){0};
        if (r < 0)
                return r;
        if (!engine_ctrcg_poll(&g, 0))
                return -ENODATA;
        st->cpu_ns_seen = g.cpu_ns;
        st->refused_seen = g.pids_refused;
        st->begun = true;
        return 0;
}

int engine_ctrcg_cell_usage(pid_t pid, unsigned pids_max, struct engine_ctrcg_cells *st,
                            struct run_result *res)
{
        struct engine_ctrcg g;
        int r = engine_ctrcg_of_pid(&g, pid);

        if (r < 0)
                return r;
        if (!engine_ctrcg_poll(&g, 0) || !g.has_mem || !g.has_pids || !g.has_cpu)
                return -ENODATA;
        uint64_t cpu = g.cpu_ns > st->cpu_ns_seen ? g.cpu_ns - st->cpu_ns_seen : 0;
        res->usage.cpu_us = (struct run_measure){.measured = true, .value = cpu / 1000u};
        res->usage.mem_peak_bytes = (struct run_measure){.measured = true, .value = g.mem_peak};
        res->usage.pids_peak = (struct run_measure){.measured = true, .value = g.pids_peak};
        if (pids_max && g.has_refused && g.pids_refused > st->refused_seen)
                name_pids_cap(pids_max, res->limits_hit, sizeof(res->limits_hit));
        st->cpu_ns_seen = g.cpu_ns;
        st->refused_seen = g.has_refused ? g.pids_refused : st->refused_seen;
        st->begun = true;
        return 0;
}
