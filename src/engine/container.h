/* container.h - one sandbox container on the Engine API (container.c): create, inspect, the
 * image's programs, start, kill, the attach + wait transfers of a run, background removal.
 * Private to src/engine. Endpoints: docs.docker.com/engine/api/v1.41/#tag/Container (Podman's
 * compat API answers the same; its differences: docs/design/engine-api.md). */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "lazy/curl.h"

#include "common/error.h"
#include "engine/engine.h"
#include "engine/stats.h"
#include "run/sandbox.h"

struct engine_state;

/* One of the run's transfers on its curl_multi (attach, wait, kill, stats). */
struct engine_leg {
        struct engine_xfer *x;
        struct engine_reply rep;
        bool done;
        int rc; /* engine_xfer_finish()'s, once done */
        struct sbx_error err;
};

struct engine_attach {
        struct engine_demux dmx;
        sandbox_emit_fn emit; /* the warden's, set by each pump */
        void *emit_userdata;
        bool proto_error;
};

/* The run's transfers: attach and wait armed before the start, the kill added on a stop, the
 * engine's stats stream (engine_xfers_stats()) added after the start when the host's cgroups
 * cannot be read. */
struct engine_xfers {
        CURLM *m;
        struct engine_leg attach, wait, kill, stats;
        struct engine_attach a;
        struct engine_stats st; /* the stats leg's samples */
};

/**
 * engine_xfers_arm() - attach (stream=1, stdout, stderr; the output demultiplexed into
 * rx->a.emit) and wait (condition=next-exit) to container @id, both on one new curl_multi in
 * @rx (zeroed by the caller), pumped until both answers' headers are in with 200, at most
 * 10 s. Call before the start, so no output and no exit is missed. Return: 0, or -errno with
 * @err (a transfer failed, or the engine did not accept them: -EIO). engine_xfers_done()
 * frees @rx in either case.
 */
int engine_xfers_arm(struct engine_xfers *rx, const struct engine_conn *c, const char *id,
                     struct sbx_error *err);

/** engine_xfers_pump() - drive @rx's multi once (curl_multi_perform(3)); mark the legs that
 * ended with their checked result (engine_xfer_finish()). */
void engine_xfers_pump(struct engine_xfers *rx);

/** engine_xfers_kill() - add the kill leg (POST /containers/{@id}/kill?signal=KILL; 204, 404
 * and 409 are fine) to @rx's multi, so the stream keeps being drained meanwhile. Return 0 or
 * -errno with @err. */
int engine_xfers_kill(struct engine_xfers *rx, const struct engine_conn *c, const char *id,
                      struct sbx_error *err);

/** engine_xfers_stats() - add the stats leg (GET /containers/{@id}/stats?stream=1, its
 * samples into rx->st by engine_stats_feed()) to @rx's armed multi. Call once the container
 * runs. Its end (the container stopped) is not waited for. Return 0 or -errno with @err. */
int engine_xfers_stats(struct engine_xfers *rx, const struct engine_conn *c, const char *id,
                       struct sbx_error *err);

/** engine_xfers_fds() - @rx's sockets as at most @max pollfds in @fds (curl_multi_fdset(3));
 * *@timeout_ms = curl's timeout, at most 100 ms. Return the number filled. */
unsigned engine_xfers_fds(struct engine_xfers *rx, struct pollfd *fds, unsigned max,
                          int *timeout_ms);

/** engine_xfers_done() - free @rx's transfers, replies and multi; a zeroed @rx is fine. */
void engine_xfers_done(struct engine_xfers *rx);

/**
 * engine_container_create() - POST /containers/create with @body (borrowed); the new id into
 * *@ret_id (free()). @what names the container in errors; @image names the image for the
 * "missing" fix. Creates on rootless Podman go one at a time (st->create_lock); its transient
 * "keep-id requires additional UIDs or GIDs" 500 is retried twice. Return: 0, -ENOENT (the
 * image is missing: run setup), -EPROTO (no Id in the answer), or another -errno with @err.
 */
int engine_container_create(struct engine_state *st, json_object *body, const char *image,
                            const char *what, char **ret_id, struct sbx_error *err);

/**
 * engine_container_inspect() - GET /containers/{@id}/json into *@ret (json_object_put() it);
 * with @keep_id, libpod's HostConfig.IDMappings added as "IDMappings" (the compat inspect does
 * not show them). Return: 0, or -errno with @err (-EPROTO: an empty answer).
 */
int engine_container_inspect(struct engine_state *st, const char *id, bool keep_id,
                             json_object **ret, struct sbx_error *err);

/* The in-container launcher's programs, by absolute path, so nothing a run leaves in
 * /workspace/.local/bin (on PATH, last: egress.h EGRESS_SANDBOX_PATH) can stand in for them
 * (tests/adversarial/server.md, "a run replaces timeout and the interpreter"): coreutils'
 * `timeout` and bash are there in every Debian-based image, ours included (images/build.sh). */
#define ENGINE_TIMEOUT_PATH "/usr/bin/timeout"
#define ENGINE_BASH_PATH "/bin/bash"
#define ENGINE_SLEEP_PATH "/usr/bin/sleep"

/**
 * engine_interp_for() - the interpreter of @l in @image, as the container's command names it: an
 * absolute path for the images we pin or build (the registry's python:3.12-slim and node:22-slim
 * install into /usr/local/bin; the Debian-built ones, images/build.sh, use Debian's /usr/bin),
 * ENGINE_BASH_PATH for bash, and the bare name for any other image (found through the run's PATH,
 * the image's folders first, and checked there by engine_container_programs_check()). A static
 * string.
 */
const char *engine_interp_for(const char *image, enum sbx_language l);

/**
 * engine_container_programs_check() - before the start: the image of created container @id
 * (image id @image_id, name @image for errors) holds ENGINE_TIMEOUT_PATH and @interp (at that
 * path when absolute, else in /usr/local/bin, /usr/bin or /bin), seen through the archive API (HEAD
 * /containers/{id}/archive: nothing runs); once per image id and interpreter (cached in @st).
 * Return: 0, -ENOENT with @err naming the missing program and the fix, or another -errno.
 */
int engine_container_programs_check(struct engine_state *st, const char *id, const char *image_id,
                                    const char *image, const char *interp, struct sbx_error *err);

/**
 * engine_container_start() - POST /containers/{@id}/start (204, or 304: already started).
 * Return: 0; -ENOENT when image @image has no `timeout`; -EPERM when the engine refuses
 * no-new-privileges (the Docker snap); another -errno with @err.
 */
int engine_container_start(const struct engine_conn *c, const char *id, const char *image,
                           struct sbx_error *err);

/** engine_container_kill() - POST /containers/{@id}/kill?signal=KILL now (10 s at most); a
 * failure is logged only (the removal forces the container out in any case). */
void engine_container_kill(const struct engine_conn *c, const char *id);

/**
 * engine_container_remove_later() - remove container @id and the hand-in helper @helper
 * (either may be NULL), then the volumes
 * @volumes (either may be NULL; @volumes may be NULL), then the parent cgroup @cgroup ("" =
 * none) in a detached thread (inline when no thread can be made), counted in
 * st->pending_removals; failures are logged (the next start's sweep removes what is left).
 * The strings are copied.
 */
void engine_container_remove_later(struct engine_state *st, const char *id, const char *helper,
                                   const char *cgroup, const char *const volumes[2]);

/** engine_removals_wait() - wait up to @timeout_s seconds until @st has no background removal
 * running; a warning names those left. */
void engine_removals_wait(struct engine_state *st, unsigned timeout_s);
