/* probe.c - what a container engine is and enforces, learned once per backend (and again after
 * the engine went away): connect (conn.c), /info or libpod info (the OS, seccomp, rootless, the
 * cgroup driver and the limits it applies), the grade that follows, whether the engine sees our
 * files (else hand-in volumes, handin.c), the start-up sweep, and whether usage is read from the
 * host's cgroups (hostcg.c). See docs/design/engine-api.md for the answers measured. */
#include "engine/probe.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/state.h"

/* /info: Podman builds it by running conmon, the runtime and more: 4-20 s measured under CI
 * load (load average 18 on 2 cores). Slow is not down: /_ping already said it is up. */
#define ENGINE_INFO_MS 60000

static void reason_add(char *buf, size_t size, const char *s)
{
        size_t used = strlen(buf);
        snprintf(buf + used, size > used ? size - used : 0, "%s%s", used ? "; " : "", s);
}

/* Docker's /info: the OS, seccomp, rootless, cgroup driver and the limits it can apply. */
static int probe_docker(struct engine_state *st, bool *seccomp, char *reasons, size_t size,
                        struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply inf = {0};
        char limits[64] = "";
        bool rootless = false;
        int r;

        r = engine_get(&st->conn,
                       &(struct engine_call){.path = "/info",
                                             .ok = {200},
                                             .body = ENGINE_BODY_JSON,
                                             .timeout_ms = ENGINE_INFO_MS,
                                             .what = "say what it enforces (/info)"},
                       &inf, err);
        if (r < 0)
                return r;
        json_object *info = inf.json;
        snprintf(st->daemon_os, sizeof(st->daemon_os), "%s",
                 json_object_get_string(engine_jget(info, "OperatingSystem")) ?: "");
        snprintf(st->daemon_name, sizeof(st->daemon_name), "%s",
                 json_object_get_string(engine_jget(info, "Name")) ?: "");
        const char *os = json_object_get_string(engine_jget(info, "OSType"));
        if (os && strcmp(os, "linux") != 0)
                return sbx_fail(err, ENOTSUP,
                                "the Docker Engine runs %s containers: switch Docker Desktop to "
                                "Linux containers",
                                os);
        json_object *so = engine_jget(info, "SecurityOptions");
        for (size_t i = 0; so && i < json_object_array_length(so); i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(so, i));
                if (s && strstr(s, "name=seccomp") && !strstr(s, "profile=unconfined"))
                        *seccomp = true;
                if (s && strstr(s, "name=rootless"))
                        rootless = true;
        }
        st->runtime_listed =
            *st->runtime && engine_jget(engine_jget(info, "Runtimes"), st->runtime);
        if (st->runtime_listed)
                engine_runtime_args(st, engine_jget(engine_jget(info, "Runtimes"), st->runtime));
        const char *cgv = json_object_get_string(engine_jget(info, "CgroupVersion"));
        snprintf(st->cgroup_driver, sizeof(st->cgroup_driver), "%s",
                 json_object_get_string(engine_jget(info, "CgroupDriver")) ?: "");
        st->rootless_docker = rootless;
        if (!json_object_get_boolean(engine_jget(info, "MemoryLimit")) ||
            !json_object_get_boolean(engine_jget(info, "SwapLimit")))
                reason_add(limits, sizeof(limits), "memory");
        if (!json_object_get_boolean(engine_jget(info, "CpuCfsQuota")))
                reason_add(limits, sizeof(limits), "cpu");
        if (!json_object_get_boolean(engine_jget(info, "PidsLimit")))
                reason_add(limits, sizeof(limits), "pids");
        for (char *p = limits; *p; p++)
                if (*p == ';')
                        *p = ',';
        if (rootless && cgv && strcmp(cgv, "1") == 0) {
                reason_add(reasons, size,
                           "limits not applied: memory, cpu, pids: rootless Docker on cgroup v1");
        } else if (*limits) {
                char t[160];
                snprintf(t, sizeof(t),
                         "limits not applied: %s: the Docker Engine reports no cgroup support for "
                         "them",
                         limits);
                reason_add(reasons, size, t);
        }
        return 0;
}

