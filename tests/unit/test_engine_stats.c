/* test_engine_stats.c - the engine's stats stream taken apart (src/engine/stats.c): a Docker
 * cgroup v1 sample, cgroup v2's (no max_usage), the empty sample of a stopped container, lines
 * split across reads, hostile bytes (wrong types, negative numbers, an overlong line, not JSON),
 * and the figures handed to the result as lower bounds or not measured with a reason. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "engine/stats.h"
#include "run/run.h"
#include "testutil.h"

/* trimmed from a real `GET /containers/ID/stats?stream=1` line of Docker 20.10, cgroup v1 */
#define V1_SAMPLE                                                                                  \
        "{\"read\":\"2026-12-02T04:40:01.1Z\",\"pids_stats\":{\"current\":7,\"limit\":64},"        \
        "\"cpu_stats\":{\"cpu_usage\":{\"total_usage\":1523000000,\"usage_in_kernelmode\":1},"     \
        "\"system_cpu_usage\":99,\"online_cpus\":2},\"memory_stats\":{\"usage\":90000000,"         \
        "\"max_usage\":105906176,\"limit\":268435456}}"
#define V2_SAMPLE                                                                                  \
        "{\"pids_stats\":{\"current\":3},\"cpu_stats\":{\"cpu_usage\":{\"total_usage\":2000}},"    \
        "\"memory_stats\":{\"usage\":4096}}"
#define EMPTY_SAMPLE                                                                               \
        "{\"read\":\"0001-01-01T00:00:00Z\",\"pids_stats\":{},\"cpu_stats\":{\"cpu_usage\":{"      \
        "\"total_usage\":0}},\"memory_stats\":{}}"

START_TEST(v1_and_v2_samples)
{
        struct engine_stats s = {0};

        ck_assert_int_eq(engine_stats_sample(&s, V1_SAMPLE, strlen(V1_SAMPLE)), 1);
        ck_assert_uint_eq(s.mem_peak, 105906176); /* max_usage, not usage */
        ck_assert_uint_eq(s.pids_peak, 7);
        ck_assert_uint_eq(s.cpu_ns, 1523000000);
        ck_assert_int_eq(engine_stats_sample(&s, V2_SAMPLE, strlen(V2_SAMPLE)), 1);
        ck_assert_uint_eq(s.mem_peak, 105906176); /* peaks stay */
        ck_assert_uint_eq(s.pids_peak, 7);
        ck_assert_uint_eq(s.cpu_ns, 1523000000);
        ck_assert_uint_eq(s.samples, 2);
        engine_stats_done(&s);

        struct engine_stats t = {0};
        ck_assert_int_eq(engine_stats_sample(&t, V2_SAMPLE, strlen(V2_SAMPLE)), 1);
        ck_assert_uint_eq(t.mem_peak, 4096);
        ck_assert_int_eq(engine_stats_sample(&t, EMPTY_SAMPLE, strlen(EMPTY_SAMPLE)), 0);
        ck_assert_uint_eq(t.samples, 1);
}
END_TEST

START_TEST(hostile_bytes)
{
        static const char *bad[] = {"", "[]", "7", "{", "nonsense", "{\"a\":1}}x"};
        static const char *typed =
            "{\"pids_stats\":{\"current\":\"999\"},\"memory_stats\":{\"usage\":-5,"
            "\"max_usage\":1.5e9},\"cpu_stats\":{\"cpu_usage\":{\"total_usage\":-1}}}";
        struct engine_stats s = {0};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_int_lt(engine_stats_sample(&s, bad[i], strlen(bad[i])), 1);
        /* strings, negatives and doubles are not figures: an empty sample */
        ck_assert_int_eq(engine_stats_sample(&s, typed, strlen(typed)), 0);
        ck_assert_uint_eq(s.samples, 0);
        ck_assert(!s.has_mem && !s.has_pids && !s.has_cpu);
}
END_TEST

START_TEST(stream_split_and_overlong)
{
        struct engine_stats s = {0};
        const char *a = V1_SAMPLE "\n\n" V2_SAMPLE "\n";
        size_t n = strlen(a);
        size_t big = ENGINE_STATS_LINE_MAX + 100;
        char *huge = xmalloc(big + 1);

        /* byte by byte: the lines are joined across reads */
        for (size_t i = 0; i < n; i++)
                ck_assert_uint_eq(engine_stats_feed(&s, a + i, 1), 1);
        ck_assert_uint_eq(s.samples, 2);
        ck_assert_uint_eq(s.bad, 0);
        /* an overlong line is skipped, the next one taken */
        memset(huge, ' ', big);
        huge[big] = '\n';
        ck_assert_uint_eq(engine_stats_feed(&s, huge, big + 1), big + 1);
        ck_assert_uint_eq(engine_stats_feed(&s, "junk\n", 5), 5);
        ck_assert_uint_eq(s.bad, 2);
        ck_assert_uint_eq(engine_stats_feed(&s, V2_SAMPLE "\n", strlen(V2_SAMPLE) + 1),
                          strlen(V2_SAMPLE) + 1);
        ck_assert_uint_eq(s.samples, 3);
        free(huge);
        engine_stats_done(&s);
}
END_TEST

START_TEST(usage_lower_bounds_or_why)
{
        struct engine_stats s = {0};
        struct run_usage u = {0};

        engine_stats_usage(&s, NULL, &u);
        ck_assert(!u.cpu_us.measured && !u.mem_peak_bytes.measured && !u.pids_peak.measured);
        ck_assert_ptr_nonnull(strstr(u.mem_peak_bytes.why, "first usage sample"));
        ck_assert_int_eq(engine_stats_sample(&s, V1_SAMPLE, strlen(V1_SAMPLE)), 1);
        engine_stats_usage(&s, NULL, &u);
        ck_assert(u.mem_peak_bytes.measured && u.mem_peak_bytes.at_least);
        ck_assert_uint_eq(u.mem_peak_bytes.value, 105906176);
        ck_assert(u.pids_peak.measured && u.pids_peak.at_least);
        ck_assert_uint_eq(u.pids_peak.value, 7);
        ck_assert(u.cpu_us.measured && u.cpu_us.at_least);
        ck_assert_uint_eq(u.cpu_us.value, 1523000);
        engine_stats_usage(&s, "a spare", &u);
        ck_assert(!u.cpu_us.measured);
        ck_assert_str_eq(u.cpu_us.why, "a spare");
        engine_stats_done(&s);
}
END_TEST

static Suite *stats_suite(void)
{
        Suite *s = suite_create("engine_stats");
        TCase *tc = tcase_create("parse");

        tcase_add_test(tc, v1_and_v2_samples);
        tcase_add_test(tc, hostile_bytes);
        tcase_add_test(tc, stream_split_and_overlong);
        tcase_add_test(tc, usage_lower_bounds_or_why);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(stats_suite());
}
