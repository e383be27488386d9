/* server.c - the serve loop: reads stdin without pause, dispatches each message by revision
 * (legacy after initialize, or the stateless 2026-07-28 decided per request), runs every
 * tools/call on its own worker thread, routes notifications/cancelled and progress, and shuts
 * down on EOF, SIGTERM/SIGINT or a broken stdout. Spec: docs/design/mcp-protocol.md §1-7;
 * <rev>/basic/utilities/cancellation.mdx, progress.mdx; 2026-07-28/basic/patterns/
 * subscriptions.mdx; <rev>/server/tools.mdx; 2025-03-26/basic/index.mdx §Batching. */
#include "mcp/mcp-internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"

#define DEFAULT_MAX_WORKERS 8u
#define TOOLS_TTL_MS 3600000 /* the tool list is fixed for the life of the process */
/* Open subscriptions/listen streams at once. A client needs one; each costs a list entry that
 * every request's id check walks, so without a cap 60,000 of them cost 30 s of CPU. With it,
 * srv->calls holds at most max_workers + MAX_LISTENS unfinished entries, and the walk is
 * bounded by that constant. */
#define MAX_LISTENS 16u

/* Worker threads only run the protocol glue and the tool's own code path; the default 8 MiB
 * stack per call would be mostly waste. The sanitizers' frames are several times larger. */
#if defined(__SANITIZE_ADDRESS__)
#define WORKER_STACK_BYTES ((size_t)1 << 20)
#else
#define WORKER_STACK_BYTES ((size_t)256 << 10)
#endif

struct mcp_server;

/* Responses of one 2025-03-26 batch, sent as one array when the last request is done. */
struct mcp_batch {
        struct mcp_server *srv;
        pthread_mutex_t mu;
        unsigned refs;
        json_object *responses;
};

enum call_kind {
        CALL_TOOL,   /* tools/call on a worker thread */
        CALL_LISTEN, /* 2026-07-28 subscriptions/listen: open until cancelled or shutdown */
};

/* One request in flight. Lives on srv->calls until the serve loop reaps it. */
struct mcp_call {
        struct mcp_call *next;
        struct mcp_server *srv;
        enum call_kind kind;
        struct mcp_id id;
        enum mcp_rev rev;
        bool modern;
        char *name;        /* CALL_TOOL; owned */
        json_object *args; /* CALL_TOOL; owned, touched only by the worker */
        int cancel_fd;     /* eventfd, readable once cancelled or at shutdown */
        struct mcp_batch *batch;

        /* Under srv->mu. */
        bool cancelled; /* the client cancelled it: its reply is dropped */
        bool replying;  /* the reply is being sent: a cancel now is too late and ignored */
        bool finished;  /* nothing more happens; the thread (if any) can be joined */
        bool has_thread;
        pthread_t thread;

        /* Progress, under pmu: a notification is written while holding it, and the worker
         * sets done under it before replying, so none can follow the reply. */
        pthread_mutex_t pmu;
        bool done;
        struct mcp_id token; /* MCP_ID_NONE: the request asked for no progress */
        bool progress_sent;
        double last_progress;
        uint64_t last_progress_ms;
};

struct mcp_server {
        const struct mcp_handlers *h;
        struct mcp_writer w;
        json_object *tools; /* handlers->tools_list() once, newest shape; main thread only */
        enum mcp_rev rev;   /* negotiated by the last initialize; main thread only */
        bool initialized;
        unsigned max_workers;
        unsigned progress_interval_ms;
        int wake_fd; /* eventfd: a worker finished or the writer failed */

        pthread_mutex_t mu; /* guards calls, running and every call's flags above */
        pthread_cond_t cond;
        struct mcp_call *calls;
        unsigned running;   /* CALL_TOOL workers not yet finished */
        unsigned listening; /* CALL_LISTEN streams not yet finished */
};

/* How much of a client's name (a method, a tool) an error quotes back: a 10 MiB name must
 * not make the reply itself too long for one line. */
#define ECHO_MAX_BYTES 100

/* "@what: '@name'@tail", the name cut at ECHO_MAX_BYTES with "..." after it. */
static char *quote_name(const char *what, const char *name, const char *tail)
{
        const char *mark;

        name = name ? name : "";
        mark = strnlen(name, ECHO_MAX_BYTES + 1) > ECHO_MAX_BYTES ? "..." : "";
        return xasprintf("%s: '%.*s%s'%s", what, ECHO_MAX_BYTES, name, mark, tail);
}

static void wake(struct mcp_server *s)
{
        uint64_t one = 1;

        (void)!write(s->wake_fd, &one, sizeof(one));
}

static void json_putp(json_object **v)
{
        json_object_put(*v);
}

/* @v's string, or "?" when it is not a string. */
static const char *jstring(json_object *v)
{
        return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "?";
}

static json_object *obj_get(json_object *o, const char *key)
{
        json_object *v = NULL;

        if (o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, key, &v))
                return v;
        return NULL;
}

/* ---- sending ---- */

