/* fuzz_egress_stream.c - libFuzzer target: the parser of the bytes the egress bridge sends back
 * over its exec's stream (src/engine/egress_frames.c: egress_frames_feed()), the Engine API's
 * stream format around our frames, bytes from the engine and from inside the container:
 * untrusted. The input is parsed twice: whole, and in reads of 1..16 bytes (sizes from the
 * input's first byte). Checked: every frame handed on has a known type and a payload of at most
 * EGRESS_FRAME_MAX, the bytes kept never exceed a frame plus one read, and both ways see the
 * same frames and the same end. A violation aborts.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh egress_stream SECONDS. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/egress_frames.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
        uint64_t hash; /* FNV-1a over every frame's type, id, length and payload */
        size_t frames;
};

static void mix(struct seen *v, const void *p, size_t n)
{
        const unsigned char *b = p;
        for (size_t i = 0; i < n; i++)
                v->hash = (v->hash ^ b[i]) * 1099511628211ULL;
}

static bool on_frame(void *ctx, char type, uint32_t id, const unsigned char *d, uint32_t n)
{
        struct seen *v = ctx;

        if (!strchr("ODEX", type) || !type || n > EGRESS_FRAME_MAX || (n && !d))
                abort();
        mix(v, &type, 1);
        mix(v, &id, sizeof(id));
        mix(v, &n, sizeof(n));
        mix(v, d, n);
        v->frames++;
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct egress_frames whole = {0}, parts = {0};
        struct seen a = {.hash = 14695981039346656037ULL}, b = a;
        unsigned step = size ? (data[0] & 15) + 1 : 1;

        egress_frames_feed(&whole, data, size, on_frame, &a);
        for (size_t off = 0; off < size && !parts.ended; off += step) {
                size_t n = size - off < step ? size - off : step;
                egress_frames_feed(&parts, data + off, n, on_frame, &b);
                if (parts.in_n > 9 + EGRESS_FRAME_MAX + step || parts.hdr_n >= sizeof(parts.hdr))
                        abort();
        }
        if (a.frames != b.frames || a.hash != b.hash || whole.ended != parts.ended)
                abort();
        egress_frames_done(&whole);
        egress_frames_done(&parts);
        return 0;
}
