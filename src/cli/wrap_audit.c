/* wrap_audit.c - tools/call requests through `mcp wrap` in the audit log. See wrap_audit.h. */
#include "cli/wrap_audit.h"

#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/jsontext.h"
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

/* How deep a message may nest. json-c's default is 32, and a tools/call's arguments (which the
 * model chooses) may nest deeper; a message past this is refused, never relayed unread. */
#define WRAP_JSON_DEPTH 512

/* @p (@len bytes) holds a CR other than one just before the line's final LF (or its end):
 * JSON takes it as a blank between tokens, Python's text reader (universal newlines, as the MCP
 * Python SDK reads stdin) as the end of a line. */
static bool bare_cr(const char *p, size_t len)
{
        size_t n = len;

        if (n && p[n - 1] == '\n')
                n--;
        if (n && p[n - 1] == '\r')
                n--;
        return memchr(p, '\r', n) != NULL;
}

/* A key of the object @e that is one of @names ignoring case but not exactly: Go's
 * encoding/json matches field names that way, so "Method" would be the method there. */
static const char *folded_key(json_object *e, const char *const *names)
{
        if (!json_object_is_type(e, json_type_object))
                return NULL;
        json_object_object_foreach(e, key, val)
        {
                (void)val;
                for (size_t i = 0; names[i]; i++)
                        if (strcasecmp(key, names[i]) == 0 && strcmp(key, names[i]) != 0)
                                return key;
        }
        return NULL;
}

