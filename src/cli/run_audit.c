/* run_audit.c - the audit records of `run -- CMD` (and the log `mcp wrap` shares). See
 * run_audit.h. */
#include "cli/run_audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/xalloc.h"

char *run_audit_shell_quote(char *const *argv)
{
        struct sbx_buf b = {0};

        for (size_t i = 0; argv && argv[i]; i++) {
                const char *a = argv[i];
                bool plain =
                    a[0] && strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                      "0123456789@%+=:,./_-") == strlen(a);
                if (i)
                        (void)sbx_buf_puts(&b, " ");
                if (plain) {
                        (void)sbx_buf_puts(&b, a);
                        continue;
                }
                (void)sbx_buf_puts(&b, "'");
                for (; *a; a++)
                        (void)sbx_buf_puts(&b, *a == '\'' ? "'\\''" : (char[]){*a, '\0'});
                (void)sbx_buf_puts(&b, "'");
        }
        return b.data ? b.data : xstrdup("");
}

int run_audit_begin(const struct sbx_config *cfg, const char *what, char *const *argv,
                    unsigned timeout_s, struct run_audit *a)
{
        struct sbx_error err = {0};
        char note[256] = "";
        char *line;

        *a = (struct run_audit){0};
        if (audit_open(cfg, &a->log, &err) < 0) {
                fprintf(stderr, "vestibule-mcp: the audit log cannot be opened: %s\n", err.msg);
                return -1;
        }
        line = run_audit_shell_quote(argv);
        audit_host_start(a->log, what, timeout_s, "native", line, strlen(line), a->id, note,
                         sizeof(note));
        free(line);
        if (strcmp(note, AUDIT_NOTE_UNCONFIRMED) == 0) {
                /* a slow disk, not a failed write: the record is queued and the close at the
                 * end waits for it (audit_close()); a busy host must not refuse every run */
                fprintf(stderr, "vestibule-mcp: the audit record of this run is %s, going on\n",
                        note);
        } else if (note[0]) {
                fprintf(stderr,
                        "vestibule-mcp: the audit record of this run was %s (%s): nothing runs "
                        "unrecorded; free the disk or fix VESTIBULE_AUDIT_DIR\n",
                        note, audit_path(a->log));
                a->log = audit_close(a->log);
                return -1;
        }
        return 0;
}

void run_audit_end(struct run_audit *a, int code, const struct native_host_result *res)
{
        struct audit_host_end e = {.have_exit = true, .exit_code = code};
        char note[256] = "";

        if (!a->log)
                return;
        e.outcome = res && res->timed_out ? "timeout"
                    : !res                ? "failed"
                    : code == 0           ? "ok"
                                          : "error";
        if (res) {
                e.wall_ms = res->wall_ms;
                e.cpu_us = res->cpu_us;
                e.mem_peak_bytes = res->maxrss_kb * 1024;
                e.isolation = res->grade;
                e.blocked = res->blocked;
                e.tried = res->tried;
        }
        audit_host_end(a->log, a->id, &e, note, sizeof(note));
        if (note[0])
                fprintf(stderr, "vestibule-mcp: the audit end record was %s (%s)\n", note,
                        audit_path(a->log));
        a->log = audit_close(a->log);
}
