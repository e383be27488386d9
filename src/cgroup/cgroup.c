/* cgroup.c - where a run's limits and usage come from. In order of preference:
 *   1. a transient systemd scope per run on the user manager (sd-bus StartTransientUnit with
 *      Delegate, MemoryMax, MemorySwapMax=0, CPUQuota, TasksMax), the child moved into it
 *      before it may exec;
 *   2. the server's own cgroup v2 subtree when it is delegated and writable (a container with
 *      its own cgroup namespace, a service with Delegate=yes): one child cgroup per run, the
 *      child born in it by clone3(CLONE_INTO_CGROUP);
 *   3. neither: rlimits only, and the grade names every limit that was not applied and why.
 * Usage is read from the run's cgroup after the sandbox has exited, never from anything the
 * code could write. */
#include "cgroup/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include "lazy/sdbus.h"
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/rundir.h"
#include "common/xalloc.h"

/* snprintf that may truncate on purpose (paths and reasons cut at their buffer's size). */
__attribute__((format(printf, 3, 4))) static void cg_strf(char *buf, size_t size, const char *fmt,
                                                          ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, size, fmt, ap);
        va_end(ap);
}

#define CGROUP_ROOT "/sys/fs/cgroup"

static bool read_key(const char *dir, const char *name, const char *key, uint64_t *ret);

static const char *const wanted[] = {"memory", "cpu", "pids"};

/* A cgroupfs or procfs file into @buf: its length or -errno (sbx_read_small_file()). */
static int read_small(const char *path, char *buf, size_t size)
{
        return (int)sbx_read_small_file(AT_FDCWD, path, SBX_READ_PREFIX, buf, size);
}

static int write_small(const char *path, const char *data)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        size_t len = strlen(data);

        if (fd < 0)
                return -errno;
        if (write(fd, data, len) != (ssize_t)len)
                return -errno;
        return 0;
}

static bool has_word(const char *list, const char *word)
{
        size_t n = strlen(word);

        for (const char *p = list; (p = strstr(p, word)); p += n)
                if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
                        return true;
        return false;
}

/* "memory, cpu" for the wanted controllers missing from @controllers. */
static void missing_from(const char *controllers, char *buf, size_t size)
{
        buf[0] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(wanted); i++)
                if (!has_word(controllers, wanted[i])) {
                        size_t len = strlen(buf);
                        cg_strf(buf + len, size - len, "%s%s", len ? ", " : "", wanted[i]);
                }
}

/* Our own cgroup v2 path from /proc/self/cgroup ("0::/a/b" -> "/a/b"). */
static int own_cgroup(char *buf, size_t size)
{
        char data[4096];
        const char *p;
        int r = read_small("/proc/self/cgroup", data, sizeof(data));

        if (r < 0)
                return r;
        p = strstr(data, "0::");
        if (!p || (p != data && p[-1] != '\n'))
                return -ENOENT;
        p += 3;
        cg_strf(buf, size, "%.*s", (int)strcspn(p, "\n"), p);
        return 0;
}

/* ---- the user bus: one connection for the server's life ---------------------------------
 * Opening the user bus costs a connect, the SASL exchange and Hello on every run; the server
 * keeps one connection instead. An sd_bus object is not thread-safe, so every use holds
 * user_bus.lock from taking the connection to the end of the call. A connection that dropped
 * (the user manager or dbus-daemon restarted) is noticed before use or by the call's error,
 * and opened again once; a connection inherited through fork() belongs to the parent and is
 * left alone (sd-bus refuses it in the child with ECHILD). */

static struct {
        pthread_mutex_t lock;
        sd_bus *bus;
        pid_t owner;          /* the process that opened it */
        unsigned long opened; /* how many connections were opened (for the tests) */
} user_bus = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Errors after which the connection is dead and worth one reconnect. */
static bool bus_error_is_disconnect(int r)
{
        return r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE || r == -ESHUTDOWN ||
               r == -ECHILD || r == -ECONNREFUSED;
}

/* Drop the shared connection (lock held). */
static void bus_drop_locked(void)
{
        if (user_bus.bus && user_bus.owner == getpid())
                sd_bus_flush_close_unref(user_bus.bus);
        /* else: the parent's connection, copied by fork(): not ours to close or flush */
        user_bus.bus = NULL;
        user_bus.owner = 0;
}

/* A new connection to the user bus @env names, or the one /run/user/EUID holds when it names
 * none (common/rundir.h). */
