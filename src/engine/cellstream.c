/* cellstream.c - a volume-path session's attach stream, server side: Docker's 8-byte frames
 * (engine_demux_feed()), then in each stream the supervisor's "<mark><record>\n" lines among
 * the cell's bytes (cellstream.h). The mark's first byte occurs once in it, so a mismatch after
 * j matched bytes hands those j bytes on as data and looks at the current byte afresh: no
 * overlap can be missed. A record is handed on only when both streams carried the same one,
 * which is what orders a cell's stderr before its end (docs/design/sessions.md). */
#include "engine/cellstream.h"

#include <errno.h>
#include <string.h>

void engine_cellstream_init(struct engine_cellstream *cs, const char *mark,
                            engine_cellstream_data_fn data, engine_cellstream_record_fn record,
                            void *ud)
{
        size_t n = strlen(mark);

        memset(cs, 0, sizeof(*cs));
        cs->data = data;
        cs->record = record;
        cs->ud = ud;
        if (n < 2 || n > sizeof(cs->mark) || memchr(mark + 1, mark[0], n - 1)) {
                cs->broken = true;
                return;
        }
        memcpy(cs->mark, mark, n);
        cs->mark_len = n;
}

/* A whole record on stream index @i: kept until the other stream's; equal ones go on. */
static void side_record(struct engine_cellstream *cs, int i)
{
        struct engine_cellstream_side *me = &cs->side[i], *other = &cs->side[!i];

        if (me->pending) {
                cs->broken = true;
                return;
        }
        if (!other->pending) {
                memcpy(me->line, me->rec, me->rec_len);
                me->line_len = me->rec_len;
                me->pending = true;
                return;
        }
        if (other->line_len != me->rec_len || memcmp(other->line, me->rec, me->rec_len) != 0) {
                cs->broken = true;
                return;
        }
        other->pending = false;
        cs->record(cs->ud, me->rec, me->rec_len);
}

/* The payload of one stream's frame slice. */
static void side_feed(struct engine_cellstream *cs, int stream, const char *buf, size_t n)
{
        struct engine_cellstream_side *s = &cs->side[stream - 1];
        size_t start = 0; /* the first byte of @buf not yet handed on */

        for (size_t i = 0; i < n && !cs->broken; i++) {
                char ch = buf[i];
                if (s->in_rec) {
                        if (ch == '\n') {
                                s->in_rec = false;
                                side_record(cs, stream - 1);
                                s->rec_len = 0;
                        } else if (s->rec_len >= ENGINE_CELLSTREAM_REC_MAX) {
                                cs->broken = true;
                        } else {
                                s->rec[s->rec_len++] = ch;
                        }
                        start = i + 1;
                        continue;
                }
                if (ch == cs->mark[s->matched]) {
                        if (s->matched == 0 && i > start)
                                cs->data(cs->ud, stream, buf + start, i - start);
                        if (s->matched == 0)
                                start = i; /* from here on the mark, held */
                        if (++s->matched == cs->mark_len) {
                                s->matched = 0;
                                s->in_rec = true;
                                s->rec_len = 0;
                                start = i + 1;
                        }
                        continue;
                }
                if (s->matched > 0) {
                        /* not the mark: what was held is data. Held bytes from an earlier slice
                         * are not in @buf: hand on the mark's prefix itself (they were it). */
                        size_t in_buf = i - start;
                        if (in_buf < s->matched)
                                cs->data(cs->ud, stream, cs->mark, s->matched - in_buf);
                        if (in_buf)
                                cs->data(cs->ud, stream, buf + start, in_buf);
                        s->matched = 0;
                        start = i;
                        if (ch == cs->mark[0])
                                s->matched = 1; /* a mark is >= 2 bytes: not whole yet */
                }
        }
        if (cs->broken)
                return;
        /* what is left: data, unless it is a mark's beginning (held for the next slice) */
        if (!s->in_rec && s->matched == 0 && n > start)
                cs->data(cs->ud, stream, buf + start, n - start);
}

static void demux_cb(void *ud, int stream, const char *buf, size_t n)
{
        struct engine_cellstream *cs = ud;

        if (!cs->broken && n > 0)
                side_feed(cs, stream, buf, n);
}

int engine_cellstream_feed(struct engine_cellstream *cs, const char *buf, size_t n)
{
        if (cs->broken)
                return -EPROTO;
        if (engine_demux_feed(&cs->dmx, buf, n, demux_cb, cs) < 0)
                cs->broken = true;
        return cs->broken ? -EPROTO : 0;
}
