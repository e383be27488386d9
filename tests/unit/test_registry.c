/* test_registry.c - the service's registry of live sandboxes (src/service/registry.h) over
 * real naive sandboxes: shutdown kills running programs and every process they started
 * (checked with kill(pid, 0) from outside), the running slots are the concurrency limit, spares
 * are taken by backend and language, a session parks and resumes. Each kill check has its
 * control: the same process alive just before. The native side (rootfs hold and cgroup after
 * a failed start) is in test_native.c, which has the delegated cgroup. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "run/backend.h"
#include "run/sandbox.h"
#include "run/warden.h"
#include "service/registry.h"
#include "testutil.h"

static struct sbx_config cfg;
static char *workspace;
static struct backend *backend;
static struct sandbox_registry *reg;

static void setup(void)
{
        sbx_test_naive_config(&cfg, &workspace);
        sbx_test_naive_open(&cfg, &backend, &reg);
}

static void teardown(void)
{
        sbx_test_naive_close(&workspace, &backend, &reg);
}

static struct sandbox *prepare(enum sbx_language lang, enum sandbox_mode mode)
{
        struct sandbox_spec spec = {.language = lang, .cfg = &cfg, .mode = mode};
        struct sandbox *sb = NULL;
        struct sbx_error err = {0};

        ck_assert_msg(backend->ops->sandbox->prepare(backend, &spec, &sb, &err) == 0, "%s",
                      err.msg);
        return sb;
}

/* A call as the service makes it: a slot, a sandbox, one program, released at the end. */
struct bg_call {
        const char *code;
        unsigned timeout_s;
        int r;
        uint64_t ms;
        struct run_result res;
        struct sbx_error err;
};

static void *bg_call_main(void *arg)
{
        struct bg_call *c = arg;
        struct run_request req = {.language = SBX_LANG_BASH,
                                  .code = c->code,
                                  .code_len = strlen(c->code),
                                  .timeout_s = c->timeout_s,
                                  .cfg = &cfg,
                                  .cancel_fd = -1};
        struct sandbox_entry *e = NULL;
        uint64_t t0 = sbx_now_ms();

        c->r = sandbox_registry_acquire(reg, -1, 1000, &e, &c->err);
        if (c->r < 0)
                return NULL;
        sandbox_registry_attach(reg, e, backend, backend->ops->sandbox,
                                prepare(SBX_LANG_BASH, SANDBOX_MODE_ONE_SHOT));
        c->r = sandbox_run_program(backend->ops->sandbox, sandbox_entry_sandbox(e), &req, &c->res,
                                   &c->err);
        sandbox_registry_release(reg, e);
        c->ms = sbx_now_ms() - t0;
        return NULL;
}

/* The pid the program wrote to @name in the workspace (waits up to 20 s for it). */
static pid_t wait_pid_file(const char *name)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", workspace, name);
        long pid = 0;

        for (int i = 0; i < 2000 && pid <= 0; i++) {
                FILE *f = fopen(path, "re");
                if (f) {
                        if (fscanf(f, "%ld", &pid) != 1)
                                pid = 0;
                        fclose(f);
                }
                if (pid <= 0)
                        usleep(10 * 1000);
        }
        ck_assert_msg(pid > 0, "the program never wrote %s", name);
        return (pid_t)pid;
}

static bool alive(pid_t pid)
{
        return kill(pid, 0) == 0 || errno != ESRCH;
}

/* Wait up to @ms for @pid to be gone. */
static bool gone_within(pid_t pid, unsigned ms)
{
        for (unsigned i = 0; i < ms / 10 && alive(pid); i++)
                usleep(10 * 1000);
        return !alive(pid);
}

START_TEST(shutdown_kills_running_programs)
{
        /* a background process in its own session, which leaves the program's process group,
         * and the program itself waiting on it */
        struct bg_call c = {.code = "setsid sleep 60 & echo $! > bg.pid; echo $$ > main.pid; wait",
                            .timeout_s = 50};
        pthread_t th;
        pid_t bg, main_pid;

        pthread_create(&th, NULL, bg_call_main, &c);
        bg = wait_pid_file("bg.pid");
        main_pid = wait_pid_file("main.pid");
        /* control: both live while the registry holds the sandbox */
        usleep(200 * 1000);
        ck_assert(alive(bg));
        ck_assert(alive(main_pid));
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 1);

        sandbox_registry_shutdown(reg);
        pthread_join(th, NULL);
        ck_assert_msg(c.r == 0, "%s", c.err.msg);
        ck_assert_uint_lt(c.ms, 20000);
        ck_assert(gone_within(bg, 2000));
        ck_assert(gone_within(main_pid, 2000));
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 0);
        run_result_done(&c.res);
}
END_TEST

