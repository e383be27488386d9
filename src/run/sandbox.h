/* sandbox.h - one sandbox lifecycle for every backend (docs/design/lifecycle.md):
 *
 *     prepare ──> start ──> supervise ──> collect ──> destroy
 *     (no code;             (the warden:    (backend)   (always, also after a
 *      may run ahead)        one loop)                   failed prepare/start)
 *
 * plus kill, which ends every process of a sandbox at any time, from any thread.
 *
 * A backend implements the steps in its own terms (struct sandbox_ops, reached through
 * backend_ops.sandbox); the service drives them, keeps the one registry of live sandboxes
 * (src/service/registry.h) and owns what is the same for every backend. The warden
 * (run/warden.h, warden_watch()) is the supervise step: output cap and flood, the deadline,
 * cancel, progress, and calling kill once for any of them.
 *
 * Three ways to drive the steps, all with the same ops:
 *   - one call:    prepare, start, supervise, collect, destroy (sandbox_run_once() below);
 *   - warm spare:  prepare ahead of any request, from a background thread; a later call of
 *                  the same language and settings takes the spare and goes on with start;
 *   - session:     prepare with mode SANDBOX_MODE_PROGRAMS or SANDBOX_MODE_CELLS, then per
 *                  call start, supervise, collect (the sandbox stays), and destroy at the end
 *                  of the session or when it idles out.
 *
 * Threads: one thread at a time drives a sandbox through prepare..destroy (the one that
 * holds it in the registry: the call's, or the thread that makes or ends a spare); kill may
 * come from any other thread at any time between a successful prepare and destroy. */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "config/config.h"
#include "run/run.h"

struct backend;

/* One backend's sandbox; opaque outside that backend. Allocated by prepare, freed by
 * destroy. */
struct sandbox;

/* What the programs of a sandbox will be. */
enum sandbox_mode {
        /* One program: start is called once; after collect only destroy follows. Every
         * backend supports it. */
        SANDBOX_MODE_ONE_SHOT = 0,
        /* A session of separate programs: start may be called again after collect, each time
         * a new program in the same sandbox (same rootfs, /tmp, workspace, namespaces or
         * container). What a program leaves behind in files stays for the next. */
        SANDBOX_MODE_PROGRAMS,
        /* A session of one long-lived program fed cells: prepare (or the first start) starts
         * the language's interpreter; each start hands it one cell (req->code) and the end of
         * the cell, not of the interpreter, ends supervision (sandbox_io.ended_fd with
         * SANDBOX_IO_CELL). Variables persist between cells. */
        SANDBOX_MODE_CELLS,
};

/* What prepare builds a sandbox for: everything but the code. */
struct sandbox_spec {
        enum sbx_language language;
        const struct sbx_config *cfg; /* borrowed; must outlive the sandbox */
        enum sandbox_mode mode;
        /* RUN_NETWORK_ALLOWLIST: the sandbox is built with its egress listener (native: init
         * makes it in the run's netns) and only a call asking for "allowlist" may start in
         * it; RUN_NETWORK_NONE: lo only, and only a call with network "none" may start in it
         * (docs/design/egress.md). A backend without backend_ops.egress refuses ALLOWLIST. */
        enum run_network network;
        bool spare; /* prepared ahead of any request (a warm spare, src/service/warm.h): its
                       setup is off the request path (the timing trace says so) */
};

/* Flags of struct sandbox_io. */
enum {
        /* @ended_fd ends one cell (SANDBOX_MODE_CELLS), not the program: the warden reads what
         * the pipes hold when it turns readable and returns, without waiting for EOF and
         * without calling kill. The program and its pipes live on for the next cell. */
        SANDBOX_IO_CELL = 1u << 0,
};

/*
 * What the warden supervises for one started program, filled by start(). Every fd here is
 * the sandbox's: the warden reads and polls them and never closes one (collect or destroy
 * does). An fd the warden is not to use is -1.
 *
 * The program's end is seen by whichever comes first:
 *   - @pid exited (pidfd readable, or waitid(WNOWAIT) when @pidfd is -1); the warden does
 *     NOT reap @pid: it calls kill (so the process group and pid are still reserved while
 *     whatever the program left is killed) and returns; collect reaps;
 *   - @ended_fd readable: the program is over but @pid is an init or a session's interpreter
 *     that outlives it (native: init's report that every other process is gone).
 * After the end the warden reads the pipes until EOF, for at most a short drain time
 * (200 ms), or (SANDBOX_IO_CELL) only what they hold at once.
 *
 * A source that is no pipe (the container backend: the fds of its curl_multi, and a callback
 * that performs it and hands the demultiplexed bytes over) is @stream: the warden polls the fds
 * it names and pumps it every round; its bytes go through the same cap and flood rule as the
 * pipes', and it says when the program is over (SANDBOX_STREAM_ENDED, the @pid/@ended_fd of a
 * stream source) and when no more output will come (SANDBOX_STREAM_EOF).
 */