static int user_bus_open(const struct sbx_engine_env *env, sd_bus **ret, struct sbx_error *err)
{
        char address[4200];
        int r;

        r = lazy_sdbus_load(err);
        if (r < 0)
                return r;
        r = sbx_user_bus_resolve(env->user_bus_address, env->xdg_runtime_dir, geteuid(), address,
                                 sizeof(address), err);
        if (r < 0)
                return r;
        r = lazy_sd_bus_open_address(address, ret);
        if (r < 0)
                return sbx_fail(err, -r, "cannot connect to '%s' (%s)", address, strerror(-r));
        return 0;
}

/* The shared connection, opened or reopened when needed (lock held). */
static int bus_get_locked(const struct sbx_engine_env *env, sd_bus **ret, struct sbx_error *err)
{
        int r;

        if (user_bus.bus && (user_bus.owner != getpid() || sd_bus_is_open(user_bus.bus) <= 0))
                bus_drop_locked();
        if (!user_bus.bus) {
                sd_bus *bus = NULL;
                r = user_bus_open(env, &bus, err);
                if (r < 0)
                        return r;
                user_bus.bus = bus;
                user_bus.owner = getpid();
                user_bus.opened++;
        }
        *ret = user_bus.bus;
        return 0;
}

/* Discard what arrived besides our replies (NameAcquired and the like), so the read queue of
 * a connection that lives as long as the server never grows (lock held). */
static void bus_drain_locked(sd_bus *bus)
{
        for (int i = 0; i < 64 && sd_bus_process(bus, NULL) > 0; i++)
                ;
}

/* sd_bus_call() on the shared connection, reconnecting once when it had dropped. On failure
 * @e holds the bus error when there was one, and @conn_err why no connection could be had
 * (when *@ret_connected is false). */
static int bus_call(const struct sbx_engine_env *env,
                    sd_bus_message *(*build)(sd_bus *bus, void *ud, int *r), void *ud,
                    uint64_t timeout_us, sd_bus_error *e, sd_bus_message **ret_reply,
                    bool *ret_connected, struct sbx_error *conn_err)
{
        int r = 0;

        *ret_connected = false;

        pthread_mutex_lock(&user_bus.lock);
        for (int attempt = 0; attempt < 2; attempt++) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
                sd_bus *bus = NULL;

                r = bus_get_locked(env, &bus, conn_err);
                *ret_connected = r >= 0;
                if (r < 0)
                        break;
                m = build(bus, ud, &r);
                if (!m)
                        break;
                sd_bus_error_free(e);
                r = sd_bus_call(bus, m, timeout_us, e, ret_reply);
                if (r >= 0) {
                        bus_drain_locked(bus);
                        break;
                }
                if (!bus_error_is_disconnect(r) && sd_bus_is_open(bus) > 0)
                        break;
                log_debug("the systemd user bus connection dropped (%s), reconnecting",
                          strerror(-r));
                bus_drop_locked();
        }
        pthread_mutex_unlock(&user_bus.lock);
        return r;
}

unsigned long cgroup_user_bus_opened(void)
{
        unsigned long n;

        pthread_mutex_lock(&user_bus.lock);
        n = user_bus.opened;
        pthread_mutex_unlock(&user_bus.lock);
        return n;
}

int cgroup_user_bus_fd(void)
{
        int fd = -1;

        pthread_mutex_lock(&user_bus.lock);
        if (user_bus.bus && user_bus.owner == getpid())
                fd = sd_bus_get_fd(user_bus.bus);
        pthread_mutex_unlock(&user_bus.lock);
        return fd;
}

static sd_bus_message *build_ping(sd_bus *bus, void *ud, int *r)
{
        sd_bus_message *m = NULL;

        (void)ud;
        *r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1",
                                            "/org/freedesktop/systemd1",
                                            "org.freedesktop.DBus.Peer", "Ping");
        return *r < 0 ? NULL : m;
}

static bool user_bus_reachable(const struct sbx_engine_env *env, char *why, size_t size)
{
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct sbx_error lib_err = {0}, conn_err = {0};
        bool connected;
        int r;

        if (lazy_sdbus_load(&lib_err) < 0) {
                cg_strf(why, size, "no systemd user bus (%s)", lib_err.msg);
                return false;
        }
        r = bus_call(env, build_ping, NULL, UINT64_C(5000000), &e, &reply, &connected, &conn_err);
        if (r >= 0)
                return true;
        if (!connected)
                cg_strf(why, size, "no systemd user bus: %s",
                        conn_err.msg[0] ? conn_err.msg : strerror(-r));
        else
                cg_strf(why, size, "no systemd user manager on the bus (%s)",
                        e.message ? e.message : strerror(-r));
        return false;
}

