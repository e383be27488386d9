/* test_adversarial_srv.c - findings of the adversarial review (issue 12) against the server's
 * own code (src/mcp, src/config, src/tools' argument checks, src/audit), each through the real
 * binary started as an MCP client starts it: stdio pipes and the settings a user puts in the
 * client's env for vestibule. Every test failed on the code before its fix; the numbers in the
 * comments are the ones measured then. Memory and CPU are read from /proc/PID of the server.
 * A server that grows without bound is killed by the watchdog in srv_wait_lines() long before
 * it can hurt the host. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "testutil.h"
#include "verify/verify.h"

#define META_2026                                                                                  \
        "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                   \
        "\"io.modelcontextprotocol/clientCapabilities\":{}}"

/* The server, its pipes, and what it wrote so far. */
struct srv {
        pid_t pid;
        int in, out;
        char *buf; /* stdout bytes read, not yet taken as lines */
        size_t len, cap;
        size_t lines, scanned; /* whole lines in buf[0, scanned) */
        size_t peak_rss_kib;   /* highest VmRSS seen while waiting */
};

static char *T, *home, *ws, *audit, *rootfs;

static void fx_setup(void)
{
        T = sbx_test_tmpdir();
        home = xasprintf("%s/home", T);
        ws = xasprintf("%s/home/ws", T);
        audit = xasprintf("%s/audit", T);
        rootfs = xasprintf("%s/rootfs", T);
        ck_assert_int_eq(mkdir(home, 0700), 0);
        ck_assert_int_eq(mkdir(ws, 0700), 0);
}

static void fx_teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", T);

        (void)!system(cmd);
        free(T);
        free(home);
        free(ws);
        free(audit);
        free(rootfs);
}

static bool env_named(const char *const *env, size_t n, const char *prefix)
{
        for (size_t i = 0; i < n; i++)
                if (strncmp(env[i], prefix, strlen(prefix)) == 0)
                        return true;
        return false;
}

/* Start the binary with the environment a client gives (HOME, PATH, USER...) plus @extra
 * ("VAR=value" strings, NULL-terminated), the workspace, audit and rootfs folders included
 * unless @extra names them. stderr goes to T/stderr.log. */
static void srv_start(struct srv *s, const char *const *extra)
{
        _cleanup_free_ char *e_home = xasprintf("HOME=%s", home);
        _cleanup_free_ char *e_ws = xasprintf("VESTIBULE_WORKSPACE=%s", ws);
        _cleanup_free_ char *e_audit = xasprintf("VESTIBULE_AUDIT_DIR=%s", audit);
        _cleanup_free_ char *e_rootfs = xasprintf("VESTIBULE_ROOTFS_DIR=%s", rootfs);
        _cleanup_free_ char *errlog = xasprintf("%s/stderr.log", T);
        const char *env[32];
        size_t n = 0;
        int to[2], from[2];

        env[n++] = e_home;
        env[n++] = "PATH=/usr/local/bin:/usr/bin:/bin";
        env[n++] = "USER=someone";
        env[n++] = "LOGNAME=someone";
        env[n++] = "SHELL=/bin/sh";
        env[n++] = "TERM=xterm";
        env[n++] = "VESTIBULE_BACKEND=naive";
        for (; extra && *extra && n < 24; extra++)
                env[n++] = *extra;
        if (!env_named(env, n, "VESTIBULE_WORKSPACE="))
                env[n++] = e_ws;
        if (!env_named(env, n, "VESTIBULE_AUDIT_DIR="))
                env[n++] = e_audit;
        env[n++] = e_rootfs;
        env[n] = NULL;

        memset(s, 0, sizeof(*s));
        ck_assert_int_eq(pipe2(to, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(from, O_CLOEXEC), 0);
        s->pid = fork();
        ck_assert_int_ge(s->pid, 0);
        if (s->pid == 0) {
                int efd = open(errlog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                dup2(to[0], 0);
                dup2(from[1], 1);
                if (efd >= 0)
                        dup2(efd, 2);
                /* SBX_TEST_BIN: another build of the binary, such as the one before a fix */
                const char *alt = getenv("SBX_TEST_BIN");
                const char *bin = alt ? alt : VESTIBULE_BIN;
                execve(bin, (char *const *)(const char *const[]){bin, NULL}, (char *const *)env);
                _exit(127);
        }
        close(to[0]);
        close(from[1]);
        s->in = to[1];
        s->out = from[0];
        (void)fcntl(s->in, F_SETFL, O_NONBLOCK);
        (void)fcntl(s->out, F_SETFL, O_NONBLOCK);
}

/* Is the server binary built with AddressSanitizer (the Debug build)? Its allocator keeps freed
 * memory in a quarantine and shadow memory on top, so resident sizes say nothing about our
 * code there: the memory bounds are checked on the Release build only. */
static bool bin_sanitized(void)
{
        const char *bin = getenv("SBX_TEST_BIN") ? getenv("SBX_TEST_BIN") : VESTIBULE_BIN;
        static int cached = -1;

        if (cached < 0) {
                _cleanup_free_ char *cmd = xasprintf("grep -q __asan_init '%s'", bin);
                cached = system(cmd) == 0;
        }
        return cached;
}

/* VmRSS or VmHWM ("VmRSS:", "VmHWM:") of @pid in KiB; 0 once it is gone. */
static size_t proc_kib(pid_t pid, const char *key)
{
        _cleanup_free_ char *p = xasprintf("/proc/%d/status", (int)pid);
        char line[256];
        size_t v = 0;
        FILE *f = fopen(p, "re");

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, key, strlen(key)) == 0)
                        v = strtoull(line + strlen(key), NULL, 10);
        fclose(f);
        return v;
}

