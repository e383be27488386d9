/* warden.h - supervises one run: reads its output (stdout and stderr pipes, or a stream
 * source such as the container backend's) with the output cap, enforces the deadline by the
 * server's own monotonic clock, watches the cancel fd, kills, and fills the outcome and output
 * of a struct run_result. warden_watch() is the supervise step of every backend's sandbox
 * lifecycle (src/run/sandbox.h); warden_supervise() is the older whole-run form, which only
 * test_naive still calls. */
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include "common/clock.h" /* sbx_now_ms(), for the warden's callers */
#include "common/error.h"
#include "run/run.h"
#include "run/sandbox.h"

struct warden_child {
        pid_t pid;  /* the process to reap (a child of the calling thread's process) */
        int pidfd;  /* pidfd_open(pid) or -1 (then the warden polls waitpid) */
        int out_fd; /* read end of the child's stdout pipe; the warden closes it */
        int err_fd; /* read end of the child's stderr pipe; the warden closes it */
        /* Kill every process of the run (process group, pid namespace, cgroup.kill...).
         * Called on timeout, cancel, flood, and after the main process exited. Idempotent. */
        void (*kill_tree)(void *userdata);
        void *kill_userdata;
        /* Optional (additive): @watch_ended makes @ended_fd a second way to learn that the run
         * is over, for a backend whose main process is an init that outlives the program only
         * to be torn down (native). Once @ended_fd is readable every process of the run but
         * that init is gone: the warden calls kill_tree (which kills the init), takes the wall
         * time, drains the pipes, and returns without reaping @pid; the caller reaps it. */
        bool watch_ended;
        int ended_fd;
};

/**
 * warden_supervise() - run the supervision loop until the child is reaped.
 * @req:   timeout_s, cancel_fd, progress, cfg->max_output_bytes are used.
 * @child: see above; fds are closed on return.
 * @res:   out, err, outcome, exit_code/term_signal, usage.wall_ms (from @start_ms) are set.
 * @ret_rusage: if not NULL, the child's rusage from wait4() (covers the reaped child and the
 *         descendants it waited for; not a cgroup figure).
 * Return: 0 once the child is reaped, or -errno on an internal failure (the tree is killed
 * and reaped first).
 */
int warden_supervise(const struct run_request *req, struct warden_child *child, uint64_t start_ms,
                     struct run_result *res, struct rusage *ret_rusage, struct sbx_error *err);

/**
 * warden_watch() - the supervise step of the sandbox lifecycle (src/run/sandbox.h): watch the
 * program @io describes until it is over, then return without reaping it.
 * @req:  timeout_s (the deadline, from @start_ms by sbx_now_ms()), cancel_fd, progress and
 *        cfg->max_output_bytes (the output cap; a stream over twice the cap is a flood).
 * @ops, @sb: ops->kill(@sb) is called on the deadline, cancel and flood (once each reason
 *        is seen, and the first reason is the outcome), and once more when the program
 *        ended (so what it left behind dies while its pid is still reserved), except for a
 *        cell (SANDBOX_IO_CELL).
 * @io:   borrowed; no fd is closed (see struct sandbox_io).
 * @res:  out and err (with the cap), usage.wall_ms, and outcome when the warden stopped the
 *        run (timed out, cancelled, flooded) are set; nothing else.
 * @ret_watch: why the warden stopped, and how the end was seen, for collect().
 * Return: 0 once the end was seen; -errno with @err on an internal failure (poll failed):
 * then kill was called and the caller still calls collect() and destroy().
 */
int warden_watch(const struct run_request *req, const struct sandbox_ops *ops, struct sandbox *sb,
                 const struct sandbox_io *io, uint64_t start_ms, struct run_result *res,
                 struct sandbox_watch *ret_watch, struct sbx_error *err);
