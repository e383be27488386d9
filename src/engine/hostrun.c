/* hostrun.c - `vestibule-mcp run -- CMD` on a local container engine (hostrun.h): the host
 * view as the container's mounts on top of run_code's locked-down body (body.c), stdio through
 * FIFOs in a private folder bound at /sandbox, a lifeline FIFO, the wait's status as the
 * exit-code contract. docs/run-command.md, "The container backend". */
#include "engine/hostrun.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "engine/conn.h"
#include "engine/container.h"
#include "engine/engine.h"
#include "engine/state.h"
#include "run/backend.h"
#include "run/run.h"

/* a forwarded SIGINT/SIGTERM/SIGHUP: the container is killed this much later */
#define HOSTRUN_GRACE_MS 2000
#define HOSTRUN_KILL_WAIT_MS 5000 /* after our kill: the longest wait for the engine's answer */
#define HOSTRUN_GONE_MS 10000     /* the engine's removal of the container, at most */
#define HOSTRUN_DRAIN_MS 2000     /* after the exit: the FIFOs' writers must be gone by then */
#define HOSTRUN_ARGV_MAX 4096

struct hostrun {
        const struct sbx_config *cfg;
        const struct engine_host_req *req;
        struct backend *b;
        struct engine_state *st;
        char dir[64]; /* /tmp/vestibule-code-XXXXXX, 0700 (0755 for a root run) */
        char io[96];  /* dir/io: the FIFOs (and the egress socket), at /sandbox */
        uid_t uid;
        gid_t gid;
        char *id; /* the container */
        int in_fd, out_fd, err_fd, life_fd;
        struct engine_xfers rx;
        struct egress_session *egress;
        char wait_sh[640], relay_py[1024], relay_js[1024];
};

/* The uid:gid the command runs as, as run_code's (backend.c, run_ids()): never root. */
static int hostrun_ids(struct hostrun *h, struct sbx_error *err)
{
        if (!h->st->rootless_podman && geteuid() == 0) {
                if (!h->cfg->run_as_set || h->cfg->run_as_uid == 0)
                        return sbx_fail(err, EPERM,
                                        "run as root, the command would run as root: set "
                                        "VESTIBULE_RUN_AS=uid:gid to an unprivileged user");
                h->uid = h->cfg->run_as_uid;
                h->gid = h->cfg->run_as_gid;
                return 0;
        }
        if (h->st->rootless_docker) {
                /* the engine's uid 0 is the user itself (backend.c, run_ids()) */
                h->uid = 0;
                h->gid = 0;
                return 0;
        }
        h->uid = geteuid();
        h->gid = getegid();
        return h->uid == 0 ? sbx_fail(err, EPERM, "refusing to run a command as uid 0") : 0;
}

/* The private folder: io/ with the FIFOs, empty/ (over a masked folder), nofile (over a masked
 * file), home/ (the private $HOME), all the run user's. */
