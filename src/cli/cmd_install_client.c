/* cmd_install_client.c - `vestibule-mcp install-client CLIENT`: add this server to an MCP
 * client's configuration (src/clients does the file work), or print the entry. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/install_wrap.h"
#include "cli/wsl_home.h"
#include "clients/clients.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"

extern char **environ;

static const char usage_text[] =
    "Usage: vestibule-mcp install-client CLIENT [--print] [--env NAME=VALUE]...\n"
    "                                    [--config FILE | --scope project] [--name NAME]\n"
    "       vestibule-mcp install-client --docker CLIENT [--image IMAGE] [--workspace DIR]\n"
    "                                    [--os linux|macos|windows] [--server-network none]\n"
    "                                    [OPTIONS]\n"
    "       vestibule-mcp install-client --wsl CLIENT [--windows-home DIR] [OPTIONS]\n"
    "       vestibule-mcp install-client --wrap NAME [--allow DIR]... [--allow-read DIR]...\n"
    "                                    [--net SPEC] [--config FILE | --scope project] CLIENT\n"
    "       vestibule-mcp install-client --unwrap NAME [--config FILE | --scope project] CLIENT\n"
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
    "  --scope user|project  claude-code: user (default) is ~/.claude.json; project is\n"
    "                      .mcp.json in this folder, the file `claude mcp add --scope project`\n"
    "                      writes and the project shares (Claude Code asks before it starts\n"
    "                      a server from it)\n"
    "  --name NAME         the server's name in the client (default vestibule)\n"
    "  --docker            start the server image instead (claude-desktop, cursor, vscode,\n"
    "                      claude-code): `docker run -i --rm -v /var/run/docker.sock:/var/run/\n"
    "                      docker.sock -v vestibule-state:/var/lib/vestibule -v DIR:/workspace\n"
    "                      [-e VESTIBULE_*=...] IMAGE`; the server's settings go into -e, the\n"
    "                      client's env keeps PATH and DOCKER_*; the named volume\n"
    "                      vestibule-state keeps the audit log past --rm (read it with\n"
    "                      `docker run --rm -v vestibule-state:/var/lib/vestibule IMAGE\n"
    "                      audit`); for Docker Desktop (macOS, Windows) and Docker Engine\n"
    "  --image IMAGE       with --docker: the image (default vestibule-mcp:" VESTIBULE_VERSION ")\n"
    "  --workspace DIR     with --docker: the folder the code sees as /workspace, as the\n"
    "                      client's system writes it (default ~/.vestibule/workspace on\n"
    "                      Linux, made 0700; required with --os macos|windows)\n"
    "  --server-network none\n"
    "                      with --docker: start the server's container with --network none;\n"
    "                      then network \"allowlist\" runs reach nothing (its proxy runs in\n"
    "                      the server) and say so; the sandboxes' own network is none either\n"
    "                      way\n"
    "  --os OS             with --docker: the client's system (default linux); for macos\n"
    "                      and windows the entry and that system's file are printed (write\n"
    "                      it with --config FILE)\n"
    "  --wsl               inside WSL 2: the Windows side's Claude Desktop or Cursor starts\n"
    "                      `wsl.exe [-d DISTRO] -e vestibule-mcp` (settings through env(1));\n"
    "                      when the Windows folder is not reachable the entry is printed\n"
    "  --windows-home DIR  with --wsl: the Windows user folder as WSL mounts it (default:\n"
    "                      Windows's %USERPROFILE% through cmd.exe and wslpath, else\n"
    "                      /mnt/c/Users/$USER, said)\n"
    "  --wrap NAME         rewrite the server NAME already in the client's file to start\n"
    "                      through `vestibule-mcp mcp wrap [--allow ...] -- ITS COMMAND`\n"
    "                      (its env kept and passed on; backup and checks as above; a\n"
    "                      second run changes nothing; in codex's TOML only the command\n"
    "                      and args values change, every other byte stays)\n"
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

/* How the entry starts the server: this binary, the OCI image (--docker), or this binary in
 * WSL from the Windows side (--wsl). */
