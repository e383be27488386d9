/* test_config.c - settings: defaults, environment over YAML, every parsing rule, the invalid
 * message, the config file lookup. The environment is injected through config_load_from(). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "config/pins.h"
#include "setup/pins.h"
#include "testutil.h"

/* The fake environment (testutil.h): HOME, and what a test adds with fake_env_put(). */
static void env_reset(void)
{
        fake_env_reset();
        fake_env_put("HOME=/home/tester");
}

static struct sbx_config *load_yaml(const char *yaml)
{
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};
        int r = config_load_from(fake_getenv, yaml, &c, &err);

        ck_assert_msg(r == 0, "config_load_from: %d %s", r, err.msg);
        ck_assert_ptr_nonnull(c);
        return c;
}

static struct sbx_config *load_env(void)
{
        return load_yaml(NULL);
}

/* Load with one variable set and expect it to be invalid with @needle in the message. */
static void expect_invalid(const char *kv, const char *needle)
{
        struct sbx_config *c;

        env_reset();
        fake_env_put(kv);
        c = load_env();
        ck_assert_msg(c->invalid, "'%s' was accepted", kv);
        ck_assert_msg(strstr(c->invalid_msg, needle), "'%s': message '%s' lacks '%s'", kv,
                      c->invalid_msg, needle);
        ck_assert_msg(strstr(c->invalid_msg, "restart the server"), "%s", c->invalid_msg);
        config_free(c);
}

static void setup(void)
{
        env_reset();
}

/* --- defaults ---------------------------------------------------------------------------- */

START_TEST(defaults_match_the_seed)
{
        struct sbx_config *c = load_env();

        ck_assert(!c->invalid);
        ck_assert_str_eq(c->workspace_dir, "/home/tester/.vestibule/workspace");
        ck_assert_str_eq(c->rootfs_dir, "/home/tester/.vestibule/rootfs");
        ck_assert_str_eq(c->audit_dir, "/home/tester/.vestibule/audit");
        ck_assert_ptr_null(c->config_file);
        ck_assert(!c->workspace_ro);
        ck_assert_int_eq(c->backend, SBX_BACKEND_AUTO);
        ck_assert_int_eq(c->runtime, SBX_RUNTIME_AUTO);
        ck_assert_int_eq(c->image_source, SBX_IMAGE_SOURCE_REGISTRY);
        ck_assert_str_eq(c->image_python,
                         "docker.io/library/python@sha256:"
                         "5e2bdb1b0d542d5039cffb8181c65930093949194a65c365dfb1b0fe13a4fa5b");
        ck_assert_str_eq(c->image_node,
                         "docker.io/library/node@sha256:"
                         "5ec23b7c622b00547753bc6ffd78085dd868a68aeb41c8e0a1418f033e13d96d");
        ck_assert_uint_eq(c->default_timeout_s, 10);
        ck_assert_uint_eq(c->max_timeout_s, 60);
        ck_assert_uint_eq(c->max_code_bytes, 262144);
        ck_assert_uint_eq(c->max_output_bytes, 20000);
        ck_assert_uint_eq(c->mem_mb, 256);
        ck_assert_uint_eq(c->cpu_pct, 75);
        ck_assert_uint_eq(c->pids_max, 128);
        ck_assert_uint_eq(c->tmpfs_mb, 64);
        ck_assert_uint_eq(c->max_concurrent, 4);
        ck_assert(!c->run_as_set);
        ck_assert_int_eq(c->log_level, 2 /* SBX_LOG_INFO */);
        config_free(c);
}
END_TEST

/* config_in_container(): only our server image's marker counts. Docker's /.dockerenv and
 * Podman's /run/.containerenv alone do not (a privileged dev or CI container, where native
 * works: this project's CI machine is one); the control is the image's marker in the same
 * faked root. */
START_TEST(container_markers)
{
        _cleanup_free_ char *root = sbx_test_tmpdir();
        char marker[64] = "x", path[PATH_MAX];
        static const char *const dirs[] = {"run", "usr", "usr/share", "usr/share/vestibule"};

        ck_assert(!config_in_container(root, marker, sizeof(marker)));
        ck_assert_str_eq(marker, "");
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
                ck_assert_int_eq(mkdir(path, 0755), 0);
        }
        snprintf(path, sizeof(path), "%s/run/.containerenv", root);
        ck_assert_int_ge(close(open(path, O_CREAT | O_WRONLY, 0644)), 0);
        snprintf(path, sizeof(path), "%s/.dockerenv", root);
        ck_assert_int_ge(close(open(path, O_CREAT | O_WRONLY, 0644)), 0);
        ck_assert(!config_in_container(root, marker, sizeof(marker)));
        ck_assert_str_eq(marker, "");
        snprintf(path, sizeof(path), "%s%s", root, SBX_OCI_IMAGE_MARKER);
        ck_assert_int_ge(close(open(path, O_CREAT | O_WRONLY, 0644)), 0);
        ck_assert(config_in_container(root, marker, sizeof(marker)));
        ck_assert_str_eq(marker, SBX_OCI_IMAGE_MARKER);
        ck_assert_int_eq(unlink(path), 0);
        snprintf(path, sizeof(path), "%s/.dockerenv", root);
        unlink(path);
        snprintf(path, sizeof(path), "%s/run/.containerenv", root);
        unlink(path);
        for (size_t i = ELEMENTSOF(dirs); i-- > 0;) {
                snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
                rmdir(path);
        }
        rmdir(root);
}
END_TEST

