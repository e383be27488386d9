/* wrap_audit.c - tools/call requests through `mcp wrap` in the audit log. See wrap_audit.h. */
#include "cli/wrap_audit.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"

/* Requests waiting for their response; past this many the oldest is dropped (its start record
 * then shows "no end"). */
#define WRAP_AUDIT_PENDING_MAX 256

struct wrap_call {
        char *rpc_id; /* the request's JSON-RPC id as JSON text ("7", "\"a\"") */
        char audit_id[33];
};

struct wrap_audit {
        const char *name, *grade;
        char *what; /* "mcp wrap NAME" */
        struct audit_log *log;
        pthread_mutex_t mu;
        struct wrap_call calls[WRAP_AUDIT_PENDING_MAX];
        size_t n;
};

struct wrap_audit *wrap_audit_open(const char *name, const char *grade)
{
        struct wrap_audit *a = xcalloc(1, sizeof(*a));
        struct sbx_config *cfg = NULL;
        struct sbx_error err = {0};

        a->name = name;
        a->grade = grade;
        a->what = xasprintf("mcp wrap %s", name);
        pthread_mutex_init(&a->mu, NULL);
        if (config_load(&cfg, &err) < 0 || cfg->invalid || audit_open(cfg, &a->log, &err) < 0)
                fprintf(stderr,
                        "vestibule: mcp wrap: no audit log (%s): every tools/call is refused\n",
                        cfg && cfg->invalid ? cfg->invalid_msg : err.msg);
        config_free(cfg);
        return a;
}

static json_object *parse(const char *line, size_t len)
{
        json_tokener *tok = json_tokener_new();
        json_object *o = json_tokener_parse_ex(tok, line, (int)len);

        json_tokener_free(tok);
        return o;
}

/* Remember @rpc_id -> @audit_id (the oldest dropped when full). */
static void remember(struct wrap_audit *a, json_object *rpc_id, const char *audit_id)
{
        pthread_mutex_lock(&a->mu);
        if (a->n == WRAP_AUDIT_PENDING_MAX) {
                free(a->calls[0].rpc_id);
                memmove(a->calls, a->calls + 1, (a->n - 1) * sizeof(a->calls[0]));
                a->n--;
        }
        a->calls[a->n].rpc_id = xstrdup(json_object_to_json_string_ext(rpc_id, 0));
        memcpy(a->calls[a->n].audit_id, audit_id, 33);
        a->n++;
        pthread_mutex_unlock(&a->mu);
}

/* The JSON-RPC error line that answers the request @id in place of the server: its record
 * could not be written (@why). */
static char *refusal(const struct wrap_audit *a, json_object *id, const char *tool, const char *why)
{
        json_object *o = json_object_new_object(), *e = json_object_new_object();
        _cleanup_free_ char *msg = xasprintf(
            "vestibule: tools/call %s was not sent to %s: its audit record was %s (%s), and "
            "nothing runs unrecorded; free the disk or fix VESTIBULE_AUDIT_DIR (it must be "
            "writable), then call again",
            tool, a->name, why, a->log ? audit_path(a->log) : "no audit log");
        char *line;

        json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
        json_object_object_add(o, "id", json_object_get(id));
        json_object_object_add(e, "code", json_object_new_int(-32603));
        json_object_object_add(e, "message", json_object_new_string(msg));
        json_object_object_add(o, "error", e);
        line = xasprintf("%s\n", json_object_to_json_string_ext(
                                     o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return line;
}

void wrap_audit_request(struct wrap_audit *a, const char *line, size_t len, char **ret_refusal)
{
        json_object *o, *m, *p = NULL, *n, *args = NULL, *id = NULL;
        const char *tool = "?";
        char aid[33], note[256] = "";

        *ret_refusal = NULL;
        if (!memmem(line, len, "tools/call", 10))
                return;
        o = parse(line, len);
        if (!o || !json_object_object_get_ex(o, "method", &m) ||
            strcmp(json_object_get_string(m) ?: "", "tools/call") != 0) {
                json_object_put(o);
                return;
        }
        if (json_object_object_get_ex(o, "params", &p) &&
            json_object_object_get_ex(p, "name", &n) && json_object_is_type(n, json_type_string))
                tool = json_object_get_string(n);
        if (p)
                json_object_object_get_ex(p, "arguments", &args);
        (void)json_object_object_get_ex(o, "id", &id);
        fprintf(stderr, "vestibule: mcp wrap: %s tools/call %s\n", a->name, tool);
        if (!a->log) {
                snprintf(note, sizeof(note), "%s", "not recorded (the log could not be opened)");
        } else {
                _cleanup_free_ char *text = xasprintf(
                    "%s %s", tool,
                    args ? json_object_to_json_string_ext(args, JSON_C_TO_STRING_PLAIN) : "{}");
                audit_host_start(a->log, a->what, 0, "native", text, strlen(text), aid, note,
                                 sizeof(note));
        }
        if (note[0] && strcmp(note, AUDIT_NOTE_UNCONFIRMED) != 0) {
                /* fail closed: the call never reaches the server (tests/adversarial/server.md) */
                fprintf(stderr,
                        "vestibule: mcp wrap: the audit record of %s was %s: refused, not "
                        "relayed\n",
                        tool, note);
                *ret_refusal = id ? refusal(a, id, tool, note) : xstrdup("");
        } else {
                if (note[0])
                        fprintf(stderr,
                                "vestibule: mcp wrap: the audit record of %s is %s, relayed\n",
                                tool, note);
                if (id)
                        remember(a, id, aid);
        }
        json_object_put(o);
}

/* Take the audit id of the request @rpc_id answers, into @ret. */
static bool take(struct wrap_audit *a, json_object *rpc_id, char ret[33])
{
        const char *key = json_object_to_json_string_ext(rpc_id, 0);
        bool found = false;

        pthread_mutex_lock(&a->mu);
        for (size_t i = 0; i < a->n && !found; i++) {
                if (strcmp(a->calls[i].rpc_id, key) != 0)
                        continue;
                memcpy(ret, a->calls[i].audit_id, 33);
                free(a->calls[i].rpc_id);
                memmove(a->calls + i, a->calls + i + 1, (a->n - i - 1) * sizeof(a->calls[0]));
                a->n--;
                found = true;
        }
        pthread_mutex_unlock(&a->mu);
        return found;
}

void wrap_audit_response(struct wrap_audit *a, const char *line, size_t len)
{
        json_object *o, *id, *r, *e;
        struct audit_host_end end = {0};
        char aid[33], note[256] = "";
        bool any;

        pthread_mutex_lock(&a->mu);
        any = a->n > 0;
        pthread_mutex_unlock(&a->mu);
        if (!any || !a->log || !memmem(line, len, "\"id\"", 4))
                return;
        o = parse(line, len);
        if (o && json_object_object_get_ex(o, "id", &id) && take(a, id, aid)) {
                end.outcome = "ok";
                end.isolation = a->grade;
                if (json_object_object_get_ex(o, "error", &e))
                        end.outcome = "error";
                else if (json_object_object_get_ex(o, "result", &r) &&
                         json_object_object_get_ex(r, "isError", &e) && json_object_get_boolean(e))
                        end.outcome = "tool error";
                audit_host_end(a->log, aid, &end, note, sizeof(note));
                if (note[0])
                        fprintf(stderr, "vestibule: mcp wrap: an audit end record was %s\n", note);
        }
        json_object_put(o);
}