struct mode {
        enum { MODE_HOST, MODE_DOCKER, MODE_WSL } kind;
        const char *image;     /* --image */
        const char *workspace; /* --workspace */
        const char *win_home;  /* --windows-home */
        bool server_offline;   /* --server-network none */
        enum client_os os;     /* --os */
        char **args;           /* the entry's args (owned, NULL-terminated) */
        size_t n_args;
        const char **env; /* the entry's env (borrowed strings) */
        size_t n_env;
        char *owned_ws; /* a default workspace path (owned) */
};

static void push(struct mode *m, const char *arg)
{
        m->args = xrealloc(m->args, (m->n_args + 2) * sizeof(char *));
        m->args[m->n_args++] = xstrdup(arg);
        m->args[m->n_args] = NULL;
}

static void mode_done(struct mode *m)
{
        strv_free(m->args);
        free(m->env);
        free(m->owned_ws);
}

/* The server's settings (VESTIBULE_*) ride on the command line (`-e NAME=VALUE` for docker
 * run, env(1) for wsl.exe): neither passes the client's env on to the server. The client's env
 * keeps what the docker CLI itself reads (PATH, DOCKER_*). */
static void split_env(struct mode *m, const char *const *env, size_t n_env, bool docker)
{
        m->env = xcalloc(n_env + 1, sizeof(char *));
        for (size_t i = 0; i < n_env; i++) {
                if (strncmp(env[i], "VESTIBULE_", 10) == 0) {
                        if (docker)
                                push(m, "-e");
                        push(m, env[i]);
                } else if (docker) {
                        m->env[m->n_env++] = env[i];
                }
        }
}

/* The named volume the server image keeps its audit log in, and where: docs/packaging.md
 * ("The server image"), scripts/oci-image.sh (VESTIBULE_AUDIT_DIR=/var/lib/vestibule/audit). */
#define OCI_STATE_VOLUME "vestibule-state"
#define OCI_STATE_DIR "/var/lib/vestibule"

/* --docker: `docker run -i --rm -v SOCK:SOCK -v vestibule-state:/var/lib/vestibule
 * [--network none] -v DIR:/workspace [-e ...] IMAGE`. 0, or 2 with a usage message. */
static int docker_entry(const struct client_info *c, struct mode *m, const char *const *env,
                        size_t n_env, const char *home, struct client_server *s)
{
        _cleanup_free_ char *ws = NULL;

        if (!clients_os_path(c, CLIENT_OS_MACOS, NULL)) {
                fprintf(stderr,
                        "vestibule-mcp install-client: --docker is for claude-desktop, cursor, "
                        "vscode and claude-code\n");
                return 2;
        }
        if (!m->workspace && m->os != CLIENT_OS_LINUX) {
                fprintf(stderr,
                        "vestibule-mcp install-client: --docker --os %s: name the folder "
                        "the code works in with --workspace DIR, as that system writes "
                        "it (e.g. /Users/you/work, C:\\Users\\you\\work)\n",
                        m->os == CLIENT_OS_MACOS ? "macos" : "windows");
                return 2;
        }
        if (!m->workspace && home)
                m->workspace = m->owned_ws = xasprintf("%s/.vestibule/workspace", home);
        ws = xasprintf("%s:/workspace", m->workspace);
        push(m, "run");
        push(m, "-i");
        push(m, "--rm");
        push(m, "-v");
        push(m, "/var/run/docker.sock:/var/run/docker.sock");
        /* the audit log outlives --rm there (scripts/oci-image.sh: VESTIBULE_AUDIT_DIR) */
        push(m, "-v");
        push(m, OCI_STATE_VOLUME ":" OCI_STATE_DIR);
        if (m->server_offline) {
                push(m, "--network");
                push(m, "none");
        }
        push(m, "-v");
        push(m, ws);
        split_env(m, env, n_env, true);
        push(m, m->image ? m->image : "vestibule-mcp:" VESTIBULE_VERSION);
        s->command = "docker";
        return 0;
}

