/* body.c - the locked-down create body (docs/design/engine-api.md §1) and the check that the engine
 * kept every option: a container whose answer lacks a lockdown option never starts. */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

static json_object *strv(const char *const *v)
{
        json_object *a = json_object_new_array();
        for (; v && *v; v++)
                json_object_array_add(a, json_object_new_string(*v));
        return a;
}

static json_object *ulimit(const char *name, int64_t n)
{
        json_object *o = json_object_new_object();
        json_object_object_add(o, "Name", json_object_new_string(name));
        json_object_object_add(o, "Soft", json_object_new_int64(n));
        json_object_object_add(o, "Hard", json_object_new_int64(n));
        return o;
}

/* @owner: a volume's labels, should the engine make it at the create (engine_volume_options()) */
static json_object *mount(const char *type, const char *src, const char *dst, bool ro,
                          const char *owner)
{
        json_object *o = json_object_new_object();
        json_object_object_add(o, "Type", json_object_new_string(type));
        json_object_object_add(o, "Source", json_object_new_string(src));
        json_object_object_add(o, "Target", json_object_new_string(dst));
        json_object_object_add(o, "ReadOnly", json_object_new_boolean(ro));
        /* NoCopy: an empty volume must stay as filled (an empty workspace's root owned by the
         * run's user), not take the image directory's content and owner when a container
         * mounting it is created */
        if (strcmp(type, "volume") == 0)
                json_object_object_add(o, "VolumeOptions", engine_volume_options(owner));
        return o;
}

/* nproc counts processes per real uid host-wide (docs/design/engine-api.md §1), so it is not the
 * per-sandbox cap (PidsLimit is): keep it high enough for other runs of the same uid, and
 * within the engine's own hard limit (Podman fails start above it). */
#define ENGINE_NPROC 4096
#define ENGINE_NOFILE 1024

/* The container's environment: ours, then @s->extra_env (whose PATH, if any, replaces ours). */
static json_object *body_env(const struct engine_run_spec *s)
{
        static const char *const env[] = {
            "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "TZ=UTC",
            "PYTHONDONTWRITEBYTECODE=1",         NULL};
        json_object *envj = json_object_new_array();
        bool own_path = false;

        for (const char *const *e = s->extra_env; e && *e; e++)
                own_path |= strncmp(*e, "PATH=", 5) == 0;
        for (const char *const *e = env; *e; e++)
                if (!own_path || strncmp(*e, "PATH=", 5) != 0)
                        json_object_array_add(envj, json_object_new_string(*e));
        for (const char *const *e = s->extra_env; e && *e; e++)
                json_object_array_add(envj, json_object_new_string(*e));
        return envj;
}

/* /proc files masked (an empty, read-only file over each) beyond the engine's own list, as the
 * native sandbox masks them (src/native/spawn.c, child_mask_proc): the host's kernel command
 * line and boot id, and the keys of the sandbox's uid. */
static const char *const masked_ours[] = {"/proc/cmdline", "/proc/sys/kernel/random/boot_id",
                                          "/proc/key-users", NULL};

/* Docker's own list (moby, oci/defaults.go, DefaultLinuxSpec): HostConfig.MaskedPaths replaces
 * it, so it is named again. */
static const char *const masked_docker[] = {"/proc/asound",
                                            "/proc/acpi",
                                            "/proc/interrupts",
                                            "/proc/kcore",
                                            "/proc/keys",
                                            "/proc/latency_stats",
                                            "/proc/timer_list",
                                            "/proc/timer_stats",
                                            "/proc/sched_debug",
                                            "/proc/scsi",
                                            "/sys/firmware",
                                            "/sys/devices/virtual/powercap",
                                            NULL};

/* Mask masked_ours: Docker takes HostConfig.MaskedPaths (its defaults and ours); Podman adds
 * "mask=a:b" of SecurityOpt to its own (podman-run(1), --security-opt mask=). */
