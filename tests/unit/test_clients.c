/* test_clients.c - install-client's file work (src/clients): the merge keeps every other server
 * and setting, a backup of the old bytes comes first, a second identical run changes nothing,
 * and a file it cannot edit safely is refused and left byte-for-byte as it was. Parsing only:
 * whether each client accepts what is written is tests/clients/install-client.sh, with the
 * clients' own `mcp list`. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clients/clients.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "testutil.h"

static char *dir;

static void setup(void)
{
        dir = sbx_test_tmpdir();
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", dir);

        ck_assert_int_eq(system(cmd), 0);
        free(dir);
}

static const char *const test_env[] = {"VESTIBULE_BACKEND=native", "PATH=/opt/x/bin:/usr/bin"};
static const char *const test_args[] = {"-y", "vestibule-mcp"};

static const struct client_server server = {
    .name = "vestibule",
    .command = "/usr/bin/vestibule-mcp",
    .env = test_env,
    .n_env = 2,
};

static void write_text(const char *path, const char *text)
{
        FILE *f = fopen(path, "we");

        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fputs(text, f) >= 0, 1);
        ck_assert_int_eq(fclose(f), 0);
}

static char *read_text(const char *path)
{
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t len = 0;

        ck_assert_msg(f != NULL, "cannot open %s", path);
        ck_assert_int_ge(getdelim(&buf, &len, '\0', f), 0);
        fclose(f);
        return buf;
}

/* Files in the test folder whose name contains @part. */
static int count_files(const char *part)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d)))
                n += strstr(e->d_name, part) != NULL;
        closedir(d);
        return n;
}

static char *only_backup(void)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        char *found = NULL;

        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d)))
                if (strstr(e->d_name, ".vestibule-backup-")) {
                        ck_assert_msg(!found, "more than one backup");
                        found = xasprintf("%s/%s", dir, e->d_name);
                }
        closedir(d);
        ck_assert_msg(found != NULL, "no backup written");
        return found;
}

static json_object *parse(const char *text)
{
        json_object *o = json_tokener_parse(text);

        ck_assert_msg(o != NULL, "not JSON: %s", text);
        return o;
}

static json_object *at(json_object *o, const char *k)
{
        json_object *v = NULL;

        ck_assert_msg(json_object_object_get_ex(o, k, &v), "no key '%s' in %s", k,
                      json_object_to_json_string(o));
        return v;
}

/* For every JSON client: an existing file with another server and other settings. */
START_TEST(json_merge_keeps_others_backs_up_and_is_idempotent)
{
        static const char *const ids[] = {"claude-code", "claude-desktop", "cursor",
                                          "vscode",      "gemini",         "opencode"};

        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                const struct client_info *c = clients_find(ids[i]);
                const char *key = strcmp(ids[i], "vscode") == 0     ? "servers"
                                  : strcmp(ids[i], "opencode") == 0 ? "mcp"
                                                                    : "mcpServers";
                _cleanup_free_ char *path = xasprintf("%s/%s.json", dir, ids[i]);
                _cleanup_free_ char *old = xasprintf(
                    "{\n  \"theme\": \"dark\",\n  \"%s\": {\n    \"other\": {\"command\": "
                    "\"npx\", \"args\": [\"-y\", \"other-mcp\"], \"env\": {\"K\": \"v\"}}\n  "
                    "},\n  \"numbers\": [1.50, 1e3, -0, 9007199254740993]\n}\n",
                    key);
                _cleanup_free_ char *text = NULL, *again = NULL, *bak = NULL, *btext = NULL,
                                    *backup = NULL, *cmd = NULL;
                struct sbx_error err = {0};
                json_object *before, *after, *servers, *mine, *env;
                int r;

                ck_assert_ptr_nonnull(c);
                write_text(path, old);
                ck_assert_int_eq(chmod(path, 0640), 0);
                r = clients_install(c, path, &server, dir, &backup, NULL, &err);
                ck_assert_msg(r == 1, "%s: %d %s", ids[i], r, err.msg);

                /* the backup holds the old bytes, exactly */
                bak = only_backup();
                ck_assert_str_eq(bak, backup);
                btext = read_text(bak);
                ck_assert_str_eq(btext, old);

                text = read_text(path);
                before = parse(old);
                after = parse(text);
                ck_assert_str_eq(json_object_get_string(at(after, "theme")), "dark");
                ck_assert(json_object_equal(at(before, "numbers"), at(after, "numbers")));
                servers = at(after, key);
                ck_assert(json_object_equal(at(at(before, key), "other"), at(servers, "other")));
                ck_assert_int_eq(json_object_object_length(servers), 2);
                mine = at(servers, "vestibule");
                if (strcmp(ids[i], "opencode") == 0) {
                        ck_assert_str_eq(json_object_get_string(at(mine, "type")), "local");
                        ck_assert_str_eq(json_object_get_string(
                                             json_object_array_get_idx(at(mine, "command"), 0)),
                                         "/usr/bin/vestibule-mcp");
                        env = at(mine, "environment");
                } else {
                        ck_assert_str_eq(json_object_get_string(at(mine, "command")),
                                         "/usr/bin/vestibule-mcp");
                        env = at(mine, "env");
                }
                ck_assert_str_eq(json_object_get_string(at(env, "VESTIBULE_BACKEND")), "native");
                ck_assert_str_eq(json_object_get_string(at(env, "PATH")), "/opt/x/bin:/usr/bin");
                /* the numbers keep their spelling (json-c keeps a double's source text) */
                ck_assert_msg(strstr(text, "1.50") && strstr(text, "9007199254740993"), "%s", text);
                {
                        struct stat st;
                        ck_assert_int_eq(stat(path, &st), 0);
                        ck_assert_int_eq(st.st_mode & 07777, 0640);
                }

                /* a second identical run: nothing written, no second backup */
                free(backup);
                backup = NULL;
                r = clients_install(c, path, &server, dir, &backup, NULL, &err);
                ck_assert_msg(r == 0, "%s second run: %d %s", ids[i], r, err.msg);
                ck_assert_ptr_null(backup);
                again = read_text(path);
                ck_assert_str_eq(again, text);
                ck_assert_int_eq(count_files(".vestibule-backup-"), 1);
                ck_assert(clients_entry_equal_json(c, text, &server));

                json_object_put(before);
                json_object_put(after);
                cmd = xasprintf("rm -f '%s'/*", dir);
                ck_assert_int_eq(system(cmd), 0);
        }
}
END_TEST

