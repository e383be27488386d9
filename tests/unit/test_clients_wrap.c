/* test_clients_wrap.c - reading a server entry back for `install-client --wrap`
 * (src/clients/wrap.c, src/clients/toml.c): each JSON format's entry and codex's TOML (inline,
 * [.env] and dotted env, env_vars, literal and escaped strings, a multi-line args array), the
 * refusals (a url server, a missing name with the names listed, loose JSON, values that are not
 * strings), what counts as already wrapped, and the TOML command rewrite that leaves every other
 * byte alone. The rewrite with the real clients is tests/run-cmd/install-wrap.test.sh. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/wrap.h"
#include "common/cleanup.h"
#include "testutil.h"

START_TEST(reads_each_format)
{
        static const struct {
                const char *id, *text;
        } cases[] = {
            {"claude-desktop",
             "{\"mcpServers\": {\"fs\": {\"command\": \"node\", \"args\": [\"s.js\", \"/p\"], "
             "\"env\": {\"A\": \"1\"}}}}"},
            {"vscode", "{\"servers\": {\"fs\": {\"type\": \"stdio\", \"command\": \"node\", "
                       "\"args\": [\"s.js\", \"/p\"], \"env\": {\"A\": \"1\"}}}}"},
            {"opencode", "{\"mcp\": {\"fs\": {\"type\": \"local\", \"command\": [\"node\", "
                         "\"s.js\", \"/p\"], \"environment\": {\"A\": \"1\"}}}}"},
        };
        struct sbx_error err = {0};

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct client_entry e = {0};
                ck_assert_msg(clients_read_entry(clients_find(cases[i].id), cases[i].text, "fs", &e,
                                                 &err) == 0,
                              "%s: %s", cases[i].id, err.msg);
                ck_assert_str_eq(e.command, "node");
                ck_assert_uint_eq(e.n_args, 2);
                ck_assert_str_eq(e.args[1], "/p");
                ck_assert_uint_eq(e.n_env, 1);
                ck_assert_str_eq(e.env[0], "A=1");
                ck_assert(!clients_entry_wrapped(&e, NULL, NULL));
                clients_entry_done(&e);
        }
}
END_TEST

START_TEST(refusals_name_the_fix)
{
        const struct client_info *cd = clients_find("claude-desktop");
        struct client_entry e = {0};
        struct sbx_error err = {0};

        ck_assert_int_eq(clients_read_entry(cd,
                                            "{\"mcpServers\": {\"a\": {\"command\": \"x\"}, "
                                            "\"b\": {\"url\": \"https://h\"}}}",
                                            "nope", &e, &err),
                         -ENOENT);
        ck_assert_msg(strstr(err.msg, "it has: a, b"), "%s", err.msg);
        ck_assert_int_eq(
            clients_read_entry(cd, "{\"mcpServers\": {\"b\": {\"url\": \"u\"}}}", "b", &e, &err),
            -EINVAL);
        ck_assert_msg(strstr(err.msg, "not a stdio server"), "%s", err.msg);
        ck_assert_int_eq(clients_read_entry(cd, "{\"mcpServers\": {}, }", "b", &e, &err), -EINVAL);
        ck_assert_int_eq(clients_read_entry(clients_find("codex"), NULL, "fs", &e, &err), -ENOENT);
        ck_assert_msg(strstr(err.msg, "it has: none"), "%s", err.msg);
}
END_TEST

START_TEST(reads_codex_toml)
{
        static const struct {
                const char *text;
                const char *env[3];
        } cases[] = {
            {"model = \"m\"\n[mcp_servers.other]\ncommand = \"x\"\n\n[mcp_servers.fs]\n"
             "command = \"node\"  # the server\nargs = [\"s.js\", \"/p\"]\n"
             "env = { A = \"1\", \"B\" = 'two' }\n",
             {"A=1", "B=two"}},
            {"[mcp_servers.fs]\ncommand = 'node'\nargs = [\n  \"s.js\", # script\n  '/p',\n]\n"
             "env_vars = [\"TOK_EN\"]\n[mcp_servers.fs.env]\nA = \"1\"\n",
             {"TOK_EN", "A=1"}},
            {"[mcp_servers.fs]\ncommand = \"no\\u0064e\"\nenv.A = \"1\"\nargs = [\"s.js\", "
             "\"/p\"]\n",
             {"A=1"}},
        };
        struct sbx_error err = {0};

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct client_entry e = {0};
                size_t n_env = 0;

                ck_assert_msg(
                    clients_read_entry(clients_find("codex"), cases[i].text, "fs", &e, &err) == 0,
                    "case %zu: %s", i, err.msg);
                ck_assert_str_eq(e.command, "node");
                ck_assert_uint_eq(e.n_args, 2);
                ck_assert_str_eq(e.args[0], "s.js");
                ck_assert_str_eq(e.args[1], "/p");
                while (n_env < 3 && cases[i].env[n_env])
                        n_env++;
                ck_assert_uint_eq(e.n_env, n_env);
                for (size_t k = 0; k < n_env; k++)
                        ck_assert_str_eq(e.env[k], cases[i].env[k]);
                clients_entry_done(&e);
        }
}
END_TEST

START_TEST(codex_toml_refusals)
{
        const struct client_info *cx = clients_find("codex");
        struct client_entry e = {0};
        struct sbx_error err = {0};

        ck_assert_int_eq(clients_read_entry(cx,
                                            "[mcp_servers.a]\ncommand = \"x\"\n"
                                            "[mcp_servers.b]\nurl = \"https://h\"\n",
                                            "nope", &e, &err),
                         -ENOENT);
        ck_assert_msg(strstr(err.msg, "it has: a, b"), "%s", err.msg);
        ck_assert_int_eq(
            clients_read_entry(cx, "[mcp_servers.b]\nurl = \"https://h\"\n", "b", &e, &err),
            -EINVAL);
        ck_assert_msg(strstr(err.msg, "not a stdio server"), "%s", err.msg);
        ck_assert_int_eq(clients_read_entry(cx, "[mcp_servers.b]\ncommand = 3\n", "b", &e, &err),
                         -EINVAL);
        ck_assert_int_eq(
            clients_read_entry(cx, "[mcp_servers.b]\ncommand = \"\"\"x\"\"\"\n", "b", &e, &err),
            -EINVAL);
        ck_assert_int_eq(
            clients_read_entry(cx, "[mcp_servers.b]\ncommand = \"x\"\nargs = [1]\n", "b", &e, &err),
            -EINVAL);
        ck_assert_int_eq(clients_read_entry(cx,
                                            "[mcp_servers.b]\ncommand = \"x\"\nenv = { A = 1 }\n",
                                            "b", &e, &err),
                         -EINVAL);
        ck_assert_msg(strstr(err.msg, "env 'A'"), "%s", err.msg);
        ck_assert_int_eq(
            clients_read_entry(cx, "[mcp_servers.b]\ncommand = \"x\\q\"\n", "b", &e, &err),
            -EINVAL);
}
END_TEST

/* The command rewrite: only the two values change, every other byte stays; the same again
 * changes nothing; back gives the file as it was. */
