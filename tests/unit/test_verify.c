/* test_verify.c - the leak-detection battery on this host, through the real run path: native as
 * the unprivileged user vestibule-test, the container backend on Docker (a root server running
 * code as vestibule-test), and naive as the control that shows the probes do detect a leak. For
 * each, the grade the run printed must agree with the battery: every boundary the grade claims
 * held (a probe failing under a grade that claims it fails the test), and only the limits the
 * grade disclaims are "not applicable". doctor's pick must print the same grade. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "doctor/doctor.h"
#include "engine/engine.h"
#include "egress/egress.h"
#include "verify/verify.h"
#include "testutil.h"

#define ROOTFS "/var/tmp/vestibule-images/rootfs"
#define IMG_PY "vestibule/python:bookworm"
#define IMG_NODE "vestibule/node:bookworm"
#define TAR_PY "/var/tmp/vestibule-images/python.tar"
#define TAR_NODE "/var/tmp/vestibule-images/node.tar"

static char *tmp;

static void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}
static struct sbx_config *load(const char *backend)
{
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};

        tmp = sbx_test_tmpdir();
        chmod(tmp, 0755);
        fake_env_set("VESTIBULE_BACKEND", backend);
        fake_env_set("VESTIBULE_ROOTFS_DIR", ROOTFS);
        fake_env_set("VESTIBULE_WORKSPACE", xasprintf("%s/workspace", tmp));
        fake_env_set("VESTIBULE_AUDIT_DIR", xasprintf("%s/audit", tmp));
        fake_env_set("VESTIBULE_IMAGE_PYTHON", IMG_PY);
        fake_env_set("VESTIBULE_IMAGE_NODE", IMG_NODE);
        fake_env_set("VESTIBULE_PIDS_MAX", "64");
        fake_env_set("VESTIBULE_CONFIG", "/nonexistent/vestibule-test-config.yaml");
        ck_assert_int_eq(config_load_from(fake_getenv, NULL, &c, &err), 0);
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        return c;
}

/* Processes carrying a battery marker (its host bait or a sandbox's daemon), from /proc. */
static int count_marked(void)
{
        _cleanup_(closedirp) DIR *d = opendir("/proc");
        struct dirent *de;
        int n = 0;

        while (d && (de = readdir(d))) {
                char path[300], buf[512];
                FILE *f;
                size_t len;

                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                len = fread(buf, 1, sizeof(buf) - 1, f);
                fclose(f);
                buf[len] = '\0';
                /* an argument that is exactly a marker: the prefix and 24 hex digits */
                for (char *a = buf; a < buf + len; a += strlen(a) + 1) {
                        const char *h = strncmp(a, "vestibule-host-", 15) == 0     ? a + 15
                                        : strncmp(a, "vestibule-daemon-", 17) == 0 ? a + 17
                                                                                   : NULL;
                        if (h && strlen(h) == 24 && strspn(h, "0123456789abcdef") == 24) {
                                n++;
                                break;
                        }
                }
        }
        return n;
}

static void dump(const struct verify_report *r)
{
        verify_print(r, stderr);
}

/* The grade and the battery agree: claimed -> held; not claimed -> not applicable. A CPU
 * probe may be "not tested" only when its control shows the host is too busy to tell. */
static void assert_agrees(const struct verify_report *r)
{
        ck_assert_msg(r->ran, "nothing ran: %s", r->blocked);
        for (size_t i = 0; i < r->n_probes; i++) {
                const struct verify_probe *p = &r->probes[i];
                bool claimed = verify_claimed(r->grade, p->claim);

                if (!claimed) {
                        ck_assert_msg(p->verdict == VERIFY_NOT_APPLICABLE,
                                      "%s: not claimed by '%s' but judged %s", p->id, r->grade,
                                      verify_verdict_word(p->verdict));
                        continue;
                }
                if (p->claim == VERIFY_CLAIM_CPU && p->verdict == VERIFY_UNTESTED &&
                    strstr(p->detail, "too busy")) {
                        fprintf(stderr, "note: %s\n", p->detail);
                        continue;
                }
                if (p->verdict != VERIFY_HELD)
                        dump(r);
                ck_assert_msg(p->verdict == VERIFY_HELD, "'%s' claims it, but %s: %s: %s", r->grade,
                              p->id, verify_verdict_word(p->verdict), p->detail);
        }
        ck_assert_uint_eq(r->not_held, 0);
}

