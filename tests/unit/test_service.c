/* test_service.c - the run service: validation order and messages, the invalid-config refusal
 * (no audit file), the root refusal, concurrency slots (busy after 5 s, cancel while waiting),
 * read_workspace texts, and the backend ladder's choice with doubles for the probes. */
#include <check.h>
#include <json-c/json.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "service/ladder.h"
#include "service/service.h"
#include "run/warden.h"
#include "testutil.h"

static struct sbx_config cfg;
static char *base, *workspace, *audit_dir, *rootfs_dir;
static struct run_service *svc;

static void make_cfg(void)
{
        base = sbx_test_tmpdir();
        workspace = xasprintf("%s/workspace", base);
        audit_dir = xasprintf("%s/audit", base);
        rootfs_dir = xasprintf("%s/rootfs", base);
        ck_assert_int_eq(mkdir(workspace, 0700), 0);
        sbx_test_config(&cfg, workspace);
        cfg.audit_dir = audit_dir;
        cfg.rootfs_dir = rootfs_dir;
        cfg.backend = SBX_BACKEND_NAIVE;
        cfg.max_code_bytes = 1000;
        cfg.max_output_bytes = 100;
        cfg.max_images = 4;
        cfg.max_image_bytes = (size_t)1024 * 1024;
        sbx_test_config_run_as(&cfg, workspace);
        if (geteuid() == 0)
                ck_assert_int_eq(chmod(base, 0755), 0);
}

static void setup(void)
{
        struct sbx_error err = {0};

        make_cfg();
        ck_assert_int_eq(run_service_new(&cfg, &svc, &err), 0);
}

static void teardown(void)
{
        svc = run_service_free(svc);
        if (base) {
                char *cmd = xasprintf("rm -rf '%s'", base);
                (void)!system(cmd);
                free(cmd);
        }
        free(base);
        free(workspace);
        free(audit_dir);
        free(rootfs_dir);
        base = workspace = audit_dir = rootfs_dir = NULL;
}

static void need_bash(void)
{
        if (access("/bin/bash", X_OK) != 0 && access("/usr/bin/bash", X_OK) != 0)
                sbx_test_skip("bash is not installed");
}

static int execute(const char *lang, const char *code, long long timeout_s, int cancel_fd,
                   struct run_result *res, struct sbx_error *err)
{
        struct run_call call = {
            .language = lang,
            .code = code,
            .code_len = code ? strlen(code) : 0,
            .timeout_s = timeout_s,
            .cancel_fd = cancel_fd,
        };

        memset(res, 0, sizeof(*res));
        sbx_error_clear(err);
        return run_service_execute(svc, &call, res, err);
}

/* --- validation --- */

START_TEST(bad_language)
{
        struct run_result res;
        struct sbx_error err;

        ck_assert_int_eq(execute("ruby", "puts 1", 0, -1, &res, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "language must be one of python, node, bash"));
        ck_assert_ptr_nonnull(strstr(err.msg, "'ruby'"));
        ck_assert_int_eq(execute(NULL, "puts 1", 0, -1, &res, &err), -EINVAL);
        run_result_done(&res);
}
END_TEST

START_TEST(bad_code)
{
        struct run_result res;
        struct sbx_error err;
        char *big = xmalloc(1002);

        ck_assert_int_eq(execute("bash", "", 0, -1, &res, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "code is empty"));
        memset(big, '#', 1001);
        big[1001] = '\0';
        ck_assert_int_eq(execute("bash", big, 0, -1, &res, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "1001 bytes"));
        ck_assert_ptr_nonnull(strstr(err.msg, "1000 bytes"));
        ck_assert_ptr_nonnull(strstr(err.msg, "VESTIBULE_MAX_CODE_BYTES"));
        free(big);
        run_result_done(&res);
}
END_TEST

START_TEST(bad_timeout)
{
        struct run_result res;
        struct sbx_error err;

        ck_assert_int_eq(execute("bash", "echo 1", 61, -1, &res, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "between 1 and 60"));
        ck_assert_ptr_nonnull(strstr(err.msg, "VESTIBULE_MAX_TIMEOUT_S"));
        run_result_done(&res);
}
END_TEST

