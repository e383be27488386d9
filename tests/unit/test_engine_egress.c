/* test_engine_egress.c - the container backend's way out for network "allowlist"
 * (src/engine/egress_listen.c) on the real kernel, without an engine: the wait script and the
 * relay run as a container's command would (bash, then the relay in python3, or in node when
 * there is no python3, then the code), in a network namespace of their own holding only lo (with a
 * user namespace of its own when not root); the code connects to 127.0.0.1:3128 there and its bytes
 * arrive at a unix socket outside, and the answer comes back. The controls: with no socket
 * listening the code connects to the relay but gets nothing through; a relay that ends before it
 * listens stops the run with status 125 before the code runs. And the relay's source refuses a path
 * it could not quote. The remote engine's wait (no relay of its own: the server's exec starts the
 * bridge, egress_stream.c) runs the code once something listens, and stops with 125 when nothing
 * does. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "config/config.h"
#include "egress/egress.h"
#include "engine/egress_frames.h"
#include "engine/engine.h"
#include "run/run.h"
#include "testutil.h"

#define RELAY_PORT 3128

/* The code run after the relay: connect to the relay, send "ping", print what comes back (at
 * most 4 bytes within 5 s); "ran" first, so a run that never reached the code shows it. */
static const char client_sh[] = "printf ran; exec 3<>/dev/tcp/127.0.0.1/3128 || exit 3; "
                                "printf ping >&3; IFS= read -r -n4 -t5 x <&3; printf '%s' \"$x\"";

static void lo_up(void)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {0};
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                _exit(10);
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                _exit(11);
        close(s);
}

/* In a child: a network namespace of its own (and a user namespace mapping our uid to
 * itself when not root), lo up, stdout to @out_w; then bash -c WAIT vestibule-egress @py @js
 * bash -c client_sh, with @path as PATH. */
static _Noreturn void run_child(const char *py, const char *js, const char *path, int out_w)
{
        char wait_sh[640], map[64], path_env[256];
        uid_t uid = geteuid();

        if (unshare(CLONE_NEWNET | (uid != 0 ? CLONE_NEWUSER : 0)) < 0)
                _exit(12);
        if (uid != 0) {
                int fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
                int n = snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
                if (fd < 0 || write(fd, map, (size_t)n) != n)
                        _exit(13);
                close(fd);
        }
        lo_up();
        if (dup2(out_w, 1) < 0)
                _exit(14);
        snprintf(path_env, sizeof(path_env), "PATH=%s", path);
        const char *argv[] = {"bash",
                              "-c",
                              egress_relay_wait_script(RELAY_PORT, wait_sh, sizeof(wait_sh)),
                              "vestibule-egress",
                              py,
                              js,
                              "/bin/bash",
                              "-c",
                              client_sh,
                              NULL};
        const char *envp[] = {path_env, "LANG=C.UTF-8", NULL};
        execve("/bin/bash", (char *const *)argv, (char *const *)envp);
        _exit(15);
}

/* Run the wait script with the relay @relay ("python3": the PATH has both; "node": a PATH
 * with node and sleep only, as an image without python3) toward a unix socket; @py_override
 * replaces the Python relay's source. With @serve, a unix listener there answers "pong" to
 * "ping" (what it read into @got). The code's output into @out; return its exit status. */
