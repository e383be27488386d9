/* registry.h - the one registry of live sandboxes (docs/design/lifecycle.md): every sandbox
 * from a successful prepare until its destroy, with its state and backend, and the calls
 * about to prepare one. The concurrency limit is a count here (entries PREPARING or RUNNING:
 * VESTIBULE_MAX_CONCURRENT), and server shutdown is one loop here: kill every sandbox, destroy
 * those no call owns. Thread-safe: every function may be called from any thread. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

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
        /* A session between calls (issue 14): its session record (sessions.h) holds the
         * entry until a call resumes it or the session ends (a release). Does not count as
         * running. */
        SANDBOX_STATE_IDLE,
        /* An IDLE entry whose sandbox the registry destroyed (its backend was reset, or the
         * server is shutting down): the session record still holds it; resume answers
         * -ENOENT, and a release frees it. Does not count as running. */
        SANDBOX_STATE_GONE,
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
 * sandbox_registry_attach() - @e (PREPARING) gets the sandbox @sb that @ops of @b just
 * prepared (b->ops->sandbox, or a session's b->ops->cells: kill and destroy go through @ops),
 * and becomes RUNNING. When the registry is shutting down, @sb is killed at once (the call's
 * own thread still goes on to collect and release it).
 */
void sandbox_registry_attach(struct sandbox_registry *r, struct sandbox_entry *e, struct backend *b,
                             const struct sandbox_ops *ops, struct sandbox *sb);

/**
 * sandbox_registry_take_spare() - give @e (PREPARING) a SPARE sandbox made by @ops of @b for
 * @language, if one is registered: @e becomes RUNNING with it, and the spare's entry is gone.
 * Return: the sandbox, or NULL (then prepare one).
 */
struct sandbox *sandbox_registry_take_spare(struct sandbox_registry *r, struct sandbox_entry *e,
                                            struct backend *b, const struct sandbox_ops *ops,
                                            enum sbx_language language);

/**
 * sandbox_registry_add_spare() - register @sb, prepared ahead by @ops of @b for @language, as
 * a SPARE the registry owns from now on (its clock for sandbox_registry_drop_idle_spares()
 * starts now).
 * Return: 0; -ESHUTDOWN when the registry is shutting down (then @sb was destroyed).
 */
int sandbox_registry_add_spare(struct sandbox_registry *r, struct backend *b,
                               const struct sandbox_ops *ops, struct sandbox *sb,
                               enum sbx_language language);

/** sandbox_registry_has_spare() - is a SPARE of (@b, @ops, @language) registered now? */
bool sandbox_registry_has_spare(struct sandbox_registry *r, struct backend *b,
                                const struct sandbox_ops *ops, enum sbx_language language);

/**
 * sandbox_registry_release() - the end of a hold on @e: a call's (PREPARING, RUNNING), or a
 * session record's (IDLE, GONE: the session ended). Destroys its sandbox (if one is attached;
 * outside the registry's lock), removes @e and frees its slot. @e is invalid afterwards.
 * NULL ok.
 */
void sandbox_registry_release(struct sandbox_registry *r, struct sandbox_entry *e);

/**
 * sandbox_registry_park() - a session's call is over (its collect returned): @e (RUNNING)
 * becomes IDLE, its running slot is freed, and the sandbox waits for the session's next call.
 * The session record (sessions.h) keeps @e; nothing here names the session.
 * Return: 0; -EINVAL (@e is not RUNNING) or -ESHUTDOWN, with @err: then @e stays the
 * caller's, RUNNING (release it).
 */
int sandbox_registry_park(struct sandbox_registry *r, struct sandbox_entry *e,
                          struct sbx_error *err);

/**
 * sandbox_registry_resume() - a call on the session whose record holds @e: waits for a
 * running slot as sandbox_registry_acquire() does, then @e (IDLE) becomes RUNNING, the
 * caller's (go on with start()).
 * Return: 0; -ENOENT when @e's sandbox is GONE (destroyed by sandbox_registry_drop_backend()
 * or the shutdown: release @e) or @e is not IDLE; or acquire's errors; each with @err.
 */
int sandbox_registry_resume(struct sandbox_registry *r, struct sandbox_entry *e, int cancel_fd,
                            unsigned wait_ms, struct sbx_error *err);

/**
 * sandbox_registry_discard() - destroy @e's sandbox (outside the registry's lock) and take
 * @e back to PREPARING, its running slot kept: for a call that goes on with another sandbox
 * (a start that answered -ESTALE, picked again). No-op while PREPARING.
 */
void sandbox_registry_discard(struct sandbox_registry *r, struct sandbox_entry *e);

/**
 * sandbox_registry_drop_backend() - destroy every SPARE and IDLE sandbox of @b (its probe
 * was invalidated, or the settings changed): a SPARE's entry goes, an IDLE one becomes GONE
 * (its session record still holds it). RUNNING ones are left to their calls.
 * Return: how many sandboxes were destroyed.
 */
unsigned sandbox_registry_drop_backend(struct sandbox_registry *r, struct backend *b);

/**
 * sandbox_registry_drop_spare() - destroy the SPARE sandboxes made by @ops of @b for
 * @language; @ops NULL: every SPARE of @b, of any ops and language (warm_drop()).
 * Return: how many were destroyed.
 */
unsigned sandbox_registry_drop_spare(struct sandbox_registry *r, struct backend *b,
                                     const struct sandbox_ops *ops, enum sbx_language language);

/**
 * sandbox_registry_drop_idle_spares() - destroy every SPARE registered @idle_ms or longer
 * ago (sbx_now_ms(), from sandbox_registry_add_spare()): warm spares that idled out
 * (VESTIBULE_WARM_IDLE_S, src/service/warm.h).
 * Return: how many were destroyed; *@ret_next_due_ms (or NULL) gets when the next one left is
 * due (sbx_now_ms() time), or UINT64_MAX when none is left.
 */
unsigned sandbox_registry_drop_idle_spares(struct sandbox_registry *r, uint64_t idle_ms,
                                           uint64_t *ret_next_due_ms);

/**
 * sandbox_registry_shutdown() - server exit: refuse new entries and spares from now on
 * (-ESHUTDOWN), kill every registered sandbox, destroy every SPARE one (its entry goes) and
 * every IDLE one (its entry becomes GONE, for its session record to release), and wake
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
