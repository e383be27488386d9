/* naive.c - the naive backend: development only, NO isolation. The code runs on this machine
 * as the server's user (or VESTIBULE_RUN_AS's when the server is root), with the host's
 * interpreters, a private temp dir as $HOME, cwd in the workspace, stdin at EOF, a fixed
 * minimal environment and its own process group that dies with the run. A process that leaves
 * the group (setsid) escapes the kill: that is why the grade says none. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "run/backend.h"
#include "run/warden.h"
#include "workspace/workspace.h"

#define NAIVE_GRADE "none (naive: development only)"
#define NAIVE_PATH "/usr/local/bin:/usr/bin:/bin"

struct naive_state {
        pthread_mutex_t lock;
        bool shutting_down;
        pid_t *pgids; /* process groups of the runs in flight */
        size_t n_pgids, size_pgids;
};

/* --- in-flight registry (for shutdown) ----------------------------------------------- */

static bool naive_register(struct naive_state *st, pid_t pgid)
{
        bool ok;

        pthread_mutex_lock(&st->lock);
        ok = !st->shutting_down;
        if (st->n_pgids == st->size_pgids) {
                st->size_pgids = st->size_pgids ? st->size_pgids * 2 : 8;
                st->pgids = xrealloc(st->pgids, st->size_pgids * sizeof(pid_t));
        }
        st->pgids[st->n_pgids++] = pgid;
        pthread_mutex_unlock(&st->lock);
        return ok;
}

static void naive_unregister(struct naive_state *st, pid_t pgid)
{
        pthread_mutex_lock(&st->lock);
        for (size_t i = 0; i < st->n_pgids; i++)
                if (st->pgids[i] == pgid) {
                        st->pgids[i] = st->pgids[--st->n_pgids];
                        break;
                }
        pthread_mutex_unlock(&st->lock);
}

static void naive_kill_tree(void *userdata)
{
        pid_t pgid = (pid_t)(intptr_t)userdata;

        /* The leader is not reaped before this is called (see warden.c), so the group id
         * cannot have been reused. */
        if (pgid > 0)
                (void)kill(-pgid, SIGKILL);
}

/* --- helpers --------------------------------------------------------------------------- */

static char *find_interpreter(const char *const *names)
{
        static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};

        for (const char *const *n = names; *n; n++)
                for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                        char *p = xasprintf("%s/%s", dirs[i], *n);

                        if (access(p, X_OK) == 0)
                                return p;
                        free(p);
                }
        return NULL;
}

/* rm -rf of a tree the run may have left unfriendly (mode 000 dirs, symlinks): never follows
 * a symlink, makes directories it cannot read readable first. */
static void remove_tree_at(int dfd, const char *name, int depth)
{
        int fd;
        DIR *d;
        struct dirent *de;

        if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
                return;
        if (depth > 64)
                return;
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == EACCES) {
                (void)fchmodat(dfd, name, 0700, 0);
                fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (fd < 0)
                return;
        (void)fchmod(fd, 0700);
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                remove_tree_at(dirfd(d), de->d_name, depth + 1);
        }
        closedir(d);
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                log_warning("cannot remove the naive run's temp dir entry '%s': %s, ignoring", name,
                            strerror(errno));
}

static void remove_tree(const char *path)
{
        remove_tree_at(AT_FDCWD, path, 0);
}

static int move_fd_above_stdio(int *fd)
{
        if (*fd > 2)
                return 0;
        int n = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
        if (n < 0)
                return -errno;
        close(*fd);
        *fd = n;
        return 0;
}

/* --- the child ------------------------------------------------------------------------- */

enum child_stage {
        STAGE_SETUP = 1,
        STAGE_CREDS,
        STAGE_PDEATH,
        STAGE_CHDIR,
        STAGE_EXEC,
};

struct child_report {
        int stage;
        int err;
};

struct child_args {
        pid_t parent;
        int devnull, out_w, err_w, report_w;
        bool drop;
        uid_t uid;
        gid_t gid;
        const char *cwd;
        const char *interp;
        char *const *argv;
        char *const *envp;
};

static void __attribute__((noreturn)) child_fail(int fd, int stage)
{
        struct child_report rep = {.stage = stage, .err = errno};

        (void)!write(fd, &rep, sizeof(rep));
        _exit(127);
}

