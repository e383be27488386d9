/* test_warm.c - native warm spares (issue 17) against the real kernel, through the sandbox
 * ops the service's keeper uses (src/run/sandbox.h, src/service/warm.h): a spare runs one
 * program and refuses a second hand-over; a spare built before a settings change, a setup (the
 * rootfs tree swapped) or a change of the probe's answer never runs code; each with its
 * control, a spare that nothing changed, which runs. Started as root, the suite makes the
 * test's own rootfs trees (hard links of the shared ones) and drops to vestibule-test. */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "native/native.h"
#include "run/backend.h"
#include "run/sandbox.h"
#include "run/warden.h"
#include "testutil.h"
#include "native/backend.h"
#include "workspace/workspace.h"

static char *tmpdir, *workspace, *rootfs; /* rootfs: the test's own trees (root) or shared */
static bool own_rootfs;
static struct sbx_config cfg;
static struct backend *be;

static const char *shared_rootfs(void)
{
        const char *d = getenv("SBX_TEST_ROOTFS_DIR");
        return d && *d ? d : "/var/tmp/vestibule-images/rootfs";
}

static const char *test_user(void)
{
        const char *u = getenv("SBX_TEST_USER");
        return u && *u ? u : "vestibule-test";
}

static void drop_to_test_user(void)
{
        struct passwd *pw;

        if (geteuid() != 0)
                return;
        pw = getpwnam(test_user());
        if (!pw)
                sbx_test_skip("running as root and there is no user vestibule-test");
        if (setgroups(0, NULL) < 0 || setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
            setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0) {
                perror("cannot become vestibule-test");
                exit(1);
        }
        setenv("HOME", pw->pw_dir, 1);
}

static void run_cmd(const char *cmd)
{
        ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
}

/* As root: the test's rootfs folder, with python and node as hard-linked copies of the shared
 * trees (no data copied; tmpdir is on their filesystem: sbx_test_scratch_near) and a second python
 * tree for the swap; its folders (only: a file is the shared tree's inode) owned by the test user,
 * who renames and removes them. @same_fs false: plain copies (cp -a), where no folder on the
 * shared trees' filesystem could be made. */
static void make_own_rootfs(bool same_fs)
{
        struct passwd *pw = getpwnam(test_user());
        const char *cp = same_fs ? "cp -al" : "cp -a";
        _cleanup_free_ char *cmd = NULL;

        rootfs = xasprintf("%s/rootfs", tmpdir);
        cmd = xasprintf("mkdir '%s' && %s '%s/python' '%s/python' && %s '%s/python' "
                        "'%s/python.next' && %s '%s/node' '%s/node' && find '%s' -type d "
                        "-exec chown %u:%u {} +",
                        rootfs, cp, shared_rootfs(), rootfs, cp, shared_rootfs(), rootfs, cp,
                        shared_rootfs(), rootfs, rootfs, pw ? (unsigned)pw->pw_uid : 0,
                        pw ? (unsigned)pw->pw_gid : 0);
        run_cmd(cmd);
        own_rootfs = true;
}

static void setup_as(bool own)
{
        struct sbx_error err = {0};
        struct passwd *pw = getpwnam(test_user());
        bool same_fs = true;

        own = own && geteuid() == 0;
        tmpdir = own ? sbx_test_scratch_near(shared_rootfs(), &same_fs) : sbx_test_tmpdir();
        chmod(tmpdir, 0755);
        if (geteuid() == 0 && pw && chown(tmpdir, pw->pw_uid, pw->pw_gid) < 0)
                perror(tmpdir);
        if (own)
                make_own_rootfs(same_fs);
        else
                rootfs = xstrdup(shared_rootfs());
        drop_to_test_user();
        workspace = xasprintf("%s/workspace", tmpdir);
        sbx_test_config(&cfg, workspace);
        cfg.rootfs_dir = rootfs;
        cfg.tmpfs_mb = 16;
        cfg.warm = true;
        cfg.warm_idle_s = 300;
        ck_assert_int_eq(workspace_ensure(workspace, &err), 0);
        ck_assert_int_eq(native_backend_new(&cfg, &be, &err), 0);
}

static void setup(void)
{
        setup_as(false);
}

static void setup_own_rootfs(void)
{
        setup_as(true);
}

static void teardown(void)
{
        if (be)
                be = backend_free(be);
        if (tmpdir) {
                _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", tmpdir);
                if (system(cmd) != 0)
                        fprintf(stderr, "cannot remove %s\n", tmpdir);
        }
        free(tmpdir);
        free(workspace);
        free(rootfs);
}