static void batch_add(struct mcp_batch *b, json_object *msg)
{
        pthread_mutex_lock(&b->mu);
        json_object_array_add(b->responses, msg);
        pthread_mutex_unlock(&b->mu);
}

static void batch_ref(struct mcp_batch *b)
{
        pthread_mutex_lock(&b->mu);
        b->refs++;
        pthread_mutex_unlock(&b->mu);
}

static void batch_unref(struct mcp_batch *b)
{
        bool last;

        pthread_mutex_lock(&b->mu);
        last = --b->refs == 0;
        pthread_mutex_unlock(&b->mu);
        if (!last)
                return;
        /* Nothing at all when every element was a notification (or a cancelled request). */
        if (json_object_array_length(b->responses) > 0)
                (void)mcp_writer_send(&b->srv->w, b->responses);
        json_object_put(b->responses);
        pthread_mutex_destroy(&b->mu);
        free(b);
}

/* Send @msg (taken) now, or keep it for its batch. */
static void send_msg(struct mcp_server *s, struct mcp_batch *b, json_object *msg)
{
        if (b) {
                batch_add(b, msg);
                return;
        }
        (void)mcp_writer_send(&s->w, msg);
        json_object_put(msg);
}

static void send_error(struct mcp_server *s, struct mcp_batch *b, const struct mcp_id *id, int code,
                       const char *message, json_object *data)
{
        char idbuf[96];

        char safe[256];

        log_debug("request %s: error %d: %s", id ? mcp_id_describe(id, idbuf, sizeof(idbuf)) : "-",
                  code, mcp_log_safe(message, safe, sizeof(safe)));
        send_msg(s, b, mcp_make_error(id, code, message, data));
}

static void send_result(struct mcp_server *s, struct mcp_batch *b, const struct mcp_id *id,
                        json_object *result, bool modern)
{
        send_msg(s, b, mcp_make_result(id, mcp_rev_finish_result(result, modern)));
}

/* ---- calls in flight ---- */

/* An in-flight request with @id: not finished, not cancelled. Under s->mu. */
static struct mcp_call *find_call(struct mcp_server *s, const struct mcp_id *id, bool any_state)
{
        for (struct mcp_call *c = s->calls; c; c = c->next)
                if (!c->finished && !c->cancelled && (any_state || !c->replying) &&
                    mcp_id_equal(&c->id, id))
                        return c;
        return NULL;
}

static void call_free(struct mcp_call *c)
{
        mcp_id_done(&c->id);
        mcp_id_done(&c->token);
        free(c->name);
        json_object_put(c->args);
        if (c->cancel_fd >= 0)
                close(c->cancel_fd);
        pthread_mutex_destroy(&c->pmu);
        free(c);
}

static struct mcp_call *call_new(struct mcp_server *s, enum call_kind kind, const struct mcp_id *id,
                                 enum mcp_rev rev, bool modern)
{
        struct mcp_call *c = xcalloc(1, sizeof(*c));

        c->srv = s;
        c->kind = kind;
        mcp_id_copy(&c->id, id);
        c->rev = rev;
        c->modern = modern;
        c->cancel_fd = -1;
        pthread_mutex_init(&c->pmu, NULL);
        return c;
}

static void signal_cancel(struct mcp_call *c)
{
        uint64_t one = 1;

        if (c->cancel_fd >= 0)
                (void)!write(c->cancel_fd, &one, sizeof(one));
}

/* Join and free every finished call. Main thread only. */
static void reap(struct mcp_server *s)
{
        struct mcp_call *done = NULL, **pp, *c;

        pthread_mutex_lock(&s->mu);
        for (pp = &s->calls; (c = *pp);) {
                if (c->finished) {
                        *pp = c->next;
                        c->next = done;
                        done = c;
                } else {
                        pp = &c->next;
                }
        }
        pthread_mutex_unlock(&s->mu);
        while ((c = done)) {
                done = c->next;
                if (c->has_thread)
                        pthread_join(c->thread, NULL);
                call_free(c);
        }
}

/* Called by the run's supervisor (any thread) with its elapsed time; must not block long. */
static void call_progress(void *userdata, uint64_t elapsed_ms, uint64_t timeout_ms)
{
        struct mcp_call *c = userdata;
        struct mcp_server *s = c->srv;
        json_object *params, *msg;
        double progress = (double)elapsed_ms / 1000.0;
        uint64_t now = sbx_now_ms();
        bool cancelled;

        pthread_mutex_lock(&c->pmu);
        if (c->done || c->token.type == MCP_ID_NONE)
                goto out;
        if (c->progress_sent &&
            (now - c->last_progress_ms < s->progress_interval_ms || progress <= c->last_progress))
                goto out;
        pthread_mutex_lock(&s->mu);
        cancelled = c->cancelled;
        pthread_mutex_unlock(&s->mu);
        if (cancelled) /* 2026-07-28: nothing more for a cancelled request */
                goto out;

        params = json_object_new_object();
        json_object_object_add(params, "progressToken", mcp_id_to_json(&c->token));
        json_object_object_add(params, "progress", json_object_new_double(progress));
        if (timeout_ms > 0)
                json_object_object_add(params, "total",
                                       json_object_new_double((double)timeout_ms / 1000.0));
        if (c->rev >= MCP_REV_2025_03_26) {
                _cleanup_free_ char *m =
                    timeout_ms > 0
                        ? xasprintf("running for %llu s of at most %llu s",
                                    (unsigned long long)(elapsed_ms / 1000),
                                    (unsigned long long)(timeout_ms / 1000))
                        : xasprintf("running for %llu s", (unsigned long long)(elapsed_ms / 1000));
                json_object_object_add(params, "message", json_object_new_string(m));
        }
        msg = mcp_make_notification("notifications/progress", params);
        (void)mcp_writer_send(&s->w, msg);
        json_object_put(msg);
        c->progress_sent = true;
        c->last_progress = progress;
        c->last_progress_ms = now;
out:
        pthread_mutex_unlock(&c->pmu);
}

