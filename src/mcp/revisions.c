/* revisions.c - the protocol revisions we serve and what each one knows: initialize version
 * negotiation, the 2026-07-28 per-request _meta rules, server info and capabilities, and the
 * Tool fields an older revision must not see. Spec: <rev>/basic/lifecycle.mdx §Version
 * Negotiation; 2026-07-28/basic/versioning.mdx, basic/index.mdx §_meta and §Error Codes,
 * server/discover.mdx; schema/<rev>/schema.ts (Tool, Implementation); docs/design/mcp-protocol.md
 * §2-4, §7. */
#include "mcp/mcp-internal.h"

#include <string.h>

#include "common/xalloc.h"

#ifndef VESTIBULE_VERSION
#define VESTIBULE_VERSION "0.0.0"
#endif

#define META_PREFIX "io.modelcontextprotocol/"
#define META_PROTOCOL_VERSION META_PREFIX "protocolVersion"
#define META_CLIENT_CAPABILITIES META_PREFIX "clientCapabilities"
#define META_CLIENT_INFO META_PREFIX "clientInfo"
#define META_LOG_LEVEL META_PREFIX "logLevel"
#define META_SERVER_INFO META_PREFIX "serverInfo"

static const char *const rev_names[] = {
    [MCP_REV_2024_11_05] = "2024-11-05", [MCP_REV_2025_03_26] = "2025-03-26",
    [MCP_REV_2025_06_18] = "2025-06-18", [MCP_REV_2025_11_25] = "2025-11-25",
    [MCP_REV_2026_07_28] = "2026-07-28",
};

const char *mcp_rev_name(enum mcp_rev rev)
{
        return rev <= MCP_REV_2026_07_28 ? rev_names[rev] : "unknown";
}

enum mcp_rev mcp_rev_negotiate(const char *requested, const char **ret_echo)
{
        if (requested) {
                for (int r = MCP_REV_2024_11_05; r <= MCP_REV_LATEST_LEGACY; r++)
                        if (strcmp(requested, rev_names[r]) == 0) {
                                *ret_echo = rev_names[r];
                                return (enum mcp_rev)r;
                        }
                /* A draft the TS SDK still lists as supported; it checks our answer against
                 * that list, and its own servers echo it, so we do too. */
                if (strcmp(requested, "2024-10-07") == 0) {
                        *ret_echo = "2024-10-07";
                        return MCP_REV_2024_11_05;
                }
        }
        *ret_echo = rev_names[MCP_REV_LATEST_LEGACY];
        return MCP_REV_LATEST_LEGACY;
}

json_object *mcp_rev_supported_versions(void)
{
        json_object *a = json_object_new_array();

        for (int r = MCP_REV_2026_07_28; r >= MCP_REV_2024_11_05; r--)
                json_object_array_add(a, json_object_new_string(rev_names[r]));
        return a;
}

static json_object *meta_of(json_object *params)
{
        json_object *meta = NULL;

        if (params && json_object_is_type(params, json_type_object) &&
            json_object_object_get_ex(params, "_meta", &meta) &&
            json_object_is_type(meta, json_type_object))
                return meta;
        return NULL;
}

bool mcp_rev_is_modern_request(const char *method, json_object *params)
{
        static const char *const keys[] = {META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES,
                                           META_CLIENT_INFO, META_LOG_LEVEL};
        json_object *meta = meta_of(params);

        if (strcmp(method, "server/discover") == 0)
                return true;
        if (!meta)
                return false;
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                if (json_object_object_get_ex(meta, keys[i], NULL))
                        return true;
        return false;
}

int mcp_rev_check_modern(json_object *params, char **ret_msg, json_object **ret_data)
{
        json_object *meta = meta_of(params), *v = NULL, *data;
        const char *requested;

        *ret_data = NULL;
        if (!meta || !json_object_object_get_ex(meta, META_PROTOCOL_VERSION, &v) ||
            !json_object_is_type(v, json_type_string)) {
                *ret_msg = xstrdup("params._meta[\"" META_PROTOCOL_VERSION
                                   "\"] is required (a string such as \"2026-07-28\")");
                return MCP_ERR_INVALID_PARAMS;
        }
        requested = json_object_get_string(v);
        if (!json_object_object_get_ex(meta, META_CLIENT_CAPABILITIES, &v) ||
            !json_object_is_type(v, json_type_object)) {
                *ret_msg = xstrdup("params._meta[\"" META_CLIENT_CAPABILITIES
                                   "\"] is required (an object; {} declares none)");
                return MCP_ERR_INVALID_PARAMS;
        }
        if (strcmp(requested, rev_names[MCP_REV_MODERN]) != 0) {
                /* Only 2026-07-28 can be used per request; the legacy revisions need the
                 * initialize handshake, so they are not offered here. This list is a subset of
                 * server/discover's supportedVersions, as the conformance suite requires. */
                data = json_object_new_object();
                json_object_object_add(data, "supported", json_object_new_array());
                json_object_array_add(json_object_object_get(data, "supported"),
                                      json_object_new_string(rev_names[MCP_REV_MODERN]));
                json_object_object_add(data, "requested", json_object_new_string(requested));
                *ret_data = data;
                *ret_msg = xasprintf("Unsupported protocol version '%s': per-request _meta "
                                     "supports %s; legacy revisions need initialize",
                                     requested, rev_names[MCP_REV_MODERN]);
                return MCP_ERR_UNSUPPORTED_VERSION;
        }
        *ret_msg = NULL;
        return 0;
}

