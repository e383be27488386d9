/* tools.c - run_code and read_workspace as MCP tools: what the agent reads about them, their
 * schemas, argument coercion, and a call turned into a tool result. See tools.h. */
#include "tools/tools.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "run/run.h"

void tool_result_done(struct tool_result *r)
{
        if (!r)
                return;
        free(r->text);
        r->text = NULL;
        if (r->structured)
                json_object_put(r->structured);
        r->structured = NULL;
}

/* --- tools/list ------------------------------------------------------------------------ */

static json_object *jstr(const char *s)
{
        return json_object_new_string(s);
}

static json_object *prop(const char *type, const char *description)
{
        json_object *p = json_object_new_object();

        json_object_object_add(p, "type", jstr(type));
        if (description)
                json_object_object_add(p, "description", jstr(description));
        return p;
}

static json_object *nullable(const char *type, const char *description)
{
        json_object *p = json_object_new_object(), *t = json_object_new_array();

        json_object_array_add(t, jstr(type));
        json_object_array_add(t, jstr("null"));
        json_object_object_add(p, "type", t);
        if (description)
                json_object_object_add(p, "description", jstr(description));
        return p;
}

static json_object *strings(const char *const *v)
{
        json_object *a = json_object_new_array();

        for (; *v; v++)
                json_object_array_add(a, jstr(*v));
        return a;
}

static json_object *annotations(const char *title, bool read_only, bool destructive,
                                bool idempotent, bool open_world)
{
        json_object *a = json_object_new_object();

        json_object_object_add(a, "title", jstr(title));
        json_object_object_add(a, "readOnlyHint", json_object_new_boolean(read_only));
        json_object_object_add(a, "destructiveHint", json_object_new_boolean(destructive));
        json_object_object_add(a, "idempotentHint", json_object_new_boolean(idempotent));
        json_object_object_add(a, "openWorldHint", json_object_new_boolean(open_world));
        return a;
}

static char *run_code_description(const struct sbx_config *cfg)
{
        unsigned def = cfg ? cfg->default_timeout_s : 10, max = cfg ? cfg->max_timeout_s : 60;
        unsigned mem = cfg ? cfg->mem_mb : 256, cpu = cfg ? cfg->cpu_pct : 75;
        unsigned pids = cfg ? cfg->pids_max : 128, tmp = cfg ? cfg->tmpfs_mb : 64;
        size_t out = cfg ? cfg->max_output_bytes : 20000;
        bool ro = cfg && cfg->workspace_ro;

        if (cfg && cfg->backend == SBX_BACKEND_NAIVE)
                return xasprintf(
                    "Run a python, node or bash program and return its output. DEVELOPMENT "
                    "MODE (VESTIBULE_BACKEND=naive): the code runs directly on this machine "
                    "with NO sandbox - it can reach the network and the user's files. Each "
                    "run starts in the workspace folder with a fresh temporary $HOME, stdin "
                    "at end of file and a minimal environment. Timeout: %u s by default, "
                    "timeout_seconds up to %u. Output is capped at %zu bytes per stream. "
                    "The result ends with an 'isolation:' line (here 'none'). Use "
                    "read_workspace to read files from the workspace.",
                    def, max, out);
        return xasprintf(
            "Run a python, node or bash program in a fresh, throwaway sandbox and return its "
            "stdout, stderr, exit code and resource usage. Each call starts from scratch: "
            "nothing but /workspace survives between runs. The sandbox has no network, and "
            "none of the host's files except the /workspace folder (the only persistent "
            "place, %s; files there are shared with the user). The root filesystem is "
            "read-only; /tmp is a %u MiB scratch space and also $HOME. Limits per run: %u MiB "
            "memory, %u%% of one CPU core, %u processes. stdin is at end of file (no input can "
            "be given), the environment is minimal, and the working directory is /workspace. "
            "Timeout: %u s by default; set timeout_seconds up to %u. Output is capped at %zu "
            "bytes per stream (longer output is cut, and a run printing more than twice that "
            "is stopped). A non-zero exit, a timeout or a cancel comes back as an error "
            "result. The result ends with an 'isolation:' line saying what protected the run. "
            "To read files from the workspace, use the read_workspace tool rather than "
            "host file tools: it refuses symlinks, which sandboxed code can plant there.",
            ro ? "read-only in this configuration" : "read-write", tmp, mem, cpu, pids, def, max,
            out);
}