static int run_relay(const char *relay, const char *py_override, bool serve, char got[8],
                     char out[64])
{
        char dir[] = "/tmp/vst-egress-test-XXXXXX", path[96], bin[64], ln_node[80], ln_sleep[80];
        char py[1024], js[1024];
        int p[2], lfd = -1, st = 0;
        struct sockaddr_un a = {.sun_family = AF_UNIX};

        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(chmod(dir, 0755), 0);
        snprintf(path, sizeof(path), "%s/%s", dir, ENGINE_EGRESS_SOCK);
        snprintf(bin, sizeof(bin), "%s/bin", dir);
        ck_assert_int_eq(mkdir(bin, 0755), 0);
        snprintf(ln_node, sizeof(ln_node), "%s/node", bin);
        snprintf(ln_sleep, sizeof(ln_sleep), "%s/sleep", bin);
        ck_assert_int_eq(symlink("/usr/bin/node", ln_node), 0);
        ck_assert_int_eq(symlink("/bin/sleep", ln_sleep), 0);
        ck_assert_int_eq(egress_relay_source("python3", path, RELAY_PORT, py, sizeof(py)), 0);
        ck_assert_int_eq(egress_relay_source("node", path, RELAY_PORT, js, sizeof(js)), 0);
        if (py_override)
                snprintf(py, sizeof(py), "%s", py_override);
        if (serve) {
                lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
                ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
                ck_assert_int_eq(chmod(path, 0666), 0);
                ck_assert_int_eq(listen(lfd, 8), 0);
        }
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                run_child(py, js, strcmp(relay, "node") == 0 ? bin : "/usr/bin:/bin", p[1]);
        close(p[1]);
        memset(got, 0, 8);
        if (serve) {
                struct pollfd pf = {.fd = lfd, .events = POLLIN};
                if (poll(&pf, 1, 20000) == 1) {
                        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                        ck_assert_int_ge(c, 0);
                        ck_assert_int_eq(read(c, got, 4), 4);
                        ck_assert_int_eq(write(c, "pong", 4), 4);
                        close(c);
                }
        }
        size_t len = 0;
        ssize_t n;
        while (len < 63 && (n = read(p[0], out + len, 63 - len)) > 0)
                len += (size_t)n;
        out[len] = '\0';
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        if (lfd >= 0)
                close(lfd);
        unlink(path);
        unlink(ln_node);
        unlink(ln_sleep);
        rmdir(bin);
        rmdir(dir);
        ck_assert(WIFEXITED(st));
        return WEXITSTATUS(st);
}

START_TEST(relay_python_carries_bytes)
{
        char got[8], out[64];
        int rc = run_relay("python3", NULL, true, got, out);
        ck_assert_str_eq(got, "ping");
        ck_assert_str_eq(out, "ranpong");
        ck_assert_int_eq(rc, 0);
}
END_TEST

START_TEST(relay_node_carries_bytes)
{
        char got[8], out[64];
        int rc = run_relay("node", NULL, true, got, out);
        ck_assert_msg(strcmp(got, "ping") == 0, "got '%s', out '%s', status %d", got, out, rc);
        ck_assert_str_eq(out, "ranpong");
        ck_assert_int_eq(rc, 0);
}
END_TEST

/* The control: the same run with nothing listening on the socket (the proxy ended): the code
 * reaches the relay, and nothing comes back. */
START_TEST(control_no_proxy_no_bytes)
{
        char got[8], out[64];
        int rc = run_relay("python3", NULL, false, got, out);
        ck_assert_str_eq(out, "ran");
        (void)rc; /* read's timeout or EOF: either way nothing came through */
}
END_TEST

/* A relay that ends before it listens: status 125, and the code never ran. */
START_TEST(control_relay_ends_code_never_runs)
{
        char got[8], out[64];
        int rc = run_relay("python3", "raise SystemExit(1)", false, got, out);
        ck_assert_int_eq(rc, 125);
        ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(relay_source_refuses_bad_paths)
{
        char buf[1024];
        ck_assert_int_eq(egress_relay_source("python3", "/sandbox/a'b", 3128, buf, sizeof(buf)),
                         -EINVAL);
        ck_assert_int_eq(egress_relay_source("perl", "/sandbox/s", 3128, buf, sizeof(buf)),
                         -EINVAL);
        ck_assert_int_eq(egress_relay_source("node", "/sandbox/s", 3128, buf, 16), -ENOSPC);
        ck_assert_int_eq(egress_relay_source("node", "/sandbox/s", 3128, buf, sizeof(buf)), 0);
        ck_assert_ptr_nonnull(strstr(buf, "'/sandbox/s'"));
        ck_assert_ptr_nonnull(strstr(buf, "3128"));
}
END_TEST

/* The create body with the egress environment: ours first, a PATH= among the extras replaces
 * ours (never two PATHs), the extras follow in order. */
START_TEST(create_body_extra_env)
{
        static const char *const cmd[] = {"true", NULL};
        static const char *const extra[] = {"HTTP_PROXY=http://127.0.0.1:3128",
                                            "PATH=/workspace/.local/bin:/usr/bin:/bin", NULL};
        struct engine_run_spec spec = {.image = "i",
                                       .cmd = cmd,
                                       .uid = 1,
                                       .gid = 1,
                                       .workspace = "/w",
                                       .code_dir = "/c",
                                       .tmpfs_mb = 8,
                                       .owner = "o",
                                       .extra_env = extra};
        json_object *b = engine_create_body(&spec), *env = NULL;
        ck_assert(json_object_object_get_ex(b, "Env", &env));
        size_t n = json_object_array_length(env), paths = 0;
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(env, 0)), "HOME=/tmp");
        for (size_t i = 0; i < n; i++)
                paths += strncmp(json_object_get_string(json_object_array_get_idx(env, i)),
                                 "PATH=", 5) == 0;
        ck_assert_uint_eq(paths, 1);
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(env, n - 2)),
                         "HTTP_PROXY=http://127.0.0.1:3128");
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(env, n - 1)),
                         "PATH=/workspace/.local/bin:/usr/bin:/bin");
        json_object_put(b);
        /* the control: without extras, our own PATH */
        spec.extra_env = NULL;
        b = engine_create_body(&spec);
        ck_assert(json_object_object_get_ex(b, "Env", &env));
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(env, 0)),
                         "PATH=/usr/local/bin:/usr/bin:/bin");
        json_object_put(b);
}
END_TEST

