/* test_mcp.c - the MCP server (src/mcp) driven over real pipes: mcp_serve() runs on a thread of
 * the (forked) test process with fake tool handlers, the test writes JSON-RPC lines to its stdin
 * and reads every frame it writes. Covers framing, every JSON-RPC error path, each revision's
 * negotiation and field stripping, the stateless 2026-07-28 rules, batches, cancellation,
 * concurrency, progress and shutdown. Spec: docs/design/mcp-protocol.md. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "mcp/mcp-internal.h"
#include "mcp/mcp.h"

#define META_2026                                                                                  \
        "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                   \
        "\"io.modelcontextprotocol/clientCapabilities\":{}}"

/* ---- fake tools ---- */

struct fake {
        atomic_int calls;          /* tools_call entered */
        atomic_int returned;       /* tools_call returned */
        atomic_int cancel_seen;    /* a "sleep" call saw its cancel_fd readable */
        atomic_int shutdown_calls; /* handlers->shutdown ran */
        atomic_int in_flight, max_in_flight;
        atomic_int had_progress; /* ctx->progress was non-NULL in the last call */
        atomic_int stop;         /* set by the shutdown handler: sleepers end */
        unsigned progress_steps, progress_gap_ms;
};

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static json_object *fake_tools_list(void *userdata)
{
        const char *text =
            "["
            "{\"name\":\"echo\",\"title\":\"Echo\",\"description\":\"echoes\","
            "\"inputSchema\":{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
            "\"type\":\"object\",\"properties\":{}},"
            "\"outputSchema\":{\"type\":\"object\",\"$schema\":\"x\"},"
            "\"annotations\":{\"readOnlyHint\":true,\"openWorldHint\":false},"
            "\"icons\":[{\"src\":\"data:image/png;base64,AA==\"}],"
            "\"execution\":{\"taskSupport\":\"forbidden\"},"
            "\"_meta\":{\"com.example/x\":1},\"futureField\":true},"
            "{\"name\":\"sleep\",\"description\":\"waits for cancel\","
            "\"inputSchema\":{\"type\":\"object\"}},"
            "{\"name\":\"slow\",\"description\":\"500 ms\",\"inputSchema\":{\"type\":\"object\"}},"
            "{\"name\":\"progress\",\"description\":\"p\",\"inputSchema\":{\"type\":\"object\"}},"
            "{\"name\":\"fail\",\"description\":\"EIO\",\"inputSchema\":{\"type\":\"object\"}},"
            "{\"name\":\"einval\",\"description\":\"EINVAL\",\"inputSchema\":{\"type\":\"object\"}}"
            ","
            "{\"name\":\"ghost\",\"description\":\"ENOENT\",\"inputSchema\":{\"type\":\"object\"}},"
            "{\"name\":\"binary\",\"description\":\"bad UTF-8\","
            "\"inputSchema\":{\"type\":\"object\"}},"
            "{\"name\":\"strout\",\"description\":\"bad legacy outputSchema\","
            "\"inputSchema\":{\"type\":\"object\"},\"outputSchema\":{\"type\":\"string\"}}"
            "]";
        (void)userdata;
        return json_tokener_parse(text);
}

static int fake_tools_call_inner(void *userdata, const char *name, json_object *args,
                                 const struct tool_ctx *ctx, struct tool_result *ret,
                                 struct sbx_error *err)
{
        struct fake *f = userdata;
        int n;

        atomic_fetch_add(&f->calls, 1);
        atomic_store(&f->had_progress, ctx->progress != NULL);
        n = atomic_fetch_add(&f->in_flight, 1) + 1;
        for (int m = atomic_load(&f->max_in_flight); n > m;)
                if (atomic_compare_exchange_weak(&f->max_in_flight, &m, n))
                        break;
        memset(ret, 0, sizeof(*ret));

        if (strcmp(name, "echo") == 0) {
                json_object *st = json_object_new_object();
                json_object *copy = NULL;
                ck_assert(json_object_is_type(args, json_type_object));
                json_object_deep_copy(args, &copy, NULL);
                json_object_object_add(st, "args", copy);
                ret->text = xstrdup(json_object_to_json_string_ext(args, JSON_C_TO_STRING_PLAIN));
                ret->structured = st;
                /* A multi-MiB echo twice over would pass the 10 MiB line limit. */
                if (strlen(ret->text) > ((size_t)1 << 20)) {
                        json_object_put(ret->structured);
                        ret->structured = NULL;
                }
        } else if (strcmp(name, "sleep") == 0) {
                struct pollfd p = {.fd = ctx->cancel_fd, .events = POLLIN};
                uint64_t end = mono_ms() + 20000;
                bool cancelled = false;
                while (mono_ms() < end && !atomic_load(&f->stop)) {
                        if (poll(&p, 1, 20) == 1) {
                                cancelled = true;
                                break;
                        }
                }
                if (cancelled)
                        atomic_fetch_add(&f->cancel_seen, 1);
                ret->text = xstrdup(cancelled ? "cancelled" : "stopped");
                ret->is_error = true;
        } else if (strcmp(name, "binary") == 0) {
                ret->text = xstrdup("a\xff\x1b[31mb\xc3");
        } else if (strcmp(name, "slow") == 0) {
                sleep_ms(500);
                ret->text = xstrdup("slow done");
        } else if (strcmp(name, "progress") == 0) {
                for (unsigned i = 1; i <= f->progress_steps; i++) {
                        if (ctx->progress)
                                ctx->progress(ctx->progress_userdata, (uint64_t)i * 1000, 30000);
                        sleep_ms(f->progress_gap_ms);
                }
                ret->text = xstrdup("progress done");
        } else if (strcmp(name, "fail") == 0) {
                atomic_fetch_sub(&f->in_flight, 1);
                return sbx_fail(err, EIO, "the fake backend broke");
        } else if (strcmp(name, "einval") == 0) {
                atomic_fetch_sub(&f->in_flight, 1);
                return sbx_fail(err, EINVAL, "arguments are not an object");
        } else {
                atomic_fetch_sub(&f->in_flight, 1);
                return sbx_fail(err, ENOENT, "unknown tool '%s'", name);
        }
        atomic_fetch_sub(&f->in_flight, 1);
        return 0;
}

static int fake_tools_call(void *userdata, const char *name, json_object *args,
                           const struct tool_ctx *ctx, struct tool_result *ret,
                           struct sbx_error *err)
{
        struct fake *f = userdata;
        int r = fake_tools_call_inner(userdata, name, args, ctx, ret, err);

        atomic_fetch_add(&f->returned, 1);
        return r;
}

static void fake_shutdown(void *userdata)
{
        struct fake *f = userdata;
        atomic_fetch_add(&f->shutdown_calls, 1);
        atomic_store(&f->stop, 1);
}

/* ---- harness: mcp_serve on a thread, pipes both ways ---- */

struct harness {
        struct fake fake;
        struct mcp_handlers h;
        struct mcp_serve_options opts;
        struct sbx_error err;
        int to_srv, from_srv; /* our ends */
        int srv_in, srv_out;  /* the server's ends */
        pthread_t thread;
        atomic_int done;
        int rc;
        uint64_t returned_ms;
        struct mcp_reader rd;
};

static struct harness *H;
static size_t start_max_frame; /* read by h_start_with() */

