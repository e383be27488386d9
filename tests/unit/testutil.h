/* testutil.h - shared helpers for the Check suites. */
#pragma once

#include <stdbool.h>

#include <check.h>

#include "config/config.h"
#include "run/run.h"

/**
 * sbx_test_skip() - a prerequisite is missing (no user namespaces, no Docker...): print @why
 * and exit 77 (CTest's SKIP_RETURN_CODE), or fail with exit 1 when SBX_TEST_MUST_RUN=1 (CI).
 */
void sbx_test_skip(const char *why) __attribute__((noreturn));

/** sbx_test_run() - run @s with CK_FORK on; return the process exit code (0 = all passed). */
int sbx_test_run(Suite *s);

/** sbx_test_tmpdir() - a new private temp directory (mkdtemp under $TMPDIR or /tmp). Caller frees.
 */
char *sbx_test_tmpdir(void);

/**
 * sbx_test_scratch_near() - a new private scratch folder on the filesystem of @src, so that
 * `cp -al` can hard-link @src's trees into it (link(2) fails with EXDEV across filesystems, and
 * /tmp is a tmpfs of its own on Debian 13, Fedora and Arch): sbx_test_tmpdir() when that is
 * @src's filesystem, else a new folder in the nearest sticky world-writable ancestor of @src on
 * its filesystem, else in @src's parent. *@same_fs: whether @src can be hard-linked into it
 * (false: copy it with cp -a). Caller frees. Aborts when no folder can be made at all.
 */
char *sbx_test_scratch_near(const char *src, bool *same_fs);

/** sbx_test_write_file() - create (or truncate) @dir/@rel holding @text; fails the test when it
 * cannot. */
void sbx_test_write_file(const char *dir, const char *rel, const char *text);

/* ---- a fake environment ------------------------------------------------------------------
 * For the code that reads settings through a getenv-shaped function (config_load_from(),
 * engine_endpoints_resolve(), engine_backend_new_with_env()): hand it fake_getenv and set the
 * variables with fake_env_set() / fake_env_put(). At most 64 variables; the strings are
 * borrowed (literals, or memory that outlives the test). Each test runs in its own fork
 * (CK_FORK), so the table starts empty in every test unless the suite's setup fills it. These
 * may be called outside a test too (a suite's main): they abort instead of failing a check. */

/** fake_env_reset() - forget every variable. */
void fake_env_reset(void);

/** fake_env_set() - set @name to @value (NULL: present but unset, which reads as NULL). */
void fake_env_set(const char *name, const char *value);

/** fake_env_put() - set a variable from "NAME=value" (putenv(3)'s form). */
void fake_env_put(const char *name_value);

/** fake_getenv() - the value fake_env_set() gave @name, or NULL. */
const char *fake_getenv(const char *name);

/* ---- the test user ---------------------------------------------------------------------- */

/**
 * sbx_test_become_user() - when root, become the unprivileged test user for the rest of this
 * test (its fork): SBX_TEST_USER (default vestibule-test, created by scripts/ci-user.sh), with
 * no supplementary groups, its real, effective and saved uid and gid, HOME set to its home and
 * TMPDIR to /tmp.
 * Not root: nothing to do (the suite already runs unprivileged). Fails the test when the user
 * does not exist or the switch fails.
 */
void sbx_test_become_user(void);

/* ---- a configuration built by hand ------------------------------------------------------ */

/**
 * sbx_test_config() - zero @c and fill in the values most suites use:
 * @workspace (borrowed), timeouts 10 s (default) and 60 s (max), code up to 262144 bytes,
 * output cap 20000 bytes, 256 MiB, 75 % of a CPU, 64 pids, a 64 MiB /tmp, 4 concurrent runs.
 * The caller sets the rest (backend, runtime, images, rootfs_dir, run_as) and what differs.
 */
void sbx_test_config(struct sbx_config *c, const char *workspace);