START_TEST(json_existing_entry_updated_in_place)
{
        const struct client_info *c = clients_find("cursor");
        _cleanup_free_ char *path = xasprintf("%s/mcp.json", dir), *text = NULL;
        struct sbx_error err = {0};
        json_object *o, *servers;
        int r;

        write_text(path, "{\"mcpServers\": {\"a\": {\"command\": \"a\"}, \"vestibule\": "
                         "{\"command\": \"/old/vestibule-mcp\"}, \"z\": {\"command\": \"z\"}}}");
        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == 1, "%d %s", r, err.msg);
        text = read_text(path);
        o = parse(text);
        servers = at(o, "mcpServers");
        ck_assert_str_eq(json_object_get_string(at(at(servers, "vestibule"), "command")),
                         "/usr/bin/vestibule-mcp");
        /* same place among the others: a, vestibule, z */
        ck_assert_ptr_nonnull(strstr(text, "\"a\""));
        ck_assert(strstr(text, "\"a\"") < strstr(text, "\"vestibule\""));
        ck_assert(strstr(text, "\"vestibule\"") < strstr(text, "\"z\""));
        json_object_put(o);
}
END_TEST

/* issue 24 #8: a second install-client replaced the whole entry, dropping the user's env
 * (workspace, allowlist, secrets) and client options such as timeouts. Now the old entry's other
 * keys stay, env values we do not set stay (ours win on the same name), what was kept is named,
 * and a third run changes nothing. */
START_TEST(json_rerun_keeps_user_settings)
{
        static const char *const ids[] = {"claude-code", "claude-desktop", "cursor",
                                          "vscode",      "gemini",         "opencode"};

        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                const struct client_info *c = clients_find(ids[i]);
                bool oc = strcmp(ids[i], "opencode") == 0;
                const char *key = strcmp(ids[i], "vscode") == 0 ? "servers"
                                  : oc                          ? "mcp"
                                                                : "mcpServers";
                const char *envk = oc ? "environment" : "env";
                _cleanup_free_ char *path = xasprintf("%s/%s.json", dir, ids[i]);
                _cleanup_free_ char *old = xasprintf(
                    "{\"%s\": {\"vestibule\": {\"command\": \"/old\", \"args\": [\"x\"], "
                    "\"%s\": {\"VESTIBULE_WORKSPACE\": \"/w\", \"VESTIBULE_BACKEND\": \"naive\"}, "
                    "\"timeout\": 30000, \"trust\": true}}}\n",
                    key, envk);
                _cleanup_free_ char *text = NULL, *kept = NULL, *cmd = NULL;
                struct sbx_error err = {0};
                json_object *o, *mine, *env;
                int r;

                write_text(path, old);
                r = clients_install(c, path, &server, dir, NULL, &kept, &err);
                ck_assert_msg(r == 1, "%s: %d %s", ids[i], r, err.msg);
                text = read_text(path);
                o = parse(text);
                mine = at(at(o, key), "vestibule");
                env = at(mine, envk);
                ck_assert_str_eq(json_object_get_string(at(env, "VESTIBULE_WORKSPACE")), "/w");
                ck_assert_str_eq(json_object_get_string(at(env, "VESTIBULE_BACKEND")), "native");
                ck_assert_str_eq(json_object_get_string(at(env, "PATH")), "/opt/x/bin:/usr/bin");
                ck_assert_int_eq(json_object_get_int(at(mine, "timeout")), 30000);
                ck_assert(json_object_get_boolean(at(mine, "trust")));
                ck_assert_msg(kept && strstr(kept, "VESTIBULE_WORKSPACE") &&
                                  strstr(kept, "timeout") && strstr(kept, "trust") &&
                                  !strstr(kept, "VESTIBULE_BACKEND"),
                              "%s: kept '%s'", ids[i], kept ? kept : "(null)");
                json_object_put(o);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == 0, "%s third run: %d %s", ids[i], r, err.msg);
                cmd = xasprintf("rm -f '%s'/*", dir);
                ck_assert_int_eq(system(cmd), 0);
        }
}
END_TEST

START_TEST(json_new_file_and_folders_created_private)
{
        const struct client_info *c = clients_find("vscode");
        _cleanup_free_ char *path = xasprintf("%s/a/b/mcp.json", dir), *parent = NULL, *text = NULL;
        struct sbx_error err = {0};
        struct stat st;
        json_object *o;
        int r;

        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == 1, "%d %s", r, err.msg);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        parent = xasprintf("%s/a/b", dir);
        ck_assert_int_eq(stat(parent, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0700);
        text = read_text(path);
        o = parse(text);
        ck_assert_str_eq(json_object_get_string(at(at(at(o, "servers"), "vestibule"), "type")),
                         "stdio");
        json_object_put(o);
        ck_assert_int_eq(count_files(".vestibule-backup-"), 0);
}
END_TEST

