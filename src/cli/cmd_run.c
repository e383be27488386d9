/* cmd_run.c - `vestibule-mcp run`: one snippet through exactly the path of a run_code tool
 * call (tools_call -> run service -> backend), printing the text a client would receive.
 * Ctrl-C (SIGINT) or SIGTERM cancels the run, which kills its whole process tree. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cli/commands.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "service/service.h"
#include "tools/tools.h"

/* Code read from a file or stdin is refused by the service above its own limit anyway; this
 * only bounds what is read into memory. */
#define RUN_READ_MAX ((size_t)64 * 1024 * 1024)

static const char run_help[] =
    "Usage: vestibule-mcp run --language LANG (-c CODE | FILE | -) [--timeout S]\n"
    "                        [--network none|allowlist] [--json]\n"
    "       vestibule-mcp run [OPTIONS] -- CMD [ARGS...]\n"
    "                        (any host command, sandboxed: see 'vestibule-mcp run --help --')\n"
    "\n"
    "Run one program through the same path as a run_code tool call and print the same\n"
    "result text (ending with its isolation: line).\n"
    "\n"
    "  -l, --language LANG   python, node or bash\n"
    "  -c, --code CODE       the program text\n"
    "  FILE                  read the program from FILE ('-' = standard input)\n"
    "  -t, --timeout S       timeout in seconds (default VESTIBULE_DEFAULT_TIMEOUT_S)\n"
    "      --network N       none (default) or allowlist (VESTIBULE_EGRESS_ALLOW)\n"
    "      --json            print the tool result as JSON (isError, content,\n"
    "                        structuredContent)\n"
    "\n"
    "Exit status: 0 when the result is not an error (exit code 0), 1 when it is (non-zero\n"
    "exit, timeout, cancel, Blocked:), 2 for a usage error.\n";

static int usage_error(const char *fmt, const char *arg)
{
        fputs("vestibule-mcp run: ", stderr);
        fprintf(stderr, fmt, arg);
        fputs("\nTry 'vestibule-mcp run --help'.\n", stderr);
        return 2;
}

static int read_all(int fd, char **ret, size_t *ret_len)
{
        struct sbx_buf b = {.max = RUN_READ_MAX};
        int r = sbx_buf_read_fd(&b, fd);

        if (r < 0) {
                sbx_buf_done(&b);
                return r;
        }
        *ret = sbx_buf_steal(&b, ret_len);
        return 0;
}

static void print_json(const struct tool_result *res)
{
        json_object *o = json_object_new_object(), *content = json_object_new_array();
        json_object *block = json_object_new_object();

        json_object_object_add(block, "type", json_object_new_string("text"));
        json_object_object_add(block, "text", json_object_new_string(res->text ? res->text : ""));
        json_object_array_add(content, block);
        for (size_t i = 0; res->content && i < json_object_array_length(res->content); i++)
                json_object_array_add(content,
                                      json_object_get(json_object_array_get_idx(res->content, i)));
        json_object_object_add(o, "content", content);
        json_object_object_add(o, "isError", json_object_new_boolean(res->is_error));
        if (res->structured)
                json_object_object_add(o, "structuredContent", json_object_get(res->structured));
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
}

int cmd_run(int argc, char **argv)
{
        const char *language = NULL, *code_arg = NULL, *file = NULL, *timeout = NULL,
                   *network = NULL;
        bool json = false;
        _cleanup_free_ char *code = NULL;
        size_t code_len = 0;
        struct sbx_config *cfg = NULL;
        struct run_service *svc = NULL;
        struct sbx_error err = {0};
        struct tool_result res = {0};
        struct tool_ctx ctx = {.cancel_fd = -1};
        _cleanup_close_ int sfd = -1;
        json_object *args;
        sigset_t set;
        int r, exit_code;

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                int m;

                if (cli_is_help(a)) {
                        fputs(run_help, stdout);
                        return 0;
                }
                if (strcmp(a, "--json") == 0) {
                        json = true;
                        continue;
                }
                if ((m = cli_opt_value(argc, argv, &i, "--language", "-l", &language)) == 0 &&
                    (m = cli_opt_value(argc, argv, &i, "--code", "-c", &code_arg)) == 0)
                        m = cli_opt_value(argc, argv, &i, "--timeout", "-t", &timeout);
                if (m == 0)
                        m = cli_opt_value(argc, argv, &i, "--network", NULL, &network);
                if (m < 0)
                        return usage_error("%s needs a value", a);
                if (m > 0)
                        continue;
                if (a[0] == '-' && a[1] != '\0')
                        return usage_error("unknown option '%s'", a);
                if (file)
                        return usage_error("unexpected argument '%s'", a);
                file = a;
        }
        if (!language)
                return usage_error("%s", "--language is required (python, node or bash)");
        if (!!code_arg + !!file != 1)
                return usage_error("%s", "give the program as exactly one of -c CODE, FILE or - "
                                         "(standard input)");

        if (code_arg) {
                code = xstrdup(code_arg);
                code_len = strlen(code);
        } else {
                _cleanup_close_ int fd = -1;

                if (strcmp(file, "-") != 0) {
                        fd = open(file, O_RDONLY | O_CLOEXEC);
                        if (fd < 0) {
                                fprintf(stderr, "vestibule-mcp run: cannot open '%s': %s\n", file,
                                        strerror(errno));
                                return 2;
                        }
                }
                r = read_all(fd >= 0 ? fd : STDIN_FILENO, &code, &code_len);
                if (r < 0) {
                        fprintf(stderr, "vestibule-mcp run: cannot read '%s': %s\n", file,
                                strerror(-r));
                        return 2;
                }
        }

        /* SIGINT/SIGTERM become the run's cancel fd. Blocked before any thread starts. */
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        sigdelset(&set, SIGPIPE);
        sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        ctx.cancel_fd = sfd;

        r = config_load(&cfg, &err);
        if (r < 0) {
                log_error("cannot load the settings: %s", err.msg);
                return 1;
        }
        sbx_log_set_level((enum sbx_log_level)cfg->log_level);
        cfg->warm = false; /* one run and exit: a spare would be built only to be destroyed */
        r = run_service_new(cfg, &svc, &err);
        if (r < 0) {
                log_error("%s", err.msg);
                config_free(cfg);
                return 1;
        }

        args = json_object_new_object();
        json_object_object_add(args, "language", json_object_new_string(language));
        json_object_object_add(args, "code", json_object_new_string_len(code, (int)code_len));
        if (timeout)
                json_object_object_add(args, "timeout_seconds", json_object_new_string(timeout));
        if (network)
                json_object_object_add(args, "network", json_object_new_string(network));

        r = tools_call(svc, "run_code", args, &ctx, &res, &err);
        json_object_put(args);
        if (r < 0) {
                log_error("%s", err.msg);
                exit_code = 1;
        } else {
                if (json)
                        print_json(&res);
                else
                        printf("%s\n", res.text ? res.text : "");
                exit_code = res.is_error ? 1 : 0;
        }
        fflush(stdout);
        tool_result_done(&res);
        run_service_free(svc);
        config_free(cfg);
        return exit_code;
}
