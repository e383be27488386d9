/* test_trace.c - the timing trace (src/common/trace.c): the line format scripts/bench parses,
 * nothing at all when off, run numbers that tell runs apart. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/trace.h"
#include "testutil.h"

/* Run @fn with stderr going to a pipe; return what it wrote (at most @size - 1 bytes). */
static void capture(void (*fn)(void), char *buf, size_t size)
{
        int p[2], saved = dup(STDERR_FILENO);
        ssize_t n;

        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_ge(saved, 0);
        dup2(p[1], STDERR_FILENO);
        close(p[1]);
        fn();
        dup2(saved, STDERR_FILENO);
        close(saved);
        n = read(p[0], buf, size - 1);
        buf[n > 0 ? n : 0] = '\0';
        close(p[0]);
}

static void two_runs_on(void)
{
        struct sbx_trace a, b;

        sbx_trace_begin(&a, true, "native");
        sbx_trace_begin(&b, true, "container");
        usleep(2000);
        sbx_trace_lap(&a, "clone");
        sbx_trace_span(&b, "create", 1234);
        sbx_trace_end(&a);
}

static void off(void)
{
        struct sbx_trace t;

        sbx_trace_begin(&t, false, "native");
        sbx_trace_lap(&t, "clone");
        sbx_trace_span(&t, "create", 1);
        sbx_trace_end(&t);
}

START_TEST(trace_lines_parse)
{
        char out[1024], phase[32], backend[32];
        unsigned long run_a = 0, run_b = 0, us = 0;
        const char *l2, *l3;

        capture(two_runs_on, out, sizeof(out));
        /* line 1: native clone, at least the 2 ms slept */
        ck_assert_msg(sscanf(out,
                             "vestibule[%*d]: debug: trace run=%lu backend=%31s phase=%31s us=%lu",
                             &run_a, backend, phase, &us) == 4,
                      "%s", out);
        ck_assert_str_eq(backend, "native");
        ck_assert_str_eq(phase, "clone");
        ck_assert_uint_ge(us, 2000);
        ck_assert_uint_lt(us, 10000000);
        /* line 2: the other run, its own number, the given duration */
        l2 = strchr(out, '\n');
        ck_assert_ptr_nonnull(l2);
        ck_assert_int_eq(
            sscanf(l2 + 1, "vestibule[%*d]: debug: trace run=%lu backend=%31s phase=%31s us=%lu",
                   &run_b, backend, phase, &us),
            4);
        ck_assert_uint_ne(run_a, run_b);
        ck_assert_str_eq(backend, "container");
        ck_assert_str_eq(phase, "create");
        ck_assert_uint_eq(us, 1234);
        /* line 3: the total of run a */
        l3 = strchr(l2 + 1, '\n');
        ck_assert_ptr_nonnull(l3);
        ck_assert_ptr_nonnull(strstr(l3, "phase=total us="));
}
END_TEST

START_TEST(trace_off_writes_nothing)
{
        char out[256];

        capture(off, out, sizeof(out));
        ck_assert_str_eq(out, ""); /* control: trace_lines_parse shows capture sees lines */
}
END_TEST

static Suite *trace_suite(void)
{
        Suite *s = suite_create("trace");
        TCase *tc = tcase_create("lines");

        tcase_add_test(tc, trace_lines_parse);
        tcase_add_test(tc, trace_off_writes_nothing);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(trace_suite());
}