/* What a stream source's pump reports, or-ed. */
enum {
        SANDBOX_STREAM_ENDED = 1u << 0, /* the program is over (its exit status is known) */
        SANDBOX_STREAM_EOF = 1u << 1,   /* the output is over: nothing more to read */
};

/* Hands @n bytes of the program's @stream (1 stdout, 2 stderr) to the warden. */
typedef void (*sandbox_emit_fn)(void *emit_userdata, int stream, const char *buf, size_t n);

struct sandbox_stream {
        /* Fill at most @max entries of @fds with what to wait on (events POLLIN/POLLOUT), and
         * lower *@timeout_ms (-1 = no wish) to when it wants a pump anyway. Return the count. */
        unsigned (*fds)(void *userdata, struct pollfd *fds, unsigned max, int *timeout_ms);
        /* Do what is ready now, without blocking; bytes through @emit. Return SANDBOX_STREAM_*
         * flags (sticky: once reported, reported again). */
        unsigned (*pump)(void *userdata, sandbox_emit_fn emit, void *emit_userdata);
        void *userdata;
};

struct sandbox_io {
        int out_fd;     /* read end of the program's stdout, or -1 */
        int err_fd;     /* read end of its stderr, or -1 */
        pid_t pid;      /* the process whose exit ends the program (a child of this process), or
                         * 0 when only @ended_fd tells the end */
        int pidfd;      /* pidfd_open(@pid), or -1 (then the warden polls waitid every 20 ms) */
        int ended_fd;   /* readable once the program (or cell) is over, or -1 */
        unsigned flags; /* SANDBOX_IO_* */
        /* Optional (additive; zero = as before): */
        const struct sandbox_stream *stream; /* a stream source (see above), or NULL */
        uint64_t start_ms; /* when the program really started (sbx_now_ms()): the clock of
                            * the deadline and the wall time; 0 = when start() was called */
        unsigned grace_ms; /* the deadline is timeout_s plus this much (the engine's answer
                            * to an exit may still be on its way at the deadline) */
        unsigned drain_ms; /* after the end, read what is left this long at most; 0 = 200 */
};

/* The outcome of supervision, for collect: why the warden stopped the program, if it did. */
struct sandbox_watch {
        enum run_outcome forced; /* RUN_OUTCOME_TIMED_OUT/_CANCELLED/_FLOODED, or _NONE */
        bool ended;              /* the end was seen (not an internal failure of the warden) */
        bool by_ended_fd;        /* ...through @ended_fd (then @pid is not exited yet) */
        /* A cell (SANDBOX_IO_CELL) the warden stopped: interrupt() was called, and the cell
         * ended within the grace (@interrupted, the session lives on), or did not and kill()
         * ended the session (@interrupted false, @forced set). */
        bool interrupted;
};

struct sandbox_ops {
        /**
         * prepare() - build everything a program of @spec->language needs, without the code:
         * host checks, rootfs hold, cgroup or scope, mounts, namespaces, seccomp and
         * Landlock, a created container; a backend may go as far as starting the interpreter
         * waiting on a pipe for the program (a warm spare: issue 17). May run before any
         * request exists, from a background thread. Blocks until done (bounded: seconds).
         * @b:    the backend (its cfg, state); @spec: borrowed for the call only (the
         *        sandbox copies what it keeps; spec->cfg must outlive the sandbox).
         * @ret:  the new sandbox, set only on success; the caller must destroy() it.
         * Return: 0; -EOPNOTSUPP when the backend does not support @spec->mode; -ESTALE when
         * the isolation the backend's probe promised cannot be had after all (the service
         * invalidates the probe and picks again); another -errno with @err holding the
         * Blocked: text that names the fix. On failure nothing is left behind.
         */
        int (*prepare)(struct backend *b, const struct sandbox_spec *spec, struct sandbox **ret,
                       struct sbx_error *err);

        /**
         * start() - hand @req's code in and start it (or, SANDBOX_MODE_CELLS, feed it as a
         * cell to the running interpreter). Fills @ret_io with what the warden supervises.
         * @req:  borrowed until collect() returns: language (must be the spec's), code,
         *        timeout_s, cfg, cancel_fd and progress (the last three are the warden's).
         * The wall clock of the run starts when start is called (the caller takes
         * sbx_now_ms() just before).
         * Return: 0; -ESTALE as in prepare (nothing of the code ran); -ESRCH when a session's
         * sandbox is gone (killed, or the interpreter died); another -errno with @err. After
         * a failure the caller calls destroy() (a session is over).
         */
        int (*start)(struct sandbox *sb, const struct run_request *req, struct sandbox_io *ret_io,
                     struct sbx_error *err);

