/* secrets.c - the built-in secrets list (src/config/secrets.list, taken in with .incbin so the
 * list stays one readable data file) and the host environment for the host view. */
#include "config/secrets.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

extern char **environ;

/* The list's bytes, NUL-ended (the byte after .incbin). */
extern const char sbx_secrets_list[];
__asm__(".section .rodata\n"
        ".balign 16\n"
        ".global sbx_secrets_list\nsbx_secrets_list:\n"
        ".incbin \"" VESTIBULE_SECRETS_LIST "\"\n"
        ".byte 0\n"
        ".previous\n");

const char *config_secrets_text(void)
{
        return sbx_secrets_list;
}

static void strv_push(char ***v, size_t *n, char *s)
{
        *v = xrealloc(*v, (*n + 2) * sizeof(**v));
        (*v)[(*n)++] = s;
        (*v)[*n] = NULL;
}

char **config_strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
        return NULL;
}

void config_secrets_done(struct config_secrets *s)
{
        s->home = config_strv_free(s->home);
        s->paths = config_strv_free(s->paths);
        s->files = config_strv_free(s->files);
        s->env = config_strv_free(s->env);
        s->keep = config_strv_free(s->keep);
}

/* One line "KIND PATTERN WHY" (leading blanks skipped) into @s; comments and blank lines are
 * nothing. Return 0 or -EINVAL. */
static int parse_line(const char *line, size_t len, const char *home, struct config_secrets *s,
                      size_t n[5])
{
        static const char *const kinds[] = {"home", "path", "file", "env", "keep"};
        char kind[8], pat[256];
        size_t i = 0, k, p;

        while (i < len && (line[i] == ' ' || line[i] == '\t'))
                i++;
        if (i == len || line[i] == '#')
                return 0;
        for (k = 0; i < len && line[i] != ' ' && k < sizeof(kind) - 1; i++)
                kind[k++] = line[i];
        kind[k] = '\0';
        while (i < len && (line[i] == ' ' || line[i] == '\t'))
                i++;
        for (p = 0; i < len && line[i] != ' ' && line[i] != '\t' && p < sizeof(pat) - 1; i++)
                pat[p++] = line[i];
        pat[p] = '\0';
        if (p == 0)
                return -EINVAL;
        for (size_t j = 0; j < ELEMENTSOF(kinds); j++) {
                if (strcmp(kind, kinds[j]) != 0)
                        continue;
                char ***v[] = {&s->home, &s->paths, &s->files, &s->env, &s->keep};
                if (j == 0 && !home)
                        return 0;
                if (j == 1 && pat[0] != '/')
                        return -EINVAL;
                strv_push(v[j], &n[j], j == 0 ? xasprintf("%s/%s", home, pat) : xstrdup(pat));
                return 0;
        }
        return -EINVAL;
}

int config_secrets_load(const char *home, struct config_secrets *ret, struct sbx_error *err)
{
        struct config_secrets s = {0};
        size_t n[5] = {0}, lineno = 0;
        const char *t = sbx_secrets_list;

        /* every array exists, even empty */
        strv_push(&s.home, &n[0], NULL);
        strv_push(&s.paths, &n[1], NULL);
        strv_push(&s.files, &n[2], NULL);
        strv_push(&s.env, &n[3], NULL);
        strv_push(&s.keep, &n[4], NULL);
        n[0] = n[1] = n[2] = n[3] = n[4] = 0;
        while (*t) {
                const char *nl = strchr(t, '\n');
                size_t len = nl ? (size_t)(nl - t) : strlen(t);

                lineno++;
                if (parse_line(t, len, home, &s, n) < 0) {
                        config_secrets_done(&s);
                        return sbx_fail(err, EINVAL,
                                        "src/config/secrets.list line %zu: not 'KIND PATTERN WHY' "
                                        "with KIND home, path (absolute), file, env or keep; fix "
                                        "the list and rebuild",
                                        lineno);
                }
                t += len + (nl ? 1 : 0);
        }
        *ret = s;
        return 0;
}

bool config_secret_env_name(const struct config_secrets *s, const char *name)
{
        for (size_t i = 0; s->env && s->env[i]; i++)
                if (fnmatch(s->env[i], name, 0) == 0)
                        return true;
        return false;
}

char **config_host_env(const struct config_secrets *s, size_t *ret_dropped)
{
        char **v = NULL;
        size_t n = 0, dropped = 0;

        strv_push(&v, &n, NULL);
        n = 0;
        for (char **e = environ; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                _cleanup_free_ char *name = eq ? xstrndup(*e, (size_t)(eq - *e)) : NULL;

                if (!name || name[0] == '\0')
                        continue;
                if (config_secret_env_name(s, name)) {
                        dropped++;
                        continue;
                }
                strv_push(&v, &n, xstrdup(*e));
        }
        if (ret_dropped)
                *ret_dropped = dropped;
        return v;
}

const char *config_host_var(const char *name)
{
        const char *v = getenv(name);

        return v && *v ? v : NULL;
}
