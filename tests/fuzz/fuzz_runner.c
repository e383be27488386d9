/* fuzz_runner.c - libFuzzer target: the framing of a session runner's status records
 * (src/run/runners.c: sbx_runner_take_record(), sbx_runner_status_parse()). Those bytes come
 * from inside the sandbox: a cell's code can write anything to the status fd. The first input
 * byte picks the size of each read (1 to 256 bytes); the rest is the stream, fed as the
 * sessions feed it (at most the room left in the buffer), with every record taken after each
 * read. Checked on every input, against a shadow copy of the bytes not yet taken: the buffer
 * never holds more than its size; a record taken (or dropped as bad) is exactly the bytes up to
 * the first newline, and what stays is what followed; a full buffer without a newline is
 * refused, never taken; a parsed record has a lowercase kind of 1 to 15 letters, a seq >= 0,
 * and parses the same again from its own line. A violation aborts.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh runner SECONDS. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "run/runners.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        sbx_log_set_level((enum sbx_log_level) - 1);
        return 0;
}

#define check(cond)                                                                                \
        do {                                                                                       \
                if (!(cond))                                                                       \
                        abort();                                                                   \
        } while (0)

/* One record taken (@r > 0) or dropped (@r < 0 with a newline in @shadow): @shadow loses its
 * first line, which must be the one @st came from. */
static void check_taken(const struct sbx_runner_records *rs, int r,
                        const struct sbx_runner_status *st, char *shadow, size_t *shadow_len)
{
        char *nl = memchr(shadow, '\n', *shadow_len);
        check(nl);
        size_t line = (size_t)(nl - shadow);
        if (r > 0) {
                struct sbx_runner_status again;
                size_t k = strnlen(st->kind, sizeof(st->kind));
                check(k >= 1 && k < sizeof(st->kind));
                for (size_t i = 0; i < k; i++)
                        check(st->kind[i] >= 'a' && st->kind[i] <= 'z');
                check(st->seq >= 0);
                check(sbx_runner_status_parse(shadow, line, &again) == 0);
                check(again.seq == st->seq && again.code == st->code &&
                      strcmp(again.kind, st->kind) == 0);
        } else {
                struct sbx_runner_status again;
                check(sbx_runner_status_parse(shadow, line, &again) == -EBADMSG);
        }
        memmove(shadow, nl + 1, *shadow_len - line - 1);
        *shadow_len -= line + 1;
        check(rs->len == *shadow_len && memcmp(rs->buf, shadow, rs->len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct sbx_runner_records rs = {.len = 0};
        char shadow[sizeof(rs.buf)];
        size_t shadow_len = 0, step, at = 1;

        if (size < 1)
                return 0;
        step = (size_t)data[0] + 1;
        while (at < size) {
                size_t room = sizeof(rs.buf) - rs.len, n = size - at;
                if (n > step)
                        n = step;
                if (n > room)
                        n = room;
                check(n > 0); /* a full buffer was refused below before another read */
                memcpy(rs.buf + rs.len, data + at, n);
                memcpy(shadow + shadow_len, data + at, n);
                rs.len += n;
                shadow_len += n;
                at += n;
                for (;;) {
                        struct sbx_runner_status st = {0};
                        bool had_nl = memchr(shadow, '\n', shadow_len) != NULL;
                        int r = sbx_runner_take_record(&rs, &st);
                        check(rs.len <= sizeof(rs.buf));
                        if (r == 0) {
                                check(!had_nl && rs.len < sizeof(rs.buf));
                                break;
                        }
                        if (r < 0 && !had_nl) {
                                /* full without a newline: the session ends here */
                                check(r == -EBADMSG && rs.len == sizeof(rs.buf));
                                return 0;
                        }
                        check(r == 1 || r == -EBADMSG);
                        check_taken(&rs, r, &st, shadow, &shadow_len);
                }
        }
        return 0;
}
