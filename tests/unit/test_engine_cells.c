/* test_engine_cells.c - sessions on the container backend (src/engine/cells.c) on a real Docker
 * Engine: a cell's output is all in its result when its end is seen, however much it printed
 * (with a control cell that ends itself before printing, whose result is short: the check can
 * fail); SIGINT reaches a job the session's shell waits for; a destroyed session leaves no
 * container (with the control that it ran, labelled as ours). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

#include "common/xalloc.h"
#include "engine/engine.h"
#include "run/backend.h"
#include "run/sandbox.h"
#include "testutil.h"

#define DOCKER_SOCK "unix:///var/run/docker.sock"
#define TEST_UID 2000
#define TAR_PY "/var/tmp/vestibule-images/python.tar"
#define BIG 300000 /* bytes a cell prints on each stream: several pipe buffers */

static struct sbx_config cfg;
static char *ws_dir;
static struct backend *be;

static void cfg_init(void)
{
        if (!ws_dir) {
                ws_dir = sbx_test_tmpdir();
                chmod(ws_dir, 0777);
        }
        sbx_test_config(&cfg, ws_dir);
        cfg.backend = SBX_BACKEND_CONTAINER;
        cfg.runtime = SBX_RUNTIME_DOCKER;
        cfg.image_python = (char *)"vestibule/python:bookworm";
        cfg.image_node = (char *)"vestibule/node:bookworm";
        cfg.max_output_bytes = 1000000;
        if (geteuid() == 0) {
                cfg.run_as_set = true;
                cfg.run_as_uid = TEST_UID;
                cfg.run_as_gid = TEST_UID;
        }
        fake_env_reset();
        fake_env_set("DOCKER_HOST", DOCKER_SOCK);
}

static void setup(void)
{
        struct sbx_error err = {0};

        cfg_init();
        ck_assert_int_eq(engine_backend_new_with_env(&cfg, fake_getenv, &be, &err), 0);
        ck_assert_ptr_nonnull(be->ops->cells);
}

static void teardown(void)
{
        be = backend_free(be);
}

static struct sandbox *session(enum sbx_language l)
{
        struct sandbox_spec spec = {.language = l, .cfg = &cfg, .mode = SANDBOX_MODE_CELLS};
        struct sandbox *sb = NULL;
        struct sbx_error err = {0};
        int r = be->ops->cells->prepare(be, &spec, &sb, &err);

        ck_assert_msg(r == 0, "session: %s", err.msg);
        return sb;
}

static int cell(struct sandbox *sb, enum sbx_language l, const char *code, unsigned timeout_s,
                struct run_result *res)
{
        struct run_request req = {.language = l,
                                  .code = code,
                                  .code_len = strlen(code),
                                  .timeout_s = timeout_s,
                                  .cfg = &cfg,
                                  .cancel_fd = -1};
        struct sbx_error err = {0};
        int r;

        memset(res, 0, sizeof(*res));
        r = sandbox_run_program(be->ops->cells, sb, &req, res, &err);
        ck_assert_msg(r == 0, "cell: %s", err.msg);
        return r;
}

static bool ends_with(const struct run_stream *b, const char *tail)
{
        size_t n = strlen(tail);
        return b->data && b->len >= n && memcmp(b->data + b->len - n, tail, n) == 0;
}

START_TEST(docker_cell_output_all_there_at_its_end)
{
        struct sandbox *sb = session(SBX_LANG_PYTHON);
        struct run_result res;
        char code[512], tail[32];
        int i;

        for (i = 1; i <= 12; i++) {
                snprintf(code, sizeof(code),
                         "import sys\n_ = sys.stdout.write('o' * %d + 'END%d\\n')\n"
                         "_ = sys.stderr.write('e' * %d + 'ERR%d\\n')",
                         BIG, i, BIG, i);
                cell(sb, SBX_LANG_PYTHON, code, 20, &res);
                ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
                ck_assert_int_eq(res.exit_code, 0);
                snprintf(tail, sizeof(tail), "END%d\n", i);
                ck_assert_msg(res.out.len == BIG + strlen(tail) && ends_with(&res.out, tail),
                              "cell %d: stdout %zu bytes", i, res.out.len);
                snprintf(tail, sizeof(tail), "ERR%d\n", i);
                ck_assert_msg(res.err.len == BIG + strlen(tail) && ends_with(&res.err, tail),
                              "cell %d: stderr %zu bytes", i, res.err.len);
                run_result_done(&res);
        }
        /* control: a cell that writes its own end record first, then prints: its end is seen
         * before its output, and the same check finds it short */
        snprintf(code, sizeof(code),
                 "import os, sys, time\nos.write(5, b'%d ok 0\\n')\ntime.sleep(0.3)\n"
                 "_ = sys.stdout.write('o' * %d + 'END\\n')",
                 i, BIG);
        cell(sb, SBX_LANG_PYTHON, code, 20, &res);
        ck_assert_msg(res.out.len < BIG, "control: an early end cuts the output (%zu bytes)",
                      res.out.len);
        run_result_done(&res);
        be->ops->cells->destroy(sb);
}
END_TEST