/* The remote engine's wait (engine_egress_wait_bridge_script()): run as the container's command
 * is, `bash -c WAIT vestibule-egress "" "" ARGV`, in a network namespace of its own. With
 * @listen, a child binds 127.0.0.1:3128 there after 200 ms (as the server's exec starts the
 * bridge after the container); ARGV prints "ran". The output into @out; return the status. */
static int run_bridge_wait(bool listen_late, char out[64])
{
        char wait_sh[640];
        int p[2], st = 0;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                uid_t uid = geteuid();
                char map[64];
                if (unshare(CLONE_NEWNET | (uid != 0 ? CLONE_NEWUSER : 0)) < 0)
                        _exit(12);
                if (uid != 0) {
                        int fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
                        int n =
                            snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
                        if (fd < 0 || write(fd, map, (size_t)n) != n)
                                _exit(13);
                        close(fd);
                }
                lo_up();
                if (listen_late && fork() == 0) {
                        struct sockaddr_in a = {.sin_family = AF_INET,
                                                .sin_port = htons(RELAY_PORT),
                                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                        int l = socket(AF_INET, SOCK_STREAM, 0);
                        close(p[1]);
                        usleep(200000);
                        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
                            listen(l, 1) < 0)
                                _exit(16);
                        sleep(3);
                        _exit(0);
                }
                if (dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
                        _exit(14);
                const char *argv[] = {
                    "bash",
                    "-c",
                    engine_egress_wait_bridge_script(RELAY_PORT, wait_sh, sizeof(wait_sh)),
                    "vestibule-egress",
                    "",
                    "",
                    "/bin/bash",
                    "-c",
                    "printf ran",
                    NULL};
                const char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
                execve("/bin/bash", (char *const *)argv, (char *const *)envp);
                _exit(15);
        }
        close(p[1]);
        size_t len = 0;
        ssize_t n;
        while (len < 63 && (n = read(p[0], out + len, 63 - len)) > 0)
                len += (size_t)n;
        out[len] = '\0';
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert(WIFEXITED(st));
        return WEXITSTATUS(st);
}

START_TEST(bridge_wait_runs_the_code_once_the_bridge_listens)
{
        char out[64];
        ck_assert_int_eq(run_bridge_wait(true, out), 0);
        ck_assert_str_eq(out, "ran");
}
END_TEST

START_TEST(control_bridge_wait_no_listener_code_never_runs)
{
        char out[64];
        ck_assert_int_eq(run_bridge_wait(false, out), 125);
        ck_assert_ptr_null(strstr(out, "ran"));
        ck_assert_ptr_nonnull(strstr(out, "did not listen within 10 s"));
}
END_TEST

/* ---- the remote engine's stream (egress_stream.c) against a fake engine ------------------- */

