/* backend.c - the native backend behind struct backend_ops: probe (what a run would get on
 * this host, and the fix when it would get nothing) and run (one sandbox per call, supervised
 * by the warden, with the seccomp reports and the cgroup's usage added to the result). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/apparmor.h"
#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "native/native.h"
#include "native/backend.h"
#include "run/backend.h"
#include "run/sandbox.h"
#include "run/warden.h"
#include "rootfs/hold.h"
#include "rootfs/tree.h"
#include "workspace/workspace.h"

struct native_state {
        struct native_filter filter;
        struct sbx_error filter_err; /* set when the profile would not compile */
        pthread_mutex_t lock;
        bool probed;
        struct backend_probe probe;
        bool ran;              /* at least one sandbox was set up: the facts below are real */
        int last_landlock_abi; /* applied in the last sandbox (0 = none) */
        bool last_hidepid;     /* /proc was mounted with hidepid=invisible */
        struct cgroup_limits_info limits;
        bool limits_forced;
        /* Set when a run could not have the cgroup the probe found (systemd refused the scope,
         * the delegated subtree failed): from then on this server's runs go without one, and
         * the grade names this reason, instead of every run answering Blocked. */
        char limits_broken[320];
        int landlock_abi;
        char kernel[65];
        bool shutting_down; /* shutdown(): no new sandbox */
        unsigned probe_gen; /* bumped whenever the cached probe is dropped (stamp.c) */

        /* The reaper: inits whose run is over (the program and every other process of the
         * run are gone, init was sent SIGKILL) are reaped, and their cgroups removed, here,
         * after the result is complete, so the namespaces' teardown is not in the result's
         * time. */
        pthread_t reaper;
        bool reaper_started, reaper_stop;
        pthread_cond_t reap_work, reap_idle;
        struct native_reap *reap_head;
        unsigned reap_pending; /* queued or being reaped */
};

struct native_reap {
        struct native_reap *next;
        pid_t pid;
        int pidfd; /* owned */
        bool has_cg;
        struct cgroup_run cg;
        struct native_notify *notify; /* the run's supervisor, stopped and joined here */
        int sync_fd; /* owned: init's sync socket, which @notify watches; closed only after
                      * @notify is joined (closed earlier, its number could be a new sandbox's
                      * sync socket by then, and this supervisor would read that one's READY) */
};

/* ---- probe ------------------------------------------------------------------------------ */

static bool kernel_at_least(int major, int minor)
{
        struct utsname u;
        int ma = 0, mi = 0;

        if (uname(&u) < 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
                return false;
        return ma > major || (ma == major && mi >= minor);
}

static int read_int(const char *path, long *ret)
{
        char buf[32];
        ssize_t n = sbx_read_small_file(AT_FDCWD, path, SBX_READ_PREFIX, buf, sizeof(buf));

        if (n < 0)
                return (int)n;
        if (n == 0)
                return -EIO;
        *ret = strtol(buf, NULL, 10);
        return 0;
}

/* Try the namespaces for real: a child in all of them that exits at once. */
static int try_userns(void)
{
        long pid =
            syscall(SYS_clone,
                    (unsigned long)(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET |
                                    CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP | SIGCHLD),
                    NULL, NULL, NULL, 0);
        int st;

        if (pid < 0)
                return -errno;
        if (pid == 0)
                _exit(0);
        while (waitpid((pid_t)pid, &st, 0) < 0 && errno == EINTR)
                ;
        return 0;
}

/* The Seccomp: mode of this process (0 none, 1 strict, 2 filter) and its Seccomp_filters:
 * count, from /proc/self/status (proc_pid_status(5)); -1 when unknown. */
static void seccomp_status(int *ret_mode, int *ret_filters)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
        char line[128];

        *ret_mode = *ret_filters = -1;
        while (f && fgets(line, sizeof(line), f)) {
                if (sscanf(line, "Seccomp: %d", ret_mode) == 1)
                        continue;
                if (sscanf(line, "Seccomp_filters: %d", ret_filters) == 1)
                        break;
        }
}

/* unshare(0) changes nothing and the kernel always allows it: an error means a seccomp
 * filter refuses unshare itself (Docker's and Podman's default profiles do, without
 * CAP_SYS_ADMIN). In a child, to touch nothing of ours. */