START_TEST(codex_command_only_keeps_every_other_byte)
{
        static const char text[] = "# mine\nmodel = \"m\"\n\n[mcp_servers.fs]   # fs\n"
                                   "command = \"node\" # the server\n"
                                   "args = [\"s.js\", \"/p\"]\nenv.A = 'one'\n"
                                   "startup_timeout_sec = 20\n\n[mcp_servers.fs.env]\nB = \"2\"\n"
                                   "\n[other]\nk = 1\n";
        static const char want[] =
            "# mine\nmodel = \"m\"\n\n[mcp_servers.fs]   # fs\n"
            "command = \"/v m\" # the server\n"
            "args = [\"mcp\", \"wrap\", \"--\", \"node\", \"s.js\", \"/p\"]\n"
            "env.A = 'one'\n"
            "startup_timeout_sec = 20\n\n[mcp_servers.fs.env]\nB = \"2\"\n"
            "\n[other]\nk = 1\n";
        const struct client_info *cx = clients_find("codex");
        const char *wrapped[] = {"mcp", "wrap", "--", "node", "s.js", "/p"};
        const char *orig[] = {"s.js", "/p"};
        struct client_server s = {
            .name = "fs", .command = "/v m", .args = wrapped, .n_args = 6, .command_only = true};
        struct sbx_error err = {0};
        char *out = NULL, *again = NULL, *back = NULL;

        ck_assert_msg(clients_merge(cx, text, &s, &out, NULL, &err) == 0, "%s", err.msg);
        ck_assert_ptr_nonnull(out);
        ck_assert_str_eq(out, want);
        ck_assert_int_eq(clients_merge(cx, out, &s, &again, NULL, &err), 0);
        ck_assert_ptr_null(again);
        s.command = "node";
        s.args = orig;
        s.n_args = 2;
        ck_assert_int_eq(clients_merge(cx, out, &s, &back, NULL, &err), 0);
        ck_assert_str_eq(back, text);
        free(out);
        free(back);
        /* no args line: one is added after the command's line */
        ck_assert_int_eq(clients_merge(cx, "[mcp_servers.fs]\ncommand = \"node\" # c\nx = 1\n", &s,
                                       &out, NULL, &err),
                         0);
        ck_assert_str_eq(out,
                         "[mcp_servers.fs]\ncommand = \"node\" # c\nargs = [\"s.js\", \"/p\"]\n"
                         "x = 1\n");
        free(out);
        ck_assert_int_eq(
            clients_merge(cx, "[mcp_servers.x]\ncommand = \"y\"\n", &s, &out, NULL, &err), -ENOENT);
}
END_TEST

