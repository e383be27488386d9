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
struct sandbox_entry; /* registry.h */

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
 * sessions_drop_fn - what ends a session that idled out: called from the table's thread, its
 * record already out of the table, with what the record held (@entry: IDLE or GONE, now the
 * callee's: it releases it) and the reason. It writes the audit record.
 */
typedef void (*sessions_drop_fn)(void *ud, const struct session_info *info,
                                 struct sandbox_entry *entry, const char *reason);

/**
 * sessions_new() - an empty table of at most @max_sessions (capped at 64; 0: sessions are
 * off) whose idle sessions end after @idle_s seconds (0 is taken as 1) through @drop (with
 * @ud). Free with sessions_free().
 */
struct run_sessions *sessions_new(unsigned max_sessions, unsigned idle_s, sessions_drop_fn drop,
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

/**
 * sessions_add() - the reserved place becomes session @info (copied), whose sandbox is @entry
 * (parked: IDLE); the record holds @entry from now on. Its idle clock starts now.
 */
void sessions_add(struct run_sessions *t, const struct session_info *info,
                  struct sandbox_entry *entry);

/**
 * sessions_begin_call() - a call in session @id: count it, mark the session busy (the idle
 * clock stops), copy what is known into @ret and its entry into *@ret_entry (the record
 * keeps it; the call resumes it, sandbox_registry_resume()).
 * Return: 0; -ENOENT with @err saying why: a malformed handle, a handle of another server
 * process, one that ended (and how: expired after N s idle, session_end, its cell ignored an
 * interrupt...), each with how to start another; -EBUSY when a call runs in it already.
 */
int sessions_begin_call(struct run_sessions *t, const char *id, struct session_info *ret,
                        struct sandbox_entry **ret_entry, struct sbx_error *err);

/** sessions_end_call() - the call is over, its entry parked again; the idle clock restarts. */
void sessions_end_call(struct run_sessions *t, const char *id);

/**
 * sessions_remove() - session @id is over (@reason: "the server exited", ...): its record
 * leaves the table and later calls with its handle are told @reason. @ret_info (or NULL) gets
 * what the record knew; *@ret_entry its entry when no call holds it (the caller releases it
 * now), NULL when a call does (that call releases it).
 * Return: false if it was not in the table.
 */
bool sessions_remove(struct run_sessions *t, const char *id, const char *reason,
                     struct session_info *ret_info, struct sandbox_entry **ret_entry);

/**
 * sessions_end() - session_end: session @id leaves the table as sessions_remove() says, but
 * only when no call runs in it; *@ret_entry is its entry (the caller releases it).
 * Return: 0; -ENOENT (as sessions_begin_call() says it) or -EBUSY (a call runs in it; it
 * stays), with @err.
 */
int sessions_end(struct run_sessions *t, const char *id, const char *reason,
                 struct session_info *ret_info, struct sandbox_entry **ret_entry,
                 struct sbx_error *err);

/** sessions_ids() - the handles of every session now (server exit): up to @max into @ret. */
unsigned sessions_ids(struct run_sessions *t, char (*ret)[SESSION_ID_MAX], unsigned max);