/* Podman's default profile lets code create namespaces (unshare, clone with CLONE_NEW*): hand
 * it ours, derived from that default (@sec: libpod info's host.security), or say it is
 * missing. */
static void probe_podman_seccomp(struct engine_state *st, json_object *sec, char *reasons,
                                 size_t size)
{
        const char *def = json_object_get_string(engine_jget(sec, "seccompProfilePath"));
        struct sbx_error se = {0};
        char dir[400], why[240];
        int r;

        if (!st->conn.ep.local)
                r = sbx_fail(&se, ENOTSUP,
                             "the Podman engine is remote: its seccomp profile files are not on "
                             "this host");
        else
                r = engine_seccomp_profile_dir(st->getenv_fn, dir, sizeof(dir), &se);
        snprintf(st->seccomp_default, sizeof(st->seccomp_default), "%s", def ? def : "");
        if (r == 0)
                r = engine_seccomp_profile_prepare(def, dir, st->seccomp_profile,
                                                   sizeof(st->seccomp_profile), &se);
        if (r < 0) {
                st->seccomp_profile[0] = '\0';
                snprintf(why, sizeof(why), "namespaces not blocked: %.200s", se.msg);
                reason_add(reasons, size, why);
        }
}

/* Rootless Podman's limits: none on cgroup v1, else those of the delegated controllers. */
static void probe_podman_limits(json_object *host, char *reasons, size_t size)
{
        const char *pv = json_object_get_string(engine_jget(host, "cgroupVersion"));
        json_object *ctrls = engine_jget(host, "cgroupControllers");
        bool has_mem = false, has_cpu = false, has_pids = false;
        char l[64] = "", t[160];

        if (pv && strcmp(pv, "v1") == 0) {
                reason_add(reasons, size,
                           "limits not applied: memory, cpu, pids: rootless Podman on cgroup v1");
                return;
        }
        for (size_t i = 0; ctrls && i < json_object_array_length(ctrls); i++) {
                const char *c = json_object_get_string(json_object_array_get_idx(ctrls, i));
                has_mem |= c && strcmp(c, "memory") == 0;
                has_cpu |= c && strcmp(c, "cpu") == 0;
                has_pids |= c && strcmp(c, "pids") == 0;
        }
        if (has_mem && has_cpu && has_pids)
                return;
        if (!has_mem)
                reason_add(l, sizeof(l), "memory");
        if (!has_cpu)
                reason_add(l, sizeof(l), "cpu");
        if (!has_pids)
                reason_add(l, sizeof(l), "pids");
        for (char *p = l; *p; p++)
                if (*p == ';')
                        *p = ',';
        snprintf(t, sizeof(t),
                 "limits not applied: %s: rootless Podman without those cgroup controllers "
                 "delegated",
                 l);
        reason_add(reasons, size, t);
}

/* Podman's libpod info (its compat /info claims limits rootless cannot apply, and is as slow
 * again): the OS, rootless, seccomp and our profile, the cgroup driver and controllers. */