static json_object *tool_result_json(struct tool_result *res, enum mcp_rev rev)
{
        json_object *r = json_object_new_object(), *content = json_object_new_array(),
                    *text = json_object_new_object();

        json_object_object_add(text, "type", json_object_new_string("text"));
        json_object_object_add(text, "text", json_object_new_string(res->text ? res->text : ""));
        json_object_array_add(content, text);
        /* images and embedded resources after the text (tools/content.h) */
        for (size_t i = 0; res->content && i < json_object_array_length(res->content); i++)
                json_object_array_add(content,
                                      json_object_get(json_object_array_get_idx(res->content, i)));
        json_object_object_add(r, "content", content);
        json_object_object_add(r, "isError", json_object_new_boolean(res->is_error));
        /* structuredContent is 2025-06-18+, and an object until 2026-07-28. */
        if (res->structured &&
            (rev >= MCP_REV_MODERN ||
             (rev >= MCP_REV_2025_06_18 && json_object_is_type(res->structured, json_type_object))))
                json_object_object_add(r, "structuredContent", TAKE_PTR(res->structured));
        return r;
}

static void *worker_main(void *arg)
{
        struct mcp_call *c = arg;
        struct mcp_server *s = c->srv;
        struct tool_ctx ctx = {
            .cancel_fd = c->cancel_fd,
            .progress = c->token.type != MCP_ID_NONE ? call_progress : NULL,
            .progress_userdata = c,
        };
        struct tool_result res = {0};
        struct sbx_error err = {0};
        json_object *msg;
        char idbuf[96];
        bool drop;
        int r;

        r = s->h->tools_call(s->h->userdata, c->name, c->args, &ctx, &res, &err);
        if (r >= 0)
                msg = mcp_make_result(
                    &c->id, mcp_rev_finish_tool_result(tool_result_json(&res, c->rev), c->modern));
        else if (r == -ENOENT || r == -EINVAL)
                msg = mcp_make_error(&c->id, MCP_ERR_INVALID_PARAMS,
                                     err.msg[0] ? err.msg : "Invalid params", NULL);
        else {
                _cleanup_free_ char *m = xasprintf("Internal error in tool '%s': %s", c->name,
                                                   err.msg[0] ? err.msg : strerror(-r));
                char safe[600];
                log_error("%s", mcp_log_safe(m, safe, sizeof(safe)));
                msg = mcp_make_error(&c->id, MCP_ERR_INTERNAL, m, NULL);
        }
        free(res.text);
        json_object_put(res.structured);
        json_object_put(res.content);

        pthread_mutex_lock(&c->pmu);
        c->done = true;
        pthread_mutex_unlock(&c->pmu);

        pthread_mutex_lock(&s->mu);
        drop = c->cancelled;
        c->replying = true;
        pthread_mutex_unlock(&s->mu);

        if (drop) {
                /* Legacy: SHOULD NOT reply; 2026-07-28 stdio: MUST NOT. */
                log_debug("request %s was cancelled; its reply is dropped",
                          mcp_id_describe(&c->id, idbuf, sizeof(idbuf)));
                json_object_put(msg);
        } else {
                send_msg(s, c->batch, msg);
        }
        if (c->batch)
                batch_unref(c->batch);

        pthread_mutex_lock(&s->mu);
        c->finished = true;
        s->running--;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
        wake(s);
        return NULL;
}

/* ---- methods ---- */