static void *serve_thread(void *arg)
{
        struct harness *h = arg;
        h->rc = mcp_serve_opts(&h->h, h->srv_in, h->srv_out, &h->opts, &h->err);
        h->returned_ms = mono_ms();
        close(h->srv_in);
        close(h->srv_out);
        atomic_store(&h->done, 1);
        return NULL;
}

static void h_start_with(unsigned max_workers, unsigned progress_ms, size_t max_line)
{
        int in[2], out[2];

        H = xcalloc(1, sizeof(*H));
        H->fake.progress_steps = 5;
        H->fake.progress_gap_ms = 10;
        H->h.tools_list = fake_tools_list;
        H->h.tools_call = fake_tools_call;
        H->h.shutdown = fake_shutdown;
        H->h.userdata = &H->fake;
        H->h.instructions = "Use run_code.";
        H->h.max_workers = max_workers;
        H->opts.progress_interval_ms = progress_ms;
        H->opts.max_line_bytes = max_line;
        H->opts.max_frame_bytes = start_max_frame;
        ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        H->srv_in = in[0];
        H->to_srv = in[1];
        H->from_srv = out[0];
        H->srv_out = out[1];
        mcp_reader_init(&H->rd, H->from_srv, (size_t)256 << 20);
        ck_assert_int_eq(pthread_create(&H->thread, NULL, serve_thread, H), 0);
}

static void h_start(void)
{
        h_start_with(8, 100, 0);
}

static void h_write(const char *buf, size_t len)
{
        while (len > 0) {
                ssize_t n = write(H->to_srv, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                ck_assert_msg(n > 0, "write to server: %s", strerror(errno));
                buf += n;
                len -= (size_t)n;
        }
}

static void __attribute__((format(printf, 1, 2))) h_send(const char *fmt, ...)
{
        char *s = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&s, fmt, ap);
        va_end(ap);
        ck_assert(n >= 0);
        h_write(s, (size_t)n);
        h_write("\n", 1);
        free(s);
}

/* The next frame from the server, or NULL after @timeout_ms (or at EOF). */
static json_object *h_recv_within(unsigned timeout_ms)
{
        uint64_t end = mono_ms() + timeout_ms;
        char *line;
        size_t len;

        for (;;) {
                enum mcp_read_status st = mcp_reader_next(&H->rd, &line, &len);
                if (st == MCP_READ_LINE) {
                        json_object *v = json_tokener_parse(line);
                        ck_assert_msg(v != NULL, "server wrote a non-JSON line: %.200s", line);
                        ck_assert_msg(len > 0 && (line[0] == '{' || line[0] == '['),
                                      "unexpected frame %.200s", line);
                        return v;
                }
                ck_assert_int_ne(st, MCP_READ_TOO_LONG);
                if (H->rd.eof)
                        return NULL;
                uint64_t now = mono_ms();
                if (now >= end)
                        return NULL;
                struct pollfd p = {.fd = H->from_srv, .events = POLLIN};
                if (poll(&p, 1, (int)(end - now)) == 1)
                        ck_assert(mcp_reader_fill(&H->rd) >= 0);
        }
}

static json_object *h_recv(void)
{
        json_object *v = h_recv_within(5000);
        ck_assert_msg(v != NULL, "no frame from the server within 5 s");
        return v;
}

static void h_expect_nothing(unsigned ms)
{
        json_object *v = h_recv_within(ms);
        ck_assert_msg(v == NULL, "unexpected frame: %s", v ? json_object_to_json_string(v) : "");
}

/* Close the server's stdin and wait for mcp_serve() to return; its rc. */
static int h_finish(void)
{
        if (H->to_srv >= 0) {
                close(H->to_srv);
                H->to_srv = -1;
        }
        pthread_join(H->thread, NULL);
        return H->rc;
}

static void h_free(void)
{
        if (!H)
                return;
        if (!atomic_load(&H->done))
                (void)h_finish();
        mcp_reader_done(&H->rd);
        close(H->from_srv);
        free(H);
        H = NULL;
}

static json_object *get(json_object *o, const char *path)
{
        char buf[256], *save = NULL, *tok;

        snprintf(buf, sizeof(buf), "%s", path);
        for (tok = strtok_r(buf, ".", &save); tok && o; tok = strtok_r(NULL, ".", &save)) {
                json_object *next = NULL;
                if (json_object_is_type(o, json_type_array))
                        next = json_object_array_get_idx(o, (size_t)atoi(tok));
                else if (!json_object_object_get_ex(o, tok, &next))
                        next = NULL;
                o = next;
        }
        return o;
}

static const char *jstr(json_object *o, const char *path)
{
        json_object *v = get(o, path);
        return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static bool has(json_object *o, const char *path)
{
        return get(o, path) != NULL;
}

/* The id as JSON text ("1", "\"1\""), or "absent". */
static const char *id_text(json_object *msg)
{
        json_object *id = NULL;
        if (!json_object_object_get_ex(msg, "id", &id))
                return "absent";
        return json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN);
}

static void expect_error(json_object *msg, const char *id, int code)
{
        const char *t = json_object_to_json_string(msg);
        ck_assert_msg(has(msg, "error") && !has(msg, "result"), "not an error: %s", t);
        ck_assert_msg(json_object_get_int(get(msg, "error.code")) == code, "want %d: %s", code, t);
        ck_assert_msg(jstr(msg, "error.message") && *jstr(msg, "error.message"), "no message: %s",
                      t);
        ck_assert_msg(strcmp(id_text(msg), id) == 0, "want id %s: %s", id, t);
        ck_assert_str_eq(jstr(msg, "jsonrpc"), "2.0");
}

static void recv_error(const char *id, int code)
{
        json_object *m = h_recv();
        expect_error(m, id, code);
        json_object_put(m);
}

/* The next frame must be the result for @id; returned (caller puts). */
static json_object *recv_result(const char *id)
{
        json_object *m = h_recv();
        const char *t = json_object_to_json_string(m);
        ck_assert_msg(has(m, "result") && !has(m, "error"), "not a result: %s", t);
        ck_assert_msg(strcmp(id_text(m), id) == 0, "want id %s: %s", id, t);
        return m;
}

static void ping_ok(int id)
{
        char want[32];
        h_send("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}", id);
        snprintf(want, sizeof(want), "%d", id);
        json_object *m = recv_result(want);
        ck_assert_int_eq(json_object_object_length(get(m, "result")), 0);
        json_object_put(m);
}

static void initialize(const char *version)
{
        h_send("{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
               "\"version\":\"1\"}}}",
               version);
        json_object_put(recv_result("\"init\""));
}

static void setup(void)
{
        H = NULL;
}

static void teardown(void)
{
        h_free();
}

/* ---- framing ---- */