START_TEST(names)
{
        ck_assert_str_eq(config_backend_name(SBX_BACKEND_AUTO), "auto");
        ck_assert_str_eq(config_backend_name(SBX_BACKEND_NATIVE), "native");
        ck_assert_str_eq(config_backend_name(SBX_BACKEND_CONTAINER), "container");
        ck_assert_str_eq(config_backend_name(SBX_BACKEND_NAIVE), "naive");
        ck_assert_str_eq(config_backend_name(SBX_BACKEND_GVISOR), "gvisor");
        ck_assert_str_eq(config_runtime_name(SBX_RUNTIME_AUTO), "auto");
        ck_assert_str_eq(config_runtime_name(SBX_RUNTIME_DOCKER), "docker");
        ck_assert_str_eq(config_runtime_name(SBX_RUNTIME_PODMAN), "podman");
        ck_assert_ptr_null(config_free(NULL));
}
END_TEST

START_TEST(home_falls_back_to_passwd)
{
        struct passwd *pw = getpwuid(getuid());
        struct sbx_config *c;

        ck_assert_msg(pw && pw->pw_dir && pw->pw_dir[0] == '/', "no home in the password database");
        fake_env_reset(); /* no HOME */
        c = load_env();
        ck_assert(!c->invalid);
        _cleanup_free_ char *want = xasprintf("%s/.vestibule/workspace", pw->pw_dir);
        if (strcmp(pw->pw_dir, "/") == 0) {
                free(want);
                want = xstrdup("/.vestibule/workspace");
        }
        ck_assert_str_eq(c->workspace_dir, want);
        config_free(c);
}
END_TEST

/* What a client with the SDK's default environment leaves out: the engine's HOME comes from
 * the password database too; the runtime folder and the bus stay unset (their consumers derive
 * /run/user/UID with checks); whatever is passed is kept as given. */
START_TEST(client_environment_fallbacks)
{
        struct passwd *pw = getpwuid(getuid());
        struct sbx_config *c;

        ck_assert_msg(pw && pw->pw_dir && pw->pw_dir[0] == '/', "no home in the password database");
        fake_env_reset();
        fake_env_put("PATH=/usr/bin:/bin");
        fake_env_put("HOME=relative/home"); /* not absolute: as good as missing */
        c = load_env();
        ck_assert(!c->invalid);
        ck_assert_str_eq(c->engine_env.home, pw->pw_dir);
        ck_assert_ptr_null(c->engine_env.xdg_runtime_dir);
        ck_assert_ptr_null(c->engine_env.user_bus_address);
        config_free(c);

        /* control: passed values win, unchanged */
        env_reset();
        fake_env_put("XDG_RUNTIME_DIR=/run/user/4242");
        fake_env_put("DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/4242/bus");
        c = load_env();
        ck_assert_str_eq(c->engine_env.home, "/home/tester");
        ck_assert_str_eq(c->engine_env.xdg_runtime_dir, "/run/user/4242");
        ck_assert_str_eq(c->engine_env.user_bus_address, "unix:path=/run/user/4242/bus");
        config_free(c);
}
END_TEST

/* --- environment ------------------------------------------------------------------------- */

