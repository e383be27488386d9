/* conn.c - the container backend's link to its engine, shared by the backend (backend.c), the
 * image import (image.c) and the host cgroups (hostcg.c): connecting (endpoint resolution,
 * /_ping, API version negotiation), the owner label every container and volume of ours
 * carries, and the sweep of what dead servers left. */
#include "engine/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lazy/curl.h"

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/owner.h"
#include "common/xalloc.h"

int engine_self_container_id(const char *mountinfo, char *ret, size_t size)
{
        static const char key[] = "containers/";
        _cleanup_fclose_ FILE *f = fopen(mountinfo, "re");
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;

        if (!f || size < 65)
                return -ENOENT;
        /* Docker: /var/lib/docker/containers/<id>/hostname (also resolv.conf, hosts);
         * Podman: .../overlay-containers/<id>/userdata/hostname */
        while (getline(&line, &cap, f) > 0) {
                for (const char *p = line; (p = strstr(p, key)); p++) {
                        const char *id = p + strlen(key);

                        if (strspn(id, "0123456789abcdef") == 64 && id[64] == '/') {
                                snprintf(ret, size, "%.64s", id);
                                return 0;
                        }
                }
        }
        return -ENOENT;
}

int engine_owner_in_container(char *owner, size_t size, const char *id)
{
        const char *c2 = strrchr(owner, ':'), *c1 = c2;

        while (c1 && c1 > owner && c1[-1] != ':')
                c1--;
        if (!c2 || !c1 || c1 == owner || strlen(id) != 64)
                return -EINVAL;
        char tail[64];
        snprintf(tail, sizeof(tail), "%s", c1); /* "<pid>:<start>" */
        if ((size_t)snprintf(owner, size, "%s%s:%s", ENGINE_OWNER_CONTAINER, id, tail) >= size)
                return -ENAMETOOLONG;
        return 0;
}

/* Whether @owner's server is gone. A label of this host: its process (sbx_owner_alive());
 * a server in its OCI image ("container/<id>:<pid>:<start>", engine_owner_in_container()): its
 * container, asked of the engine (gone: 404 or not running; any other answer: alive, not ours
 * to judge); another host's label: alive. */
static bool owner_gone(const struct engine_conn *c, const char *owner)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        struct sbx_error err = {0};
        char id[65];
        size_t pre = strlen(ENGINE_OWNER_CONTAINER);

        if (!sbx_owner_alive(owner))
                return true;
        if (strncmp(owner, ENGINE_OWNER_CONTAINER, pre) != 0 ||
            strspn(owner + pre, "0123456789abcdef") != 64 || owner[pre + 64] != ':')
                return false;
        snprintf(id, sizeof(id), "%.64s", owner + pre);
        if (engine_get(c,
                       &(struct engine_call){.path = "/containers/{}/json",
                                             .parts = {id},
                                             .ok = {200, 404},
                                             .body = ENGINE_BODY_JSON,
                                             .timeout_ms = 10000,
                                             .what = "inspect an owner's server container"},
                       &rep, &err) < 0)
                return false;
        if (rep.status == 404)
                return true;
        json_object *state = NULL, *running = NULL;
        if (rep.json)
                json_object_object_get_ex(rep.json, "State", &state);
        if (state)
                json_object_object_get_ex(state, "Running", &running);
        return running && json_object_is_type(running, json_type_boolean) &&
               !json_object_get_boolean(running);
}

int container_remove(const struct engine_conn *c, const char *id, struct sbx_error *err)
{
        struct engine_reply rep = {0};
        int r;

        /* a missing one is fine: removed already (or by AutoRemove) */
        r = engine_delete(c,
                          &(struct engine_call){.path = "/containers/{}",
                                                .parts = {id},
                                                .query = {{"force", "1"}, {"v", "1"}},
                                                .ok = {204, 200, 404},
                                                .timeout_ms = 30000,
                                                .what = "remove a sandbox container"},
                          &rep, err);
        engine_reply_done(&rep);
        return r;
}