START_TEST(without_shutdown_the_program_lives_on)
{
        /* the control of the test above as a whole: the same program, no shutdown, is still
         * running after the time that test allows for the kill */
        struct bg_call c = {.code =
                                "setsid sleep 60 & echo $! > bg.pid; echo $$ > main.pid; sleep 5",
                            .timeout_s = 50};
        pthread_t th;
        pid_t bg;

        pthread_create(&th, NULL, bg_call_main, &c);
        bg = wait_pid_file("bg.pid");
        ck_assert(!gone_within(bg, 2000));
        pthread_join(th, NULL); /* the program's end kills what it left (the subreaper) */
        ck_assert_int_eq(c.r, 0);
        ck_assert_int_eq(c.res.outcome, RUN_OUTCOME_EXITED);
        ck_assert(gone_within(bg, 2000));
        run_result_done(&c.res);
}
END_TEST

START_TEST(shutdown_refuses_new_calls_and_spares)
{
        struct sandbox_entry *e = NULL;
        struct sbx_error err = {0};

        /* control: before shutdown a call gets a slot */
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), 0);
        sandbox_registry_release(reg, e);

        sandbox_registry_shutdown(reg);
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), -ESHUTDOWN);
        ck_assert_ptr_nonnull(strstr(err.msg, "shutting down"));
        ck_assert_int_eq(sandbox_registry_add_spare(reg, backend, backend->ops->sandbox,
                                                    prepare(SBX_LANG_BASH, SANDBOX_MODE_ONE_SHOT),
                                                    SBX_LANG_BASH),
                         -ESHUTDOWN);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 0);
}
END_TEST

START_TEST(running_slots_are_the_limit)
{
        struct sandbox_entry *a = NULL, *b = NULL, *c = NULL;
        struct sbx_error err = {0};
        uint64_t t0;

        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &a, &err), 0);
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &b, &err), 0);
        /* spares do not count: a third one waits, then is busy */
        ck_assert_int_eq(sandbox_registry_add_spare(reg, backend, backend->ops->sandbox,
                                                    prepare(SBX_LANG_BASH, SANDBOX_MODE_ONE_SHOT),
                                                    SBX_LANG_BASH),
                         0);
        t0 = sbx_now_ms();
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 300, &c, &err), -EBUSY);
        ck_assert_uint_ge(sbx_now_ms() - t0, 290);
        ck_assert_ptr_nonnull(strstr(err.msg, "all 2 run slots are busy"));
        /* a cancel ends the wait */
        int efd = eventfd(1, EFD_CLOEXEC);
        ck_assert_int_eq(sandbox_registry_acquire(reg, efd, 5000, &c, &err), -ECANCELED);
        close(efd);
        /* a release frees one at once */
        sandbox_registry_release(reg, a);
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &c, &err), 0);
        sandbox_registry_release(reg, b);
        sandbox_registry_release(reg, c);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 1);
}
END_TEST

