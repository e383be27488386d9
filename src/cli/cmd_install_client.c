/* cmd_install_client.c - `vestibule-mcp install-client CLIENT`: add this server to an MCP
 * client's configuration (src/clients does the file work), or print the entry. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/install_wrap.h"
#include "clients/clients.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"

extern char **environ;

static const char usage_text[] =
    "Usage: vestibule-mcp install-client CLIENT [--print] [--env NAME=VALUE]...\n"
    "                                    [--config FILE] [--name NAME]\n"
    "       vestibule-mcp install-client --wrap NAME [--allow DIR]... [--allow-read DIR]...\n"
    "                                    [--net SPEC] [--config FILE] CLIENT\n"
    "       vestibule-mcp install-client --unwrap NAME [--config FILE] CLIENT\n"
    "\n"
    "Add vestibule-mcp to an MCP client's configuration. CLIENT is one of claude-code,\n"
    "claude-desktop, cursor, vscode, codex, gemini, opencode.\n"
    "\n"
    "The client's file is merged, never replaced: other servers and settings stay, an entry\n"
    "of the same name is updated (its own env values and settings such as timeouts stay;\n"
    "--env values win), and the old file is first copied (mode 0600) to\n"
    "~/.local/state/vestibule/backups/NAME.vestibule-backup-<time>. A second identical run\n"
    "changes nothing. A file that is\n"
    "not strict JSON (comments, trailing commas), or TOML this editor cannot follow, is left\n"
    "untouched and the entry to add by hand is printed. For claude-code the `claude mcp add\n"
    "--scope user` command is used when `claude` is on PATH. GUI clients (claude-desktop,\n"
    "cursor, vscode) also get this shell's PATH, which a client started from the desktop\n"
    "may lack.\n"
    "\n"
    "  --print             print the entry and the file it belongs in; change nothing\n"
    "  --env NAME=VALUE    pass a setting to the server (repeatable): a VESTIBULE_* setting,\n"
    "                      checked as the server checks it, or PATH, DOCKER_HOST,\n"
    "                      DOCKER_CONTEXT, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, CONTAINER_HOST\n"
    "  --config FILE       edit FILE instead of the client's default file\n"
    "  --name NAME         the server's name in the client (default vestibule)\n"
    "  --wrap NAME         rewrite the server NAME already in the client's file to start\n"
    "                      through `vestibule-mcp mcp wrap [--allow ...] -- ITS COMMAND`\n"
    "                      (its env kept and passed on; backup and checks as above; a\n"
    "                      second run changes nothing); not for codex's TOML yet\n"
    "  --allow DIR, --allow-read DIR, --net SPEC\n"
    "                      with --wrap: the sandbox's options (see mcp wrap --help)\n"
    "  --unwrap NAME       put NAME's original command back\n"
    "  -h, --help          this text\n"
    "\n"
    "Exit status: 0 written or already there (or printed), 1 failed, 2 usage error.\n";

static const char *const engine_vars[] = {
    "PATH",           "DOCKER_HOST",   "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH",
    "CONTAINER_HOST", "DOCKER_CONFIG",
};

/* The --env values, for config_load_from()'s getenv function (one CLI call per process). */
static const char *const *cli_env;
static size_t cli_n_env;

static const char *env_lookup(const char *name)
{
        size_t n = strlen(name);

        for (size_t i = cli_n_env; i-- > 0;)
                if (strncmp(cli_env[i], name, n) == 0 && cli_env[i][n] == '=')
                        return cli_env[i] + n + 1;
        /* the defaults need a home; nothing else is taken from this shell */
        if (strcmp(name, "HOME") == 0)
                return config_process_getenv("HOME");
        return NULL;
}

static bool env_name_ok(const char *s, size_t n)
{
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
                        return false;
        return true;
}