START_TEST(docker_cell_interrupt_reaches_the_shells_job)
{
        struct sandbox *sb = session(SBX_LANG_BASH);
        struct run_result res;

        cell(sb, SBX_LANG_BASH, "Y=5", 10, &res);
        run_result_done(&res);
        /* sleep is a child the shell waits for: SIGINT to the runner alone would not stop it */
        cell(sb, SBX_LANG_BASH, "sleep 30; echo not-interrupted", 1, &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_TIMED_OUT);
        ck_assert_msg(!res.out.data || !strstr(res.out.data, "not-interrupted"), "%s",
                      res.out.data);
        ck_assert_msg(be->ops->cells->alive(sb), "the session lives on after the interrupt");
        run_result_done(&res);
        cell(sb, SBX_LANG_BASH, "echo $Y", 10, &res);
        ck_assert_msg(res.out.data && strcmp(res.out.data, "5\n") == 0, "state kept: '%s'",
                      res.out.data ? res.out.data : "");
        run_result_done(&res);
        be->ops->cells->destroy(sb);
}
END_TEST

/* Our containers (all states), as the engine lists them. */
static unsigned containers_of_this_process(void)
{
        struct engine_conn c;
        struct engine_reply rep = {0};
        struct sbx_error err = {0};
        char owner[160], *path;
        unsigned n = 0;

        ck_assert_int_eq(engine_connect(&cfg, fake_getenv, &c, &err), 0);
        ck_assert_int_eq(sbx_owner_label(getpid(), owner, sizeof(owner)), 0);
        path = xasprintf("/containers/json?all=1&filters=%%7B%%22label%%22%%3A%%5B%%22vestibule."
                         "owner%%3D%s%%22%%5D%%7D",
                         owner);
        ck_assert_int_eq(sbx_test_engine(&c, "GET", path, NULL, NULL, &rep, &err), 200);
        n = (unsigned)json_object_array_length(rep.json);
        engine_reply_done(&rep);
        free(path);
        return n;
}

START_TEST(docker_destroyed_session_leaves_no_container)
{
        struct sandbox *sb = session(SBX_LANG_PYTHON);

        ck_assert_uint_eq(containers_of_this_process(), 1); /* control: it is there, ours */
        be->ops->cells->destroy(sb);
        be = backend_free(be); /* waits for the background removal */
        ck_assert_uint_eq(containers_of_this_process(), 0);
}
END_TEST

int main(void)
{
        struct engine_conn c;
        struct sbx_error err = {0};

        signal(SIGPIPE, SIG_IGN); /* as the server: a write to a gone runner is EPIPE */
        cfg_init();
        bool up = engine_connect(&cfg, fake_getenv, &c, &err) == 0;
        if (!up)
                sbx_test_skip(
                    "no Docker Engine at /var/run/docker.sock (scripts/start-engines.sh)");
        /* the image, as test_engine imports it (nothing to do when it is there) */
        if (access(TAR_PY, R_OK) < 0)
                sbx_test_skip("no image tarballs in /var/tmp/vestibule-images");
        if (engine_setup_import_with_env(&cfg, fake_getenv, TAR_PY, cfg.image_python, &err) < 0) {
                fprintf(stderr, "cannot import %s: %s\n", TAR_PY, err.msg);
                return 1;
        }

        Suite *s = suite_create("engine_cells");
        TCase *tc = tcase_create("docker");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 180);
        tcase_add_test(tc, docker_cell_output_all_there_at_its_end);
        tcase_add_test(tc, docker_cell_interrupt_reaches_the_shells_job);
        tcase_add_test(tc, docker_destroyed_session_leaves_no_container);
        suite_add_tcase(s, tc);
        return sbx_test_run(s);
}
