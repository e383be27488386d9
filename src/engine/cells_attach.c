/* cells_attach.c - a volume-path session's hijacked attach connection and its relay thread
 * (cells_attach.h). libcurl connects (unix socket or tcp+TLS) and then only carries bytes
 * (CURLOPT_CONNECT_ONLY); only the relay thread touches the handle after the open. The relay
 * writes into its pipes with blocking writes, in the order the stream gave: the status record
 * of a cell goes into its pipe after every byte the cell's streams carried before it, which is
 * the ordering the warden relies on (docs/design/sessions.md, "Sessions on the volume path"). */
#include "engine/cells_attach.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lazy/curl.h"

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "engine/cellstream.h"
#include "engine/container.h"
#include "engine/state.h"

#define ATTACH_HEAD_MS 10000 /* the engine must answer the attach within this */
#define ATTACH_SEND_MS 5000  /* room on the connection for a cell's bytes within this */

struct engine_cells_attach {
        CURL *h;
        int sock;
        int out_w, err_w, status_w; /* the relay's write ends; -1 once closed */
        int cells_r;                /* cells from cells.c, to the container's stdin */
        int stop[2];                /* a byte: the relay ends */
        pthread_t relay;
        bool relaying;
        struct engine_cellstream cs;
        bool ended; /* the stream ended or broke */
};

struct engine_cells_lifeline {
        CURL *h; /* the lifeline exec's hijacked start, held open */
};

static void close_fd(int *fd)
{
        if (*fd >= 0)
                close(*fd);
        *fd = -1;
}

/* All of @buf into @fd (a pipe the warden or cells.c reads); a reader gone drops the rest. */
static void pipe_put(int *fd, const char *buf, size_t n)
{
        while (*fd >= 0 && n > 0) {
                ssize_t w = write(*fd, buf, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        close_fd(fd);
                        return;
                }
                buf += w;
                n -= (size_t)w;
        }
}

static void on_data(void *ud, int stream, const char *buf, size_t n)
{
        struct engine_cells_attach *a = ud;

        pipe_put(stream == 1 ? &a->out_w : &a->err_w, buf, n);
}

static void on_record(void *ud, const char *rec, size_t n)
{
        struct engine_cells_attach *a = ud;
        char line[ENGINE_CELLSTREAM_REC_MAX + 1];

        memcpy(line, rec, n);
        line[n] = '\n';
        pipe_put(&a->status_w, line, n + 1);
}

/* The stream's bytes @buf: parsed; a broken stream says so on status (not a record: the
 * session ends, sbx_runner_channel_broken()) and nothing more of it is taken. */
static void take(struct engine_cells_attach *a, const char *buf, size_t n)
{
        if (a->ended || n == 0)
                return;
        if (engine_cellstream_feed(&a->cs, buf, n) < 0) {
                log_debug("session attach: the stream broke (a bad frame or a forged record)");
                pipe_put(&a->status_w, "broken\n", 7);
                a->ended = true;
        }
}

/* Send all of @buf on @h (socket @sock), waiting for room up to ATTACH_SEND_MS. Return 0 or
 * -EIO. */
static int hij_send(CURL *h, int sock, const char *buf, size_t n)
{
        while (n > 0) {
                size_t sent = 0;
                CURLcode rc = curl_easy_send(h, buf, n, &sent);
                if (rc == CURLE_AGAIN) {
                        struct pollfd p = {.fd = sock, .events = POLLOUT};
                        if (poll(&p, 1, ATTACH_SEND_MS) <= 0)
                                return -EIO;
                        continue;
                }
                if (rc != CURLE_OK)
                        return -EIO;
                buf += sent;
                n -= sent;
        }
        return 0;
}

static int sock_send(struct engine_cells_attach *a, const char *buf, size_t n)
{
        return hij_send(a->h, a->sock, buf, n);
}

/* Everything readable on the connection now. Return false at its end. */
static bool sock_read(struct engine_cells_attach *a)
{
        char buf[65536];

        for (;;) {
                size_t got = 0;
                CURLcode rc = curl_easy_recv(a->h, buf, sizeof(buf), &got);
                if (rc == CURLE_AGAIN)
                        return true;
                if (rc != CURLE_OK || got == 0)
                        return false;
                take(a, buf, got);
        }
}