/* After fork() in a threaded server: async-signal-safe calls only, no allocation. */
static void __attribute__((noreturn)) child_exec(const struct child_args *a)
{
        struct sigaction sa;
        sigset_t none;
        struct rlimit no_core = {0, 0};
        int rep = a->report_w;

        /* Its own process group, so kill_tree reaches everything it starts. */
        if (setpgid(0, 0) < 0)
                child_fail(rep, STAGE_SETUP);

        /* Signals: the server blocks SIGTERM/SIGINT and ignores SIGPIPE; the code gets the
         * defaults. Ignored dispositions and the mask survive execve(). */
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void)sigaction(sig, &sa, NULL);
        sigemptyset(&none);
        if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
                child_fail(rep, STAGE_SETUP);

        if (dup2(a->devnull, STDIN_FILENO) < 0 || dup2(a->out_w, STDOUT_FILENO) < 0 ||
            dup2(a->err_w, STDERR_FILENO) < 0)
                child_fail(rep, STAGE_SETUP);
        if (rep != 3) {
                if (dup3(rep, 3, O_CLOEXEC) < 0)
                        child_fail(rep, STAGE_SETUP);
                rep = 3;
        }
        /* Nothing of the server's leaks in: not the MCP pipes, not the audit log. */
        if (syscall(SYS_close_range, 4U, ~0U, 0U) < 0)
                for (int fd = 4; fd < 65536; fd++)
                        (void)close(fd);

        if (setrlimit(RLIMIT_CORE, &no_core) < 0)
                child_fail(rep, STAGE_SETUP);

        if (a->drop) {
                if (setgroups(0, NULL) < 0 || setresgid(a->gid, a->gid, a->gid) < 0 ||
                    setresuid(a->uid, a->uid, a->uid) < 0)
                        child_fail(rep, STAGE_CREDS);
                if (getuid() == 0 || geteuid() == 0 || getgid() == 0 || getegid() == 0) {
                        errno = EPERM;
                        child_fail(rep, STAGE_CREDS);
                }
        }

        /* Set after the credential change, which clears it. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                child_fail(rep, STAGE_PDEATH);
        if (getppid() != a->parent) /* the server died before the prctl */
                _exit(127);
        (void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);

        if (chdir(a->cwd) < 0)
                child_fail(rep, STAGE_CHDIR);

        execve(a->interp, a->argv, a->envp);
        child_fail(rep, STAGE_EXEC);
}

/* --- the backend ----------------------------------------------------------------------- */

static int naive_probe(struct backend *b, struct backend_probe *ret, struct sbx_error *err)
{
        (void)b;
        (void)err;
        memset(ret, 0, sizeof(*ret));
        ret->usable = true;
        ret->degraded = false;
        snprintf(ret->grade, sizeof(ret->grade), "%s", NAIVE_GRADE);
        return 0;
}

static void set_not_measured(struct run_usage *u, const char *why)
{
        struct run_measure *m[] = {&u->cpu_us, &u->mem_peak_bytes, &u->pids_peak};

        for (size_t i = 0; i < ELEMENTSOF(m); i++) {
                m[i]->measured = false;
                snprintf(m[i]->why, sizeof(m[i]->why), "%s", why);
        }
}

static int naive_run(struct backend *b, const struct run_request *req, struct run_result *res,
                     struct sbx_error *err)
{
        static const char *const py[] = {"python3", NULL};
        static const char *const js[] = {"node", "nodejs", NULL};
        static const char *const sh[] = {"bash", NULL};
        static const char *const pkg[] = {
            [SBX_LANG_PYTHON] = "python3", [SBX_LANG_NODE] = "nodejs", [SBX_LANG_BASH] = "bash"};
        struct naive_state *st = b->state;
        const struct sbx_config *cfg = req->cfg ? req->cfg : b->cfg;
        const char *const *names;
        _cleanup_free_ char *interp = NULL, *tmpdir = NULL, *script = NULL;
        _cleanup_close_ int devnull = -1, out_r = -1, out_w = -1, err_r = -1, err_w = -1;
        _cleanup_close_ int rep_r = -1, rep_w = -1, fd = -1;
        char *env[10] = {NULL};
        char *argv[3] = {NULL};
        bool drop = false;
        struct child_args ca;
        struct child_report rep;
        struct warden_child wc;
        struct rusage ru;
        uint64_t start_ms;
        pid_t pid;
        ssize_t n;
        int r;

        snprintf(res->backend, sizeof(res->backend), "naive");
        snprintf(res->isolation, sizeof(res->isolation), "%s", NAIVE_GRADE);
        snprintf(res->image, sizeof(res->image), "host");
        set_not_measured(&res->usage, "naive backend has no cgroup");
        if (cfg->workspace_ro)
                snprintf(res->notes, sizeof(res->notes),
                         "workspace: read-write (VESTIBULE_WORKSPACE_RO is not enforced by the "
                         "naive backend)");

