/* testutil.c - shared helpers for the Check suites. */
#include "testutil.h"

#include <grp.h>
#include <stdbool.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/owner.h"
#include "common/xalloc.h"
#include "engine/engine.h"
#include "naive/naive.h"
#include "run/backend.h"
#include "service/registry.h"

void sbx_test_skip(const char *why)
{
        const char *must = getenv("SBX_TEST_MUST_RUN");

        if (must && strcmp(must, "1") == 0) {
                fprintf(stderr, "FAIL: prerequisite missing and SBX_TEST_MUST_RUN=1: %s\n", why);
                exit(1);
        }
        fprintf(stderr, "SKIP: %s\n", why);
        exit(77);
}

int sbx_test_run(Suite *s)
{
        SRunner *sr = srunner_create(s);
        int failed;

        srunner_set_fork_status(sr, CK_FORK);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? 0 : 1;
}

char *sbx_test_tmpdir(void)
{
        const char *base = getenv("TMPDIR");
        char *t = xasprintf("%s/vestibule-test-XXXXXX", base && *base ? base : "/tmp");

        if (!mkdtemp(t)) {
                perror("mkdtemp");
                abort();
        }
        return t;
}

void sbx_test_write_file(const char *dir, const char *rel, const char *text)
{
        char *p = xasprintf("%s/%s", dir, rel);
        FILE *f = fopen(p, "we");

        ck_assert_msg(f != NULL, "cannot create '%s'", p);
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
        free(p);
}

#define FAKE_ENV_MAX 64

static struct {
        const char *name; /* not NUL-terminated at name_len when it came from fake_env_put() */
        size_t name_len;
        const char *value;
} fake_env[FAKE_ENV_MAX];
static size_t fake_env_n;

void fake_env_reset(void)
{
        memset(fake_env, 0, sizeof(fake_env));
        fake_env_n = 0;
}

static void fake_env_set_n(const char *name, size_t name_len, const char *value)
{
        size_t i;

        for (i = 0; i < fake_env_n; i++)
                if (fake_env[i].name_len == name_len &&
                    strncmp(fake_env[i].name, name, name_len) == 0)
                        break;
        if (i == fake_env_n) {
                if (fake_env_n == FAKE_ENV_MAX) {
                        fprintf(stderr, "testutil: more than %d fake variables\n", FAKE_ENV_MAX);
                        abort();
                }
                fake_env_n++;
        }
        fake_env[i].name = name;
        fake_env[i].name_len = name_len;
        fake_env[i].value = value;
}

void fake_env_set(const char *name, const char *value)
{
        fake_env_set_n(name, strlen(name), value);
}

void fake_env_put(const char *name_value)
{
        const char *eq = strchr(name_value, '=');

        if (!eq) {
                fprintf(stderr, "testutil: fake_env_put('%s'): no '='\n", name_value);
                abort();
        }
        fake_env_set_n(name_value, (size_t)(eq - name_value), eq + 1);
}

const char *fake_getenv(const char *name)
{
        size_t n = strlen(name);

        for (size_t i = 0; i < fake_env_n; i++)
                if (fake_env[i].name_len == n && strncmp(fake_env[i].name, name, n) == 0)
                        return fake_env[i].value;
        return NULL;
}

/* The test user's passwd entry: SBX_TEST_USER, default vestibule-test; fails the test when
 * it does not exist. */
static struct passwd *test_user(void)
{
        const char *name = getenv("SBX_TEST_USER");
        struct passwd *pw;

        if (!name || !*name)
                name = "vestibule-test";
        pw = getpwnam(name);
        ck_assert_msg(pw != NULL, "no test user '%s' (scripts/ci-user.sh creates it)", name);
        return pw;
}

void sbx_test_become_user(void)
{
        struct passwd *pw;

        if (geteuid() != 0)
                return;
        pw = test_user();
        ck_assert_int_eq(setgroups(0, NULL), 0);
        ck_assert_int_eq(setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid), 0);
        ck_assert_int_eq(setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid), 0);
        setenv("HOME", pw->pw_dir, 1);
        setenv("TMPDIR", "/tmp", 1); /* root's may not be writable by the user */
}

void sbx_test_config_run_as(struct sbx_config *c, const char *owned)
{
        struct passwd *pw;

        if (geteuid() != 0)
                return;
        pw = test_user();
        c->run_as_set = true;
        c->run_as_uid = pw->pw_uid;
        c->run_as_gid = pw->pw_gid;
        if (owned)
                ck_assert_int_eq(chown(owned, pw->pw_uid, pw->pw_gid), 0);
}

void sbx_test_config(struct sbx_config *c, const char *workspace)
{
        memset(c, 0, sizeof(*c));
        c->workspace_dir = (char *)workspace;
        c->default_timeout_s = 10;
        c->max_timeout_s = 60;
        c->max_code_bytes = 262144;
        c->max_output_bytes = 20000;
        c->mem_mb = 256;
        c->cpu_pct = 75;
        c->pids_max = 64;
        c->tmpfs_mb = 64;
        c->max_concurrent = 4;
}

