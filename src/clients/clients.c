/* clients.c - MCP clients' configuration files: the table of clients, the JSON merge (json-c),
 * the TOML table editor for Codex, and the backup + atomic write. See clients.h. */
#include "clients/clients.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

#define CLIENTS_FILE_MAX_BYTES ((size_t)16 * 1024 * 1024)

static const struct client_info clients[] = {
    {"claude-code", "Claude Code", ".claude.json", NULL, CLIENT_FORMAT_JSON_CLAUDE_CODE, false},
    {"claude-desktop", "Claude Desktop", NULL, "Claude/claude_desktop_config.json",
     CLIENT_FORMAT_JSON_MCPSERVERS, true},
    {"cursor", "Cursor", ".cursor/mcp.json", NULL, CLIENT_FORMAT_JSON_MCPSERVERS, true},
    {"vscode", "VS Code", NULL, "Code/User/mcp.json", CLIENT_FORMAT_JSON_VSCODE, true},
    {"codex", "Codex", ".codex/config.toml", NULL, CLIENT_FORMAT_TOML_CODEX, false},
    {"gemini", "Gemini CLI", ".gemini/settings.json", NULL, CLIENT_FORMAT_JSON_MCPSERVERS, false},
    {"opencode", "opencode", NULL, "opencode/opencode.json", CLIENT_FORMAT_JSON_OPENCODE, false},
};

static void json_putp(json_object **o)
{
        if (*o)
                json_object_put(*o);
}
#define _cleanup_json_ _cleanup_(json_putp)

const struct client_info *clients_find(const char *id)
{
        for (size_t i = 0; id && i < ELEMENTSOF(clients); i++)
                if (strcmp(clients[i].id, id) == 0)
                        return &clients[i];
        return NULL;
}

const char *clients_ids(void)
{
        return "claude-code, claude-desktop, cursor, vscode, codex, gemini, opencode";
}

bool clients_name_valid(const char *name)
{
        size_t n = name ? strlen(name) : 0;

        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++) {
                char ch = name[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
                        return false;
        }
        return true;
}

char *clients_default_path(const struct client_info *c, const char *home,
                           const char *xdg_config_home)
{
        if (c->home_path)
                return xasprintf("%s/%s", home, c->home_path);
        if (xdg_config_home && xdg_config_home[0] == '/')
                return xasprintf("%s/%s", xdg_config_home, c->xdg_path);
        return xasprintf("%s/.config/%s", home, c->xdg_path);
}

/* --- JSON ------------------------------------------------------------------------------ */

static const char *servers_key(enum client_format f)
{
        switch (f) {
        case CLIENT_FORMAT_JSON_VSCODE:
                return "servers";
        case CLIENT_FORMAT_JSON_OPENCODE:
                return "mcp";
        default:
                return "mcpServers";
        }
}

/* The env object: {"NAME": "VALUE", ...} from "NAME=VALUE" strings. */
static json_object *env_object(const struct client_server *s)
{
        json_object *env = json_object_new_object();

        for (size_t i = 0; i < s->n_env; i++) {
                const char *eq = strchr(s->env[i], '=');
                _cleanup_free_ char *k = NULL;

                if (!eq)
                        continue;
                k = xasprintf("%.*s", (int)(eq - s->env[i]), s->env[i]);
                json_object_object_add(env, k, json_object_new_string(eq + 1));
        }
        return env;
}

static json_object *json_entry(enum client_format f, const struct client_server *s)
{
        json_object *e = json_object_new_object(), *args = json_object_new_array();

        if (f == CLIENT_FORMAT_JSON_OPENCODE) {
                json_object_object_add(e, "type", json_object_new_string("local"));
                json_object_array_add(args, json_object_new_string(s->command));
                for (size_t i = 0; i < s->n_args; i++)
                        json_object_array_add(args, json_object_new_string(s->args[i]));
                json_object_object_add(e, "command", args);
                json_object_object_add(e, "enabled", json_object_new_boolean(1));
                if (s->n_env)
                        json_object_object_add(e, "environment", env_object(s));
                return e;
        }
        if (f == CLIENT_FORMAT_JSON_VSCODE || f == CLIENT_FORMAT_JSON_CLAUDE_CODE)
                json_object_object_add(e, "type", json_object_new_string("stdio"));
        json_object_object_add(e, "command", json_object_new_string(s->command));
        for (size_t i = 0; i < s->n_args; i++)
                json_object_array_add(args, json_object_new_string(s->args[i]));
        /* Claude Code writes args and env even when empty: match it, so an entry `claude mcp
         * add` made compares equal to ours. */
        if (s->n_args || f == CLIENT_FORMAT_JSON_CLAUDE_CODE)
                json_object_object_add(e, "args", args);
        else
                json_object_put(args);
        if (s->n_env || f == CLIENT_FORMAT_JSON_CLAUDE_CODE)
                json_object_object_add(e, "env", env_object(s));
        return e;
}

