/* cells.c - the gvisor backend's sessions (SANDBOX_MODE_CELLS, src/run/sandbox.h): one runsc
 * sandbox per session, built like a one-shot run's (backend.c, box.h) but running the
 * language's runner (src/run/runners/, the same as native's) under a bash wrapper, kept between
 * calls. The cells come in and the status records go out through FIFOs the server makes in the
 * session's channel folder, which the sandbox sees at /sandbox/chan (read-write: the Sentry
 * refuses a FIFO's write open on a read-only mount, EROFS, measured); runsc runs with
 * --host-fifo=open, so the Sentry opens them through the gofer (measured: runsc 20221219 and
 * 20240729). The runner's fd 5 is the status FIFO; its fd 4 is a pipe of the Sentry's that a
 * cat fills from the cells FIFO, because a read blocked on a host FIFO holds the reading
 * process's address space (below). The user's stdout and stderr are runsc's own pipes, so no
 * output can end a cell; the runner's flush before its record orders them (the Sentry writes
 * host fds synchronously). A third FIFO, "ctl", carries the interrupt: the wrapper sends SIGINT
 * to the runner's process group for each line the server writes there (the Sentry's tasks are
 * not seen from the host). The session lives as long as the server's sessions thread (runsc
 * dies with it: PR_SET_PDEATHSIG, runsc.c). See docs/design/sessions.md, "The gvisor backend". */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "gvisor/box.h"
#include "run/runners.h"
#include "run/sandbox.h"

/* The runner's "ready" record must come within this long of runsc's start (a cold node under
 * CI load takes seconds). */
#define CELLS_READY_MS 30000
/* A cell must be handed in within this long (the runner reads it at once between cells). */
#define CELLS_WRITE_MS 5000

enum { F_CELLS, F_STATUS, F_CTL, F_N };
static const char *const fifo_names[F_N] = {"cells", "status", "ctl"};

/* The sandbox's program: bash opens the FIFOs, starts a cat that copies the cells FIFO into a
 * pipe of the Sentry's (fd 4), starts the runner ("$@") in a process group of its own (set -m)
 * with fds 4 and 5, and then waits: a line on "ctl" (fd 3) is SIGINT to the runner's group; the
 * runner's end (SIGCHLD, trapped: bash's read returns > 128) or ctl's EOF (the server closed
 * it) ends the wait. Then it kills every other process (kill -1 spares itself) and exits, which
 * ends the sandbox and runsc. Why the cat: runsc 20240729 opens a host FIFO blocking (directfs
 * adds no O_NONBLOCK) and reads it inside MemoryManager.CopyOutFrom, which holds the process's
 * activeMu (read) for the whole host read (gVisor release-20240729.0:
 * pkg/sentry/fsimpl/gofer/special_file.go PRead, pkg/sentry/mm/io.go withVecInternalMappings).
 * Every mmap, mprotect or page fault of another thread of the reader waits for that lock, so a
 * runner reading its next cell stalled its own threads until the server sent one: node's libuv
 * thread reads fd 4 while its main thread runs the cell, whose JIT mprotect then hung before
 * the status record (runsc --strace: mprotect entered, never left), and a python thread that
 * allocates made one step per cell. The cat is the only reader of the host FIFO and has no
 * other thread; the runner reads a pipe of the Sentry's, where a blocked read waits in the
 * Sentry and holds no lock (tests/adversarial/server.md). The wrapper opens the FIFO itself
 * (fd 6) so the read end exists before the runner's "ready" (the server then drops its own
 * O_RDWR end: no reader would be EPIPE). */
static const char cells_wrapper[] =
    "exec 6</sandbox/chan/cells 5>/sandbox/chan/status 3</sandbox/chan/ctl || exit 127; "
    "exec 4< <(exec cat <&6 6<&- 3<&- 5>&- 2>/dev/null) 6<&- || exit 127; "
    "set -m; \"$@\" 3<&- & r=$!; exec 4<&- 5>&- >/dev/null 2>&1 </dev/null; "
    "trap : CHLD; "
    "while kill -0 $r; do "
    "read -r _ <&3; s=$?; "
    "if [ $s = 0 ]; then kill -INT -- -$r; elif [ $s -le 128 ]; then break; fi; "
    "done; kill -KILL -1; exit 0";

