/* test_tools.c - the two tools as MCP sees them: tools/list shapes, argument coercion, and
 * run results (isError, text, structuredContent matching the outputSchema). Runs go through
 * the real service and the naive backend. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "service/service.h"
#include "tools/tools.h"
#include "testutil.h"

static struct sbx_config cfg;
static char *base, *workspace, *audit_dir, *rootfs_dir;
static struct run_service *svc;

static void setup(void)
{
        struct sbx_error err = {0};

        base = sbx_test_tmpdir();
        workspace = xasprintf("%s/workspace", base);
        audit_dir = xasprintf("%s/audit", base);
        rootfs_dir = xasprintf("%s/rootfs", base);
        ck_assert_int_eq(mkdir(workspace, 0700), 0);
        sbx_test_config(&cfg, workspace);
        cfg.audit_dir = audit_dir;
        cfg.rootfs_dir = rootfs_dir;
        cfg.backend = SBX_BACKEND_NAIVE;
        cfg.max_code_bytes = 10000;
        cfg.max_output_bytes = 1000;
        cfg.max_images = 4;
        cfg.max_image_bytes = (size_t)1024 * 1024;
        cfg.max_concurrent = 2;
        cfg.pids_max = 128;
        sbx_test_config_run_as(&cfg, workspace);
        if (geteuid() == 0)
                ck_assert_int_eq(chmod(base, 0755), 0);
        ck_assert_int_eq(run_service_new(&cfg, &svc, &err), 0);
}

static void teardown(void)
{
        char *cmd = xasprintf("rm -rf '%s'", base);

        svc = run_service_free(svc);
        (void)!system(cmd);
        free(cmd);
        free(base);
        free(workspace);
        free(audit_dir);
        free(rootfs_dir);
}

static void need_bash(void)
{
        if (access("/bin/bash", X_OK) != 0 && access("/usr/bin/bash", X_OK) != 0)
                sbx_test_skip("bash is not installed");
}

static json_object *get(json_object *o, const char *path)
{
        char buf[256], *save = NULL;

        snprintf(buf, sizeof(buf), "%s", path);
        for (char *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save)) {
                json_object *v = NULL;

                if (!json_object_object_get_ex(o, k, &v))
                        return NULL;
                o = v;
        }
        return o;
}

static json_object *tool(json_object *list, const char *name)
{
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *t = json_object_array_get_idx(list, i);

                if (strcmp(json_object_get_string(get(t, "name")), name) == 0)
                        return t;
        }
        return NULL;
}

/* Issue 11: a schema every model provider takes. MCP Inspector --strict warns on type arrays
 * ("type": ["integer","null"]); the Anthropic API refuses oneOf/anyOf/allOf at the top. */
static void check_portable(json_object *schema, const char *where)
{
        json_object *v = NULL;

        ck_assert_msg(json_object_is_type(schema, json_type_object), "%s: not an object", where);
        ck_assert_msg(json_object_object_get_ex(schema, "type", &v), "%s: no type", where);
        ck_assert_msg(json_object_is_type(v, json_type_string), "%s: type is not one string",
                      where);
        ck_assert_msg(strcmp(json_object_get_string(v), "null") != 0, "%s: type null", where);
        ck_assert_msg(!json_object_object_get_ex(schema, "oneOf", NULL) &&
                          !json_object_object_get_ex(schema, "anyOf", NULL) &&
                          !json_object_object_get_ex(schema, "allOf", NULL),
                      "%s: a combinator", where);
        if (json_object_object_get_ex(schema, "properties", &v)) {
                json_object_object_foreach(v, key, sub)
                {
                        char w[256];

                        snprintf(w, sizeof(w), "%s.%s", where, key);
                        check_portable(sub, w);
                }
        }
        if (json_object_object_get_ex(schema, "items", &v))
                check_portable(v, where);
}

/* @value matches @schema (the subset our schemas use: type, properties, required, enum,
 * items), and holds no key the schema does not name and no null. */