static int prepare_delegated(const char *base, struct sbx_error *err);

void cgroup_limits_detect(const struct sbx_config *cfg, struct cgroup_limits_info *ret)
{
        char bus_why[200], cg_why[200], path[512], dir[600], file[700], ctl[256];
        struct statfs sfs;

        memset(ret, 0, sizeof(*ret));

        if (statfs(CGROUP_ROOT, &sfs) < 0 || sfs.f_type != CGROUP2_SUPER_MAGIC) {
                cg_strf(cg_why, sizeof(cg_why),
                        "no cgroup v2 at " CGROUP_ROOT " (a v1 or v1/v2 hybrid hierarchy)");
        } else if (own_cgroup(path, sizeof(path)) < 0) {
                cg_strf(cg_why, sizeof(cg_why), "no cgroup v2 entry in /proc/self/cgroup");
        } else {
                cg_strf(dir, sizeof(dir), CGROUP_ROOT "%s", strcmp(path, "/") ? path : "");
                /* 1. systemd user manager with a bus */
                if (user_bus_reachable(&cfg->engine_env, bus_why, sizeof(bus_why))) {
                        char *svc = strstr(path, "/user@");
                        char *end = svc ? strstr(svc, ".service") : NULL;
                        ret->path = CGROUP_LIMITS_SCOPE;
                        if (end) {
                                cg_strf(file, sizeof(file), CGROUP_ROOT "%.*s/cgroup.controllers",
                                        (int)(end + 8 - path), path);
                                if (read_small(file, ctl, sizeof(ctl)) >= 0)
                                        missing_from(ctl, ret->missing, sizeof(ret->missing));
                        }
                        return;
                }
                /* 2. our own subtree, delegated to us */
                cg_strf(file, sizeof(file), "%s/cgroup.controllers", dir);
                if (read_small(file, ctl, sizeof(ctl)) < 0) {
                        cg_strf(cg_why, sizeof(cg_why), "cannot read '%s'", file);
                } else if (access(dir, W_OK) < 0) {
                        cg_strf(cg_why, sizeof(cg_why),
                                "the server's cgroup '%s' is not delegated to it (not writable)",
                                path);
                } else {
                        struct sbx_error perr = {0};

                        missing_from(ctl, ret->missing, sizeof(ret->missing));
                        /* Writable is not delegated: inside a unit of the user manager
                         * without Delegate=yes (the MCP client's own service or scope) the
                         * files are the user's, but the client's processes stay in that cgroup,
                         * so the kernel refuses controllers for its children (EBUSY, "no
                         * internal processes"), or the parent passes none down. So the subtree
                         * is set up now, once, and a failure is the grade's reason instead of
                         * every run's Blocked: later. */
                        if (strlen(ret->missing) >= strlen("memory, cpu, pids")) {
                                cg_strf(cg_why, sizeof(cg_why),
                                        "the server's cgroup '%s' has no controllers", path);
                        } else if (prepare_delegated(dir, &perr) < 0) {
                                cg_strf(cg_why, sizeof(cg_why),
                                        "the server's cgroup is not delegated to it (%s)",
                                        perr.msg);
                        } else {
                                ret->path = CGROUP_LIMITS_DELEGATED;
                                cg_strf(ret->base, sizeof(ret->base), "%s", dir);
                                return;
                        }
                        ret->missing[0] = '\0';
                }
                cg_strf(ret->why_none, sizeof(ret->why_none), "%s and %s", bus_why, cg_why);
                return;
        }
        cg_strf(ret->why_none, sizeof(ret->why_none), "no systemd user bus and %s", cg_why);
}

/* ---- delegated cgroup v2 --------------------------------------------------------------- */