static char *json_text(json_object *o)
{
        const char *t = json_object_to_json_string_ext(
            o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);

        return xasprintf("%s\n", t);
}

/* Parse @text strictly into an object; -EINVAL with the position on anything else. */
static int parse_strict(const char *text, json_object **ret, struct sbx_error *err)
{
        json_tokener *tok = json_tokener_new();
        json_object *o;
        size_t len = strlen(text), end;
        enum json_tokener_error jerr;
        size_t line = 1;

        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        o = json_tokener_parse_ex(tok, text, (int)len);
        jerr = json_tokener_get_error(tok);
        end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (o && jerr == json_tokener_success) {
                while (end < len && strchr(" \t\r\n", text[end]))
                        end++;
                if (end == len) {
                        *ret = o;
                        return 0;
                }
                jerr = json_tokener_error_parse_unexpected;
        } else if (jerr == json_tokener_continue) {
                jerr = json_tokener_error_parse_eof;
        }
        json_object_put(o);
        for (size_t i = 0; i < end && i < len; i++)
                line += text[i] == '\n';
        return sbx_fail(err, EINVAL,
                        "it is not strict JSON (line %zu: %s; comments and trailing commas are "
                        "not JSON either, and rewriting the file would drop them)",
                        line, json_tokener_error_desc(jerr));
}

static bool blank(const char *text)
{
        return !text || text[strspn(text, " \t\r\n")] == '\0';
}

static int merge_json(const struct client_info *c, const char *old_text,
                      const struct client_server *s, char **ret_text, struct sbx_error *err)
{
        _cleanup_json_ json_object *root = NULL, *check = NULL;
        json_object *servers = NULL, *have = NULL, *entry;
        const char *key = servers_key(c->format);
        _cleanup_free_ char *text = NULL;
        int r;

        if (blank(old_text)) {
                root = json_object_new_object();
                if (c->format == CLIENT_FORMAT_JSON_OPENCODE)
                        json_object_object_add(
                            root, "$schema",
                            json_object_new_string("https://opencode.ai/config.json"));
        } else {
                r = parse_strict(old_text, &root, err);
                if (r < 0)
                        return r;
                if (!json_object_is_type(root, json_type_object))
                        return sbx_fail(err, EINVAL, "its top level is a JSON %s, not an object",
                                        json_type_to_name(json_object_get_type(root)));
        }
        if (json_object_object_get_ex(root, key, &servers)) {
                if (!json_object_is_type(servers, json_type_object))
                        return sbx_fail(err, EINVAL, "its \"%s\" is a JSON %s, not an object", key,
                                        json_type_to_name(json_object_get_type(servers)));
        } else {
                servers = json_object_new_object();
                json_object_object_add(root, key, servers);
        }
        entry = json_entry(c->format, s);
        if (json_object_object_get_ex(servers, s->name, &have) && json_object_equal(have, entry)) {
                json_object_put(entry);
                *ret_text = NULL;
                return 0;
        }
        /* Replacing keeps the key's place among the others (json-c keeps insertion order). */
        json_object_object_add(servers, s->name, entry);
        text = json_text(root);
        /* What we write must read back as exactly what we meant. */
        r = parse_strict(text, &check, err);
        if (r < 0 || !json_object_equal(check, root))
                return sbx_fail(err, EIO,
                                "the merged JSON does not read back the same (a bug): "
                                "nothing written");
        *ret_text = TAKE_PTR(text);
        return 0;
}

bool clients_entry_equal_json(const struct client_info *c, const char *text,
                              const struct client_server *s)
{
        _cleanup_json_ json_object *root = NULL, *entry = NULL;
        json_object *servers, *have;

        if (c->format == CLIENT_FORMAT_TOML_CODEX || blank(text) ||
            parse_strict(text, &root, NULL) < 0 || !json_object_is_type(root, json_type_object))
                return false;
        if (!json_object_object_get_ex(root, servers_key(c->format), &servers) ||
            !json_object_is_type(servers, json_type_object) ||
            !json_object_object_get_ex(servers, s->name, &have))
                return false;
        entry = json_entry(c->format, s);
        return json_object_equal(have, entry);
}

