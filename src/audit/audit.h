/* audit.h - the audit log: one JSONL file per server process under VESTIBULE_AUDIT_DIR
 * (files 0600; a directory it creates 0700). Each run_code call leaves a start and an end
 * record sharing one id, or one "blocked" record. Records keep the code up to 4 KiB with its
 * SHA-256 and full size, never the output (only its sizes). A failed write, or one the disk
 * does not confirm within 2 s, comes back as a note for the result's "audit:" line and a line
 * on stderr; after one, the run service refuses runs whose start record is not confirmed
 * (audit_failing()). Thread-safe. Seed: "Usage numbers and the audit log". */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "config/config.h"
#include "run/run.h"

struct audit_log;

/**
 * audit_open() - prepare the log for this process. Does not create anything yet: the
 * directory and file are made on the first record, so a server that never runs code leaves
 * no file. Refuses (-EINVAL, @err names the fix) a dir that is not absolute, or lies inside
 * the workspace or the rootfs dir (then every call must be Blocked:).
 */
int audit_open(const struct sbx_config *cfg, struct audit_log **ret, struct sbx_error *err);

/** audit_close() - flush and close. NULL ok; returns NULL. */
struct audit_log *audit_close(struct audit_log *log);

/**
 * audit_failing() - was the last record the writer finished lost (not written, or its sync
 * failed), has no record been written yet (a folder already full or unwritable when the server
 * started), or has the disk stopped answering (AUDIT_QUEUE_MAX records queued)? Then *@why
 * (@why_size bytes) gets the reason. The run service then makes the next
 * run wait for its start record's confirmation and refuses the run without it (issue 12,
 * finding 24; issue 24), so no run goes unrecorded while the log is known to fail or not yet
 * known to work; a healthy log costs no wait after its first record. NULL @log: false.
 */
bool audit_failing(struct audit_log *log, char *why, size_t why_size);

/* audit_failing()'s reason when no record has been written yet (the log is not known to fail,
 * only not yet known to work), and audit_pending_wait()'s note when a record was not confirmed
 * in time (a slow disk, not a failed write). */
#define AUDIT_WHY_UNPROVEN "no record has been written yet"
#define AUDIT_NOTE_UNCONFIRMED "not confirmed (the disk did not answer within 2 s)"

/** audit_path() - the file this process writes (may not exist yet). Borrowed. */
const char *audit_path(const struct audit_log *log);

/**
 * audit_start() - write the start record of a run: time, id, language, timeout, backend,
 * code (<= 4 KiB), its SHA-256 and size. *@ret_id gets the new record id (a string of at most
 * 32 bytes into @ret_id, which must hold 33). On failure the note is written into @note
 * (size @note_size, e.g. "not recorded (disk full: ENOSPC)").
 */
void audit_start(struct audit_log *log, enum sbx_language lang, unsigned timeout_s,
                 const char *backend, const char *code, size_t code_len, char ret_id[33],
                 char *note, size_t note_size);

/* A start record on its way to the disk (see audit_start_async()). */
struct audit_pending;

/**
 * audit_start_async() - audit_start() without the wait: the record is built and queued (the
 * writer appends it and fdatasync()s it in the background, before any record queued later,
 * so before the run's end record) and the call returns at once, so a backend can build the
 * sandbox while the disk confirms. The caller must pass the result to audit_pending_wait()
 * before the run's result is returned. Never NULL.
 */
struct audit_pending *audit_start_async(struct audit_log *log, enum sbx_language lang,
                                        unsigned timeout_s, const char *backend, const char *code,
                                        size_t code_len, char ret_id[33]);

/**
 * audit_start_async_batch() - audit_start_async() for a record whose end record usually
 * follows within @batch_ms (a session's cell): the writer waits up to @batch_ms for the next
 * record and confirms both with one fdatasync(2) (group commit). The start record is then on
 * the disk at most @batch_ms later than with audit_start_async(), still before the run's
 * result; with the log failing, there is no wait. @batch_ms 0 is audit_start_async().
 */
struct audit_pending *audit_start_async_batch(struct audit_log *log, enum sbx_language lang,
                                              unsigned timeout_s, const char *backend,
                                              const char *code, size_t code_len, unsigned batch_ms,
                                              char ret_id[33]);

