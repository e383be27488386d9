/* spec.c - the OCI config.json of a gVisor sandbox. See spec.h. */
#include "gvisor/spec.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

static void json_putp(json_object **o)
{
        if (*o)
                json_object_put(*o);
}

static json_object *str_array(const char *const *v)
{
        json_object *a = json_object_new_array();

        for (; v && *v; v++)
                json_object_array_add(a, json_object_new_string(*v));
        return a;
}

static json_object *rlimit(const char *type, unsigned long long max)
{
        json_object *o = json_object_new_object();

        json_object_object_add(o, "type", json_object_new_string(type));
        json_object_object_add(o, "hard", json_object_new_uint64(max));
        json_object_object_add(o, "soft", json_object_new_uint64(max));
        return o;
}

static json_object *process_of(const struct gvisor_spec_in *in)
{
        json_object *p = json_object_new_object(), *user = json_object_new_object();
        json_object *rl = json_object_new_array();

        json_object_object_add(user, "uid", json_object_new_int(0));
        json_object_object_add(user, "gid", json_object_new_int(0));
        json_object_object_add(p, "user", user);
        json_object_object_add(p, "args", str_array(in->argv));
        json_object_object_add(p, "env", str_array(in->envp));
        json_object_object_add(p, "cwd", json_object_new_string("/workspace"));
        json_object_object_add(p, "noNewPrivileges", json_object_new_boolean(1));
        /* no capability in any set: the sandbox's uid 0 is root of nothing (no CAP_MKNOD,
         * CAP_SYS_ADMIN, ...) inside the Sentry either */
        json_object *caps = json_object_new_object();
        static const char *const sets[] = {"bounding", "effective", "inheritable", "permitted",
                                           "ambient"};
        for (size_t i = 0; i < ELEMENTSOF(sets); i++)
                json_object_object_add(caps, sets[i], json_object_new_array());
        json_object_object_add(p, "capabilities", caps);
        json_object_array_add(rl, rlimit("RLIMIT_NOFILE", in->nofile_max));
        json_object_array_add(rl, rlimit("RLIMIT_CORE", 0));
        if (in->fsize_max_bytes)
                json_object_array_add(rl, rlimit("RLIMIT_FSIZE", in->fsize_max_bytes));
        json_object_object_add(p, "rlimits", rl);
        return p;
}

static json_object *mount_of(const char *dest, const char *type, const char *source,
                             const char *const *options)
{
        json_object *m = json_object_new_object();

        json_object_object_add(m, "destination", json_object_new_string(dest));
        json_object_object_add(m, "type", json_object_new_string(type));
        json_object_object_add(m, "source", json_object_new_string(source));
        if (options)
                json_object_object_add(m, "options", str_array(options));
        return m;
}

static json_object *mounts_of(const struct gvisor_spec_in *in)
{
        json_object *a = json_object_new_array();
        char size[48];
        const char *tmp_opts[] = {size, "mode=1777", "nosuid", "nodev", NULL};
        static const char *const rw[] = {"rbind", "rw", "nosuid", "nodev", NULL};
        static const char *const ro[] = {"rbind", "ro", "nosuid", "nodev", NULL};

        snprintf(size, sizeof(size), "size=%um", in->tmpfs_mb);
        json_object_array_add(a, mount_of("/proc", "proc", "proc", NULL));
        json_object_array_add(a, mount_of("/tmp", "tmpfs", "tmpfs", tmp_opts));
        json_object_array_add(
            a, mount_of("/workspace", "bind", in->workspace, in->workspace_ro ? ro : rw));
        json_object_array_add(a, mount_of("/sandbox", "bind", in->code_dir, ro));
        if (in->chan_dir)
                json_object_array_add(a, mount_of("/sandbox/chan", "bind", in->chan_dir, rw));
        return a;
}

static json_object *id_map(unsigned host)
{
        json_object *a = json_object_new_array(), *m = json_object_new_object();

        json_object_object_add(m, "containerID", json_object_new_int(0));
        json_object_object_add(m, "hostID", json_object_new_int64(host));
        json_object_object_add(m, "size", json_object_new_int(1));
        json_object_array_add(a, m);
        return a;
}

/* Calls the program gets EPERM for, inside the Sentry (runsc --oci-seccomp): namespaces,
 * mounts, device nodes, bpf and io_uring are the Sentry's own there, but the same promise as
 * native's filter holds (verify's battery). clone's namespace flags are refused by a rule on
 * its first argument; clone3 is left alone: this runsc (20221219) answers every refusal EPERM
 * whatever errnoRet says, and glibc falls back to clone only on ENOSYS, which the Sentry gives
 * for clone3 itself (checked: test_gvisor python_threads_and_node_start). */
