/* test_warm_keeper.c - the warm spares' keeper (src/service/warm.h) over a real registry:
 * demand builds one spare per (backend, ops, language) and no more, a call takes it and runs
 * its program in it, a spare that idles out (VESTIBULE_WARM_IDLE_S) or whose backend is reset
 * (warm_drop()) is destroyed, VESTIBULE_WARM=0 keeps none, a spare finished after a reset is
 * never kept (the spare's staleness), and a call waits for a spare being built. The first
 * four use real naive sandboxes. The last two need a prepare() that blocks until the test lets
 * it go: there the sandbox ops are a double (mock_ops below) that only counts prepares and
 * destroys; they test the keeper's bookkeeping, no isolation. (The native backend's own
 * refusal of a stale spare, -ESTALE from start(), is test_warm.c's.) */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "run/backend.h"
#include "run/sandbox.h"
#include "run/warden.h"
#include "service/registry.h"
#include "service/warm.h"
#include "testutil.h"

static struct sbx_config cfg;
static char *workspace;
static struct backend *backend;
static struct sandbox_registry *reg;

static void setup(void)
{
        sbx_test_naive_config(&cfg, &workspace);
        cfg.warm = true;
        cfg.warm_idle_s = 60;
        sbx_test_naive_open(&cfg, &backend, &reg);
}

static void teardown(void)
{
        sbx_test_naive_close(&workspace, &backend, &reg);
}

/* Wait up to @ms for the registry to hold @n spares. */
static bool spares_within(unsigned n, unsigned ms)
{
        for (unsigned i = 0; i < ms / 10; i++) {
                if (sandbox_registry_count(reg, SANDBOX_STATE_SPARE) == n)
                        return true;
                usleep(10 * 1000);
        }
        return sandbox_registry_count(reg, SANDBOX_STATE_SPARE) == n;
}

/* ---- real naive spares ------------------------------------------------------------------- */

START_TEST(want_builds_one_spare_and_a_call_takes_it)
{
        struct warm_keeper *w = warm_keeper_new(&cfg, reg);
        struct sandbox_entry *e = NULL;
        struct sbx_error err = {0};
        struct run_result res = {0};
        struct run_request req = {.language = SBX_LANG_BASH,
                                  .code = "echo from-the-spare",
                                  .code_len = 19,
                                  .timeout_s = 10,
                                  .cfg = &cfg,
                                  .cancel_fd = -1};
        struct sandbox *sb;

        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), 0);
        /* control: no demand, no spare */
        ck_assert_ptr_null(warm_take(w, e, backend, SBX_LANG_BASH, 0));
        warm_want(w, backend, SBX_LANG_BASH);
        ck_assert_msg(spares_within(1, 10000), "no spare within 10 s");
        /* bound: asked again, still one */
        warm_want(w, backend, SBX_LANG_BASH);
        warm_want(w, backend, SBX_LANG_BASH);
        usleep(300 * 1000);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 1);
        /* another language's call takes none */
        ck_assert_ptr_null(warm_take(w, e, backend, SBX_LANG_PYTHON, 0));
        sb = warm_take(w, e, backend, SBX_LANG_BASH, 0);
        ck_assert_ptr_nonnull(sb);
        ck_assert_ptr_eq(sandbox_entry_sandbox(e), sb);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 0);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_RUNNING), 1);
        ck_assert_msg(sandbox_run_program(backend->ops->sandbox, sb, &req, &res, &err) == 0, "%s",
                      err.msg);
        ck_assert_str_eq(res.out.data, "from-the-spare\n");
        run_result_done(&res);
        sandbox_registry_release(reg, e);
        /* taken exactly once: the next want builds a new one */
        warm_want(w, backend, SBX_LANG_BASH);
        ck_assert(spares_within(1, 10000));
        warm_keeper_free(w);
}
END_TEST

START_TEST(spare_idles_out)
{
        struct warm_keeper *w;
        uint64_t t0;

        cfg.warm_idle_s = 1;
        w = warm_keeper_new(&cfg, reg);
        warm_want(w, backend, SBX_LANG_BASH);
        ck_assert_msg(spares_within(1, 10000), "control: no spare within 10 s");
        t0 = sbx_now_ms();
        ck_assert_msg(spares_within(0, 5000), "the spare did not idle out within 5 s");
        ck_assert_uint_ge(sbx_now_ms() - t0, 300); /* not at once */
        warm_keeper_free(w);
}
END_TEST