static int try_unshare_noop(void)
{
        long pid = syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, 0);
        int st = 0;

        if (pid < 0)
                return -errno;
        if (pid == 0)
                _exit(unshare(0) == 0 ? 0 : errno & 0x7f);
        while (waitpid((pid_t)pid, &st, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
}

/* Under Ubuntu's restriction a new user namespace may still be made, but without capabilities
 * in it unless this process's AppArmor profile grants `userns` (the kernel moves it into the
 * unprivileged_userns profile, which denies every capability). So: a child in new user and
 * mount namespaces makes its mounts private, which needs CAP_SYS_ADMIN there, as a sandbox's
 * set-up does. 0, or -errno of the clone or the mount. */
static int try_userns_caps(void)
{
        long pid = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD), NULL,
                           NULL, NULL, 0);
        int st = 0;

        if (pid < 0)
                return -errno;
        if (pid == 0)
                _exit(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 ? 0 : errno & 0x7f);
        while (waitpid((pid_t)pid, &st, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
}

/* kernel.apparmor_restrict_unprivileged_userns=1: usable only under a profile granting
 * `userns` (ours, packaging/apparmor/vestibule-mcp.in). The fix names that profile first,
 * then the machine-wide sysctl. */
static int apparmor_userns_check(char *why, size_t size)
{
        struct sbx_apparmor *a = xmalloc(sizeof(*a));
        char fix[PATH_MAX + 64];
        int r = 0;

        sbx_apparmor_read("", a);
        if (a->restrict_userns != 1)
                goto out;
        /* unconfined (or no label at all) is exactly what the restriction is about */
        if (!a->attached && (!a->label[0] || strcmp(a->label, "unconfined") == 0))
                r = -EPERM;
        else
                r = try_userns_caps();
        if (r < 0) {
                sbx_apparmor_fix(a, fix, sizeof(fix));
                native_strf(why, size,
                            "Ubuntu restricts unprivileged user namespaces "
                            "(kernel.apparmor_restrict_unprivileged_userns=1) and no AppArmor "
                            "profile grants them to %s (it runs as '%s'): load the profile %s, "
                            "which grants only that: %s; or lift the restriction for the whole "
                            "machine (sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0), "
                            "or use the container backend with Docker Engine; then restart the "
                            "server",
                            a->exe, a->label[0] ? a->label : "unconfined", a->file, fix);
                r = -EPERM;
        }
out:
        free(a);
        return r;
}

int native_userns_check(char *why, size_t size)
{
        long max = -1;
        int r, mode, filters;

        if (apparmor_userns_check(why, size) < 0)
                return -EPERM;
        if (read_int("/proc/sys/user/max_user_namespaces", &max) == 0 && max == 0) {
                native_strf(why, size,
                            "user namespaces are disabled (user.max_user_namespaces=0): sudo "
                            "sysctl user.max_user_namespaces=15000, then restart the server");
                return -EPERM;
        }
        r = try_userns();
        if (r == 0)
                return 0;
        seccomp_status(&mode, &filters);
        if (r == -EPERM && mode == 2 && try_unshare_noop() == -EPERM) {
                native_strf(why, size,
                            "a seccomp filter on the server itself refuses creating namespaces "
                            "(Seccomp: 2, %d filter%s, in /proc/self/status; unshare(0), a no-op, "
                            "fails with EPERM), as a container's default profile does; the "
                            "sysctls allow them (user.max_user_namespaces=%ld). Run vestibule-mcp "
                            "outside the container, or start it with --security-opt "
                            "seccomp=unconfined, or use VESTIBULE_BACKEND=container; then restart "
                            "the server",
                            filters, filters == 1 ? "" : "s", max);
                return r;
        }
        if (r == -ENOSPC) {
                native_strf(why, size,
                            "cannot create unprivileged user namespaces: %s; this user's "
                            "user.max_user_namespaces (%ld) are all in use: raise it (sudo "
                            "sysctl user.max_user_namespaces=15000) or end other sandboxes; then "
                            "restart the server",
                            strerror(-r), max);
                return r;
        }
        native_strf(why, size,
                    "cannot create unprivileged user namespaces: %s; check "
                    "kernel.unprivileged_userns_clone=1 and user.max_user_namespaces%s, or use "
                    "VESTIBULE_BACKEND=container; then restart the server",
                    strerror(-r),
                    mode == 2 ? " (this server also runs under a seccomp filter, Seccomp: 2 in "
                                "/proc/self/status, which may refuse it)"
                              : "");
        return r;
}

static const char *interpreter_of(enum sbx_language l)
{
        switch (l) {
        case SBX_LANG_NODE:
                return "node";
        case SBX_LANG_BASH:
                return "bash";
        case SBX_LANG_PYTHON:
        default:
                return "python3";
        }
}

static const char *rootfs_name(enum sbx_language l)
{
        return l == SBX_LANG_NODE ? "node" : "python";
}

bool native_grade_limits(const struct cgroup_limits_info *li, char *grade, size_t size)
{
        bool nproc_ok = kernel_at_least(5, 14);

        if (li->path != CGROUP_LIMITS_NONE && !li->missing[0]) {
                native_strf(grade, size, "native");
                return false;
        }
        if (li->path != CGROUP_LIMITS_NONE) {
                native_strf(grade, size,
                            "native-degraded (limits not applied: %s: the controllers are not "
                            "delegated to this user's cgroup)",
                            li->missing);
                return true;
        }
        /* No cgroup of our own: RLIMIT_NPROC still caps the run's processes (it counts per
         * user in the run's own user namespace since 5.14); memory and cpu have no honest
         * rlimit equivalent (RLIMIT_AS is per process and breaks V8; RLIMIT_CPU is not a
         * quota). */
        native_strf(grade, size, "native-degraded (limits not applied: memory, cpu%s: %s)",
                    nproc_ok ? "" : ", pids", li->why_none);
        return true;
}

static void grade_from_limits(struct native_state *s, const struct sbx_config *cfg,
                              struct backend_probe *p)
{
        (void)cfg;
        p->degraded = native_grade_limits(&s->limits, p->grade, sizeof(p->grade));
}

/* RLIMIT_NPROC for a run. fork() checks it before the pids controller, so with the same
 * number the rlimit would refuse first: pids.events would stay 0 and the result could not say
 * "limits hit: pids". Where a cgroup caps pids, the cgroup is the cap and the rlimit a
 * backstop a few tasks above it; elsewhere the rlimit is the cap. */
static unsigned nproc_limit(const struct cgroup_limits_info *li, unsigned pids_max)
{
        if (pids_max == 0 || li->path == CGROUP_LIMITS_NONE || strstr(li->missing, "pids"))
                return pids_max;
        return pids_max + 4;
}

static void probe_details(struct native_state *s, struct backend_probe *p)
{
        static const char *const paths[] = {
            [CGROUP_LIMITS_NONE] = "none of its own (rlimits only; RLIMIT_NPROC caps processes)",
            [CGROUP_LIMITS_SCOPE] = "a transient systemd scope per run (user bus)",
            [CGROUP_LIMITS_DELEGATED] = "a child of the server's delegated cgroup v2 subtree",
        };
        char landlock[96];

        if (s->landlock_abi > 0)
                native_strf(landlock, sizeof(landlock),
                            "ABI %d (writes only beneath /workspace, /tmp, /dev/shm)",
                            s->landlock_abi);
        else
                native_strf(landlock, sizeof(landlock), "not available in this kernel");
        native_strf(p->details, sizeof(p->details),
                    "kernel: %s\nuser namespaces: usable\nseccomp: allowlist compiled, "
                    "dangerous calls reported via user notification\nlandlock: %s\n"
                    "cgroup per run: %s",
                    s->kernel, landlock, paths[s->limits.path]);
}

/* What the last sandbox actually applied (the probe itself only knows what is available). */
static void append_last_run(struct native_state *s, struct backend_probe *p)
{
        size_t len = strlen(p->details);

        if (!s->ran || !p->usable)
                return;
        native_strf(p->details + len, sizeof(p->details) - len, "\nlast run: Landlock %s, /proc %s",
                    s->last_landlock_abi > 0 ? "applied" : "NOT applied",
                    s->last_hidepid ? "hidepid=invisible" : "without hidepid");
}

static int native_probe(struct backend *b, struct backend_probe *ret, struct sbx_error *err)
{
        struct native_state *s = b->state;
        const struct sbx_config *cfg = b->cfg;
        struct backend_probe p = {0};
        struct sbx_error e = {0};
        _cleanup_free_ char *py = NULL, *node = NULL;

        (void)err;
        pthread_mutex_lock(&s->lock);
        if (s->probed) {
                *ret = s->probe;
                append_last_run(s, ret);
                pthread_mutex_unlock(&s->lock);
                return 0;
        }

        if (geteuid() == 0 && !cfg->run_as_set) {
                native_strf(p.blocked, sizeof(p.blocked),
                            "the server runs as root, so code would run as root: run vestibule-mcp "
                            "as your own user (or set VESTIBULE_RUN_AS=uid:gid to a non-root "
                            "user), then restart it");
                goto done;
        }
        if (geteuid() == 0 && (cfg->run_as_uid == 0 || cfg->run_as_gid == 0)) {
                native_strf(p.blocked, sizeof(p.blocked),
                            "VESTIBULE_RUN_AS names root (uid or gid 0): set it to an unprivileged "
                            "user, then restart the server");
                goto done;
        }
        if (!kernel_at_least(5, 9)) {
                native_strf(p.blocked, sizeof(p.blocked),
                            "native isolation needs Linux 5.9 or later (close_range): upgrade the "
                            "kernel and reboot, or use the container backend "
                            "(VESTIBULE_BACKEND=container, then restart the server)");
                goto done;
        }
        if (native_userns_check(p.blocked, sizeof(p.blocked)) < 0)
                goto done;
        if (s->filter_err.code) {
                native_strf(p.blocked, sizeof(p.blocked),
                            "the seccomp profile cannot be built with this libseccomp: %s; install "
                            "libseccomp2 2.5 or later, then restart the server",
                            s->filter_err.msg);
                goto done;
        }
        py = xasprintf("%s/python", cfg->rootfs_dir);
        node = xasprintf("%s/node", cfg->rootfs_dir);
        if (rootfs_check_tree(py, "python3", &e) < 0 || rootfs_check_tree(py, "bash", &e) < 0 ||
            rootfs_check_tree(node, "node", &e) < 0) {
                native_strf(p.blocked, sizeof(p.blocked), "%s", e.msg);
                goto done;
        }
        s->landlock_abi = native_landlock_abi();
        {
                struct utsname u;
                native_strf(s->kernel, sizeof(s->kernel), "%s",
                            uname(&u) == 0 ? u.release : "unknown");
        }
        if (!s->limits_forced)
                cgroup_limits_detect(cfg, &s->limits);
        if (s->limits_broken[0]) {
                s->limits.path = CGROUP_LIMITS_NONE;
                s->limits.missing[0] = '\0';
                native_strf(s->limits.why_none, sizeof(s->limits.why_none), "%s", s->limits_broken);
        }
        grade_from_limits(s, cfg, &p);
        probe_details(s, &p);
        p.usable = true;
done:
        s->probe = p;
        /* a usable probe is cached; a blocked one is tried again next time (setup may run) */
        s->probed = p.usable;
        *ret = p;
        pthread_mutex_unlock(&s->lock);
        return 0;
}

/* ---- run -------------------------------------------------------------------------------- */

struct run_ctx {
        int pidfd;
        uint64_t pidns_ino;
        bool count_tasks;      /* no pids controller: RLIMIT_NPROC is the cap, counted by hand */
        int tasks_seen;        /* most tasks of the run counted before a kill, -1 = none */
        bool program_ended;    /* init reported the program's end */
        bool killed;           /* kill_tree ran: a later spawned init is killed at once */
        struct cgroup_run *cg; /* NULL: no cgroup of its own */
        const struct sbx_config *cfg;
        pthread_mutex_t lock;
        bool read_done; /* the cgroup was read (or tried) once */
        bool read_ok;
        uint64_t read_us;        /* how long that read took, for the timing trace */
        struct run_result usage; /* scratch: usage, limits_hit, oom_killed from the cgroup */
};

/* Read the run's cgroup once: when init reports the program's end (everything else is dead,
 * init keeps the cgroup populated), or just before a kill on timeout/cancel/flood, since a
 * scope's cgroup may vanish as soon as it empties. */
static void read_usage_once(void *userdata)
{
        struct run_ctx *c = userdata;

        pthread_mutex_lock(&c->lock);
        if (c->cg && !c->read_done) {
                uint64_t t0 = sbx_trace_now_us();
                c->read_ok = cgroup_run_read(c->cg, c->cfg, &c->usage);
                c->read_done = true;
                c->read_us = sbx_trace_now_us() - t0;
        }
        pthread_mutex_unlock(&c->lock);
}

static void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

/* The tasks (threads included) in the pid namespace @pidns_ino (init's report), counted from
 * the host's /proc, init included; -1 when unknown. Only on hosts without a pids controller
 * of the run's own, just before a kill: there RLIMIT_NPROC is the cap, and its hits are seen
 * nowhere else (fork fails with EAGAIN inside). init is not dumpable, so its own ns link is
 * unreadable here: it is the one task added by hand. */
static int count_ns_tasks(uint64_t pidns_ino)
{
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *e;
        struct stat st;
        char path[64];
        int n = 1;

        if (pidns_ino == 0)
                return -1;
        d = opendir("/proc");
        if (!d)
                return -1;
        while ((e = readdir(d))) {
                char line[128];
                if (e->d_name[0] < '1' || e->d_name[0] > '9')
                        continue;
                native_strf(path, sizeof(path), "/proc/%s/ns/pid", e->d_name);
                if (stat(path, &st) < 0 || st.st_ino != pidns_ino)
                        continue;
                native_strf(path, sizeof(path), "/proc/%s/status", e->d_name);
                _cleanup_fclose_ FILE *f = fopen(path, "re");
                int threads = 1;
                while (f && fgets(line, sizeof(line), f))
                        if (sscanf(line, "Threads: %d", &threads) == 1)
                                break;
                n += threads > 0 ? threads : 1;
        }
        return n;
}

/* init reported the program's end: every other task of the run is gone (init counted them
 * before its final kill), and the cgroup is read now, while init keeps it alive. */
static void on_program_end(void *userdata)
{
        struct run_ctx *c = userdata;

        pthread_mutex_lock(&c->lock);
        c->program_ended = true;
        pthread_mutex_unlock(&c->lock);
        read_usage_once(c);
}

static void kill_tree(void *userdata)
{
        struct run_ctx *c = userdata;
        bool ended, count;

        read_usage_once(c);
        pthread_mutex_lock(&c->lock);
        ended = c->program_ended;
        count = c->count_tasks && !ended && c->pidfd >= 0;
        c->killed = true;
        pthread_mutex_unlock(&c->lock);
        /* a kill before the program's end (timeout, cancel, flood): count what is killed; after
         * it, init's own count stands and the host's /proc is not scanned */
        if (count) {
                int n = count_ns_tasks(c->pidns_ino);
                pthread_mutex_lock(&c->lock);
                if (n > c->tasks_seen)
                        c->tasks_seen = n;
                pthread_mutex_unlock(&c->lock);
        }
        /* init's death makes the kernel kill every process of its pid namespace; under the
         * lock, so the pidfd is not closed under us (kill() comes from any thread) */
        pthread_mutex_lock(&c->lock);
        if (c->pidfd >= 0)
                syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
        pthread_mutex_unlock(&c->lock);
        cgroup_run_kill(c->cg);
}

struct scope_ud {
        const struct sbx_config *cfg;
        struct cgroup_run *cg;
        bool failed; /* the scope could not be had (the child never ran anything) */
};

static int scope_place(void *ud, pid_t pid, struct sbx_error *err)
{
        struct scope_ud *u = ud;
        int r = cgroup_scope_start(u->cfg, pid, u->cg, err);

        u->failed = r < 0;
        return r;
}

/* The run's cgroup could not be had, before any of its code ran: remember why, so the next
 * probe grades without it (native-degraded naming @err's reason, or whatever the ladder
 * prefers to that), and ask the service to pick again (-ESTALE: the probe is stale). */
static int limits_broke(struct native_state *s, struct sbx_error *err)
{
        pthread_mutex_lock(&s->lock);
        native_strf(s->limits_broken, sizeof(s->limits_broken), "%s", err->msg);
        s->probed = false;
        s->probe_gen++; /* spares built under the old answer are refused */
        pthread_mutex_unlock(&s->lock);
        log_debug("native: no cgroup for this run (%s); runs go without one from now on", err->msg);
        err->code = ESTALE;
        return -ESTALE;
}

static void not_measured(struct run_measure *m, const char *why)
{
        m->measured = false;
        native_strf(m->why, sizeof(m->why), "%s", why);
}

/* Reap one finished init and remove its cgroup. init was sent SIGKILL (kill_tree) and has
 * nothing left to wait for; the kill is repeated should it still run after 500 ms. */
static void reap_one(struct native_reap *it)
{
        struct pollfd p = {.fd = it->pidfd, .events = POLLIN};
        int r;

        do
                r = poll(&p, 1, 500);
        while (r < 0 && errno == EINTR);
        if (r == 0)
                syscall(SYS_pidfd_send_signal, it->pidfd, SIGKILL, NULL, 0);
        while (waitpid(it->pid, NULL, __WALL) < 0 && errno == EINTR)
                ;
        if (it->notify) {
                native_notify_finish(it->notify, NULL);
                free(it->notify);
        }
        if (it->sync_fd >= 0)
                close(it->sync_fd);
        if (it->has_cg)
                cgroup_run_remove(&it->cg);
        close(it->pidfd);
}

static void *reaper_main(void *arg)
{
        struct native_state *s = arg;

        pthread_mutex_lock(&s->lock);
        for (;;) {
                while (!s->reap_head && !s->reaper_stop)
                        pthread_cond_wait(&s->reap_work, &s->lock);
                if (!s->reap_head)
                        break;
                struct native_reap *it = s->reap_head;
                s->reap_head = it->next;
                pthread_mutex_unlock(&s->lock);
                reap_one(it);
                free(it);
                pthread_mutex_lock(&s->lock);
                s->reap_pending--;
                pthread_cond_broadcast(&s->reap_idle);
        }
        pthread_mutex_unlock(&s->lock);
        return NULL;
}

/* Hand @it to the reaper thread (started on first use, taking no signals); reap it here when
 * the thread cannot start. */
static void reap_later(struct native_state *s, struct native_reap *it)
{
        pthread_mutex_lock(&s->lock);
        if (!s->reaper_started && !s->reaper_stop) {
                pthread_attr_t attr;
                sigset_t all, old;
                int r;

                sigfillset(&all);
                pthread_sigmask(SIG_SETMASK, &all, &old);
                pthread_attr_init(&attr);
                pthread_attr_setstacksize(&attr, (size_t)128 * 1024);
                r = pthread_create(&s->reaper, &attr, reaper_main, s);
                pthread_attr_destroy(&attr);
                pthread_sigmask(SIG_SETMASK, &old, NULL);
                s->reaper_started = r == 0;
        }
        if (!s->reaper_started) {
                pthread_mutex_unlock(&s->lock);
                reap_one(it);
                free(it);
                return;
        }
        it->next = NULL;
        struct native_reap **tail = &s->reap_head;
        while (*tail)
                tail = &(*tail)->next;
        *tail = it;
        s->reap_pending++;
        pthread_cond_signal(&s->reap_work);
        pthread_mutex_unlock(&s->lock);
}

void native_backend_settle(struct backend *b)
{
        struct native_state *s = b->state;

        pthread_mutex_lock(&s->lock);
        while (s->reap_pending > 0)
                pthread_cond_wait(&s->reap_idle, &s->lock);
        pthread_mutex_unlock(&s->lock);
}

/* One native sandbox (the ops' struct sandbox): what prepare made, then the init start()
 * spawned and what its supervisor learnt. */
struct native_box {
        struct backend *b;
        struct native_state *s;
        const struct sbx_config *cfg;
        enum sbx_language language;
        char grade[320]; /* the probe's, for the result */
        char *rootfs;
        enum run_network network;      /* the spec's: RUN_NETWORK_ALLOWLIST = an egress listener */
        struct egress_session *egress; /* the run's proxy, from start to collect (or destroy) */
        /* setup must not delete this tree while the run has it as / (rootfs/hold.h) */
        struct setup_rootfs_hold hold;
        struct cgroup_run cg;
        struct scope_ud sud;
        struct run_ctx ctx;       /* kill_tree's, shared with the supervisor thread */
        struct native_sandbox sb; /* from native_spawn: init, its pipes and sync socket */
        struct native_notify *notify;
        bool spare;                /* prepared ahead (a warm spare): checked again at start() */
        bool handed;               /* start() handed it a program: it never takes another */
        struct native_stamp stamp; /* what a spare was built from (stamp.c) */
        uint64_t cpu_before_us;    /* a spare's cgroup CPU at the hand-over (its start-up) */
        bool started;              /* init was spawned */
        bool reaped;               /* init was reaped (or never spawned) */
        bool collected; /* the supervisor was stopped and joined (native_notify_finish) */
        struct sbx_trace trace;
};

/* prepare, part 1: may this backend run now, and on which tree? */
static int box_check(struct native_box *x, struct sbx_error *err)
{
        struct native_state *s = x->s;
        struct backend_probe probe;
        int r;

        r = native_probe(x->b, &probe, err);
        if (r < 0)
                return r;
        if (!probe.usable)
                return sbx_fail(err, EPERM, "%s", probe.blocked);
        native_strf(x->grade, sizeof(x->grade), "%s", probe.grade);
        x->rootfs = xasprintf("%s/%s", x->cfg->rootfs_dir, rootfs_name(x->language));
        r = rootfs_check_tree(x->rootfs, interpreter_of(x->language), err);
        if (r < 0) {
                /* the rootfs went away since the probe: the next probe must look again */
                pthread_mutex_lock(&s->lock);
                s->probed = false;
                s->probe_gen++; /* spares built under the old answer are refused */
                pthread_mutex_unlock(&s->lock);
                return r;
        }
        return 0;
}

/* prepare, part 2: the workspace, owned by the user the code runs as. */
static int box_workspace(struct native_box *x, struct sbx_error *err)
{
        const struct sbx_config *cfg = x->cfg;
        struct stat st;
        int r;

        r = workspace_ensure(cfg->workspace_dir, err);
        if (r < 0 || geteuid() != 0)
                return r;
        /* the code runs as VESTIBULE_RUN_AS: hand it the workspace folder itself */
        if (stat(cfg->workspace_dir, &st) == 0 && st.st_uid == 0 &&
            chown(cfg->workspace_dir, cfg->run_as_uid, cfg->run_as_gid) < 0)
                return sbx_fail(err, errno, "cannot give the workspace '%s' to uid %u: %m",
                                cfg->workspace_dir, (unsigned)cfg->run_as_uid);
        return 0;
}

/* prepare, part 3: the run's cgroup (delegated: made now; scope: at clone) and the hold. */
static int box_limits_and_hold(struct native_box *x, struct sbx_error *err)
{
        struct native_state *s = x->s;
        int r;

        /* Without a pids controller of the run's own, RLIMIT_NPROC is the cap: count the
         * run's tasks when it ends (init) or is killed (kill_tree), to say whether it was
         * reached. */
        x->ctx.count_tasks = x->cfg->pids_max > 0 && (s->limits.path == CGROUP_LIMITS_NONE ||
                                                      strstr(s->limits.missing, "pids") != NULL);
        sbx_trace_lap(&x->trace, "prepare");
        if (s->limits.path == CGROUP_LIMITS_DELEGATED) {
                r = cgroup_run_create(&s->limits, x->cfg, &x->cg, err);
                if (r < 0)
                        return limits_broke(s, err);
                x->ctx.cg = &x->cg;
                sbx_trace_lap(&x->trace, "cgroup_create");
        } else if (s->limits.path == CGROUP_LIMITS_SCOPE) {
                x->ctx.cg = &x->cg;
        }
        return setup_rootfs_hold(x->cfg->rootfs_dir, rootfs_name(x->language), &x->hold, err);
}

static void box_free(struct native_box *x);
static int box_launch(struct native_box *x, struct sbx_error *err);

static void box_freep(struct native_box **x)
{
        if (*x)
                box_free(*x);
}

static int native_prepare(struct backend *b, const struct sandbox_spec *spec, struct sandbox **ret,
                          struct sbx_error *err)
{
        struct native_state *s = b->state;
        _cleanup_(box_freep) struct native_box *x = NULL;
        bool down;
        int r;

        if (spec->mode != SANDBOX_MODE_ONE_SHOT)
                return sbx_fail(err, EOPNOTSUPP, "native sandboxes run one program each");
        pthread_mutex_lock(&s->lock);
        down = s->shutting_down;
        pthread_mutex_unlock(&s->lock);
        if (down)
                return sbx_fail(err, ESHUTDOWN, "the server is shutting down: retry after restart");
        x = xcalloc(1, sizeof(*x));
        x->b = b;
        x->s = s;
        x->cfg = spec->cfg ? spec->cfg : b->cfg;
        x->language = spec->language;
        x->network = spec->network;
        x->cg.dir_fd = -1;
        x->sud = (struct scope_ud){.cfg = x->cfg, .cg = &x->cg};
        x->ctx = (struct run_ctx){.pidfd = -1, .cfg = x->cfg, .tasks_seen = -1};
        pthread_mutex_init(&x->ctx.lock, NULL);
        x->sb = NATIVE_SANDBOX_NONE;
        x->reaped = true; /* nothing to reap until start */
        x->spare = spec->spare;
        sbx_trace_begin(&x->trace, x->cfg->trace_timing, x->spare ? "native-spare" : "native");
        r = box_check(x, err);
        if (r == 0)
                r = box_workspace(x, err);
        if (r == 0)
                r = box_limits_and_hold(x, err);
        if (r == 0 && x->spare) {
                unsigned gen;
                pthread_mutex_lock(&s->lock);
                gen = s->probe_gen;
                pthread_mutex_unlock(&s->lock);
                r = native_stamp_take(x->cfg, x->hold.tree_fd, x->grade, gen, &x->stamp, err);
        }
        if (r == 0)
                r = box_launch(x, err);
        if (r < 0)
                return r;
        *ret = (struct sandbox *)TAKE_PTR(x);
        return 0;
}

/* prepare, part 4: clone into the namespaces (spawn.c's ordered list), the interpreter
 * started and waiting for its program (python, node) or the program's exec waiting for it
 * (bash). */
static int box_spawn(struct native_box *x, struct sbx_error *err)
{
        struct native_state *s = x->s;
        const struct sbx_config *cfg = x->cfg;
        bool host_root = geteuid() == 0;
        struct native_userns_limit quotas[NATIVE_USERNS_LIMITS];
        const char *argv[3] = {interpreter_of(x->language), NULL, NULL};
        char script[64];
        int r;

        native_strf(script, sizeof(script), "/sandbox/%s", sbx_language_script(x->language));
        argv[1] = script;
        /* The environment: the fixed one with pip's persistence, and with the proxy variables
         * when the sandbox is for the allowlist (egress_sandbox_env). */
        const char *envp[32];
        size_t n_env = 0;
        for (const char *const *e = egress_base_env; *e && n_env < 16; e++)
                envp[n_env++] = strncmp(*e, "PATH=", 5) == 0 ? EGRESS_SANDBOX_PATH : *e;
        for (const char *const *e = egress_sandbox_env(x->network); *e && n_env < 31; e++)
                envp[n_env++] = *e;
        envp[n_env] = NULL;
        struct native_spawn sp = {
            .rootfs = x->rootfs,
            .workspace = cfg->workspace_dir,
            .workspace_ro = cfg->workspace_ro,
            .tmpfs_mb = cfg->tmpfs_mb,
            .pids_max = nproc_limit(&s->limits, cfg->pids_max),
            .userns_limits = quotas,
            .n_userns_limits = native_userns_limits(cfg->max_concurrent, quotas),
            .code_max = cfg->max_code_bytes,
            .fifo = x->language != SBX_LANG_BASH,
            .script = sbx_language_script(x->language),
            .argv = argv,
            .filter = &s->filter,
            .host_uid = host_root ? cfg->run_as_uid : getuid(),
            .host_gid = host_root ? cfg->run_as_gid : getgid(),
            .host_root = host_root,
            .cgroup_fd = s->limits.path == CGROUP_LIMITS_DELEGATED ? x->cg.dir_fd : -1,
            .count_tasks = x->ctx.count_tasks,
            .trace = &x->trace,
            .envp = envp,
            .egress = x->network == RUN_NETWORK_ALLOWLIST,
        };
        if (s->limits.path == CGROUP_LIMITS_SCOPE) {
                sp.after_clone = scope_place;
                sp.after_clone_ud = &x->sud;
        }
        r = native_spawn(&sp, &x->sb, err);
        setup_rootfs_settled(&x->hold); /* mounted (or failed): setup may swap again */
        if (r < 0)
                return x->sud.failed ? limits_broke(s, err) : r;
        pthread_mutex_lock(&s->lock);
        s->ran = true;
        s->last_landlock_abi = x->sb.info.landlock_abi;
        s->last_hidepid = x->sb.info.proc_hidepid;
        pthread_mutex_unlock(&s->lock);
        return 0;
}

/* prepare, part 5: init's supervisor (the seccomp listener, init's reports) runs from now on,
 * also while the sandbox waits as a spare. */
static int box_launch(struct native_box *x, struct sbx_error *err)
{
        bool killed;
        int r;

        r = box_spawn(x, err);
        if (r < 0)
                return r;
        x->started = true;
        x->reaped = false;
        pthread_mutex_lock(&x->ctx.lock);
        x->ctx.pidns_ino = x->sb.info.pidns_ino;
        x->ctx.pidfd = fcntl(x->sb.pidfd, F_DUPFD_CLOEXEC, 3);
        killed = x->ctx.killed;
        pthread_mutex_unlock(&x->ctx.lock);
        if (killed)
                kill_tree(&x->ctx); /* kill() came while init was being spawned */
        x->notify = xcalloc(1, sizeof(*x->notify));
        r = native_notify_start(x->notify, x->sb.listener_fd, x->sb.sync_fd, on_program_end,
                                &x->ctx, err);
        if (r < 0) {
                /* without the supervisor nobody answers the filter or releases init: stop */
                kill_tree(&x->ctx);
                while (waitpid(x->sb.pid, NULL, __WALL) < 0 && errno == EINTR)
                        ;
                x->reaped = true;
                return r;
        }
        sbx_trace_lap(&x->trace, "notify_start");
        return 0;
}

/* start, part 1: a spare is used only if everything it was built from is still so now. */
static int box_still_fresh(struct native_box *x, struct sbx_error *err)
{
        struct backend_probe probe;
        unsigned gen;
        int r;

        r = native_probe(x->b, &probe, err);
        if (r < 0)
                return r;
        if (!probe.usable)
                return sbx_fail(err, ESTALE, "%s", probe.blocked);
        pthread_mutex_lock(&x->s->lock);
        gen = x->s->probe_gen;
        pthread_mutex_unlock(&x->s->lock);
        return native_stamp_check(&x->stamp, x->cfg, x->rootfs, probe.grade, gen, err);
}

static int native_start(struct sandbox *sandbox, const struct run_request *req,
                        struct sandbox_io *ret_io, struct sbx_error *err)
{
        struct native_box *x = (struct native_box *)sandbox;
        int r;

        if (x->handed)
                return sbx_fail(err, EALREADY,
                                "this sandbox ran a program already; a sandbox runs one program "
                                "and is never handed a second");
        if (!x->started || req->language != x->language)
                return sbx_fail(err, EINVAL, "native sandbox: start() out of order");
        /* Fail closed: the network is the sandbox's (its listener was made at spawn, in
         * prepare), never another than the call asked for: a spare (network "none") never
         * serves an allowlist call, nor an allowlist sandbox a call without network. */
        if (req->network != x->network)
                return sbx_fail(err, EINVAL,
                                "native sandbox: prepared for network \"%s\", the call asks for "
                                "\"%s\"",
                                x->network == RUN_NETWORK_ALLOWLIST ? "allowlist" : "none",
                                req->network == RUN_NETWORK_ALLOWLIST ? "allowlist" : "none");
        x->handed = true;
        if (x->spare) {
                /* the request path's trace starts here; the spare's setup was traced apart */
                sbx_trace_end(&x->trace);
                sbx_trace_begin(&x->trace, x->cfg->trace_timing, "native");
                r = box_still_fresh(x, err);
                if (r < 0)
                        return r;
                sbx_trace_lap(&x->trace, "spare_check");
                /* the run's CPU counts from the hand-over: the interpreter's start-up is not its */
                if (!cgroup_run_cpu_us(x->ctx.cg, &x->cpu_before_us))
                        x->cpu_before_us = 0;
        }
        if (x->network == RUN_NETWORK_ALLOWLIST) {
                /* Fail closed: without its proxy the program is never handed its code (destroy
                 * kills init). Started here, in the call's thread, which also finishes it
                 * (egress_session_start()); the program's connections wait in the listener's
                 * backlog until the proxy accepts. */
                r = egress_session_start(x->cfg, TAKE_FD(x->sb.egress_fd), &x->egress, err);
                if (r < 0) {
                        sbx_wrap(err, "network \"allowlist\" refused");
                        return r;
                }
                sbx_trace_lap(&x->trace, "egress_start");
        }
        r = native_handover(&x->sb, req->code, req->code_len, x->notify->ended_fd,
                            sbx_now_ms() + (uint64_t)req->timeout_s * 1000, err);
        if (r < 0)
                return r;
        sbx_trace_lap(&x->trace, "handover");
        *ret_io = (struct sandbox_io){
            .out_fd = x->sb.out_fd,
            .err_fd = x->sb.err_fd,
            .pid = x->sb.pid,
            .pidfd = x->sb.pidfd,
            .ended_fd = x->notify->ended_fd,
        };
        return 0;
}

static void native_kill(struct sandbox *sandbox)
{
        kill_tree(&((struct native_box *)sandbox)->ctx);
}

/* collect, part 1: init's own end. When it exited by itself (or was killed), reap it now and
 * stop the supervisor, whose list is then final; when the warden returned on init's report
 * of the program's end (@w->by_ended_fd), init dies on the kill and is reaped by destroy()'s
 * reaper, after the result. Return init's wait status (0 when not reaped here). */
static int box_reap_init(struct native_box *x, const struct sandbox_watch *w,
                         struct run_result *res)
{
        int status = 0;

        kill_tree(&x->ctx); /* idempotent; the namespace is already gone once init is reaped */
        if (!w->by_ended_fd) {
                while (waitpid(x->sb.pid, &status, __WALL) < 0 && errno == EINTR)
                        ;
                x->reaped = true;
        }
        if (x->trace.on) {
                /* program: exec, the interpreter, init's reaping of the rest (and the cgroup
                 * read); teardown: init's exit, the namespaces' teardown, the warden's end */
                uint64_t now = sbx_trace_now_us(), at;
                pthread_mutex_lock(&x->notify->lock);
                at = x->notify->have_status ? x->notify->status_us : now;
                pthread_mutex_unlock(&x->notify->lock);
                if (at < x->trace.last_us || at > now)
                        at = now;
                sbx_trace_span(&x->trace, "program", at - x->trace.last_us);
                sbx_trace_span(&x->trace, "teardown_reap", now - at);
                x->trace.last_us = now;
        }
        if (x->reaped) {
                native_notify_finish(x->notify, res);
                x->collected = true;
        } else {
                /* Every process of the run is gone but init, which is filtered too and makes
                 * no reported call: the list is final. */
                pthread_mutex_lock(&x->notify->lock);
                native_strf(res->blocked_syscalls, sizeof(res->blocked_syscalls), "%s",
                            x->notify->names);
                res->blocked_syscalls_unlisted = x->notify->unlisted;
                res->blocked_reporting_stopped = x->notify->stopped_reporting;
                pthread_mutex_unlock(&x->notify->lock);
        }
        return status;
}

/* collect, part 2: usage and limits from the run's cgroup (or why not). */
static void box_usage(struct native_box *x, struct run_result *res, int tasks_at_end)
{
        struct run_ctx *ctx = &x->ctx;
        const char *why = "no cgroup of its own on this host";

        if (ctx->cg) {
                read_usage_once(ctx); /* a delegated cgroup is still ours to read */
                why = "the run's cgroup was gone before it could be read";
        }
        if (ctx->cg && ctx->read_ok) {
                res->usage.cpu_us = ctx->usage.usage.cpu_us;
                if (res->usage.cpu_us.measured)
                        res->usage.cpu_us.value = res->usage.cpu_us.value > x->cpu_before_us
                                                      ? res->usage.cpu_us.value - x->cpu_before_us
                                                      : 0;
                res->usage.mem_peak_bytes = ctx->usage.usage.mem_peak_bytes;
                res->usage.pids_peak = ctx->usage.usage.pids_peak;
                memcpy(res->limits_hit, ctx->usage.limits_hit, sizeof(res->limits_hit));
                res->oom_killed = ctx->usage.oom_killed;
                res->mem_limit_bytes = ctx->usage.mem_limit_bytes;
        } else {
                not_measured(&res->usage.cpu_us, why);
                not_measured(&res->usage.mem_peak_bytes, why);
                not_measured(&res->usage.pids_peak, why);
        }
        if (ctx->count_tasks) {
                /* fork() refuses the task over RLIMIT_NPROC: a count at the cap means the
                 * cap was reached (a bomb that shrank again before the end goes unseen:
                 * pids_peak says not measured) */
                int most = ctx->tasks_seen > tasks_at_end ? ctx->tasks_seen : tasks_at_end;
                size_t len = strlen(res->limits_hit);
                if (most >= (int)x->cfg->pids_max && !strstr(res->limits_hit, "pids"))
                        native_strf(res->limits_hit + len, sizeof(res->limits_hit) - len,
                                    "%spids (the cap of %u was reached)", len ? ", " : "",
                                    x->cfg->pids_max);
        }
        if (ctx->read_done)
                sbx_trace_span(&x->trace, "cgroup_read", ctx->read_us);
}

static int native_collect(struct sandbox *sandbox, const struct sandbox_watch *w,
                          struct run_result *res, struct sbx_error *err)
{
        struct native_box *x = (struct native_box *)sandbox;
        int init_status = box_reap_init(x, w, res);
        bool have_status, exec_failed;
        int status, tasks_at_end;

        /* the run's processes are gone: the verdicts are final */
        egress_session_finish(TAKE_PTR(x->egress), &res->egress);

        pthread_mutex_lock(&x->notify->lock);
        have_status = x->notify->have_status;
        status = x->notify->status;
        tasks_at_end = x->notify->tasks_at_end;
        exec_failed = x->notify->exec_failed;
        if (exec_failed)
                *err = x->notify->exec_err;
        pthread_mutex_unlock(&x->notify->lock);

        native_strf(res->backend, sizeof(res->backend), "native");
        native_strf(res->image, sizeof(res->image), "%s", x->rootfs);
        native_strf(res->isolation, sizeof(res->isolation), "%s", x->grade);
        if (w->forced == RUN_OUTCOME_NONE) {
                /* init's own status, then the program's, as init saw it (init exits 128+N
                 * for a signal) */
                res->outcome = WIFSIGNALED(init_status) ? RUN_OUTCOME_SIGNALED : RUN_OUTCOME_EXITED;
                res->term_signal = WIFSIGNALED(init_status) ? WTERMSIG(init_status) : 0;
                res->exit_code = WIFEXITED(init_status) ? WEXITSTATUS(init_status) : 0;
                if (have_status && res->outcome == RUN_OUTCOME_EXITED && WIFSIGNALED(status)) {
                        res->outcome = RUN_OUTCOME_SIGNALED;
                        res->term_signal = WTERMSIG(status);
                } else if (have_status && res->outcome == RUN_OUTCOME_EXITED) {
                        res->exit_code = WEXITSTATUS(status);
                }
        }
        box_usage(x, res, tasks_at_end);
        sbx_trace_lap(&x->trace, "finish");
        if (!exec_failed)
                return 0;
        res->outcome = RUN_OUTCOME_NONE;
        return -ENOEXEC;
}

/* destroy: kill what runs; init reaped (or never spawned): remove the cgroup now; else the
 * reaper thread reaps init, stops the supervisor and removes the cgroup, after the result. */
static void native_sandbox_destroy(struct sandbox *sandbox)
{
        struct native_box *x = (struct native_box *)sandbox;

        if (x->started)
                kill_tree(&x->ctx);
        if (!x->reaped) {
                struct native_reap *it = xcalloc(1, sizeof(*it));
                pthread_mutex_lock(&x->ctx.lock);
                it->pidfd = TAKE_FD(x->ctx.pidfd);
                pthread_mutex_unlock(&x->ctx.lock);
                it->pid = x->sb.pid;
                it->has_cg = x->ctx.cg != NULL;
                it->cg = x->cg;
                x->cg = (struct cgroup_run){.dir_fd = -1};
                it->notify = TAKE_PTR(x->notify);
                it->sync_fd = TAKE_FD(x->sb.sync_fd);
                reap_later(x->s, it);
        } else {
                cgroup_run_kill(x->ctx.cg);
                cgroup_run_remove(&x->cg);
        }
        sbx_trace_end(&x->trace);
        box_free(x);
}

static void box_free(struct native_box *x)
{
        int owned[] = {x->sb.pidfd, x->sb.out_fd, x->sb.err_fd, x->sb.sync_fd, x->sb.egress_fd};

        if (x->egress) {
                /* started but never collected: stop the proxy, drop its verdicts */
                struct run_result dropped = {0};
                egress_session_finish(TAKE_PTR(x->egress), &dropped.egress);
                run_result_done(&dropped);
        }
        native_sandbox_hand_close(&x->sb); /* a spare never handed its program */
        if (x->notify && !x->collected)
                native_notify_finish(x->notify, NULL);
        free(x->notify);
        for (size_t i = 0; i < ELEMENTSOF(owned); i++)
                if (owned[i] >= 0)
                        close(owned[i]);
        pthread_mutex_lock(&x->ctx.lock);
        if (x->ctx.pidfd >= 0)
                close(TAKE_FD(x->ctx.pidfd));
        pthread_mutex_unlock(&x->ctx.lock);
        cgroup_run_remove(&x->cg); /* prepare failed after making it */
        setup_rootfs_release(&x->hold);
        pthread_mutex_destroy(&x->ctx.lock);
        free(x->rootfs);
        free(x);
}

static const struct sandbox_ops native_sandbox_ops = {
    .prepare = native_prepare,
    .start = native_start,
    .kill = native_kill,
    .collect = native_collect,
    .destroy = native_sandbox_destroy,
};

void native_backend_force_limits(struct backend *b, const struct cgroup_limits_info *li)
{
        struct native_state *s = b->state;

        pthread_mutex_lock(&s->lock);
        s->limits = *li;
        s->limits_forced = true;
        s->probed = false;
        s->probe_gen++; /* spares built under the old answer are refused */
        pthread_mutex_unlock(&s->lock);
}

/* ---- lifetime --------------------------------------------------------------------------- */

/* Server exit: no new sandbox (the service's registry kills those that live). */
static void native_shutdown(struct backend *b)
{
        struct native_state *s = b->state;

        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        s->shutting_down = true;
        pthread_mutex_unlock(&s->lock);
}

static void native_destroy(struct backend *b)
{
        struct native_state *s = b->state;

        if (!s)
                return;
        /* the reaper finishes its queue (the inits were killed by shutdown) and stops */
        pthread_mutex_lock(&s->lock);
        s->reaper_stop = true;
        pthread_cond_signal(&s->reap_work);
        pthread_mutex_unlock(&s->lock);
        if (s->reaper_started)
                pthread_join(s->reaper, NULL);
        native_filter_done(&s->filter);
        pthread_cond_destroy(&s->reap_work);
        pthread_cond_destroy(&s->reap_idle);
        pthread_mutex_destroy(&s->lock);
        free(s);
        b->state = NULL;
}

static const struct backend_ops native_ops = {
    .name = "native",
    .egress = true,
    .probe = native_probe,
    .run = sandbox_run_once,
    .sandbox = &native_sandbox_ops,
    .cells = &native_cells_ops,
    .shutdown = native_shutdown,
    .destroy = native_destroy,
};

int native_backend_new(const struct sbx_config *cfg, struct backend **ret, struct sbx_error *err)
{
        struct backend *b = xcalloc(1, sizeof(*b));
        struct native_state *s = xcalloc(1, sizeof(*s));

        (void)err;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->reap_work, NULL);
        pthread_cond_init(&s->reap_idle, NULL);
        /* Built once, before any clone: every child only loads it. A failure is kept for the
         * probe, which turns it into a Blocked: reason. */
        if (native_filter_build(&s->filter, &s->filter_err) < 0)
                log_debug("seccomp profile: %s", s->filter_err.msg);
        b->ops = &native_ops;
        b->cfg = cfg;
        b->state = s;
        *ret = b;
        return 0;
}

/* ---- facts for the session sandbox (cells.c) -------------------------------------------- */

unsigned native_backend_probe_gen(struct backend *b)
{
        struct native_state *s = b->state;
        unsigned gen;

        pthread_mutex_lock(&s->lock);
        gen = s->probe_gen;
        pthread_mutex_unlock(&s->lock);
        return gen;
}

void native_backend_facts(struct backend *b, const struct native_filter **ret_filter,
                          struct cgroup_limits_info *ret_limits)
{
        struct native_state *s = b->state;

        pthread_mutex_lock(&s->lock);
        *ret_filter = &s->filter;
        *ret_limits = s->limits;
        s->ran = true;
        pthread_mutex_unlock(&s->lock);
}
