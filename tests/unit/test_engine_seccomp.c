/* test_engine_seccomp.c - the seccomp profile we hand Podman (src/engine/seccomp_profile.c):
 * how it is derived from the engine's default and written once, then real containers on
 * rootful Podman and on rootless Podman (as the test user) where code cannot create namespaces
 * (unshare, clone with CLONE_NEW*, setns, clone3 falls back), next to a control container
 * created with Podman's own default profile where the same probe succeeds, and Docker (whose
 * default already holds) with the same probe. Ordinary code still works under our profile. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <check.h>
#include "lazy/curl.h"

#include "common/cleanup.h"
#include "lazy/sha256.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "engine/engine.h"
#include "run/backend.h"
#include "run/run.h"
#include "testutil.h"

#define DEFAULT_PROFILE "/usr/share/containers/seccomp.json"
#define DOCKER_SOCK "unix:///var/run/docker.sock"
#define PODMAN_SOCK "unix:///run/podman/podman.sock"
#define ROOTLESS_SOCK "unix:///run/user/2000/podman/podman.sock"
#define IMG_PY "vestibule/python:bookworm"
#define IMG_NODE "vestibule/node:bookworm"
#define TAR_PY "/var/tmp/vestibule-images/python.tar"
#define TAR_NODE "/var/tmp/vestibule-images/node.tar"
#define TEST_UID 2000

/* The engine's address as the one variable its runtime reads (testutil.h's fake environment). */
static void engine_host_set(enum sbx_runtime_choice rt, const char *host)
{
        fake_env_set("DOCKER_HOST", NULL);
        fake_env_set("CONTAINER_HOST", NULL);
        fake_env_set(rt == SBX_RUNTIME_PODMAN ? "CONTAINER_HOST" : "DOCKER_HOST", host);
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

/* ---------------------------------------------------------------------------------------- */
/* Derivation                                                                                */

static json_object *jget(json_object *o, const char *k)
{
        json_object *v = NULL;
        return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static bool names_have(json_object *rule, const char *name)
{
        json_object *n = jget(rule, "names");
        for (size_t i = 0; n && i < json_object_array_length(n); i++)
                if (strcmp(json_object_get_string(json_object_array_get_idx(n, i)), name) == 0)
                        return true;
        return false;
}

/* How many rules name @name with @action (NULL = any), no argument filter (@with_args false)
 * or with one (@with_args true). */
static unsigned count_rules(json_object *p, const char *name, const char *action, bool with_args)
{
        json_object *rules = jget(p, "syscalls");
        unsigned n = 0;
        for (size_t i = 0; i < json_object_array_length(rules); i++) {
                json_object *r = json_object_array_get_idx(rules, i);
                json_object *args = jget(r, "args");
                bool has_args = args && json_object_is_type(args, json_type_array) &&
                                json_object_array_length(args) > 0;
                if (!names_have(r, name) || has_args != with_args)
                        continue;
                if (action && strcmp(json_object_get_string(jget(r, "action")), action) != 0)
                        continue;
                n++;
        }
        return n;
}

static int rule_errno(json_object *p, const char *name)
{
        json_object *rules = jget(p, "syscalls");
        for (size_t i = 0; i < json_object_array_length(rules); i++) {
                json_object *r = json_object_array_get_idx(rules, i);
                if (names_have(r, name) && !jget(r, "args") &&
                    strcmp(json_object_get_string(jget(r, "action")), "SCMP_ACT_ERRNO") == 0)
                        return json_object_get_int(jget(r, "errnoRet"));
        }
        return -1;
}

/* A profile shaped like containers-common's: ERRNO(ENOSYS) default, a big allow list holding
 * the dangerous names, a CAP_SYS_ADMIN pair naming setns, and one rule only of managed names. */
static const char synthetic[] =
    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":38,"
    "\"archMap\":[{\"architecture\":\"SCMP_ARCH_X86_64\",\"subArchitectures\":[]}],"
    "\"syscalls\":["
    "{\"names\":[\"read\",\"clone\",\"clone3\",\"unshare\",\"setns\",\"mount\",\"umount2\","
    "\"write\",\"fsopen\",\"open_tree\",\"pivot_root\"],\"action\":\"SCMP_ACT_ALLOW\"},"
    "{\"names\":[\"bpf\",\"setns\"],\"action\":\"SCMP_ACT_ALLOW\","
    "\"includes\":{\"caps\":[\"CAP_SYS_ADMIN\"]}},"
    "{\"names\":[\"unshare\",\"mount\"],\"action\":\"SCMP_ACT_ALLOW\"},"
    "{\"names\":[\"personality\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,"
    "\"value\":0,\"valueTwo\":0,\"op\":\"SCMP_CMP_EQ\"}]}]}";

START_TEST(derive_denies_namespaces_keeps_the_rest)
{
        _cleanup_(json_putp) json_object *def = json_tokener_parse(synthetic), *p = NULL;
        struct sbx_error err = {0};
        static const char *const gone[] = {"unshare", "setns",     "mount",     "umount2",
                                           "fsopen",  "open_tree", "pivot_root"};
        ck_assert_ptr_nonnull(def);
        _cleanup_free_ char *before =
            xstrdup(json_object_to_json_string_ext(def, JSON_C_TO_STRING_PLAIN));

        ck_assert_int_eq(engine_seccomp_profile_derive(def, &p, &err), 0);
        /* @def untouched */
        ck_assert_str_eq(json_object_to_json_string_ext(def, JSON_C_TO_STRING_PLAIN), before);
        /* the defaults and the arch map are the engine's */
        ck_assert_str_eq(json_object_get_string(jget(p, "defaultAction")), "SCMP_ACT_ERRNO");
        ck_assert_int_eq(json_object_get_int(jget(p, "defaultErrnoRet")), 38);
        ck_assert_ptr_nonnull(jget(p, "archMap"));
        /* every other rule stays as it was */
        ck_assert_uint_eq(count_rules(p, "read", "SCMP_ACT_ALLOW", false), 1);
        ck_assert_uint_eq(count_rules(p, "write", "SCMP_ACT_ALLOW", false), 1);
        ck_assert_uint_eq(count_rules(p, "personality", "SCMP_ACT_ALLOW", true), 1);
        /* bpf is one of the native sandbox's named calls (issue 12 #3): refused even where the
         * default would allow it with CAP_SYS_ADMIN */
        ck_assert_uint_eq(count_rules(p, "bpf", "SCMP_ACT_ALLOW", false), 0);
        ck_assert_int_eq(rule_errno(p, "bpf"), EPERM);
        ck_assert_int_eq(rule_errno(p, "io_uring_setup"), EPERM);
        /* socket: allowed but for AF_VSOCK, fcntl but for F_SETLEASE, each EPERM, compared on
         * the low 32 bits the kernel reads (one allow rule per bit) */
        ck_assert_uint_eq(count_rules(p, "socket", "SCMP_ACT_ALLOW", true), 32);
        ck_assert_uint_eq(count_rules(p, "socket", "SCMP_ACT_ERRNO", true), 1);
        ck_assert_uint_eq(count_rules(p, "socket", NULL, false), 0);
        ck_assert_uint_eq(count_rules(p, "fcntl", "SCMP_ACT_ALLOW", true), 32);
        ck_assert_uint_eq(count_rules(p, "fcntl", "SCMP_ACT_ERRNO", true), 1);
        ck_assert_uint_eq(count_rules(p, "fcntl", NULL, false), 0);
        ck_assert_ptr_nonnull(strstr(json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN),
                                     "\"index\":1,\"value\":4294967295,\"valueTwo\":1024,"));
        /* the dangerous names: no allow rule anywhere, one EPERM rule */
        for (size_t i = 0; i < ELEMENTSOF(gone); i++) {
                ck_assert_msg(count_rules(p, gone[i], "SCMP_ACT_ALLOW", false) == 0, "%s", gone[i]);
                ck_assert_msg(count_rules(p, gone[i], NULL, false) == 1, "%s", gone[i]);
                ck_assert_msg(rule_errno(p, gone[i]) == EPERM, "%s", gone[i]);
        }
        /* the rule that held only managed names is gone, not left empty */
        json_object *rules = jget(p, "syscalls");
        for (size_t i = 0; i < json_object_array_length(rules); i++) {
                json_object *n = jget(json_object_array_get_idx(rules, i), "names");
                ck_assert(n && json_object_array_length(n) > 0);
        }
        /* clone3: ENOSYS equals the default here, so no rule is needed: it must not be allowed */
        ck_assert_uint_eq(count_rules(p, "clone3", "SCMP_ACT_ALLOW", false), 0);
        ck_assert_uint_eq(count_rules(p, "clone3", "SCMP_ACT_ALLOW", true), 0);
        /* clone: never unconditionally; allowed with no CLONE_NEW* bit (two arch variants),
         * EPERM with each of the 7 bits (two arch variants each) */
        ck_assert_uint_eq(count_rules(p, "clone", NULL, false), 0);
        ck_assert_uint_eq(count_rules(p, "clone", "SCMP_ACT_ALLOW", true), 2);
        ck_assert_uint_eq(count_rules(p, "clone", "SCMP_ACT_ERRNO", true), 14);
        const char *txt = json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN);
        /* 0x7E020000 = CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */
        ck_assert_ptr_nonnull(strstr(txt, "\"index\":0,\"value\":2114060288,\"valueTwo\":0,"
                                          "\"op\":\"SCMP_CMP_MASKED_EQ\""));
        ck_assert_ptr_nonnull(strstr(txt, "\"index\":1,\"value\":2114060288,\"valueTwo\":0,"
                                          "\"op\":\"SCMP_CMP_MASKED_EQ\""));
        ck_assert_ptr_nonnull(
            strstr(txt, "\"index\":0,\"value\":268435456,\"valueTwo\":268435456"));
}
END_TEST

