/* tools.c - run_code and read_workspace as MCP tools: what the agent reads about them, their
 * schemas, argument coercion, and a call turned into a tool result. See tools.h. */
#include "tools/tools.h"
#include "tools/content.h"

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
        if (r->content)
                json_object_put(r->content);
        r->content = NULL;
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

/* docs/design/results.md, "Annotations": destructive when code can overwrite and delete the
 * files in the workspace it shares with the user; read-only when the workspace is read-only
 * (nothing a run does survives it). Never idempotent. Open-world only when the naive backend
 * runs the code on the host, with the network. */
static json_object *run_code_annotations(const struct sbx_config *cfg)
{
        bool naive = cfg && cfg->backend == SBX_BACKEND_NAIVE;
        bool ro = cfg && cfg->workspace_ro && !naive;

        return annotations("Run code in a sandbox", ro, !ro, false, naive);
}

static char *run_code_description(const struct sbx_config *cfg)
{
        unsigned def = cfg ? cfg->default_timeout_s : 10, max = cfg ? cfg->max_timeout_s : 60;
        unsigned mem = cfg ? cfg->mem_mb : 256, cpu = cfg ? cfg->cpu_pct : 75;
        unsigned pids = cfg ? cfg->pids_max : 128, tmp = cfg ? cfg->tmpfs_mb : 64;
        size_t out = cfg ? cfg->max_output_bytes : 20000;
        unsigned images = cfg ? cfg->max_images : 4;
        size_t image_bytes = cfg ? cfg->max_image_bytes : 1048576;
        bool ro = cfg && cfg->workspace_ro;

        if (cfg && cfg->backend == SBX_BACKEND_NAIVE)
                return xasprintf(
                    "Run a python, node or bash program and return its output. DEVELOPMENT "
                    "MODE (VESTIBULE_BACKEND=naive): the code runs directly on this machine "
                    "with NO sandbox - it can reach the network and the user's files. Each "
                    "run starts in the workspace folder with a fresh temporary $HOME, stdin "
                    "at end of file and a minimal environment. Timeout: %u s by default, "
                    "timeout_seconds up to %u. Output shown is capped at %zu bytes per stream. "
                    "The result ends with an 'isolation:' line (here 'none'). Use "
                    "read_workspace to read files from the workspace.",
                    def, max, out);
        /* The limits are what is asked of the sandbox; whether the kernel or the engine
         * applies them depends on the grade this host gives, which is only known once a run
         * is set up. So this promises the request, and each result says what was applied. */
        return xasprintf(
            "Run a python, node or bash program in a fresh, throwaway sandbox and return its "
            "stdout, stderr, exit code and resource usage. Each call starts from scratch: "
            "nothing but /workspace survives between runs, and nothing there runs at a start: "
            "packages pip installs into /workspace/.local/lib/python3.*/site-packages are "
            "importable by later runs (after the standard library, before the image's "
            "packages), but Python runs no .pth file, sitecustomize or usercustomize from "
            "there (sessions and python3 from bash included; `python3 -c` and `-m` import "
            "from the working directory first, as Python does); /workspace/.local/bin comes "
            "after the image's folders in PATH. The sandbox has no "
            "network (unless "
            "network is \"allowlist\", see below), and none of the host's files except the "
            "/workspace folder (the only persistent "
            "place, %s; files there are shared with the user). The root filesystem is "
            "read-only; /tmp is a %u MiB scratch space and also $HOME. Limits requested per "
            "run: %u MiB memory, %u%% of one CPU core, %u processes; whether they are applied "
            "depends on the isolation this host gives, and each result says so (its "
            "'isolation:' grade names any limit not applied). stdin is at end of file (no "
            "input can be given), the environment is minimal, and the working directory is "
            "/workspace. Timeout: %u s by default; set timeout_seconds up to %u. Output shown "
            "is capped at %zu bytes per stream (longer output keeps its start and its end, and "
            "a run printing more than twice that is stopped). A non-zero exit or a timeout "
            "comes back as an error result; a cancelled call gets no reply at all (MCP: a "
            "cancelled request is not answered). The result ends with an 'isolation:' line "
            "saying what protected the run. Files the run creates or changes in /workspace are "
            "listed in the result; images among them (PNG, JPEG, GIF, WebP) come back as "
            "images, at most %u of at most %zu bytes each. Where the python image has "
            "matplotlib (setup --python-data: numpy, pandas, matplotlib, scipy), it draws "
            "off-screen and a plain plt.show() saves each figure as /workspace/figure-N.png, "
            "so it comes back. To read files from the workspace, use the read_workspace tool "
            "rather than host file tools: it refuses symlinks, which sandboxed code can plant "
            "there. Set network to \"allowlist\" only for a call that needs the network (pip "
            "install, npm install, a download): the run then reaches the hosts the user listed "
            "in VESTIBULE_EGRESS_ALLOW (%s) on ports %s, and nothing else, through an HTTP "
            "proxy the sandbox's HTTP_PROXY and HTTPS_PROXY point at. There is no other route "
            "and no DNS inside: a client that ignores proxy variables (Node's built-in fetch, a "
            "raw socket) gets no connection. pip installs into /workspace/.local and npm into "
            "/workspace/node_modules, so the next call imports them, with or without network. "
            "The result's 'egress:' line lists each host:port tried, allowed or denied and "
            "why.",
            ro ? "read-only in this configuration" : "read-write", tmp, mem, cpu, pids, def, max,
            out, images, image_bytes,
            cfg && cfg->egress.allow_raw && cfg->egress.allow_raw[0]
                ? cfg->egress.allow_raw
                : "none listed: every host is refused",
            cfg && cfg->egress.ports_raw && cfg->egress.ports_raw[0] ? cfg->egress.ports_raw
                                                                     : "443,80");
}

