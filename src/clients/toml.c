/* toml.c - Codex's ~/.codex/config.toml: the [mcp_servers.NAME] table editor behind
 * install-client (toml.h), and reading one entry back for --wrap. Not a TOML parser: a line
 * scanner that follows strings, multi-line strings and multi-line arrays (see clients.h). */
#include "clients/toml.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

/* Append @v to @b as a TOML basic string. */
static void toml_string(FILE *b, const char *v)
{
        fputc('"', b);
        for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
                switch (*p) {
                case '"':
                        fputs("\\\"", b);
                        break;
                case '\\':
                        fputs("\\\\", b);
                        break;
                case '\n':
                        fputs("\\n", b);
                        break;
                case '\t':
                        fputs("\\t", b);
                        break;
                case '\r':
                        fputs("\\r", b);
                        break;
                default:
                        if (*p < 0x20 || *p == 0x7f)
                                fprintf(b, "\\u%04x", *p);
                        else
                                fputc(*p, b);
                }
        }
        fputc('"', b);
}

/* One env value of the old table: its name, and its value's source text (kept as written). */
struct toml_member {
        char name[128];
        const char *value;
        size_t value_len;
};

/* Append @name to @b as a key: bare when it can be, else in quotes it needs no escape in, as
 * toml_parse_key() refuses escapes in a key: a basic string without '"' and '\', else a literal
 * one without '\''. A name the scanner read is one of these (toml.io "Keys", "String"). */
static void toml_key_out(FILE *b, const char *name)
{
        bool bare = name[0] != '\0';

        for (const char *p = name; *p && bare; p++)
                bare = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                       (*p >= '0' && *p <= '9') || *p == '_' || *p == '-';
        if (bare)
                fputs(name, b);
        else if (!strpbrk(name, "\"\\"))
                fprintf(b, "\"%s\"", name);
        else if (!strchr(name, '\''))
                fprintf(b, "'%s'", name);
        else
                toml_string(b, name);
}

/* Our table: command, args, env = { @s's values, then @kept's }, then @tail (raw key lines). */
static char *toml_table(const struct client_server *s, const struct toml_member *kept,
                        size_t n_kept, const char *tail)
{
        char *out = NULL;
        size_t len = 0;
        FILE *b = open_memstream(&out, &len);
        bool first = true;

        if (!b)
                abort();
        /* The name is [A-Za-z0-9_-]: a bare key. */
        fprintf(b, "[mcp_servers.%s]\ncommand = ", s->name);
        toml_string(b, s->command);
        fputs("\nargs = [", b);
        for (size_t i = 0; i < s->n_args; i++) {
                fputs(i ? ", " : "", b);
                toml_string(b, s->args[i]);
        }
        fputs("]\n", b);
        if (s->n_env || n_kept) {
                fputs("env = { ", b);
                for (size_t i = 0; i < s->n_env; i++) {
                        const char *eq = strchr(s->env[i], '=');

                        if (!eq)
                                continue;
                        /* names are [A-Z0-9_]: bare keys */
                        fprintf(b, "%s%.*s = ", first ? "" : ", ", (int)(eq - s->env[i]),
                                s->env[i]);
                        toml_string(b, eq + 1);
                        first = false;
                }
                for (size_t i = 0; i < n_kept; i++) {
                        fputs(first ? "" : ", ", b);
                        toml_key_out(b, kept[i].name);
                        fputs(" = ", b);
                        fwrite(kept[i].value, 1, kept[i].value_len, b);
                        first = false;
                }
                fputs(" }\n", b);
        }
        if (tail)
                fputs(tail, b);
        fclose(b);
        return out;
}

/* One key path ("a.b"."c") of at most 8 parts, unescaped; only what a header or a key needs. */
struct toml_key {
        char part[8][128];
        size_t n;
};

/* Parse a dotted key at *@pp, stopping at @stop ('=' for a key/value line, ']' for a header).
 * Refuses escapes in quoted keys, control characters there (but tab; TOML allows none) and
 * anything it does not understand. */
