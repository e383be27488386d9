/* warden.c - supervises one run: output caps, the deadline, cancel, kill; the backend's
 * collect() reaps. The deadline is the server's own monotonic clock and the kill is the
 * backend's kill() (SIGKILL to the whole tree), so code that ignores or blocks signals still
 * ends on time. */
#include "run/warden.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

/* Progress callbacks this often. */
#define WARDEN_PROGRESS_MS 2000
/* After the main process exited (and the tree was killed), read what is left in the pipes for
 * at most this long: a process that escaped the kill (naive: setsid) may hold them open. */
#define WARDEN_DRAIN_MS 200
/* After a flood stopped the run, read and count at most this much more of the stream. */
#define WARDEN_FLOOD_AFTER_BYTES (16u << 20)
/* A cell that was interrupted (sandbox_ops.interrupt) has this long to end before kill()
 * ends its session. */
#define WARDEN_CELL_GRACE_MS 2000
/* At most this many fds of a stream source (sandbox_stream) in one poll. */
#define WARDEN_STREAM_FDS 8
/* Without a pidfd, check the child this often. */
#define WARDEN_WAITPID_POLL_MS 20

struct warden {
        const struct run_request *req;
        struct run_result *res;
        size_t cap;
        void (*kill)(void *userdata); /* the backend's kill, called for every reason */
        void *kill_userdata;
        /* a cell's interrupt (NULL: none): the first reason to stop calls it instead of kill,
         * and kill follows only when the cell has not ended by @grace_until */
        void (*interrupt)(void *userdata);
        bool interrupting;
        uint64_t grace_until;
        bool killed;
        enum run_outcome forced; /* TIMED_OUT / CANCELLED / FLOODED, or NONE */
};

static void warden_kill(struct warden *w, enum run_outcome why)
{
        if (w->forced == RUN_OUTCOME_NONE && why != RUN_OUTCOME_NONE)
                w->forced = why;
        if (w->interrupt && why != RUN_OUTCOME_NONE && !w->interrupting && !w->killed) {
                w->interrupting = true;
                w->grace_until = sbx_now_ms() + WARDEN_CELL_GRACE_MS;
                w->interrupt(w->kill_userdata);
                return;
        }
        if (w->interrupting && why != RUN_OUTCOME_NONE && w->kill && !w->killed)
                return; /* the grace of the interrupt decides (watch_clock) */
        if (w->kill)
                w->kill(w->kill_userdata);
        w->killed = true;
}

/* Take @n bytes of output into @s. Returns false once no more is wanted (past a flood). */
static bool take_output(struct warden *w, struct run_stream *s, const char *buf, size_t n)
{
        if (s->stopped_at && s->total > s->stopped_at + WARDEN_FLOOD_AFTER_BYTES)
                return false;
        uint64_t total = run_stream_append(s, buf, n, w->cap);

        /* A run printing more than twice the cap is stopped: what is beyond the cap is only
         * counted (and its tail kept), and an endless printer would otherwise keep the warden
         * reading until its deadline. What it wrote until every process of it was dead is
         * still read and counted, so the result says how much it wrote, not only how much was
         * read when it was stopped; WARDEN_FLOOD_AFTER_BYTES bounds that. */
        if (total > 2 * (uint64_t)w->cap && !s->stopped_at && w->forced == RUN_OUTCOME_NONE) {
                s->stopped_at = total;
                warden_kill(w, RUN_OUTCOME_FLOODED);
        }
        return !(s->stopped_at && total > s->stopped_at + WARDEN_FLOOD_AFTER_BYTES);
}

/* Read what @fd has now into @s. Returns false once the fd should be closed (EOF, error). */
static bool drain_fd(struct warden *w, int *fd, struct run_stream *s)
{
        char buf[65536];

        for (;;) {
                ssize_t n = read(*fd, buf, sizeof(buf));

                if (n > 0) {
                        if (!take_output(w, s, buf, (size_t)n))
                                return false;
                        continue;
                }
                if (n == 0)
                        return false;
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                        return true;
                return false;
        }
}

/* Has the main process exited? Leaves it a zombie (WNOWAIT), so its pid and process group id
 * stay reserved until the backend's kill() ran and its collect() reaps it. */
static bool child_exited(pid_t pid)
{
        siginfo_t si;

        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
                return errno == ECHILD;
        return si.si_pid == pid;
}

/* One supervision: the sources, the state of the loop, and how the end was seen. */
struct watch {
        struct warden w;
        const struct sandbox_io *io;
        int out_fd, err_fd; /* the io's pipes while they are polled; -1 after EOF */
        uint64_t start_ms, deadline, next_progress, drain_until;
        unsigned drain_ms;
        bool ended, by_ended_fd;
        bool stream_eof; /* the stream source said no more output comes */
        /* the poll set of one round: the pipes, pidfd, ended_fd, cancel, then the stream's */
        struct pollfd pfd[5 + WARDEN_STREAM_FDS];
        int n, i_out, i_err, i_pid, i_cancel, i_ended;
};

