/* hostcg.c - what the host kernel says about a rootful engine's container, read by the server
 * itself (never from the container's output):
 *
 * - Usage. On cgroup v1 the runtime removes a container's own cgroup the moment it exits
 *   (measured with Podman 4.3 + runc: gone before the wait answers), so its files cannot be
 *   read "after the run". Instead each run gets a parent cgroup of ours (HostConfig.
 *   CgroupParent "/vestibule/<owner>-<n>"); the runtime creates it and the container's cgroup
 *   below it, and only removes the container's. The parent's hierarchical counters survive
 *   the child: memory.max_usage_in_bytes (peak), cpuacct.usage (CPU ns), pids.peak. The
 *   server reads them after the run and removes the parent from every hierarchy. Docker
 *   keeps its shim elsewhere, so the parent holds the container only. Podman puts conmon
 *   (and the runtime and `podman container cleanup` it starts: ~11 MB, ~0.3 s CPU, 14
 *   tasks measured) in <parent>/conmon: its CPU is subtracted exactly; peaks cannot be, so
 *   on Podman the parent's give lower bounds only (podman_floor()), raised by the polls of
 *   the container's own folder while it lives (ctrcg.c).
 * - OOM. cgroup v1 counts oom_kill only in the cgroup that hit its limit (the container's,
 *   already gone), not in its ancestors. The kernel's log says it instead: the oom-kill
 *   record names the memcg that hit its limit (oom_memcg=<path ending in the container id>).
 *   /dev/kmsg is opened at the run's start, positioned at the end, and read after the exit.
 *
 * Both need root on the engine's host (the server talks to a local rootful engine). */
#include "engine/engine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "run/run.h"

#define HOSTCG_TOP "vestibule"  /* the parents live under /vestibule in every hierarchy */
#define HOSTCG_MONITOR "conmon" /* Podman (cgroupfs) puts conmon at <CgroupParent>/conmon */

int engine_hostcg_mount(const char *ctrl, char *ret, size_t size)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[1024];

        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                /* id parent maj:min root mountpoint opts [optional...] - fstype source super */
                char root[256], mnt[256];
                const char *dash = strstr(line, " - ");
                if (!dash || sscanf(line, "%*s %*s %*s %255s %255s", root, mnt) != 2)
                        continue;
                char fstype[32], super[512];
                if (sscanf(dash + 3, "%31s %*s %511s", fstype, super) != 2 ||
                    strcmp(fstype, "cgroup") != 0)
                        continue;
                bool has = false;
                char *save = NULL; /* runs read this concurrently: strtok_r */
                for (char *tok = strtok_r(super, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                        has |= strcmp(tok, ctrl) == 0;
                if (!has)
                        continue;
                if (strcmp(root, "/") != 0)
                        return -EXDEV; /* a namespaced or bind view: paths would not map */
                snprintf(ret, size, "%s", mnt);
                return 0;
        }
        return -ENOENT;
}

int engine_hostcg_available(char *why, size_t size)
{
        static const char *const need[] = {"memory", "cpuacct", "pids"};
        char mnt[256];

        if (geteuid() != 0) {
                snprintf(why, size,
                         "the server is not root, so it cannot read and clean up the "
                         "engine's cgroups");
                return -EPERM;
        }
        for (size_t i = 0; i < ELEMENTSOF(need); i++) {
                int r = engine_hostcg_mount(need[i], mnt, sizeof(mnt));
                if (r == -ENOENT) {
                        snprintf(why, size,
                                 "the host has no cgroup v1 '%s' hierarchy (reading a "
                                 "cgroup v2 host's accounting is not implemented for "
                                 "the container backend)",
                                 need[i]);
                        return r;
                }
                if (r < 0) {
                        snprintf(why, size, "the cgroup v1 '%s' hierarchy is not usable (%s)",
                                 need[i], strerror(-r));
                        return r;
                }
                if (access(mnt, W_OK) < 0) {
                        snprintf(why, size, "the cgroup v1 '%s' hierarchy at '%s' is read-only",
                                 need[i], mnt);
                        return -EROFS;
                }
        }
        return 0;
}

void engine_hostcg_name(const char *owner, unsigned long seq, char *ret, size_t size)
{
        /* owner "<host>@<pidns>:<pid>:<start>": keep pid and start, the sweep's liveness key */
        const char *c2 = strrchr(owner, ':');
        const char *c1 = c2;
        while (c1 && c1 > owner && c1[-1] != ':')
                c1--;
        if (!c2 || c1 == owner)
                snprintf(ret, size, "/" HOSTCG_TOP "/%d-0-%lu", (int)getpid(), seq);
        else
                snprintf(ret, size, "/" HOSTCG_TOP "/%.*s-%s-%lu", (int)(c2 - c1), c1, c2 + 1, seq);
}