struct sandbox {
        struct gvisor_box *box;
        enum sbx_language lang;
        int fd[F_N]; /* ours: the cells' write end, the status read end, ctl's write end */
        int out_fd, err_fd, pidfd; /* the box's (runsc's pipes and pidfd), not ours to close */
        long long seq;
        struct sbx_runner_records rec;
        pthread_mutex_t lock;
        bool dead;
};

static void cells_free(struct sandbox *sb)
{
        if (!sb)
                return;
        for (size_t i = 0; i < F_N; i++)
                if (sb->fd[i] >= 0)
                        close(sb->fd[i]);
        gvisor_box_free(sb->box);
        pthread_mutex_destroy(&sb->lock);
        free(sb);
}

static void cells_freep(struct sandbox **sb)
{
        cells_free(*sb);
}

static int open_fifo(const char *dir, const char *name, int flags, int *ret, struct sbx_error *err)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
        int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);

        if (fd < 0)
                return sbx_fail(err, errno, "cannot open the session's pipe '%s': %m", path);
        *ret = fd;
        return 0;
}

/* The FIFOs (0600: the sandbox's uid 0 is this user) and our ends of them, opened so that no
 * open blocks: the status read end, and cells and ctl for both (a FIFO opened O_RDWR never
 * blocks, fifo(7)). */
static int make_fifos(struct sandbox *sb, struct sbx_error *err)
{
        const char *dir = NULL;
        int r = gvisor_box_chan(sb->box, &dir, err);

        for (size_t i = 0; i < F_N && r == 0; i++) {
                _cleanup_free_ char *path = xasprintf("%s/%s", dir, fifo_names[i]);
                if (mkfifo(path, 0600) < 0 || chmod(path, 0600) < 0)
                        r = sbx_fail(err, errno, "cannot make the session's pipe '%s': %m", path);
        }
        if (r == 0)
                r = open_fifo(dir, fifo_names[F_STATUS], O_RDONLY, &sb->fd[F_STATUS], err);
        if (r == 0)
                r = open_fifo(dir, fifo_names[F_CELLS], O_RDWR, &sb->fd[F_CELLS], err);
        if (r == 0)
                r = open_fifo(dir, fifo_names[F_CTL], O_RDWR, &sb->fd[F_CTL], err);
        return r;
}

/* One status record, waiting up to @timeout_ms. Before a writer opened the FIFO a read gives 0
 * as at EOF; poll(2) says POLLHUP only once a writer came and went (fifo(7)): the runner's
 * end. Return 0, -ETIMEDOUT, -EPIPE (the runner is gone) or -EBADMSG. */
static int read_record(struct sandbox *sb, int timeout_ms, struct sbx_runner_status *ret)
{
        uint64_t until = sbx_now_ms() + (uint64_t)timeout_ms;
        int fd = sb->fd[F_STATUS];

        for (;;) {
                int t = sbx_runner_take_record(&sb->rec, ret);
                if (t != 0)
                        return t < 0 ? t : 0;
                ssize_t k = read(fd, sb->rec.buf + sb->rec.len, sizeof(sb->rec.buf) - sb->rec.len);
                if (k > 0) {
                        sb->rec.len += (size_t)k;
                        continue;
                }
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno != EAGAIN)
                        return -errno;
                uint64_t now = sbx_now_ms();
                struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                                      {.fd = sb->pidfd, .events = POLLIN}};
                int pr = poll(p, sb->pidfd >= 0 ? 2 : 1, now >= until ? 0 : (int)(until - now));
                if (pr > 0 && (p[0].revents & POLLHUP) && !(p[0].revents & POLLIN))
                        return -EPIPE;
                if (pr > 0 && p[1].revents && !(p[0].revents & POLLIN))
                        return -EPIPE; /* runsc ended before the runner ever wrote */
                if (pr == 0 && sbx_now_ms() >= until)
                        return -ETIMEDOUT;
        }
}

