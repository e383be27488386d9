/* test_sessions.c - the session record (src/service/sessions.h): the VESTIBULE_MAX_SESSIONS
 * bound, forged and ended handles refused (each with its control: the real handle works),
 * one call at a time, and the record's sandbox: a session that idles out, is ended, is ended
 * by its call, or whose backend is reset, or the server's exit, releases its registry entry
 * and the sandbox is destroyed. The sandboxes are real naive ones (SANDBOX_MODE_PROGRAMS) in
 * a real registry; a destroyed sandbox is seen from outside: its private $HOME is gone
 * (control: it was there just before). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "run/backend.h"
#include "run/sandbox.h"
#include "run/warden.h"
#include "service/registry.h"
#include "service/sessions.h"
#include "testutil.h"

static struct sbx_config cfg;
static char *workspace;
static struct backend *backend;
static struct sandbox_registry *reg;

/* What the ended callback saw (it may run on the table's thread). */
static pthread_mutex_t dropped_lock = PTHREAD_MUTEX_INITIALIZER;
static char dropped_id[SESSION_ID_MAX];
static char dropped_reason[160];
static unsigned dropped_n;

static void ended_cb(void *ud, const struct session_info *info, const char *reason)
{
        (void)ud;
        pthread_mutex_lock(&dropped_lock);
        snprintf(dropped_id, sizeof(dropped_id), "%s", info->id);
        snprintf(dropped_reason, sizeof(dropped_reason), "%s", reason);
        dropped_n++;
        pthread_mutex_unlock(&dropped_lock);
}

static unsigned dropped_count(void)
{
        unsigned n;

        pthread_mutex_lock(&dropped_lock);
        n = dropped_n;
        pthread_mutex_unlock(&dropped_lock);
        return n;
}

static void setup(void)
{
        sbx_test_naive_config(&cfg, &workspace);
        sbx_test_naive_open(&cfg, &backend, &reg);
        dropped_n = 0;
}

static void teardown(void)
{
        sbx_test_naive_close(&workspace, &backend, &reg);
}

/* A session as run_service_session_start() makes one: a reserved place, a sandbox prepared,
 * one program run in it (it writes its $HOME to @home_file in the workspace), added (parked).
 * Returns the entry; @ret_home (or NULL) gets the sandbox's $HOME (caller frees). */
static struct sandbox_entry *open_session(struct run_sessions *t, struct session_info *info,
                                          const char *home_file, char **ret_home)
{
        struct sandbox_spec spec = {
            .language = SBX_LANG_BASH, .cfg = &cfg, .mode = SANDBOX_MODE_PROGRAMS};
        _cleanup_free_ char *code =
            xasprintf("echo \"$HOME\" > %s; touch \"$HOME/state\"", home_file);
        struct run_request req = {.language = SBX_LANG_BASH,
                                  .code = code,
                                  .code_len = strlen(code),
                                  .timeout_s = 10,
                                  .cfg = &cfg,
                                  .cancel_fd = -1};
        _cleanup_free_ char *path = xasprintf("%s/%s", workspace, home_file);
        struct sandbox_entry *e = NULL;
        struct sandbox *sb = NULL;
        struct run_result res = {0};
        struct sbx_error err = {0};
        char home[512] = "";
        FILE *f;

        ck_assert_msg(sessions_reserve(t, info->id, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), 0);
        ck_assert_msg(backend->ops->sandbox->prepare(backend, &spec, &sb, &err) == 0, "%s",
                      err.msg);
        sandbox_registry_attach(reg, e, backend, backend->ops->sandbox, sb);
        ck_assert_msg(sandbox_run_program(backend->ops->sandbox, sb, &req, &res, &err) == 0, "%s",
                      err.msg);
        ck_assert_int_eq(res.exit_code, 0);
        run_result_done(&res);
        info->language = SBX_LANG_BASH;
        info->created_ms = sbx_now_ms();
        ck_assert_msg(sessions_add(t, info, e, &err) == 0, "%s", err.msg);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 0);
        f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(home, sizeof(home), f));
        fclose(f);
        home[strcspn(home, "\n")] = '\0';
        ck_assert_msg(home[0] == '/', "no $HOME from the program: '%s'", home);
        if (ret_home)
                *ret_home = xstrdup(home);
        return e;
}

