/* session.c - the server's side of one run's proxy: start it as a child process on the run's
 * listener, wait until it is ready (or Block the run: fail closed), and at the end stop it
 * and fold its record file into the run's verdicts. */
#include "egress/egress.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "egress/egress-internal.h"

#define EGRESS_START_TIMEOUT_MS 5000
#define EGRESS_STOP_GRACE_MS 1500
#define EGRESS_RECORDS_MAX_BYTES ((size_t)64 << 20)

static const char *proxy_exe = "/proc/self/exe";
static unsigned idle_timeout_ms = EGRESS_IDLE_TIMEOUT_MS;

void egress_set_proxy_exe(const char *path)
{
        proxy_exe = path;
}

void egress_set_idle_timeout_ms(unsigned ms)
{
        idle_timeout_ms = ms;
}

struct egress_session {
        pid_t pid;
        int pidfd;
        int records_fd; /* memfd the proxy appends to */
};

static const char *const env_proxy[] = {
    "HTTP_PROXY=" EGRESS_PROXY_URL,
    "HTTPS_PROXY=" EGRESS_PROXY_URL,
    "http_proxy=" EGRESS_PROXY_URL,
    "https_proxy=" EGRESS_PROXY_URL,
    "NO_PROXY=localhost,127.0.0.1,::1",
    "no_proxy=localhost,127.0.0.1,::1",
    "npm_config_proxy=" EGRESS_PROXY_URL,
    "npm_config_https_proxy=" EGRESS_PROXY_URL,
    "PYTHONUSERBASE=/workspace/.local",
    /* the user site is put on sys.path by our /sandbox/sitecustomize.py, without its .pth files
     * and its usercustomize (EGRESS_SITECUSTOMIZE) */
    "PYTHONNOUSERSITE=1",
    "PYTHONPATH=" EGRESS_PYTHON_DIR,
    "PIP_USER=1",
    "PIP_BREAK_SYSTEM_PACKAGES=1",
    "PIP_NO_CACHE_DIR=1",
    "PIP_DISABLE_PIP_VERSION_CHECK=1",
    /* npm installs into /workspace/node_modules (the working directory); require() from the
     * script in /sandbox finds it only through NODE_PATH (Node's module resolution) */
    "NODE_PATH=/workspace/node_modules",
    NULL,
};

const char egress_sitecustomize[] =
    "# Vestibule's: the workspace's python user site (PYTHONUSERBASE, where pip --user installs)\n"
    "# on sys.path where python's site module puts it, after the standard library and before\n"
    "# the system site-packages, but with no .pth file and no usercustomize run: python starts\n"
    "# with PYTHONNOUSERSITE=1, so nothing a run leaves there runs in a later one.\n"
    "import site as _site, sys as _sys\n"
    "_p = _site.getusersitepackages()\n"
    "if _p and _p not in _sys.path:\n"
    "    _s = set(_site.getsitepackages())\n"
    "    _i = next((i for i, e in enumerate(_sys.path) if e in _s), len(_sys.path))\n"
    "    _sys.path.insert(_i, _p)\n"
    "del _site, _sys, _p\n";

/* The environment is fixed: nothing of the server's own leaks in. */
const char *const egress_base_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/tmp",
    "LANG=C.UTF-8",
    "TZ=UTC",
    "PYTHONUNBUFFERED=1",
    "PYTHONDONTWRITEBYTECODE=1",
    "USER=sandbox",
    NULL,
};

const char *const *egress_sandbox_env(enum run_network network)
{
        /* the pip entries are the tail of the same list */
        return network == RUN_NETWORK_ALLOWLIST ? env_proxy : env_proxy + 8;
}

