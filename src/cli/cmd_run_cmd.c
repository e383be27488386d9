/* cmd_run_cmd.c - `vestibule-mcp run [options] -- CMD [ARGS...]`: one host command in a native
 * sandbox that sees the host view (the host's system folders read-only, the project
 * read-write, $HOME empty, the secrets of src/config/secrets.list masked), with this terminal's
 * stdio, and the exit-code contract of run_help below. The sandbox is src/native/hostrun.c. */
#include <errno.h>
#include <fnmatch.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/chase.h"
#include "common/cleanup.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "config/secrets.h"
#include "egress/egress.h"
#include "native/hostrun.h"
#include "cli/run_audit.h"
#include "cli/run_keep.h"
#include "cli/run_overlay.h"
#include "cli/run_pty.h"
#include "cli/run_agent.h"
#include "cli/run_container.h"
#include "cli/run_guard.h"

/* Exit codes of the contract besides the command's own. */
#define EXIT_TIMEOUT 124
#define EXIT_NO_ISOLATION 125
#define EXIT_CANNOT_RUN 126
#define EXIT_NOT_FOUND 127

/* The allowed folders are walked for secret names before the start; past this many entries
 * the run is refused (a narrower --allow is the fix) rather than started half-checked. */
#define RUN_CMD_WALK_MAX 200000
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

static const char run_cmd_help[] =
    "Usage: vestibule-mcp run [OPTIONS] -- CMD [ARGS...]\n"
    "\n"
    "Run any host command in a native sandbox (user, mount, pid, net, ipc and uts namespaces,\n"
    "seccomp, Landlock, a cgroup where the host delegates one) that sees the host view:\n"
    "/usr, /bin, /lib*, /etc and /opt read-only, the project folder read-write, /tmp private,\n"
    "$HOME an empty private folder, and the secrets of the built-in list masked (~/.ssh,\n"
    "~/.aws, ~/.gnupg, ~/.config/gcloud, ~/.docker, ~/.kube, ~/.netrc, .env*, *.pem, *.key in\n"
    "the allowed folders; *_TOKEN, *_KEY, *_SECRET, AWS_* ... in the environment).\n"
    "stdin, stdout and stderr are the command's own; the grade and usage follow on stderr.\n"
    "\n"
    "  --allow DIR          read-write at its own path (repeatable; default: the current\n"
    "                       directory)\n"
    "  --allow-read PATH    read-only at its own path (repeatable); naming a listed secret\n"
    "                       exactly un-masks it\n"
    "  --deny PATH          mask PATH too (repeatable)\n"
    "  --env NAME           pass the host's variable NAME on even when the secrets list\n"
    "                       would drop it (repeatable)\n"
    "  --net none|allowlist:HOST,...\n"
    "                       no network (default), or HTTP(S) through the egress proxy to\n"
    "                       these hosts only (HTTP_PROXY/HTTPS_PROXY are set)\n"
    "  -t, --timeout S      kill the whole sandbox after S seconds\n"
    "  --require GRADE      native: refuse to run (125) on a lower grade (native-degraded);\n"
    "                       any (default): run on what the host gives, and say which\n"
    "  --overlay            the --allow folders read-only, with a writable layer on top;\n"
    "                       what the command added, changed or deleted is listed on\n"
    "                       stderr at the end, and dropped\n"
    "  --apply              with --overlay: apply the listed changes to the real folders\n"
    "                       when the command exits 0 (symlinks leaving the folder, fifos,\n"
    "                       devices and .git/.envrc/.vscode are refused; files are copied,\n"
    "                       never linked, setuid bits dropped)\n"
    "  -q, --quiet          no grade and usage lines on stderr\n"
    "  --list-secrets       print the built-in secrets list, with why, and exit\n"
    "  --agent NAME         run a coding agent itself sandboxed (claude, codex, gemini,\n"
    "                       opencode): its own state under $HOME read-write, the API key\n"
    "                       variables it needs passed on, the network only to its\n"
    "                       provider's hosts (and the host of its *_BASE_URL) plus\n"
    "                       --net allowlist:HOST,...; src/config/presets/NAME.preset\n"
    "\n"
    "Exit status:\n"
    "  N        the command's own exit code\n"
    "  128+N    the command was killed by signal N\n"
    "  124      --timeout passed (the sandbox was killed)\n"
    "  125      the sandbox could not be set up, or only a grade lower than --require\n"
    "           (the reason is on stderr); also a usage error, and an --apply that could\n"
    "           not apply every change\n"
    "\n"
    "VESTIBULE_BACKEND=container (or auto where the native sandbox cannot be set up) runs\n"
    "the command in a container of a local Docker or Podman engine with the same host view,\n"
    "limits and exit codes (grade: container); --require native and --overlay are refused\n"
    "there, and stdio are pipes (no terminal of its own). A remote engine is refused (125).\n"
    "  126      the command was found but could not be executed\n"
    "  127      the command was not found\n";

