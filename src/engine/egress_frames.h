/* egress_frames.h - the parser of the bytes the egress bridge sends back over its exec's
 * stream (egress_frames.c; the bridge and the server's end: egress_stream.c). Pure: bytes in,
 * frames out to a handler; no I/O, so the fuzz target (tests/fuzz/fuzz_egress_stream.c) and the
 * unit tests run it alone. Private to src/engine. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EGRESS_FRAME_MAX 65536 /* the longest payload a frame may carry */

/* The two layers of the exec's stdout: the Engine API's 8-byte headers (stream, 0, 0, 0, u32
 * big-endian length; https://docs.docker.com/engine/api/v1.41/#operation/ContainerAttach), and
 * in their payloads our frames: type (1 byte: 'O' 'D' 'E' 'X'), connection id (u32 big-endian),
 * length (u32 big-endian, at most EGRESS_FRAME_MAX), payload. Zeroed = the stream's start. */
struct egress_frames {
        unsigned char hdr[8]; /* the engine header being received */
        size_t hdr_n;
        uint32_t left; /* payload bytes of the current engine frame */
        unsigned char
            *in; /* our frame being received (malloc'd, < 9 + EGRESS_FRAME_MAX + a read) */
        size_t in_n;
        bool ended; /* the stream ends: a bad header or frame, or the handler said so */
};

/* One whole frame: @type one of 'O' 'D' 'E' 'X', @n <= EGRESS_FRAME_MAX bytes at @data (valid
 * only during the call; @n may be 0). Return false to end the stream. */
typedef bool (*egress_frame_fn)(void *ctx, char type, uint32_t id, const unsigned char *data,
                                uint32_t n);

/**
 * egress_frames_feed() - take @n more bytes of the exec's stdout (@n may be 0) and hand every
 * frame they complete to @fn(@ctx, ...), in order. Bytes of a frame not yet whole are kept.
 * Ends the stream (p->ended; later calls do nothing) at an engine header of another stream
 * than 1 (stdout), a frame of an unknown type or longer than EGRESS_FRAME_MAX, or @fn
 * returning false. Allocation failure aborts (xrealloc). Bytes are untrusted: any input is safe.
 */
void egress_frames_feed(struct egress_frames *p, const unsigned char *buf, size_t n,
                        egress_frame_fn fn, void *ctx);

/** egress_frames_done() - free what @p holds; @p is then zeroed (a new stream's start). */
void egress_frames_done(struct egress_frames *p);