START_TEST(env_sets_every_setting)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_WORKSPACE=/srv/ws");
        fake_env_put("VESTIBULE_WORKSPACE_RO=YES");
        fake_env_put("VESTIBULE_RUNTIME=podman");
        fake_env_put("VESTIBULE_BACKEND=Naive");
        fake_env_put("VESTIBULE_IMAGE_PYTHON=example.org/py@sha256:abcd");
        fake_env_put("VESTIBULE_IMAGE_NODE=node:22-slim");
        fake_env_put("VESTIBULE_IMAGE_SOURCE=debian");
        fake_env_put("VESTIBULE_ROOTFS_DIR=/srv/rootfs");
        fake_env_put("VESTIBULE_AUDIT_DIR=~/audit");
        fake_env_put("VESTIBULE_DEFAULT_TIMEOUT_S=5");
        fake_env_put("VESTIBULE_MAX_TIMEOUT_S=120");
        fake_env_put("VESTIBULE_MAX_CODE_BYTES=1000");
        fake_env_put("VESTIBULE_MAX_OUTPUT_BYTES=  3000  ");
        fake_env_put("VESTIBULE_MEM_MB=512");
        fake_env_put("VESTIBULE_CPU_PCT=200");
        fake_env_put("VESTIBULE_PIDS_MAX=64");
        fake_env_put("VESTIBULE_TMPFS_MB=32");
        fake_env_put("VESTIBULE_MAX_CONCURRENT=2");
        fake_env_put("VESTIBULE_RUN_AS=2000:2001");
        fake_env_put("VESTIBULE_LOG_LEVEL=debug");
        c = load_env();
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_str_eq(c->workspace_dir, "/srv/ws");
        ck_assert(c->workspace_ro);
        ck_assert_int_eq(c->runtime, SBX_RUNTIME_PODMAN);
        ck_assert_int_eq(c->backend, SBX_BACKEND_NAIVE);
        ck_assert_str_eq(c->image_python, "example.org/py@sha256:abcd");
        ck_assert_str_eq(c->image_node, "node:22-slim");
        ck_assert_int_eq(c->image_source, SBX_IMAGE_SOURCE_DEBIAN);
        ck_assert_str_eq(c->rootfs_dir, "/srv/rootfs");
        ck_assert_str_eq(c->audit_dir, "/home/tester/audit");
        ck_assert_uint_eq(c->default_timeout_s, 5);
        ck_assert_uint_eq(c->max_timeout_s, 120);
        ck_assert_uint_eq(c->max_code_bytes, 1000);
        ck_assert_uint_eq(c->max_output_bytes, 3000);
        ck_assert_uint_eq(c->mem_mb, 512);
        ck_assert_uint_eq(c->cpu_pct, 200);
        ck_assert_uint_eq(c->pids_max, 64);
        ck_assert_uint_eq(c->tmpfs_mb, 32);
        ck_assert_uint_eq(c->max_concurrent, 2);
        ck_assert(c->run_as_set);
        ck_assert_uint_eq(c->run_as_uid, 2000);
        ck_assert_uint_eq(c->run_as_gid, 2001);
        ck_assert_int_eq(c->log_level, 3);
        config_free(c);
}
END_TEST

START_TEST(trace_setting)
{
        struct sbx_config *c;

        c = load_env(); /* default: off */
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert(!c->trace_timing);
        config_free(c);
        fake_env_put("VESTIBULE_TRACE=timing");
        c = load_env();
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert(c->trace_timing);
        config_free(c);
}
END_TEST

START_TEST(trace_setting_invalid)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_TRACE=verbose");
        c = load_env();
        ck_assert(c->invalid);
        ck_assert(!c->trace_timing);
        ck_assert_msg(strstr(c->invalid_msg, "VESTIBULE_TRACE='verbose'") &&
                          strstr(c->invalid_msg, "off or timing"),
                      "%s", c->invalid_msg);
        config_free(c);
}
END_TEST

START_TEST(blank_means_unset)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_MEM_MB=");
        fake_env_put("VESTIBULE_WORKSPACE=   ");
        fake_env_put("VESTIBULE_BACKEND=\t");
        c = load_env();
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_uint_eq(c->mem_mb, 256);
        ck_assert_str_eq(c->workspace_dir, "/home/tester/.vestibule/workspace");
        ck_assert_int_eq(c->backend, SBX_BACKEND_AUTO);
        config_free(c);
}
END_TEST

/* --- numbers ----------------------------------------------------------------------------- */

START_TEST(numbers_positive_whole_only)
{
        static const char *const bad[] = {
            "VESTIBULE_MEM_MB=0",
            "VESTIBULE_MEM_MB=-1",
            "VESTIBULE_MEM_MB=10s",
            "VESTIBULE_MEM_MB=+10",
            "VESTIBULE_MEM_MB=1 0",
            "VESTIBULE_MEM_MB=1.5",
            "VESTIBULE_MEM_MB=0x10",
            "VESTIBULE_MEM_MB=abc",
            "VESTIBULE_MEM_MB=1e3",
            "VESTIBULE_MEM_MB=99999999999999999999999999",
            "VESTIBULE_MEM_MB=4294967296", /* would wrap an unsigned */
            "VESTIBULE_MAX_CONCURRENT=1025",
            "VESTIBULE_MAX_TIMEOUT_S=86401",
            "VESTIBULE_MAX_CODE_BYTES=18446744073709551616",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                const char *name_end = strchr(bad[i], '=');
                _cleanup_free_ char *name = xstrndup(bad[i], (size_t)(name_end - bad[i]));
                expect_invalid(bad[i], name);
        }
}
END_TEST

START_TEST(numbers_trimmed_and_limits)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_MEM_MB= 007 ");
        fake_env_put("VESTIBULE_PIDS_MAX=1");
        fake_env_put("VESTIBULE_MAX_CONCURRENT=1024");
        fake_env_put("VESTIBULE_CPU_PCT=100000");
        c = load_env();
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_uint_eq(c->mem_mb, 7);
        ck_assert_uint_eq(c->pids_max, 1);
        ck_assert_uint_eq(c->max_concurrent, 1024);
        ck_assert_uint_eq(c->cpu_pct, 100000);
        config_free(c);
}
END_TEST