int egress_listen_unix(const char *path, int *ret_fd, struct sbx_error *err)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        _cleanup_close_ int s = -1;
        struct stat st;

        if (strlen(path) >= sizeof(a.sun_path))
                return sbx_fail(err, ENAMETOOLONG,
                                "the egress socket path '%s' is longer than %zu bytes", path,
                                sizeof(a.sun_path) - 1);
        memcpy(a.sun_path, path, strlen(path) + 1);
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
                (void)unlink(path);
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return sbx_fail(err, errno, "cannot open the egress socket: %m");
        if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0)
                return sbx_fail(err, errno, "cannot bind the egress socket '%s': %m", path);
        if (chmod(path, 0666) < 0 || listen(s, 64) < 0)
                return sbx_fail(err, errno, "cannot listen on the egress socket '%s': %m", path);
        *ret_fd = TAKE_FD(s);
        return 0;
}

/* Close every fd from @first up, in a child that may call only async-signal-safe functions:
 * close_range(2) (Linux 5.9), else one close(2) per possible fd below the fd limit. */
static void close_from(int first)
{
        if (syscall(SYS_close_range, (unsigned)first, ~0U, 0U) == 0)
                return;
        for (long fd = first, max = sysconf(_SC_OPEN_MAX); fd < (max > 0 ? max : 65536); fd++)
                (void)close((int)fd);
}

/* The proxy's child side, from the clone to execve: the child of a multi-threaded server,
 * so only async-signal-safe calls. It dies with the thread that started it (@parent); fds 0
 * and 1 become @null (the server's stdin and stdout are the MCP channel), 3, 4, 5 become
 * @lfd, @rec, @wr, and every other fd of the server is closed before execve (an Engine API
 * socket or a sandbox's sync socket left open would be the proxy's to use, and any process of
 * the proxy's uid could take it with pidfd_getfd(2): tests/adversarial/server.md). With @drop
 * it becomes @uid:@gid without supplementary groups; without, it drops them where the kernel
 * lets it (CAP_SETGID: a root server), and an unprivileged server's proxy keeps its user's
 * (setgroups(2) needs the capability; its seccomp filter then refuses unix sockets). */
__attribute__((noreturn)) static void proxy_child(int lfd, int rec, int wr, int null, pid_t parent,
                                                  bool drop, uid_t uid, gid_t gid,
                                                  const char *const *argv)
{
        static const char *const envp[] = {"LANG=C.UTF-8", NULL};

        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent)
                _exit(127);
        /* fds 3, 4, 5 = listener, records, ready: moved high first so no dup2
         * clobbers another (dup2 clears close-on-exec on the copies) */
        int fl = fcntl(lfd, F_DUPFD_CLOEXEC, 10), fr = fcntl(rec, F_DUPFD_CLOEXEC, 10),
            fw = fcntl(wr, F_DUPFD_CLOEXEC, 10);
        if (fl < 0 || fr < 0 || fw < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
            dup2(fl, 3) < 0 || dup2(fr, 4) < 0 || dup2(fw, 5) < 0)
                _exit(127);
        close_from(6);
        if (drop &&
            (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, gid, gid, gid) < 0 ||
             syscall(SYS_setresuid, uid, uid, uid) < 0))
                _exit(126);
        if (drop)
                prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        else /* a root server without VESTIBULE_RUN_AS; an unprivileged one may not (EPERM) */
                (void)syscall(SYS_setgroups, 0, NULL);
        /* nothing the proxy execs may gain privileges (it execs nothing after this) */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                _exit(126);
        execve(proxy_exe, (char *const *)argv, (char *const *)envp);
        _exit(127);
}

/* Wait (at most EGRESS_START_TIMEOUT_MS) for the proxy @pid to say it is ready ('R' on @rd);
 * else kill it through @pidfd, reap it, and say why. */
