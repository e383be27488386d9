/* test_clients_wrap.c - reading a server entry back for `install-client --wrap`
 * (src/clients/wrap.c): each JSON format's entry, the refusals (a url server, a missing name
 * with the names listed, codex's TOML, loose JSON), and what counts as already wrapped. The
 * rewrite itself, with the real clients, is tests/run-cmd/install-wrap.test.sh. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "clients/wrap.h"
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
        ck_assert_int_eq(clients_read_entry(clients_find("codex"), NULL, "fs", &e, &err), -ENOTSUP);
        ck_assert_msg(strstr(err.msg, "by hand"), "%s", err.msg);
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
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(clients_wrap_suite());
}