static bool dir_exists(const char *p)
{
        struct stat st;

        return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A call's begin, as session_call() makes it (a bash call, 1 s for a slot). */
static int begin(struct run_sessions *t, const char *id, struct session_info *seen,
                 struct sandbox_entry **got, struct sbx_error *err)
{
        return sessions_begin_call(t, id, SBX_LANG_BASH, -1, 1000, seen, got, err);
}

/* ---- the bound and the handles ----------------------------------------------------------- */

START_TEST(max_sessions_plus_one_refused)
{
        struct run_sessions *t = sessions_new(reg, 2, 60, ended_cb, NULL);
        struct session_info a = {0}, b = {0};
        char c[SESSION_ID_MAX];
        struct sbx_error err = {0};

        (void)open_session(t, &a, "home-a", NULL);
        ck_assert_int_eq(sessions_reserve(t, b.id, &err), 0); /* reserved, not yet added */
        ck_assert_str_ne(a.id, b.id);
        /* the third: refused, naming the setting and the fix */
        ck_assert_int_eq(sessions_reserve(t, c, &err), -EUSERS);
        ck_assert_ptr_nonnull(strstr(err.msg, "VESTIBULE_MAX_SESSIONS=2"));
        ck_assert_ptr_nonnull(strstr(err.msg, "session_end"));
        /* control: a place given back is a place again */
        sessions_unreserve(t);
        ck_assert_int_eq(sessions_reserve(t, c, &err), 0);
        sessions_free(t);

        /* 0: sessions are off */
        t = sessions_new(reg, 0, 60, ended_cb, NULL);
        ck_assert_int_eq(sessions_reserve(t, c, &err), -EUSERS);
        ck_assert_ptr_nonnull(strstr(err.msg, "sessions are off"));
        sessions_free(t);
}
END_TEST

START_TEST(forged_handles_refused)
{
        struct run_sessions *t = sessions_new(reg, 4, 60, ended_cb, NULL);
        struct sandbox_entry *e, *got = NULL;
        struct session_info a = {0}, seen;
        struct sbx_error err = {0};
        char forged[SESSION_ID_MAX];

        e = open_session(t, &a, "home-a", NULL);
        ck_assert_uint_eq(strlen(a.id), 44);
        /* control: the real handle works, and gives the record's entry, resumed */
        ck_assert_msg(begin(t, a.id, &seen, &got, &err) == 0, "%s", err.msg);
        ck_assert_ptr_eq(got, e);
        ck_assert_uint_eq(seen.calls, 1);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 1);
        sessions_end_call(t, a.id, got, NULL);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 1);

        /* not a handle at all */
        ck_assert_int_eq(begin(t, "../../etc/passwd", &seen, &got, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "is not a session handle"));
        /* the right shape, another process's key */
        snprintf(forged, sizeof(forged), "%s", a.id);
        forged[3] = forged[3] == 'a' ? 'b' : 'a';
        ck_assert_int_eq(begin(t, forged, &seen, &got, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "another server process"));
        /* this process's key, a guessed random part */
        snprintf(forged, sizeof(forged), "%s", a.id);
        forged[20] = forged[20] == '0' ? '1' : '0';
        ck_assert_int_eq(begin(t, forged, &seen, &got, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "no session"));
        /* none of them took a slot or the entry */
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 1);
        /* another language: refused, the session stays */
        ck_assert_int_eq(sessions_begin_call(t, a.id, SBX_LANG_PYTHON, -1, 1000, &seen, &got, &err),
                         -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "runs bash, not python"));
        /* ... and is not one of its calls (issue 24): the next real call is its second */
        ck_assert_msg(begin(t, a.id, &seen, &got, &err) == 0, "%s", err.msg);
        ck_assert_uint_eq(seen.calls, 2);
        sessions_end_call(t, a.id, got, NULL);
        /* the real one, ended: told how it ended */
        ck_assert_int_eq(sessions_end(t, a.id, "it was ended by session_end", &seen, &err), 0);
        ck_assert_int_eq(begin(t, a.id, &seen, &got, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "has ended: it was ended by session_end"));
        ck_assert_int_eq(sessions_end(t, a.id, "again", &seen, &err), -ENOENT);
        sessions_free(t);
}
END_TEST

START_TEST(one_call_at_a_time)
{
        struct run_sessions *t = sessions_new(reg, 4, 60, ended_cb, NULL);
        struct sandbox_entry *got = NULL, *again = NULL;
        struct session_info a = {0}, seen;
        struct sbx_error err = {0};

        (void)open_session(t, &a, "home-a", NULL);
        ck_assert_int_eq(begin(t, a.id, &seen, &got, &err), 0);
        ck_assert_int_eq(begin(t, a.id, &seen, &again, &err), -EBUSY);
        ck_assert_ptr_nonnull(strstr(err.msg, "one call at a time"));
        /* session_end while the call runs: refused, the session stays */
        ck_assert_int_eq(sessions_end(t, a.id, "x", &seen, &err), -EBUSY);
        sessions_end_call(t, a.id, got, NULL);
        ck_assert_int_eq(begin(t, a.id, &seen, &got, &err), 0);
        ck_assert_uint_eq(seen.calls, 2);
        sessions_end_call(t, a.id, got, NULL);
        sessions_free(t);
}
END_TEST