static void host_masks(json_object *hc, json_object *secopt, bool podman)
{
        if (podman) {
                _cleanup_free_ char *m = xstrdup("mask=");
                for (const char *const *p = masked_ours; *p; p++) {
                        char *n = xasprintf("%s%s%s", m, p == masked_ours ? "" : ":", *p);
                        free(m);
                        m = n;
                }
                json_object_array_add(secopt, json_object_new_string(m));
                return;
        }
        json_object *a = strv(masked_docker);
        for (const char *const *p = masked_ours; *p; p++)
                json_object_array_add(a, json_object_new_string(*p));
        json_object_object_add(hc, "MaskedPaths", a);
}

/* HostConfig, part 1: no network, no capabilities, no-new-privileges and the seccomp profile,
 * a read-only rootfs with its tmpfs mounts, no IPC, a cgroup namespace, the limits. */
static void host_confinement(json_object *hc, const struct engine_run_spec *s)
{
        json_object *tmpfs = json_object_new_object();
        json_object *ul = json_object_new_array();
        json_object *secopt = json_object_new_array();
        json_object *capdrop = json_object_new_array();
        _cleanup_free_ char *tmp =
            xasprintf("rw,noexec,nosuid,nodev,size=%um,mode=1777", s->tmpfs_mb);

        json_object_object_add(hc, "NetworkMode", json_object_new_string("none"));
        json_object_array_add(capdrop, json_object_new_string("ALL"));
        json_object_object_add(hc, "CapDrop", capdrop);
        json_object_array_add(secopt, json_object_new_string("no-new-privileges"));
        if (s->seccomp_profile) {
                /* our profile (seccomp_profile.c): Docker takes the JSON text itself, Podman
                 * a path on the engine's host */
                _cleanup_free_ char *sc = xasprintf("seccomp=%s", s->seccomp_profile);
                json_object_array_add(secopt, json_object_new_string(sc));
        }
        host_masks(hc, secopt, s->podman);
        json_object_object_add(hc, "SecurityOpt", secopt);
        json_object_object_add(hc, "ReadonlyRootfs", json_object_new_boolean(true));
        /* /tmp: noexec said explicitly (Docker adds it by default, Podman does not): the
         * interpreters need nothing executable there, and it stops a dropped binary from
         * running. /var/tmp and /run read-only: otherwise Podman mounts its own writable ones. */
        json_object_object_add(tmpfs, "/tmp", json_object_new_string(tmp));
        json_object_object_add(tmpfs, "/var/tmp", json_object_new_string("ro,size=16k"));
        json_object_object_add(tmpfs, "/run", json_object_new_string("ro,size=16k"));
        json_object_object_add(hc, "Tmpfs", tmpfs);
        json_object_object_add(hc, "IpcMode", json_object_new_string("none"));
        /* its own cgroup namespace: /proc/self/cgroup and the cgroup mounts show "/", not the
         * host path of the run's cgroup (which names the server: hostcg.c) */
        json_object_object_add(hc, "CgroupnsMode", json_object_new_string("private"));
        json_object_object_add(hc, "PidsLimit", json_object_new_int64(s->pids_max));
        json_object_object_add(hc, "Memory", json_object_new_int64((int64_t)s->memory_bytes));
        json_object_object_add(hc, "MemorySwap", json_object_new_int64((int64_t)s->memory_bytes));
        json_object_object_add(hc, "NanoCpus", json_object_new_int64((int64_t)s->nano_cpus));
        json_object_array_add(ul, ulimit("nofile", ENGINE_NOFILE));
        json_object_array_add(ul, ulimit("nproc", ENGINE_NPROC));
        json_object_array_add(ul, ulimit("core", 0));
        json_object_object_add(hc, "Ulimits", ul);
}

/* HostConfig, part 2: the workspace and /sandbox (bind mounts, or a remote engine's volumes),
 * init, the log's bounds, the user namespace and the parent cgroup. */