START_TEST(reader_splits_lines_and_strips_cr)
{
        int p[2];
        struct mcp_reader r;
        char *line;
        size_t len;
        const char in[] = "a\r\n\nbb\ncc";

        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(write(p[1], in, sizeof(in) - 1), (ssize_t)sizeof(in) - 1);
        close(p[1]);
        mcp_reader_init(&r, p[0], 0);
        ck_assert_int_eq(mcp_reader_next(&r, &line, &len), MCP_READ_NONE); /* nothing read yet */
        ck_assert(mcp_reader_fill(&r) > 0);
        ck_assert_int_eq(mcp_reader_next(&r, &line, &len), MCP_READ_LINE);
        ck_assert_str_eq(line, "a");
        ck_assert_int_eq(mcp_reader_next(&r, &line, &len), MCP_READ_LINE);
        ck_assert_uint_eq(len, 0);
        ck_assert_int_eq(mcp_reader_next(&r, &line, &len), MCP_READ_LINE);
        ck_assert_str_eq(line, "bb");
        /* "cc" has no newline yet: held back until EOF. */
        ck_assert_int_eq(mcp_reader_next(&r, &line, &len), MCP_READ_NONE);
        ck_assert_int_eq(mcp_reader_fill(&r), 0);
        ck_assert(r.eof);
        ck_assert_int_eq(mcp_reader_next(&r, &line, &len), MCP_READ_LINE);
        ck_assert_str_eq(line, "cc");
        ck_assert_int_eq(mcp_reader_next(&r, &line, &len), MCP_READ_NONE);
        mcp_reader_done(&r);
        close(p[0]);
}
END_TEST

START_TEST(reader_drops_overlong_line)
{
        int p[2];
        struct mcp_reader r;
        char *line, *big = xmalloc(300000);
        size_t len;
        int too_long = 0, lines = 0;

        memset(big, 'x', 300000);
        ck_assert_int_eq(pipe2(p, O_NONBLOCK), 0);
        mcp_reader_init(&r, p[0], 100000);
        /* 300 KB without '\n', then "\nok\n": one TOO_LONG, then "ok"; the buffer never holds
         * much more than the cap. */
        for (size_t off = 0; off < 300000;) {
                ssize_t n = write(p[1], big + off, 300000 - off);
                if (n > 0)
                        off += (size_t)n;
                while (mcp_reader_fill(&r) > 0)
                        ;
                enum mcp_read_status st;
                while ((st = mcp_reader_next(&r, &line, &len)) != MCP_READ_NONE)
                        too_long += st == MCP_READ_TOO_LONG;
                ck_assert_uint_le(r.buf.cap, (size_t)100000 * 2 + (256 << 10));
        }
        ck_assert_int_eq(write(p[1], "\nok\n", 4), 4);
        close(p[1]);
        while (mcp_reader_fill(&r) > 0 || !r.eof)
                ;
        enum mcp_read_status st;
        while ((st = mcp_reader_next(&r, &line, &len)) != MCP_READ_NONE) {
                if (st == MCP_READ_TOO_LONG)
                        too_long++;
                else {
                        lines++;
                        ck_assert_str_eq(line, "ok");
                }
        }
        ck_assert_int_eq(too_long, 1);
        ck_assert_int_eq(lines, 1);
        mcp_reader_done(&r);
        close(p[0]);
        free(big);
}
END_TEST

START_TEST(utf8_sanitize_replaces_bad_bytes)
{
        size_t n = 0;
        char *s;

        ck_assert_ptr_null(mcp_utf8_sanitize("h\xc3\xa9llo \xf0\x9f\x98\x80", 11, &n));
        s = mcp_utf8_sanitize("a\xff"
                              "b\xc0\xaf"
                              "c\xed\xa0\x80",
                              9, &n); /* bad, overlong, surrogate */
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s, "a\xef\xbf\xbd"
                            "b\xef\xbf\xbd\xef\xbf\xbd"
                            "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        ck_assert_uint_eq(n, strlen(s));
        free(s);
}
END_TEST

START_TEST(log_lines_cannot_carry_control_bytes)
{
        char buf[16], big[128];
        struct mcp_id id;
        json_object *v = json_object_new_string("\x1b]0;pwned\x07\n");

        ck_assert_str_eq(mcp_log_safe("a\x1b[2Jb\x7f", buf, sizeof(buf)), "a?[2Jb?");
        ck_assert_str_eq(mcp_log_safe("0123456789abcdefXYZ", buf, sizeof(buf)), "0123456789abcde");
        ck_assert_str_eq(mcp_log_safe(NULL, buf, sizeof(buf)), "");
        ck_assert_int_eq(mcp_id_from_json(v, &id), 0);
        ck_assert_str_eq(mcp_id_describe(&id, big, sizeof(big)), "\"?]0;pwned??\"");
        mcp_id_done(&id);
        json_object_put(v);
}
END_TEST

START_TEST(blank_lines_crlf_and_split_writes)
{
        h_start();
        h_write("\n\r\n   \n", 7);
        h_write("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n", 42);
        json_object_put(recv_result("1"));
        /* One message in two writes, and two messages in one write. */
        h_write("{\"jsonrpc\":\"2.0\",\"id\":2,", 24);
        h_expect_nothing(100);
        h_write("\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n", 58);
        json_object_put(recv_result("2"));
        json_object_put(recv_result("3"));
        /* A last message without '\n' before EOF is still served. */
        h_write("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}", 40);
        close(H->to_srv);
        H->to_srv = -1;
        json_object_put(recv_result("4"));
        ck_assert_int_eq(h_finish(), 0);
}
END_TEST

START_TEST(five_mib_line_round_trips)
{
        size_t n = (size_t)5 << 20;
        char *big = xmalloc(n + 1), *msg;
        json_object *m;

        memset(big, 'a', n);
        big[n] = '\0';
        h_start();
        msg = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                        "\"name\":\"echo\",\"arguments\":{\"code\":\"%s\"}}}\n",
                        big);
        h_write(msg, strlen(msg));
        m = h_recv_within(30000); /* slow under sanitizers: 5 MiB parsed, copied, escaped */
        ck_assert_ptr_nonnull(m);
        ck_assert_str_eq(id_text(m), "1");
        ck_assert(!json_object_get_boolean(get(m, "result.isError")));
        ck_assert_uint_ge(strlen(jstr(m, "result.content.0.text")), n);
        json_object_put(m);
        ping_ok(2);
        free(msg);
        free(big);
}
END_TEST

START_TEST(overlong_line_answered_parse_error)
{
        size_t n = (size_t)3 << 20;
        char *big = xmalloc(n);

        h_start_with(8, 100, (size_t)1 << 20); /* cap 1 MiB */
        memset(big, ' ', n);
        memcpy(big, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"", 46);
        h_write(big, n);
        h_write("\"}\n", 3);
        recv_error("absent", -32700);
        ping_ok(2); /* still serving */
        free(big);
}
END_TEST

/* ---- JSON-RPC ---- */

