/* test_engine_stats.c - the engine's stats stream taken apart (src/engine/stats.c): a Docker
 * cgroup v1 sample, cgroup v2's (no max_usage), the empty sample of a stopped container, lines
 * split across reads, hostile bytes (wrong types, negative numbers, an overlong line, not JSON),
 * and the figures handed to the result as lower bounds or not measured with a reason. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "engine/ctrcg.h"
#include "engine/engine.h"
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

/* libpod's stream (Podman 4.3, stream=true&interval=1), trimmed from real lines of 2026-12-02:
 * a live container's, then what it sends once the container is gone */
START_TEST(libpod_samples)
{
        static const char live1[] = "{\"Error\":null,\"Stats\":[{\"ContainerID\":\"bb6d\","
                                    "\"MemUsage\":24043520,\"PIDs\":1,\"CPUNano\":54732510}]}";
        static const char live2[] = "{\"Error\":null,\"Stats\":[{\"MemUsage\":108126208,"
                                    "\"PIDs\":3,\"CPUNano\":110356290}]}";
        static const char gone[] = "{\"Error\":null,\"Stats\":[{\"MemUsage\":0,\"PIDs\":0,"
                                   "\"CPUNano\":0}]}";
        static const char hostile[] = "{\"Stats\":[{\"MemUsage\":-5,\"PIDs\":\"9\"}],"
                                      "\"memory_stats\":{\"usage\":1}}";
        struct engine_stats s = {0};

        ck_assert_int_eq(engine_stats_sample(&s, live1, strlen(live1)), 1);
        ck_assert_int_eq(engine_stats_sample(&s, live2, strlen(live2)), 1);
        ck_assert_int_eq(engine_stats_sample(&s, gone, strlen(gone)), 0);
        ck_assert_uint_eq(s.samples, 2);
        ck_assert_uint_eq(s.mem_peak, 108126208);
        ck_assert_uint_eq(s.pids_peak, 3);
        ck_assert_uint_eq(s.cpu_ns, 110356290);
        /* libpod's shape wins: its bad figures are not replaced by a compat one beside them */
        ck_assert_int_eq(engine_stats_sample(&s, hostile, strlen(hostile)), 0);
        ck_assert_uint_eq(s.mem_peak, 108126208);
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

/* ---- the container's own cgroup (ctrcg.c), against the real kernel ---------------------- */

static const char *const CTRLS[] = {"memory", "pids", "cpuacct"};

static void cg_path(const char *ctrl, char *ret, size_t size)
{
        char mnt[256];

        ck_assert_int_eq(engine_hostcg_mount(ctrl, mnt, sizeof(mnt)), 0);
        snprintf(ret, size, "%s/vestibule-ctrcg-test-%d", mnt, (int)getpid());
}

static void cg_write(const char *ctrl, const char *file, const char *text)
{
        char dir[384], path[512];
        int fd;

        cg_path(ctrl, dir, sizeof(dir));
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

/* A child in cgroups of its own with pids.max 3 forks 5 sleepers: the polls name the refused
 * forks (none before them: the control), the peak at the cap, its memory and CPU. */
START_TEST(own_cgroup_counts_refused_forks)
{
        int go[2], done[2];
        char dir[384], buf[16];
        struct engine_ctrcg g;
        pid_t c;

        for (size_t i = 0; i < ELEMENTSOF(CTRLS); i++) {
                cg_path(CTRLS[i], dir, sizeof(dir));
                ck_assert_msg(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
        }
        cg_write("pids", "pids.max", "3");
        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(done, O_CLOEXEC), 0);
        c = fork();
        ck_assert_int_ge(c, 0);
        if (c == 0) {
                int refused = 0;
                if (read(go[0], buf, 1) != 1)
                        _exit(1);
                for (int i = 0; i < 5; i++) {
                        pid_t k = fork();
                        if (k == 0) {
                                usleep(300000);
                                _exit(0);
                        }
                        refused += k < 0;
                }
                while (wait(NULL) > 0)
                        ;
                buf[0] = (char)('0' + refused);
                if (write(done[1], buf, 1) != 1)
                        _exit(1);
                pause();
                _exit(0);
        }
        snprintf(buf, sizeof(buf), "%d", (int)c);
        for (size_t i = 0; i < ELEMENTSOF(CTRLS); i++)
                cg_write(CTRLS[i], "cgroup.procs", buf);
        ck_assert_int_eq(engine_ctrcg_of_pid(&g, c), 0);
        cg_path("pids", dir, sizeof(dir));
        ck_assert_str_eq(g.pids, dir);
        ck_assert(engine_ctrcg_poll(&g, 0));
        ck_assert(g.has_refused && g.pids_refused == 0); /* control: nothing refused yet */
        ck_assert(!engine_ctrcg_poll(&g, 1)); /* rate-limited: next_ms is ahead of 1 ms */
        ck_assert_int_eq(write(go[1], "g", 1), 1);
        ck_assert_int_eq(read(done[0], buf, 1), 1);
        ck_assert_msg(buf[0] >= '2', "the child saw %c refused forks", buf[0]);
        ck_assert(engine_ctrcg_poll(&g, 0));
        ck_assert_uint_ge(g.pids_refused, 2);
        ck_assert_uint_eq(g.pids_peak, 3);
        ck_assert(g.has_mem && g.mem_peak > 0 && g.has_cpu && g.cpu_ns > 0);

        struct run_usage u = {0};
        char hit[256] = "";
        engine_ctrcg_usage(&g, 3, &u, hit, sizeof(hit));
        ck_assert(u.pids_peak.measured && u.pids_peak.at_least && u.pids_peak.value == 3);
        ck_assert_str_eq(hit, "pids (the cap of 3 was reached)");

        kill(c, SIGKILL);
        waitpid(c, NULL, 0);
        for (size_t i = 0; i < ELEMENTSOF(CTRLS); i++) {
                cg_path(CTRLS[i], dir, sizeof(dir));
                ck_assert_msg(rmdir(dir) == 0, "rmdir %s: %s", dir, strerror(errno));
        }
        /* the folders are gone: a poll reads nothing and keeps what it had */
        ck_assert(!engine_ctrcg_poll(&g, 0));
        ck_assert_uint_eq(g.pids_peak, 3);
}
END_TEST

START_TEST(own_cgroup_refuses_bad_names)
{
        struct engine_ctrcg g;
        struct run_usage u = {0};
        char hit[256] = "";

        ck_assert_int_eq(engine_ctrcg_at(&g, "/vestibule/x", "../y"), -EINVAL);
        ck_assert_int_eq(engine_ctrcg_at(&g, "/vestibule/x", ".."), -EINVAL);
        ck_assert_int_eq(engine_ctrcg_at(&g, "/vestibule/x", ""), -EINVAL);
        ck_assert_int_eq(engine_ctrcg_of_pid(&g, 0), -ESRCH);
        /* nothing polled: the usage stays as it was, no cap is named */
        engine_ctrcg_usage(&(struct engine_ctrcg){0}, 64, &u, hit, sizeof(hit));
        ck_assert(!u.mem_peak_bytes.measured && !u.pids_peak.measured);
        ck_assert_str_eq(hit, "");
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
        tcase_add_test(tc, libpod_samples);
        tcase_add_test(tc, own_cgroup_refuses_bad_names);
        suite_add_tcase(s, tc);
        /* the kernel's part: root, and the cgroup v1 hierarchies this host has */
        char mnt[256];
        if (geteuid() == 0 && engine_hostcg_mount("memory", mnt, sizeof(mnt)) == 0 &&
            engine_hostcg_mount("pids", mnt, sizeof(mnt)) == 0 &&
            engine_hostcg_mount("cpuacct", mnt, sizeof(mnt)) == 0) {
                TCase *k = tcase_create("own cgroup");
                tcase_add_test(k, own_cgroup_counts_refused_forks);
                suite_add_tcase(s, k);
        } else {
                fprintf(stderr, "the own-cgroup case needs root and cgroup v1: not run\n");
        }
        return s;
}

int main(void)
{
        return sbx_test_run(stats_suite());
}
