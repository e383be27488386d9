/* run_audit.h - the audit records of `vestibule-mcp run -- CMD` and of the tools/call requests
 * `mcp wrap` relays: the same log, writer and reader as run_code (src/audit/audit.h,
 * audit_host_start()/audit_host_end()), so `vestibule-mcp audit` lists them with the rest. */
#pragma once

#include <stdbool.h>

#include "audit/audit.h"
#include "config/config.h"
#include "native/hostrun.h"

struct run_audit {
        struct audit_log *log;
        char id[33]; /* the start record's id; "" before it */
};

/**
 * run_audit_begin() - open the audit log of @cfg (VESTIBULE_AUDIT_DIR) and write the start
 * record of @what ("run --", "mcp wrap NAME") for the command @argv (NULL-ended; recorded
 * shell-quoted, the first 4 KiB) with its time limit @timeout_s (seconds: the record's timeout
 * field, audit_host_start() in src/audit/audit.h), waiting for the disk's confirmation (up to
 * 2 s). A record that could not be written (a full disk, an unwritable folder) stops the run:
 * the caller exits 125, as run_code refuses a run its failing log cannot record. One the disk
 * did not confirm within 2 s (a busy disk) is said on stderr and the run goes on;
 * audit_close() at the end waits for it.
 * @a: filled (zeroed first); end it with run_audit_end(), which closes the log.
 * Return: 0, or -1 with the reason on stderr (@a closed).
 */
int run_audit_begin(const struct sbx_config *cfg, const char *what, char *const *argv,
                    unsigned timeout_s, struct run_audit *a);

/**
 * run_audit_end() - the end record: @code (the exit-code contract), the grade, usage and
 * refused calls of @res (NULL when the sandbox was not set up); then the log closed. A failed
 * write is said on stderr. NULL-safe on an @a never begun.
 */
void run_audit_end(struct run_audit *a, int code, const struct native_host_result *res);

/** run_audit_shell_quote() - @argv (NULL-ended) as one line a POSIX shell would split back the
 * same way: a word of only [A-Za-z0-9@%+=:,./_-] as it is, any other in single quotes with a '
 * inside as '\'' (sh(1), "Quoting"). New string (free()); "" for an empty @argv. Never fails
 * (allocation failure aborts). */
char *run_audit_shell_quote(char *const *argv);