/* The options, as given. */
struct run_cmd_opts {
        char **allow, **allow_read, **deny, **env; /* NULL-ended, owned */
        char **read_literal; /* each --allow-read made absolute, links not followed; owned */
        size_t n_allow, n_allow_read, n_deny, n_literal, n_env;
        const char *net, *timeout, *require, *agent;
        struct run_agent preset; /* --agent's additions (run_agent.h) */
        bool quiet, overlay, apply;
        char *overlay_dir; /* --overlay: run_overlay_make()'s folder; owned */
        int cmd_at;        /* argv index of CMD */
};

static void push(char ***v, size_t *n, char *s)
{
        *v = xrealloc(*v, (*n + 2) * sizeof(**v));
        (*v)[(*n)++] = s;
        (*v)[*n] = NULL;
}

static int fail(int code, const char *fmt, const char *arg)
{
        fputs("vestibule-mcp run: ", stderr);
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
        return code;
}

/* Parse up to "--". Return -1 to go on, else the exit status (help, usage error). */
static int parse_opts(int argc, char **argv, struct run_cmd_opts *o)
{
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = NULL;
                int m;

                if (strcmp(a, "--") == 0) {
                        o->cmd_at = i + 1;
                        if (o->apply && !o->overlay)
                                return fail(125, "%s", "--apply needs --overlay");
                        return o->cmd_at < argc ? -1 : fail(125, "%s", "no command after '--'");
                }
                if (cli_is_help(a))
                        return fputs(run_cmd_help, stdout), 0;
                if (strcmp(a, "--list-secrets") == 0)
                        return fputs(config_secrets_text(), stdout), 0;
                if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0 ||
                    strcmp(a, "--overlay") == 0 || strcmp(a, "--apply") == 0) {
                        *(a[2] == 'o' ? &o->overlay : a[2] == 'a' ? &o->apply : &o->quiet) = true;
                        continue;
                }
                if ((m = cli_opt_value(argc, argv, &i, "--allow", NULL, &v)) > 0)
                        push(&o->allow, &o->n_allow, xstrdup(v));
                else if (m == 0 &&
                         (m = cli_opt_value(argc, argv, &i, "--allow-read", NULL, &v)) > 0)
                        push(&o->allow_read, &o->n_allow_read, xstrdup(v));
                else if (m == 0 && (m = cli_opt_value(argc, argv, &i, "--deny", NULL, &v)) > 0)
                        push(&o->deny, &o->n_deny, xstrdup(v));
                else if (m == 0 && (m = cli_opt_value(argc, argv, &i, "--env", NULL, &v)) > 0)
                        push(&o->env, &o->n_env, xstrdup(v));
                else if (m == 0)
                        if ((m = cli_opt_value(argc, argv, &i, "--net", NULL, &o->net)) == 0 &&
                            (m = cli_opt_value(argc, argv, &i, "--timeout", "-t", &o->timeout)) ==
                                0)
                                if ((m = cli_opt_value(argc, argv, &i, "--require", NULL,
                                                       &o->require)) == 0)
                                        m = cli_opt_value(argc, argv, &i, "--agent", NULL,
                                                          &o->agent);
                if (m < 0)
                        return fail(125, "%s needs a value; see 'vestibule-mcp run --help'", a);
                if (m == 0)
                        return fail(125, "unknown option '%s'; see 'vestibule-mcp run --help'", a);
        }
        return fail(125, "%s", "no '--' before the command");
}

/* Each path of @v made absolute and canonical (realpath). A path that does not exist is an
 * error unless @may_miss (then it must be absolute already). Return 0 or -1 (said on stderr). */
static int resolve_all(char **v, bool may_miss, const char *opt)
{
        for (size_t i = 0; v && v[i]; i++) {
                char *r = realpath(v[i], NULL);

                if (!r && (!may_miss || v[i][0] != '/')) {
                        fprintf(stderr, "vestibule-mcp run: %s '%s': %s\n", opt, v[i],
                                strerror(errno));
                        return -1;
                }
                if (r) {
                        free(v[i]);
                        v[i] = r;
                }
        }
        return 0;
}

/* The walk of the allowed folders for secret and kept names (nftw keeps no user pointer). */
static struct {
        const struct config_secrets *secrets;
        char **allow_read; /* --allow-read paths: never masked */
        char **allow;      /* --allow paths: never kept read-only */
        char **explicit;   /* --allow-read paths that are listed secrets: nothing under them is */
        char ***masks, ***kept;
        size_t *n_masks, *n_kept, seen;
} scan;

static bool in_list(char **v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

/* @s is one of @v or lies beneath one. */
static bool under_list(char **v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++) {
                size_t n = strlen(v[i]);
                if (strncmp(v[i], s, n) == 0 && (s[n] == '\0' || s[n] == '/'))
                        return true;
        }
        return false;
}

