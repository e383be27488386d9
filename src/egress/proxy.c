/* proxy.c - the egress proxy process (`vestibule-mcp egress-proxy`, one per run, started by
 * session.c). It accepts on the one listener the run can reach, reads one request head per
 * connection (CONNECT host:port, or an absolute http:// URI), decides by the settings,
 * resolves the name itself and refuses private addresses unless pinned, and relays bytes both
 * ways. Every decision is appended to the record file as it is made, so a proxy that dies
 * mid-run still leaves its verdicts; its death closes the listener, so the run's next
 * connection is refused: fail closed.
 *
 * One thread per connection (at most EGRESS_MAX_CONNS; the listener is not polled while they
 * are all busy, so further clients wait in its backlog), each with a bounded head buffer and
 * one buffer per direction. A blocking getaddrinfo(3) then stalls only its own connection. */
#include "egress/egress.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "common/clock.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "egress/egress-internal.h"

#define PROXY_FD_LISTEN 3
#define PROXY_FD_RECORDS 4
#define PROXY_FD_READY 5
#define PROXY_HEAD_TIMEOUT_MS 10000
#define PROXY_CONNECT_TIMEOUT_MS 10000

struct proxy {
        struct sbx_egress pol;
        int stop_fd;      /* eventfd: readable once the proxy is told to stop */
        unsigned idle_ms; /* a relay with no byte moved either way this long ends */
        pthread_mutex_t lock;
        pthread_cond_t changed;
        unsigned active;
        atomic_uint_fast64_t next_id, recorded, dropped;
};

struct proxy_client {
        struct proxy *p;
        int fd;
};

static void __attribute__((format(printf, 2, 3)))
record(struct proxy *p __attribute__((unused)), const char *fmt, ...)
{
        char line[400];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (n <= 0 || (size_t)n >= sizeof(line))
                return;
        /* O_APPEND: one write(2) is one whole line, whichever thread writes */
        if (write(PROXY_FD_RECORDS, line, (size_t)n) != n) {
                /* the server reads what is there; a short record file is not worse */
        }
}

/* A decision: always recorded when allowed (its bytes follow in a "C" line); a refusal past
 * EGRESS_MAX_RECORDS refusals is only counted. */
static void record_decision(struct proxy *p, uint64_t id, bool allowed, uint16_t port,
                            enum egress_reason why, const char *host)
{
        if (!allowed && atomic_fetch_add(&p->recorded, 1) >= EGRESS_MAX_RECORDS) {
                atomic_fetch_add(&p->dropped, 1);
                return;
        }
        record(p, "D %llu %d %u %d %s\n", (unsigned long long)id, allowed ? 1 : 0, port, (int)why,
               host && *host ? host : "-");
}

static bool write_all(int fd, const char *buf, size_t n)
{
        while (n > 0) {
                ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0 && errno == EAGAIN) {
                        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                        if (poll(&pfd, 1, 5000) <= 0)
                                return false;
                        continue;
                }
                if (w <= 0)
                        return false;
                buf += w;
                n -= (size_t)w;
        }
        return true;
}

static void reply(int fd, int code, const char *status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply(int fd, int code, const char *status, const char *fmt, ...)
{
        char body[600], msg[900];
        va_list ap;
        int n;

        va_start(ap, fmt);
        vsnprintf(body, sizeof(body), fmt, ap);
        va_end(ap);
        n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     code, status, strlen(body), body);
        if (n > 0 && (size_t)n < sizeof(msg))
                (void)write_all(fd, msg, (size_t)n);
}

/* Wait for @fd to have @events, or the stop signal, until @deadline_ms. 1 ready, 0 timeout or
 * stop, -1 error. */
static int wait_fd(struct proxy *p, int fd, short events, int64_t deadline_ms)
{
        for (;;) {
                struct pollfd pfd[2] = {{.fd = fd, .events = events},
                                        {.fd = p->stop_fd, .events = POLLIN}};
                int64_t left = deadline_ms - (int64_t)sbx_now_ms();
                int r;

                if (left <= 0)
                        return 0;
                r = poll(pfd, 2, (int)left);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -1;
                if (pfd[1].revents)
                        return 0;
                if (pfd[0].revents)
                        return 1;
        }
}

