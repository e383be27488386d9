/* hostrun.c - `vestibule-mcp run -- CMD` on the native backend: the native_spawn() of run_code
 * with its host_view set (spawn.c builds the root from the host's folders), the caller's stdio,
 * the seccomp supervisor of native_notify, the run's cgroup where this host gives one, and
 * the wait for the command, its timeout or a cancel. See hostrun.h and docs/run-command.md. */
#include "native/native.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"
#include "egress/egress.h"

const char *const native_host_system_dirs[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", NULL,
};

/* A signal that stops the run waits this long for the command to end on its own (a Ctrl-C at
 * the terminal reached it too, and it may be printing its summary) before the kill. */
#define HOST_CANCEL_GRACE_MS 2000

/* Everything one host run holds, released by host_done(). */
struct host_run {
        struct cgroup_limits_info limits;
        struct cgroup_run cg;
        bool have_cg;
        struct native_filter filter;
        bool have_filter;
        struct native_sandbox sb;
        struct native_notify notify;
        bool notify_on;
        struct egress_session *egress;
        char root[64]; /* the empty folder the host view's tmpfs is mounted on:
                        * /tmp/vestibule-hostroot-<our pid>-XXXXXX, so a check tells a live
                        * run's folder (its pid alive) from one left behind */
};

void native_host_grade(const struct sbx_config *cfg, struct native_host_result *ret)
{
        struct cgroup_limits_info li;

        cgroup_limits_detect(cfg, &li);
        ret->degraded = native_grade_limits(&li, ret->grade, sizeof(ret->grade));
}

struct host_scope {
        const struct sbx_config *cfg;
        struct cgroup_run *cg;
};

static int host_scope_place(void *ud, pid_t pid, struct sbx_error *err)
{
        struct host_scope *u = ud;

        return cgroup_scope_start(u->cfg, pid, u->cg, err);
}

/* A folder of a run that is gone is this old at least before the sweep takes it (a fresh one may
 * be a test's control, and its pid was just checked). */
#define HOSTROOT_SWEEP_AGE_S 60

/* The host view's mount-point folders that runs killed before their end left (their names carry
 * their server's pid): each empty /tmp/vestibule-hostroot-<pid>-XXXXXX of ours whose pid is gone
 * and that is HOSTROOT_SWEEP_AGE_S old is removed (rmdir: never a folder with anything in it;
 * its mount was in the dead run's namespace only). A pid reused since is taken as alive: the
 * folder waits for a later run. */