        /**
         * kill() - kill every process of the sandbox now (SIGKILL: the deadline, cancel,
         * flood, the end of the program, server shutdown). Idempotent, callable from any
         * thread at any time between prepare() and destroy(), also concurrently with the
         * other ops of the same sandbox. Must not block for long (no more than a cgroup read
         * or a short request to the engine) and must not call into the service: the
         * registry calls it under its lock.
         */
        void (*kill)(struct sandbox *sb);

        /**
         * collect() - after the warden returned (whatever it returned), read what the
         * program left: reap @io's pid where the backend does, the exit status (into
         * res->outcome, exit_code or term_signal, only when @w->forced is RUN_OUTCOME_NONE:
         * otherwise the warden already set res->outcome to it), OOM, cgroup or engine usage,
         * limits hit, blocked syscalls, notes; and res->backend, image and isolation. The
         * warden already filled res->out, res->err and usage.wall_ms.
         * Return: 0 when @res is a result to show (a non-zero exit, a timeout and a cancel
         * are results); -errno with @err holding the Blocked: text when the program could not
         * be run as claimed (the interpreter could not be executed, the run's setup failed
         * inside the sandbox); then res->outcome is RUN_OUTCOME_NONE.
         * After collect: SANDBOX_MODE_ONE_SHOT sandboxes only get destroy(); session
         * sandboxes may get start() again, or destroy().
         */
        int (*collect)(struct sandbox *sb, const struct sandbox_watch *w, struct run_result *res,
                       struct sbx_error *err);

        /**
         * destroy() - release everything and free @sb: kill what still runs, reap (or hand
         * the reaping to a background thread, like native's reaper or the container's
         * background removal), remove the cgroup or scope, the container and volumes,
         * temporary folders, release the rootfs hold. Called exactly once for every sandbox
         * prepare() returned, in any state: after collect, after a failed start, a spare
         * never started, at shutdown. Never fails; bounded in time (a second at most in the
         * calling thread). @sb is invalid afterwards.
         */
        void (*destroy)(struct sandbox *sb);

        /**
         * interrupt() - optional (NULL: kill() only), for SANDBOX_MODE_CELLS: ask the running
         * cell to stop and leave the interpreter alive (SIGINT: python's KeyboardInterrupt,
         * the shell's foreground job, node's breakOnSigint). The warden calls it on the
         * deadline, cancel and flood of a cell, waits WARDEN_CELL_GRACE_MS for the cell's end,
         * and only then calls kill(). Same threading rules as kill().
         */
        void (*interrupt)(struct sandbox *sb);

        /**
         * alive() - optional (NULL: never reused), for sessions: after collect, can the
         * sandbox take another start()? False once the interpreter died or kill() was called.
         */
        bool (*alive)(struct sandbox *sb);

        /**
         * claim() - optional (NULL: a spare of these ops is never taken), for a spare of
         * SANDBOX_MODE_CELLS that a session is about to take (one-shot spares check in
         * start()): is everything it was built from (settings, workspace, rootfs tree, the
         * probe's answer) still so now? Also makes the session's usage count from here, not
         * from the interpreter's start-up. Called once, before the first start().
         * Return: 0; -ESTALE (@err says what changed: the caller destroys it and prepares a
         * new one), or another -errno.
         */
        int (*claim)(struct sandbox *sb, struct sbx_error *err);
};

/**
 * sandbox_run_program() - one program in the prepared sandbox @sb: start, supervise
 * (warden_watch(), wall time from just before start), collect. The caller prepared @sb and
 * destroys it (the service, with the sandbox in its registry; a session, once per call).
 * Return: as backend_ops.run() (src/run/backend.h): 0 with @res to show, or -errno with @err
 * (start's, the warden's, or collect's). collect() ran whenever start() succeeded.
 */
int sandbox_run_program(const struct sandbox_ops *ops, struct sandbox *sb,
                        const struct run_request *req, struct run_result *res,
                        struct sbx_error *err);

/**
 * sandbox_run_once() - one request in a fresh sandbox of @b: prepare (mode ONE_SHOT), start,
 * supervise (warden_watch()), collect, destroy. No registry: for backend_ops.run() of a
 * backend that has sandbox ops (so `vestibule-mcp run` and tests that call run() keep their
 * path) and for tests. Shapes of @req, @res, @err and the return as backend_ops.run()
 * (src/run/backend.h). @b->ops->sandbox must not be NULL.
 */
int sandbox_run_once(struct backend *b, const struct run_request *req, struct run_result *res,
                     struct sbx_error *err);