/* Check each NAME=VALUE: a known name, and VESTIBULE_* values valid as the server reads them. */
static int check_env(const char *const *env, size_t n)
{
        struct sbx_config *cfg = NULL;
        struct sbx_error err = {0};

        for (size_t i = 0; i < n; i++) {
                const char *eq = strchr(env[i], '=');
                size_t k = eq ? (size_t)(eq - env[i]) : 0;
                _cleanup_free_ char *name = NULL;
                bool known = false;

                if (!eq || !env_name_ok(env[i], k)) {
                        fprintf(stderr,
                                "vestibule-mcp install-client: --env '%s' is not NAME=VALUE "
                                "with NAME in [A-Z0-9_]\n",
                                env[i]);
                        return 2;
                }
                name = xasprintf("%.*s", (int)k, env[i]);
                known = config_is_setting(name);
                for (size_t j = 0; !known && j < ELEMENTSOF(engine_vars); j++)
                        known = strcmp(name, engine_vars[j]) == 0;
                if (!known) {
                        fprintf(stderr,
                                "vestibule-mcp install-client: --env %s: the server reads no "
                                "such setting; see `man vestibule-mcp` (ENVIRONMENT) for the "
                                "names\n",
                                name);
                        return 2;
                }
        }
        cli_env = env;
        cli_n_env = n;
        if (config_load_from(env_lookup, NULL, &cfg, &err) < 0) {
                fprintf(stderr, "vestibule-mcp install-client: %s\n", err.msg);
                return 1;
        }
        if (cfg->invalid) {
                fprintf(stderr, "vestibule-mcp install-client: %s\n", cfg->invalid_msg);
                config_free(cfg);
                return 2;
        }
        config_free(cfg);
        return 0;
}

/* The absolute path of @prog found on PATH, or NULL. */
static char *which(const char *prog)
{
        const char *path = config_process_getenv("PATH");
        _cleanup_free_ char *copy = xstrdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
        char *save = NULL;

        for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                _cleanup_free_ char *f = xasprintf("%s/%s", d[0] ? d : ".", prog);

                if (d[0] == '/' && access(f, X_OK) == 0)
                        return TAKE_PTR(f);
        }
        return NULL;
}

