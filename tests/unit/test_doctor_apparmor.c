/* test_doctor_apparmor.c - the AppArmor profile that grants this binary user namespaces on
 * Ubuntu (src/common/apparmor.c), doctor's "apparmor profile" check, and `setup --apparmor`:
 *
 * - the kernel's profile list and a process label are read right (a name that is a prefix of
 *   another is not it; a stack is);
 * - on a made-up host (a folder with proc/, sys/ and etc/ as Ubuntu 24.04 lays them out) the
 *   facts come out as written, and doctor says FAIL with the one command, OK under the profile,
 *   "not needed here" without the sysctl or without AppArmor;
 * - the profile's text is the template with this binary's name and path, and a path an
 *   attachment would read as a pattern is refused;
 * - `setup --apparmor` as root writes the profile (in a private mount namespace over
 *   /etc/apparmor.d) only where AppArmor 4's abi/4.0 is, and, AppArmor not running on this
 *   kernel, says there is nothing to load;
 *   not root, it refuses with the sudo command.
 * The real kernel's AppArmor is not here (this kernel has none): tests/package/apparmor.sh
 * parses the profile with AppArmor 4's apparmor_parser. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/apparmor.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "doctor/doctor.h"
#include "setup/setup.h"
#include "testutil.h"

/* the listing of /sys/kernel/security/apparmor/profiles, as Ubuntu 24.04 shows it */
static const char profiles[] = "vestibule-mcp-npm-old (complain)\n"
                               "unprivileged_userns (enforce)\n"
                               "/usr/bin/man (enforce)\n"
                               "vestibule-mcp (unconfined)\n"
                               "chrome (unconfined)";

START_TEST(profiles_list)
{
        ck_assert_int_eq(sbx_apparmor_profiles_find(profiles, "vestibule-mcp"), 1);
        ck_assert_int_eq(sbx_apparmor_profiles_find(profiles, "chrome"), 1); /* last, no \n */
        ck_assert_int_eq(sbx_apparmor_profiles_find(profiles, "/usr/bin/man"), 1);
        /* a prefix of another name is not that profile */
        ck_assert_int_eq(sbx_apparmor_profiles_find(profiles, "vestibule-mcp-npm"), 0);
        ck_assert_int_eq(sbx_apparmor_profiles_find(profiles, "unprivileged"), 0);
        ck_assert_int_eq(sbx_apparmor_profiles_find("", "vestibule-mcp"), 0);
}
END_TEST

START_TEST(label)
{
        ck_assert(sbx_apparmor_label_is("vestibule-mcp (unconfined)", "vestibule-mcp"));
        ck_assert(sbx_apparmor_label_is("vestibule-mcp (unconfined)\n", "vestibule-mcp"));
        ck_assert(sbx_apparmor_label_is("lxc-container//&vestibule-mcp (mixed)", "vestibule-mcp"));
        ck_assert(!sbx_apparmor_label_is("unconfined", "vestibule-mcp"));
        ck_assert(!sbx_apparmor_label_is("vestibule-mcp-npm (unconfined)", "vestibule-mcp"));
        ck_assert(!sbx_apparmor_label_is("vestibule-mcp//child (enforce)", "vestibule-mcp"));
        ck_assert(!sbx_apparmor_label_is("", "vestibule-mcp"));
}
END_TEST

/* @root/@rel holding @text, its folders made as needed. */
static void put(const char *root, const char *rel, const char *text)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", root, rel);

        for (char *p = strchr(path + strlen(root) + 1, '/'); p; p = strchr(p + 1, '/')) {
                *p = '\0';
                ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
                *p = '/';
        }
        if (text)
                sbx_test_write_file(root, rel, text);
}

/* A made-up Ubuntu host under a new temp folder: the sysctl, securityfs's list, this
 * process's label, and the profile file, each when not NULL. A label means AppArmor runs:
 * its securityfs folder is there. */