START_TEST(invalid_message_names_setting_value_and_fix)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_MEM_MB=abc");
        c = load_env();
        ck_assert(c->invalid);
        ck_assert_str_eq(c->invalid_msg,
                         "invalid setting VESTIBULE_MEM_MB='abc': must be a positive whole number "
                         "of MiB, e.g. 256, at most 1048576; fix it in the MCP client's env for "
                         "vestibule and restart the server");
        ck_assert_uint_eq(c->mem_mb, 256); /* the default stays */
        config_free(c);
}
END_TEST

START_TEST(invalid_value_is_escaped_in_message)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_BACKEND=\x1b]0;pwned\x07\xff");
        c = load_env();
        ck_assert(c->invalid);
        ck_assert_ptr_null(strchr(c->invalid_msg, '\x1b'));
        ck_assert_ptr_null(strchr(c->invalid_msg, '\x07'));
        ck_assert_ptr_null(memchr(c->invalid_msg, 0xff, strlen(c->invalid_msg)));
        ck_assert_ptr_nonnull(strstr(c->invalid_msg, "'\\x1b]0;pwned\\x07\\xff'"));
        config_free(c);
}
END_TEST

START_TEST(every_invalid_setting_is_named)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_MEM_MB=abc");
        fake_env_put("VESTIBULE_CPU_PCT=0");
        fake_env_put("VESTIBULE_BACKEND=vm");
        c = load_env();
        ck_assert(c->invalid);
        /* The first in the settings' order gets the full message, the others are named. */
        ck_assert_msg(strncmp(c->invalid_msg, "invalid setting VESTIBULE_BACKEND='vm'", 38) == 0,
                      "%s", c->invalid_msg);
        ck_assert_msg(strstr(c->invalid_msg, "(also invalid: VESTIBULE_MEM_MB, VESTIBULE_CPU_PCT)"),
                      "%s", c->invalid_msg);
        config_free(c);
}
END_TEST

/* --- words ------------------------------------------------------------------------------- */

START_TEST(on_off_words)
{
        static const char *const on[] = {"1", "true", "YES", "On", "TRUE"};
        static const char *const off[] = {"0", "false", "No", "OFF"};

        for (size_t i = 0; i < ELEMENTSOF(on) + ELEMENTSOF(off); i++) {
                bool want = i < ELEMENTSOF(on);
                const char *w = want ? on[i] : off[i - ELEMENTSOF(on)];
                _cleanup_free_ char *kv = xasprintf("VESTIBULE_WORKSPACE_RO=%s", w);
                struct sbx_config *c;

                env_reset();
                fake_env_put(kv);
                c = load_env();
                ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
                ck_assert_msg(c->workspace_ro == want, "'%s'", w);
                config_free(c);
        }
        expect_invalid("VESTIBULE_WORKSPACE_RO=maybe", "VESTIBULE_WORKSPACE_RO='maybe'");
        expect_invalid("VESTIBULE_WORKSPACE_RO=2", "1/true/yes/on or 0/false/no/off");
}
END_TEST

START_TEST(enum_words)
{
        expect_invalid("VESTIBULE_BACKEND=vm", "auto, gvisor, native, container or naive");
        expect_invalid("VESTIBULE_RUNTIME=lxc", "auto, docker or podman");
        expect_invalid("VESTIBULE_IMAGE_SOURCE=pypi", "registry or debian");
        expect_invalid("VESTIBULE_LOG_LEVEL=loud", "error, warning, info or debug");
        expect_invalid("VESTIBULE_IMAGE_PYTHON=python 3", "VESTIBULE_IMAGE_PYTHON");
        expect_invalid("VESTIBULE_IMAGE_NODE=node;rm", "VESTIBULE_IMAGE_NODE");
}
END_TEST

/* VESTIBULE_CONTAINER_RUNTIME: unset by default; a runtime name kept as given; anything that
 * could break the create body's JSON or the grade's text refused, naming the rule. */
START_TEST(container_runtime_names)
{
        struct sbx_config *c = load_env();
        ck_assert_ptr_null(c->container_runtime);
        config_free(c);
        env_reset();
        fake_env_put("VESTIBULE_CONTAINER_RUNTIME= runsc ");
        c = load_env();
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_str_eq(c->container_runtime, "runsc");
        config_free(c);
        env_reset();
        fake_env_put("VESTIBULE_CONTAINER_RUNTIME=io.containerd.runsc.v1");
        c = load_env();
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_str_eq(c->container_runtime, "io.containerd.runsc.v1");
        config_free(c);
        expect_invalid("VESTIBULE_CONTAINER_RUNTIME=run sc", "registered with the engine");
        expect_invalid("VESTIBULE_CONTAINER_RUNTIME=runsc\"}", "VESTIBULE_CONTAINER_RUNTIME");
        expect_invalid("VESTIBULE_CONTAINER_RUNTIME=-runsc", "e.g. runsc");
        expect_invalid("VESTIBULE_CONTAINER_RUNTIME=/usr/bin/runsc", "e.g. runsc");
        expect_invalid("VESTIBULE_CONTAINER_RUNTIME="
                       "r1234567890123456789012345678901234567890123456789012345678901234",
                       "at most 64");
}
END_TEST

