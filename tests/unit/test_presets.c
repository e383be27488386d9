/* test_presets.c - the agent presets of `run --agent` (src/config/presets/NAME.preset, parsed by
 * src/config/presets.c): every built-in one parses with what the issue asks of it (its own
 * folder, its key variable, its provider's host), an unknown name lists the known ones, a
 * broken line is refused with its number, and a URL's host is taken as RFC 3986 says. What the
 * sandbox makes of a preset is tested with the real Claude Code by
 * tests/run-cmd/agent-preset.test.sh. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/presets.h"
#include "testutil.h"

static bool has(char **v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

START_TEST(built_in_presets_parse)
{
        static const struct {
                const char *name, *home, *env, *host, *url_env;
        } want[] = {
            {"claude", "/home/u/.claude", "ANTHROPIC_API_KEY", "api.anthropic.com",
             "ANTHROPIC_BASE_URL"},
            {"codex", "/home/u/.codex", "OPENAI_API_KEY", "api.openai.com", "OPENAI_BASE_URL"},
            {"gemini", "/home/u/.gemini", "GEMINI_API_KEY", "generativelanguage.googleapis.com",
             "GOOGLE_GEMINI_BASE_URL"},
            {"opencode", "/home/u/.config/opencode", "ANTHROPIC_API_KEY", "api.anthropic.com",
             "OPENAI_BASE_URL"},
        };
        struct config_preset p = {0};
        struct sbx_error err = {0};

        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                ck_assert_msg(config_preset_load(want[i].name, "/home/u", &p, &err) == 0, "%s: %s",
                              want[i].name, err.msg);
                ck_assert_str_eq(p.command, want[i].name);
                ck_assert_msg(has(p.home, want[i].home), "%s: no %s", want[i].name, want[i].home);
                ck_assert(has(p.env, want[i].env) && has(p.hosts, want[i].host) &&
                          has(p.url_env, want[i].url_env));
                config_preset_done(&p);
        }
        ck_assert_int_eq(config_preset_load("claude", "/home/u", &p, &err), 0);
        ck_assert(has(p.home, "/home/u/.claude.json"));
        /* the files whose keys carry host commands, and the plugin folders */
        ck_assert_int_eq(p.n_guards, 2);
        ck_assert_str_eq(p.guards[0].path, "/home/u/.claude/settings.json");
        ck_assert(has(p.guards[0].keys, "hooks") && has(p.guards[0].keys, "statusLine") &&
                  has(p.guards[0].keys, "apiKeyHelper"));
        ck_assert_str_eq(p.guards[1].path, "/home/u/.claude.json");
        ck_assert(has(p.guards[1].keys, "mcpServers") &&
                  has(p.guards[1].keys, "projects.*.mcpServers"));
        ck_assert(has(p.readonly, "/home/u/.claude/plugins/cache"));
        config_preset_done(&p);
        ck_assert_int_eq(config_preset_load("codex", "/home/u", &p, &err), 0);
        ck_assert(p.n_guards == 1 && strcmp(p.guards[0].path, "/home/u/.codex/config.toml") == 0 &&
                  has(p.guards[0].keys, "mcp_servers") && has(p.guards[0].keys, "notify"));
        config_preset_done(&p);
        ck_assert_int_eq(config_preset_load("gemini", "/home/u", &p, &err), 0);
        ck_assert(p.n_guards == 1 && has(p.guards[0].keys, "mcpServers") &&
                  has(p.guards[0].keys, "hooks") && has(p.readonly, "/home/u/.gemini/extensions"));
        config_preset_done(&p);
        ck_assert_int_eq(config_preset_load("opencode", "/home/u", &p, &err), 0);
        ck_assert(p.n_guards == 3 && has(p.guards[0].keys, "mcp") &&
                  has(p.guards[0].keys, "plugin") &&
                  has(p.readonly, "/home/u/.config/opencode/plugin"));
        config_preset_done(&p);
        /* without a home, no home entry */
        ck_assert_int_eq(config_preset_load("claude", NULL, &p, &err), 0);
        ck_assert_ptr_null(p.home[0]);
        ck_assert(p.n_guards == 0 && p.readonly[0] == NULL);
        config_preset_done(&p);
}
END_TEST