static void do_initialize(struct mcp_server *s, const struct mcp_msg *m)
{
        json_object *pv = obj_get(m->params, "protocolVersion"), *ci, *r;
        const char *echo = NULL;
        char b1[64], b2[64], b3[64];

        if (!m->params || !json_object_is_type(m->params, json_type_object) || !pv ||
            !json_object_is_type(pv, json_type_string)) {
                send_error(s, NULL, &m->id, MCP_ERR_INVALID_PARAMS,
                           "initialize needs params.protocolVersion (a string)", NULL);
                return;
        }
        s->rev = mcp_rev_negotiate(json_object_get_string(pv), &echo);
        s->initialized = true;
        ci = obj_get(m->params, "clientInfo");
        log_info("client '%s' '%s': asked for protocol '%s', serving %s",
                 mcp_log_safe(jstring(obj_get(ci, "name")), b1, sizeof(b1)),
                 mcp_log_safe(jstring(obj_get(ci, "version")), b2, sizeof(b2)),
                 mcp_log_safe(json_object_get_string(pv), b3, sizeof(b3)), echo);

        r = json_object_new_object();
        json_object_object_add(r, "protocolVersion", json_object_new_string(echo));
        json_object_object_add(r, "capabilities", mcp_rev_capabilities(s->rev));
        json_object_object_add(r, "serverInfo", mcp_rev_server_info(s->rev));
        if (s->h->instructions)
                json_object_object_add(r, "instructions",
                                       json_object_new_string(s->h->instructions));
        send_result(s, NULL, &m->id, r, false);
}

static void do_discover(struct mcp_server *s, struct mcp_batch *b, const struct mcp_msg *m)
{
        json_object *r = json_object_new_object();

        json_object_object_add(r, "supportedVersions", mcp_rev_supported_versions());
        json_object_object_add(r, "capabilities", mcp_rev_capabilities(MCP_REV_MODERN));
        if (s->h->instructions)
                json_object_object_add(r, "instructions",
                                       json_object_new_string(s->h->instructions));
        json_object_object_add(r, "ttlMs", json_object_new_int(TOOLS_TTL_MS));
        json_object_object_add(r, "cacheScope", json_object_new_string("public"));
        send_result(s, b, &m->id, r, true);
}

static void do_set_level(struct mcp_server *s, struct mcp_batch *b, const struct mcp_msg *m)
{
        static const char *const levels[] = {"debug", "info",     "notice", "warning",
                                             "error", "critical", "alert",  "emergency"};
        json_object *lv = obj_get(m->params, "level");

        if (lv && json_object_is_type(lv, json_type_string))
                for (size_t i = 0; i < ELEMENTSOF(levels); i++)
                        if (strcmp(json_object_get_string(lv), levels[i]) == 0) {
                                /* We send no notifications/message; logs go to stderr. */
                                send_result(s, b, &m->id, json_object_new_object(), false);
                                return;
                        }
        send_error(s, b, &m->id, MCP_ERR_INVALID_PARAMS,
                   "logging/setLevel needs params.level: one of debug, info, notice, warning, "
                   "error, critical, alert, emergency",
                   NULL);
}

static void do_tools_list(struct mcp_server *s, struct mcp_batch *b, const struct mcp_msg *m,
                          enum mcp_rev rev, bool modern)
{
        json_object *cursor = obj_get(m->params, "cursor"), *r;

        /* We never hand out a cursor (two tools, one page); "" is a valid empty one. */
        if (cursor && !(json_object_is_type(cursor, json_type_string) &&
                        json_object_get_string_len(cursor) == 0)) {
                send_error(s, b, &m->id, MCP_ERR_INVALID_PARAMS,
                           "invalid cursor: this server lists every tool on one page", NULL);
                return;
        }
        r = json_object_new_object();
        json_object_object_add(r, "tools", mcp_rev_tools(s->tools, rev));
        if (modern) {
                json_object_object_add(r, "ttlMs", json_object_new_int(TOOLS_TTL_MS));
                json_object_object_add(r, "cacheScope", json_object_new_string("public"));
        }
        send_result(s, b, &m->id, r, modern);
}

static bool tool_known(struct mcp_server *s, const char *name)
{
        if (!json_object_is_type(s->tools, json_type_array))
                return true; /* no list to check against: the handler decides */
        for (size_t i = 0; i < json_object_array_length(s->tools); i++) {
                json_object *n = obj_get(json_object_array_get_idx(s->tools, i), "name");
                if (n && json_object_is_type(n, json_type_string) &&
                    strcmp(json_object_get_string(n), name) == 0)
                        return true;
        }
        return false;
}

static int start_worker(struct mcp_call *c)
{
        pthread_attr_t attr;
        sigset_t all, old;
        int r;

        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES);
        /* Workers block every signal, so SIGTERM/SIGINT stay for the serve loop's signalfd. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = pthread_create(&c->thread, &attr, worker_main, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        return -r;
}

/* A call that could not get a worker: -32603, and @c (never started) is freed. */
static void reply_start_failure(struct mcp_server *s, struct mcp_batch *b, const struct mcp_msg *m,
                                struct mcp_call *c, int r)
{
        _cleanup_free_ char *msg =
            xasprintf("Internal error: cannot start a worker for tools/call: %s", strerror(-r));

        log_error("%s", msg);
        send_error(s, b, &m->id, MCP_ERR_INTERNAL, msg, NULL);
        call_free(c);
}

/* The untrusted part of a tools/call: params.name must be a known tool's name, and
 * params.arguments an object, absent, or a JSON string holding an object (some clients send
 * it so, anthropics/claude-code#59227; then *@ret_parsed owns the parsed object). *@ret_args
 * is the arguments object or NULL (absent). False when the call was answered with an error
 * (-32602) and goes no further. */
