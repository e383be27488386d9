/* test_doctor.c - doctor's report on this host: every prerequisite is present with the value the
 * kernel gives (uname, the Landlock ABI), a missing rootfs is a FAIL naming `vestibule-mcp
 * setup`, an invalid setting and a root server without VESTIBULE_RUN_AS block everything
 * whatever the backends say, the pick follows ladder_decide(), and --json carries the same. */
#include <check.h>
#include <linux/landlock.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <errno.h>
#include <sched.h>
#include <seccomp.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "doctor/doctor.h"
#include "service/ladder.h"
#include "testutil.h"

#define ROOTFS "/var/tmp/vestibule-images/rootfs"

static struct sbx_config *load(void)
{
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};

        /* the settings every test shares (testutil.h: the fake environment) */
        fake_env_set("VESTIBULE_WORKSPACE", "/tmp/vestibule-doctor-test-ws");
        fake_env_set("VESTIBULE_AUDIT_DIR", "/tmp/vestibule-doctor-test-audit");
        fake_env_set("VESTIBULE_CONFIG", "/nonexistent/vestibule-test-config.yaml");
        ck_assert_int_eq(config_load_from(fake_getenv, NULL, &c, &err), 0);
        return c;
}

static const struct doctor_check *find(const struct doctor_check *list, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(list[i].name, name) == 0)
                        return &list[i];
        ck_abort_msg("no check '%s'", name);
        return NULL;
}

START_TEST(native_checks_have_values)
{
        _cleanup_free_ struct doctor_report *r = xcalloc(1, sizeof(*r));
        static const char *const names[] = {
            "kernel",
            "user namespaces",
            "landlock",
            "libseccomp",
            "seccomp user notification",
            "cgroup v2",
            "systemd user bus",
            "busctl",
            "rootfs python",
            "rootfs node",
        };
        struct sbx_config *c;
        struct utsname u;
        const struct doctor_check *k;
        long abi;
        char want[32];

        sbx_test_become_user();
        fake_env_set("VESTIBULE_ROOTFS_DIR", ROOTFS);
        c = load();
        doctor_collect(c, r);
        doctor_print(r, stderr);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                k = find(r->native.checks, r->native.n_checks, names[i]);
                ck_assert_msg(k->value[0], "%s has no value", names[i]);
        }
        ck_assert_int_eq(uname(&u), 0);
        k = find(r->native.checks, r->native.n_checks, "kernel");
        ck_assert_ptr_nonnull(strstr(k->value, u.release));
        abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        k = find(r->native.checks, r->native.n_checks, "landlock");
        if (abi > 0) {
                snprintf(want, sizeof(want), "ABI %ld", abi);
                ck_assert_str_eq(k->value, want);
                ck_assert_int_eq(k->status, DOCTOR_OK);
        } else {
                ck_assert_int_eq(k->status, DOCTOR_WARN);
        }
        k = find(r->native.checks, r->native.n_checks, "user namespaces");
        ck_assert_ptr_nonnull(strstr(k->value, "user.max_user_namespaces="));
        ck_assert_ptr_nonnull(strstr(k->value, "kernel.apparmor_restrict_unprivileged_userns="));
        /* the container rung has its endpoint check, whatever the answer */
        find(r->container.checks, r->container.n_checks, "engine endpoint");

        /* the pick is the ladder's own rule on the three probes */
        switch (ladder_decide_all(r->gvisor.tried ? &r->gvisor.probe : NULL, &r->native.probe,
                                  &r->container.probe)) {
        case LADDER_CHOICE_GVISOR:
                ck_assert(r->usable);
                ck_assert_str_eq(r->picked, "gvisor");
                ck_assert_str_eq(r->grade, r->gvisor.probe.grade);
                /* runsc's facts are reported: found, and the rootless probe's run */
                ck_assert_int_eq(find(r->gvisor.checks, r->gvisor.n_checks, "runsc")->status,
                                 DOCTOR_OK);
                ck_assert_ptr_nonnull(strstr(
                    find(r->gvisor.checks, r->gvisor.n_checks, "runsc rootless probe")->value,
                    "ok (uname -r in the sandbox: "));
                break;
        case LADDER_CHOICE_NATIVE:
                ck_assert(r->usable);
                ck_assert_str_eq(r->picked, "native");
                ck_assert_str_eq(r->grade, r->native.probe.grade);
                break;
        case LADDER_CHOICE_CONTAINER:
                ck_assert(r->usable);
                ck_assert_str_eq(r->picked, "container");
                ck_assert_str_eq(r->grade, r->container.probe.grade);
                break;
        case LADDER_CHOICE_NONE:
        default:
                ck_assert(!r->usable);
                ck_assert_ptr_nonnull(strstr(r->blocked, "native:"));
                ck_assert_ptr_nonnull(strstr(r->blocked, "container:"));
                break;
        }

        json_object *j = doctor_json(r), *pick = NULL, *bs = NULL, *nat = NULL, *checks = NULL;
        ck_assert(json_object_object_get_ex(j, "pick", &pick));
        ck_assert(json_object_object_get_ex(j, "backends", &bs));
        ck_assert(json_object_object_get_ex(bs, "native", &nat));
        ck_assert(json_object_object_get_ex(nat, "checks", &checks));
        ck_assert_int_eq((int)json_object_array_length(checks), (int)r->native.n_checks);
        json_object *usable = NULL;
        ck_assert(json_object_object_get_ex(pick, "usable", &usable));
        ck_assert_int_eq(json_object_get_boolean(usable), r->usable);
        json_object_put(j);
        config_free(c);
}
END_TEST