START_TEST(json_symlink_target_edited)
{
        const struct client_info *c = clients_find("gemini");
        _cleanup_free_ char *real = xasprintf("%s/real.json", dir),
                            *link = xasprintf("%s/settings.json", dir), *text = NULL;
        struct sbx_error err = {0};
        struct stat st;

        write_text(real, "{\"mcpServers\": {}}\n");
        ck_assert_int_eq(symlink(real, link), 0);
        ck_assert_int_eq(clients_install(c, link, &server, dir, NULL, NULL, &err), 1);
        ck_assert_int_eq(lstat(link, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        text = read_text(real);
        ck_assert_ptr_nonnull(strstr(text, "vestibule-mcp"));
}
END_TEST

START_TEST(json_malformed_refused_untouched)
{
        static const char *const bad[] = {
            "{ // a comment\n \"mcpServers\": {}}\n",
            "{\"mcpServers\": {\"a\": {\"command\": \"a\"},}}\n",
            "{\"mcpServers\": {}} trailing\n",
            "[1, 2]\n",
            "{\"mcpServers\": [\"not\", \"an object\"]}\n",
            "{\"mcpServers\": {\n",
            "{'single': 'quotes'}\n",
        };
        const struct client_info *c = clients_find("claude-desktop");
        _cleanup_free_ char *path = xasprintf("%s/claude_desktop_config.json", dir);

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *text = NULL;
                struct sbx_error err = {0};
                char *backup = (char *)"untouched";
                int r;

                write_text(path, bad[i]);
                r = clients_install(c, path, &server, dir, &backup, NULL, &err);
                ck_assert_msg(r == -EINVAL, "case %zu: %d %s", i, r, err.msg);
                ck_assert_msg(strstr(err.msg, "cannot edit") && strstr(err.msg, path), "%s",
                              err.msg);
                ck_assert_ptr_null(backup);
                text = read_text(path);
                ck_assert_str_eq(text, bad[i]);
                ck_assert_int_eq(count_files(".vestibule-"), 0);
        }
}
END_TEST

/* issue 24, install-client (Low): 8 runs at once on one file, each adding its own server, lost
 * entries (7 of 10 rounds), all exiting 0. Runs now take an flock on "<file>.vestibule-lock"
 * from the read to the rename. */
START_TEST(concurrent_installs_keep_every_entry)
{
        const struct client_info *c = clients_find("gemini");
        _cleanup_free_ char *path = xasprintf("%s/settings.json", dir);

        for (int round = 0; round < 6; round++) {
                _cleanup_free_ char *text = NULL;
                int go[2];
                pid_t pids[8];

                write_text(path, "{\"mcpServers\": {}}\n");
                ck_assert_int_eq(pipe(go), 0);
                for (int i = 0; i < 8; i++) {
                        pids[i] = fork();
                        ck_assert_int_ge(pids[i], 0);
                        if (pids[i] == 0) {
                                char name[16], b;
                                struct client_server one = server;
                                struct sbx_error err = {0};

                                close(go[1]);
                                (void)!read(go[0], &b, 1);
                                snprintf(name, sizeof(name), "s%d", i);
                                one.name = name;
                                _exit(clients_install(c, path, &one, dir, NULL, NULL, &err) == 1
                                          ? 0
                                          : 1);
                        }
                }
                close(go[0]);
                close(go[1]); /* all start now */
                for (int i = 0; i < 8; i++) {
                        int st;
                        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
                        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run %d failed", i);
                }
                text = read_text(path);
                for (int i = 0; i < 8; i++) {
                        char key[16];
                        snprintf(key, sizeof(key), "\"s%d\"", i);
                        ck_assert_msg(strstr(text, key), "round %d lost %s:\n%s", round, key, text);
                }
        }
}
END_TEST

/* A FIFO as the config hung install-client; now refused at once, naming what it is. */
START_TEST(fifo_config_refused_without_hanging)
{
        const struct client_info *c = clients_find("cursor");
        _cleanup_free_ char *path = xasprintf("%s/mcp.json", dir);
        struct sbx_error err = {0};
        int r;

        ck_assert_int_eq(mkfifo(path, 0600), 0);
        alarm(5);
        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        alarm(0);
        ck_assert_msg(r == -EINVAL && strstr(err.msg, "not a regular file"), "%d %s", r, err.msg);
}
END_TEST

/* A dangling symlink was replaced by a plain file; now its target is created and the link
 * stays. The backup of a symlinked config lands in the backup folder, never beside the target
 * (a dotfiles repository), mode 0600. */
START_TEST(symlinks_followed_backup_kept_out_of_the_target_folder)
{
        const struct client_info *c = clients_find("gemini");
        _cleanup_free_ char *repo = xasprintf("%s/dotfiles", dir),
                            *real = xasprintf("%s/dotfiles/settings.json", dir),
                            *link = xasprintf("%s/link.json", dir),
                            *state = xasprintf("%s/state", dir), *text = NULL, *backup = NULL,
                            *cmd = NULL;
        struct sbx_error err = {0};
        struct stat st;
        int r;

        ck_assert_int_eq(mkdir(repo, 0700), 0);
        ck_assert_int_eq(symlink("dotfiles/settings.json", link), 0);
        r = clients_install(c, link, &server, state, &backup, NULL, &err);
        ck_assert_msg(r == 1, "dangling: %d %s", r, err.msg);
        ck_assert_int_eq(lstat(link, &st), 0);
        ck_assert_msg(S_ISLNK(st.st_mode), "the dangling link was replaced by a plain file");
        text = read_text(real);
        ck_assert_ptr_nonnull(strstr(text, "vestibule-mcp"));

        write_text(real, "{\"mcpServers\": {}, \"apiKey\": \"secret\"}\n");
        r = clients_install(c, link, &server, state, &backup, NULL, &err);
        ck_assert_msg(r == 1, "%d %s", r, err.msg);
        ck_assert_msg(backup && strncmp(backup, state, strlen(state)) == 0, "backup at %s",
                      backup ? backup : "(none)");
        ck_assert_int_eq(stat(backup, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        cmd = xasprintf("test \"$(ls -A '%s' | grep -v '^settings.json$' | grep -v "
                        "'vestibule-lock$')\" = ''",
                        repo);
        ck_assert_msg(system(cmd) == 0, "something beside the target in %s", repo);
}
END_TEST

/* A hard-linked config (rename() would split the links) and a read-only one (0400: the user
 * said no) were rewritten; now both are refused naming why, the bytes untouched. */
START_TEST(hard_linked_and_read_only_configs_refused)
{
        const struct client_info *c = clients_find("cursor");
        _cleanup_free_ char *path = xasprintf("%s/mcp.json", dir),
                            *other = xasprintf("%s/other.json", dir), *text = NULL;
        const char *old = "{\"mcpServers\": {}}\n";
        struct sbx_error err = {0};
        struct stat st;
        int r;

        write_text(path, old);
        ck_assert_int_eq(link(path, other), 0);
        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == -EMLINK && strstr(err.msg, "hard link"), "%d %s", r, err.msg);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_nlink, 2);
        text = read_text(other);
        ck_assert_str_eq(text, old);
        ck_assert_int_eq(unlink(other), 0);

        ck_assert_int_eq(chmod(path, 0400), 0);
        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == -EACCES && strstr(err.msg, "read-only") && strstr(err.msg, "chmod"),
                      "%d %s", r, err.msg);
        free(text);
        text = read_text(path);
        ck_assert_str_eq(text, old);
        ck_assert_int_eq(count_files(".vestibule-backup-"), 0);
}
END_TEST

