/* test_result.c - the run contract's text: order, truncation, flood, escaping, usage. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "run/run.h"
#include "testutil.h"

static void set_stream(struct run_stream *s, const char *text, size_t cap)
{
        run_stream_append(s, text, strlen(text), cap);
}

static void usage_unmeasured(struct run_usage *u, const char *why)
{
        snprintf(u->cpu_us.why, sizeof(u->cpu_us.why), "%s", why);
        snprintf(u->mem_peak_bytes.why, sizeof(u->mem_peak_bytes.why), "%s", why);
        snprintf(u->pids_peak.why, sizeof(u->pids_peak.why), "%s", why);
}

/* Position of @needle in @hay, failing the test when it is missing. */
static size_t pos(const char *hay, const char *needle)
{
        const char *p = strstr(hay, needle);

        ck_assert_msg(p != NULL, "'%s' missing from:\n%s", needle, hay);
        return (size_t)(p - hay);
}

/* --- languages --- */

START_TEST(language_parse_names)
{
        enum sbx_language l;

        ck_assert_int_eq(sbx_language_parse("python", &l), 0);
        ck_assert_int_eq(l, SBX_LANG_PYTHON);
        ck_assert_int_eq(sbx_language_parse("Node", &l), 0);
        ck_assert_int_eq(l, SBX_LANG_NODE);
        ck_assert_int_eq(sbx_language_parse("BASH", &l), 0);
        ck_assert_int_eq(l, SBX_LANG_BASH);
        ck_assert_int_eq(sbx_language_parse("ruby", &l), -EINVAL);
        ck_assert_int_eq(sbx_language_parse("", &l), -EINVAL);
        ck_assert_int_eq(sbx_language_parse("python ", &l), -EINVAL);
        ck_assert_int_eq(sbx_language_parse(NULL, &l), -EINVAL);
        ck_assert_str_eq(sbx_language_name(SBX_LANG_NODE), "node");
        ck_assert_str_eq(sbx_language_script(SBX_LANG_PYTHON), "main.py");
        ck_assert_str_eq(sbx_language_script(SBX_LANG_NODE), "main.js");
        ck_assert_str_eq(sbx_language_script(SBX_LANG_BASH), "main.sh");
}
END_TEST

/* --- capture --- */

START_TEST(stream_append_caps_and_counts)
{
        struct run_stream s = {0};

        ck_assert_uint_eq(run_stream_append(&s, "hello", 5, 8), 5);
        ck_assert_uint_eq(run_stream_append(&s, "world", 5, 8), 10);
        ck_assert_uint_eq(s.len, 8);
        ck_assert(memcmp(s.data, "hellowor", 8) == 0);
        ck_assert_uint_eq(run_stream_append(&s, "xyz", 3, 8), 13);
        ck_assert_uint_eq(s.len, 8);
        free(s.data);
}
END_TEST

/* --- order --- */

START_TEST(format_order_full)
{
        struct run_result r = {0};
        _cleanup_free_ char *t = NULL;

        set_stream(&r.out, "out-text\n", 100);
        set_stream(&r.err, "err-text\n", 100);
        r.outcome = RUN_OUTCOME_EXITED;
        r.exit_code = 3;
        r.usage.wall_ms = 12;
        r.usage.cpu_us = (struct run_measure){.measured = true, .value = 8000};
        r.usage.mem_peak_bytes =
            (struct run_measure){.measured = true, .value = 6 * 1024 * 1024 + 104858};
        r.usage.pids_peak = (struct run_measure){.measured = true, .value = 3};
        snprintf(r.limits_hit, sizeof(r.limits_hit), "pids");
        r.oom_killed = true;
        r.mem_limit_bytes = 256ull * 1024 * 1024;
        snprintf(r.blocked_syscalls, sizeof(r.blocked_syscalls), "mount, bpf");
        r.blocked_reporting_stopped = true;
        snprintf(r.audit_note, sizeof(r.audit_note), "not recorded (disk full: ENOSPC)");
        snprintf(r.notes, sizeof(r.notes), "backend note one\nbackend note two");
        snprintf(r.isolation, sizeof(r.isolation), "native");

        t = run_result_format(&r, 10, 100);
        size_t p[] = {
            pos(t, "stdout:\nout-text\n"),
            pos(t, "stderr:\nerr-text\n"),
            pos(t, "\nexit code: 3\n"),
            pos(t, "\nusage: wall 12 ms, cpu 8 ms, mem_peak 6.1 MiB, pids_peak 3\n"),
            pos(t, "\nlimits hit: pids\n"),
            pos(t, "\n[out of memory: the kernel killed a process in the sandbox at its 256 "
                   "MiB limit]\n"),
            pos(t, "\nblocked syscalls: mount, bpf\n"),
            pos(t, "reporting stopped"),
            pos(t, "\naudit: not recorded (disk full: ENOSPC)\n"),
            pos(t, "\nbackend note one\nbackend note two\n"),
            pos(t, "\nisolation: native"),
        };
        for (size_t i = 1; i < ELEMENTSOF(p); i++)
                ck_assert_msg(p[i - 1] < p[i], "line %zu out of order in:\n%s", i, t);
        /* isolation is the very last line */
        ck_assert_str_eq(strrchr(t, '\n'), "\nisolation: native");
        run_result_done(&r);
}
END_TEST