static int hostrun_dir(struct hostrun *h, struct sbx_error *err)
{
        static const char *const fifos[] = {"in", "out", "err", "life"};
        char p[160];

        snprintf(h->dir, sizeof(h->dir), "/tmp/" ENGINE_CODE_DIR_PREFIX "XXXXXX");
        if (!mkdtemp(h->dir)) {
                h->dir[0] = '\0';
                return sbx_fail(err, errno, "cannot make a folder in /tmp: %s", strerror(errno));
        }
        /* "<dir>.owner": should this process be killed, the next run's (or server's) sweep
         * removes the folder (sweep.c, engine_sweep_code_dirs()) */
        snprintf(p, sizeof(p), "%s.owner", h->dir);
        int of = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (of >= 0) {
                (void)!write(of, h->st->owner, strlen(h->st->owner));
                close(of);
        }
        snprintf(h->io, sizeof(h->io), "%s/io", h->dir);
        if (mkdir(h->io, 0700) < 0)
                return sbx_fail(err, errno, "cannot make '%s': %s", h->io, strerror(errno));
        for (size_t i = 0; i < ELEMENTSOF(fifos); i++) {
                snprintf(p, sizeof(p), "%s/%s", h->io, fifos[i]);
                if (mkfifo(p, 0600) < 0 || lchown(p, h->uid, h->gid) < 0)
                        return sbx_fail(err, errno, "cannot make the FIFO '%s': %s", p,
                                        strerror(errno));
        }
        snprintf(p, sizeof(p), "%s/empty", h->dir);
        if (mkdir(p, 0555) < 0)
                return sbx_fail(err, errno, "cannot make '%s': %s", p, strerror(errno));
        snprintf(p, sizeof(p), "%s/nofile", h->dir);
        int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
        if (fd < 0)
                return sbx_fail(err, errno, "cannot make '%s': %s", p, strerror(errno));
        close(fd);
        snprintf(p, sizeof(p), "%s/home", h->dir);
        if (mkdir(p, 0700) < 0 || chown(p, h->uid, h->gid) < 0 || chown(h->io, h->uid, h->gid) < 0)
                return sbx_fail(err, errno, "cannot make '%s': %s", p, strerror(errno));
        /* a root run: the engine's user (RUN_AS) must reach io/ and home/ */
        if (geteuid() == 0 && chmod(h->dir, 0755) < 0)
                return sbx_fail(err, errno, "cannot chmod '%s': %s", h->dir, strerror(errno));
        /* the readers and the lifeline's writer now: the container's opens never block on us */
        snprintf(p, sizeof(p), "%s/out", h->io);
        h->out_fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        snprintf(p, sizeof(p), "%s/err", h->io);
        h->err_fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        snprintf(p, sizeof(p), "%s/life", h->io);
        h->life_fd = open(p, O_RDWR | O_CLOEXEC);
        /* then read-only for its owner, the command's uid: a command holding a writer would
         * keep the lifeline up past our end (tests/adversarial/server.md); with CapDrop ALL
         * it has no DAC override, and /sandbox is a read-only bind, so no chmod back */
        if (h->life_fd >= 0 && chmod(p, 0400) < 0)
                return sbx_fail(err, errno, "cannot chmod '%s': %s", p, strerror(errno));
        if (h->out_fd < 0 || h->err_fd < 0 || h->life_fd < 0)
                return sbx_fail(err, errno, "cannot open the run's FIFOs: %s", strerror(errno));
        return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
        (void)st;
        (void)f;
        if (flag == FTW_DP)
                (void)rmdir(path);
        else
                (void)unlink(path);
        return 0;
}

/* Add a bind of @src at @dst to @mounts; one already at @dst is dropped first: the later one
 * is on top, as the native view stacks them (home, --allow, --allow-read, masks), and an
 * engine refuses two mounts at one target. */
static void add_bind(json_object *mounts, const char *src, const char *dst, bool ro);

static json_object *bind_mount(const char *src, const char *dst, bool ro)
{
        json_object *o = json_object_new_object();
        json_object *bo = json_object_new_object();

        json_object_object_add(o, "Type", json_object_new_string("bind"));
        json_object_object_add(o, "Source", json_object_new_string(src));
        json_object_object_add(o, "Target", json_object_new_string(dst));
        json_object_object_add(o, "ReadOnly", json_object_new_boolean(ro));
        json_object_object_add(bo, "Propagation", json_object_new_string("rprivate"));
        json_object_object_add(o, "BindOptions", bo);
        return o;
}

static void add_bind(json_object *mounts, const char *src, const char *dst, bool ro)
{
        for (size_t i = json_object_array_length(mounts); i-- > 0;) {
                json_object *m = json_object_array_get_idx(mounts, i);
                const char *t = json_object_get_string(engine_jget(m, "Target"));
                if (t && strcmp(t, dst) == 0)
                        json_object_array_del_idx(mounts, i, 1);
        }
        json_object_array_add(mounts, bind_mount(src, dst, ro));
}