/**
 * audit_pending_wait() - wait for the disk's confirmation of @p, at most until 2 s after it
 * was queued (a late wait never adds to that), and free @p. @note as for audit_start(). NULL
 * @p ok (nothing to wait for, @note "").
 */
void audit_pending_wait(struct audit_pending *p, char *note, size_t note_size);

/** audit_end() - the end record for @id: outcome, exit code, usage, output sizes,
 * blocked syscalls, image, isolation. Failure -> @note as for audit_start(). */
void audit_end(struct audit_log *log, const char *id, const struct run_result *res, char *note,
               size_t note_size);

/**
 * audit_end_async() - audit_end() without the wait, like audit_start_async(): the record is
 * queued after every record queued before it; pass the result to audit_pending_wait() before
 * the run's result is returned. Never NULL.
 */
struct audit_pending *audit_end_async(struct audit_log *log, const char *id,
                                      const struct run_result *res);

/**
 * audit_session() - a session's start record (@start: its handle @session, @language, @backend
 * and @isolation grade) or end record (@reason: "session_end", "idle for 900 s", "the cell did
 * not stop on interrupt", "server exit"; @calls made). Each call in the session is tied to it
 * by the "session" field of its end record. Failure -> @note as for audit_start().
 */
void audit_session(struct audit_log *log, bool start, const char *session, const char *language,
                   const char *backend, const char *isolation, const char *reason,
                   unsigned long long calls, char *note, size_t note_size);

/**
 * audit_host_start() - the start record of something run on the host's behalf outside
 * run_code: a `vestibule-mcp run -- CMD` (@what "run --", @text the command line) or a
 * tools/call relayed by `mcp wrap` (@what "mcp wrap NAME", @text the tool's name and arguments).
 * Same fields as audit_start()'s record, @what in "language" (so `vestibule-mcp audit` shows it
 * in that column), @text as the code (<= 4 KiB kept, its SHA-256 and size). *@ret_id as for
 * audit_start(). Failure -> @note as for audit_start(); waits for the disk (<= 2 s).
 */
void audit_host_start(struct audit_log *log, const char *what, unsigned timeout_s,
                      const char *backend, const char *text, size_t text_len, char ret_id[33],
                      char *note, size_t note_size);

/* What an audit_host_end() record says; a 0 or NULL field is left out. */
struct audit_host_end {
        const char *outcome; /* "ok" (exit 0 or a tool result), "error", "timeout", "failed" */
        bool have_exit;
        int exit_code; /* the exit-code contract of `run --` (128+N for a signal) */
        uint64_t wall_ms, cpu_us, mem_peak_bytes;
        const char *isolation, *blocked; /* the grade; the calls the filter refused */
        const char *tried; /* what the command tried that the sandbox watches: "open PATH"
                            * (a secret's path), "connect HOST:PORT", "proxy refused HOST:PORT
                            * (reason)", "left N tasks, killed: NAMES" (src/native/hostrun.h);
                            * `vestibule-mcp audit` shows it after "tried: " */
};

/** audit_host_end() - the end record for @id (from audit_host_start()): the same field names
 * as audit_end()'s (outcome, exit_code, wall_ms, cpu_us, mem_peak_bytes, isolation,
 * blocked_syscalls), and "tried". Failure -> @note as for audit_start(). */
void audit_host_end(struct audit_log *log, const char *id, const struct audit_host_end *e,
                    char *note, size_t note_size);

/** audit_blocked() - one record for a call refused before it reached a backend. */
void audit_blocked(struct audit_log *log, const char *language, const char *code, size_t code_len,
                   const char *reason, char *note, size_t note_size);

/**
 * audit_print() - the `vestibule-mcp audit [N] [--json]` command: the last @n calls (start
 * and end joined by id; a start without an end shows "no end") across the files in @dir, one
 * line each to @out, every recorded string escaped so it cannot drive a terminal. @json:
 * one JSON object per line instead. Return 0 or -errno with @err.
 */
int audit_print(const char *dir, unsigned n, bool json, int out_fd, struct sbx_error *err);