static void check_against(json_object *value, json_object *schema, const char *where)
{
        const char *type = json_object_get_string(json_object_object_get(schema, "type"));
        json_object *props = NULL, *req = NULL, *en = NULL, *items = NULL;

        ck_assert_msg(value != NULL, "%s: null", where);
        if (strcmp(type, "object") == 0) {
                ck_assert_msg(json_object_is_type(value, json_type_object), "%s: not an object",
                              where);
                json_object_object_get_ex(schema, "properties", &props);
                if (json_object_object_get_ex(schema, "required", &req))
                        for (size_t i = 0; i < json_object_array_length(req); i++) {
                                const char *k =
                                    json_object_get_string(json_object_array_get_idx(req, i));
                                ck_assert_msg(json_object_object_get_ex(value, k, NULL),
                                              "%s: required '%s' missing", where, k);
                        }
                json_object_object_foreach(value, key, sub)
                {
                        json_object *ps = NULL;
                        char w[256];

                        snprintf(w, sizeof(w), "%s.%s", where, key);
                        ck_assert_msg(props && json_object_object_get_ex(props, key, &ps),
                                      "%s: not in the schema", w);
                        check_against(sub, ps, w);
                }
        } else if (strcmp(type, "string") == 0)
                ck_assert_msg(json_object_is_type(value, json_type_string), "%s: not a string",
                              where);
        else if (strcmp(type, "integer") == 0)
                ck_assert_msg(json_object_is_type(value, json_type_int), "%s: not an integer",
                              where);
        else if (strcmp(type, "boolean") == 0)
                ck_assert_msg(json_object_is_type(value, json_type_boolean), "%s: not a boolean",
                              where);
        else if (strcmp(type, "array") == 0) {
                ck_assert_msg(json_object_is_type(value, json_type_array), "%s: not an array",
                              where);
                json_object_object_get_ex(schema, "items", &items);
                for (size_t i = 0; i < json_object_array_length(value); i++)
                        check_against(json_object_array_get_idx(value, i), items, where);
        } else
                ck_abort_msg("%s: unexpected type %s", where, type);
        if (json_object_object_get_ex(schema, "enum", &en)) {
                bool found = false;

                for (size_t i = 0; i < json_object_array_length(en); i++)
                        found |= strcmp(json_object_get_string(json_object_array_get_idx(en, i)),
                                        json_object_get_string(value)) == 0;
                ck_assert_msg(found, "%s: '%s' not in the enum", where,
                              json_object_get_string(value));
        }
}

/* @r's structuredContent matches @tool_name's outputSchema, and each of its strings that
 * states a fact stands in the text too, in the same words (issue 11). */
static void check_result_views(const struct tool_result *r, const char *tool_name)
{
        static const char *const facts[] = {"isolation",
                                            "outcome_text",
                                            "limits_hit",
                                            "out_of_memory",
                                            "blocked_syscalls",
                                            "audit",
                                            "stdout_truncated",
                                            "stderr_truncated",
                                            "isolation_reason",
                                            "truncated",
                                            "note",
                                            "blocked_reporting_stopped"};
        json_object *list = tools_list_json_for(&cfg);

        check_against(r->structured, get(tool(list, tool_name), "outputSchema"), tool_name);
        for (size_t i = 0; i < ELEMENTSOF(facts); i++) {
                json_object *v = get(r->structured, facts[i]);

                if (v)
                        ck_assert_msg(strstr(r->text, json_object_get_string(v)),
                                      "%s '%s' is not in the text:\n%s", facts[i],
                                      json_object_get_string(v), r->text);
        }
        if (get(r->structured, "usage")) {
                json_object *u = get(r->structured, "usage");

                json_object_object_foreach(u, key, val)
                {
                        if (strstr(key, "_not_measured"))
                                ck_assert_msg(strstr(r->text, json_object_get_string(val)),
                                              "%s not in the text", key);
                }
        }
        json_object_put(list);
}

/* A tools_call with @args_json (parsed); the result goes to @ret. */
static void call(const char *name, const char *args_json, struct tool_result *ret)
{
        struct sbx_error err = {0};
        json_object *args = args_json ? json_tokener_parse(args_json) : NULL;

        ck_assert_msg(!args_json || args, "bad test JSON %s", args_json);
        ck_assert_msg(tools_call(svc, name, args, NULL, ret, &err) == 0, "%s", err.msg);
        ck_assert_ptr_nonnull(ret->text);
        if (args)
                json_object_put(args);
}