static char *fake_host(const char *sysctl, const char *list, const char *current, bool file)
{
        char *root = sbx_test_tmpdir();

        if (sysctl)
                put(root, "proc/sys/kernel/apparmor_restrict_unprivileged_userns", sysctl);
        if (current) {
                put(root, "sys/kernel/security/apparmor/", NULL);
                put(root, "proc/self/attr/apparmor/current", current);
        }
        if (list)
                put(root, "sys/kernel/security/apparmor/profiles", list);
        if (file)
                put(root, "etc/apparmor.d/vestibule-mcp-npm", "# made up\n");
        return root;
}

START_TEST(ubuntu_without_profile)
{
        _cleanup_free_ struct sbx_apparmor *a = xmalloc(sizeof(*a));
        _cleanup_free_ char *root = fake_host("1\n", profiles, "unconfined\n", false);
        _cleanup_free_ char *want = NULL;
        char exe[PATH_MAX];
        struct doctor_check c;

        ck_assert(realpath("/proc/self/exe", exe));
        sbx_apparmor_read(root, a);
        ck_assert_int_eq(a->restrict_userns, 1);
        ck_assert(a->running);
        ck_assert_str_eq(a->label, "unconfined");
        ck_assert_str_eq(a->exe, exe);
        /* this test binary is not /usr/bin/vestibule-mcp: the npm profile's name */
        ck_assert_str_eq(a->name, "vestibule-mcp-npm");
        ck_assert_str_eq(a->file, "/etc/apparmor.d/vestibule-mcp-npm");
        ck_assert(!a->file_exists);
        ck_assert_int_eq(a->loaded, 0);
        ck_assert(!a->attached);

        doctor_apparmor_check(a, &c);
        ck_assert_str_eq(c.name, "apparmor profile");
        ck_assert_int_eq(c.status, DOCTOR_FAIL);
        want = xasprintf("sudo '%s' setup --apparmor", exe);
        ck_assert_msg(strstr(c.value, want), "%s", c.value);
        ck_assert_msg(strstr(c.value, "not installed at /etc/apparmor.d/vestibule-mcp-npm"), "%s",
                      c.value);
        ck_assert_msg(strstr(c.value, "restart the server"), "%s", c.value);
}
END_TEST

START_TEST(ubuntu_profile_loaded_elsewhere)
{
        _cleanup_free_ struct sbx_apparmor *a = xmalloc(sizeof(*a));
        _cleanup_free_ char *root = NULL;
        struct doctor_check c;

        /* installed and loaded, but this process started unconfined */
        root = fake_host("1\n", "vestibule-mcp-npm (unconfined)\n", "unconfined\n", true);
        sbx_apparmor_read(root, a);
        ck_assert(a->file_exists);
        ck_assert_int_eq(a->loaded, 1);
        ck_assert(!a->attached);
        doctor_apparmor_check(a, &c);
        ck_assert_int_eq(c.status, DOCTOR_FAIL);
        ck_assert_msg(strstr(c.value, "loaded, but not applied to this process"), "%s", c.value);
        free(root);

        /* the profile list unreadable (not root): loaded is unknown, the label still says */
        root = fake_host("1\n", NULL, "unconfined\n", true);
        sbx_apparmor_read(root, a);
        ck_assert_int_eq(a->loaded, -ENOENT);
        ck_assert(!a->attached);
}
END_TEST

START_TEST(ubuntu_under_profile)
{
        _cleanup_free_ struct sbx_apparmor *a = xmalloc(sizeof(*a));
        _cleanup_free_ char *root =
            fake_host("1\n", NULL, "vestibule-mcp-npm (unconfined)\n", true);
        struct doctor_check c;

        sbx_apparmor_read(root, a);
        ck_assert(a->attached);
        ck_assert_int_eq(a->loaded, 1); /* this process runs under it, so it is loaded */
        doctor_apparmor_check(a, &c);
        ck_assert_int_eq(c.status, DOCTOR_OK);
        ck_assert_msg(strstr(c.value, "vestibule-mcp-npm (unconfined)"), "%s", c.value);
}
END_TEST

