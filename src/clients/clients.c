/* clients.c - MCP clients' configuration files: the table of clients, the JSON merge (json-c),
 * and the backup + atomic write (the TOML table editor for Codex is toml.c). See clients.h. */
#include "clients/clients.h"
#include "clients/toml.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/file.h>
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

void clients_list_add(FILE *b, const char *name)
{
        fprintf(b, "%s%s", ftell(b) ? ", " : "", name);
}

char *clients_kept_text(char *env, char *keys)
{
        char *r = NULL;

        if (env[0] || keys[0])
                r = xasprintf("%s%s%s%s%s", env[0] ? "env " : "", env,
                              env[0] && keys[0] ? "; " : "", keys[0] ? "settings " : "", keys);
        free(env);
        free(keys);
        return r;
}

/* The entry's key for its environment: opencode's "environment", everyone else's "env". */
static const char *json_env_key(enum client_format f)
{
        return f == CLIENT_FORMAT_JSON_OPENCODE ? "environment" : "env";
}

/* Refuse an old entry @have whose env is not an object: json_keep_old() would keep it as it
 * is and so drop the --env values and PATH. Return: 0 or -EINVAL naming the fix. */
static int json_env_usable(enum client_format f, const char *name, json_object *have,
                           struct sbx_error *err)
{
        const char *env_key = json_env_key(f);
        json_object *env;

        if (!json_object_object_get_ex(have, env_key, &env) ||
            json_object_is_type(env, json_type_object))
                return 0;
        return sbx_fail(err, EINVAL,
                        "the entry \"%s\" has an \"%s\" that is a JSON %s, not an object, so "
                        "the --env values and PATH cannot be added to it: make it an object "
                        "({\"NAME\": \"VALUE\", ...}) or delete it, then run install-client again",
                        name, env_key, json_type_to_name(json_object_get_type(env)));
}

/* Keep what the user set on the old entry @have in the new @entry: its keys other than the ones
 * we write (type, command, args; opencode's enabled), and the env values @entry does not set.
 * Return: what was kept (clients_kept_text()). */
