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
#include "engine/hijack.h"
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

static int sock_send(struct engine_cells_attach *a, const char *buf, size_t n)
{
        return engine_hijack_send(a->h, a->sock, buf, n, ATTACH_SEND_MS);
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

static int attach_connect(struct engine_cells_attach *a, const struct engine_conn *c,
                          const char *id, struct sbx_error *err)
{
        static const char query[] = "?stream=1&stdin=1&stdout=1&stderr=1";
        _cleanup_free_ char *path =
            c->api[0] ? xasprintf("/v%s/containers/%s/attach%s", c->api, id, query)
                      : xasprintf("/containers/%s/attach%s", id, query);
        char rest[ENGINE_HIJACK_REST];
        size_t n = 0;
        int r = engine_hijack(c, path, NULL, "attach to the session's container", ATTACH_HEAD_MS,
                              &a->h, &a->sock, rest, &n, err);

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
        static const char *const life_argv[] = {ENGINE_BASH_PATH, "-c", life_sh, NULL};
        struct engine_demux dmx = {0};
        struct life_line l = {0};
        char eid[72], rest[ENGINE_HIJACK_REST];
        size_t n = 0;
        int sock = -1, r;
        uint64_t until = sbx_now_ms() + ATTACH_HEAD_MS;

        r = engine_exec_create(c, id,
                               &(struct engine_exec){.uid = uid,
                                                     .argv = life_argv,
                                                     .what = "the session's lifeline exec"},
                               eid, err);
        if (r < 0)
                return r;
        r = engine_exec_hijack(c, eid, "start the session's lifeline exec", ATTACH_HEAD_MS, ret_h,
                               &sock, rest, &n, err);
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
