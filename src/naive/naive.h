/* naive.h - the naive backend's one public entry: its constructor (src/naive/naive.c). The
 * naive backend runs code with NO isolation (development only); the service's ladder
 * (src/service/ladder.c) and the tests are its only callers. */
#pragma once

#include "common/error.h"
#include "config/config.h"
#include "run/backend.h"

/**
 * naive_backend_new() - a new naive backend in *@ret (free with backend_free(), run/backend.h);
 * @cfg is borrowed and must outlive it. Only allocates: the host checks are in its probe().
 * Return: 0, or -errno with @err.
 */
int naive_backend_new(const struct sbx_config *cfg, struct backend **ret, struct sbx_error *err);