/* Connect to one of @ai within the deadline; the socket, or -1. */
static int connect_any(struct proxy *p, const struct addrinfo *ai)
{
        int64_t deadline = (int64_t)sbx_now_ms() + PROXY_CONNECT_TIMEOUT_MS;

        for (; ai; ai = ai->ai_next) {
                int s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e;
                socklen_t el = sizeof(e);

                if (s < 0)
                        continue;
                if (connect(s, ai->ai_addr, ai->ai_addrlen) == 0)
                        return s;
                if (errno == EINPROGRESS && wait_fd(p, s, POLLOUT, deadline) == 1 &&
                    getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0)
                        return s;
                close(s);
        }
        return -1;
}

/* The upstream head of an absolute-URI request: origin-form target, "Host:" the URI's
 * authority (the code's own Host lines dropped), hop-by-hop and Proxy-* headers dropped,
 * "Connection: close" (one request per upstream connection). */
char *egress_upstream_head(const char *buf, const struct egress_request *rq, size_t *ret_len)
{
        static const char *const drop[] = {
            "proxy-connection:", "proxy-authorization:", "connection:", "keep-alive:", "host:"};
        /* Each line out is at most its line in plus one byte (a bare "\n" becomes "\r\n"), and
         * every line in is at least one byte: twice the head bounds it (a fuzzer found a head of
         * bare-LF lines that overflowed head_len + 64); the Host line adds at most 280. */
        size_t cap = 2 * rq->head_len + 64 + 280, o = 0, i;
        char *out = xmalloc(cap);

        memcpy(out + o, buf, rq->method_len);
        o += rq->method_len;
        out[o++] = ' ';
        if (rq->target_len) {
                memcpy(out + o, buf + rq->target_off, rq->target_len);
                o += rq->target_len;
        } else {
                out[o++] = '/';
        }
        out[o++] = ' ';
        memcpy(out + o, buf + rq->version_off, rq->version_len);
        o += rq->version_len;
        out[o++] = '\r';
        out[o++] = '\n';
        /* the authority the decision was made on, never the code's own Host (domain fronting:
         * tests/adversarial/server.md) */
        o += (size_t)snprintf(out + o, 280, "Host: %s%s%s", strchr(rq->host, ':') ? "[" : "",
                              rq->host, strchr(rq->host, ':') ? "]" : "");
        if (rq->port != 80)
                o += (size_t)snprintf(out + o, 16, ":%u", rq->port);
        out[o++] = '\r';
        out[o++] = '\n';
        i = (size_t)((const char *)memchr(buf, '\n', rq->head_len) - buf) + 1;
        while (i < rq->head_len) {
                const char *nl = memchr(buf + i, '\n', rq->head_len - i);
                size_t end = nl ? (size_t)(nl - buf) : rq->head_len, len = end - i;
                bool skip = false;

                if (len && buf[i + len - 1] == '\r')
                        len--;
                for (size_t d = 0; d < ELEMENTSOF(drop) && len; d++)
                        if (len >= strlen(drop[d]) &&
                            strncasecmp(buf + i, drop[d], strlen(drop[d])) == 0)
                                skip = true;
                if (len && !skip) {
                        memcpy(out + o, buf + i, len);
                        o += len;
                        out[o++] = '\r';
                        out[o++] = '\n';
                }
                i = end + 1;
        }
        static const char conn_close[] = "Connection: close\r\n\r\n";
        memcpy(out + o, conn_close, sizeof(conn_close)); /* with its NUL, which is not sent */
        o += sizeof(conn_close) - 1;
        *ret_len = o;
        return out;
}

/* A 1xx (interim) status line: "HTTP/1.x 1.." */
static bool answer_interim(const char *buf, size_t len)
{
        return len >= 10 && strncmp(buf, "HTTP/1.", 7) == 0 && buf[9] == '1';
}

size_t egress_answer_head_end(const char *buf, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                if (buf[i] != '\n')
                        continue;
                if (i + 1 < len && buf[i + 1] == '\n')
                        return i + 2;
                if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
                        return i + 3;
        }
        return 0;
}