/* A fake Engine API on a unix socket: the first connection answers the exec create (201 with an
 * id), the second the hijacked start (101) and then plays the bridge: it announces connection 7
 * and sends a proxy request for an unlisted host through it, reads the proxy's answer as the
 * server frames it, then (with @hostile) sends a frame of an unknown type and records whether the
 * server ended the stream. */
struct fake_engine {
        char path[108];
        int lfd;
        bool hostile;
        char answer[512]; /* what came back on connection 7 */
        bool ended;       /* the server closed the stream after the hostile frame */
};

static void fake_read_head(int c)
{
        char buf[4096];
        size_t n = 0;
        long body = 0;
        while (n < sizeof(buf) - 1) {
                ssize_t r = read(c, buf + n, 1);
                if (r <= 0)
                        return;
                n++;
                buf[n] = '\0';
                if (strstr(buf, "\r\n\r\n"))
                        break;
        }
        char *cl = strcasestr(buf, "Content-Length:");
        if (cl)
                body = strtol(cl + 15, NULL, 10);
        while (body-- > 0 && read(c, buf, 1) == 1)
                ;
}

static void fake_send_frame(int c, char type, uint32_t id, const char *data)
{
        uint32_t n = data ? (uint32_t)strlen(data) : 0, m = 9 + n;
        unsigned char f[9 + 256] = {1, 0, 0, 0, m >> 24, m >> 16, m >> 8, m};
        unsigned char *p = f + 8;
        p[0] = (unsigned char)type;
        p[1] = id >> 24, p[2] = id >> 16, p[3] = id >> 8, p[4] = id;
        p[5] = n >> 24, p[6] = n >> 16, p[7] = n >> 8, p[8] = n;
        memcpy(p + 9, data ? data : "", n);
        ck_assert_int_eq(write(c, f, 8 + m), 8 + m);
}

