/* cli.c - the command line: no arguments serves MCP on stdio; otherwise a subcommand. */
#include "cli/cli.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/log.h"
#include "config/config.h"
#include "egress/egress.h"
#include "engine/hostrun.h"
#include "mcp/mcp.h"
#include "service/service.h"
#include "rootfs/hold.h"
#include "tools/tools.h"

static const char top_help[] =
    "Usage: vestibule-mcp [COMMAND] [OPTIONS]\n"
    "\n"
    "Run AI-agent code (python, node, bash) in a fresh sandbox per call, as an MCP server.\n"
    "With no command, serve MCP on stdin/stdout (what an MCP client starts).\n"
    "\n"
    "Commands:\n"
    "  run      run one snippet through the same path as a run_code tool call\n"
    "  mcp wrap run a stdio MCP server in the sandbox of run --, relaying its messages\n"
    "  audit    print the last calls from the audit log\n"
    "  doctor   say what each backend would give on this host, and why\n"
    "  setup    get what this machine needs to run sandboxes\n"
    "  install-client  add vestibule-mcp to an MCP client's configuration\n"
    "  verify   prove the isolation grade from outside\n"
    "  version  print the version\n"
    "\n"
    "'vestibule-mcp COMMAND --help' describes a command. Settings are VESTIBULE_*\n"
    "environment variables (or ~/.config/vestibule/config.yaml); see vestibule-mcp(1).\n";

static const char instructions[] =
    "Vestibule runs python, node and bash code in a fresh sandbox per call (run_code). "
    "Files persist only in /workspace; read them with read_workspace. Every run result "
    "ends with an 'isolation:' line saying what protected it. A 'Blocked:' result ran "
    "nothing and names the fix.";

/* --- serve ----------------------------------------------------------------------------- */

static json_object *h_tools_list(void *userdata)
{
        return tools_list_json_for(run_service_config(userdata));
}

static int h_tools_call(void *userdata, const char *name, json_object *args,
                        const struct tool_ctx *ctx, struct tool_result *ret, struct sbx_error *err)
{
        return tools_call(userdata, name, args, ctx, ret, err);
}

static void h_shutdown(void *userdata)
{
        run_service_shutdown(userdata);
}

static int serve(void)
{
        struct sbx_config *cfg = NULL;
        struct run_service *svc = NULL;
        struct sbx_error err = {0};
        struct mcp_handlers h;
        sigset_t set;
        int r;

        /* Before any thread exists, so every thread inherits the mask: the server takes
         * SIGTERM/SIGINT through a signalfd, and a client gone away is EPIPE, not a signal. */
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        /* Two malloc arenas instead of up to 8 per CPU: each worker thread would otherwise get
         * its own (64 MiB of address space, its own free lists), for nothing on this I/O-bound
         * path. Measured (docs/BENCHMARKS.md, footprint): VmSize 677 -> 101 MiB and RssAnon
         * 1044 -> 784 KiB after 32 runs at concurrency 8. */
        mallopt(M_ARENA_MAX, 2);

        r = config_load(&cfg, &err);
        if (r < 0) {
                log_error("cannot load the settings: %s", err.msg);
                return 1;
        }
        sbx_log_set_level((enum sbx_log_level)cfg->log_level);
        if (cfg->invalid)
                log_error("%s (every tool call is refused until this is fixed and the server "
                          "restarted)",
                          cfg->invalid_msg);
        r = run_service_new(cfg, &svc, &err);
        if (r < 0) {
                log_error("%s", err.msg);
                config_free(cfg);
                return 1;
        }
        if (!cfg->invalid && cfg->rootfs_dir) {
                /* rootfs trees a setup replaced while runs held them (rootfs/hold.h) */
                int n = setup_rootfs_collect(cfg->rootfs_dir);

                if (n > 0)
                        log_info("removed %d old rootfs tree(s) left by setup in '%s'", n,
                                 cfg->rootfs_dir);
        }
        if (isatty(STDIN_FILENO))
                log_warning("serving MCP on stdin, which is a terminal: an MCP client starts "
                            "vestibule-mcp itself; try 'vestibule-mcp --help'");

        h = (struct mcp_handlers){
            .tools_list = h_tools_list,
            .tools_call = h_tools_call,
            .shutdown = h_shutdown,
            .userdata = svc,
            .instructions = instructions,
            .max_workers = (cfg->max_concurrent ? cfg->max_concurrent : 1) * 2 + 8,
        };
        r = mcp_serve(&h, STDIN_FILENO, STDOUT_FILENO, &err);
        if (r < 0 && r != -EPIPE)
                log_error("%s", err.msg);
        run_service_free(svc);
        config_free(cfg);
        return r < 0 && r != -EPIPE ? 1 : 0;
}

int cli_main(int argc, char **argv)
{
        static const struct {
                const char *name;
                int (*fn)(int argc, char **argv);
        } cmds[] = {
            {"run", cmd_run_any},     {"mcp", cmd_mcp},
            {"audit", cmd_audit},     {"doctor", cmd_doctor},
            {"setup", cmd_setup},     {"verify", cmd_verify},
            {"version", cmd_version}, {"install-client", cmd_install_client},
        };

        if (argc < 2)
                return serve();
        if (cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
                fputs(top_help, stdout);
                return 0;
        }
        if (strcmp(argv[1], "--version") == 0)
                return cmd_version(argc - 1, argv + 1);
        /* internal: the per-run egress proxy the server starts (src/egress/proxy.c) */
        if (strcmp(argv[1], "egress-proxy") == 0)
                return egress_proxy_main(argc - 1, argv + 1);
        /* internal: the init of a `run -- CMD` container (src/engine/hostinit.c) */
        if (strcmp(argv[1], "host-init") == 0)
                return engine_host_init_main(argc - 1, argv + 1);
        for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
                if (strcmp(argv[1], cmds[i].name) == 0)
                        return cmds[i].fn(argc - 1, argv + 1);
        fprintf(stderr, "vestibule-mcp: unknown command '%s'\n\n%s", argv[1], top_help);
        return 2;
}
