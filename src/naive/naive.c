/* naive.c - the naive backend: development only, NO isolation. The code runs on this machine
 * as the server's user (or VESTIBULE_RUN_AS's when the server is root), with the host's
 * interpreters, a private temp dir as $HOME, cwd in the workspace, stdin at EOF and a fixed
 * minimal environment.
 *
 * Process tree, per run:
 *
 *   server thread (warden) --fork--> supervisor S --fork--> code C (exec python3/node/bash)
 *
 * S is a child subreaper (PR_SET_CHILD_SUBREAPER): every process the run starts, setsid and
 * double-forked daemons included, is re-parented to S when its parent dies, so S can find and
 * SIGKILL all of them (its children, repeatedly, until it has none) when C exits, when the
 * warden asks (timeout, cancel, flood, shutdown) or when the server goes away (its control
 * socket closes). S reaps them all, so wait4() on S gives the CPU time of the whole run. S keeps
 * the server's credentials; only C drops to VESTIBULE_RUN_AS, so C cannot signal S when the
 * server is root. Under a non-root server C could kill S: then C dies too (PDEATHSIG) and C's
 * process group is killed, but a process that left the group can survive, the result says so.
 *
 * S and C run after fork() in a threaded server and never allocate: only system calls and
 * hand-written formatting until C's execve. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "naive/naive.h"
#include "run/backend.h"
#include "rootfs/tree.h"
#include "run/sandbox.h"
#include "run/warden.h"
#include "workspace/workspace.h"

#define NAIVE_GRADE "none (naive: development only)"
#define NAIVE_PATH "/usr/local/bin:/usr/bin:/bin"
/* S kills the run itself this long after the deadline if the server never asked it to (the
 * server hung or its warden is gone): a last line of defence, not the timeout. */
#define NAIVE_SUPERVISOR_GRACE_MS 5000

/* Records S and C send to the server. */
enum naive_rec_kind {
        REC_PID = 1, /* S -> server on the report pipe: C's pid */
        REC_ERR,     /* S or C -> server on the report pipe: setup failed at @stage */
        REC_DONE,    /* S -> server on the control socket: C's wait status, all killed */
};

enum naive_stage {
        STAGE_SETUP = 1,
        STAGE_CREDS,
        STAGE_CHDIR,
        STAGE_EXEC,
};

struct naive_rec {
        int kind;
        int stage;
        int err;
        int value; /* REC_PID: pid; REC_DONE: wait status */
};

/* One naive sandbox: a temporary folder (the run's $HOME and the script) and the host's
 * interpreter, then per program the supervisor S and its pipes. */
struct naive_sandbox {
        struct backend *b;
        const struct sbx_config *cfg;
        enum sbx_language language;
        enum sandbox_mode mode;
        bool drop; /* the server is root: C drops to VESTIBULE_RUN_AS */
        char *interp;
        char *tmpdir;

        /* the program started last (start() to collect()) */
        pthread_mutex_t lock; /* kill() may come from any thread */
        bool started;
        bool kill_asked; /* kill() came: a program started after it is killed at once */
        pid_t pid;       /* S, until collect() reaped it */
        int pidfd;       /* pidfd of S, or -1 */
        int out_r;       /* read ends of C's stdout and stderr */
        int err_r;
        int ctl;       /* the server's end of the control socket to S */
        pid_t c_pgid;  /* C's process group (C's pid), 0 until S reported it */
        bool s_done;   /* S reported C's status after killing everything */
        int c_status;  /* that status */
        bool killed_s; /* S was gone before it reported: the run may have killed it */
        bool failed_setup;
        struct naive_rec fail; /* the first REC_ERR */
};

struct naive_state {
        pthread_mutex_t lock;
        bool shutting_down; /* shutdown(): no new sandbox */
};

/* --- kill (any thread) ------------------------------------------------------------------ */

/* S's final report, if it has arrived. Under nb->lock. */
static void naive_poll_done(struct naive_sandbox *nb)
{
        struct naive_rec rec;

        if (nb->s_done || nb->ctl < 0)
                return;
        if (recv(nb->ctl, &rec, sizeof(rec), MSG_DONTWAIT) == (ssize_t)sizeof(rec) &&
            rec.kind == REC_DONE) {
                nb->s_done = true;
                nb->c_status = rec.value;
        }
}