static int toml_parse_key(const char **pp, char stop, struct toml_key *k)
{
        const char *p = *pp;

        k->n = 0;
        for (;;) {
                size_t n = 0;
                char *out;

                while (*p == ' ' || *p == '\t')
                        p++;
                if (k->n == ELEMENTSOF(k->part))
                        return -1;
                out = k->part[k->n];
                if (*p == '"' || *p == '\'') {
                        char q = *p++;
                        while (*p && *p != q && *p != '\n') {
                                if (*p == '\\' || n + 1 >= sizeof(k->part[0]) ||
                                    ((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
                                        return -1;
                                out[n++] = *p++;
                        }
                        if (*p != q)
                                return -1;
                        p++;
                } else {
                        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                               (*p >= '0' && *p <= '9') || *p == '_' || *p == '-') {
                                if (n + 1 >= sizeof(k->part[0]))
                                        return -1;
                                out[n++] = *p++;
                        }
                        if (n == 0)
                                return -1;
                }
                out[n] = '\0';
                k->n++;
                while (*p == ' ' || *p == '\t')
                        p++;
                if (*p == '.') {
                        p++;
                        continue;
                }
                if (*p != stop)
                        return -1;
                *pp = p + 1;
                return 0;
        }
}

/* Skip one value's string at @p (a basic or literal string, single- or multi-line); return the
 * position after it, or NULL if it does not end. */
static const char *toml_skip_string(const char *p)
{
        char q = *p;
        bool multi = p[1] == q && p[2] == q;

        if (multi) {
                p += 3;
                for (; *p; p++) {
                        if (q == '"' && *p == '\\' && p[1]) {
                                p++;
                                continue;
                        }
                        if (p[0] == q && p[1] == q && p[2] == q) {
                                p += 3;
                                while (*p == q) /* up to two quotes may close the content */
                                        p++;
                                return p;
                        }
                }
                return NULL;
        }
        for (p++; *p && *p != '\n'; p++) {
                if (q == '"' && *p == '\\' && p[1] && p[1] != '\n') {
                        p++;
                        continue;
                }
                if (*p == q)
                        return p + 1;
        }
        return NULL;
}

/* Skip a value from @p to the end of its (possibly multi-line) extent, a comment after it
 * included; NULL if malformed. @ret_end: where the value itself ends (before the comment). */
static const char *toml_skip_value(const char *p, const char **ret_end)
{
        const char *hash = NULL;
        int depth = 0;

        for (; *p; p++) {
                if (*p == '"' || *p == '\'') {
                        p = toml_skip_string(p);
                        if (!p)
                                return NULL;
                        p--;
                } else if (*p == '#') {
                        if (depth == 0 && !hash)
                                hash = p;
                        while (*p && *p != '\n')
                                p++;
                        if (!*p)
                                break;
                        if (depth == 0) {
                                *ret_end = hash;
                                return p;
                        }
                } else if (*p == '[' || *p == '{') {
                        depth++;
                } else if (*p == ']' || *p == '}') {
                        if (--depth < 0)
                                return NULL;
                } else if (*p == '\n' && depth == 0) {
                        *ret_end = p;
                        return p;
                }
        }
        if (depth != 0)
                return NULL;
        *ret_end = hash ? hash : p;
        return p;
}

static bool key_is_ours(const struct toml_key *table, const struct toml_key *key, const char *name)
{
        const char *path[16];
        size_t n = 0;

        for (size_t i = 0; i < table->n; i++)
                path[n++] = table->part[i];
        for (size_t i = 0; key && i < key->n; i++)
                path[n++] = key->part[i];
        return n >= 2 && strcmp(path[0], "mcp_servers") == 0 && strcmp(path[1], name) == 0;
}

/* The key/value at @key in @table is mcp_servers itself (an inline table, or any value), which
 * no [mcp_servers.NAME] header may then extend. */
static bool key_is_servers(const struct toml_key *table, const struct toml_key *key)
{
        return table->n == 0 && key->n == 1 && strcmp(key->part[0], "mcp_servers") == 0;
}

/* Our tables in the old file ([mcp_servers.NAME], its [.env], any other sub-table) and the key
 * lines in them; byte offsets into the old text. */
enum toml_span_kind { TOML_SPAN_MAIN, TOML_SPAN_ENV, TOML_SPAN_OTHER };

struct toml_span {
        size_t start, end; /* [start, end): the header through its last key line's newline */
        enum toml_span_kind kind;
};

struct toml_line {
        size_t span;           /* its table, an index into toml_scan.spans */
        char k0[128], k1[128]; /* the key's first two parts ("env", "K" for env.K) */
        size_t n;              /* the key's number of parts */
        size_t ks, vs, ve, ce; /* key start, value start, value end, line end (at '\n') */
};

struct toml_scan {
        struct toml_span spans[16];
        size_t n_spans;
        struct toml_line lines[128];
        size_t n_lines;
        struct toml_member env[64]; /* the old env values we keep */
        size_t n_env;
};

/* Where the scanner is: the current table, whether it is ours, the line number. */
struct toml_state {
        struct toml_key table;
        bool in_ours, table_is_array;
        size_t line;
};

static int toml_scan_header(const char *text, const char *ls, const char **pp, const char *name,
                            struct toml_state *st, struct toml_scan *sc, struct sbx_error *err)
{
        const char *q = *pp;
        bool array = q[1] == '[';
        struct toml_span *sp = &sc->spans[sc->n_spans];

        st->in_ours = false;
        q += array ? 2 : 1;
        if (toml_parse_key(&q, ']', &st->table) < 0 || (array && *q++ != ']'))
                return sbx_fail(err, EINVAL, "line %zu: a table header this editor cannot read",
                                st->line);
        st->table_is_array = array;
        if (key_is_ours(&st->table, NULL, name)) {
                if (array)
                        return sbx_fail(err, EINVAL,
                                        "line %zu: [[mcp_servers.%s]] is an array of tables, not "
                                        "a server",
                                        st->line, name);
                if (sc->n_spans == ELEMENTSOF(sc->spans))
                        return sbx_fail(err, EINVAL, "too many [mcp_servers.%s] tables", name);
                sp->start = (size_t)(ls - text);
                sp->kind = st->table.n == 2 ? TOML_SPAN_MAIN
                           : st->table.n == 3 && strcmp(st->table.part[2], "env") == 0
                               ? TOML_SPAN_ENV
                               : TOML_SPAN_OTHER;
                st->in_ours = true;
        }
        while (*q == ' ' || *q == '\t')
                q++;
        if (*q == '#')
                while (*q && *q != '\n')
                        q++;
        if (*q && *q != '\n' && *q != '\r')
                return sbx_fail(err, EINVAL, "line %zu: text after a table header", st->line);
        if (st->in_ours)
                sc->spans[sc->n_spans++].end = (size_t)(q - text) + (*q == '\n');
        *pp = q;
        return 0;
}

static int toml_scan_keyline(const char *text, const char **pp, const char *name,
                             struct toml_state *st, struct toml_scan *sc, struct sbx_error *err)
{
        const char *p = *pp, *q = p, *vs, *ve = NULL;
        struct toml_key key;
        struct toml_line *l;

        if (toml_parse_key(&q, '=', &key) < 0)
                return sbx_fail(err, EINVAL, "line %zu: a key/value line this editor cannot read",
                                st->line);
        if (!st->table_is_array && key_is_servers(&st->table, &key))
                return sbx_fail(err, EINVAL,
                                "line %zu: mcp_servers is written as an inline table (mcp_servers "
                                "= { ... }), and TOML allows no [mcp_servers.%s] table beside it; "
                                "write each server as its own [mcp_servers.NAME] table, or add "
                                "the entry below inside the braces by hand",
                                st->line, name);
        if (!st->in_ours && !st->table_is_array && key_is_ours(&st->table, &key, name))
                return sbx_fail(err, EINVAL,
                                "line %zu: server '%s' is defined there with dotted keys or an "
                                "inline table, which this editor does not rewrite",
                                st->line, name);
        while (*q == ' ' || *q == '\t')
                q++;
        vs = q;
        q = toml_skip_value(q, &ve);
        if (!q)
                return sbx_fail(err, EINVAL,
                                "line %zu: a value that does not end (an unterminated string or "
                                "array)",
                                st->line);
        while (ve > vs && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
                ve--;
        if (st->in_ours) {
                if (sc->n_lines == ELEMENTSOF(sc->lines))
                        return sbx_fail(err, EINVAL, "line %zu: over 128 keys in [mcp_servers.%s]",
                                        st->line, name);
                l = &sc->lines[sc->n_lines++];
                *l = (struct toml_line){.span = sc->n_spans - 1, .n = key.n};
                snprintf(l->k0, sizeof(l->k0), "%s", key.part[0]);
                snprintf(l->k1, sizeof(l->k1), "%s", key.n > 1 ? key.part[1] : "");
                l->ks = (size_t)(p - text);
                l->vs = (size_t)(vs - text);
                l->ve = (size_t)(ve - text);
                l->ce = (size_t)(q - text);
                sc->spans[sc->n_spans - 1].end = (size_t)(q - text) + (*q == '\n');
        }
        for (const char *c = p; c < q; c++)
                st->line += *c == '\n';
        *pp = q;
        return 0;
}

/* Find our tables in @text and the key lines in them; refuse what this editor cannot follow. */
static int toml_scan_text(const char *text, const char *name, struct toml_scan *sc,
                          struct sbx_error *err)
{
        struct toml_state st = {.table.n = 0, .line = 1};
        const char *p = text;
        int r = 0;

        while (*p) {
                const char *ls = p;

                while (*p == ' ' || *p == '\t')
                        p++;
                if (*p == '\n' || *p == '\r' || *p == '#' || !*p) {
                        /* blank or comment: belongs to no table's keys */
                        while (*p && *p != '\n')
                                p++;
                } else if (*p == '[') {
                        r = toml_scan_header(text, ls, &p, name, &st, sc, err);
                } else {
                        r = toml_scan_keyline(text, &p, name, &st, sc, err);
                }
                if (r < 0)
                        return r;
                if (*p == '\n') {
                        p++;
                        st.line++;
                }
        }
        return 0;
}

/* Keep the env value @name = [@v, @v + @len) of an old table, which goes into our inline env
 * table as written: only when it reads back there as one member (toml_inline_members()), so
 * that the next run does not refuse the file this one writes. Not an empty value, a ',' or '}'
 * outside strings and brackets, an unbalanced bracket (no TOML value has one, but the scanner
 * does not check values), nor a comment (TOML allows one in a multi-line array, which is no
 * string as Codex's env needs; toml_inline_members() does not skip it). -1 for those, and over
 * 64 values. */
static int toml_add_member(struct toml_scan *sc, const char *name, const char *v, size_t len)
{
        const char *end = v + len;
        int depth = 0;

        for (const char *p = v; p < end; p++) {
                if (*p == '"' || *p == '\'') {
                        p = toml_skip_string(p);
                        if (!p || p > end)
                                return -1;
                        p--;
                } else if (*p == '[' || *p == '{') {
                        depth++;
                } else if ((*p == ']' || *p == '}') && depth > 0) {
                        depth--;
                } else if (*p == '#' || *p == ']' || *p == '}' || (*p == ',' && depth == 0)) {
                        return -1;
                }
        }
        if (len == 0 || depth != 0 || sc->n_env == ELEMENTSOF(sc->env))
                return -1;
        snprintf(sc->env[sc->n_env].name, sizeof(sc->env[0].name), "%s", name);
        sc->env[sc->n_env].value = v;
        sc->env[sc->n_env++].value_len = len;
        return 0;
}

/* The members of the inline table from @p ('{') to @end (after its '}'), into @sc->env. */
static int toml_inline_members(const char *p, const char *end, struct toml_scan *sc)
{
        struct toml_key k;

        for (p++;;) {
                const char *vs, *ve;
                int depth = 0;

                while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
                        p++;
                if (p >= end)
                        return -1;
                if (*p == '}')
                        return 0;
                if (toml_parse_key(&p, '=', &k) < 0 || k.n != 1)
                        return -1;
                while (*p == ' ' || *p == '\t')
                        p++;
                for (vs = p; p < end; p++) {
                        if (*p == '"' || *p == '\'') {
                                p = toml_skip_string(p);
                                if (!p || p > end)
                                        return -1;
                                p--;
                        } else if ((*p == ',' || *p == '}') && depth == 0) {
                                break;
                        } else if (*p == '[' || *p == '{') {
                                depth++;
                        } else if (*p == ']' || *p == '}') {
                                depth--;
                        }
                }
                if (p >= end)
                        return -1;
                for (ve = p; ve > vs && (ve[-1] == ' ' || ve[-1] == '\t');)
                        ve--;
                if (toml_add_member(sc, k.part[0], vs, (size_t)(ve - vs)) < 0)
                        return -1;
                if (*p == ',')
                        p++;
        }
}

/* @s sets the env value @name. */
static bool env_sets(const struct client_server *s, const char *name)
{
        size_t n = strlen(name);

        for (size_t i = 0; i < s->n_env; i++)
                if (strncmp(s->env[i], name, n) == 0 && s->env[i][n] == '=')
                        return true;
        return false;
}

/* From our old tables: the env values into @sc->env (those @s does not set) and the main table's
 * other key lines, raw, into @tail; @kb and @eb get the kept names. */
static int toml_collect(const char *text, struct toml_scan *sc, const struct client_server *s,
                        FILE *tail, FILE *kb, FILE *eb)
{
        size_t n = 0;

        for (size_t i = 0; i < sc->n_lines; i++) {
                const struct toml_line *l = &sc->lines[i];
                enum toml_span_kind kind = sc->spans[l->span].kind;
                int r = 0;

                if (kind == TOML_SPAN_ENV)
                        r = l->n == 1 ? toml_add_member(sc, l->k0, text + l->vs, l->ve - l->vs)
                                      : -1;
                else if (kind == TOML_SPAN_MAIN && strcmp(l->k0, "env") == 0)
                        r = l->n == 1 && text[l->vs] == '{'
                                ? toml_inline_members(text + l->vs, text + l->ve, sc)
                            : l->n == 2 ? toml_add_member(sc, l->k1, text + l->vs, l->ve - l->vs)
                                        : -1;
                else if (kind == TOML_SPAN_MAIN && strcmp(l->k0, "command") != 0 &&
                         strcmp(l->k0, "args") != 0) {
                        fwrite(text + l->ks, 1, l->ce - l->ks, tail);
                        fputc('\n', tail);
                        clients_list_add(kb, l->k0);
                }
                if (r < 0)
                        return -1;
        }
        for (size_t i = 0; i < sc->n_env; i++) {
                if (env_sets(s, sc->env[i].name))
                        continue;
                clients_list_add(eb, sc->env[i].name);
                sc->env[n++] = sc->env[i];
        }
        sc->n_env = n;
        return 0;
}

/* @text with @mine in place of our main and env tables (at the first), or appended. */
static char *toml_write(const char *text, const struct toml_scan *sc, const char *mine)
{
        char *out = NULL;
        size_t out_len = 0, at = 0, len = strlen(text);
        bool placed = false;
        FILE *b = open_memstream(&out, &out_len);

        if (!b)
                abort();
        for (size_t i = 0; i < sc->n_spans; i++) {
                if (sc->spans[i].kind == TOML_SPAN_OTHER)
                        continue;
                fwrite(text + at, 1, sc->spans[i].start - at, b);
                if (!placed)
                        fputs(mine, b);
                placed = true;
                at = sc->spans[i].end;
        }
        if (placed) {
                fputs(text + at, b);
        } else {
                fputs(text, b);
                if (len && text[len - 1] != '\n')
                        fputs("\n\n", b);
                else if (len && !(len >= 2 && text[len - 2] == '\n'))
                        fputc('\n', b);
                fputs(mine, b);
        }
        fclose(b);
        return out;
}

/* toml_collect() into three new strings: the main table's other key lines (*@ret_tail), and
 * the kept env and key names (*@ret_envs, *@ret_keys); the caller frees all three. */
static int toml_collect_text(const char *text, struct toml_scan *sc, const struct client_server *s,
                             char **ret_tail, char **ret_envs, char **ret_keys)
{
        size_t tail_len = 0, envs_len = 0, keys_len = 0;
        FILE *tb = open_memstream(ret_tail, &tail_len), *eb = open_memstream(ret_envs, &envs_len),
             *kb = open_memstream(ret_keys, &keys_len);
        int r;

        if (!tb || !eb || !kb)
                abort();
        r = toml_collect(text, sc, s, tb, kb, eb);
        fclose(tb);
        fclose(eb);
        fclose(kb);
        return r;
}

/* @text, which a merge or a command rewrite wrote, scans again (and with @collect, merges
 * again): a file inside the scanner's limits (16 tables, 128 key lines, 64 env values) can come
 * out beyond them once our table, command, args and env are added, and the next run would
 * refuse what this one wrote. */
static bool toml_reads_back(const char *text, const struct client_server *s, bool collect)
{
        _cleanup_free_ struct toml_scan *sc = xcalloc(1, sizeof(*sc));
        _cleanup_free_ char *tail = NULL, *envs = NULL, *keys = NULL;
        struct sbx_error err = {0};

        if (toml_scan_text(text, s->name, sc, &err) < 0)
                return false;
        return !collect || toml_collect_text(text, sc, s, &tail, &envs, &keys) == 0;
}

int clients_toml_merge(const char *old_text, const struct client_server *s, char **ret_text,
                       char **ret_kept, struct sbx_error *err)
{
        const char *text = old_text ? old_text : "";
        _cleanup_free_ struct toml_scan *sc = xcalloc(1, sizeof(*sc));
        _cleanup_free_ char *mine = NULL, *out = NULL, *tail = NULL;
        char *envs = NULL, *keys = NULL, *kept;
        int r;

        r = toml_scan_text(text, s->name, sc, err);
        if (r < 0)
                return r;
        r = toml_collect_text(text, sc, s, &tail, &envs, &keys);
        kept = clients_kept_text(envs, keys);
        if (r < 0) {
                free(kept);
                return sbx_fail(err, EINVAL,
                                "the env of [mcp_servers.%s] is written in a way this editor "
                                "cannot merge (over 64 values, or not NAME = value pairs)",
                                s->name);
        }
        mine = toml_table(s, sc->env, sc->n_env, tail);
        out = toml_write(text, sc, mine);
        if (strcmp(out, text) != 0 && !toml_reads_back(out, s, true)) {
                free(kept);
                return sbx_fail(err, EINVAL,
                                "the merged [mcp_servers.%s] would not read back: this editor "
                                "holds at most 16 of its tables, 128 keys in them and 64 env "
                                "values, and ours added would pass one of those; remove the "
                                "tables or keys you no longer need, or add the entry by hand",
                                s->name);
        }
        *ret_text = strcmp(out, text) == 0 ? NULL : TAKE_PTR(out);
        if (ret_kept)
                *ret_kept = kept;
        else
                free(kept);
        return 0;
}

/* --- read back, and the command rewritten in place (--wrap) ----------------------------- */

char *clients_toml_render(const struct client_server *s)
{
        return toml_table(s, NULL, 0, NULL);
}

/* Append code point @cp to @b as UTF-8; false for a surrogate or one beyond U+10FFFF. */
static bool utf8_out(FILE *b, unsigned long cp)
{
        if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
                return false;
        if (cp < 0x80) {
                fputc((int)cp, b);
        } else if (cp < 0x800) {
                fputc((int)(0xc0 | (cp >> 6)), b);
                fputc((int)(0x80 | (cp & 0x3f)), b);
        } else if (cp < 0x10000) {
                fputc((int)(0xe0 | (cp >> 12)), b);
                fputc((int)(0x80 | ((cp >> 6) & 0x3f)), b);
                fputc((int)(0x80 | (cp & 0x3f)), b);
        } else {
                fputc((int)(0xf0 | (cp >> 18)), b);
                fputc((int)(0x80 | ((cp >> 12) & 0x3f)), b);
                fputc((int)(0x80 | ((cp >> 6) & 0x3f)), b);
                fputc((int)(0x80 | (cp & 0x3f)), b);
        }
        return true;
}

/* One basic escape after the backslash at *@pp (toml.io "String"); false when unknown. */
static bool unescape_one(const char **pp, const char *end, FILE *b)
{
        static const char from[] = "btnfr\"\\", to[] = "\b\t\n\f\r\"\\";
        const char *p = *pp, *hit = *p ? strchr(from, *p) : NULL;
        size_t digits = *p == 'u' ? 4 : *p == 'U' ? 8 : 0;
        unsigned long cp = 0;

        if (hit) {
                fputc(to[hit - from], b);
                *pp = p + 1;
                return true;
        }
        if (!digits || end - p <= (ptrdiff_t)digits)
                return false;
        for (size_t i = 1; i <= digits; i++) {
                char c = p[i];
                int v = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
                if (v < 0)
                        return false;
                cp = cp * 16 + (unsigned long)v;
        }
        *pp = p + 1 + digits;
        return utf8_out(b, cp);
}

/* The single-line string at *@pp (before @end) into @ret; *@pp after its closing quote.
 * -1 when it is not one (a multi-line string, another type, a control character). */
static int read_string(const char **pp, const char *end, char **ret)
{
        const char *p = *pp;
        char q = '\0', *out = NULL;
        size_t len = 0;
        FILE *b;
        bool ok = false;

        if (p < end)
                q = *p;
        if ((q != '"' && q != '\'') || (end - p >= 3 && p[1] == q && p[2] == q))
                return -1;
        b = open_memstream(&out, &len);
        if (!b)
                abort();
        for (p++; p < end; p++) {
                if (*p == q) {
                        ok = true;
                        p++;
                        break;
                }
                if ((unsigned char)*p < 0x20 && *p != '\t')
                        break;
                if (q == '"' && *p == '\\') {
                        p++;
                        if (!unescape_one(&p, end, b))
                                break;
                        p--;
                        continue;
                }
                fputc(*p, b);
        }
        fclose(b);
        if (!ok || strlen(out) != len) { /* \u0000 inside */
                free(out);
                return -1;
        }
        *pp = p;
        *ret = out;
        return 0;
}

/* Skip blanks, newlines and comments inside an array. */
static const char *skip_ws(const char *p, const char *end)
{
        while (p < end) {
                if (*p == '#')
                        while (p < end && *p != '\n')
                                p++;
                else if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
                        p++;
                else
                        break;
        }
        return p;
}

static void strv_push(char ***v, size_t *n, char *s)
{
        *v = xrealloc(*v, (*n + 2) * sizeof(**v));
        (*v)[(*n)++] = s;
        (*v)[*n] = NULL;
}

/* The value [@p, @end) as one string, nothing after it. */
static int read_whole_string(const char *p, const char *end, char **ret)
{
        if (read_string(&p, end, ret) < 0)
                return -1;
        if (p != end) {
                free(*ret);
                *ret = NULL;
                return -1;
        }
        return 0;
}

/* The array of strings [@p, @end) appended to @v (@n of them). */
static int read_strings(const char *p, const char *end, char ***v, size_t *n)
{
        if (p >= end || *p++ != '[')
                return -1;
        for (;;) {
                char *s;

                p = skip_ws(p, end);
                if (p < end && *p == ']')
                        return skip_ws(p + 1, end) == end ? 0 : -1;
                if (read_string(&p, end, &s) < 0)
                        return -1;
                strv_push(v, n, s);
                p = skip_ws(p, end);
                if (p < end && *p == ',')
                        p++;
                else if (p >= end || *p != ']')
                        return -1;
        }
}

/* The [mcp_servers.X] names of @text, ", "-separated (for the error naming them). */
static char *server_names(const char *text)
{
        char *out = NULL;
        size_t len = 0;
        FILE *b = open_memstream(&out, &len);

        if (!b)
                abort();
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                struct toml_key k;
                const char *q = p;

                while (*q == ' ' || *q == '\t')
                        q++;
                if (*q != '[' || q[1] == '[')
                        continue;
                q++;
                if (toml_parse_key(&q, ']', &k) == 0 && k.n == 2 &&
                    strcmp(k.part[0], "mcp_servers") == 0)
                        clients_list_add(b, k.part[1]);
        }
        fclose(b);
        return out;
}

/* The key line @k0 (one part) of our main table, or NULL. */
static const struct toml_line *main_line(const struct toml_scan *sc, const char *k0)
{
        for (size_t i = 0; i < sc->n_lines; i++) {
                const struct toml_line *l = &sc->lines[i];
                if (sc->spans[l->span].kind == TOML_SPAN_MAIN && l->n == 1 &&
                    strcmp(l->k0, k0) == 0)
                        return l;
        }
        return NULL;
}

static bool has_main(const struct toml_scan *sc)
{
        for (size_t i = 0; i < sc->n_spans; i++)
                if (sc->spans[i].kind == TOML_SPAN_MAIN)
                        return true;
        return false;
}

/* The env values our tables hold (inline, [.env], dotted), each a string, as "K=V" into @e. */
static int read_env(const char *text, struct toml_scan *sc, const char *name,
                    struct client_entry *e, struct sbx_error *err)
{
        struct client_server none = {.name = name};
        char *t = NULL, *k = NULL, *v = NULL;
        size_t tl = 0, kl = 0, vl = 0;
        FILE *tb = open_memstream(&t, &tl), *kb = open_memstream(&k, &kl),
             *eb = open_memstream(&v, &vl);
        int r;

        if (!tb || !kb || !eb)
                abort();
        r = toml_collect(text, sc, &none, tb, kb, eb);
        fclose(tb);
        fclose(kb);
        fclose(eb);
        free(t);
        free(k);
        free(v);
        if (r < 0)
                return sbx_fail(err, EINVAL,
                                "its env is not NAME = \"value\" pairs (or over 64): fix the "
                                "entry first");
        for (size_t i = 0; i < sc->n_env; i++) {
                _cleanup_free_ char *val = NULL;
                const struct toml_member *m = &sc->env[i];

                if (read_whole_string(m->value, m->value + m->value_len, &val) < 0)
                        return sbx_fail(err, EINVAL, "env '%s' is not a single-line string",
                                        m->name);
                strv_push(&e->env, &e->n_env, xasprintf("%s=%s", m->name, val));
        }
        return 0;
}

/* command, args and env_vars of our main table into @e. */
static int read_command(const char *text, const struct toml_scan *sc, struct client_entry *e,
                        struct sbx_error *err)
{
        const struct toml_line *cmd = main_line(sc, "command"), *args = main_line(sc, "args"),
                               *vars = main_line(sc, "env_vars");

        if (main_line(sc, "url") || !cmd)
                return sbx_fail(err, EINVAL,
                                "it is not a stdio server (no command, or a url): only a server "
                                "the client starts can be wrapped");
        if (read_whole_string(text + cmd->vs, text + cmd->ve, &e->command) < 0)
                return sbx_fail(err, EINVAL,
                                "its command is not a single-line string: fix the entry first");
        if (args && read_strings(text + args->vs, text + args->ve, &e->args, &e->n_args) < 0)
                return sbx_fail(err, EINVAL,
                                "its args are not an array of single-line strings: fix the entry "
                                "first");
        if (vars && read_strings(text + vars->vs, text + vars->ve, &e->env, &e->n_env) < 0)
                return sbx_fail(err, EINVAL,
                                "its env_vars are not an array of names: fix the entry first");
        for (size_t i = 0; vars && i < e->n_env; i++)
                if (strchr(e->env[i], '='))
                        return sbx_fail(err, EINVAL, "env_vars '%s' is not a variable name",
                                        e->env[i]);
        return 0;
}

int clients_toml_read_entry(const char *text, const char *name, struct client_entry *ret,
                            struct sbx_error *err)
{
        _cleanup_free_ struct toml_scan *sc = xcalloc(1, sizeof(*sc));
        struct client_entry e = {0};
        int r;

        text = text ? text : "";
        r = toml_scan_text(text, name, sc, err);
        if (r < 0)
                return r;
        if (!has_main(sc)) {
                _cleanup_free_ char *names = server_names(text);
                return sbx_fail(err, ENOENT,
                                "no [mcp_servers.%s] table (it has: %s); add it to the client "
                                "first, or name one of these",
                                name, names[0] ? names : "none");
        }
        strv_push(&e.args, &e.n_args, NULL);
        strv_push(&e.env, &e.n_env, NULL);
        e.n_args = e.n_env = 0;
        /* env_vars names first, then the env values */
        r = read_command(text, sc, &e, err);
        if (r == 0)
                r = read_env(text, sc, name, &e, err);
        if (r < 0) {
                clients_entry_done(&e);
                return sbx_wrap(err, "server '%s'", name);
        }
        *ret = e;
        return 0;
}

/* @s's command and args as TOML values, into two new strings. */
static void command_values(const struct client_server *s, char **ret_cmd, char **ret_args)
{
        size_t n = 0;
        FILE *b = open_memstream(ret_cmd, &n);

        if (!b)
                abort();
        toml_string(b, s->command);
        fclose(b);
        b = open_memstream(ret_args, &n);
        if (!b)
                abort();
        fputc('[', b);
        for (size_t i = 0; i < s->n_args; i++) {
                fputs(i ? ", " : "", b);
                toml_string(b, s->args[i]);
        }
        fputc(']', b);
        fclose(b);
}

int clients_toml_set_command(const char *old_text, const struct client_server *s, char **ret_text,
                             struct sbx_error *err)
{
        _cleanup_free_ struct toml_scan *sc = xcalloc(1, sizeof(*sc));
        _cleanup_free_ char *cmd = NULL, *args = NULL;
        const char *text = old_text ? old_text : "";
        const struct toml_line *lc, *la;
        char *out = NULL;
        size_t len = 0;
        FILE *b;
        int r = toml_scan_text(text, s->name, sc, err);

        if (r < 0)
                return r;
        lc = main_line(sc, "command");
        la = main_line(sc, "args");
        if (!lc)
                return sbx_fail(err, ENOENT, "no [mcp_servers.%s] table with a command", s->name);
        command_values(s, &cmd, &args);
        b = open_memstream(&out, &len);
        if (!b)
                abort();
        /* the two values in file order; a missing args goes on a line after the command */
        const struct toml_line *first = la && la->vs < lc->vs ? la : lc;
        const struct toml_line *second = first == lc ? la : lc;
        fwrite(text, 1, first->vs, b);
        fputs(first == lc ? cmd : args, b);
        if (second) {
                fwrite(text + first->ve, 1, second->vs - first->ve, b);
                fputs(second == lc ? cmd : args, b);
                fputs(text + second->ve, b);
        } else {
                fwrite(text + lc->ve, 1, lc->ce - lc->ve, b);
                fprintf(b, "\nargs = %s", args);
                fputs(text + lc->ce, b);
        }
        fclose(b);
        if (strcmp(out, text) == 0) {
                free(out);
                out = NULL;
        } else if (!toml_reads_back(out, s, false)) {
                free(out);
                return sbx_fail(err, EINVAL,
                                "[mcp_servers.%s] with its args line added would not read back: "
                                "this editor holds at most 128 keys in a server's tables; remove "
                                "the keys you no longer need, or add args by hand",
                                s->name);
        }
        *ret_text = out;
        return 0;
}