/* --wsl: `wsl.exe [-d DISTRO] -e [/usr/bin/env VESTIBULE_...=...] EXE`. 0, or 2. */
static int wsl_entry(const struct client_info *c, struct mode *m, const char *const *env,
                     size_t n_env, const char *exe, struct client_server *s)
{
        const char *distro = config_process_getenv("WSL_DISTRO_NAME");
        bool npx = strstr(exe, "/node_modules/") != NULL;
        bool has_settings = false;

        if (strcmp(c->id, "claude-desktop") != 0 && strcmp(c->id, "cursor") != 0) {
                fprintf(stderr, "vestibule-mcp install-client: --wsl is for claude-desktop and "
                                "cursor (their Windows apps)\n");
                return 2;
        }
        if (distro && *distro) {
                push(m, "-d");
                push(m, distro);
        }
        push(m, "-e");
        for (size_t i = 0; i < n_env; i++)
                has_settings = has_settings || strncmp(env[i], "VESTIBULE_", 10) == 0;
        if (has_settings)
                push(m, "/usr/bin/env");
        split_env(m, env, n_env, false);
        if (npx) {
                push(m, "npx");
                push(m, "-y");
                push(m, "vestibule-mcp");
        } else {
                push(m, exe);
        }
        s->command = "wsl.exe";
        return 0;
}

/* --wsl: the Windows side's file into *@ret_file; 1 when its folder is not reachable from here
 * (then the entry is to be printed), 0 when it is. */
static int wsl_file(const struct client_info *c, const struct mode *m, char **ret_file)
{
        _cleanup_free_ char *folder = NULL, *dflt = NULL;
        const char *user = config_process_getenv("USER");
        const char *win_home = m->win_home;
        struct stat st;

        if (!win_home) {
                char why[300] = "";

                if (wsl_windows_home(&dflt, why, sizeof(why)) < 0) {
                        dflt = xasprintf("/mnt/c/Users/%s", user && *user ? user : "unknown");
                        printf("install-client: Windows did not say its user folder (%s): "
                               "guessed '%s' from $USER; give --windows-home /mnt/c/Users/NAME "
                               "if yours is another\n",
                               why, dflt);
                }
                win_home = dflt;
        }
        clients_wsl_path(c, win_home, ret_file, &folder);
        if (stat(folder, &st) == 0 && S_ISDIR(st.st_mode))
                return 0;
        printf("install-client: the Windows folder '%s' is not reachable from here (give the "
               "Windows user folder with --windows-home /mnt/c/Users/NAME); add this entry to "
               "%s's file by hand:\n",
               folder, c->title);
        return 1;
}