static int probe_podman(struct engine_state *st, bool *seccomp, char *reasons, size_t size,
                        struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply lir = {0};
        int r;

        r = engine_get(&st->conn,
                       &(struct engine_call){.path = "/v4.0.0/libpod/info",
                                             .unversioned = true,
                                             .ok = {200},
                                             .body = ENGINE_BODY_JSON,
                                             .timeout_ms = ENGINE_INFO_MS,
                                             .what = "say what it enforces (libpod info)"},
                       &lir, err);
        if (r < 0 && lir.status == 0)
                return r;
        if (!lir.json)
                return sbx_fail(err, EIO,
                                "Podman's libpod info failed: cannot tell whether it is rootless "
                                "and which limits it applies");
        json_object *host = engine_jget(lir.json, "host"), *sec = engine_jget(host, "security");
        const char *pos = json_object_get_string(engine_jget(host, "os"));
        if (pos && strcmp(pos, "linux") != 0)
                return sbx_fail(err, ENOTSUP,
                                "the Podman service runs %s containers: use a Linux Podman machine",
                                pos);
        snprintf(st->cgroup_driver, sizeof(st->cgroup_driver), "%s",
                 json_object_get_string(engine_jget(host, "cgroupManager")) ?: "");
        /* what the compat /info calls Name and OperatingSystem (the hand-in decision) */
        snprintf(st->daemon_name, sizeof(st->daemon_name), "%s",
                 json_object_get_string(engine_jget(host, "hostname")) ?: "");
        snprintf(
            st->daemon_os, sizeof(st->daemon_os), "%s",
            json_object_get_string(engine_jget(engine_jget(host, "distribution"), "distribution"))
                ?: "");
        st->rootless_podman = json_object_get_boolean(engine_jget(sec, "rootless"));
        *seccomp = json_object_get_boolean(engine_jget(sec, "seccompEnabled"));
        st->seccomp_profile[0] = '\0';
        if (*seccomp)
                probe_podman_seccomp(st, sec, reasons, size);
        if (st->rootless_podman)
                probe_podman_limits(host, reasons, size);
        return 0;
}

/* /info (or libpod info): what this engine enforces. Fills st->grade. */
static int probe_info(struct engine_state *st, const struct sbx_config *cfg, struct sbx_error *err)
{
        char reasons[280] = "";
        bool seccomp = false;
        int r;

        snprintf(st->runtime, sizeof(st->runtime), "%s",
                 cfg->container_runtime ? cfg->container_runtime : "");
        r = st->conn.podman ? probe_podman(st, &seccomp, reasons, sizeof(reasons), err)
                            : probe_docker(st, &seccomp, reasons, sizeof(reasons), err);
        if (r == 0 && *st->runtime)
                r = engine_runtime_check(st, engine_image_for(cfg, "python"), st->runtime_note,
                                         sizeof(st->runtime_note), err);
        if (r < 0)
                return r;
        if (!seccomp)
                reason_add(reasons, sizeof(reasons),
                           "no seccomp filter: the engine runs containers without seccomp");
        /* the runtime first: a reader sees what kind of container it was before what it
         * lacks (grade form: docs/design/results.md, "GRADE (REASON)") */
        const char *rt = st->runtime_note;
        if (*reasons) {
                int n = snprintf(st->grade, sizeof(st->grade), "container-degraded (%s%s%s)", rt,
                                 *rt ? "; " : "", reasons);
                /* cut short, the grade still closes its bracket */
                if (n >= (int)sizeof(st->grade))
                        memcpy(st->grade + sizeof(st->grade) - 5, "...)", 5);
        } else if (*rt)
                snprintf(st->grade, sizeof(st->grade), "container (%s)", rt);
        else
                snprintf(st->grade, sizeof(st->grade), "container");
        return 0;
}

/* Whether code and workspace go through volumes for the engine in @st, and why (@why). A
 * server in a container (the OCI image with the engine's socket mounted) never shares the
 * engine's filesystem: its /workspace is a bind the engine made from a path of its own side. */
static bool needs_volumes(const struct engine_state *st, const struct sbx_config *cfg, char *why,
                          size_t why_size)
{
        char host[256] = "";

        if (cfg->in_container) {
                snprintf(why, why_size,
                         "this server runs in its OCI image (%.60s), inside a container whose "
                         "filesystem is not the engine's",
                         cfg->in_container_marker);
                return true;
        }
        gethostname(host, sizeof(host) - 1);
        return !engine_daemon_shares_files(&st->conn.ep, st->daemon_os, st->daemon_name, host, why,
                                           why_size);
}