/* A spare of @lang, prepared ahead of any request as the keeper does. */
static struct sandbox *spare_of(enum sbx_language lang)
{
        struct sandbox_spec spec = {.language = lang, .cfg = &cfg, .spare = true};
        struct sandbox *sb = NULL;
        struct sbx_error err = {0};
        int r = be->ops->sandbox->prepare(be, &spec, &sb, &err);

        ck_assert_msg(r == 0, "prepare: %s", err.msg);
        return sb;
}

/* start, supervise and collect @code on @sb; the return of the lifecycle's one program. */
static int run_on(struct sandbox *sb, enum sbx_language lang, const char *code,
                  struct run_result *res, struct sbx_error *err)
{
        struct run_request req = {
            .language = lang,
            .code = code,
            .code_len = strlen(code),
            .timeout_s = 10,
            .cfg = &cfg,
            .cancel_fd = -1,
        };

        memset(res, 0, sizeof(*res));
        memset(err, 0, sizeof(*err));
        return sandbox_run_program(be->ops->sandbox, sb, &req, res, err);
}

static bool in_workspace(const char *name)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", workspace, name);
        return access(p, F_OK) == 0;
}

/* ---- tests ----------------------------------------------------------------------------- */

START_TEST(spare_runs_one_program_only)
{
        struct sandbox *sb = spare_of(SBX_LANG_PYTHON);
        struct run_result res;
        struct sbx_error err;
        struct sandbox_io io;
        struct run_request again = {.language = SBX_LANG_PYTHON,
                                    .code = "open('/workspace/second','w')",
                                    .code_len = 29,
                                    .timeout_s = 10,
                                    .cfg = &cfg,
                                    .cancel_fd = -1};
        int r;

        /* control: the first hand-over runs */
        r = run_on(sb, SBX_LANG_PYTHON, "print(6*7)\n", &res, &err);
        ck_assert_msg(r == 0, "first run: %s", err.msg);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_str_eq(res.out.data, "42\n");
        run_result_done(&res);
        /* the second is refused, and nothing of it runs */
        memset(&err, 0, sizeof(err));
        r = be->ops->sandbox->start(sb, &again, &io, &err);
        ck_assert_int_eq(r, -EALREADY);
        ck_assert_msg(strstr(err.msg, "one program"), "%s", err.msg);
        be->ops->sandbox->destroy(sb);
        ck_assert(!in_workspace("second"));
}
END_TEST