START_TEST(run_as_rules)
{
        static const char *const bad[] = {
            "VESTIBULE_RUN_AS=0:0",          "VESTIBULE_RUN_AS=0:2000",
            "VESTIBULE_RUN_AS=2000:0",       "VESTIBULE_RUN_AS=root",
            "VESTIBULE_RUN_AS=2000",         "VESTIBULE_RUN_AS=2000:",
            "VESTIBULE_RUN_AS=:2000",        "VESTIBULE_RUN_AS=-1:-1",
            "VESTIBULE_RUN_AS=4294967295:1", "VESTIBULE_RUN_AS=2000:2000:1",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                expect_invalid(bad[i], "VESTIBULE_RUN_AS");
        expect_invalid("VESTIBULE_RUN_AS=0:0", "0 is root");
}
END_TEST

/* --- paths ------------------------------------------------------------------------------- */

START_TEST(paths_expand_and_normalise)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_WORKSPACE=~/ws/");
        fake_env_put("VESTIBULE_ROOTFS_DIR=/srv//images/./rootfs/");
        fake_env_put("VESTIBULE_AUDIT_DIR=/var/log/vestibule");
        c = load_env();
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_str_eq(c->workspace_dir, "/home/tester/ws");
        ck_assert_str_eq(c->rootfs_dir, "/srv/images/rootfs");
        ck_assert_str_eq(c->audit_dir, "/var/log/vestibule");
        config_free(c);
}
END_TEST

START_TEST(paths_rejected)
{
        expect_invalid("VESTIBULE_WORKSPACE=relative/ws", "must be an absolute path");
        expect_invalid("VESTIBULE_WORKSPACE=~bob/ws", "'~user' is not supported");
        expect_invalid("VESTIBULE_WORKSPACE=/srv/a/../b", "'..'");
        expect_invalid("VESTIBULE_AUDIT_DIR=/", "root folder");
        /* issue 12, finding 28: the home folder and its ancestors, as '/' */
        expect_invalid("VESTIBULE_WORKSPACE=~", "your home folder '/home/tester'");
        expect_invalid("VESTIBULE_WORKSPACE=/home/tester/", "your home folder");
        expect_invalid("VESTIBULE_WORKSPACE=/home", "your home folder");
        expect_invalid("VESTIBULE_ROOTFS_DIR=//.//", "root folder");
}
END_TEST

/* --- cross checks ------------------------------------------------------------------------ */

START_TEST(default_timeout_above_max)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_DEFAULT_TIMEOUT_S=90");
        c = load_env();
        ck_assert(c->invalid);
        ck_assert_ptr_nonnull(strstr(c->invalid_msg, "VESTIBULE_DEFAULT_TIMEOUT_S=90"));
        ck_assert_ptr_nonnull(strstr(c->invalid_msg, "VESTIBULE_MAX_TIMEOUT_S=60"));
        config_free(c);

        fake_env_put("VESTIBULE_MAX_TIMEOUT_S=90"); /* equal is fine */
        c = load_env();
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        config_free(c);
}
END_TEST

START_TEST(folders_must_not_nest)
{
        expect_invalid("VESTIBULE_AUDIT_DIR=~/.vestibule/workspace/audit", "VESTIBULE_AUDIT_DIR");
        expect_invalid("VESTIBULE_ROOTFS_DIR=~/.vestibule/workspace", "VESTIBULE_ROOTFS_DIR");
        expect_invalid("VESTIBULE_WORKSPACE=~/.vestibule/rootfs/python/workspace",
                       "VESTIBULE_WORKSPACE");
        expect_invalid("VESTIBULE_AUDIT_DIR=~/.vestibule/rootfs", "must not lie inside");

        /* A sibling whose name starts the same is not inside. */
        struct sbx_config *c;
        env_reset();
        fake_env_put("VESTIBULE_AUDIT_DIR=~/.vestibule/workspace2");
        c = load_env();
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        config_free(c);
}
END_TEST

/* --- YAML -------------------------------------------------------------------------------- */