static int read_u64(const char *mnt, const char *rel, const char *file, uint64_t *ret)
{
        char path[512], buf[64];
        ssize_t n;

        snprintf(path, sizeof(path), "%s%s/%s", mnt, rel, file);
        n = sbx_read_small_file(AT_FDCWD, path, SBX_READ_PREFIX, buf, sizeof(buf));
        if (n <= 0)
                return n < 0 ? (int)n : -ENODATA;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno || end == buf)
                return -EBADMSG;
        *ret = v;
        return 0;
}

static void measure(struct run_measure *m, int r, uint64_t v, const char *file)
{
        m->at_least = false;
        if (r == 0) {
                m->measured = true;
                m->value = v;
                m->why[0] = '\0';
        } else {
                m->measured = false;
                snprintf(m->why, sizeof(m->why), "the host cgroup's %s was unreadable (%s)", file,
                         strerror(-r));
        }
}

/* Podman's monitor shares @rel: a watermark of the sum is not the sum of the watermarks, so
 * the container's own peak is not in these files. What they do give is a floor: at the
 * moment the container peaked, parent = container + monitor <= max(parent), and the monitor
 * then was <= max(monitor), so max(container) >= max(parent) - max(monitor). (The container's
 * own folder gives more while it lives: ctrcg.c, polled by backend.c.) */
static void podman_floor(const char *ctrl, const char *rel, const char *mon, const char *file,
                         struct run_measure *m)
{
        char mnt[256];
        uint64_t all = 0, monitor = 0;
        int r = engine_hostcg_mount(ctrl, mnt, sizeof(mnt));

        if (r == 0)
                r = read_u64(mnt, rel, file, &all);
        if (r == 0)
                r = read_u64(mnt, mon, file, &monitor);
        measure(m, r, all > monitor ? all - monitor : 0, file);
        m->at_least = m->measured;
}

static void podman_floors(const char *rel, const char *mon, struct run_usage *u)
{
        podman_floor("memory", rel, mon, "memory.max_usage_in_bytes", &u->mem_peak_bytes);
        podman_floor("pids", rel, mon, "pids.peak", &u->pids_peak);
}

void engine_hostcg_read(const char *rel, bool podman, struct run_usage *u)
{
        char mem[256] = "", cpu[256] = "", pids[256] = "";
        _cleanup_free_ char *mon = xasprintf("%s/" HOSTCG_MONITOR, rel);
        uint64_t v = 0, vmon = 0;
        int r;

        r = engine_hostcg_mount("cpuacct", cpu, sizeof(cpu));
        if (r == 0)
                r = read_u64(cpu, rel, "cpuacct.usage", &v);
        /* Podman's monitor subtree: its CPU is counted apart, so it is taken off exactly */
        if (r == 0 && podman)
                r = read_u64(cpu, mon, "cpuacct.usage", &vmon);
        if (r == 0 && vmon > v)
                r = -ERANGE;
        measure(&u->cpu_us, r, (v - vmon) / 1000, "cpuacct.usage");
        if (podman) {
                podman_floors(rel, mon, u);
                return;
        }
        v = 0;
        r = engine_hostcg_mount("memory", mem, sizeof(mem));
        if (r == 0)
                r = read_u64(mem, rel, "memory.max_usage_in_bytes", &v);
        measure(&u->mem_peak_bytes, r, v, "memory.max_usage_in_bytes");
        v = 0;
        r = engine_hostcg_mount("pids", pids, sizeof(pids));
        if (r == 0)
                r = read_u64(pids, rel, "pids.peak", &v);
        measure(&u->pids_peak, r, v, "pids.peak");
}

static void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

/* @fn(mount point, @ud) for every cgroup (v1 or v2) hierarchy mounted at its root. */
static void each_cgroup_mount(void (*fn)(const char *mnt, void *ud), void *ud)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[1024];

        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                char root[256], mnt[256], fstype[32];
                const char *dash = strstr(line, " - ");
                if (!dash || sscanf(line, "%*s %*s %*s %255s %255s", root, mnt) != 2 ||
                    sscanf(dash + 3, "%31s", fstype) != 1)
                        continue;
                if ((strcmp(fstype, "cgroup") == 0 || strcmp(fstype, "cgroup2") == 0) &&
                    strcmp(root, "/") == 0)
                        fn(mnt, ud);
        }
}

