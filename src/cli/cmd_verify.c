/* cmd_verify.c - `vestibule-mcp verify [--all] [--json]`: the leak-detection battery through
 * the backend a run would use (or every usable one), judged against the grade it claims. The
 * battery lives in src/verify. */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "cli/commands.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "verify/verify.h"

static const char verify_help[] =
    "Usage: vestibule-mcp verify [--all] [--json]\n"
    "\n"
    "Run the leak-detection battery through the backend a run_code call would use: each\n"
    "probe a real attempt from inside the sandbox (read a planted key, /etc/shadow, the\n"
    "server's environ; reach the host's loopback; routes, an off-host address and DNS only\n"
    "when there is no route; write the rootfs; mknod, mount, unshare, bpf; fork, memory\n"
    "and CPU beyond the caps; a setsid daemon; a workspace symlink; host processes and\n"
    "environment), with a control from outside. Nothing is ever sent off this machine.\n"
    "\n"
    "  --all    run it through every backend (native, container) that is usable here\n"
    "  --json   print the result as JSON\n"
    "\n"
    "Exit status: 0 when every boundary the grade claims held (with --all: for every\n"
    "usable backend, and at least one was usable), 1 otherwise, 2 usage error.\n";

int cmd_verify(int argc, char **argv)
{
        static const enum sbx_backend_choice all[] = {SBX_BACKEND_NATIVE, SBX_BACKEND_CONTAINER};
        _cleanup_free_ struct verify_report *r = xcalloc(1, sizeof(*r));
        struct sbx_config *cfg = NULL;
        struct sbx_error err = {0};
        bool json = false, every = false, ok = true, any = false;
        json_object *runs = json_object_new_array();

        for (int i = 1; i < argc; i++) {
                if (cli_is_help(argv[i])) {
                        fputs(verify_help, stdout);
                        json_object_put(runs);
                        return 0;
                }
                if (strcmp(argv[i], "--json") == 0)
                        json = true;
                else if (strcmp(argv[i], "--all") == 0)
                        every = true;
                else {
                        fprintf(stderr, "vestibule-mcp verify: unknown option '%s'\n%s", argv[i],
                                verify_help);
                        json_object_put(runs);
                        return 2;
                }
        }
        if (config_load(&cfg, &err) < 0) {
                fprintf(stderr, "vestibule-mcp verify: %s\n", err.msg);
                json_object_put(runs);
                return 1;
        }
        sbx_log_set_level(SBX_LOG_WARNING);
        for (size_t i = 0; i < (every ? ELEMENTSOF(all) : 1); i++) {
                struct sbx_config c = *cfg;

                if (every)
                        c.backend = all[i];
                if (verify_run(&c, r, &err) < 0) {
                        fprintf(stderr, "vestibule-mcp verify: %s\n", err.msg);
                        ok = false;
                        break;
                }
                if (every && !r->ran && !r->backend[0])
                        snprintf(r->backend, sizeof(r->backend), "%s",
                                 config_backend_name(all[i]));
                if (json)
                        json_object_array_add(runs, verify_json(r));
                else {
                        verify_print(r, stdout);
                        if (every && i + 1 < ELEMENTSOF(all))
                                fputc('\n', stdout);
                }
                /* with --all a backend that cannot run here is reported, not failed */
                if (r->ran) {
                        any = true;
                        ok = ok && r->ok;
                } else if (!every) {
                        ok = false;
                }
        }
        if (every && !any)
                ok = false;
        if (json) {
                json_object *o = json_object_new_object();

                json_object_object_add(o, "runs", json_object_get(runs));
                json_object_object_add(o, "ok", json_object_new_boolean(ok));
                puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE));
                json_object_put(o);
        }
        json_object_put(runs);
        config_free(cfg);
        return ok ? 0 : 1;
}