/* --- tools/list --- */

START_TEST(list_shapes)
{
        json_object *list = tools_list_json(), *rc, *rw, *v;
        const char *desc;

        ck_assert_int_eq(json_object_array_length(list), 4);
        rc = tool(list, "run_code");
        rw = tool(list, "read_workspace");
        ck_assert_ptr_nonnull(rc);
        ck_assert_ptr_nonnull(rw);
        /* sessions (issue 14): session_start's handle is in its outputSchema, and run_code
         * takes it as an optional argument */
        v = tool(list, "session_start");
        ck_assert_ptr_nonnull(v);
        ck_assert_ptr_nonnull(get(v, "outputSchema.properties.session"));
        check_portable(get(v, "outputSchema"), "session_start");
        ck_assert_ptr_nonnull(tool(list, "session_end"));
        ck_assert_ptr_nonnull(get(rc, "inputSchema.properties.session"));
        ck_assert_ptr_nonnull(get(rc, "outputSchema.properties.session_ended"));

        ck_assert_str_eq(json_object_get_string(get(rc, "inputSchema.type")), "object");
        ck_assert_str_eq(json_object_to_json_string(get(rc, "inputSchema.required")),
                         "[ \"language\", \"code\" ]");
        ck_assert_str_eq(
            json_object_to_json_string(get(rc, "inputSchema.properties.language.enum")),
            "[ \"python\", \"node\", \"bash\" ]");
        ck_assert_int_eq(json_object_get_int(get(rc, "inputSchema.properties.timeout_seconds."
                                                     "maximum")),
                         60);
        ck_assert_ptr_null(get(rc, "inputSchema.additionalProperties"));
        ck_assert_str_eq(json_object_get_string(get(rc, "outputSchema.type")), "object");
        ck_assert_ptr_nonnull(get(rc, "outputSchema.properties.usage.properties.wall_ms"));
        ck_assert_ptr_nonnull(get(rc, "title"));

        v = get(rc, "annotations");
        ck_assert(!json_object_get_boolean(get(v, "readOnlyHint")));
        ck_assert(json_object_get_boolean(get(v, "destructiveHint")));
        ck_assert(!json_object_get_boolean(get(v, "idempotentHint")));
        ck_assert(!json_object_get_boolean(get(v, "openWorldHint")));
        v = get(rw, "annotations");
        ck_assert(json_object_get_boolean(get(v, "readOnlyHint")));
        ck_assert(!json_object_get_boolean(get(v, "openWorldHint")));
        /* issue 11: both tools have a portable outputSchema */
        check_portable(get(rc, "outputSchema"), "run_code");
        check_portable(get(rw, "outputSchema"), "read_workspace");
        check_portable(get(rc, "inputSchema"), "run_code input");
        ck_assert_str_eq(json_object_to_json_string(get(rw, "inputSchema.required")),
                         "[ \"path\" ]");

        desc = json_object_get_string(get(rc, "description"));
        ck_assert_ptr_nonnull(strstr(desc, "no network"));
        ck_assert_ptr_nonnull(strstr(desc, "/workspace"));
        ck_assert_ptr_nonnull(strstr(desc, "read_workspace"));
        ck_assert_ptr_nonnull(strstr(desc, "symlinks"));
        ck_assert_ptr_nonnull(strstr(desc, "isolation:"));
        ck_assert_ptr_nonnull(strstr(desc, "stdin is at end of file"));
        ck_assert_ptr_nonnull(strstr(desc, "10 s by default"));
        ck_assert_ptr_nonnull(strstr(desc, "up to 60"));
        /* issue 12 item 7: limits are requested; the result says which were applied */
        ck_assert_ptr_null(strstr(desc, "Limits per run"));
        ck_assert_ptr_nonnull(strstr(desc, "Limits requested per run: 256 MiB memory"));
        ck_assert_ptr_nonnull(strstr(desc, "each result says so"));
        /* issue 13: the network argument, and the honest limit of a proxy */
        ck_assert_str_eq(json_object_to_json_string(get(rc, "inputSchema.properties.network.enum")),
                         "[ \"none\", \"allowlist\" ]");
        ck_assert_ptr_nonnull(strstr(desc, "Node's built-in fetch"));
        ck_assert_ptr_nonnull(strstr(desc, "VESTIBULE_EGRESS_ALLOW"));
        ck_assert_ptr_nonnull(get(rc, "outputSchema.properties.egress"));
        json_object_put(list);
}
END_TEST