/* The kill op: on timeout, cancel, flood, shutdown, and when S exited (before it is reaped).
 * Asks S to kill the whole run; when S is gone without reporting, kills what is left of C's
 * process group itself. */
static void naive_kill(struct sandbox *sb)
{
        struct naive_sandbox *nb = (struct naive_sandbox *)sb;
        char k = 'k';

        pthread_mutex_lock(&nb->lock);
        nb->kill_asked = true;
        naive_poll_done(nb);
        if (!nb->started || nb->s_done || nb->ctl < 0)
                goto out; /* nothing runs, or S killed and reaped everything and reported */
        if (send(nb->ctl, &k, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
                goto out; /* S is alive and will do it */
        /* S is gone without reporting: the run killed it. C died with it (PDEATHSIG); kill
         * what is left of C's process group. C is reaped by now, so its group id is only
         * still ours if a member is left, which is exactly the case that matters. */
        nb->killed_s = true;
        if (nb->c_pgid > 0)
                (void)kill(-nb->c_pgid, SIGKILL);
out:
        pthread_mutex_unlock(&nb->lock);
}

/* --- helpers (server side) --------------------------------------------------------------- */

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

/* rm -rf of a tree the run may have left unfriendly (mode 000 dirs, symlinks), through
 * rootfs/tree.c: never follows a symlink, makes directories it cannot read readable first. */
static void remove_tree(const char *path)
{
        _cleanup_free_ char *parent = xstrdup(path);
        char *slash = strrchr(parent, '/');
        _cleanup_close_ int dfd = -1;
        int r;

        if (!slash)
                return;
        *slash = '\0';
        dfd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = dfd < 0 ? -errno : setup_remove_tree(dfd, slash + 1);
        if (r < 0)
                log_warning("cannot remove the naive run's temp dir '%s': %s, ignoring", path,
                            strerror(-r));
}

/* --- the supervisor S and the code C (after fork: no allocation) ------------------------ */

/* S's fds after it arranged them. */
enum {
        S_FD_CTL = 3,
        S_FD_OUT = 4,
        S_FD_ERR = 5,
        S_FD_REP = 6,
        S_FD_FIRST_FREE = 7,
};

struct spawn_args {
        int devnull, ctl, out_w, err_w, rep_w; /* in the server's numbering */
        bool drop;
        uid_t uid;
        gid_t gid;
        const char *cwd;
        const char *interp;
        char *const *argv;
        char *const *envp;
        uint64_t kill_after_ms; /* S's own deadline, from its start */
};

static void send_rec(int fd, int kind, int stage, int err, int value)
{
        struct naive_rec rec = {.kind = kind, .stage = stage, .err = err, .value = value};

        (void)!write(fd, &rec, sizeof(rec));
}

static void __attribute__((noreturn)) fail_rec(int fd, int stage)
{
        send_rec(fd, REC_ERR, stage, errno, 0);
        _exit(127);
}

/* "/proc/self/task/<tid>/children" without snprintf. */
static void children_path(char *buf, size_t size)
{
        static const char a[] = "/proc/self/task/", b[] = "/children";
        char digits[16];
        int n = 0;
        size_t len = 0;
        unsigned long v = (unsigned long)syscall(SYS_gettid);

        do
                digits[n++] = (char)('0' + v % 10);
        while ((v /= 10) && n < (int)sizeof(digits));
        if (sizeof(a) + (size_t)n + sizeof(b) > size) {
                buf[0] = '\0';
                return;
        }
        memcpy(buf, a, sizeof(a) - 1);
        len = sizeof(a) - 1;
        while (n > 0)
                buf[len++] = digits[--n];
        memcpy(buf + len, b, sizeof(b));
}

/* SIGKILL every direct child of S. Returns how many were signalled, -1 if the list could not
 * be read (then the caller's waitpid loop still ends the run, more slowly). */
static int s_kill_children(const char *path)
{
        char buf[4096];
        int fd = open(path, O_RDONLY | O_CLOEXEC), count = 0;
        long pid = 0;
        bool in = false;
        ssize_t n;

        if (fd < 0)
                return -1;
        while ((n = read(fd, buf, sizeof(buf))) > 0)
                for (ssize_t i = 0; i < n; i++) {
                        if (buf[i] >= '0' && buf[i] <= '9') {
                                pid = pid * 10 + (buf[i] - '0');
                                in = true;
                        } else if (in) {
                                (void)kill((pid_t)pid, SIGKILL);
                                count++;
                                pid = 0;
                                in = false;
                        }
                }
        if (in) {
                (void)kill((pid_t)pid, SIGKILL);
                count++;
        }
        close(fd);
        return count;
}

/* Kill and reap every process of the run; records C's status when C is among them. */
static void s_kill_all(pid_t c, bool *c_reaped, int *c_status)
{
        char path[64];

        children_path(path, sizeof(path));
        if (!*c_reaped)
                (void)kill(-c, SIGKILL); /* C's group: C is not reaped, so the id is still C's */
        for (;;) {
                int st;
                pid_t p;

                (void)s_kill_children(path);
                p = waitpid(-1, &st, __WALL);
                if (p < 0 && errno == EINTR)
                        continue;
                if (p < 0)
                        break; /* ECHILD: nothing of the run is left */
                if (p == c && !*c_reaped) {
                        *c_reaped = true;
                        *c_status = st;
                }
        }
}

/* End S the way C ended, so the warden reads C's status from S's. */
static void __attribute__((noreturn)) s_mirror(int status)
{
        if (WIFSIGNALED(status)) {
                int sig = WTERMSIG(status);
                struct sigaction sa;
                sigset_t set;

                memset(&sa, 0, sizeof(sa));
                sa.sa_handler = SIG_DFL;
                (void)sigaction(sig, &sa, NULL);
                sigemptyset(&set);
                sigaddset(&set, sig);
                (void)sigprocmask(SIG_UNBLOCK, &set, NULL);
                (void)kill(getpid(), sig);
                _exit(128 + sig);
        }
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
}

static void __attribute__((noreturn)) code_exec(const struct spawn_args *a)
{
        struct sigaction sa;
        sigset_t none;
        int rep = S_FD_REP;

        /* Its own process group: the backstop kill reaches what stays in it. */
        if (setpgid(0, 0) < 0)
                fail_rec(rep, STAGE_SETUP);

        /* Signals: the server blocks SIGTERM/SIGINT and ignores SIGPIPE; the code gets the
         * defaults. Ignored dispositions and the mask survive execve(). */
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void)sigaction(sig, &sa, NULL);
        sigemptyset(&none);
        if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
                fail_rec(rep, STAGE_SETUP);

        /* stdin is S's /dev/null already; stdout and stderr are the warden's pipes; the report
         * fd becomes 3 (close-on-exec) over the control socket, which C must not hold. */
        if (dup2(S_FD_OUT, STDOUT_FILENO) < 0 || dup2(S_FD_ERR, STDERR_FILENO) < 0 ||
            dup3(S_FD_REP, 3, O_CLOEXEC) < 0)
                fail_rec(rep, STAGE_SETUP);
        rep = 3;
        if (syscall(SYS_close_range, 4U, ~0U, 0U) < 0)
                for (int fd = 4; fd < 65536; fd++)
                        (void)close(fd);

        if (a->drop) {
                if (setgroups(0, NULL) < 0 || setresgid(a->gid, a->gid, a->gid) < 0 ||
                    setresuid(a->uid, a->uid, a->uid) < 0)
                        fail_rec(rep, STAGE_CREDS);
                if (getuid() == 0 || geteuid() == 0 || getgid() == 0 || getegid() == 0) {
                        errno = EPERM;
                        fail_rec(rep, STAGE_CREDS);
                }
        }
        /* After the credential change, which clears it: C dies if S does. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                fail_rec(rep, STAGE_SETUP);
        if (getppid() == 1)
                _exit(127);
        (void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);

        if (chdir(a->cwd) < 0)
                fail_rec(rep, STAGE_CHDIR);

        execve(a->interp, a->argv, a->envp);
        fail_rec(rep, STAGE_EXEC);
}

/* Move the fds S keeps to fixed numbers and close everything else, the server's stdin and
 * stdout included: S never execs, so close-on-exec does not protect it. */
static int s_arrange_fds(const struct spawn_args *a)
{
        int src[] = {a->ctl, a->out_w, a->err_w, a->rep_w};
        int hi[ELEMENTSOF(src)];

        for (size_t i = 0; i < ELEMENTSOF(src); i++) {
                hi[i] = fcntl(src[i], F_DUPFD, S_FD_FIRST_FREE);
                if (hi[i] < 0)
                        return -1;
        }
        if (dup2(a->devnull, 0) < 0 || dup2(a->devnull, 1) < 0 || dup2(a->devnull, 2) < 0)
                return -1;
        for (size_t i = 0; i < ELEMENTSOF(src); i++)
                if (dup2(hi[i], S_FD_CTL + (int)i) < 0)
                        return -1;
        if (syscall(SYS_close_range, (unsigned)S_FD_FIRST_FREE, ~0U, 0U) < 0)
                for (int fd = S_FD_FIRST_FREE; fd < 65536; fd++)
                        (void)close(fd);
        return 0;
}

static void __attribute__((noreturn)) supervisor_main(const struct spawn_args *a)
{
        struct rlimit no_core = {0, 0};
        uint64_t deadline;
        sigset_t all, chld;
        bool c_reaped = false;
        int c_status = 0, sfd;
        pid_t c;

        /* Everything blocked: S reacts to SIGCHLD through a signalfd and to nothing else. */
        sigfillset(&all);
        (void)sigprocmask(SIG_SETMASK, &all, NULL);
        if (s_arrange_fds(a) < 0)
                fail_rec(a->rep_w, STAGE_SETUP);
        deadline = sbx_now_ms() + a->kill_after_ms;
        if (setpgid(0, 0) < 0 || setrlimit(RLIMIT_CORE, &no_core) < 0 ||
            prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
                fail_rec(S_FD_REP, STAGE_SETUP);
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
                fail_rec(S_FD_REP, STAGE_SETUP);

        c = fork();
        if (c < 0)
                fail_rec(S_FD_REP, STAGE_SETUP);
        if (c == 0)
                code_exec(a);

        close(S_FD_OUT);
        close(S_FD_ERR);
        send_rec(S_FD_REP, REC_PID, 0, 0, (int)c);
        close(S_FD_REP);

        for (;;) {
                struct pollfd p[2] = {
                    {.fd = S_FD_CTL, .events = POLLIN},
                    {.fd = sfd, .events = POLLIN},
                };
                uint64_t now = sbx_now_ms();
                struct signalfd_siginfo si;
                int r, st;
                pid_t w;

                if (now >= deadline)
                        break;
                r = poll(p, 2, (int)(deadline - now));
                if (r < 0 && errno != EINTR)
                        break;
                if (r <= 0)
                        continue;
                if (p[0].revents)
                        break; /* a kill request, or the server is gone (EOF) */
                while (read(sfd, &si, sizeof(si)) > 0)
                        ;
                /* Reap what exited; orphans of the run land here too. */
                while ((w = waitpid(-1, &st, WNOHANG | __WALL)) > 0)
                        if (w == c) {
                                c_reaped = true;
                                c_status = st;
                        }
                if (c_reaped)
                        break;
        }
        s_kill_all(c, &c_reaped, &c_status);
        send_rec(S_FD_CTL, REC_DONE, 0, 0, c_status);
        s_mirror(c_status);
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

static int stage_error(const struct sbx_config *cfg, bool drop, const char *interp,
                       const struct naive_rec *rec, struct sbx_error *err)
{
        switch (rec->stage) {
        case STAGE_CHDIR:
                return sbx_fail(err, rec->err,
                                "cannot enter the workspace '%s'%s: %s; give the user that runs "
                                "code access to it and retry",
                                cfg->workspace_dir, drop ? " as VESTIBULE_RUN_AS's user" : "",
                                strerror(rec->err));
        case STAGE_CREDS:
                return sbx_fail(err, rec->err,
                                "cannot switch to VESTIBULE_RUN_AS=%u:%u: %s; set it to an "
                                "unprivileged uid:gid and restart",
                                (unsigned)cfg->run_as_uid, (unsigned)cfg->run_as_gid,
                                strerror(rec->err));
        case STAGE_EXEC:
                return sbx_fail(err, rec->err, "cannot execute '%s': %s; retry", interp,
                                strerror(rec->err));
        default:
                return sbx_fail(err, rec->err, "cannot set up the run's processes: %s; retry",
                                strerror(rec->err));
        }
}

/* --- the sandbox ops ------------------------------------------------------------------- */

static void close_fdp_locked(int *fd)
{
        if (*fd >= 0) {
                close(*fd);
                *fd = -1;
        }
}

static struct naive_sandbox *naive_sandbox_free(struct naive_sandbox *nb)
{
        if (!nb)
                return NULL;
        if (nb->tmpdir)
                remove_tree(nb->tmpdir);
        free(nb->tmpdir);
        free(nb->interp);
        pthread_mutex_destroy(&nb->lock);
        free(nb);
        return NULL;
}

static void naive_sandbox_freep(struct naive_sandbox **p)
{
        *p = naive_sandbox_free(*p);
}

/* The host's interpreter for @language, in *@ret (caller frees). */
static int naive_interpreter(enum sbx_language language, char **ret, struct sbx_error *err)
{
        static const char *const py[] = {"python3", NULL};
        static const char *const js[] = {"node", "nodejs", NULL};
        static const char *const sh[] = {"bash", NULL};
        static const char *const *const names[] = {
            [SBX_LANG_PYTHON] = py, [SBX_LANG_NODE] = js, [SBX_LANG_BASH] = sh};
        static const char *const pkg[] = {
            [SBX_LANG_PYTHON] = "python3", [SBX_LANG_NODE] = "nodejs", [SBX_LANG_BASH] = "bash"};

        if ((unsigned)language >= ELEMENTSOF(names))
                return sbx_fail(err, EINVAL, "unknown language");
        *ret = find_interpreter(names[language]);
        if (!*ret)
                return sbx_fail(err, ENOENT,
                                "%s is not installed on this host (looked in %s): the naive "
                                "backend runs code with the host's interpreters; install it "
                                "(apt-get install %s) and retry",
                                names[language][0], NAIVE_PATH, pkg[language]);
        return 0;
}

/* May code run at all, and as whom (@ret_drop: drop to VESTIBULE_RUN_AS)? */
static int naive_may_run(struct naive_state *st, const struct sbx_config *cfg, bool *ret_drop,
                         struct sbx_error *err)
{
        bool down;

        pthread_mutex_lock(&st->lock);
        down = st->shutting_down;
        pthread_mutex_unlock(&st->lock);
        if (down)
                return sbx_fail(err, ESHUTDOWN, "the server is shutting down: retry after restart");
        *ret_drop = geteuid() == 0;
        if (*ret_drop && (!cfg->run_as_set || cfg->run_as_uid == 0 || cfg->run_as_gid == 0))
                return sbx_fail(err, EPERM,
                                "the server runs as root, so code would run as root: start "
                                "vestibule-mcp as your own user, or set VESTIBULE_RUN_AS=uid:gid "
                                "to an unprivileged id (retry after restart)");
        return 0;
}

/* prepare: the interpreter, the workspace, the temporary folder ($HOME, the script's). */
static int naive_prepare(struct backend *b, const struct sandbox_spec *spec, struct sandbox **ret,
                         struct sbx_error *err)
{
        const struct sbx_config *cfg = spec->cfg ? spec->cfg : b->cfg;
        _cleanup_(naive_sandbox_freep) struct naive_sandbox *nb = NULL;
        bool drop = false;
        int r;

        if (spec->mode == SANDBOX_MODE_CELLS)
                return sbx_fail(err, EOPNOTSUPP,
                                "the naive backend keeps no interpreter between calls");
        /* fail closed: no egress proxy here (backend_ops.egress is false) */
        if (spec->network != RUN_NETWORK_NONE)
                return sbx_fail(err, EOPNOTSUPP,
                                "network \"allowlist\" is not available on the naive backend");
        r = naive_may_run(b->state, cfg, &drop, err);
        if (r < 0)
                return r;
        nb = xcalloc(1, sizeof(*nb));
        pthread_mutex_init(&nb->lock, NULL);
        nb->b = b;
        nb->cfg = cfg;
        nb->language = spec->language;
        nb->mode = spec->mode;
        nb->drop = drop;
        nb->pidfd = nb->out_r = nb->err_r = nb->ctl = -1;
        r = naive_interpreter(spec->language, &nb->interp, err);
        if (r < 0)
                return r;
        r = workspace_ensure(cfg->workspace_dir, err);
        if (r < 0)
                return r;
        nb->tmpdir = xstrdup("/tmp/vestibule-naive-XXXXXX");
        if (!mkdtemp(nb->tmpdir)) {
                r = errno;
                free(nb->tmpdir);
                nb->tmpdir = NULL;
                return sbx_fail(err, r,
                                "cannot create a temp dir under /tmp: %s; check that /tmp "
                                "is writable and retry",
                                strerror(r));
        }
        if (drop && chown(nb->tmpdir, cfg->run_as_uid, cfg->run_as_gid) < 0)
                return sbx_fail(err, errno, "cannot hand the temp dir '%s' to uid %u: %s",
                                nb->tmpdir, (unsigned)cfg->run_as_uid, strerror(errno));
        *ret = (struct sandbox *)TAKE_PTR(nb);
        return 0;
}

/* The program's text into @script (a new file: a session's earlier one is replaced). */
static int write_script(const struct naive_sandbox *nb, const char *script,
                        const struct run_request *req, struct sbx_error *err)
{
        _cleanup_close_ int fd = -1;
        ssize_t n;

        (void)unlink(script);
        fd = open(script, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return sbx_fail(err, errno, "cannot write the script '%s': %s", script,
                                strerror(errno));
        for (size_t off = 0; off < req->code_len;) {
                n = write(fd, req->code + off, req->code_len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return sbx_fail(err, n < 0 ? errno : EIO,
                                        "cannot write the script '%s': %s", script,
                                        strerror(n < 0 ? errno : EIO));
                off += (size_t)n;
        }
        if (nb->drop && fchown(fd, nb->cfg->run_as_uid, nb->cfg->run_as_gid) < 0)
                return sbx_fail(err, errno, "cannot hand the script '%s' to uid %u: %s", script,
                                (unsigned)nb->cfg->run_as_uid, strerror(errno));
        return 0;
}

/* The fds of one program: [0] the server's end, [1] S's, of each pipe and the socket. */
struct naive_fds {
        int devnull;
        int out[2], err[2], rep[2], ctl[2];
};

static void naive_fds_done(struct naive_fds *f)
{
        int *all[] = {&f->devnull, &f->out[0], &f->out[1], &f->err[0], &f->err[1],
                      &f->rep[0],  &f->rep[1], &f->ctl[0], &f->ctl[1]};

        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                close_fdp_locked(all[i]);
}

static int naive_fds_open(struct naive_fds *f, struct sbx_error *err)
{
        *f = (struct naive_fds){-1, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
        f->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (f->devnull < 0)
                return sbx_fail(err, errno, "cannot open /dev/null: %s", strerror(errno));
        if (pipe2(f->out, O_CLOEXEC) < 0 || pipe2(f->err, O_CLOEXEC) < 0 ||
            pipe2(f->rep, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->ctl) < 0)
                return sbx_fail(err, errno, "cannot create the run's pipes: %s; retry",
                                strerror(errno));
        return 0;
}

/* Reports from S and C until C's execve closes the last copy of the report pipe. */
static void read_reports(struct naive_sandbox *nb, int rep_r)
{
        struct naive_rec rec;
        ssize_t n;

        for (;;) {
                n = read(rep_r, &rec, sizeof(rec));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n != (ssize_t)sizeof(rec))
                        break;
                pthread_mutex_lock(&nb->lock);
                if (rec.kind == REC_PID)
                        nb->c_pgid = rec.value;
                else if (rec.kind == REC_ERR && !nb->failed_setup) {
                        nb->failed_setup = true;
                        nb->fail = rec;
                }
                pthread_mutex_unlock(&nb->lock);
        }
}

/* Fork S (which forks C and execs the interpreter); everything S and C need is built before
 * fork: no allocation after it. Return S's pid or -errno. */
static pid_t naive_fork(struct naive_sandbox *nb, const struct naive_fds *f, const char *script,
                        const struct run_request *req)
{
        char *argv[3] = {nb->interp, (char *)script, NULL};
        char *env[10] = {NULL};
        struct spawn_args sa;
        pid_t pid;

        env[0] = xstrdup("PATH=" NAIVE_PATH);
        env[1] = xasprintf("HOME=%s", nb->tmpdir);
        env[2] = xasprintf("TMPDIR=%s", nb->tmpdir);
        env[3] = xstrdup("LANG=C.UTF-8");
        env[4] = xstrdup("TZ=UTC");
        env[5] = xstrdup("PYTHONUNBUFFERED=1");
        env[6] = xstrdup("PYTHONDONTWRITEBYTECODE=1");
        env[7] = xstrdup("NO_COLOR=1");
        sa = (struct spawn_args){
            .devnull = f->devnull,
            .ctl = f->ctl[1],
            .out_w = f->out[1],
            .err_w = f->err[1],
            .rep_w = f->rep[1],
            .drop = nb->drop,
            .uid = nb->cfg->run_as_uid,
            .gid = nb->cfg->run_as_gid,
            .cwd = nb->cfg->workspace_dir,
            .interp = nb->interp,
            .argv = argv,
            .envp = env,
            .kill_after_ms = (uint64_t)req->timeout_s * 1000u + NAIVE_SUPERVISOR_GRACE_MS,
        };
        pid = fork();
        if (pid == 0)
                supervisor_main(&sa);
        if (pid < 0)
                pid = -errno;
        for (size_t i = 0; i < ELEMENTSOF(env); i++)
                free(env[i]);
        return pid;
}

/* start: the script, the pipes, S and C; the warden gets C's pipes and S's pidfd. */
static int naive_start(struct sandbox *sb, const struct run_request *req, struct sandbox_io *ret_io,
                       struct sbx_error *err)
{
        struct naive_sandbox *nb = (struct naive_sandbox *)sb;
        _cleanup_free_ char *script = NULL;
        struct naive_fds f;
        pid_t pid;
        int r;

        if (nb->started || req->language != nb->language)
                return sbx_fail(err, EINVAL, "naive sandbox: start() out of order");
        script = xasprintf("%s/%s", nb->tmpdir, sbx_language_script(req->language));
        r = write_script(nb, script, req, err);
        if (r < 0)
                return r;
        r = naive_fds_open(&f, err);
        if (r < 0)
                goto out;
        pid = naive_fork(nb, &f, script, req);
        if (pid < 0) {
                r = sbx_fail(err, -pid, "cannot start the run: fork: %s; retry", strerror(-pid));
                goto out;
        }
        pthread_mutex_lock(&nb->lock);
        nb->started = true;
        nb->pid = pid;
        nb->ctl = TAKE_FD(f.ctl[0]);
        nb->out_r = TAKE_FD(f.out[0]);
        nb->err_r = TAKE_FD(f.err[0]);
        nb->s_done = nb->killed_s = nb->failed_setup = false;
        nb->c_pgid = 0;
        pthread_mutex_unlock(&nb->lock);
        close_fdp_locked(&f.out[1]);
        close_fdp_locked(&f.err[1]);
        close_fdp_locked(&f.rep[1]);
        close_fdp_locked(&f.ctl[1]);
        read_reports(nb, f.rep[0]);
        nb->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        /* a failed setup: collect() names the stage; a kill that came during start */
        if (nb->failed_setup || nb->kill_asked)
                naive_kill(sb);
        *ret_io = (struct sandbox_io){.out_fd = nb->out_r,
                                      .err_fd = nb->err_r,
                                      .pid = pid,
                                      .pidfd = nb->pidfd,
                                      .ended_fd = -1};
        r = 0;
out:
        naive_fds_done(&f);
        return r;
}

static void set_not_measured(struct run_measure *m, const char *why)
{
        m->measured = false;
        snprintf(m->why, sizeof(m->why), "%s", why);
}

/* Reap S (it reaps every process of the run, so its rusage covers all of them), and close
 * the program's fds. Return S's wait status, or -errno. */
static int naive_reap(struct naive_sandbox *nb, struct rusage *ru)
{
        int status = 0, r = 0;

        memset(ru, 0, sizeof(*ru));
        while (nb->pid > 0 && wait4(nb->pid, &status, 0, ru) < 0)
                if (errno != EINTR) {
                        r = -errno;
                        break;
                }
        pthread_mutex_lock(&nb->lock);
        naive_poll_done(nb);
        nb->started = false;
        nb->kill_asked = false; /* the program's end was the last kill; a session goes on */
        nb->pid = 0;
        close_fdp_locked(&nb->ctl);
        close_fdp_locked(&nb->out_r);
        close_fdp_locked(&nb->err_r);
        close_fdp_locked(&nb->pidfd);
        pthread_mutex_unlock(&nb->lock);
        return r < 0 ? r : status;
}

/* collect: S's status (C's, mirrored), its CPU time, the labels and notes. */
static int naive_collect(struct sandbox *sb, const struct sandbox_watch *w, struct run_result *res,
                         struct sbx_error *err)
{
        struct naive_sandbox *nb = (struct naive_sandbox *)sb;
        struct rusage ru;
        int status = naive_reap(nb, &ru);

        snprintf(res->backend, sizeof(res->backend), "naive");
        snprintf(res->isolation, sizeof(res->isolation), "%s", NAIVE_GRADE);
        snprintf(res->image, sizeof(res->image), "host");
        set_not_measured(&res->usage.cpu_us, "naive backend has no cgroup");
        set_not_measured(&res->usage.mem_peak_bytes, "naive backend has no cgroup");
        set_not_measured(&res->usage.pids_peak, "naive backend has no cgroup");
        if (nb->cfg->workspace_ro)
                run_result_note(res, "workspace: read-write (VESTIBULE_WORKSPACE_RO is not "
                                     "enforced by the naive backend)");
        if (status < 0)
                return sbx_fail(err, -status, "cannot reap the naive run: %s", strerror(-status));
        if (nb->failed_setup) {
                res->outcome = RUN_OUTCOME_NONE;
                return stage_error(nb->cfg, nb->drop, nb->interp, &nb->fail, err);
        }
        if (w->forced == RUN_OUTCOME_NONE && WIFEXITED(status)) {
                res->outcome = RUN_OUTCOME_EXITED;
                res->exit_code = WEXITSTATUS(status);
        } else if (w->forced == RUN_OUTCOME_NONE && WIFSIGNALED(status)) {
                res->outcome = RUN_OUTCOME_SIGNALED;
                res->term_signal = WTERMSIG(status);
        }
        if (nb->s_done) {
                res->usage.cpu_us.measured = true;
                res->usage.cpu_us.value =
                    (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
                    (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
        } else {
                set_not_measured(&res->usage.cpu_us, "the run killed its supervisor process");
                run_result_note(res, "[the run killed its supervisor process: processes it "
                                     "moved out of its process group may still be running]");
        }
        return 0;
}

/* destroy: a program never collected is killed and reaped (S ends at once on the kill);
 * the temporary folder goes. */
static void naive_sandbox_destroy(struct sandbox *sb)
{
        struct naive_sandbox *nb = (struct naive_sandbox *)sb;
        struct rusage ru;

        if (nb->started) {
                naive_kill(sb);
                (void)naive_reap(nb, &ru);
        }
        naive_sandbox_free(nb);
}

static const struct sandbox_ops naive_sandbox_ops = {
    .prepare = naive_prepare,
    .start = naive_start,
    .kill = naive_kill,
    .collect = naive_collect,
    .destroy = naive_sandbox_destroy,
};

/* Server exit: no new sandbox (the service's registry kills those that live). */
static void naive_shutdown(struct backend *b)
{
        struct naive_state *st = b->state;

        pthread_mutex_lock(&st->lock);
        st->shutting_down = true;
        pthread_mutex_unlock(&st->lock);
}

static void naive_destroy(struct backend *b)
{
        struct naive_state *st = b->state;

        if (!st)
                return;
        pthread_mutex_destroy(&st->lock);
        free(st);
        b->state = NULL;
}

static const struct backend_ops naive_ops = {
    .name = "naive",
    .probe = naive_probe,
    .run = sandbox_run_once,
    .sandbox = &naive_sandbox_ops,
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