json_object *mcp_rev_server_info(enum mcp_rev rev)
{
        json_object *o = json_object_new_object();

        json_object_object_add(o, "name", json_object_new_string("vestibule"));
        json_object_object_add(o, "version", json_object_new_string(VESTIBULE_VERSION));
        if (rev >= MCP_REV_2025_06_18)
                json_object_object_add(o, "title", json_object_new_string("Vestibule"));
        if (rev >= MCP_REV_2025_11_25)
                json_object_object_add(
                    o, "description",
                    json_object_new_string("Runs Python, Node.js and Bash code in a fresh "
                                           "sandbox per call and reports the isolation it "
                                           "actually achieved."));
        return o;
}

json_object *mcp_rev_capabilities(enum mcp_rev rev)
{
        json_object *caps = json_object_new_object(), *tools = json_object_new_object();

        json_object_object_add(tools, "listChanged", json_object_new_boolean(0));
        json_object_object_add(caps, "tools", tools);
        /* Legacy: declared so the Inspector's logging/setLevel after initialize succeeds
         * (inspector#706). 2026-07-28 deprecates it and we never send notifications/message. */
        if (rev < MCP_REV_MODERN)
                json_object_object_add(caps, "logging", json_object_new_object());
        return caps;
}

static json_object *copy(json_object *v)
{
        json_object *c = NULL;

        if (json_object_deep_copy(v, &c, NULL) < 0)
                abort();
        return c;
}

/* A copy of a JSON Schema, without "$schema" for revisions before 2025-11-25. */
static json_object *schema_for_rev(json_object *schema, enum mcp_rev rev)
{
        json_object *c = copy(schema);

        if (rev < MCP_REV_2025_11_25 && json_object_is_type(c, json_type_object))
                json_object_object_del(c, "$schema");
        return c;
}

/* Tool fields and the revisions that know them (schema/<rev>/schema.ts, docs/design/mcp-protocol.md
 * §4). Any other field is one a revision we do not serve added, and is left out. */
static const struct {
        const char *key;
        enum mcp_rev first, last;
} tool_fields[] = {
    {"name", MCP_REV_2024_11_05, MCP_REV_MODERN},
    {"description", MCP_REV_2024_11_05, MCP_REV_MODERN},
    {"inputSchema", MCP_REV_2024_11_05, MCP_REV_MODERN},
    {"annotations", MCP_REV_2025_03_26, MCP_REV_MODERN},
    {"title", MCP_REV_2025_06_18, MCP_REV_MODERN},
    {"outputSchema", MCP_REV_2025_06_18, MCP_REV_MODERN},
    {"_meta", MCP_REV_2025_06_18, MCP_REV_MODERN},
    {"icons", MCP_REV_2025_11_25, MCP_REV_MODERN},
    {"execution", MCP_REV_2025_11_25, MCP_REV_2025_11_25}, /* tasks became an extension */
};

static bool is_object_schema(json_object *schema)
{
        json_object *type = NULL;

        return json_object_is_type(schema, json_type_object) &&
               json_object_object_get_ex(schema, "type", &type) &&
               json_object_is_type(type, json_type_string) &&
               strcmp(json_object_get_string(type), "object") == 0;
}

json_object *mcp_rev_tool(json_object *tool, enum mcp_rev rev)
{
        json_object *out = json_object_new_object(), *v = NULL;

        if (!json_object_is_type(tool, json_type_object))
                return out;
        for (size_t i = 0; i < sizeof(tool_fields) / sizeof(tool_fields[0]); i++) {
                const char *key = tool_fields[i].key;

                if (rev < tool_fields[i].first || rev > tool_fields[i].last ||
                    !json_object_object_get_ex(tool, key, &v))
                        continue;
                if (strcmp(key, "inputSchema") == 0)
                        json_object_object_add(out, key, schema_for_rev(v, rev));
                else if (strcmp(key, "outputSchema") == 0) {
                        /* A legacy outputSchema must be an object schema, or TS clients reject
                         * the whole tools/list; 2026-07-28 takes any schema. */
                        if (rev < MCP_REV_MODERN && !is_object_schema(v))
                                continue;
                        json_object_object_add(out, key, schema_for_rev(v, rev));
                } else
                        json_object_object_add(out, key, copy(v));
        }
        return out;
}

json_object *mcp_rev_tools(json_object *tools, enum mcp_rev rev)
{
        json_object *a = json_object_new_array();

        if (json_object_is_type(tools, json_type_array))
                for (size_t i = 0; i < json_object_array_length(tools); i++)
                        json_object_array_add(
                            a, mcp_rev_tool(json_object_array_get_idx(tools, i), rev));
        return a;
}

json_object *mcp_rev_finish_result(json_object *result, bool modern)
{
        json_object *meta = NULL;

        if (!modern)
                return result;
        json_object_object_add(result, "resultType", json_object_new_string("complete"));
        if (!json_object_object_get_ex(result, "_meta", &meta) ||
            !json_object_is_type(meta, json_type_object)) {
                meta = json_object_new_object();
                json_object_object_add(result, "_meta", meta);
        }
        json_object_object_add(meta, META_SERVER_INFO, mcp_rev_server_info(MCP_REV_MODERN));
        return result;
}

json_object *mcp_rev_finish_tool_result(json_object *result, bool modern)
{
        /* 2026-07-28 requires resultType on every result and no _meta key; serverInfo in a
         * result's _meta is a SHOULD (a MUST only for server/discover). Some clients (Mastra)
         * pass a whole tool result to their model, so a tool result carries nothing the model
         * need not read. docs/design/results.md, "_meta". */
        if (modern)
                json_object_object_add(result, "resultType", json_object_new_string("complete"));
        return result;
}