/* A stream's properties: the text shown, its tail when cut, bytes written and shown, and the
 * truncation note. docs/design/results.md. */
static void add_stream_props(json_object *props, const char *name)
{
        _cleanup_free_ char *k_tail = xasprintf("%s_tail", name);
        _cleanup_free_ char *k_bytes = xasprintf("%s_bytes", name);
        _cleanup_free_ char *k_shown = xasprintf("%s_bytes_shown", name);
        _cleanup_free_ char *k_trunc = xasprintf("%s_truncated", name);
        _cleanup_free_ char *d_text =
            xasprintf("What the program wrote to %s (escaped); its start when it was cut.", name);

        json_object_object_add(props, name, prop("string", d_text));
        json_object_object_add(props, k_tail,
                               prop("string", "The end of the stream, when it was cut (the "
                                              "middle is not shown)."));
        json_object_object_add(props, k_bytes,
                               prop("integer", "Bytes the program wrote to the stream."));
        json_object_object_add(props, k_shown,
                               prop("integer", "Bytes of the stream shown (start and end)."));
        json_object_object_add(props, k_trunc,
                               prop("string", "Present when the stream was cut: how much is "
                                              "not shown."));
}

/* A usage figure: the number, or (never both) why it was not measured. */
static void add_measure_props(json_object *props, const char *name, const char *desc)
{
        _cleanup_free_ char *k_why = xasprintf("%s_not_measured", name);
        _cleanup_free_ char *d = xasprintf("%s Absent when not measured.", desc);
        _cleanup_free_ char *d_why =
            xasprintf("Why %s was not measured; absent when it was.", name);
        _cleanup_free_ char *k_least = xasprintf("%s_at_least", name);
        _cleanup_free_ char *d_least = xasprintf(
            "Present (true) when %s was sampled by the container engine about once a second: the "
            "true figure is at least this.",
            name);

        json_object_object_add(props, name, prop("integer", d));
        json_object_object_add(props, k_why, prop("string", d_why));
        json_object_object_add(props, k_least, prop("boolean", d_least));
}

/* run_code's input properties (inputSchema.properties). */
static json_object *run_code_input(const struct sbx_config *cfg)
{
        static const char *const langs[] = {"python", "node", "bash", NULL};
        unsigned def = cfg ? cfg->default_timeout_s : 10, max = cfg ? cfg->max_timeout_s : 60;
        json_object *props = json_object_new_object();
        json_object *p;
        _cleanup_free_ char *tdesc =
            xasprintf("Seconds before the run is killed; default %u, at most %u.", def, max);

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
        {
                static const char *const nets[] = {"none", "allowlist", NULL};
                p = prop("string",
                         "none (the default): no network at all. allowlist: only the hosts in "
                         "VESTIBULE_EGRESS_ALLOW, through the sandbox's HTTP(S)_PROXY; clients "
                         "that ignore proxy variables (Node's fetch) get no route.");
                json_object_object_add(p, "enum", strings(nets));
                json_object_object_add(props, "network", p);
        }
        json_object_object_add(props, "session",
                               prop("string", "A handle from session_start: run the code as the "
                                              "next cell of that live session (its variables, "
                                              "imports, functions and shell folder persist; "
                                              "the value of a last bare expression is "
                                              "printed). Leave out for a fresh sandbox."));
        return props;
}