START_TEST(malformed_and_invalid_requests)
{
        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\""); /* cut short */
        recv_error("absent", -32700);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing");
        recv_error("absent", -32700);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":NaN}}");
        recv_error("absent", -32700);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xff\"}");
        recv_error("absent", -32700);
        h_send("{'jsonrpc':'2.0'}");
        recv_error("absent", -32700);
        /* Valid JSON, not a request. */
        h_send("5");
        recv_error("absent", -32600);
        h_send("\"ping\"");
        recv_error("absent", -32600);
        h_send("{\"id\":1,\"method\":\"ping\"}"); /* no jsonrpc */
        recv_error("1", -32600);
        h_send("{\"jsonrpc\":\"1.0\",\"id\":2,\"method\":\"ping\"}");
        recv_error("2", -32600);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":7}");
        recv_error("3", -32600);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":4}");
        recv_error("4", -32600);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":3}");
        recv_error("5", -32600);
        /* Bad ids: answered without an id (the TS client rejects "id": null). */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}");
        recv_error("absent", -32600);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}");
        recv_error("absent", -32600);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}");
        recv_error("absent", -32600);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}");
        recv_error("absent", -32600);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}");
        recv_error("absent", -32600);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,\"method\":\"ping\"}");
        recv_error("absent", -32600);
        /* Unknown method; params of the wrong shape. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/list\"}");
        recv_error("6", -32601);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":[1]}");
        recv_error("7", -32602);
        ping_ok(8);
}
END_TEST

START_TEST(garbage_lines_each_get_one_error)
{
        const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
        unsigned seed = 12345;
        char line[200];
        json_object *m;

        h_start();
        /* Every proper prefix of a request is malformed JSON. */
        for (size_t n = 1; n < strlen(ping); n++) {
                if (ping[n - 1] == ' ')
                        continue;
                h_write(ping, n);
                h_write("\n", 1);
                recv_error("absent", -32700);
        }
        /* Random bytes (no '\n'): exactly one error each, never a crash, never an id. */
        for (int i = 0; i < 300; i++) {
                size_t n = 1 + (size_t)(rand_r(&seed) % (sizeof(line) - 1));
                for (size_t k = 0; k < n; k++) {
                        line[k] = (char)(rand_r(&seed) % 256);
                        if (line[k] == '\n' || line[k] == '\r' || line[k] == ' ' || line[k] == '\t')
                                line[k] = 'x';
                }
                h_write(line, n);
                h_write("\n", 1);
                m = h_recv();
                ck_assert_msg(has(m, "error") && !has(m, "id"), "%s",
                              json_object_to_json_string(m));
                int code = json_object_get_int(get(m, "error.code"));
                ck_assert(code == -32700 || code == -32600);
                json_object_put(m);
        }
        ping_ok(2);
}
END_TEST

START_TEST(ids_echoed_by_type)
{
        json_object *m;

        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"method\":\"ping\"}");
        json_object_put(recv_result("\"1\""));
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
        json_object_put(recv_result("1"));
        h_send("{\"jsonrpc\":\"2.0\",\"id\":-9007199254740993,\"method\":\"ping\"}");
        json_object_put(recv_result("-9007199254740993"));
        h_send("{\"jsonrpc\":\"2.0\",\"id\":\"a/b \\u00e9\\n\",\"method\":\"ping\"}");
        m = h_recv();
        ck_assert_str_eq(jstr(m, "id"), "a/b \xc3\xa9\n");
        json_object_put(m);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":\"\",\"method\":\"ping\"}");
        json_object_put(recv_result("\"\""));
        /* Ids may repeat once the earlier request is done. */
        ping_ok(1);
        ping_ok(1);
}
END_TEST

START_TEST(notifications_and_responses_unanswered)
{
        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\",\"params\":{}}");
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":42}}");
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{}}");
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"tools/list\"}"); /* a request without id */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}");
        h_send("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}");
        /* The next frame is the ping's: nothing was sent for the seven messages before. */
        ping_ok(9);
        h_expect_nothing(100);
}
END_TEST

START_TEST(in_flight_id_clash)
{
        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"sleep\"}}");
        while (atomic_load(&H->fake.calls) < 1)
                sleep_ms(5);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}");
        recv_error("7", -32600);
        /* "7" is another id than 7. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":\"7\",\"method\":\"ping\"}");
        json_object_put(recv_result("\"7\""));
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":7}}");
        for (int i = 0; i < 400 && atomic_load(&H->fake.returned) == 0; i++)
                sleep_ms(5);
        ck_assert_int_eq(atomic_load(&H->fake.cancel_seen), 1);
        h_expect_nothing(300);
        /* Cancelled and done: the id is free again. */
        ping_ok(7);
}
END_TEST

/* ---- revisions ---- */

static void check_initialize(const char *requested, const char *answered, bool title,
                             bool description)
{
        json_object *m;

        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
               "\"version\":\"1\"}}}",
               requested);
        m = recv_result("1");
        ck_assert_str_eq(jstr(m, "result.protocolVersion"), answered);
        ck_assert_str_eq(jstr(m, "result.serverInfo.name"), "vestibule");
        ck_assert_ptr_nonnull(jstr(m, "result.serverInfo.version"));
        ck_assert(has(m, "result.serverInfo.title") == title);
        ck_assert(has(m, "result.serverInfo.description") == description);
        ck_assert(json_object_get_boolean(get(m, "result.capabilities.tools.listChanged")) == 0);
        ck_assert(has(m, "result.capabilities.tools.listChanged"));
        ck_assert(has(m, "result.capabilities.logging"));
        ck_assert_str_eq(jstr(m, "result.instructions"), "Use run_code.");
        ck_assert(!has(m, "result.resultType"));
        json_object_put(m);
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

START_TEST(initialize_negotiates_each_revision)
{
        h_start();
        check_initialize("2024-11-05", "2024-11-05", false, false);
        check_initialize("2025-03-26", "2025-03-26", false, false);
        check_initialize("2025-06-18", "2025-06-18", true, false);
        check_initialize("2025-11-25", "2025-11-25", true, true);
        check_initialize("2024-10-07", "2024-10-07", false, false);
        check_initialize("2026-07-28", "2025-11-25", true, true);
        check_initialize("2099-01-01", "2025-11-25", true, true);
        check_initialize("garbage", "2025-11-25", true, true);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{}}");
        recv_error("2", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\"}");
        recv_error("3", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":20241105}}");
        recv_error("4", -32602);
}
END_TEST