/* The host view's mounts, added to the body's (the private folder at /workspace and /sandbox). */
static void hostrun_mounts(const struct hostrun *h, json_object *mounts)
{
        const struct engine_host_req *q = h->req;
        _cleanup_free_ char *empty = xasprintf("%s/empty", h->dir);
        _cleanup_free_ char *nofile = xasprintf("%s/nofile", h->dir);
        _cleanup_free_ char *home = xasprintf("%s/home", h->dir);
        _cleanup_free_ char *self = realpath("/proc/self/exe", NULL);
        struct stat st;

        if (self) /* the init (hostinit.c) */
                add_bind(mounts, self, ENGINE_HOSTRUN_INIT, true);
        for (size_t i = 0; q->system[i]; i++)
                if (lstat(q->system[i], &st) == 0 && S_ISDIR(st.st_mode))
                        add_bind(mounts, q->system[i], q->system[i], true);
        if (q->home)
                add_bind(mounts, home, q->home, false);
        for (size_t i = 0; q->rw[i]; i++)
                add_bind(mounts, q->rw[i], q->rw[i], false);
        for (size_t i = 0; q->ro[i]; i++)
                add_bind(mounts, q->ro[i], q->ro[i], true);
        for (size_t i = 0; q->masks[i]; i++) {
                if (lstat(q->masks[i], &st) < 0 || S_ISLNK(st.st_mode))
                        continue; /* not in view, or a link (the mask would follow it) */
                add_bind(mounts, S_ISDIR(st.st_mode) ? empty : nofile, q->masks[i], true);
        }
}

/* The command: [bash -c WAIT relay...] INIT host-init EXE ARGV... (hostinit.c) */
static const char **hostrun_cmd(struct hostrun *h)
{
        const char **cmd = xcalloc(HOSTRUN_ARGV_MAX + 16, sizeof(*cmd));
        size_t n = 0;

        if (h->req->egress) {
                cmd[n++] = ENGINE_BASH_PATH;
                cmd[n++] = "-c";
                cmd[n++] = egress_relay_wait_script(EGRESS_PORT, h->wait_sh, sizeof(h->wait_sh));
                cmd[n++] = "vestibule-egress";
                cmd[n++] = h->relay_py;
                cmd[n++] = h->relay_js;
        }
        cmd[n++] = ENGINE_HOSTRUN_INIT;
        cmd[n++] = "host-init";
        cmd[n++] = h->req->exe;
        for (size_t i = 0; h->req->argv[i] && n < HOSTRUN_ARGV_MAX; i++)
                cmd[n++] = h->req->argv[i];
        return cmd;
}

/* Every mount of @asked (the body's HostConfig.Mounts) is in @inspect's Mounts at its target,
 * read-only or read-write as asked: a mask or a read-only folder the engine dropped or made
 * writable would show a secret or let the command write the host. Return 0 or -EPERM. */
static int hostrun_verify_mounts(json_object *asked, json_object *inspect, struct sbx_error *err)
{
        json_object *got = engine_jget(inspect, "Mounts");
        size_t n =
            got && json_object_is_type(got, json_type_array) ? json_object_array_length(got) : 0;

        for (size_t i = 0; i < json_object_array_length(asked); i++) {
                json_object *a = json_object_array_get_idx(asked, i);
                const char *dst = json_object_get_string(engine_jget(a, "Target"));
                bool ro = json_object_get_boolean(engine_jget(a, "ReadOnly")), found = false;

                for (size_t k = 0; k < n && !found; k++) {
                        json_object *m = json_object_array_get_idx(got, k);
                        found = dst &&
                                strcmp(json_object_get_string(engine_jget(m, "Destination")),
                                       dst) == 0 &&
                                json_object_get_boolean(engine_jget(m, "RW")) == !ro;
                }
                if (!found)
                        return sbx_fail(err, EPERM,
                                        "the container engine did not keep the %s mount at '%s' "
                                        "in the container it created, so the host view would "
                                        "not be as claimed and nothing was run: use Docker "
                                        "Engine 20.10+ or Podman 4+",
                                        ro ? "read-only" : "read-write", dst ? dst : "?");
        }
        return 0;
}