static int record_thread(void *arg)
{
        *(pthread_t *)arg = pthread_self();
        return 7;
}

START_TEST(on_thread_runs_on_the_tables_thread)
{
        struct run_sessions *t = sessions_new(reg, 4, 60, ended_cb, NULL);
        pthread_t first = pthread_self(), second = pthread_self();
        struct sbx_error err = {0};
        char id[SESSION_ID_MAX];

        ck_assert_int_eq(sessions_on_thread(t, record_thread, &first), 7);
        ck_assert_int_eq(sessions_on_thread(t, record_thread, &second), 7);
        /* one long-lived thread, not the caller's, the same for every job */
        ck_assert(!pthread_equal(first, pthread_self()));
        ck_assert(pthread_equal(first, second));
        sessions_stop(t);
        ck_assert_int_eq(sessions_on_thread(t, record_thread, &first), -ESHUTDOWN);
        ck_assert_int_eq(sessions_reserve(t, id, &err), -ESHUTDOWN);
        sessions_free(t);
}
END_TEST

/* ---- the record's sandbox ---------------------------------------------------------------- */

START_TEST(ending_a_session_destroys_its_sandbox)
{
        struct run_sessions *t = sessions_new(reg, 4, 60, ended_cb, NULL);
        struct session_info a = {0}, seen;
        struct sandbox_entry *e, *got = NULL;
        _cleanup_free_ char *home = NULL;
        struct sbx_error err = {0};

        e = open_session(t, &a, "home-a", &home);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 1);
        ck_assert_msg(dir_exists(home), "control: the session's $HOME '%s' is there", home);
        /* a call holds it: session_end refused, the sandbox lives */
        ck_assert_int_eq(begin(t, a.id, &seen, &got, &err), 0);
        ck_assert_ptr_eq(got, e);
        ck_assert_int_eq(sessions_end(t, a.id, "x", &seen, &err), -EBUSY);
        sessions_end_call(t, a.id, got, NULL);
        ck_assert(dir_exists(home));
        ck_assert_uint_eq(dropped_count(), 0);
        /* session_end: the record releases its entry, the sandbox is destroyed */
        ck_assert_int_eq(sessions_end(t, a.id, "it was ended by session_end", &seen, &err), 0);
        ck_assert_uint_eq(seen.calls, 1);
        ck_assert_msg(!dir_exists(home), "the ended session's $HOME '%s' is still there", home);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 0);
        ck_assert_uint_eq(dropped_count(), 1);
        ck_assert_str_eq(dropped_reason, "it was ended by session_end");
        sessions_free(t);
}
END_TEST

START_TEST(a_call_that_ends_its_session_destroys_its_sandbox)
{
        struct run_sessions *t = sessions_new(reg, 4, 60, ended_cb, NULL);
        struct session_info a = {0}, seen;
        struct sandbox_entry *got = NULL;
        _cleanup_free_ char *home = NULL;
        struct sbx_error err = {0};

        (void)open_session(t, &a, "home-a", &home);
        ck_assert_int_eq(begin(t, a.id, &seen, &got, &err), 0);
        ck_assert(dir_exists(home));
        sessions_end_call(t, a.id, got, "the session's interpreter exited");
        ck_assert_msg(!dir_exists(home), "the ended session's $HOME is still there");
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 0);
        ck_assert_uint_eq(dropped_count(), 1);
        ck_assert_int_eq(begin(t, a.id, &seen, &got, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "has ended: the session's interpreter exited"));
        sessions_free(t);
}
END_TEST

START_TEST(a_backend_reset_ends_the_session_at_its_next_call)
{
        struct run_sessions *t = sessions_new(reg, 4, 60, ended_cb, NULL);
        struct session_info a = {0}, seen;
        struct sandbox_entry *got = NULL;
        _cleanup_free_ char *home = NULL;
        struct sbx_error err = {0};

        (void)open_session(t, &a, "home-a", &home);
        ck_assert(dir_exists(home));
        ck_assert_uint_eq(sandbox_registry_drop_backend(reg, backend), 1);
        ck_assert_msg(!dir_exists(home), "the reset did not destroy the idle session's sandbox");
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_GONE), 1);
        /* its next call is told, the entry is freed, the end is recorded */
        ck_assert_int_eq(begin(t, a.id, &seen, &got, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "its backend was reset"));
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_GONE), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 0);
        ck_assert_uint_eq(dropped_count(), 1);
        ck_assert_int_eq(begin(t, a.id, &seen, &got, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "has ended"));
        sessions_free(t);
}
END_TEST