static json_object *seccomp_of(void)
{
        static const char *const denied[] = {"unshare",
                                             "setns",
                                             "mount",
                                             "umount2",
                                             "pivot_root",
                                             "mknod",
                                             "mknodat",
                                             "bpf",
                                             "io_uring_setup",
                                             "io_uring_enter",
                                             "io_uring_register",
                                             "ptrace",
                                             "keyctl",
                                             "add_key",
                                             "request_key",
                                             "perf_event_open",
                                             "userfaultfd",
                                             "open_by_handle_at",
                                             "chroot",
                                             NULL};
        /* CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET (sched.h) */
        const unsigned long long ns_flags = 0x7e020000ULL;
        json_object *s = json_object_new_object(), *rules = json_object_new_array();
        json_object *r, *args, *arg;

        json_object_object_add(s, "defaultAction", json_object_new_string("SCMP_ACT_ALLOW"));
        r = json_object_new_object();
        json_object_object_add(r, "names", str_array(denied));
        json_object_object_add(r, "action", json_object_new_string("SCMP_ACT_ERRNO"));
        json_object_object_add(r, "errnoRet", json_object_new_int(1)); /* EPERM */
        json_object_array_add(rules, r);
        /* one rule per flag: a masked compare tests all bits of its mask at once */
        for (unsigned bit = 0; bit < 64; bit++) {
                unsigned long long f = 1ULL << bit;
                static const char *const clone[] = {"clone", NULL};
                if (!(ns_flags & f))
                        continue;
                r = json_object_new_object();
                args = json_object_new_array();
                arg = json_object_new_object();
                json_object_object_add(arg, "index", json_object_new_int(0));
                json_object_object_add(arg, "value", json_object_new_uint64(f));
                json_object_object_add(arg, "valueTwo", json_object_new_uint64(f));
                json_object_object_add(arg, "op", json_object_new_string("SCMP_CMP_MASKED_EQ"));
                json_object_array_add(args, arg);
                json_object_object_add(r, "names", str_array(clone));
                json_object_object_add(r, "action", json_object_new_string("SCMP_ACT_ERRNO"));
                json_object_object_add(r, "errnoRet", json_object_new_int(1));
                json_object_object_add(r, "args", args);
                json_object_array_add(rules, r);
        }
        json_object_object_add(s, "syscalls", rules);
        return s;
}

static json_object *linux_of(const struct gvisor_spec_in *in)
{
        static const char *const ns[] = {"pid", "network", "ipc", "uts", "mount", "user"};
        json_object *l = json_object_new_object(), *a = json_object_new_array();

        for (size_t i = 0; i < ELEMENTSOF(ns); i++) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "type", json_object_new_string(ns[i]));
                json_object_array_add(a, o);
        }
        json_object_object_add(l, "namespaces", a);
        json_object_object_add(l, "uidMappings", id_map(in->host_uid));
        json_object_object_add(l, "gidMappings", id_map(in->host_gid));
        json_object_object_add(l, "seccomp", seccomp_of());
        return l;
}

static int check_in(const struct gvisor_spec_in *in, struct sbx_error *err)
{
        const char *paths[] = {in->rootfs, in->workspace, in->code_dir, in->chan_dir};
        const char *names[] = {"rootfs", "workspace", "code folder", "channel folder"};

        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if ((i < 3 || paths[i]) && (!paths[i] || paths[i][0] != '/'))
                        return sbx_fail(err, EINVAL,
                                        "gvisor spec: the %s path must be absolute (got '%s'); "
                                        "this is a bug in the gvisor backend",
                                        names[i], paths[i] ? paths[i] : "(none)");
        if (!in->argv || !in->argv[0] || !in->argv[0][0])
                return sbx_fail(err, EINVAL, "gvisor spec: no program to run; this is a bug");
        if (in->tmpfs_mb == 0 || in->nofile_max == 0)
                return sbx_fail(err, EINVAL,
                                "gvisor spec: /tmp size and the open-file cap must be positive; "
                                "set VESTIBULE_TMPFS_MB to 1 or more");
        return 0;
}

int gvisor_spec_json(const struct gvisor_spec_in *in, char **ret, struct sbx_error *err)
{
        _cleanup_(json_putp) json_object *root = NULL;
        json_object *r;
        int k;

        k = check_in(in, err);
        if (k < 0)
                return k;
        root = json_object_new_object();
        json_object_object_add(root, "ociVersion", json_object_new_string("1.0.0"));
        json_object_object_add(root, "process", process_of(in));
        r = json_object_new_object();
        json_object_object_add(r, "path", json_object_new_string(in->rootfs));
        json_object_object_add(r, "readonly", json_object_new_boolean(1));
        json_object_object_add(root, "root", r);
        json_object_object_add(root, "hostname", json_object_new_string("sandbox"));
        json_object_object_add(root, "mounts", mounts_of(in));
        json_object_object_add(root, "linux", linux_of(in));
        *ret = xstrdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
                                                                JSON_C_TO_STRING_NOSLASHESCAPE));
        return 0;
}