static void host_mounts_and_rest(json_object *hc, const struct engine_run_spec *s)
{
        json_object *mounts = json_object_new_array();
        json_object *lc = json_object_new_object(), *lcc = json_object_new_object();

        if (s->code_volume && s->workspace_volume) {
                json_object_array_add(mounts, mount("volume", s->workspace_volume, "/workspace",
                                                    s->workspace_ro, s->owner));
                json_object_array_add(mounts,
                                      mount("volume", s->code_volume, "/sandbox", true, s->owner));
        } else {
                json_object_array_add(
                    mounts, mount("bind", s->workspace, "/workspace", s->workspace_ro, NULL));
                json_object_array_add(mounts, mount("bind", s->code_dir, "/sandbox", true, NULL));
        }
        json_object_object_add(hc, "Mounts", mounts);
        json_object_object_add(hc, "Init", json_object_new_boolean(s->init));
        json_object_object_add(hc, "AutoRemove", json_object_new_boolean(false));
        json_object_object_add(lc, "Type", json_object_new_string("json-file"));
        json_object_object_add(lcc, "max-size", json_object_new_string("1m"));
        json_object_object_add(lcc, "max-file", json_object_new_string("1"));
        json_object_object_add(lc, "Config", lcc);
        json_object_object_add(hc, "LogConfig", lc);
        if (s->userns_keep_id)
                json_object_object_add(hc, "UsernsMode", json_object_new_string("keep-id"));
        /* a parent cgroup of ours whose counters outlive the container's (hostcg.c) */
        if (s->cgroup_parent)
                json_object_object_add(hc, "CgroupParent",
                                       json_object_new_string(s->cgroup_parent));
        /* VESTIBULE_CONTAINER_RUNTIME, checked by the probe (runtime.c) */
        if (s->runtime)
                json_object_object_add(hc, "Runtime", json_object_new_string(s->runtime));
}

json_object *engine_create_body(const struct engine_run_spec *s)
{
        json_object *b = json_object_new_object();
        json_object *hc = json_object_new_object();
        json_object *labels = json_object_new_object();
        _cleanup_free_ char *user = xasprintf("%u:%u", (unsigned)s->uid, (unsigned)s->gid);

        json_object_object_add(b, "Image", json_object_new_string(s->image));
        json_object_object_add(b, "Cmd", strv(s->cmd));
        /* The image's entrypoint must not wrap our command. */
        json_object_object_add(b, "Entrypoint", json_object_new_array());
        json_object_object_add(b, "User", json_object_new_string(user));
        json_object_object_add(b, "WorkingDir", json_object_new_string("/workspace"));
        json_object_object_add(b, "Env", body_env(s));
        json_object_object_add(labels, "vestibule.run", json_object_new_string("1"));
        json_object_object_add(labels, "vestibule.owner", json_object_new_string(s->owner));
        json_object_object_add(b, "Labels", labels);
        json_object_object_add(b, "AttachStdin", json_object_new_boolean(s->open_stdin));
        json_object_object_add(b, "AttachStdout", json_object_new_boolean(true));
        json_object_object_add(b, "AttachStderr", json_object_new_boolean(true));
        json_object_object_add(b, "OpenStdin", json_object_new_boolean(s->open_stdin));
        /* the engine closes stdin when the attached client (the server) goes, even SIGKILLed:
         * the session's supervisor reads EOF (cells.c) */
        json_object_object_add(b, "StdinOnce", json_object_new_boolean(s->open_stdin));
        json_object_object_add(b, "Tty", json_object_new_boolean(false));
        /* Docker: no libnetwork sandbox at all (~100 ms faster start). Podman ignores it, so
         * NetworkMode none below is what isolates there. */
        json_object_object_add(b, "NetworkDisabled", json_object_new_boolean(true));
        json_object_object_add(b, "StopTimeout", json_object_new_int(1));
        host_confinement(hc, s);
        host_mounts_and_rest(hc, s);
        json_object_object_add(b, "HostConfig", hc);
        return b;
}

static json_object *get(json_object *o, const char *key)
{
        json_object *v = NULL;
        if (!o || !json_object_object_get_ex(o, key, &v))
                return NULL;
        return v;
}

static int64_t get_i64(json_object *o, const char *key)
{
        json_object *v = get(o, key);
        return v ? json_object_get_int64(v) : 0;
}

static const char *get_str(json_object *o, const char *key)
{
        json_object *v = get(o, key);
        return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
}