/* utime + stime of @pid in seconds. */
static double proc_cpu_s(pid_t pid)
{
        _cleanup_free_ char *p = xasprintf("/proc/%d/stat", (int)pid);
        char buf[1024], *q;
        unsigned long long ut = 0, st = 0;
        FILE *f = fopen(p, "re");

        if (!f)
                return 0;
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = '\0';
        fclose(f);
        q = strrchr(buf, ')');
        if (q)
                (void)sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                             &st);
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static size_t count_lines(struct srv *s)
{
        for (; s->scanned < s->len; s->scanned++)
                s->lines += s->buf[s->scanned] == '\n';
        return s->lines;
}

/* Write @data (@len bytes; may be NULL/0) while reading stdout, until @want lines arrived and
 * everything is written, or @timeout_ms passed. The server is SIGKILLed (and the test fails)
 * when its VmRSS passes @rss_max_kib: before the fix of finding 1 it grew by 10 MB a round,
 * up to the host's OOM killer. Return the lines read so far. */
static size_t srv_exchange(struct srv *s, const char *data, size_t len, size_t want, int timeout_ms,
                           size_t rss_max_kib)
{
        struct timespec t0, t;
        size_t off = 0;

        if (bin_sanitized())
                rss_max_kib *= 3; /* shadow memory and quarantine; still bounded */
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (unsigned round = 0;; round++) {
                struct pollfd p[2] = {{.fd = s->out, .events = POLLIN},
                                      {.fd = off < len ? s->in : -1, .events = POLLOUT}};
                size_t rss = round % 16 == 0 ? proc_kib(s->pid, "VmRSS:") : 0;
                long ms;

                if (rss > s->peak_rss_kib)
                        s->peak_rss_kib = rss;
                if (rss > rss_max_kib) {
                        kill(s->pid, SIGKILL);
                        ck_abort_msg("the server grew to %zu KiB (bound %zu KiB): killed", rss,
                                     rss_max_kib);
                }
                if (off >= len && count_lines(s) >= want)
                        return count_lines(s);
                clock_gettime(CLOCK_MONOTONIC, &t);
                ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
                if (ms > timeout_ms)
                        return count_lines(s);
                if (poll(p, 2, 50) < 0)
                        continue;
                if (p[1].revents & (POLLOUT | POLLERR)) {
                        ssize_t k = write(s->in, data + off, len - off);
                        if (k > 0)
                                off += (size_t)k;
                        else if (k < 0 && errno != EAGAIN)
                                ck_abort_msg("write to the server: %s", strerror(errno));
                }
                if (p[0].revents & (POLLIN | POLLHUP)) {
                        if (s->cap - s->len < 65536) {
                                s->cap = s->cap ? s->cap * 2 : 1 << 20;
                                s->buf = xrealloc(s->buf, s->cap);
                        }
                        ssize_t k = read(s->out, s->buf + s->len, s->cap - s->len);
                        if (k > 0)
                                s->len += (size_t)k;
                        else if (k == 0 && off >= len)
                                return count_lines(s);
                }
        }
}

/* Line @i (0-based) of what the server wrote, parsed. */
static json_object *srv_line(const struct srv *s, size_t i)
{
        const char *p = s->buf, *end = s->buf + s->len;

        for (; i > 0 && p < end; i--) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                ck_assert_ptr_nonnull(nl);
                p = nl + 1;
        }
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        ck_assert_ptr_nonnull(nl);
        json_tokener *tok = json_tokener_new();
        json_object *v = json_tokener_parse_ex(tok, p, (int)(nl - p));
        json_tokener_free(tok);
        ck_assert_msg(v, "not JSON: %.200s", p);
        return v;
}

