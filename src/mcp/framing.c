/* framing.c - newline-delimited JSON on stdio: a line reader that keeps up with multi-MiB lines
 * and drops over-long ones without holding them, and the single locked writer of out_fd.
 * Spec: 2025-11-25/basic/transports.mdx §stdio, 2026-07-28/basic/transports/stdio.mdx. */
#include "mcp/mcp-internal.h"

#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/utf8.h"
#include "common/xalloc.h"

#define READ_CHUNK ((size_t)64 << 10)

void mcp_reader_init(struct mcp_reader *r, int fd, size_t max_line_bytes)
{
        memset(r, 0, sizeof(*r));
        r->fd = fd;
        r->max_line_bytes = max_line_bytes ? max_line_bytes : MCP_MAX_LINE_BYTES_DEFAULT;
}

void mcp_reader_done(struct mcp_reader *r)
{
        sbx_buf_done(&r->buf);
        r->start = r->scan = 0;
}

/* Give the buffer back (nothing unconsumed is in it) and return freed heap to the kernel. */
static void reader_release(struct mcp_reader *r)
{
        mcp_reader_done(r);
        (void)malloc_trim(0);
}

ssize_t mcp_reader_fill(struct mcp_reader *r)
{
        ssize_t n;

        /* A buffer grown for one long line goes back once that line is consumed, and the heap
         * is trimmed: a 60 MB message must not leave 60 MB resident for the server's life. */
        if (r->start == r->buf.len && r->buf.cap > READ_CHUNK * 8)
                reader_release(r);
        /* Move the unconsumed tail to the front so the buffer only grows for one long line. */
        if (r->start > 0) {
                memmove(r->buf.data, r->buf.data + r->start, r->buf.len - r->start);
                r->buf.len -= r->start;
                r->scan -= r->start;
                r->start = 0;
        }
        /* Room for one chunk and the NUL mcp_reader_next() writes; no cap (the line limit is
         * enforced there), so this cannot fail short of running out of memory. */
        (void)sbx_buf_reserve(&r->buf, READ_CHUNK);
        do
                n = read(r->fd, r->buf.data + r->buf.len, r->buf.cap - r->buf.len - 1);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                        return 0;
                return -errno;
        }
        if (n == 0) {
                r->eof = true;
                return 0;
        }
        r->buf.len += (size_t)n;
        r->buf.data[r->buf.len] = '\0';
        return n;
}

enum mcp_read_status mcp_reader_next(struct mcp_reader *r, char **ret_line, size_t *ret_len)
{
        char *nl;
        size_t end;

        if (r->buf.len == r->start)
                return r->eof && r->discarding ? (r->discarding = false, MCP_READ_TOO_LONG)
                                               : MCP_READ_NONE;
        nl = memchr(r->buf.data + r->scan, '\n', r->buf.len - r->scan);
        if (!nl) {
                r->scan = r->buf.len;
                if (r->discarding) {
                        /* Keep nothing of a line we already gave up on. */
                        r->start = r->buf.len = r->scan = 0;
                        if (r->eof) {
                                r->discarding = false;
                                return MCP_READ_TOO_LONG;
                        }
                        return MCP_READ_NONE;
                }
                if (r->buf.len - r->start > r->max_line_bytes) {
                        log_warning("a message line is over %zu bytes; discarding it",
                                    r->max_line_bytes);
                        r->discarding = true;
                        reader_release(r); /* nothing of it is kept, so no buffer either */
                        if (r->eof) {
                                r->discarding = false;
                                return MCP_READ_TOO_LONG;
                        }
                        return MCP_READ_NONE;
                }
                if (!r->eof)
                        return MCP_READ_NONE;
                /* EOF: a last line without '\n' still counts. */
                end = r->buf.len;
        } else {
                end = (size_t)(nl - r->buf.data);
        }

        if (r->discarding || end - r->start > r->max_line_bytes) {
                r->discarding = false;
                r->start = r->scan = end < r->buf.len ? end + 1 : end;
                return MCP_READ_TOO_LONG;
        }
        *ret_line = r->buf.data + r->start;
        r->buf.data[end] = '\0'; /* there is always room: sbx_buf keeps one byte spare */
        *ret_len = end - r->start;
        if (*ret_len > 0 && (*ret_line)[*ret_len - 1] == '\r')
                (*ret_line)[--*ret_len] = '\0';
        r->start = r->scan = end < r->buf.len ? end + 1 : end;
        return MCP_READ_LINE;
}