START_TEST(drop_destroys_the_spares_of_its_backend)
{
        struct warm_keeper *w = warm_keeper_new(&cfg, reg);
        struct sandbox_entry *e = NULL;
        struct sbx_error err = {0};

        /* two languages when the host has python3 (the naive backend runs the host's) */
        unsigned n = access("/usr/bin/python3", X_OK) == 0 ? 2 : 1;

        warm_want(w, backend, SBX_LANG_BASH);
        if (n == 2)
                warm_want(w, backend, SBX_LANG_PYTHON);
        ck_assert_msg(spares_within(n, 20000), "control: no %u spares within 20 s", n);
        /* control: another backend's reset leaves them */
        struct backend other = *backend;
        warm_drop(w, &other);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), n);
        warm_drop(w, backend);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 0);
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), 0);
        ck_assert_ptr_null(warm_take(w, e, backend, SBX_LANG_BASH, 0));
        sandbox_registry_release(reg, e);
        /* the demand is forgotten too: nothing is rebuilt by itself */
        usleep(500 * 1000);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 0);
        warm_keeper_free(w);
}
END_TEST

START_TEST(off_keeps_none)
{
        struct warm_keeper *w;
        struct sandbox_entry *e = NULL;
        struct sbx_error err = {0};

        cfg.warm = false;
        w = warm_keeper_new(&cfg, reg);
        warm_want(w, backend, SBX_LANG_BASH);
        usleep(500 * 1000);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 0);
        /* even a spare registered by hand is not handed out */
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), 0);
        struct sandbox_spec spec = {.language = SBX_LANG_BASH, .cfg = &cfg, .spare = true};
        struct sandbox *sb = NULL;
        ck_assert_int_eq(backend->ops->sandbox->prepare(backend, &spec, &sb, &err), 0);
        ck_assert_int_eq(
            sandbox_registry_add_spare(reg, backend, backend->ops->sandbox, sb, SBX_LANG_BASH), 0);
        ck_assert_ptr_null(warm_take(w, e, backend, SBX_LANG_BASH, 0));
        sandbox_registry_release(reg, e);
        warm_keeper_free(w);
}
END_TEST

/* ---- a prepare the test holds (sandbox ops double: bookkeeping only) --------------------- */

struct mock_sb {
        int id;
};

static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mock_cond = PTHREAD_COND_INITIALIZER;
static bool mock_entered, mock_go;
static unsigned mock_prepared, mock_destroyed;

static int mock_prepare(struct backend *b, const struct sandbox_spec *spec, struct sandbox **ret,
                        struct sbx_error *err)
{
        struct mock_sb *m = xcalloc(1, sizeof(*m));

        (void)b;
        (void)spec;
        (void)err;
        pthread_mutex_lock(&mock_lock);
        mock_entered = true;
        pthread_cond_broadcast(&mock_cond);
        while (!mock_go)
                pthread_cond_wait(&mock_cond, &mock_lock);
        m->id = (int)++mock_prepared;
        pthread_mutex_unlock(&mock_lock);
        *ret = (struct sandbox *)m;
        return 0;
}

static void mock_kill(struct sandbox *sb)
{
        (void)sb;
}

static void mock_destroy(struct sandbox *sb)
{
        pthread_mutex_lock(&mock_lock);
        mock_destroyed++;
        pthread_mutex_unlock(&mock_lock);
        free(sb);
}

static const struct sandbox_ops mock_sandbox_ops = {
    .prepare = mock_prepare, .kill = mock_kill, .destroy = mock_destroy};
static const struct backend_ops mock_ops = {.name = "mock", .sandbox = &mock_sandbox_ops};

static void mock_reset(void)
{
        mock_entered = mock_go = false;
        mock_prepared = mock_destroyed = 0;
}

static void mock_wait_entered(void)
{
        pthread_mutex_lock(&mock_lock);
        while (!mock_entered)
                pthread_cond_wait(&mock_cond, &mock_lock);
        pthread_mutex_unlock(&mock_lock);
}

