/* egress_frames.c - the parser of the egress bridge's stream (egress_frames.h): the Engine
 * API's stream format around the exec's stdout, and our frames inside it (docs/design/egress.md,
 * "On a remote engine"; the bridge and the server's end: egress_stream.c). */
#include "engine/egress_frames.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

static uint32_t be32(const unsigned char *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Our frames out of @n more bytes of the exec's stdout. A frame longer than EGRESS_FRAME_MAX
 * or of an unknown type ends the stream. */
static void frames_feed(struct egress_frames *p, const unsigned char *buf, size_t n,
                        egress_frame_fn fn, void *ctx)
{
        size_t off = 0;

        p->in = xrealloc(p->in, p->in_n + n);
        memcpy(p->in + p->in_n, buf, n);
        p->in_n += n;
        while (!p->ended && p->in_n - off >= 9) {
                const unsigned char *f = p->in + off;
                uint32_t len = be32(f + 5);
                if (len > EGRESS_FRAME_MAX || !f[0] || !strchr("ODEX", f[0])) {
                        p->ended = true;
                        break;
                }
                if (p->in_n - off < 9 + (size_t)len)
                        break;
                if (!fn(ctx, (char)f[0], be32(f + 1), f + 9, len))
                        p->ended = true;
                off += 9 + len;
        }
        memmove(p->in, p->in + off, p->in_n - off);
        p->in_n -= off;
}

/* The Engine API's stream format: stream 1 only (stderr is not attached); anything else ends
 * the stream. */
void egress_frames_feed(struct egress_frames *p, const unsigned char *buf, size_t n,
                        egress_frame_fn fn, void *ctx)
{
        while (n > 0 && !p->ended) {
                if (p->left == 0) {
                        size_t take = sizeof(p->hdr) - p->hdr_n < n ? sizeof(p->hdr) - p->hdr_n : n;
                        memcpy(p->hdr + p->hdr_n, buf, take);
                        p->hdr_n += take;
                        buf += take;
                        n -= take;
                        if (p->hdr_n < sizeof(p->hdr))
                                return;
                        p->hdr_n = 0;
                        if (p->hdr[0] != 1) {
                                p->ended = true;
                                return;
                        }
                        p->left = be32(p->hdr + 4);
                        continue;
                }
                size_t take = p->left < n ? p->left : n;
                frames_feed(p, buf, take, fn, ctx);
                p->left -= (uint32_t)take;
                buf += take;
                n -= take;
        }
}

void egress_frames_done(struct egress_frames *p)
{
        free(p->in);
        memset(p, 0, sizeof(*p));
}
