/* ladder.h - which backend runs a call (private to src/run): VESTIBULE_BACKEND forces one;
 * auto takes the strongest that verifies: native, then a full container, then native-degraded,
 * then container-degraded, else Blocked: with both reasons. Backends are created on first use
 * and their probes cached: a usable probe for the server's life (until a run fails), an
 * unusable one for a few seconds, so a fix (setup, starting Docker) is seen on retry. */
#pragma once

#include "common/error.h"
#include "config/config.h"
#include "run/backend.h"

typedef int (*backend_ctor_fn)(const struct sbx_config *cfg, struct backend **ret,
                               struct sbx_error *err);

struct ladder;

/** ladder_new() - a ladder for @cfg (borrowed). @native / @container: the constructors
 * (NULL = native_backend_new / engine_backend_new; tests pass doubles). */
struct ladder *ladder_new(const struct sbx_config *cfg, backend_ctor_fn native,
                          backend_ctor_fn container);

/** ladder_free() - backend_free() every backend made. NULL ok; returns NULL. */
struct ladder *ladder_free(struct ladder *l);

/**
 * ladder_pick() - the backend for the next run and what its probe said. Thread-safe.
 * Return: 0 with *@ret_b (borrowed; lives as long as the ladder) and *@ret_probe, or -errno
 * with @err holding the Blocked: text.
 */
int ladder_pick(struct ladder *l, struct backend **ret_b, struct backend_probe *ret_probe,
                struct sbx_error *err);

/** ladder_invalidate() - forget @b's cached probe (its run failed): the next pick probes it. */
void ladder_invalidate(struct ladder *l, struct backend *b);

/** ladder_shutdown() - shutdown() every backend made: kills runs in flight. Thread-safe. */
void ladder_shutdown(struct ladder *l);