/* doctor, for the same settings, must pick the same grade the runs printed. */
static void assert_doctor_agrees(const struct sbx_config *c, const struct verify_report *r)
{
        _cleanup_free_ struct doctor_report *d = xcalloc(1, sizeof(*d));

        doctor_collect(c, d);
        ck_assert_msg(d->usable, "doctor says Blocked: %s", d->blocked);
        ck_assert_str_eq(d->picked, r->backend);
        ck_assert_str_eq(d->grade, r->grade);
}

START_TEST(native_as_test_user)
{
        _cleanup_free_ struct verify_report *r = xcalloc(1, sizeof(*r));
        struct sbx_config *c;
        struct sbx_error err = {0};

        sbx_test_become_user();
        c = load("native");
        int before = count_marked();
        ck_assert_msg(verify_run(c, r, &err) == 0, "%s", err.msg);
        dump(r);
        /* the battery leaves nothing running: its bait, and any daemon it caught, are gone */
        ck_assert_int_le(count_marked(), before);
        ck_assert_str_eq(r->backend, "native");
        ck_assert(strncmp(r->grade, "native", 6) == 0);
        assert_agrees(r);
        /* the isolation probes are all claimed by any native grade, and all held */
        ck_assert_int_eq(r->probes[0].verdict, VERIFY_HELD);
        assert_doctor_agrees(c, r);
        config_free(c);
}
END_TEST

START_TEST(container_on_docker)
{
        _cleanup_free_ struct verify_report *r = xcalloc(1, sizeof(*r));
        struct sbx_config *c;
        struct sbx_error err = {0};

        fake_env_set("VESTIBULE_RUN_AS", geteuid() == 0 ? "2000:2000" : NULL);
        setenv("DOCKER_HOST", "unix:///var/run/docker.sock", 1);
        c = load("container");
        if (geteuid() == 0)
                ck_assert_int_eq(chown(fake_getenv("VESTIBULE_WORKSPACE"), 2000, 2000) == 0 ||
                                     errno == ENOENT,
                                 1);
        int before = count_marked();
        ck_assert_msg(verify_run(c, r, &err) == 0, "%s", err.msg);
        dump(r);
        /* the battery leaves nothing running: its bait, and any daemon it caught, are gone */
        ck_assert_int_le(count_marked(), before);
        ck_assert_str_eq(r->backend, "container");
        ck_assert(strncmp(r->grade, "container", 9) == 0);
        assert_agrees(r);
        /* a full container grade claims the memory cap: it was tried, and held */
        if (verify_claimed(r->grade, VERIFY_CLAIM_MEMORY))
                ck_assert_int_eq(r->probes[17].verdict, VERIFY_HELD);
        assert_doctor_agrees(c, r);
        config_free(c);
}
END_TEST

/* The control: with no isolation the same probes get through, which shows they can fail. */
START_TEST(naive_leaks_are_seen)
{
        _cleanup_free_ struct verify_report *r = xcalloc(1, sizeof(*r));
        struct sbx_config *c;
        struct sbx_error err = {0};

        sbx_test_become_user();
        c = load("naive");
        int before = count_marked();
        ck_assert_msg(verify_run(c, r, &err) == 0, "%s", err.msg);
        dump(r);
        /* the battery leaves nothing running: its bait, and any daemon it caught, are gone */
        ck_assert_int_le(count_marked(), before);
        ck_assert(strncmp(r->grade, "none", 4) == 0);
        for (size_t i = 0; i < r->n_probes; i++) {
                const struct verify_probe *p = &r->probes[i];

                ck_assert_int_eq(p->verdict, VERIFY_NOT_APPLICABLE);
                if (strcmp(p->id, "key") == 0)
                        ck_assert_msg(strstr(p->detail, "measured: read"), "%s", p->detail);
                if (strcmp(p->id, "loopback") == 0)
                        ck_assert_msg(strstr(p->detail, "measured: connected to 127.0.0.1"), "%s",
                                      p->detail);
                if (strcmp(p->id, "hostproc") == 0)
                        ck_assert_msg(strstr(p->detail, "marked host process"), "%s", p->detail);
                if (strcmp(p->id, "route") == 0 && strstr(p->detail, "measured: only loopback"))
                        ck_abort_msg("the host has routes but the probe saw none: %s", p->detail);
                /* the host has a route: nothing may have been sent off it */
                if (strcmp(p->id, "offhost") == 0 || strcmp(p->id, "dns") == 0)
                        ck_assert_msg(strstr(p->detail, "not tried: a route exists"), "%s",
                                      p->detail);
        }
        ck_assert_uint_eq(r->not_applicable, r->n_probes);
        config_free(c);
}
END_TEST