static int prepare_delegated(const char *base, struct sbx_error *err)
{
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        static bool done;
        char leaf[600], file[700], ctl[256];
        int r = 0;

        pthread_mutex_lock(&lock);
        if (done)
                goto out;
        /* "no internal processes": the server moves into a leaf of its own, so the base can
         * enable controllers for the runs' cgroups beside it. */
        cg_strf(leaf, sizeof(leaf), "%s/vestibule-server", base);
        if (mkdir(leaf, 0755) < 0 && errno != EEXIST) {
                r = sbx_fail(err, errno, "cannot create '%s': %m", leaf);
                goto out;
        }
        cg_strf(file, sizeof(file), "%s/cgroup.procs", leaf);
        r = write_small(file, "0");
        if (r < 0) {
                r = sbx_fail(err, -r, "cannot move the server into '%s': %s", leaf, strerror(-r));
                goto out;
        }
        cg_strf(file, sizeof(file), "%s/cgroup.controllers", base);
        if (read_small(file, ctl, sizeof(ctl)) >= 0) {
                cg_strf(file, sizeof(file), "%s/cgroup.subtree_control", base);
                for (size_t i = 0; i < ELEMENTSOF(wanted); i++) {
                        char add[32];
                        if (!has_word(ctl, wanted[i]))
                                continue;
                        cg_strf(add, sizeof(add), "+%s", wanted[i]);
                        r = write_small(file, add);
                        if (r < 0) {
                                r = sbx_fail(err, -r,
                                             "cannot enable the %s controller for its runs in "
                                             "cgroup.subtree_control: %s",
                                             wanted[i], strerror(-r));
                                goto out;
                        }
                }
        }
        done = true;
out:
        pthread_mutex_unlock(&lock);
        return r;
}

static void set_limit(const char *dir, const char *name, const char *value)
{
        char file[700];
        int r;

        cg_strf(file, sizeof(file), "%s/%s", dir, name);
        r = write_small(file, value);
        if (r < 0 && r != -ENOENT)
                log_debug("cannot write '%s' to '%s': %s, ignoring", value, file, strerror(-r));
}

int cgroup_run_create(const struct cgroup_limits_info *info, const struct sbx_config *cfg,
                      struct cgroup_run *ret, struct sbx_error *err)
{
        static unsigned counter;
        char value[64];
        int r;

