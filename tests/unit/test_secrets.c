/* test_secrets.c - the built-in secrets list of `run -- CMD` (src/config/secrets.list): every
 * line parses, the entries the issue names are there, and the environment filter drops the
 * named secrets and keeps the rest. The sandbox's own masking is tested against the real
 * kernel by tests/run-cmd/run-cmd.test.sh. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/secrets.h"
#include "testutil.h"

static bool has(char **v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

START_TEST(list_parses_with_the_named_entries)
{
        struct config_secrets s = {0};
        struct sbx_error err = {0};

        ck_assert_int_eq(config_secrets_load("/home/u", &s, &err), 0);
        for (const char *const *p =
                 (const char *const[]){".ssh", ".aws", ".gnupg", ".config/gcloud", ".docker",
                                       ".kube", ".netrc",
                                       /* missing until the run-command helper's review: */
                                       ".config/git/credentials", ".config/containers/auth.json",
                                       ".cargo/credentials", ".pgpass", ".config/rclone",
                                       ".gem/credentials", ".bash_history", NULL};
             *p; p++) {
                char path[64];
                snprintf(path, sizeof(path), "/home/u/%s", *p);
                ck_assert_msg(has(s.home, path), "home entry %s missing", path);
        }
        ck_assert(has(s.files, ".env*") && has(s.files, "*.pem") && has(s.files, "*.key"));
        ck_assert(has(s.env, "*_TOKEN") && has(s.env, "*_KEY") && has(s.env, "*_SECRET") &&
                  has(s.env, "AWS_*"));
        ck_assert(has(s.keep, ".git"));
        ck_assert(has(s.paths, "/etc/shadow"));
        config_secrets_done(&s);
        ck_assert_ptr_null(s.home);
        /* control: without a home, no home entry at all */
        ck_assert_int_eq(config_secrets_load(NULL, &s, &err), 0);
        ck_assert_ptr_null(s.home[0]);
        ck_assert_ptr_nonnull(s.env[0]);
        config_secrets_done(&s);
}
END_TEST

START_TEST(env_filter_drops_secrets_and_keeps_the_rest)
{
        static const char *const secret[] = {
            "AWS_SECRET_ACCESS_KEY",  "AWS_PROFILE",   "GITHUB_TOKEN", "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",         "CLIENT_SECRET", "DB_PASSWORD",  "SSH_AUTH_SOCK",
            "VESTIBULE_EGRESS_ALLOW", "GH_TOKEN",      "NPM_TOKEN",    "DATABASE_URL",
        };
        static const char *const kept[] = {
            "PATH", "HOME",       "LANG",     "TERM",
            "USER", "PYTHONPATH", "KEYBOARD", "TOKENIZERS_PARALLELISM"};
        struct config_secrets s = {0};
        struct sbx_error err = {0};
        char **env;
        size_t dropped = 0;

        ck_assert_int_eq(config_secrets_load("/home/u", &s, &err), 0);
        for (size_t i = 0; i < sizeof(secret) / sizeof(secret[0]); i++)
                ck_assert_msg(config_secret_env_name(&s, secret[i]), "%s kept", secret[i]);
        for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
                ck_assert_msg(!config_secret_env_name(&s, kept[i]), "%s dropped", kept[i]);
        /* through the real environment */
        setenv("RUN_CMD_TEST_TOKEN", "planted", 1);
        setenv("RUN_CMD_TEST_PLAIN", "kept", 1);
        env = config_host_env(&s, &dropped);
        ck_assert_uint_ge(dropped, 1);
        bool saw_plain = false;
        for (size_t i = 0; env[i]; i++) {
                ck_assert_msg(strstr(env[i], "planted") == NULL, "leaked: %s", env[i]);
                saw_plain |= strcmp(env[i], "RUN_CMD_TEST_PLAIN=kept") == 0;
        }
        ck_assert_msg(saw_plain, "control: a plain variable must pass");
        config_strv_free(env);
        config_secrets_done(&s);
}
END_TEST

static Suite *secrets_suite(void)
{
        Suite *s = suite_create("secrets");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, list_parses_with_the_named_entries);
        tcase_add_test(tc, env_filter_drops_secrets_and_keeps_the_rest);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(secrets_suite());
}
