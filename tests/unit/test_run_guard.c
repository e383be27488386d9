/* test_run_guard.c - src/cli/run_guard.c on real files in a scratch $HOME: a guarded JSON key
 * the "agent" planted is put back and the other keys keep its edits; an inert value an agent
 * writes on its own ({} for a new project) is no plant; a file that no longer parses, and a
 * TOML file whose guarded table or key changed (or that the line scanner cannot follow), are
 * put back whole with the agent's version beside; a journal whose run is gone is put back by
 * run_guard_recover(); a file that cannot be recorded refuses the run. The sandboxed runs that
 * plant are tests/run-cmd/agent-guard.test.sh. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/run_guard.h"
#include "common/xalloc.h"
#include "testutil.h"

static char *dir; /* the scratch $HOME of one test */

static char *slurp(const char *rel)
{
        char *p = xasprintf("%s/%s", dir, rel), *text = NULL;
        size_t cap = 0;
        FILE *f = fopen(p, "r");

        free(p);
        if (!f)
                return NULL;
        ssize_t n = getdelim(&text, &cap, '\0', f);
        fclose(f);
        if (n < 0) {
                free(text);
                return xstrdup("");
        }
        return text;
}

/* How many names in the folder @rel start with @prefix. */
static int count_prefixed(const char *rel, const char *prefix)
{
        char *p = xasprintf("%s/%s", dir, rel);
        DIR *d = opendir(p);
        struct dirent *e;
        int n = 0;

        free(p);
        while (d && (e = readdir(d)))
                n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
        if (d)
                closedir(d);
        return n;
}

/* A preset guarding @rel's @keys (comma-separated) and the readonly @ro (NULL = none). */
static void preset_of(struct config_preset *p, const char *rel, const char *keys, const char *ro)
{
        char *text = xasprintf("guard %s %s why\n%s%s%s", rel, keys, ro ? "readonly " : "",
                               ro ? ro : "", ro ? " why\n" : "");
        struct sbx_error err = {0};

        ck_assert_msg(config_preset_parse(text, strlen(text), dir, p, &err) == 0, "%s", err.msg);
        free(text);
}

static void setup(void)
{
        dir = sbx_test_tmpdir();
        char *state = xasprintf("%s/state", dir);
        setenv("XDG_STATE_HOME", state, 1);
        free(state);
}