START_TEST(derive_other_defaults)
{
        struct sbx_error err = {0};
        /* default allow: explicit deny rules must carry everything, and clone3 gets ENOSYS */
        _cleanup_(json_putp)
            json_object *allow = json_tokener_parse(
                            "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[]}"),
                        *p = NULL;
        ck_assert_int_eq(engine_seccomp_profile_derive(allow, &p, &err), 0);
        ck_assert_int_eq(rule_errno(p, "unshare"), EPERM);
        ck_assert_int_eq(rule_errno(p, "clone3"), ENOSYS);
        ck_assert_uint_eq(count_rules(p, "clone", "SCMP_ACT_ALLOW", true), 0);
        ck_assert_uint_eq(count_rules(p, "clone", "SCMP_ACT_ERRNO", true), 14);
        /* default EPERM (errnoRet absent means EPERM): removal is enough, clone3 gets ENOSYS */
        _cleanup_(json_putp) json_object
            *eperm = json_tokener_parse(
                "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"unshare\","
                "\"clone\",\"getpid\"],\"action\":\"SCMP_ACT_ALLOW\"}]}"),
            *q = NULL;
        ck_assert_int_eq(engine_seccomp_profile_derive(eperm, &q, &err), 0);
        ck_assert_uint_eq(count_rules(q, "unshare", NULL, false), 0);
        ck_assert_uint_eq(count_rules(q, "getpid", "SCMP_ACT_ALLOW", false), 1);
        ck_assert_int_eq(rule_errno(q, "clone3"), ENOSYS);
        ck_assert_uint_eq(count_rules(q, "clone", "SCMP_ACT_ALLOW", true), 2);
        ck_assert_uint_eq(count_rules(q, "clone", "SCMP_ACT_ERRNO", true), 0);
        /* not a profile */
        _cleanup_(json_putp) json_object *bad = json_tokener_parse("{\"syscalls\":[]}"), *r = NULL;
        ck_assert_int_eq(engine_seccomp_profile_derive(bad, &r, &err), -EINVAL);
        ck_assert_ptr_null(r);
}
END_TEST

