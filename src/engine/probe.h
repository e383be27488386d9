/* probe.h - the container engine's readiness (probe.c): connected, probed, swept. Private to
 * src/engine; the sandbox lifecycle (backend.c) asks before each sandbox. */
#pragma once

#include <stddef.h>

#include <json-c/json.h>

#include "common/error.h"
#include "config/config.h"

struct engine_state;

/**
 * engine_probe_ready() - make @st ready once: connect to the engine of @cfg (borrowed) through
 * st->getenv_fn (conn.c), read what it enforces (GET /info on Docker, /v4.0.0/libpod/info on
 * Podman: docs.docker.com/engine/api/v1.41/#tag/System, docs.podman.io/en/latest/_static/api.html)
 * into st->grade ("container" or "container-degraded (<reasons>)"), decide whether code and
 * workspace go through volumes (the engine does not see our files), sweep leftovers of servers
 * that are gone, and whether usage is read from the host's cgroups (hostcg.c). Under st->lock
 * for the fields it sets; a ready @st returns at once. Return: 0, or -errno with @err naming
 * the fix (-ECONNREFUSED/-ENOENT/-EACCES: no engine there; -ENOTSUP: it runs non-Linux
 * containers; -EIO: Podman's libpod info failed).
 */
int engine_probe_ready(struct engine_state *st, const struct sbx_config *cfg,
                       struct sbx_error *err);

/**
 * engine_runtime_args() - what runtime @rt (its /info Runtimes entry: {"path", "runtimeArgs"},
 * borrowed) lets a sandbox do through the host's files. For runsc (its path's last part):
 * sessions and warm spares (FIFOs in the code folder) and the allowlist's relay (a unix socket
 * there) are refused, st->runtime_fifo_why / runtime_uds_why saying why (runsc's
 * --host-fifo / --host-uds flags, `runsc flags`; measured in runtime.c). Other runtimes: both ""
 * (allowed). runtime.c.
 */
void engine_runtime_args(struct engine_state *st, json_object *rt);

/**
 * engine_runtime_check() - VESTIBULE_CONTAINER_RUNTIME (st->runtime, not ""): refuse unless the
 * engine is Docker and listed it in /info Runtimes (st->runtime_listed, set by the probe), then
 * run a tiny container of @image under it (`uname -r; dmesg | head -1`, no network, no
 * capabilities, read-only) and remove it. Sets @ret_note (@size bytes) to the grade's words:
 * "runtime runsc: gVisor's kernel in between" when the container's dmesg
 * shows gVisor's Sentry banner, else "runtime <name>". runtime.c; Docker Engine API v1.41
 * ContainerCreate HostConfig.Runtime. Return: 0, or -errno with @err naming the fix (-ENOENT:
 * not registered, with the daemon.json lines; -EPERM: runsc registered without
 * --network=none; -EIO: the container did not run or failed; -ENOTSUP: Podman).
 */
int engine_runtime_check(struct engine_state *st, const char *image, char *ret_note, size_t size,
                         struct sbx_error *err);

/**
 * engine_seccomp_profile_again() - Podman: our derived seccomp profile file (named by @ret, a
 * buffer of @size bytes) went away since the probe: derive and write it again from the same
 * default (engine_seccomp_profile_prepare(), seccomp_profile.c), store its path in @st and
 * @ret. Return: 0, or -errno with @err (the run is refused: the grade promised the profile).
 */
int engine_seccomp_profile_again(struct engine_state *st, char *ret, size_t size,
                                 struct sbx_error *err);
