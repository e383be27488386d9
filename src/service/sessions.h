/* sessions.h - the session table of the run service (docs/design/sessions.md): handles,
 * their language, age, call count and idle clock, the handles that ended (so a late call is
 * told why), and one thread that lives as long as the server, on which every session's
 * sandbox is prepared (a native init dies with the thread that cloned it: PR_SET_PDEATHSIG)
 * and idle sessions are ended. The sandboxes themselves are in the registry (registry.h) as
 * IDLE entries under their handle. Thread-safe. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "run/run.h"

struct run_sessions;

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
 * sessions_new() - an empty table whose idle sessions end after @idle_s seconds: @drop is
 * called (from the table's thread, with @ud) for each, with the reason; it ends the sandbox
 * and writes the audit record. Free with sessions_free().
 */
struct run_sessions *sessions_new(unsigned max_sessions, unsigned idle_s,
                                  void (*drop)(void *ud, const char *id, const char *reason),
                                  void *ud);

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

/** sessions_add() - the reserved place becomes session @info (copied). */
void sessions_add(struct run_sessions *t, const struct session_info *info);

/**
 * sessions_begin_call() - a call in session @id: count it, mark the session busy (the idle
 * clock stops) and copy what is known into @ret.
 * Return: 0; -ENOENT with @err saying why: a malformed handle, a handle of another server
 * process, one that ended (and how: expired after N s idle, session_end, its cell ignored an
 * interrupt...), each with how to start another; -EBUSY when a call runs in it already.
 */
int sessions_begin_call(struct run_sessions *t, const char *id, struct session_info *ret,
                        struct sbx_error *err);

/** sessions_end_call() - the call is over; the idle clock starts again. */
void sessions_end_call(struct run_sessions *t, const char *id);

/**
 * sessions_remove() - session @id is over (@reason: "ended by session_end", ...): it leaves
 * the table and later calls with its handle are told @reason; @ret_info (or NULL) gets what
 * the table knew of it. Return: false if it was not in the table.
 */
bool sessions_remove(struct run_sessions *t, const char *id, const char *reason,
                     struct session_info *ret_info);

/**
 * sessions_check() - is @id a session of this table now? Return 0, or -ENOENT with @err as
 * sessions_begin_call() says it.
 */
int sessions_check(struct run_sessions *t, const char *id, struct sbx_error *err);

/** sessions_ids() - the handles of every session now (server exit): up to @max into @ret. */
unsigned sessions_ids(struct run_sessions *t, char (*ret)[SESSION_ID_MAX], unsigned max);