/* The real containers-common profile on this host: nothing of it may still allow the names. */
START_TEST(derive_from_the_installed_default)
{
        if (access(DEFAULT_PROFILE, R_OK) < 0)
                sbx_test_skip("no " DEFAULT_PROFILE " (containers-common)");
        _cleanup_(json_putp) json_object *def = json_object_from_file(DEFAULT_PROFILE), *p = NULL;
        struct sbx_error err = {0};
        ck_assert_ptr_nonnull(def);
        /* the control: the engine's default does allow them */
        ck_assert_uint_ge(count_rules(def, "unshare", "SCMP_ACT_ALLOW", false), 1);
        ck_assert_uint_ge(count_rules(def, "clone", "SCMP_ACT_ALLOW", false), 1);
        ck_assert_int_eq(engine_seccomp_profile_derive(def, &p, &err), 0);
        static const char *const gone[] = {"unshare", "setns",      "mount",
                                           "umount2", "clone",      "clone3",
                                           "fsopen",  "move_mount", "mount_setattr"};
        for (size_t i = 0; i < ELEMENTSOF(gone); i++)
                ck_assert_msg(count_rules(p, gone[i], "SCMP_ACT_ALLOW", false) == 0, "%s", gone[i]);
        size_t n_def = json_object_array_length(jget(def, "syscalls"));
        size_t n_p = json_object_array_length(jget(p, "syscalls"));
        ck_assert_uint_ge(n_p, n_def); /* rules added, none of the engine's lost */
        ck_assert_uint_ge(count_rules(p, "read", "SCMP_ACT_ALLOW", false), 1);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* The file                                                                                  */

START_TEST(prepare_writes_once_by_hash)
{
        _cleanup_free_ char *tmp = sbx_test_tmpdir();
        _cleanup_free_ char *def = xasprintf("%s/default.json", tmp);
        _cleanup_free_ char *dir = xasprintf("%s/run/vestibule/seccomp", tmp);
        char path[512], path2[512], sha[65];
        struct sbx_error err = {0};
        struct stat st, st2;

        write_file(def, synthetic);
        ck_assert_int_eq(engine_seccomp_profile_prepare(def, dir, path, sizeof(path), &err), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0644);
        ck_assert_int_eq(stat(dir, &st2), 0);
        ck_assert_uint_eq(st2.st_mode & 07777, 0755);
        /* named by the SHA-256 of its content */
        ck_assert_int_eq(sbx_sha256_file(path, NULL, sha, &err), 0);
        _cleanup_free_ char *want = xasprintf("%s/%s.json", dir, sha);
        ck_assert_str_eq(path, want);
        /* its content is the derived profile */
        _cleanup_(json_putp) json_object *p = json_object_from_file(path);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(rule_errno(p, "unshare"), EPERM);
        /* a second prepare reuses the file (same inode) */
        ck_assert_int_eq(engine_seccomp_profile_prepare(def, dir, path2, sizeof(path2), &err), 0);
        ck_assert_str_eq(path, path2);
        ck_assert_int_eq(stat(path2, &st2), 0);
        ck_assert_uint_eq(st.st_ino, st2.st_ino);
        /* a file of that name with other content (an allow-all profile) is replaced */
        write_file(path, "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[]}");
        ck_assert_int_eq(engine_seccomp_profile_prepare(def, dir, path2, sizeof(path2), &err), 0);
        ck_assert_int_eq(sbx_sha256_file(path2, NULL, sha, &err), 0);
        ck_assert_ptr_nonnull(strstr(path2, sha));
        /* a dir others can write to is refused */
        ck_assert_int_eq(chmod(dir, 0777), 0);
        ck_assert_int_eq(engine_seccomp_profile_prepare(def, dir, path2, sizeof(path2), &err),
                         -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "writable by others"));
        /* a parent others can write to without the sticky bit is refused; with it (/tmp) not */
        _cleanup_free_ char *open_dir = xasprintf("%s/open", tmp);
        _cleanup_free_ char *under = xasprintf("%s/open/seccomp", tmp);
        ck_assert_int_eq(mkdir(open_dir, 0755), 0);
        ck_assert_int_eq(chmod(open_dir, 0777), 0);
        ck_assert_int_eq(engine_seccomp_profile_prepare(def, under, path2, sizeof(path2), &err),
                         -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, open_dir));
        ck_assert_int_eq(chmod(open_dir, 01777), 0);
        ck_assert_int_eq(engine_seccomp_profile_prepare(def, under, path2, sizeof(path2), &err), 0);
        /* no default profile: the reason names it */
        ck_assert_int_eq(chmod(dir, 0755), 0);
        _cleanup_free_ char *none = xasprintf("%s/none.json", tmp);
        ck_assert_int_eq(engine_seccomp_profile_prepare(none, dir, path2, sizeof(path2), &err),
                         -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "none.json"));
        ck_assert_int_eq(engine_seccomp_profile_prepare("", dir, path2, sizeof(path2), &err),
                         -ENOENT);
        /* not JSON */
        write_file(def, "not json");
        ck_assert_int_eq(engine_seccomp_profile_prepare(def, dir, path2, sizeof(path2), &err),
                         -EINVAL);
        _cleanup_free_ char *rm = xasprintf("rm -rf '%s'", tmp);
        ck_assert_int_eq(system(rm), 0);
}
END_TEST

START_TEST(profile_dir_choice)
{
        char d[256];
        struct sbx_error err = {0};
        fake_env_set("XDG_RUNTIME_DIR", "/run/user/2000");
        ck_assert_int_eq(engine_seccomp_profile_dir(fake_getenv, d, sizeof(d), &err), 0);
        if (geteuid() == 0)
                ck_assert_str_eq(d, "/run/vestibule/seccomp");
        else
                ck_assert_str_eq(d, "/run/user/2000/vestibule/seccomp");
        fake_env_set("XDG_RUNTIME_DIR", NULL);
        ck_assert_int_eq(engine_seccomp_profile_dir(fake_getenv, d, sizeof(d), &err), 0);
        if (geteuid() != 0) {
                _cleanup_free_ char *want = xasprintf("/tmp/vestibule-%u/seccomp", geteuid());
                ck_assert_str_eq(d, want);
        }
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* The create body and the check of the engine's answer                                      */

static const char *const body_cmd[] = {"python3", "/sandbox/main.py", NULL};

static struct engine_run_spec body_spec(const char *profile)
{
        return (struct engine_run_spec){.image = IMG_PY,
                                        .cmd = body_cmd,
                                        .uid = TEST_UID,
                                        .gid = TEST_UID,
                                        .workspace = "/w",
                                        .code_dir = "/c",
                                        .memory_bytes = 256u << 20,
                                        .nano_cpus = 750000000,
                                        .pids_max = 64,
                                        .tmpfs_mb = 64,
                                        .owner = "h:1:2",
                                        .podman = true,
                                        .seccomp_profile = profile};
}

START_TEST(body_passes_the_profile_path)
{
        struct engine_run_spec s = body_spec("/run/vestibule/seccomp/ab.json");
        _cleanup_(json_putp) json_object *b = engine_create_body(&s);
        const char *t = json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN);
        /* and Podman masks the host's facts the native sandbox masks (issue 24) */
        ck_assert_ptr_nonnull(strstr(t,
                                     "\"SecurityOpt\":[\"no-new-privileges\","
                                     "\"seccomp=\\/run\\/vestibule\\/seccomp\\/ab.json\","
                                     "\"mask=\\/proc\\/cmdline:\\/proc\\/sys\\/kernel\\/random\\/"
                                     "boot_id:\\/proc\\/key-users\"]"));
        s = body_spec(NULL);
        _cleanup_(json_putp) json_object *b2 = engine_create_body(&s);
        t = json_object_to_json_string_ext(b2, JSON_C_TO_STRING_PLAIN);
        ck_assert_ptr_nonnull(strstr(t, "\"SecurityOpt\":[\"no-new-privileges\",\"mask="));
        /* Docker: its own masked paths named again, and ours */
        s.podman = false;
        _cleanup_(json_putp) json_object *b3 = engine_create_body(&s);
        t = json_object_to_json_string_ext(b3, JSON_C_TO_STRING_PLAIN);
        ck_assert_ptr_nonnull(strstr(t, "\"MaskedPaths\":[\"\\/proc\\/asound\""));
        ck_assert_ptr_nonnull(strstr(t, "\"\\/proc\\/cmdline\",\"\\/proc\\/sys\\/kernel\\/random\\/"
                                        "boot_id\""));
}
END_TEST