/**
 * sbx_test_config_run_as() - when root, make @c run code as the test user (VESTIBULE_RUN_AS,
 * as sbx_test_become_user() finds it) and hand the folder @owned (NULL: none) to that user.
 * A root test run so exercises the drop to VESTIBULE_RUN_AS. Not root: nothing to do.
 */
void sbx_test_config_run_as(struct sbx_config *c, const char *owned);

struct engine_conn;
struct engine_reply;
struct sbx_error;
/**
 * sbx_test_engine() - one Engine API call of a test's own (setup, checks, cleanup) through
 * engine_call() (src/engine/api.c): @method on @path, where "{}" takes @part (escaped; NULL when
 * @path has none), with @json as the body (NULL = none); any status is an answer.
 * @ret: the body in ret->raw, and in ret->json when it is JSON; engine_reply_done() it.
 * Return: the HTTP status, or -errno (no answer) with @err set.
 */
long sbx_test_engine(const struct engine_conn *c, const char *method, const char *path,
                     const char *part, const char *json, struct engine_reply *ret,
                     struct sbx_error *err);

/* ---- the naive backend behind the service's registry ------------------------------------ */

struct backend;
struct sandbox_registry;
/**
 * sbx_test_naive_config() - the settings of the suites that drive the service's registry over
 * the naive backend (test_registry, test_sessions, test_warm_keeper): a new private workspace in
 * *@ret_workspace (free with sbx_test_naive_close()), @cfg from sbx_test_config() with the naive
 * backend and 2 concurrent runs, and when root, code run as SBX_TEST_NAIVE_UID:GID (the
 * workspace chowned to it; no such user is needed). The caller may change @cfg before
 * sbx_test_naive_open(). Fails the test when the chown fails.
 */
#define SBX_TEST_NAIVE_UID 2000
#define SBX_TEST_NAIVE_GID 2000
void sbx_test_naive_config(struct sbx_config *cfg, char **ret_workspace);

/**
 * sbx_test_naive_open() - a naive backend (naive_backend_new(), src/naive/naive.h) on @cfg
 * (borrowed; must outlive it) in *@ret_backend and a registry of cfg->max_concurrent places
 * (sandbox_registry_new(), src/service/registry.h) in *@ret_reg. Fails the test when the
 * backend cannot be made.
 */
void sbx_test_naive_open(const struct sbx_config *cfg, struct backend **ret_backend,
                         struct sandbox_registry **ret_reg);

/**
 * sbx_test_naive_close() - free the registry (its sandboxes destroyed), then the backend, then
 * remove the workspace folder and free its name; each pointer is set to NULL. NULL-safe.
 */
void sbx_test_naive_close(char **workspace, struct backend **backend,
                          struct sandbox_registry **reg);

/** sbx_test_tmpdir_remove() - rm -rf the folder *@dir (from sbx_test_tmpdir(); sandboxed code
 * may leave read-only folders in it), free its name and set *@dir to NULL. NULL-safe. */
void sbx_test_tmpdir_remove(char **dir);

/**
 * sbx_test_backend_run() - one run_code call straight to @b's run() (run/backend.h), as the
 * suites of one backend make it: @lang, @code (NUL-ended), @timeout_s, @cfg (borrowed) and
 * @cancel_fd (-1: none). @res is zeroed first and filled (run_result_done() it).
 * Return: run()'s: 0, or -errno with @err.
 */
int sbx_test_backend_run(struct backend *b, const struct sbx_config *cfg, enum sbx_language lang,
                         const char *code, unsigned timeout_s, int cancel_fd,
                         struct run_result *res, struct sbx_error *err);

/**
 * sbx_test_owner_label_of() - an owner label (src/common/owner.h) in this process's place (host
 * name and pid namespace, as sbx_owner_label() writes them) for @pid with start time @start:
 * a dead or reused owner's label, say. Return: a new string (free() it); aborts when this
 * process's own label cannot be made.
 */
char *sbx_test_owner_label_of(int pid, unsigned long long start);