        pthread_mutex_lock(&st->lock);
        r = st->shutting_down;
        pthread_mutex_unlock(&st->lock);
        if (r)
                return sbx_fail(err, ESHUTDOWN, "the server is shutting down: retry after restart");

        if (geteuid() == 0) {
                if (!cfg->run_as_set || cfg->run_as_uid == 0 || cfg->run_as_gid == 0)
                        return sbx_fail(err, EPERM,
                                        "the server runs as root, so code would run as root: "
                                        "start vestibule-mcp as your own user, or set "
                                        "VESTIBULE_RUN_AS=uid:gid to an unprivileged id "
                                        "(retry after restart)");
                drop = true;
        }

        switch (req->language) {
        case SBX_LANG_PYTHON:
                names = py;
                break;
        case SBX_LANG_NODE:
                names = js;
                break;
        case SBX_LANG_BASH:
                names = sh;
                break;
        default:
                return sbx_fail(err, EINVAL, "unknown language");
        }
        interp = find_interpreter(names);
        if (!interp)
                return sbx_fail(err, ENOENT,
                                "%s is not installed on this host (looked in %s): the naive "
                                "backend runs code with the host's interpreters; install it "
                                "(apt-get install %s) and retry",
                                names[0], NAIVE_PATH, pkg[req->language]);

        r = workspace_ensure(cfg->workspace_dir, err);
        if (r < 0)
                return r;

        tmpdir = xstrdup("/tmp/vestibule-naive-XXXXXX");
        if (!mkdtemp(tmpdir)) {
                r = errno;
                return sbx_fail(err, r,
                                "cannot create a temp dir under /tmp: %s; check that /tmp "
                                "is writable and retry",
                                strerror(r));
        }
        script = xasprintf("%s/%s", tmpdir, sbx_language_script(req->language));
        fd = open(script, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
                r = sbx_fail(err, errno, "cannot write the script '%s': %s", script,
                             strerror(errno));
                goto out_rm;
        }
        for (size_t off = 0; off < req->code_len;) {
                n = write(fd, req->code + off, req->code_len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = sbx_fail(err, n < 0 ? errno : EIO, "cannot write the script '%s': %s",
                                     script, strerror(n < 0 ? errno : EIO));
                        goto out_rm;
                }
                off += (size_t)n;
        }
        if (drop && (fchown(fd, cfg->run_as_uid, cfg->run_as_gid) < 0 ||
                     chown(tmpdir, cfg->run_as_uid, cfg->run_as_gid) < 0)) {
                r = sbx_fail(err, errno, "cannot hand the temp dir '%s' to uid %u: %s", tmpdir,
                             (unsigned)cfg->run_as_uid, strerror(errno));
                goto out_rm;
        }
        close(TAKE_FD(fd));

        devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0) {
                r = sbx_fail(err, errno, "cannot open /dev/null: %s", strerror(errno));
                goto out_rm;
        }
        {
                int p[2];

                if (pipe2(p, O_CLOEXEC) < 0)
                        goto out_pipe;
                out_r = p[0], out_w = p[1];
                if (pipe2(p, O_CLOEXEC) < 0)
                        goto out_pipe;
                err_r = p[0], err_w = p[1];
                if (pipe2(p, O_CLOEXEC) < 0)
                        goto out_pipe;
                rep_r = p[0], rep_w = p[1];
        }
        if (move_fd_above_stdio(&devnull) < 0 || move_fd_above_stdio(&out_w) < 0 ||
            move_fd_above_stdio(&err_w) < 0 || move_fd_above_stdio(&rep_w) < 0)
                goto out_pipe;

        /* Everything the child needs is built before fork: no allocation after it. */
        argv[0] = interp;
        argv[1] = script;
        env[0] = xstrdup("PATH=" NAIVE_PATH);
        env[1] = xasprintf("HOME=%s", tmpdir);
        env[2] = xasprintf("TMPDIR=%s", tmpdir);
        env[3] = xstrdup("LANG=C.UTF-8");
        env[4] = xstrdup("TZ=UTC");
        env[5] = xstrdup("PYTHONUNBUFFERED=1");
        env[6] = xstrdup("PYTHONDONTWRITEBYTECODE=1");
        env[7] = xstrdup("NO_COLOR=1");

        ca = (struct child_args){
            .parent = getpid(),
            .devnull = devnull,
            .out_w = out_w,
            .err_w = err_w,
            .report_w = rep_w,
            .drop = drop,
            .uid = cfg->run_as_uid,
            .gid = cfg->run_as_gid,
            .cwd = cfg->workspace_dir,
            .interp = interp,
            .argv = argv,
            .envp = env,
        };

        start_ms = sbx_now_ms();
        pid = fork();
        if (pid < 0) {
                r = sbx_fail(err, errno, "cannot start the run: fork: %s; retry", strerror(errno));
                goto out_env;
        }
        if (pid == 0)
                child_exec(&ca);

        /* Both sides set the group, so kill_tree works even before the child ran. */
        (void)setpgid(pid, pid);
        if (!naive_register(st, pid))
                naive_kill_tree((void *)(intptr_t)pid);
        close(TAKE_FD(out_w));
        close(TAKE_FD(err_w));
        close(TAKE_FD(rep_w));

        do
                n = read(rep_r, &rep, sizeof(rep));
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof(rep)) {
                int status;

                naive_kill_tree((void *)(intptr_t)pid);
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                        ;
                naive_unregister(st, pid);
                switch (rep.stage) {
                case STAGE_CHDIR:
                        r = sbx_fail(err, rep.err,
                                     "cannot enter the workspace '%s'%s: %s; give the user that "
                                     "runs code access to it and retry",
                                     cfg->workspace_dir, drop ? " as VESTIBULE_RUN_AS's user" : "",
                                     strerror(rep.err));
                        break;
                case STAGE_CREDS:
                        r = sbx_fail(err, rep.err,
                                     "cannot switch to VESTIBULE_RUN_AS=%u:%u: %s; set it to an "
                                     "unprivileged uid:gid and restart",
                                     (unsigned)cfg->run_as_uid, (unsigned)cfg->run_as_gid,
                                     strerror(rep.err));
                        break;
                case STAGE_EXEC:
                        r = sbx_fail(err, rep.err, "cannot execute '%s': %s; retry", interp,
                                     strerror(rep.err));
                        break;
                default:
                        r = sbx_fail(err, rep.err, "cannot set up the run's process: %s; retry",
                                     strerror(rep.err));
                        break;
                }
                goto out_env;
        }
        close(TAKE_FD(rep_r));

        wc = (struct warden_child){
            .pid = pid,
            .pidfd = (int)syscall(SYS_pidfd_open, pid, 0),
            .out_fd = TAKE_FD(out_r),
            .err_fd = TAKE_FD(err_r),
            .kill_tree = naive_kill_tree,
            .kill_userdata = (void *)(intptr_t)pid,
        };
        if (wc.pidfd >= 0)
                (void)fcntl(wc.pidfd, F_SETFD, FD_CLOEXEC);
        r = warden_supervise(req, &wc, start_ms, res, &ru, err);
        naive_unregister(st, pid);
        /* wait4's rusage covers the main process and only the descendants it waited for:
         * not the run's total, so it is not reported as cpu. */
        goto out_env;

out_pipe:
        r = sbx_fail(err, errno, "cannot create the run's pipes: %s; retry", strerror(errno));
        goto out_rm;
out_env:
        for (size_t i = 0; i < ELEMENTSOF(env); i++)
                free(env[i]);
out_rm:
        remove_tree(tmpdir);
        return r < 0 ? r : 0;
}

static void naive_shutdown(struct backend *b)
{
        struct naive_state *st = b->state;

        pthread_mutex_lock(&st->lock);
        st->shutting_down = true;
        for (size_t i = 0; i < st->n_pgids; i++)
                naive_kill_tree((void *)(intptr_t)st->pgids[i]);
        pthread_mutex_unlock(&st->lock);
}

static void naive_destroy(struct backend *b)
{
        struct naive_state *st = b->state;

        if (!st)
                return;
        pthread_mutex_destroy(&st->lock);
        free(st->pgids);
        free(st);
        b->state = NULL;
}

static const struct backend_ops naive_ops = {
    .name = "naive",
    .probe = naive_probe,
    .run = naive_run,
    .shutdown = naive_shutdown,
    .destroy = naive_destroy,
};

int naive_backend_new(const struct sbx_config *cfg, struct backend **ret, struct sbx_error *err)
{
        struct backend *b = xcalloc(1, sizeof(*b));
        struct naive_state *st = xcalloc(1, sizeof(*st));

        (void)err;
        pthread_mutex_init(&st->lock, NULL);
        b->ops = &naive_ops;
        b->cfg = cfg;
        b->state = st;
        *ret = b;
        return 0;
}