/* An inspect answer as Podman gives it for body_spec(), with SecurityOpt @secopt. */
static json_object *inspect_with(const char *secopt)
{
        _cleanup_free_ char *t = xasprintf(
            "{\"Config\":{\"User\":\"2000:2000\"},\"HostConfig\":{\"NetworkMode\":\"none\","
            "\"CapDrop\":[\"ALL\"],\"SecurityOpt\":%s,\"ReadonlyRootfs\":true,"
            "\"Tmpfs\":{\"/tmp\":\"rw,noexec,nosuid,nodev,size=64m\"},\"Memory\":268435456,"
            "\"MemorySwap\":268435456,\"NanoCpus\":750000000,\"PidsLimit\":64},"
            "\"Mounts\":[{\"Destination\":\"/workspace\",\"RW\":true},"
            "{\"Destination\":\"/sandbox\",\"RW\":false}]}",
            secopt);
        json_object *j = json_tokener_parse(t);
        ck_assert_ptr_nonnull(j);
        return j;
}

START_TEST(verify_inspect_wants_our_profile)
{
        static const struct {
                const char *secopt;
                int rc;
        } t[] = {
            {"[\"no-new-privileges\",\"seccomp=/p/x.json\"]", 0},
            {"[\"no-new-privileges\"]", -EPERM},                        /* dropped */
            {"[\"no-new-privileges\",\"seccomp=/p/y.json\"]", -EPERM},  /* another file */
            {"[\"no-new-privileges\",\"seccomp=unconfined\"]", -EPERM}, /* unconfined */
            {"[\"no-new-privileges\",\"seccomp=/p/x.json\",\"seccomp=unconfined\"]", -EPERM},
        };
        struct engine_run_spec s = body_spec("/p/x.json");
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                _cleanup_(json_putp) json_object *in = inspect_with(t[i].secopt);
                struct sbx_error err = {0};
                char degraded[64] = "";
                int rc = engine_verify_inspect(in, &s, degraded, sizeof(degraded), &err);
                ck_assert_msg(rc == t[i].rc, "%s: %d (%s)", t[i].secopt, rc, err.msg);
                if (rc < 0)
                        ck_assert_ptr_nonnull(strstr(err.msg, "seccomp"));
        }
        /* without a profile asked for (Docker), none is required */
        struct engine_run_spec d = body_spec(NULL);
        _cleanup_(json_putp) json_object *in = inspect_with("[\"no-new-privileges\"]");
        struct sbx_error err = {0};
        char degraded[64] = "";
        ck_assert_int_eq(engine_verify_inspect(in, &d, degraded, sizeof(degraded), &err), 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Real containers                                                                           */

/* The probe: namespace creation four ways, each tried in its own child (a namespace made by
 * one try must not change the next) and printed as ok or the errno name. x86_64 syscall
 * numbers (the suite skips elsewhere): clone 56, setns 308, clone3 435. setns into our own user
 * namespace is EINVAL when the call is allowed, EPERM when the filter refuses it; clone3 with
 * no arguments is EINVAL when allowed, ENOSYS when refused. */
static const char ns_probe_py[] =
    "import ctypes, errno, os, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def res(r):\n"
    "    return 'ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')\n"
    "def clone_newuser():\n"
    "    pid = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)\n"
    "    if pid == 0:\n"
    "        os._exit(0)\n"
    "    if pid > 0:\n"
    "        os.waitpid(pid, 0)\n"
    "    return pid\n"
    "def setns_user():\n"
    "    return libc.syscall(308, os.open('/proc/self/ns/user', os.O_RDONLY), 0)\n"
    "tries = [('unshare_user', lambda: libc.unshare(0x10000000)),\n"
    "         ('unshare_user_mnt', lambda: libc.unshare(0x10020000)),\n"
    "         ('clone_newuser', clone_newuser), ('setns', setns_user),\n"
    "         ('clone3', lambda: libc.syscall(435, 0, 0))]\n"
    "for name, f in tries:\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        print(name + '=' + res(f()), flush=True)\n"
    "        os._exit(0)\n"
    "    os.waitpid(pid, 0)\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os._exit(7)\n"
    "print('fork=%d' % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n";

static const char ns_probe_sh[] = "unshare -U true\necho \"unshare_cmd=$?\"\n";

static char *kv(const char *text, const char *key)
{
        _cleanup_free_ char *k = xasprintf("%s=", key);
        for (const char *p = text; (p = strstr(p, k)); p++)
                if (p == text || p[-1] == '\n')
                        return xstrndup(p + strlen(k), strcspn(p + strlen(k), "\n"));
        return xstrdup("<missing>");
}

#define ck_kv(text, key, want)                                                                     \
        do {                                                                                       \
                _cleanup_free_ char *v_ = kv(text, key);                                           \
                ck_assert_msg(strcmp(v_, want) == 0, "%s=%s, want %s; output:\n%s", key, v_, want, \
                              text);                                                               \
        } while (0)

static struct sbx_config cfg;
static char *ws_dir;
static struct backend *be;

static void teardown(void)
{
        be = backend_free(be);
}

/* Point everything at @host; import the images there (idempotent); a backend on it. */
static void engine_up(const char *host, enum sbx_runtime_choice rt)
{
        struct sbx_error err = {0};
        struct utsname u;

        ck_assert_int_eq(uname(&u), 0);
        if (strcmp(u.machine, "x86_64") != 0)
                sbx_test_skip("the namespace probe uses x86_64 syscall numbers");
        ws_dir = sbx_test_tmpdir();
        chmod(ws_dir, 0777);
        sbx_test_config(&cfg, ws_dir);
        cfg.runtime = rt;
        cfg.backend = SBX_BACKEND_CONTAINER;
        cfg.image_python = (char *)IMG_PY;
        cfg.image_node = (char *)IMG_NODE;
        if (geteuid() == 0) {
                cfg.run_as_set = true;
                cfg.run_as_uid = TEST_UID;
                cfg.run_as_gid = TEST_UID;
        }
        engine_host_set(rt, host);
        fake_env_set("XDG_RUNTIME_DIR", geteuid() == TEST_UID ? "/run/user/2000" : NULL);
        ck_assert_msg(
            engine_setup_import_with_env(&cfg, fake_getenv, TAR_PY, IMG_PY, &err) >= 0 &&
                engine_setup_import_with_env(&cfg, fake_getenv, TAR_NODE, IMG_NODE, &err) >= 0,
            "cannot import the test images into %s: %s", host, err.msg);
        ck_assert_int_eq(engine_backend_new_with_env(&cfg, fake_getenv, &be, &err), 0);
}

struct out {
        int rc;
        struct sbx_error err;
        struct run_result res;
        char *text;
};

static struct out run(enum sbx_language lang, const char *code)
{
        struct out o = {0};
        struct run_request req = {.language = lang,
                                  .code = code,
                                  .code_len = strlen(code),
                                  .timeout_s = 30,
                                  .cfg = &cfg,
                                  .cancel_fd = -1};
        o.rc = be->ops->run(be, &req, &o.res, &o.err);
        ck_assert_msg(o.rc == 0, "run failed: %s", o.err.msg);
        o.text = o.res.out.data ? o.res.out.data : (char *)"";
        return o;
}

static void expect_ok(const struct out *o)
{
        ck_assert_msg(o->res.outcome == RUN_OUTCOME_EXITED && o->res.exit_code == 0,
                      "outcome %d exit %d stdout '%s' stderr '%s'", o->res.outcome,
                      o->res.exit_code, o->text, o->res.err.data ? o->res.err.data : "");
}

/* The probe in a container made straight through the API from our create body with
 * @profile (NULL: the engine's own default profile, the control: every other lockdown option
 * the same). Its inspect's SecurityOpt, joined with '|', into *@ret_secopt. */
static char *raw_run(const struct engine_conn *c, const char *code, const char *profile,
                     char **ret_secopt)
{
        _cleanup_free_ char *dir = sbx_test_tmpdir(), *f = xasprintf("%s/main.py", dir);
        _cleanup_free_ char *id = NULL, *owner = NULL;
        struct sbx_error err = {0};
        struct engine_reply r = {0};
        long status = 0;
        const char *cmd[] = {"python3", "/sandbox/main.py", NULL};

        write_file(f, code);
        chmod(dir, 0755);
        chmod(f, 0644);
        owner = xasprintf("test-control:%d:0", (int)getpid());
        struct engine_run_spec s = {.image = IMG_PY,
                                    .cmd = cmd,
                                    .uid = TEST_UID,
                                    .gid = TEST_UID,
                                    .workspace = ws_dir,
                                    .code_dir = dir,
                                    .memory_bytes = 256u << 20,
                                    .nano_cpus = 750000000,
                                    .pids_max = 64,
                                    .tmpfs_mb = 16,
                                    .owner = owner,
                                    .podman = c->podman,
                                    .userns_keep_id = geteuid() == TEST_UID,
                                    .init = true,
                                    .seccomp_profile = profile};
        _cleanup_(json_putp) json_object *body = engine_create_body(&s);
        _cleanup_(engine_reply_done) struct engine_reply created = {0}, ins = {0};
        status = sbx_test_engine(c, "POST", "/containers/create", NULL,
                                 json_object_to_json_string(body), &created, &err);
        ck_assert_msg(status == 201, "control create: HTTP %ld %s %s", status, created.msg,
                      err.msg);
        id = xstrdup(json_object_get_string(jget(created.json, "Id")));
        ck_assert_int_eq(sbx_test_engine(c, "GET", "/containers/{}/json", id, NULL, &ins, &err),
                         200);
        json_object *insp = ins.json;
        json_object *so = jget(jget(insp, "HostConfig"), "SecurityOpt");
        char *joined = xstrdup("");
        for (size_t i = 0; so && i < json_object_array_length(so); i++) {
                char *n = xasprintf("%s|%s", joined,
                                    json_object_get_string(json_object_array_get_idx(so, i)));
                free(joined);
                joined = n;
        }
        *ret_secopt = joined;
        status = sbx_test_engine(c, "POST", "/containers/{}/start", id, NULL, &r, &err);
        ck_assert_msg(status == 204, "control start: %ld %s %s", status, r.msg, err.msg);
        engine_reply_done(&r);
        ck_assert_int_eq(sbx_test_engine(c, "POST", "/containers/{}/wait", id, NULL, &r, &err),
                         200);
        engine_reply_done(&r);
        ck_assert_int_eq(
            sbx_test_engine(c, "GET", "/containers/{}/logs?stdout=1&stderr=1", id, NULL, &r, &err),
            200);
        /* strip the multiplexed stream's 8-byte frame headers */
        char *out = xcalloc(1, r.len + 1);
        size_t o = 0;
        for (size_t i = 0; i + 8 <= r.len;) {
                size_t n = ((size_t)(unsigned char)r.raw[i + 4] << 24) |
                           ((size_t)(unsigned char)r.raw[i + 5] << 16) |
                           ((size_t)(unsigned char)r.raw[i + 6] << 8) |
                           (size_t)(unsigned char)r.raw[i + 7];
                if (i + 8 + n > r.len)
                        break;
                memcpy(out + o, r.raw + i + 8, n);
                o += n;
                i += 8 + n;
        }
        engine_reply_done(&r);
        sbx_test_engine(c, "DELETE", "/containers/{}?force=1", id, NULL, &r, &err);
        engine_reply_done(&r);
        unlink(f);
        rmdir(dir);
        return out;
}

/* Under our profile: no namespace four ways, EPERM as on Docker; ordinary code works. */
static void check_namespaces_blocked(void)
{
        struct out o = run(SBX_LANG_PYTHON, ns_probe_py);
        expect_ok(&o);
        ck_kv(o.text, "unshare_user", "EPERM");
        ck_kv(o.text, "unshare_user_mnt", "EPERM");
        ck_kv(o.text, "clone_newuser", "EPERM");
        ck_kv(o.text, "setns", "EPERM");
        ck_kv(o.text, "clone3", "ENOSYS");
        ck_kv(o.text, "fork", "7");
        run_result_done(&o.res);

        o = run(SBX_LANG_BASH, ns_probe_sh);
        expect_ok(&o);
        ck_kv(o.text, "unshare_cmd", "1");
        ck_assert_msg(o.res.err.data && strstr(o.res.err.data, "Operation not permitted"), "%s",
                      o.res.err.data ? o.res.err.data : "(no stderr)");
        run_result_done(&o.res);
}

static void check_ordinary_code(void)
{
        struct out o = run(SBX_LANG_PYTHON, "import subprocess, threading\n"
                                            "t = threading.Thread(target=lambda: None)\n"
                                            "t.start(); t.join()\n"
                                            "print(subprocess.run(['echo', 'sub'], "
                                            "capture_output=True, text=True).stdout.strip())\n"
                                            "print('hello')\n");
        expect_ok(&o);
        ck_assert_str_eq(o.text, "sub\nhello\n");
        run_result_done(&o.res);

        /* node starts worker threads (clone3 -> ENOSYS -> clone fallback in glibc) */
        o = run(SBX_LANG_NODE, "const { execSync } = require('child_process');\n"
                               "console.log([1, 2, 3].map(x => x * 2).join(','));\n"
                               "console.log(execSync('echo child').toString().trim());\n");
        expect_ok(&o);
        ck_assert_str_eq(o.text, "2,4,6\nchild\n");
        run_result_done(&o.res);

        o = run(SBX_LANG_BASH, "echo abc | tr a-z A-Z\n"
                               "(echo one; echo two) | wc -l\n"
                               "x=$(echo nested $(echo deep)); echo \"$x\"\n"
                               "{ sleep 0.1; echo bg; } & wait\n");
        expect_ok(&o);
        ck_assert_str_eq(o.text, "ABC\n2\nnested deep\nbg\n");
        run_result_done(&o.res);
}

/* Straight through the API: the engine keeps our profile in the container's SecurityOpt and
 * the probe fails there; the control, the engine's default profile, lets it succeed. */
static void check_profile_against_engine_default(void)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        char dir[256], path[512];
        ck_assert_int_eq(engine_connect(&cfg, fake_getenv, &c, &err), 0);
        ck_assert_int_eq(engine_seccomp_profile_dir(fake_getenv, dir, sizeof(dir), &err), 0);
        ck_assert_int_eq(
            engine_seccomp_profile_prepare(DEFAULT_PROFILE, dir, path, sizeof(path), &err), 0);

        _cleanup_free_ char *so = NULL, *so_ctl = NULL;
        _cleanup_free_ char *ours = raw_run(&c, ns_probe_py, path, &so);
        _cleanup_free_ char *want = xasprintf("|seccomp=%s", path);
        ck_assert_msg(strstr(so, want), "SecurityOpt %s", so);
        ck_kv(ours, "unshare_user", "EPERM");
        ck_kv(ours, "unshare_user_mnt", "EPERM");
        ck_kv(ours, "clone_newuser", "EPERM");
        ck_kv(ours, "setns", "EPERM");
        ck_kv(ours, "clone3", "ENOSYS");
        ck_kv(ours, "fork", "7");

        _cleanup_free_ char *ctl = raw_run(&c, ns_probe_py, NULL, &so_ctl);
        ck_assert_msg(!strstr(so_ctl, "seccomp="), "SecurityOpt %s", so_ctl);
        ck_kv(ctl, "unshare_user", "ok");
        ck_kv(ctl, "unshare_user_mnt", "ok");
        ck_kv(ctl, "clone_newuser", "ok");
        ck_kv(ctl, "setns", "EINVAL");
        ck_kv(ctl, "clone3", "EINVAL");
        ck_kv(ctl, "fork", "7");
}

