/* sessions.h - the one record of every session of the run service (docs/design/sessions.md):
 * its handle, language, age, call count and idle clock, and its sandbox: the registry entry
 * (registry.h) that holds the sandbox and the ops it was made by, IDLE between calls. Also
 * the handles that ended (so a late call is told why), and one thread that lives as long as
 * the server, on which every session's sandbox is prepared (a native init dies with the
 * thread that cloned it: PR_SET_PDEATHSIG) and idle sessions are ended. The registry knows no
 * handle: a session's entry is found through its record here. Thread-safe. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "run/run.h"

struct run_sessions;
struct sandbox_entry;    /* registry.h */
struct sandbox_registry; /* registry.h */

/* A handle: "vs-" + 8 hex of this server process's key + "-" + 32 hex from getrandom(2). */
#define SESSION_ID_MAX 48

/* What the table knows of one session. */
struct session_info {
        char id[SESSION_ID_MAX];
        enum sbx_language language;
        char backend[16];
        char grade[320];
        uint64_t created_ms; /* sbx_now_ms() */
        uint64_t calls;      /* calls made (the running one included) */
};

/**
 * sessions_ended_fn - told when a session has left the table, for its audit record: @info is
 * what its record knew, @reason why it ended. Its sandbox is released already (or will be by
 * the call that holds it). Called without the table's lock, from the thread that ended it.
 */
typedef void (*sessions_ended_fn)(void *ud, const struct session_info *info, const char *reason);

/**
 * sessions_new() - an empty table of at most @max_sessions (capped at 64; 0: sessions are
 * off) whose records keep their entries in @reg (borrowed; must outlive the table), and whose
 * idle sessions end after @idle_s seconds (0 is taken as 1). @ended (with @ud) hears of every
 * session's end. Free with sessions_free().
 */
struct run_sessions *sessions_new(struct sandbox_registry *reg, unsigned max_sessions,
                                  unsigned idle_s, sessions_ended_fn ended, void *ud);

/** sessions_stop() - stop the thread (server exit); the table refuses new sessions. */
void sessions_stop(struct run_sessions *t);

/** sessions_free() - sessions_stop() and free. NULL ok; returns NULL. */
struct run_sessions *sessions_free(struct run_sessions *t);

/**
 * sessions_on_thread() - run @fn(@arg) on the table's long-lived thread and wait for it.
 * Return: @fn's return, or -ESHUTDOWN.
 */
int sessions_on_thread(struct run_sessions *t, int (*fn)(void *arg), void *arg);

/**
 * sessions_reserve() - a place for a new session, or -EUSERS (@err: the Blocked: text naming
 * VESTIBULE_MAX_SESSIONS and the fix) or -ESHUTDOWN. On success @ret_id holds its new handle
 * and the place is held until sessions_add() or sessions_unreserve().
 */
int sessions_reserve(struct run_sessions *t, char ret_id[SESSION_ID_MAX], struct sbx_error *err);
void sessions_unreserve(struct run_sessions *t);

/**
 * sessions_add() - the reserved place (used up, whatever the answer) becomes session @info
 * (copied), whose sandbox is @entry (RUNNING, the caller's): @entry is parked (IDLE) and the
 * record holds it from now on. Its idle clock starts now.
 * Return: 0; or sandbox_registry_park()'s error with @err: then @entry stays the caller's
 * (release it).
 */
int sessions_add(struct run_sessions *t, const struct session_info *info,
                 struct sandbox_entry *entry, struct sbx_error *err);

/**
 * sessions_begin_call() - a call of @language in session @id: count it, mark the session busy
 * (the idle clock stops), copy what is known into @ret, and resume its entry
 * (sandbox_registry_resume(), waiting up to @wait_ms for a running slot, @cancel_fd or -1):
 * *@ret_entry is then RUNNING, the call's until sessions_end_call().
 * Return: 0; -ENOENT with @err saying why: a malformed handle, a handle of another server
 * process, one that ended (and how: expired after N s idle, session_end, its cell ignored an
 * interrupt, its backend was reset...), each with how to start another; -EBUSY when a call
 * runs in it already; -EINVAL for another language; the slot's errors (-EBUSY, -ECANCELED,
 * -ESHUTDOWN).
 */
int sessions_begin_call(struct run_sessions *t, const char *id, enum sbx_language language,
                        int cancel_fd, unsigned wait_ms, struct session_info *ret,
                        struct sandbox_entry **ret_entry, struct sbx_error *err);

/**
 * sessions_end_call() - the call in session @id is over: @why_ended NULL, its @entry is parked
 * again and the idle clock restarts; else (the interpreter is gone: @why_ended says how), or
 * when the park is refused (shutdown), the session ends: @entry is released (its sandbox
 * destroyed) and the session leaves the table.
 */
void sessions_end_call(struct run_sessions *t, const char *id, struct sandbox_entry *entry,
                       const char *why_ended);

/**
 * sessions_end() - session_end: session @id leaves the table (later calls are told @reason)
 * and its entry is released, which destroys its sandbox; @ret_info gets what the record knew.
 * Return: 0; -ENOENT (as sessions_begin_call() says it) or -EBUSY (a call runs in it; it
 * stays), with @err.
 */
int sessions_end(struct run_sessions *t, const char *id, const char *reason,
                 struct session_info *ret_info, struct sbx_error *err);

/**
 * sessions_end_all() - server exit: every session leaves the table for @reason; the entries
 * no call holds are released now (a call that holds one releases it as it ends).
 */
void sessions_end_all(struct run_sessions *t, const char *reason);