char *egress_answer_head(const char *buf, size_t head_len, size_t *ret_len)
{
        static const char *const drop[] = {"connection:", "keep-alive:", "proxy-connection:"};
        static const char close_lines[] = "Connection: close\r\nProxy-Connection: close\r\n\r\n";
        /* each line out is at most its line in plus one byte ("\n" -> "\r\n"), so twice */
        char *out = xmalloc(2 * head_len + sizeof(close_lines));
        size_t o = 0, i = 0;
        if (answer_interim(buf, head_len)) {
                memcpy(out, buf, head_len);
                *ret_len = head_len;
                return out;
        }
        while (i < head_len) {
                const char *nl = memchr(buf + i, '\n', head_len - i);
                size_t end = nl ? (size_t)(nl - buf) : head_len, len = end - i;
                bool skip = false;

                if (len && buf[i + len - 1] == '\r')
                        len--;
                for (size_t d = 0; d < ELEMENTSOF(drop) && len && i > 0; d++)
                        if (len >= strlen(drop[d]) &&
                            strncasecmp(buf + i, drop[d], strlen(drop[d])) == 0)
                                skip = true;
                if (len && !skip) { /* the blank line is added below */
                        memcpy(out + o, buf + i, len);
                        o += len;
                        out[o++] = '\r';
                        out[o++] = '\n';
                }
                i = end + 1;
        }
        memcpy(out + o, close_lines, sizeof(close_lines) - 1);
        *ret_len = o + sizeof(close_lines) - 1;
        return out;
}

/* One direction of a tunnel: bytes move from @from into a pipe and on to @to with splice(2),
 * so they never pass through user space; the pipe (EGRESS_BUF_BYTES) is the only buffer. */
struct half {
        int from, to;
        int pipe[2];
        size_t in_pipe;
        bool eof, shut;
        uint64_t bytes;
        bool capped;   /* read at most @left bytes from @from, then stop (no shutdown) */
        uint64_t left; /* what @capped still lets through */
};