/* The profile file removed after the probe (a cleaned runtime dir): the next run writes it
 * again and still holds. */
static void check_profile_written_again(void)
{
        char dir[256], path[512];
        struct sbx_error err = {0};
        ck_assert_int_eq(engine_seccomp_profile_dir(fake_getenv, dir, sizeof(dir), &err), 0);
        ck_assert_int_eq(
            engine_seccomp_profile_prepare(DEFAULT_PROFILE, dir, path, sizeof(path), &err), 0);
        ck_assert_int_eq(unlink(path), 0);
        struct out o = run(SBX_LANG_PYTHON, ns_probe_py);
        expect_ok(&o);
        ck_kv(o.text, "unshare_user", "EPERM");
        ck_kv(o.text, "clone_newuser", "EPERM");
        run_result_done(&o.res);
        ck_assert_int_eq(access(path, R_OK), 0);
}

START_TEST(podman_rootful_no_namespaces)
{
        struct backend_probe p;
        struct sbx_error err = {0};
        engine_up(PODMAN_SOCK, SBX_RUNTIME_PODMAN);
        ck_assert_int_eq(be->ops->probe(be, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        ck_assert_str_eq(p.grade, "container");
        check_namespaces_blocked();
        check_ordinary_code();
        check_profile_against_engine_default();
        check_profile_written_again();
}
END_TEST

START_TEST(podman_rootless_no_namespaces)
{
        struct backend_probe p;
        struct sbx_error err = {0};
        sbx_test_become_user();
        engine_up(ROOTLESS_SOCK, SBX_RUNTIME_PODMAN);
        ck_assert_int_eq(be->ops->probe(be, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        /* degraded for the limits (cgroup v1), never for namespaces */
        ck_assert_msg(!strstr(p.grade, "namespaces"), "%s", p.grade);
        check_namespaces_blocked();
        check_ordinary_code();
        check_profile_against_engine_default();
}
END_TEST

/* No profile can be made (its directory is writable by others, so not trusted): the grade
 * says namespaces are not blocked, and the run carries that grade. */
START_TEST(podman_no_profile_is_degraded)
{
        struct backend_probe p;
        struct sbx_error err = {0};
        sbx_test_become_user();
        engine_up(ROOTLESS_SOCK, SBX_RUNTIME_PODMAN);
        _cleanup_free_ char *xdg = sbx_test_tmpdir();
        _cleanup_free_ char *d1 = xasprintf("%s/vestibule", xdg);
        _cleanup_free_ char *d2 = xasprintf("%s/vestibule/seccomp", xdg);
        ck_assert_int_eq(mkdir(d1, 0755), 0);
        ck_assert_int_eq(mkdir(d2, 0755), 0);
        ck_assert_int_eq(chmod(d2, 0777), 0);
        fake_env_set("XDG_RUNTIME_DIR", xdg);
        ck_assert_int_eq(be->ops->probe(be, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        ck_assert(p.degraded);
        ck_assert_msg(strstr(p.grade, "namespaces not blocked: ") &&
                          strstr(p.grade, "writable by others"),
                      "%s", p.grade);
        struct out o = run(SBX_LANG_PYTHON, "print(1)\n");
        expect_ok(&o);
        ck_assert_str_eq(o.res.isolation, p.grade);
        run_result_done(&o.res);
        rmdir(d2);
        rmdir(d1);
        rmdir(xdg);
}
END_TEST

/* Docker: its default profile already blocks namespaces without CAP_SYS_ADMIN; we pass none. */
START_TEST(docker_default_holds)
{
        struct backend_probe p;
        struct sbx_error err = {0};
        engine_up(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        ck_assert_int_eq(be->ops->probe(be, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        ck_assert_str_eq(p.grade, "container");
        struct out o = run(SBX_LANG_PYTHON, ns_probe_py);
        expect_ok(&o);
        ck_kv(o.text, "unshare_user", "EPERM");
        ck_kv(o.text, "unshare_user_mnt", "EPERM");
        ck_kv(o.text, "clone_newuser", "EPERM");
        ck_kv(o.text, "setns", "EPERM");
        ck_kv(o.text, "clone3", "ENOSYS");
        ck_kv(o.text, "fork", "7");
        run_result_done(&o.res);
}
END_TEST

/* Issue 12 #3: Docker 20.10's default profile allows socket(AF_VSOCK) (in a VM-based engine,
 * or this Firecracker guest, vsock reaches the host side) and io_uring. Each try prints ok or
 * the errno name; x86_64 numbers: io_uring_setup 425, _enter 426, _register 427, keyctl 250,
 * userfaultfd 323, perf_event_open 298, pidfd_getfd 438. Harmless arguments only: the same
 * script is the control on the host. */
static const char danger_probe_py[] =
    "import ctypes, errno, os, socket\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.syscall.restype = ctypes.c_long\n"
    "def res(r):\n"
    "    return 'ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')\n"
    "try:\n"
    "    s = socket.socket(40, socket.SOCK_STREAM); s.close(); print('vsock=ok')\n"
    "except OSError as e:\n"
    "    print('vsock=' + errno.errorcode.get(e.errno, '?'))\n"
    "params = ctypes.create_string_buffer(120)\n"
    "fd = libc.syscall(425, 1, params)\n"
    "print('io_uring_setup=' + res(fd))\n"
    "if fd >= 0: os.close(fd)\n"
    "print('io_uring_enter=' + res(libc.syscall(426, -1, 0, 0, 0, None, 0)))\n"
    "print('io_uring_register=' + res(libc.syscall(427, -1, 0, None, 0)))\n"
    "print('keyctl=' + res(libc.syscall(250, 0, ctypes.c_long(0xfffffffd), 0)))\n"
    "print('userfaultfd=' + res(libc.syscall(323, 0)))\n"
    "print('perf_event_open=' + res(libc.syscall(298, None, 0, -1, -1, 0)))\n"
    "print('pidfd_getfd=' + res(libc.syscall(438, -1, 0, 0)))\n"
    /* a write lease (F_SETLEASE 1024, F_WRLCK 1) on a file of our own, then the same and
     * socket(AF_VSOCK) with high bits set in the 64-bit argument (the kernel reads 32) */
    "lp = '/tmp/lease-probe-%d' % os.getpid()\n"
    "open(lp, 'w').close()\n"
    "fd = os.open(lp, os.O_RDONLY)\n"
    "print('lease=' + res(libc.syscall(72, fd, 1024, 1)))\n"
    "os.close(fd)\n"
    "fd = os.open(lp, os.O_RDONLY)\n"
    "print('lease_hi=' + res(libc.syscall(72, fd, ctypes.c_ulong(0x100000400), 1)))\n"
    "os.close(fd)\n"
    "os.unlink(lp)\n"
    "print('vsock_hi=' + res(libc.syscall(41, ctypes.c_ulong(0x100000028), 1, 0)))\n";

static void check_danger_refused(const char *text)
{
        static const char *const keys[] = {
            "vsock",  "io_uring_setup", "io_uring_enter",  "io_uring_register",
            "keyctl", "userfaultfd",    "perf_event_open", "pidfd_getfd",
            "lease",  "lease_hi",       "vsock_hi"};
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                ck_kv(text, keys[i], "EPERM");
}

/* The control on the host, as the test user: vsock and io_uring work here. */
static char *host_danger_probe(void)
{
        _cleanup_free_ char *dir = sbx_test_tmpdir(), *f = xasprintf("%s/p.py", dir);
        write_file(f, danger_probe_py);
        chmod(dir, 0755);
        chmod(f, 0644);
        _cleanup_free_ char *cmd =
            geteuid() == 0
                ? xasprintf(
                      "setpriv --reuid=%d --regid=%d --clear-groups /usr/bin/python3 '%s' 2>&1",
                      TEST_UID, TEST_UID, f)
                : xasprintf("python3 '%s' 2>&1", f);
        FILE *p = popen(cmd, "r");
        ck_assert_ptr_nonnull(p);
        char *out = xcalloc(1, 4096);
        size_t n = fread(out, 1, 4095, p);
        out[n] = '\0';
        pclose(p);
        unlink(f);
        rmdir(dir);
        return out;
}

START_TEST(docker_profile_refuses_vsock_and_io_uring)
{
        struct backend_probe p;
        struct sbx_error err = {0};
        struct engine_conn c;
        engine_up(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        ck_assert_int_eq(be->ops->probe(be, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        ck_assert_str_eq(p.grade, "container");
        /* through the backend: refused, and namespaces still are */
        struct out o = run(SBX_LANG_PYTHON, danger_probe_py);
        expect_ok(&o);
        check_danger_refused(o.text);
        run_result_done(&o.res);
        check_namespaces_blocked();
        check_ordinary_code();

        /* controls: the host (a Firecracker guest with vsock), and Docker's own default
         * profile with every other lockdown option the same, let both through */
        _cleanup_free_ char *host = host_danger_probe();
        ck_kv(host, "vsock", "ok");
        ck_kv(host, "io_uring_setup", "ok");
        ck_kv(host, "lease", "ok");
        ck_kv(host, "lease_hi", "ok");
        ck_kv(host, "vsock_hi", "ok");
        ck_assert_int_eq(engine_connect(&cfg, fake_getenv, &c, &err), 0);
        _cleanup_free_ char *so_ctl = NULL, *so = NULL;
        _cleanup_free_ char *ctl = raw_run(&c, danger_probe_py, NULL, &so_ctl);
        ck_kv(ctl, "vsock", "ok");
        ck_kv(ctl, "io_uring_setup", "ok");
        ck_kv(ctl, "lease", "ok");
        /* our profile, straight through the API: kept in the container's SecurityOpt */
        _cleanup_free_ char *prof = engine_seccomp_profile_docker();
        _cleanup_free_ char *ours = raw_run(&c, danger_probe_py, prof, &so);
        check_danger_refused(ours);
        ck_assert_msg(strstr(so, "|seccomp={"), "SecurityOpt %.200s", so);
}
END_TEST

/* Podman: the profile derived from its default refuses the same. */
START_TEST(podman_profile_refuses_vsock_and_io_uring)
{
        struct backend_probe p;
        struct sbx_error err = {0};
        engine_up(PODMAN_SOCK, SBX_RUNTIME_PODMAN);
        ck_assert_int_eq(be->ops->probe(be, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        ck_assert_str_eq(p.grade, "container");
        struct out o = run(SBX_LANG_PYTHON, danger_probe_py);
        expect_ok(&o);
        check_danger_refused(o.text);
        run_result_done(&o.res);
}
END_TEST

/* Issue 24: the host's kernel command line and boot id, which the native sandbox masks, were
 * readable in a container. Inside: an empty command line and another boot id (the masked file
 * reads empty); control: the host's own, read here. */
static void check_host_facts_masked(void)
{
        static const char code[] =
            "def rd(p):\n"
            "    try:\n"
            "        return open(p).read()\n"
            "    except OSError as e:\n"
            "        return 'err%d' % e.errno\n"
            "print('cmdline=%d' % len(rd('/proc/cmdline')))\n"
            "print('boot_id=' + rd('/proc/sys/kernel/random/boot_id').strip())\n";
        char host_boot[64] = "";
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(host_boot, sizeof(host_boot), f));
        fclose(f);
        host_boot[strcspn(host_boot, "\n")] = '\0';
        ck_assert_int_gt(strlen(host_boot), 30);
        f = fopen("/proc/cmdline", "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_ne(fgetc(f), EOF);
        fclose(f);
        struct out o = run(SBX_LANG_PYTHON, code);
        expect_ok(&o);
        ck_kv(o.text, "cmdline", "0");
        _cleanup_free_ char *boot = kv(o.text, "boot_id");
        ck_assert_msg(strcmp(boot, host_boot) != 0, "the host's boot id inside: %s", o.text);
        run_result_done(&o.res);
}

START_TEST(docker_masks_host_facts)
{
        engine_up(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        check_host_facts_masked();
}
END_TEST

START_TEST(podman_masks_host_facts)
{
        engine_up(PODMAN_SOCK, SBX_RUNTIME_PODMAN);
        check_host_facts_masked();
}
END_TEST

static bool answers(const char *host, enum sbx_runtime_choice rt)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        struct sbx_config k = {.runtime = rt};
        engine_host_set(rt, host);
        return engine_connect(&k, fake_getenv, &c, &err) == 0;
}

static char missing[400];

static void note_missing(const char *what)
{
        size_t used = strlen(missing);
        snprintf(missing + used, sizeof(missing) - used, "%s%s", used ? "; " : "", what);
}

static Suite *seccomp_suite(void)
{
        Suite *s = suite_create("engine_seccomp");
        TCase *tc;
        bool images = access(TAR_PY, R_OK) == 0 && access(TAR_NODE, R_OK) == 0;
        bool root = geteuid() == 0;

        tc = tcase_create("derive");
        tcase_add_test(tc, derive_denies_namespaces_keeps_the_rest);
        tcase_add_test(tc, derive_other_defaults);
        tcase_add_test(tc, derive_from_the_installed_default);
        suite_add_tcase(s, tc);

        tc = tcase_create("body");
        tcase_add_test(tc, body_passes_the_profile_path);
        tcase_add_test(tc, verify_inspect_wants_our_profile);
        suite_add_tcase(s, tc);

        tc = tcase_create("file");
        tcase_add_test(tc, prepare_writes_once_by_hash);
        tcase_add_test(tc, profile_dir_choice);
        suite_add_tcase(s, tc);

        if (!images || !root) {
                note_missing("container cases need root and the image tarballs");
        } else {
                if (answers(PODMAN_SOCK, SBX_RUNTIME_PODMAN)) {
                        tc = tcase_create("podman");
                        tcase_add_checked_fixture(tc, NULL, teardown);
                        tcase_set_timeout(tc, 240);
                        tcase_add_test(tc, podman_rootful_no_namespaces);
                        tcase_add_test(tc, podman_profile_refuses_vsock_and_io_uring);
                        tcase_add_test(tc, podman_masks_host_facts);
                        suite_add_tcase(s, tc);
                } else {
                        note_missing("no rootful Podman at /run/podman/podman.sock");
                }
                if (access("/run/user/2000/podman/podman.sock", F_OK) == 0) {
                        tc = tcase_create("podman_rootless");
                        tcase_add_checked_fixture(tc, NULL, teardown);
                        tcase_set_timeout(tc, 240);
                        tcase_add_test(tc, podman_rootless_no_namespaces);
                        tcase_add_test(tc, podman_no_profile_is_degraded);
                        suite_add_tcase(s, tc);
                } else {
                        note_missing("no rootless Podman for the test user");
                }
                if (answers(DOCKER_SOCK, SBX_RUNTIME_DOCKER)) {
                        tc = tcase_create("docker");
                        tcase_add_checked_fixture(tc, NULL, teardown);
                        tcase_set_timeout(tc, 180);
                        tcase_add_test(tc, docker_default_holds);
                        tcase_add_test(tc, docker_profile_refuses_vsock_and_io_uring);
                        tcase_add_test(tc, docker_masks_host_facts);
                        suite_add_tcase(s, tc);
                } else {
                        note_missing("no Docker Engine at /var/run/docker.sock");
                }
        }
        return s;
}

int main(void)
{
        struct sbx_error err = {0};
        int rc;

        /* libcurl is loaded on first use (src/lazy); load it before the forked test cases */
        if (lazy_curl_load(&err) < 0) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
        }
        if (getenv("SBX_TEST_DEBUG"))
                sbx_log_set_level(SBX_LOG_DEBUG);
        rc = sbx_test_run(seccomp_suite());
        if (rc == 0 && *missing)
                sbx_test_skip(missing);
        return rc;
}