/* tools/list under @version (NULL: modern per-request _meta); the "echo" and "strout" tools. */
static json_object *list_tools(const char *version, json_object **ret_strout)
{
        json_object *m, *tools, *echo = NULL;

        *ret_strout = NULL;
        if (version) {
                initialize(version);
                h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
        } else {
                h_send(
                    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{" META_2026
                    "}}");
        }
        m = recv_result("2");
        tools = get(m, "result.tools");
        ck_assert_uint_eq(json_object_array_length(tools), 9);
        for (size_t i = 0; i < json_object_array_length(tools); i++) {
                json_object *t = json_object_array_get_idx(tools, i);
                ck_assert(!has(t, "futureField"));
                if (strcmp(jstr(t, "name"), "echo") == 0)
                        json_object_deep_copy(t, &echo, NULL);
                else if (strcmp(jstr(t, "name"), "strout") == 0)
                        json_object_deep_copy(t, ret_strout, NULL);
        }
        ck_assert_ptr_nonnull(*ret_strout);
        ck_assert(!has(m, "result.nextCursor"));
        ck_assert(has(m, "result.resultType") == !version);
        ck_assert(has(m, "result.ttlMs") == !version);
        ck_assert(has(m, "result.cacheScope") == !version);
        json_object_put(m);
        ck_assert_ptr_nonnull(echo);
        return echo;
}

START_TEST(tools_list_stripped_per_revision)
{
        json_object *t, *so = NULL;

        h_start();
        t = list_tools("2024-11-05", &so);
        ck_assert_str_eq(jstr(t, "description"), "echoes");
        ck_assert(has(t, "inputSchema.type") && !has(t, "inputSchema.$schema"));
        ck_assert(!has(t, "annotations") && !has(t, "title") && !has(t, "outputSchema") &&
                  !has(t, "icons") && !has(t, "execution") && !has(t, "_meta"));
        ck_assert(!has(so, "outputSchema"));
        json_object_put(t);
        json_object_put(so);

        t = list_tools("2025-03-26", &so);
        ck_assert(has(t, "annotations.readOnlyHint"));
        ck_assert(!has(t, "title") && !has(t, "outputSchema") && !has(t, "icons") &&
                  !has(t, "execution") && !has(t, "_meta") && !has(t, "inputSchema.$schema"));
        json_object_put(t);
        json_object_put(so);

        t = list_tools("2025-06-18", &so);
        ck_assert(has(t, "annotations") && has(t, "title") && has(t, "outputSchema.type") &&
                  has(t, "_meta"));
        ck_assert(!has(t, "icons") && !has(t, "execution") && !has(t, "inputSchema.$schema") &&
                  !has(t, "outputSchema.$schema"));
        ck_assert(!has(so, "outputSchema")); /* type "string": TS clients would reject the list */
        json_object_put(t);
        json_object_put(so);

        t = list_tools("2025-11-25", &so);
        ck_assert(has(t, "icons") && has(t, "execution.taskSupport") &&
                  has(t, "inputSchema.$schema") && has(t, "outputSchema.$schema"));
        ck_assert(!has(so, "outputSchema"));
        json_object_put(t);
        json_object_put(so);

        /* Modern, after a legacy initialize: its own shape, and the session is untouched. */
        t = list_tools(NULL, &so);
        ck_assert(has(t, "icons") && has(t, "annotations") && has(t, "title") &&
                  !has(t, "execution"));
        ck_assert(has(so, "outputSchema")); /* any schema is fine from 2026-07-28 */
        json_object_put(t);
        json_object_put(so);
        so = NULL;
        h_send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
        json_object *m = recv_result("3");
        ck_assert(has(get(m, "result.tools.0"), "execution")); /* still 2025-11-25 */
        json_object_put(m);

        h_send("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{\"cursor\":"
               "\"\"}}");
        json_object_put(recv_result("4"));
        h_send("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\",\"params\":{\"cursor\":"
               "\"abc\"}}");
        recv_error("5", -32602);
}
END_TEST

START_TEST(tools_list_before_initialize_is_latest_legacy)
{
        json_object *m;

        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
        m = recv_result("1");
        ck_assert(has(get(m, "result.tools.0"), "execution"));
        ck_assert(!has(m, "result.resultType"));
        json_object_put(m);
}
END_TEST

START_TEST(structured_content_per_revision)
{
        json_object *m;

        h_start();
        initialize("2025-03-26");
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\",\"arguments\":{\"a\":1}}}");
        m = recv_result("1");
        ck_assert(!has(m, "result.structuredContent"));
        ck_assert_str_eq(jstr(m, "result.content.0.type"), "text");
        ck_assert_str_eq(jstr(m, "result.content.0.text"), "{\"a\":1}");
        ck_assert(has(m, "result.isError"));
        json_object_put(m);
        initialize("2025-06-18");
        h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\",\"arguments\":{\"a\":1}}}");
        m = recv_result("2");
        ck_assert_int_eq(json_object_get_int(get(m, "result.structuredContent.args.a")), 1);
        ck_assert(!has(m, "result.resultType"));
        json_object_put(m);
}
END_TEST

START_TEST(ping_and_set_level)
{
        json_object *m;

        h_start();
        ping_ok(1); /* before initialize, too */
        initialize("2025-06-18");
        h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"logging/setLevel\",\"params\":{"
               "\"level\":\"warning\"}}");
        m = recv_result("2");
        ck_assert_int_eq(json_object_object_length(get(m, "result")), 0);
        json_object_put(m);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\",\"params\":{"
               "\"level\":\"loud\"}}");
        recv_error("3", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"logging/setLevel\"}");
        recv_error("4", -32602);
}
END_TEST

/* ---- 2026-07-28 ---- */

START_TEST(discover_and_modern_results)
{
        json_object *m, *sv;
        bool modern = false, legacy = false;

        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{" META_2026
               "}}");
        m = recv_result("1");
        ck_assert_str_eq(jstr(m, "result.resultType"), "complete");
        sv = get(m, "result.supportedVersions");
        for (size_t i = 0; i < json_object_array_length(sv); i++) {
                const char *v = json_object_get_string(json_object_array_get_idx(sv, i));
                modern |= strcmp(v, "2026-07-28") == 0;
                legacy |= strcmp(v, "2024-11-05") == 0;
        }
        ck_assert(modern && legacy);
        ck_assert(has(m, "result.capabilities.tools"));
        ck_assert_str_eq(jstr(m, "result.instructions"), "Use run_code.");
        ck_assert(json_object_is_type(get(m, "result.ttlMs"), json_type_int));
        ck_assert_int_ge(json_object_get_int(get(m, "result.ttlMs")), 0);
        ck_assert_str_eq(jstr(m, "result.cacheScope"), "public");
        ck_assert(!has(m, "result.serverInfo"));
        ck_assert_str_eq(jstr(json_object_object_get(get(m, "result._meta"),
                                                     "io.modelcontextprotocol/serverInfo"),
                              "name"),
                         "vestibule");
        json_object_put(m);

        /* tools/call: resultType on every result, isError ones included. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\",\"arguments\":{}," META_2026 "}}");
        m = recv_result("2");
        ck_assert_str_eq(jstr(m, "result.resultType"), "complete");
        ck_assert(has(m, "result.structuredContent"));
        /* Only the _meta the revision requires, which is none: serverInfo in a result is a
         * SHOULD, and clients such as Mastra pass a whole tool result to their model. */
        ck_assert(!has(m, "result._meta"));
        json_object_put(m);

        /* Gone in 2026-07-28: ping, logging/setLevel. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":{" META_2026 "}}");
        recv_error("3", -32601);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"logging/setLevel\",\"params\":{"
               "\"level\":\"info\"," META_2026 "}}");
        recv_error("4", -32601);

        /* initialize still works after discover (rule 1: even carrying modern _meta), and
         * legacy results carry no resultType. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":\"2025-03-26\",\"capabilities\":{}," META_2026 "}}");
        m = recv_result("\"i\"");
        ck_assert_str_eq(jstr(m, "result.protocolVersion"), "2025-03-26");
        ck_assert(!has(m, "result.resultType"));
        json_object_put(m);
        initialize("2025-06-18");
        h_send("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"sleep\",\"arguments\":{},\"_meta\":{}}}");
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":5}}");
        ping_ok(6);
}
END_TEST

START_TEST(modern_meta_errors)
{
        json_object *m;

        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\"}");
        recv_error("1", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server/discover\",\"params\":{}}");
        recv_error("2", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"server/discover\",\"params\":{\"_meta\":"
               "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}");
        recv_error("3", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{\"_meta\":"
               "{\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
        recv_error("4", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\",\"params\":{\"_meta\":"
               "{\"io.modelcontextprotocol/protocolVersion\":20260728,"
               "\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
        recv_error("5", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\",\"params\":{\"_meta\":"
               "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
               "\"io.modelcontextprotocol/clientCapabilities\":[]}}}");
        recv_error("6", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"server/discover\",\"params\":{\"_meta\":"
               "{\"io.modelcontextprotocol/protocolVersion\":\"1900-01-01\","
               "\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
        m = h_recv();
        expect_error(m, "7", -32022);
        ck_assert_str_eq(jstr(m, "error.data.requested"), "1900-01-01");
        ck_assert_str_eq(jstr(m, "error.data.supported.0"), "2026-07-28");
        ck_assert(!has(m, "result"));
        json_object_put(m);
        /* A clientInfo key alone also makes the request modern, and then it lacks the rest. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\",\"_meta\":{\"io.modelcontextprotocol/clientInfo\":{\"name\":\"x\"}}}}");
        recv_error("8", -32602);
        /* An unknown method with valid modern _meta. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"prompts/list\",\"params\":{" META_2026
               "}}");
        recv_error("9", -32601);
        /* A progressToken alone is not a modern key. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\",\"params\":{\"_meta\":{"
               "\"progressToken\":1}}}");
        json_object_put(recv_result("10"));
}
END_TEST

START_TEST(subscriptions_listen)
{
        json_object *m;

        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"subscriptions/listen\",\"params\":{"
               "\"notifications\":{\"toolsListChanged\":true}," META_2026 "}}");
        m = h_recv();
        ck_assert_str_eq(jstr(m, "method"), "notifications/subscriptions/acknowledged");
        ck_assert(!has(m, "id"));
        ck_assert_int_eq(json_object_object_length(get(m, "params.notifications")), 0);
        ck_assert_str_eq(json_object_get_string(json_object_object_get(
                             get(m, "params._meta"), "io.modelcontextprotocol/subscriptionId")),
                         "s1");
        json_object_put(m);
        /* Cancelled by the client: it ends without any reply. */
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":\"s1\"}}");
        h_expect_nothing(200);
        /* A second one stays open until shutdown, which ends it with its result. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":\"s2\",\"method\":\"subscriptions/listen\",\"params\":{"
               "\"notifications\":{}," META_2026 "}}");
        json_object_put(h_recv());
        h_send("{\"jsonrpc\":\"2.0\",\"id\":\"s2\",\"method\":\"tools/list\"}");
        recv_error("\"s2\"", -32600); /* still in flight */
        close(H->to_srv);
        H->to_srv = -1;
        m = recv_result("\"s2\"");
        ck_assert_str_eq(jstr(m, "result.resultType"), "complete");
        ck_assert_str_eq(json_object_get_string(json_object_object_get(
                             get(m, "result._meta"), "io.modelcontextprotocol/subscriptionId")),
                         "s2");
        json_object_put(m);
        ck_assert_int_eq(h_finish(), 0);
}
END_TEST