static void mock_release(void)
{
        pthread_mutex_lock(&mock_lock);
        mock_go = true;
        pthread_cond_broadcast(&mock_cond);
        pthread_mutex_unlock(&mock_lock);
}

static unsigned mock_destroyed_now(void)
{
        unsigned n;

        pthread_mutex_lock(&mock_lock);
        n = mock_destroyed;
        pthread_mutex_unlock(&mock_lock);
        return n;
}

START_TEST(spare_finished_after_a_reset_is_not_kept)
{
        struct backend mock = {.ops = &mock_ops, .cfg = &cfg};
        struct warm_keeper *w = warm_keeper_new(&cfg, reg);

        /* control: a spare let go without a reset is kept */
        mock_reset();
        warm_want(w, &mock, SBX_LANG_BASH);
        mock_wait_entered();
        mock_release();
        ck_assert_msg(spares_within(1, 5000), "control: the spare was not kept");
        ck_assert_uint_eq(mock_destroyed_now(), 0);
        warm_drop(w, &mock);
        ck_assert_uint_eq(mock_destroyed_now(), 1);

        /* a reset while it is built: what it was built under may be gone, so it is destroyed */
        mock_reset();
        warm_want(w, &mock, SBX_LANG_BASH);
        mock_wait_entered();
        warm_drop(w, &mock);
        mock_release();
        for (int i = 0; i < 500 && mock_destroyed_now() == 0; i++)
                usleep(10 * 1000);
        ck_assert_uint_eq(mock_destroyed_now(), 1);
        ck_assert_uint_eq(sandbox_registry_count(reg, SANDBOX_STATE_SPARE), 0);
        warm_keeper_free(w);
}
END_TEST

static void *release_later(void *arg)
{
        (void)arg;
        mock_wait_entered();
        usleep(300 * 1000);
        mock_release();
        return NULL;
}

START_TEST(take_waits_for_a_spare_being_built)
{
        struct backend mock = {.ops = &mock_ops, .cfg = &cfg};
        struct warm_keeper *w = warm_keeper_new(&cfg, reg);
        struct sandbox_entry *e = NULL;
        struct sbx_error err = {0};
        struct sandbox *sb;
        pthread_t th;
        uint64_t t0;

        mock_reset();
        ck_assert_int_eq(sandbox_registry_acquire(reg, -1, 100, &e, &err), 0);
        warm_want(w, &mock, SBX_LANG_BASH);
        mock_wait_entered();
        /* control: no wait, no spare (it is still being built) */
        ck_assert_ptr_null(warm_take(w, e, &mock, SBX_LANG_BASH, 0));
        pthread_create(&th, NULL, release_later, NULL);
        t0 = sbx_now_ms();
        sb = warm_take(w, e, &mock, SBX_LANG_BASH, 5000);
        ck_assert_ptr_nonnull(sb);
        ck_assert_uint_ge(sbx_now_ms() - t0, 250);
        ck_assert_uint_lt(sbx_now_ms() - t0, 4000);
        ck_assert_ptr_eq(sandbox_entry_sandbox(e), sb);
        pthread_join(th, NULL);
        sandbox_registry_release(reg, e);
        ck_assert_uint_eq(mock_destroyed_now(), 1);
        warm_keeper_free(w);
}
END_TEST

static Suite *warm_keeper_suite(void)
{
        Suite *s = suite_create("warm_keeper");
        TCase *tc = tcase_create("naive");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, want_builds_one_spare_and_a_call_takes_it);
        tcase_add_test(tc, spare_idles_out);
        tcase_add_test(tc, drop_destroys_the_spares_of_its_backend);
        tcase_add_test(tc, off_keeps_none);
        suite_add_tcase(s, tc);
        tc = tcase_create("bookkeeping");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, spare_finished_after_a_reset_is_not_kept);
        tcase_add_test(tc, take_waits_for_a_spare_being_built);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        if (access("/bin/bash", X_OK) < 0)
                sbx_test_skip("no /bin/bash: the naive backend runs the host's bash");
        return sbx_test_run(warm_keeper_suite());
}
