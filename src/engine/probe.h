/* probe.h - the container engine's readiness (probe.c): connected, probed, swept. Private to
 * src/engine; the sandbox lifecycle (backend.c) asks before each sandbox. */
#pragma once

#include <stddef.h>

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
 * engine_seccomp_profile_again() - Podman: our derived seccomp profile file (named by @ret, a
 * buffer of @size bytes) went away since the probe: derive and write it again from the same
 * default (engine_seccomp_profile_prepare(), seccomp_profile.c), store its path in @st and
 * @ret. Return: 0, or -errno with @err (the run is refused: the grade promised the profile).
 */
int engine_seccomp_profile_again(struct engine_state *st, char *ret, size_t size,
                                 struct sbx_error *err);