static int parse_os(const char *v, enum client_os *ret)
{
        if (strcmp(v, "linux") == 0)
                *ret = CLIENT_OS_LINUX;
        else if (strcmp(v, "macos") == 0)
                *ret = CLIENT_OS_MACOS;
        else if (strcmp(v, "windows") == 0)
                *ret = CLIENT_OS_WINDOWS;
        else {
                fprintf(stderr,
                        "vestibule-mcp install-client: --os '%s': linux, macos or windows\n", v);
                return 2;
        }
        return 0;
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

/* The command line: options into @o, the client into *@ret_c. 0, 1 (help printed), or 2. */
struct opts {
        const char **env;
        size_t n_env;
        const char *config, *name;
        bool print, has_path;
        bool project; /* --scope project: claude-code's ./.mcp.json */
        struct mode mode;
        struct install_wrap wrap; /* --wrap/--unwrap NAME and the sandbox's options */
};

/* The mode options go with their mode: 0, or 2 with a message. */
static int mode_args_ok(const struct mode *m, const struct install_wrap *w, bool project,
                        const char *config, bool claude_code)
{
        if (project && (config || m->kind != MODE_HOST || !claude_code)) {
                fprintf(stderr, "vestibule-mcp install-client: --scope project is claude-code's "
                                "./.mcp.json: not with --config, --docker or --wsl, nor for "
                                "another client\n");
                return 2;
        }
        if (w->name && m->kind != MODE_HOST) {
                fprintf(stderr, "vestibule-mcp install-client: --wrap and --unwrap edit an entry "
                                "in place: not with --docker or --wsl\n");
                return 2;
        }
        if (!w->name && w->n_opts) {
                fprintf(stderr, "vestibule-mcp install-client: --allow, --allow-read and --net go "
                                "with --wrap\n");
                return 2;
        }
        if ((m->image || m->workspace || m->os != CLIENT_OS_LINUX || m->server_offline) &&
            m->kind != MODE_DOCKER) {
                fprintf(stderr, "vestibule-mcp install-client: --image, --workspace, --os and "
                                "--server-network go with --docker\n");
                return 2;
        }
        if (m->win_home && m->kind != MODE_WSL) {
                fprintf(stderr, "vestibule-mcp install-client: --windows-home goes with --wsl\n");
                return 2;
        }
        return 0;
}

/* The one client named after the options, a valid --name, the mode's options: 0, or 2. */
static int check_client(int argc, char **argv, const struct opts *o,
                        const struct client_info **ret_c)
{
        if (optind + 1 != argc) {
                fprintf(stderr, "vestibule-mcp install-client: name one client: %s\n\n%s",
                        clients_ids(), usage_text);
                return 2;
        }
        *ret_c = clients_find(argv[optind]);
        if (!*ret_c) {
                fprintf(stderr, "vestibule-mcp install-client: unknown client '%s': one of %s\n",
                        argv[optind], clients_ids());
                return 2;
        }
        if (!clients_name_valid(o->name)) {
                fprintf(stderr,
                        "vestibule-mcp install-client: --name '%s': use 1 to 64 letters, "
                        "digits, '_' or '-'\n",
                        o->name);
                return 2;
        }
        return mode_args_ok(&o->mode, &o->wrap, o->project, o->config,
                            (*ret_c)->format == CLIENT_FORMAT_JSON_CLAUDE_CODE);
}

static const struct option long_opts[] = {
    {"print", no_argument, NULL, 'p'},
    {"env", required_argument, NULL, 'e'},
    {"config", required_argument, NULL, 'c'},
    {"name", required_argument, NULL, 'n'},
    {"help", no_argument, NULL, 'h'},
    {"docker", no_argument, NULL, 'D'},
    {"wsl", no_argument, NULL, 'W'},
    {"image", required_argument, NULL, 'i'},
    {"os", required_argument, NULL, 'o'},
    {"workspace", required_argument, NULL, 'k'},
    {"wrap", required_argument, NULL, 'w'},
    {"unwrap", required_argument, NULL, 'u'},
    {"allow", required_argument, NULL, 'a'},
    {"allow-read", required_argument, NULL, 'r'},
    {"net", required_argument, NULL, 'N'},
    {"windows-home", required_argument, NULL, 'H'},
    {"server-network", required_argument, NULL, 'S'},
    {"scope", required_argument, NULL, 'P'},
    {0},
};

/* --scope user|project: 0, or 2 with a message. */
static int parse_scope(const char *arg, struct opts *o)
{
        if (strcmp(arg, "user") != 0 && strcmp(arg, "project") != 0) {
                fprintf(stderr, "vestibule-mcp install-client: --scope '%s': user or project\n",
                        arg);
                return 2;
        }
        o->project = strcmp(arg, "project") == 0;
        return 0;
}

static int parse_args(int argc, char **argv, struct opts *o, const struct client_info **ret_c)
{
        int opt;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
                switch (opt) {
                case 'p':
                        o->print = true;
                        break;
                case 'e':
                        o->env[o->n_env++] = optarg;
                        o->has_path = o->has_path || strncmp(optarg, "PATH=", 5) == 0;
                        break;
                case 'c':
                        o->config = optarg;
                        break;
                case 'P':
                        if (parse_scope(optarg, o) != 0)
                                return 2;
                        break;
                case 'n':
                        o->name = optarg;
                        break;
                case 'D':
                case 'W':
                        if (o->mode.kind != MODE_HOST &&
                            o->mode.kind != (opt == 'D' ? MODE_DOCKER : MODE_WSL)) {
                                fprintf(stderr, "vestibule-mcp install-client: --docker or "
                                                "--wsl, not both\n");
                                return 2;
                        }
                        o->mode.kind = opt == 'D' ? MODE_DOCKER : MODE_WSL;
                        break;
                case 'i':
                        o->mode.image = optarg;
                        break;
                case 'k':
                        o->mode.workspace = optarg;
                        break;
                case 'H':
                        o->mode.win_home = optarg;
                        break;
                case 'S':
                        if (strcmp(optarg, "none") != 0) {
                                fprintf(stderr,
                                        "vestibule-mcp install-client: --server-network '%s': "
                                        "only none (leave it out for the engine's default "
                                        "network, which the allowlist needs)\n",
                                        optarg);
                                return 2;
                        }
                        o->mode.server_offline = true;
                        break;
                case 'o':
                        if (parse_os(optarg, &o->mode.os) != 0)
                                return 2;
                        break;
                case 'h':
                        fputs(usage_text, stdout);
                        return 1;
                default:
                        if (install_wrap_opt(&o->wrap, opt, optarg))
                                break;
                        fputs(usage_text, stderr);
                        return 2;
                }
        }
        return check_client(argc, argv, o, ret_c);
}