/* Create the container and check the engine kept the lockdown (engine_verify_inspect()). */
static int hostrun_create(struct hostrun *h, char *degraded, size_t size, struct sbx_error *err)
{
        const struct sbx_config *cfg = h->cfg;
        struct engine_state *st = h->st;
        _cleanup_free_ const char **cmd = hostrun_cmd(h);
        _cleanup_free_ char *empty = xasprintf("%s/empty", h->dir);
        const char *image = engine_image_for(cfg, "python");
        const char *secprof = st->seccomp_profile[0] ? st->seccomp_profile : NULL;
        _cleanup_(json_putp) json_object *inspect = NULL;
        json_object *hc, *envj, *tmpfs;

        if (!st->conn.podman && !strstr(st->grade, "no seccomp filter"))
                secprof = st->seccomp_json;
        struct engine_run_spec spec = {
            .image = image,
            .cmd = cmd,
            .uid = h->uid,
            .gid = h->gid,
            .workspace = empty,
            .workspace_ro = true,
            .code_dir = h->io,
            .memory_bytes = (uint64_t)cfg->mem_mb << 20,
            .nano_cpus = (uint64_t)cfg->cpu_pct * 10000000ull,
            .pids_max = cfg->pids_max,
            .tmpfs_mb = cfg->tmpfs_mb,
            .owner = st->owner,
            .podman = st->conn.podman,
            .userns_keep_id = st->rootless_podman,
            .init = false, /* ours: hostinit.c */
            .runtime = st->runtime[0] ? st->runtime : NULL,
            .seccomp_profile = secprof,
        };
        _cleanup_(json_putp) json_object *body = engine_create_body(&spec);
        hc = engine_jget(body, "HostConfig");
        hostrun_mounts(h, engine_jget(hc, "Mounts"));
        /* the command's environment as given (no HOME=/tmp of run_code's), its folder, and
         * removed by the engine once it ends (also when we are gone: the lifeline) */
        envj = json_object_new_array();
        for (size_t i = 0; h->req->envp[i]; i++)
                json_object_array_add(envj, json_object_new_string(h->req->envp[i]));
        json_object_object_add(body, "Env", envj);
        json_object_object_add(body, "WorkingDir", json_object_new_string(h->req->cwd));
        json_object_object_add(hc, "AutoRemove", json_object_new_boolean(true));
        /* /var/tmp and /run of the body are read-only tmpfs: a project under /var/tmp needs its
         * mount point made, which the read-only rootfs allows until it is made read-only */
        tmpfs = engine_jget(hc, "Tmpfs");
        json_object_object_del(tmpfs, "/var/tmp");
        int r = engine_container_create(st, body, image, "create the run's container", &h->id, err);
        if (r == 0)
                r = engine_container_inspect(st, h->id, spec.userns_keep_id, &inspect, err);
        if (r == 0)
                r = engine_verify_inspect(inspect, &spec, degraded, size, err);
        if (r == 0)
                r = hostrun_verify_mounts(engine_jget(hc, "Mounts"), inspect, err);
        return r;
}

/* Forward @sig to the command (the container's init passes it on). */
static void hostrun_signal(struct hostrun *h, int sig)
{
        char name[16];
        struct engine_reply rep = {0};
        struct sbx_error e = {0};

        snprintf(name, sizeof(name), "%d", sig);
        struct engine_call kill = {.path = "/containers/{}/kill",
                                   .parts = {h->id},
                                   .query = {{"signal", name}},
                                   .ok = {204, 404, 409},
                                   .timeout_ms = 5000,
                                   .what = "signal the run's container"};
        (void)engine_post(&h->st->conn, &kill, &rep, &e);
        engine_reply_done(&rep);
}

/* Copy what @fd has to @to; false at its end (EOF or an error) or when @to's reader is gone
 * (EPIPE: SIGPIPE is ignored for the run, run_container.c). */
static bool relay_out(int fd, int to)
{
        char buf[65536];
        ssize_t n = read(fd, buf, sizeof(buf));

        if (n < 0)
                return errno == EAGAIN || errno == EINTR;
        if (n == 0)
                return false;
        for (ssize_t off = 0; off < n;) {
                ssize_t w = write(to, buf + off, (size_t)(n - off));
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0 && errno == EPIPE)
                        return false; /* its reader is gone: so is ours (the command's next
                                       * write gets EPIPE/SIGPIPE, as it would outside) */
                if (w <= 0)
                        return true; /* another error: drop, keep draining */
                off += w;
        }
        return true;
}

/* The attach stream: the container's own stdout/stderr (the wrapper's and the relay's
 * messages before the FIFOs are opened) to our stderr. */
static void hostrun_emit(void *ud, int stream, const char *buf, size_t n)
{
        (void)ud;
        (void)stream;
        (void)!write(STDERR_FILENO, buf, n);
}

struct hostrun_stdin {
        int fd;           /* our writer of io/in, -1 until the container opened it */
        bool eof, closed; /* our stdin ended; the writer closed */
        char buf[65536];
        size_t len, off;
};