/* run_code's outputSchema.properties.usage. */
static json_object *run_code_usage(void)
{
        static const char *const required_usage[] = {"wall_ms", NULL};
        json_object *usage = json_object_new_object(), *uprops = json_object_new_object();

        json_object_object_add(uprops, "wall_ms", prop("integer", "Wall-clock time."));
        json_object_object_add(uprops, "from_handover",
                               prop("boolean", "The sandbox was started ahead (a warm spare): "
                                               "wall and cpu count from the code's hand-over."));
        add_measure_props(uprops, "cpu_ms", "CPU time (user + system), ms.");
        add_measure_props(uprops, "mem_peak_bytes", "Peak memory.");
        add_measure_props(uprops, "pids_peak", "Most processes at once.");
        json_object_object_add(usage, "type", jstr("object"));
        json_object_object_add(usage, "properties", uprops);
        json_object_object_add(usage, "required", strings(required_usage));
        return usage;
}

/* The isolation grades alone (run_code's isolation_grade enum). */
static const char *const run_grades[] = {
    "gvisor", "native", "container", "gvisor-degraded", "native-degraded", "container-degraded",
    "none",   NULL};

/* run_code's output properties (outputSchema.properties). */
static json_object *run_code_output(void)
{
        static const char *const outcomes[] = {"exited",  "signaled", "timed_out", "cancelled",
                                               "flooded", "not_run",  NULL};
        json_object *oprops = json_object_new_object();
        json_object *p;

        add_stream_props(oprops, "stdout");
        add_stream_props(oprops, "stderr");
        json_object_object_add(oprops, "exit_code",
                               prop("integer", "Exit status; only when outcome is exited."));
        json_object_object_add(
            oprops, "signal",
            prop("string", "The signal that killed it, such as SIGKILL; only when outcome is "
                           "signaled."));
        p = prop("string", "How the run ended.");
        json_object_object_add(p, "enum", strings(outcomes));
        json_object_object_add(oprops, "outcome", p);
        json_object_object_add(oprops, "outcome_text",
                               prop("string", "How the run ended, in the text's words: 'exit "
                                              "code: 3', 'timed out after 7 s', 'stopped at N "
                                              "bytes of stdout: ...'."));
        json_object_object_add(oprops, "timed_out", prop("boolean", NULL));
        json_object_object_add(oprops, "stopped_at_bytes",
                               prop("integer", "A flooded run: the stream's byte count when the "
                                               "server stopped it."));
        json_object_object_add(oprops, "isolation",
                               prop("string", "What protected the run: gvisor, native, "
                                              "container, ...-degraded (why), or none (why)."));
        p = prop("string", "The isolation grade alone.");
        json_object_object_add(p, "enum", strings(run_grades));
        json_object_object_add(oprops, "isolation_grade", p);
        json_object_object_add(oprops, "isolation_reason",
                               prop("string", "Why the grade is degraded or none; absent for a "
                                              "full grade."));
        json_object_object_add(oprops, "limits_hit",
                               prop("string", "Limits the run reached; absent when none."));
        json_object_object_add(oprops, "out_of_memory",
                               prop("string", "Present when the kernel killed a process at the "
                                              "memory limit."));
        json_object_object_add(oprops, "blocked_syscalls",
                               prop("string", "System calls the sandbox refused, first-seen "
                                              "order; absent when none."));
        json_object_object_add(oprops, "blocked_syscalls_unlisted",
                               prop("integer", "Further refused calls whose names did not fit "
                                               "the list."));
        json_object_object_add(oprops, "blocked_reporting_stopped",
                               prop("string", "Present when reporting refused calls stopped at "
                                              "its cap."));
        json_object_object_add(oprops, "audit",
                               prop("string", "Present when the run's audit record was not "
                                              "written or not confirmed."));
        p = prop("array", "Other facts about the run, one per element.");
        json_object_object_add(p, "items", prop("string", NULL));
        json_object_object_add(oprops, "notes", p);
        json_object_object_add(
            oprops, "egress",
            prop("object", "Present when the call asked for network \"allowlist\": policy, "
                           "hosts (each host:port tried: host, port, verdict allowed|denied, "
                           "reason for a denial, connections, bytes_up, bytes_down, and "
                           "bytes_unknown: connections whose bytes were never recorded, left "
                           "out of the two), note when the proxy ended early, text (the "
                           "result's egress: line)."));

        json_object_object_add(oprops, "usage", run_code_usage());
        json_object_object_add(oprops, "session",
                               prop("string", "The session the call ran in; absent without "
                                              "one."));
        json_object_object_add(oprops, "session_call",
                               prop("integer", "This call's number in its session (1 = first)."));
        json_object_object_add(oprops, "session_age_ms",
                               prop("integer", "The session's age when the call ended."));
        json_object_object_add(oprops, "session_ended",
                               prop("string", "Present when this call ended its session: why, "
                                              "and how to start another."));
        tools_files_schema(oprops);
        return oprops;
}

