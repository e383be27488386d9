/* jsonrpc.c - JSON-RPC 2.0 as MCP uses it: strict parsing, ids compared by JSON type, message
 * classification and the envelopes we send. Spec: <rev>/basic/index.mdx (§Requests,
 * §Responses, §Notifications), docs/design/mcp-protocol.md §6; the TS client parses envelopes
 * strictly (core/src/schemas.ts): "id" is omitted rather than null when unknown. */
#include "mcp/mcp-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"

/* Deep enough for any real arguments object; json-c refuses deeper input (no recursion blowup
 * when we later walk or free the tree). */
#define MCP_JSON_MAX_DEPTH 128

int mcp_id_from_json(json_object *v, struct mcp_id *ret)
{
        memset(ret, 0, sizeof(*ret));
        switch (json_object_get_type(v)) {
        case json_type_string:
                ret->type = MCP_ID_STRING;
                ret->str_len = (size_t)json_object_get_string_len(v);
                ret->str = xmalloc(ret->str_len + 1);
                memcpy(ret->str, json_object_get_string(v), ret->str_len);
                ret->str[ret->str_len] = '\0';
                return 0;
        case json_type_int:
                /* json-c keeps values above INT64_MAX as uint64 (and clamps beyond that):
                 * such an id could not be echoed verbatim, so it is refused. */
                if (json_object_get_int64(v) == INT64_MAX && json_object_get_uint64(v) != INT64_MAX)
                        return -EINVAL;
                ret->type = MCP_ID_INT;
                ret->num = json_object_get_int64(v);
                return 0;
        default:
                return -EINVAL;
        }
}

bool mcp_id_equal(const struct mcp_id *a, const struct mcp_id *b)
{
        if (a->type != b->type)
                return false;
        switch (a->type) {
        case MCP_ID_INT:
                return a->num == b->num;
        case MCP_ID_STRING:
                return a->str_len == b->str_len && memcmp(a->str, b->str, a->str_len) == 0;
        default:
                return true;
        }
}

void mcp_id_copy(struct mcp_id *dst, const struct mcp_id *src)
{
        *dst = *src;
        if (src->type == MCP_ID_STRING) {
                dst->str = xmalloc(src->str_len + 1);
                memcpy(dst->str, src->str, src->str_len + 1);
        }
}

void mcp_id_done(struct mcp_id *id)
{
        free(id->str);
        memset(id, 0, sizeof(*id));
}

json_object *mcp_id_to_json(const struct mcp_id *id)
{
        if (!id)
                return NULL;
        switch (id->type) {
        case MCP_ID_INT:
                return json_object_new_int64(id->num);
        case MCP_ID_STRING:
                return json_object_new_string_len(id->str, (int)id->str_len);
        default:
                return NULL;
        }
}

const char *mcp_log_safe(const char *s, char *buf, size_t size)
{
        size_t i = 0;

        if (size == 0)
                return buf;
        for (; s && s[i] && i + 1 < size; i++) {
                buf[i] = s[i];
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        buf[i] = '?';
        }
        buf[i] = '\0';
        return buf;
}

const char *mcp_id_describe(const struct mcp_id *id, char *buf, size_t size)
{
        switch (id->type) {
        case MCP_ID_INT:
                snprintf(buf, size, "%" PRId64, id->num);
                break;
        case MCP_ID_STRING: {
                char safe[68];
                mcp_log_safe(id->str, safe, sizeof(safe));
                snprintf(buf, size, "\"%s\"", safe);
                break;
        }
        default:
                snprintf(buf, size, "(none)");
        }
        return buf;
}

/* NaN and Infinity are not JSON, but json-c's strict mode still takes them. */
static bool json_all_finite(json_object *v)
{
        switch (json_object_get_type(v)) {
        case json_type_double:
                return isfinite(json_object_get_double(v));
        case json_type_array:
                for (size_t i = 0; i < json_object_array_length(v); i++)
                        if (!json_all_finite(json_object_array_get_idx(v, i)))
                                return false;
                return true;
        case json_type_object: {
                json_object_object_foreach(v, key, val)
                {
                        (void)key;
                        if (!json_all_finite(val))
                                return false;
                }
                return true;
        }
        default:
                return true;
        }
}