/* ---- batches ---- */

START_TEST(batches_only_under_2025_03_26)
{
        json_object *m;
        int seen = 0;

        h_start();
        h_send("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"); /* no initialize yet */
        recv_error("absent", -32600);
        initialize("2025-06-18");
        h_send("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
        recv_error("absent", -32600);
        initialize("2024-11-05");
        h_send("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
        recv_error("absent", -32600);

        initialize("2025-03-26");
        h_send("[]");
        m = h_recv();
        ck_assert(json_object_is_type(m, json_type_object));
        expect_error(m, "absent", -32600);
        json_object_put(m);
        /* Only notifications: nothing at all. */
        h_send("[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},"
               "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":1}}]");
        h_expect_nothing(200);
        /* Mixed, with a slow call: one array once everything is done. */
        h_send("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
               "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},"
               "{\"jsonrpc\":\"2.0\",\"id\":\"2\",\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"slow\"}},"
               "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"nope\"},"
               "5,"
               "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":\"2025-03-26\"}}]");
        m = h_recv();
        ck_assert_msg(json_object_is_type(m, json_type_array), "%s", json_object_to_json_string(m));
        ck_assert_uint_eq(json_object_array_length(m), 5);
        for (size_t i = 0; i < 5; i++) {
                json_object *e = json_object_array_get_idx(m, i);
                const char *id = id_text(e);
                if (strcmp(id, "1") == 0) {
                        seen |= 1;
                        ck_assert(has(e, "result"));
                } else if (strcmp(id, "\"2\"") == 0) {
                        seen |= 2;
                        ck_assert_str_eq(jstr(e, "result.content.0.text"), "slow done");
                } else if (strcmp(id, "3") == 0) {
                        seen |= 4;
                        expect_error(e, "3", -32601);
                } else if (strcmp(id, "absent") == 0) {
                        seen |= 8;
                        expect_error(e, "absent", -32600);
                } else if (strcmp(id, "4") == 0) {
                        seen |= 16;
                        expect_error(e, "4", -32600);
                }
        }
        ck_assert_int_eq(seen, 31);
        json_object_put(m);
        ping_ok(5);
}
END_TEST

/* ---- tools/call ---- */

START_TEST(tools_call_params)
{
        json_object *m;

        h_start();
        initialize("2025-11-25");
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}");
        recv_error("1", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":3}}");
        recv_error("2", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\",\"arguments\":[1]}}");
        recv_error("3", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\",\"arguments\":7}}");
        recv_error("4", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\",\"arguments\":\"[1,2]\"}}");
        recv_error("5", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"nosuch\"}}");
        recv_error("6", -32602);
        ck_assert_int_eq(atomic_load(&H->fake.calls), 0); /* none of these reached the tool */

        /* Missing arguments -> {}; a JSON string holding an object is coerced. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\"}}");
        m = recv_result("7");
        ck_assert_str_eq(jstr(m, "result.content.0.text"), "{}");
        ck_assert(!json_object_get_boolean(get(m, "result.isError")));
        json_object_put(m);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\",\"arguments\":\"{\\\"language\\\":\\\"python\\\"}\"}}");
        m = recv_result("8");
        ck_assert_str_eq(jstr(m, "result.content.0.text"), "{\"language\":\"python\"}");
        json_object_put(m);

        /* Handler errors: -EINVAL/-ENOENT -> -32602, anything else -> -32603. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"einval\"}}");
        recv_error("9", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"ghost\"}}");
        recv_error("10", -32602);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"fail\"}}");
        m = h_recv();
        expect_error(m, "11", -32603);
        ck_assert_ptr_nonnull(strstr(jstr(m, "error.message"), "the fake backend broke"));
        json_object_put(m);

        /* Each refusal of the params, word for word (do_tools_call's parts keep them). */
        static const char *const refusals[][2] = {
            {"{\"name\":[]}", "tools/call needs params.name (a string) and params.arguments "
                              "(an object)"},
            {"{\"name\":\"echo\",\"arguments\":\"{1\"}",
             "tools/call params.arguments must be an object"},
            {"{\"name\":\"no\\u0000such\"}", "Unknown tool: 'no'"},
        };
        int calls_before = atomic_load(&H->fake.calls);
        for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
                char id[16];
                snprintf(id, sizeof(id), "%zu", 20 + i);
                h_send("{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"tools/call\",\"params\":%s}",
                       id, refusals[i][0]);
                m = h_recv();
                expect_error(m, id, -32602);
                ck_assert_str_eq(jstr(m, "error.message"), refusals[i][1]);
                json_object_put(m);
        }
        ck_assert_int_eq(atomic_load(&H->fake.calls), calls_before); /* none reached the tool */
}
END_TEST