static bool tools_call_params(struct mcp_server *s, struct mcp_batch *b, const struct mcp_msg *m,
                              json_object **ret_args, json_object **ret_parsed)
{
        json_object *name = obj_get(m->params, "name"), *args = obj_get(m->params, "arguments");
        const char *why;

        if (!name || !json_object_is_type(name, json_type_string)) {
                send_error(s, b, &m->id, MCP_ERR_INVALID_PARAMS,
                           "tools/call needs params.name (a string) and params.arguments "
                           "(an object)",
                           NULL);
                return false;
        }
        if (json_object_is_type(args, json_type_string)) {
                if (mcp_json_parse(json_object_get_string(args),
                                   (size_t)json_object_get_string_len(args), ret_parsed,
                                   &why) == 0 &&
                    json_object_is_type(*ret_parsed, json_type_object))
                        args = *ret_parsed;
        }
        if (args && !json_object_is_type(args, json_type_object)) {
                send_error(s, b, &m->id, MCP_ERR_INVALID_PARAMS,
                           "tools/call params.arguments must be an object", NULL);
                return false;
        }
        if (!tool_known(s, json_object_get_string(name))) {
                _cleanup_free_ char *msg =
                    quote_name("Unknown tool", json_object_get_string(name), "");
                send_error(s, b, &m->id, MCP_ERR_INVALID_PARAMS, msg, NULL);
                return false;
        }
        *ret_args = args;
        return true;
}

/* When max_workers calls are in flight, answer the call @name with a Blocked: tool result
 * (isError) and return true; false when there is room. */
static bool tools_call_busy(struct mcp_server *s, struct mcp_batch *b, const struct mcp_msg *m,
                            const char *name, enum mcp_rev rev, bool modern)
{
        unsigned running;
        char safe[96];

        pthread_mutex_lock(&s->mu);
        running = s->running;
        pthread_mutex_unlock(&s->mu);
        if (running < s->max_workers)
                return false;
        struct tool_result res = {
            .text = xasprintf("Blocked: %u tool calls are already in flight, the most "
                              "this server runs or queues at once. Retry this call when "
                              "one of them has finished.",
                              running),
            .is_error = true,
        };
        log_warning("tools/call '%s' refused: %u calls in flight",
                    mcp_log_safe(name, safe, sizeof(safe)), running);
        send_msg(s, b,
                 mcp_make_result(&m->id,
                                 mcp_rev_finish_tool_result(tool_result_json(&res, rev), modern)));
        free(res.text);
        return true;
}

/* Put @c on the server's list and start its worker; a call that cannot start is answered
 * (reply_start_failure()). */
static void tools_call_start(struct mcp_server *s, struct mcp_batch *b, const struct mcp_msg *m,
                             struct mcp_call *c)
{
        int r;

        c->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (c->cancel_fd < 0) {
                reply_start_failure(s, b, m, c, -errno);
                return;
        }
        c->batch = b;
        if (b)
                batch_ref(b);

        pthread_mutex_lock(&s->mu);
        c->next = s->calls;
        s->calls = c;
        s->running++;
        r = start_worker(c);
        if (r < 0) {
                s->calls = c->next;
                s->running--;
        } else {
                c->has_thread = true;
        }
        pthread_mutex_unlock(&s->mu);
        if (r < 0) {
                /* answered while this call still holds its reference, then let it go (the
                 * dispatcher holds its own) */
                reply_start_failure(s, b, m, c, r);
                if (b)
                        batch_unref(b);
        }
}

static void do_tools_call(struct mcp_server *s, struct mcp_batch *b, const struct mcp_msg *m,
                          enum mcp_rev rev, bool modern)
{
        json_object *token = obj_get(obj_get(m->params, "_meta"), "progressToken");
        _cleanup_(json_putp) json_object *parsed = NULL;
        json_object *args = NULL;
        const char *name;
        struct mcp_call *c;

        if (!tools_call_params(s, b, m, &args, &parsed))
                return;
        name = json_object_get_string(obj_get(m->params, "name"));
        if (tools_call_busy(s, b, m, name, rev, modern))
                return;

        c = call_new(s, CALL_TOOL, &m->id, rev, modern);
        c->name = xstrdup(name);
        if (args) {
                if (json_object_deep_copy(args, &c->args, NULL) < 0)
                        abort();
        } else {
                c->args = json_object_new_object();
        }
        if (token)
                (void)mcp_id_from_json(token, &c->token); /* not a string/int: no progress */
        tools_call_start(s, b, m, c);
}

static json_object *listen_meta(const struct mcp_id *id)
{
        json_object *meta = json_object_new_object();

        json_object_object_add(meta, "io.modelcontextprotocol/subscriptionId", mcp_id_to_json(id));
        return meta;
}