/* A link whose name is a secret's (.env.local -> config/dev.vars): its target is masked when
 * it lies in the view (red team #7); the link itself stays (a mask does not follow it). */
static int mask_link_target(const char *path, const char *name)
{
        _cleanup_free_ char *target = NULL;

        for (size_t i = 0; scan.secrets->files[i]; i++) {
                if (fnmatch(scan.secrets->files[i], name, 0) != 0)
                        continue;
                target = realpath(path, NULL);
                if (target &&
                    (under_list(scan.allow, target) || under_list(scan.allow_read, target)) &&
                    !in_list(scan.allow_read, target) && !under_list(scan.explicit, target))
                        push(scan.masks, scan.n_masks, TAKE_PTR(target));
                break;
        }
        return FTW_CONTINUE;
}

static int walk_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
        const char *name = path + f->base;

        if (++scan.seen > RUN_CMD_WALK_MAX)
                return 1;
        if (flag == FTW_SL && f->level > 0)
                return mask_link_target(path, name);
        if (flag == FTW_SL || f->level == 0)
                return FTW_CONTINUE;
        if (flag == FTW_F && S_ISSOCK(st->st_mode)) {
                /* a pathname socket connects across namespaces and through a read-only bind
                 * (unix(7)): a tmux, ssh-agent or X11 socket would reach the host */
                push(scan.masks, scan.n_masks, xstrdup(path));
                return FTW_CONTINUE;
        }
        if (under_list(scan.explicit, path))
                return flag == FTW_D ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
        for (size_t i = 0; scan.secrets->files[i]; i++) {
                if (fnmatch(scan.secrets->files[i], name, 0) != 0 || in_list(scan.allow_read, path))
                        continue;
                push(scan.masks, scan.n_masks, xstrdup(path));
                return flag == FTW_D ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
        }
        for (size_t i = 0; scan.kept && scan.secrets->keep[i]; i++) {
                if (fnmatch(scan.secrets->keep[i], name, 0) != 0 || in_list(scan.allow, path))
                        continue;
                push(scan.kept, scan.n_kept, xstrdup(path));
                break; /* the secrets below it are still looked for */
        }
        return FTW_CONTINUE;
}