/* A server in its OCI image labels what it makes with its container's id (ENGINE_OWNER_CONTAINER)
 * when the engine it talks to runs that container: then a `docker kill` of the server's
 * container leaves nothing the next server cannot judge (its host name is the dead container's
 * own, which sbx_owner_alive() takes for another host's). @owner (@size bytes): @st's owner
 * label, rewritten so, or as it is with the reason logged. */
static void owner_by_container(struct engine_state *st, const struct engine_conn *c,
                               const struct sbx_config *cfg, char *owner, size_t size)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        struct sbx_error err = {0};
        json_object *running = NULL;
        char id[65];

        pthread_mutex_lock(&st->lock);
        snprintf(owner, size, "%s", st->owner);
        pthread_mutex_unlock(&st->lock);
        if (!cfg->in_container ||
            strncmp(owner, ENGINE_OWNER_CONTAINER, strlen(ENGINE_OWNER_CONTAINER)) == 0)
                return;
        if (engine_self_container_id("/proc/self/mountinfo", id, sizeof(id)) < 0) {
                log_info("container engine: this server's container id is not in "
                         "/proc/self/mountinfo: if its container is killed, what it made stays "
                         "until a server of host '%.60s' sweeps it",
                         owner);
                return;
        }
        if (engine_get(c,
                       &(struct engine_call){.path = "/containers/{}/json",
                                             .parts = {id},
                                             .ok = {200},
                                             .body = ENGINE_BODY_JSON,
                                             .timeout_ms = 10000,
                                             .what = "inspect this server's own container"},
                       &rep, &err) == 0)
                running = engine_jget(engine_jget(rep.json, "State"), "Running");
        if (!running || !json_object_get_boolean(running)) {
                log_info("container engine at '%s' does not run this server's container %.12s "
                         "(another engine?): its sandboxes are labelled by host name",
                         c->ep.host, id);
                return;
        }
        if (engine_owner_in_container(owner, size, id) == 0)
                log_debug("container engine: sandboxes labelled with owner '%s'", owner);
}

/* Usage and OOM from the host's own cgroups: only for a rootful engine on this host using
 * cgroupfs paths, and a server that may manage them (hostcg.c). Leaves @why empty when they
 * can be read (and sweeps hostcg's leftovers then), else says why not. */
static void host_cgroups_why(const struct engine_state *fresh, char *why, size_t size)
{
        bool rootless = fresh->rootless_podman || strstr(fresh->grade, "rootless");
        if (fresh->volumes)
                snprintf(why, size,
                         "the engine does not share this machine's filesystem, so its cgroups "
                         "are not readable here");
        else if (rootless && strstr(fresh->grade, "cgroup v1"))
                snprintf(why, size,
                         "a rootless engine on cgroup v1 gives its containers "
                         "no cgroup of their own");
        else if (rootless)
                snprintf(why, size,
                         "reading a rootless engine's cgroups is not "
                         "implemented");
        else if (strcmp(fresh->cgroup_driver, "cgroupfs") != 0)
                snprintf(why, size,
                         "the engine's cgroup driver is '%s'; reading its cgroups is implemented "
                         "for cgroupfs only",
                         fresh->cgroup_driver[0] ? fresh->cgroup_driver : "unknown");
        else if (engine_hostcg_available(why, size) == 0)
                engine_hostcg_sweep();
}