START_TEST(format_empty_streams_and_optional_lines_absent)
{
        struct run_result r = {0};
        _cleanup_free_ char *t = NULL;

        r.outcome = RUN_OUTCOME_EXITED;
        r.usage.wall_ms = 5;
        usage_unmeasured(&r.usage, "naive backend has no cgroup");
        snprintf(r.isolation, sizeof(r.isolation), "none (naive: development only)");
        t = run_result_format(&r, 10, 100);
        ck_assert_str_eq(t, "stdout: (empty)\n"
                            "stderr: (empty)\n"
                            "exit code: 0\n"
                            "usage: wall 5 ms; cpu, mem_peak and pids_peak not measured: naive "
                            "backend has no cgroup\n"
                            "isolation: none (naive: development only)");
}
END_TEST

START_TEST(format_outcomes)
{
        struct run_result r = {0};
        char *t;

        snprintf(r.isolation, sizeof(r.isolation), "container");
        r.outcome = RUN_OUTCOME_TIMED_OUT;
        t = run_result_format(&r, 7, 100);
        pos(t, "\ntimed out after 7 s\n");
        ck_assert_ptr_null(strstr(t, "exit code"));
        free(t);

        r.outcome = RUN_OUTCOME_CANCELLED;
        t = run_result_format(&r, 7, 100);
        pos(t, "\ncancelled\n");
        free(t);

        r.outcome = RUN_OUTCOME_SIGNALED;
        r.term_signal = SIGKILL;
        t = run_result_format(&r, 7, 100);
        pos(t, "\nkilled by signal SIGKILL (9)\n");
        free(t);

        r.outcome = RUN_OUTCOME_FLOODED;
        t = run_result_format(&r, 7, 100);
        pos(t, "\n[stopped: printed more than twice the 100-byte output cap]\n");
        free(t);
}
END_TEST

/* --- truncation --- */

START_TEST(format_truncation_note)
{
        struct run_result r = {0};
        _cleanup_free_ char *t = NULL;
        char big[250];

        memset(big, 'a', sizeof(big));
        run_stream_append(&r.out, big, sizeof(big), 100);
        r.outcome = RUN_OUTCOME_EXITED;
        t = run_result_format(&r, 10, 100);
        pos(t, "[truncated: 150 bytes more]\n");
        /* exactly 100 a's shown */
        size_t start = pos(t, "stdout:\n") + strlen("stdout:\n");
        ck_assert_uint_eq(strspn(t + start, "a"), 100);
        run_result_done(&r);
}
END_TEST

START_TEST(format_truncation_on_utf8_boundary)
{
        struct run_result r = {0};
        _cleanup_free_ char *t = NULL;
        /* 9 ASCII bytes then a 3-byte euro sign: a cap of 10 would split it */
        const char *s = "123456789\xe2\x82\xac tail";

        run_stream_append(&r.out, s, strlen(s), 10);
        r.outcome = RUN_OUTCOME_EXITED;
        t = run_result_format(&r, 10, 10);
        pos(t, "stdout:\n123456789\n[truncated: 8 bytes more]\n");
        ck_assert_ptr_null(strstr(t, "\\xe2"));
        run_result_done(&r);
}
END_TEST

START_TEST(utf8_cut_cases)
{
        ck_assert_uint_eq(sbx_utf8_cut("abc", 3), 3);
        ck_assert_uint_eq(sbx_utf8_cut("ab\xc3", 3), 2);
        ck_assert_uint_eq(sbx_utf8_cut("ab\xc3\xa9", 4), 4);
        ck_assert_uint_eq(sbx_utf8_cut("a\xf0\x9f\x98", 4), 1);
        ck_assert_uint_eq(sbx_utf8_cut("a\xf0\x9f\x98\x80", 5), 5);
        /* stray continuation bytes are kept (they are shown escaped) */
        ck_assert_uint_eq(sbx_utf8_cut("a\x80\x80\x80\x80", 5), 5);
}
END_TEST

/* --- escaping --- */