/* Move what can move now without blocking. Return false on a hard error. */
static bool half_step(struct half *h)
{
        for (int rounds = 0; rounds < 64; rounds++) {
                bool moved = false;
                if (h->capped && h->left == 0 && !h->eof)
                        h->eof = h->shut = true; /* the body has passed: read no further */
                if (!h->eof && h->in_pipe < EGRESS_BUF_BYTES) {
                        size_t want = EGRESS_BUF_BYTES - h->in_pipe;
                        if (h->capped && h->left < want)
                                want = (size_t)h->left;
                        ssize_t n = splice(h->from, NULL, h->pipe[1], NULL, want,
                                           SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                        if (n > 0) {
                                h->in_pipe += (size_t)n;
                                h->left -= h->capped ? (uint64_t)n : 0;
                                moved = true;
                        } else if (n == 0) {
                                h->eof = true;
                        } else if (errno != EAGAIN && errno != EINTR) {
                                return false;
                        }
                }
                if (h->in_pipe > 0) {
                        ssize_t w = splice(h->pipe[0], NULL, h->to, NULL, h->in_pipe,
                                           SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                        if (w > 0) {
                                h->in_pipe -= (size_t)w;
                                h->bytes += (uint64_t)w;
                                moved = true;
                        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                                return false;
                        }
                }
                if (h->eof && h->in_pipe == 0 && !h->shut) {
                        shutdown(h->to, SHUT_WR);
                        h->shut = true;
                }
                if (!moved)
                        break;
        }
        return true;
}

/* The poll set of one relay round: each socket asks only for what a live half needs from it.
 * A socket that no half needs is left out (fd -1): poll(2) reports POLLHUP and POLLERR
 * whatever was asked, so a finished half's socket, polled on, would wake every round (a
 * busy loop: tests/adversarial/server.md). */
static void relay_events(const struct half h[2], struct pollfd pfd[2])
{
        for (int d = 0; d < 2; d++) {
                struct pollfd *src = d == 0 ? &pfd[0] : &pfd[1];
                struct pollfd *dst = d == 0 ? &pfd[1] : &pfd[0];
                if (!h[d].eof && h[d].in_pipe < EGRESS_BUF_BYTES)
                        src->events |= POLLIN;
                if (h[d].in_pipe > 0)
                        dst->events |= POLLOUT;
        }
        for (int i = 0; i < 2; i++)
                if (!pfd[i].events)
                        pfd[i].fd = -1;
}

/* Relay both ways until both sides are done, an error, the stop signal, or @idle_ms with no
 * byte moved either way; when @one_exchange (an absolute-URI request, sent upstream with
 * "Connection: close"), also once the upstream's answer has ended and reached the client:
 * a client that keeps the proxy connection alive (Bun's fetch in Claude Code) would send its
 * next request on it, relayed raw to a server that has closed (HTTP 400) and never decided on.
 * Closing makes it open a new connection, whose head is judged; and only the request's own
 * body (@body_left bytes still to come, from its Content-Length; -1 = a CONNECT tunnel, no
 * limit) is read from the client, so a next request already sent is never relayed. */
/* The answer's head of a one-exchange relay, read from the upstream and sent rewritten by
 * egress_answer_head() (then the rest goes by splice). */
struct answer {
        bool active; /* still reading a head */
        char *buf;   /* EGRESS_MAX_HEAD_BYTES */
        size_t len;  /* bytes in @buf */
        char *out;   /* what is to be written to the client, or NULL */
        size_t out_len, sent;
};

/* Read what the upstream has into @a; once a head has ended (or cannot), queue it rewritten
 * with what came after it. A 1xx head passes as it is and the next one is read. False on a
 * hard error. */
static bool answer_read(struct answer *a, int up)
{
        /* what came after an interim head may hold the next head whole already */
        size_t end = a->len ? egress_answer_head_end(a->buf, a->len) : 0;

        if (!end) {
                ssize_t n = read(up, a->buf + a->len, EGRESS_MAX_HEAD_BYTES - a->len);

                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return true;
                if (n < 0 && !a->len)
                        return false;
                /* an error after some bytes (a reset: an upstream that closed without reading
                 * the request) ends the head as EOF does: what came is still passed on, and
                 * the splice that follows meets the error */
                a->len += n > 0 ? (size_t)n : 0;
                end = egress_answer_head_end(a->buf, a->len);
                if (n > 0 && !end && a->len < EGRESS_MAX_HEAD_BYTES)
                        return true;
        }
        if (!end) { /* the upstream ended, or a head over 8 KiB: passed as it is */
                a->out = xmalloc(a->len + 1);
                memcpy(a->out, a->buf, a->len);
                a->out_len = a->len;
                a->len = 0;
                a->active = false;
                return true;
        }
        size_t hl, rest = a->len - end;
        char *h = egress_answer_head(a->buf, end, &hl);
        a->out = xrealloc(h, hl + rest);
        memcpy(a->out + hl, a->buf + end, rest);
        a->out_len = hl + rest;
        a->active = false;
        if (answer_interim(a->buf, end)) { /* an interim answer: the final head follows */
                a->out_len = hl;
                memmove(a->buf, a->buf + end, rest);
                a->len = rest;
                a->active = true;
        } else {
                a->len = 0;
        }
        return true;
}

/* Write what @a has queued to the client. False on a hard error. */
static bool answer_write(struct answer *a, int client, uint64_t *bytes)
{
        ssize_t w = write(client, a->out + a->sent, a->out_len - a->sent);

        if (w < 0)
                return errno == EAGAIN || errno == EINTR;
        a->sent += (size_t)w;
        *bytes += (uint64_t)w;
        if (a->sent == a->out_len) {
                free(a->out);
                a->out = NULL;
                a->sent = a->out_len = 0;
        }
        return true;
}

static void relay(struct proxy *p, int client, int up, int64_t body_left, uint64_t *ret_up,
                  uint64_t *ret_down)
{
        bool one_exchange = body_left >= 0;
        struct half h[2] = {{.from = client,
                             .to = up,
                             .pipe = {-1, -1},
                             .capped = one_exchange,
                             .left = one_exchange ? (uint64_t)body_left : 0},
                            {.from = up, .to = client, .pipe = {-1, -1}}};
        int64_t last_move = (int64_t)sbx_now_ms();
        _cleanup_free_ char *abuf = one_exchange ? xmalloc(EGRESS_MAX_HEAD_BYTES) : NULL;
        struct answer a = {.active = one_exchange, .buf = abuf};

        for (int d = 0; d < 2; d++) {
                if (pipe2(h[d].pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                        goto out;
                (void)fcntl(h[d].pipe[1], F_SETPIPE_SZ, (int)EGRESS_BUF_BYTES);
        }
        for (;;) {
                struct pollfd pfd[3] = {
                    {.fd = client}, {.fd = up}, {.fd = p->stop_fd, .events = POLLIN}};
                uint64_t before = h[0].bytes + h[1].bytes;
                int64_t left;
                int r;

                bool in_head = a.active || a.out;
                if (!half_step(&h[0]))
                        break;
                if (in_head && ((a.out && !answer_write(&a, client, &h[1].bytes)) ||
                                (!a.out && a.active && !answer_read(&a, up))))
                        break;
                if (!in_head && !half_step(&h[1]))
                        break;
                if ((h[0].shut && h[1].shut) || (one_exchange && h[1].shut))
                        break;
                if (h[0].bytes + h[1].bytes != before)
                        last_move = (int64_t)sbx_now_ms();
                left = last_move + (int64_t)p->idle_ms - (int64_t)sbx_now_ms();
                if (left <= 0)
                        break; /* idle: nothing moved either way for idle_ms */
                relay_events(h, pfd);
                if (a.active || a.out) { /* the answer's head: read or written by hand */
                        pfd[0].fd = client;
                        pfd[1].fd = up;
                        pfd[0].events &= ~POLLOUT;
                        pfd[1].events &= ~POLLIN;
                        if (a.out)
                                pfd[0].events |= POLLOUT;
                        else
                                pfd[1].events |= POLLIN;
                        pfd[0].fd = pfd[0].events ? client : -1;
                        pfd[1].fd = pfd[1].events ? up : -1;
                }
                if (a.active && !a.out && a.len && egress_answer_head_end(a.buf, a.len))
                        continue; /* the next head is here already: no wait for more */
                r = poll(pfd, 3, (int)left);
                if (r < 0 && errno != EINTR)
                        break;
                if (pfd[2].revents)
                        break;
                if ((pfd[0].revents | pfd[1].revents) & POLLNVAL)
                        break;
        }
out:
        free(a.out);
        for (int d = 0; d < 2; d++) {
                if (h[d].pipe[0] >= 0)
                        close(h[d].pipe[0]);
                if (h[d].pipe[1] >= 0)
                        close(h[d].pipe[1]);
        }
        *ret_up = h[0].bytes;
        *ret_down = h[1].bytes;
}

static void set_nonblock(int fd)
{
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
                (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* One connection's state, from its head to its end. */
struct conn {
        struct proxy *p;
        int fd, up;
        char *head; /* EGRESS_MAX_HEAD_BYTES */
        size_t len; /* bytes of @head read */
        struct egress_request rq;
        int64_t body;     /* an absolute-form request's body length (egress_request_body()) */
        char detail[160]; /* why a private address was refused, for the 403 body */
};

/* Read the request head into @c within PROXY_HEAD_TIMEOUT_MS. Return 1 with @c->rq parsed, a
 * negative egress_parse_request() error, 0 when the client closed before sending a byte, or
 * -ETIMEDOUT when the head never completed (a silent or slow client, a client that closed
 * mid-head, or the stop signal): every connection that sent something leaves a record. */
static int conn_read_head(struct conn *c)
{
        int64_t deadline = (int64_t)sbx_now_ms() + PROXY_HEAD_TIMEOUT_MS;
        int r = 0;

        set_nonblock(c->fd);
        while (r == 0) {
                ssize_t n;
                int w = wait_fd(c->p, c->fd, POLLIN, deadline);
                if (w != 1)
                        return w == 0 || c->len > 0 ? -ETIMEDOUT : 0;
                n = read(c->fd, c->head + c->len, EGRESS_MAX_HEAD_BYTES - c->len);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n <= 0)
                        return c->len > 0 ? -ETIMEDOUT : 0;
                c->len += (size_t)n;
                r = egress_parse_request(c->head, c->len, &c->rq);
        }
        return r;
}

/* The first address of @ai (resolved for @c's name, not pinned) that is not public, named in
 * @c->detail; EGRESS_WHY_PRIVATE then, else EGRESS_WHY_OK. */
static enum egress_reason judge_addresses(struct conn *c, const struct addrinfo *ai)
{
        for (const struct addrinfo *a = ai; a; a = a->ai_next) {
                const char *cls = egress_addr_class(a->ai_addr);
                char txt[INET6_ADDRSTRLEN] = "?";
                if (!cls)
                        continue;
                if (a->ai_family == AF_INET)
                        inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, txt,
                                  sizeof(txt));
                else if (a->ai_family == AF_INET6)
                        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, txt,
                                  sizeof(txt));
                snprintf(c->detail, sizeof(c->detail),
                         " (%s, %s; pin the name with VESTIBULE_EGRESS_PIN if you mean it)", txt,
                         cls);
                return EGRESS_WHY_PRIVATE;
        }
        return EGRESS_WHY_OK;
}

/* Whether this process has no network interface but loopback: the server's own container
 * started with `docker run --network none` (getifaddrs(3)), where every upstream fails. Asked
 * only after a failure, so that the refusal says why instead of "connection failed". */
static bool server_offline(void)
{
        struct ifaddrs *all = NULL;
        bool offline = true;

        if (getifaddrs(&all) < 0)
                return false;
        for (struct ifaddrs *i = all; i; i = i->ifa_next)
                if (!(i->ifa_flags & IFF_LOOPBACK) && (i->ifa_flags & IFF_UP))
                        offline = false;
        freeifaddrs(all);
        return offline;
}

/* Decide on @c's request and, when allowed, connect upstream (@c->up). */
static enum egress_reason conn_decide(struct conn *c)
{
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        const struct sbx_egress_pin *pin;
        enum egress_reason why = egress_decide_name(&c->p->pol, &c->rq);
        char port_s[8];

        if (why != EGRESS_WHY_OK)
                return why;
        pin = config_egress_pin(&c->p->pol, c->rq.host);
        snprintf(port_s, sizeof(port_s), "%u", pin && pin->port ? pin->port : c->rq.port);
        hints.ai_flags = AI_NUMERICSERV | (pin || c->rq.host_is_ip ? AI_NUMERICHOST : 0);
        if (getaddrinfo(pin ? pin->addr : c->rq.host, port_s, &hints, &ai) != 0 || !ai)
                return server_offline() ? EGRESS_WHY_NO_NETWORK : EGRESS_WHY_NO_RESOLVE;
        if (!pin)
                why = judge_addresses(c, ai);
        if (why == EGRESS_WHY_OK) {
                /* the very addresses judged above: nothing is resolved twice */
                c->up = connect_any(c->p, ai);
                if (c->up < 0)
                        why = server_offline() ? EGRESS_WHY_NO_NETWORK : EGRESS_WHY_CONNECT;
        }
        freeaddrinfo(ai);
        return why;
}

/* The answer to a refused request: 403 for the policy, 502 for the network (a name that does
 * not resolve, a failed connect, a server with no network of its own). */
static void conn_refuse(struct conn *c, enum egress_reason why)
{
        bool policy = why != EGRESS_WHY_NO_RESOLVE && why != EGRESS_WHY_CONNECT &&
                      why != EGRESS_WHY_NO_NETWORK;
        bool v6 = strchr(c->rq.host, ':') != NULL;

        reply(c->fd, policy ? 403 : 502, policy ? "Forbidden" : "Bad Gateway",
              "vestibule egress: refused %s%s%s:%u: %s%s\n", v6 ? "[" : "", c->rq.host,
              v6 ? "]" : "", c->rq.port, egress_reason_text(why), c->detail);
}

/* An allowed request: the tunnel's answer or the rewritten head, what came after the head,
 * then the relay. Adds the bytes moved to @ret_up and @ret_down. */
static void conn_forward(struct conn *c, uint64_t *ret_up, uint64_t *ret_down)
{
        uint64_t u = 0, d = 0;
        int one = 1;
        int64_t body_left = c->rq.connect ? -1 : c->body;

        if (c->rq.connect) {
                static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                if (!write_all(c->fd, ok, sizeof(ok) - 1))
                        return;
        } else {
                size_t hl;
                _cleanup_free_ char *h = egress_upstream_head(c->head, &c->rq, &hl);
                if (!write_all(c->up, h, hl))
                        return;
                *ret_up += hl;
        }
        if (c->len > c->rq.head_len) {
                size_t extra = c->len - c->rq.head_len;
                if (!c->rq.connect && (uint64_t)extra > (uint64_t)body_left)
                        extra = (size_t)body_left; /* a pipelined next request: not relayed */
                if (!write_all(c->up, c->head + c->rq.head_len, extra))
                        return;
                *ret_up += extra;
                body_left -= (int64_t)extra;
        }
        (void)setsockopt(c->up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        relay(c->p, c->fd, c->up, c->rq.connect ? -1 : body_left, &u, &d);
        *ret_up += u;
        *ret_down += d;
}

/* One connection: its head, the decision (recorded the moment it is made), then a refusal or
 * the relay, and the bytes it moved. */
static void serve(struct proxy *p, int fd)
{
        _cleanup_free_ char *head = xmalloc(EGRESS_MAX_HEAD_BYTES);
        struct conn c = {.p = p, .fd = fd, .up = -1, .head = head};
        enum egress_reason why;
        uint64_t id, bytes_up = 0, bytes_down = 0;
        int r = conn_read_head(&c);

        if (r == 0)
                return; /* closed without a byte: nothing was asked */
        id = atomic_fetch_add(&p->next_id, 1) + 1;
        if (r < 0) {
                record_decision(p, id, false, 0,
                                r == -ETIMEDOUT ? EGRESS_WHY_NO_HEAD : EGRESS_WHY_BAD_REQUEST,
                                NULL);
                if (r == -EPROTONOSUPPORT)
                        reply(fd, 400, "Bad Request",
                              "vestibule egress: refused: an https:// URL must be sent with "
                              "CONNECT (set HTTPS_PROXY, the sandbox sets it)\n");
                else if (r != -ETIMEDOUT)
                        reply(fd, 400, "Bad Request",
                              "vestibule egress: refused: not an HTTP proxy request (CONNECT "
                              "host:port, or an absolute http:// URL)\n");
                return;
        }
        if (!c.rq.connect && (r = egress_request_body(head, &c.rq, &c.body)) < 0) {
                record_decision(p, id, false, c.rq.port, EGRESS_WHY_BAD_REQUEST, c.rq.host);
                reply(fd, 400, "Bad Request", "%s",
                      r == -EOPNOTSUPP
                          ? "vestibule egress: refused: a chunked request body (Transfer-Encoding) "
                            "over plain http is not relayed, as the proxy could not tell where "
                            "the request ends; send it with a Content-Length, or over https "
                            "(CONNECT)\n"
                          : "vestibule egress: refused: a header line HTTP/1.1 does not allow "
                            "(a folded line, a bare CR, blanks before a colon) or a "
                            "Content-Length that is not one decimal number\n");
                return;
        }
        why = conn_decide(&c);
        record_decision(p, id, why == EGRESS_WHY_OK, c.rq.port, why, c.rq.host);
        if (why != EGRESS_WHY_OK) {
                conn_refuse(&c, why);
                return;
        }
        conn_forward(&c, &bytes_up, &bytes_down);
        close(c.up);
        record(p, "C %llu %llu %llu\n", (unsigned long long)id, (unsigned long long)bytes_up,
               (unsigned long long)bytes_down);
}

static void *conn_main(void *arg)
{
        struct proxy_client *c = arg;
        struct proxy *p = c->p;

        serve(p, c->fd);
        close(c->fd);
        free(c);
        pthread_mutex_lock(&p->lock);
        p->active--;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
        return NULL;
}

static const char *arg_value(int argc, char **argv, const char *name)
{
        for (int i = 0; i + 1 < argc; i++)
                if (strcmp(argv[i], name) == 0)
                        return argv[i + 1];
        return "";
}

/* Accept clients until the stop signal on @sig_fd or a broken listener; one detached thread
 * (@attr) each, at most EGRESS_MAX_CONNS at once. */
static void accept_loop(struct proxy *p, int sig_fd, const pthread_attr_t *attr)
{
        for (;;) {
                struct pollfd pfd[2] = {{.fd = sig_fd, .events = POLLIN},
                                        {.fd = PROXY_FD_LISTEN, .events = POLLIN}};
                struct proxy_client *cn;
                pthread_t t;
                bool full;
                int r, c;

                pthread_mutex_lock(&p->lock);
                full = p->active >= EGRESS_MAX_CONNS;
                pthread_mutex_unlock(&p->lock);
                /* all busy: leave new clients in the backlog, look again in a moment */
                r = poll(pfd, full ? 1 : 2, full ? 50 : -1);
                if (r < 0 && errno != EINTR)
                        return;
                if (r <= 0)
                        continue;
                if (pfd[0].revents || (pfd[1].revents & (POLLERR | POLLNVAL)))
                        return;
                c = accept4(PROXY_FD_LISTEN, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                            errno == ENOMEM)
                                poll(NULL, 0, 50);
                        continue;
                }
                cn = xmalloc(sizeof(*cn));
                cn->p = p;
                cn->fd = c;
                pthread_mutex_lock(&p->lock);
                p->active++;
                pthread_mutex_unlock(&p->lock);
                if (pthread_create(&t, attr, conn_main, cn) != 0) {
                        close(c);
                        free(cn);
                        pthread_mutex_lock(&p->lock);
                        p->active--;
                        pthread_mutex_unlock(&p->lock);
                }
        }
}

/* Stop: no new connection; the open ones record their bytes and end (1 s at most). */
static void stop_all(struct proxy *p)
{
        uint64_t one = 1;
        struct timespec until;

        close(PROXY_FD_LISTEN);
        if (write(p->stop_fd, &one, sizeof(one)) != sizeof(one)) {
                /* the threads end with the process below anyway */
        }
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_mutex_lock(&p->lock);
        while (p->active > 0 && pthread_cond_timedwait(&p->changed, &p->lock, &until) != ETIMEDOUT)
                ;
        pthread_mutex_unlock(&p->lock);
        if (atomic_load(&p->dropped))
                record(p, "M %llu\n", (unsigned long long)atomic_load(&p->dropped));
}

/* The settings from @argv into @p, then the signal fd (returned), the stop eventfd, O_APPEND
 * records, and the confinement. Return the signalfd, or -1 with the reason on stderr. */
static int proxy_setup(struct proxy *p, int argc, char **argv)
{
        struct sbx_error err = {0};
        const char *idle = arg_value(argc, argv, "--idle-ms");
        sigset_t mask;
        int sig_fd, fl, r;

        if (config_egress_parse(arg_value(argc, argv, "--allow"), arg_value(argc, argv, "--ports"),
                                arg_value(argc, argv, "--pin"), &p->pol, &err) < 0) {
                fprintf(stderr, "vestibule egress-proxy: %s\n", err.msg);
                return -1;
        }
        p->idle_ms = *idle ? (unsigned)strtoul(idle, NULL, 10) : EGRESS_IDLE_TIMEOUT_MS;
        if (p->idle_ms == 0)
                p->idle_ms = EGRESS_IDLE_TIMEOUT_MS;
        signal(SIGPIPE, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL); /* inherited by every connection thread */
        sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
        p->stop_fd = eventfd(0, EFD_CLOEXEC);
        fl = fcntl(PROXY_FD_RECORDS, F_GETFL);
        if (sig_fd < 0 || p->stop_fd < 0 || fl < 0 ||
            fcntl(PROXY_FD_RECORDS, F_SETFL, fl | O_APPEND) < 0) {
                fprintf(stderr, "vestibule egress-proxy: cannot set up: %s\n", strerror(errno));
                return -1;
        }
        r = egress_proxy_confine();
        if (r < 0) {
                fprintf(stderr, "vestibule egress-proxy: cannot confine itself: %s\n",
                        strerror(-r));
                return -1;
        }
        return sig_fd;
}

int egress_proxy_main(int argc, char **argv)
{
        static struct proxy p = {.lock = PTHREAD_MUTEX_INITIALIZER,
                                 .changed = PTHREAD_COND_INITIALIZER};
        pthread_attr_t attr;
        int acc = 0, sig_fd;
        socklen_t al = sizeof(acc);

        if (getsockopt(PROXY_FD_LISTEN, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc ||
            fcntl(PROXY_FD_RECORDS, F_GETFD) < 0) {
                fprintf(stderr, "vestibule-mcp egress-proxy: an internal command: the "
                                "server starts it for a run with network \"allowlist\"\n");
                return 2;
        }
        prctl(PR_SET_NAME, EGRESS_PROC_NAME, 0, 0, 0);
        sig_fd = proxy_setup(&p, argc, argv);
        if (sig_fd < 0)
                return 2;
        set_nonblock(PROXY_FD_LISTEN);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, (size_t)512 * 1024); /* getaddrinfo, and ASan builds */
        /* ready: the server stops waiting and lets the run go on */
        if (write(PROXY_FD_READY, "R", 1) != 1)
                return 1;
        close(PROXY_FD_READY);
        accept_loop(&p, sig_fd, &attr);
        stop_all(&p);
        _exit(0);
}
