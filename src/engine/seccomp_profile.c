/* seccomp_profile.c - the seccomp profile we hand Podman: its own default profile with namespace
 * creation and mounting denied the way Docker's default denies them to a container without
 * CAP_SYS_ADMIN (which we always drop). Podman's API takes `seccomp=` only as a path on the
 * engine's host, so the derived profile is written to a file named by its SHA-256, once. */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/syscalls.h"
#include "lazy/sha256.h"
#include "common/xalloc.h"

/* The families socket(2) may not open: AF_VSOCK (40) reaches the VM host of a VM-based engine
 * (Docker Desktop, a Firecracker or KVM guest) and no network namespace isolates it. */
#define ENGINE_AF_VSOCK 40

#define ERRNO_EPERM 1
#define ERRNO_ENOSYS 38

static bool is_managed(const char *name)
{
        if (strcmp(name, "clone") == 0 || strcmp(name, "clone3") == 0 ||
            strcmp(name, "socket") == 0 || strcmp(name, "fcntl") == 0)
                return true;
        for (size_t i = 0; i < sbx_denied_syscalls_n; i++)
                if (strcmp(name, sbx_denied_syscalls[i]) == 0)
                        return true;
        return false;
}

static json_object *get(json_object *o, const char *key)
{
        json_object *v = NULL;
        return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static json_object *str_array(const char *const *v, size_t n)
{
        json_object *a = json_object_new_array();
        for (size_t i = 0; i < n; i++)
                json_object_array_add(a, json_object_new_string(v[i]));
        return a;
}

static json_object *rule_errno(const char *const *names, size_t n, int errno_ret)
{
        json_object *r = json_object_new_object();
        json_object_object_add(r, "names", str_array(names, n));
        json_object_object_add(r, "action", json_object_new_string("SCMP_ACT_ERRNO"));
        json_object_object_add(r, "errnoRet", json_object_new_int(errno_ret));
        json_object_object_add(r, "comment",
                               json_object_new_string("vestibule: as Docker without "
                                                      "CAP_SYS_ADMIN, and as the native sandbox"));
        return r;
}

/* @name with argument @index whose low 32 bits are not @value: allowed. The kernel reads
 * socket()'s family and fcntl()'s command as 32-bit ints, so a 64-bit "!=" would let
 * 0x1_0000_0000 + @value through: one rule per bit instead, each allowing the values whose bit
 * differs from @value's (as the native filter's add_low32_split, src/native/seccomp.c). */
static void rules_low32_ne(json_object *out, const char *name, int index, uint32_t value,
                           const char *comment)
{
        for (unsigned bit = 0; bit < 32; bit++) {
                uint64_t m = (uint64_t)1 << bit;
                json_object *r = json_object_new_object(), *args = json_object_new_array();
                json_object *a = json_object_new_object();

                json_object_object_add(r, "names", str_array(&name, 1));
                json_object_object_add(r, "action", json_object_new_string("SCMP_ACT_ALLOW"));
                json_object_object_add(a, "index", json_object_new_int(index));
                json_object_object_add(a, "value", json_object_new_uint64(m));
                json_object_object_add(a, "valueTwo", json_object_new_uint64(~value & m));
                json_object_object_add(a, "op", json_object_new_string("SCMP_CMP_MASKED_EQ"));
                json_object_array_add(args, a);
                json_object_object_add(r, "args", args);
                json_object_object_add(r, "comment", json_object_new_string(comment));
                json_object_array_add(out, r);
        }
}

/* @name with argument @index whose low 32 bits are @value: EPERM. */
static json_object *rule_low32_eq_eperm(const char *name, int index, uint32_t value,
                                        const char *comment)
{
        json_object *r = json_object_new_object(), *args = json_object_new_array();
        json_object *a = json_object_new_object();

        json_object_object_add(r, "names", str_array(&name, 1));
        json_object_object_add(r, "action", json_object_new_string("SCMP_ACT_ERRNO"));
        json_object_object_add(r, "errnoRet", json_object_new_int(ERRNO_EPERM));
        json_object_object_add(a, "index", json_object_new_int(index));
        json_object_object_add(a, "value", json_object_new_uint64(0xffffffffULL));
        json_object_object_add(a, "valueTwo", json_object_new_uint64(value));
        json_object_object_add(a, "op", json_object_new_string("SCMP_CMP_MASKED_EQ"));
        json_object_array_add(args, a);
        json_object_object_add(r, "args", args);
        json_object_object_add(r, "comment", json_object_new_string(comment));
        return r;
}

/* What no container may ask for by argument: socket(AF_VSOCK), which reaches the VM host of a
 * VM-based engine and no network namespace isolates; fcntl(F_SETLEASE), a lease on a workspace
 * file, which makes every host process that opens it wait up to
 * /proc/sys/fs/lease-break-time (45 s by default). Everything else of both is allowed (when
 * @allow: the default action does not allow already), and these two get EPERM (when @deny: the
 * default action is not EPERM already). */
static void rules_by_argument(json_object *out, bool allow, bool deny)
{
        static const char vs[] = "vestibule: no AF_VSOCK sockets";
        static const char fl[] = "vestibule: no file leases (F_SETLEASE)";

        if (allow) {
                rules_low32_ne(out, "socket", 0, ENGINE_AF_VSOCK, vs);
                rules_low32_ne(out, "fcntl", 1, F_SETLEASE, fl);
        }
        if (deny) {
                json_object_array_add(out, rule_low32_eq_eperm("socket", 0, ENGINE_AF_VSOCK, vs));
                json_object_array_add(out, rule_low32_eq_eperm("fcntl", 1, F_SETLEASE, fl));
        }
}

/* Restrict rule @r to the s390 arches (@s390) or to every other arch: clone's flags are its
 * second argument there. */
static void rule_arches(json_object *r, bool s390)
{
        static const char *const arches[] = {"s390", "s390x"};
        json_object *f = json_object_new_object();
        json_object_object_add(f, "arches", str_array(arches, ELEMENTSOF(arches)));
        json_object_object_add(r, s390 ? "includes" : "excludes", f);
}

/* clone with (arg & @mask) == @want: @action (errno @errno_ret for SCMP_ACT_ERRNO). */
static json_object *rule_clone(bool s390, uint64_t mask, uint64_t want, const char *action,
                               int errno_ret)
{
        static const char *const clone[] = {"clone"};
        json_object *r = json_object_new_object(), *args = json_object_new_array();
        json_object *a = json_object_new_object();

        json_object_object_add(r, "names", str_array(clone, 1));
        json_object_object_add(r, "action", json_object_new_string(action));
        if (strcmp(action, "SCMP_ACT_ERRNO") == 0)
                json_object_object_add(r, "errnoRet", json_object_new_int(errno_ret));
        json_object_object_add(a, "index", json_object_new_int(s390 ? 1 : 0));
        json_object_object_add(a, "value", json_object_new_uint64(mask));
        json_object_object_add(a, "valueTwo", json_object_new_uint64(want));
        json_object_object_add(a, "op", json_object_new_string("SCMP_CMP_MASKED_EQ"));
        json_object_array_add(args, a);
        json_object_object_add(r, "args", args);
        json_object_object_add(r, "comment",
                               json_object_new_string(want ? "vestibule: no CLONE_NEW* flags"
                                                           : "vestibule: clone without "
                                                             "CLONE_NEW* flags"));
        rule_arches(r, s390);
        return r;
}

/* Drop the managed names from rule @r. Return false when nothing of @r is left (drop it). */
static bool rule_strip(json_object *r)
{
        json_object *names = get(r, "names"), *name = get(r, "name");
        bool has_name = name && json_object_is_type(name, json_type_string);

        if (has_name && is_managed(json_object_get_string(name)))
                return false;
        if (!names || !json_object_is_type(names, json_type_array))
                return true;
        json_object *kept = json_object_new_array();
        size_t had = json_object_array_length(names);
        for (size_t i = 0; i < had; i++) {
                json_object *n = json_object_array_get_idx(names, i);
                const char *s = json_object_get_string(n);
                if (s && is_managed(s))
                        continue;
                json_object_array_add(kept, json_object_get(n));
        }
        size_t left = json_object_array_length(kept);
        json_object_object_add(r, "names", kept);
        return !(had > 0 && left == 0 && !has_name);
}

int engine_seccomp_profile_derive(json_object *def, json_object **ret, struct sbx_error *err)
{
        _cleanup_(json_putp) json_object *p = NULL;
        json_object *in_rules = get(def, "syscalls"), *out_rules;
        const char *def_action;
        int def_errno = ERRNO_EPERM; /* containers-common's default when no errno is given */

        if (!def || !json_object_is_type(def, json_type_object) || !in_rules ||
            !json_object_is_type(in_rules, json_type_array) || !get(def, "defaultAction") ||
            !json_object_is_type(get(def, "defaultAction"), json_type_string))
                return sbx_fail(err, EINVAL,
                                "the engine's default seccomp profile has no defaultAction or "
                                "syscalls list: not a seccomp profile");
        def_action = json_object_get_string(get(def, "defaultAction"));
        if (get(def, "defaultErrnoRet"))
                def_errno = json_object_get_int(get(def, "defaultErrnoRet"));

        if (json_object_deep_copy(def, &p, NULL) < 0 || !p)
                return sbx_fail(err, ENOMEM, "cannot copy the engine's default seccomp profile");
        in_rules = get(p, "syscalls");
        out_rules = json_object_new_array();
        for (size_t i = 0; i < json_object_array_length(in_rules); i++) {
                json_object *r = json_object_array_get_idx(in_rules, i);
                if (!json_object_is_type(r, json_type_object))
                        continue;
                if (rule_strip(r))
                        json_object_array_add(out_rules, json_object_get(r));
        }

        /* A rule equal to the default action adds nothing (and libseccomp may refuse it). */
        bool def_is_errno = strcmp(def_action, "SCMP_ACT_ERRNO") == 0;
        bool def_allows =
            strcmp(def_action, "SCMP_ACT_ALLOW") == 0 || strcmp(def_action, "SCMP_ACT_LOG") == 0;
        if (!(def_is_errno && def_errno == ERRNO_EPERM))
                json_object_array_add(
                    out_rules, rule_errno(sbx_denied_syscalls, sbx_denied_syscalls_n, ERRNO_EPERM));
        if (!(def_is_errno && def_errno == ERRNO_ENOSYS)) {
                static const char *const clone3[] = {"clone3"};
                json_object_array_add(out_rules, rule_errno(clone3, 1, ERRNO_ENOSYS));
        }
        /* socket: every family but AF_VSOCK; fcntl: every command but F_SETLEASE */
        rules_by_argument(out_rules, !def_allows, !(def_is_errno && def_errno == ERRNO_EPERM));
        for (int s390 = 0; s390 <= 1; s390++) {
                if (!def_allows)
                        json_object_array_add(out_rules, rule_clone(s390, ENGINE_CLONE_NS_MASK, 0,
                                                                    "SCMP_ACT_ALLOW", 0));
                if (def_is_errno && def_errno == ERRNO_EPERM)
                        continue;
                /* one rule per flag: any CLONE_NEW* bit set is EPERM, as on Docker */
                for (unsigned bit = 0; bit < 64; bit++) {
                        uint64_t f = 1ull << bit;
                        if (ENGINE_CLONE_NS_MASK & f)
                                json_object_array_add(
                                    out_rules,
                                    rule_clone(s390, f, f, "SCMP_ACT_ERRNO", ERRNO_EPERM));
                }
        }
        json_object_object_add(p, "syscalls", out_rules);
        *ret = TAKE_PTR(p);
        return 0;
}

/* What a container may call whatever its arguments: the sandbox's list (common/syscalls.h, the
 * one the native filter allows; fcntl is not in it, rules_by_argument() allows it). Names the
 * engine's libseccomp does not know are skipped by the runtime (runc ignores unknown names). A
 * new JSON array. */
static json_object *container_allowed(void)
{
        return str_array(sbx_sandbox_syscalls, sbx_sandbox_syscalls_n);
}

char *engine_seccomp_profile_docker(void)
{
        _cleanup_(json_putp) json_object *p = json_object_new_object();
        json_object *rules = json_object_new_array(), *allow = json_object_new_object();
        static const uint64_t personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
        static const char *const clone3[] = {"clone3"};

        /* Everything not named fails with EPERM; no "architectures": only the native ABI is in
         * the filter, so int 0x80 and x32 calls miss every rule (the runtime refuses them). */
        json_object_object_add(p, "defaultAction", json_object_new_string("SCMP_ACT_ERRNO"));
        json_object_object_add(p, "defaultErrnoRet", json_object_new_int(ERRNO_EPERM));
        json_object_object_add(allow, "names", container_allowed());
        json_object_object_add(allow, "action", json_object_new_string("SCMP_ACT_ALLOW"));
        json_object_array_add(rules, allow);
        /* clone3 hides its flags from a BPF filter: ENOSYS, so glibc and runtimes use clone */
        json_object_array_add(rules, rule_errno(clone3, 1, ERRNO_ENOSYS));
        /* clone: threads and processes, no CLONE_NEW* (the default EPERM refuses those) */
        for (int s390 = 0; s390 <= 1; s390++)
                json_object_array_add(
                    rules, rule_clone(s390, ENGINE_CLONE_NS_MASK, 0, "SCMP_ACT_ALLOW", 0));
        /* socket but AF_VSOCK, fcntl but F_SETLEASE (the default EPERM refuses those two) */
        rules_by_argument(rules, true, false);
        /* personality: only the values Docker allows (PER_LINUX, its 32-bit flavours, query) */
        for (size_t i = 0; i < ELEMENTSOF(personas); i++) {
                static const char *const pers[] = {"personality"};
                json_object *r = json_object_new_object(), *args = json_object_new_array();
                json_object *a = json_object_new_object();
                json_object_object_add(r, "names", str_array(pers, 1));
                json_object_object_add(r, "action", json_object_new_string("SCMP_ACT_ALLOW"));
                json_object_object_add(a, "index", json_object_new_int(0));
                json_object_object_add(a, "value", json_object_new_uint64(personas[i]));
                json_object_object_add(a, "valueTwo", json_object_new_uint64(0));
                json_object_object_add(a, "op", json_object_new_string("SCMP_CMP_EQ"));
                json_object_array_add(args, a);
                json_object_object_add(r, "args", args);
                json_object_array_add(rules, r);
        }
        json_object_object_add(p, "syscalls", rules);
        return xstrdup(json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN));
}