static int wait_proxy_ready(int rd, pid_t pid, int pidfd, struct sbx_error *err)
{
        struct pollfd pfd = {.fd = rd, .events = POLLIN};
        char go = 0;
        int r;

        do
                r = poll(&pfd, 1, EGRESS_START_TIMEOUT_MS);
        while (r < 0 && errno == EINTR);
        if (r > 0 && read(rd, &go, 1) != 1)
                go = 0;
        if (go != 'R') {
                int st = 0;
                syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                        ;
                if (r == 0)
                        return sbx_fail(err, ETIMEDOUT,
                                        "the egress proxy did not start within %d ms (is the "
                                        "host overloaded?); the run gets no network: retry",
                                        EGRESS_START_TIMEOUT_MS);
                return sbx_fail(err, ECHILD,
                                "the egress proxy could not start (%s %d; its reason is in the "
                                "server's log): the run gets no network",
                                WIFSIGNALED(st) ? "killed by signal" : "exit status",
                                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        }
        return 0;
}

int egress_session_start(const struct sbx_config *cfg, int listen_fd, struct egress_session **ret,
                         struct sbx_error *err)
{
        _cleanup_close_ int lfd = listen_fd, rec = -1, rd = -1, wr = -1, pidfd = -1, null = -1;
        const struct sbx_egress *e = &cfg->egress;
        char idle_s[16];
        const char *argv[] = {"vestibule-mcp",
                              "egress-proxy",
                              "--allow",
                              e->allow_raw ? e->allow_raw : "",
                              "--ports",
                              e->ports_raw ? e->ports_raw : "",
                              "--pin",
                              e->pin_raw ? e->pin_raw : "",
                              "--idle-ms",
                              idle_s,
                              NULL};
        bool drop = geteuid() == 0 && cfg->run_as_set;
        uid_t uid = cfg->run_as_uid;
        gid_t gid = cfg->run_as_gid;
        struct egress_session *s;
        pid_t parent = getpid(), pid;
        int p[2], r;

        if (lfd < 0)
                return sbx_fail(err, EBADF, "no egress listener to serve");
        snprintf(idle_s, sizeof(idle_s), "%u", idle_timeout_ms);
        rec = memfd_create("vst-egress-records", MFD_CLOEXEC);
        if (rec < 0)
                return sbx_fail(err, errno, "cannot create the egress record file: %m");
        if (pipe2(p, O_CLOEXEC) < 0)
                return sbx_fail(err, errno, "cannot create the egress proxy's ready pipe: %m");
        rd = p[0];
        wr = p[1];
        null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0)
                return sbx_fail(err, errno, "cannot open /dev/null for the egress proxy: %m");

        pid = (pid_t)syscall(SYS_clone, SIGCHLD | CLONE_PIDFD, NULL, &pidfd, NULL, 0);
        if (pid < 0)
                return sbx_fail(err, errno, "cannot start the egress proxy: %m");
        if (pid == 0)
                proxy_child(lfd, rec, wr, null, parent, drop, uid, gid, argv);
        close(TAKE_FD(lfd)); /* the proxy holds the only copy: its death refuses the run */
        close(TAKE_FD(wr));

        r = wait_proxy_ready(rd, pid, pidfd, err);
        if (r < 0)
                return r;
        s = xcalloc(1, sizeof(*s));
        s->pid = pid;
        s->pidfd = TAKE_FD(pidfd);
        s->records_fd = TAKE_FD(rec);
        *ret = s;
        return 0;
}

/* The refused entries kept apart (each host, port and reason); later refusals are counted in
 * records_dropped. Allowed entries are always kept: their hosts are the allowlist's, and their
 * bytes are what left the machine. */
#define EGRESS_REFUSED_ENTRIES 64

static struct run_egress_entry *entry_for(struct run_egress *g, const char *host, uint16_t port,
                                          bool allowed, const char *reason)
{
        size_t refused = 0;

        for (size_t i = 0; i < g->n_entries; i++) {
                struct run_egress_entry *x = &g->entries[i];
                if (x->port == port && x->allowed == allowed && x->reason == reason &&
                    strcmp(x->host, host) == 0)
                        return x;
                refused += !x->allowed;
        }
        if (!allowed && refused >= EGRESS_REFUSED_ENTRIES)
                return NULL;
        GREEDY_REALLOC(g->entries, g->cap_entries, g->n_entries + 1);
        struct run_egress_entry *x = &g->entries[g->n_entries++];
        memset(x, 0, sizeof(*x));
        memcpy(x->host, host, strnlen(host, sizeof(x->host) - 1));
        x->port = port;
        x->allowed = allowed;
        x->reason = reason;
        return x;
}

/* The allowed connections seen in "D" lines, by id, until their "C" line. */
struct open_conns {
        struct {
                unsigned long long id;
                size_t entry;
                bool ended;
        } * v;
        size_t n, cap;
};