static void do_listen(struct mcp_server *s, const struct mcp_msg *m)
{
        struct mcp_call *c;
        json_object *params, *msg;
        bool full;

        pthread_mutex_lock(&s->mu);
        full = s->listening >= MAX_LISTENS;
        if (!full)
                s->listening++;
        pthread_mutex_unlock(&s->mu);
        if (full) {
                _cleanup_free_ char *why = xasprintf(
                    "Invalid Request: %u subscriptions/listen streams are already open, the most "
                    "this server keeps; cancel one (notifications/cancelled) before opening "
                    "another",
                    MAX_LISTENS);
                log_warning("%s", why);
                send_error(s, NULL, &m->id, MCP_ERR_INVALID_REQUEST, why, NULL);
                return;
        }
        c = call_new(s, CALL_LISTEN, &m->id, MCP_REV_MODERN, true);
        pthread_mutex_lock(&s->mu);
        c->next = s->calls;
        s->calls = c;
        pthread_mutex_unlock(&s->mu);
        params = json_object_new_object();
        /* We offer no list-changed notifications (the tool list is fixed), so the agreed set
         * is empty; the stream stays open until the client cancels it or we shut down. */
        json_object_object_add(params, "notifications", json_object_new_object());
        json_object_object_add(params, "_meta", listen_meta(&m->id));
        msg = mcp_make_notification("notifications/subscriptions/acknowledged", params);
        (void)mcp_writer_send(&s->w, msg);
        json_object_put(msg);
}

static void do_cancelled(struct mcp_server *s, json_object *params)
{
        json_object *rid = obj_get(params, "requestId");
        struct mcp_id id;
        struct mcp_call *c;
        char idbuf[96];

        if (!rid || mcp_id_from_json(rid, &id) < 0)
                return; /* a malformed notification is dropped: notifications get no reply */
        pthread_mutex_lock(&s->mu);
        c = find_call(s, &id, false);
        if (c) {
                c->cancelled = true;
                if (c->kind == CALL_LISTEN) {
                        c->finished = true; /* no thread; the stream just ends, unanswered */
                        s->listening--;
                } else
                        signal_cancel(c);
        }
        pthread_mutex_unlock(&s->mu);
        log_info("cancellation of request %s: %s", mcp_id_describe(&id, idbuf, sizeof(idbuf)),
                 c ? "stopping it" : "not in flight, ignored");
        mcp_id_done(&id);
}

static void handle_request(struct mcp_server *s, struct mcp_batch *b, const struct mcp_msg *m)
{
        const char *method = m->method;
        enum mcp_rev rev;
        bool clash, modern;
        char idbuf[96];

        pthread_mutex_lock(&s->mu);
        clash = find_call(s, &m->id, true) != NULL;
        pthread_mutex_unlock(&s->mu);
        if (clash) {
                _cleanup_free_ char *msg =
                    xasprintf("request id %s is already used by a request in flight",
                              mcp_id_describe(&m->id, idbuf, sizeof(idbuf)));
                log_warning("%s", msg);
                send_error(s, b, &m->id, MCP_ERR_INVALID_REQUEST, msg, NULL);
                return;
        }
        /* Rule 1: initialize is legacy, accepted at any time (even after server/discover). */
        if (strcmp(method, "initialize") == 0) {
                if (b)
                        send_error(s, b, &m->id, MCP_ERR_INVALID_REQUEST,
                                   "initialize must not be part of a batch", NULL);
                else
                        do_initialize(s, m);
                return;
        }
        if (m->params && !json_object_is_type(m->params, json_type_object)) {
                send_error(s, b, &m->id, MCP_ERR_INVALID_PARAMS, "params must be an object", NULL);
                return;
        }
        /* Rule 2: server/discover or modern _meta keys: stateless 2026-07-28. */
        modern = mcp_rev_is_modern_request(method, m->params);
        if (modern) {
                _cleanup_free_ char *msg = NULL;
                json_object *data = NULL;
                int code = mcp_rev_check_modern(m->params, &msg, &data);
                if (code < 0) {
                        send_error(s, b, &m->id, code, msg, data);
                        return;
                }
                if (strcmp(method, "server/discover") == 0)
                        do_discover(s, b, m);
                else if (strcmp(method, "tools/list") == 0)
                        do_tools_list(s, b, m, MCP_REV_MODERN, true);
                else if (strcmp(method, "tools/call") == 0)
                        do_tools_call(s, b, m, MCP_REV_MODERN, true);
                else if (strcmp(method, "subscriptions/listen") == 0 && !b)
                        do_listen(s, m);
                else {
                        _cleanup_free_ char *nf =
                            quote_name("Method not found", method, " (protocol 2026-07-28)");
                        send_error(s, b, &m->id, MCP_ERR_METHOD_NOT_FOUND, nf, NULL);
                }
                return;
        }
        /* Rule 3: legacy, with the negotiated revision (2025-11-25 before any initialize). */
        rev = s->initialized ? s->rev : MCP_REV_LATEST_LEGACY;
        if (strcmp(method, "ping") == 0)
                send_result(s, b, &m->id, json_object_new_object(), false);
        else if (strcmp(method, "tools/list") == 0)
                do_tools_list(s, b, m, rev, false);
        else if (strcmp(method, "tools/call") == 0)
                do_tools_call(s, b, m, rev, false);
        else if (strcmp(method, "logging/setLevel") == 0)
                do_set_level(s, b, m);
        else {
                _cleanup_free_ char *nf = quote_name("Method not found", method, "");
                send_error(s, b, &m->id, MCP_ERR_METHOD_NOT_FOUND, nf, NULL);
        }
}

