/* runtime.c - VESTIBULE_CONTAINER_RUNTIME (issue 26 item 3): the engine's OCI runtime for every
 * sandbox container (HostConfig.Runtime), checked once at the probe: the engine lists it
 * (/info Runtimes), and a tiny container runs under it. gVisor's runsc shows itself by its
 * Sentry's boot banner in the container's dmesg ("Starting gVisor..."), which a runc container
 * cannot read at all (no CAP_SYSLOG): that is what lets the grade say a kernel is in between.
 * Sources: docs.docker.com/engine/api/v1.41/ (ContainerCreate HostConfig.Runtime, SystemInfo
 * Runtimes), dockerd(8) --add-runtime, gvisor.dev/docs/user_guide/quick_start/docker/. */
#include "engine/probe.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "engine/conn.h"
#include "engine/container.h"
#include "engine/engine.h"
#include "engine/state.h"

/* The daemon.json that registers runsc so our NetworkMode none containers start: without
 * --network=none runsc wants a network namespace Docker does not give them ("cannot run with
 * network enabled in root network namespace", measured with Docker 20.10 and runsc 20221219). */
#define RUNSC_DAEMON_JSON                                                                          \
        "\"runtimes\": {\"runsc\": {\"path\": \"/usr/bin/runsc\", \"runtimeArgs\": "               \
        "[\"--network=none\"]}} in /etc/docker/daemon.json, then restart Docker "                  \
        "(systemctl restart docker)"

/* Whether runtime args @args (a JSON array of strings) hold "--@flag=<one of @values>" (runsc
 * takes -flag too). */
static bool args_have(json_object *args, const char *flag, const char *const *values)
{
        for (size_t i = 0; args && i < json_object_array_length(args); i++) {
                const char *a = json_object_get_string(json_object_array_get_idx(args, i));
                if (!a || a[0] != '-')
                        continue;
                a += a[1] == '-' ? 2 : 1;
                size_t n = strlen(flag);
                if (strncmp(a, flag, n) != 0 || a[n] != '=')
                        continue;
                for (const char *const *v = values; *v; v++)
                        if (strcmp(a + n + 1, *v) == 0)
                                return true;
        }
        return false;
}

void engine_runtime_args(struct engine_state *st, json_object *rt)
{
        static const char *const fifo_ok[] = {"open", NULL};
        static const char *const uds_ok[] = {"open", "all", NULL};
        const char *path = json_object_get_string(engine_jget(rt, "path")) ?: "";
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        json_object *args = engine_jget(rt, "runtimeArgs");

        static const char *const none_ok[] = {"none", NULL};

        st->runtime_fifo_why[0] = st->runtime_uds_why[0] = '\0';
        st->runtime_netns_refused = false;
        if (strcmp(base, "runsc") != 0)
                return;
        st->runtime_netns_refused = !args_have(args, "network", none_ok);
        /* Measured (Debian runsc 20221219, Docker 20.10): with --host-fifo=open the session
         * runner still never answered through its FIFOs (sessions.test.mjs: 21 of 21 failed),
         * so sessions and spares are refused under runsc whatever its flags say. The relay's
         * socket was not tried: refused too, rather than claimed. */
        snprintf(st->runtime_fifo_why, sizeof(st->runtime_fifo_why),
                 "they talk through FIFOs in the bind-mounted code folder, which runsc %s",
                 args_have(args, "host-fifo", fifo_ok)
                     ? "did not connect even with --host-fifo=open (tested): use the engine's "
                       "default runtime for them"
                     : "does not open without --host-fifo=open in its runtimeArgs, and did not "
                       "connect even with it (tested): use the engine's default runtime for them");
        snprintf(st->runtime_uds_why, sizeof(st->runtime_uds_why),
                 "the relay to the proxy is a unix socket in the bind-mounted code folder, which "
                 "runsc %s",
                 args_have(args, "host-uds", uds_ok)
                     ? "may reach with --host-uds=open, not tested yet"
                     : "does not connect to without --host-uds=open in its runtimeArgs");
}

/* The tiny container: its kernel's name and first message, as the probe of the engine's
 * Sentry reads them. */