int engine_seccomp_profile_dir(engine_getenv_fn getenv_fn, char *ret, size_t size,
                               struct sbx_error *err)
{
        const char *xdg = getenv_fn ? getenv_fn("XDG_RUNTIME_DIR") : NULL;
        int n;

        if (geteuid() == 0)
                n = snprintf(ret, size, "/run/vestibule/seccomp");
        else if (xdg && xdg[0] == '/')
                n = snprintf(ret, size, "%s/vestibule/seccomp", xdg);
        else
                n = snprintf(ret, size, "/tmp/vestibule-%u/seccomp", (unsigned)geteuid());
        if (n < 0 || (size_t)n >= size)
                return sbx_fail(err, ENAMETOOLONG,
                                "the seccomp profile directory path is too "
                                "long: set XDG_RUNTIME_DIR to a short path");
        return 0;
}

/* @path must be a directory of ours that nobody else can write to. */
static int dir_check(const char *path, struct sbx_error *err)
{
        struct stat st;

        if (lstat(path, &st) < 0)
                return sbx_fail(err, errno, "cannot stat '%s': %m", path);
        if (!S_ISDIR(st.st_mode))
                return sbx_fail(err, ENOTDIR, "'%s' is not a directory: remove it", path);
        if (st.st_uid != geteuid() || (st.st_mode & 022))
                return sbx_fail(err, EPERM,
                                "'%s' belongs to uid %u or is writable by others: a seccomp "
                                "profile there could be swapped; remove it",
                                path, (unsigned)st.st_uid);
        return 0;
}