/* Integers beyond 64 bits and lone surrogates elsewhere in the file were rewritten (json-c
 * clamps the one and replaces the other); now such a file is refused, untouched. */
START_TEST(json_lossy_values_refused)
{
        static const char *const bad[] = {
            "{\"n\": 123456789012345678901234567890, \"mcpServers\": {}}\n",
            "{\"n\": 18446744073709551616, \"mcpServers\": {}}\n",
            "{\"n\": [-9223372036854775809], \"mcpServers\": {}}\n",
            "{\"s\": \"\\ud800x\", \"mcpServers\": {}}\n",
            "{\"s\": \"a\\udc00\", \"mcpServers\": {}}\n",
        };
        static const char *const fine[] = {
            "{\"n\": 18446744073709551615, \"m\": -9223372036854775808, \"d\": 1e400, "
            "\"s\": \"\\ud83d\\ude00 \\\\ud800\", \"k\": \"123456789012345678901234567890\", "
            "\"mcpServers\": {}}\n",
        };
        const struct client_info *c = clients_find("cursor");
        _cleanup_free_ char *path = xasprintf("%s/mcp.json", dir);

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *text = NULL;
                struct sbx_error err = {0};
                int r;

                write_text(path, bad[i]);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == -EINVAL && strstr(err.msg, "line 1"), "case %zu: %d %s", i, r,
                              err.msg);
                text = read_text(path);
                ck_assert_str_eq(text, bad[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(fine); i++) {
                _cleanup_free_ char *text = NULL;
                struct sbx_error err = {0};
                int r;

                write_text(path, fine[i]);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == 1, "fine %zu: %d %s", i, r, err.msg);
                text = read_text(path);
                ck_assert_msg(strstr(text, "18446744073709551615") &&
                                  strstr(text, "-9223372036854775808"),
                              "%s", text);
        }
}
END_TEST

/* A run as root on a user's HOME (sudo -E) rewrote the user's config as root's and made the
 * backup folder root's 0700, so the user's later runs failed at the backup. Now a config, its
 * folder (when it does not exist yet) or the backup folder another uid owns is refused, nothing
 * written. Control: the same tree owned by the running uid takes the entry. */
START_TEST(others_files_refused)
{
        const struct client_info *c = clients_find("cursor");
        _cleanup_free_ char *home = xasprintf("%s/home", dir),
                            *cdir = xasprintf("%s/.cursor", home),
                            *path = xasprintf("%s/mcp.json", cdir),
                            *bdir = xasprintf("%s/.local/state/vestibule/backups", home),
                            *text = NULL;
        const char *old = "{\"mcpServers\": {}}\n";
        struct sbx_error err = {0};
        struct stat st;
        uid_t me = geteuid(), other = me == 2000 ? 2001 : 2000;
        int r;

        if (me != 0) {
                /* not root: a folder root owns stands in for another user's */
                r = clients_install(c, "/var/lib/vestibule-no-such/mcp.json", &server, dir, NULL,
                                    NULL, &err);
                ck_assert_msg(r == -EPERM && strstr(err.msg, "without sudo"), "%d %s", r, err.msg);
                return;
        }
        ck_assert_int_eq(mkdir(home, 0755), 0);
        ck_assert_int_eq(mkdir(cdir, 0755), 0);
        write_text(path, old);
        ck_assert_int_eq(chown(home, other, other), 0);
        ck_assert_int_eq(chown(cdir, other, other), 0);
        ck_assert_int_eq(chown(path, other, other), 0);
        r = clients_install(c, path, &server, bdir, NULL, NULL, &err);
        ck_assert_msg(r == -EPERM && strstr(err.msg, path) && strstr(err.msg, "without sudo"),
                      "the config: %d %s", r, err.msg);
        text = read_text(path);
        ck_assert_str_eq(text, old);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_uid, other);
        ck_assert_int_eq(stat(bdir, &st) < 0 && errno == ENOENT, 1);

        /* no file yet: its folder's owner decides */
        ck_assert_int_eq(unlink(path), 0);
        r = clients_install(c, path, &server, bdir, NULL, NULL, &err);
        ck_assert_msg(r == -EPERM && strstr(err.msg, "without sudo"), "the folder: %d %s", r,
                      err.msg);
        ck_assert_int_eq(access(path, F_OK) < 0 && errno == ENOENT, 1);

        /* the config is ours, the backup folder (left by a sudo run the other way) is not */
        write_text(path, old);
        ck_assert_int_eq(chown(home, me, me), 0);
        ck_assert_int_eq(chown(cdir, me, me), 0);
        free(text);
        text = xasprintf("mkdir -p '%s'", bdir);
        ck_assert_int_eq(system(text), 0);
        ck_assert_int_eq(chown(bdir, other, other), 0);
        r = clients_install(c, path, &server, bdir, NULL, NULL, &err);
        ck_assert_msg(r == -EPERM && strstr(err.msg, bdir) && strstr(err.msg, "without sudo"),
                      "the backup folder: %d %s", r, err.msg);
        free(text);
        text = read_text(path);
        ck_assert_str_eq(text, old);

        /* control: all of it the running uid's */
        ck_assert_int_eq(chown(bdir, me, me), 0);
        r = clients_install(c, path, &server, bdir, NULL, NULL, &err);
        ck_assert_msg(r == 1, "control: %d %s", r, err.msg);
}
END_TEST