static void *relay_main(void *arg)
{
        struct engine_cells_attach *a = arg;
        sigset_t pipe_set;
        char buf[65536];
        bool cells_open = true;

        /* a reader gone is EPIPE here, never the server's SIGPIPE */
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
        for (;;) {
                struct pollfd p[3] = {{.fd = a->stop[0], .events = POLLIN},
                                      {.fd = a->sock, .events = POLLIN},
                                      {.fd = cells_open ? a->cells_r : -1, .events = POLLIN}};
                if (poll(p, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[0].revents)
                        break;
                if (p[1].revents && !sock_read(a))
                        break;
                if (p[2].revents) {
                        ssize_t n = read(a->cells_r, buf, sizeof(buf));
                        if (n > 0 && sock_send(a, buf, (size_t)n) < 0)
                                break;
                        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                                cells_open = false;
                }
        }
        /* the stream is over: the warden and cells.c see the ends (status: POLLHUP) */
        close_fd(&a->out_w);
        close_fd(&a->err_w);
        close_fd(&a->status_w);
        return NULL;
}

/* POST @path (with the JSON @body, or none) on a connection of its own and switch it to a raw
 * stream ("Upgrade: tcp", the Engine API's "Hijacking"): the answer's head is read to its blank
 * line (at most 4 KiB, within ATTACH_HEAD_MS) and must be 101 (or 200 from an engine that
 * answers so); the bytes after it, the stream's first, go into @rest (*@rest_n of them, @rest
 * holds 4 KiB). *@ret_h: the handle (curl_easy_cleanup(); set also on error), *@ret_sock its
 * socket. @what names the call in @err. Return 0 or -errno with @err. */
static int hijack(const struct engine_conn *c, const char *path, const char *body, const char *what,
                  CURL **ret_h, int *ret_sock, char rest[4096], size_t *rest_n,
                  struct sbx_error *err)
{
        _cleanup_free_ char *req = NULL;
        curl_socket_t sock = CURL_SOCKET_BAD;
        char head[4097];
        size_t n = 0;
        uint64_t until = sbx_now_ms() + ATTACH_HEAD_MS;
        char *end = NULL;
        CURLcode rc;

        *ret_h = engine_easy_new(c, path, false);
        curl_easy_setopt(*ret_h, CURLOPT_CONNECT_ONLY, 1L);
        rc = curl_easy_perform(*ret_h);
        if (rc == CURLE_OK)
                rc = curl_easy_getinfo(*ret_h, CURLINFO_ACTIVESOCKET, &sock);
        if (rc != CURLE_OK || sock == CURL_SOCKET_BAD)
                return sbx_fail(err, ECONNREFUSED,
                                "cannot reach the container engine to %s (%s): check "
                                "DOCKER_HOST and the engine, then retry session_start",
                                what, curl_easy_strerror(rc));
        *ret_sock = (int)sock;
        req = xasprintf("POST %s HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\n"
                        "Upgrade: tcp\r\nContent-Type: application/json\r\n"
                        "Content-Length: %zu\r\n\r\n%s",
                        path, body ? strlen(body) : 0, body ? body : "");
        if (hij_send(*ret_h, *ret_sock, req, strlen(req)) < 0)
                return sbx_fail(err, EIO, "the request to %s could not be sent", what);
        while (!end) {
                size_t got = 0;
                rc = curl_easy_recv(*ret_h, head + n, sizeof(head) - 1 - n, &got);
                if (rc == CURLE_AGAIN) {
                        struct pollfd p = {.fd = *ret_sock, .events = POLLIN};
                        uint64_t now = sbx_now_ms();
                        if (now >= until || poll(&p, 1, (int)(until - now)) <= 0)
                                return sbx_fail(err, ETIMEDOUT,
                                                "the container engine did not answer the request "
                                                "to %s within %d s: check the engine (`docker "
                                                "info`), then retry session_start",
                                                what, ATTACH_HEAD_MS / 1000);
                        continue;
                }
                if (rc != CURLE_OK || got == 0)
                        return sbx_fail(err, EPROTO,
                                        "the container engine closed the connection to %s before "
                                        "answering: retry session_start",
                                        what);
                n += got;
                head[n] = '\0';
                end = strstr(head, "\r\n\r\n");
                if (!end && n >= sizeof(head) - 1)
                        return sbx_fail(err, EPROTO,
                                        "the container engine's answer to %s is too long", what);
        }
        if (strncmp(head, "HTTP/1.1 101", 12) != 0 && strncmp(head, "HTTP/1.1 200", 12) != 0 &&
            strncmp(head, "HTTP/1.0 200", 12) != 0)
                return sbx_fail(err, EPROTO, "the container engine refused to %s: %.200s", what,
                                head);
        end += 4;
        *rest_n = (size_t)(head + n - end);
        memcpy(rest, end, *rest_n);
        return 0;
}

static int attach_connect(struct engine_cells_attach *a, const struct engine_conn *c,
                          const char *id, struct sbx_error *err)
{
        static const char query[] = "?stream=1&stdin=1&stdout=1&stderr=1";
        _cleanup_free_ char *path =
            c->api[0] ? xasprintf("/v%s/containers/%s/attach%s", c->api, id, query)
                      : xasprintf("/containers/%s/attach%s", id, query);
        char rest[4096];
        size_t n = 0;
        int r = hijack(c, path, NULL, "attach to the session's container", &a->h, &a->sock, rest,
                       &n, err);

        if (r == 0)
                take(a, rest, n);
        return r;
}

void engine_cells_attach_close(struct engine_cells_attach *a)
{
        if (!a)
                return;
        if (a->relaying) {
                if (write(a->stop[1], "x", 1) < 0)
                        log_debug("session attach: stop: %m");
                pthread_join(a->relay, NULL);
        }
        if (a->h)
                curl_easy_cleanup(a->h);
        close_fd(&a->out_w);
        close_fd(&a->err_w);
        close_fd(&a->status_w);
        close_fd(&a->cells_r);
        close_fd(&a->stop[0]);
        close_fd(&a->stop[1]);
        free(a);
}

int engine_cells_attach_open(const struct engine_conn *c, const char *id, const char *mark,
                             struct engine_cells_attach **ret,
                             struct engine_cells_attach_fds *ret_fds, struct sbx_error *err)
{
        struct engine_cells_attach *a = xcalloc(1, sizeof(*a));
        int out[2] = {-1, -1}, er[2] = {-1, -1}, st[2] = {-1, -1}, in[2] = {-1, -1};
        int r = 0;

        a->sock = a->out_w = a->err_w = a->status_w = a->cells_r = -1;
        a->stop[0] = a->stop[1] = -1;
        engine_cellstream_init(&a->cs, mark, on_data, on_record, a);
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0 ||
            pipe2(in, O_CLOEXEC) < 0 || pipe2(a->stop, O_CLOEXEC) < 0)
                r = sbx_fail(err, errno, "the session's pipes: %m");
        a->out_w = out[1];
        a->err_w = er[1];
        a->status_w = st[1];
        a->cells_r = in[0];
        /* our read ends non-blocking, as the FIFOs' are on a local engine (cells.c polls) */
        for (int i = 0; r == 0 && i < 3; i++) {
                int fd = i == 0 ? out[0] : i == 1 ? er[0] : st[0];
                if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
                        r = sbx_fail(err, errno, "the session's pipes: %m");
        }
        if (r == 0)
                r = attach_connect(a, c, id, err);
        if (r == 0) {
                r = -pthread_create(&a->relay, NULL, relay_main, a);
                if (r < 0)
                        sbx_fail(err, -r, "the session's relay thread: %s", strerror(-r));
                a->relaying = r == 0;
        }
        if (r < 0) {
                int ours[] = {out[0], er[0], st[0], in[1]};
                for (size_t i = 0; i < ELEMENTSOF(ours); i++)
                        if (ours[i] >= 0)
                                close(ours[i]);
                engine_cells_attach_close(a);
                return r;
        }
        *ret_fds = (struct engine_cells_attach_fds){
            .out_r = out[0], .err_r = er[0], .status_r = st[0], .cells_w = in[1]};
        *ret = a;
        return 0;
}