/* runsc on the wrapper, then the runner's "ready". */
static int cells_launch(struct sandbox *sb, struct sbx_error *err)
{
        const char *const *rargv = sbx_runner_argv(sb->lang);
        const char *argv[16] = {"/bin/bash", "-c", cells_wrapper, "vestibule-cells"};
        struct sbx_runner_status st;
        size_t n = 4;
        int r;

        for (; *rargv && n < ELEMENTSOF(argv) - 1; rargv++)
                argv[n++] = *rargv;
        argv[n] = NULL;
        r = gvisor_box_run(sb->box, argv, &sb->out_fd, &sb->err_fd, &sb->pidfd, err);
        if (r < 0)
                return r;
        r = read_record(sb, CELLS_READY_MS, &st);
        if (r < 0 || strcmp(st.kind, "ready") != 0) {
                char out[512] = "";
                ssize_t k = read(sb->err_fd, out, sizeof(out) - 1);
                out[k > 0 ? k : 0] = '\0';
                return sbx_fail(err, EIO,
                                "the session's %s interpreter did not start in the gvisor "
                                "sandbox%s%s (%s): run `vestibule-mcp doctor`, then retry "
                                "session_start",
                                sbx_language_name(sb->lang), out[0] ? ": " : "", out,
                                r == -ETIMEDOUT ? "no word from it" : "it ended");
        }
        (void)fcntl(sb->out_fd, F_SETFL, fcntl(sb->out_fd, F_GETFL) | O_NONBLOCK);
        (void)fcntl(sb->err_fd, F_SETFL, fcntl(sb->err_fd, F_GETFL) | O_NONBLOCK);
        size_t dropped = sbx_runner_drop_startup(sb->out_fd) + sbx_runner_drop_startup(sb->err_fd);
        if (dropped)
                log_info("gvisor session: %zu bytes the interpreter printed as it started were "
                         "dropped (a .pth file or sitecustomize.py in the workspace?)",
                         dropped);
        /* the runner holds the read end now: a write-only end, so a runner that died is EPIPE
         * at the next cell rather than a pipe that fills */
        int w = -1;
        const char *dir = NULL;
        r = gvisor_box_chan(sb->box, &dir, err);
        if (r == 0)
                r = open_fifo(dir, fifo_names[F_CELLS], O_WRONLY, &w, err);
        if (r < 0)
                return r;
        close(sb->fd[F_CELLS]);
        sb->fd[F_CELLS] = w;
        return 0;
}

static int cells_prepare(struct backend *b, const struct sandbox_spec *spec, struct sandbox **ret,
                         struct sbx_error *err)
{
        _cleanup_(cells_freep) struct sandbox *sb = NULL;
        size_t len;
        const char *src;
        int r;

        if (spec->mode != SANDBOX_MODE_CELLS)
                return sbx_fail(err, EOPNOTSUPP, "gvisor session ops: not a session");
        if (spec->spare)
                return sbx_fail(err, EOPNOTSUPP, "the gvisor backend keeps no session spares");
        if (spec->network != RUN_NETWORK_NONE)
                return sbx_fail(err, EOPNOTSUPP,
                                "a gvisor session has no network: use network \"none\"");
        sb = xcalloc(1, sizeof(*sb));
        sb->lang = spec->language;
        sb->out_fd = sb->err_fd = sb->pidfd = -1;
        for (size_t i = 0; i < F_N; i++)
                sb->fd[i] = -1;
        pthread_mutex_init(&sb->lock, NULL);
        r = gvisor_box_open(b, spec->language, true, &sb->box, err);
        if (r < 0)
                return r;
        src = sbx_runner_source(spec->language, &len);
        r = gvisor_box_write(sb->box, sbx_language_script(spec->language), src, len, true, err);
        if (r == 0)
                r = make_fifos(sb, err);
        if (r == 0)
                r = cells_launch(sb, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(sb);
        return 0;
}

static bool runner_alive(struct sandbox *sb)
{
        struct pollfd p[2] = {{.fd = sb->fd[F_STATUS], .events = 0},
                              {.fd = sb->pidfd, .events = POLLIN}};

        /* the status FIFO: POLLHUP once the runner closed it; runsc's pidfd: readable once
         * the sandbox ended */
        return poll(p, sb->pidfd >= 0 ? 2 : 1, 0) == 0;
}

static void cells_kill(struct sandbox *sb)
{
        pthread_mutex_lock(&sb->lock);
        sb->dead = true;
        pthread_mutex_unlock(&sb->lock);
        gvisor_box_kill(sb->box);
}

static bool cells_alive(struct sandbox *sb)
{
        bool dead;

        pthread_mutex_lock(&sb->lock);
        dead = sb->dead;
        pthread_mutex_unlock(&sb->lock);
        return !dead && runner_alive(sb);
}

/* A line on ctl: the wrapper sends SIGINT to the runner's group (python's KeyboardInterrupt,
 * bash's foreground job, node's breakOnSigint). A non-blocking write: never waits. */
static void cells_interrupt(struct sandbox *sb)
{
        pthread_mutex_lock(&sb->lock);
        if (!sb->dead && write(sb->fd[F_CTL], "i\n", 2) < 0)
                log_debug("gvisor session: interrupt: %m");
        pthread_mutex_unlock(&sb->lock);
}

static int cells_start(struct sandbox *sb, const struct run_request *req, struct sandbox_io *ret_io,
                       struct sbx_error *err)
{
        int r;