static void watch_add(struct watch *x, int *slot, int fd)
{
        *slot = x->n;
        x->pfd[x->n++] = (struct pollfd){.fd = fd, .events = POLLIN};
}

/* The deadline and the progress callback, before each poll. */
static void watch_clock(struct watch *x, uint64_t now)
{
        const struct run_request *req = x->w.req;

        if (x->ended || x->w.killed)
                return;
        if (x->w.interrupting) {
                if (now >= x->w.grace_until) {
                        log_debug("cell: not ended %d ms after the interrupt, ending the session",
                                  WARDEN_CELL_GRACE_MS);
                        warden_kill(&x->w, RUN_OUTCOME_NONE);
                }
                return;
        }
        if (now >= x->deadline) {
                log_debug("run %d: deadline of %u s reached, killing it", (int)x->io->pid,
                          req->timeout_s);
                warden_kill(&x->w, RUN_OUTCOME_TIMED_OUT);
                return;
        }
        if (req->progress && now >= x->next_progress) {
                req->progress(req->progress_userdata, now - x->start_ms,
                              (uint64_t)req->timeout_s * 1000u);
                x->next_progress = now + WARDEN_PROGRESS_MS;
        }
}

/* This round's poll set and how long to wait, in ms. */
static int watch_arm(struct watch *x, uint64_t now)
{
        const struct sandbox_io *io = x->io;
        uint64_t wake;

        x->n = 0;
        x->i_out = x->i_err = x->i_pid = x->i_cancel = x->i_ended = -1;
        if (x->out_fd >= 0)
                watch_add(x, &x->i_out, x->out_fd);
        if (x->err_fd >= 0)
                watch_add(x, &x->i_err, x->err_fd);
        if (!x->ended && io->pid > 0 && io->pidfd >= 0)
                watch_add(x, &x->i_pid, io->pidfd);
        if (!x->ended && io->ended_fd >= 0)
                watch_add(x, &x->i_ended, io->ended_fd);
        if (!x->ended && !x->w.killed && !x->w.interrupting && x->w.req->cancel_fd >= 0)
                watch_add(x, &x->i_cancel, x->w.req->cancel_fd);
        int stream_wait_ms = -1;
        if (io->stream && !(x->ended && x->stream_eof))
                x->n += (int)io->stream->fds(io->stream->userdata, x->pfd + x->n, WARDEN_STREAM_FDS,
                                             &stream_wait_ms);

        if (x->ended)
                wake = x->drain_until;
        else if (x->w.killed)
                wake = now + 100; /* SIGKILL was sent; the exit is near */
        else if (x->w.interrupting)
                wake = x->w.grace_until;
        else {
                wake = x->deadline;
                if (x->w.req->progress && x->next_progress < wake)
                        wake = x->next_progress;
        }
        if (!x->ended && io->pid > 0 && io->pidfd < 0 && wake > now + WARDEN_WAITPID_POLL_MS)
                wake = now + WARDEN_WAITPID_POLL_MS;
        if (stream_wait_ms >= 0 && wake > now + (uint64_t)stream_wait_ms)
                wake = now + (uint64_t)stream_wait_ms;
        return wake > now ? (int)(wake - now) : 0;
}

static bool ready(const struct watch *x, int i, int r)
{
        return r > 0 && i >= 0 && x->pfd[i].revents;
}

/* The program is over: kill what it left (unless a cell ended), take the wall time, drain. */
static void watch_end(struct watch *x, bool by_ended_fd)
{
        if (!(x->io->flags & SANDBOX_IO_CELL))
                warden_kill(&x->w, RUN_OUTCOME_NONE);
        x->ended = true;
        x->by_ended_fd = by_ended_fd;
        x->w.res->usage.wall_ms = sbx_now_ms() - x->start_ms;
        x->drain_until = sbx_now_ms() + x->drain_ms;
}

static void stream_emit(void *userdata, int stream, const char *buf, size_t n)
{
        struct watch *x = userdata;

        (void)take_output(&x->w, stream == 2 ? &x->w.res->err : &x->w.res->out, buf, n);
}

/* Pump the stream source: its output, and whether the program or its output is over. */
static void watch_stream(struct watch *x)
{
        const struct sandbox_stream *st = x->io->stream;
        unsigned flags;

        if (!st || (x->ended && x->stream_eof))
                return; /* an output that ended first still has the program's end to tell */
        flags = st->pump(st->userdata, stream_emit, x);
        if (flags & SANDBOX_STREAM_EOF)
                x->stream_eof = true;
        if ((flags & SANDBOX_STREAM_ENDED) && !x->ended)
                watch_end(x, false);
}