static void hostroot_sweep(void)
{
        _cleanup_close_ int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = tmp >= 0 ? fdopendir(dup(tmp)) : NULL;
        struct dirent *de;
        time_t now = time(NULL);

        if (!d)
                return;
        while ((de = readdir(d))) {
                static const char prefix[] = "vestibule-hostroot-";
                struct stat st;
                char *end;
                long pid;

                if (strncmp(de->d_name, prefix, sizeof(prefix) - 1) != 0)
                        continue;
                errno = 0;
                pid = strtol(de->d_name + sizeof(prefix) - 1, &end, 10);
                if (errno || pid <= 0 || *end != '-' || pid == (long)getpid() ||
                    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                        continue;
                if (fstatat(tmp, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
                    now - st.st_mtime < HOSTROOT_SWEEP_AGE_S)
                        continue;
                if (unlinkat(tmp, de->d_name, AT_REMOVEDIR) == 0)
                        log_debug("run --: removed '/tmp/%s', left by a run that is gone",
                                  de->d_name);
        }
        closedir(d);
}

/* The setup before the clone: the grade, the run's cgroup, the filter, the root's folder. */
static int host_prepare(const struct sbx_config *cfg, struct host_run *h,
                        struct native_host_result *ret, struct sbx_error *err)
{
        int r;

        if (geteuid() == 0 && (!cfg->run_as_set || cfg->run_as_uid == 0))
                return sbx_fail(err, EPERM,
                                "run -- CMD as root would run the command as root: run it as "
                                "your own user (or set VESTIBULE_RUN_AS=uid:gid to a non-root "
                                "user)");
        cgroup_limits_detect(cfg, &h->limits);
        ret->degraded = native_grade_limits(&h->limits, ret->grade, sizeof(ret->grade));
        if (h->limits.path != CGROUP_LIMITS_NONE) {
                r = cgroup_run_create(&h->limits, cfg, &h->cg, err);
                if (r < 0)
                        return r;
                h->have_cg = true;
        }
        r = native_filter_build_host(&h->filter, err);
        if (r < 0)
                return r;
        h->have_filter = true;
        hostroot_sweep();
        native_strf(h->root, sizeof(h->root), "/tmp/vestibule-hostroot-%d-XXXXXX", (int)getpid());
        if (!mkdtemp(h->root)) {
                h->root[0] = '\0';
                return sbx_fail(err, errno,
                                "cannot make the host view's mount point under /tmp: %m; "
                                "check that /tmp is writable");
        }
        return 0;
}

/* The port of EGRESS_PROXY_URL ("http://127.0.0.1:PORT"): connects to it are the proxy's. */
static uint16_t host_proxy_port(void)
{
        const char *colon = strrchr(EGRESS_PROXY_URL, ':');

        return colon ? (uint16_t)atoi(colon + 1) : 0;
}

/* Append ", @what" (or @what) to @ret->tried when it fits. */
static void tried_add(struct native_host_result *ret, const char *what)
{
        size_t len = strlen(ret->tried);

        if (len + strlen(what) + 3 < sizeof(ret->tried))
                native_strf(ret->tried + len, sizeof(ret->tried) - len, "%s%s", len ? ", " : "",
                            what);
}

/* The proxy's refusals into @ret->tried. */
static void tried_egress(const struct run_egress *eg, struct native_host_result *ret)
{
        char what[400];

        for (size_t i = 0; ret && i < eg->n_entries; i++) {
                const struct run_egress_entry *e = &eg->entries[i];
                if (e->allowed)
                        continue;
                native_strf(what, sizeof(what), "proxy refused %.256s:%u (%s)", e->host, e->port,
                            e->reason ? e->reason : "refused");
                tried_add(ret, what);
        }
}

/* Release what @h holds; @ret (NULL: a run that did not start) gets the proxy's refusals. */
static void host_done(struct host_run *h, struct native_host_result *ret)
{
        struct run_result res = {0};

        if (h->notify_on)
                native_notify_finish(&h->notify, &res);
        if (h->egress) {
                egress_session_finish(TAKE_PTR(h->egress), &res.egress);
                tried_egress(&res.egress, ret);
                run_result_done(&res);
        }
        native_sandbox_hand_close(&h->sb);
        int fds[] = {h->sb.pidfd, h->sb.out_fd, h->sb.err_fd, h->sb.sync_fd, h->sb.egress_fd};
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        if (h->have_cg) {
                cgroup_run_kill(&h->cg);
                cgroup_run_remove(&h->cg);
        }
        if (h->have_filter)
                native_filter_done(&h->filter);
        if (h->root[0])
                (void)rmdir(h->root);
}

/* Clone the sandbox and hand it its go (the command execs then). */
static int host_spawn(const struct sbx_config *cfg, const struct native_host_req *req,
                      struct host_run *h, struct sbx_error *err)
{
        struct native_userns_limit quotas[NATIVE_USERNS_LIMITS];
        bool root = geteuid() == 0;
        struct host_scope scope = {.cfg = cfg, .cg = &h->cg};
        struct native_spawn sp = {
            .rootfs = h->root,
            .workspace = h->root, /* unused: the host view has no /workspace */
            .tmpfs_mb = cfg->tmpfs_mb,
            .pids_max = cfg->pids_max,
            .userns_limits = quotas,
            .n_userns_limits = native_userns_limits(1, quotas),
            .code_max = 4096,
            .fifo = false,
            .script = "cmd",
            .argv = req->argv,
            .filter = &h->filter,
            .host_uid = root ? cfg->run_as_uid : getuid(),
            .host_gid = root ? cfg->run_as_gid : getgid(),
            .host_root = root,
            .cgroup_fd = h->limits.path == CGROUP_LIMITS_DELEGATED ? h->cg.dir_fd : -1,
            .count_tasks = true, /* also names the processes left (the result's tried) */
            .envp = req->envp,
            .egress = req->egress,
            .host_view = &req->view,
        };
        int r;

        if (h->limits.path == CGROUP_LIMITS_SCOPE) {
                sp.after_clone = host_scope_place;
                sp.after_clone_ud = &scope;
        }
        r = native_spawn(&sp, &h->sb, err);
        if (r < 0)
                return r;
        if (req->egress) {
                r = egress_session_start(cfg, TAKE_FD(h->sb.egress_fd), &h->egress, err);
                if (r < 0)
                        return r;
        }
        r = native_notify_start_watch(&h->notify, TAKE_FD(h->sb.listener_fd), h->sb.sync_fd,
                                      req->watch, req->egress ? host_proxy_port() : 0, err);
        h->notify_on = r == 0 || h->notify.stop_fd >= 0;
        if (r < 0)
                return r;
        return native_handover(&h->sb, "", 0, h->notify.ended_fd, sbx_now_ms() + 15000, err);
}

/* Send @sig to the command's process group: the command leads a session of its own (spawn.c,
 * program_main), so the terminal's signals reach us, not it. Its pid on the host is init's
 * only child (proc(5), /proc/PID/task/TID/children). */
static void host_forward(const struct host_run *h, int sig)
{
        char path[64], buf[32];
        long prog;

        native_strf(path, sizeof(path), "/proc/%d/task/%d/children", (int)h->sb.pid,
                    (int)h->sb.pid);
        if (sbx_read_small_file(AT_FDCWD, path, SBX_READ_PREFIX, buf, sizeof(buf)) <= 0)
                return;
        prog = strtol(buf, NULL, 10);
        if (prog > 1)
                (void)kill(-(pid_t)prog, sig);
}

/* Wait until the command ended (init reported, or init is gone), its timeout, or a cancel
 * (SIGINT, SIGTERM, SIGHUP: forwarded to the command first). SIGWINCH is forwarded only.
 * Return: 0 ended, -ETIMEDOUT, or -EINTR with *@ret_sig the cancelling signal. */
static int host_wait(const struct native_host_req *req, struct host_run *h, uint64_t start_ms,
                     int *ret_sig)
{
        uint64_t deadline = req->timeout_ms ? start_ms + req->timeout_ms : 0;

        for (;;) {
                struct pollfd p[3] = {{.fd = h->notify.ended_fd, .events = POLLIN},
                                      {.fd = h->sb.pidfd, .events = POLLIN},
                                      {.fd = req->cancel_fd, .events = POLLIN}};
                uint64_t now = sbx_now_ms();
                int wait_ms = -1, r;

                if (deadline && now >= deadline)
                        return -ETIMEDOUT;
                if (deadline)
                        wait_ms = (int)(deadline - now > 60000 ? 60000 : deadline - now);
                r = poll(p, 3, wait_ms);
                if (r < 0 && errno == EINTR)
                        continue;
                if (p[0].revents || p[1].revents)
                        return 0;
                if (p[2].revents) {
                        struct signalfd_siginfo si;
                        if (read(req->cancel_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                                host_forward(h, (int)si.ssi_signo);
                                if (si.ssi_signo == SIGWINCH)
                                        continue;
                                *ret_sig = (int)si.ssi_signo;
                                return -EINTR;
                        }
                }
        }
}

/* What the supervisor saw the command try, and the processes it left, into @ret->tried. */
static void host_tried(const struct native_notify *n, struct native_host_result *ret)
{
        char what[200];

        native_strf(ret->tried, sizeof(ret->tried), "%s", n->tried);
        if (n->tried_unlisted) {
                native_strf(what, sizeof(what), "+%u more", n->tried_unlisted);
                tried_add(ret, what);
        }
        /* init and the program itself (a zombie then) are in the count */
        if (n->tasks_at_end > 2) {
                native_strf(what, sizeof(what), "left %d task%s, killed: %s", n->tasks_at_end - 2,
                            n->tasks_at_end == 3 ? "" : "s",
                            n->left[0] ? n->left : "threads of the command");
                tried_add(ret, what);
        }
}

/* The end: reap init (its rusage covers every process of the run) and read the command's
 * status as init reported it. */
static int host_finish(struct host_run *h, int waited, int sig, struct native_host_result *ret,
                       struct sbx_error *err)
{
        struct rusage ru = {0};
        int st = 0;
        bool have_status, exec_failed;
        int status;

        if (waited < 0)
                syscall(SYS_pidfd_send_signal, h->sb.pidfd, SIGKILL, NULL, 0);
        while (wait4(h->sb.pid, &st, 0, &ru) < 0 && errno == EINTR)
                ;
        ret->cpu_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec +
                      (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
        ret->maxrss_kb = (uint64_t)ru.ru_maxrss;
        native_notify_finish(&h->notify, NULL);
        h->notify_on = false;
        have_status = h->notify.have_status;
        status = h->notify.status;
        exec_failed = h->notify.exec_failed;
        native_strf(ret->blocked, sizeof(ret->blocked), "%s", h->notify.names);
        host_tried(&h->notify, ret);
        if (exec_failed) {
                *err = h->notify.exec_err;
                ret->exit_code = err->code == ENOENT ? 127 : 126;
                return -ENOEXEC;
        }
        if (waited == -ETIMEDOUT) {
                ret->timed_out = true;
                ret->exit_code = 124;
        } else if (have_status) {
                ret->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        } else if (waited == -EINTR) {
                ret->cancel_signal = sig;
                ret->exit_code = 128 + sig;
        } else {
                return sbx_fail(err, EIO,
                                "the sandbox's init ended without the command's status "
                                "(wait status %d); the run is lost",
                                st);
        }
        return 0;
}

int native_host_run(const struct sbx_config *cfg, const struct native_host_req *req,
                    struct native_host_result *ret, struct sbx_error *err)
{
        struct host_run h = {.cg = {.dir_fd = -1}, .sb = NATIVE_SANDBOX_NONE};
        uint64_t start_ms = sbx_now_ms();
        int r, sig = 0;

        memset(ret, 0, sizeof(*ret));
        r = host_prepare(cfg, &h, ret, err);
        if (r == 0)
                r = host_spawn(cfg, req, &h, err);
        if (r < 0) {
                if (h.sb.pidfd >= 0) {
                        syscall(SYS_pidfd_send_signal, h.sb.pidfd, SIGKILL, NULL, 0);
                        while (waitpid(h.sb.pid, NULL, 0) < 0 && errno == EINTR)
                                ;
                }
                host_done(&h, NULL);
                return r;
        }
        r = host_wait(req, &h, start_ms, &sig);
        if (r == -EINTR) {
                /* give the command its grace to end on its own, then the kill */
                struct native_host_req grace = *req;
                grace.cancel_fd = -1;
                grace.timeout_ms = HOST_CANCEL_GRACE_MS;
                if (host_wait(&grace, &h, sbx_now_ms(), &sig) == 0)
                        r = 0;
        }
        r = host_finish(&h, r, sig, ret, err);
        ret->wall_ms = sbx_now_ms() - start_ms;
        host_done(&h, ret);
        return r;
}