START_TEST(tool_text_is_valid_json_utf8)
{
        json_object *m;

        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"binary\"}}");
        /* h_recv() parses the frame with json-c; its text has U+FFFD for the bad bytes and the
         * ESC arrives as an escaped control character, decoded back here. */
        m = recv_result("1");
        ck_assert_str_eq(jstr(m, "result.content.0.text"), "a\xef\xbf\xbd\x1b[31mb\xef\xbf\xbd");
        json_object_put(m);
}
END_TEST

START_TEST(oversized_result_becomes_error)
{
        char big[8000];
        json_object *m;

        start_max_frame = 4096;
        h_start();
        memset(big, 'b', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        h_send("{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"echo\",\"arguments\":{\"x\":\"%s\"}}}",
               big);
        m = h_recv();
        expect_error(m, "\"big\"", -32603);
        ck_assert_ptr_nonnull(strstr(jstr(m, "error.message"), "VESTIBULE_MAX_OUTPUT_BYTES"));
        json_object_put(m);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"echo\",\"arguments\":{\"x\":\"small\"}}}");
        json_object_put(recv_result("2"));
}
END_TEST

START_TEST(calls_beyond_max_workers_blocked)
{
        json_object *m;
        const char *text;

        h_start_with(1, 100, 0);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"sleep\"}}");
        while (atomic_load(&H->fake.calls) < 1)
                sleep_ms(5);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"echo\"}}");
        m = recv_result("2");
        ck_assert(json_object_get_boolean(get(m, "result.isError")));
        text = jstr(m, "result.content.0.text");
        ck_assert_msg(strncmp(text, "Blocked:", 8) == 0 && strstr(text, "Retry"), "%s", text);
        json_object_put(m);
        ck_assert_int_eq(atomic_load(&H->fake.calls), 1);
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":1}}");
        /* The slot frees once the cancelled call ends (the worker finishes just after the
         * tool returns, so allow it a moment). */
        for (int i = 0; i < 400 && atomic_load(&H->fake.returned) == 0; i++)
                sleep_ms(5);
        for (int i = 3;; i++) {
                bool blocked;
                char want[16];
                ck_assert_int_lt(i, 40);
                sleep_ms(50);
                h_send("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"echo\"}}",
                       i);
                snprintf(want, sizeof(want), "%d", i);
                m = recv_result(want);
                blocked = json_object_get_boolean(get(m, "result.isError"));
                json_object_put(m);
                if (!blocked)
                        break;
        }
        ck_assert_int_eq(atomic_load(&H->fake.calls), 2);
}
END_TEST

/* ---- cancellation, concurrency, progress ---- */

START_TEST(cancel_stops_call_without_reply)
{
        h_start();
        initialize("2025-06-18");
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"sleep\"}}");
        while (atomic_load(&H->fake.calls) < 1)
                sleep_ms(5);
        /* Wrong JSON type: "1" is not 1, so nothing is cancelled. */
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":\"1\"}}");
        h_expect_nothing(200);
        ck_assert_int_eq(atomic_load(&H->fake.cancel_seen), 0);
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":1,\"reason\":\"user\"}}");
        for (int i = 0; i < 400 && atomic_load(&H->fake.returned) == 0; i++)
                sleep_ms(5);
        ck_assert_int_eq(atomic_load(&H->fake.cancel_seen), 1); /* the tool saw it */
        h_expect_nothing(300);                                  /* and no reply came */
        /* A late cancel for a finished request is ignored. */
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":1}}");
        ping_ok(2);
}
END_TEST

START_TEST(cancel_modern_call)
{
        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"sleep\"," META_2026 "}}");
        while (atomic_load(&H->fake.calls) < 1)
                sleep_ms(5);
        h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":1," META_2026 "}}");
        for (int i = 0; i < 400 && atomic_load(&H->fake.returned) == 0; i++)
                sleep_ms(5);
        ck_assert_int_eq(atomic_load(&H->fake.cancel_seen), 1);
        h_expect_nothing(300);
}
END_TEST

START_TEST(cancel_races_completion)
{
        int replies[101] = {0}, blocked = 0;
        uint64_t end;
        json_object *m;

        h_start();
        /* Each call is cancelled right away: whichever wins, an id gets at most one reply and
         * nothing else goes wrong. */
        for (int i = 1; i <= 100; i++) {
                h_send("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"%s\",\"_meta\":{\"progressToken\":%d}}}",
                       i, i % 3 ? "echo" : "progress", i);
                h_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                       "\"requestId\":%d}}",
                       i);
        }
        /* Read until every call is accounted for (run by the tool, or refused at once beyond
         * the 8 workers, so never cancelled), then 300 ms more of silence. */
        end = mono_ms() + 20000;
        for (;;) {
                bool all = atomic_load(&H->fake.returned) + blocked == 100;
                m = h_recv_within(all ? 300 : 100);
                if (!m) {
                        if (all)
                                break;
                        ck_assert_msg(mono_ms() < end, "calls never ended");
                        continue;
                }
                if (has(m, "method")) { /* progress */
                        json_object_put(m);
                        continue;
                }
                ck_assert_msg(has(m, "result"), "%s", json_object_to_json_string(m));
                int id = json_object_get_int(get(m, "id"));
                ck_assert(id >= 1 && id <= 100);
                ck_assert_int_eq(replies[id]++, 0);
                blocked += strncmp(jstr(m, "result.content.0.text"), "Blocked:", 8) == 0;
                json_object_put(m);
        }
        ck_assert_int_eq(atomic_load(&H->fake.calls) + blocked, 100);
        ping_ok(101);
}
END_TEST

START_TEST(calls_run_concurrently_while_reading)
{
        uint64_t t0;
        json_object *m;
        int got = 0;

        h_start();
        t0 = mono_ms();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"slow\"}}");
        h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"slow\"}}");
        /* stdin is still read while both run: the ping is answered first. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}");
        m = recv_result("3"); /* the first frame, ahead of both 500 ms calls */
        json_object_put(m);
        for (int i = 0; i < 2; i++) {
                m = h_recv();
                got |= json_object_get_int(get(m, "id"));
                ck_assert_str_eq(jstr(m, "result.content.0.text"), "slow done");
                json_object_put(m);
        }
        ck_assert_int_eq(got, 3);
        /* Two 500 ms calls overlapped: one after the other would take 1 s at least. */
        ck_assert_uint_lt(mono_ms() - t0, 1000);
        ck_assert_int_eq(atomic_load(&H->fake.max_in_flight), 2);
}
END_TEST

static void progress_run(const char *token, const char *version, bool want_message)
{
        json_object *m;
        double last = -1;
        int notes = 0;

        initialize(version);
        H->fake.progress_steps = 5;
        H->fake.progress_gap_ms = 150; /* > the 100 ms rate limit of h_start() */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"progress\",\"_meta\":{\"progressToken\":%s}}}",
               token);
        for (;;) {
                m = h_recv();
                if (has(m, "id")) {
                        ck_assert_str_eq(id_text(m), "1");
                        ck_assert_str_eq(jstr(m, "result.content.0.text"), "progress done");
                        json_object_put(m);
                        break;
                }
                ck_assert_str_eq(jstr(m, "method"), "notifications/progress");
                ck_assert_str_eq(json_object_to_json_string_ext(get(m, "params.progressToken"),
                                                                JSON_C_TO_STRING_PLAIN),
                                 token);
                double p = json_object_get_double(get(m, "params.progress"));
                ck_assert(p > last);
                last = p;
                ck_assert(json_object_get_double(get(m, "params.total")) == 30.0);
                ck_assert(has(m, "params.message") == want_message);
                notes++;
                json_object_put(m);
        }
        ck_assert_int_ge(notes, 3); /* 5 steps 150 ms apart, at most one per 100 ms */
        ck_assert_int_le(notes, 5);
        h_expect_nothing(200); /* nothing after the response */
}