/* Move our stdin into io/in: opened (O_NONBLOCK, so ENXIO until the container's reader is
 * there), fed, and closed after our stdin's end, so the command reads that end. */
static void hostrun_stdin_step(struct hostrun *h, struct hostrun_stdin *s, bool readable)
{
        if (s->closed)
                return;
        if (s->fd < 0) {
                _cleanup_free_ char *p = xasprintf("%s/in", h->io);
                s->fd = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
                if (s->fd < 0)
                        return;
        }
        if (!s->eof && s->len == s->off && readable) {
                ssize_t n = read(STDIN_FILENO, s->buf, sizeof(s->buf));
                if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR)))
                        s->eof = true;
                else if (n > 0) {
                        s->len = (size_t)n;
                        s->off = 0;
                }
        }
        while (s->off < s->len) {
                ssize_t w = write(s->fd, s->buf + s->off, s->len - s->off);
                if (w < 0 && errno == EAGAIN)
                        return;
                if (w <= 0) { /* the command closed its stdin: drop the rest */
                        s->eof = true;
                        s->off = s->len;
                        break;
                }
                s->off += (size_t)w;
        }
        if (s->eof && s->off == s->len) {
                close(s->fd);
                s->fd = -1;
                s->closed = true;
        }
}

/* The contract's code into @ret from the wait's answer: 124 for our timeout's kill, 128+N for
 * a forwarded signal N whose grace ran out (@killed), else the container's status. */
static void hostrun_status(const struct hostrun *h, bool killed, struct engine_host_result *ret)
{
        json_object *sc = NULL;

        if (h->rx.wait.done && h->rx.wait.rc == 0 &&
            json_object_object_get_ex(h->rx.wait.rep.json, "StatusCode", &sc))
                ret->exit_code = json_object_get_int(sc);
        else
                ret->exit_code = 128 + SIGKILL;
        if (ret->timed_out)
                ret->exit_code = 124;
        else if (killed && ret->cancel_signal)
                ret->exit_code = 128 + ret->cancel_signal;
}

/* Pump until the wait's answer (or our kill's end); the contract's code into @ret. */
static void hostrun_loop(struct hostrun *h, struct engine_host_result *ret)
{
        const struct engine_host_req *q = h->req;
        struct hostrun_stdin in = {.fd = -1};
        uint64_t t0 = sbx_now_ms(), t_cancel = 0, t_kill = 0, t_exit = 0;
        bool out_open = true, err_open = true;
        int stdin_fl = fcntl(STDIN_FILENO, F_GETFL);

        in.eof = stdin_fl < 0;
        for (;;) {
                struct pollfd fds[40];
                int timeout = 100;
                unsigned n = engine_xfers_fds(&h->rx, fds, 32, &timeout);
                int i_in = -1, i_out = -1, i_err = -1, i_sig = -1;
                uint64_t now = sbx_now_ms();

                if (!in.eof && in.fd >= 0 && in.len == in.off) {
                        i_in = (int)n;
                        fds[n++] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
                }
                if (in.fd < 0 && !in.closed)
                        timeout = timeout > 20 ? 20 : timeout; /* the reader's open */
                if (out_open)
                        fds[i_out = (int)n, n++] =
                            (struct pollfd){.fd = h->out_fd, .events = POLLIN};
                if (err_open)
                        fds[i_err = (int)n, n++] =
                            (struct pollfd){.fd = h->err_fd, .events = POLLIN};
                if (q->cancel_fd >= 0)
                        fds[i_sig = (int)n, n++] =
                            (struct pollfd){.fd = q->cancel_fd, .events = POLLIN};
                (void)poll(fds, n, timeout);
                hostrun_stdin_step(h, &in, i_in >= 0 && fds[i_in].revents != 0);
                if (i_out >= 0 && fds[i_out].revents && !relay_out(h->out_fd, STDOUT_FILENO)) {
                        out_open = false;
                        close(TAKE_FD(h->out_fd));
                }
                if (i_err >= 0 && fds[i_err].revents && !relay_out(h->err_fd, STDERR_FILENO)) {
                        err_open = false;
                        close(TAKE_FD(h->err_fd));
                }
                if (i_sig >= 0 && (fds[i_sig].revents & POLLIN)) {
                        struct signalfd_siginfo si;
                        if (read(q->cancel_fd, &si, sizeof(si)) == (ssize_t)sizeof(si) &&
                            si.ssi_signo != SIGWINCH) {
                                ret->cancel_signal = (int)si.ssi_signo;
                                t_cancel = t_cancel ? t_cancel : now;
                                hostrun_signal(h, (int)si.ssi_signo);
                        }
                }
                h->rx.a.emit = hostrun_emit;
                engine_xfers_pump(&h->rx);
                now = sbx_now_ms();
                bool deadline = q->timeout_ms && now - t0 >= q->timeout_ms;
                bool grace_over = t_cancel && now - t_cancel >= HOSTRUN_GRACE_MS;
                if (!h->rx.wait.done && !t_kill && (deadline || grace_over)) {
                        struct sbx_error ke = {0};
                        ret->timed_out = deadline && !t_cancel;
                        (void)engine_xfers_kill(&h->rx, &h->st->conn, h->id, &ke);
                        t_kill = now;
                }
                if (h->rx.wait.done && !t_exit)
                        t_exit = now;
                bool drained =
                    (!out_open && !err_open) || (t_exit && now - t_exit > HOSTRUN_DRAIN_MS);
                if ((t_exit && drained) || (t_kill && now - t_kill > HOSTRUN_KILL_WAIT_MS))
                        break;
        }
        if (in.fd >= 0)
                close(in.fd);
        ret->wall_ms = sbx_now_ms() - t0;
        hostrun_status(h, t_kill != 0, ret);
}