/* --- TOML (Codex) ------------------------------------------------------------------------- */

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

static char *toml_table(const struct client_server *s)
{
        char *out = NULL;
        size_t len = 0;
        FILE *b = open_memstream(&out, &len);

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
        if (s->n_env) {
                fputs("env = { ", b);
                for (size_t i = 0; i < s->n_env; i++) {
                        const char *eq = strchr(s->env[i], '=');

                        if (!eq)
                                continue;
                        /* names are [A-Z0-9_]: bare keys */
                        fprintf(b, "%s%.*s = ", i ? ", " : "", (int)(eq - s->env[i]), s->env[i]);
                        toml_string(b, eq + 1);
                }
                fputs(" }\n", b);
        }
        fclose(b);
        return out;
}

/* One key path ("a.b"."c") of at most 8 parts, unescaped; only what a header or a key needs. */
struct toml_key {
        char part[8][128];
        size_t n;
};

/* Parse a dotted key at *@pp, stopping at @stop ('=' for a key/value line, ']' for a header).
 * Refuses escapes in quoted keys and anything it does not understand. */
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
                                if (*p == '\\' || n + 1 >= sizeof(k->part[0]))
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

/* Skip a value from @p to the end of its (possibly multi-line) extent; NULL if malformed. */
static const char *toml_skip_value(const char *p)
{
        int depth = 0;

        for (; *p; p++) {
                if (*p == '"' || *p == '\'') {
                        p = toml_skip_string(p);
                        if (!p)
                                return NULL;
                        p--;
                } else if (*p == '#') {
                        while (*p && *p != '\n')
                                p++;
                        if (!*p)
                                break;
                        if (depth == 0)
                                return p;
                } else if (*p == '[' || *p == '{') {
                        depth++;
                } else if (*p == ']' || *p == '}') {
                        if (--depth < 0)
                                return NULL;
                } else if (*p == '\n' && depth == 0) {
                        return p;
                }
        }
        return depth == 0 ? p : NULL;
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

/* The byte ranges of our tables: [start, end) each, end after the table's last key line. */
struct toml_span {
        size_t start, end;
};

static int merge_toml(const char *old_text, const struct client_server *s, char **ret_text,
                      struct sbx_error *err)
{
        const char *text = old_text ? old_text : "";
        const char *p = text;
        struct toml_key table = {.n = 0}, key;
        struct toml_span spans[16];
        size_t n_spans = 0, line = 1;
        bool in_ours = false, table_is_array = false;
        _cleanup_free_ char *mine = toml_table(s), *out = NULL;
        size_t out_len = 0;
        FILE *b;

        while (*p) {
                const char *ls = p, *q;

                while (*p == ' ' || *p == '\t')
                        p++;
                if (*p == '\n' || *p == '\r' || *p == '#' || !*p) {
                        /* blank or comment: belongs to no table's keys */
                        while (*p && *p != '\n')
                                p++;
                } else if (*p == '[') {
                        bool array = p[1] == '[';

                        if (in_ours)
                                in_ours = false;
                        q = p + (array ? 2 : 1);
                        if (toml_parse_key(&q, ']', &table) < 0 || (array && *q++ != ']'))
                                return sbx_fail(err, EINVAL,
                                                "line %zu: a table header this editor cannot "
                                                "read",
                                                line);
                        table_is_array = array;
                        if (key_is_ours(&table, NULL, s->name)) {
                                if (array)
                                        return sbx_fail(err, EINVAL,
                                                        "line %zu: [[mcp_servers.%s]] is an "
                                                        "array of tables, not a server",
                                                        line, s->name);
                                if (n_spans == ELEMENTSOF(spans))
                                        return sbx_fail(err, EINVAL,
                                                        "too many [mcp_servers.%s] "
                                                        "tables",
                                                        s->name);
                                spans[n_spans].start = (size_t)(ls - text);
                                in_ours = true;
                        }
                        while (*q == ' ' || *q == '\t')
                                q++;
                        if (*q == '#')
                                while (*q && *q != '\n')
                                        q++;
                        if (*q && *q != '\n' && *q != '\r')
                                return sbx_fail(err, EINVAL, "line %zu: text after a table header",
                                                line);
                        p = q;
                        if (in_ours) {
                                spans[n_spans].end = (size_t)(p - text) + (*p == '\n');
                                n_spans++;
                        }
                } else {
                        q = p;
                        if (toml_parse_key(&q, '=', &key) < 0)
                                return sbx_fail(err, EINVAL,
                                                "line %zu: a key/value line this editor cannot "
                                                "read",
                                                line);
                        if (!table_is_array && key_is_servers(&table, &key))
                                return sbx_fail(err, EINVAL,
                                                "line %zu: mcp_servers is written as an inline "
                                                "table (mcp_servers = { ... }), and TOML allows "
                                                "no [mcp_servers.%s] table beside it; write each "
                                                "server as its own [mcp_servers.NAME] table, or "
                                                "add the entry below inside the braces by hand",
                                                line, s->name);
                        if (!in_ours && !table_is_array && key_is_ours(&table, &key, s->name))
                                return sbx_fail(err, EINVAL,
                                                "line %zu: server '%s' is defined there with "
                                                "dotted keys or an inline table, which this "
                                                "editor does not rewrite",
                                                line, s->name);
                        q = toml_skip_value(q);
                        if (!q)
                                return sbx_fail(err, EINVAL,
                                                "line %zu: a value that does not end (an "
                                                "unterminated string or array)",
                                                line);
                        for (const char *c = p; c < q; c++)
                                line += *c == '\n';
                        p = q;
                        if (in_ours)
                                spans[n_spans - 1].end = (size_t)(p - text) + (*p == '\n');
                }
                if (*p == '\n') {
                        p++;
                        line++;
                }
        }

        b = open_memstream(&out, &out_len);
        if (!b)
                abort();
        if (n_spans == 0) {
                size_t len = strlen(text);

                fputs(text, b);
                if (len && text[len - 1] != '\n')
                        fputs("\n\n", b);
                else if (len && !(len >= 2 && text[len - 2] == '\n'))
                        fputc('\n', b);
                fputs(mine, b);
        } else {
                size_t at = 0;

                for (size_t i = 0; i < n_spans; i++) {
                        fwrite(text + at, 1, spans[i].start - at, b);
                        if (i == 0)
                                fputs(mine, b);
                        at = spans[i].end;
                }
                fputs(text + at, b);
        }
        fclose(b);
        if (strcmp(out, text) == 0) {
                *ret_text = NULL;
                return 0;
        }
        *ret_text = TAKE_PTR(out);
        return 0;
}

/* --- common ----------------------------------------------------------------------------- */

char *clients_render(const struct client_info *c, const struct client_server *s)
{
        _cleanup_json_ json_object *root = NULL;
        json_object *servers;

        if (c->format == CLIENT_FORMAT_TOML_CODEX)
                return toml_table(s);
        root = json_object_new_object();
        servers = json_object_new_object();
        json_object_object_add(servers, s->name, json_entry(c->format, s));
        json_object_object_add(root, servers_key(c->format), servers);
        return json_text(root);
}

int clients_merge(const struct client_info *c, const char *old_text, const struct client_server *s,
                  char **ret_text, struct sbx_error *err)
{
        if (!clients_name_valid(s->name))
                return sbx_fail(err, EINVAL,
                                "server name '%s' is not 1 to 64 letters, digits, '_' or '-'",
                                s->name);
        if (c->format == CLIENT_FORMAT_TOML_CODEX)
                return merge_toml(old_text, s, ret_text, err);
        return merge_json(c, old_text, s, ret_text, err);
}

/* Read the whole regular file @path; a missing file gives NULL text and 0. */
static int read_file(const char *path, char **ret, struct stat *ret_st, struct sbx_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;

        *ret = NULL;
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                return sbx_fail(err, errno, "cannot open '%s': %s", path, strerror(errno));
        }
        if (fstat(fd, ret_st) < 0)
                return sbx_fail(err, errno, "cannot stat '%s': %s", path, strerror(errno));
        if (!S_ISREG(ret_st->st_mode))
                return sbx_fail(err, EINVAL, "'%s' is not a regular file", path);
        if ((size_t)ret_st->st_size > CLIENTS_FILE_MAX_BYTES)
                return sbx_fail(err, EFBIG, "'%s' is larger than 16 MiB: not a client config",
                                path);
        buf = xmalloc((size_t)ret_st->st_size + 1);
        while (len < (size_t)ret_st->st_size) {
                ssize_t n = read(fd, buf + len, (size_t)ret_st->st_size - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return sbx_fail(err, errno, "cannot read '%s': %s", path, strerror(errno));
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        if (strlen(buf) != len)
                return sbx_fail(err, EINVAL, "'%s' holds a NUL byte: not a text file", path);
        *ret = TAKE_PTR(buf);
        return 0;
}

/* Write @len bytes to a new file @path (O_EXCL) with @mode, then fsync it. */
static int write_new(const char *path, const char *data, size_t len, mode_t mode,
                     struct sbx_error *err)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        size_t done = 0;

        if (fd < 0)
                return sbx_fail(err, errno, "cannot create '%s': %s", path, strerror(errno));
        /* umask may have narrowed it; keep exactly the old file's permission bits */
        if (fchmod(fd, mode) < 0)
                return sbx_fail(err, errno, "cannot chmod '%s': %s", path, strerror(errno));
        while (done < len) {
                ssize_t n = write(fd, data + done, len - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return sbx_fail(err, errno, "cannot write '%s': %s", path, strerror(errno));
                done += (size_t)n;
        }
        if (fsync(fd) < 0)
                return sbx_fail(err, errno, "cannot write '%s': %s", path, strerror(errno));
        return 0;
}

static int mkdir_parents(const char *path, struct sbx_error *err)
{
        _cleanup_free_ char *dir = xstrdup(path);

        for (char *s = dir + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                        return sbx_fail(err, errno, "cannot create the folder '%s': %s", dir,
                                        strerror(errno));
                *s = '/';
        }
        return 0;
}

int clients_backup(const char *path, char **ret_backup, struct sbx_error *err)
{
        _cleanup_free_ char *old = NULL, *backup = NULL;
        struct stat st;
        char stamp[32];
        struct tm tm;
        time_t now = time(NULL);
        int r;

        *ret_backup = NULL;
        r = read_file(path, &old, &st, err);
        if (r < 0 || !old)
                return r;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
        backup = xasprintf("%s.vestibule-backup-%s", path, stamp);
        for (int i = 1; access(backup, F_OK) == 0; i++) {
                if (i == 100)
                        return sbx_fail(err, EEXIST, "'%s' exists, and 99 more backups like it",
                                        backup);
                free(backup);
                backup = xasprintf("%s.vestibule-backup-%s.%d", path, stamp, i);
        }
        r = write_new(backup, old, strlen(old), 0600, err);
        if (r < 0)
                return r;
        *ret_backup = TAKE_PTR(backup);
        return 0;
}

int clients_install(const struct client_info *c, const char *path, const struct client_server *s,
                    char **ret_backup, struct sbx_error *err)
{
        _cleanup_free_ char *target = NULL, *old = NULL, *text = NULL, *backup = NULL, *tmp = NULL;
        struct stat st = {.st_mode = S_IFREG | 0600};
        mode_t mode;
        int r;

        if (ret_backup)
                *ret_backup = NULL;
        /* A symlinked config (a dotfiles repository) is edited where it lives. */
        target = realpath(path, NULL);
        if (!target) {
                if (errno != ENOENT)
                        return sbx_fail(err, errno, "cannot resolve '%s': %s", path,
                                        strerror(errno));
                target = xstrdup(path);
        }
        r = read_file(target, &old, &st, err);
        if (r < 0)
                return r;
        r = clients_merge(c, old, s, &text, err);
        if (r < 0)
                return sbx_wrap(err, "cannot edit '%s'", target);
        if (!text)
                return 0;
        mode = st.st_mode & 07777;
        r = mkdir_parents(target, err);
        if (r < 0)
                return r;
        if (old) {
                r = clients_backup(target, &backup, err);
                if (r < 0)
                        return sbx_wrap(err, "no backup, so nothing changed");
        }
        tmp = xasprintf("%s.vestibule-new-%ld", target, (long)getpid());
        unlink(tmp);
        r = write_new(tmp, text, strlen(text), mode, err);
        if (r == 0 && rename(tmp, target) < 0)
                r = sbx_fail(err, errno, "cannot rename '%s' to '%s': %s", tmp, target,
                             strerror(errno));
        if (r < 0) {
                unlink(tmp);
                return r;
        }
        if (ret_backup)
                *ret_backup = TAKE_PTR(backup);
        return 1;
}