START_TEST(server_exit_ends_every_session)
{
        struct run_sessions *t = sessions_new(reg, 4, 60, ended_cb, NULL);
        struct session_info idle = {0}, held = {0}, seen;
        _cleanup_free_ char *idle_home = NULL, *held_home = NULL;
        struct sandbox_entry *got = NULL;
        struct sbx_error err = {0};

        (void)open_session(t, &idle, "home-idle", &idle_home);
        (void)open_session(t, &held, "home-held", &held_home);
        ck_assert_int_eq(begin(t, held.id, &seen, &got, &err), 0);
        sessions_stop(t);
        sessions_end_all(t, "the server exited");
        ck_assert_uint_eq(dropped_count(), 2);
        ck_assert_msg(!dir_exists(idle_home), "the idle session's $HOME is still there");
        /* the held one is its call's: it lives until that call ends, which releases it */
        ck_assert(dir_exists(held_home));
        sessions_end_call(t, held.id, got, NULL);
        ck_assert_msg(!dir_exists(held_home), "the held session's $HOME is still there");
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 0);
        sessions_free(t);
}
END_TEST

START_TEST(idle_session_expires_and_its_sandbox_goes)
{
        struct run_sessions *t = sessions_new(reg, 4, 1, ended_cb, NULL);
        struct session_info idle = {0}, held = {0}, seen;
        _cleanup_free_ char *idle_home = NULL, *held_home = NULL;
        struct sandbox_entry *got = NULL, *held_entry = NULL;
        struct sbx_error err = {0};
        uint64_t t0;

        (void)open_session(t, &idle, "home-idle", &idle_home);
        (void)open_session(t, &held, "home-held", &held_home);
        /* the held one has a call running: its idle clock is stopped */
        ck_assert_int_eq(begin(t, held.id, &seen, &held_entry, &err), 0);
        ck_assert(dir_exists(idle_home));
        t0 = sbx_now_ms();
        while (dropped_count() == 0 && sbx_now_ms() - t0 < 5000)
                usleep(20 * 1000);
        ck_assert_uint_eq(dropped_count(), 1);
        ck_assert_uint_ge(sbx_now_ms() - t0, 500); /* not before its idle time */
        pthread_mutex_lock(&dropped_lock);
        ck_assert_str_eq(dropped_id, idle.id);
        ck_assert_ptr_nonnull(strstr(dropped_reason, "expired after 1 s without a call"));
        pthread_mutex_unlock(&dropped_lock);
        ck_assert_msg(!dir_exists(idle_home), "the expired session's $HOME is still there");
        ck_assert_int_eq(begin(t, idle.id, &seen, &got, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "has ended: it expired"));
        /* control: the busy one, past its idle time too, lives */
        usleep(1200 * 1000);
        ck_assert_uint_eq(dropped_count(), 1);
        ck_assert(dir_exists(held_home));
        /* once its call is over, its clock runs again and it expires in turn */
        sessions_end_call(t, held.id, held_entry, NULL);
        t0 = sbx_now_ms();
        while (dropped_count() == 1 && sbx_now_ms() - t0 < 5000)
                usleep(20 * 1000);
        ck_assert_uint_eq(dropped_count(), 2);
        ck_assert(!dir_exists(held_home));
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_IDLE), 0);
        sessions_free(t);
}
END_TEST

static Suite *sessions_suite(void)
{
        Suite *s = suite_create("sessions");
        TCase *tc = tcase_create("record");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, max_sessions_plus_one_refused);
        tcase_add_test(tc, forged_handles_refused);
        tcase_add_test(tc, one_call_at_a_time);
        tcase_add_test(tc, on_thread_runs_on_the_tables_thread);
        tcase_add_test(tc, ending_a_session_destroys_its_sandbox);
        tcase_add_test(tc, a_call_that_ends_its_session_destroys_its_sandbox);
        tcase_add_test(tc, a_backend_reset_ends_the_session_at_its_next_call);
        tcase_add_test(tc, server_exit_ends_every_session);
        tcase_add_test(tc, idle_session_expires_and_its_sandbox_goes);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        if (access("/bin/bash", X_OK) < 0)
                sbx_test_skip("no /bin/bash: the naive backend runs the host's bash");
        return sbx_test_run(sessions_suite());
}