START_TEST(not_needed)
{
        _cleanup_free_ struct sbx_apparmor *a = xmalloc(sizeof(*a));
        _cleanup_free_ char *root = fake_host("0\n", profiles, "unconfined\n", false);
        struct doctor_check c;

        /* AppArmor runs (Debian), the restriction is off */
        sbx_apparmor_read(root, a);
        ck_assert_int_eq(a->restrict_userns, 0);
        doctor_apparmor_check(a, &c);
        ck_assert_int_eq(c.status, DOCTOR_INFO);
        ck_assert_msg(strstr(c.value, "not needed here: AppArmor runs"), "%s", c.value);
        free(root);

        /* no AppArmor, no sysctl (this kernel, Fedora) */
        root = fake_host(NULL, NULL, NULL, false);
        sbx_apparmor_read(root, a);
        ck_assert_int_eq(a->restrict_userns, -1);
        ck_assert(!a->running);
        ck_assert_str_eq(a->label, "");
        doctor_apparmor_check(a, &c);
        ck_assert_int_eq(c.status, DOCTOR_INFO);
        ck_assert_msg(strstr(c.value, "not needed here: AppArmor is not running"), "%s", c.value);
}
END_TEST

START_TEST(fix_command)
{
        struct sbx_apparmor a = {0};
        char buf[PATH_MAX + 64];

        snprintf(a.exe, sizeof(a.exe), "%s", SBX_APPARMOR_DEB_EXE);
        snprintf(a.file, sizeof(a.file), "/etc/apparmor.d/vestibule-mcp");
        a.file_exists = true;
        sbx_apparmor_fix(&a, buf, sizeof(buf));
        ck_assert_str_eq(buf, "sudo apparmor_parser -r /etc/apparmor.d/vestibule-mcp");
        /* the .deb's file gone: setup writes it */
        a.file_exists = false;
        sbx_apparmor_fix(&a, buf, sizeof(buf));
        ck_assert_str_eq(buf, "sudo '/usr/bin/vestibule-mcp' setup --apparmor");
        snprintf(a.exe, sizeof(a.exe), "/home/u/.npm/lib/node_modules/x/bin/vestibule-mcp");
        sbx_apparmor_fix(&a, buf, sizeof(buf));
        ck_assert_str_eq(buf, "sudo '/home/u/.npm/lib/node_modules/x/bin/vestibule-mcp' setup "
                              "--apparmor");
}
END_TEST

START_TEST(profile_text)
{
        _cleanup_free_ char *t = NULL;
        struct sbx_error err = {0};

        ck_assert_int_eq(sbx_apparmor_profile_text("vestibule-mcp", SBX_APPARMOR_DEB_EXE, &t, &err),
                         0);
        ck_assert_msg(strstr(t, "\nprofile vestibule-mcp \"/usr/bin/vestibule-mcp\" "
                                "flags=(unconfined) {\n  userns,\n"),
                      "%s", t);
        ck_assert_ptr_nonnull(strstr(t, "\nabi <abi/4.0>,\n"));
        ck_assert_ptr_nonnull(strstr(t, "include if exists <local/vestibule-mcp>\n}\n"));
        ck_assert_ptr_null(strchr(t, '@')); /* every placeholder filled */
        free(TAKE_PTR(t));

        ck_assert_int_eq(
            sbx_apparmor_profile_text("vestibule-mcp-npm", "/opt/a b/vestibule-mcp", &t, &err), 0);
        ck_assert_ptr_nonnull(strstr(t, "profile vestibule-mcp-npm \"/opt/a b/vestibule-mcp\" "));
        ck_assert_ptr_nonnull(strstr(t, "<local/vestibule-mcp-npm>"));
        free(TAKE_PTR(t));

        /* a glob character would attach the profile to other paths */
        ck_assert_int_eq(sbx_apparmor_profile_text("x", "/opt/*/vestibule-mcp", &t, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "'*'"));
        ck_assert_int_eq(sbx_apparmor_profile_text("x", "/opt/\"q/vestibule-mcp", &t, &err),
                         -EINVAL);
        ck_assert_int_eq(sbx_apparmor_profile_text("x", "bin/vestibule-mcp", &t, &err), -EINVAL);
        ck_assert_ptr_null(t);
}
END_TEST