/* Fold one record line @line into @ret, with @open. */
static void fold_line(const char *line, struct run_egress *ret, struct open_conns *open)
{
        char host[256];
        unsigned long long id, a, b;
        int allowed, reason;
        unsigned port;

        if (sscanf(line, "D %llu %d %u %d %255s", &id, &allowed, &port, &reason, host) == 5 &&
            port <= 65535 && reason >= 0 && reason < EGRESS_WHY_COUNT) {
                struct run_egress_entry *x =
                    entry_for(ret, host, (uint16_t)port, allowed == 1,
                              allowed == 1 ? NULL : egress_reason_text((enum egress_reason)reason));
                if (!x) {
                        ret->records_dropped++;
                        return;
                }
                x->connections++;
                if (!x->allowed)
                        return;
                x->bytes_unknown++; /* until its "C" line comes */
                GREEDY_REALLOC(open->v, open->cap, open->n + 1);
                open->v[open->n].id = id;
                open->v[open->n].entry = (size_t)(x - ret->entries);
                open->v[open->n++].ended = false;
        } else if (sscanf(line, "C %llu %llu %llu", &id, &a, &b) == 3) {
                for (size_t k = open->n; k-- > 0;)
                        if (open->v[k].id == id && !open->v[k].ended) {
                                struct run_egress_entry *x = &ret->entries[open->v[k].entry];
                                x->bytes_up += a;
                                x->bytes_down += b;
                                x->bytes_unknown--;
                                open->v[k].ended = true;
                                break;
                        }
        } else if (sscanf(line, "M %llu", &a) == 1) {
                ret->records_dropped += a;
        }
}

void egress_records_parse(const char *buf, size_t len, struct run_egress *ret)
{
        struct open_conns open = {0};
        size_t i = 0;

        while (i < len) {
                const char *nl = memchr(buf + i, '\n', len - i);
                char line[400];
                size_t ll;

                if (!nl)
                        break; /* a torn last line (the proxy was killed mid-write) */
                ll = (size_t)(nl - (buf + i));
                if (ll < sizeof(line)) {
                        memcpy(line, buf + i, ll);
                        line[ll] = '\0';
                        fold_line(line, ret, &open);
                }
                i += ll + 1;
        }
        free(open.v);
}

void egress_session_finish(struct egress_session *s, struct run_egress *ret)
{
        _cleanup_free_ char *buf = NULL;
        struct stat st_rec;
        size_t cap = 1;
        int st = 0;
        bool died_early = false;
        size_t len = 0;

        if (!s)
                return;
        ret->on = true;
        /* Did it die before we stop it? */
        {
                siginfo_t si = {0};
                if (waitid((idtype_t)P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) ==
                        0 &&
                    si.si_pid != 0)
                        died_early = true;
        }
        if (!died_early) {
                struct pollfd pfd = {.fd = s->pidfd, .events = POLLIN};
                syscall(SYS_pidfd_send_signal, s->pidfd, SIGTERM, NULL, 0);
                if (poll(&pfd, 1, EGRESS_STOP_GRACE_MS) <= 0)
                        syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
        }
        while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (died_early)
                snprintf(ret->note, sizeof(ret->note),
                         "the egress proxy ended during the run (%s %d): connections after that "
                         "were refused, none went out",
                         WIFSIGNALED(st) ? "killed by signal" : "exit status",
                         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));

        /* all of it (allowed connections are never dropped), up to a bound no run reaches */
        if (fstat(s->records_fd, &st_rec) == 0 && st_rec.st_size > 0)
                cap = (size_t)st_rec.st_size < EGRESS_RECORDS_MAX_BYTES ? (size_t)st_rec.st_size
                                                                        : EGRESS_RECORDS_MAX_BYTES;
        buf = xmalloc(cap);
        while (len < cap) {
                ssize_t n = pread(s->records_fd, buf + len, cap - len, (off_t)len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        egress_records_parse(buf, len, ret);
        close(s->pidfd);
        close(s->records_fd);
        free(s);
}