/* A read-only workspace: nothing a run does survives it, so run_code is read-only. */
START_TEST(list_annotations_follow_the_workspace)
{
        json_object *list, *v;

        cfg.backend = SBX_BACKEND_AUTO;
        cfg.workspace_ro = true;
        list = tools_list_json_for(&cfg);
        v = get(tool(list, "run_code"), "annotations");
        ck_assert(json_object_get_boolean(get(v, "readOnlyHint")));
        ck_assert(!json_object_get_boolean(get(v, "destructiveHint")));
        ck_assert(!json_object_get_boolean(get(v, "openWorldHint")));
        json_object_put(list);
        /* naive runs code on the host: never read-only, open-world */
        cfg.backend = SBX_BACKEND_NAIVE;
        list = tools_list_json_for(&cfg);
        v = get(tool(list, "run_code"), "annotations");
        ck_assert(!json_object_get_boolean(get(v, "readOnlyHint")));
        ck_assert(json_object_get_boolean(get(v, "destructiveHint")));
        ck_assert(json_object_get_boolean(get(v, "openWorldHint")));
        json_object_put(list);
}
END_TEST

START_TEST(list_naive_is_honest)
{
        json_object *list = tools_list_json_for(&cfg);
        const char *desc = json_object_get_string(get(tool(list, "run_code"), "description"));

        ck_assert_ptr_nonnull(strstr(desc, "NO sandbox"));
        ck_assert_ptr_null(strstr(desc, "has no network"));
        json_object_put(list);
}
END_TEST

/* issue 24 (clients, Low): session_end sent structuredContent without an outputSchema, so Claude
 * Code, Codex and Mastra handed the model only {"session":...,"calls":2}: it was never told the
 * session ended. Now session_end has a portable outputSchema (its result, which needs a backend
 * with sessions, is checked in tests/e2e/sessions.test.mjs). run_code's description said a
 * cancel comes back as an error result, but a cancelled request gets no reply (MCP). */
START_TEST(session_end_tells_the_model)
{
        struct sbx_config sandboxed = cfg;
        json_object *list = tools_list_json_for(&cfg), *se = tool(list, "session_end"), *list2;
        const char *desc;

        ck_assert_ptr_nonnull(get(se, "outputSchema"));
        check_portable(get(se, "outputSchema"), "session_end");
        sandboxed.backend = SBX_BACKEND_AUTO;
        list2 = tools_list_json_for(&sandboxed);
        desc = json_object_get_string(get(tool(list2, "run_code"), "description"));
        ck_assert_ptr_null(strstr(desc, "cancel comes back as an error"));
        ck_assert_ptr_nonnull(strstr(desc, "no reply"));
        json_object_put(list2);
        json_object_put(list);
}
END_TEST

/* --- arguments --- */

START_TEST(protocol_errors)
{
        struct tool_result r;
        struct sbx_error err = {0};
        json_object *arr = json_object_new_array();

        ck_assert_int_eq(tools_call(svc, "rm_rf", NULL, NULL, &r, &err), -ENOENT);
        ck_assert_int_eq(tools_call(svc, "run_code", arr, NULL, &r, &err), -EINVAL);
        json_object_put(arr);
}
END_TEST

START_TEST(missing_and_mistyped_arguments)
{
        struct tool_result r;

        call("run_code", NULL, &r);
        ck_assert(r.is_error);
        ck_assert_str_eq(r.text, "Blocked: missing required argument 'language'");
        ck_assert_ptr_null(r.structured);
        tool_result_done(&r);

        call("run_code", "{\"language\":\"bash\"}", &r);
        ck_assert(r.is_error);
        ck_assert_str_eq(r.text, "Blocked: missing required argument 'code'");
        tool_result_done(&r);

        call("run_code", "{\"language\":\"bash\",\"code\":5}", &r);
        ck_assert(r.is_error);
        ck_assert_ptr_nonnull(strstr(r.text, "'code' must be a string"));
        tool_result_done(&r);

        call("run_code", "{\"language\":\"cobol\",\"code\":\"x\"}", &r);
        ck_assert(r.is_error);
        ck_assert_ptr_nonnull(
            strstr(r.text, "Blocked: language must be one of python, node, bash"));
        ck_assert_ptr_null(r.structured);
        tool_result_done(&r);

        call("read_workspace", "{}", &r);
        ck_assert(r.is_error);
        ck_assert_ptr_nonnull(strstr(r.text, "'path'"));
        tool_result_done(&r);
}
END_TEST