/* `--env` and PATH were silently lost when the old entry's env was not an object (it was kept
 * as it was, exit 0); now refused naming the fix, the file untouched. */
START_TEST(json_env_not_an_object_refused)
{
        static const char *const bad[] = {
            "{\"mcpServers\": {\"vestibule\": {\"command\": \"x\", \"env\": [\"A=1\"]}}}\n",
            "{\"mcpServers\": {\"vestibule\": {\"command\": \"x\", \"env\": \"A=1\"}}}\n",
            "{\"mcpServers\": {\"vestibule\": {\"command\": \"x\", \"env\": null}}}\n",
        };
        const struct client_info *c = clients_find("cursor");
        _cleanup_free_ char *path = xasprintf("%s/mcp.json", dir), *text = NULL;
        const char *fine = "{\"mcpServers\": {\"vestibule\": {\"command\": \"x\", \"env\": {\"A\": "
                           "\"1\"}}}}\n";
        struct sbx_error err = {0};
        int r;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                write_text(path, bad[i]);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == -EINVAL && strstr(err.msg, "\"env\"") &&
                                  strstr(err.msg, "not an object"),
                              "case %zu: %d %s", i, r, err.msg);
                free(text);
                text = read_text(path);
                ck_assert_str_eq(text, bad[i]);
        }
        ck_assert_int_eq(count_files(".vestibule-backup-"), 0);
        /* control: an object env takes --env and keeps A */
        write_text(path, fine);
        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == 1, "control: %d %s", r, err.msg);
        free(text);
        text = read_text(path);
        ck_assert_msg(strstr(text, "\"A\": \"1\"") && strstr(text, "VESTIBULE_BACKEND"), "%s",
                      text);
}
END_TEST

/* json-c cuts an object key at an escaped NUL, so {"a\u0000b": 1, "a": 2} lost a key on
 * rewrite; now refused, the file untouched. Control: \u0000 in a value is kept. */
START_TEST(json_nul_in_key_refused)
{
        const struct client_info *c = clients_find("cursor");
        _cleanup_free_ char *path = xasprintf("%s/mcp.json", dir), *text = NULL;
        const char *bad = "{\"a\\u0000b\": 1, \"a\": 2, \"mcpServers\": {}}\n";
        const char *fine = "{\"k\": \"a\\u0000b\", \"mcpServers\": {}}\n";
        struct sbx_error err = {0};
        int r;

        write_text(path, bad);
        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == -EINVAL && strstr(err.msg, "line 1") && strstr(err.msg, "\\u0000"),
                      "%d %s", r, err.msg);
        text = read_text(path);
        ck_assert_str_eq(text, bad);
        write_text(path, fine);
        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == 1, "control: %d %s", r, err.msg);
        free(text);
        text = read_text(path);
        ck_assert_msg(strstr(text, "\"k\": \"a\\u0000b\""), "%s", text);
}
END_TEST

/* --- Codex TOML ---------------------------------------------------------------------------- */

/* @path parses as TOML by a real parser (python3's tomllib); skips when python3 is missing. */
static bool toml_parses(const char *path)
{
        _cleanup_free_ char *cmd = NULL;

        if (access("/usr/bin/python3", X_OK) != 0)
                sbx_test_skip("no /usr/bin/python3 to check TOML with tomllib");
        cmd = xasprintf("/usr/bin/python3 -c 'import sys, tomllib; "
                        "tomllib.load(open(sys.argv[1], \"rb\"))' '%s' 2>/dev/null",
                        path);
        return system(cmd) == 0;
}

static const char codex_old[] = "model = \"o4\"  # a comment\n"
                                "notes = \"\"\"\n"
                                "[mcp_servers.vestibule]\n"
                                "this header is inside a multi-line string\n"
                                "\"\"\"\n"
                                "\n"
                                "[mcp_servers.other]\n"
                                "command = \"npx\"\n"
                                "args = [\n"
                                "  \"-y\",\n"
                                "  \"[mcp_servers.vestibule]\",  # an array over lines\n"
                                "]\n"
                                "env = { K = 'v' }\n"
                                "\n"
                                "# trailing comment\n"
                                "[profiles.fast]\n"
                                "model = 'x'\n";

START_TEST(toml_appended_others_byte_identical)
{
        const struct client_info *c = clients_find("codex");
        _cleanup_free_ char *path = xasprintf("%s/config.toml", dir), *text = NULL, *again = NULL,
                            *bak = NULL, *btext = NULL;
        struct sbx_error err = {0};
        int r;

        write_text(path, codex_old);
        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == 1, "%d %s", r, err.msg);
        text = read_text(path);
        /* everything that was there is still there, unchanged, before our table */
        ck_assert_int_eq(strncmp(text, codex_old, strlen(codex_old)), 0);
        ck_assert_str_eq(text + strlen(codex_old), "\n[mcp_servers.vestibule]\n"
                                                   "command = \"/usr/bin/vestibule-mcp\"\n"
                                                   "args = []\n"
                                                   "env = { VESTIBULE_BACKEND = \"native\", PATH = "
                                                   "\"/opt/x/bin:/usr/bin\" }\n");
        bak = only_backup();
        btext = read_text(bak);
        ck_assert_str_eq(btext, codex_old);

        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == 0, "second run: %d %s", r, err.msg);
        again = read_text(path);
        ck_assert_str_eq(again, text);
        ck_assert_int_eq(count_files(".vestibule-backup-"), 1);
}
END_TEST

