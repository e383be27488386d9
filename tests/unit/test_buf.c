/* test_buf.c - the one growable buffer (common/buf.h): growth, the cap and its error (nothing
 * appended, no allocation needed to report it), printf, reading an fd to its end. Also the
 * other small helpers every module uses: array growth (GREEDY_REALLOC, common/xalloc.h) and
 * deadlines on the monotonic clock (sbx_deadline_ts, common/clock.h). */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "testutil.h"

START_TEST(growth)
{
        struct sbx_buf b = {0};
        size_t caps = 0, last_cap = 0;

        ck_assert_int_eq(sbx_buf_add(&b, NULL, 0), 0);
        ck_assert_ptr_nonnull(b.data);
        ck_assert_str_eq(b.data, "");
        for (int i = 0; i < 100000; i++) {
                ck_assert_int_eq(sbx_buf_add(&b, "0123456789", 10), 0);
                if (b.cap != last_cap) {
                        caps++;
                        last_cap = b.cap;
                }
        }
        ck_assert_uint_eq(b.len, 1000000);
        ck_assert_uint_eq(strlen(b.data), 1000000); /* NUL-terminated */
        ck_assert(memcmp(b.data + 999990, "0123456789", 10) == 0);
        /* doubling: about log2(1e6 / 256) reallocations, not one per append */
        ck_assert_uint_le(caps, 14);
        sbx_buf_done(&b);
        ck_assert_ptr_null(b.data);
        ck_assert_uint_eq(b.len, 0);
}
END_TEST

START_TEST(cap)
{
        struct sbx_buf b = {.max = 8};

        ck_assert_int_eq(sbx_buf_puts(&b, "12345"), 0);
        ck_assert_int_eq(sbx_buf_puts(&b, "678"), 0); /* control: exactly the cap */
        ck_assert_int_eq(sbx_buf_add(&b, "9", 1), -EFBIG);
        ck_assert_uint_eq(b.len, 8); /* nothing appended */
        ck_assert_str_eq(b.data, "12345678");
        ck_assert_int_eq(sbx_buf_printf(&b, "%d", 9), -EFBIG);
        ck_assert_str_eq(b.data, "12345678");
        ck_assert_int_eq(sbx_buf_reserve(&b, 1), -EFBIG);
        ck_assert_int_eq(sbx_buf_reserve(&b, 0), 0);
        sbx_buf_done(&b);
        ck_assert_uint_eq(b.max, 8); /* kept for reuse */
        /* a size that would overflow is the same error, with no allocation tried */
        struct sbx_buf big = {0};
        ck_assert_int_eq(sbx_buf_add(&big, "x", 1), 0);
        ck_assert_int_eq(sbx_buf_reserve(&big, SIZE_MAX), -EFBIG);
        ck_assert_int_eq(sbx_buf_reserve(&big, SIZE_MAX - 1), -EFBIG);
        ck_assert_uint_eq(big.len, 1);
        sbx_buf_done(&big);
}
END_TEST

START_TEST(printf_and_steal)
{
        struct sbx_buf b = {0};
        size_t len = 99;
        _cleanup_free_ char *empty = sbx_buf_steal(&b, &len);

        ck_assert_str_eq(empty, "");
        ck_assert_uint_eq(len, 0);
        ck_assert_int_eq(sbx_buf_printf(&b, "%s=%d;", "a", 1), 0);
        ck_assert_int_eq(sbx_buf_printf(&b, "%0300d", 7), 0); /* past the first 256 */
        ck_assert_uint_eq(b.len, 304);
        _cleanup_free_ char *s = sbx_buf_steal(&b, &len);
        ck_assert_uint_eq(len, 304);
        ck_assert(strncmp(s, "a=1;000", 7) == 0);
        ck_assert_ptr_null(b.data);
}
END_TEST

START_TEST(read_fd)
{
        int p[2];
        struct sbx_buf b = {0}, c = {.max = 1000};
        static char big[200000]; /* static: the forked writers _exit() with nothing to free */

        memset(big, 'x', sizeof(big));
        ck_assert_int_eq(pipe(p), 0);
        if (fork() == 0) {
                close(p[0]);
                (void)!write(p[1], big, 200000);
                _exit(0);
        }
        close(p[1]);
        ck_assert_int_eq(sbx_buf_read_fd(&b, p[0]), 0);
        ck_assert_uint_eq(b.len, 200000);
        close(p[0]);
        sbx_buf_done(&b);

        ck_assert_int_eq(pipe(p), 0);
        if (fork() == 0) {
                close(p[0]);
                (void)!write(p[1], big, 1001);
                _exit(0);
        }
        close(p[1]);
        ck_assert_int_eq(sbx_buf_read_fd(&c, p[0]), -EFBIG);
        ck_assert_uint_eq(c.len, 1000);
        close(p[0]);
        sbx_buf_done(&c);

        ck_assert_int_eq(sbx_buf_read_fd(&c, -1), -EBADF);
}
END_TEST

START_TEST(greedy_realloc_grows_geometrically)
{
        _cleanup_free_ int *v = NULL;
        size_t room = 0, grows = 0;

        ck_assert_ptr_eq(GREEDY_REALLOC(v, room, 0), NULL); /* nothing needed: nothing done */
        ck_assert_uint_eq(room, 0);
        for (int i = 0; i < 100000; i++) {
                size_t before = room;
                GREEDY_REALLOC(v, room, (size_t)i + 1);
                ck_assert_uint_ge(room, (size_t)i + 1);
                if (room != before) {
                        grows++;
                        ck_assert_uint_ge(room, 2 * before); /* geometric */
                }
                v[i] = i;
        }
        ck_assert_uint_le(grows, 14); /* 16 * 2^13 > 100000 */
        for (int i = 0; i < 100000; i++)
                ck_assert_int_eq(v[i], i); /* the contents move with the array */
        /* A need larger than twice the room is met at once. */
        GREEDY_REALLOC(v, room, 1000000);
        ck_assert_uint_eq(room, 1000000);
}
END_TEST

/* A need whose bytes overflow size_t aborts (as out-of-memory does) instead of wrapping round
 * to a small allocation. */
START_TEST(greedy_realloc_overflow_aborts)
{
        _cleanup_free_ uint64_t *v = NULL;
        size_t room = 0;

        GREEDY_REALLOC(v, room, SIZE_MAX / 4);
}
END_TEST

START_TEST(deadline_ts_is_normalised)
{
        for (uint64_t ms = 0; ms < 3000; ms += 7) {
                struct timespec now, ts = sbx_deadline_ts(ms);
                clock_gettime(CLOCK_MONOTONIC, &now);
                ck_assert(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
                int64_t d =
                    ((int64_t)ts.tv_sec - now.tv_sec) * 1000 + (ts.tv_nsec - now.tv_nsec) / 1000000;
                ck_assert_int_le(d, (int64_t)ms);
                ck_assert_int_ge(d, (int64_t)ms - 50);
        }
}
END_TEST

static Suite *buf_suite(void)
{
        Suite *s = suite_create("buf");
        TCase *tc = tcase_create("buf");

        tcase_add_test(tc, growth);
        tcase_add_test(tc, cap);
        tcase_add_test(tc, printf_and_steal);
        tcase_add_test(tc, read_fd);
        tcase_add_test(tc, greedy_realloc_grows_geometrically);
        tcase_add_test_raise_signal(tc, greedy_realloc_overflow_aborts, SIGABRT);
        tcase_add_test(tc, deadline_ts_is_normalised);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(buf_suite());
}