START_TEST(timeout_coercion)
{
        static const char *const good[] = {"2", "2.0", "\"2\"", "\" 2 \"", "\"2.0\""};
        static const char *const bad[] = {"2.5", "\"abc\"", "true", "0", "-3", "\"\"", "[2]", "61"};
        struct tool_result r;

        need_bash();
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                char *a = xasprintf("{\"language\":\"bash\",\"code\":\"echo ok\","
                                    "\"timeout_seconds\":%s}",
                                    good[i]);
                call("run_code", a, &r);
                ck_assert_msg(!r.is_error, "%s -> %s", good[i], r.text);
                tool_result_done(&r);
                free(a);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *a = xasprintf("{\"language\":\"bash\",\"code\":\"echo ok\","
                                    "\"timeout_seconds\":%s}",
                                    bad[i]);
                call("run_code", a, &r);
                ck_assert_msg(r.is_error, "%s accepted", bad[i]);
                ck_assert_msg(strstr(r.text, "timeout_seconds") != NULL, "%s", r.text);
                ck_assert_ptr_null(r.structured);
                tool_result_done(&r);
                free(a);
        }
        /* null = not given = the default */
        call("run_code", "{\"language\":\"bash\",\"code\":\"echo ok\",\"timeout_seconds\":null}",
             &r);
        ck_assert(!r.is_error);
        tool_result_done(&r);
}
END_TEST

START_TEST(language_case_and_extra_keys)
{
        struct tool_result r;

        need_bash();
        call("run_code", "{\"language\":\"Bash\",\"code\":\"echo ok\",\"extra\":{\"x\":1}}", &r);
        ck_assert_msg(!r.is_error, "%s", r.text);
        tool_result_done(&r);
}
END_TEST

/* --- results --- */

static void check_structured_shape(json_object *s)
{
        static const char *const req[] = {"stdout",          "stderr",    "outcome",
                                          "outcome_text",    "timed_out", "isolation",
                                          "isolation_grade", "usage"};

        ck_assert_ptr_nonnull(s);
        ck_assert(json_object_is_type(s, json_type_object));
        for (size_t i = 0; i < ELEMENTSOF(req); i++)
                ck_assert_msg(json_object_object_get_ex(s, req[i], NULL), "no %s", req[i]);
        ck_assert(json_object_is_type(get(s, "usage.wall_ms"), json_type_int));
}

