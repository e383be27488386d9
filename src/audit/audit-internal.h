/* audit-internal.h - what the audit log's three files share (the writer, writer.c; the record
 * builders, record.c; the reader, reader.c), and a test hook: a writer that stalls like a dead
 * disk. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "audit/audit.h"
#include "common/buf.h"

/** audit_set_writer_delay_ms() - the writer sleeps @ms before each write (tests only). */
void audit_set_writer_delay_ms(struct audit_log *log, unsigned ms);

/** audit_confirm_timeout_ms - how long a caller waits for the disk: 2000. */
#define AUDIT_CONFIRM_TIMEOUT_MS 2000u
/** Records kept whole up to this many bytes of code. */
#define AUDIT_CODE_MAX_BYTES 4096u
/** Records waiting for a stuck writer before new ones are refused at once. */
#define AUDIT_QUEUE_MAX 64u
/** Records the writer appends before one fdatasync confirms them all (group commit). */
#define AUDIT_BATCH_MAX 16u
/** Bytes kept allocated past the end of the audit file, so a full disk cannot cut the next
 * records (issue 12, finding 24): 1 MiB, ~200 records with 4 KiB of code. */
#define AUDIT_RESERVE_BYTES ((off_t)1 << 20)

/**
 * audit_queue() - hand @line (@len bytes, one JSON record ending in '\n'; taken over and freed)
 * to the writer thread of @log (started on the first record). The AUDIT_CONFIRM_TIMEOUT_MS the
 * caller may wait for the confirmation run from now, so a caller that waits later
 * (audit_start_async()) never waits longer. With @batch_ms the writer may wait that long for
 * the next record to confirm both with one fdatasync(2). NULL @log is allowed.
 * Return: the pending record for audit_pending_wait() (never NULL); a record that could not be
 * queued (no log, a stuck writer, no thread) carries its note already. writer.c.
 */
struct audit_pending *audit_queue(struct audit_log *log, char *line, size_t len, unsigned batch_ms);

/** audit_submit() - audit_queue() @line, then wait for its confirmation, at most
 * AUDIT_CONFIRM_TIMEOUT_MS; @note as audit_pending_wait() fills it. writer.c. */
void audit_submit(struct audit_log *log, char *line, size_t len, char *note, size_t note_size);

/**
 * audit_json_str() - append @s (@n bytes) to @b as a JSON string (RFC 8259, section 7). Each
 * invalid UTF-8 byte becomes the text \xNN. With @ascii the output is ASCII only: every other
 * character as \uXXXX (a surrogate pair above U+FFFF), so it is safe on any terminal (the
 * reader's --json); without, valid UTF-8 is kept as it is and control characters, DEL and C1
 * become \uXXXX (the record's form). Out of memory aborts (sbx_buf).
 * Return: true if @s was valid UTF-8, false if any byte was written as \xNN. record.c.
 */
bool audit_json_str(struct sbx_buf *b, const char *s, size_t n, bool ascii);