START_TEST(valid_call_runs_with_default_timeout)
{
        struct run_result res;
        struct sbx_error err;

        need_bash();
        ck_assert_msg(execute("BASH", "echo ok", 0, -1, &res, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_str_eq(res.out.data, "ok\n");
        ck_assert_str_eq(res.isolation, "none (naive: development only)");
        run_result_done(&res);
}
END_TEST

/* Windows clients send CRLF: bash must run it as the same program with LF line ends (bash
 * alone reads the CR as part of a word); python keeps the code as sent and runs it too. */
START_TEST(crlf_code_runs)
{
        struct run_result res;
        struct sbx_error err;
        const char *bash_crlf =
            "x=a\r\nif true; then\r\n  echo \"$x\"b\r\nfi\r\nprintf 'c\\r\\n' | od -c "
            "| head -1\r\n";

        need_bash();
        ck_assert_msg(execute("bash", bash_crlf, 0, -1, &res, &err) == 0, "%s", err.msg);
        ck_assert_msg(res.outcome == RUN_OUTCOME_EXITED && res.exit_code == 0, "stderr: %s",
                      res.err.data ? res.err.data : "");
        /* the program's own CR (in a printf escape) is untouched: only line ends change */
        ck_assert_str_eq(res.out.data, "ab\n0000000   c  \\r  \\n\n");
        ck_assert_msg(!res.err.data || !strstr(res.err.data, "\\r"), "%s", res.err.data);
        run_result_done(&res);

        if (access("/usr/bin/python3", X_OK) == 0) {
                ck_assert_msg(execute("python", "x = 1\r\nif x:\r\n    print('py', x)\r\n", 0, -1,
                                      &res, &err) == 0,
                              "%s", err.msg);
                ck_assert_msg(res.exit_code == 0, "%s", res.err.data ? res.err.data : "");
                ck_assert_str_eq(res.out.data, "py 1\n");
                run_result_done(&res);
        }
}
END_TEST

/* --- invalid config: nothing runs, nothing is recorded --- */

START_TEST(invalid_config_refused_without_audit)
{
        struct run_result res;
        struct sbx_error err = {0};
        struct stat st;
        char *flag = xasprintf("%s/ran", workspace);
        char *code = xasprintf("touch '%s'", flag);

        make_cfg();
        cfg.invalid = true;
        snprintf(cfg.invalid_msg, sizeof(cfg.invalid_msg),
                 "VESTIBULE_MEM_MB='lots' is not a positive whole number: fix it and restart");
        ck_assert_int_eq(run_service_new(&cfg, &svc, &err), 0);
        ck_assert_int_lt(execute("bash", code, 0, -1, &res, &err), 0);
        ck_assert_str_eq(err.msg, cfg.invalid_msg);
        /* even a bad argument gets the setting's message first */
        ck_assert_int_lt(execute("ruby", "", 0, -1, &res, &err), 0);
        ck_assert_str_eq(err.msg, cfg.invalid_msg);
        ck_assert_int_eq(stat(flag, &st), -1);
        ck_assert_int_eq(stat(audit_dir, &st), -1);
        ck_assert_int_eq(errno, ENOENT);
        run_result_done(&res);
        free(flag);
        free(code);
}
END_TEST

START_TEST(valid_config_run_is_audited)
{
        struct run_result res;
        struct sbx_error err;
        struct stat st;

        /* the control for the case above: a valid run does create the audit folder */
        need_bash();
        ck_assert_msg(execute("bash", "echo hi", 0, -1, &res, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(stat(audit_dir, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        run_result_done(&res);
}
END_TEST

/* Every record in the audit folder, by kind; @ret_id gets the last start's id. */
static void audit_counts(int *ret_start, int *ret_end, int *ret_blocked, char *ret_id,
                         size_t id_size)
{
        char *cmd = xasprintf("cat '%s'/*.jsonl 2>/dev/null", audit_dir);
        FILE *f = popen(cmd, "r");
        char line[8192];

        *ret_start = *ret_end = *ret_blocked = 0;
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f)) {
                json_object *o = json_tokener_parse(line), *k = NULL, *id = NULL;

                ck_assert_msg(o != NULL, "not JSON: %s", line);
                ck_assert(json_object_object_get_ex(o, "kind", &k));
                if (strcmp(json_object_get_string(k), "start") == 0) {
                        (*ret_start)++;
                        if (ret_id && json_object_object_get_ex(o, "id", &id))
                                snprintf(ret_id, id_size, "%s", json_object_get_string(id));
                } else if (strcmp(json_object_get_string(k), "end") == 0) {
                        (*ret_end)++;
                        ck_assert(json_object_object_get_ex(o, "id", &id));
                        if (ret_id)
                                ck_assert_str_eq(json_object_get_string(id), ret_id);
                } else if (strcmp(json_object_get_string(k), "blocked") == 0)
                        (*ret_blocked)++;
                json_object_put(o);
        }
        pclose(f);
        free(cmd);
}

START_TEST(audit_records_per_call)
{
        struct run_result res;
        struct sbx_error err;
        int start, end, blocked;
        char id[64] = "";

        need_bash();
        ck_assert_int_eq(execute("ruby", "x", 0, -1, &res, &err), -EINVAL);
        audit_counts(&start, &end, &blocked, NULL, 0);
        ck_assert_int_eq(blocked, 1);
        ck_assert_int_eq(start + end, 0);

        ck_assert_msg(execute("bash", "echo hi", 0, -1, &res, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(res.audit_note, ""); /* recorded: no audit: line */
        run_result_done(&res);
        audit_counts(&start, &end, &blocked, id, sizeof(id));
        ck_assert_int_eq(start, 1);
        ck_assert_int_eq(end, 1);
        ck_assert_int_eq(blocked, 1);
}
END_TEST

START_TEST(audit_dir_inside_workspace_blocks_every_call)
{
        struct run_result res;
        struct sbx_error err = {0};
        char *flag;

        make_cfg();
        free(audit_dir);
        audit_dir = xasprintf("%s/audit", workspace);
        cfg.audit_dir = audit_dir;
        ck_assert_int_eq(run_service_new(&cfg, &svc, &err), 0);
        flag = xasprintf("touch '%s/ran'", workspace);
        ck_assert_int_lt(execute("bash", flag, 0, -1, &res, &err), 0);
        ck_assert_ptr_nonnull(strstr(err.msg, "VESTIBULE_AUDIT_DIR"));
        free(flag);
        flag = xasprintf("%s/ran", workspace);
        ck_assert_int_eq(access(flag, F_OK), -1); /* nothing ran */
        free(flag);
        run_result_done(&res);
}
END_TEST

/* --- root --- */

START_TEST(root_without_run_as_refused)
{
        struct run_result res;
        struct sbx_error err;

        if (geteuid() != 0) {
                /* not root: the same call runs (the refusal is about root only) */
                need_bash();
                ck_assert_int_eq(execute("bash", "echo hi", 0, -1, &res, &err), 0);
                run_result_done(&res);
                return;
        }
        cfg.run_as_set = false;
        ck_assert_int_eq(execute("bash", "echo hi", 0, -1, &res, &err), -EPERM);
        ck_assert_str_eq(err.msg,
                         "the server runs as root, so code would run as root: start vestibule-mcp "
                         "as your own user, or set VESTIBULE_RUN_AS=uid:gid to an unprivileged id "
                         "(retry after restart)");
        ck_assert_ptr_null(res.out.data);
        cfg.run_as_set = true;
        need_bash();
        ck_assert_int_eq(execute("bash", "id -u", 0, -1, &res, &err), 0);
        ck_assert_str_eq(res.out.data, "2000\n");
        run_result_done(&res);
}
END_TEST

/* --- slots --- */

struct bg_run {
        int cancel_fd;
        int r;
        struct run_result res;
        struct sbx_error err;
};

static void *bg_execute(void *arg)
{
        struct bg_run *b = arg;

        b->r = execute("bash", "touch started; sleep 20", 30, b->cancel_fd, &b->res, &b->err);
        return NULL;
}

/* Wait (up to 20 s, for a loaded machine) until the background run has really started. */
static void wait_bg_started(void)
{
        _cleanup_free_ char *mark = xasprintf("%s/started", workspace);

        for (int i = 0; i < 2000 && access(mark, F_OK) < 0; i++)
                usleep(10 * 1000);
        ck_assert_msg(access(mark, F_OK) == 0, "the background run never started");
}

static void signal_fd(int fd)
{
        uint64_t one = 1;

        (void)!write(fd, &one, sizeof(one));
}

START_TEST(busy_after_five_seconds)
{
        struct bg_run bg = {.cancel_fd = eventfd(0, EFD_CLOEXEC)};
        struct run_result res;
        struct sbx_error err;
        pthread_t th;
        uint64_t t0, dt;

        need_bash();
        make_cfg();
        cfg.max_concurrent = 1;
        ck_assert_int_eq(run_service_new(&cfg, &svc, &err), 0);
        pthread_create(&th, NULL, bg_execute, &bg);
        wait_bg_started(); /* it holds the only slot */

        t0 = sbx_now_ms();
        ck_assert_int_eq(execute("bash", "echo second", 0, -1, &res, &err), -EBUSY);
        dt = sbx_now_ms() - t0;
        /* about the 5 s slot wait, not at once and not for ever (the upper bound leaves room for
         * a loaded 2-core host: 6.6 s was seen at load 60-190) */
        ck_assert_msg(dt >= 4900 && dt < 9000, "waited %llu ms", (unsigned long long)dt);
        ck_assert_ptr_nonnull(strstr(err.msg, "all 1 run slots are busy"));
        ck_assert_ptr_nonnull(strstr(err.msg, "retry in a few seconds"));

        /* cancelling the first run frees the slot: a new call gets it at once */
        signal_fd(bg.cancel_fd);
        pthread_join(th, NULL);
        ck_assert_int_eq(bg.r, 0);
        ck_assert_int_eq(bg.res.outcome, RUN_OUTCOME_CANCELLED);
        t0 = sbx_now_ms();
        ck_assert_msg(execute("bash", "echo third", 0, -1, &res, &err) == 0, "%s", err.msg);
        ck_assert_uint_lt(sbx_now_ms() - t0, 2000);
        ck_assert_str_eq(res.out.data, "third\n");
        run_result_done(&res);
        run_result_done(&bg.res);
        close(bg.cancel_fd);
}
END_TEST

START_TEST(cancel_while_waiting_for_slot)
{
        struct bg_run bg = {.cancel_fd = eventfd(0, EFD_CLOEXEC)};
        struct run_result res;
        struct sbx_error err;
        int waiting_cancel = eventfd(0, EFD_CLOEXEC);
        pthread_t th;
        uint64_t t0;

        need_bash();
        make_cfg();
        cfg.max_concurrent = 1;
        ck_assert_int_eq(run_service_new(&cfg, &svc, &err), 0);
        pthread_create(&th, NULL, bg_execute, &bg);
        wait_bg_started();

        signal_fd(waiting_cancel);
        t0 = sbx_now_ms();
        ck_assert_int_eq(execute("bash", "echo second", 0, waiting_cancel, &res, &err), -ECANCELED);
        ck_assert_uint_lt(sbx_now_ms() - t0, 1000);

        signal_fd(bg.cancel_fd);
        pthread_join(th, NULL);
        run_result_done(&res);
        run_result_done(&bg.res);
        close(bg.cancel_fd);
        close(waiting_cancel);
}
END_TEST

START_TEST(shutdown_kills_runs_in_flight)
{
        struct bg_run bg = {.cancel_fd = -1};
        pthread_t th;
        uint64_t t0;

        need_bash();
        pthread_create(&th, NULL, bg_execute, &bg);
        wait_bg_started();
        t0 = sbx_now_ms();
        run_service_shutdown(svc);
        pthread_join(th, NULL);
        ck_assert_uint_lt(sbx_now_ms() - t0, 2000);
        ck_assert_int_eq(bg.r, 0);
        ck_assert_int_eq(bg.res.outcome, RUN_OUTCOME_SIGNALED);
        run_result_done(&bg.res);
}
END_TEST

/* --- read_workspace --- */

static void write_file(const char *rel, const char *data, size_t n)
{
        char *p = xasprintf("%s/%s", workspace, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
        close(fd);
        free(p);
}

START_TEST(read_workspace_texts)
{
        struct sbx_error err = {0};
        char *text = NULL, big[250];

        write_file("a.txt", "hello\x1b[2J\n", 10);
        ck_assert_msg(run_service_read_workspace(svc, "a.txt", &text, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(text, "hello\\x1b[2J\n");
        free(text);

        memset(big, 'b', sizeof(big));
        write_file("big.txt", big, sizeof(big));
        ck_assert_int_eq(run_service_read_workspace(svc, "big.txt", &text, &err), 0);
        ck_assert_ptr_nonnull(strstr(text, "\n[truncated: 150 of 250 bytes not shown]"));
        ck_assert_uint_eq(strspn(text, "b"), 100);
        free(text);

        write_file("bin.dat",
                   "\x7f"
                   "ELF\0\0\0\1",
                   8);
        ck_assert_int_eq(run_service_read_workspace(svc, "bin.dat", &text, &err), 0);
        ck_assert_str_eq(text, "(binary file, 8 bytes: attached as an embedded resource (base64))");
        free(text);

        ck_assert_int_lt(run_service_read_workspace(svc, "", &text, &err), 0);
        ck_assert_int_lt(run_service_read_workspace(svc, "missing.txt", &text, &err), 0);
}
END_TEST

/* --- ladder --- */

static struct backend_probe fake_probe[2]; /* [0] native, [1] container */
static int fake_ctor_fail[2];

static int fake_probe_fn(struct backend *b, struct backend_probe *ret, struct sbx_error *err)
{
        (void)err;
        *ret = fake_probe[(intptr_t)b->state];
        return 0;
}

static const struct backend_ops fake_ops[2] = {
    {.name = "native", .probe = fake_probe_fn},
    {.name = "container", .probe = fake_probe_fn},
};

static int fake_new(int which, const struct sbx_config *c, struct backend **ret,
                    struct sbx_error *err)
{
        struct backend *b;

        if (fake_ctor_fail[which])
                return sbx_fail(err, ENOSYS, "%s backend not built", fake_ops[which].name);
        b = xcalloc(1, sizeof(*b));
        b->ops = &fake_ops[which];
        b->cfg = c;
        b->state = (void *)(intptr_t)which;
        *ret = b;
        return 0;
}

static int fake_native_new(const struct sbx_config *c, struct backend **ret, struct sbx_error *err)
{
        return fake_new(0, c, ret, err);
}

static int fake_container_new(const struct sbx_config *c, struct backend **ret,
                              struct sbx_error *err)
{
        return fake_new(1, c, ret, err);
}

static void set_probe(int which, bool usable, bool degraded, const char *text)
{
        memset(&fake_probe[which], 0, sizeof(fake_probe[which]));
        fake_probe[which].usable = usable;
        fake_probe[which].degraded = degraded;
        if (usable)
                snprintf(fake_probe[which].grade, sizeof(fake_probe[which].grade), "%s", text);
        else
                snprintf(fake_probe[which].blocked, sizeof(fake_probe[which].blocked), "%s", text);
}

/* The backend auto picks, or its Blocked: text in @why. */
static const char *pick(enum sbx_backend_choice choice, char *why, size_t why_size)
{
        struct sbx_config c = {.backend = choice};
        struct ladder *l = ladder_new(&c, fake_native_new, fake_container_new);
        struct backend *b = NULL;
        struct backend_probe p;
        struct sbx_error err = {0};
        const char *name = NULL;

        if (ladder_pick(l, &b, &p, &err) == 0)
                name = b->ops->name;
        else
                snprintf(why, why_size, "%.*s", (int)why_size - 1, err.msg);
        ladder_free(l);
        return name;
}

START_TEST(ladder_auto_order)
{
        char why[480] = "";

        set_probe(0, true, false, "native");
        set_probe(1, true, false, "container");
        ck_assert_str_eq(pick(SBX_BACKEND_AUTO, why, sizeof(why)), "native");

        set_probe(0, true, true, "native-degraded (limits not applied: cpu)");
        ck_assert_str_eq(pick(SBX_BACKEND_AUTO, why, sizeof(why)), "container");

        set_probe(1, true, true, "container-degraded (x)");
        ck_assert_str_eq(pick(SBX_BACKEND_AUTO, why, sizeof(why)), "native");

        set_probe(0, false, false, "user namespaces are restricted");
        ck_assert_str_eq(pick(SBX_BACKEND_AUTO, why, sizeof(why)), "container");

        set_probe(1, false, false, "Docker is not reachable");
        ck_assert_ptr_null(pick(SBX_BACKEND_AUTO, why, sizeof(why)));
        ck_assert_ptr_nonnull(strstr(why, "native: user namespaces are restricted"));
        ck_assert_ptr_nonnull(strstr(why, "container: Docker is not reachable"));

        fake_ctor_fail[0] = 1;
        set_probe(1, true, false, "container");
        ck_assert_str_eq(pick(SBX_BACKEND_AUTO, why, sizeof(why)), "container");
        fake_ctor_fail[0] = 0;
}
END_TEST

START_TEST(ladder_forced)
{
        char why[480] = "";

        set_probe(0, true, true, "native-degraded (x)");
        set_probe(1, true, false, "container");
        /* forced: a degraded native is still native, never silently another backend */
        ck_assert_str_eq(pick(SBX_BACKEND_NATIVE, why, sizeof(why)), "native");
        ck_assert_str_eq(pick(SBX_BACKEND_NAIVE, why, sizeof(why)), "naive");

        set_probe(1, false, false, "Docker is not reachable: start it");
        ck_assert_ptr_null(pick(SBX_BACKEND_CONTAINER, why, sizeof(why)));
        ck_assert_ptr_nonnull(strstr(why, "Docker is not reachable: start it"));
        ck_assert_ptr_nonnull(strstr(why, "VESTIBULE_BACKEND=container"));
}
END_TEST

static Suite *service_suite(void)
{
        Suite *s = suite_create("service");
        TCase *tc;

        tc = tcase_create("validation");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, bad_language);
        tcase_add_test(tc, bad_code);
        tcase_add_test(tc, bad_timeout);
        tcase_add_test(tc, valid_call_runs_with_default_timeout);
        tcase_add_test(tc, crlf_code_runs);
        suite_add_tcase(s, tc);

        tc = tcase_create("invalid_config");
        tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_add_test(tc, invalid_config_refused_without_audit);
        suite_add_tcase(s, tc);

        tc = tcase_create("audit");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, valid_config_run_is_audited);
        tcase_add_test(tc, audit_records_per_call);
        suite_add_tcase(s, tc);

        tc = tcase_create("audit_refused");
        tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_add_test(tc, audit_dir_inside_workspace_blocks_every_call);
        suite_add_tcase(s, tc);

        tc = tcase_create("root");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, root_without_run_as_refused);
        suite_add_tcase(s, tc);

        tc = tcase_create("slots");
        tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, busy_after_five_seconds);
        tcase_add_test(tc, cancel_while_waiting_for_slot);
        suite_add_tcase(s, tc);

        tc = tcase_create("shutdown");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, shutdown_kills_runs_in_flight);
        suite_add_tcase(s, tc);

        tc = tcase_create("read_workspace");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, read_workspace_texts);
        suite_add_tcase(s, tc);

        tc = tcase_create("ladder");
        tcase_add_test(tc, ladder_auto_order);
        tcase_add_test(tc, ladder_forced);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(service_suite());
}
