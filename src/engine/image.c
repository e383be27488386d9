/* image.c - importing a rootfs tarball as an image through the API (no registry, no docker
 * CLI), skipped when an image of the same tarball (sha256 label) is already there. */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lazy/crypto.h"

#include "common/buf.h"
#include "common/cleanup.h"
#include "lazy/sha256.h"
#include "common/xalloc.h"
#include "config/pins.h"

int engine_image_inspect(const struct engine_conn *c, const char *ref, json_object **ret_info,
                         struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        int r;

        r = engine_get(c,
                       &(struct engine_call){.path = "/images/{}/json",
                                             .parts = {ref},
                                             .ok = {200},
                                             .body = ENGINE_BODY_JSON,
                                             .timeout_ms = 10000,
                                             .what = "inspect a sandbox image"},
                       &rep, err);
        if (r < 0)
                return r;
        if (!json_object_is_type(rep.json, json_type_object))
                return sbx_fail(err, EPROTO,
                                "the container engine answered the inspect of image '%s' with "
                                "no JSON object: check that DOCKER_HOST points at a Docker or "
                                "Podman Engine API",
                                ref);
        *ret_info = TAKE_PTR(rep.json);
        return 0;
}

int engine_image_label(const struct engine_conn *c, const char *ref, const char *key, char *ret,
                       size_t size, struct sbx_error *err)
{
        _cleanup_(json_putp) json_object *info = NULL;
        json_object *cfg, *labels, *v;
        int r;

        ret[0] = '\0';
        r = engine_image_inspect(c, ref, &info, err);
        if (r == -ENOENT)
                return sbx_fail(err, ENOENT,
                                "the sandbox image '%s' is missing from the container engine: run "
                                "`vestibule-mcp setup` (or set VESTIBULE_IMAGE_PYTHON / "
                                "VESTIBULE_IMAGE_NODE to images it has and restart), then retry",
                                ref);
        if (r < 0)
                return r;
        if (json_object_object_get_ex(info, "Config", &cfg) &&
            json_object_object_get_ex(cfg, "Labels", &labels) &&
            json_object_object_get_ex(labels, key, &v))
                snprintf(ret, size, "%s", json_object_get_string(v));
        return 0;
}

struct import_ctx {
        struct sbx_buf body; /* max 1 MiB */
};

static size_t import_write(void *ud, const char *data, size_t n)
{
        struct import_ctx *x = ud;
        /* Keep the tail only: a progress stream; the error, if any, is in the last lines. */
        if (sbx_buf_add(&x->body, data, n) < 0) {
                x->body.len = 0;
                (void)sbx_buf_add(&x->body, data, n); /* a piece over the cap is dropped */
        }
        return n;
}