static int lifeline_start(const struct engine_conn *c, const char *id, uid_t uid, CURL **ret_h,
                          char ret_path[96], struct sbx_error *err);

/* The lifeline exec, as another uid than the code's: a FIFO in a folder of its own in /tmp
 * (0711: the code can reach the name it is told, not list it), 0644 (the code may read it,
 * never write it), held open for both by the exec (so the supervisor's open does not block),
 * the path printed, then `cat` reads the exec's stdin until the engine closes it: the server's
 * connection gone. */
static const char life_sh[] =
    "d=$(mktemp -d /tmp/.vestibule-life.XXXXXX) && chmod 0711 \"$d\" && "
    "mkfifo -m 0644 \"$d/l\" && exec 3<>\"$d/l\" && echo \"$d/l\" && exec cat >/dev/null";

static int life_exec_create(const struct engine_conn *c, const char *id, uid_t uid, char ret[72],
                            struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        _cleanup_(json_putp) json_object *b = json_object_new_object();
        json_object *cmd = json_object_new_array();
        char user[32];
        const char *eid;
        int r;

        snprintf(user, sizeof(user), "%u:%u", (unsigned)uid, (unsigned)uid);
        json_object_array_add(cmd, json_object_new_string(ENGINE_BASH_PATH));
        json_object_array_add(cmd, json_object_new_string("-c"));
        json_object_array_add(cmd, json_object_new_string(life_sh));
        json_object_object_add(b, "AttachStdin", json_object_new_boolean(true));
        json_object_object_add(b, "AttachStdout", json_object_new_boolean(true));
        json_object_object_add(b, "AttachStderr", json_object_new_boolean(false));
        json_object_object_add(b, "Tty", json_object_new_boolean(false));
        json_object_object_add(b, "User", json_object_new_string(user));
        json_object_object_add(b, "Cmd", cmd);
        r = engine_post(c,
                        &(struct engine_call){.path = "/containers/{}/exec",
                                              .parts = {id},
                                              .json = json_object_to_json_string(b),
                                              .ok = {201},
                                              .body = ENGINE_BODY_JSON,
                                              .timeout_ms = 30000,
                                              .what = "create the session's lifeline exec"},
                        &rep, err);
        if (r < 0)
                return r;
        eid = json_object_get_string(engine_jget(rep.json, "Id"));
        if (!eid || !*eid || strlen(eid) > 64 ||
            strspn(eid, "0123456789abcdefABCDEF") != strlen(eid))
                return sbx_fail(err, EPROTO, "the engine's exec id is not an id: '%.80s'",
                                eid ? eid : "");
        snprintf(ret, 72, "%s", eid);
        return 0;
}