struct rmdir_ctx {
        const char *rel;
        bool busy; /* some hierarchy still had it in use */
};

static void rmdir_in(const char *mnt, void *ud)
{
        struct rmdir_ctx *c = ud;
        char path[512];
        snprintf(path, sizeof(path), "%s%s/" HOSTCG_MONITOR, mnt, c->rel);
        (void)rmdir(path);
        snprintf(path, sizeof(path), "%s%s", mnt, c->rel);
        if (rmdir(path) < 0 && errno != ENOENT) {
                c->busy = true;
                log_debug("cannot remove the run's cgroup '%s': %m", path);
        }
}

int engine_hostcg_remove(const char *rel)
{
        struct rmdir_ctx c = {.rel = rel};
        each_cgroup_mount(rmdir_in, &c);
        return c.busy ? -EBUSY : 0;
}

/* Sweep: parents "<pid>-<start>-<n>" whose server is gone (an empty one is removed; one that
 * still holds a container's cgroup is left for the engine's own cleanup and the next sweep). */
static void sweep_in(const char *mnt, void *ud)
{
        unsigned *n = ud;
        char top[512];
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        char host[256] = "";

        snprintf(top, sizeof(top), "%s/" HOSTCG_TOP, mnt);
        d = opendir(top);
        if (!d)
                return;
        gethostname(host, sizeof(host) - 1);
        while ((de = readdir(d))) {
                int pid;
                unsigned long long start;
                unsigned long seq;
                if (sscanf(de->d_name, "%d-%llu-%lu", &pid, &start, &seq) != 3)
                        continue;
                char label[400];
                snprintf(label, sizeof(label), "%s:%d:%llu", host, pid, start);
                if (sbx_owner_alive(label))
                        continue;
                char path[800];
                snprintf(path, sizeof(path), "%s/%s/" HOSTCG_MONITOR, top, de->d_name);
                (void)rmdir(path);
                snprintf(path, sizeof(path), "%s/%s", top, de->d_name);
                if (rmdir(path) == 0)
                        (*n)++;
        }
}

static void private_top_in(const char *mnt, void *ud)
{
        char path[512];
        (void)ud;
        snprintf(path, sizeof(path), "%s/" HOSTCG_TOP, mnt);
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
                log_debug("cannot create '%s': %m", path);
                return;
        }
        if (chmod(path, 0700) < 0)
                log_debug("cannot make '%s' private: %m", path);
}

void engine_hostcg_private_top(void)
{
        each_cgroup_mount(private_top_in, NULL);
}

unsigned engine_hostcg_sweep(void)
{
        unsigned n = 0;
        each_cgroup_mount(sweep_in, &n);
        return n;
}

/* ---------------------------------------------------------------------------------------- */
/* The kernel log                                                                            */

int engine_kmsg_open(void)
{
        int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (lseek(fd, 0, SEEK_END) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

bool engine_kmsg_line_is_oom_of(const char *rec, const char *id)
{
        /* "6,6576,12255028015,-;oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/a/b/
         * libpod-<id>,task_memcg=...,task=python3,pid=17748,uid=2000" */
        const char *msg = strchr(rec, ';');
        size_t idlen = strlen(id);
        if (!msg || idlen < 12 || strncmp(msg + 1, "oom-kill:", 9) != 0)
                return false;
        const char *m = strstr(msg, ",oom_memcg=");
        if (!m)
                return false;
        m += strlen(",oom_memcg=");
        size_t len = strcspn(m, ",\n");
        /* the memcg's last path component ends with the full container id ("libpod-<id>",
         * "docker/<id>", "<id>.scope" under systemd) */
        for (const char *p = m; p + idlen <= m + len; p++)
                if (strncmp(p, id, idlen) == 0 && (p == m || p[-1] == '/' || p[-1] == '-') &&
                    (p + idlen == m + len || strncmp(p + idlen, ".scope", 6) == 0))
                        return true;
        return false;
}

int engine_kmsg_find_oom(int fd, const char *id)
{
        char rec[8192];
        bool lost = false;

        for (;;) {
                ssize_t n = read(fd, rec, sizeof(rec) - 1);
                if (n < 0 && errno == EPIPE) {
                        lost = true; /* records were overwritten before we read them */
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break; /* EAGAIN: read everything there is */
                rec[n] = '\0';
                if (engine_kmsg_line_is_oom_of(rec, id))
                        return 1;
        }
        return lost ? -ENODATA : 0;
}