/* A directory on the way to ours: root's or ours, a real directory, and writable by others
 * only with the sticky bit (as /tmp), so nobody else can rename what we put in it. */
static int parent_check(const char *path, struct sbx_error *err)
{
        struct stat st;

        if (lstat(path, &st) < 0)
                return sbx_fail(err, errno, "cannot stat '%s': %m", path);
        if (!S_ISDIR(st.st_mode))
                return sbx_fail(err, ENOTDIR, "'%s' is not a directory", path);
        if ((st.st_uid != 0 && st.st_uid != geteuid()) ||
            ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)))
                return sbx_fail(err, EPERM,
                                "'%s' belongs to uid %u or is writable by others: a seccomp "
                                "profile under it could be swapped; remove it or set "
                                "XDG_RUNTIME_DIR to a private directory",
                                path, (unsigned)st.st_uid);
        return 0;
}

/* mkdir -p @dir, 0755 for what we create; every directory on the way must pass parent_check()
 * and @dir itself dir_check(). */
static int dir_make(const char *dir, struct sbx_error *err)
{
        _cleanup_free_ char *p = xstrdup(dir);
        int r;

        if (p[0] != '/')
                return sbx_fail(err, EINVAL, "the seccomp profile directory '%s' is not absolute",
                                dir);
        r = parent_check("/", err);
        if (r < 0)
                return r;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return sbx_fail(err, errno, "cannot create '%s': %m", p);
                r = parent_check(p, err);
                if (r < 0)
                        return r;
                *s = '/';
        }
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return sbx_fail(err, errno, "cannot create '%s': %m", p);
        return dir_check(p, err);
}