START_TEST(result_success)
{
        struct tool_result r;
        json_object *u;

        need_bash();
        call("run_code", "{\"language\":\"bash\",\"code\":\"echo hi; printf '\\\\033[1m' >&2\"}",
             &r);
        ck_assert_msg(!r.is_error, "%s", r.text);
        ck_assert_msg(strstr(r.text, "stdout (3 bytes) ---"), "%s", r.text);
        ck_assert_ptr_nonnull(strstr(r.text, "---\nhi\n---"));
        ck_assert_ptr_nonnull(strstr(r.text, "---\n\\x1b[1m\n---"));
        ck_assert_ptr_nonnull(strstr(r.text, "\nexit code: 0\n"));
        ck_assert_ptr_nonnull(strstr(r.text, "\nisolation: none (naive: development only)"));
        check_structured_shape(r.structured);
        check_result_views(&r, "run_code");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "stdout")), "hi\n");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "stderr")), "\\x1b[1m");
        ck_assert_int_eq(json_object_get_int(get(r.structured, "stdout_bytes")), 3);
        ck_assert_int_eq(json_object_get_int(get(r.structured, "stdout_bytes_shown")), 3);
        ck_assert_ptr_null(get(r.structured, "stdout_truncated"));
        ck_assert_ptr_null(get(r.structured, "stdout_tail"));
        ck_assert_int_eq(json_object_get_int(get(r.structured, "exit_code")), 0);
        ck_assert_ptr_null(get(r.structured, "signal"));
        ck_assert_str_eq(json_object_get_string(get(r.structured, "outcome")), "exited");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "outcome_text")), "exit code: 0");
        /* the grade and its reason, apart too */
        ck_assert_str_eq(json_object_get_string(get(r.structured, "isolation")),
                         "none (naive: development only)");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "isolation_grade")), "none");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "isolation_reason")),
                         "naive: development only");
        /* a figure, or why not: never null */
        u = get(r.structured, "usage");
        ck_assert(json_object_is_type(get(u, "cpu_ms"), json_type_int));
        ck_assert_ptr_null(get(u, "cpu_ms_not_measured"));
        ck_assert_ptr_null(get(u, "mem_peak_bytes"));
        ck_assert(json_object_object_get_ex(u, "mem_peak_bytes_not_measured", NULL));
        ck_assert(json_object_is_type(get(u, "mem_peak_bytes_not_measured"), json_type_string));
        ck_assert_ptr_nonnull(
            strstr(r.text, json_object_get_string(get(u, "pids_peak_not_measured"))));
        tool_result_done(&r);
}
END_TEST

START_TEST(result_failures_are_errors)
{
        struct tool_result r;

        need_bash();
        call("run_code", "{\"language\":\"bash\",\"code\":\"exit 4\"}", &r);
        ck_assert(r.is_error);
        check_structured_shape(r.structured);
        check_result_views(&r, "run_code");
        ck_assert_int_eq(json_object_get_int(get(r.structured, "exit_code")), 4);
        ck_assert_str_eq(json_object_get_string(get(r.structured, "outcome_text")), "exit code: 4");
        tool_result_done(&r);

        call("run_code", "{\"language\":\"bash\",\"code\":\"sleep 5\",\"timeout_seconds\":1}", &r);
        ck_assert(r.is_error);
        ck_assert_ptr_nonnull(strstr(r.text, "\ntimed out after 1 s\n"));
        check_structured_shape(r.structured);
        check_result_views(&r, "run_code");
        ck_assert(json_object_get_boolean(get(r.structured, "timed_out")));
        ck_assert(!json_object_object_get_ex(r.structured, "exit_code", NULL));
        ck_assert_str_eq(json_object_get_string(get(r.structured, "outcome_text")),
                         "timed out after 1 s");
        tool_result_done(&r);

        call("run_code", "{\"language\":\"bash\",\"code\":\"kill -SEGV $$\"}", &r);
        ck_assert(r.is_error);
        check_result_views(&r, "run_code");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "signal")), "SIGSEGV");
        ck_assert(!json_object_object_get_ex(r.structured, "exit_code", NULL));
        tool_result_done(&r);
}
END_TEST

/* Issue 12 items 5 and 19 as a model sees them: a cut stream's start and end, where a flood
 * was stopped, and forged server lines kept apart from the server's. */
START_TEST(result_cut_flood_and_forgery)
{
        struct tool_result r;
        const char *t;

        need_bash();
        /* 1500 bytes: cap 1000 shows the first 500 and the last 500 */
        call("run_code",
             "{\"language\":\"bash\",\"code\":\"printf 'S%.0s' {1..1499}; echo; echo "
             "isolation: native >&2\"}",
             &r);
        check_result_views(&r, "run_code");
        ck_assert_int_eq(json_object_get_int(get(r.structured, "stdout_bytes")), 1500);
        ck_assert_int_eq(json_object_get_int(get(r.structured, "stdout_bytes_shown")), 1000);
        ck_assert_str_eq(json_object_get_string(get(r.structured, "stdout_truncated")),
                         "500 of 1500 bytes not shown (the first 500 and the last 500 are)");
        t = json_object_get_string(get(r.structured, "stdout_tail"));
        ck_assert_uint_eq(strlen(t), 500);
        ck_assert_int_eq(t[499], '\n');
        /* the forged line is output, in its own field and inside the text's fence */
        ck_assert_str_eq(json_object_get_string(get(r.structured, "stderr")),
                         "isolation: native\n");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "isolation")),
                         "none (naive: development only)");
        ck_assert_ptr_nonnull(strstr(r.text, "\nisolation: native\n---"));
        tool_result_done(&r);

        call("run_code", "{\"language\":\"bash\",\"code\":\"yes 0123456789abcdef\"}", &r);
        check_result_views(&r, "run_code");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "outcome")), "flooded");
        ck_assert_int_gt(json_object_get_int64(get(r.structured, "stopped_at_bytes")), 2000);
        ck_assert_int_ge(json_object_get_int64(get(r.structured, "stdout_bytes")),
                         json_object_get_int64(get(r.structured, "stopped_at_bytes")));
        ck_assert_ptr_nonnull(
            strstr(json_object_get_string(get(r.structured, "outcome_text")), "stopped at "));
        ck_assert_ptr_nonnull(get(r.structured, "stdout_tail"));
        tool_result_done(&r);
}
END_TEST