static json_object *run_code_tool(const struct sbx_config *cfg)
{
        static const char *const langs[] = {"python", "node", "bash", NULL};
        static const char *const outcomes[] = {"exited",  "signaled", "timed_out", "cancelled",
                                               "flooded", "not_run",  NULL};
        static const char *const required_in[] = {"language", "code", NULL};
        static const char *const required_out[] = {"stdout",    "stderr",    "exit_code", "outcome",
                                                   "timed_out", "isolation", "usage",     NULL};
        unsigned def = cfg ? cfg->default_timeout_s : 10, max = cfg ? cfg->max_timeout_s : 60;
        json_object *t = json_object_new_object();
        json_object *in = json_object_new_object(), *props = json_object_new_object();
        json_object *out = json_object_new_object(), *oprops = json_object_new_object();
        json_object *usage = json_object_new_object(), *uprops = json_object_new_object();
        json_object *p;
        _cleanup_free_ char *desc = run_code_description(cfg);
        _cleanup_free_ char *tdesc =
            xasprintf("Seconds before the run is killed; default %u, at most %u.", def, max);

        json_object_object_add(t, "name", jstr("run_code"));
        json_object_object_add(t, "title", jstr("Run code in a sandbox"));
        json_object_object_add(t, "description", jstr(desc));

        p = prop("string", "Language of the program: python (python3), node (JavaScript) or "
                           "bash.");
        json_object_object_add(p, "enum", strings(langs));
        json_object_object_add(props, "language", p);
        json_object_object_add(props, "code",
                               prop("string", "The complete program source. It runs as a file "
                                              "(main.py, main.js or main.sh), not a REPL: print "
                                              "what you want to see."));
        p = prop("integer", tdesc);
        json_object_object_add(p, "minimum", json_object_new_int(1));
        json_object_object_add(p, "maximum", json_object_new_int64(max));
        json_object_object_add(props, "timeout_seconds", p);
        json_object_object_add(in, "type", jstr("object"));
        json_object_object_add(in, "properties", props);
        json_object_object_add(in, "required", strings(required_in));
        json_object_object_add(t, "inputSchema", in);

        json_object_object_add(
            oprops, "stdout",
            prop("string", "What the program printed (escaped, cut at the cap)."));
        json_object_object_add(oprops, "stderr", prop("string", "Its error output, likewise."));
        json_object_object_add(oprops, "stdout_bytes",
                               prop("integer", "How many bytes the program wrote to stdout."));
        json_object_object_add(oprops, "stderr_bytes",
                               prop("integer", "How many bytes it wrote to stderr."));
        json_object_object_add(oprops, "exit_code",
                               nullable("integer", "Exit status when it exited on its own."));
        json_object_object_add(oprops, "signal",
                               nullable("string", "The signal that killed it, such as SIGKILL."));
        p = prop("string", "How the run ended.");
        json_object_object_add(p, "enum", strings(outcomes));
        json_object_object_add(oprops, "outcome", p);
        json_object_object_add(oprops, "timed_out", prop("boolean", NULL));
        json_object_object_add(oprops, "isolation",
                               prop("string", "What protected the run: native, container, "
                                              "...-degraded (why), or none (why)."));
        json_object_object_add(uprops, "wall_ms", prop("integer", NULL));
        json_object_object_add(uprops, "cpu_ms", nullable("integer", "null = not measured"));
        json_object_object_add(uprops, "mem_peak_bytes",
                               nullable("integer", "null = not measured"));
        json_object_object_add(uprops, "pids_peak", nullable("integer", "null = not measured"));
        json_object_object_add(usage, "type", jstr("object"));
        json_object_object_add(usage, "properties", uprops);
        json_object_object_add(oprops, "usage", usage);
        json_object_object_add(out, "type", jstr("object"));
        json_object_object_add(out, "properties", oprops);
        json_object_object_add(out, "required", strings(required_out));
        json_object_object_add(t, "outputSchema", out);

        /* destructive: it can change and delete files in /workspace. Not open-world: the
         * sandbox has no network. */
        json_object_object_add(t, "annotations",
                               annotations("Run code in a sandbox", false, true, false,
                                           cfg && cfg->backend == SBX_BACKEND_NAIVE));
        return t;
}