/* Close stdin, wait for a clean exit. Return the exit status (or 128+signal). */
static int srv_stop(struct srv *s)
{
        int st = 0;

        close(s->in);
        for (int i = 0; i < 200; i++) {
                if (waitpid(s->pid, &st, WNOHANG) == s->pid)
                        goto done;
                usleep(50000);
        }
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &st, 0);
done:
        close(s->out);
        free(s->buf);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char INIT[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                           "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                           "\"clientInfo\":{\"name\":\"adversary\",\"version\":\"1\"}}}\n";

#define PING(id) "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"method\":\"ping\"}\n"

static int error_code(json_object *v)
{
        json_object *e = NULL, *c = NULL;

        if (!json_object_object_get_ex(v, "error", &e) || !json_object_object_get_ex(e, "code", &c))
                return 0;
        return json_object_get_int(c);
}

/* Finding 1 (High): a request id of 10 MiB made send_oversized() and mcp_writer_send() call
 * each other with ever bigger errors: no answer, and 10 MB more per round until the host's
 * OOM killer (24 GB). Want: one bounded error reply, the id dropped if it must be. */
START_TEST(huge_request_id_gets_one_bounded_reply)
{
        const size_t id_len = (size_t)10 << 20;
        _cleanup_free_ char *req = xmalloc(id_len + 128);
        struct srv s;
        json_object *v;
        size_t n;

        n = (size_t)sprintf(req, "{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":\"");
        memset(req + n, 'x', id_len);
        n += id_len;
        n += (size_t)sprintf(req + n, "\"}\n");
        srv_start(&s, NULL);
        ck_assert_uint_eq(srv_exchange(&s, INIT, strlen(INIT), 1, 10000, 512 << 10), 1);
        /* control: a short id is answered with itself */
        ck_assert_uint_eq(
            srv_exchange(&s, PING("\"short\""), strlen(PING("\"short\"")), 2, 10000, 512 << 10), 2);
        ck_assert_uint_eq(srv_exchange(&s, req, n, 3, 30000, 512 << 10), 3);
        v = srv_line(&s, 2);
        ck_assert_int_eq(error_code(v), -32603);
        ck_assert(!json_object_object_get_ex(v, "id", NULL)); /* dropped: 10 MiB would not fit */
        json_object_put(v);
        /* one reply, not a stream of them, and the server still answers */
        ck_assert_uint_eq(srv_exchange(&s, PING("9"), strlen(PING("9")), 4, 10000, 512 << 10), 4);
        v = srv_line(&s, 3);
        ck_assert_int_eq(json_object_get_int(json_object_object_get(v, "id")), 9);
        json_object_put(v);
        if (!bin_sanitized())
                ck_assert_uint_lt(s.peak_rss_kib, 256 << 10);
        ck_assert_int_eq(srv_stop(&s), 0);
}
END_TEST

/* issue 24 (protocol, Low): a 10 MiB method or tool name with a small id got -32603 "the reply is
 * over the line limit" (the error echoed the whole name), which blamed the output setting or the
 * id. Want: the right error (-32601 for the method, a tool error for the tool) with the id, in a
 * short reply that quotes only the start of the name. */
START_TEST(huge_method_and_tool_names_get_their_own_error)
{
        const size_t name_len = (size_t)10 << 20;
        _cleanup_free_ char *req = xmalloc(name_len + 256);
        struct srv s;
        json_object *v, *e;
        size_t n;

        srv_start(&s, NULL);
        ck_assert_uint_eq(srv_exchange(&s, INIT, strlen(INIT), 1, 10000, 512 << 10), 1);
        n = (size_t)sprintf(req, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"");
        memset(req + n, 'm', name_len);
        n += name_len;
        n += (size_t)sprintf(req + n, "\"}\n");
        ck_assert_uint_eq(srv_exchange(&s, req, n, 2, 30000, 512 << 10), 2);
        v = srv_line(&s, 1);
        ck_assert_int_eq(error_code(v), -32601);
        ck_assert_int_eq(json_object_get_int(json_object_object_get(v, "id")), 5);
        ck_assert_uint_lt(strlen(json_object_to_json_string(v)), 4096);
        json_object_put(v);

        n = (size_t)sprintf(req, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\","
                                 "\"params\":{\"arguments\":{},\"name\":\"");
        memset(req + n, 't', name_len);
        n += name_len;
        n += (size_t)sprintf(req + n, "\"}}\n");
        ck_assert_uint_eq(srv_exchange(&s, req, n, 3, 30000, 512 << 10), 3);
        v = srv_line(&s, 2);
        ck_assert_int_eq(json_object_get_int(json_object_object_get(v, "id")), 6);
        ck_assert_uint_lt(strlen(json_object_to_json_string(v)), 4096);
        ck_assert_msg(json_object_object_get_ex(v, "error", &e) ||
                          json_object_object_get_ex(v, "result", &e),
                      "%s", json_object_to_json_string(v));
        ck_assert_msg(strstr(json_object_to_json_string(v), "nknown tool"), "%.300s",
                      json_object_to_json_string(v));
        json_object_put(v);
        ck_assert_int_eq(srv_stop(&s), 0);
}
END_TEST

/* Finding 18: after a 300 MB line was refused the server kept ~70 MB resident (2.4 MB
 * before). Want: the memory given back. */
START_TEST(refused_huge_line_gives_memory_back)
{
        const size_t big = (size_t)300 << 20;
        _cleanup_free_ char *line = xmalloc(big + 1);
        struct srv s;
        size_t before, after;
        json_object *v;

        memset(line, 'a', big);
        line[big] = '\n';
        srv_start(&s, NULL);
        ck_assert_uint_eq(srv_exchange(&s, INIT, strlen(INIT), 1, 10000, 1 << 20), 1);
        before = proc_kib(s.pid, "VmRSS:");
        ck_assert_uint_eq(srv_exchange(&s, line, big + 1, 2, 60000, 1 << 20), 2);
        v = srv_line(&s, 1);
        ck_assert_int_eq(error_code(v), -32700);
        json_object_put(v);
        ck_assert_uint_eq(srv_exchange(&s, PING("1"), strlen(PING("1")), 3, 10000, 1 << 20), 3);
        after = proc_kib(s.pid, "VmRSS:");
        if (bin_sanitized()) {
                ck_assert_int_eq(srv_stop(&s), 0);
                return; /* resident sizes of an ASan build say nothing (see bin_sanitized) */
        }
        /* control: the line did make the server hold tens of MB while it was being read */
        ck_assert_uint_gt(s.peak_rss_kib, before + (16 << 10));
        ck_assert_msg(after < before + (8 << 10),
                      "resident %zu KiB after the refused line, %zu KiB before (peak %zu KiB)",
                      after, before, s.peak_rss_kib);
        ck_assert_int_eq(srv_stop(&s), 0);
}
END_TEST

/* Finding 13: subscriptions/listen had no cap and every request walked every open one:
 * 60,000 requests cost 30 s of the server's CPU. Want: a cap with a clear error, and no walk
 * that grows with what the client opened. */
START_TEST(listen_streams_are_capped_and_cheap)
{
        const size_t n = 60000;
        size_t len = 0, cap = n * 320;
        _cleanup_free_ char *reqs = xmalloc(cap);
        struct srv s;
        json_object *v;
        size_t acks = 0, refused = 0, lines;
        double cpu;

        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(
                    reqs + len, cap - len,
                    "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":"
                    "\"subscriptions/listen\",\"params\":{\"notifications\":{}," META_2026 "}}\n",
                    i + 1);
        srv_start(&s, NULL);
        lines = srv_exchange(&s, reqs, len, n, 120000, 512 << 10);
        cpu = proc_cpu_s(s.pid);
        ck_assert_uint_eq(lines, n);
        for (size_t i = 0, off = 0; i < n; i++) {
                const char *nl = memchr(s.buf + off, '\n', s.len - off);
                ck_assert_ptr_nonnull(nl);
                char *one = strndup(s.buf + off, (size_t)(nl - s.buf) - off);
                v = json_tokener_parse(one);
                free(one);
                ck_assert_ptr_nonnull(v);
                off = (size_t)(nl - s.buf) + 1;
                if (json_object_object_get_ex(v, "method", NULL))
                        acks++;
                else if (error_code(v) == -32600)
                        refused++;
                if (i == n - 1 && refused) {
                        const char *m = json_object_get_string(
                            json_object_object_get(json_object_object_get(v, "error"), "message"));
                        ck_assert_ptr_nonnull(strstr(m, "cancel one"));
                }
                json_object_put(v);
        }
        ck_assert_uint_eq(acks + refused, n);
        ck_assert_uint_le(acks, 64);
        ck_assert_uint_ge(acks, 1); /* control: a listen is still served */
        ck_assert_msg(cpu < 8.0, "%zu listen requests cost the server %.1f s of CPU", n, cpu);
        ck_assert_int_eq(srv_stop(&s), 0);
}
END_TEST

/* Finding 16: read_workspace("nul-a\u0000/../../etc/passwd") returned the workspace file
 * nul-a: the path was read as a C string. Want: a path holding NUL refused, clearly. */
START_TEST(read_workspace_refuses_a_path_with_nul)
{
        _cleanup_free_ char *f = xasprintf("%s/nul-a", ws);
        static const char req[] =
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"read_workspace\",\"arguments\":{\"path\":\"nul-a\\u0000/../../etc/passwd\"}}}\n"
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"read_workspace\",\"arguments\":{\"path\":\"nul-a\"}}}\n";
        struct srv s;
        json_object *v, *r;
        FILE *fp = fopen(f, "we");

        ck_assert_ptr_nonnull(fp);
        fputs("workspace file nul-a\n", fp);
        fclose(fp);
        srv_start(&s, NULL);
        ck_assert_uint_eq(srv_exchange(&s, INIT, strlen(INIT), 1, 10000, 512 << 10), 1);
        ck_assert_uint_eq(srv_exchange(&s, req, strlen(req), 3, 20000, 512 << 10), 3);
        for (size_t i = 1; i <= 2; i++) {
                const char *text;
                int id;

                v = srv_line(&s, i);
                id = json_object_get_int(json_object_object_get(v, "id"));
                r = json_object_object_get(v, "result");
                ck_assert_ptr_nonnull(r);
                text = json_object_get_string(json_object_object_get(
                    json_object_array_get_idx(json_object_object_get(r, "content"), 0), "text"));
                if (id == 1) {
                        ck_assert(json_object_get_boolean(json_object_object_get(r, "isError")));
                        ck_assert_ptr_null(strstr(text, "workspace file nul-a"));
                        ck_assert_msg(strstr(text, "NUL"), "%s", text);
                } else { /* control: the file itself is readable */
                        ck_assert_msg(strstr(text, "workspace file nul-a"), "%s", text);
                }
                json_object_put(v);
        }
        ck_assert_int_eq(srv_stop(&s), 0);
}
END_TEST

/* Finding 28: VESTIBULE_WORKSPACE=$HOME was accepted, leaving the dotfiles writable from the
 * sandbox. Want: $HOME and its ancestors refused, as '/' is, naming the fix. */
static void expect_workspace_refused(const char *dir, bool refused)
{
        _cleanup_free_ char *e_ws = xasprintf("VESTIBULE_WORKSPACE=%s", dir);
        const char *extra[] = {e_ws, NULL};
        static const char req[] =
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"read_workspace\",\"arguments\":{\"path\":\"x\"}}}\n";
        struct srv s;
        json_object *v;
        const char *text;

        srv_start(&s, extra);
        ck_assert_uint_eq(srv_exchange(&s, INIT, strlen(INIT), 1, 10000, 512 << 10), 1);
        ck_assert_uint_eq(srv_exchange(&s, req, strlen(req), 2, 20000, 512 << 10), 2);
        v = srv_line(&s, 1);
        text = json_object_get_string(json_object_object_get(
            json_object_array_get_idx(
                json_object_object_get(json_object_object_get(v, "result"), "content"), 0),
            "text"));
        ck_assert_ptr_nonnull(text);
        if (refused)
                ck_assert_msg(strstr(text, "home folder") && strstr(text, "VESTIBULE_WORKSPACE"),
                              "%s: %s", dir, text);
        else
                ck_assert_msg(!strstr(text, "home folder"), "%s: %s", dir, text);
        json_object_put(v);
        ck_assert_int_eq(srv_stop(&s), 0);
}

START_TEST(workspace_at_home_or_above_is_refused)
{
        _cleanup_free_ char *with_slash = xasprintf("%s/", home);

        expect_workspace_refused(home, true);
        expect_workspace_refused(with_slash, true);
        expect_workspace_refused(T, true);   /* an ancestor of $HOME */
        expect_workspace_refused(ws, false); /* control: a folder inside $HOME is fine */
}
END_TEST

/* A private mount namespace (and, when not root, a user namespace mapping only our own ids,
 * so the server still runs unprivileged): a tmpfs mounted there is seen by nobody else, and
 * filling it fills nothing of the host. */
static void private_mounts(void)
{
        uid_t uid = getuid();
        gid_t gid = getgid();
        char map[64];
        int fd;

        if (geteuid() == 0) {
                if (unshare(CLONE_NEWNS) < 0)
                        sbx_test_skip("cannot unshare a mount namespace");
        } else {
                if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                        sbx_test_skip("no unprivileged user namespaces for a private tmpfs");
                fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(write(fd, "deny", 4), 4);
                close(fd);
                snprintf(map, sizeof(map), "%u %u 1", (unsigned)uid, (unsigned)uid);
                fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(write(fd, map, strlen(map)), (ssize_t)strlen(map));
                close(fd);
                snprintf(map, sizeof(map), "%u %u 1", (unsigned)gid, (unsigned)gid);
                fd = open("/proc/self/gid_map", O_WRONLY | O_CLOEXEC);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(write(fd, map, strlen(map)), (ssize_t)strlen(map));
                close(fd);
        }
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
}

static const char *tool_text(json_object *v)
{
        json_object *r = json_object_object_get(v, "result");

        return json_object_get_string(json_object_object_get(
            json_object_array_get_idx(json_object_object_get(r, "content"), 0), "text"));
}

/* ~4 KiB, so a record needs a new page of the audit file: a small one could still fit in the
 * last page the file already has, on a full disk too. */
#define PAD64 "................................................................"
#define PAD                                                                                        \
        PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64  \
            PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64    \
                PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64      \
                    PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64  \
                        PAD64 PAD64 PAD64 PAD64 PAD64 PAD64 PAD64

/* Finding 24 (Medium): the workspace and the audit folder share a filesystem by default and
 * the workspace has no cap. One run filled the disk; the next run's start record was cut, so
 * its code was not in the log, and only the agent was told. Want: the record still written
 * (a reserve), and the operator told on stderr. On a 4 MiB tmpfs of our own. */
START_TEST(full_disk_cannot_cut_the_next_start_record)
{
        _cleanup_free_ char *fs = xasprintf("%s/fs", T), *fws = xasprintf("%s/fs/ws", T);
        _cleanup_free_ char *faudit = xasprintf("%s/fs/audit", T);
        _cleanup_free_ char *e_ws = xasprintf("VESTIBULE_WORKSPACE=%s", fws);
        _cleanup_free_ char *e_audit = xasprintf("VESTIBULE_AUDIT_DIR=%s", faudit);
        _cleanup_free_ char *errlog = xasprintf("%s/stderr.log", T), *cmd = NULL;
        const char *extra[] = {e_ws, e_audit, geteuid() == 0 ? "VESTIBULE_RUN_AS=2000:2000" : NULL,
                               NULL};
        static const char *const codes[] = {
            "head -c 64M /dev/zero > fill; echo filled",
            "echo second-run-marker #" PAD,
            "rm -f fill; echo third-run-marker #" PAD,
        };
        struct srv s;
        char buf[8192];
        size_t starts = 0, ends = 0, lines = 0;
        bool second = false, third = false, told = false;
        FILE *f;

        private_mounts();
        ck_assert_int_eq(chmod(T, 0755), 0); /* the run's user must reach the workspace */
        ck_assert_int_eq(mkdir(fs, 0755), 0);
        ck_assert_int_eq(mount("tmpfs", fs, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755"), 0);
        ck_assert_int_eq(mkdir(fws, 0777), 0);
        ck_assert_int_eq(chmod(fws, 0777), 0); /* the run's user (VESTIBULE_RUN_AS as root) */
        srv_start(&s, extra);
        ck_assert_uint_eq(srv_exchange(&s, INIT, strlen(INIT), 1, 10000, 512 << 10), 1);
        for (size_t i = 0; i < ELEMENTSOF(codes); i++) {
                _cleanup_free_ char *req = NULL;
                json_object *v, *c = json_object_new_string(codes[i]);

                req = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"tools/call\","
                                "\"params\":{\"name\":\"run_code\",\"arguments\":{\"language\":"
                                "\"bash\",\"code\":%s}}}\n",
                                i + 1, json_object_to_json_string(c));
                json_object_put(c);
                ck_assert_uint_eq(srv_exchange(&s, req, strlen(req), i + 2, 60000, 512 << 10),
                                  i + 2);
                v = srv_line(&s, i + 1);
                ck_assert_msg(tool_text(v), "no tool result for run %zu", i + 1);
                if (i == 0) /* control: the first run did fill the filesystem */
                        ck_assert_msg(strstr(tool_text(v), "No space left"), "%s", tool_text(v));
                json_object_put(v);
        }
        ck_assert_int_eq(srv_stop(&s), 0);

        cmd = xasprintf("cat '%s'/*.jsonl", faudit);
        f = popen(cmd, "r");
        ck_assert_ptr_nonnull(f);
        while (fgets(buf, sizeof(buf), f)) {
                json_object *v = json_tokener_parse(buf);
                const char *kind;

                lines++;
                ck_assert_msg(v, "an audit line is cut: %.120s", buf);
                kind = json_object_get_string(json_object_object_get(v, "kind"));
                if (kind && strcmp(kind, "start") == 0) {
                        const char *code =
                            json_object_get_string(json_object_object_get(v, "code"));
                        starts++;
                        second |= code && strstr(code, "second-run-marker") != NULL;
                        third |= code && strstr(code, "third-run-marker") != NULL;
                } else if (kind && strcmp(kind, "end") == 0) {
                        ends++;
                }
                json_object_put(v);
        }
        pclose(f);
        ck_assert_msg(second,
                      "the start record of the run after the disk filled is missing "
                      "(%zu lines, %zu starts)",
                      lines, starts);
        ck_assert(third);
        ck_assert_uint_eq(starts, 3);
        ck_assert_uint_eq(ends, 3);
        /* the operator was told on stderr, not only the agent */
        f = fopen(errlog, "re");
        ck_assert_ptr_nonnull(f);
        while (fgets(buf, sizeof(buf), f))
                told |= strstr(buf, "audit: the filesystem of") && strstr(buf, "is full");
        fclose(f);
        ck_assert_msg(told, "nothing on stderr told the operator that the audit disk is full");
        ck_assert_int_eq(umount2(fs, MNT_DETACH), 0);
}
END_TEST

/* One run_code call (bash @code) as request @id; the tool result's text, new. */
static char *run_bash(struct srv *s, int id, const char *code)
{
        json_object *c = json_object_new_string(code), *v;
        _cleanup_free_ char *req =
            xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"run_code\",\"arguments\":{\"language\":\"bash\",\"code\":%s}}}\n",
                      id, json_object_to_json_string(c));
        size_t have = count_lines(s);
        char *text;

        json_object_put(c);
        ck_assert_uint_eq(srv_exchange(s, req, strlen(req), have + 1, 60000, 512 << 10), have + 1);
        v = srv_line(s, have);
        ck_assert_msg(tool_text(v), "no tool result for request %d", id);
        text = xstrdup(tool_text(v));
        json_object_put(v);
        return text;
}

/* Finding 24, second half: once the log has lost a record, a run starts only when its own
 * start record is confirmed; without that it is Blocked: and its code does not run. Here
 * the operator's side breaks the audit folder (a file where the folder was), then mends it. */
START_TEST(lost_audit_record_blocks_the_next_run)
{
        _cleanup_free_ char *ran3 = xasprintf("%s/ran-3", ws), *ran4 = xasprintf("%s/ran-4", ws);
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s' && touch '%s'", audit, audit);
        _cleanup_free_ char *t1 = NULL, *t2 = NULL, *t3 = NULL, *t4 = NULL;
        const char *extra[] = {geteuid() == 0 ? "VESTIBULE_RUN_AS=2000:2000" : NULL, NULL};
        struct srv s;
        struct stat st;

        ck_assert_int_eq(chmod(T, 0755), 0);
        ck_assert_int_eq(chmod(home, 0755), 0);
        ck_assert_int_eq(chmod(ws, 0777), 0);
        srv_start(&s, extra);
        ck_assert_uint_eq(srv_exchange(&s, INIT, strlen(INIT), 1, 10000, 512 << 10), 1);
        t1 = run_bash(&s, 1, "echo one");
        ck_assert_msg(strstr(t1, "one") && !strstr(t1, "Blocked"), "%s", t1);
        ck_assert_int_eq(system(cmd), 0); /* the audit folder is now a file */
        t2 = run_bash(&s, 2, "echo two");
        ck_assert_msg(strstr(t2, "not recorded"), "%s", t2); /* control: the loss is seen */
        t3 = run_bash(&s, 3, "touch ran-3; echo three");
        ck_assert_msg(strstr(t3, "Blocked") && strstr(t3, "does not start"), "%s", t3);
        ck_assert_int_ne(stat(ran3, &st), 0); /* its code did not run */
        ck_assert_int_eq(unlink(audit), 0);   /* mended: the folder can be made again */
        t4 = run_bash(&s, 4, "touch ran-4; echo four");
        ck_assert_msg(strstr(t4, "four") && !strstr(t4, "Blocked"), "%s", t4);
        ck_assert_int_eq(stat(ran4, &st), 0);
        ck_assert_int_eq(srv_stop(&s), 0);
}
END_TEST

/* Issue 24 (Low): the audit filesystem was already full when the server started; the log had
 * lost no record yet, so the first run started before its start record was confirmed, and ran
 * unrecorded. Want: it is Blocked: and its code does not run; once there is space again, runs
 * go on, recorded. On a 1 MiB tmpfs of our own, filled before the server starts. */
START_TEST(full_audit_disk_at_start_blocks_the_first_run)
{
        _cleanup_free_ char *fs = xasprintf("%s/afs", T), *faudit = xasprintf("%s/afs/audit", T);
        _cleanup_free_ char *fill = xasprintf("%s/afs/fill", T);
        _cleanup_free_ char *e_audit = xasprintf("VESTIBULE_AUDIT_DIR=%s", faudit);
        _cleanup_free_ char *ran1 = xasprintf("%s/ran-1", ws), *ran2 = xasprintf("%s/ran-2", ws);
        _cleanup_free_ char *t1 = NULL, *t2 = NULL;
        const char *extra[] = {e_audit, geteuid() == 0 ? "VESTIBULE_RUN_AS=2000:2000" : NULL, NULL};
        char block[4096];
        struct srv s;
        struct stat st;
        int fd;

        private_mounts();
        ck_assert_int_eq(chmod(T, 0755), 0);
        ck_assert_int_eq(chmod(home, 0755), 0);
        ck_assert_int_eq(chmod(ws, 0777), 0);
        ck_assert_int_eq(mkdir(fs, 0755), 0);
        ck_assert_int_eq(mount("tmpfs", fs, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755"), 0);
        ck_assert_int_eq(mkdir(faudit, 0700), 0);
        /* full before the server starts */
        memset(block, 'f', sizeof(block));
        fd = open(fill, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        while (write(fd, block, sizeof(block)) > 0)
                ;
        ck_assert_int_eq(errno, ENOSPC); /* control: it is full */
        close(fd);
        srv_start(&s, extra);
        ck_assert_uint_eq(srv_exchange(&s, INIT, strlen(INIT), 1, 10000, 512 << 10), 1);
        t1 = run_bash(&s, 1, "touch ran-1; echo one");
        ck_assert_msg(strstr(t1, "Blocked") && strstr(t1, "does not start"), "%s", t1);
        ck_assert_msg(stat(ran1, &st) != 0, "the first run ran unrecorded:\n%s", t1);
        ck_assert_int_eq(unlink(fill), 0); /* space again */
        t2 = run_bash(&s, 2, "touch ran-2; echo two");
        ck_assert_msg(strstr(t2, "two") && !strstr(t2, "Blocked"), "%s", t2);
        ck_assert_int_eq(stat(ran2, &st), 0);
        ck_assert_int_eq(srv_stop(&s), 0);
        ck_assert_int_eq(umount2(fs, MNT_DETACH), 0);
}
END_TEST

/* Run the binary with @args (NULL-terminated, without argv[0]) and the client-like
 * environment plus @extra; stdout and stderr together into a new string. */
static char *run_cli(const char *const *args, const char *const *extra)
{
        _cleanup_free_ char *e_home = xasprintf("HOME=%s", home);
        const char *env[24], *argv[16];
        size_t n = 0, a = 0, len = 0, cap = 65536;
        char *out = xmalloc(cap);
        int p[2], st;
        pid_t pid;
        ssize_t k;

        env[n++] = e_home;
        env[n++] = "PATH=/usr/local/bin:/usr/bin:/bin";
        env[n++] = "TERM=xterm";
        for (; extra && *extra && n < 22; extra++)
                env[n++] = *extra;
        env[n] = NULL;
        const char *alt = getenv("SBX_TEST_BIN");
        argv[a++] = alt ? alt : VESTIBULE_BIN;
        for (; args && *args && a < 15; args++)
                argv[a++] = *args;
        argv[a] = NULL;
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                dup2(p[1], 1);
                dup2(p[1], 2);
                execve(argv[0], (char *const *)argv, (char *const *)env);
                _exit(127);
        }
        close(p[1]);
        while ((k = read(p[0], out + len, cap - len - 1)) > 0) {
                len += (size_t)k;
                if (cap - len < 4096)
                        out = xrealloc(out, cap *= 2);
        }
        close(p[0]);
        waitpid(pid, &st, 0);
        out[len] = '\0';
        return out;
}

/* One ustar entry named @name (a regular file, empty), then the end-of-archive blocks. */
static void write_tar_one(const char *path, const char *name)
{
        char h[512] = {0}, zero[1024] = {0};
        unsigned sum = 0;
        FILE *f = fopen(path, "we");

        ck_assert_ptr_nonnull(f);
        snprintf(h, 100, "%s", name);
        memcpy(h + 100, "0000644", 8);
        memcpy(h + 108, "0000000", 8);
        memcpy(h + 116, "0000000", 8);
        memcpy(h + 124, "00000000000", 12);
        memcpy(h + 136, "14570000000", 12);
        memset(h + 148, ' ', 8);
        h[156] = '0';
        memcpy(h + 257, "ustar", 6);
        h[263] = '0'; /* version "00", not NUL-terminated */
        h[264] = '0';
        for (size_t i = 0; i < 512; i++)
                sum += (unsigned char)h[i];
        snprintf(h + 148, 8, "%06o", sum);
        ck_assert_uint_eq(fwrite(h, 1, 512, f), 512);
        ck_assert_uint_eq(fwrite(zero, 1, 1024, f), 1024);
        fclose(f);
}

/* Finding 26 (Low): terminal escapes reached the console from setup (tar entry names in its
 * refusals) and doctor (the workspace path, engine and image texts), verify (the sandbox's
 * stderr, detail texts). Want: escaped as `vestibule-mcp audit` does. */
START_TEST(console_output_carries_no_terminal_escapes)
{
        _cleanup_free_ char *tar = xasprintf("%s/evil.tar", T);
        _cleanup_free_ char *e_ws = xasprintf("VESTIBULE_WORKSPACE=%s/ws\033]0;owned\007", home);
        _cleanup_free_ char *e_rootfs = xasprintf("VESTIBULE_ROOTFS_DIR=%s", rootfs);
        _cleanup_free_ char *e_audit = xasprintf("VESTIBULE_AUDIT_DIR=%s", audit);
        _cleanup_free_ char *out = NULL;
        const char *setup_args[] = {"setup", "--from-tar", tar, "--language", "python", NULL};
        const char *doctor_args[] = {"doctor", NULL};
        const char *extra[] = {e_rootfs, e_audit, NULL};
        const char *extra_ws[] = {e_ws, e_rootfs, e_audit, "VESTIBULE_BACKEND=naive", NULL};

        write_tar_one(tar, "../\033]0;owned\007\033[2Jevil");
        out = run_cli(setup_args, extra);
        /* control: the refusal does quote the entry's name */
        ck_assert_msg(strstr(out, "owned"), "%s", out);
        ck_assert_msg(!strchr(out, '\033') && !strchr(out, '\007'), "raw escape in: %s", out);
        ck_assert_msg(strstr(out, "\\x1b]0;owned\\x07"), "%s", out);
        free(out);
        out = run_cli(doctor_args, extra_ws);
        ck_assert_msg(strstr(out, "owned"), "%s", out); /* control: the path is shown */
        ck_assert_msg(!strchr(out, '\033') && !strchr(out, '\007'), "raw escape in: %s", out);
}
END_TEST

/* Finding 27 (Low): verify took the first "VERIFY {...}" line of the run's output, so a
 * rootfs that printed a forged one got 16 checks shown as held. Now the line must carry this
 * run's nonce, at the start of a line, once. (What a hostile interpreter can still do, and
 * what verify checks from outside against it, is in README "What verify trusts".) */
START_TEST(verify_result_needs_the_runs_nonce)
{
        static const char nonce[] = "0123456789abcdef0123456789abcdef";
        static const char forged[] = "VERIFY {\"key\":{\"escaped\":false,\"detail\":\"forged\"}}\n";
        static const char real[] = "VERIFY 0123456789abcdef0123456789abcdef "
                                   "{\"key\":{\"escaped\":true,\"detail\":\"real\"}}\n";
        const char *why = NULL;
        _cleanup_free_ char *both = xasprintf("%s%s", forged, real);
        _cleanup_free_ char *twice = xasprintf("%s%s", real, real);
        _cleanup_free_ char *other =
            xasprintf("VERIFY ffffffffffffffffffffffffffffffff %s", forged + 7);
        _cleanup_free_ char *mid = xasprintf("x %s", real);
        json_object *v;

        /* the forged line alone, or with another run's nonce, or not at a line start: none */
        ck_assert_ptr_null(verify_parse_result(forged, strlen(forged), nonce, &why));
        ck_assert_ptr_null(verify_parse_result(other, strlen(other), nonce, &why));
        ck_assert_ptr_null(verify_parse_result(mid, strlen(mid), nonce, &why));
        /* two lines with the nonce: no result either */
        ck_assert_ptr_null(verify_parse_result(twice, strlen(twice), nonce, &why));
        ck_assert_str_eq(why, "two result lines carry this run's nonce");
        /* control: the real line is found behind a forged one, and it is the one used */
        v = verify_parse_result(both, strlen(both), nonce, &why);
        ck_assert_ptr_nonnull(v);
        ck_assert_str_eq(json_object_get_string(
                             json_object_object_get(json_object_object_get(v, "key"), "detail")),
                         "real");
        json_object_put(v);
}
END_TEST

static Suite *adversarial_suite(void)
{
        Suite *s = suite_create("adversarial_srv");
        TCase *tc = tcase_create("server");

        tcase_add_checked_fixture(tc, fx_setup, fx_teardown);
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, huge_request_id_gets_one_bounded_reply);
        tcase_add_test(tc, huge_method_and_tool_names_get_their_own_error);
        tcase_add_test(tc, refused_huge_line_gives_memory_back);
        tcase_add_test(tc, listen_streams_are_capped_and_cheap);
        tcase_add_test(tc, read_workspace_refuses_a_path_with_nul);
        tcase_add_test(tc, workspace_at_home_or_above_is_refused);
        tcase_add_test(tc, full_disk_cannot_cut_the_next_start_record);
        tcase_add_test(tc, lost_audit_record_blocks_the_next_run);
        tcase_add_test(tc, full_audit_disk_at_start_blocks_the_first_run);
        tcase_add_test(tc, console_output_carries_no_terminal_escapes);
        tcase_add_test(tc, verify_result_needs_the_runs_nonce);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(adversarial_suite()) == 0 ? 0 : 1;
}
