/* registry.h - the one registry of live sandboxes (docs/design/lifecycle.md): every sandbox
 * from a successful prepare until its destroy, with its state and backend, and the calls
 * about to prepare one. The concurrency limit is a count here (entries PREPARING or RUNNING:
 * VESTIBULE_MAX_CONCURRENT), and server shutdown is one loop here: kill every sandbox, destroy
 * those no call owns. Thread-safe: every function may be called from any thread. */
#pragma once

#include <stdbool.h>

#include "common/error.h"
#include "run/backend.h"
#include "run/sandbox.h"

enum sandbox_state {
        /* A call holds a running slot and prepares its sandbox (or takes a spare); no
         * sandbox attached yet. Counts as running. */
        SANDBOX_STATE_PREPARING = 0,
        /* A call owns the sandbox, from attach to release (start, supervise, collect). Counts
         * as running. */
        SANDBOX_STATE_RUNNING,
        /* Prepared ahead of any request (a warm spare, issue 17); the registry owns it until a
         * call of its backend and language takes it. Does not count as running. */
        SANDBOX_STATE_SPARE,
        /* A session between calls (issue 14); the registry owns it, under its id, until a
         * call resumes it or it is dropped. Does not count as running. */
        SANDBOX_STATE_IDLE,
};

struct sandbox_registry;
struct sandbox_entry; /* one registered sandbox (or a call about to have one) */

/**
 * sandbox_registry_new() - an empty registry that lets at most @max_running entries be
 * PREPARING or RUNNING at once (0 is taken as 1). Free with sandbox_registry_free().
 */
struct sandbox_registry *sandbox_registry_new(unsigned max_running);

/**
 * sandbox_registry_free() - sandbox_registry_shutdown(), then destroy every sandbox still
 * registered (their calls must be over: the MCP server joined its workers) and free. NULL ok;
 * returns NULL.
 */
struct sandbox_registry *sandbox_registry_free(struct sandbox_registry *r);

/**
 * sandbox_registry_acquire() - a running slot for one call: a new PREPARING entry, waiting up
 * to @wait_ms for one to come free. @cancel_fd (or -1) readable ends the wait.
 * Return: 0 and *@ret; -EBUSY (no slot came free), -ECANCELED, or -ESHUTDOWN, each with @err
 * holding the Blocked: text.
 */
int sandbox_registry_acquire(struct sandbox_registry *r, int cancel_fd, unsigned wait_ms,
                             struct sandbox_entry **ret, struct sbx_error *err);

/**
 * sandbox_registry_attach() - @e (PREPARING) gets the sandbox @sb of @b that prepare() just
 * returned, and becomes RUNNING. When the registry is shutting down, @sb is killed at once
 * (the call's own thread still goes on to collect and release it).
 */
void sandbox_registry_attach(struct sandbox_registry *r, struct sandbox_entry *e, struct backend *b,
                             struct sandbox *sb);

/**
 * sandbox_registry_attach_ops() - sandbox_registry_attach() for a sandbox made by other ops
 * of @b than b->ops->sandbox (a session's b->ops->cells): kill and destroy go through @ops.
 */
void sandbox_registry_attach_ops(struct sandbox_registry *r, struct sandbox_entry *e,
                                 struct backend *b, const struct sandbox_ops *ops,
                                 struct sandbox *sb);

/**
 * sandbox_registry_drop_session() - destroy the IDLE session @session_id (session_end, idle
 * expiry). Return: 0; -ENOENT (no such session); -EBUSY (a call is running in it: it stays).
 */
int sandbox_registry_drop_session(struct sandbox_registry *r, const char *session_id);

/**
 * sandbox_registry_take_spare() - give @e (PREPARING) a SPARE sandbox of @b for @language,
 * if one is registered: @e becomes RUNNING with it, and the spare's entry is gone.
 * Return: the sandbox, or NULL (then prepare one).
 */
struct sandbox *sandbox_registry_take_spare(struct sandbox_registry *r, struct sandbox_entry *e,
                                            struct backend *b, enum sbx_language language);

/**
 * sandbox_registry_take_spare_of() - sandbox_registry_take_spare() for a spare made by other
 * ops of @b than b->ops->sandbox (a session's spare, made by b->ops->cells in
 * SANDBOX_MODE_CELLS): only a spare of @ops is taken.
 */
struct sandbox *sandbox_registry_take_spare_of(struct sandbox_registry *r, struct sandbox_entry *e,
                                               struct backend *b, const struct sandbox_ops *ops,
                                               enum sbx_language language);