START_TEST(setup_writes_profile)
{
        _cleanup_free_ char *text = NULL, *want = NULL, *out_text = NULL;
        struct sbx_error err = {0};
        char exe[PATH_MAX];
        size_t out_len = 0;
        struct stat st;
        FILE *out, *f;
        long n;

        if (geteuid() != 0)
                sbx_test_skip("needs root: a private mount namespace over /etc/apparmor.d");
        ck_assert_msg(access(SBX_APPARMOR_FS, F_OK) < 0,
                      "AppArmor runs here: this test would load a profile into the kernel");
        ck_assert(realpath("/proc/self/exe", exe));
        /* this test's own /etc/apparmor.d, gone with the test's process */
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        mkdir("/etc/apparmor.d", 0755);
        ck_assert_int_eq(mount("tmpfs", "/etc/apparmor.d", "tmpfs", 0, "mode=0755"), 0);
        /* control: nothing there before */
        ck_assert_int_lt(stat("/etc/apparmor.d/vestibule-mcp-npm", &st), 0);
        /* without AppArmor 4's userspace nothing is written: AppArmor 3 cannot read it */
        ck_assert_int_eq(setup_apparmor(stderr, &err), -ENOENT);
        ck_assert_msg(strstr(err.msg, "/etc/apparmor.d/abi/4.0"), "%s", err.msg);
        ck_assert_int_lt(stat("/etc/apparmor.d/vestibule-mcp-npm", &st), 0);
        put("/etc/apparmor.d", "abi/4.0", "# made up\n");

        out = open_memstream(&out_text, &out_len);
        ck_assert_int_eq(setup_apparmor(out, &err), 0);
        fclose(out);
        ck_assert_msg(strstr(out_text, "wrote /etc/apparmor.d/vestibule-mcp-npm"), "%s", out_text);
        ck_assert_msg(strstr(out_text, "AppArmor is not running"), "%s", out_text);
        ck_assert_int_eq(stat("/etc/apparmor.d/vestibule-mcp-npm", &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0644);
        f = fopen("/etc/apparmor.d/vestibule-mcp-npm", "re");
        ck_assert_ptr_nonnull(f);
        text = xmalloc(8192);
        n = (long)fread(text, 1, 8191, f);
        text[n] = '\0';
        fclose(f);
        want = xasprintf("profile vestibule-mcp-npm \"%s\" flags=(unconfined) {", exe);
        ck_assert_msg(strstr(text, want), "%s", text);
}
END_TEST

START_TEST(setup_needs_root)
{
        struct sbx_error err = {0};
        char exe[PATH_MAX];
        _cleanup_free_ char *want = NULL;

        if (geteuid() == 0)
                sbx_test_become_user();
        ck_assert(realpath("/proc/self/exe", exe));
        ck_assert_int_eq(setup_apparmor(stderr, &err), -EPERM);
        want = xasprintf("sudo '%s' setup --apparmor", exe);
        ck_assert_msg(strstr(err.msg, want), "%s", err.msg);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("doctor_apparmor");
        TCase *tc = tcase_create("apparmor");

        tcase_add_test(tc, profiles_list);
        tcase_add_test(tc, label);
        tcase_add_test(tc, ubuntu_without_profile);
        tcase_add_test(tc, ubuntu_profile_loaded_elsewhere);
        tcase_add_test(tc, ubuntu_under_profile);
        tcase_add_test(tc, not_needed);
        tcase_add_test(tc, fix_command);
        tcase_add_test(tc, profile_text);
        tcase_add_test(tc, setup_writes_profile);
        tcase_add_test(tc, setup_needs_root);
        suite_add_tcase(s, tc);
        return sbx_test_run(s);
}