int engine_probe_ready(struct engine_state *st, const struct sbx_config *cfg, struct sbx_error *err)
{
        struct engine_state fresh = {0};
        int r;

        pthread_mutex_lock(&st->lock);
        bool ready = st->ready;
        pthread_mutex_unlock(&st->lock);
        if (ready)
                return 0;

        fresh.getenv_fn = st->getenv_fn;
        /* the runtime check's container is ours: unowned, any sweep would remove it */
        snprintf(fresh.owner, sizeof(fresh.owner), "%s", st->owner);
        r = engine_connect(cfg, st->getenv_fn, &fresh.conn, err);
        if (r < 0)
                return r;
        r = probe_info(&fresh, cfg, err);
        if (r < 0)
                return r;
        char vol_why[300] = "", owner[sizeof(st->owner)];
        owner_by_container(st, &fresh.conn, cfg, owner, sizeof(owner));
        fresh.volumes = needs_volumes(&fresh, cfg, vol_why, sizeof(vol_why));
        if (fresh.volumes)
                log_info("container engine at '%s': %s, so code and workspace go through "
                         "volumes (the workspace is copied in before and back after each run)",
                         fresh.conn.ep.host, vol_why);
        struct sbx_error e2 = {0};
        int n = engine_sweep(&fresh.conn, &e2);
        if (n > 0)
                log_info("removed %d leftover sandbox container(s) and volume(s) of servers that "
                         "are gone",
                         n);
        else if (n < 0)
                log_debug("%s, ignoring", e2.msg);

        char why[160] = "";
        host_cgroups_why(&fresh, why, sizeof(why));

        pthread_mutex_lock(&st->lock);
        st->conn = fresh.conn;
        st->rootless_podman = fresh.rootless_podman;
        st->rootless_docker = fresh.rootless_docker;
        snprintf(st->cgroup_driver, sizeof(st->cgroup_driver), "%s", fresh.cgroup_driver);
        st->hostcg = !*why;
        snprintf(st->usage_why, sizeof(st->usage_why), "%s", why);
        st->volumes = fresh.volumes;
        snprintf(st->seccomp_profile, sizeof(st->seccomp_profile), "%s", fresh.seccomp_profile);
        snprintf(st->seccomp_default, sizeof(st->seccomp_default), "%s", fresh.seccomp_default);
        snprintf(st->grade, sizeof(st->grade), "%s", fresh.grade);
        snprintf(st->runtime, sizeof(st->runtime), "%s", fresh.runtime);
        st->runtime_listed = fresh.runtime_listed;
        snprintf(st->runtime_fifo_why, sizeof(st->runtime_fifo_why), "%s", fresh.runtime_fifo_why);
        snprintf(st->runtime_uds_why, sizeof(st->runtime_uds_why), "%s", fresh.runtime_uds_why);
        snprintf(st->runtime_note, sizeof(st->runtime_note), "%s", fresh.runtime_note);
        snprintf(st->owner, sizeof(st->owner), "%s", owner);
        st->ready = true;
        pthread_mutex_unlock(&st->lock);
        log_debug("container engine: %s at '%s' (%s), API %s, grade %s", st->conn.server,
                  st->conn.ep.host, st->conn.ep.origin, st->conn.api, st->grade);
        return 0;
}

/* Our seccomp profile file went away after the probe: derive and write it again from the same
 * default. A failure refuses the run (the grade promised the profile). */
int engine_seccomp_profile_again(struct engine_state *st, char *ret, size_t size,
                                 struct sbx_error *err)
{
        char def[512], dir[400], path[512];
        int r;

        pthread_mutex_lock(&st->lock);
        snprintf(def, sizeof(def), "%s", st->seccomp_default);
        pthread_mutex_unlock(&st->lock);
        r = engine_seccomp_profile_dir(st->getenv_fn, dir, sizeof(dir), err);
        if (r == 0)
                r = engine_seccomp_profile_prepare(def, dir, path, sizeof(path), err);
        if (r < 0)
                return sbx_wrap(err,
                                "the seccomp profile '%s' that blocks namespaces in Podman "
                                "sandboxes is gone and cannot be written again, nothing was "
                                "run",
                                ret);
        pthread_mutex_lock(&st->lock);
        snprintf(st->seccomp_profile, sizeof(st->seccomp_profile), "%s", path);
        pthread_mutex_unlock(&st->lock);
        snprintf(ret, size, "%s", path);
        return 0;
}