START_TEST(toml_our_tables_replaced)
{
        const struct client_info *c = clients_find("codex");
        _cleanup_free_ char *path = xasprintf("%s/config.toml", dir), *text = NULL;
        struct client_server npx = {
            .name = "vestibule", .command = "npx", .args = test_args, .n_args = 2};
        struct sbx_error err = {0};
        int r;

        write_text(path, "[mcp_servers.a]\ncommand = \"a\"\n\n"
                         "[mcp_servers.vestibule]\ncommand = \"/old\"\n\n"
                         "# about b\n[mcp_servers.b]\ncommand = \"b\"\n\n"
                         "[mcp_servers.vestibule.env]\nX = \"1\"\n");
        r = clients_install(c, path, &npx, dir, NULL, NULL, &err);
        ck_assert_msg(r == 1, "%d %s", r, err.msg);
        text = read_text(path);
        ck_assert_str_eq(text, "[mcp_servers.a]\ncommand = \"a\"\n\n"
                               "[mcp_servers.vestibule]\ncommand = \"npx\"\n"
                               "args = [\"-y\", \"vestibule-mcp\"]\nenv = { X = \"1\" }\n\n"
                               "# about b\n[mcp_servers.b]\ncommand = \"b\"\n\n");
}
END_TEST

START_TEST(toml_unsafe_refused_untouched)
{
        static const char *const bad[] = {
            /* the server defined with dotted keys or inline, which we do not rewrite */
            "mcp_servers.vestibule.command = \"x\"\n",
            "[mcp_servers]\nvestibule = { command = \"x\" }\n",
            "[mcp_servers]\n\"vestibule\".command = \"x\"\n",
            /* what the scanner cannot follow */
            "a = \"unterminated\n",
            "a = \"\"\"never closed\n[mcp_servers.x]\n",
            "a = [1, 2\n",
            "[mcp_servers.vestibule\ncommand = \"x\"\n",
            "[[mcp_servers.vestibule]]\ncommand = \"x\"\n",
            "just words\n",
        };
        const struct client_info *c = clients_find("codex");
        _cleanup_free_ char *path = xasprintf("%s/config.toml", dir);

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *text = NULL;
                struct sbx_error err = {0};
                int r;

                write_text(path, bad[i]);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == -EINVAL, "case %zu: %d %s", i, r, err.msg);
                ck_assert_msg(strstr(err.msg, "line "), "case %zu: %s", i, err.msg);
                text = read_text(path);
                ck_assert_str_eq(text, bad[i]);
                ck_assert_int_eq(count_files(".vestibule-"), 0);
        }
}
END_TEST

/* issue 24 #7: `mcp_servers = { other = {...} }` (an inline table) took an appended
 * [mcp_servers.vestibule] header, which TOML forbids (a table defined twice); the file no longer
 * parsed and the run said it wrote the entry. Now refused, the file untouched, the error naming
 * the fix; a file with mcp_servers as [tables] or dotted keys still takes the entry and parses. */
START_TEST(toml_inline_mcp_servers_refused)
{
        static const char *const inl[] = {
            "mcp_servers = { other = { command = \"x\" } }\n",
            "model = \"o4\"\nmcp_servers = {}\n[profiles.a]\nmodel = \"y\"\n",
            "\"mcp_servers\" = { other = { command = \"x\" } }\n",
        };
        static const char *const fine[] = {
            "[mcp_servers]\nother = { command = \"x\" }\n",
            "mcp_servers.other.command = \"x\"\n",
            "[mcp_servers.other]\ncommand = \"x\"\n[[profiles]]\nname = \"p\"\n",
        };
        const struct client_info *c = clients_find("codex");
        _cleanup_free_ char *path = xasprintf("%s/config.toml", dir);

        for (size_t i = 0; i < ELEMENTSOF(inl); i++) {
                _cleanup_free_ char *text = NULL;
                struct sbx_error err = {0};
                int r;

                write_text(path, inl[i]);
                ck_assert_msg(toml_parses(path), "case %zu: the input is not TOML", i);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == -EINVAL, "case %zu: %d %s", i, r, err.msg);
                ck_assert_msg(strstr(err.msg, "inline table") &&
                                  strstr(err.msg, "[mcp_servers.NAME]"),
                              "case %zu: %s", i, err.msg);
                text = read_text(path);
                ck_assert_str_eq(text, inl[i]);
                ck_assert_int_eq(count_files(".vestibule-"), 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(fine); i++) {
                struct sbx_error err = {0};
                int r;

                write_text(path, fine[i]);
                ck_assert_msg(toml_parses(path), "case %zu: the input is not TOML", i);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == 1, "fine case %zu: %d %s", i, r, err.msg);
                ck_assert_msg(toml_parses(path), "fine case %zu: the result is not TOML", i);
        }
}
END_TEST

/* issue 24 #8 for Codex: the old table's env (inline, a [.env] sub-table, or env.K dotted keys)
 * and its other keys (timeouts, with their comments) stay; other sub-tables stay where they are. */