static json_object *run_code_tool(const struct sbx_config *cfg)
{
        static const char *const required_in[] = {"language", "code", NULL};
        static const char *const required_out[] = {"isolation",
                                                   "isolation_grade",
                                                   "outcome",
                                                   "outcome_text",
                                                   "timed_out",
                                                   "stdout",
                                                   "stderr",
                                                   "stdout_bytes",
                                                   "stdout_bytes_shown",
                                                   "stderr_bytes",
                                                   "stderr_bytes_shown",
                                                   "usage",
                                                   NULL};
        json_object *t = json_object_new_object();
        json_object *in = json_object_new_object();
        json_object *out = json_object_new_object();
        _cleanup_free_ char *desc = run_code_description(cfg);

        json_object_object_add(t, "name", jstr("run_code"));
        json_object_object_add(t, "title", jstr("Run code in a sandbox"));
        json_object_object_add(t, "description", jstr(desc));
        json_object_object_add(in, "type", jstr("object"));
        json_object_object_add(in, "properties", run_code_input(cfg));
        json_object_object_add(in, "required", strings(required_in));
        json_object_object_add(t, "inputSchema", in);
        json_object_object_add(out, "type", jstr("object"));
        json_object_object_add(out, "properties", run_code_output());
        json_object_object_add(out, "required", strings(required_out));
        json_object_object_add(t, "outputSchema", out);
        json_object_object_add(t, "annotations", run_code_annotations(cfg));
        return t;
}

static json_object *read_workspace_tool(const struct sbx_config *cfg)
{
        static const char *const required_in[] = {"path", NULL};
        static const char *const required_out[] = {"path",   "bytes", "bytes_shown",
                                                   "binary", "text",  NULL};
        json_object *t = json_object_new_object();
        json_object *in = json_object_new_object(), *props = json_object_new_object();
        json_object *out = json_object_new_object(), *oprops = json_object_new_object();
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

        json_object_object_add(oprops, "path", prop("string", "The path as given (escaped)."));
        json_object_object_add(oprops, "bytes", prop("integer", "The file's size."));
        json_object_object_add(oprops, "bytes_shown", prop("integer", "Bytes of it in text."));
        json_object_object_add(oprops, "binary",
                               prop("boolean", "Not text (NUL bytes or invalid UTF-8): not "
                                               "shown."));
        json_object_object_add(oprops, "text",
                               prop("string", "The file's text (escaped); empty for an empty or "
                                              "binary file."));
        json_object_object_add(oprops, "truncated",
                               prop("string", "Present when the text was cut: how much is not "
                                              "shown."));
        json_object_object_add(oprops, "note",
                               prop("string", "Present for an empty or a binary file."));
        json_object_object_add(out, "type", jstr("object"));
        json_object_object_add(out, "properties", oprops);
        json_object_object_add(out, "required", strings(required_out));
        json_object_object_add(t, "outputSchema", out);
        json_object_object_add(t, "annotations",
                               annotations("Read a workspace file", true, false, true, false));
        return t;
}

