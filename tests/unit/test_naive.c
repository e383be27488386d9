/* test_naive.c - the naive backend and the warden with real processes: output, exit status,
 * timeout of code that ignores SIGTERM, the process group dying with the run, the output
 * flood stop, stdin at EOF, the fixed environment, no leaked fds, cancel, root handling. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "run/backend.h"
#include "run/sandbox.h"
#include "run/warden.h"
#include "testutil.h"
#include "naive/naive.h"

static struct sbx_config cfg;
static char *workspace;
static struct backend *backend;

static void setup(void)
{
        struct sbx_error err = {0};

        workspace = sbx_test_tmpdir();
        sbx_test_config(&cfg, workspace);
        cfg.backend = SBX_BACKEND_NAIVE;
        cfg.max_output_bytes = 1000;
        sbx_test_config_run_as(&cfg, workspace);
        ck_assert_int_eq(naive_backend_new(&cfg, &backend, &err), 0);
}

static void teardown(void)
{
        backend = backend_free(backend);
        sbx_test_tmpdir_remove(&workspace);
}

static bool have(const char *prog)
{
        static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                char *p = xasprintf("%s/%s", dirs[i], prog);
                bool ok = access(p, X_OK) == 0;

                free(p);
                if (ok)
                        return true;
        }
        return false;
}

static void need(const char *prog)
{
        if (!have(prog)) {
                char *why = xasprintf("%s is not installed in /usr/local/bin:/usr/bin:/bin", prog);
                sbx_test_skip(why);
        }
}

static int run(enum sbx_language lang, const char *code, unsigned timeout_s, int cancel_fd,
               struct run_result *res, struct sbx_error *err)
{
        return sbx_test_backend_run(backend, &cfg, lang, code, timeout_s, cancel_fd, res, err);
}

static void run_ok(enum sbx_language lang, const char *code, unsigned timeout_s,
                   struct run_result *res)
{
        struct sbx_error err = {0};
        int r = run(lang, code, timeout_s, -1, res, &err);

        ck_assert_msg(r == 0, "run failed: %s", err.msg);
}

static const char *out(const struct run_result *r)
{
        return r->out.data ? r->out.data : "";
}

/* --- basics --- */