int list_ours(const struct engine_conn *c, json_object **ret, struct sbx_error *err)
{
        struct engine_reply rep = {0};
        int r;

        r = engine_get(
            c,
            &(struct engine_call){
                .path = "/containers/json",
                .query = {{"all", "1"}, {"filters", "{\"label\":[\"vestibule.run=1\"]}"}},
                .ok = {200},
                .body = ENGINE_BODY_JSON,
                .timeout_ms = 10000,
                .what = "list the sandbox containers"},
            &rep, err);
        if (r == 0 && !json_object_is_type(rep.json, json_type_array))
                r = sbx_fail(err, EPROTO,
                             "the container engine at '%s' listed its containers as something "
                             "other than an array: is this a Docker Engine or Podman socket?",
                             c->ep.host);
        if (r == 0)
                *ret = TAKE_PTR(rep.json);
        engine_reply_done(&rep);
        return r;
}

const char *labels_get(json_object *ctr, const char *key)
{
        json_object *labels, *v;
        if (!json_object_object_get_ex(ctr, "Labels", &labels) ||
            !json_object_object_get_ex(labels, key, &v))
                return NULL;
        return json_object_get_string(v);
}

/* Remove the volumes labelled vestibule.run=1 whose owner is gone (@only_owner NULL), or
 * those of @only_owner. A volume still in use answers 409 and stays for a later sweep. */
int sweep_volumes(const struct engine_conn *c, const char *only_owner, struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        json_object *vols = NULL;
        int removed = 0, r;

        r = engine_get(
            c,
            &(struct engine_call){.path = "/volumes",
                                  .query = {{"filters", "{\"label\":[\"vestibule.run=1\"]}"}},
                                  .ok = {200},
                                  .body = ENGINE_BODY_JSON,
                                  .timeout_ms = 10000,
                                  .what = "list the sandbox volumes"},
            &rep, err);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(rep.json, "Volumes", &vols))
                return sbx_fail(err, EPROTO,
                                "the container engine at '%s' listed its volumes without a "
                                "\"Volumes\" array: is this a Docker Engine or Podman socket?",
                                c->ep.host);
        for (size_t i = 0; vols && i < json_object_array_length(vols); i++) {
                json_object *v = json_object_array_get_idx(vols, i), *nj;
                const char *owner = labels_get(v, "vestibule.owner");
                if (only_owner ? !owner || strcmp(owner, only_owner) != 0 : !owner_gone(c, owner))
                        continue;
                if (!json_object_object_get_ex(v, "Name", &nj))
                        continue;
                struct sbx_error e2 = {0};
                if (engine_volume_remove(c, json_object_get_string(nj), &e2) == 0)
                        removed++;
                else
                        log_debug("%s, ignoring", e2.msg);
        }
        return removed;
}

int engine_sweep(const struct engine_conn *c, struct sbx_error *err)
{
        _cleanup_(json_putp) json_object *list = NULL;
        int removed = 0, r;

        r = list_ours(c, &list, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *ctr = json_object_array_get_idx(list, i), *idj;
                const char *owner = labels_get(ctr, "vestibule.owner");
                if (!owner_gone(c, owner))
                        continue;
                if (!json_object_object_get_ex(ctr, "Id", &idj))
                        continue;
                struct sbx_error e2 = {0};
                if (container_remove(c, json_object_get_string(idj), &e2) == 0) {
                        log_debug("removed leftover sandbox container %.12s of '%s'",
                                  json_object_get_string(idj), owner ? owner : "");
                        removed++;
                } else {
                        log_debug("%s, ignoring", e2.msg);
                }
        }
        /* then the volumes of the remote hand-in (their containers are gone now) */
        struct sbx_error e3 = {0};
        r = sweep_volumes(c, NULL, &e3);
        if (r > 0)
                removed += r;
        else if (r < 0)
                log_debug("%s, ignoring", e3.msg);
        return removed;
}

/* ---------------------------------------------------------------------------------------- */
/* Connect                                                                                  */

