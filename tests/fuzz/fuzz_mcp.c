/* fuzz_mcp.c - libFuzzer target: the JSON-RPC framing and dispatch of src/mcp. The input is
 * what a client writes on the server's stdin (any bytes: lines, partial lines, '\r', NULs,
 * batches, ids of every type); it goes through a pipe into mcp_serve_opts(), the real serve
 * loop with its reader, parser, revision rules, cancellation and worker threads, and the
 * replies go to /dev/null. The tool handler is a stand-in that answers at once (the tools are
 * not what is fuzzed here). Crashes, leaks, UB and hangs (libFuzzer's -timeout) are findings.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh mcp SECONDS. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "mcp/mcp-internal.h"

static json_object *fake_tools_list(void *userdata)
{
        (void)userdata;
        return json_tokener_parse(
            "[{\"name\":\"run_code\",\"description\":\"d\",\"inputSchema\":{\"type\":\"object\"},"
            "\"outputSchema\":{\"type\":\"object\"},\"annotations\":{\"title\":\"t\"},"
            "\"execution\":{\"taskSupport\":\"forbidden\"},\"icons\":[]},"
            "{\"name\":\"read_workspace\",\"inputSchema\":{\"type\":\"object\"}}]");
}

static int fake_tools_call(void *userdata, const char *name, json_object *args,
                           const struct tool_ctx *ctx, struct tool_result *ret,
                           struct sbx_error *err)
{
        (void)userdata;
        if (ctx && ctx->progress)
                ctx->progress(ctx->progress_userdata, 1500, 30000);
        if (strcmp(name, "read_workspace") == 0)
                return sbx_fail(err, EINVAL, "bad arguments for '%s'", name);
        ret->text =
            xasprintf("ran %s with %zu arguments", name, (size_t)json_object_object_length(args));
        ret->structured = json_object_new_object();
        json_object_object_add(ret->structured, "exit_code", json_object_new_int(0));
        return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        /* quiet: below SBX_LOG_ERROR, so even errors (an oversized reply) are not printed */
        sbx_log_set_level((enum sbx_log_level) - 1);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const struct mcp_handlers h = {
            .tools_list = fake_tools_list,
            .tools_call = fake_tools_call,
            .instructions = "fuzz",
            .max_workers = 2,
        };
        /* small limits, so the over-long paths (line, frame) are reachable from small inputs */
        static const struct mcp_serve_options opts = {
            .max_line_bytes = 2048,
            .progress_interval_ms = 1,
            .shutdown_wait_ms = 5000,
            .max_frame_bytes = 1024,
        };
        struct sbx_error err = {0};
        int p[2], out;

        if (size > 60000) /* one pipe buffer: written whole before the loop starts */
                return -1;
        if (pipe2(p, O_CLOEXEC) < 0)
                abort();
        if (size && write(p[1], data, size) != (ssize_t)size)
                abort();
        close(p[1]);
        out = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (out < 0)
                abort();
        (void)mcp_serve_opts(&h, p[0], out, &opts, &err);
        close(p[0]);
        close(out);
        return 0;
}