/* Connect, probe, refuse the volume path; the run's ids and folder. */
static int hostrun_prepare(struct hostrun *h, struct engine_host_result *ret, struct sbx_error *err)
{
        struct backend_probe p;
        int r = engine_backend_new(h->cfg, &h->b, err);

        if (r < 0)
                return r;
        h->st = h->b->state;
        /* the image is only the scaffold here (every program is the host's): whether it is
         * pinned does not change what runs, so the probe does not warn about it */
        h->st->warned_unpinned = true;
        r = h->b->ops->probe(h->b, &p, err);
        if (r < 0)
                return r;
        if (!p.usable)
                return sbx_fail(err, EHOSTDOWN, "the container backend is not usable here: %s",
                                p.blocked);
        if (h->st->volumes)
                return sbx_fail(err, EOPNOTSUPP,
                                "run -- CMD on the container backend binds this machine's folders "
                                "into the container, and the engine at '%s' does not see them "
                                "(a remote engine, or one in a VM: the volume path): use the "
                                "native backend (unset VESTIBULE_BACKEND) or a local engine",
                                h->st->conn.ep.host);
        snprintf(ret->grade, sizeof(ret->grade), "%s", p.grade);
        ret->degraded = p.degraded;
        (void)engine_sweep_code_dirs(); /* those of runs killed before (the lifeline ended
                                         * their containers; AutoRemove removed them) */
        r = hostrun_ids(h, err);
        if (r == 0)
                r = hostrun_dir(h, err);
        if (r == 0 && h->req->egress &&
            (egress_relay_source("python3", ENGINE_EGRESS_SOCK_IN, EGRESS_PORT, h->relay_py,
                                 sizeof(h->relay_py)) < 0 ||
             egress_relay_source("node", ENGINE_EGRESS_SOCK_IN, EGRESS_PORT, h->relay_js,
                                 sizeof(h->relay_js)) < 0))
                r = sbx_fail(err, ENOSPC, "egress: the relay's source does not fit");
        return r;
}

/* The proxy's refusals into @ret->tried (as src/native/hostrun.c's tried_egress()). */
static void hostrun_tried(const struct run_egress *eg, struct engine_host_result *ret)
{
        for (size_t i = 0; i < eg->n_entries; i++) {
                const struct run_egress_entry *e = &eg->entries[i];
                size_t len = strlen(ret->tried);
                char what[400];

                if (e->allowed)
                        continue;
                snprintf(what, sizeof(what), "proxy refused %.256s:%u (%s)", e->host, e->port,
                         e->reason ? e->reason : "refused");
                if (len + strlen(what) + 3 < sizeof(ret->tried))
                        snprintf(ret->tried + len, sizeof(ret->tried) - len, "%s%s",
                                 len ? ", " : "", what);
        }
}