static void *fake_engine_main(void *arg)
{
        struct fake_engine *fe = arg;
        static const char created[] = "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                                      "Content-Length: 13\r\n\r\n{\"Id\":\"beef\"}";
        static const char upgraded[] = "HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\n"
                                       "Upgrade: tcp\r\n\r\n";
        int c = accept4(fe->lfd, NULL, NULL, SOCK_CLOEXEC);
        fake_read_head(c);
        ck_assert_int_eq(write(c, created, sizeof(created) - 1), (ssize_t)sizeof(created) - 1);
        close(c);
        c = accept4(fe->lfd, NULL, NULL, SOCK_CLOEXEC);
        fake_read_head(c);
        ck_assert_int_eq(write(c, upgraded, sizeof(upgraded) - 1), (ssize_t)sizeof(upgraded) - 1);
        fake_send_frame(c, 'O', 7, NULL);
        fake_send_frame(c, 'D', 7, "GET http://evil.example/ HTTP/1.1\r\nHost: x\r\n\r\n");
        /* the answer: our frames, raw (the server writes no engine headers toward the exec) */
        size_t n = 0;
        struct pollfd pf = {.fd = c, .events = POLLIN};
        while (n < sizeof(fe->answer) - 1 && !strstr(fe->answer, "evil.example") &&
               poll(&pf, 1, 5000) == 1) {
                ssize_t r = read(c, fe->answer + n, sizeof(fe->answer) - 1 - n);
                if (r <= 0)
                        break;
                for (ssize_t i = 0; i < r; i++) /* frame headers hold NULs: keep it a string */
                        if (!fe->answer[n + i])
                                fe->answer[n + i] = '.';
                n += (size_t)r;
                fe->answer[n] = '\0';
        }
        if (fe->hostile) {
                char junk[64];
                fake_send_frame(c, 'Z', 7, "no such frame");
                while (poll(&pf, 1, 5000) == 1) {
                        ssize_t r = read(c, junk, sizeof(junk));
                        if (r <= 0) {
                                fe->ended = true;
                                break;
                        }
                }
        }
        close(c);
        return NULL;
}

/* Run the stream against the fake engine; the proxy's verdicts into @ret (entries counted). */
static void run_fake_stream(struct fake_engine *fe, size_t *ret_entries, bool *ret_evil_denied)
{
        static const char *const env[][2] = {{"VESTIBULE_EGRESS_ALLOW", "allowed.test"}, {NULL}};
        struct sbx_config *cfg = NULL;
        struct sbx_error err = {0};
        struct engine_conn conn = {0};
        struct engine_egress_stream *s = NULL;
        struct egress_session *proxy = NULL;
        struct run_result res = {0};
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        char dir[] = "/tmp/vst-fake-engine-XXXXXX";
        pthread_t th;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(fe->path, sizeof(fe->path), "%s/e.sock", dir);
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", fe->path);
        fe->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(bind(fe->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(fe->lfd, 4), 0);
        ck_assert_int_eq(pthread_create(&th, NULL, fake_engine_main, fe), 0);
        fake_env_reset();
        fake_env_set("HOME", "/tmp");
        for (size_t i = 0; env[i][0]; i++)
                fake_env_set(env[i][0], env[i][1]);
        ck_assert_int_eq(config_load_from(fake_getenv, NULL, &cfg, &err), 0);
        char host[160];
        snprintf(host, sizeof(host), "unix://%s", fe->path);
        ck_assert_msg(engine_endpoint_parse(host, false, &conn.ep, &err) == 0, "%s", err.msg);
        snprintf(conn.api, sizeof(conn.api), "1.41");
        egress_set_proxy_exe(VESTIBULE_BIN);
        ck_assert_msg(engine_egress_stream_proxy(cfg, &s, &proxy, &err) == 0, "%s", err.msg);
        ck_assert_msg(engine_egress_stream_attach(s, &conn, "abc", 1000, &err) == 0, "%s", err.msg);
        pthread_join(th, NULL);
        s = engine_egress_stream_end(s);
        egress_session_finish(proxy, &res.egress);
        *ret_entries = res.egress.n_entries;
        *ret_evil_denied = res.egress.n_entries == 1 &&
                           strcmp(res.egress.entries[0].host, "evil.example") == 0 &&
                           !res.egress.entries[0].allowed;
        run_result_done(&res);
        config_free(cfg);
        close(fe->lfd);
        unlink(fe->path);
        rmdir(dir);
}

START_TEST(stream_carries_a_connection_to_the_proxy_only)
{
        struct fake_engine fe = {0};
        size_t n = 0;
        bool denied = false;

        run_fake_stream(&fe, &n, &denied);
        /* the bridge's request reached the run's proxy, which refused it and said why */
        ck_assert_msg(strstr(fe.answer, "403") && strstr(fe.answer, "evil.example"), "%s",
                      fe.answer);
        ck_assert_msg(denied, "the proxy's verdicts: %zu entries", n);
}
END_TEST

START_TEST(stream_ends_at_a_frame_of_an_unknown_type)
{
        struct fake_engine fe = {.hostile = true};
        size_t n = 0;
        bool denied = false;

        run_fake_stream(&fe, &n, &denied);
        ck_assert_msg(strstr(fe.answer, "403"), "the control: the stream carried before: %s",
                      fe.answer);
        ck_assert(fe.ended);
}
END_TEST

/* The stream's parser alone (egress_frames.c): frames seen by a handler. */
struct frames_seen {
        char types[16];
        uint32_t ids[16], lens[16];
        size_t n;
        size_t stop_after; /* 0: never end */
};

static bool frames_record(void *ctx, char type, uint32_t id, const unsigned char *d, uint32_t n)
{
        struct frames_seen *v = ctx;

        (void)d;
        if (v->n < 16) {
                v->types[v->n] = type;
                v->ids[v->n] = id;
                v->lens[v->n] = n;
        }
        v->n++;
        return !v->stop_after || v->n < v->stop_after;
}

/* Append frame (@type, @id, @n bytes of @d) to @b at *@len. */
static void put_frame(unsigned char *b, size_t *len, char type, uint32_t id, const char *d,
                      uint32_t n)
{
        unsigned char h[9] = {
            (unsigned char)type, id >> 24, id >> 16, id >> 8, id, n >> 24, n >> 16, n >> 8, n};
        memcpy(b + *len, h, 9);
        memcpy(b + *len + 9, d, n);
        *len += 9 + n;
}

/* Wrap @n bytes of @p into an Engine API frame of stream @st at the end of @out. */
static void put_engine(unsigned char *out, size_t *len, unsigned st, const unsigned char *p,
                       uint32_t n)
{
        unsigned char h[8] = {(unsigned char)st, 0, 0, 0, n >> 24, n >> 16, n >> 8, n};
        memcpy(out + *len, h, 8);
        memcpy(out + *len + 8, p, n);
        *len += 8 + n;
}

START_TEST(frames_across_engine_frames_and_reads)
{
        unsigned char f[256], in[512];
        size_t fl = 0, il = 0;
        struct egress_frames p = {0};
        struct frames_seen v = {0};

        put_frame(f, &fl, 'O', 1, "", 0);
        put_frame(f, &fl, 'D', 1, "hello", 5);
        put_frame(f, &fl, 'E', 1, "", 0);
        /* a frame cut across two engine frames, fed one byte at a time */
        put_engine(in, &il, 1, f, 12);
        put_engine(in, &il, 1, f + 12, (uint32_t)(fl - 12));
        for (size_t i = 0; i < il; i++)
                egress_frames_feed(&p, in + i, 1, frames_record, &v);
        ck_assert(!p.ended);
        ck_assert_uint_eq(v.n, 3);
        ck_assert(v.types[0] == 'O' && v.types[1] == 'D' && v.types[2] == 'E');
        ck_assert_uint_eq(v.lens[1], 5);
        ck_assert_uint_eq(v.ids[2], 1);
        egress_frames_done(&p);
}
END_TEST

START_TEST(frames_end_at_stderr_bad_type_too_long_or_handler)
{
        unsigned char f[64], in[128];
        size_t fl = 0, il = 0;
        struct egress_frames p = {0};
        struct frames_seen v = {0};

        put_frame(f, &fl, 'O', 1, "", 0);
        put_engine(in, &il, 2, f, (uint32_t)fl); /* stream 2: not ours */
        egress_frames_feed(&p, in, il, frames_record, &v);
        ck_assert(p.ended);
        ck_assert_uint_eq(v.n, 0);
        egress_frames_done(&p);

        il = 0;
        put_engine(in, &il, 1, f, (uint32_t)fl); /* the control: stream 1 carries it */
        egress_frames_feed(&p, in, il, frames_record, &v);
        ck_assert(!p.ended);
        ck_assert_uint_eq(v.n, 1);
        egress_frames_done(&p);

        fl = il = 0;
        v.n = 0;
        put_frame(f, &fl, 'Z', 1, "", 0);
        put_engine(in, &il, 1, f, (uint32_t)fl);
        egress_frames_feed(&p, in, il, frames_record, &v);
        ck_assert(p.ended && v.n == 0);
        egress_frames_done(&p);

        fl = il = 0;
        put_frame(f, &fl, 'D', 1, "", 0);
        f[5] = 0, f[6] = 1, f[7] = 0, f[8] = 1; /* 65537 bytes: over EGRESS_FRAME_MAX */
        put_engine(in, &il, 1, f, (uint32_t)fl);
        egress_frames_feed(&p, in, il, frames_record, &v);
        ck_assert(p.ended && v.n == 0);
        egress_frames_done(&p);

        fl = il = 0;
        v.stop_after = 1;
        put_frame(f, &fl, 'O', 1, "", 0);
        put_frame(f, &fl, 'O', 2, "", 0);
        put_engine(in, &il, 1, f, (uint32_t)fl);
        egress_frames_feed(&p, in, il, frames_record, &v);
        ck_assert(p.ended);
        ck_assert_uint_eq(v.n, 1);
        egress_frames_done(&p);
}
END_TEST

/* The bridge (engine_egress_bridge()) run as the exec runs it, with pipes for its stdin and
 * stdout, on a free port of this machine's loopback. */
struct bridge_run {
        pid_t pid;
        int to, from; /* its stdin, its stdout */
        uint16_t port;
};

static void bridge_start(struct bridge_run *b, const char *lang)
{
        static char src[4096];
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t al = sizeof(a);
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), in[2], out[2];

        ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &al), 0);
        b->port = ntohs(a.sin_port);
        close(l);
        ck_assert_int_eq(engine_egress_bridge(lang, b->port, src, sizeof(src)), 0);
        ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        b->pid = fork();
        ck_assert_int_ge(b->pid, 0);
        if (b->pid == 0) {
                dup2(in[0], 0);
                dup2(out[1], 1);
                if (strcmp(lang, "node") == 0)
                        execlp("node", "node", "-e", src, (char *)NULL);
                else
                        execlp("python3", "python3", "-Ic", src, (char *)NULL);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        b->to = in[1];
        b->from = out[0];
}