/* The entry @s for mode @o (and this binary @exe): 0 or 2. */
static int build_entry(const struct client_info *c, struct opts *o, const char *exe,
                       const char *home, const char **exe_args, struct client_server *s)
{
        int r = 0;

        s->name = o->name;
        if (o->mode.kind == MODE_DOCKER)
                r = docker_entry(c, &o->mode, o->env, o->n_env, home, s);
        else if (o->mode.kind == MODE_WSL)
                r = wsl_entry(c, &o->mode, o->env, o->n_env, exe, s);
        if (r != 0)
                return r;
        if (o->mode.kind != MODE_HOST) {
                s->args = (const char *const *)o->mode.args;
                s->n_args = o->mode.n_args;
                s->env = o->mode.env;
                s->n_env = o->mode.n_env;
                return 0;
        }
        /* How the client starts us: from an npm package through npx (the binary's path there
         * is in npm's cache and changes with each version), otherwise by absolute path. */
        if (strstr(exe, "/node_modules/")) {
                s->command = "npx";
                exe_args[0] = "-y";
                exe_args[1] = "vestibule-mcp";
                s->args = exe_args;
                s->n_args = 2;
        } else {
                s->command = exe;
        }
        s->env = o->env;
        s->n_env = o->n_env;
        return 0;
}

/* Where the entry goes into *@ret_file; 1 when it is only to be printed (another system, an
 * unreachable Windows side), 0 to write it, -1 on error (printed). */
static int target_file(const struct client_info *c, const struct opts *o, const char *home,
                       char **ret_file)
{
        if (o->config) {
                *ret_file = xstrdup(o->config);
                return 0;
        }
        if (o->project) {
                char cwd[PATH_MAX];
                if (!getcwd(cwd, sizeof(cwd))) {
                        fprintf(stderr,
                                "vestibule-mcp install-client: --scope project: cannot "
                                "read the current folder: %s\n",
                                strerror(errno));
                        return -1;
                }
                *ret_file = xasprintf("%s/.mcp.json", cwd);
                return 0;
        }
        if (o->mode.kind == MODE_WSL)
                return wsl_file(c, &o->mode, ret_file);
        if (o->mode.kind == MODE_DOCKER && o->mode.os != CLIENT_OS_LINUX) {
                *ret_file = clients_os_path(c, o->mode.os, NULL);
                return 1;
        }
        if (!home || home[0] != '/') {
                fprintf(stderr, "vestibule-mcp install-client: HOME is not set: give the file "
                                "with --config FILE\n");
                return -1;
        }
        *ret_file = clients_default_path(c, home, config_process_getenv("XDG_CONFIG_HOME"));
        return 0;
}

/* --docker on Linux: the workspace folder exists before docker run (which would make it
 * root's). 0, or 1 with a message. */