START_TEST(yaml_values)
{
        struct sbx_config *c = load_yaml("# settings\n"
                                         "mem_mb: 512\n"
                                         "workspace_ro: on\n"
                                         "backend: naive\n"
                                         "workspace: ~/ws\n"
                                         "image_node: \"node@sha256:ffff\"\n"
                                         "run_as: 2000:2000\n"
                                         "cpu_pct: ' 50 '\n"
                                         "pids_max:\n"
                                         "tmpfs_mb: ~\n"
                                         "max_concurrent: ''\n");
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_uint_eq(c->mem_mb, 512);
        ck_assert(c->workspace_ro);
        ck_assert_int_eq(c->backend, SBX_BACKEND_NAIVE);
        ck_assert_str_eq(c->workspace_dir, "/home/tester/ws");
        ck_assert_str_eq(c->image_node, "node@sha256:ffff");
        ck_assert(c->run_as_set && c->run_as_uid == 2000 && c->run_as_gid == 2000);
        ck_assert_uint_eq(c->cpu_pct, 50);
        ck_assert_uint_eq(c->pids_max, 128);     /* null = unset */
        ck_assert_uint_eq(c->tmpfs_mb, 64);      /* ~ = unset */
        ck_assert_uint_eq(c->max_concurrent, 4); /* blank = unset */
        config_free(c);
}
END_TEST

START_TEST(debian_source_picks_debian_images)
{
        struct sbx_config *c;
        struct setup_pins p = {0};
        struct sbx_error err = {0};

        /* The names config uses are the ones setup imports under (images/pins). */
        ck_assert_msg(setup_pins_load(&p, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(p.python_debian, SBX_DEBIAN_IMAGE_PYTHON);
        ck_assert_str_eq(p.node_debian, SBX_DEBIAN_IMAGE_NODE);
        setup_pins_done(&p);

        /* Control: the registry source keeps the pinned digests. */
        fake_env_put("VESTIBULE_IMAGE_SOURCE=registry");
        c = load_env();
        ck_assert_str_eq(c->image_python, SBX_PIN_IMAGE_PYTHON);
        ck_assert_str_eq(c->image_node, SBX_PIN_IMAGE_NODE);
        config_free(c);

        env_reset();
        fake_env_put("VESTIBULE_IMAGE_SOURCE=debian");
        c = load_env();
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_str_eq(c->image_python, "vestibule/python:bookworm");
        ck_assert_str_eq(c->image_node, "vestibule/node:bookworm");
        config_free(c);

        /* From the file too. */
        env_reset();
        c = load_yaml("image_source: debian\n");
        ck_assert_str_eq(c->image_python, "vestibule/python:bookworm");
        ck_assert_str_eq(c->image_node, "vestibule/node:bookworm");
        config_free(c);

        /* An explicit name wins, each on its own (env or file); a blank one is unset. */
        env_reset();
        fake_env_put("VESTIBULE_IMAGE_SOURCE=debian");
        fake_env_put("VESTIBULE_IMAGE_PYTHON=example.org/py:1");
        fake_env_put("VESTIBULE_IMAGE_NODE=  ");
        c = load_env();
        ck_assert_str_eq(c->image_python, "example.org/py:1");
        ck_assert_str_eq(c->image_node, "vestibule/node:bookworm");
        config_free(c);

        env_reset();
        fake_env_put("VESTIBULE_IMAGE_SOURCE=debian");
        c = load_yaml("image_node: example.org/node:2\n");
        ck_assert_str_eq(c->image_python, "vestibule/python:bookworm");
        ck_assert_str_eq(c->image_node, "example.org/node:2");
        config_free(c);
}
END_TEST

START_TEST(env_wins_over_yaml)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_MEM_MB=1024");
        fake_env_put("VESTIBULE_PIDS_MAX="); /* blank env: the file's value applies */
        c = load_yaml("mem_mb: 512\npids_max: 10\n");
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_uint_eq(c->mem_mb, 1024);
        ck_assert_uint_eq(c->pids_max, 10);
        config_free(c);

        /* A bad file value that the environment overrides is never used. */
        env_reset();
        fake_env_put("VESTIBULE_MEM_MB=100");
        c = load_yaml("mem_mb: lots\n");
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_uint_eq(c->mem_mb, 100);
        config_free(c);
}
END_TEST

START_TEST(yaml_invalid_value_names_file_and_key)
{
        struct sbx_config *c;

        fake_env_put("VESTIBULE_CONFIG=/etc/vb.yaml");
        c = load_yaml("mem_mb: -5\n");
        ck_assert(c->invalid);
        ck_assert_str_eq(c->config_file, "/etc/vb.yaml");
        ck_assert_msg(strstr(c->invalid_msg, "mem_mb='-5'"), "%s", c->invalid_msg);
        ck_assert_msg(strstr(c->invalid_msg, "config file '/etc/vb.yaml'"), "%s", c->invalid_msg);
        ck_assert_msg(strstr(c->invalid_msg, "VESTIBULE_MEM_MB"), "%s", c->invalid_msg);
        ck_assert_uint_eq(c->mem_mb, 256);
        config_free(c);
}
END_TEST

START_TEST(yaml_unknown_key)
{
        struct sbx_config *c;

        c = load_yaml("mem_mb: 5\nmemory: 512\n");
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "unknown setting 'memory'"), "%s", c->invalid_msg);
        ck_assert_msg(strstr(c->invalid_msg, "line 2"), "%s", c->invalid_msg);
        /* A bad file is not applied at all, not even its valid lines. */
        ck_assert_uint_eq(c->mem_mb, 256);
        config_free(c);

        c = load_yaml("VESTIBULE_MEM_MB: 5\n");
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "did you mean 'mem_mb'"), "%s", c->invalid_msg);
        config_free(c);

        c = load_yaml("MEM_MB: 5\n");
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "did you mean 'mem_mb'"), "%s", c->invalid_msg);
        config_free(c);

        c = load_yaml("config: /x.yaml\n"); /* only an environment variable */
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "unknown setting 'config'"), "%s", c->invalid_msg);
        config_free(c);
}
END_TEST