static char *json_keep_old(enum client_format f, json_object *entry, json_object *have)
{
        const char *env_key = json_env_key(f);
        char *env_names = NULL, *key_names = NULL;
        size_t env_len = 0, key_len = 0;
        FILE *eb = open_memstream(&env_names, &env_len), *kb = open_memstream(&key_names, &key_len);

        if (!eb || !kb)
                abort();
        json_object_object_foreach(have, k, v)
        {
                json_object *env = NULL;

                if (strcmp(k, "type") == 0 || strcmp(k, "command") == 0 || strcmp(k, "args") == 0 ||
                    (f == CLIENT_FORMAT_JSON_OPENCODE && strcmp(k, "enabled") == 0))
                        continue;
                if (strcmp(k, env_key) != 0 || !json_object_is_type(v, json_type_object)) {
                        json_object_object_add(entry, k, json_object_get(v));
                        clients_list_add(kb, k);
                        continue;
                }
                if (!json_object_object_get_ex(entry, env_key, &env)) {
                        env = json_object_new_object();
                        json_object_object_add(entry, env_key, env);
                }
                json_object_object_foreach(v, ek, ev)
                {
                        if (json_object_object_get_ex(env, ek, NULL))
                                continue;
                        json_object_object_add(env, ek, json_object_get(ev));
                        clients_list_add(eb, ek);
                }
        }
        fclose(eb);
        fclose(kb);
        return clients_kept_text(env_names, key_names);
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

/* @digits (no sign, no leading zeros) is above @max (the same), both decimal. */
static bool digits_above(const char *digits, size_t n, const char *max)
{
        size_t m = strlen(max);

        return n > m || (n == m && strncmp(digits, max, n) > 0);
}

/* The 4 hex digits at @p as a number, or -1. */
static long hex4(const char *p)
{
        char buf[5] = {0};
        char *end;
        long v;

        memcpy(buf, p, 4);
        v = strtol(buf, &end, 16);
        return end == buf + 4 && buf[0] != '-' && buf[0] != '+' ? v : -1;
}

/* Refuse strict JSON @text that json-c would not write back as it reads: an integer outside
 * [INT64_MIN, UINT64_MAX] (json-c clamps it), a lone UTF-16 surrogate escape (json-c replaces
 * it) or an object key holding \u0000 (json-c keeps keys as C strings, so cuts it there). RFC 8259
 * sections 6 and 7. Return: 0 or -EINVAL naming the line. */
static int json_lossless(const char *text, struct sbx_error *err)
{
        size_t line = 1;
        bool in_str = false, nul = false;

        for (const char *p = text; *p; p++) {
                line += *p == '\n';
                if (in_str && *p == '\\' && p[1] == 'u') {
                        long u = hex4(p + 2), next = p[6] == '\\' && p[7] == 'u' ? hex4(p + 8) : -1;

                        nul |= u == 0;

                        if ((u >= 0xdc00 && u <= 0xdfff) ||
                            (u >= 0xd800 && u <= 0xdbff && !(next >= 0xdc00 && next <= 0xdfff)))
                                return sbx_fail(err, EINVAL,
                                                "line %zu: a lone UTF-16 surrogate (\\u%04lx), "
                                                "which rewriting the file would replace",
                                                line, u);
                        p += (u >= 0xd800 && u <= 0xdbff) ? 11 : 5;
                } else if (in_str && *p == '\\') {
                        p++;
                } else if (*p == '"') {
                        if (in_str && nul && p[1 + strspn(p + 1, " \t\r\n")] == ':')
                                return sbx_fail(err, EINVAL,
                                                "line %zu: a key holding \\u0000, which "
                                                "rewriting the file would cut short",
                                                line);
                        in_str = !in_str;
                        nul = false;
                } else if (!in_str && (*p == '-' || (*p >= '0' && *p <= '9'))) {
                        const char *d = p + (*p == '-'), *e = d;
                        size_t n;

                        while (*e >= '0' && *e <= '9')
                                e++;
                        n = (size_t)(e - d);
                        if (*e != '.' && *e != 'e' && *e != 'E' &&
                            digits_above(
                                d, n, *p == '-' ? "9223372036854775808" : "18446744073709551615"))
                                return sbx_fail(err, EINVAL,
                                                "line %zu: the integer %.*s%s is beyond 64 bits, "
                                                "and rewriting the file would change it",
                                                line, n > 40 ? 40 : (int)(e - p), p,
                                                n > 40 ? "..." : "");
                        while (*e == '.' || *e == 'e' || *e == 'E' || *e == '+' || *e == '-' ||
                               (*e >= '0' && *e <= '9'))
                                e++;
                        p = e - 1;
                }
        }
        return 0;
}

static bool blank(const char *text)
{
        return !text || text[strspn(text, " \t\r\n")] == '\0';
}

static int merge_json(const struct client_info *c, const char *old_text,
                      const struct client_server *s, char **ret_text, char **ret_kept,
                      struct sbx_error *err)
{
        _cleanup_json_ json_object *root = NULL, *check = NULL;
        json_object *servers = NULL, *have = NULL, *entry;
        const char *key = servers_key(c->format);
        _cleanup_free_ char *text = NULL, *kept = NULL;
        int r;

        if (blank(old_text)) {
                root = json_object_new_object();
                if (c->format == CLIENT_FORMAT_JSON_OPENCODE)
                        json_object_object_add(
                            root, "$schema",
                            json_object_new_string("https://opencode.ai/config.json"));
        } else {
                r = parse_strict(old_text, &root, err);
                if (r == 0)
                        r = json_lossless(old_text, err);
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
        if (json_object_object_get_ex(servers, s->name, &have) &&
            json_object_is_type(have, json_type_object)) {
                r = json_env_usable(c->format, s->name, have, err);
                if (r < 0)
                        return r;
        }
        entry = json_entry(c->format, s);
        if (have && json_object_is_type(have, json_type_object))
                kept = json_keep_old(c->format, entry, have);
        if (have && json_object_equal(have, entry)) {
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
        if (ret_kept)
                *ret_kept = TAKE_PTR(kept);
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
        if (json_object_is_type(have, json_type_object))
                free(json_keep_old(c->format, entry, have));
        return json_object_equal(have, entry);
}

int clients_merged_env(const struct client_info *c, const char *old_text,
                       const struct client_server *s, char ***ret_env, char **ret_other)
{
        _cleanup_json_ json_object *root = NULL, *entry = json_entry(c->format, s);
        json_object *servers, *have, *env = NULL;
        char **out, *other = NULL;
        size_t n = 0, len = 0;
        FILE *ob = open_memstream(&other, &len);

        if (!ob)
                abort();
        if (c->format != CLIENT_FORMAT_TOML_CODEX && !blank(old_text) &&
            parse_strict(old_text, &root, NULL) == 0 &&
            json_object_is_type(root, json_type_object) &&
            json_object_object_get_ex(root, servers_key(c->format), &servers) &&
            json_object_is_type(servers, json_type_object) &&
            json_object_object_get_ex(servers, s->name, &have) &&
            json_object_is_type(have, json_type_object))
                free(json_keep_old(c->format, entry, have));
        json_object_object_get_ex(entry, "env", &env);
        out = xcalloc((env ? json_object_object_length(env) : 0) + 1, sizeof(char *));
        if (env) {
                json_object_object_foreach(env, ek, ev) out[n++] =
                    xasprintf("%s=%s", ek, json_object_get_string(ev));
        }
        json_object_object_foreach(entry, k, v)
        {
                (void)v;
                if (strcmp(k, "type") != 0 && strcmp(k, "command") != 0 && strcmp(k, "args") != 0 &&
                    strcmp(k, "env") != 0)
                        clients_list_add(ob, k);
        }
        fclose(ob);
        if (!other[0]) {
                free(other);
                other = NULL;
        }
        *ret_env = out;
        *ret_other = other;
        return (int)n;
}

/* --- common ----------------------------------------------------------------------------- */

char *clients_render(const struct client_info *c, const struct client_server *s)
{
        _cleanup_json_ json_object *root = NULL;
        json_object *servers;

        if (c->format == CLIENT_FORMAT_TOML_CODEX)
                return clients_toml_render(s);
        root = json_object_new_object();
        servers = json_object_new_object();
        json_object_object_add(servers, s->name, json_entry(c->format, s));
        json_object_object_add(root, servers_key(c->format), servers);
        return json_text(root);
}

int clients_merge(const struct client_info *c, const char *old_text, const struct client_server *s,
                  char **ret_text, char **ret_kept, struct sbx_error *err)
{
        if (ret_kept)
                *ret_kept = NULL;
        if (!clients_name_valid(s->name))
                return sbx_fail(err, EINVAL,
                                "server name '%s' is not 1 to 64 letters, digits, '_' or '-'",
                                s->name);
        if (c->format == CLIENT_FORMAT_TOML_CODEX)
                return s->command_only ? clients_toml_set_command(old_text, s, ret_text, err)
                                       : clients_toml_merge(old_text, s, ret_text, ret_kept, err);
        return merge_json(c, old_text, s, ret_text, ret_kept, err);
}

/* Read the whole regular file @path; a missing file gives NULL text and 0. */
static int read_file(const char *path, char **ret, struct stat *ret_st, struct sbx_error *err)
{
        /* O_NONBLOCK: a FIFO must not hang the open; it is refused below */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
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
                return sbx_fail(err, EINVAL,
                                "'%s' is not a regular file (a FIFO, a device or a folder): give "
                                "the client's real config file with --config",
                                path);
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

/* Create the folders above @path (and @path itself when @self), mode 0700. */
static int mkdir_parents(const char *path, bool self, struct sbx_error *err)
{
        _cleanup_free_ char *dir = xasprintf("%s%s", path, self ? "/" : "");

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

/* Refuse to write at @path (a file, or when it does not exist yet the nearest folder above it
 * that does) when another uid than the effective one owns it: root's run on a user's HOME
 * (sudo -E) left the user's config and backup folder root's, and the user's next runs failed.
 * A sticky folder (/tmp) is shared: new files there are ours. stat(2), credentials(7).
 * @what names @path in the error. Return: 0 or -EPERM naming the fix. */
static int check_owner(const char *path, const char *what, struct sbx_error *err)
{
        _cleanup_free_ char *p = NULL, *named = NULL;
        struct stat st;

        if (!path)
                return 0; /* no file to write: nothing to check */
        p = xstrdup(path);
        while (stat(p, &st) < 0) {
                char *slash = strrchr(p, '/');

                if (errno != ENOENT || strcmp(p, ".") == 0)
                        return 0; /* the write itself says what is wrong */
                if (!slash) {
                        free(p);
                        p = xstrdup(".");
                } else {
                        slash[slash == p] = '\0';
                }
        }
        if (st.st_uid == geteuid() || (S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)))
                return 0;
        named = strcmp(p, path) == 0 ? xasprintf("%s '%s'", what, p)
                                     : xasprintf("'%s' (the folder above %s '%s')", p, what, path);
        return sbx_fail(err, EPERM,
                        "%s belongs to uid %ju, not to the uid running install-client (%ju), and "
                        "writing there would leave files that user cannot change: run it as the "
                        "user who owns '%s', without sudo (what an earlier sudo run left root's: "
                        "chown it back to its user)",
                        named, (uintmax_t)st.st_uid, (uintmax_t)geteuid(), p);
}

int clients_backup(const char *path, const char *backup_dir, char **ret_backup,
                   struct sbx_error *err)
{
        _cleanup_free_ char *old = NULL, *backup = NULL, *base = NULL;
        struct stat st;
        char stamp[32];
        struct tm tm;
        time_t now = time(NULL);
        int r;

        *ret_backup = NULL;
        r = check_owner(path, "the config", err);
        if (r == 0)
                r = read_file(path, &old, &st, err);
        if (r < 0 || !old)
                return r;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
        if (backup_dir) {
                const char *slash = strrchr(path, '/');

                r = check_owner(backup_dir, "the backup folder", err);
                if (r == 0)
                        r = mkdir_parents(backup_dir, true, err);
                if (r < 0)
                        return r;
                base = xasprintf("%s/%s", backup_dir, slash ? slash + 1 : path);
        } else {
                base = xstrdup(path);
        }
        backup = xasprintf("%s.vestibule-backup-%s", base, stamp);
        for (int i = 1; access(backup, F_OK) == 0; i++) {
                if (i == 100)
                        return sbx_fail(err, EEXIST, "'%s' exists, and 99 more backups like it",
                                        backup);
                free(backup);
                backup = xasprintf("%s.vestibule-backup-%s.%d", base, stamp, i);
        }
        r = write_new(backup, old, strlen(old), 0600, err);
        if (r < 0)
                return r;
        *ret_backup = TAKE_PTR(backup);
        return 0;
}

/* Follow @path's symlinks, a dangling last one included, to the file they name (at most 40,
 * as path_resolution(7)); @ret is that path, which may not exist yet. */
static int resolve_target(const char *path, char **ret, struct sbx_error *err)
{
        _cleanup_free_ char *cur = xstrdup(path);

        for (int i = 0; i < 40; i++) {
                char buf[PATH_MAX];
                const char *slash;
                struct stat st;
                ssize_t n;
                char *next;

                bool missing = lstat(cur, &st) < 0;

                if (missing && errno != ENOENT)
                        return sbx_fail(err, errno, "cannot stat '%s': %s", cur, strerror(errno));
                if (missing || !S_ISLNK(st.st_mode)) {
                        *ret = TAKE_PTR(cur);
                        return 0;
                }
                n = readlink(cur, buf, sizeof(buf) - 1);
                if (n < 0)
                        return sbx_fail(err, errno, "cannot read the symlink '%s': %s", cur,
                                        strerror(errno));
                buf[n] = '\0';
                slash = strrchr(cur, '/');
                next = buf[0] == '/' || !slash ? xstrdup(buf)
                                               : xasprintf("%.*s/%s", (int)(slash - cur), cur, buf);
                free(cur);
                cur = next;
        }
        return sbx_fail(err, ELOOP, "'%s': more than 40 symlinks", path);
}

/* An flock(2) on @target's folder, held while the caller's fd is open: concurrent runs edit
 * one after the other. The folder, not a lock file, so nothing is left behind. */
static int lock_folder(const char *target, int *ret_fd, struct sbx_error *err)
{
        const char *slash = strrchr(target, '/');
        _cleanup_free_ char *folder =
            slash ? xasprintf("%.*s", (int)(slash - target), target) : xstrdup(".");
        int fd = open(folder[0] ? folder : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return sbx_fail(err, errno, "cannot open the folder '%s': %s", folder,
                                strerror(errno));
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR) {
                        int e = errno;
                        close(fd);
                        return sbx_fail(err, e, "cannot lock the folder '%s': %s", folder,
                                        strerror(e));
                }
        *ret_fd = fd;
        return 0;
}

/* What rename() into place would break: more hard links, or a file the user made read-only. */
static int check_replaceable(const char *target, const struct stat *st, struct sbx_error *err)
{
        if (st->st_nlink > 1)
                return sbx_fail(err, EMLINK,
                                "'%s' has %ju hard links, which replacing it would split: add the "
                                "entry by hand, or make it one file first (cp FILE FILE.new && mv "
                                "FILE.new FILE)",
                                target, (uintmax_t)st->st_nlink);
        if (!(st->st_mode & S_IWUSR))
                return sbx_fail(err, EACCES,
                                "'%s' is read-only (mode %04o): install-client leaves it so; to "
                                "let it write, chmod u+w the file first",
                                target, (unsigned)(st->st_mode & 07777));
        return 0;
}

int clients_install(const struct client_info *c, const char *path, const struct client_server *s,
                    const char *backup_dir, char **ret_backup, char **ret_kept,
                    struct sbx_error *err)
{
        _cleanup_free_ char *target = NULL, *old = NULL, *text = NULL, *backup = NULL, *tmp = NULL;
        _cleanup_close_ int lock_fd = -1;
        struct stat st = {.st_mode = S_IFREG | 0600, .st_nlink = 1};
        int r;

        if (ret_backup)
                *ret_backup = NULL;
        /* A symlinked config (a dotfiles repository) is edited where it lives. */
        r = resolve_target(path, &target, err);
        if (r == 0)
                r = check_owner(target, "the config", err);
        if (r == 0)
                r = mkdir_parents(target, false, err);
        if (r == 0)
                r = lock_folder(target, &lock_fd, err);
        if (r == 0)
                r = read_file(target, &old, &st, err);
        if (r < 0)
                return r;
        r = clients_merge(c, old, s, &text, ret_kept, err);
        if (r < 0)
                return sbx_wrap(err, "cannot edit '%s'", target);
        if (!text)
                return 0;
        if (old) {
                r = check_replaceable(target, &st, err);
                if (r < 0)
                        return r;
                r = clients_backup(target, backup_dir, &backup, err);
                if (r < 0)
                        return sbx_wrap(err, "no backup, so nothing changed");
        }
        tmp = xasprintf("%s.vestibule-new-%ld", target, (long)getpid());
        unlink(tmp);
        r = write_new(tmp, text, strlen(text), st.st_mode & 07777, err);
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
