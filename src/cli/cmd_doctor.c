/* cmd_doctor.c - `vestibule-mcp doctor [--json]`: what each backend would give on this host
 * right now and why, then what VESTIBULE_BACKEND picks. The checks live in src/doctor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli/commands.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "doctor/doctor.h"

static const char doctor_help[] =
    "Usage: vestibule-mcp doctor [--json]\n"
    "\n"
    "Say what each backend (native, container) would give on this host right now and why:\n"
    "kernel, cgroup v2 and its controllers, the systemd user bus and delegation, busctl,\n"
    "libseccomp, user namespace restrictions, Landlock, seccomp user notification, the\n"
    "container engine (endpoint, version, rootless, cgroup version), the images and root\n"
    "filesystems against images/pins; then the grade VESTIBULE_BACKEND would pick.\n"
    "\n"
    "  --json   print the same as one JSON object\n"
    "\n"
    "Exit status: 0 when a run would execute, 1 when it would be Blocked:, 2 usage error.\n";

int cmd_doctor(int argc, char **argv)
{
        _cleanup_free_ struct doctor_report *r = NULL;
        struct sbx_config *cfg = NULL;
        struct sbx_error err = {0};
        bool json = false;

        for (int i = 1; i < argc; i++) {
                if (cli_is_help(argv[i])) {
                        fputs(doctor_help, stdout);
                        return 0;
                }
                if (strcmp(argv[i], "--json") == 0) {
                        json = true;
                        continue;
                }
                fprintf(stderr, "vestibule-mcp doctor: unknown option '%s'\n%s", argv[i],
                        doctor_help);
                return 2;
        }
        if (config_load(&cfg, &err) < 0) {
                fprintf(stderr, "vestibule-mcp doctor: %s\n", err.msg);
                return 1;
        }
        /* the probes log at debug level; keep the report itself the only output */
        sbx_log_set_level(SBX_LOG_WARNING);
        r = xcalloc(1, sizeof(*r));
        doctor_collect(cfg, r);
        config_free(cfg);
        if (json) {
                json_object *o = doctor_json(r);

                puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE));
                json_object_put(o);
        } else {
                doctor_print(r, stdout);
        }
        return r->usable ? 0 : 1;
}