static int ping_one(struct engine_conn *c, struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply ping = {0}, ver = {0};
        json_object *minv = NULL;
        int rv;

        rv = engine_get(c,
                        &(struct engine_call){.path = "/_ping",
                                              .unversioned = true,
                                              .ok = {200},
                                              .timeout_ms = 15000,
                                              .what = "answer /_ping"},
                        &ping, err);
        if (rv < 0 && ping.status != 0) /* an answer, but not an engine's */
                return sbx_fail(err, EIO,
                                "the container engine at '%s' answered /_ping with HTTP %ld: is "
                                "this a Docker Engine or Podman socket?",
                                c->ep.host, ping.status);
        if (rv < 0)
                return rv;
        c->podman = ping.libpod_api[0] != '\0';
        snprintf(c->libpod_api, sizeof(c->libpod_api), "%s", ping.libpod_api);
        snprintf(c->server, sizeof(c->server), "%s", ping.server);

        /* MinAPIVersion from the unversioned /version (Docker 29 refuses < 1.44). Podman
         * accepts every compat prefix (docs/design/engine-api.md §6) and its /version is slow (it
         * asks conmon and the runtime for their versions: 10 s seen under load): skip it there. */
        c->api[0] = '\0';
        if (c->podman)
                return engine_api_negotiate(ping.api_version, NULL, c->api, err);
        rv = engine_get(c,
                        &(struct engine_call){.path = "/version",
                                              .unversioned = true,
                                              .any_status = true,
                                              .body = ENGINE_BODY_JSON,
                                              .timeout_ms = 15000,
                                              .what = "answer /version"},
                        &ver, err);
        if (rv < 0)
                return rv;
        if (ver.status == 200 && ver.json)
                json_object_object_get_ex(ver.json, "MinAPIVersion", &minv);
        return engine_api_negotiate(ping.api_version, minv ? json_object_get_string(minv) : NULL,
                                    c->api, err);
}

int engine_connect(const struct sbx_config *cfg, engine_getenv_fn getenv_fn,
                   struct engine_conn *ret, struct sbx_error *err)
{
        _cleanup_free_ struct engine_endpoint *eps = NULL;
        size_t n = 0;
        char missing[400];
        struct sbx_error first = {0};
        int first_rc = 0, r;

        r = lazy_curl_load(err);
        if (r < 0)
                return r;
        r = getenv_fn ? engine_endpoints_resolve(cfg->runtime, getenv_fn, &eps, &n, missing,
                                                 sizeof(missing), err)
                      : engine_endpoints_resolve_env(cfg->runtime, &cfg->engine_env, &eps, &n,
                                                     missing, sizeof(missing), err);
        if (r < 0)
                return r;
        if (n == 0) {
                if (cfg->runtime == SBX_RUNTIME_PODMAN)
                        return sbx_fail(err, ENOENT,
                                        "cannot reach Podman: no API socket found (looked at %s): "
                                        "start it (systemctl --user start podman.socket), then "
                                        "retry; or set CONTAINER_HOST and restart the server",
                                        missing);
                return sbx_fail(err, ENOENT,
                                "cannot reach Docker Engine at '/var/run/docker.sock': no engine "
                                "socket found (looked at %s): start it (sudo systemctl start "
                                "docker, or start Docker Desktop), then retry; or set DOCKER_HOST "
                                "and restart the server",
                                missing);
        }
        for (size_t i = 0; i < n; i++) {
                struct engine_conn c = {.ep = eps[i]};
                struct sbx_error e = {0};
                r = ping_one(&c, &e);
                if (r == 0) {
                        if (cfg->runtime == SBX_RUNTIME_DOCKER && c.podman)
                                log_debug("VESTIBULE_RUNTIME=docker but '%s' is Podman (%s); "
                                          "using it",
                                          c.ep.host, c.server);
                        *ret = c;
                        return 0;
                }
                log_debug("engine candidate '%s' (%s): %s", eps[i].host, eps[i].origin, e.msg);
                /* Keep the most telling failure: a permission problem beats "not running". */
                if (!first_rc || (r == -EACCES && first_rc != -EACCES)) {
                        first = e;
                        first_rc = r;
                }
        }
        if (err)
                *err = first;
        return first_rc;
}