START_TEST(toml_rerun_keeps_user_settings)
{
        static const char *const old[] = {
            "[mcp_servers.vestibule]\ncommand = \"/old\"\nargs = [\"a\"]\n"
            "startup_timeout_sec = 30 # slow disk\n"
            "env = { VESTIBULE_WORKSPACE = '/w', \"VESTIBULE_BACKEND\" = \"naive\" }\n"
            "tool_timeout_sec = 600\n\n"
            "[mcp_servers.vestibule.tools.run_code]\napproval = \"never\"\n",
            "[mcp_servers.vestibule]\ncommand = \"/old\"\n"
            "startup_timeout_sec = 30 # slow disk\nenv.VESTIBULE_WORKSPACE = '/w'\n"
            "tool_timeout_sec = 600\nenv.VESTIBULE_BACKEND = \"naive\"\n\n"
            "[mcp_servers.vestibule.tools.run_code]\napproval = \"never\"\n",
            "[mcp_servers.vestibule.tools.run_code]\napproval = \"never\"\n\n"
            "[mcp_servers.vestibule]\ncommand = \"/old\"\n"
            "startup_timeout_sec = 30 # slow disk\ntool_timeout_sec = 600\n\n"
            "[mcp_servers.vestibule.env]\nVESTIBULE_BACKEND = \"naive\"\n"
            "VESTIBULE_WORKSPACE = '/w'  # the project\n",
        };
        const struct client_info *c = clients_find("codex");
        _cleanup_free_ char *path = xasprintf("%s/config.toml", dir);

        for (size_t i = 0; i < ELEMENTSOF(old); i++) {
                _cleanup_free_ char *text = NULL, *kept = NULL;
                struct sbx_error err = {0};
                int r;

                write_text(path, old[i]);
                ck_assert_msg(toml_parses(path), "case %zu: the input is not TOML", i);
                r = clients_install(c, path, &server, dir, NULL, &kept, &err);
                ck_assert_msg(r == 1, "case %zu: %d %s", i, r, err.msg);
                text = read_text(path);
                ck_assert_msg(toml_parses(path), "case %zu: not TOML:\n%s", i, text);
                ck_assert_msg(strstr(text, "[mcp_servers.vestibule]\n"
                                           "command = \"/usr/bin/vestibule-mcp\"\nargs = []\n"
                                           "env = { VESTIBULE_BACKEND = \"native\", PATH = "
                                           "\"/opt/x/bin:/usr/bin\", VESTIBULE_WORKSPACE = '/w' }\n"
                                           "startup_timeout_sec = 30 # slow disk\n"
                                           "tool_timeout_sec = 600\n") &&
                                  strstr(text, "VESTIBULE_WORKSPACE = '/w' }\n"
                                               "startup_timeout_sec = 30 # slow disk\n"
                                               "tool_timeout_sec = 600\n") &&
                                  strstr(text, "[mcp_servers.vestibule.tools.run_code]\n"
                                               "approval = \"never\"\n") &&
                                  !strstr(text, "naive") && !strstr(text, "/old"),
                              "case %zu:\n%s", i, text);
                ck_assert_msg(kept && strstr(kept, "VESTIBULE_WORKSPACE") &&
                                  strstr(kept, "startup_timeout_sec") &&
                                  !strstr(kept, "VESTIBULE_BACKEND"),
                              "case %zu: kept '%s'", i, kept ? kept : "(null)");
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == 0, "case %zu third run: %d %s", i, r, err.msg);
        }
}
END_TEST

/* Found by fuzz_toml: a kept env name that needs quotes was written back as a basic string with
 * escapes ('A"B' became "A\"B"), which the scanner refuses in a key, so the next install-client
 * run refused the file the last one wrote. And a quoted key with a control character (not TOML)
 * was taken, and written back with a \u escape the same way. Now a name is written back in the
 * quotes it needs no escape in, and a quoted key with a control character is refused. */
START_TEST(toml_quoted_env_names_read_back)
{
        static const char valid[] = "[mcp_servers.vestibule.env]\n'A\"B' = \"1\"\n"
                                    "\"it's\" = \"3\"\n\"E F\" = \"4\"\n";
        static const char *const bad[] = {
            "[mcp_servers.vestibule.env]\n\"A\vB\" = \"1\"\n",
            "[mcp_servers.vestibule]\nenv = { 'A\x01' = \"1\" }\n",
            "[mcp_servers.\"vestibule\x7f\"]\ncommand = \"x\"\n",
        };
        const struct client_info *c = clients_find("codex");
        _cleanup_free_ char *path = xasprintf("%s/config.toml", dir), *text = NULL;
        struct sbx_error err = {0};
        int r;

        write_text(path, valid);
        ck_assert_msg(toml_parses(path), "the input is not TOML");
        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == 1, "%d %s", r, err.msg);
        text = read_text(path);
        ck_assert_msg(toml_parses(path), "not TOML:\n%s", text);
        ck_assert_msg(strstr(text, ", 'A\"B' = \"1\", \"it's\" = \"3\", \"E F\" = \"4\" }\n"), "%s",
                      text);
        r = clients_install(c, path, &server, dir, NULL, NULL, &err);
        ck_assert_msg(r == 0, "the second run: %d %s\n%s", r, err.msg, text);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *now = NULL;

                write_text(path, bad[i]);
                ck_assert_msg(!toml_parses(path), "case %zu: the input is TOML", i);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == -EINVAL, "case %zu: %d %s", i, r, err.msg);
                now = read_text(path);
                ck_assert_str_eq(now, bad[i]);
        }
}
END_TEST

/* Found by fuzz_toml: the old env values go into our inline env table as written; a value with a
 * ',' outside strings (not TOML), a comment in a multi-line array (TOML, but not a string as
 * Codex's env needs) or a comment inside the old inline table (not TOML) ended its member early
 * there or swallowed the closing brace, so the next run refused the file this one wrote. Now
 * such an env is refused at once, the file untouched; controls: commas, braces and '#' inside
 * strings, a multi-line string and an array move and read back. */
START_TEST(toml_moved_env_values_read_back)
{
        static const char *const bad[] = {
            "[mcp_servers.vestibule]\ncommand = \"/old\"\nenv.A = x, B = \"1\"\n",
            "[mcp_servers.vestibule.env]\nA = [ \"a\", # it's, a list\n  \"b\" ]\n",
            "[mcp_servers.vestibule]\nenv = { A = \"1\" # }\n}\n",
        };
        static const char *const fine[] = {
            "[mcp_servers.vestibule]\ncommand = \"/old\"\nenv.A = 'a, b} # c'\n",
            "[mcp_servers.vestibule.env]\nA = \"\"\"x, }\ny # z\"\"\"\nB = \"{,\" # a comment\n",
            "[mcp_servers.vestibule]\nenv = { A = \"a # }\", B = [\"x\", 'y'] } # c\n",
        };
        const struct client_info *c = clients_find("codex");
        _cleanup_free_ char *path = xasprintf("%s/config.toml", dir);

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *text = NULL;
                struct sbx_error err = {0};
                int r;

                write_text(path, bad[i]);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == -EINVAL && strstr(err.msg, "cannot merge"), "case %zu: %d %s", i,
                              r, err.msg);
                text = read_text(path);
                ck_assert_str_eq(text, bad[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(fine); i++) {
                _cleanup_free_ char *text = NULL;
                struct sbx_error err = {0};
                int r;

                write_text(path, fine[i]);
                ck_assert_msg(toml_parses(path), "fine case %zu: the input is not TOML", i);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == 1, "fine case %zu: %d %s", i, r, err.msg);
                text = read_text(path);
                ck_assert_msg(toml_parses(path), "fine case %zu: not TOML:\n%s", i, text);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == 0, "fine case %zu, the second run: %d %s\n%s", i, r, err.msg,
                              text);
        }
}
END_TEST