START_TEST(yaml_malformed_names_line_and_column)
{
        struct sbx_config *c;

        fake_env_put("XDG_CONFIG_HOME=/xdg");
        c = load_yaml("mem_mb: 5\nbackend: [native\n");
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "'/xdg/vestibule/config.yaml' is not valid YAML"),
                      "%s", c->invalid_msg);
        ck_assert_msg(strstr(c->invalid_msg, "line 3, column 1"), "%s", c->invalid_msg);
        /* ... and where the unclosed '[' began. */
        ck_assert_msg(
            strstr(c->invalid_msg, "(while parsing a flow sequence at line 2, column 10)"), "%s",
            c->invalid_msg);
        config_free(c);

        c = load_yaml("mem_mb: 5\n  bad indent: x\n");
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "line 2, column"), "%s", c->invalid_msg);
        config_free(c);
}
END_TEST

START_TEST(yaml_shapes)
{
        struct sbx_config *c;

        c = load_yaml("backend:\n  - native\n");
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "'backend'") && strstr(c->invalid_msg, "single value"),
                      "%s", c->invalid_msg);
        config_free(c);

        c = load_yaml("- mem_mb\n");
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "must be a mapping"), "%s", c->invalid_msg);
        config_free(c);

        c = load_yaml("mem_mb: 5\nmem_mb: 6\n");
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "appears twice"), "%s", c->invalid_msg);
        config_free(c);

        c = load_yaml("mem_mb: 5\n---\nmem_mb: 6\n");
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "more than one YAML document"), "%s", c->invalid_msg);
        config_free(c);

        c = load_yaml("");
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        config_free(c);

        c = load_yaml("# only a comment\n");
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        config_free(c);
}
END_TEST

/* --- the real file lookup (config_load, environment set inside the test's fork) ----------- */

static void write_file(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static void rm_rf(char **dir)
{
        if (*dir) {
                _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", *dir);
                (void)!system(cmd);
                free(*dir);
        }
}

static void clear_vestibule_env(void)
{
        extern char **environ;
        for (;;) {
                char **e;
                for (e = environ; *e; e++)
                        if (strncmp(*e, "VESTIBULE_", 10) == 0)
                                break;
                if (!*e)
                        return;
                _cleanup_free_ char *name = xstrndup(*e, strcspn(*e, "="));
                unsetenv(name);
        }
}

START_TEST(file_from_vestibule_config)
{
        _cleanup_(rm_rf) char *dir = sbx_test_tmpdir();
        _cleanup_free_ char *path = xasprintf("%s/my.yaml", dir);
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};

        clear_vestibule_env();
        write_file(path, "mem_mb: 300\n");
        setenv("VESTIBULE_CONFIG", path, 1);
        setenv("VESTIBULE_PIDS_MAX", "99", 1);
        ck_assert_int_eq(config_load(&c, &err), 0);
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_str_eq(c->config_file, path);
        ck_assert_uint_eq(c->mem_mb, 300);
        ck_assert_uint_eq(c->pids_max, 99);
        config_free(c);

        /* Writable by others: not trusted (it could turn isolation off). */
        ck_assert_int_eq(chmod(path, 0666), 0);
        ck_assert_int_eq(config_load(&c, &err), 0);
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "writable by other users") &&
                          strstr(c->invalid_msg, "chmod go-w"),
                      "%s", c->invalid_msg);
        ck_assert_uint_eq(c->mem_mb, 256); /* nothing from it applied */
        config_free(c);
        ck_assert_int_eq(chmod(path, 0620), 0);
        ck_assert_int_eq(config_load(&c, &err), 0);
        ck_assert(c->invalid);
        config_free(c);
        if (geteuid() == 0) {
                /* Owned by another (non-root) user. */
                ck_assert_int_eq(chmod(path, 0644), 0);
                ck_assert_int_eq(chown(path, 2000, 2000), 0);
                ck_assert_int_eq(config_load(&c, &err), 0);
                ck_assert(c->invalid);
                ck_assert_msg(strstr(c->invalid_msg, "owned by another user"), "%s",
                              c->invalid_msg);
                config_free(c);
                ck_assert_int_eq(chown(path, 0, 0), 0);
        }
        ck_assert_int_eq(chmod(path, 0644), 0); /* control: readable by others is fine */
        ck_assert_int_eq(config_load(&c, &err), 0);
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_uint_eq(c->mem_mb, 300);
        config_free(c);

        /* Named but missing: invalid, naming the file. */
        _cleanup_free_ char *missing = xasprintf("%s/nope.yaml", dir);
        setenv("VESTIBULE_CONFIG", missing, 1);
        ck_assert_int_eq(config_load(&c, &err), 0);
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, missing), "%s", c->invalid_msg);
        config_free(c);

        /* A directory is not a config file. */
        setenv("VESTIBULE_CONFIG", dir, 1);
        ck_assert_int_eq(config_load(&c, &err), 0);
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "not a regular file"), "%s", c->invalid_msg);
        config_free(c);

        /* A relative VESTIBULE_CONFIG is named. */
        setenv("VESTIBULE_CONFIG", "conf.yaml", 1);
        ck_assert_int_eq(config_load(&c, &err), 0);
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "VESTIBULE_CONFIG='conf.yaml'"), "%s", c->invalid_msg);
        config_free(c);
}
END_TEST