/* Read the pipes after one poll, and see the cancel and the end. */
static void watch_handle(struct watch *x, int r)
{
        const struct sandbox_io *io = x->io;

        if (ready(x, x->i_out, r) && !drain_fd(&x->w, &x->out_fd, &x->w.res->out))
                x->out_fd = -1;
        if (ready(x, x->i_err, r) && !drain_fd(&x->w, &x->err_fd, &x->w.res->err))
                x->err_fd = -1;
        if (ready(x, x->i_cancel, r)) {
                log_debug("run %d: cancelled, killing it", (int)io->pid);
                warden_kill(&x->w, RUN_OUTCOME_CANCELLED);
        }
        watch_stream(x);
        if (x->ended)
                return;
        if (ready(x, x->i_ended, r)) {
                watch_end(x, true);
                return;
        }
        /* The main process exited: left a zombie (WNOWAIT), so its pid and process group
         * stay reserved for the kill in watch_end; collect() reaps it. */
        if (io->pid > 0 && (io->pidfd < 0 || ready(x, x->i_pid, r) || x->w.killed) &&
            child_exited(io->pid))
                watch_end(x, false);
}

/* A cell ended: what it wrote is in the pipes; read it without waiting for EOF. */
static void watch_cell_drain(struct watch *x)
{
        if (x->out_fd >= 0)
                (void)drain_fd(&x->w, &x->out_fd, &x->w.res->out);
        if (x->err_fd >= 0)
                (void)drain_fd(&x->w, &x->err_fd, &x->w.res->err);
}

/* The loop: until the end was seen and the pipes are drained. Return 0 or -errno (poll). */
static int watch_loop(struct watch *x)
{
        for (;;) {
                uint64_t now = sbx_now_ms();
                int wait_ms, r;

                if (x->ended && (x->io->flags & SANDBOX_IO_CELL)) {
                        watch_cell_drain(x);
                        return 0;
                }
                if (x->ended && (now >= x->drain_until || (x->out_fd < 0 && x->err_fd < 0 &&
                                                           (!x->io->stream || x->stream_eof))))
                        return 0;
                watch_clock(x, now);
                wait_ms = watch_arm(x, now);
                r = poll(x->pfd, (nfds_t)x->n, wait_ms);
                if (r < 0 && errno != EINTR)
                        return -errno;
                watch_handle(x, r);
        }
}

static void watch_init(struct watch *x, const struct run_request *req, const struct sandbox_io *io,
                       uint64_t start_ms, struct run_result *res)
{
        memset(x, 0, sizeof(*x));
        x->w = (struct warden){
            .req = req,
            .res = res,
            .cap = req->cfg ? req->cfg->max_output_bytes : 20000,
            .forced = RUN_OUTCOME_NONE,
        };
        if (x->w.cap == 0)
                x->w.cap = 1;
        x->io = io;
        x->out_fd = io->out_fd;
        x->err_fd = io->err_fd;
        /* a backend whose program starts well after start() was called (the engine: arming
         * attach and wait, then its start) gives the real start */
        x->start_ms = io->start_ms ? io->start_ms : start_ms;
        x->deadline = x->start_ms + (uint64_t)req->timeout_s * 1000u + io->grace_ms;
        x->next_progress = x->start_ms + WARDEN_PROGRESS_MS;
        x->drain_ms = io->drain_ms ? io->drain_ms : WARDEN_DRAIN_MS;
        if (x->out_fd >= 0)
                fcntl(x->out_fd, F_SETFL, fcntl(x->out_fd, F_GETFL) | O_NONBLOCK);
        if (x->err_fd >= 0)
                fcntl(x->err_fd, F_SETFL, fcntl(x->err_fd, F_GETFL) | O_NONBLOCK);
}

/* Called through the warden's kill pointer. */
struct ops_kill {
        const struct sandbox_ops *ops;
        struct sandbox *sb;
};

static void ops_kill(void *userdata)
{
        struct ops_kill *k = userdata;

        k->ops->kill(k->sb);
}

static void ops_interrupt(void *userdata)
{
        struct ops_kill *k = userdata;

        k->ops->interrupt(k->sb);
}

int warden_watch(const struct run_request *req, const struct sandbox_ops *ops, struct sandbox *sb,
                 const struct sandbox_io *io, uint64_t start_ms, struct run_result *res,
                 struct sandbox_watch *ret_watch, struct sbx_error *err)
{
        struct ops_kill k = {.ops = ops, .sb = sb};
        struct watch x;
        int r;

        watch_init(&x, req, io, start_ms, res);
        x.w.kill = ops_kill;
        x.w.kill_userdata = &k;
        if ((io->flags & SANDBOX_IO_CELL) && ops->interrupt)
                x.w.interrupt = ops_interrupt;
        r = watch_loop(&x);
        if (r < 0) {
                warden_kill(&x.w, RUN_OUTCOME_NONE);
                r = sbx_fail(err, -r, "cannot supervise the run: poll: %s", strerror(-r));
        }
        if (x.w.forced != RUN_OUTCOME_NONE)
                res->outcome = x.w.forced;
        *ret_watch = (struct sandbox_watch){
            .forced = x.w.forced,
            .ended = x.ended,
            .by_ended_fd = x.by_ended_fd,
            .interrupted = x.w.interrupting && !x.w.killed && x.by_ended_fd,
        };
        return r;
}