static void handle_message(struct mcp_server *s, struct mcp_batch *b, json_object *v)
{
        struct mcp_msg m;
        char safe[96];

        mcp_msg_classify(v, &m);
        switch (m.kind) {
        case MCP_MSG_INVALID:
                send_error(s, b, m.id.type != MCP_ID_NONE ? &m.id : NULL, MCP_ERR_INVALID_REQUEST,
                           m.invalid_why, NULL);
                break;
        case MCP_MSG_RESPONSE:
                log_debug("ignoring a response from the client (we send no requests)");
                break;
        case MCP_MSG_NOTIFICATION:
                if (strcmp(m.method, "notifications/cancelled") == 0)
                        do_cancelled(s, m.params);
                else
                        log_debug("notification '%s' needs nothing from us",
                                  mcp_log_safe(m.method, safe, sizeof(safe)));
                break;
        case MCP_MSG_REQUEST:
                handle_request(s, b, &m);
                break;
        }
        mcp_msg_done(&m);
}

static void handle_line(struct mcp_server *s, const char *line, size_t len)
{
        _cleanup_(json_putp) json_object *v = NULL;
        _cleanup_free_ char *msg = NULL;
        const char *why = NULL;
        struct mcp_batch *b;
        size_t n;

        if (mcp_json_parse(line, len, &v, &why) < 0) {
                msg = xasprintf("Parse error: %s", why);
                send_error(s, NULL, NULL, MCP_ERR_PARSE, msg, NULL);
                return;
        }
        if (!json_object_is_type(v, json_type_array)) {
                handle_message(s, NULL, v);
                return;
        }
        /* Batches: a MUST in 2025-03-26 only, removed in 2025-06-18. */
        if (!s->initialized || s->rev != MCP_REV_2025_03_26) {
                msg = xasprintf("Invalid Request: JSON-RPC batches are only accepted under "
                                "protocol 2025-03-26 (this session: %s)",
                                mcp_rev_name(s->initialized ? s->rev : MCP_REV_LATEST_LEGACY));
                send_error(s, NULL, NULL, MCP_ERR_INVALID_REQUEST, msg, NULL);
                return;
        }
        n = json_object_array_length(v);
        if (n == 0) {
                send_error(s, NULL, NULL, MCP_ERR_INVALID_REQUEST, "Invalid Request: empty batch",
                           NULL);
                return;
        }
        b = xcalloc(1, sizeof(*b));
        b->srv = s;
        b->refs = 1;
        b->responses = json_object_new_array();
        pthread_mutex_init(&b->mu, NULL);
        for (size_t i = 0; i < n; i++)
                handle_message(s, b, json_object_array_get_idx(v, i));
        batch_unref(b);
}

static bool blank(const char *line, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (!strchr(" \t\r", line[i]))
                        return false;
        return true;
}

static int writer_error(struct mcp_server *s)
{
        int e;

        pthread_mutex_lock(&s->w.mu);
        e = s->w.error;
        pthread_mutex_unlock(&s->w.mu);
        return e;
}

/* End everything in flight and wait for the workers. Return false if some worker did not
 * finish within @wait_ms (the server state is then left allocated for it). */
static bool shutdown_calls(struct mcp_server *s, unsigned wait_ms)
{
        struct timespec deadline;
        uint64_t ns;
        bool ok;

        if (s->h->shutdown)
                s->h->shutdown(s->h->userdata);
        pthread_mutex_lock(&s->mu);
        for (struct mcp_call *c = s->calls; c; c = c->next) {
                if (c->finished)
                        continue;
                if (c->kind == CALL_TOOL) {
                        signal_cancel(c);
                } else if (!c->cancelled) {
                        /* A graceful end of a subscription is its (empty) result. */
                        json_object *r = json_object_new_object();
                        json_object_object_add(r, "_meta", listen_meta(&c->id));
                        json_object *msg = mcp_make_result(&c->id, mcp_rev_finish_result(r, true));
                        (void)mcp_writer_send(&s->w, msg);
                        json_object_put(msg);
                        c->finished = true;
                }
        }
        clock_gettime(CLOCK_REALTIME, &deadline);
        ns = (uint64_t)deadline.tv_nsec + (uint64_t)(wait_ms % 1000) * 1000000;
        deadline.tv_sec += wait_ms / 1000 + (time_t)(ns / 1000000000);
        deadline.tv_nsec = (long)(ns % 1000000000);
        while (s->running > 0)
                if (pthread_cond_timedwait(&s->cond, &s->mu, &deadline) == ETIMEDOUT)
                        break;
        ok = s->running == 0;
        pthread_mutex_unlock(&s->mu);
        return ok;
}