START_TEST(sanitize_controls_and_invalid)
{
        _cleanup_free_ char *a = sbx_text_sanitize("a\x1b[31mred\x07", 10);
        _cleanup_free_ char *b = sbx_text_sanitize("tab\tnl\ncr\r", 10);
        _cleanup_free_ char *c = sbx_text_sanitize("x\0y", 3);
        _cleanup_free_ char *d = sbx_text_sanitize("del\x7f", 4);
        _cleanup_free_ char *e = sbx_text_sanitize("c1\xc2\x9b"
                                                   "2J",
                                                   6);
        _cleanup_free_ char *f = sbx_text_sanitize("bad\xff\xfe", 5);
        _cleanup_free_ char *g = sbx_text_sanitize("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14);
        _cleanup_free_ char *h = sbx_text_sanitize("\xc0\xaf", 2);         /* overlong '/' */
        _cleanup_free_ char *i = sbx_text_sanitize("\xed\xa0\x80", 3);     /* surrogate */
        _cleanup_free_ char *j = sbx_text_sanitize("\xf4\x90\x80\x80", 4); /* > U+10FFFF */
        _cleanup_free_ char *k = sbx_text_sanitize("cut\xe2\x82", 5);

        ck_assert_str_eq(a, "a\\x1b[31mred\\x07");
        ck_assert_str_eq(b, "tab\tnl\ncr\\x0d");
        ck_assert_str_eq(c, "x\\x00y");
        ck_assert_str_eq(d, "del\\x7f");
        ck_assert_str_eq(e, "c1\\u009b2J");
        ck_assert_str_eq(f, "bad\\xff\\xfe");
        ck_assert_str_eq(g, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
        ck_assert_str_eq(h, "\\xc0\\xaf");
        ck_assert_str_eq(i, "\\xed\\xa0\\x80");
        ck_assert_str_eq(j, "\\xf4\\x90\\x80\\x80");
        ck_assert_str_eq(k, "cut\\xe2\\x82");
}
END_TEST

START_TEST(format_escapes_output_and_backend_fields)
{
        struct run_result r = {0};
        _cleanup_free_ char *t = NULL;

        set_stream(&r.out, "\x1b]0;pwned\x07", 100);
        set_stream(&r.err, "\x9b\xff", 100);
        snprintf(r.notes, sizeof(r.notes), "note\x1b[2J");
        snprintf(r.isolation, sizeof(r.isolation), "none (x\x1b)");
        r.outcome = RUN_OUTCOME_EXITED;
        t = run_result_format(&r, 10, 100);
        ck_assert_ptr_null(strchr(t, '\x1b'));
        ck_assert_ptr_null(strchr(t, '\x07'));
        ck_assert_ptr_null(strchr(t, '\r'));
        pos(t, "stdout:\n\\x1b]0;pwned\\x07\n");
        pos(t, "stderr:\n\\x9b\\xff\n");
        pos(t, "note\\x1b[2J\n");
        pos(t, "isolation: none (x\\x1b)");
        /* the whole text is valid UTF-8 with no control bytes but \t \n */
        for (const unsigned char *p = (const unsigned char *)t; *p; p++)
                ck_assert(*p >= 0x20 || *p == '\n' || *p == '\t');
        run_result_done(&r);
}
END_TEST

/* --- usage --- */

START_TEST(usage_grouping_by_reason)
{
        struct run_result r = {0};
        char *t;

        r.outcome = RUN_OUTCOME_EXITED;
        r.usage.wall_ms = 118;
        r.usage.cpu_us = (struct run_measure){.measured = true, .value = 20400};
        snprintf(r.usage.mem_peak_bytes.why, sizeof(r.usage.mem_peak_bytes.why),
                 "Linux 5.19+ needed");
        snprintf(r.usage.pids_peak.why, sizeof(r.usage.pids_peak.why), "Linux 6.1+ needed");
        t = run_result_format(&r, 10, 100);
        pos(t, "\nusage: wall 118 ms, cpu 20 ms; mem_peak not measured: Linux 5.19+ needed; "
               "pids_peak not measured: Linux 6.1+ needed\n");
        free(t);

        memset(&r.usage, 0, sizeof(r.usage));
        r.usage.wall_ms = 900;
        usage_unmeasured(&r.usage, "not readable from outside a container");
        snprintf(r.usage.mem_peak_bytes.why, sizeof(r.usage.mem_peak_bytes.why), "other");
        t = run_result_format(&r, 10, 100);
        pos(t, "\nusage: wall 900 ms; cpu and pids_peak not measured: not readable from outside "
               "a container; mem_peak not measured: other\n");
        free(t);
}
END_TEST

static Suite *result_suite(void)
{
        Suite *s = suite_create("result");
        TCase *tc;

        tc = tcase_create("language");
        tcase_add_test(tc, language_parse_names);
        suite_add_tcase(s, tc);

        tc = tcase_create("capture");
        tcase_add_test(tc, stream_append_caps_and_counts);
        suite_add_tcase(s, tc);

        tc = tcase_create("order");
        tcase_add_test(tc, format_order_full);
        tcase_add_test(tc, format_empty_streams_and_optional_lines_absent);
        tcase_add_test(tc, format_outcomes);
        suite_add_tcase(s, tc);

        tc = tcase_create("truncation");
        tcase_add_test(tc, format_truncation_note);
        tcase_add_test(tc, format_truncation_on_utf8_boundary);
        tcase_add_test(tc, utf8_cut_cases);
        suite_add_tcase(s, tc);

        tc = tcase_create("escaping");
        tcase_add_test(tc, sanitize_controls_and_invalid);
        tcase_add_test(tc, format_escapes_output_and_backend_fields);
        suite_add_tcase(s, tc);

        tc = tcase_create("usage");
        tcase_add_test(tc, usage_grouping_by_reason);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(result_suite());
}
