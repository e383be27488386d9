/* demux.c - Docker's multiplexed attach/logs stream (Tty false): 8-byte frame headers
 * [stream, 0, 0, 0, size u32 big-endian] then the payload. libcurl hands us arbitrary slices,
 * so a header or a payload may be split across calls. */
#include "engine/engine.h"

#include <errno.h>
#include <string.h>

int engine_demux_feed(struct engine_demux *d, const char *buf, size_t n, engine_demux_fn fn,
                      void *userdata)
{
        while (n > 0) {
                if (d->broken)
                        return -EPROTO;
                if (d->remaining == 0) {
                        size_t take = sizeof(d->hdr) - d->hdr_len;
                        if (take > n)
                                take = n;
                        memcpy(d->hdr + d->hdr_len, buf, take);
                        d->hdr_len += take;
                        buf += take;
                        n -= take;
                        if (d->hdr_len < sizeof(d->hdr))
                                return 0;
                        d->hdr_len = 0;
                        /* Only stdout/stderr were asked for; bytes 1-3 are zero by protocol.
                         * Anything else means we lost sync (or this is not a multiplexed
                         * stream): refuse rather than show garbage as output. */
                        if ((d->hdr[0] != 1 && d->hdr[0] != 2) || d->hdr[1] || d->hdr[2] ||
                            d->hdr[3]) {
                                d->broken = true;
                                return -EPROTO;
                        }
                        d->stream = d->hdr[0];
                        d->remaining = (uint32_t)d->hdr[4] << 24 | (uint32_t)d->hdr[5] << 16 |
                                       (uint32_t)d->hdr[6] << 8 | (uint32_t)d->hdr[7];
                        continue; /* a zero-size frame is valid: next header */
                }
                size_t take = d->remaining < n ? d->remaining : n;
                fn(userdata, d->stream, buf, take);
                d->remaining -= (uint32_t)take;
                buf += take;
                n -= take;
        }
        return 0;
}