/* Like the merge (test_clients toml_merge_at_the_limits_reads_back): a table of 128 key lines
 * with a command and no args read, and the args line the rewrite adds made 129, which every
 * later run refused. Now the rewrite reads its output back and refuses, naming the limit;
 * control: 127 lines take the args line and a second rewrite changes nothing. */
START_TEST(codex_rewrite_at_the_limit_reads_back)
{
        const struct client_info *cx = clients_find("codex");
        const char *args[] = {"mcp", "wrap", "--", "node"};
        struct client_server s = {
            .name = "fs", .command = "/v", .args = args, .n_args = 4, .command_only = true};

        for (size_t n = 128; n >= 127; n--) {
                _cleanup_free_ char *text = NULL;
                char *out = NULL, *again = NULL;
                size_t len = 0;
                struct sbx_error err = {0};
                FILE *b = open_memstream(&text, &len);
                int r;

                ck_assert_ptr_nonnull(b);
                fputs("[mcp_servers.fs]\ncommand = \"node\"\n", b);
                for (size_t i = 1; i < n; i++)
                        fprintf(b, "k%zu = %zu\n", i, i);
                fclose(b);
                r = clients_merge(cx, text, &s, &out, NULL, &err);
                if (n == 128) {
                        ck_assert_msg(r == -EINVAL && strstr(err.msg, "would not read back"),
                                      "%d %s", r, err.msg);
                        ck_assert_ptr_null(out);
                        continue;
                }
                ck_assert_msg(r == 0 && out, "control: %d %s", r, err.msg);
                ck_assert_int_eq(clients_merge(cx, out, &s, &again, NULL, &err), 0);
                ck_assert_ptr_null(again);
                free(out);
        }
}
END_TEST

START_TEST(already_wrapped)
{
        char *wrapped[] = {"mcp", "wrap", "--allow", "/p", "--", "node", "s.js", NULL};
        char *npx[] = {"-y", "vestibule-mcp", "mcp", "wrap", "--", "node", NULL};
        char *other[] = {"mcp", "run", NULL};
        struct client_entry e = {.command = "/usr/bin/vestibule-mcp", .args = wrapped, .n_args = 7};
        size_t at = 0;

        ck_assert(clients_entry_wrapped(&e, NULL, &at));
        ck_assert_uint_eq(at, 5);
        e.command = "/opt/x/vm";
        ck_assert(!clients_entry_wrapped(&e, NULL, NULL));
        ck_assert(clients_entry_wrapped(&e, "/opt/x/vm", NULL)); /* this binary, renamed */
        e = (struct client_entry){.command = "npx", .args = npx, .n_args = 6};
        ck_assert(clients_entry_wrapped(&e, NULL, &at));
        ck_assert_uint_eq(at, 5);
        e = (struct client_entry){.command = "vestibule-mcp", .args = other, .n_args = 2};
        ck_assert(!clients_entry_wrapped(&e, NULL, NULL));
}
END_TEST

static Suite *clients_wrap_suite(void)
{
        Suite *s = suite_create("clients_wrap");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, reads_each_format);
        tcase_add_test(tc, refusals_name_the_fix);
        tcase_add_test(tc, already_wrapped);
        tcase_add_test(tc, reads_codex_toml);
        tcase_add_test(tc, codex_toml_refusals);
        tcase_add_test(tc, codex_rewrite_at_the_limit_reads_back);
        tcase_add_test(tc, codex_command_only_keeps_every_other_byte);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(clients_wrap_suite());
}
