/* presets.c - the built-in agent presets (src/config/presets/NAME.preset, taken in with
 * .incbin as secrets.list is, so each preset stays one readable data file) and their parser. */
#include "config/presets.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/secrets.h"

/* One preset file's bytes, NUL-ended (the byte after .incbin), as the symbol sbx_preset_NAME. */
#define PRESET_INCBIN(name)                                                                        \
        extern const char sbx_preset_##name[];                                                     \
        __asm__(".section .rodata\n"                                                               \
                ".balign 16\n"                                                                     \
                ".global sbx_preset_" #name "\nsbx_preset_" #name ":\n"                            \
                ".incbin \"" VESTIBULE_PRESETS_DIR "/" #name ".preset\"\n"                         \
                ".byte 0\n"                                                                        \
                ".previous\n")

PRESET_INCBIN(claude);
PRESET_INCBIN(codex);
PRESET_INCBIN(gemini);
PRESET_INCBIN(opencode);

static const struct {
        const char *name;
        const char *text;
} presets[] = {
    {"claude", sbx_preset_claude},
    {"codex", sbx_preset_codex},
    {"gemini", sbx_preset_gemini},
    {"opencode", sbx_preset_opencode},
};

const char *config_preset_names(void)
{
        return "claude, codex, gemini, opencode";
}

static void strv_add(char ***v, size_t *n, char *s)
{
        *v = xrealloc(*v, (*n + 2) * sizeof(**v));
        (*v)[(*n)++] = s;
        (*v)[*n] = NULL;
}

void config_preset_done(struct config_preset *p)
{
        free(p->command);
        p->command = NULL;
        p->home = config_strv_free(p->home);
        p->env = config_strv_free(p->env);
        p->hosts = config_strv_free(p->hosts);
        p->url_env = config_strv_free(p->url_env);
        for (size_t i = 0; i < p->n_guards; i++) {
                free(p->guards[i].path);
                config_strv_free(p->guards[i].keys);
        }
        free(p->guards);
        p->guards = NULL;
        p->n_guards = 0;
        p->readonly = config_strv_free(p->readonly);
}

static bool all_of(const char *s, const char *extra)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && !strchr(extra, *s))
                        return false;
        return true;
}

/* A "home" value: relative, no "." or ".." part, no empty part, printable. */
static bool home_ok(const char *v)
{
        if (v[0] == '/' || !all_of(v, "._-/+@"))
                return false;
        for (const char *p = v; p;) {
                const char *e = strchr(p, '/');
                size_t n = e ? (size_t)(e - p) : strlen(p);
                if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                p = e ? e + 1 : NULL;
        }
        return true;
}

/* Index of @kind in the kinds, or -1. */
static int kind_of(const char *kind)
{
        static const char *const kinds[] = {"command", "home",  "env",     "host",
                                            "url-env", "guard", "readonly"};

        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                if (strcmp(kind, kinds[i]) == 0)
                        return (int)i;
        return -1;
}

/* The value @v fits kind @k. */
static bool value_ok(int k, const char *v)
{
        switch (k) {
        case 0:
                return all_of(v, "._-");
        case 1:
        case 5:
        case 6:
                return home_ok(v);
        case 2:
        case 4:
                return all_of(v, "_") && !isdigit((unsigned char)v[0]);
        default:
                return all_of(v, ".-") && strlen(v) <= 253;
        }
}

/* Take the next blank-separated word of @line[*i..len) into @buf (size @size). false when
 * there is none or it is too long. */
static bool word(const char *line, size_t len, size_t *i, char *buf, size_t size)
{
        size_t n = 0;

        while (*i < len && (line[*i] == ' ' || line[*i] == '\t'))
                (*i)++;
        while (*i < len && line[*i] != ' ' && line[*i] != '\t') {
                if (n + 1 >= size || line[*i] == '\0')
                        return false;
                buf[n++] = line[(*i)++];
        }
        buf[n] = '\0';
        return n > 0;
}

/* "KEY[,KEY...]": each key '.'-separated parts of letters, digits, '_' and '-', or '*'. */
static bool keys_ok(const char *v)
{
        if (!all_of(v, "_-.*,") || v[0] == ',' || v[strlen(v) - 1] == ',')
                return false;
        for (const char *p = v; *p; p++) {
                bool start = p == v || p[-1] == '.' || p[-1] == ',';
                bool end = p[1] == '\0' || p[1] == '.' || p[1] == ',';
                if ((*p == '.' || *p == ',') && (start || end))
                        return false; /* an empty part */
                if (*p == '*' && !(start && end))
                        return false;
        }
        return true;
}

/* The third word of a guard line, @path its FILE made absolute, into @p. 0, or -1 when bad. */
static int add_guard(const char *line, size_t len, size_t *i, char *path, struct config_preset *p)
{
        char keys[256];
        struct config_guard *g;
        size_t n = 0;

        if (!word(line, len, i, keys, sizeof(keys)) || !keys_ok(keys)) {
                free(path);
                return -1;
        }
        p->guards = xrealloc(p->guards, (p->n_guards + 1) * sizeof(*p->guards));
        g = &p->guards[p->n_guards++];
        g->path = path;
        g->keys = NULL;
        strv_add(&g->keys, &n, NULL);
        n = 0;
        for (char *s = keys, *e; s; s = e ? e + 1 : NULL) {
                e = strchr(s, ',');
                strv_add(&g->keys, &n, e ? xstrndup(s, (size_t)(e - s)) : xstrdup(s));
        }
        return 0;
}

