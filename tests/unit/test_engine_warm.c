/* test_engine_warm.c - the container backend's warm spares (issue 17; src/engine/spare.h) on
 * real engines (rootful Docker, rootful Podman, the test user's rootless Podman), through the
 * sandbox ops the service's keeper uses (src/run/sandbox.h): a spare is started ahead (its
 * container runs before any code, a sandbox prepared for a call does not), runs one program and
 * refuses a second hand-over; a spare built before a settings change or a setup (the image's
 * tag moved) never runs code, with its control (nothing changed: the same code runs); the
 * deadline counts from the hand-over, not from the spare's start (and a deadline still fires:
 * the control); an unused spare, killed and destroyed as the registry does at shutdown, leaves
 * no container of ours. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "engine/engine.h"
#include "lazy/curl.h"
#include "run/backend.h"
#include "run/sandbox.h"
#include "testutil.h"

#define IMG_PY "vestibule/python:bookworm"
#define IMG_NODE "vestibule/node:bookworm"
#define TEST_TAG_REPO "vestibule/ctrwarm-test"
#define TEST_UID 2000

enum { ENG_DOCKER, ENG_PODMAN, ENG_ROOTLESS, ENG_N };

static const char *const eng_name[ENG_N] = {"docker", "podman", "rootless podman"};

static char host[160];
static char *ws_dir;
static struct sbx_config cfg;
static struct backend *be;
static struct engine_conn conn;
static char test_image[96]; /* our own tag, for the setup case */

static const char *rootless_path(void)
{
        const char *p = getenv("SBX_TEST_ROOTLESS_SOCK");
        return p && *p ? p : "/run/user/2000/podman/podman.sock";
}

static const char *host_of(int eng)
{
        if (eng == ENG_DOCKER)
                return "unix:///var/run/docker.sock";
        if (eng == ENG_PODMAN)
                return "unix:///run/podman/podman.sock";
        snprintf(host, sizeof(host), "unix://%s", rootless_path());
        return host;
}

/* Connect as the user the engine needs (rootless: the test user, who runs code as itself). */
static void engine_up(int eng)
{
        struct sbx_error err = {0};

        if (eng != ENG_ROOTLESS && geteuid() != 0)
                sbx_test_skip("the rootful engines' sockets are root's: run as root");
        ws_dir = sbx_test_tmpdir();
        chmod(ws_dir, 0777);
        if (eng == ENG_ROOTLESS)
                sbx_test_become_user();
        sbx_test_config(&cfg, ws_dir);
        cfg.runtime = eng == ENG_DOCKER ? SBX_RUNTIME_DOCKER : SBX_RUNTIME_PODMAN;
        cfg.backend = SBX_BACKEND_CONTAINER;
        cfg.image_python = (char *)IMG_PY;
        cfg.image_node = (char *)IMG_NODE;
        cfg.warm = true;
        cfg.warm_idle_s = 300;
        if (geteuid() == 0) {
                cfg.run_as_set = true;
                cfg.run_as_uid = TEST_UID;
                cfg.run_as_gid = TEST_UID;
        }
        fake_env_reset();
        fake_env_set(eng == ENG_DOCKER ? "DOCKER_HOST" : "CONTAINER_HOST", host_of(eng));
        if (engine_connect(&cfg, fake_getenv, &conn, &err) < 0)
                sbx_test_skip(err.msg);
        ck_assert_int_eq(engine_backend_new_with_env(&cfg, fake_getenv, &be, &err), 0);
}

static void teardown(void)
{
        be = backend_free(be);
        if (*test_image) {
                _cleanup_(engine_reply_done) struct engine_reply r = {0};
                struct sbx_error err = {0};
                (void)sbx_test_engine(&conn, "DELETE", "/images/{}", test_image, NULL, &r, &err);
        }
}

/* Containers labelled as this process's (vestibule.owner "<host>:<pid>:<start>"); the id of
 * the last one into @ret_id when not NULL. */
