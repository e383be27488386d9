/* cmd_audit.c - `vestibule-mcp audit [N] [--json]`: the last N calls from the audit log. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit.h"
#include "cli/commands.h"
#include "common/log.h"
#include "config/config.h"

static const char audit_help[] =
    "Usage: vestibule-mcp audit [N] [--json]\n"
    "\n"
    "Print the last N run_code calls (default 20) from the audit log in\n"
    "VESTIBULE_AUDIT_DIR (default ~/.vestibule/audit), one line each, everything\n"
    "escaped so recorded code cannot drive the terminal. A start with no end shows\n"
    "'no end'.\n"
    "\n"
    "      --json   one JSON object per line instead\n";

int cmd_audit(int argc, char **argv)
{
        struct sbx_config *cfg = NULL;
        struct sbx_error err = {0};
        unsigned long n = 20;
        bool json = false, have_n = false;
        int r;

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                char *end = NULL;

                if (cli_is_help(a)) {
                        fputs(audit_help, stdout);
                        return 0;
                } else if (strcmp(a, "--json") == 0) {
                        json = true;
                } else if (!have_n && a[0] >= '0' && a[0] <= '9') {
                        errno = 0;
                        n = strtoul(a, &end, 10);
                        if (errno || *end || n == 0 || n > 1000000) {
                                fprintf(stderr,
                                        "vestibule-mcp audit: N must be a whole number "
                                        "from 1 to 1000000, not '%s'\n",
                                        a);
                                return 2;
                        }
                        have_n = true;
                } else {
                        fprintf(stderr,
                                "vestibule-mcp audit: unexpected argument '%s'\n"
                                "Try 'vestibule-mcp audit --help'.\n",
                                a);
                        return 2;
                }
        }

        r = config_load(&cfg, &err);
        if (r < 0) {
                log_error("cannot load the settings: %s", err.msg);
                return 1;
        }
        sbx_log_set_level((enum sbx_log_level)cfg->log_level);
        if (cfg->invalid)
                log_warning("%s; reading the audit log from '%s' anyway", cfg->invalid_msg,
                            cfg->audit_dir);
        r = audit_print(cfg->audit_dir, (unsigned)n, json, STDOUT_FILENO, &err);
        if (r < 0)
                log_error("%s", err.msg);
        config_free(cfg);
        return r < 0 ? 1 : 0;
}