START_TEST(python_prints_and_exits)
{
        struct run_result res;

        need("python3");
        run_ok(SBX_LANG_PYTHON, "import sys\nprint('hello')\nprint('oops', file=sys.stderr)\n", 10,
               &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(res.exit_code, 0);
        ck_assert_str_eq(out(&res), "hello\n");
        ck_assert_str_eq(res.err.data, "oops\n");
        ck_assert_str_eq(res.isolation, "none (naive: development only)");
        ck_assert_str_eq(res.backend, "naive");
        /* the supervisor reaps every process of the run: cpu covers them all */
        ck_assert(res.usage.cpu_us.measured);
        ck_assert_str_eq(res.usage.mem_peak_bytes.why, "naive backend has no cgroup");
        ck_assert(!res.usage.mem_peak_bytes.measured);
        ck_assert(!res.usage.pids_peak.measured);
        run_result_done(&res);
}
END_TEST

START_TEST(bash_exit_code_and_signal)
{
        struct run_result res;

        need("bash");
        run_ok(SBX_LANG_BASH, "echo hi; exit 3", 10, &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(res.exit_code, 3);
        ck_assert_str_eq(out(&res), "hi\n");
        run_result_done(&res);

        run_ok(SBX_LANG_BASH, "kill -SEGV $$", 10, &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_SIGNALED);
        ck_assert_int_eq(res.term_signal, SIGSEGV);
        run_result_done(&res);
}
END_TEST

START_TEST(node_prints)
{
        struct run_result res;

        if (!have("node") && !have("nodejs"))
                sbx_test_skip("node is not installed");
        run_ok(SBX_LANG_NODE, "console.log(1 + 1)", 10, &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(res.exit_code, 0);
        ck_assert_str_eq(out(&res), "2\n");
        run_result_done(&res);
}
END_TEST

START_TEST(cwd_is_workspace_and_uid_unprivileged)
{
        struct run_result res;
        char *want;

        need("python3");
        run_ok(SBX_LANG_PYTHON, "import os\nprint(os.getcwd())\nprint(os.getuid(), os.getgid())",
               10, &res);
        want = geteuid() == 0 ? xasprintf("%s\n%u %u\n", workspace, (unsigned)cfg.run_as_uid,
                                          (unsigned)cfg.run_as_gid)
                              : xasprintf("%s\n%d %d\n", workspace, (int)getuid(), (int)getgid());
        ck_assert_str_eq(out(&res), want);
        free(want);
        run_result_done(&res);
}
END_TEST

/* --- environment --- */

START_TEST(stdin_at_eof)
{
        struct run_result res;

        need("python3");
        run_ok(SBX_LANG_PYTHON, "import sys\nprint(repr(sys.stdin.read()))", 10, &res);
        ck_assert_str_eq(out(&res), "''\n");
        run_result_done(&res);
}
END_TEST

START_TEST(env_fixed_nothing_inherited)
{
        struct run_result res;
        char *home_line;

        need("python3");
        setenv("VESTIBULE_TEST_SECRET", "hunter2", 1);
        setenv("LD_PRELOAD", "", 1);
        run_ok(SBX_LANG_PYTHON,
               "import os\nfor k in sorted(os.environ): print(k + '=' + os.environ[k])", 10, &res);
        ck_assert_ptr_null(strstr(out(&res), "hunter2"));
        ck_assert_ptr_null(strstr(out(&res), "VESTIBULE_TEST_SECRET"));
        ck_assert_ptr_null(strstr(out(&res), "LD_PRELOAD"));
        ck_assert_ptr_nonnull(strstr(out(&res), "PATH=/usr/local/bin:/usr/bin:/bin\n"));
        ck_assert_ptr_nonnull(strstr(out(&res), "LANG=C.UTF-8\n"));
        ck_assert_ptr_nonnull(strstr(out(&res), "TZ=UTC\n"));
        ck_assert_ptr_nonnull(strstr(out(&res), "PYTHONUNBUFFERED=1\n"));
        home_line = strstr(out(&res), "HOME=/tmp/vestibule-naive-");
        ck_assert_ptr_nonnull(home_line);
        run_result_done(&res);
}
END_TEST

START_TEST(home_is_private_and_removed)
{
        struct run_result res;
        struct stat st;
        char home[256] = "";

        char *outside = sbx_test_tmpdir(), *keep = xasprintf("%s/keep", outside);
        char *code =
            xasprintf("import os\nh = os.environ['HOME']\nopen(h + '/junk', 'w').write('x')\n"
                      "os.mkdir(h + '/d')\nos.chmod(h + '/d', 0)\n"
                      "os.symlink('%s', h + '/out')\nprint(h)\n"
                      "print(oct(os.stat(h).st_mode & 0o777))",
                      outside);

        need("python3");
        sbx_test_write_file(outside, "keep", "kept");
        run_ok(SBX_LANG_PYTHON, code, 10, &res);
        ck_assert_int_eq(sscanf(out(&res), "%255s", home), 1);
        ck_assert_ptr_nonnull(strstr(out(&res), "0o700"));
        ck_assert_int_eq(stat(home, &st), -1); /* removed after the run, junk included */
        ck_assert_int_eq(errno, ENOENT);
        /* the removal never followed the run's symlink out of its home */
        ck_assert_int_eq(stat(keep, &st), 0);
        unlink(keep);
        rmdir(outside);
        free(keep);
        free(outside);
        free(code);
        run_result_done(&res);
}
END_TEST

START_TEST(no_leaked_fds)
{
        struct run_result res;
        int leak = fcntl(0, F_DUPFD, 50); /* no O_CLOEXEC on purpose */

        need("python3");
        ck_assert_int_ge(leak, 50);
        run_ok(SBX_LANG_PYTHON,
               "import os\nfds = sorted(int(f) for f in os.listdir('/proc/self/fd'))\n"
               "print(fds)",
               10, &res);
        /* 0, 1, 2 and the directory listdir itself opened */
        ck_assert_str_eq(out(&res), "[0, 1, 2, 3]\n");
        close(leak);
        run_result_done(&res);
}
END_TEST

/* --- timeout, kill --- */

START_TEST(timeout_kills_code_ignoring_sigterm)
{
        struct run_result res;
        uint64_t t0 = sbx_now_ms(), dt;

        need("python3");
        run_ok(SBX_LANG_PYTHON,
               "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
               "signal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('spinning', flush=True)\n"
               "while True: pass\n",
               1, &res);
        dt = sbx_now_ms() - t0;
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_TIMED_OUT);
        ck_assert_str_eq(out(&res), "spinning\n");
        ck_assert_msg(dt >= 1000 && dt < 2000, "took %llu ms", (unsigned long long)dt);
        ck_assert_uint_ge(res.usage.wall_ms, 1000);
        run_result_done(&res);
}
END_TEST

static bool pid_gone(pid_t pid)
{
        char path[64], buf[512];
        FILE *f;
        char *p;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = fopen(path, "r");
        if (!f)
                return true;
        if (!fgets(buf, sizeof(buf), f)) {
                fclose(f);
                return true;
        }
        fclose(f);
        p = strrchr(buf, ')');
        return p && (p[2] == 'Z' || p[2] == 'X'); /* dead, not yet reaped by its new parent */
}

START_TEST(background_child_dies_with_run)
{
        struct run_result res;
        uint64_t t0 = sbx_now_ms();
        int pid = 0;

        need("bash");
        run_ok(SBX_LANG_BASH, "sleep 30 &\necho $!\nexit 0", 10, &res);
        ck_assert_msg(sbx_now_ms() - t0 < 1500, "the run waited for its background child");
        ck_assert_int_eq(sscanf(out(&res), "%d", &pid), 1);
        ck_assert_int_gt(pid, 1);
        for (int i = 0; i < 50 && !pid_gone(pid); i++)
                usleep(20000);
        ck_assert_msg(pid_gone(pid), "background child %d survived the run", pid);
        run_result_done(&res);
}
END_TEST

START_TEST(setsid_daemons_die_with_run)
{
        struct run_result res;
        uint64_t t0 = sbx_now_ms();
        int a = 0, b = 0;

        need("bash");
        /* setsid and a double fork leave the process group; the supervisor (a subreaper)
         * still gets them, kills them, and the run returns at once although they held the
         * stdout pipe. */
        run_ok(SBX_LANG_BASH,
               "setsid sleep 20 &\necho $!\n(setsid bash -c 'sleep 20 & echo $!' &) \nsleep 0.3\n"
               "kill -0 $! && echo alive\necho done",
               10, &res);
        ck_assert_msg(sbx_now_ms() - t0 < 1500, "hung on the daemons' pipe");
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(sscanf(out(&res), "%d\n%d", &a, &b), 2);
        ck_assert_ptr_nonnull(strstr(out(&res), "alive\ndone\n")); /* control: it ran */
        for (int i = 0; i < 50 && !(pid_gone(a) && pid_gone(b)); i++)
                usleep(20000);
        ck_assert_msg(pid_gone(a), "setsid child %d survived", a);
        ck_assert_msg(pid_gone(b), "double-forked daemon %d survived", b);
        ck_assert(res.usage.cpu_us.measured);
        run_result_done(&res);
}
END_TEST

START_TEST(setsid_daemons_die_at_timeout)
{
        struct run_result res;
        int a = 0;

        need("bash");
        run_ok(SBX_LANG_BASH, "trap '' TERM\nsetsid sleep 30 &\necho $!\nwhile :; do :; done", 1,
               &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_TIMED_OUT);
        ck_assert_int_eq(sscanf(out(&res), "%d", &a), 1);
        for (int i = 0; i < 50 && !pid_gone(a); i++)
                usleep(20000);
        ck_assert_msg(pid_gone(a), "setsid child %d survived the timeout", a);
        run_result_done(&res);
}
END_TEST

START_TEST(run_that_kills_its_supervisor)
{
        struct run_result res;

        need("bash");
        if (geteuid() == 0)
                return; /* as root, the code (VESTIBULE_RUN_AS) cannot signal the supervisor */
        run_ok(SBX_LANG_BASH, "kill -KILL $PPID; sleep 5", 10, &res);
        ck_assert(!res.usage.cpu_us.measured);
        ck_assert_ptr_nonnull(strstr(res.notes, "killed its supervisor"));
        run_result_done(&res);
}
END_TEST

START_TEST(supervisor_out_of_reach_as_root)
{
        struct run_result res;

        need("bash");
        if (geteuid() != 0)
                return;
        run_ok(SBX_LANG_BASH, "kill -KILL $PPID 2>/dev/null; echo rc=$?", 10, &res);
        ck_assert_str_eq(out(&res), "rc=1\n");
        ck_assert(res.usage.cpu_us.measured);
        run_result_done(&res);
}
END_TEST

START_TEST(flood_is_stopped)
{
        struct run_result res;
        uint64_t t0 = sbx_now_ms();

        need("python3");
        run_ok(SBX_LANG_PYTHON, "while True: print('x' * 100)", 20, &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_FLOODED);
        ck_assert_uint_le(res.out.len, cfg.max_output_bytes);
        ck_assert_uint_gt(res.out.total, 2 * cfg.max_output_bytes);
        ck_assert_msg(sbx_now_ms() - t0 < 5000, "flood not stopped early");
        run_result_done(&res);
}
END_TEST

/* Issue 12 item 19: a flood's result says at how many bytes the run was stopped, counts what
 * the program wrote until it died (not only what was read when it was stopped), and shows the
 * tail too. */
START_TEST(flood_says_where_it_was_stopped)
{
        struct run_result res;
        _cleanup_free_ char *t = NULL, *want = NULL;

        need("python3");
        run_ok(SBX_LANG_PYTHON,
               "import sys\nwhile True:\n    sys.stdout.write('x' * 999 + '\\n')\n", 20, &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_FLOODED);
        ck_assert_uint_gt(res.out.stopped_at, 2 * cfg.max_output_bytes);
        ck_assert_uint_ge(res.out.total, res.out.stopped_at);
        ck_assert_uint_eq(res.err.stopped_at, 0);
        t = run_result_format(&res, 20, cfg.max_output_bytes);
        if (res.out.total > res.out.stopped_at)
                want = xasprintf("\nstopped at %llu bytes of stdout: more than twice the 1000-byte "
                                 "output cap (%llu bytes of it were read in all, until the "
                                 "program was dead)\n",
                                 (unsigned long long)res.out.stopped_at,
                                 (unsigned long long)res.out.total);
        else
                want = xasprintf("\nstopped at %llu bytes of stdout: more than twice the 1000-byte "
                                 "output cap\n",
                                 (unsigned long long)res.out.stopped_at);
        ck_assert_msg(strstr(t, want), "%s", t);
        ck_assert_msg(strstr(t, "bytes not shown\nx"), "no tail in:\n%s", t);
        run_result_done(&res);
}
END_TEST

/* The end of a long output (where a traceback is) is shown, not only its start. */
START_TEST(long_output_keeps_its_tail)
{
        struct run_result res;
        _cleanup_free_ char *t = NULL;

        need("python3");
        run_ok(SBX_LANG_PYTHON, "print('HEAD' + 'a' * 1500)\nprint('TRACEBACK-END')\n", 20, &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_uint_eq(res.out.total, 1519);
        t = run_result_format(&res, 20, cfg.max_output_bytes);
        ck_assert_msg(strstr(t, "stdout (1519 bytes, first 500 and last 500 shown) ---"), "%s", t);
        ck_assert_msg(strstr(t, "\nHEADaaa"), "%s", t);
        ck_assert_msg(strstr(t, "aaa\nTRACEBACK-END\n---"), "%s", t);
        ck_assert_msg(strstr(t, "[stdout truncated: 519 of 1519 bytes not shown (the first 500 "
                                "and the last 500 are)]"),
                      "%s", t);
        run_result_done(&res);
}
END_TEST

static void *cancel_later(void *arg)
{
        int fd = *(int *)arg;
        uint64_t one = 1;

        usleep(300 * 1000);
        (void)!write(fd, &one, sizeof(one));
        return NULL;
}

START_TEST(cancel_via_eventfd)
{
        struct run_result res;
        struct sbx_error err = {0};
        int efd = eventfd(0, EFD_CLOEXEC);
        pthread_t th;
        uint64_t t0 = sbx_now_ms(), dt;

        need("bash");
        ck_assert_int_ge(efd, 0);
        pthread_create(&th, NULL, cancel_later, &efd);
        ck_assert_int_eq(run(SBX_LANG_BASH, "trap '' TERM INT; sleep 30", 20, efd, &res, &err), 0);
        dt = sbx_now_ms() - t0;
        pthread_join(th, NULL);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_CANCELLED);
        ck_assert_msg(dt < 1500, "cancel took %llu ms", (unsigned long long)dt);
        close(efd);
        run_result_done(&res);
}
END_TEST

static int progress_calls;
static uint64_t progress_last_ms, progress_timeout_ms;

static void on_progress(void *userdata, uint64_t elapsed_ms, uint64_t timeout_ms)
{
        (void)userdata;
        progress_calls++;
        progress_last_ms = elapsed_ms;
        progress_timeout_ms = timeout_ms;
}

START_TEST(progress_reported_during_long_runs)
{
        struct run_result res;
        struct sbx_error err = {0};
        struct run_request req = {
            .language = SBX_LANG_BASH,
            .code = "sleep 2.5",
            .code_len = 9,
            .timeout_s = 10,
            .cfg = &cfg,
            .cancel_fd = -1,
            .progress = on_progress,
        };

        need("bash");
        memset(&res, 0, sizeof(res));
        ck_assert_int_eq(backend->ops->run(backend, &req, &res, &err), 0);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(progress_calls, 1);
        ck_assert_uint_ge(progress_last_ms, 2000);
        ck_assert_uint_lt(progress_last_ms, 2500);
        ck_assert_uint_eq(progress_timeout_ms, 10000);
        run_result_done(&res);
}
END_TEST

START_TEST(shutdown_refuses_new_runs)
{
        struct run_result res;
        struct sbx_error err = {0};

        backend->ops->shutdown(backend);
        ck_assert_int_lt(run(SBX_LANG_BASH, "echo hi", 5, -1, &res, &err), 0);
        ck_assert_ptr_nonnull(strstr(err.msg, "shutting down"));
        run_result_done(&res);
}
END_TEST

/* --- root --- */

START_TEST(root_without_run_as_is_refused)
{
        struct run_result res;
        struct sbx_error err = {0};

        if (geteuid() != 0)
                return; /* only meaningful when the test runs as root */
        cfg.run_as_set = false;
        ck_assert_int_eq(run(SBX_LANG_BASH, "echo hi", 5, -1, &res, &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "VESTIBULE_RUN_AS"));
        ck_assert_ptr_null(res.out.data);

        cfg.run_as_set = true; /* control: with an unprivileged id it runs */
        ck_assert_int_eq(run(SBX_LANG_BASH, "id -u", 5, -1, &res, &err), 0);
        ck_assert_str_eq(out(&res), "2000\n");
        run_result_done(&res);
}
END_TEST

START_TEST(unreachable_workspace_is_blocked)
{
        struct run_result res;
        struct sbx_error err = {0};

        if (geteuid() != 0)
                return;
        ck_assert_int_eq(chown(workspace, 0, 0), 0);
        ck_assert_int_eq(chmod(workspace, 0700), 0);
        ck_assert_int_lt(run(SBX_LANG_BASH, "echo hi", 5, -1, &res, &err), 0);
        ck_assert_ptr_nonnull(strstr(err.msg, "cannot enter the workspace"));
        run_result_done(&res);
}
END_TEST

START_TEST(server_death_kills_the_run)
{
        char *pidfile = xasprintf("%s/pids", workspace), *code, *rmcmd, home[256] = "";
        int a = 0, b = 0, st;
        FILE *f = NULL;
        pid_t server;

        need("bash");
        code = xasprintf(
            "setsid sleep 30 &\necho $! $$ \"$HOME\" > '%s.tmp'; mv '%s.tmp' '%s'\nsleep 30",
            pidfile, pidfile, pidfile);
        server = fork();
        ck_assert_int_ge(server, 0);
        if (server == 0) {
                struct run_result res;

                run_ok(SBX_LANG_BASH, code, 60, &res);
                _exit(0);
        }
        for (int i = 0; i < 250 && !(f = fopen(pidfile, "r")); i++)
                usleep(20000);
        ck_assert_msg(f != NULL, "the run never started");
        ck_assert_int_eq(fscanf(f, "%d %d %255s", &a, &b, home), 3);
        fclose(f);
        ck_assert(!pid_gone(a) && !pid_gone(b)); /* control: both alive while the server is */

        kill(server, SIGKILL); /* the server dies without cleaning up */
        waitpid(server, &st, 0);
        for (int i = 0; i < 100 && !(pid_gone(a) && pid_gone(b)); i++)
                usleep(20000);
        ck_assert_msg(pid_gone(a), "setsid child %d outlived the server", a);
        ck_assert_msg(pid_gone(b), "the code %d outlived the server", b);
        /* a killed server cannot remove its runs' temp dirs (the seed's uninstall notes say
         * so); the test does */
        ck_assert_int_eq(strncmp(home, "/tmp/vestibule-naive-", 21), 0);
        rmcmd = xasprintf("rm -rf '%s'", home);
        (void)!system(rmcmd);
        free(rmcmd);
        free(pidfile);
        free(code);
}
END_TEST

/* --- the warden alone, on plain forked children, without a pidfd (waitpid polling) --- */

/* The test's sandbox: the child's process group, which kill() ends. */
struct group_box {
        pid_t pgid;
};

static void group_kill(struct sandbox *sb)
{
        (void)kill(-((struct group_box *)(void *)sb)->pgid, SIGKILL);
}

/* Fork a child in its own group running @fn with stdout/stderr on pipes; watch it with
 * warden_watch() (the supervise step every backend uses), then reap it here as a backend's
 * collect() would, and fill the outcome the warden did not force. */
static int supervise_fork(void (*fn)(void), unsigned timeout_s, bool use_pidfd,
                          struct run_result *res)
{
        static const struct sandbox_ops ops = {.kill = group_kill};
        struct sbx_error err = {0};
        struct run_request req = {.timeout_s = timeout_s, .cfg = &cfg, .cancel_fd = -1};
        struct sandbox_watch watch;
        struct group_box box;
        struct sandbox_io io;
        int out[2], errp[2], r, status = 0;
        pid_t pid;

        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(errp, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                setpgid(0, 0);
                dup2(out[1], 1);
                dup2(errp[1], 2);
                fn();
                _exit(0);
        }
        setpgid(pid, pid);
        close(out[1]);
        close(errp[1]);
        box.pgid = pid;
        io = (struct sandbox_io){
            .pid = pid,
            .pidfd = use_pidfd ? (int)syscall(SYS_pidfd_open, pid, 0) : -1,
            .out_fd = out[0],
            .err_fd = errp[0],
            .ended_fd = -1,
        };
        memset(res, 0, sizeof(*res));
        r = warden_watch(&req, &ops, (struct sandbox *)(void *)&box, &io, sbx_now_ms(), res, &watch,
                         &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert(watch.ended);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        if (watch.forced == RUN_OUTCOME_NONE && WIFEXITED(status)) {
                res->exit_code = WEXITSTATUS(status);
                res->outcome = RUN_OUTCOME_EXITED;
        }
        close(out[0]);
        close(errp[0]);
        if (io.pidfd >= 0)
                close(io.pidfd);
        return r;
}

static void child_prints_exits_5(void)
{
        (void)!write(1, "out", 3);
        (void)!write(2, "err", 3);
        _exit(5);
}

static void child_ignores_term_and_spins(void)
{
        signal(SIGTERM, SIG_IGN);
        for (;;)
                ;
}

START_TEST(warden_without_pidfd)
{
        struct run_result res;
        uint64_t t0;

        supervise_fork(child_prints_exits_5, 5, false, &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(res.exit_code, 5);
        ck_assert_str_eq(res.out.data, "out");
        ck_assert_str_eq(res.err.data, "err");
        run_result_done(&res);

        t0 = sbx_now_ms();
        supervise_fork(child_ignores_term_and_spins, 1, false, &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_TIMED_OUT);
        ck_assert_uint_lt(sbx_now_ms() - t0, 2000);
        run_result_done(&res);
}
END_TEST

START_TEST(warden_with_pidfd)
{
        struct run_result res;

        supervise_fork(child_prints_exits_5, 5, true, &res);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(res.exit_code, 5);
        run_result_done(&res);
}
END_TEST

static Suite *naive_suite(void)
{
        Suite *s = suite_create("naive");
        TCase *tc;

        tc = tcase_create("basics");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, python_prints_and_exits);
        tcase_add_test(tc, bash_exit_code_and_signal);
        tcase_add_test(tc, node_prints);
        tcase_add_test(tc, cwd_is_workspace_and_uid_unprivileged);
        suite_add_tcase(s, tc);

        tc = tcase_create("environment");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, stdin_at_eof);
        tcase_add_test(tc, env_fixed_nothing_inherited);
        tcase_add_test(tc, home_is_private_and_removed);
        tcase_add_test(tc, no_leaked_fds);
        suite_add_tcase(s, tc);

        tc = tcase_create("kill");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, timeout_kills_code_ignoring_sigterm);
        tcase_add_test(tc, background_child_dies_with_run);
        tcase_add_test(tc, setsid_daemons_die_with_run);
        tcase_add_test(tc, setsid_daemons_die_at_timeout);
        tcase_add_test(tc, run_that_kills_its_supervisor);
        tcase_add_test(tc, server_death_kills_the_run);
        tcase_add_test(tc, supervisor_out_of_reach_as_root);
        tcase_add_test(tc, flood_is_stopped);
        tcase_add_test(tc, flood_says_where_it_was_stopped);
        tcase_add_test(tc, long_output_keeps_its_tail);
        tcase_add_test(tc, cancel_via_eventfd);
        tcase_add_test(tc, progress_reported_during_long_runs);
        tcase_add_test(tc, shutdown_refuses_new_runs);
        suite_add_tcase(s, tc);

        tc = tcase_create("warden");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, warden_without_pidfd);
        tcase_add_test(tc, warden_with_pidfd);
        suite_add_tcase(s, tc);

        tc = tcase_create("root");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, root_without_run_as_is_refused);
        tcase_add_test(tc, unreachable_workspace_is_blocked);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(naive_suite());
}