        if (!cells_alive(sb))
                return sbx_fail(err, ESRCH, "the session's interpreter is gone");
        r = sbx_runner_check_cell(req, sb->lang, err);
        if (r < 0)
                return r;
        r = sbx_runner_send_cell(sb->fd[F_CELLS], ++sb->seq, req->code, req->code_len,
                                 sbx_now_ms() + CELLS_WRITE_MS);
        if (r < 0) {
                cells_kill(sb);
                return sbx_fail(err, ESRCH, "cannot hand the cell to the session's interpreter: %s",
                                strerror(-r));
        }
        *ret_io = (struct sandbox_io){
            .out_fd = sb->out_fd,
            .err_fd = sb->err_fd,
            .pid = 0,
            .pidfd = -1,
            .ended_fd = sb->fd[F_STATUS],
            .flags = SANDBOX_IO_CELL,
        };
        return 0;
}

static void not_measured(struct run_measure *m, const char *why)
{
        m->measured = false;
        snprintf(m->why, sizeof(m->why), "%s", why);
}

static int cells_collect(struct sandbox *sb, const struct sandbox_watch *w, struct run_result *res,
                         struct sbx_error *err)
{
        struct sbx_runner_status st = {0};
        int r = -EPIPE;

        (void)err;
        snprintf(res->backend, sizeof(res->backend), "gvisor");
        snprintf(res->image, sizeof(res->image), "%s", gvisor_box_rootfs(sb->box));
        snprintf(res->isolation, sizeof(res->isolation), "%s", gvisor_box_grade(sb->box));
        /* this cell's record (an earlier one cannot be pending: each start waits for its
         * cell's end or ends the session) */
        if (w->by_ended_fd)
                while ((r = read_record(sb, 0, &st)) == 0 && st.seq != sb->seq)
                        ;
        if (r < 0)
                cells_kill(sb); /* no record: the runner is gone or spoke nonsense */
        if (w->forced == RUN_OUTCOME_NONE) {
                res->outcome = RUN_OUTCOME_EXITED;
                res->exit_code = r == 0 ? st.code : 1;
        }
        if (w->by_ended_fd && w->forced == RUN_OUTCOME_NONE)
                (void)sbx_runner_channel_broken(r, res);
        if (r == 0 && strcmp(st.kind, "interrupted") == 0 && w->forced == RUN_OUTCOME_NONE)
                run_result_note(res, "the cell was interrupted (SIGINT from inside the session)");
        static const char why[] = "a gvisor session's tasks live inside gVisor's Sentry, with "
                                  "no cgroup of the run's own (runsc --ignore-cgroups)";
        not_measured(&res->usage.cpu_us, why);
        not_measured(&res->usage.mem_peak_bytes, why);
        not_measured(&res->usage.pids_peak, why);
        return 0;
}

static void cells_destroy(struct sandbox *sb)
{
        cells_free(sb);
}

const struct sandbox_ops gvisor_cells_ops = {
    .prepare = cells_prepare,
    .start = cells_start,
    .kill = cells_kill,
    .collect = cells_collect,
    .destroy = cells_destroy,
    .interrupt = cells_interrupt,
    .alive = cells_alive,
};