START_TEST(missing_rootfs_names_setup)
{
        _cleanup_free_ struct doctor_report *r = xcalloc(1, sizeof(*r));
        struct sbx_config *c;
        const struct doctor_check *k;

        sbx_test_become_user();
        fake_env_set("VESTIBULE_ROOTFS_DIR", "/tmp/vestibule-doctor-no-rootfs");
        c = load();
        doctor_collect(c, r);
        k = find(r->native.checks, r->native.n_checks, "rootfs python");
        ck_assert_int_eq(k->status, DOCTOR_FAIL);
        ck_assert_ptr_nonnull(strstr(k->value, "vestibule-mcp setup"));
        ck_assert(!r->native.probe.usable);
        ck_assert_ptr_nonnull(strstr(r->native.probe.blocked, "vestibule-mcp setup"));
        if (!r->usable)
                ck_assert_ptr_nonnull(strstr(r->blocked, "vestibule-mcp setup"));
        config_free(c);
}
END_TEST

START_TEST(invalid_setting_blocks)
{
        _cleanup_free_ struct doctor_report *r = xcalloc(1, sizeof(*r));
        struct sbx_config *c;
        const struct doctor_check *k;

        sbx_test_become_user();
        fake_env_set("VESTIBULE_ROOTFS_DIR", ROOTFS);
        fake_env_set("VESTIBULE_MEM_MB", "lots");
        c = load();
        ck_assert(c->invalid);
        doctor_collect(c, r);
        k = find(r->host, r->n_host, "settings");
        ck_assert_int_eq(k->status, DOCTOR_FAIL);
        ck_assert(!r->usable);
        ck_assert_ptr_nonnull(strstr(r->blocked, "VESTIBULE_MEM_MB"));
        fake_env_set("VESTIBULE_MEM_MB", NULL);
        config_free(c);
}
END_TEST

/* What a container's default seccomp profile (Docker's, Podman's) does to a server inside it:
 * unshare refused with EPERM, clone with CLONE_NEWUSER refused with EPERM, clone3 ENOSYS. The
 * real kernel with a real filter on this process (this test's own fork). */
static void load_container_like_filter(void)
{
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);

        ck_assert_ptr_nonnull(ctx);
        ck_assert_int_eq(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 0), 0);
        ck_assert_int_eq(
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)),
            0);
        ck_assert_int_eq(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0), 0);
        ck_assert_int_eq(seccomp_load(ctx), 0); /* sets no_new_privs (SCMP_FLTATR_CTL_NNP) */
        seccomp_release(ctx);
}

/* Issue 12 item 21: a server inside a default `docker run` got a Blocked: naming sysctls while
 * doctor said user namespaces were fine. Both must name the seccomp filter, and agree. */
START_TEST(userns_refused_by_seccomp_is_named)
{
        _cleanup_free_ struct doctor_report *r = xcalloc(1, sizeof(*r));
        struct sbx_config *c;
        const struct doctor_check *k;

        sbx_test_become_user();
        fake_env_set("VESTIBULE_ROOTFS_DIR", ROOTFS);
        c = load();
        /* control: on this host, without the filter, user namespaces work */
        doctor_collect(c, r);
        k = find(r->native.checks, r->native.n_checks, "user namespaces");
        ck_assert_int_eq(k->status, DOCTOR_OK);
        ck_assert_msg(r->native.probe.usable, "%s", r->native.probe.blocked);

        load_container_like_filter();
        memset(r, 0, sizeof(*r));
        doctor_collect(c, r);
        doctor_print(r, stderr);
        k = find(r->native.checks, r->native.n_checks, "user namespaces");
        ck_assert_int_eq(k->status, DOCTOR_FAIL);
        ck_assert_msg(strstr(k->value, "seccomp"), "%s", k->value);
        ck_assert(!r->native.probe.usable);
        ck_assert_msg(strstr(r->native.probe.blocked, "seccomp"), "%s", r->native.probe.blocked);
        ck_assert_msg(strstr(r->native.probe.blocked, "--security-opt"), "%s",
                      r->native.probe.blocked);
        ck_assert_msg(!strstr(r->native.probe.blocked, "unprivileged_userns_clone"), "%s",
                      r->native.probe.blocked);
        config_free(c);
}
END_TEST

START_TEST(root_without_run_as_blocks)
{
        _cleanup_free_ struct doctor_report *r = xcalloc(1, sizeof(*r));
        struct sbx_config *c;

        fake_env_set("VESTIBULE_ROOTFS_DIR", ROOTFS);
        fake_env_set("VESTIBULE_RUN_AS", NULL);
        c = load();
        doctor_collect(c, r);
        ck_assert(!r->usable);
        ck_assert_ptr_nonnull(strstr(r->blocked, "root"));
        ck_assert_ptr_nonnull(strstr(r->blocked, "VESTIBULE_RUN_AS"));
        ck_assert_ptr_nonnull(strstr(r->blocked, "restart"));
        config_free(c);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("doctor");
        TCase *tc;
        struct stat st;

        if (stat(ROOTFS "/python", &st) < 0)
                sbx_test_skip("no rootfs trees at " ROOTFS);
        if (geteuid() == 0 && !getpwnam("vestibule-test"))
                sbx_test_skip("running as root and there is no user vestibule-test");
        tc = tcase_create("report");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, native_checks_have_values);
        tcase_add_test(tc, missing_rootfs_names_setup);
        tcase_add_test(tc, invalid_setting_blocks);
        tcase_add_test(tc, userns_refused_by_seccomp_is_named);
        suite_add_tcase(s, tc);
        if (geteuid() == 0) {
                tc = tcase_create("root");
                tcase_set_timeout(tc, 60);
                tcase_add_test(tc, root_without_run_as_blocks);
                suite_add_tcase(s, tc);
        }
        return sbx_test_run(s);
}