struct life_line {
        char buf[128];
        size_t n;
        bool whole, bad;
};

static void life_emit(void *ud, int stream, const char *buf, size_t n)
{
        struct life_line *l = ud;

        for (size_t i = 0; i < n && !l->whole && !l->bad; i++) {
                if (stream != 1 || l->n + 1 >= sizeof(l->buf))
                        l->bad = true;
                else if (buf[i] == '\n')
                        l->whole = true;
                else
                        l->buf[l->n++] = buf[i];
        }
        l->buf[l->n] = '\0';
}

void engine_cells_lifeline_close(struct engine_cells_lifeline *l)
{
        if (!l)
                return;
        if (l->h)
                curl_easy_cleanup(l->h);
        free(l);
}

int engine_cells_lifeline_open(const struct engine_conn *c, const char *id, uid_t uid,
                               struct engine_cells_lifeline **ret, char ret_path[96],
                               struct sbx_error *err)
{
        struct engine_cells_lifeline *life = xcalloc(1, sizeof(*life));
        int r = lifeline_start(c, id, uid, &life->h, ret_path, err);

        if (r < 0) {
                engine_cells_lifeline_close(life);
                return r;
        }
        *ret = life;
        return 0;
}

/* Create and start the lifeline exec (life_sh) on a hijacked connection (*@ret_h, set also on
 * error) and read the FIFO's path it prints (bounded: ATTACH_HEAD_MS). */
static int lifeline_start(const struct engine_conn *c, const char *id, uid_t uid, CURL **ret_h,
                          char ret_path[96], struct sbx_error *err)
{
        static const char body[] = "{\"Detach\":false,\"Tty\":false}";
        struct engine_demux dmx = {0};
        struct life_line l = {0};
        char eid[72], rest[4096];
        size_t n = 0;
        int sock = -1, r;
        uint64_t until = sbx_now_ms() + ATTACH_HEAD_MS;

        r = life_exec_create(c, id, uid, eid, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *path = c->api[0] ? xasprintf("/v%s/exec/%s/start", c->api, eid)
                                              : xasprintf("/exec/%s/start", eid);
        r = hijack(c, path, body, "start the session's lifeline exec", ret_h, &sock, rest, &n, err);
        if (r < 0)
                return r;
        (void)engine_demux_feed(&dmx, rest, n, life_emit, &l);
        while (!l.whole && !l.bad) {
                char buf[256];
                size_t got = 0;
                CURLcode rc = curl_easy_recv(*ret_h, buf, sizeof(buf), &got);
                if (rc == CURLE_AGAIN) {
                        struct pollfd p = {.fd = sock, .events = POLLIN};
                        uint64_t now = sbx_now_ms();
                        if (now >= until || poll(&p, 1, (int)(until - now)) <= 0)
                                break;
                        continue;
                }
                if (rc != CURLE_OK || got == 0 ||
                    engine_demux_feed(&dmx, buf, got, life_emit, &l) < 0)
                        break;
        }
        /* what the exec printed must be the FIFO it made, nothing else */
        static const char pre[] = "/tmp/.vestibule-life.";
        if (!l.whole || l.bad || l.n >= 96 || strncmp(l.buf, pre, sizeof(pre) - 1) != 0 ||
            l.n < sizeof(pre) + 2 || strcmp(l.buf + l.n - 2, "/l") != 0 ||
            strspn(l.buf, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789./_-") !=
                l.n)
                return sbx_fail(err, EPROTO,
                                "the session's lifeline did not start in the container "
                                "(it said '%.100s'): run `vestibule-mcp doctor`, then retry "
                                "session_start",
                                l.buf);
        memcpy(ret_path, l.buf, l.n + 1);
        return 0;
}