START_TEST(progress_before_response)
{
        h_start();
        progress_run("\"tok\"", "2025-03-26", true);
        progress_run("17", "2024-11-05", false);
}
END_TEST

START_TEST(progress_rate_limited_and_opt_in)
{
        uint64_t t0;
        json_object *m;
        int notes = 0;

        h_start_with(8, 1000, 0);
        t0 = mono_ms();
        H->fake.progress_steps = 20;
        H->fake.progress_gap_ms = 10; /* 20 reports in ~200 ms */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"progress\",\"_meta\":{\"progressToken\":\"t\"}}}");
        for (;;) {
                m = h_recv();
                bool reply = has(m, "id");
                notes += !reply;
                json_object_put(m);
                if (reply)
                        break;
        }
        /* At most one a second: one for the ~200 ms run (more only if a loaded machine
         * stretched it past a second). */
        ck_assert_int_ge(notes, 1);
        ck_assert_int_le(notes, 1 + (int)((mono_ms() - t0) / 1000));
        /* Without a token the tool gets no progress callback and nothing is sent. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"progress\"}}");
        m = recv_result("2");
        json_object_put(m);
        ck_assert_int_eq(atomic_load(&H->fake.had_progress), 0);
        /* A token that is neither string nor integer is ignored the same way. */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"progress\",\"_meta\":{\"progressToken\":1.5}}}");
        json_object_put(recv_result("3"));
        ck_assert_int_eq(atomic_load(&H->fake.had_progress), 0);
}
END_TEST

/* ---- shutdown ---- */

START_TEST(eof_shuts_down_with_call_in_flight)
{
        uint64_t t0;

        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"sleep\"}}");
        while (atomic_load(&H->fake.calls) < 1)
                sleep_ms(5);
        t0 = mono_ms();
        close(H->to_srv);
        H->to_srv = -1;
        ck_assert_int_eq(h_finish(), 0);
        ck_assert_uint_lt(H->returned_ms - t0, 1000);
        ck_assert_int_eq(atomic_load(&H->fake.shutdown_calls), 1);
        ck_assert_int_eq(atomic_load(&H->fake.in_flight), 0); /* the worker ended first */
}
END_TEST

START_TEST(eof_shutdown_without_shutdown_handler_uses_cancel_fd)
{
        uint64_t t0;

        h_start();
        H->h.shutdown = NULL; /* read by mcp_serve only at shutdown */
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"sleep\"}}");
        while (atomic_load(&H->fake.calls) < 1)
                sleep_ms(5);
        t0 = mono_ms();
        ck_assert_int_eq(h_finish(), 0);
        ck_assert_uint_lt(H->returned_ms - t0, 1000);
        ck_assert_int_eq(atomic_load(&H->fake.cancel_seen), 1);
}
END_TEST

START_TEST(signal_shuts_down)
{
        int sig = _i == 0 ? SIGTERM : SIGINT;
        sigset_t set;
        uint64_t t0;

        /* The caller's duty (mcp.h): SIGTERM and SIGINT blocked in every thread. */
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        h_start();
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"sleep\"}}");
        while (atomic_load(&H->fake.calls) < 1)
                sleep_ms(5);
        t0 = mono_ms();
        kill(getpid(), sig);
        pthread_join(H->thread, NULL);
        ck_assert_int_eq(H->rc, 0);
        ck_assert_uint_lt(H->returned_ms - t0, 1000);
        ck_assert_int_eq(atomic_load(&H->fake.shutdown_calls), 1);
}
END_TEST

START_TEST(epipe_ends_serving)
{
        h_start();
        close(H->from_srv);
        H->from_srv = open("/dev/null", O_RDONLY | O_CLOEXEC);
        h_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
        pthread_join(H->thread, NULL);
        ck_assert_int_eq(H->rc, -EPIPE);
        ck_assert_int_eq(H->err.code, EPIPE);
}
END_TEST

static TCase *new_case(Suite *s, const char *name)
{
        TCase *tc = tcase_create(name);

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        suite_add_tcase(s, tc);
        return tc;
}

static Suite *mcp_suite(void)
{
        Suite *s = suite_create("mcp");
        TCase *tc;

        tc = new_case(s, "framing");
        tcase_add_test(tc, reader_splits_lines_and_strips_cr);
        tcase_add_test(tc, reader_drops_overlong_line);
        tcase_add_test(tc, utf8_sanitize_replaces_bad_bytes);
        tcase_add_test(tc, log_lines_cannot_carry_control_bytes);
        tcase_add_test(tc, blank_lines_crlf_and_split_writes);
        tcase_add_test(tc, five_mib_line_round_trips);
        tcase_add_test(tc, overlong_line_answered_parse_error);

        tc = new_case(s, "jsonrpc");
        tcase_add_test(tc, malformed_and_invalid_requests);
        tcase_add_test(tc, garbage_lines_each_get_one_error);
        tcase_add_test(tc, ids_echoed_by_type);
        tcase_add_test(tc, notifications_and_responses_unanswered);
        tcase_add_test(tc, in_flight_id_clash);

        tc = new_case(s, "revisions");
        tcase_add_test(tc, initialize_negotiates_each_revision);
        tcase_add_test(tc, tools_list_stripped_per_revision);
        tcase_add_test(tc, tools_list_before_initialize_is_latest_legacy);
        tcase_add_test(tc, structured_content_per_revision);
        tcase_add_test(tc, ping_and_set_level);

        tc = new_case(s, "modern");
        tcase_add_test(tc, discover_and_modern_results);
        tcase_add_test(tc, modern_meta_errors);
        tcase_add_test(tc, subscriptions_listen);

        tc = new_case(s, "batches");
        tcase_add_test(tc, batches_only_under_2025_03_26);

        tc = new_case(s, "tools_call");
        tcase_add_test(tc, tools_call_params);
        tcase_add_test(tc, calls_beyond_max_workers_blocked);
        tcase_add_test(tc, tool_text_is_valid_json_utf8);
        tcase_add_test(tc, oversized_result_becomes_error);

        tc = new_case(s, "cancel_progress");
        tcase_add_test(tc, cancel_stops_call_without_reply);
        tcase_add_test(tc, cancel_modern_call);
        tcase_add_test(tc, cancel_races_completion);
        tcase_add_test(tc, calls_run_concurrently_while_reading);
        tcase_add_test(tc, progress_before_response);
        tcase_add_test(tc, progress_rate_limited_and_opt_in);

        tc = new_case(s, "shutdown");
        tcase_add_test(tc, eof_shuts_down_with_call_in_flight);
        tcase_add_test(tc, eof_shutdown_without_shutdown_handler_uses_cancel_fd);
        tcase_add_loop_test(tc, signal_shuts_down, 0, 2); /* SIGTERM, SIGINT */
        tcase_add_test(tc, epipe_ends_serving);
        return s;
}

int main(void)
{
        return sbx_test_run(mcp_suite());
}