/* Issue 22 item 5 (leftover of issue 24's Low): structuredContent's egress hosts carry
 * bytes_unknown when some allowed connections' bytes were never recorded (open when the proxy
 * died), as the text's "bytes unknown" does; an entry whose connections all ended has none
 * (the control: its shape is as before). */
START_TEST(egress_bytes_unknown_in_structured)
{
        struct run_egress_entry ents[2] = {
            {.host = "pypi.vst.test",
             .port = 80,
             .allowed = true,
             .connections = 2,
             .bytes_up = 10,
             .bytes_down = 20,
             .bytes_unknown = 1},
            {.host = "files.vst.test",
             .port = 80,
             .allowed = true,
             .connections = 1,
             .bytes_up = 3,
             .bytes_down = 4},
        };
        struct run_result r = {0};
        struct run_view v;
        json_object *g, *h0, *h1;

        r.outcome = RUN_OUTCOME_EXITED;
        snprintf(r.isolation, sizeof(r.isolation), "native");
        r.egress.on = true;
        r.egress.entries = ents;
        r.egress.n_entries = 2;
        run_view_build(&v, &r, 10, 1000);
        g = tools_egress_json(&r.egress, &v);
        ck_assert_str_eq(json_object_get_string(get(g, "policy")), "allowlist");
        h0 = json_object_array_get_idx(get(g, "hosts"), 0);
        h1 = json_object_array_get_idx(get(g, "hosts"), 1);
        ck_assert_str_eq(json_object_get_string(get(h0, "host")), "pypi.vst.test");
        ck_assert_int_eq(json_object_get_int(get(h0, "connections")), 2);
        ck_assert_int_eq(json_object_get_int(get(h0, "bytes_up")), 10);
        ck_assert_int_eq(json_object_get_int(get(h0, "bytes_unknown")), 1);
        ck_assert_ptr_nonnull(strstr(json_object_get_string(get(g, "text")), "unknown"));
        ck_assert_int_eq(json_object_get_int(get(h1, "bytes_down")), 4);
        ck_assert(!json_object_object_get_ex(h1, "bytes_unknown", NULL));
        json_object_put(g);
        run_view_done(&v);
}
END_TEST