json_object *wrap_json_read(const char *line, size_t len, bool strict, const char **ret_why)
{
        json_tokener *tok = json_tokener_new_ex(WRAP_JSON_DEPTH);
        json_object *o = NULL;
        const char *why = NULL;

        if (!tok)
                abort();
        if (strict)
                json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        if (len > INT_MAX - 1) {
                why = "it is over 2 GiB";
        } else if (memchr(line, '\0', len)) {
                why = "it holds a NUL byte";
        } else {
                _cleanup_free_ char *z = xstrndup(line, len);

                /* the length with its NUL: the end of the input, so that a bare number ends;
                 * strict mode also fails on anything but blanks after the value */
                o = json_tokener_parse_ex(tok, z, (int)len + 1);
                if (!o && json_tokener_get_error(tok) == json_tokener_error_depth)
                        why = "it nests deeper than 512";
                else if (!o && json_tokener_get_error(tok) != json_tokener_success)
                        why = strict ? "it is not standard JSON, or holds more than one value"
                                     : "it is not JSON";
        }
        json_tokener_free(tok);
        if (!why && strict && bare_cr(line, len))
                why = "it holds a carriage return inside the line, where a Python server's reader "
                      "splits it into lines";
        if (!why && strict && sbx_json_has_nul_escape(line, len))
                why = "it holds a \\u0000 escape, which the wrap's JSON reader takes apart from "
                      "the server's";
        if (ret_why)
                *ret_why = why;
        if (why && !ret_why) {
                json_object_put(o);
                return NULL;
        }
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

/* A JSON-RPC error response to the request @id (NULL: null), with @code and @msg. */
static json_object *error_response(json_object *id, int code, const char *msg)
{
        json_object *o = json_object_new_object(), *e = json_object_new_object();

        json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
        json_object_object_add(o, "id", json_object_get(id));
        json_object_object_add(e, "code", json_object_new_int(code));
        json_object_object_add(e, "message", json_object_new_string(msg));
        json_object_object_add(o, "error", e);
        return o;
}

/* @o as one line, newline-ended; takes @o. "" for NULL or an empty array (nothing to answer). */
static char *line_of(json_object *o)
{
        char *line;

        if (!o || (json_object_is_type(o, json_type_array) && json_object_array_length(o) == 0)) {
                json_object_put(o);
                return xstrdup("");
        }
        line = xasprintf("%s\n", json_object_to_json_string_ext(
                                     o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return line;
}

/* The message of a tools/call not sent: its audit record was @why. */
static char *unrecorded_msg(const struct wrap_audit *a, const char *tool, const char *why)
{
        return xasprintf("vestibule: tools/call %s was not sent to %s: its audit record was %s "
                         "(%s), and nothing runs unrecorded; free the disk or fix "
                         "VESTIBULE_AUDIT_DIR (it must be writable), then call again",
                         tool, a->name, why, a->log ? audit_path(a->log) : "no audit log");
}

/* The request @e (an element of a message) has an id to answer: the id, else NULL. */
static json_object *request_id(json_object *e)
{
        json_object *id = NULL, *m;

        if (!json_object_object_get_ex(e, "method", &m) || !json_object_object_get_ex(e, "id", &id))
                return NULL;
        return id;
}

/* @e is a tools/call request (an object whose method is the string "tools/call"). */
static bool is_call(json_object *e)
{
        json_object *m;

        return json_object_object_get_ex(e, "method", &m) &&
               json_object_is_type(m, json_type_string) &&
               strcmp(json_object_get_string(m), "tools/call") == 0;
}

/* The tools/call @e: its stderr line and start record (into @aid). Return true when it may be
 * relayed (recorded, or queued unconfirmed); false with @note and *@ret_tool when not. */
static bool record_call(struct wrap_audit *a, json_object *e, char aid[33], char *note,
                        size_t note_size, const char **ret_tool)
{
        json_object *p = NULL, *n, *args = NULL;
        const char *tool = "?";

        note[0] = '\0';
        if (json_object_object_get_ex(e, "params", &p) &&
            json_object_object_get_ex(p, "name", &n) && json_object_is_type(n, json_type_string))
                tool = json_object_get_string(n);
        if (p)
                json_object_object_get_ex(p, "arguments", &args);
        *ret_tool = tool;
        fprintf(stderr, "vestibule: mcp wrap: %s tools/call %s\n", a->name, tool);
        if (!a->log) {
                snprintf(note, note_size, "%s", "not recorded (the log could not be opened)");
        } else {
                _cleanup_free_ char *text = xasprintf(
                    "%s %s", tool,
                    args ? json_object_to_json_string_ext(args, JSON_C_TO_STRING_PLAIN) : "{}");
                audit_host_start(a->log, a->what, 0, "native", text, strlen(text), aid, note,
                                 note_size);
        }
        if (note[0] && strcmp(note, AUDIT_NOTE_UNCONFIRMED) != 0) {
                /* fail closed: the call never reaches the server (tests/adversarial/server.md) */
                fprintf(stderr,
                        "vestibule: mcp wrap: the audit record of %s was %s: refused, not "
                        "relayed\n",
                        tool, note);
                return false;
        }
        if (note[0])
                fprintf(stderr, "vestibule: mcp wrap: the audit record of %s is %s, relayed\n",
                        tool, note);
        return true;
}

/* @p (@len bytes) is only blanks: nothing for the server to run. */
static bool is_blank(const char *p, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n')
                        return false;
        return true;
}

/* The answer to the message @o (borrowed; NULL: not read) that is not relayed: an error
 * response with @code and @msg for each request in it with an id (for a message not read, one
 * with id null, as the server would answer it). A new string, "" when nothing needs one. */
static char *refuse_all(json_object *o, int code, const char *msg)
{
        json_object *out = NULL;

        if (o && json_object_is_type(o, json_type_array)) {
                out = json_object_new_array();
                for (size_t i = 0; i < json_object_array_length(o); i++) {
                        json_object *id = request_id(json_object_array_get_idx(o, i));

                        if (id)
                                json_object_array_add(out, error_response(id, code, msg));
                }
        } else {
                json_object *id = o ? request_id(o) : NULL;

                if (!o || id)
                        out = error_response(id, code, msg);
        }
        return line_of(out);
}

void wrap_audit_request(struct wrap_audit *a, const char *line, size_t len, char **ret_refusal)
{
        const char *why = NULL, *tool = "?";
        char note[256] = "";
        bool batch, refused = false;
        json_object *o;
        size_t n, n_done = 0;
        struct {
                json_object *id;
                char aid[33];
        } * done;

        *ret_refusal = NULL;
        if (is_blank(line, len))
                return;
        o = wrap_json_read(line, len, true, &why);
        if (why) {
                _cleanup_free_ char *msg = xasprintf(
                    "vestibule: mcp wrap: a message was not relayed to %s: %s. The wrap records "
                    "every tools/call before the server gets it, so it relays only what it reads "
                    "as the server will: standard JSON (RFC 8259), one value a line, nested at "
                    "most 512 deep, with no \\u0000 escape",
                    a->name, why);

                fprintf(stderr, "vestibule: mcp wrap: a message to %s was not relayed: %s\n",
                        a->name, why);
                *ret_refusal = refuse_all(o, -32700, msg);
                json_object_put(o);
                return;
        }
        /* one message, or a batch (JSON-RPC 2.0; MCP 2025-03-26): every call in it recorded */
        batch = json_object_is_type(o, json_type_array);
        n = batch ? json_object_array_length(o) : 1;
        for (size_t i = 0; i < n; i++) {
                static const char *const top[] = {"jsonrpc", "id", "method", "params", NULL},
                                         *const inner[] = {"name", "arguments", NULL};
                json_object *e = batch ? json_object_array_get_idx(o, i) : o, *p = NULL;
                const char *k = folded_key(e, top);

                if (!k && json_object_object_get_ex(e, "params", &p))
                        k = folded_key(p, inner);
                if (k) {
                        _cleanup_free_ char *msg = xasprintf(
                            "vestibule: mcp wrap: a message was not relayed to %s: its key "
                            "'%s' differs from a JSON-RPC or MCP name only in case, which some "
                            "servers' readers (Go's) take as that name",
                            a->name, k);

                        *ret_refusal = refuse_all(o, -32600, msg);
                        json_object_put(o);
                        return;
                }
        }
        done = xcalloc(n ? n : 1, sizeof(*done));
        for (size_t i = 0; i < n && !refused; i++) {
                json_object *e = batch ? json_object_array_get_idx(o, i) : o;

                if (!is_call(e))
                        continue;
                if (!record_call(a, e, done[n_done].aid, note, sizeof(note), &tool))
                        refused = true;
                else
                        done[n_done++].id = request_id(e);
        }
        if (refused) {
                _cleanup_free_ char *msg = unrecorded_msg(a, tool, note);

                /* the calls recorded before it stay in the log with no end */
                *ret_refusal = refuse_all(o, -32603, msg);
        } else {
                for (size_t i = 0; i < n_done; i++)
                        if (done[i].id)
                                remember(a, done[i].id, done[i].aid);
        }
        free(done);
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

/* The response @e (an object): when it answers a recorded request, that request's end record. */
static void end_one(struct wrap_audit *a, json_object *e)
{
        json_object *id, *r, *x;
        struct audit_host_end end = {0};
        char aid[33], note[256] = "";

        if (!json_object_object_get_ex(e, "id", &id) || !take(a, id, aid))
                return;
        end.outcome = "ok";
        end.isolation = a->grade;
        if (json_object_object_get_ex(e, "error", &x))
                end.outcome = "error";
        else if (json_object_object_get_ex(e, "result", &r) &&
                 json_object_object_get_ex(r, "isError", &x) && json_object_get_boolean(x))
                end.outcome = "tool error";
        audit_host_end(a->log, aid, &end, note, sizeof(note));
        if (note[0])
                fprintf(stderr, "vestibule: mcp wrap: an audit end record was %s\n", note);
}

void wrap_audit_response(struct wrap_audit *a, const char *line, size_t len)
{
        json_object *o;
        bool any;

        pthread_mutex_lock(&a->mu);
        any = a->n > 0;
        pthread_mutex_unlock(&a->mu);
        if (!any || !a->log)
                return;
        o = wrap_json_read(line, len, false, NULL);
        if (json_object_is_type(o, json_type_array))
                for (size_t i = 0; i < json_object_array_length(o); i++)
                        end_one(a, json_object_array_get_idx(o, i));
        else if (o)
                end_one(a, o);
        json_object_put(o);
}