/* @a is @b or holds it (both canonical). */
static bool holds(const char *a, const char *b)
{
        size_t n = strlen(a);

        return strcmp(a, "/") == 0 || (strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/'));
}

/* Keep of @masks (NULL-terminated, @n entries) the paths the view shows: those that exist on
 * the host (lstat) beneath a system folder, an --allow or an --allow-read path, and not beneath
 * another mask (a masked folder hides them) nor already listed. Each one kept must then be
 * there in the view, or the run fails (spawn.c's child_host_mask): fail closed. */
static void prune_masks(const struct run_cmd_opts *o, char **masks, size_t *n)
{
        char **sys = (char **)native_host_system_dirs;
        _cleanup_free_ bool *drop = xcalloc(*n + 1, sizeof(*drop));
        size_t k = 0;
        struct stat st;

        for (size_t i = 0; i < *n; i++) {
                drop[i] = lstat(masks[i], &st) < 0 ||
                          !(under_list(sys, masks[i]) || under_list(o->allow, masks[i]) ||
                            under_list(o->allow_read, masks[i]));
                for (size_t j = 0; j < *n && !drop[i]; j++)
                        drop[i] = j != i && holds(masks[j], masks[i]) &&
                                  (strcmp(masks[j], masks[i]) != 0 || j < i);
        }
        for (size_t i = 0; i < *n; i++) {
                if (drop[i])
                        free(masks[i]);
                else
                        masks[k++] = masks[i];
        }
        for (size_t i = k; i < *n; i++)
                masks[i] = NULL;
        *n = k;
}

/* The user named @real (a listed secret, canonical) as @literal (lexical_abs): the same path,
 * or the same below $HOME when $HOME's own path has a link in it. A link planted in the project
 * (docs -> ~/.ssh) is not the user naming the secret (red team #6). */
static bool named_as_is(const char *literal, const char *real)
{
        const char *h = config_host_var("HOME");
        _cleanup_free_ char *rh = h && h[0] == '/' ? realpath(h, NULL) : NULL;
        _cleanup_free_ char *lh = h && h[0] == '/' ? sbx_path_lexical(h, "/") : NULL;
        size_t n = rh ? strlen(rh) : 0;

        if (strcmp(literal, real) == 0)
                return true;
        if (!rh || !lh || strncmp(real, rh, n) != 0 || real[n] != '/')
                return false;
        size_t m = strlen(lh);
        return strncmp(literal, lh, m) == 0 && strcmp(literal + m, real + n) == 0;
}

/* Every path to mask: the listed home and host paths, --deny, and the secret names found in
 * the allowed folders; but an --allow-read path that is itself a listed home or host path is
 * the user's explicit choice: neither it nor anything under it is masked. Into @kept: the
 * --allow-read paths, then the "keep" names found in the --allow folders (bound read-only on
 * top). Return 0 or -1 (said on stderr). */
static int collect_masks(const struct run_cmd_opts *o, const struct config_secrets *sec,
                         char ***masks, size_t *n, char ***kept, size_t *n_kept)
{
        char **lists[] = {sec->home, sec->paths, o->deny};
        _cleanup_(config_strv_freep) char **explicit = NULL;
        size_t n_explicit = 0;
        int r = 0;

        for (size_t i = 0; o->allow_read && o->allow_read[i]; i++) {
                push(kept, n_kept, xstrdup(o->allow_read[i]));
                if ((in_list(sec->home, o->allow_read[i]) ||
                     in_list(sec->paths, o->allow_read[i])) &&
                    o->read_literal && named_as_is(o->read_literal[i], o->allow_read[i]))
                        push(&explicit, &n_explicit, xstrdup(o->allow_read[i]));
        }
        /* an --agent's own state is its to write, secrets list or not */
        for (size_t i = 0; o->preset.own && o->preset.own[i]; i++)
                push(&explicit, &n_explicit, xstrdup(o->preset.own[i]));
        for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                for (size_t i = 0; lists[l] && lists[l][i]; i++)
                        if (l == 2 || !under_list(explicit, lists[l][i]))
                                push(masks, n, xstrdup(lists[l][i]));
        memset(&scan, 0, sizeof(scan));
        scan.secrets = sec;
        scan.allow_read = o->allow_read;
        scan.allow = o->allow;
        scan.explicit = explicit;
        scan.masks = masks;
        scan.n_masks = n;
        scan.n_kept = n_kept;
        for (size_t l = 0; l < 2 && r == 0; l++) {
                char **dirs = l == 0 ? o->allow : o->allow_read;
                scan.kept = l == 0 ? kept : NULL; /* "keep" applies to writable folders only */
                for (size_t i = 0; dirs && dirs[i] && r == 0; i++)
                        if (nftw(dirs[i], walk_one, 32, FTW_PHYS | FTW_ACTIONRETVAL) == 1)
                                r = fail(-1,
                                         "more than " STRINGIFY(
                                             RUN_CMD_WALK_MAX) " entries under "
                                                               "'%s' to check for secrets: give a "
                                                               "narrower --allow",
                                         dirs[i]);
        }
        if (r == 0 && *masks)
                prune_masks(o, *masks, n);
        return r;
}

/* @name on the host's $PATH (an executable regular file), or as given when it has a '/'. */
static char *find_exe(const char *name)
{
        const char *path = config_host_var("PATH");
        struct stat st;

        if (strchr(name, '/'))
                return xstrdup(name);
        for (const char *p = path; p && *p;) {
                const char *end = strchr(p, ':');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                _cleanup_free_ char *c = xasprintf("%.*s/%s", (int)len, len ? p : ".", name);

                if (stat(c, &st) == 0 && S_ISREG(st.st_mode) && access(c, X_OK) == 0)
                        return TAKE_PTR(c);
                p = end ? end + 1 : NULL;
        }
        return NULL;
}

/* The home the command sees, unless an allowed folder is it or holds it (then the real one
 * is in view, its secrets masked). */
static const char *private_home(const struct run_cmd_opts *o, const char *home)
{
        if (!home || home[0] != '/' || strcmp(home, "/") == 0)
                return NULL; /* no usable $HOME: none is made */
        for (size_t i = 0; home && o->allow[i]; i++) {
                size_t n = strlen(o->allow[i]);
                if (strncmp(home, o->allow[i], n) == 0 &&
                    (home[n] == '\0' || home[n] == '/' || strcmp(o->allow[i], "/") == 0))
                        return NULL;
        }
        return home;
}

/* Where the command starts: the current directory when the view has it, else the first
 * --allow folder. */
static const char *start_dir(const struct run_cmd_opts *o, const char *cwd, const char *home)
{
        if (cwd && (under_list(o->allow, cwd) || under_list(o->allow_read, cwd) ||
                    (home && strcmp(cwd, home) == 0)))
                return cwd;
        return o->allow[0];
}

/* --net: none, or allowlist:HOSTS as @cfg's egress allowlist (VESTIBULE_EGRESS_PORTS and
 * _PIN still apply, as for run_code). Return 0 none, 1 allowlist, -1 (said on stderr). */
static int parse_net(const char *net, struct sbx_config *cfg)
{
        struct sbx_egress e = {0};
        struct sbx_error err = {0};

        if (!net || strcmp(net, "none") == 0)
                return 0;
        if (strncmp(net, "allowlist:", 10) != 0 || !net[10])
                return fail(-1, "--net '%s': use none or allowlist:HOST,...", net);
        if (config_egress_parse(net + 10, cfg->egress.ports_raw, cfg->egress.pin_raw, &e, &err) < 0)
                return fail(-1, "--net: %s", err.msg);
        config_egress_done(&cfg->egress);
        cfg->egress = e;
        return 1;
}

/* The environment: the host's minus the secrets, plus the --env names the user passes on
 * (when the host has them), plus the proxy variables for an allowlist. */
static char **build_env(const struct config_secrets *sec, char **pass, bool egress)
{
        char **env = config_host_env(sec, NULL);
        size_t n = 0;

        while (env[n])
                n++;
        for (size_t i = 0; pass && pass[i]; i++) {
                const char *v = config_host_var(pass[i]);
                size_t len = strlen(pass[i]);
                bool have = false;

                for (size_t j = 0; j < n && !have; j++)
                        have = strncmp(env[j], pass[i], len) == 0 && env[j][len] == '=';
                if (v && !have)
                        push(&env, &n, xasprintf("%s=%s", pass[i], v));
        }
        for (const char *const *e = egress_sandbox_env(RUN_NETWORK_ALLOWLIST); egress && *e; e++)
                if (strcasestr(*e, "proxy"))
                        push(&env, &n, xstrdup(*e));
        return env;
}

static void print_summary(const struct native_host_result *res, int code)
{
        fprintf(stderr, "vestibule: isolation: %s\n", res->grade);
        if (strncmp(res->grade, "container", 9) == 0) {
                fprintf(stderr,
                        "vestibule: exit %d%s; %.2f s wall (cpu and memory not measured "
                        "on the container backend)\n",
                        code, res->timed_out ? " (timeout)" : "", (double)res->wall_ms / 1000.0);
        } else {
                fprintf(stderr,
                        "vestibule: exit %d%s; %.2f s wall, %.2f s cpu, %llu MiB peak memory%s%s\n",
                        code, res->timed_out ? " (timeout)" : "", (double)res->wall_ms / 1000.0,
                        (double)res->cpu_us / 1e6, (unsigned long long)(res->maxrss_kb / 1024),
                        res->blocked[0] ? "; blocked: " : "", res->blocked);
        }
        if (res->tried[0]) {
                /* the names beneath a watched path and a unix address are the command's */
                _cleanup_free_ char *t = sbx_term_escape(res->tried, strlen(res->tried), false);
                fprintf(stderr, "vestibule: tried: %s\n", t);
        }
}

/* The exit code of a native_host_run() that returned @r, the errors and (unless @quiet) the
 * summary said on stderr. */
static int run_code_of(int r, const struct native_host_result *res, const struct sbx_error *err,
                       bool quiet)
{
        if (r == -ENOEXEC) {
                fprintf(stderr, "vestibule-mcp run: %s\n", err->msg);
                return res->exit_code;
        }
        if (r < 0) {
                fprintf(stderr, "vestibule-mcp run: isolation could not be set up: %s\n", err->msg);
                return EXIT_NO_ISOLATION;
        }
        if (!quiet)
                print_summary(res, res->exit_code);
        return res->exit_code;
}

/* The paths whose opening the run's audit names (hostrun.h, native_host_req.watch): the masks,
 * and the secrets list's home and system entries (the home is empty, so ~/.ssh/id_ed25519 is
 * not there at all, but a read of it is still what a hostile program tries) unless an
 * --allow-read or --allow opens them to the command. */
static char **watch_list(const struct run_cmd_opts *o, const struct config_secrets *sec,
                         char **masks)
{
        char **lists[] = {masks, sec->home, sec->paths}, **w = NULL;
        size_t n = 0;

        for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                for (size_t i = 0; lists[l] && lists[l][i]; i++)
                        if (l == 0 || (!under_list(o->allow_read, lists[l][i]) &&
                                       !under_list(o->allow, lists[l][i])))
                                push(&w, &n, xstrdup(lists[l][i]));
        return w;
}

/* @req on the backend @cfg asks for: the native sandbox with a pty of its own when stdin is a
 * terminal, relayed, never the user's (red team #5; its settings put back after, #9), or the
 * container (no pty: stdio are FIFOs, docs/run-command.md);
 * under auto a native sandbox that cannot be set up lands on the container backend. Return as
 * native_host_run(). */
static int run_backend(const struct sbx_config *cfg, const struct run_cmd_opts *o,
                       struct native_host_req *req, struct native_host_result *res,
                       struct sbx_error *ret_err)
{
        struct sbx_error err = {0};
        struct run_pty pty = {.master = -1, .slave = -1};
        int r;

        if (cfg->backend == SBX_BACKEND_CONTAINER) {
                /* no pty of its own there: stdio are FIFOs (docs/run-command.md) */
                r = run_container_host(cfg, req, res, &err);
        } else {
                r = run_pty_start(&pty);
                req->view.pty_slave = pty.slave > 0 ? pty.slave : 0;
                if (r >= 0)
                        r = native_host_run(cfg, req, res, &err);
                else
                        sbx_fail(&err, -r, "%s", "cannot make the command's own terminal (pty(7))");
                run_pty_stop(&pty);
        }
        /* auto: a host where the native sandbox cannot be set up (no user namespaces, inside a
         * container) lands on the container backend, as run_code's ladder does; the command
         * never started, and the grade says which it got. Not with --overlay (native only) nor
         * --require native. */
        if (r < 0 && r != -ENOEXEC && cfg->backend == SBX_BACKEND_AUTO && !o->overlay &&
            !(o->require && strcmp(o->require, "native") == 0)) {
                struct sbx_error cerr = {0};
                char native_why[sizeof(err.msg)];

                snprintf(native_why, sizeof(native_why), "%s", err.msg);
                r = run_container_host(cfg, req, res, &cerr);
                if (r < 0 && r != -ENOEXEC)
                        snprintf(err.msg, sizeof(err.msg), "native: %.200s; container: %.250s",
                                 native_why, cerr.msg);
                else
                        err = cerr;
        }
        *ret_err = err;
        return r;
}

/* The run itself, once the options are resolved. */
static int run_resolved(struct sbx_config *cfg, const struct run_cmd_opts *o, char **argv,
                        const struct config_secrets *sec, int sfd, struct native_host_result *res)
{
        _cleanup_free_ char *exe = find_exe(argv[o->cmd_at]);
        _cleanup_free_ char *cwd = getcwd(NULL, 0);
        char **masks = NULL, **env = NULL, **writable = NULL, **ro = NULL, **watch = NULL;
        size_t n_masks = 0, n_writable = 0, n_ro = 0;
        struct sbx_error err = {0};
        static const char *const none[] = {NULL};
        int net, code, r;

        if (!exe)
                return fail(EXIT_NOT_FOUND, "%s: command not found on PATH", argv[o->cmd_at]);
        net = parse_net(o->net, cfg);
        if (net < 0 || collect_masks(o, sec, &masks, &n_masks, &ro, &n_ro) < 0) {
                config_strv_free(masks);
                config_strv_free(ro);
                return EXIT_NO_ISOLATION;
        }
        const char *home = private_home(o, config_host_var("HOME"));
        for (size_t i = 0; o->allow[i]; i++)
                push(&writable, &n_writable, xstrdup(o->allow[i]));
        watch = watch_list(o, sec, masks);
        if (home)
                push(&writable, &n_writable, xstrdup(home));
        env = build_env(sec, o->env, net == 1);
        struct native_host_req req = {
            .view = {.system = native_host_system_dirs,
                     .rw = (const char *const *)o->allow,
                     .ro = ro ? (const char *const *)ro : none,
                     .masks = masks ? (const char *const *)masks : none,
                     .home = home,
                     .cwd = start_dir(o, cwd, home),
                     .exe = exe,
                     .writable = (const char *const *)writable,
                     .overlay = o->overlay_dir},
            .argv = (const char *const *)argv + o->cmd_at,
            .envp = (const char *const *)env,
            .timeout_ms = o->timeout ? strtoull(o->timeout, NULL, 10) * 1000 : 0,
            .egress = net == 1,
            .watch = (const char *const *)watch,
            .cancel_fd = sfd,
        };
        time_t began = time(NULL);

        r = run_backend(cfg, o, &req, res, &err);
        code = run_code_of(r, res, &err, o->quiet);
        if (!o->overlay)
                (void)run_keep_sweep(o->allow, (const char *const *)sec->keep, ro, began);
        config_strv_free(masks);
        config_strv_free(ro);
        config_strv_free(env);
        config_strv_free(writable);
        config_strv_free(watch);
        return code;
}

/* Folders no --allow or --allow-read may name: shared sockets (tmux, ssh-agent, X11, the user's
 * bus under /run/user) and kernel interfaces; one that holds them is refused too. */
static const char *const run_cmd_shared[] = {"/tmp",  "/var/tmp", "/dev/shm", "/run",
                                             "/proc", "/sys",     "/dev",     NULL};
static const char *const run_cmd_shared_below[] = {"/run/user", "/proc", "/sys", "/dev", NULL};

/* Refuse an --allow or --allow-read of a shared folder, and an --allow that is $HOME (@home,
 * canonical, or NULL) or holds it: the command could write ~/.bashrc or ~/.local/bin, run by
 * the host at the next login. Return -1 to go on, else the exit (said on stderr). */
static int check_places(const struct run_cmd_opts *o, const char *home)
{
        char **lists[] = {o->allow, o->allow_read};

        for (size_t l = 0; l < ELEMENTSOF(lists); l++)
                for (size_t i = 0; lists[l] && lists[l][i]; i++) {
                        const char *p = lists[l][i], *hit = NULL;
                        for (size_t k = 0; run_cmd_shared[k]; k++)
                                if (holds(p, run_cmd_shared[k]))
                                        hit = run_cmd_shared[k];
                        for (size_t k = 0; run_cmd_shared_below[k]; k++)
                                if (holds(run_cmd_shared_below[k], p))
                                        hit = run_cmd_shared_below[k];
                        if (hit) {
                                fprintf(stderr,
                                        "vestibule-mcp run: %s %s: %s is shared with other "
                                        "programs (sockets of tmux, ssh-agent, X11) or is the "
                                        "kernel's: make a project folder, e.g. mkdir ~/scratch "
                                        "&& cd ~/scratch\n",
                                        l == 0 ? "--allow" : "--allow-read", p, hit);
                                return EXIT_NO_ISOLATION;
                        }
                        if (l == 0 && home && holds(p, home)) {
                                fprintf(stderr,
                                        "vestibule-mcp run: --allow %s: it is or holds your home "
                                        "%s, whose ~/.bashrc and ~/.local/bin the host runs: "
                                        "name a project folder inside your home (cd into it, or "
                                        "--allow ~/PROJECT); --allow-read ~ is fine\n",
                                        p, home);
                                return EXIT_NO_ISOLATION;
                        }
                }
        return -1;
}

/* Refuse what cannot be honoured before anything runs. Return -1 to go on, else the exit. */
static int check_request(const struct sbx_config *cfg, const struct run_cmd_opts *o)
{
        struct native_host_result g = {0};

        if (o->timeout &&
            (strspn(o->timeout, "0123456789") != strlen(o->timeout) || atoi(o->timeout) <= 0))
                return fail(EXIT_NO_ISOLATION, "--timeout '%s': a whole number of seconds > 0",
                            o->timeout);
        if (o->require && strcmp(o->require, "native") != 0 && strcmp(o->require, "any") != 0)
                return fail(EXIT_NO_ISOLATION, "--require '%s': use native or any", o->require);
        if (cfg->backend != SBX_BACKEND_AUTO && cfg->backend != SBX_BACKEND_NATIVE &&
            cfg->backend != SBX_BACKEND_CONTAINER)
                return fail(EXIT_NO_ISOLATION,
                            "run -- CMD runs on the native and container backends only; "
                            "VESTIBULE_BACKEND=%s asks for another: unset it",
                            config_backend_name(cfg->backend));
        if (cfg->backend == SBX_BACKEND_CONTAINER && o->overlay)
                return fail(EXIT_NO_ISOLATION,
                            "--overlay and --apply run on the native backend only; "
                            "VESTIBULE_BACKEND=%s asks for the container one: unset it, or "
                            "drop --overlay",
                            config_backend_name(cfg->backend));
        if (cfg->backend == SBX_BACKEND_CONTAINER && o->require &&
            strcmp(o->require, "native") == 0)
                return fail(EXIT_NO_ISOLATION,
                            "isolation on the container backend is container, lower than "
                            "--require native; unset VESTIBULE_BACKEND=%s, or drop --require",
                            config_backend_name(cfg->backend));
        if (o->require && strcmp(o->require, "native") == 0) {
                native_host_grade(cfg, &g);
                if (g.degraded)
                        return fail(EXIT_NO_ISOLATION,
                                    "isolation here is %s, lower than --require native; run "
                                    "`vestibule-mcp doctor` for the fix, or drop --require",
                                    g.grade);
        }
        return -1;
}

/* --agent: record what the preset guards (run_guard.h) and keep its readonly paths that exist
 * read-only (as --allow-read). Return 0, or -1 (said on stderr: the run exits 125). */
static int guard_begin(struct run_cmd_opts *o, struct run_guard *g)
{
        struct sbx_error err = {0};

        if (run_guard_begin(&o->preset.preset, o->allow, g, &err) < 0) {
                fprintf(stderr, "vestibule-mcp run: %s\n", err.msg);
                return -1;
        }
        for (size_t i = 0; g->readonly_at[i]; i++) {
                char *r = realpath(g->readonly_at[i], NULL);
                if (!r)
                        continue; /* gone since: run_guard_end() moves a new one aside */
                push(&o->read_literal, &o->n_literal, xstrdup(r));
                push(&o->allow_read, &o->n_allow_read, r);
        }
        return 0;
}

/* run_resolved() inside --overlay's layers when asked: made before, listed, applied (--apply)
 * and removed after (run_overlay.h); with --agent, inside the guard of its files
 * (run_guard.h), ended after --apply so nothing applied escapes it. */
static int run_layered(struct sbx_config *cfg, struct run_cmd_opts *o, char **argv,
                       const struct config_secrets *sec, int sfd)
{
        struct native_host_result res = {0};
        struct run_guard guard = {0};
        struct run_audit au;
        int code = EXIT_NO_ISOLATION;

        /* as run_code: no run goes unrecorded (run_audit.h) */
        if (run_audit_begin(cfg, "run --", argv + o->cmd_at,
                            o->timeout ? (unsigned)strtoul(o->timeout, NULL, 10) : 0, &au) < 0)
                return EXIT_NO_ISOLATION;
        if (o->agent && guard_begin(o, &guard) < 0) {
                run_guard_end(&guard, NULL, 0);
                run_audit_end(&au, code, NULL);
                return code;
        }
        if (!o->overlay || run_overlay_make(o->n_allow, &o->overlay_dir) == 0)
                code = run_resolved(cfg, o, argv, sec, sfd, &res);
        if (o->overlay_dir)
                code = run_overlay_finish(o->overlay_dir, o->allow, (const char *const *)sec->keep,
                                          o->apply, code);
        free(TAKE_PTR(o->overlay_dir));
        run_guard_end(&guard, res.tried, sizeof(res.tried));
        run_audit_end(&au, code, res.grade[0] ? &res : NULL);
        return code;
}

/* No --allow: the current directory. Return 0 or -1 (said on stderr). */
static int default_allow(struct run_cmd_opts *o)
{
        char *cwd;

        if (o->allow)
                return 0;
        cwd = getcwd(NULL, 0);
        if (!cwd)
                return fail(-1, "cannot read the current directory: %s", strerror(errno));
        push(&o->allow, &o->n_allow, cwd);
        return 0;
}

/* --agent NAME: the preset's own state read-write (after the default project), its variables
 * passed on, its allowlist as --net (run_agent.c). Return 0 or -1 (said on stderr). */
static int apply_agent(struct run_cmd_opts *o, char **argv)
{
        if (run_agent_resolve(o->agent, argv[o->cmd_at], o->net, &o->preset) < 0)
                return -1;
        for (size_t i = 0; o->preset.own[i]; i++)
                push(&o->allow, &o->n_allow, xstrdup(o->preset.own[i]));
        for (size_t i = 0; o->preset.env[i]; i++)
                push(&o->env, &o->n_env, xstrdup(o->preset.env[i]));
        o->net = o->preset.net;
        return 0;
}

int cmd_run_command(int argc, char **argv)
{
        struct run_cmd_opts o = {0};
        struct config_secrets sec = {0};
        struct sbx_config *cfg = NULL;
        struct sbx_error err = {0};
        _cleanup_close_ int sfd = -1;
        _cleanup_free_ char *rhome = NULL;
        const char *h;
        sigset_t set;
        int code;

        code = parse_opts(argc, argv, &o);
        if (code >= 0)
                goto out;
        /* a killed run's journal first: the agent's files as they were before it (run_guard.h) */
        run_guard_recover();
        code = EXIT_NO_ISOLATION;
        if (default_allow(&o) < 0 || (o.agent && apply_agent(&o, argv) < 0))
                goto out;
        {
                _cleanup_free_ char *cwd = getcwd(NULL, 0);
                for (size_t i = 0; o.allow_read && o.allow_read[i]; i++)
                        push(&o.read_literal, &o.n_literal,
                             sbx_path_lexical(o.allow_read[i], cwd ? cwd : "/"));
        }
        if (resolve_all(o.allow, false, "--allow") < 0 ||
            resolve_all(o.allow_read, false, "--allow-read") < 0 ||
            resolve_all(o.deny, true, "--deny") < 0)
                goto out;
        if (in_list(o.allow, "/")) {
                fail(code, "%s",
                     "--allow / would give the command the whole host: name the project's folder");
                goto out;
        }
        h = config_host_var("HOME");
        rhome = h && h[0] == '/' ? realpath(h, NULL) : NULL;
        code = check_places(&o, rhome);
        if (code >= 0)
                goto out;
        code = EXIT_NO_ISOLATION;
        /* SIGINT/SIGTERM/SIGHUP are forwarded to the command, which has a grace to end before
         * the sandbox is killed; SIGWINCH is forwarded. Blocked before any thread starts; the
         * sandbox's init resets its own mask. */
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, SIGWINCH);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        if (config_load(&cfg, &err) < 0 || cfg->invalid) {
                fail(EXIT_NO_ISOLATION, "cannot load the settings: %s",
                     cfg && cfg->invalid ? cfg->invalid_msg : err.msg);
                goto out;
        }
        code = check_request(cfg, &o);
        if (code >= 0)
                goto out;
        /* the home's masks at its real path: --allow/--allow-read are realpath'd, and with
         * /home -> var/home (Fedora Silverblue) the literal $HOME's masks would miss */
        if (config_secrets_load(rhome ? rhome : config_host_var("HOME"), &sec, &err) < 0) {
                code = fail(EXIT_NO_ISOLATION, "%s", err.msg);
                goto out;
        }
        code = run_layered(cfg, &o, argv, &sec, sfd);
out:
        config_secrets_done(&sec);
        config_free(cfg);
        config_strv_free(o.allow);
        config_strv_free(o.allow_read);
        config_strv_free(o.read_literal);
        config_strv_free(o.deny);
        config_strv_free(o.env);
        run_agent_done(&o.preset);
        return code;
}

int cmd_run_any(int argc, char **argv)
{
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], "--") == 0)
                        return cmd_run_command(argc, argv);
        return cmd_run(argc, argv);
}
