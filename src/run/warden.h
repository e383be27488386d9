/* warden.h - supervises one run: reads its output (stdout and stderr pipes, or a stream
 * source such as the container backend's) with the output cap, enforces the deadline by the
 * server's own monotonic clock, watches the cancel fd, kills, and fills the outcome and output
 * of a struct run_result. warden_watch() is the supervise step of every backend's sandbox
 * lifecycle (src/run/sandbox.h). */
#pragma once

#include <sys/types.h>

#include "common/clock.h" /* sbx_now_ms(), for the warden's callers */
#include "common/error.h"
#include "run/run.h"
#include "run/sandbox.h"

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
