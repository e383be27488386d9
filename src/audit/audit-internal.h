/* audit-internal.h - test hooks for the audit log: a writer that stalls like a dead disk. */
#pragma once

#include <sys/types.h>

#include "audit/audit.h"

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