/* Remove the container and wait until the engine no longer lists it (AutoRemove may be
 * removing it already: then the forced removal answers 409), at most HOSTRUN_GONE_MS: a run
 * that returned left nothing. */
static void hostrun_remove(struct hostrun *h)
{
        struct sbx_error e = {0};
        uint64_t t0 = sbx_now_ms();

        (void)container_remove(&h->st->conn, h->id, &e);
        while (sbx_now_ms() - t0 < HOSTRUN_GONE_MS) {
                struct engine_reply rep = {0};
                struct engine_call get = {.path = "/containers/{}/json",
                                          .parts = {h->id},
                                          .ok = {200},
                                          .timeout_ms = 5000,
                                          .what = "inspect the run's container"};
                int r = engine_get(&h->st->conn, &get, &rep, &e);
                engine_reply_done(&rep);
                if (r == -ENOENT)
                        return;
                if (r < 0 && r != -EBUSY)
                        break;
                usleep(50 * 1000);
                (void)container_remove(&h->st->conn, h->id, &e);
        }
}

static void hostrun_done(struct hostrun *h, struct engine_host_result *ret)
{
        engine_xfers_done(&h->rx);
        if (h->id) {
                hostrun_remove(h);
                free(h->id);
        }
        if (h->egress) {
                struct run_egress eg = {0};
                egress_session_finish(h->egress, &eg);
                hostrun_tried(&eg, ret);
                free(eg.entries);
                engine_egress_end(h->io);
        }
        int fds[] = {h->out_fd, h->err_fd, h->life_fd};
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        if (h->dir[0]) {
                _cleanup_free_ char *of = xasprintf("%s.owner", h->dir);
                (void)nftw(h->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
                (void)unlink(of);
        }
        h->b = backend_free(h->b);
}

int engine_host_run(const struct sbx_config *cfg, const struct engine_host_req *req,
                    struct engine_host_result *ret, struct sbx_error *err)
{
        struct hostrun h = {
            .cfg = cfg, .req = req, .in_fd = -1, .out_fd = -1, .err_fd = -1, .life_fd = -1};
        char degraded[160] = "";
        int r;

        memset(ret, 0, sizeof(*ret));
        size_t argc = 0;
        while (req->argv[argc])
                argc++;
        if (argc > HOSTRUN_ARGV_MAX)
                return sbx_fail(err, E2BIG,
                                "%zu arguments: the container backend passes at most %d; use "
                                "fewer (xargs) or the native backend",
                                argc, HOSTRUN_ARGV_MAX);
        r = hostrun_prepare(&h, ret, err);
        if (r == 0 && req->egress)
                r = engine_egress_begin(h.io, cfg, &h.egress, err);
        if (r == 0)
                r = hostrun_create(&h, degraded, sizeof(degraded), err);
        if (r == 0 && degraded[0]) {
                snprintf(ret->grade, sizeof(ret->grade),
                         "container-degraded (limits not applied: %s)", degraded);
                ret->degraded = true;
        }
        if (r == 0)
                r = engine_xfers_arm(&h.rx, &h.st->conn, h.id, err);
        if (r == 0)
                r = engine_container_start(&h.st->conn, h.id, engine_image_for(cfg, "python"), err);
        if (r == 0)
                hostrun_loop(&h, ret);
        hostrun_done(&h, ret);
        return r;
}

void engine_host_grade(const struct sbx_config *cfg, char *grade, size_t size)
{
        struct backend *b = NULL;
        struct backend_probe p;
        struct sbx_error err = {0};
        struct engine_state *st;

        snprintf(grade, size, "unknown (the container engine could not be asked)");
        if (engine_backend_new(cfg, &b, &err) < 0)
                return;
        st = b->state;
        st->warned_unpinned = true; /* as in hostrun_prepare() */
        if (b->ops->probe(b, &p, &err) < 0 || !p.usable)
                snprintf(grade, size, "unknown (%s)", p.usable ? err.msg : p.blocked);
        else if (st->volumes)
                snprintf(grade, size, "unknown (a remote engine: run -- CMD is refused there)");
        else
                snprintf(grade, size, "%s", p.grade);
        backend_free(b);
}
