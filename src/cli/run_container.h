/* run_container.h - `run -- CMD` on the container backend: the native request (the host view,
 * argv, env, limits) handed to src/engine/hostrun.c, its result in the native result's shape,
 * so the summary, the audit and the exit code are the same code as native's. */
#pragma once

#include "common/error.h"
#include "config/config.h"
#include "native/hostrun.h"

/**
 * run_container_host() - run @req (built for native_host_run(); its view's pty_slave, overlay
 * and writable are not used, nor its watch list: no supervisor watches opens there) with
 * engine_host_run(), filling @res (grade, exit code, wall time, tried: the proxy's refusals;
 * cpu and memory are not measured: 0).
 * Return: 0 when the command ran, or -errno when the sandbox could not be set up (@err names
 * the fix; the caller exits 125).
 */
int run_container_host(const struct sbx_config *cfg, const struct native_host_req *req,
                       struct native_host_result *res, struct sbx_error *err);