static json_object *session_start_tool(const struct sbx_config *cfg)
{
        static const char *const langs[] = {"python", "node", "bash", NULL};
        static const char *const required_in[] = {"language", NULL};
        static const char *const required_out[] = {"session", "language", "isolation", NULL};
        json_object *t = json_object_new_object();
        json_object *in = json_object_new_object(), *props = json_object_new_object();
        json_object *out = json_object_new_object(), *oprops = json_object_new_object();
        json_object *p;
        _cleanup_free_ char *desc = xasprintf(
            "Start a session: one live sandbox with a python interpreter, a node context or a "
            "bash shell that keeps its state across run_code calls (pass the returned handle "
            "as run_code's session). Like notebook cells: variables, imports, functions and "
            "the shell's folder persist; a call that times out is interrupted and the session "
            "lives on. Processes a cell starts in the background keep running between calls, "
            "with no time limit of their own, until the session ends. At most %u sessions at "
            "once; one without a call for %u s ends. End it with session_end when done.",
            cfg ? cfg->max_sessions : 4, cfg ? cfg->session_idle_s : 900);

        json_object_object_add(t, "name", jstr("session_start"));
        json_object_object_add(t, "title", jstr("Start a live session"));
        json_object_object_add(t, "description", jstr(desc));
        p = prop("string", "The session's language: python, node or bash.");
        json_object_object_add(p, "enum", strings(langs));
        json_object_object_add(props, "language", p);
        json_object_object_add(in, "type", jstr("object"));
        json_object_object_add(in, "properties", props);
        json_object_object_add(in, "required", strings(required_in));
        json_object_object_add(t, "inputSchema", in);
        json_object_object_add(oprops, "session",
                               prop("string", "The handle to pass to run_code and session_end."));
        json_object_object_add(oprops, "language", prop("string", NULL));
        json_object_object_add(oprops, "isolation",
                               prop("string", "What protects the session's sandbox."));
        json_object_object_add(out, "type", jstr("object"));
        json_object_object_add(out, "properties", oprops);
        json_object_object_add(out, "required", strings(required_out));
        json_object_object_add(t, "outputSchema", out);
        json_object_object_add(t, "annotations",
                               annotations("Start a live session", false, false, false, false));
        return t;
}

static json_object *session_end_tool(void)
{
        static const char *const required_in[] = {"session", NULL};
        static const char *const required_out[] = {"session", "ended", "calls", "message", NULL};
        json_object *t = json_object_new_object();
        json_object *in = json_object_new_object(), *props = json_object_new_object();
        json_object *out = json_object_new_object(), *oprops = json_object_new_object();

        json_object_object_add(t, "name", jstr("session_end"));
        json_object_object_add(t, "title", jstr("End a session"));
        json_object_object_add(t, "description",
                               jstr("End a session started with session_start: its sandbox "
                                    "and everything in it (variables, files in its /tmp, "
                                    "processes) are gone."));
        json_object_object_add(props, "session", prop("string", "The handle to end."));
        json_object_object_add(in, "type", jstr("object"));
        json_object_object_add(in, "properties", props);
        json_object_object_add(in, "required", strings(required_in));
        json_object_object_add(t, "inputSchema", in);
        /* An outputSchema, so clients that hand the model only the structured content (Claude
         * Code, Codex, Mastra) hand it one that says the session ended. */
        json_object_object_add(oprops, "session",
                               prop("string", "The session that ended; its handle no longer "
                                              "works."));
        json_object_object_add(oprops, "ended", prop("boolean", "Always true: the session ended."));
        json_object_object_add(oprops, "calls",
                               prop("integer", "How many run_code calls the session served."));
        json_object_object_add(oprops, "message", prop("string", "The same, in words."));
        json_object_object_add(out, "type", jstr("object"));
        json_object_object_add(out, "properties", oprops);
        json_object_object_add(out, "required", strings(required_out));
        json_object_object_add(t, "outputSchema", out);
        json_object_object_add(t, "annotations",
                               annotations("End a session", false, true, true, false));
        return t;
}

json_object *tools_list_json_for(const struct sbx_config *cfg)
{
        json_object *a = json_object_new_array();

        json_object_array_add(a, run_code_tool(cfg));
        json_object_array_add(a, read_workspace_tool(cfg));
        json_object_array_add(a, session_start_tool(cfg));
        json_object_array_add(a, session_end_tool());
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
        /* messages may quote what a run or an engine left (paths, image names): escaped */
        ret->text = sbx_text_sanitize(buf, strlen(buf));
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

static void add_str(json_object *o, const char *key, const char *v)
{
        if (v)
                json_object_object_add(o, key, jstr(v));
}

static void add_int(json_object *o, const char *key, uint64_t v)
{
        json_object_object_add(o, key,
                               json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t)v));
}