static bool array_has(json_object *a, const char *s, bool prefix)
{
        if (!a || !json_object_is_type(a, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                const char *e = json_object_get_string(json_object_array_get_idx(a, i));
                if (!e)
                        continue;
                if (prefix ? strncmp(e, s, strlen(s)) == 0 : strcasecmp(e, s) == 0)
                        return true;
        }
        return false;
}

static void add_reason(char *buf, size_t size, const char *what)
{
        size_t used = strlen(buf);
        if (strstr(buf, what))
                return;
        snprintf(buf + used, size > used ? size - used : 0, "%s%s", used ? ", " : "", what);
}

/* Podman's inspect lists the dropped capabilities one by one instead of "ALL": accept that
 * when the ones that matter most are in it and none is added back. */
static bool caps_all_dropped(json_object *hc)
{
        /* Podman's default set (containers.conf), which "drop ALL" must all have removed;
         * the in-container probe in the tests checks CapEff/CapBnd are 0. */
        static const char *const must[] = {
            "CAP_CHOWN",   "CAP_DAC_OVERRIDE",     "CAP_FOWNER",    "CAP_FSETID",
            "CAP_KILL",    "CAP_NET_BIND_SERVICE", "CAP_SETFCAP",   "CAP_SETGID",
            "CAP_SETPCAP", "CAP_SETUID",           "CAP_SYS_CHROOT"};
        json_object *drop = get(hc, "CapDrop"), *add = get(hc, "CapAdd");

        if (add && json_object_is_type(add, json_type_array) && json_object_array_length(add) > 0)
                return false;
        if (array_has(drop, "ALL", false))
                return true;
        for (size_t i = 0; i < ELEMENTSOF(must); i++)
                if (!array_has(drop, must[i], false) && !array_has(drop, must[i] + 4, false))
                        return false;
        return true;
}

/* The mount at @dst is the one asked for: read-only as asked, the only one at @dst, and for a
 * volume (@type "volume") that kind with the name @src. */
static bool mount_as_asked(json_object *mounts, const char *dst, const char *type, const char *src,
                           bool ro)
{
        bool found = false;

        if (!mounts || !json_object_is_type(mounts, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(mounts); i++) {
                json_object *m = json_object_array_get_idx(mounts, i);
                if (strcmp(get_str(m, "Destination"), dst) != 0)
                        continue;
                if (found)
                        return false; /* two mounts at one place: not what was asked */
                json_object *rw = get(m, "RW");
                if (!rw || json_object_get_boolean(rw) != !ro)
                        return false;
                if (strcmp(type, "volume") == 0 && (strcmp(get_str(m, "Type"), "volume") != 0 ||
                                                    strcmp(get_str(m, "Name"), src) != 0))
                        return false;
                found = true;
        }
        return found;
}

/* SecurityOpt holds "seccomp=@path" exactly once and no other seccomp= entry (a second one,
 * such as seccomp=unconfined, would be a profile we did not ask for). */
static bool seccomp_as_asked(json_object *secopt, const char *path)
{
        unsigned ours = 0, other = 0;

        if (!secopt || !json_object_is_type(secopt, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(secopt); i++) {
                const char *e = json_object_get_string(json_object_array_get_idx(secopt, i));
                if (!e || strncmp(e, "seccomp", 7) != 0)
                        continue;
                if ((e[7] == '=' || e[7] == ':') && strcmp(e + 8, path) == 0)
                        ours++;
                else
                        other++;
        }
        return ours == 1 && other == 0;
}

/* Podman 4.3's inspect says UsernsMode "private" even for keep-id; its libpod inspect's
 * IDMappings show the truth: container uid @uid maps to the user namespace's 0, which is the
 * rootless user itself. */
static bool keep_id_mapped(json_object *idm, uid_t uid)
{
        char want[32];
        snprintf(want, sizeof(want), "%u:0:1", (unsigned)uid);
        return array_has(get(idm, "UidMap"), want, false);
}

int engine_verify_inspect(json_object *inspect, const struct engine_run_spec *s, char *degraded,
                          size_t degraded_size, struct sbx_error *err)
{
        json_object *hc = get(inspect, "HostConfig"), *cfg = get(inspect, "Config");
        json_object *tmpfs = get(hc, "Tmpfs");
        _cleanup_free_ char *user = xasprintf("%u:%u", (unsigned)s->uid, (unsigned)s->gid);
        const char *bad = NULL;
        bool vol = s->code_volume && s->workspace_volume;

        if (!hc || !cfg)
                return sbx_fail(err, EPROTO,
                                "the container engine's inspect answer has no HostConfig/Config: "
                                "cannot verify the sandbox, not running it");
        if (strcmp(get_str(hc, "NetworkMode"), "none") != 0)
                bad = "NetworkMode none (no network)";
        else if (!caps_all_dropped(hc))
                bad = "CapDrop ALL (no capabilities)";
        else if (!array_has(get(hc, "SecurityOpt"), "no-new-privileges", true))
                bad = "SecurityOpt no-new-privileges";
        else if (s->seccomp_profile &&
                 !seccomp_as_asked(get(hc, "SecurityOpt"), s->seccomp_profile))
                bad = "SecurityOpt seccomp=<our profile> (no namespaces, mounts, io_uring, vsock)";
        else if (!json_object_get_boolean(get(hc, "ReadonlyRootfs")))
                bad = "ReadonlyRootfs (read-only root filesystem)";
        else if (!tmpfs || !get(tmpfs, "/tmp") || !strstr(get_str(tmpfs, "/tmp"), "noexec"))
                bad = "Tmpfs /tmp (noexec, size-capped)";
        /* Podman 4.3's inspect says "shareable" whatever was applied (IpcMode none is: no
         * /dev/shm inside, checked by the engine tests' probe), so only Docker's is read. */
        else if (!s->podman && strcmp(get_str(hc, "IpcMode"), "none") != 0)
                bad = "IpcMode none";
        else if (!s->podman && strcmp(get_str(hc, "CgroupnsMode"), "private") != 0)
                bad = "CgroupnsMode private (its own cgroup namespace)";
        else if (s->runtime && strcmp(get_str(hc, "Runtime"), s->runtime) != 0)
                bad = "HostConfig.Runtime (VESTIBULE_CONTAINER_RUNTIME)";
        else if (strcmp(get_str(cfg, "User"), user) != 0)
                bad = "User (the unprivileged uid:gid)";
        else if (!mount_as_asked(get(inspect, "Mounts"), "/sandbox", vol ? "volume" : "bind",
                                 s->code_volume, true))
                bad = vol ? "the read-only /sandbox volume" : "the read-only /sandbox bind mount";
        else if (!mount_as_asked(get(inspect, "Mounts"), "/workspace", vol ? "volume" : "bind",
                                 s->workspace_volume, s->workspace_ro))
                bad = vol ? "the /workspace volume" : "the /workspace bind mount";
        else if (s->userns_keep_id && strcmp(get_str(hc, "UsernsMode"), "keep-id") != 0 &&
                 !keep_id_mapped(get(inspect, "IDMappings"), s->uid))
                bad = "UsernsMode keep-id";
        if (bad)
                return sbx_fail(err, EPERM,
                                "the container engine did not keep %s in the container it created, "
                                "so the sandbox would be weaker than claimed and nothing was run: "
                                "use Docker Engine 20.10+ or Podman 4+",
                                bad);

        if (get_i64(hc, "Memory") != (int64_t)s->memory_bytes ||
            get_i64(hc, "MemorySwap") != (int64_t)s->memory_bytes)
                add_reason(degraded, degraded_size, "memory");
        int64_t nano = get_i64(hc, "NanoCpus");
        int64_t quota = get_i64(hc, "CpuQuota"), period = get_i64(hc, "CpuPeriod");
        if (nano != (int64_t)s->nano_cpus &&
            !(period > 0 && quota * 1000000000 / period == (int64_t)s->nano_cpus))
                add_reason(degraded, degraded_size, "cpu");
        if (get_i64(hc, "PidsLimit") != (int64_t)s->pids_max)
                add_reason(degraded, degraded_size, "pids");
        return 0;
}