/* issue 24: verify left /tmp/vestibule-verify-* (its fake key and a symlink) behind when /tmp
 * is a filesystem of its own (tmpfs: Debian 13, Fedora, Arch), because its cleanup began at /
 * and would not cross the mount. Run here with a private tmpfs on /tmp. */
START_TEST(naive_on_a_tmp_of_its_own_leaves_nothing)
{
        _cleanup_free_ struct verify_report *r = xcalloc(1, sizeof(*r));
        _cleanup_(closedirp) DIR *d = NULL;
        struct sbx_config *c;
        struct sbx_error err = {0};
        struct dirent *de;
        int left = 0;

        if (geteuid() != 0)
                sbx_test_skip("a private tmpfs on /tmp needs root");
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        ck_assert_int_eq(mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777"), 0);
        sbx_test_become_user();
        c = load("naive");
        ck_assert_msg(verify_run(c, r, &err) == 0, "%s", err.msg);
        d = opendir("/tmp");
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (strncmp(de->d_name, "vestibule-verify-", 17) == 0) {
                        fprintf(stderr, "left behind: /tmp/%s\n", de->d_name);
                        left++;
                }
        ck_assert_int_eq(left, 0);
        config_free(c);
}
END_TEST

static const char *native_missing(void)
{
        struct stat st;

        if (stat(ROOTFS "/python/usr/bin/python3", &st) < 0 ||
            stat(ROOTFS "/node/usr/bin/node", &st) < 0)
                return "no rootfs trees at " ROOTFS;
        if (geteuid() == 0 && !getpwnam("vestibule-test"))
                return "running as root and there is no user vestibule-test "
                       "(scripts/ci-user.sh creates it)";
        return NULL;
}

static bool host_has_route(void)
{
        _cleanup_free_ char *buf = xmalloc(8192);
        FILE *f = fopen("/proc/net/route", "re");
        size_t n = f ? fread(buf, 1, 8191, f) : 0;

        if (f)
                fclose(f);
        buf[n] = '\0';
        return strchr(buf, '\n') && strchr(strchr(buf, '\n') + 1, '\n');
}

/* The pids probe with no report (verify_judge_pids_unreported()): a run the cap stopped is
 * held; one its bound stopped first is "not tested" and names the bound, the forks, pids_peak
 * and the setting (the systemd VM: gVisor's 44 forks under emulation outran a 90 s bound). */
START_TEST(pids_unreported_timed_out_names_the_bound)
{
        struct sbx_config c = {.pids_max = 128};
        _cleanup_free_ struct run_result *res = xcalloc(1, sizeof(*res));
        char d[400];

        res->outcome = RUN_OUTCOME_TIMED_OUT;
        snprintf(res->limits_hit, sizeof(res->limits_hit),
                 "cpu (throttled in 880 of 900 periods of 100 ms)");
        res->usage.pids_peak.measured = true;
        res->usage.pids_peak.value = 101;
        ck_assert_int_eq(
            verify_judge_pids_unreported(&c, 0, res, 31, 90, "no result", d, sizeof(d)),
            VERIFY_UNTESTED);
        ck_assert_msg(strstr(d, "bound of 90 s after 31 forks, before the cap of 128") &&
                          strstr(d, "pids_peak 101") && strstr(d, "VESTIBULE_DEFAULT_TIMEOUT_S"),
                      "%s", d);
        /* the cap reached before the bound: held even though the bound came later */
        snprintf(res->limits_hit, sizeof(res->limits_hit),
                 "cpu (throttled in 880 of 900 periods of 100 ms), pids (the cap of 128 was "
                 "reached)");
        ck_assert_int_eq(
            verify_judge_pids_unreported(&c, 0, res, 44, 90, "no result", d, sizeof(d)),
            VERIFY_HELD);
        ck_assert_msg(strstr(d, "44 forks succeeded, then the sandbox was stopped at the cap"),
                      "%s", d);
        /* the control: the Sentry exited at the cap (exit 2), no report: held */
        res->outcome = RUN_OUTCOME_EXITED;
        res->exit_code = 2;
        ck_assert_int_eq(
            verify_judge_pids_unreported(&c, 0, res, 44, 90, "no result", d, sizeof(d)),
            VERIFY_HELD);
        /* the memory cap first (gVisor: ~5 MiB a fork), the pids cap not reached: not tested,
         * naming both caps */
        struct sbx_config m = {.pids_max = 128, .mem_mb = 256};
        snprintf(res->limits_hit, sizeof(res->limits_hit), "cpu (throttled in 742 of 746 periods)");
        res->exit_code = 137;
        res->oom_killed = true;
        ck_assert_int_eq(
            verify_judge_pids_unreported(&m, 0, res, 44, 90, "no result", d, sizeof(d)),
            VERIFY_UNTESTED);
        ck_assert_msg(strstr(d, "the memory cap (256 MiB) stopped the sandbox after 44 forks, "
                                "before the pids cap of 128 (pids_peak 101)") &&
                          strstr(d, "VESTIBULE_MEM_MB"),
                      "%s", d);
        res->oom_killed = false;
        snprintf(res->limits_hit, sizeof(res->limits_hit), "pids (the cap of 128 was reached)");
        /* more forks than the cap allows is never held */
        ck_assert_int_eq(
            verify_judge_pids_unreported(&c, 0, res, 129, 90, "no result", d, sizeof(d)),
            VERIFY_UNTESTED);
        /* a refused run: its reason, nothing from @res */
        ck_assert_int_eq(verify_judge_pids_unreported(&c, -ENOEXEC, res, -1, 90,
                                                      "the run was refused: runsc could not run "
                                                      "the program",
                                                      d, sizeof(d)),
                         VERIFY_UNTESTED);
        ck_assert_msg(strstr(d, "the run was refused") && strstr(d, "limits hit: none"), "%s", d);
}
END_TEST

static const char *docker_missing(void)
{
        static char why[1100];
        struct sbx_config c = {.runtime = SBX_RUNTIME_DOCKER};
        struct engine_conn conn = {0};
        struct sbx_error err = {0};
        char mark[8];

        if (geteuid() != 0 && !getgrnam("docker"))
                return "not root and no docker group";
        if (geteuid() == 0 && !getpwnam("vestibule-test"))
                return "running as root and there is no user vestibule-test";
        setenv("DOCKER_HOST", "unix:///var/run/docker.sock", 1);
        if (engine_connect(&c, engine_env_getenv, &conn, &err) < 0) {
                snprintf(why, sizeof(why), "Docker: %s", err.msg);
                return why;
        }
        /* the images test_engine imports; imported here too when they are missing */
        if (engine_image_label(&conn, IMG_PY, "vestibule.image", mark, sizeof(mark), &err) < 0 &&
            access(TAR_PY, R_OK) == 0)
                (void)engine_setup_import(&c, TAR_PY, IMG_PY, &err);
        if (engine_image_label(&conn, IMG_NODE, "vestibule.image", mark, sizeof(mark), &err) < 0 &&
            access(TAR_NODE, R_OK) == 0)
                (void)engine_setup_import(&c, TAR_NODE, IMG_NODE, &err);
        if (engine_image_label(&conn, IMG_PY, "vestibule.image", mark, sizeof(mark), &err) < 0 ||
            engine_image_label(&conn, IMG_NODE, "vestibule.image", mark, sizeof(mark), &err) < 0) {
                snprintf(why, sizeof(why), "Docker images: %s", err.msg);
                return why;
        }
        return NULL;
}

int main(void)
{
        /* the egress probes start the proxy as `vestibule-mcp egress-proxy`, not this suite */
        egress_set_proxy_exe(VESTIBULE_BIN);
        const char *must = getenv("SBX_TEST_MUST_RUN");
        bool strict = must && strcmp(must, "1") == 0;
        const char *nm = native_missing(), *dm = docker_missing();
        Suite *s = suite_create("verify");
        TCase *tc;

        if (strict && (nm || dm))
                sbx_test_skip(nm ? nm : dm);
        /* judged without a run: on every host */
        tc = tcase_create("judge");
        tcase_add_test(tc, pids_unreported_timed_out_names_the_bound);
        suite_add_tcase(s, tc);
        if (!nm) {
                tc = tcase_create("native");
                tcase_set_timeout(tc, 180);
                tcase_add_test(tc, native_as_test_user);
                suite_add_tcase(s, tc);
                /* the naive control needs python3 on the host and a route to contrast with */
                if (access("/usr/bin/python3", X_OK) == 0 && host_has_route()) {
                        tc = tcase_create("naive_control");
                        tcase_set_timeout(tc, 120);
                        tcase_add_test(tc, naive_leaks_are_seen);
                        tcase_add_test(tc, naive_on_a_tmp_of_its_own_leaves_nothing);
                        suite_add_tcase(s, tc);
                }
        } else {
                fprintf(stderr, "note: native not verified: %s\n", nm);
        }
        if (!dm) {
                tc = tcase_create("docker");
                tcase_set_timeout(tc, 240);
                tcase_add_test(tc, container_on_docker);
                suite_add_tcase(s, tc);
        } else {
                fprintf(stderr, "note: container not verified: %s\n", dm);
        }
        return sbx_test_run(s);
}
