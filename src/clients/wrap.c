/* wrap.c - reading one server entry back from a client's file (wrap.h); codex's TOML in toml.c. */
#include "clients/wrap.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "clients/toml.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

static void strv_add(char ***v, size_t *n, char *s)
{
        *v = xrealloc(*v, (*n + 2) * sizeof(**v));
        (*v)[(*n)++] = s;
        (*v)[*n] = NULL;
}

static void strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

void clients_entry_done(struct client_entry *e)
{
        free(e->command);
        strv_free(e->args);
        strv_free(e->env);
        *e = (struct client_entry){0};
}

/* Strict JSON (comments and trailing commas refused), as clients.c reads it. */
static json_object *parse(const char *text, struct sbx_error *err)
{
        json_tokener *tok = json_tokener_new();
        json_object *o;

        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        o = json_tokener_parse_ex(tok, text, (int)strlen(text));
        if (!o || json_tokener_get_error(tok) != json_tokener_success) {
                json_object_put(o);
                o = NULL;
                sbx_fail(err, EINVAL, "not strict JSON (%s): fix the file first",
                         json_tokener_error_desc(json_tokener_get_error(tok)));
        }
        json_tokener_free(tok);
        return o;
}

/* The names of @servers, ", "-separated, for the error. */
static char *names_of(json_object *servers)
{
        char *s = xstrdup("");

        json_object_object_foreach(servers, k, v)
        {
                char *t = xasprintf("%s%s%s", s, *s ? ", " : "", k);
                (void)v;
                free(s);
                s = t;
        }
        return s;
}

/* The entry's fields into @e: command and args (or opencode's command array), env. */
static int fill(const struct client_info *c, json_object *entry, struct client_entry *e,
                struct sbx_error *err)
{
        bool oc = c->format == CLIENT_FORMAT_JSON_OPENCODE;
        json_object *cmd = NULL, *args = NULL, *env = NULL;
        size_t from = 0;

        if (json_object_object_get_ex(entry, "url", NULL) ||
            !json_object_object_get_ex(entry, "command", &cmd))
                return sbx_fail(err, EINVAL,
                                "it is not a stdio server (no \"command\", or a "
                                "\"url\"): only a server the client starts can be "
                                "wrapped");
        if (oc) {
                args = cmd;
                cmd = json_object_is_type(args, json_type_array) && json_object_array_length(args)
                          ? json_object_array_get_idx(args, 0)
                          : NULL;
                from = 1;
        } else {
                json_object_object_get_ex(entry, "args", &args);
        }
        if (!cmd || !json_object_is_type(cmd, json_type_string) ||
            (args && !json_object_is_type(args, json_type_array)))
                return sbx_fail(err, EINVAL,
                                "its command is not a string or its args not an "
                                "array of strings: fix the entry first");
        e->command = xstrdup(json_object_get_string(cmd));
        strv_add(&e->args, &e->n_args, NULL);
        e->n_args = 0;
        for (size_t i = from; args && i < json_object_array_length(args); i++) {
                json_object *a = json_object_array_get_idx(args, i);
                if (!json_object_is_type(a, json_type_string))
                        return sbx_fail(err, EINVAL, "argument %zu is not a string", i);
                strv_add(&e->args, &e->n_args, xstrdup(json_object_get_string(a)));
        }
        strv_add(&e->env, &e->n_env, NULL);
        e->n_env = 0;
        json_object_object_get_ex(entry, oc ? "environment" : "env", &env);
        if (env && !json_object_is_type(env, json_type_object))
                return sbx_fail(err, EINVAL, "its env is not an object of strings");
        if (env) {
                json_object_object_foreach(env, k, v)
                {
                        if (!json_object_is_type(v, json_type_string))
                                return sbx_fail(err, EINVAL, "env '%s' is not a string", k);
                        strv_add(&e->env, &e->n_env,
                                 xasprintf("%s=%s", k, json_object_get_string(v)));
                }
        }
        return 0;
}

int clients_read_entry(const struct client_info *c, const char *text, const char *name,
                       struct client_entry *ret, struct sbx_error *err)
{
        const char *key = c->format == CLIENT_FORMAT_JSON_VSCODE     ? "servers"
                          : c->format == CLIENT_FORMAT_JSON_OPENCODE ? "mcp"
                                                                     : "mcpServers";
        struct client_entry e = {0};
        json_object *root, *servers = NULL, *entry = NULL;
        int r;

        if (c->format == CLIENT_FORMAT_TOML_CODEX)
                return clients_toml_read_entry(text, name, ret, err);
        root = parse(text ? text : "", err);
        if (!root)
                return -EINVAL;
        if (!json_object_object_get_ex(root, key, &servers) ||
            !json_object_is_type(servers, json_type_object) ||
            !json_object_object_get_ex(servers, name, &entry) ||
            !json_object_is_type(entry, json_type_object)) {
                _cleanup_free_ char *names =
                    servers && json_object_is_type(servers, json_type_object) ? names_of(servers)
                                                                              : xstrdup("");
                json_object_put(root);
                return sbx_fail(err, ENOENT,
                                "no server '%s' under \"%s\" (it has: %s); add it to the client "
                                "first, or name one of these",
                                name, key, *names ? names : "none");
        }
        r = fill(c, entry, &e, err);
        json_object_put(root);
        if (r < 0) {
                clients_entry_done(&e);
                return sbx_wrap(err, "server '%s'", name);
        }
        *ret = e;
        return 0;
}

bool clients_entry_wrapped(const struct client_entry *e, const char *self, size_t *ret_cmd_at)
{
        const char *base = strrchr(e->command, '/');
        size_t i = 0;

        base = base ? base + 1 : e->command;
        if (strcmp(base, "npx") == 0) {
                while (i < e->n_args && e->args[i][0] == '-')
                        i++; /* -y */
                if (i >= e->n_args || strcmp(e->args[i], "vestibule-mcp") != 0)
                        return false;
                i++;
        } else if (strcmp(base, "vestibule-mcp") != 0 && !(self && strcmp(e->command, self) == 0)) {
                return false;
        }
        if (i + 1 >= e->n_args || strcmp(e->args[i], "mcp") != 0 ||
            strcmp(e->args[i + 1], "wrap") != 0)
                return false;
        if (ret_cmd_at) {
                size_t k = i + 2;
                while (k < e->n_args && strcmp(e->args[k], "--") != 0)
                        k++;
                *ret_cmd_at = k < e->n_args ? k + 1 : e->n_args;
        }
        return true;
}