int engine_image_import(const struct engine_conn *c, const char *tar, const char *ref,
                        const char *sha256, struct sbx_error *err)
{
        _cleanup_close_ int fd = open(tar, O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *label = xasprintf("LABEL vestibule.tar-sha256=%s", sha256);
        _cleanup_free_ char *what = xasprintf("import '%s' as '%s'", tar, ref);
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        struct import_ctx x = {.body = {.max = 1u << 20}};
        int r;

        if (fd < 0)
                return sbx_fail(err, errno, "cannot open the image tarball '%s': %m", tar);
        /* one image config change per `changes` (docs/design/engine-api.md) */
        r = engine_post(
            c,
            &(struct engine_call){.path = "/images/create",
                                  .query = {{"fromSrc", "-"},
                                            {"repo", ref},
                                            {"changes", label},
                                            {"changes", "LABEL vestibule.image=1"},
                                            {"changes", "WORKDIR /workspace"},
                                            {"changes", "USER 1000:1000"},
                                            {"changes", "ENV PATH=/usr/local/bin:/usr/bin:/bin"}},
                                  .ok = {200},
                                  .upload = true,
                                  .upload_fd = fd,
                                  .content_type = "application/x-tar",
                                  .body = ENGINE_BODY_STREAM,
                                  .on_data = import_write,
                                  .userdata = &x,
                                  .timeout_ms = 600000,
                                  .what = what},
            &rep, err);
        if (r == 0 && x.body.data && strstr(x.body.data, "\"error"))
                /* 200 with a progress stream that ends in {"errorDetail":..,"error":".."} */
                r = sbx_fail(err, EIO, "importing '%s' as '%s' failed: %.300s", tar, ref,
                             strstr(x.body.data, "\"error"));
        sbx_buf_done(&x.body);
        return r;
}

int engine_setup_import(const struct sbx_config *cfg, const char *tar, const char *ref,
                        struct sbx_error *err)
{
        return engine_setup_import_with_env(cfg, NULL, tar, ref, err); /* cfg->engine_env */
}

int engine_setup_import_with_env(const struct sbx_config *cfg, engine_getenv_fn getenv_fn,
                                 const char *tar, const char *ref, struct sbx_error *err)
{
        struct engine_conn c;
        char sha[65], have[80];
        int r;

        r = engine_connect(cfg, getenv_fn, &c, err);
        if (r < 0)
                return r;
        r = sbx_sha256_file(tar, NULL, sha, err);
        if (r < 0)
                return r;
        r = engine_image_label(&c, ref, "vestibule.tar-sha256", have, sizeof(have), err);
        if (r < 0 && r != -ENOENT)
                return r;
        if (r == 0 && strcmp(have, sha) == 0)
                return 0;
        sbx_error_clear(err);
        r = engine_image_import(&c, tar, ref, sha, err);
        if (r < 0)
                return r;
        /* Read it back: the label proves the engine stored what we sent under @ref. */
        r = engine_image_label(&c, ref, "vestibule.tar-sha256", have, sizeof(have), err);
        if (r < 0)
                return sbx_wrap(err, "after importing '%s'", tar);
        if (strcmp(have, sha) != 0)
                return sbx_fail(err, EIO,
                                "imported '%s' as '%s' but the engine's image carries sha256 "
                                "label '%s', not '%s'",
                                tar, ref, have, sha);
        return 1;
}

const char *engine_image_for(const struct sbx_config *cfg, const char *language)
{
        bool node = language && strcmp(language, "node") == 0;
        const char *set = node ? cfg->image_node : cfg->image_python;
        const char *pin = node ? SBX_PIN_IMAGE_NODE : SBX_PIN_IMAGE_PYTHON;

        if (cfg->image_source == SBX_IMAGE_SOURCE_DEBIAN && (!set || strcmp(set, pin) == 0))
                return node ? ENGINE_DEBIAN_IMAGE_NODE : ENGINE_DEBIAN_IMAGE_PYTHON;
        return set;
}

/* ---- pulling a pinned image by digest ---------------------------------------------------- */

struct pull_ctx {
        FILE *progress;
        bool tty;
        char line[8192];
        size_t len;
        bool overflow;
        char last[256]; /* "id status" last printed, to print plain lines only on a change */
        char error[400];
};

static void pull_line(struct pull_ctx *x, const char *s)
{
        _cleanup_(json_putp) json_object *j = json_tokener_parse(s);
        json_object *v;
        const char *status = "", *id = "", *bar = "";
        char key[256];

        if (!j)
                return;
        if (json_object_object_get_ex(j, "error", &v) && !x->error[0]) {
                snprintf(x->error, sizeof(x->error), "%s", json_object_get_string(v));
                return;
        }
        if (json_object_object_get_ex(j, "status", &v))
                status = json_object_get_string(v);
        if (json_object_object_get_ex(j, "id", &v))
                id = json_object_get_string(v);
        if (json_object_object_get_ex(j, "progress", &v))
                bar = json_object_get_string(v);
        if (!x->progress || !status[0])
                return;
        if (x->tty) {
                fprintf(x->progress, "\r\033[K%s%s%s %s", id, id[0] ? ": " : "", status, bar);
                if (!bar[0])
                        fputc('\n', x->progress);
        } else {
                snprintf(key, sizeof(key), "%s %s", id, status);
                if (strcmp(key, x->last) == 0)
                        return;
                snprintf(x->last, sizeof(x->last), "%s", key);
                fprintf(x->progress, "%s%s%s\n", id, id[0] ? ": " : "", status);
        }
        fflush(x->progress);
}

static size_t pull_write(void *ud, const char *data, size_t n)
{
        struct pull_ctx *x = ud;

        for (size_t i = 0; i < n; i++) {
                if (data[i] == '\n') {
                        x->line[x->len] = '\0';
                        if (!x->overflow)
                                pull_line(x, x->line);
                        x->len = 0;
                        x->overflow = false;
                } else if (x->len + 1 < sizeof(x->line)) {
                        x->line[x->len++] = data[i];
                } else {
                        x->overflow = true;
                }
        }
        return n;
}

/* Whether image @name@@digest is in the engine with that RepoDigest. 1 yes, 0 no, -errno. */
static int image_has_digest(const struct engine_conn *c, const char *name, const char *digest,
                            struct sbx_error *err)
{
        _cleanup_free_ char *ref = xasprintf("%s@%s", name, digest);
        _cleanup_(json_putp) json_object *info = NULL;
        json_object *rd;
        const char *at;
        int r;

        r = engine_image_inspect(c, ref, &info, err);
        if (r == -ENOENT) {
                sbx_error_clear(err);
                return 0;
        }
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(info, "RepoDigests", &rd) ||
            !json_object_is_type(rd, json_type_array))
                return 0;
        for (size_t i = 0; i < json_object_array_length(rd); i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(rd, i));

                at = s ? strchr(s, '@') : NULL;
                if (at && strcmp(at + 1, digest) == 0)
                        return 1;
        }
        return 0;
}