int mcp_serve_opts(const struct mcp_handlers *handlers, int in_fd, int out_fd,
                   const struct mcp_serve_options *opts, struct sbx_error *err)
{
        static const struct mcp_serve_options defaults = {0};
        struct mcp_server *s;
        struct mcp_reader rd;
        _cleanup_close_ int sig_fd = -1;
        struct sigaction sa;
        sigset_t set;
        int r = 0;

        if (!handlers || !handlers->tools_call)
                return sbx_fail(err, EINVAL, "mcp_serve: handlers->tools_call is required");
        if (!opts)
                opts = &defaults;

        /* A client that goes away must show up as EPIPE on write, not kill us. */
        if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
                memset(&sa, 0, sizeof(sa));
                sa.sa_handler = SIG_IGN;
                sigaction(SIGPIPE, &sa, NULL);
        }
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sig_fd < 0)
                return sbx_fail(err, errno, "cannot create a signalfd for SIGTERM/SIGINT: %s",
                                strerror(errno));

        s = xcalloc(1, sizeof(*s));
        s->h = handlers;
        s->max_workers = handlers->max_workers ? handlers->max_workers : DEFAULT_MAX_WORKERS;
        s->progress_interval_ms = opts->progress_interval_ms ? opts->progress_interval_ms : 1000;
        s->rev = MCP_REV_LATEST_LEGACY;
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cond, NULL);
        s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (s->wake_fd < 0) {
                r = sbx_fail(err, errno, "cannot create an eventfd: %s", strerror(errno));
                pthread_mutex_destroy(&s->mu);
                pthread_cond_destroy(&s->cond);
                free(s);
                return r;
        }
        s->w.fd = out_fd;
        s->w.wake_fd = s->wake_fd;
        s->w.max_frame_bytes = opts->max_frame_bytes;
        pthread_mutex_init(&s->w.mu, NULL);
        s->tools = handlers->tools_list ? handlers->tools_list(handlers->userdata) : NULL;
        mcp_reader_init(&rd, in_fd, opts->max_line_bytes);

        for (;;) {
                struct pollfd pfd[3] = {
                    {.fd = in_fd, .events = POLLIN},
                    {.fd = sig_fd, .events = POLLIN},
                    {.fd = s->wake_fd, .events = POLLIN},
                };
                enum mcp_read_status st;
                char *line;
                size_t len;
                uint64_t cnt;
                ssize_t n;

                while (!writer_error(s) &&
                       (st = mcp_reader_next(&rd, &line, &len)) != MCP_READ_NONE) {
                        if (st == MCP_READ_TOO_LONG) {
                                _cleanup_free_ char *msg = xasprintf(
                                    "Parse error: message longer than %zu bytes, discarded",
                                    rd.max_line_bytes);
                                send_error(s, NULL, NULL, MCP_ERR_PARSE, msg, NULL);
                        } else if (!blank(line, len)) {
                                handle_line(s, line, len);
                        }
                }
                reap(s);
                if (writer_error(s)) {
                        r = sbx_fail(err, writer_error(s), "cannot write to the MCP client: %s",
                                     strerror(writer_error(s)));
                        break;
                }
                if (rd.eof) {
                        log_info("stdin closed: shutting down");
                        break;
                }
                if (poll(pfd, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        r = sbx_fail(err, errno, "poll: %s", strerror(errno));
                        break;
                }
                if (pfd[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        if (read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
                                log_info("received %s: shutting down",
                                         si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
                                break;
                        }
                }
                if (pfd[2].revents & POLLIN)
                        (void)!read(s->wake_fd, &cnt, sizeof(cnt));
                if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        n = mcp_reader_fill(&rd);
                        if (n < 0) {
                                r = sbx_fail(err, (int)-n, "cannot read the MCP input: %s",
                                             strerror((int)-n));
                                break;
                        }
                }
        }

        mcp_reader_done(&rd);
        if (!shutdown_calls(s, opts->shutdown_wait_ms ? opts->shutdown_wait_ms : 10000)) {
                /* A tool ignored both shutdown and its cancel_fd. Its worker still points at
                 * the server, so the state stays allocated; nothing more reaches out_fd. */
                log_error("tool calls still running after shutdown; leaving them behind");
                pthread_mutex_lock(&s->w.mu);
                s->w.closed = true;
                pthread_mutex_unlock(&s->w.mu);
                return r;
        }
        pthread_mutex_lock(&s->mu);
        for (struct mcp_call *c = s->calls; c; c = c->next)
                c->finished = true; /* listens cancelled or closed above */
        pthread_mutex_unlock(&s->mu);
        reap(s);
        json_object_put(s->tools);
        close(s->wake_fd);
        pthread_mutex_destroy(&s->w.mu);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cond);
        free(s);
        return r;
}

int mcp_serve(const struct mcp_handlers *handlers, int in_fd, int out_fd, struct sbx_error *err)
{
        return mcp_serve_opts(handlers, in_fd, out_fd, NULL, err);
}
