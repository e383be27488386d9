/* test_utf8.c - the strict UTF-8 decoder every text/bytes decision rests on. */
#include <check.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/utf8.h"
#include "testutil.h"

struct utf8_case {
        const char *bytes;
        size_t n;
        int want;
        uint32_t cp;
};

#define C(s, w, c)                                                                                 \
        {                                                                                          \
                s, sizeof(s) - 1, w, c                                                             \
        }

static const struct utf8_case cases[] = {
    C("a", 1, 'a'),
    C("\x7f", 1, 0x7f),
    C("\xc2\x80", 2, 0x80),
    C("\xdf\xbf", 2, 0x7ff),
    C("\xe0\xa0\x80", 3, 0x800),
    C("\xe2\x82\xac", 3, 0x20ac),
    C("\xed\x9f\xbf", 3, 0xd7ff),
    C("\xee\x80\x80", 3, 0xe000),
    C("\xef\xbf\xbf", 3, 0xffff),
    C("\xf0\x90\x80\x80", 4, 0x10000),
    C("\xf4\x8f\xbf\xbf", 4, 0x10ffff),
    /* invalid */
    C("\x80", 0, 0), /* lone continuation */
    C("\xbf", 0, 0),
    C("\xc0\xaf", 0, 0), /* overlong '/' */
    C("\xc1\xbf", 0, 0),
    C("\xe0\x80\xaf", 0, 0), /* overlong */
    C("\xe0\x9f\xbf", 0, 0),
    C("\xed\xa0\x80", 0, 0),     /* surrogate U+D800 */
    C("\xed\xbf\xbf", 0, 0),     /* surrogate U+DFFF */
    C("\xf0\x80\x80\xaf", 0, 0), /* overlong */
    C("\xf0\x8f\xbf\xbf", 0, 0),
    C("\xf4\x90\x80\x80", 0, 0), /* above U+10FFFF */
    C("\xf5\x80\x80\x80", 0, 0),
    C("\xff", 0, 0),
    C("\xc3\x28", 0, 0), /* continuation missing */
    C("\xe2\x28\xa1", 0, 0),
    /* cut short: a valid beginning */
    C("\xc3", -1, 0),
    C("\xe2\x82", -1, 0),
    C("\xf0\x9f\x98", -1, 0),
    /* cut short, but no completion could be valid */
    C("\xed\xa0", 0, 0),
    C("\xe0\x80", 0, 0),
    C("\xf4\x90", 0, 0),
};

START_TEST(decode_table)
{
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint32_t cp = 0xdeadbeef;
                int r = sbx_utf8_decode(cases[i].bytes, cases[i].n, &cp);
                ck_assert_msg(r == cases[i].want, "case %zu: want %d got %d", i, cases[i].want, r);
                if (r > 0)
                        ck_assert_msg(cp == cases[i].cp, "case %zu: cp %x", i, cp);
        }
        ck_assert_int_eq(sbx_utf8_decode("", 0, NULL), -1);
        /* Only the first sequence counts. */
        ck_assert_int_eq(sbx_utf8_decode("ab", 2, NULL), 1);
        ck_assert_int_eq(sbx_utf8_decode("\xc3\xa9\xff", 3, NULL), 2);
}
END_TEST

/* The whole-buffer form the result text and the MCP framing use: a cut-short sequence is
 * invalid there (0), where sbx_utf8_decode() says -1. */
START_TEST(whole_table)
{
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint32_t cp = 0xdeadbeef;
                size_t r = sbx_utf8_whole(cases[i].bytes, cases[i].n, &cp);
                size_t want = cases[i].want > 0 ? (size_t)cases[i].want : 0;
                ck_assert_msg(r == want, "case %zu: want %zu got %zu", i, want, r);
                if (r > 0)
                        ck_assert_msg(cp == cases[i].cp, "case %zu: cp %x", i, cp);
        }
        ck_assert_uint_eq(sbx_utf8_whole("", 0, NULL), 0);
        ck_assert_uint_eq(sbx_utf8_whole("\xc3", 1, NULL), 0);         /* truncated */
        ck_assert_uint_eq(sbx_utf8_whole("\xc3\xa9", 2, NULL), 2);     /* control: whole */
        ck_assert_uint_eq(sbx_utf8_whole("\xc0\x80", 2, NULL), 0);     /* overlong NUL */
        ck_assert_uint_eq(sbx_utf8_whole("\xed\xb0\x80", 3, NULL), 0); /* low surrogate */
}
END_TEST

START_TEST(cut_table)
{
        ck_assert_uint_eq(sbx_utf8_cut("ab\xe2\x82", 4), 2);     /* cut inside a char */
        ck_assert_uint_eq(sbx_utf8_cut("ab\xe2\x82\xac", 5), 5); /* control: whole */
        ck_assert_uint_eq(sbx_utf8_cut("\xf0\x9f\x98", 3), 0);
        ck_assert_uint_eq(sbx_utf8_cut("a\x80\x80\x80\x80", 5), 5); /* invalid bytes kept */
        ck_assert_uint_eq(sbx_utf8_cut("", 0), 0);
}
END_TEST

static Suite *utf8_suite(void)
{
        Suite *s = suite_create("utf8");
        TCase *tc = tcase_create("decode");

        tcase_add_test(tc, decode_table);
        tcase_add_test(tc, whole_table);
        tcase_add_test(tc, cut_table);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(utf8_suite());
}