/**
 * sandbox_registry_add_spare() - register @sb, prepared ahead by @b for @language, as a
 * SPARE the registry owns from now on.
 * Return: 0; -ESHUTDOWN when the registry is shutting down (then @sb was destroyed).
 */
int sandbox_registry_add_spare(struct sandbox_registry *r, struct backend *b, struct sandbox *sb,
                               enum sbx_language language);

/** sandbox_registry_add_spare_of() - sandbox_registry_add_spare() for @sb made by @ops of @b. */
int sandbox_registry_add_spare_of(struct sandbox_registry *r, struct backend *b,
                                  const struct sandbox_ops *ops, struct sandbox *sb,
                                  enum sbx_language language);

/**
 * sandbox_registry_release() - the end of a call's hold on @e: destroy its sandbox (if one
 * was attached; outside the registry's lock), remove @e and free its slot. @e is invalid
 * afterwards.
 */
void sandbox_registry_release(struct sandbox_registry *r, struct sandbox_entry *e);

/**
 * sandbox_registry_park() - a session's call is over (its collect returned): @e (RUNNING)
 * becomes IDLE under @session_id (copied; 1..63 bytes), its running slot is freed, and the
 * registry owns the sandbox until sandbox_registry_resume() or a drop. The caller no longer
 * holds @e.
 * Return: 0; -EEXIST when another entry has that id, -EINVAL for a bad id, -ESHUTDOWN: then
 * @e stays the caller's (release it).
 */
int sandbox_registry_park(struct sandbox_registry *r, struct sandbox_entry *e,
                          const char *session_id, struct sbx_error *err);

/**
 * sandbox_registry_resume() - a call on session @session_id: waits for a running slot as
 * sandbox_registry_acquire() does, then the IDLE entry becomes RUNNING, the caller's (its
 * sandbox attached: go on with start()).
 * Return: 0 and *@ret; -ENOENT (no idle session of that id: gone, or in use by another call),
 * or acquire's errors, each with @err.
 */
int sandbox_registry_resume(struct sandbox_registry *r, const char *session_id, int cancel_fd,
                            unsigned wait_ms, struct sandbox_entry **ret, struct sbx_error *err);

/**
 * sandbox_registry_discard() - destroy @e's sandbox (outside the registry's lock) and take
 * @e back to PREPARING, its running slot kept: for a call that goes on with another sandbox
 * (a start that answered -ESTALE, picked again). No-op while PREPARING.
 */
void sandbox_registry_discard(struct sandbox_registry *r, struct sandbox_entry *e);

/**
 * sandbox_registry_drop_backend() - destroy every SPARE and IDLE sandbox of @b (its probe
 * was invalidated, or the settings changed). RUNNING ones are left to their calls.
 * Return: how many were destroyed.
 */
unsigned sandbox_registry_drop_backend(struct sandbox_registry *r, struct backend *b);

/**
 * sandbox_registry_drop_spare() - destroy the SPARE sandboxes of @b for @language (a warm
 * spare that idled out, src/service/warm.h). Return: how many were destroyed.
 */
unsigned sandbox_registry_drop_spare(struct sandbox_registry *r, struct backend *b,
                                     enum sbx_language language);

/** sandbox_registry_drop_spare_of() - sandbox_registry_drop_spare() for spares made by @ops. */
unsigned sandbox_registry_drop_spare_of(struct sandbox_registry *r, struct backend *b,
                                        const struct sandbox_ops *ops, enum sbx_language language);

/**
 * sandbox_registry_shutdown() - server exit: refuse new entries and spares from now on
 * (-ESHUTDOWN), kill every registered sandbox, destroy every SPARE and IDLE one, and wake
 * every call waiting for a slot. A RUNNING sandbox is destroyed by its own call's release
 * (its warden sees the kill at once). Idempotent.
 */
void sandbox_registry_shutdown(struct sandbox_registry *r);

/** sandbox_registry_count() - how many entries are in @state now. */
unsigned sandbox_registry_count(struct sandbox_registry *r, enum sandbox_state state);

/** sandbox_entry_sandbox() - @e's sandbox, or NULL while PREPARING. */
struct sandbox *sandbox_entry_sandbox(const struct sandbox_entry *e);

/** sandbox_entry_backend() - @e's backend, or NULL while PREPARING. */
struct backend *sandbox_entry_backend(const struct sandbox_entry *e);

/** sandbox_entry_ops() - the ops @e's sandbox was made by, or NULL while PREPARING. */
const struct sandbox_ops *sandbox_entry_ops(const struct sandbox_entry *e);