/* Found by fuzz_toml (CI, stop 29): the editor holds at most 16 of our tables, 128 key lines in
 * them and 64 env values. A file inside those limits could merge into one beyond them: 16
 * sub-tables and no main table (the main one appended makes 17), 64 kept env values (ours added
 * make 66) or 126 other keys (command, args and env added make 129). The next run then refused
 * the file this one wrote. Now the merge reads its own output back first and refuses, the file
 * untouched; control: one table, value and key fewer on each count merges and reruns clean. */
static char *limits_text(size_t which, size_t n)
{
        char *out = NULL;
        size_t len = 0;
        FILE *b = open_memstream(&out, &len);

        ck_assert_ptr_nonnull(b);
        if (which == 0)
                for (size_t i = 0; i < n; i++)
                        fprintf(b, "[mcp_servers.vestibule.t%zu]\nk = 1\n", i);
        if (which == 1) {
                fputs("[mcp_servers.vestibule]\ncommand = \"/old\"\n[mcp_servers.vestibule.env]\n",
                      b);
                for (size_t i = 0; i < n; i++)
                        fprintf(b, "E%zu = \"v\"\n", i);
        }
        if (which == 2) {
                fputs("[mcp_servers.vestibule]\n", b);
                for (size_t i = 0; i < n; i++)
                        fprintf(b, "k%zu = %zu\n", i, i);
        }
        fclose(b);
        return out;
}

START_TEST(toml_merge_at_the_limits_reads_back)
{
        /* over the limit once ours is added; the control is one fewer */
        static const size_t at[] = {16, 63, 126};
        const struct client_info *c = clients_find("codex");
        _cleanup_free_ char *path = xasprintf("%s/config.toml", dir);

        for (size_t i = 0; i < ELEMENTSOF(at); i++) {
                _cleanup_free_ char *bad = limits_text(i, at[i]), *fine = limits_text(i, at[i] - 2),
                                    *text = NULL;
                struct sbx_error err = {0};
                int r;

                write_text(path, bad);
                ck_assert_msg(toml_parses(path), "case %zu: the input is not TOML", i);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == -EINVAL && strstr(err.msg, "would not read back"),
                              "case %zu: %d %s", i, r, err.msg);
                text = read_text(path);
                ck_assert_str_eq(text, bad);
                free(text);

                write_text(path, fine);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == 1, "control %zu: %d %s", i, r, err.msg);
                ck_assert_msg(toml_parses(path), "control %zu: not TOML", i);
                r = clients_install(c, path, &server, dir, NULL, NULL, &err);
                ck_assert_msg(r == 0, "control %zu, the second run: %d %s", i, r, err.msg);
                text = read_text(path);
        }
}
END_TEST

START_TEST(toml_string_escaping)
{
        const struct client_info *c = clients_find("codex");
        static const char *const env[] = {"VESTIBULE_WORKSPACE=/tmp/a \"b\"\\c\n"};
        struct client_server s = {.name = "v-1", .command = "/x", .env = env, .n_env = 1};
        _cleanup_free_ char *out = NULL;
        struct sbx_error err = {0};

        ck_assert_int_eq(clients_merge(c, "", &s, &out, NULL, &err), 0);
        ck_assert_str_eq(out, "[mcp_servers.v-1]\ncommand = \"/x\"\nargs = []\n"
                              "env = { VESTIBULE_WORKSPACE = \"/tmp/a \\\"b\\\"\\\\c\\n\" }\n");
        s.name = "bad name";
        ck_assert_int_eq(clients_merge(c, "", &s, &out, NULL, &err), -EINVAL);
}
END_TEST

static Suite *clients_suite(void)
{
        Suite *s = suite_create("clients");
        TCase *json = tcase_create("json"), *toml = tcase_create("toml");

        tcase_add_checked_fixture(json, setup, teardown);
        tcase_add_test(json, json_merge_keeps_others_backs_up_and_is_idempotent);
        tcase_add_test(json, json_existing_entry_updated_in_place);
        tcase_add_test(json, json_rerun_keeps_user_settings);
        tcase_add_test(json, json_new_file_and_folders_created_private);
        tcase_add_test(json, json_symlink_target_edited);
        tcase_add_test(json, json_malformed_refused_untouched);
        tcase_add_test(json, concurrent_installs_keep_every_entry);
        tcase_add_test(json, fifo_config_refused_without_hanging);
        tcase_add_test(json, symlinks_followed_backup_kept_out_of_the_target_folder);
        tcase_add_test(json, hard_linked_and_read_only_configs_refused);
        tcase_add_test(json, json_lossy_values_refused);
        tcase_add_test(json, others_files_refused);
        tcase_add_test(json, json_env_not_an_object_refused);
        tcase_add_test(json, json_nul_in_key_refused);
        suite_add_tcase(s, json);
        tcase_add_checked_fixture(toml, setup, teardown);
        tcase_add_test(toml, toml_appended_others_byte_identical);
        tcase_add_test(toml, toml_our_tables_replaced);
        tcase_add_test(toml, toml_unsafe_refused_untouched);
        tcase_add_test(toml, toml_string_escaping);
        tcase_add_test(toml, toml_inline_mcp_servers_refused);
        tcase_add_test(toml, toml_rerun_keeps_user_settings);
        tcase_add_test(toml, toml_quoted_env_names_read_back);
        tcase_add_test(toml, toml_moved_env_values_read_back);
        tcase_add_test(toml, toml_merge_at_the_limits_reads_back);
        suite_add_tcase(s, toml);
        return s;
}

int main(void)
{
        return sbx_test_run(clients_suite());
}