static json_object *read_workspace_tool(const struct sbx_config *cfg)
{
        static const char *const required_in[] = {"path", NULL};
        json_object *t = json_object_new_object();
        json_object *in = json_object_new_object(), *props = json_object_new_object();
        size_t cap = cfg ? cfg->max_output_bytes : 20000;
        _cleanup_free_ char *desc = xasprintf(
            "Read a text file from the sandbox's /workspace folder (the files run_code "
            "leaves there). Give a path relative to the workspace, such as 'out/report.txt'. "
            "Absolute paths, '..' escapes and symlinks are refused, since sandboxed code can "
            "plant symlinks pointing anywhere on this machine. Text longer than %zu bytes is "
            "cut and says so; binary files are reported by size, not shown.",
            cap);

        json_object_object_add(t, "name", jstr("read_workspace"));
        json_object_object_add(t, "title", jstr("Read a workspace file"));
        json_object_object_add(t, "description", jstr(desc));
        json_object_object_add(props, "path", prop("string", "File path relative to /workspace."));
        json_object_object_add(in, "type", jstr("object"));
        json_object_object_add(in, "properties", props);
        json_object_object_add(in, "required", strings(required_in));
        json_object_object_add(t, "inputSchema", in);
        json_object_object_add(t, "annotations",
                               annotations("Read a workspace file", true, false, true, false));
        return t;
}

json_object *tools_list_json_for(const struct sbx_config *cfg)
{
        json_object *a = json_object_new_array();

        json_object_array_add(a, run_code_tool(cfg));
        json_object_array_add(a, read_workspace_tool(cfg));
        return a;
}

json_object *tools_list_json(void)
{
        return tools_list_json_for(NULL);
}

/* --- arguments ------------------------------------------------------------------------- */