START_TEST(unknown_agent_lists_the_known_ones)
{
        struct config_preset p = {0};
        struct sbx_error err = {0};

        ck_assert_int_eq(config_preset_load("aider", "/home/u", &p, &err), -ENOENT);
        ck_assert_msg(strstr(err.msg, "unknown agent 'aider'") &&
                          strstr(err.msg, "claude, codex, gemini, opencode"),
                      "%s", err.msg);
}
END_TEST

START_TEST(bad_lines_are_refused_with_their_number)
{
        static const char *const bad[] = {"home ../.ssh escape\n",
                                          "home /etc absolute\n",
                                          "home a/../../b\n",
                                          "host evil/x path\n",
                                          "env A=B value\n",
                                          "colour blue\n",
                                          "command a\ncommand b\n",
                                          "home\n",
                                          "env 1ABC digit first\n",
                                          "host a\0b nul inside\n",
                                          "guard .a\n",
                                          "guard .a k..x\n",
                                          "guard ../x k\n",
                                          "guard a k,\n",
                                          "guard a a*b\n",
                                          "readonly /etc\n"};
        static const size_t len_nul = sizeof("host a\0b nul inside\n") - 1;
        struct config_preset p = {0};
        struct sbx_error err = {0};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                size_t len = i == 9 ? len_nul : strlen(bad[i]);
                ck_assert_msg(config_preset_parse(bad[i], len, "/home/u", &p, &err) == -EINVAL,
                              "accepted: %s", bad[i]);
                ck_assert_msg(strstr(err.msg, "preset line "), "%s", err.msg);
        }
        ck_assert_int_eq(
            config_preset_parse("# c\n\nhost a.b\ncommand a\ncommand b\n", 34, "/h", &p, &err),
            -EINVAL);
        ck_assert_msg(strstr(err.msg, "line 5"), "%s", err.msg);
        /* control: the same shapes, well formed, pass */
        const char *ok = "# c\n\n  command a\nhome .a/b why\nenv A_B\nhost a.b-c\nurl-env X\n"
                         "guard .a/s.json hooks,p.*.m why\nreadonly .a/plug why\n";
        ck_assert_int_eq(config_preset_parse(ok, strlen(ok), "/h", &p, &err), 0);
        ck_assert(has(p.home, "/h/.a/b") && has(p.env, "A_B") && has(p.hosts, "a.b-c") &&
                  has(p.url_env, "X") && has(p.readonly, "/h/.a/plug"));
        ck_assert(p.n_guards == 1 && strcmp(p.guards[0].path, "/h/.a/s.json") == 0 &&
                  has(p.guards[0].keys, "hooks") && has(p.guards[0].keys, "p.*.m"));
        config_preset_done(&p);
}
END_TEST

START_TEST(url_host)
{
        static const char *const cases[][2] = {
            {"https://api.example.com", "api.example.com"},
            {"http://Model.Test:8080/v1", "model.test"},
            {"http://user:pw@gw.test/x@y", "gw.test"},
            {"https://[::1]:443/", "::1"},
            {"http://h?q=1", "h"},
        };
        static const char *const none[] = {"api.example.com", "://x", "http://", "http://:80/",
                                           "http://[::1"};

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *h = config_url_host(cases[i][0]);
                ck_assert_msg(h && strcmp(h, cases[i][1]) == 0, "%s -> %s", cases[i][0],
                              h ? h : "(null)");
                free(h);
        }
        for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
                ck_assert_msg(config_url_host(none[i]) == NULL, "%s has a host?", none[i]);
}
END_TEST

static Suite *presets_suite(void)
{
        Suite *s = suite_create("presets");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, built_in_presets_parse);
        tcase_add_test(tc, unknown_agent_lists_the_known_ones);
        tcase_add_test(tc, bad_lines_are_refused_with_their_number);
        tcase_add_test(tc, url_host);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(presets_suite());
}