static int docker_workspace(const struct mode *m)
{
        _cleanup_free_ char *cmd = NULL;
        struct stat st;

        if (m->kind != MODE_DOCKER || m->os != CLIENT_OS_LINUX || !m->workspace ||
            stat(m->workspace, &st) == 0)
                return 0;
        if (m->workspace[0] != '/') {
                fprintf(stderr,
                        "vestibule-mcp install-client: --workspace '%s': give an absolute "
                        "path\n",
                        m->workspace);
                return 1;
        }
        for (char *p = cmd = xstrdup(m->workspace); (p = strchr(p + 1, '/'));) {
                *p = '\0';
                (void)mkdir(cmd, 0700);
                *p = '/';
        }
        if (mkdir(m->workspace, 0700) < 0 && errno != EEXIST) {
                fprintf(stderr, "vestibule-mcp install-client: cannot create '%s': %s\n",
                        m->workspace, strerror(errno));
                return 1;
        }
        printf("install-client: created the workspace folder '%s' (0700)\n", m->workspace);
        return 0;
}

/* Print or write the entry @s for @c: the exit status. */
static int install(const struct client_info *c, struct opts *o, const char *home,
                   const struct client_server *s)
{
        _cleanup_free_ char *file = NULL, *backup = NULL, *claude = NULL, *bdir = NULL,
                            *kept = NULL;
        struct sbx_error err = {0};
        int r;

        r = target_file(c, o, home, &file);
        if (r < 0)
                return 1;
        if (o->print || r == 1) {
                print_entry(c, s, file);
                return 0;
        }
        if (docker_workspace(&o->mode) != 0)
                return 1;
        bdir = backup_folder(home);
        if (o->wrap.name)
                return install_wrap_run(c, file, bdir, s->command, s->args, s->n_args, &o->wrap);
        if (c->format == CLIENT_FORMAT_JSON_CLAUDE_CODE && !o->config && !o->project) {
                claude = which("claude");
                if (claude)
                        return claude_cli(claude, home, bdir, s);
        }
        r = clients_install(c, file, s, bdir, &backup, &kept, &err);
        if (r < 0) {
                _cleanup_free_ char *entry = clients_render(c, s);

                fprintf(stderr,
                        "vestibule-mcp install-client: %s\nNothing was changed. Fix the file, "
                        "or add this entry to it by hand:\n%s",
                        err.msg, entry);
                return 1;
        }
        if (r == 0) {
                printf("install-client: '%s' already has this '%s' entry; nothing changed\n", file,
                       s->name);
                return 0;
        }
        if (backup)
                printf("install-client: saved the old '%s' as '%s' (mode 0600)\n", file, backup);
        if (kept)
                printf("install-client: kept the old entry's %s\n", kept);
        printf("install-client: wrote the '%s' entry for %s into '%s'; restart %s to load it\n",
               s->name, c->title, file, c->title);
        return 0;
}

int cmd_install_client(int argc, char **argv)
{
        _cleanup_free_ const char **env = xcalloc((size_t)argc + 2, sizeof(char *));
        _cleanup_free_ char *path_env = NULL;
        struct opts o = {.env = env, .name = "vestibule"};
        const char *home = config_process_getenv("HOME"), *exe_args[2];
        const struct client_info *c = NULL;
        struct client_server s = {0};
        char exe[PATH_MAX];
        ssize_t len;
        int r;

        r = parse_args(argc, argv, &o, &c);
        if (r != 0)
                return r == 1 ? 0 : r;
        r = check_env(env, o.n_env);
        if (r != 0)
                return r;
        /* A client started from the desktop does not read the shell's profile: give it this
         * PATH, so the server (and npx, node, docker) are found as they are here; not for
         * another system's client, nor for wsl.exe (Windows finds it). */
        if (c->gui && !o.has_path && config_process_getenv("PATH") && o.mode.kind != MODE_WSL &&
            o.mode.os == CLIENT_OS_LINUX) {
                path_env = xasprintf("PATH=%s", config_process_getenv("PATH"));
                env[o.n_env++] = path_env;
        }
        len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (len <= 0) {
                fprintf(stderr, "vestibule-mcp install-client: cannot read /proc/self/exe: %s\n",
                        strerror(errno));
                return 1;
        }
        exe[len] = '\0';
        r = build_entry(c, &o, exe, home, exe_args, &s);
        if (r == 0)
                r = install(c, &o, home, &s);
        mode_done(&o.mode);
        return r;
}