static void result_error(struct tool_result *ret, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void result_error(struct tool_result *ret, const char *fmt, ...)
{
        va_list ap;
        char buf[1024];

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        ret->text = xstrdup(buf);
        ret->is_error = true;
        ret->structured = NULL;
}

/* timeout_seconds as an integer: JSON integers; floats with no fraction (30.0); strings
 * holding either ("30", " 30 ", "30.0"), since some clients send numbers as strings.
 * Return 0 and *ret, -ERANGE for a fraction, -EINVAL for anything else. */
static int coerce_seconds(json_object *v, long long *ret)
{
        double d;

        switch (json_object_get_type(v)) {
        case json_type_int:
                *ret = json_object_get_int64(v);
                return 0;
        case json_type_double:
                d = json_object_get_double(v);
                break;
        case json_type_string: {
                const char *s = json_object_get_string(v);
                char *end = NULL;

                while (isspace((unsigned char)*s))
                        s++;
                if (!*s)
                        return -EINVAL;
                errno = 0;
                d = strtod(s, &end);
                if (errno || end == s)
                        return -EINVAL;
                while (isspace((unsigned char)*end))
                        end++;
                if (*end)
                        return -EINVAL;
                break;
        }
        default:
                return -EINVAL;
        }
        if (!(d == d) || d > 1e9 || d < -1e9) { /* NaN, or far out of any range */
                *ret = d > 0 ? 1000000000LL : -1000000000LL;
                return d == d ? 0 : -EINVAL;
        }
        if (d != (double)(long long)d)
                return -ERANGE;
        *ret = (long long)d;
        return 0;
}

static const char *outcome_name(enum run_outcome o)
{
        switch (o) {
        case RUN_OUTCOME_EXITED:
                return "exited";
        case RUN_OUTCOME_SIGNALED:
                return "signaled";
        case RUN_OUTCOME_TIMED_OUT:
                return "timed_out";
        case RUN_OUTCOME_CANCELLED:
                return "cancelled";
        case RUN_OUTCOME_FLOODED:
                return "flooded";
        case RUN_OUTCOME_NONE:
        default:
                return "not_run";
        }
}

static json_object *measure_json(const struct run_measure *m, uint64_t div)
{
        if (!m->measured)
                return NULL;
        return json_object_new_int64((int64_t)((m->value + div / 2) / div));
}

static json_object *stream_json(const struct run_stream *s, size_t cap)
{
        size_t shown = s->len < cap ? s->len : cap;
        _cleanup_free_ char *t = NULL;

        if (s->total > shown)
                shown = sbx_utf8_cut(s->data, shown);
        t = sbx_text_sanitize(s->data, shown);
        return json_object_new_string(t);
}

static json_object *structured_result(const struct run_result *r, size_t cap)
{
        json_object *o = json_object_new_object(), *u = json_object_new_object();
        const char *abbrev;

        json_object_object_add(o, "stdout", stream_json(&r->out, cap));
        json_object_object_add(o, "stderr", stream_json(&r->err, cap));
        json_object_object_add(o, "stdout_bytes", json_object_new_int64((int64_t)r->out.total));
        json_object_object_add(o, "stderr_bytes", json_object_new_int64((int64_t)r->err.total));
        json_object_object_add(o, "exit_code",
                               r->outcome == RUN_OUTCOME_EXITED ? json_object_new_int(r->exit_code)
                                                                : NULL);
        abbrev = r->outcome == RUN_OUTCOME_SIGNALED ? sigabbrev_np(r->term_signal) : NULL;
        if (abbrev) {
                _cleanup_free_ char *sig = xasprintf("SIG%s", abbrev);

                json_object_object_add(o, "signal", jstr(sig));
        } else
                json_object_object_add(o, "signal", NULL);
        json_object_object_add(o, "outcome", jstr(outcome_name(r->outcome)));
        json_object_object_add(o, "timed_out",
                               json_object_new_boolean(r->outcome == RUN_OUTCOME_TIMED_OUT));
        {
                _cleanup_free_ char *iso =
                    sbx_text_sanitize(r->isolation, strnlen(r->isolation, sizeof(r->isolation)));

                json_object_object_add(o, "isolation", jstr(iso));
        }
        json_object_object_add(u, "wall_ms", json_object_new_int64((int64_t)r->usage.wall_ms));
        json_object_object_add(u, "cpu_ms", measure_json(&r->usage.cpu_us, 1000));
        json_object_object_add(u, "mem_peak_bytes", measure_json(&r->usage.mem_peak_bytes, 1));
        json_object_object_add(u, "pids_peak", measure_json(&r->usage.pids_peak, 1));
        json_object_object_add(o, "usage", u);
        return o;
}

/* A string argument, or NULL (then @ret says why). */
static const char *string_arg(json_object *args, const char *key, size_t *ret_len,
                              struct tool_result *ret)
{
        json_object *v = NULL;

        if (!json_object_object_get_ex(args, key, &v) || !v) {
                result_error(ret, "Blocked: missing required argument '%s'", key);
                return NULL;
        }
        if (!json_object_is_type(v, json_type_string)) {
                result_error(ret, "Blocked: argument '%s' must be a string, not %s", key,
                             json_type_to_name(json_object_get_type(v)));
                return NULL;
        }
        /* A caller that takes no length reads a C string: a NUL would cut it short, so
         * "a\u0000/../../etc/passwd" would name "a". */
        if (!ret_len &&
            strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v)) {
                result_error(ret,
                             "Blocked: argument '%s' contains a NUL character (\\u0000), which "
                             "no name or path can hold; remove it and call again",
                             key);
                return NULL;
        }
        if (ret_len)
                *ret_len = (size_t)json_object_get_string_len(v);
        return json_object_get_string(v);
}

