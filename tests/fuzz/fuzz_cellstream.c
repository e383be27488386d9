/* fuzz_cellstream.c - libFuzzer target: the parser of a volume-path session's attach stream
 * (src/engine/cellstream.c: engine_cellstream_feed()), Docker's 8-byte frames around the cell's
 * bytes and the supervisor's "<mark><record>\n" lines: bytes from the engine and from inside
 * the container, untrusted. The mark is short ("\036k:") so that inputs reach it. The input is
 * parsed twice: whole, and in slices of 1..16 bytes (sizes from the input's first byte).
 * Checked: every record handed on is at most ENGINE_CELLSTREAM_REC_MAX bytes with no newline,
 * no data slice is empty, and both ways see the same records, the same end (broken or not)
 * and, when not broken, the same bytes on each stream. A violation aborts.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh cellstream SECONDS. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cellstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
        uint64_t hash[2]; /* FNV-1a over each stream's bytes */
        uint64_t recs;    /* FNV-1a over the records, each with its length */
        size_t n_recs;
};

static void mix(uint64_t *h, const void *p, size_t n)
{
        const unsigned char *b = p;
        for (size_t i = 0; i < n; i++)
                *h = (*h ^ b[i]) * 1099511628211ULL;
}

static void on_data(void *ud, int stream, const char *buf, size_t n)
{
        struct seen *v = ud;

        if ((stream != 1 && stream != 2) || n == 0 || !buf)
                abort();
        mix(&v->hash[stream - 1], buf, n);
}

static void on_record(void *ud, const char *rec, size_t n)
{
        struct seen *v = ud;

        if (n > ENGINE_CELLSTREAM_REC_MAX || memchr(rec, '\n', n))
                abort();
        mix(&v->recs, &n, sizeof(n));
        mix(&v->recs, rec, n);
        v->n_recs++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char mark[] = "\036k:";
        struct engine_cellstream whole, parts;
        struct seen a = {.hash = {14695981039346656037ULL, 14695981039346656037ULL},
                         .recs = 14695981039346656037ULL},
                    b = a;
        unsigned step = size ? (data[0] & 15) + 1 : 1;

        engine_cellstream_init(&whole, mark, on_data, on_record, &a);
        engine_cellstream_init(&parts, mark, on_data, on_record, &b);
        (void)engine_cellstream_feed(&whole, (const char *)data, size);
        for (size_t off = 0; off < size && !parts.broken; off += step) {
                size_t n = size - off < step ? size - off : step;
                (void)engine_cellstream_feed(&parts, (const char *)data + off, n);
                for (int i = 0; i < 2; i++)
                        if (parts.side[i].matched >= parts.mark_len ||
                            parts.side[i].rec_len > ENGINE_CELLSTREAM_REC_MAX)
                                abort();
        }
        if (a.n_recs != b.n_recs || a.recs != b.recs || whole.broken != parts.broken)
                abort();
        if (!whole.broken && (a.hash[0] != b.hash[0] || a.hash[1] != b.hash[1]))
                abort();
        return 0;
}
