/* ladder.h - which backend runs a call (private to src/run): VESTIBULE_BACKEND forces one;
 * auto takes the strongest that verifies: gvisor, native, then a full container, then
 * gvisor-degraded, native-degraded, then container-degraded, else Blocked: with the reasons.
 * Backends are created on first use and their probes cached: a usable probe for the server's life
 * (until a run fails), an unusable one for a few seconds, so a fix (setup, starting Docker) is seen
 * on retry. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "config/config.h"
#include "run/backend.h"

struct ladder;

/** ladder_new() - a ladder for @cfg (borrowed). @native / @container: the constructors
 * (NULL = native_backend_new / engine_backend_new; tests pass doubles). */
struct ladder *ladder_new(const struct sbx_config *cfg, backend_ctor_fn native,
                          backend_ctor_fn container);

/** ladder_free() - backend_free() every backend made. NULL ok; returns NULL. */
struct ladder *ladder_free(struct ladder *l);

/**
 * ladder_pick() - the backend for the next run and what its probe said. Thread-safe.
 * Auto (VESTIBULE_BACKEND unset) never picks native when @cfg->in_container (the native rung
 * is not probed; its Blocked: text says so); a forced VESTIBULE_BACKEND=native still tries it.
 * Return: 0 with *@ret_b (borrowed; lives as long as the ladder) and *@ret_probe, or -errno
 * with @err holding the Blocked: text.
 */
int ladder_pick(struct ladder *l, struct backend **ret_b, struct backend_probe *ret_probe,
                struct sbx_error *err);

/** ladder_invalidate() - forget @b's cached probe (its run failed): the next pick probes it. */
void ladder_invalidate(struct ladder *l, struct backend *b);

/* What auto picks from the two probes. */
enum ladder_choice {
        LADDER_CHOICE_NONE = 0, /* Blocked: both reasons */
        LADDER_CHOICE_NATIVE,
        LADDER_CHOICE_CONTAINER,
        LADDER_CHOICE_GVISOR,
};

/**
 * ladder_decide() - the auto rule on two probe results: native, then a full container, then
 * native-degraded, then container-degraded, else none. @nat may be NULL (never probed: a
 * non-Linux build, where native is never tried). Pure; doctor uses it to say what auto picks.
 */
enum ladder_choice ladder_decide(const struct backend_probe *nat, const struct backend_probe *con);

/**
 * ladder_decide_all() - the auto rule with the gvisor rung (src/gvisor/gvisor.h) too: gvisor,
 * native, a full container, then gvisor-degraded, native-degraded, container-degraded, else
 * none. @gv may be NULL (not tried: the rung is left out). Pure.
 */
enum ladder_choice ladder_decide_all(const struct backend_probe *gv,
                                     const struct backend_probe *nat,
                                     const struct backend_probe *con);

/**
 * ladder_blocked_text() - the Blocked: text (without the prefix) when ladder_decide() said
 * none: both backends' reasons, each naming its fix. @nat may be NULL (non-Linux build).
 */
void ladder_blocked_text(char *buf, size_t size, const struct backend_probe *nat,
                         const struct backend_probe *con);

/** ladder_native_supported() - false on builds for other systems than Linux. */
bool ladder_native_supported(void);

/** ladder_shutdown() - shutdown() every backend made: kills runs in flight. Thread-safe. */
void ladder_shutdown(struct ladder *l);