int engine_image_pull(const struct engine_conn *c, const char *image, FILE *progress, bool tty,
                      struct sbx_error *err)
{
        const char *at = strstr(image, "@sha256:");
        _cleanup_free_ char *name = NULL;
        struct pull_ctx x = {.progress = progress, .tty = tty};
        int r;

        if (!at || strlen(at + 1) != 71)
                return sbx_fail(
                    err, EINVAL,
                    "refusing to pull '%s': not pinned by digest (name@sha256:<64 hex>)", image);
        name = xstrndup(image, (size_t)(at - image));
        /* A name:tag@digest: the tag is dropped, the digest decides. */
        {
                char *slash = strrchr(name, '/'), *colon = strrchr(name, ':');
                if (colon && (!slash || colon > slash))
                        *colon = '\0';
        }
        _cleanup_free_ char *what = xasprintf("pull '%s'", image);
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        static const char *const anonymous[] = {"X-Registry-Auth: e30=", NULL}; /* base64 "{}" */
        r = engine_post(c,
                        &(struct engine_call){.path = "/images/create",
                                              .query = {{"fromImage", name}, {"tag", at + 1}},
                                              .ok = {200},
                                              .headers = anonymous,
                                              .body = ENGINE_BODY_STREAM,
                                              .on_data = pull_write,
                                              .userdata = &x,
                                              .timeout_ms = 3600000,
                                              .what = what},
                        &rep, err);
        if (x.len && !x.overflow) {
                x.line[x.len] = '\0';
                pull_line(&x, x.line);
        }
        if (progress && tty)
                fputc('\n', progress);
        if (r < 0)
                return r;
        if (x.error[0])
                return sbx_fail(err, EIO, "the container engine could not pull '%s': %s", image,
                                x.error);
        r = image_has_digest(c, name, at + 1, err);
        if (r < 0)
                return r;
        if (r == 0)
                return sbx_fail(err, EIO,
                                "the container engine reported pulling '%s' but has no image with "
                                "RepoDigest %s",
                                image, at + 1);
        return 0;
}

int engine_setup_pull(const struct sbx_config *cfg, const char *image, FILE *progress, bool tty,
                      struct sbx_error *err)
{
        struct engine_conn c;
        const char *at = strstr(image, "@sha256:");
        _cleanup_free_ char *name = NULL;
        int r;

        r = engine_connect(cfg, NULL, &c, err);
        if (r < 0)
                return r;
        if (!at)
                return sbx_fail(
                    err, EINVAL,
                    "refusing to pull '%s': not pinned by digest (name@sha256:<64 hex>)", image);
        name = xstrndup(image, (size_t)(at - image));
        r = image_has_digest(&c, name, at + 1, err);
        if (r < 0)
                return r;
        if (r == 1)
                return 0;
        r = engine_image_pull(&c, image, progress, tty, err);
        return r < 0 ? r : 1;
}