START_TEST(spare_taken_by_backend_and_language)
{
        struct sandbox_entry *e = NULL;
        struct sbx_error err = {0};
        struct sandbox *spare = prepare(SBX_LANG_PYTHON, SANDBOX_MODE_ONE_SHOT);
        struct run_result res = {0};
        struct run_request req = {.language = SBX_LANG_PYTHON,
                                  .code = "print(6 * 7)",
                                  .code_len = 12,
                                  .timeout_s = 10,
                                  .cfg = &cfg,
                                  .cancel_fd = -1};

        ck_assert_int_eq(
            sandbox_registry_add_spare(reg, backend, backend->ops->sandbox, spare, SBX_LANG_PYTHON),
            0);
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), 0);
        /* control: no spare for another language, nor for another backend */
        ck_assert_ptr_null(
            sandbox_registry_take_spare(reg, e, backend, backend->ops->sandbox, SBX_LANG_BASH));
        struct backend other = *backend; /* another backend: the same ops, not the same one */
        ck_assert_ptr_null(
            sandbox_registry_take_spare(reg, e, &other, other.ops->sandbox, SBX_LANG_PYTHON));
        ck_assert_ptr_eq(
            sandbox_registry_take_spare(reg, e, backend, backend->ops->sandbox, SBX_LANG_PYTHON),
            spare);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 1);
        /* the spare, prepared before any request, runs the program handed in later */
        if (access("/usr/bin/python3", X_OK) == 0) {
                ck_assert_msg(sandbox_run_program(backend->ops->sandbox, spare, &req, &res, &err) ==
                                  0,
                              "%s", err.msg);
                ck_assert_str_eq(res.out.data, "42\n");
                run_result_done(&res);
        }
        sandbox_registry_release(reg, e);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 0);
}
END_TEST

START_TEST(session_parks_and_resumes)
{
        struct sandbox_entry *e = NULL, *again = NULL, *other = NULL;
        struct sbx_error err = {0};
        struct run_result res = {0};
        struct run_request req = {
            .language = SBX_LANG_BASH, .timeout_s = 10, .cfg = &cfg, .cancel_fd = -1};
        const struct sandbox_ops *ops = backend->ops->sandbox;

        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), 0);
        sandbox_registry_attach(reg, e, backend, backend->ops->sandbox,
                                prepare(SBX_LANG_BASH, SANDBOX_MODE_PROGRAMS));
        req.code = "echo one > \"$HOME/state\"";
        req.code_len = strlen(req.code);
        ck_assert_msg(sandbox_run_program(ops, sandbox_entry_sandbox(e), &req, &res, &err) == 0,
                      "%s", err.msg);
        run_result_done(&res);
        memset(&res, 0, sizeof(res));
        ck_assert_int_eq(sandbox_registry_park(reg, e, &err), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 1);
        /* its slot is free: with max 2, two more calls get one */
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &other, &err), 0);
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &again, &err), 0);
        /* control: with both slots taken, a resume waits and is busy */
        ck_assert_int_eq(sandbox_registry_resume(reg, e, -1, 100, &err), -EBUSY);
        sandbox_registry_release(reg, again);
        ck_assert_int_eq(sandbox_registry_resume(reg, e, -1, 100, &err), 0);
        /* a second resume while it runs: not idle */
        sandbox_registry_release(reg, other);
        ck_assert_int_eq(sandbox_registry_resume(reg, e, -1, 100, &err), -ENOENT);
        /* the next program in the same sandbox sees what the first left in $HOME */
        req.code = "cat \"$HOME/state\"";
        req.code_len = strlen(req.code);
        ck_assert_msg(sandbox_run_program(ops, sandbox_entry_sandbox(e), &req, &res, &err) == 0,
                      "%s", err.msg);
        ck_assert_str_eq(res.out.data, "one\n");
        run_result_done(&res);
        sandbox_registry_release(reg, e);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 0);
}
END_TEST

START_TEST(shutdown_destroys_idle_sessions)
{
        struct sandbox_entry *e = NULL;
        struct sbx_error err = {0};

        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), 0);
        sandbox_registry_attach(reg, e, backend, backend->ops->sandbox,
                                prepare(SBX_LANG_BASH, SANDBOX_MODE_PROGRAMS));
        ck_assert_int_eq(sandbox_registry_park(reg, e, &err), 0);
        ck_assert_int_eq(sandbox_registry_add_spare(reg, backend, backend->ops->sandbox,
                                                    prepare(SBX_LANG_BASH, SANDBOX_MODE_ONE_SHOT),
                                                    SBX_LANG_BASH),
                         0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 1);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 1);
        sandbox_registry_shutdown(reg);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 0);
        /* the session's entry stays, GONE, for its record to release; a resume is refused */
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_GONE), 1);
        ck_assert_ptr_null(sandbox_entry_sandbox(e));
        ck_assert_int_eq(sandbox_registry_resume(reg, e, -1, 100, &err), -ESHUTDOWN);
        sandbox_registry_release(reg, e);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_GONE), 0);
}
END_TEST

