/* mcp.h - the MCP server on stdio: newline-delimited JSON-RPC 2.0, every protocol revision
 * real clients speak (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, and the stateless
 * 2026-07-28 decided per request), tools/list and tools/call with concurrent calls on worker
 * threads, cancellation and progress. The only writer of stdout. See docs/design/mcp-protocol.md.
 */
#pragma once

#include <json-c/json.h>

#include "common/error.h"
#include "tools/tools.h"

/* What the server calls; the protocol layer knows nothing about running code. */
struct mcp_handlers {
        /* A new array of Tool objects (newest revision's shape). */
        json_object *(*tools_list)(void *userdata);
        /* Same contract as tools_call(). Called on a worker thread; may block for the run. */
        int (*tools_call)(void *userdata, const char *name, json_object *args,
                          const struct tool_ctx *ctx, struct tool_result *ret,
                          struct sbx_error *err);
        /* Kill every run in flight (stdin EOF, SIGTERM). May be NULL. */
        void (*shutdown)(void *userdata);
        void *userdata;
        const char *instructions; /* the initialize/discover "instructions" text, or NULL */
        /* Worker threads at most (calls in flight, running or waiting for a slot in the run
         * service); a call beyond that is answered at once with a Blocked: tool result. */
        unsigned max_workers;
};

/**
 * mcp_serve() - serve on @in_fd / @out_fd until EOF on @in_fd or SIGTERM/SIGINT (the caller
 * blocks them; the server waits for them with signalfd). On exit every run in flight is
 * ended through handlers->shutdown and its worker joined before returning.
 * @handlers: borrowed for the call. tools_list() is called once at start (the server owns and
 *            puts the array); tools_call() runs on a worker thread (256 KiB stack) with @args
 *            borrowed for the call; the server frees what it leaves in @ret (text, structured).
 *            ctx->progress must not be called after tools_call() has returned. max_workers 0
 *            means 8. Each worker's ctx->cancel_fd (an eventfd) becomes readable on
 *            notifications/cancelled and at shutdown.
 * @in_fd, @out_fd: borrowed, never closed here. Only protocol frames go to @out_fd, each one
 *            line written whole; logs go to stderr.
 * Signals: the caller must block SIGTERM and SIGINT in every thread (pthread_sigmask() in
 * main() before any thread starts), or one that does not block them gets the default action.
 * mcp_serve() also blocks them in its own thread, reads them from a signalfd, and leaves them
 * blocked on return so a second signal cannot cut the caller's cleanup short. It sets SIGPIPE
 * to SIG_IGN if it was SIG_DFL, so a vanished client shows as EPIPE. Workers block all signals.
 * A blocked mask and an ignored SIGPIPE survive fork() and execve(): whoever spawns a child
 * (the backends) must reset both (sigprocmask, SIGPIPE to SIG_DFL) before exec.
 * A tool that ignores both shutdown() and its cancel_fd for 10 s is left behind: mcp_serve()
 * returns anyway, its state stays allocated for that worker, and nothing more reaches @out_fd.
 * Spec: docs/design/mcp-protocol.md §1 (stdio framing, shutdown) and the spec files it cites.
 * Return: 0 on EOF/SIGTERM/SIGINT, -errno on an I/O failure (EPIPE on stdout: the client is
 * gone; a read error on @in_fd), -EINVAL without handlers->tools_call; @err says which.
 */
int mcp_serve(const struct mcp_handlers *handlers, int in_fd, int out_fd, struct sbx_error *err);