/* One line into @p (@n: the counts of home, env, hosts, url_env, readonly). 0, or -1 when
 * bad. */
static int parse_line(const char *line, size_t len, const char *home, struct config_preset *p,
                      size_t n[5])
{
        char kind[16], val[256];
        size_t i = 0;
        int k;

        while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
                i++;
        if (i == len || line[i] == '#')
                return 0;
        if (!word(line, len, &i, kind, sizeof(kind)) || (k = kind_of(kind)) < 0 ||
            !word(line, len, &i, val, sizeof(val)) || !value_ok(k, val))
                return -1;
        if (k == 0) {
                if (p->command)
                        return -1; /* one command a preset */
                p->command = xstrdup(val);
                return 0;
        }
        char ***v[] = {&p->home, &p->env, &p->hosts, &p->url_env, NULL, &p->readonly};
        bool in_home = k == 1 || k == 5 || k == 6;
        if (k == 5) {
                char keys[256];
                size_t j = i;
                if (!word(line, len, &j, keys, sizeof(keys)) || !keys_ok(keys))
                        return -1; /* checked with or without a $HOME */
        }
        if (in_home && !home)
                return 0;
        if (k == 5)
                return add_guard(line, len, &i, xasprintf("%s/%s", home, val), p);
        size_t at = k == 6 ? 4 : (size_t)k - 1;
        strv_add(v[k - 1], &n[at], in_home ? xasprintf("%s/%s", home, val) : xstrdup(val));
        return 0;
}

int config_preset_parse(const char *text, size_t len, const char *home, struct config_preset *ret,
                        struct sbx_error *err)
{
        struct config_preset p = {0};
        size_t n[5] = {0}, lineno = 0;

        strv_add(&p.home, &n[0], NULL);
        strv_add(&p.env, &n[1], NULL);
        strv_add(&p.hosts, &n[2], NULL);
        strv_add(&p.url_env, &n[3], NULL);
        strv_add(&p.readonly, &n[4], NULL);
        memset(n, 0, sizeof(n));
        for (size_t at = 0; at < len;) {
                const char *nl = memchr(text + at, '\n', len - at);
                size_t l = nl ? (size_t)(nl - (text + at)) : len - at;

                lineno++;
                if (parse_line(text + at, l, home, &p, n) < 0) {
                        config_preset_done(&p);
                        return sbx_fail(err, EINVAL,
                                        "preset line %zu: not 'KIND VALUE WHY' with KIND command "
                                        "(once), home or readonly (relative, no '..'), env (a "
                                        "variable name), host (a host name) or url-env, nor "
                                        "'guard FILE KEY[,KEY...] WHY'; fix the file in "
                                        "src/config/presets/ and rebuild",
                                        lineno);
                }
                at += l + (nl ? 1 : 0);
        }
        *ret = p;
        return 0;
}

int config_preset_load(const char *name, const char *home, struct config_preset *ret,
                       struct sbx_error *err)
{
        for (size_t i = 0; i < ELEMENTSOF(presets); i++) {
                if (strcmp(name, presets[i].name) != 0)
                        continue;
                int r =
                    config_preset_parse(presets[i].text, strlen(presets[i].text), home, ret, err);
                return r < 0 ? sbx_wrap(err, "built-in preset '%s'", name) : 0;
        }
        return sbx_fail(err, ENOENT, "unknown agent '%s': the known ones are %s", name,
                        config_preset_names());
}

char *config_url_host(const char *url)
{
        const char *s = strstr(url, "://"), *h, *end;
        char *host;

        if (!s || s == url)
                return NULL;
        h = s + 3;
        end = h + strcspn(h, "/?#");
        for (const char *at = h; at < end; at++)
                if (*at == '@')
                        h = at + 1; /* the last '@' ends the userinfo */
        if (*h == '[') {
                const char *close = memchr(h, ']', (size_t)(end - h));
                if (!close)
                        return NULL;
                host = xstrndup(h + 1, (size_t)(close - h - 1));
        } else {
                const char *colon = memchr(h, ':', (size_t)(end - h));
                host = xstrndup(h, (size_t)((colon ? colon : end) - h));
        }
        if (!host[0]) {
                free(host);
                return NULL;
        }
        for (char *c = host; *c; c++)
                *c = (char)tolower((unsigned char)*c);
        return host;
}

char **config_preset_url_hosts(const struct config_preset *p)
{
        char **v = NULL;
        size_t n = 0;

        strv_add(&v, &n, NULL);
        n = 0;
        for (size_t i = 0; p->url_env && p->url_env[i]; i++) {
                const char *url = config_host_var(p->url_env[i]);
                char *h = url ? config_url_host(url) : NULL;
                if (h)
                        strv_add(&v, &n, h);
        }
        return v;
}
