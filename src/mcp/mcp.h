/* mcp.h - the MCP server on stdio: newline-delimited JSON-RPC 2.0, every protocol revision
 * real clients speak (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, and the stateless
 * 2026-07-28 decided per request), tools/list and tools/call with concurrent calls on worker
 * threads, cancellation and progress. The only writer of stdout. See ../shared/MCP_NOTES.md. */
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
 * Return: 0 on EOF/SIGTERM, -errno on an I/O failure (EPIPE on stdout: the client is gone).
 */
int mcp_serve(const struct mcp_handlers *handlers, int in_fd, int out_fd, struct sbx_error *err);
