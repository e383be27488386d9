/* warden.c - supervises one locally spawned run: output caps, the deadline, cancel, kill,
 * reap. The deadline is the server's own monotonic clock and the kill is SIGKILL through the
 * backend's kill_tree, so code that ignores or blocks signals still ends on time. */
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
/* Without a pidfd, check the child this often. */
#define WARDEN_WAITPID_POLL_MS 20

uint64_t sbx_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct warden {
        const struct run_request *req;
        struct warden_child *child;
        struct run_result *res;
        size_t cap;
        bool killed;
        enum run_outcome forced; /* TIMED_OUT / CANCELLED / FLOODED, or NONE */
};

static void warden_kill(struct warden *w, enum run_outcome why)
{
        if (w->forced == RUN_OUTCOME_NONE && why != RUN_OUTCOME_NONE)
                w->forced = why;
        if (w->child->kill_tree)
                w->child->kill_tree(w->child->kill_userdata);
        w->killed = true;
}

static void close_fd(int *fd)
{
        if (*fd >= 0) {
                close(*fd);
                *fd = -1;
        }
}

/* Read what @fd has now into @s. Returns false once the fd should be closed (EOF, error). */
static bool drain_fd(struct warden *w, int *fd, struct run_stream *s)
{
        char buf[65536];

        for (;;) {
                ssize_t n = read(*fd, buf, sizeof(buf));

                if (n > 0) {
                        uint64_t total = run_stream_append(s, buf, (size_t)n, w->cap);

                        /* A run printing more than twice the cap is stopped: what is beyond
                         * the cap is only counted (and its tail kept), and an endless printer
                         * would otherwise keep the warden reading until its deadline. What it
                         * wrote until every process of it was dead is still read and counted,
                         * so the result says how much it wrote, not only how much was read when
                         * it was stopped; WARDEN_FLOOD_AFTER_BYTES bounds that. */
                        if (total > 2 * (uint64_t)w->cap && !s->stopped_at &&
                            w->forced == RUN_OUTCOME_NONE) {
                                s->stopped_at = total;
                                warden_kill(w, RUN_OUTCOME_FLOODED);
                        }
                        if (s->stopped_at && total > s->stopped_at + WARDEN_FLOOD_AFTER_BYTES)
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
 * stay reserved until kill_tree ran and we reap it. */
static bool child_exited(pid_t pid)
{
        siginfo_t si;

        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
                return errno == ECHILD;
        return si.si_pid == pid;
}

static int reap(pid_t pid, int *ret_status, struct rusage *ru)
{
        for (;;) {
                pid_t r = wait4(pid, ret_status, 0, ru);

                if (r == pid)
                        return 0;
                if (r < 0 && errno == EINTR)
                        continue;
                return -errno;
        }
}

int warden_supervise(const struct run_request *req, struct warden_child *child, uint64_t start_ms,
                     struct run_result *res, struct rusage *ret_rusage, struct sbx_error *err)
{
        struct warden w = {
            .req = req,
            .child = child,
            .res = res,
            .cap = req->cfg ? req->cfg->max_output_bytes : 20000,
            .forced = RUN_OUTCOME_NONE,
        };
        uint64_t timeout_ms = (uint64_t)req->timeout_s * 1000u;
        uint64_t deadline = start_ms + timeout_ms;
        uint64_t next_progress = start_ms + WARDEN_PROGRESS_MS;
        uint64_t drain_until = 0;
        bool exited = false, cancel_watch = req->cancel_fd >= 0;
        struct rusage ru;
        int status = 0, r;

        memset(&ru, 0, sizeof(ru));
        if (w.cap == 0)
                w.cap = 1;
        if (child->out_fd >= 0)
                fcntl(child->out_fd, F_SETFL, fcntl(child->out_fd, F_GETFL) | O_NONBLOCK);
        if (child->err_fd >= 0)
                fcntl(child->err_fd, F_SETFL, fcntl(child->err_fd, F_GETFL) | O_NONBLOCK);

        for (;;) {
                struct pollfd pfd[5];
                int n = 0, i_out = -1, i_err = -1, i_pid = -1, i_cancel = -1, i_ended = -1;
                uint64_t now = sbx_now_ms(), wake;
                int wait_ms;

                if (exited && (now >= drain_until || (child->out_fd < 0 && child->err_fd < 0)))
                        break;

                if (!exited && !w.killed && now >= deadline) {
                        log_debug("run %d: deadline of %u s reached, killing it", (int)child->pid,
                                  req->timeout_s);
                        warden_kill(&w, RUN_OUTCOME_TIMED_OUT);
                }
                if (!exited && !w.killed && req->progress && now >= next_progress) {
                        req->progress(req->progress_userdata, now - start_ms, timeout_ms);
                        next_progress = now + WARDEN_PROGRESS_MS;
                }

                if (child->out_fd >= 0) {
                        i_out = n;
                        pfd[n++] = (struct pollfd){.fd = child->out_fd, .events = POLLIN};
                }
                if (child->err_fd >= 0) {
                        i_err = n;
                        pfd[n++] = (struct pollfd){.fd = child->err_fd, .events = POLLIN};
                }
                if (!exited && child->pidfd >= 0) {
                        i_pid = n;
                        pfd[n++] = (struct pollfd){.fd = child->pidfd, .events = POLLIN};
                }
                if (!exited && child->watch_ended && child->ended_fd >= 0) {
                        i_ended = n;
                        pfd[n++] = (struct pollfd){.fd = child->ended_fd, .events = POLLIN};
                }
                if (!exited && !w.killed && cancel_watch) {
                        i_cancel = n;
                        pfd[n++] = (struct pollfd){.fd = req->cancel_fd, .events = POLLIN};
                }

                if (exited)
                        wake = drain_until;
                else if (w.killed)
                        wake = now + 100; /* SIGKILL was sent; the exit is near */
                else {
                        wake = deadline;
                        if (req->progress && next_progress < wake)
                                wake = next_progress;
                }
                if (!exited && child->pidfd < 0 && wake > now + WARDEN_WAITPID_POLL_MS)
                        wake = now + WARDEN_WAITPID_POLL_MS;
                wait_ms = wake > now ? (int)(wake - now) : 0;

                r = poll(pfd, (nfds_t)n, wait_ms);
                if (r < 0 && errno != EINTR) {
                        r = -errno;
                        warden_kill(&w, RUN_OUTCOME_NONE);
                        (void)reap(child->pid, &status, &ru);
                        close_fd(&child->out_fd);
                        close_fd(&child->err_fd);
                        close_fd(&child->pidfd);
                        return sbx_fail(err, -r, "cannot supervise the run: poll: %s",
                                        strerror(-r));
                }
                if (r <= 0)
                        goto check_exit;

                if (i_out >= 0 && pfd[i_out].revents && !drain_fd(&w, &child->out_fd, &res->out))
                        close_fd(&child->out_fd);
                if (i_err >= 0 && pfd[i_err].revents && !drain_fd(&w, &child->err_fd, &res->err))
                        close_fd(&child->err_fd);
                if (i_cancel >= 0 && pfd[i_cancel].revents) {
                        log_debug("run %d: cancelled, killing it", (int)child->pid);
                        warden_kill(&w, RUN_OUTCOME_CANCELLED);
                }

        check_exit:
                if (!exited && i_ended >= 0 && r > 0 && pfd[i_ended].revents) {
                        /* The backend saw the program end and everything else of the run
                         * die: the init left behind is killed now and reaped by the caller,
                         * after the result. */
                        warden_kill(&w, RUN_OUTCOME_NONE);
                        exited = true;
                        res->usage.wall_ms = sbx_now_ms() - start_ms;
                        drain_until = sbx_now_ms() + WARDEN_DRAIN_MS;
                        continue;
                }
                if (!exited &&
                    (child->pidfd < 0 || (i_pid >= 0 && pfd[i_pid].revents) || w.killed) &&
                    child_exited(child->pid)) {
                        /* Kill what the main process left behind before reaping it, while
                         * its pid (and so its process group id) is still reserved. */
                        warden_kill(&w, RUN_OUTCOME_NONE);
                        r = reap(child->pid, &status, &ru);
                        if (r < 0) {
                                close_fd(&child->out_fd);
                                close_fd(&child->err_fd);
                                close_fd(&child->pidfd);
                                return sbx_fail(err, -r, "cannot reap run %d: %s", (int)child->pid,
                                                strerror(-r));
                        }
                        exited = true;
                        res->usage.wall_ms = sbx_now_ms() - start_ms;
                        drain_until = sbx_now_ms() + WARDEN_DRAIN_MS;
                }
        }

        close_fd(&child->out_fd);
        close_fd(&child->err_fd);
        close_fd(&child->pidfd);

        if (WIFEXITED(status)) {
                res->exit_code = WEXITSTATUS(status);
                res->outcome = RUN_OUTCOME_EXITED;
        } else if (WIFSIGNALED(status)) {
                res->term_signal = WTERMSIG(status);
                res->outcome = RUN_OUTCOME_SIGNALED;
        }
        if (w.forced != RUN_OUTCOME_NONE)
                res->outcome = w.forced;
        if (ret_rusage)
                *ret_rusage = ru;
        return 0;
}