static void teardown(void)
{
        char *cmd = xasprintf("rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
        free(dir);
}

/* begin, @agent_text written over @rel (NULL = left as it is), end; the tried text into @tried. */
static void run_once(struct config_preset *p, const char *rel, const char *agent_text, char *tried,
                     size_t size)
{
        struct run_guard g;
        struct sbx_error err = {0};

        ck_assert_msg(run_guard_begin(p, NULL, &g, &err) == 0, "%s", err.msg);
        ck_assert_ptr_nonnull(g.journal);
        if (agent_text)
                sbx_test_write_file(dir, rel, agent_text);
        tried[0] = '\0';
        run_guard_end(&g, tried, size);
}

START_TEST(json_plant_put_back_other_edits_kept)
{
        struct config_preset p = {0};
        char tried[1024];
        char *s;

        sbx_test_write_file(dir, "c.json",
                            "{\"theme\":\"dark\",\"hooks\":{\"Stop\":[\"mine\"]},\"projects\":{}}");
        preset_of(&p, "c.json", "hooks,statusLine,projects.*.mcpServers", NULL);
        run_once(
            &p, "c.json",
            "{\"theme\":\"light\",\"hooks\":{\"Stop\":[\"evil\"]},\"statusLine\":\"x\","
            "\"projects\":{\"/p\":{\"mcpServers\":{\"a\":1},\"n\":2},\"/q\":{\"mcpServers\":{}}}}",
            tried, sizeof(tried));
        s = slurp("c.json");
        ck_assert_msg(strstr(s, "\"light\"") && strstr(s, "\"mine\"") && !strstr(s, "evil") &&
                          !strstr(s, "statusLine") && strstr(s, "\"n\": 2"),
                      "%s", s);
        /* {} for a project is what an agent writes on its own: left as it is */
        ck_assert_msg(strstr(s, "\"/q\"") && !strstr(tried, "/q"), "%s / %s", s, tried);
        ck_assert_msg(strstr(tried, "c.json: hooks, statusLine, projects./p.mcpServers (restored)"),
                      "%s", tried);
        free(s);
        config_preset_done(&p);
}
END_TEST

START_TEST(json_absent_file_made_with_a_plant)
{
        struct config_preset p = {0};
        char tried[1024];
        char *s;

        preset_of(&p, "new.json", "mcpServers", NULL);
        run_once(&p, "new.json", "{\"mcpServers\":{\"x\":{\"command\":\"sh\"}},\"ok\":true}", tried,
                 sizeof(tried));
        s = slurp("new.json");
        ck_assert_msg(s && !strstr(s, "mcpServers") && strstr(s, "\"ok\": true"), "%s", s);
        free(s);
        /* control: an unchanged run says nothing */
        run_once(&p, "new.json", NULL, tried, sizeof(tried));
        ck_assert_str_eq(tried, "");
        config_preset_done(&p);
}
END_TEST

START_TEST(json_that_no_longer_parses_is_put_back_whole)
{
        struct config_preset p = {0};
        char tried[1024];
        char *s;

        sbx_test_write_file(dir, "c.json", "{\"a\":1}");
        preset_of(&p, "c.json", "hooks", NULL);
        run_once(&p, "c.json", "{\"hooks\": [\"evil\"], oops", tried, sizeof(tried));
        s = slurp("c.json");
        ck_assert_str_eq(s, "{\"a\":1}");
        free(s);
        ck_assert_msg(
            strstr(tried, "no longer parses: put back whole, the agent's version kept as"), "%s",
            tried);
        ck_assert_int_eq(count_prefixed(".", "c.json.vestibule-planted-"), 1);
        config_preset_done(&p);
}
END_TEST

/* json-c keeps keys as C strings: "hooks\u0000" read as a second "hooks" and, being the later
 * one, hid the first. The agent (JavaScript's JSON.parse) reads two keys, "hooks" among them:
 * the guard saw {} (inert) and left the plant, which the agent would run on the host at its
 * next start. Now a file with a \u0000 escape is put back whole; control: the same plant
 * without the NUL key is put back key by key, as before. */
START_TEST(json_nul_key_cannot_hide_a_plant)
{
        struct config_preset p = {0};
        char tried[1024];
        char *s;

        sbx_test_write_file(dir, "c.json", "{\"a\":1}");
        preset_of(&p, "c.json", "hooks", NULL);
        run_once(&p, "c.json", "{\"a\":2,\"hooks\":{\"Stop\":[\"evil\"]},\"hooks\\u0000\":{}}",
                 tried, sizeof(tried));
        s = slurp("c.json");
        ck_assert_msg(!strstr(s, "evil"), "the plant stayed: %s (tried: '%s')", s, tried);
        ck_assert_str_eq(s, "{\"a\":1}");
        free(s);
        ck_assert_msg(strstr(tried, "put back whole"), "%s", tried);
        run_once(&p, "c.json", "{\"a\":2,\"hooks\":{\"Stop\":[\"evil\"]}}", tried, sizeof(tried));
        s = slurp("c.json");
        ck_assert_msg(!strstr(s, "evil") && strstr(s, "\"a\": 2"), "control: %s", s);
        free(s);
        config_preset_done(&p);
}
END_TEST

START_TEST(toml_guarded_change_put_back_whole)
{
        static const char *const orig = "model = \"o3\"\n[projects.\"/x\"]\ntrust_level = \"t\"\n";
        static const char *const plants[] = {
            "[mcp_servers.x]\ncommand = \"sh\"\n",
            "mcp_servers.x.command = \"sh\"\n",
            "notify = [\n  \"sh\",\n  \"-c\", \"x\"]\n",
            "[\"mcp_servers\".x]\ncommand = \"sh\"\n",
            "x = \"\"\"\nmulti\"\"\"\n", /* the scanner cannot follow: any change is one */
            "\"mcp\\u005fservers\".x.command = \"sh\"\n",
        };
        struct config_preset p = {0};
        char tried[1024];

        sbx_test_write_file(dir, "c.toml", orig);
        preset_of(&p, "c.toml", "mcp_servers,notify", NULL);
        for (size_t i = 0; i < sizeof(plants) / sizeof(plants[0]); i++) {
                /* a table after the file's own, a root key before them */
                char *text = plants[i][0] == '[' ? xasprintf("%s%s", orig, plants[i])
                                                 : xasprintf("%s%s", plants[i], orig);
                run_once(&p, "c.toml", text, tried, sizeof(tried));
                char *s = slurp("c.toml");
                ck_assert_msg(strcmp(s, orig) == 0, "plant %zu kept: %s", i, s);
                ck_assert_msg(strstr(tried, "put back whole"), "%zu: %s", i, tried);
                free(s);
                free(text);
        }
        /* control: an ordinary change stays */
        char *ordinary = xasprintf("%s[projects.\"/y\"]\ntrust_level = \"t\"\n", orig);
        run_once(&p, "c.toml", ordinary, tried, sizeof(tried));
        char *s = slurp("c.toml");
        ck_assert_str_eq(s, ordinary);
        ck_assert_str_eq(tried, "");
        free(s);
        free(ordinary);
        config_preset_done(&p);
}
END_TEST

START_TEST(killed_run_put_back_by_the_next)
{
        struct config_preset p = {0};
        struct run_guard g;
        struct sbx_error err = {0};
        char *s, *dead;

        sbx_test_write_file(dir, "c.json", "{\"a\":1}");
        preset_of(&p, "c.json", "hooks", "plugins");
        ck_assert_int_eq(run_guard_begin(&p, NULL, &g, &err), 0);
        sbx_test_write_file(dir, "c.json", "{\"a\":2,\"hooks\":{\"x\":1}}");
        char *plug = xasprintf("%s/plugins", dir);
        ck_assert_int_eq(mkdir(plug, 0700), 0); /* made by the run where there was none */
        free(plug);
        /* a process that is gone: pid 1 with another start time */
        dead = xasprintf("%s/state/vestibule/agent-guard/1-999999999", dir);
        ck_assert_int_eq(rename(g.journal, dead), 0);
        free(g.journal);
        g.journal = NULL;
        run_guard_end(&g, NULL, 0);
        s = slurp("c.json");
        ck_assert_msg(strstr(s, "hooks"), "control: the plant is there: %s", s);
        free(s);
        run_guard_recover();
        s = slurp("c.json");
        ck_assert_msg(!strstr(s, "hooks") && strstr(s, "\"a\": 2"), "%s", s);
        free(s);
        ck_assert_int_eq(count_prefixed(".", "plugins.vestibule-planted-"), 1);
        ck_assert_int_eq(access(dead, F_OK), -1);
        free(dead);
        config_preset_done(&p);
}
END_TEST

START_TEST(unrecordable_file_refuses)
{
        struct config_preset p = {0};
        struct run_guard g;
        struct sbx_error err = {0};
        char *d = xasprintf("%s/c.json", dir);

        ck_assert_int_eq(mkdir(d, 0700), 0); /* not a file */
        preset_of(&p, "c.json", "hooks", NULL);
        ck_assert_int_lt(run_guard_begin(&p, NULL, &g, &err), 0);
        ck_assert_msg(strstr(err.msg, "cannot record ") && strstr(err.msg, "c.json"), "%s",
                      err.msg);
        run_guard_end(&g, NULL, 0);
        /* a journal folder the command could write is refused too */
        char *real = realpath(dir, NULL);
        char *const writable[] = {real, NULL};
        ck_assert_int_eq(rmdir(d), 0);
        ck_assert_int_eq(run_guard_begin(&p, writable, &g, &err), -EPERM);
        ck_assert_msg(strstr(err.msg, "is in the writable"), "%s", err.msg);
        run_guard_end(&g, NULL, 0);
        free(real);
        free(d);
        config_preset_done(&p);
}
END_TEST

static Suite *guard_suite(void)
{
        Suite *s = suite_create("run_guard");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, json_plant_put_back_other_edits_kept);
        tcase_add_test(tc, json_absent_file_made_with_a_plant);
        tcase_add_test(tc, json_that_no_longer_parses_is_put_back_whole);
        tcase_add_test(tc, json_nul_key_cannot_hide_a_plant);
        tcase_add_test(tc, toml_guarded_change_put_back_whole);
        tcase_add_test(tc, killed_run_put_back_by_the_next);
        tcase_add_test(tc, unrecordable_file_refuses);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(guard_suite());
}