char *mcp_utf8_sanitize(const char *s, size_t len, size_t *ret_len)
{
        const unsigned char *u = (const unsigned char *)s;
        size_t i = 0, o = 0, k;
        char *out;

        while (i < len && (k = sbx_utf8_whole(u + i, len - i, NULL)) > 0)
                i += k;
        if (i == len)
                return NULL;
        out = xmalloc(len * 3 + 1); /* each bad byte becomes 3 bytes at most */
        memcpy(out, s, i);
        o = i;
        while (i < len) {
                k = sbx_utf8_whole(u + i, len - i, NULL);
                if (k == 0) {
                        memcpy(out + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                } else {
                        memcpy(out + o, s + i, k);
                        o += k;
                        i += k;
                }
        }
        out[o] = '\0';
        *ret_len = o;
        return out;
}

static int write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK) {
                                /* A non-blocking stdout: wait until it drains. */
                                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                                (void)poll(&pfd, 1, -1);
                                continue;
                        }
                        return -errno;
                }
                p += k;
                n -= (size_t)k;
        }
        return 0;
}

/* An error reply that stands in for a frame the client would choke on: -32603 with the
 * request's id, or with no id when even that is too long (an id of megabytes). NULL for a
 * notification or a batch array, which are dropped (their parts are each small enough to
 * matter less). Never recurses: the reply is checked here, once. */
static char *oversized_reply(json_object *msg, size_t len, size_t max, size_t *ret_len)
{
        json_object *id = NULL, *e;
        _cleanup_free_ char *m = NULL;
        const char *text;
        char *out = NULL;
        size_t n;

        if (!json_object_is_type(msg, json_type_object) ||
            !json_object_object_get_ex(msg, "id", &id) ||
            json_object_object_get_ex(msg, "method", NULL)) {
                log_error("dropping a %zu-byte message: over the %zu bytes one line may have", len,
                          max);
                return NULL;
        }
        m = xasprintf("Internal error: the reply is %zu bytes, over the %zu bytes an MCP client "
                      "accepts on one line; lower VESTIBULE_MAX_OUTPUT_BYTES, or use a short "
                      "request id",
                      len, max);
        log_error("%s", m);
        for (int with_id = 1; with_id >= 0 && !out; with_id--) {
                e = mcp_make_error(NULL, MCP_ERR_INTERNAL, m, NULL);
                if (with_id)
                        json_object_object_add(e, "id", json_object_get(id));
                text = json_object_to_json_string_length(
                    e, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
                if (n + 1 <= max) {
                        /* the id was valid UTF-8 already: it came out of the parser */
                        out = xmalloc(n + 1);
                        memcpy(out, text, n);
                        *ret_len = n;
                } else {
                        log_error("the request id alone is over %zu bytes: replying without it",
                                  max);
                }
                json_object_put(e);
        }
        return out;
}

int mcp_writer_send(struct mcp_writer *w, json_object *msg)
{
        const char *text;
        size_t len, clean_len = 0, max;
        _cleanup_free_ char *clean = NULL, *frame = NULL;
        int r = 0;

        text = json_object_to_json_string_length(
            msg, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        clean = mcp_utf8_sanitize(text, len, &clean_len);
        if (clean) {
                text = clean;
                len = clean_len;
        }
        max = w->max_frame_bytes ? w->max_frame_bytes : MCP_MAX_FRAME_BYTES_DEFAULT;
        if (len + 1 > max) {
                frame = oversized_reply(msg, len, max, &len);
                if (!frame)
                        return 0;
        } else {
                /* One buffer with its '\n', so the frame goes out in as few writes as the pipe
                 * allows. */
                frame = xmalloc(len + 1);
                memcpy(frame, text, len);
        }
        frame[len] = '\n';

        pthread_mutex_lock(&w->mu);
        if (w->closed)
                r = -EPIPE;
        else if (w->error)
                r = -w->error;
        else {
                r = write_all(w->fd, frame, len + 1);
                if (r < 0) {
                        w->error = -r;
                        if (r == -EPIPE)
                                log_info("the client closed its end of the output pipe");
                        else
                                log_error("cannot write to the MCP output: %s", strerror(-r));
                        if (w->wake_fd >= 0) {
                                uint64_t one = 1;
                                (void)!write(w->wake_fd, &one, sizeof(one));
                        }
                }
        }
        pthread_mutex_unlock(&w->mu);
        return r;
}