START_TEST(backend_reset_leaves_a_gone_session_entry)
{
        struct sandbox_entry *e = NULL;
        struct sbx_error err = {0};

        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), 0);
        sandbox_registry_attach(reg, e, backend, backend->ops->sandbox,
                                prepare(SBX_LANG_BASH, SANDBOX_MODE_PROGRAMS));
        ck_assert_int_eq(sandbox_registry_park(reg, e, &err), 0);
        ck_assert_int_eq(sandbox_registry_add_spare(reg, backend, backend->ops->sandbox,
                                                    prepare(SBX_LANG_BASH, SANDBOX_MODE_ONE_SHOT),
                                                    SBX_LANG_BASH),
                         0);
        /* control: another backend's reset leaves both alone */
        struct backend other = *backend;
        ck_assert_uint_eq(sandbox_registry_drop_backend(reg, &other), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 1);
        ck_assert_ptr_nonnull(sandbox_entry_sandbox(e));
        /* the reset destroys both sandboxes; the session's entry stays, GONE */
        ck_assert_uint_eq(sandbox_registry_drop_backend(reg, backend), 2);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_GONE), 1);
        ck_assert_ptr_null(sandbox_entry_sandbox(e));
        ck_assert_int_eq(sandbox_registry_resume(reg, e, -1, 100, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "destroyed by the server"));
        /* the failed resume gave its slot back: both are free */
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 0);
        sandbox_registry_release(reg, e);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_GONE), 0);
}
END_TEST

START_TEST(idle_spares_dropped_by_age)
{
        uint64_t next = 0;

        ck_assert_int_eq(sandbox_registry_add_spare(reg, backend, backend->ops->sandbox,
                                                    prepare(SBX_LANG_BASH, SANDBOX_MODE_ONE_SHOT),
                                                    SBX_LANG_BASH),
                         0);
        ck_assert(sandbox_registry_has_spare(reg, backend, backend->ops->sandbox, SBX_LANG_BASH));
        ck_assert(
            !sandbox_registry_has_spare(reg, backend, backend->ops->sandbox, SBX_LANG_PYTHON));
        /* control: younger than the idle time, it stays, and its due time is named */
        ck_assert_uint_eq(sandbox_registry_drop_idle_spares(reg, 60000, &next), 0);
        ck_assert_uint_gt(next, sbx_now_ms() + 50000);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 1);
        usleep(300 * 1000);
        ck_assert_uint_eq(sandbox_registry_drop_idle_spares(reg, 200, &next), 1);
        ck_assert_uint_eq(next, UINT64_MAX);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 0);
}
END_TEST

START_TEST(cells_mode_refused_by_naive)
{
        struct sandbox_spec spec = {
            .language = SBX_LANG_BASH, .cfg = &cfg, .mode = SANDBOX_MODE_CELLS};
        struct sandbox *sb = NULL;
        struct sbx_error err = {0};

        ck_assert_int_eq(backend->ops->sandbox->prepare(backend, &spec, &sb, &err), -EOPNOTSUPP);
        ck_assert_ptr_null(sb);
}
END_TEST

static Suite *registry_suite(void)
{
        Suite *s = suite_create("registry");
        TCase *tc = tcase_create("shutdown");

        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, shutdown_kills_running_programs);
        tcase_add_test(tc, without_shutdown_the_program_lives_on);
        tcase_add_test(tc, shutdown_refuses_new_calls_and_spares);
        tcase_add_test(tc, shutdown_destroys_idle_sessions);
        suite_add_tcase(s, tc);

        tc = tcase_create("states");
        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, running_slots_are_the_limit);
        tcase_add_test(tc, spare_taken_by_backend_and_language);
        tcase_add_test(tc, session_parks_and_resumes);
        tcase_add_test(tc, cells_mode_refused_by_naive);
        tcase_add_test(tc, backend_reset_leaves_a_gone_session_entry);
        tcase_add_test(tc, idle_spares_dropped_by_age);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        if (access("/bin/bash", X_OK) < 0)
                sbx_test_skip("no /bin/bash: the naive backend runs the host's bash");
        return sbx_test_run(registry_suite());
}