static void stream_json(json_object *o, const char *name, const struct run_view_stream *vs)
{
        _cleanup_free_ char *k_tail = xasprintf("%s_tail", name);
        _cleanup_free_ char *k_bytes = xasprintf("%s_bytes", name);
        _cleanup_free_ char *k_shown = xasprintf("%s_bytes_shown", name);
        _cleanup_free_ char *k_trunc = xasprintf("%s_truncated", name);

        add_str(o, name, vs->head);
        add_str(o, k_tail, vs->tail);
        add_int(o, k_bytes, vs->bytes);
        add_int(o, k_shown, vs->shown);
        add_str(o, k_trunc, vs->truncated);
}

/* A usage figure: the number when measured, else "<name>_not_measured": why. */
static void measure_json(json_object *u, const char *name, const struct run_measure *m,
                         const char *why, uint64_t div)
{
        if (m->measured) {
                add_int(u, name, (m->value + div / 2) / div);
                if (m->at_least) { /* sampled by the engine: the text says "at least" */
                        _cleanup_free_ char *k = xasprintf("%s_at_least", name);

                        json_object_object_add(u, k, json_object_new_boolean(true));
                }
        } else {
                _cleanup_free_ char *k = xasprintf("%s_not_measured", name);

                add_str(u, k, why);
        }
}

json_object *tools_egress_json(const struct run_egress *g, const struct run_view *v)
{
        json_object *o = json_object_new_object(), *hosts = json_object_new_array();

        add_str(o, "policy", "allowlist");
        for (size_t i = 0; i < g->n_entries; i++) {
                const struct run_egress_entry *e = &g->entries[i];
                json_object *h = json_object_new_object();
                add_str(h, "host", v->egress_hosts[i]);
                add_int(h, "port", e->port);
                add_str(h, "verdict", e->allowed ? "allowed" : "denied");
                add_str(h, "reason", e->reason);
                add_int(h, "connections", e->connections);
                add_int(h, "bytes_up", e->bytes_up);
                add_int(h, "bytes_down", e->bytes_down);
                if (e->bytes_unknown) /* their bytes are left out of bytes_up and bytes_down */
                        add_int(h, "bytes_unknown", e->bytes_unknown);
                json_object_array_add(hosts, h);
        }
        json_object_object_add(o, "hosts", hosts);
        if (g->records_dropped)
                add_int(o, "unlisted", g->records_dropped);
        add_str(o, "note", v->egress_note);
        add_str(o, "text", v->egress);
        return o;
}

/* structuredContent of a run: docs/design/results.md. Every string comes from @v, the same
 * strings the text block is made of. No nulls: a fact that does not apply is left out. */
