/* tools.h - the two MCP tools, independent of the protocol: their names, descriptions, input
 * schemas and annotations, argument coercion, and turning a call into a tool result. src/mcp
 * serialises these for tools/list and tools/call; `vestibule-mcp run` calls tools_call() too,
 * so the CLI prints exactly what a client receives. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#include "common/error.h"
#include "run/run.h"
#include "service/service.h"

struct tool_result {
        char *text;              /* the content[0] text; owned */
        bool is_error;           /* isError */
        json_object *structured; /* structuredContent (an object) or NULL; owned */
        json_object *content;    /* content items after the text (images, resources: see
                                    tools/content.h), an array, or NULL; owned */
};

/** tool_result_done() - free what @r holds (text, structured); @r itself is not freed. NULL ok. */
void tool_result_done(struct tool_result *r);

/**
 * tools_list_json() - a new JSON array of Tool objects (name, title, description, inputSchema,
 * outputSchema, annotations) as of the newest revision; src/mcp strips what an older
 * negotiated revision does not know. Caller puts it.
 */
json_object *tools_list_json(void);

/**
 * tools_list_json_for() - the same, with @cfg's numbers in the descriptions and schemas
 * (timeouts, caps) and an honest description when @cfg selects the naive backend. @cfg NULL =
 * the defaults (what tools_list_json() returns).
 */
json_object *tools_list_json_for(const struct sbx_config *cfg);

/* Per-call context from the protocol layer. */
struct tool_ctx {
        int cancel_fd;            /* readable once the request is cancelled; -1 = none */
        run_progress_fn progress; /* NULL when the request has no progressToken */
        void *progress_userdata;
};

/**
 * tools_call() - run tool @name with @args (an object, or NULL for {}).
 * Return: 0 and @ret filled (a refused or failed run is a result with is_error), -ENOENT for an
 * unknown tool (JSON-RPC -32602), -EINVAL when @args is not an object (-32602); @err says which.
 */
int tools_call(struct run_service *svc, const char *name, json_object *args,
               const struct tool_ctx *ctx, struct tool_result *ret, struct sbx_error *err);

/**
 * tools_egress_json() - run_code's structuredContent "egress" object for a run that had network
 * "allowlist" (docs/design/results.md): policy, hosts (one object per entry of @g: host as
 * escaped in @v->egress_hosts, port, verdict, reason, connections, bytes_up, bytes_down, and
 * bytes_unknown when some of its connections' bytes were never recorded, e.g. open when the
 * proxy died: src/egress/session.c), unlisted, note and text from @v. @v is run_view_build()'s
 * view of the same result. Return: a new object; the caller puts it.
 */
json_object *tools_egress_json(const struct run_egress *g, const struct run_view *v);