static int run_argv(char *const *argv)
{
        pid_t pid;
        int r, status;

        r = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
        if (r != 0) {
                fprintf(stderr, "vestibule-mcp install-client: cannot run '%s': %s\n", argv[0],
                        strerror(r));
                return -1;
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

/* Where backups go: $XDG_STATE_HOME/vestibule/backups, else ~/.local/state/vestibule/backups
 * (XDG Base Directory spec), never beside a config that may sit in a dotfiles repository. */
static char *backup_folder(const char *home)
{
        const char *state = config_process_getenv("XDG_STATE_HOME");

        if (state && state[0] == '/')
                return xasprintf("%s/vestibule/backups", state);
        if (home && home[0] == '/')
                return xasprintf("%s/.local/state/vestibule/backups", home);
        return NULL;
}

/* The whole file @path as a string, or NULL when it cannot be read. */
static char *read_all(const char *path)
{
        FILE *f = fopen(path, "re");
        char *text = NULL;
        size_t len = 0;

        if (!f)
                return NULL;
        if (getdelim(&text, &len, '\0', f) < 0) {
                free(text);
                text = NULL;
        }
        fclose(f);
        return text;
}

/* --print: the entry and where it goes. */
static void print_entry(const struct client_info *c, const struct client_server *s,
                        const char *file)
{
        _cleanup_free_ char *entry = clients_render(c, s);

        if (c->format == CLIENT_FORMAT_JSON_CLAUDE_CODE) {
                printf("# %s: run\nclaude mcp add --scope user %s", c->title, s->name);
                for (size_t i = 0; i < s->n_env; i++)
                        printf(" -e '%s'", s->env[i]);
                printf(" -- %s", s->command);
                for (size_t i = 0; i < s->n_args; i++)
                        printf(" %s", s->args[i]);
                printf("\n# or add to '%s':\n", file);
        } else {
                printf("# %s: add to '%s'%s\n", c->title, file,
                       c->format == CLIENT_FORMAT_TOML_CODEX
                           ? ""
                           : " (inside its existing object, next to other servers)");
        }
        fputs(entry, stdout);
}

/* Claude Code through its own CLI: `claude mcp add --scope user NAME -e K=V ... -- CMD ARGS`. */
static int claude_cli(const char *claude, const char *home, const char *backup_dir,
                      const struct client_server *s)
{
        const struct client_info *c = clients_find("claude-code");
        _cleanup_free_ char *file = clients_default_path(c, home, NULL), *text = NULL,
                            *backup = NULL;
        _cleanup_free_ char **argv = NULL, *other = NULL;
        char **env = NULL;
        struct sbx_error err = {0};
        size_t n = 0;
        int r, n_env;

        text = read_all(file);
        if (text && clients_entry_equal_json(c, text, s)) {
                printf("install-client: Claude Code already has this '%s' entry (user scope, "
                       "'%s'); nothing changed\n",
                       s->name, file);
                return 0;
        }
        /* the old entry's env values we do not set go back in with -e */
        n_env = clients_merged_env(c, text, s, &env, &other);
        argv = xcalloc(16 + 2 * (size_t)n_env + s->n_args, sizeof(char *));
        if (other)
                printf("install-client: `claude mcp add` cannot carry the old entry's %s: "
                       "dropped; add them back with `claude mcp add-json`\n",
                       other);
        r = clients_backup(file, backup_dir, &backup, &err);
        if (r < 0) {
                strv_free(env);
                fprintf(stderr, "vestibule-mcp install-client: %s; nothing changed\n", err.msg);
                return 1;
        }
        if (backup)
                printf("install-client: saved '%s' as '%s'\n", file, backup);
        /* an entry of that name (ours, older) is replaced: add refuses an existing name */
        argv[n++] = (char *)claude;
        argv[n++] = (char *)"mcp";
        argv[n++] = (char *)"remove";
        argv[n++] = (char *)"--scope";
        argv[n++] = (char *)"user";
        argv[n++] = (char *)s->name;
        argv[n] = NULL;
        if (text && s->name && strstr(text, s->name)) {
                fflush(stdout);
                (void)run_argv(argv);
        }
        n = 2;
        argv[n++] = (char *)"add";
        argv[n++] = (char *)"--scope";
        argv[n++] = (char *)"user";
        argv[n++] = (char *)s->name;
        for (int i = 0; i < n_env; i++) {
                argv[n++] = (char *)"-e";
                argv[n++] = env[i];
        }
        argv[n++] = (char *)"--";
        argv[n++] = (char *)s->command;
        for (size_t i = 0; i < s->n_args; i++)
                argv[n++] = (char *)s->args[i];
        argv[n] = NULL;
        fflush(stdout);
        r = run_argv(argv);
        strv_free(env);
        if (r != 0) {
                fprintf(stderr,
                        "vestibule-mcp install-client: '%s mcp add' failed (exit %d); the old "
                        "file is in '%s'\n",
                        claude, r, backup ? backup : "(there was none)");
                return 1;
        }
        printf("install-client: added '%s' to Claude Code (user scope) with `claude mcp add`; "
               "start a new claude session to use it\n",
               s->name);
        return 0;
}

int cmd_install_client(int argc, char **argv)
{
        static const struct option opts[] = {
            {"print", no_argument, NULL, 'p'},
            {"env", required_argument, NULL, 'e'},
            {"config", required_argument, NULL, 'c'},
            {"name", required_argument, NULL, 'n'},
            {"help", no_argument, NULL, 'h'},
            {"wrap", required_argument, NULL, 'w'},
            {"unwrap", required_argument, NULL, 'u'},
            {"allow", required_argument, NULL, 'a'},
            {"allow-read", required_argument, NULL, 'r'},
            {"net", required_argument, NULL, 'N'},
            {0},
        };
        struct install_wrap w = {0};
        _cleanup_free_ const char **env = xcalloc((size_t)argc + 2, sizeof(char *));
        _cleanup_free_ char *path_env = NULL, *file = NULL, *text = NULL, *backup = NULL,
                            *claude = NULL, *bdir = NULL, *kept = NULL;
        const char *config = NULL, *name = "vestibule", *home, *exe_args[2];
        const struct client_info *c;
        struct client_server s = {0};
        struct sbx_error err = {0};
        bool print = false, has_path = false;
        char exe[PATH_MAX];
        ssize_t len;
        size_t n_env = 0;
        int opt, r;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (opt) {
                case 'p':
                        print = true;
                        break;
                case 'e':
                        env[n_env++] = optarg;
                        has_path = has_path || strncmp(optarg, "PATH=", 5) == 0;
                        break;
                case 'c':
                        config = optarg;
                        break;
                case 'n':
                        name = optarg;
                        break;
                case 'h':
                        fputs(usage_text, stdout);
                        return 0;
                default:
                        if (install_wrap_opt(&w, opt, optarg))
                                break;
                        fputs(usage_text, stderr);
                        return 2;
                }
        }
        if (optind + 1 != argc) {
                fprintf(stderr, "vestibule-mcp install-client: name one client: %s\n\n%s",
                        clients_ids(), usage_text);
                return 2;
        }
        c = clients_find(argv[optind]);
        if (!c) {
                fprintf(stderr, "vestibule-mcp install-client: unknown client '%s': one of %s\n",
                        argv[optind], clients_ids());
                return 2;
        }
        if (!clients_name_valid(name)) {
                fprintf(stderr,
                        "vestibule-mcp install-client: --name '%s': use 1 to 64 letters, "
                        "digits, '_' or '-'\n",
                        name);
                return 2;
        }
        r = check_env(env, n_env);
        if (r != 0)
                return r;
        /* A client started from the desktop does not read the shell's profile: give it this
         * PATH, so the server (and npx, node) are found as they are here. */
        if (c->gui && !has_path && config_process_getenv("PATH")) {
                path_env = xasprintf("PATH=%s", config_process_getenv("PATH"));
                env[n_env++] = path_env;
        }

        /* How the client starts us: from an npm package through npx (the binary's path there
         * is in npm's cache and changes with each version), otherwise by absolute path. */
        len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (len <= 0) {
                fprintf(stderr, "vestibule-mcp install-client: cannot read /proc/self/exe: %s\n",
                        strerror(errno));
                return 1;
        }
        exe[len] = '\0';
        s.name = name;
        if (strstr(exe, "/node_modules/")) {
                s.command = "npx";
                exe_args[0] = "-y";
                exe_args[1] = "vestibule-mcp";
                s.args = exe_args;
                s.n_args = 2;
        } else {
                s.command = exe;
        }
        s.env = env;
        s.n_env = n_env;

        home = config_process_getenv("HOME");
        if (!config && (!home || home[0] != '/')) {
                fprintf(stderr, "vestibule-mcp install-client: HOME is not set: give the file "
                                "with --config FILE\n");
                return 1;
        }
        file = config ? xstrdup(config)
                      : clients_default_path(c, home, config_process_getenv("XDG_CONFIG_HOME"));

        if (print) {
                print_entry(c, &s, file);
                return 0;
        }

        bdir = backup_folder(home);
        if (w.name)
                return install_wrap_run(c, file, bdir, s.command, s.args, s.n_args, &w);
        if (c->format == CLIENT_FORMAT_JSON_CLAUDE_CODE && !config) {
                claude = which("claude");
                if (claude)
                        return claude_cli(claude, home, bdir, &s);
        }
        r = clients_install(c, file, &s, bdir, &backup, &kept, &err);
        if (r < 0) {
                _cleanup_free_ char *entry = clients_render(c, &s);

                fprintf(stderr,
                        "vestibule-mcp install-client: %s\nNothing was changed. Fix the file, "
                        "or add this entry to it by hand:\n%s",
                        err.msg, entry);
                return 1;
        }
        if (r == 0) {
                printf("install-client: '%s' already has this '%s' entry; nothing changed\n", file,
                       s.name);
                return 0;
        }
        if (backup)
                printf("install-client: saved the old '%s' as '%s' (mode 0600)\n", file, backup);
        if (kept)
                printf("install-client: kept the old entry's %s\n", kept);
        printf("install-client: wrote the '%s' entry for %s into '%s'; restart %s to load it\n",
               s.name, c->title, file, c->title);
        return 0;
}