START_TEST(spare_refused_after_a_settings_change)
{
        struct sandbox *fresh = spare_of(SBX_LANG_BASH), *old = spare_of(SBX_LANG_BASH);
        struct run_result res;
        struct sbx_error err;
        int r;

        /* control: a spare nothing changed under runs, and sees the /tmp size it was built with */
        r = run_on(fresh, SBX_LANG_BASH, "touch /workspace/fresh; df -m /tmp | tail -1\n", &res,
                   &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert_msg(strstr(res.out.data, " 16 "), "%s", res.out.data);
        ck_assert(in_workspace("fresh"));
        run_result_done(&res);
        be->ops->sandbox->destroy(fresh);

        cfg.tmpfs_mb = 32; /* the setting changed after @old was built with 16 */
        r = run_on(old, SBX_LANG_BASH, "touch /workspace/stale\n", &res, &err);
        ck_assert_int_eq(r, -ESTALE);
        ck_assert_msg(strstr(err.msg, "settings changed"), "%s", err.msg);
        run_result_done(&res);
        be->ops->sandbox->destroy(old);
        ck_assert(!in_workspace("stale"));
}
END_TEST

/* A session's spare (SANDBOX_MODE_CELLS, the runner started and ready): claimed, it runs
 * cells with state; one built before a settings change is refused at claim, before any cell. */
static struct sandbox *session_spare_of(enum sbx_language lang)
{
        struct sandbox_spec spec = {
            .language = lang, .cfg = &cfg, .mode = SANDBOX_MODE_CELLS, .spare = true};
        struct sandbox *sb = NULL;
        struct sbx_error err = {0};
        int r = be->ops->cells->prepare(be, &spec, &sb, &err);

        ck_assert_msg(r == 0, "prepare: %s", err.msg);
        return sb;
}

static int cell_on(struct sandbox *sb, const char *code, struct run_result *res,
                   struct sbx_error *err)
{
        struct run_request req = {.language = SBX_LANG_BASH,
                                  .code = code,
                                  .code_len = strlen(code),
                                  .timeout_s = 10,
                                  .cfg = &cfg,
                                  .cancel_fd = -1};

        memset(res, 0, sizeof(*res));
        memset(err, 0, sizeof(*err));
        return sandbox_run_program(be->ops->cells, sb, &req, res, err);
}

START_TEST(session_spare_refused_after_a_settings_change)
{
        struct sandbox *fresh = session_spare_of(SBX_LANG_BASH);
        struct sandbox *old = session_spare_of(SBX_LANG_BASH);
        struct run_result res;
        struct sbx_error err = {0};
        int r;

        ck_assert_ptr_nonnull(be->ops->cells->claim);
        /* control: a spare nothing changed under is claimed and keeps state across cells */
        ck_assert_msg(be->ops->cells->claim(fresh, &err) == 0, "claim: %s", err.msg);
        r = cell_on(fresh, "X=41; touch /workspace/fresh\n", &res, &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        run_result_done(&res);
        r = cell_on(fresh, "echo $((X + 1)); df -m /tmp | tail -1\n", &res, &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert_msg(strncmp(res.out.data, "42\n", 3) == 0 && strstr(res.out.data, " 16 "), "%s",
                      res.out.data);
        ck_assert(in_workspace("fresh"));
        run_result_done(&res);
        be->ops->cells->destroy(fresh);

        cfg.tmpfs_mb = 32; /* the setting changed after @old was built with 16 */
        memset(&err, 0, sizeof(err));
        r = be->ops->cells->claim(old, &err);
        ck_assert_int_eq(r, -ESTALE);
        ck_assert_msg(strstr(err.msg, "settings changed"), "%s", err.msg);
        be->ops->cells->destroy(old);
}
END_TEST

START_TEST(spare_refused_after_a_setup)
{
        struct sandbox *old;
        struct run_result res;
        struct sbx_error err;
        int r;

        if (!own_rootfs) {
                fprintf(stderr, "skipped: a rootfs of the test's own needs a root-started suite\n");
                return;
        }
        old = spare_of(SBX_LANG_PYTHON);
        /* setup's swap: the tree under the name is another one (rootfs/hold.h) */
        _cleanup_free_ char *cur = xasprintf("%s/python", rootfs);
        _cleanup_free_ char *gone = xasprintf("%s/.python.old-test", rootfs);
        _cleanup_free_ char *next = xasprintf("%s/python.next", rootfs);
        ck_assert_int_eq(rename(cur, gone), 0);
        ck_assert_int_eq(rename(next, cur), 0);

        r = run_on(old, SBX_LANG_PYTHON, "open('/workspace/stale','w')\n", &res, &err);
        ck_assert_int_eq(r, -ESTALE);
        ck_assert_msg(strstr(err.msg, "was replaced"), "%s", err.msg);
        run_result_done(&res);
        be->ops->sandbox->destroy(old);
        ck_assert(!in_workspace("stale"));

        /* control: a spare built after the setup runs on the new tree */
        struct sandbox *fresh = spare_of(SBX_LANG_PYTHON);
        r = run_on(fresh, SBX_LANG_PYTHON, "open('/workspace/fresh','w')\n", &res, &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert(in_workspace("fresh"));
        run_result_done(&res);
        be->ops->sandbox->destroy(fresh);
}
END_TEST

START_TEST(spare_grade_is_the_probe_now)
{
        struct sandbox *fresh = spare_of(SBX_LANG_PYTHON), *old = spare_of(SBX_LANG_PYTHON);
        struct backend_probe probe = {0};
        struct cgroup_limits_info none = {.path = CGROUP_LIMITS_NONE};
        struct run_result res;
        struct sbx_error err = {0};
        int r;

        /* control: the grade of a spare's run is the probe's answer */
        ck_assert_int_eq(be->ops->probe(be, &probe, &err), 0);
        r = run_on(fresh, SBX_LANG_PYTHON, "print(1)\n", &res, &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert_str_eq(res.isolation, probe.grade);
        run_result_done(&res);
        be->ops->sandbox->destroy(fresh);

        /* the probe's answer changes (another limits path, a new why): @old is refused */
        snprintf(none.why_none, sizeof(none.why_none), "changed by the test");
        native_backend_force_limits(be, &none);
        r = run_on(old, SBX_LANG_PYTHON, "open('/workspace/stale','w')\n", &res, &err);
        ck_assert_int_eq(r, -ESTALE);
        ck_assert_msg(strstr(err.msg, "probe's answer changed"), "%s", err.msg);
        run_result_done(&res);
        be->ops->sandbox->destroy(old);
        ck_assert(!in_workspace("stale"));
}
END_TEST

START_TEST(spare_sees_the_cold_runs_view)
{
        /* the program's own view from a cold sandbox (prepared with its code at hand) and from
         * a spare that waited: argv, __file__, cwd, environment, fds, pids, /tmp, /sandbox */
        static const char code[] =
            "import os, sys\n"
            "print(sys.argv, __file__, sys.path[0], os.getcwd(), sorted(os.environ.items()),\n"
            "      sorted(os.listdir('/proc/self/fd')), sorted(p for p in os.listdir('/proc') if "
            "p.isdigit()),\n"
            "      os.listdir('/tmp'), os.listdir('/sandbox'), os.stat(__file__).st_mode,\n"
            "      open(__file__).read() == open('/sandbox/main.py').read())\n";
        struct sandbox_spec spec = {.language = SBX_LANG_PYTHON, .cfg = &cfg};
        struct sandbox *cold = NULL, *spare = spare_of(SBX_LANG_PYTHON);
        struct run_result a, b;
        struct sbx_error err = {0};

        sleep(1); /* the spare's interpreter is up and blocked on its FIFO */
        ck_assert_int_eq(be->ops->sandbox->prepare(be, &spec, &cold, &err), 0);
        ck_assert_msg(run_on(cold, SBX_LANG_PYTHON, code, &a, &err) == 0, "%s", err.msg);
        ck_assert_msg(run_on(spare, SBX_LANG_PYTHON, code, &b, &err) == 0, "%s", err.msg);
        ck_assert_msg(a.exit_code == 0 && a.out.data, "%s", a.err.data ? a.err.data : "");
        ck_assert_str_eq(a.out.data, b.out.data);
        ck_assert_msg(strstr(a.out.data, "['/sandbox/main.py'] /sandbox/main.py /sandbox "
                                         "/workspace"),
                      "%s", a.out.data);
        ck_assert_msg(strstr(a.out.data, "33188 True"), "a regular 0644 file: %s", a.out.data);
        run_result_done(&a);
        run_result_done(&b);
        be->ops->sandbox->destroy(cold);
        be->ops->sandbox->destroy(spare);
}
END_TEST

/* A destroyed spare's seccomp supervisor lives on in the reaper until its init is reaped; the
 * sync socket it watches must live as long. Closed at destroy, its number went to the next
 * sandbox's sync socket, whose READY the old supervisor then read: that prepare waited 15 s
 * and failed "the sandbox's setup did not finish" (1 in 5 e2e pip runs at load). */
START_TEST(destroyed_spare_never_takes_the_next_sandboxs_setup)
{
        for (int i = 0; i < 12; i++) {
                struct sandbox *old = spare_of(SBX_LANG_PYTHON);
                struct sandbox_spec spec = {.language = SBX_LANG_PYTHON, .cfg = &cfg};
                struct sandbox *sb = NULL;
                struct run_result res;
                struct sbx_error err = {0};
                uint64_t t0;
                int r;

                be->ops->sandbox->destroy(old);
                t0 = sbx_now_ms();
                r = be->ops->sandbox->prepare(be, &spec, &sb, &err);
                ck_assert_msg(r == 0, "round %d: prepare after a destroyed spare (%llu ms): %s", i,
                              (unsigned long long)(sbx_now_ms() - t0), err.msg);
                r = run_on(sb, SBX_LANG_PYTHON, "print(6*7)\n", &res, &err);
                ck_assert_msg(r == 0, "round %d: %s", i, err.msg);
                ck_assert_str_eq(res.out.data, "42\n");
                run_result_done(&res);
                be->ops->sandbox->destroy(sb);
        }
}
END_TEST

static Suite *warm_suite(void)
{
        Suite *s = suite_create("warm");
        TCase *tc = tcase_create("spares");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, spare_runs_one_program_only);
        tcase_add_test(tc, spare_refused_after_a_settings_change);
        tcase_add_test(tc, spare_grade_is_the_probe_now);
        tcase_add_test(tc, spare_sees_the_cold_runs_view);
        tcase_add_test(tc, destroyed_spare_never_takes_the_next_sandboxs_setup);
        tcase_add_test(tc, session_spare_refused_after_a_settings_change);
        suite_add_tcase(s, tc);

        tc = tcase_create("setup");
        tcase_add_checked_fixture(tc, setup_own_rootfs, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, spare_refused_after_a_setup);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(warm_suite());
}
