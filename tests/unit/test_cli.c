/* test_cli.c - the vestibule-mcp command line, driven as a user would: exit codes, the run
 * subcommand printing the tool's result text (from -c, a file and stdin), usage errors, help. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "testutil.h"

static char *base, *env_prefix;

static void setup(void)
{
        base = sbx_test_tmpdir();
        char *ws = xasprintf("%s/ws", base);

        ck_assert_int_eq(mkdir(ws, 0700), 0);
        if (geteuid() == 0) {
                ck_assert_int_eq(chown(ws, 2000, 2000), 0);
                ck_assert_int_eq(chmod(base, 0755), 0);
        }
        /* env -i: nothing of the test's environment reaches the binary but what is set here */
        env_prefix = xasprintf("env -i PATH=/usr/bin:/bin HOME='%s' VESTIBULE_BACKEND=naive "
                               "VESTIBULE_WORKSPACE='%s' VESTIBULE_AUDIT_DIR='%s/audit' %s "
                               "ASAN_OPTIONS=detect_leaks=0 ",
                               base, ws, base, geteuid() == 0 ? "VESTIBULE_RUN_AS=2000:2000" : "");
        free(ws);
}

static void teardown(void)
{
        char *cmd = xasprintf("rm -rf '%s'", base);

        (void)!system(cmd);
        free(cmd);
        free(base);
        free(env_prefix);
}

/* Run `vestibule-mcp @args` (a shell fragment); stdout into @out; returns the exit code. */
static int cli(const char *args, char *out, size_t out_size)
{
        char *cmd = xasprintf("%s'%s' %s 2>/dev/null", env_prefix, VESTIBULE_BIN, args);
        FILE *f = popen(cmd, "r");
        size_t n;
        int st;

        ck_assert_ptr_nonnull(f);
        n = fread(out, 1, out_size - 1, f);
        out[n] = '\0';
        st = pclose(f);
        free(cmd);
        ck_assert(WIFEXITED(st));
        return WEXITSTATUS(st);
}

static void need_bash(void)
{
        if (access("/bin/bash", X_OK) != 0 && access("/usr/bin/bash", X_OK) != 0)
                sbx_test_skip("bash is not installed");
}

START_TEST(version_and_help)
{
        char out[8192];

        ck_assert_int_eq(cli("version", out, sizeof(out)), 0);
        ck_assert_ptr_nonnull(strstr(out, "vestibule-mcp "));
        ck_assert_int_eq(cli("--help", out, sizeof(out)), 0);
        ck_assert_ptr_nonnull(strstr(out, "Usage: vestibule-mcp"));
        ck_assert_int_eq(cli("run --help", out, sizeof(out)), 0);
        ck_assert_ptr_nonnull(strstr(out, "--language"));
        ck_assert_int_eq(cli("audit --help", out, sizeof(out)), 0);
        ck_assert_ptr_nonnull(strstr(out, "audit [N]"));
        ck_assert_int_eq(cli("frobnicate", out, sizeof(out)), 2);
}
END_TEST

START_TEST(run_usage_errors)
{
        char out[8192];

        ck_assert_int_eq(cli("run", out, sizeof(out)), 2);
        ck_assert_int_eq(cli("run --language python", out, sizeof(out)), 2);
        ck_assert_int_eq(cli("run -l python -c 1 extra.py", out, sizeof(out)), 2);
        ck_assert_int_eq(cli("run -l python --bogus -c 1", out, sizeof(out)), 2);
        ck_assert_int_eq(cli("run -l python /nonexistent/file.py", out, sizeof(out)), 2);
        ck_assert_int_eq(cli("audit zero", out, sizeof(out)), 2);
}
END_TEST

START_TEST(run_prints_the_result_text)
{
        char out[8192];

        need_bash();
        ck_assert_int_eq(cli("run --language bash -c 'echo hi'", out, sizeof(out)), 0);
        ck_assert_ptr_nonnull(strstr(out, "---\nhi\n---"));
        ck_assert_ptr_nonnull(strstr(out, "\nexit code: 0\n"));
        ck_assert_ptr_nonnull(strstr(out, "\nisolation: none (naive: development only)\n"));

        /* a failed run is exit 1, and still prints its result */
        ck_assert_int_eq(cli("run -l bash -c 'exit 3'", out, sizeof(out)), 1);
        ck_assert_ptr_nonnull(strstr(out, "\nexit code: 3\n"));

        /* refused: Blocked:, exit 1 */
        ck_assert_int_eq(cli("run -l cobol -c x", out, sizeof(out)), 1);
        ck_assert_ptr_nonnull(strstr(out, "Blocked: language must be one of"));

        ck_assert_int_eq(cli("run -l bash -t 1 -c 'sleep 5'", out, sizeof(out)), 1);
        ck_assert_ptr_nonnull(strstr(out, "\ntimed out after 1 s\n"));
}
END_TEST

START_TEST(run_from_file_and_stdin)
{
        char out[8192], *file = xasprintf("%s/prog.sh", base), *args;
        FILE *f = fopen(file, "w");

        need_bash();
        ck_assert_ptr_nonnull(f);
        fputs("echo from-file\n", f);
        fclose(f);
        ck_assert_int_eq(chmod(file, 0644), 0);
        args = xasprintf("run -l bash '%s'", file);
        ck_assert_int_eq(cli(args, out, sizeof(out)), 0);
        ck_assert_ptr_nonnull(strstr(out, "---\nfrom-file\n---"));
        free(args);

        args = xasprintf("run -l bash - < '%s'", file);
        ck_assert_int_eq(cli(args, out, sizeof(out)), 0);
        ck_assert_ptr_nonnull(strstr(out, "---\nfrom-file\n---"));
        free(args);

        ck_assert_int_eq(cli("run -l bash --json -c 'echo j'", out, sizeof(out)), 0);
        ck_assert_ptr_nonnull(strstr(out, "\"structuredContent\""));
        ck_assert_ptr_nonnull(strstr(out, "\"isError\":false"));
        free(file);
}
END_TEST

START_TEST(commands_answer_help)
{
        char out[8192];

        /* every command answers --help */
        ck_assert_int_eq(cli("doctor --help", out, sizeof(out)), 0);
        ck_assert_int_eq(cli("setup --help", out, sizeof(out)), 0);
        ck_assert_int_eq(cli("verify --help", out, sizeof(out)), 0);
}
END_TEST

static Suite *cli_suite(void)
{
        Suite *s = suite_create("cli");
        TCase *tc = tcase_create("commands");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, version_and_help);
        tcase_add_test(tc, run_usage_errors);
        tcase_add_test(tc, run_prints_the_result_text);
        tcase_add_test(tc, run_from_file_and_stdin);
        tcase_add_test(tc, commands_answer_help);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(cli_suite());
}