long sbx_test_engine(const struct engine_conn *c, const char *method, const char *path,
                     const char *part, const char *json, struct engine_reply *ret,
                     struct sbx_error *err)
{
        struct engine_call call = {.path = path,
                                   .parts = {part},
                                   .json = json,
                                   .any_status = true,
                                   .body = ENGINE_BODY_RAW,
                                   .timeout_ms = 60000,
                                   .what = "answer the test"};
        int r = engine_call(c, method, &call, ret, err);
        if (r < 0)
                return r;
        if (ret->len > 0)
                ret->json = json_tokener_parse(ret->raw);
        return ret->status;
}

/* new_dir_in() - mkdtemp(3) of DIR/NAMEXXXXXX; NULL when it cannot be made. Caller frees. */
static char *new_dir_in(const char *dir, const char *name)
{
        char *n = xasprintf("%s/%sXXXXXX", dir, name);

        if (mkdtemp(n))
                return n;
        free(n);
        return NULL;
}

/* sbx_test_scratch_near() (testutil.h) - a new private scratch folder on the filesystem of @src, so
 * that `cp -al` can hard-link @src's trees into it (link(2) fails with EXDEV across filesystems,
 * and /tmp is a tmpfs of its own on Debian 13, Fedora and Arch): sbx_test_tmpdir() ($TMPDIR or
 * /tmp) when that is @src's filesystem; else a new folder in the nearest sticky world-writable
 * ancestor of @src on its filesystem (/var/tmp for /var/tmp/vestibule-images/rootfs), else in
 * @src's parent. *same_fs: whether @src can be hard-linked into the folder (false: copy it, cp -a).
 * Caller frees. Aborts when no folder can be made at all (sbx_test_tmpdir). */
char *sbx_test_scratch_near(const char *src, bool *same_fs)
{
        char *t = sbx_test_tmpdir(), *n = NULL, *slash;
        _cleanup_free_ char *p = xstrdup(src), *parent = NULL;
        struct stat st_t, st_s, st_p;

        *same_fs = true;
        if (stat(src, &st_s) < 0 || stat(t, &st_t) < 0 || st_t.st_dev == st_s.st_dev)
                return t;
        while (!n && (slash = strrchr(p, '/')) && slash != p) {
                *slash = '\0';
                if (stat(p, &st_p) < 0 || st_p.st_dev != st_s.st_dev)
                        break;
                if (!parent)
                        parent = xstrdup(p);
                if ((st_p.st_mode & 01777) == 01777)
                        n = new_dir_in(p, "vestibule-test-");
        }
        if (!n && parent)
                n = new_dir_in(parent, ".vestibule-test-");
        if (!n) {
                *same_fs = false;
                return t;
        }
        rmdir(t);
        free(t);
        return n;
}

void sbx_test_naive_config(struct sbx_config *cfg, char **ret_workspace)
{
        char *ws = sbx_test_tmpdir();

        sbx_test_config(cfg, ws);
        cfg->backend = SBX_BACKEND_NAIVE;
        cfg->max_concurrent = 2;
        if (geteuid() == 0) {
                cfg->run_as_set = true;
                cfg->run_as_uid = SBX_TEST_NAIVE_UID;
                cfg->run_as_gid = SBX_TEST_NAIVE_GID;
                ck_assert_int_eq(chown(ws, SBX_TEST_NAIVE_UID, SBX_TEST_NAIVE_GID), 0);
        }
        *ret_workspace = ws;
}

void sbx_test_naive_open(const struct sbx_config *cfg, struct backend **ret_backend,
                         struct sandbox_registry **ret_reg)
{
        struct sbx_error err = {0};

        ck_assert_msg(naive_backend_new(cfg, ret_backend, &err) == 0, "%s", err.msg);
        *ret_reg = sandbox_registry_new(cfg->max_concurrent);
}

void sbx_test_naive_close(char **workspace, struct backend **backend, struct sandbox_registry **reg)
{
        if (reg)
                *reg = sandbox_registry_free(*reg);
        if (backend)
                *backend = backend_free(*backend);
        if (workspace)
                sbx_test_tmpdir_remove(workspace);
}

void sbx_test_tmpdir_remove(char **dir)
{
        if (!dir || !*dir)
                return;
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", *dir);
        (void)!system(cmd);
        free(*dir);
        *dir = NULL;
}

int sbx_test_backend_run(struct backend *b, const struct sbx_config *cfg, enum sbx_language lang,
                         const char *code, unsigned timeout_s, int cancel_fd,
                         struct run_result *res, struct sbx_error *err)
{
        struct run_request req = {
            .language = lang,
            .code = code,
            .code_len = strlen(code),
            .timeout_s = timeout_s,
            .cfg = cfg,
            .cancel_fd = cancel_fd,
        };

        memset(res, 0, sizeof(*res));
        return b->ops->run(b, &req, res, err);
}

char *sbx_test_owner_label_of(int pid, unsigned long long start)
{
        char me[320];

        if (sbx_owner_label(getpid(), me, sizeof(me)) < 0)
                abort();
        return xasprintf("%.*s:%d:%llu", (int)strcspn(me, ":"), me, pid, start);
}