        memset(ret, 0, sizeof(*ret));
        ret->dir_fd = -1;
        r = prepare_delegated(info->base, err);
        if (r < 0)
                return r;
        cg_strf(ret->path, sizeof(ret->path), "%s/run-%d-%u", info->base, (int)getpid(),
                __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
        if (mkdir(ret->path, 0755) < 0)
                return sbx_fail(err, errno, "cannot create the run's cgroup '%s': %m", ret->path);
        ret->delegated = true;
        cg_strf(value, sizeof(value), "%llu", (unsigned long long)cfg->mem_mb << 20);
        set_limit(ret->path, "memory.max", value);
        set_limit(ret->path, "memory.swap.max", "0");
        cg_strf(value, sizeof(value), "%u 100000", cfg->cpu_pct * 1000);
        set_limit(ret->path, "cpu.max", value);
        cg_strf(value, sizeof(value), "%u", cfg->pids_max);
        set_limit(ret->path, "pids.max", value);
        ret->dir_fd = open(ret->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ret->dir_fd < 0) {
                r = sbx_fail(err, errno, "cannot open the run's cgroup '%s': %m", ret->path);
                rmdir(ret->path);
                return r;
        }
        return 0;
}

/* ---- systemd scope ---------------------------------------------------------------------- */

struct scope_call {
        const struct sbx_config *cfg;
        const char *unit;
        const pid_t *pids; /* 1 or 2 */
        size_t n;
};

static sd_bus_message *build_start_scope(sd_bus *bus, void *ud, int *r)
{
        const struct scope_call *c = ud;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;

        *r = sd_bus_message_new_method_call(
            bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager", "StartTransientUnit");
        if (*r >= 0)
                *r = sd_bus_message_append(m, "ss", c->unit, "fail");
        if (*r >= 0)
                *r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (*r >= 0)
                *r = c->n == 2
                         ? sd_bus_message_append(m, "(sv)", "PIDs", "au", 2, (uint32_t)c->pids[0],
                                                 (uint32_t)c->pids[1])
                         : sd_bus_message_append(m, "(sv)", "PIDs", "au", 1, (uint32_t)c->pids[0]);
        if (*r >= 0)
                *r = sd_bus_message_append(
                    m, "(sv)(sv)(sv)(sv)(sv)(sv)(sv)", "Description", "s", "vestibule sandbox run",
                    "Delegate", "b", 1, "MemoryMax", "t", (uint64_t)c->cfg->mem_mb << 20,
                    "MemorySwapMax", "t", (uint64_t)0, "CPUQuotaPerSecUSec", "t",
                    (uint64_t)c->cfg->cpu_pct * 10000, "TasksMax", "t", (uint64_t)c->cfg->pids_max,
                    "CollectMode", "s", "inactive-or-failed");
        if (*r >= 0)
                *r = sd_bus_message_close_container(m);
        if (*r >= 0)
                *r = sd_bus_message_append(m, "a(sa(sv))", 0);
        return *r < 0 ? NULL : TAKE_PTR(m);
}

int cgroup_scope_start(const struct sbx_config *cfg, pid_t pid, struct cgroup_run *ret,
                       struct sbx_error *err)
{
        return cgroup_scope_start_pids(cfg, &pid, 1, ret, err);
}

/* Has systemd moved every one of @pids into @unit? @ret_path: the cgroup's path, from the
 * first pid's /proc/PID/cgroup. */
static bool all_moved(const pid_t *pids, size_t n, const char *unit, char *ret_path, size_t size)
{
        char procfile[64], data[4096], *p;

        for (size_t i = 0; i < n; i++) {
                cg_strf(procfile, sizeof(procfile), "/proc/%d/cgroup", (int)pids[i]);
                if (read_small(procfile, data, sizeof(data)) <= 0 || !(p = strstr(data, "0::")) ||
                    !strstr(p, unit))
                        return false;
                if (i == 0)
                        cg_strf(ret_path, size, CGROUP_ROOT "%.*s", (int)strcspn(p + 3, "\n"),
                                p + 3);
        }
        return true;
}

int cgroup_scope_start_pids(const struct sbx_config *cfg, const pid_t *pids, size_t n,
                            struct cgroup_run *ret, struct sbx_error *err)
{
        static unsigned counter;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct scope_call call = {.cfg = cfg, .pids = pids, .n = n};
        struct sbx_error conn_err = {0};
        bool connected;
        int r;

        memset(ret, 0, sizeof(*ret));
        ret->dir_fd = -1;
        if (n < 1 || n > 2)
                return sbx_fail(err, EINVAL, "a run's scope starts with 1 or 2 processes, not %zu",
                                n);
        cg_strf(ret->unit, sizeof(ret->unit), "vestibule-run-%d-%u.scope", (int)getpid(),
                __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
        r = lazy_sdbus_load(err);
        if (r < 0)
                return r;
        call.unit = ret->unit;
        r = bus_call(&cfg->engine_env, build_start_scope, &call, UINT64_C(5000000), &e, &reply,
                     &connected, &conn_err);
        if (r < 0) {
                if (!connected)
                        return sbx_fail(err, -r,
                                        "cannot connect to the systemd user bus: %s; install "
                                        "dbus-user-session and log in again",
                                        conn_err.msg[0] ? conn_err.msg : strerror(-r));
                return sbx_fail(err, -r, "systemd refused the run's scope '%s': %s", ret->unit,
                                e.message ? e.message : strerror(-r));
        }
        /* The job is queued; the pid is moved when the scope starts. Wait for that (the child
         * is held before any setup until we say go). */
        for (int i = 0; i < 2000; i++) {
                if (all_moved(pids, n, ret->unit, ret->path, sizeof(ret->path))) {
                        ret->dir_fd = open(ret->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
                        return 0;
                }
                nanosleep(&(struct timespec){.tv_nsec = 1000000L}, NULL);
        }
        return sbx_fail(err, ETIMEDOUT, "systemd did not move the sandbox into '%s' within 2 s",
                        ret->unit);
}

/* ---- both ------------------------------------------------------------------------------- */

int cgroup_run_move(const struct cgroup_run *cg, pid_t pid, struct sbx_error *err)
{
        char file[700], value[32];
        int r;

        cg_strf(file, sizeof(file), "%s/cgroup.procs", cg->path);
        cg_strf(value, sizeof(value), "%d", (int)pid);
        r = write_small(file, value);
        if (r < 0)
                return sbx_fail(err, -r, "cannot move process %d into the run's cgroup '%s': %s",
                                (int)pid, cg->path, strerror(-r));
        return 0;
}

bool cgroup_run_populated(const struct cgroup_run *cg)
{
        uint64_t v = 0;

        return cg && cg->path[0] && read_key(cg->path, "cgroup.events", "populated", &v) && v;
}

void cgroup_run_kill(struct cgroup_run *cg)
{
        char file[700], pids[8192], *save = NULL;

        if (!cg || !cg->path[0])
                return;
        cg_strf(file, sizeof(file), "%s/cgroup.kill", cg->path);
        if (write_small(file, "1") == 0)
                return;
        cg_strf(file, sizeof(file), "%s/cgroup.procs", cg->path);
        if (read_small(file, pids, sizeof(pids)) <= 0)
                return;
        for (char *t = strtok_r(pids, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
                kill((pid_t)atoi(t), SIGKILL);
}

static bool read_key(const char *dir, const char *name, const char *key, uint64_t *ret)
{
        char file[700], data[2048] = "", *p;
        size_t klen = strlen(key);

        cg_strf(file, sizeof(file), "%s/%s", dir, name);
        if (read_small(file, data, sizeof(data)) < 0)
                return false;
        if (!key[0]) {
                *ret = strtoull(data, NULL, 10);
                return true;
        }
        for (p = data; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, key, klen) == 0 && strlen(p) > klen && p[klen] == ' ') {
                        *ret = strtoull(p + klen + 1, NULL, 10);
                        return true;
                }
        return false;
}

static void measure(struct run_measure *m, bool ok, uint64_t v, const char *why)
{
        m->measured = ok;
        m->value = ok ? v : 0;
        if (!ok)
                cg_strf(m->why, sizeof(m->why), "%s", why);
}

/* Why a *.peak file is missing: the controller is not enabled there at all (its .max file is
 * missing too), or the kernel predates the file. */
static const char *peak_why(const struct cgroup_run *cg, const char *max_file,
                            const char *no_controller, const char *too_old)
{
        char file[700];

        cg_strf(file, sizeof(file), "%s/%s", cg->path, max_file);
        return access(file, F_OK) < 0 ? no_controller : too_old;
}

bool cgroup_run_cpu_us(const struct cgroup_run *cg, uint64_t *ret)
{
        return cg && cg->path[0] && read_key(cg->path, "cpu.stat", "usage_usec", ret);
}

bool cgroup_run_read(const struct cgroup_run *cg, const struct sbx_config *cfg,
                     struct run_result *res)
{
        uint64_t v = 0, periods = 0, throttled = 0, pidmax = 0, oom = 0;
        size_t len;
        bool cpu, ok;

        if (!cg || !cg->path[0])
                return false;
        cpu = read_key(cg->path, "cpu.stat", "usage_usec", &v);
        if (!cpu)
                return false; /* gone already (a scope systemd collected): nothing to trust */
        measure(&res->usage.cpu_us, cpu, v, "cpu.stat not readable");
        ok = read_key(cg->path, "memory.peak", "", &v); /* read before v is passed on */
        measure(&res->usage.mem_peak_bytes, ok, v,
                peak_why(cg, "memory.max", "no memory controller in the run's cgroup",
                         "Linux 5.19+ needed"));
        ok = read_key(cg->path, "pids.peak", "", &v);
        measure(&res->usage.pids_peak, ok, v,
                peak_why(cg, "pids.max", "no pids controller in the run's cgroup",
                         "Linux 6.1+ needed"));
        res->limits_hit[0] = '\0';
        if (read_key(cg->path, "cpu.stat", "nr_periods", &periods) &&
            read_key(cg->path, "cpu.stat", "nr_throttled", &throttled) && throttled > 0)
                cg_strf(res->limits_hit, sizeof(res->limits_hit),
                        "cpu (throttled in %llu of %llu periods of 100 ms)",
                        (unsigned long long)throttled, (unsigned long long)periods);
        if (read_key(cg->path, "pids.events", "max", &pidmax) && pidmax > 0) {
                len = strlen(res->limits_hit);
                cg_strf(res->limits_hit + len, sizeof(res->limits_hit) - len,
                        "%spids (the cap of %u was reached)", len ? ", " : "", cfg->pids_max);
        }
        if (read_key(cg->path, "memory.events", "oom_kill", &oom) && oom > 0) {
                res->oom_killed = true;
                res->mem_limit_bytes = (uint64_t)cfg->mem_mb << 20;
        }
        return true;
}

void cgroup_run_remove(struct cgroup_run *cg)
{
        if (!cg)
                return;
        if (cg->dir_fd >= 0)
                close(cg->dir_fd);
        cg->dir_fd = -1;
        if (cg->delegated && cg->path[0]) {
                /* the kernel frees the cgroup once its last task is gone; retry briefly */
                for (int i = 0; i < 100 && rmdir(cg->path) < 0 && errno == EBUSY; i++)
                        nanosleep(&(struct timespec){.tv_nsec = 2000000L}, NULL);
        }
        cg->path[0] = '\0';
}
