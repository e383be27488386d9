/* cellstream.h - the parser of a volume-path session's attach stream (server side): Docker's
 * multiplexed frames (demux.c), and in each of stdout and stderr the supervisor's record lines,
 * "<mark><record>\n", among the cell's own bytes. Bytes from the engine and from inside the
 * container: untrusted. Private to src/engine; see docs/design/sessions.md ("Sessions on the
 * volume path"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "engine/engine.h"

/* The longest mark (engine_cellstream_init()) and record line (without the mark and the
 * newline) taken; a longer record breaks the stream. */
#define ENGINE_CELLSTREAM_MARK_MAX 64
#define ENGINE_CELLSTREAM_REC_MAX 120

/* Bytes of the cell's stream @stream (1 stdout, 2 stderr), in order; @n > 0. */
typedef void (*engine_cellstream_data_fn)(void *ud, int stream, const char *buf, size_t n);
/* One status record (@n bytes, no newline), handed on once BOTH streams carried it: every byte
 * of either stream before it has been handed to the data callback. */
typedef void (*engine_cellstream_record_fn)(void *ud, const char *rec, size_t n);

struct engine_cellstream_side {
        size_t matched;                          /* bytes of the mark matched so far */
        bool in_rec;                             /* after a whole mark: collecting the record */
        char rec[ENGINE_CELLSTREAM_REC_MAX + 1]; /* the record being collected */
        size_t rec_len;
        bool pending; /* a whole record waits for the other stream's */
        char line[ENGINE_CELLSTREAM_REC_MAX + 1];
        size_t line_len;
};

struct engine_cellstream {
        struct engine_demux dmx;
        char mark[ENGINE_CELLSTREAM_MARK_MAX];
        size_t mark_len;
        struct engine_cellstream_side side[2]; /* stdout, stderr */
        bool broken; /* a bad frame, a record too long, the streams' records differ */
        engine_cellstream_data_fn data;
        engine_cellstream_record_fn record;
        void *ud;
};

/**
 * engine_cellstream_init() - a parser for one session's attach stream.
 * @mark:   the session's mark (the supervisor's $2), 2..ENGINE_CELLSTREAM_MARK_MAX bytes whose
 *          first byte occurs nowhere else in it (cells.c: "\036vsb-" + 32 hex digits + ":");
 *          copied. A longer or empty one leaves the parser broken.
 * @data, @record, @ud: the callbacks and their first argument; borrowed.
 */
void engine_cellstream_init(struct engine_cellstream *cs, const char *mark,
                            engine_cellstream_data_fn data, engine_cellstream_record_fn record,
                            void *ud);

/**
 * engine_cellstream_feed() - @n bytes of the hijacked attach stream (@buf: any slice, split
 * anywhere), parsed into the callbacks. A mark split across slices is held back (at most the
 * mark's length per stream) until it is known not to be one, then handed on as data.
 * Return: 0, or -EPROTO once the stream is broken (a frame that is not stdout/stderr, a record
 * longer than ENGINE_CELLSTREAM_REC_MAX, a second record on one stream before the other's
 * first, two streams' records that differ); nothing more is handed on after that.
 */
int engine_cellstream_feed(struct engine_cellstream *cs, const char *buf, size_t n);