int mcp_json_parse(const char *line, size_t len, json_object **ret, const char **ret_why)
{
        json_tokener *tok;
        json_object *v;
        enum json_tokener_error e;
        size_t end;

        if (len > INT32_MAX - 1) {
                *ret_why = "message too large";
                return -EINVAL;
        }
        tok = json_tokener_new_ex(MCP_JSON_MAX_DEPTH);
        if (!tok)
                abort();
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        /* Passing the terminating NUL tells json-c the input ends here, so a bare number at
         * the end of the line parses instead of waiting for more digits. */
        v = json_tokener_parse_ex(tok, line, (int)len + 1);
        e = json_tokener_get_error(tok);
        end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (!v || e != json_tokener_success) {
                json_object_put(v);
                *ret_why = e == json_tokener_error_depth ? "JSON nested too deeply"
                           : e == json_tokener_error_parse_utf8_string
                               ? "invalid UTF-8 in a JSON string"
                               : "malformed JSON";
                return -EINVAL;
        }
        for (; end < len; end++)
                if (!strchr(" \t\r\n", line[end])) {
                        json_object_put(v);
                        *ret_why = "trailing data after the JSON message";
                        return -EINVAL;
                }
        if (!json_all_finite(v)) {
                json_object_put(v);
                *ret_why = "NaN or Infinity is not JSON";
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

void mcp_msg_classify(json_object *v, struct mcp_msg *m)
{
        json_object *jsonrpc = NULL, *method = NULL, *id = NULL, *params = NULL;
        bool has_id;

        memset(m, 0, sizeof(*m));
        m->kind = MCP_MSG_INVALID;
        if (!json_object_is_type(v, json_type_object)) {
                m->invalid_why = "a JSON-RPC message must be a JSON object";
                return;
        }
        /* A response from the client (even one with "id": null, the client's answer to a
         * line it could not parse): we never send requests, so it is dropped, never answered,
         * which could otherwise loop. */
        if (!json_object_object_get_ex(v, "method", NULL) &&
            (json_object_object_get_ex(v, "result", NULL) ||
             json_object_object_get_ex(v, "error", NULL))) {
                m->kind = MCP_MSG_RESPONSE;
                return;
        }
        has_id = json_object_object_get_ex(v, "id", &id);
        if (has_id && mcp_id_from_json(id, &m->id) < 0) {
                m->invalid_why = "the id must be a string or an integer (not null, a boolean, "
                                 "a fraction, an object or an array)";
                return;
        }
        if (!json_object_object_get_ex(v, "jsonrpc", &jsonrpc) ||
            !json_object_is_type(jsonrpc, json_type_string) ||
            strcmp(json_object_get_string(jsonrpc), "2.0") != 0) {
                m->invalid_why = "\"jsonrpc\" must be \"2.0\"";
                return;
        }
        if (!json_object_object_get_ex(v, "method", &method)) {
                m->invalid_why = "a request needs a \"method\"";
                return;
        }
        if (!json_object_is_type(method, json_type_string)) {
                m->invalid_why = "\"method\" must be a string";
                return;
        }
        if (json_object_object_get_ex(v, "params", &params) && params &&
            !json_object_is_type(params, json_type_object) &&
            !json_object_is_type(params, json_type_array)) {
                m->invalid_why = "\"params\" must be an object";
                return;
        }
        m->method = json_object_get_string(method);
        m->params = params; /* NULL for absent or null */
        m->kind = has_id ? MCP_MSG_REQUEST : MCP_MSG_NOTIFICATION;
}

void mcp_msg_done(struct mcp_msg *m)
{
        mcp_id_done(&m->id);
}

static json_object *envelope(const struct mcp_id *id)
{
        json_object *o = json_object_new_object();
        json_object *jid = mcp_id_to_json(id);

        json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
        if (jid)
                json_object_object_add(o, "id", jid);
        return o;
}

json_object *mcp_make_result(const struct mcp_id *id, json_object *result)
{
        json_object *o = envelope(id);

        json_object_object_add(o, "result", result ? result : json_object_new_object());
        return o;
}

json_object *mcp_make_error(const struct mcp_id *id, int code, const char *message,
                            json_object *data)
{
        json_object *o = envelope(id), *e = json_object_new_object();

        json_object_object_add(e, "code", json_object_new_int(code));
        json_object_object_add(e, "message", json_object_new_string(message ? message : ""));
        if (data)
                json_object_object_add(e, "data", data);
        json_object_object_add(o, "error", e);
        return o;
}

json_object *mcp_make_notification(const char *method, json_object *params)
{
        json_object *o = json_object_new_object();

        json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
        json_object_object_add(o, "method", json_object_new_string(method));
        if (params)
                json_object_object_add(o, "params", params);
        return o;
}
