/* install_wrap.c - `install-client --wrap NAME` / `--unwrap NAME` (install_wrap.h). */
#include "cli/install_wrap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/wrap.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

bool install_wrap_opt(struct install_wrap *w, int opt, const char *arg)
{
        static const struct {
                int opt;
                const char *flag;
        } pass[] = {{'a', "--allow"}, {'r', "--allow-read"}, {'N', "--net"}};

        if (opt == 'w' || opt == 'u') {
                w->name = arg;
                w->unwrap = opt == 'u';
                return true;
        }
        for (size_t i = 0; i < ELEMENTSOF(pass); i++) {
                if (pass[i].opt != opt)
                        continue;
                w->opts = xrealloc(w->opts, (w->n_opts + 2) * sizeof(*w->opts));
                w->opts[w->n_opts++] = pass[i].flag;
                w->opts[w->n_opts++] = arg;
                return true;
        }
        return false;
}

static void add(const char ***v, size_t *n, const char *s)
{
        *v = xrealloc(*v, (*n + 1) * sizeof(**v));
        (*v)[(*n)++] = s;
}

/* The command line of @e, for the user to see (and restore by hand). */
static void print_command(const char *what, const struct client_entry *e)
{
        printf("install-client: %s: %s", what, e->command);
        for (size_t i = 0; i < e->n_args; i++)
                printf(" %s", e->args[i]);
        printf("\n");
}

/* The wrapped entry (@ret->args owned by the caller, strings borrowed from @e, @self, @w). */
static void wrapped(const struct client_entry *e, const char *self, const char *const *self_args,
                    size_t n_self, const struct install_wrap *w, struct client_server *ret,
                    char ***names)
{
        const char **args = NULL;
        size_t n = 0;

        for (size_t i = 0; i < n_self; i++)
                add(&args, &n, self_args[i]);
        add(&args, &n, "mcp");
        add(&args, &n, "wrap");
        for (size_t i = 0; i < w->n_opts; i++)
                add(&args, &n, w->opts[i]);
        /* the entry's own variables were set for this server: passed on even when the secrets
         * list would drop them (its token) */
        *names = xcalloc(e->n_env + 1, sizeof(**names));
        for (size_t i = 0; i < e->n_env; i++) {
                (*names)[i] = xstrndup(e->env[i], strcspn(e->env[i], "="));
                add(&args, &n, "--env");
                add(&args, &n, (*names)[i]);
        }
        add(&args, &n, "--");
        add(&args, &n, e->command);
        for (size_t i = 0; i < e->n_args; i++)
                add(&args, &n, e->args[i]);
        ret->command = self;
        ret->args = args;
        ret->n_args = n;
}

/* Write @s over the entry; print what happened. Return the exit status. */
static int write_entry(const struct client_info *c, const char *file, const char *backup_dir,
                       const struct client_server *s, const char *done)
{
        _cleanup_free_ char *backup = NULL, *kept = NULL;
        struct sbx_error err = {0};
        int r = clients_install(c, file, s, backup_dir, &backup, &kept, &err);

        if (r < 0) {
                fprintf(stderr, "vestibule-mcp install-client: %s\nNothing was changed.\n",
                        err.msg);
                return 1;
        }
        if (backup)
                printf("install-client: saved the old '%s' as '%s' (mode 0600)\n", file, backup);
        printf("install-client: %s the '%s' entry of %s in '%s'; restart %s to load it\n", done,
               s->name, c->title, file, c->title);
        return 0;
}

int install_wrap_run(const struct client_info *c, const char *file, const char *backup_dir,
                     const char *self, const char *const *self_args, size_t n_self,
                     struct install_wrap *w)
{
        _cleanup_free_ const char **opts = w->opts; /* freed on every way out */
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ const char **args = NULL;
        char **names = NULL;
        struct client_entry e = {0};
        struct client_server s = {.name = w->name};
        struct sbx_error err = {0};
        size_t at = 0;
        int code;
        FILE *f = fopen(file, "re");

        if (f) {
                size_t cap = 0;
                if (getdelim(&text, &cap, '\0', f) < 0 && !text)
                        text = xstrdup("");
                fclose(f);
        }
        bool toml = c->format == CLIENT_FORMAT_TOML_CODEX;
        if ((!f && !toml) || clients_read_entry(c, text, w->name, &e, &err) < 0) {
                fprintf(stderr, "vestibule-mcp install-client: '%s': %s\nNothing was changed.\n",
                        file, f || toml ? err.msg : strerror(errno));
                return 1;
        }
        bool is = clients_entry_wrapped(&e, self, &at);
        if (w->unwrap ? !is || at >= e.n_args : is) {
                printf("install-client: '%s' is %s; nothing changed\n", w->name,
                       is ? "already wrapped" : "not wrapped");
                print_command("it runs", &e);
                clients_entry_done(&e);
                return 0;
        }
        if (w->unwrap) {
                s.command = e.args[at];
                s.args = (const char *const *)e.args + at + 1;
                s.n_args = e.n_args - at - 1;
        } else {
                print_command("the original, restored by --unwrap", &e);
                wrapped(&e, self, self_args, n_self, w, &s, &names);
                args = (const char **)s.args;
        }
        s.env = (const char *const *)e.env;
        s.n_env = e.n_env;
        s.command_only = toml; /* every other byte of the codex entry stays as written */
        code = write_entry(c, file, backup_dir, &s, w->unwrap ? "unwrapped" : "wrapped");
        for (size_t i = 0; names && names[i]; i++)
                free(names[i]);
        free(names);
        clients_entry_done(&e);
        return code;
}