START_TEST(read_workspace_result)
{
        struct tool_result r;
        char *p = xasprintf("%s/note.txt", workspace);
        FILE *f = fopen(p, "w");

        ck_assert_ptr_nonnull(f);
        fputs("hello workspace\n", f);
        fclose(f);
        call("read_workspace", "{\"path\":\"note.txt\"}", &r);
        ck_assert(!r.is_error);
        ck_assert_str_eq(r.text, "hello workspace\n");
        check_result_views(&r, "read_workspace");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "text")), "hello workspace\n");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "path")), "note.txt");
        ck_assert_int_eq(json_object_get_int(get(r.structured, "bytes")), 16);
        ck_assert(!json_object_get_boolean(get(r.structured, "binary")));
        ck_assert_ptr_null(get(r.structured, "truncated"));
        tool_result_done(&r);
        free(p);

        p = xasprintf("%s/big.txt", workspace);
        f = fopen(p, "w");
        for (int i = 0; i < 150; i++)
                fputs("0123456789", f);
        fclose(f);
        call("read_workspace", "{\"path\":\"big.txt\"}", &r);
        check_result_views(&r, "read_workspace");
        ck_assert_int_eq(json_object_get_int(get(r.structured, "bytes")), 1500);
        ck_assert_int_eq(json_object_get_int(get(r.structured, "bytes_shown")), 1000);
        ck_assert_str_eq(json_object_get_string(get(r.structured, "truncated")),
                         "500 of 1500 bytes not shown");
        tool_result_done(&r);
        free(p);

        p = xasprintf("%s/bin.dat", workspace);
        f = fopen(p, "w");
        fwrite("\x7f"
               "ELF\0\0",
               1, 6, f);
        fclose(f);
        call("read_workspace", "{\"path\":\"bin.dat\"}", &r);
        check_result_views(&r, "read_workspace");
        ck_assert(json_object_get_boolean(get(r.structured, "binary")));
        ck_assert_str_eq(json_object_get_string(get(r.structured, "text")), "");
        ck_assert_str_eq(json_object_get_string(get(r.structured, "note")),
                         "binary file, 6 bytes: attached as an embedded resource (base64)");
        /* the bytes follow the text as an embedded resource */
        ck_assert_ptr_nonnull(r.content);
        ck_assert_int_eq(json_object_array_length(r.content), 1);
        {
                json_object *item = json_object_array_get_idx(r.content, 0), *res = NULL;

                ck_assert_str_eq(json_object_get_string(get(item, "type")), "resource");
                ck_assert(json_object_object_get_ex(item, "resource", &res));
                ck_assert_str_eq(json_object_get_string(get(res, "uri")),
                                 "file:///workspace/bin.dat");
                ck_assert_str_eq(json_object_get_string(get(res, "blob")), "f0VMRgAA");
        }
        tool_result_done(&r);
        free(p);
}
END_TEST

START_TEST(invalid_config_blocks_both_tools)
{
        struct tool_result r;

        cfg.invalid = true;
        snprintf(cfg.invalid_msg, sizeof(cfg.invalid_msg), "VESTIBULE_CPU_PCT='x' is bad: fix it");
        call("run_code", "{}", &r);
        ck_assert(r.is_error);
        ck_assert_str_eq(r.text, "Blocked: VESTIBULE_CPU_PCT='x' is bad: fix it");
        tool_result_done(&r);
        call("read_workspace", "{\"path\":\"a\"}", &r);
        ck_assert(r.is_error);
        ck_assert_str_eq(r.text, "Blocked: VESTIBULE_CPU_PCT='x' is bad: fix it");
        tool_result_done(&r);

        /* a refusal quoting a hostile value shows it escaped, like output */
        snprintf(cfg.invalid_msg, sizeof(cfg.invalid_msg),
                 "VESTIBULE_WORKSPACE='\x1b[2J\xe2\x80\xae' is bad");
        call("run_code", "{}", &r);
        ck_assert_str_eq(r.text, "Blocked: VESTIBULE_WORKSPACE='\\x1b[2J\\u202e' is bad");
        tool_result_done(&r);
}
END_TEST

static Suite *tools_suite(void)
{
        Suite *s = suite_create("tools");
        TCase *tc;

        tc = tcase_create("list");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, list_shapes);
        tcase_add_test(tc, list_naive_is_honest);
        tcase_add_test(tc, list_annotations_follow_the_workspace);
        tcase_add_test(tc, session_end_tells_the_model);
        suite_add_tcase(s, tc);

        tc = tcase_create("arguments");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, protocol_errors);
        tcase_add_test(tc, missing_and_mistyped_arguments);
        tcase_add_test(tc, timeout_coercion);
        tcase_add_test(tc, language_case_and_extra_keys);
        suite_add_tcase(s, tc);

        tc = tcase_create("results");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, result_success);
        tcase_add_test(tc, result_failures_are_errors);
        tcase_add_test(tc, result_cut_flood_and_forgery);
        tcase_add_test(tc, egress_bytes_unknown_in_structured);
        tcase_add_test(tc, read_workspace_result);
        tcase_add_test(tc, invalid_config_blocks_both_tools);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(tools_suite());
}