static unsigned containers_of_ours_id(bool running_only, char *ret_id, size_t size)
{
        _cleanup_(engine_reply_done) struct engine_reply r = {0};
        struct sbx_error err = {0};
        char needle[32];
        unsigned n = 0;

        snprintf(needle, sizeof(needle), ":%d:", (int)getpid());
        ck_assert_int_eq(
            sbx_test_engine(&conn, "GET",
                            running_only ? "/containers/json" : "/containers/json?all=1", NULL,
                            NULL, &r, &err),
            200);
        for (size_t i = 0; r.json && i < json_object_array_length(r.json); i++) {
                json_object *ctr = json_object_array_get_idx(r.json, i), *labels, *o;
                if (json_object_object_get_ex(ctr, "Labels", &labels) &&
                    json_object_object_get_ex(labels, "vestibule.owner", &o) &&
                    strstr(json_object_get_string(o), needle)) {
                        json_object *idj;
                        if (ret_id && json_object_object_get_ex(ctr, "Id", &idj))
                                snprintf(ret_id, size, "%s", json_object_get_string(idj));
                        n++;
                }
        }
        return n;
}

static unsigned containers_of_ours(bool running_only)
{
        return containers_of_ours_id(running_only, NULL, 0);
}

static int prepare(bool spare, struct sandbox **ret, struct sbx_error *err)
{
        struct sandbox_spec spec = {.language = SBX_LANG_PYTHON,
                                    .cfg = &cfg,
                                    .mode = SANDBOX_MODE_ONE_SHOT,
                                    .network = RUN_NETWORK_NONE,
                                    .spare = spare};
        return be->ops->sandbox->prepare(be, &spec, ret, err);
}

static struct sandbox *spare_or_fail(void)
{
        struct sandbox *sb = NULL;
        struct sbx_error err = {0};
        int r = prepare(true, &sb, &err);
        ck_assert_msg(r == 0, "spare: %s", err.msg);
        return sb;
}

static struct run_request request(const char *code, unsigned timeout_s)
{
        return (struct run_request){.language = SBX_LANG_PYTHON,
                                    .code = code,
                                    .code_len = strlen(code),
                                    .timeout_s = timeout_s,
                                    .cfg = &cfg,
                                    .cancel_fd = -1};
}

static int run_in(struct sandbox *sb, const char *code, unsigned timeout_s, struct run_result *res,
                  struct sbx_error *err)
{
        struct run_request req = request(code, timeout_s);
        return sandbox_run_program(be->ops->sandbox, sb, &req, res, err);
}

static const char *out_of(const struct run_result *res)
{
        return res->out.data ? res->out.data : "";
}

static bool wait_for_no_container(unsigned ms)
{
        for (unsigned t = 0; t < ms; t += 200) {
                if (containers_of_ours(false) == 0)
                        return true;
                usleep(200000);
        }
        return containers_of_ours(false) == 0;
}

/* A spare runs before any code (a prepared, non-spare sandbox does not: the control), takes
 * one program, and refuses a second hand-over. */
START_TEST(spare_started_ahead_runs_once)
{
        struct sbx_error err = {0};
        struct run_result res = {0};
        struct sandbox *cold = NULL, *sb;
        int r;

        engine_up(_i);
        /* control: a sandbox prepared for a call is created, not running */
        ck_assert_msg(prepare(false, &cold, &err) == 0, "%s", err.msg);
        ck_assert_uint_eq(containers_of_ours(false), 1);
        ck_assert_uint_eq(containers_of_ours(true), 0);
        be->ops->sandbox->destroy(cold);
        ck_assert_msg(wait_for_no_container(20000), "the cold sandbox was not removed");

        sb = spare_or_fail();
        ck_assert_msg(containers_of_ours(true) == 1, "%s: the spare's container is not running",
                      eng_name[_i]);
        r = run_in(sb, "import sys\nprint(1, sys.argv[0], open(__file__).read().count('\\n'))\n",
                   20, &res, &err);
        ck_assert_msg(r == 0, "%s: %s", eng_name[_i], err.msg);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(res.exit_code, 0);
        /* the program's file, read again, is its code (a regular file in the FIFO's place) */
        ck_assert_str_eq(out_of(&res), "1 /sandbox/main.py 2\n");
        run_result_done(&res);

        struct run_request again = request("print('twice')\n", 10);
        struct sandbox_io io;
        sbx_error_clear(&err);
        r = be->ops->sandbox->start(sb, &again, &io, &err);
        ck_assert_int_eq(r, -EALREADY);
        ck_assert_msg(strstr(err.msg, "ran a program already"), "%s", err.msg);
        be->ops->sandbox->destroy(sb);
}
END_TEST

/* A spare built before a settings change or a setup (the image's tag now names another image)
 * is refused at its hand-over (-ESTALE) and none of the code runs; the control, a spare that
 * nothing changed, runs the same code. */