/* An existing @path is usable when it is our regular file, not writable by others, holding
 * exactly @sha. */
static bool existing_ok(const char *path, const char *sha)
{
        struct stat st;
        char have[65];
        struct sbx_error e = {0};

        if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
            (st.st_mode & 022) || (st.st_mode & 0444) != 0444)
                return false;
        if (sbx_sha256_file(path, NULL, have, &e) < 0)
                return false;
        return strcmp(have, sha) == 0;
}

int engine_seccomp_profile_prepare(const char *default_path, const char *dir, char *ret,
                                   size_t size, struct sbx_error *err)
{
        _cleanup_(json_putp) json_object *def = NULL, *ours = NULL;
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        _cleanup_close_ int fd = -1;
        char sha[65];
        int r;

        if (!default_path || !*default_path)
                return sbx_fail(err, ENOENT,
                                "the engine names no default seccomp profile to start from");
        if (access(default_path, R_OK) < 0)
                return sbx_fail(err, errno,
                                "cannot read the engine's default seccomp profile '%s': %m",
                                default_path);
        def = json_object_from_file(default_path);
        if (!def)
                return sbx_fail(err, EINVAL,
                                "cannot parse the engine's default seccomp profile '%s': %s",
                                default_path, json_util_get_last_err());
        r = engine_seccomp_profile_derive(def, &ours, err);
        if (r < 0)
                return r;
        const char *text = json_object_to_json_string_ext(ours, JSON_C_TO_STRING_PLAIN);
        size_t len = strlen(text);
        r = sbx_sha256_hex(text, len, sha, err);
        if (r < 0)
                return r;

        r = dir_make(dir, err);
        if (r < 0)
                return r;
        path = xasprintf("%s/%s.json", dir, sha);
        if (strlen(path) >= size)
                return sbx_fail(err, ENAMETOOLONG, "the seccomp profile path '%s' is too long",
                                path);
        if (!existing_ok(path, sha)) {
                tmp = xasprintf("%s/.%s.XXXXXX", dir, sha);
                fd = mkostemp(tmp, O_CLOEXEC);
                if (fd < 0)
                        return sbx_fail(err, errno, "cannot create a file in '%s': %m", dir);
                size_t off = 0;
                while (off < len) {
                        ssize_t n = write(fd, text + off, len - off);
                        if (n < 0) {
                                r = sbx_fail(err, errno, "cannot write '%s': %m", tmp);
                                unlink(tmp);
                                return r;
                        }
                        off += (size_t)n;
                }
                if (fchmod(fd, 0644) < 0 || rename(tmp, path) < 0) {
                        r = sbx_fail(err, errno, "cannot put the seccomp profile at '%s': %m",
                                     path);
                        unlink(tmp);
                        return r;
                }
        }
        snprintf(ret, size, "%s", path);
        return 0;
}
