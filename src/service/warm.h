/* warm.h - warm spares (issue 17; docs/design/lifecycle.md, "What builds on it"): one sandbox
 * per backend and language prepared ahead of the next call, in a background thread, and kept
 * in the registry (src/service/registry.h) as a SPARE until a call takes it. The registry's
 * SPARE entry is the one record of a spare (with its age); the keeper holds only the demand.
 *
 * What a spare is, is the backend's: prepare() goes as far as it can without the code (native:
 * namespaces, mounts, pivot_root, Landlock, the seccomp filter, and the interpreter started and
 * blocked on the program's FIFO; docs/native.md, "Warm spares"). The keeper here only decides
 * when to prepare and when to drop:
 *
 *   - demand: a spare of (backend, language) is built after a call of that pair took one or
 *     prepared its own (warm_want()), so an idle server that never ran anything holds none;
 *   - bound: at most one spare per (backend, language) for run_code, and one per (backend,
 *     language) for session_start (a session's: the runner started, SANDBOX_MODE_CELLS),
 *     kept only after a session of that pair started;
 *   - once: a spare is taken by exactly one call (the registry hands it over under its lock)
 *     and destroyed after that call; never shared, never forked;
 *   - dropped: after VESTIBULE_WARM_IDLE_S unused, when the backend's probe is invalidated
 *     (warm_drop(), from ladder_invalidate's callers), at shutdown (the registry destroys every
 *     spare); a spare built before a setup or under another probe answer is refused by the
 *     backend's start() (-ESTALE) and never runs code;
 *   - off: VESTIBULE_WARM=0 makes warm_take() and warm_want() no-ops.
 *
 * Thread-safe. */
#pragma once

#include <stdbool.h>

#include "config/config.h"
#include "run/backend.h"
#include "run/sandbox.h"
#include "service/registry.h"

struct warm_keeper;

/**
 * warm_keeper_new() - a keeper for @cfg (borrowed: warm, warm_idle_s) over @reg (borrowed;
 * must outlive the keeper). Starts its thread only on the first warm_want().
 * Return: the keeper; free with warm_keeper_free().
 */
struct warm_keeper *warm_keeper_new(const struct sbx_config *cfg, struct sandbox_registry *reg);

/** warm_keeper_stop() - no spare is built from now on (server shutdown); does not wait. */
void warm_keeper_stop(struct warm_keeper *w);

/**
 * warm_keeper_free() - stop the thread (a prepare in progress finishes and its spare is
 * destroyed when the registry is shutting down, see sandbox_registry_add_spare()). Spares
 * already registered stay the registry's (its shutdown destroys them). NULL ok; returns NULL.
 */
struct warm_keeper *warm_keeper_free(struct warm_keeper *w);

/**
 * warm_take() - the spare of (@b, @language) for the call holding @e (PREPARING), or NULL.
 * When the keeper is preparing that spare right now, waits for it, at most @wait_ms (a spare
 * half built is nearer than a new one). On success @e is RUNNING with the spare.
 */
struct sandbox *warm_take(struct warm_keeper *w, struct sandbox_entry *e, struct backend *b,
                          enum sbx_language language, unsigned wait_ms);

/**
 * warm_want() - a call of (@b, @language) is over (or took the spare): have one ready for the
 * next. Only for backends with sandbox ops; returns at once.
 */
void warm_want(struct warm_keeper *w, struct backend *b, enum sbx_language language);

/**
 * warm_take_session() - warm_take() for session_start: a spare prepared by b->ops->cells in
 * SANDBOX_MODE_CELLS (the session's runner started and ready), or NULL (also when @b's cells
 * ops have no claim()). The caller calls claim() on it before its first cell.
 */
struct sandbox *warm_take_session(struct warm_keeper *w, struct sandbox_entry *e, struct backend *b,
                                  enum sbx_language language, unsigned wait_ms);

/**
 * warm_want_session() - a session of (@b, @language) started: have a session's spare (one
 * per pair, as for one-shot spares) ready for the next session_start.
 */
void warm_want_session(struct warm_keeper *w, struct backend *b, enum sbx_language language);

/**
 * warm_drop() - destroy every spare of @b and forget the demand for it (its probe was
 * invalidated: what the spares were built under may be gone). The next call of @b prepares
 * its own sandbox and asks for spares again.
 */
void warm_drop(struct warm_keeper *w, struct backend *b);