static json_object *structured_result(const struct run_result *r, const struct run_view *v)
{
        json_object *o = json_object_new_object(), *u = json_object_new_object();

        add_str(o, "isolation", v->isolation);
        add_str(o, "isolation_grade", v->isolation_grade);
        add_str(o, "isolation_reason", v->isolation_reason);
        add_str(o, "outcome", run_outcome_name(r->outcome));
        add_str(o, "outcome_text", v->outcome_text);
        if (r->outcome == RUN_OUTCOME_EXITED)
                json_object_object_add(o, "exit_code", json_object_new_int(r->exit_code));
        if (r->outcome == RUN_OUTCOME_SIGNALED) {
                const char *abbrev = sigabbrev_np(r->term_signal);
                _cleanup_free_ char *sig =
                    abbrev ? xasprintf("SIG%s", abbrev) : xasprintf("signal %d", r->term_signal);

                add_str(o, "signal", sig);
        }
        json_object_object_add(o, "timed_out",
                               json_object_new_boolean(r->outcome == RUN_OUTCOME_TIMED_OUT));
        if (v->stopped_at)
                add_int(o, "stopped_at_bytes", v->stopped_at);
        stream_json(o, "stdout", &v->out);
        stream_json(o, "stderr", &v->err);

        add_int(u, "wall_ms", r->usage.wall_ms);
        if (r->usage.from_handover)
                json_object_object_add(u, "from_handover", json_object_new_boolean(true));
        measure_json(u, "cpu_ms", &r->usage.cpu_us, v->not_measured[0], 1000);
        measure_json(u, "mem_peak_bytes", &r->usage.mem_peak_bytes, v->not_measured[1], 1);
        measure_json(u, "pids_peak", &r->usage.pids_peak, v->not_measured[2], 1);
        json_object_object_add(o, "usage", u);

        add_str(o, "limits_hit", v->limits_hit);
        add_str(o, "out_of_memory", v->out_of_memory);
        add_str(o, "blocked_syscalls", v->blocked_syscalls);
        if (v->blocked_syscalls_unlisted)
                add_int(o, "blocked_syscalls_unlisted", v->blocked_syscalls_unlisted);
        add_str(o, "blocked_reporting_stopped", v->blocked_reporting_stopped);
        add_str(o, "audit", v->audit);
        if (v->egress_on)
                json_object_object_add(o, "egress", tools_egress_json(&r->egress, v));
        if (r->session[0]) {
                add_str(o, "session", r->session);
                add_int(o, "session_call", r->session_call);
                add_int(o, "session_age_ms", r->session_age_ms);
                add_str(o, "session_ended", v->session_ended);
        }
        if (v->n_notes > 0) {
                json_object *a = json_object_new_array();

                for (size_t i = 0; i < v->n_notes; i++)
                        json_object_array_add(a, jstr(v->notes[i]));
                json_object_object_add(o, "notes", a);
        }
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

/* structuredContent's files, files_more, files_note and images_attached, and the images as
 * content items after the text (tools/content.h). */
static void add_files(struct tool_result *ret, const struct run_result *res,
                      const struct run_view *view)
{
        const char *img_note = NULL;

        json_object_object_add(ret->structured, "files", tools_files_json(res));
        add_int(ret->structured, "files_more", res->files_more);
        add_str(ret->structured, "files_note", view->files_note);
        ret->content = tools_image_items(res, &img_note);
        add_int(ret->structured, "images_attached", json_object_array_length(ret->content));
        if (img_note) {
                char *t = xasprintf("%s\nnote: %s", ret->text, img_note);

                free(ret->text);
                ret->text = t;
        }
}

static void call_run_code(struct run_service *svc, json_object *args, const struct tool_ctx *ctx,
                          struct tool_result *ret)
{
        const struct sbx_config *cfg = run_service_config(svc);
        struct run_call call = {.cancel_fd = ctx ? ctx->cancel_fd : -1};
        struct run_result res = {0};
        struct run_view view;
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
        if (json_object_object_get_ex(args, "network", &v) && v) {
                call.network = string_arg(args, "network", NULL, ret);
                if (!call.network)
                        return;
        }
        if (json_object_object_get_ex(args, "session", &v) && v &&
            !json_object_is_type(v, json_type_null)) {
                call.session = string_arg(args, "session", NULL, ret);
                if (!call.session)
                        return;
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
        run_view_build(&view, &res, timeout_s, cfg->max_output_bytes);
        ret->text = run_view_text(&view);
        ret->is_error = !(res.outcome == RUN_OUTCOME_EXITED && res.exit_code == 0);
        ret->structured = structured_result(&res, &view);
        add_files(ret, &res, &view);
        run_view_done(&view);
        run_result_done(&res);
}

static void call_read_workspace(struct run_service *svc, json_object *args, struct tool_result *ret)
{
        struct sbx_error err = {0};
        struct run_ws_file f;
        const char *path;
        size_t path_len = 0;
        json_object *o;
        int r;

        if (run_service_config(svc)->invalid) {
                result_error(ret, "Blocked: %s", run_service_config(svc)->invalid_msg);
                return;
        }
        path = string_arg(args, "path", &path_len, ret);
        if (!path)
                return;
        /* the path is used as a C string: a NUL would cut it short, so
         * "a\u0000/../../etc/passwd" would name "a" (issue 12 #16) */
        if (strlen(path) != path_len) {
                result_error(ret, "Blocked: argument 'path' contains a NUL character (\\u0000), "
                                  "which no path can hold; remove it and call again");
                return;
        }
        r = run_service_read_workspace_file(svc, path, &f, &err);
        if (r < 0) {
                result_error(ret, "%s", err.msg[0] ? err.msg : "cannot read that file");
                return;
        }
        ret->text = run_ws_file_text(&f);
        ret->is_error = false;
        o = json_object_new_object();
        {
                _cleanup_free_ char *p = sbx_text_sanitize_line(path, path_len);

                add_str(o, "path", p);
        }
        add_int(o, "bytes", f.bytes);
        add_int(o, "bytes_shown", f.bytes_shown);
        json_object_object_add(o, "binary", json_object_new_boolean(f.binary));
        add_str(o, "text", f.text);
        add_str(o, "truncated", f.truncated);
        add_str(o, "note", f.note);
        ret->structured = o;
        if (f.blob) {
                struct sbx_error e2 = {0};
                json_object *item = f.mime ? tools_image_content(f.mime, f.blob, f.blob_len, &e2)
                                           : tools_blob_content(path, f.blob, f.blob_len, &e2);

                if (item) {
                        ret->content = json_object_new_array();
                        json_object_array_add(ret->content, item);
                } else {
                        _cleanup_free_ char *why = sbx_text_sanitize_line(e2.msg, strlen(e2.msg));
                        char *t = xasprintf("%s\nnote: not attached: %s", ret->text, why);

                        free(ret->text);
                        ret->text = t;
                }
        }
        run_ws_file_done(&f);
}

static void call_session_start(struct run_service *svc, json_object *args, struct tool_result *ret)
{
        struct run_session_started st;
        struct sbx_error err = {0};
        const char *language = string_arg(args, "language", NULL, ret);
        json_object *o;

        if (!language)
                return;
        if (run_service_session_start(svc, language, &st, &err) < 0) {
                result_error(ret, "Blocked: %s", err.msg[0] ? err.msg : "no session was started");
                return;
        }
        ret->text = xasprintf("session: %s\nPass it as run_code's session; end it with "
                              "session_end.\n%s%s%sisolation: %s",
                              st.id, st.audit_note[0] ? "audit: " : "", st.audit_note,
                              st.audit_note[0] ? "\n" : "", st.isolation);
        ret->is_error = false;
        o = json_object_new_object();
        add_str(o, "session", st.id);
        add_str(o, "language", language);
        add_str(o, "isolation", st.isolation);
        ret->structured = o;
}

static void call_session_end(struct run_service *svc, json_object *args, struct tool_result *ret)
{
        struct sbx_error err = {0};
        unsigned long long calls = 0;
        const char *id = string_arg(args, "session", NULL, ret);
        json_object *o;

        if (!id)
                return;
        if (run_service_session_end(svc, id, &calls, &err) < 0) {
                result_error(ret, "Blocked: %s",
                             err.msg[0] ? err.msg : "the session was not ended");
                return;
        }
        ret->text = xasprintf("session %s ended after %llu calls; its handle no longer works "
                              "(session_start starts a new one)",
                              id, calls);
        ret->is_error = false;
        o = json_object_new_object();
        add_str(o, "session", id);
        json_object_object_add(o, "ended", json_object_new_boolean(1));
        add_int(o, "calls", calls);
        add_str(o, "message", ret->text);
        ret->structured = o;
}

int tools_call(struct run_service *svc, const char *name, json_object *args,
               const struct tool_ctx *ctx, struct tool_result *ret, struct sbx_error *err)
{
        json_object *empty = NULL;
        int r = 0;

        memset(ret, 0, sizeof(*ret));
        if (!name || (strcmp(name, "run_code") != 0 && strcmp(name, "read_workspace") != 0 &&
                      strcmp(name, "session_start") != 0 && strcmp(name, "session_end") != 0))
                return sbx_fail(err, ENOENT,
                                "unknown tool '%s': the tools are run_code, read_workspace, "
                                "session_start and session_end",
                                name ? name : "");
        if (args && !json_object_is_type(args, json_type_object))
                return sbx_fail(err, EINVAL, "arguments of '%s' must be an object", name);
        if (!args)
                args = empty = json_object_new_object();

        if (strcmp(name, "run_code") == 0)
                call_run_code(svc, args, ctx, ret);
        else if (strcmp(name, "session_start") == 0)
                call_session_start(svc, args, ret);
        else if (strcmp(name, "session_end") == 0)
                call_session_end(svc, args, ret);
        else
                call_read_workspace(svc, args, ret);
        if (empty)
                json_object_put(empty);
        return r;
}