/* uname, the first kernel message (the Sentry's banner under runsc), and `ls -d /`: coreutils'
 * ls calls statx(2) with AT_NO_AUTOMOUNT, which runsc 0.0~20221219 (Debian 12's) answers with
 * EINVAL, so ls, stat and cp fail in every container it runs: such a runtime is refused. */
static const char *const check_cmd[] = {
    "/bin/sh", "-c",
    "uname -r; dmesg 2>&1 | head -n 1; ls -d / >/dev/null 2>&1 || echo statx-broken", NULL};

static json_object *check_body(const char *image, const char *runtime, const char *owner)
{
        json_object *b = json_object_new_object(), *hc = json_object_new_object();
        json_object *cmd = json_object_new_array(), *drop = json_object_new_array();
        json_object *labels = json_object_new_object();

        for (const char *const *p = check_cmd; *p; p++)
                json_object_array_add(cmd, json_object_new_string(*p));
        json_object_object_add(b, "Image", json_object_new_string(image));
        json_object_object_add(b, "Cmd", cmd);
        json_object_object_add(b, "Entrypoint", json_object_new_array());
        json_object_object_add(b, "User", json_object_new_string("65534:65534"));
        json_object_object_add(b, "NetworkDisabled", json_object_new_boolean(true));
        /* the owner too: a container of ours without one is a dead server's leftover to the
         * start-up sweep of any other server on this engine (conn.c engine_sweep()) */
        json_object_object_add(labels, "vestibule.run", json_object_new_string("1"));
        json_object_object_add(labels, "vestibule.owner", json_object_new_string(owner));
        json_object_object_add(b, "Labels", labels);
        json_object_object_add(hc, "Runtime", json_object_new_string(runtime));
        json_object_object_add(hc, "NetworkMode", json_object_new_string("none"));
        json_object_array_add(drop, json_object_new_string("ALL"));
        json_object_object_add(hc, "CapDrop", drop);
        json_object_object_add(hc, "ReadonlyRootfs", json_object_new_boolean(true));
        json_object_object_add(b, "HostConfig", hc);
        return b;
}

/* runsc registered without --network=none: refused before any container is made. */
static int netns_refused(const char *runtime, struct sbx_error *err)
{
        return sbx_fail(err, EPERM,
                        "the container engine's runtime '%s' is runsc registered without "
                        "--network=none, so it cannot start a container without a network (it "
                        "says 'cannot run with network enabled in root network namespace', and "
                        "the refused start leaves its sandbox and gofer processes behind): "
                        "register it with --network=none, %s",
                        runtime, RUNSC_DAEMON_JSON);
}

/* A start the runtime refused: the error, with the fix for the cause we know. A refused runsc
 * start was seen to leave the sandbox and gofer `runsc create` started on the engine's host
 * (the e2e-runsc stage, Docker 20.10, runsc 20221219), and the Engine API reaches no host
 * process to end them: the known cause is refused before any container (netns_refused). */
static int start_refused(const char *runtime, const char *msg, struct sbx_error *err)
{
        if (strstr(msg, "root network namespace"))
                return netns_refused(runtime, err);
        return sbx_fail(err, EIO,
                        "the container engine's runtime '%s' (VESTIBULE_CONTAINER_RUNTIME) did "
                        "not start a test container: %.200s; fix the runtime, or unset "
                        "VESTIBULE_CONTAINER_RUNTIME to use the engine's default",
                        runtime, msg);
}