static void call_run_code(struct run_service *svc, json_object *args, const struct tool_ctx *ctx,
                          struct tool_result *ret)
{
        const struct sbx_config *cfg = run_service_config(svc);
        struct run_call call = {.cancel_fd = ctx ? ctx->cancel_fd : -1};
        struct run_result res = {0};
        struct sbx_error err = {0};
        json_object *v = NULL;
        unsigned timeout_s;
        int r;

        /* An invalid config refuses every call first, whatever the arguments. */
        if (cfg->invalid) {
                result_error(ret, "Blocked: %s", cfg->invalid_msg);
                return;
        }
        call.language = string_arg(args, "language", NULL, ret);
        if (!call.language)
                return;
        call.code = string_arg(args, "code", &call.code_len, ret);
        if (!call.code)
                return;
        if (json_object_object_get_ex(args, "timeout_seconds", &v) && v) {
                long long t = 0;

                r = coerce_seconds(v, &t);
                if (r == -ERANGE) {
                        result_error(ret,
                                     "Blocked: timeout_seconds must be a whole number of seconds "
                                     "between 1 and %u",
                                     cfg->max_timeout_s);
                        return;
                }
                if (r < 0) {
                        result_error(ret,
                                     "Blocked: timeout_seconds must be an integer between 1 and "
                                     "%u",
                                     cfg->max_timeout_s);
                        return;
                }
                if (t < 1) {
                        result_error(ret,
                                     "Blocked: timeout_seconds must be between 1 and %u "
                                     "(VESTIBULE_MAX_TIMEOUT_S); got %lld: retry with a value in "
                                     "that range",
                                     cfg->max_timeout_s, t);
                        return;
                }
                call.timeout_s = t;
        }
        if (ctx) {
                call.progress = ctx->progress;
                call.progress_userdata = ctx->progress_userdata;
        }

        r = run_service_execute(svc, &call, &res, &err);
        if (r < 0) {
                result_error(ret, "Blocked: %s", err.msg[0] ? err.msg : "the run was refused");
                run_result_done(&res);
                return;
        }
        timeout_s = call.timeout_s > 0 ? (unsigned)call.timeout_s : cfg->default_timeout_s;
        ret->text = run_result_format(&res, timeout_s, cfg->max_output_bytes);
        ret->is_error = !(res.outcome == RUN_OUTCOME_EXITED && res.exit_code == 0);
        ret->structured = structured_result(&res, cfg->max_output_bytes);
        run_result_done(&res);
}

static void call_read_workspace(struct run_service *svc, json_object *args, struct tool_result *ret)
{
        struct sbx_error err = {0};
        const char *path;
        char *text = NULL;
        int r;

        if (run_service_config(svc)->invalid) {
                result_error(ret, "Blocked: %s", run_service_config(svc)->invalid_msg);
                return;
        }
        path = string_arg(args, "path", NULL, ret);
        if (!path)
                return;
        r = run_service_read_workspace(svc, path, &text, &err);
        if (r < 0) {
                result_error(ret, "%s", err.msg[0] ? err.msg : "cannot read that file");
                return;
        }
        ret->text = text;
        ret->is_error = false;
        ret->structured = NULL;
}

int tools_call(struct run_service *svc, const char *name, json_object *args,
               const struct tool_ctx *ctx, struct tool_result *ret, struct sbx_error *err)
{
        json_object *empty = NULL;
        int r = 0;

        memset(ret, 0, sizeof(*ret));
        if (!name || (strcmp(name, "run_code") != 0 && strcmp(name, "read_workspace") != 0))
                return sbx_fail(err, ENOENT,
                                "unknown tool '%s': the tools are run_code and "
                                "read_workspace",
                                name ? name : "");
        if (args && !json_object_is_type(args, json_type_object))
                return sbx_fail(err, EINVAL, "arguments of '%s' must be an object", name);
        if (!args)
                args = empty = json_object_new_object();

        if (strcmp(name, "run_code") == 0)
                call_run_code(svc, args, ctx, ret);
        else
                call_read_workspace(svc, args, ret);
        if (empty)
                json_object_put(empty);
        return r;
}