START_TEST(stale_spare_never_runs)
{
        struct sbx_error err = {0};
        struct run_result res = {0};
        _cleanup_free_ char *code = NULL, *marker = NULL;
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        struct sandbox_io io;
        struct stat st;
        struct sandbox *sb;
        int r;

        engine_up(_i);
        marker = xasprintf("%s/ran", ws_dir);
        code = xstrdup("open('/workspace/ran', 'w').write('x')\nprint('ran')\n");
        /* our own tag of the python image: a setup moves it */
        snprintf(test_image, sizeof(test_image), "%s:py%d", TEST_TAG_REPO, (int)getpid());
        _cleanup_free_ char *tag_path =
            xasprintf("/images/{}/tag?repo=" TEST_TAG_REPO "&tag=py%d", (int)getpid());
        ck_assert_int_eq(sbx_test_engine(&conn, "POST", tag_path, IMG_PY, NULL, &rep, &err), 201);
        cfg.image_python = test_image;

        /* control: nothing changed, the code runs */
        sb = spare_or_fail();
        r = run_in(sb, code, 20, &res, &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert_str_eq(out_of(&res), "ran\n");
        ck_assert_int_eq(stat(marker, &st), 0);
        ck_assert_int_eq(unlink(marker), 0);
        run_result_done(&res);
        be->ops->sandbox->destroy(sb);

        /* the settings changed: refused, nothing ran */
        sb = spare_or_fail();
        cfg.mem_mb += 16;
        struct run_request req = request(code, 20);
        sbx_error_clear(&err);
        r = be->ops->sandbox->start(sb, &req, &io, &err);
        ck_assert_msg(r == -ESTALE, "%s: %d %s", eng_name[_i], r, err.msg);
        ck_assert_msg(strstr(err.msg, "settings"), "%s", err.msg);
        be->ops->sandbox->destroy(sb);
        cfg.mem_mb -= 16;
        usleep(500000);
        ck_assert_msg(stat(marker, &st) < 0, "the code of a stale spare ran");

        /* a setup: the tag names another image now */
        sb = spare_or_fail();
        engine_reply_done(&rep);
        ck_assert_int_eq(sbx_test_engine(&conn, "POST", tag_path, IMG_NODE, NULL, &rep, &err), 201);
        sbx_error_clear(&err);
        r = be->ops->sandbox->start(sb, &req, &io, &err);
        ck_assert_msg(r == -ESTALE, "%s: %d %s", eng_name[_i], r, err.msg);
        ck_assert_msg(strstr(err.msg, "another one"), "%s", err.msg);
        be->ops->sandbox->destroy(sb);
        usleep(500000);
        ck_assert_msg(stat(marker, &st) < 0, "the code of a spare of the old image ran");
}
END_TEST

/* The deadline starts at the hand-over: a spare that waited 3 s runs a 1.5 s program under a
 * 3 s timeout to its end, and the wall time counts from the hand-over; the control, a program
 * longer than its timeout in a spare, is timed out. */
START_TEST(deadline_from_handover)
{
        struct sbx_error err = {0};
        struct run_result res = {0};
        struct sandbox *sb;
        int r;

        engine_up(_i);
        sb = spare_or_fail();
        sleep(3);
        r = run_in(sb, "import time\ntime.sleep(1.5)\nprint('done')\n", 3, &res, &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert_msg(res.outcome == RUN_OUTCOME_EXITED && res.exit_code == 0,
                      "%s: outcome %d (the spare's wait counted against the deadline?)",
                      eng_name[_i], res.outcome);
        ck_assert_str_eq(out_of(&res), "done\n");
        ck_assert_msg(res.usage.wall_ms >= 1500 && res.usage.wall_ms < 2900, "wall %llu ms",
                      (unsigned long long)res.usage.wall_ms);
        run_result_done(&res);
        be->ops->sandbox->destroy(sb);

        /* control: the deadline does fire in a spare */
        sb = spare_or_fail();
        r = run_in(sb, "import time\ntime.sleep(30)\n", 1, &res, &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_TIMED_OUT);
        run_result_done(&res);
        be->ops->sandbox->destroy(sb);
}
END_TEST

/* A spare whose container ended before its call (killed from outside: an engine restart, an
 * operator) is refused at the hand-over (-ESTALE: the service builds a sandbox of its own), at
 * once rather than after a wait; the control is spare_started_ahead_runs_once (a spare that
 * still waits runs). */
START_TEST(dead_spare_refused)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        struct sbx_error err = {0};
        struct sandbox_io io;
        char id[80] = "";
        struct sandbox *sb;
        int r;

        engine_up(_i);
        sb = spare_or_fail();
        ck_assert_uint_eq(containers_of_ours_id(true, id, sizeof(id)), 1);
        _cleanup_free_ char *path = xasprintf("/containers/{}/kill?signal=KILL");
        ck_assert_int_eq(sbx_test_engine(&conn, "POST", path, id, NULL, &rep, &err), 204);
        for (int i = 0; i < 100 && containers_of_ours(true) > 0; i++)
                usleep(100000);
        struct run_request req = request("print('ran')\n", 10);
        uint64_t t0 = (uint64_t)time(NULL);
        r = be->ops->sandbox->start(sb, &req, &io, &err);
        ck_assert_msg(r == -ESTALE, "%s: %d %s", eng_name[_i], r, err.msg);
        ck_assert_msg((uint64_t)time(NULL) - t0 <= 3, "the refusal took %llu s",
                      (unsigned long long)((uint64_t)time(NULL) - t0));
        be->ops->sandbox->destroy(sb);
}
END_TEST

/* An unused spare, killed and destroyed as the registry does at shutdown, then the backend's
 * shutdown: no container of ours is left (the control: the spare's container was there). */
START_TEST(unused_spare_leaves_nothing)
{
        struct sandbox *sb;

        engine_up(_i);
        sb = spare_or_fail();
        ck_assert_uint_eq(containers_of_ours(false), 1);
        be->ops->sandbox->kill(sb);
        be->ops->sandbox->destroy(sb);
        be = backend_free(be); /* shutdown waits for the background removals */
        ck_assert_msg(wait_for_no_container(5000), "%s: %u container(s) of ours left", eng_name[_i],
                      containers_of_ours(false));
}
END_TEST

/* Whether @eng answers (a rootful one: connected in a child, whose curl state goes with it). */
static bool engine_answers(int eng)
{
        pid_t pid;
        int st;

        if (eng != ENG_ROOTLESS && geteuid() != 0)
                return false;
        if (eng == ENG_ROOTLESS) /* as test_engine: root, and the test user's socket */
                return (geteuid() == 0 || getuid() == TEST_UID) &&
                       access(rootless_path(), F_OK) == 0;
        pid = fork();
        if (pid == 0) {
                struct engine_conn c;
                struct sbx_error err = {0};
                struct sbx_config k;
                sbx_test_config(&k, "/tmp");
                k.runtime = eng == ENG_DOCKER ? SBX_RUNTIME_DOCKER : SBX_RUNTIME_PODMAN;
                fake_env_reset();
                fake_env_set(eng == ENG_DOCKER ? "DOCKER_HOST" : "CONTAINER_HOST", host_of(eng));
                _exit(engine_connect(&k, fake_getenv, &c, &err) == 0 ? 0 : 1);
        }
        return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static char not_run[300]; /* the engines not there: a skip (a failure under MUST_RUN) */

static Suite *engine_warm_suite(void)
{
        Suite *s = suite_create("engine_warm");
        char missing[256] = "";

        for (int eng = 0; eng < ENG_N; eng++) {
                TCase *tc;
                if (!engine_answers(eng)) {
                        snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
                                 "%sno %s", *missing ? ", " : "", eng_name[eng]);
                        continue;
                }
                tc = tcase_create(eng == ENG_DOCKER   ? "docker"
                                  : eng == ENG_PODMAN ? "podman"
                                                      : "podman_rootless");
                tcase_add_checked_fixture(tc, NULL, teardown);
                tcase_set_timeout(tc, 240);
                tcase_add_loop_test(tc, spare_started_ahead_runs_once, eng, eng + 1);
                tcase_add_loop_test(tc, stale_spare_never_runs, eng, eng + 1);
                tcase_add_loop_test(tc, deadline_from_handover, eng, eng + 1);
                tcase_add_loop_test(tc, dead_spare_refused, eng, eng + 1);
                tcase_add_loop_test(tc, unused_spare_leaves_nothing, eng, eng + 1);
                suite_add_tcase(s, tc);
        }
        if (*missing)
                snprintf(not_run, sizeof(not_run), "not run: %s", missing);
        return s;
}

int main(void)
{
        struct sbx_error err = {0};

        signal(SIGPIPE, SIG_IGN);
        if (lazy_curl_load(&err) < 0)
                sbx_test_skip(err.msg);
        int rc = sbx_test_run(engine_warm_suite());
        if (rc == 0 && *not_run)
                sbx_test_skip(not_run);
        return rc;
}