/* A client connected to the bridge's port (retried for 10 s while it starts), or -1. */
static int bridge_connect(uint16_t port, int tries)
{
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        for (int i = 0; i < tries; i++) {
                int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (connect(c, (struct sockaddr *)&a, sizeof(a)) == 0)
                        return c;
                close(c);
                usleep(10000);
        }
        return -1;
}

/* Exactly @n bytes from @fd within 5 s into @buf; false when they did not come. */
static bool read_n(int fd, void *buf, size_t n)
{
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        for (size_t got = 0; got < n;) {
                ssize_t r;
                if (poll(&pf, 1, 5000) != 1 || (r = read(fd, (char *)buf + got, n - got)) <= 0)
                        return false;
                got += (size_t)r;
        }
        return true;
}

static const char *const bridge_langs[] = {"python3", "node"};

START_TEST(bridge_carries_frames_both_ways_and_ends_with_its_stdin)
{
        const char *lang = bridge_langs[_i];
        struct bridge_run b = {0};
        unsigned char h[9], f[64];
        char got[8] = "";
        size_t fl = 0;
        int c, st = 0;

        if (strcmp(lang, "node") == 0 && access("/usr/bin/node", X_OK) != 0)
                return;
        bridge_start(&b, lang);
        c = bridge_connect(b.port, 1000);
        ck_assert_msg(c >= 0, "%s: the bridge did not listen", lang);
        ck_assert_int_eq(write(c, "ping", 4), 4);
        /* 'O' 1, then 'D' 1 "ping" */
        ck_assert_msg(read_n(b.from, h, 9) && h[0] == 'O' && h[4] == 1, "%s: no O frame", lang);
        ck_assert_msg(read_n(b.from, h, 9) && h[0] == 'D' && h[4] == 1 && h[8] == 4, "%s: no D",
                      lang);
        ck_assert(read_n(b.from, got, 4));
        ck_assert_str_eq(got, "ping");
        put_frame(f, &fl, 'D', 1, "pong", 4);
        ck_assert_int_eq(write(b.to, f, fl), (ssize_t)fl);
        memset(got, 0, sizeof(got));
        ck_assert_msg(read_n(c, got, 4), "%s: the answer did not come back", lang);
        ck_assert_str_eq(got, "pong");
        /* the stream's end: the connection is reset, the bridge exits 3, the port refuses */
        close(b.to);
        ck_assert(!read_n(c, got, 1));
        ck_assert_int_eq(waitpid(b.pid, &st, 0), b.pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "%s: status %d", lang, st);
        ck_assert_int_lt(bridge_connect(b.port, 1), 0);
        close(c);
        close(b.from);
}
END_TEST

static Suite *egress_suite(void)
{
        Suite *s = suite_create("engine_egress");
        TCase *tc = tcase_create("relay");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, relay_python_carries_bytes);
        if (access("/usr/bin/node", X_OK) == 0)
                tcase_add_test(tc, relay_node_carries_bytes);
        tcase_add_test(tc, control_no_proxy_no_bytes);
        tcase_add_test(tc, control_relay_ends_code_never_runs);
        tcase_add_test(tc, relay_source_refuses_bad_paths);
        tcase_add_test(tc, create_body_extra_env);
        tcase_add_test(tc, bridge_wait_runs_the_code_once_the_bridge_listens);
        tcase_add_test(tc, control_bridge_wait_no_listener_code_never_runs);
        tcase_add_test(tc, stream_carries_a_connection_to_the_proxy_only);
        tcase_add_test(tc, stream_ends_at_a_frame_of_an_unknown_type);
        tcase_add_test(tc, frames_across_engine_frames_and_reads);
        tcase_add_test(tc, frames_end_at_stderr_bad_type_too_long_or_handler);
        tcase_add_loop_test(tc, bridge_carries_frames_both_ways_and_ends_with_its_stdin, 0, 2);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(egress_suite());
}