/* Start @id, wait for it (30 s) and read its output into @ret (@size bytes, raw log frames). */
static int check_run(struct engine_state *st, const char *id, const char *runtime, char *ret,
                     size_t size, struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0}, w = {0}, logs = {0};
        int r;

        r = engine_post(&st->conn,
                        &(struct engine_call){.path = "/containers/{}/start",
                                              .parts = {id},
                                              .ok = {204, 304},
                                              .timeout_ms = 60000,
                                              .what = "start the runtime's test container"},
                        &rep, err);
        if (r < 0)
                return rep.status ? start_refused(runtime, rep.msg, err) : r;
        r = engine_post(&st->conn,
                        &(struct engine_call){.path = "/containers/{}/wait",
                                              .parts = {id},
                                              .ok = {200},
                                              .body = ENGINE_BODY_JSON,
                                              .timeout_ms = 30000,
                                              .what = "wait for the runtime's test container"},
                        &w, err);
        if (r < 0)
                return r;
        int64_t code = json_object_get_int64(engine_jget(w.json, "StatusCode"));
        r = engine_get(&st->conn,
                       &(struct engine_call){.path = "/containers/{}/logs",
                                             .parts = {id},
                                             .query = {{"stdout", "1"}, {"stderr", "1"}},
                                             .ok = {200},
                                             .body = ENGINE_BODY_RAW,
                                             .timeout_ms = 10000,
                                             .what = "read the runtime's test container"},
                       &logs, err);
        if (r < 0)
                return r;
        /* the log frames' 8-byte headers hold NULs: copied as bytes, then made searchable */
        size_t n = logs.raw && logs.len < size ? logs.len : logs.raw ? size - 1 : 0;
        memcpy(ret, logs.raw ? logs.raw : "", n);
        ret[n] = '\0';
        for (size_t i = 0; i < n; i++)
                if (ret[i] == '\0')
                        ret[i] = ' ';
        if (code != 0)
                return sbx_fail(err, EIO,
                                "the runtime '%s' ran a test container that exited with status "
                                "%lld: fix the runtime, or unset VESTIBULE_CONTAINER_RUNTIME",
                                runtime, (long long)code);
        return 0;
}

int engine_runtime_check(struct engine_state *st, const char *image, char *ret_note, size_t size,
                         struct sbx_error *err)
{
        _cleanup_(json_putp) json_object *body = NULL;
        _cleanup_free_ char *id = NULL;
        char out[1024];
        struct sbx_error e2 = {0};
        int r;

        if (st->conn.podman)
                return sbx_fail(err, ENOTSUP,
                                "VESTIBULE_CONTAINER_RUNTIME='%s' is implemented for Docker "
                                "Engine only: use Docker with that runtime registered, or unset "
                                "it",
                                st->runtime);
        if (!st->runtime_listed)
                return sbx_fail(err, ENOENT,
                                "the container engine has no runtime '%s' "
                                "(VESTIBULE_CONTAINER_RUNTIME) in its /info Runtimes: %s%s",
                                st->runtime,
                                strcmp(st->runtime, "runsc") == 0 ? "apt install runsc, and add "
                                                                  : "register it in daemon.json",
                                strcmp(st->runtime, "runsc") == 0 ? RUNSC_DAEMON_JSON : "");
        if (st->runtime_netns_refused)
                return netns_refused(st->runtime, err);
        body = check_body(image, st->runtime, st->owner);
        r = engine_container_create(st, body, image, "create the runtime's test container", &id,
                                    err);
        if (r < 0)
                return r;
        r = check_run(st, id, st->runtime, out, sizeof(out), err);
        if (container_remove(&st->conn, id, &e2) < 0)
                log_warning("%s (the next start's sweep removes it), ignoring", e2.msg);
        if (r < 0)
                return r;
        if (strstr(out, "statx-broken"))
                return sbx_fail(err, ENOSYS,
                                "the container runtime '%s' fails coreutils' ls in its "
                                "containers (statx with AT_NO_AUTOMOUNT answered EINVAL, as "
                                "runsc 0.0~20221219 does): install runsc 2023 or later (Debian "
                                "13's package, or gVisor's own release), restart the engine, "
                                "then retry",
                                st->runtime);
        /* gVisor's Sentry: its banner is the first kernel message it shows; anything else is
         * named by the runtime alone (the grade claims no kernel it did not see) */
        if (strstr(out, "Starting gVisor"))
                snprintf(ret_note, size, "runtime %s: gVisor's kernel in between", st->runtime);
        else
                snprintf(ret_note, size, "runtime %s", st->runtime);
        log_debug("container runtime '%s': the test container said '%s'", st->runtime, out);
        return 0;
}