START_TEST(file_from_xdg_and_default_missing)
{
        _cleanup_(rm_rf) char *dir = sbx_test_tmpdir();
        _cleanup_free_ char *sub = xasprintf("%s/vestibule", dir);
        _cleanup_free_ char *path = xasprintf("%s/config.yaml", sub);
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};

        clear_vestibule_env();
        setenv("HOME", dir, 1);
        setenv("XDG_CONFIG_HOME", dir, 1);
        /* No file: fine, nothing read. */
        ck_assert_int_eq(config_load(&c, &err), 0);
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_ptr_null(c->config_file);
        config_free(c);

        ck_assert_int_eq(mkdir(sub, 0700), 0);
        write_file(path, "tmpfs_mb: 16\n");
        ck_assert_int_eq(config_load(&c, &err), 0);
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_str_eq(c->config_file, path);
        ck_assert_uint_eq(c->tmpfs_mb, 16);
        config_free(c);

        /* XDG unset: ~/.config/vestibule/config.yaml. */
        unsetenv("XDG_CONFIG_HOME");
        _cleanup_free_ char *d2 = xasprintf("%s/.config", dir);
        _cleanup_free_ char *d3 = xasprintf("%s/.config/vestibule", dir);
        _cleanup_free_ char *p3 = xasprintf("%s/config.yaml", d3);
        ck_assert_int_eq(mkdir(d2, 0700), 0);
        ck_assert_int_eq(mkdir(d3, 0700), 0);
        write_file(p3, "mem_mb: [\n");
        ck_assert_int_eq(config_load(&c, &err), 0);
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, p3), "%s", c->invalid_msg);
        config_free(c);
}
END_TEST

static Suite *config_suite(void)
{
        Suite *s = suite_create("config");
        TCase *tc;

        tc = tcase_create("defaults");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, defaults_match_the_seed);
        tcase_add_test(tc, names);
        tcase_add_test(tc, container_markers);
        tcase_add_test(tc, home_falls_back_to_passwd);
        tcase_add_test(tc, client_environment_fallbacks);
        suite_add_tcase(s, tc);

        tc = tcase_create("environment");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, env_sets_every_setting);
        tcase_add_test(tc, debian_source_picks_debian_images);
        tcase_add_test(tc, blank_means_unset);
        tcase_add_test(tc, trace_setting);
        tcase_add_test(tc, trace_setting_invalid);
        suite_add_tcase(s, tc);

        tc = tcase_create("numbers");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, numbers_positive_whole_only);
        tcase_add_test(tc, numbers_trimmed_and_limits);
        tcase_add_test(tc, invalid_message_names_setting_value_and_fix);
        tcase_add_test(tc, invalid_value_is_escaped_in_message);
        tcase_add_test(tc, every_invalid_setting_is_named);
        suite_add_tcase(s, tc);

        tc = tcase_create("words");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, on_off_words);
        tcase_add_test(tc, enum_words);
        tcase_add_test(tc, container_runtime_names);
        tcase_add_test(tc, run_as_rules);
        suite_add_tcase(s, tc);

        tc = tcase_create("paths");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, paths_expand_and_normalise);
        tcase_add_test(tc, paths_rejected);
        suite_add_tcase(s, tc);

        tc = tcase_create("cross_checks");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, default_timeout_above_max);
        tcase_add_test(tc, folders_must_not_nest);
        suite_add_tcase(s, tc);

        tc = tcase_create("yaml");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, yaml_values);
        tcase_add_test(tc, env_wins_over_yaml);
        tcase_add_test(tc, yaml_invalid_value_names_file_and_key);
        tcase_add_test(tc, yaml_unknown_key);
        tcase_add_test(tc, yaml_malformed_names_line_and_column);
        tcase_add_test(tc, yaml_shapes);
        suite_add_tcase(s, tc);

        tc = tcase_create("file_lookup");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, file_from_vestibule_config);
        tcase_add_test(tc, file_from_xdg_and_default_missing);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(config_suite());
}
