/* registry.c - an OCI distribution client just large enough to pull one pinned image. */
#include "setup/registry.h"

#include <ctype.h>
#include "lazy/curl.h"
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include "lazy/crypto.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "lazy/sha256.h"
#include "setup/setup_internal.h"

#define MAX_SMALL_BODY ((size_t)4 * 1024 * 1024) /* manifests, indexes, token replies */
#define DOCKER_HUB_HOST "registry-1.docker.io"

static const char accept_manifests[] = "Accept: application/vnd.oci.image.index.v1+json, "
                                       "application/vnd.docker.distribution.manifest.list.v2+json, "
                                       "application/vnd.oci.image.manifest.v1+json, "
                                       "application/vnd.docker.distribution.manifest.v2+json";

/* ---- references */

static bool is_sha256_digest(const char *d)
{
        size_t i;

        if (strncmp(d, "sha256:", 7) != 0)
                return false;
        for (i = 7; i < 71; i++)
                if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
                        return false;
        return d[71] == '\0';
}

static bool host_is_loopback(const char *host)
{
        size_t n = strcspn(host, ":");

        if (host[0] == '[')
                return strncmp(host, "[::1]", 5) == 0;
        return (n == 9 && strncmp(host, "localhost", 9) == 0) ||
               (n >= 4 && strncmp(host, "127.", 4) == 0);
}

void registry_ref_done(struct registry_ref *r)
{
        if (!r)
                return;
        free(r->host);
        free(r->repository);
        free(r->digest);
        memset(r, 0, sizeof(*r));
}

int registry_ref_parse(const char *ref, struct registry_ref *ret, struct sbx_error *err)
{
        const char *at = strchr(ref, '@');
        _cleanup_free_ char *name = NULL;
        char *slash, *first, *colon;
        struct registry_ref r = {0};

        if (!at || !is_sha256_digest(at + 1))
                return sbx_fail(err, EINVAL,
                                "image '%s' is not pinned: write it as name@sha256:<64 hex "
                                "digits> (setup pulls only by digest)",
                                ref);
        name = xstrndup(ref, (size_t)(at - ref));
        if (!*name)
                return sbx_fail(err, EINVAL, "image '%s' has no name", ref);
        slash = strchr(name, '/');
        first = slash ? xstrndup(name, (size_t)(slash - name)) : NULL;
        if (first &&
            (strchr(first, '.') || strchr(first, ':') || strcmp(first, "localhost") == 0)) {
                r.host = first;
                r.repository = xstrdup(slash + 1);
        } else {
                free(first);
                r.host = xstrdup(DOCKER_HUB_HOST);
                r.repository = slash ? xstrdup(name) : xasprintf("library/%s", name);
        }
        if (strcmp(r.host, "docker.io") == 0 || strcmp(r.host, "index.docker.io") == 0) {
                free(r.host);
                r.host = xstrdup(DOCKER_HUB_HOST);
        }
        /* drop a tag from the last path component (a ':' after the last '/') */
        slash = strrchr(r.repository, '/');
        colon = strrchr(slash ? slash : r.repository, ':');
        if (colon)
                *colon = '\0';
        for (const char *p = r.repository; *p; p++)
                if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) ||
                      strchr("._-/", *p))) {
                        registry_ref_done(&r);
                        return sbx_fail(err, EINVAL, "image '%s': bad repository name", ref);
                }
        r.digest = xstrdup(at + 1);
        r.plain_http = host_is_loopback(r.host);
        *ret = r;
        return 0;
}

/* ---- HTTP */

struct http {
        CURL *curl;
        const struct registry_ref *ref;
        const struct setup_opts *o;
        char *bearer;   /* token once we have one */
        char *auth_hdr; /* the last WWW-Authenticate */
        char *content_type;
        long status;
};

struct body {
        struct sbx_buf buf; /* max MAX_SMALL_BODY */
        bool too_big;
};

struct sink {
        FILE *f;
        struct sbx_sha256 md;
        uint64_t done, limit;
        bool too_big;
        const char *label;
        const struct setup_opts *o;
        struct timespec start, last;
        int last_step;
};

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
        struct http *h = ud;
        size_t len = size * n;
        _cleanup_free_ char *line = xstrndup(buf, len);
        char *colon, *v;

        if (strncmp(line, "HTTP/", 5) == 0) { /* a new response (after a redirect): reset */
                free(h->auth_hdr);
                free(h->content_type);
                h->auth_hdr = h->content_type = NULL;
                return len;
        }
        colon = strchr(line, ':');
        if (!colon)
                return len;
        *colon = '\0';
        v = colon + 1;
        while (*v == ' ' || *v == '\t')
                v++;
        v[strcspn(v, "\r\n")] = '\0';
        if (strcasecmp(line, "www-authenticate") == 0) {
                free(h->auth_hdr);
                h->auth_hdr = xstrdup(v);
        } else if (strcasecmp(line, "content-type") == 0) {
                free(h->content_type);
                h->content_type = xstrdup(v);
        }
        return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ud)
{
        struct body *b = ud;
        size_t len = size * n;

        if (sbx_buf_add(&b->buf, buf, len) < 0) {
                b->too_big = true;
                return 0;
        }
        return len;
}

static size_t on_blob(char *buf, size_t size, size_t n, void *ud)
{
        struct sink *s = ud;
        size_t len = size * n;
        struct timespec now;

        if (s->done + len > s->limit) {
                s->too_big = true;
                return 0;
        }
        if (fwrite(buf, 1, len, s->f) != len)
                return 0;
        if (sbx_sha256_update(&s->md, buf, len) < 0)
                return 0;
        s->done += len;
        if (s->o && s->o->progress) {
                clock_gettime(CLOCK_MONOTONIC, &now);
                double el = (double)(now.tv_sec - s->start.tv_sec) +
                            (double)(now.tv_nsec - s->start.tv_nsec) / 1e9;
                double since = (double)(now.tv_sec - s->last.tv_sec) +
                               (double)(now.tv_nsec - s->last.tv_nsec) / 1e9;
                int step = s->limit ? (int)(s->done * 4 / s->limit) : 4;

                if ((s->o->progress_tty && since >= 0.1) ||
                    (!s->o->progress_tty && step > s->last_step && step > 0 && step < 4)) {
                        s->last = now;
                        s->last_step = step;
                        setup_progress_line(s->o->progress, s->o->progress_tty, s->label,
                                            "downloaded", s->done, s->limit, el, false);
                }
        }
        return len;
}

static int on_xfer(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
        const struct http *h = ud;

        (void)dt, (void)dn, (void)ut, (void)un;
        return h->o && h->o->cancel && *h->o->cancel ? 1 : 0;
}

static int curl_error(struct http *h, CURLcode c, const char *url, struct sbx_error *err)
{
        if (c == CURLE_ABORTED_BY_CALLBACK && h->o && h->o->cancel && *h->o->cancel)
                return sbx_fail(err, EINTR, "download cancelled");
        if (c == CURLE_COULDNT_CONNECT)
                return sbx_fail(err, ECONNREFUSED,
                                "cannot connect to '%s' (%s): check the network, or use "
                                "`setup --from-debian` where no registry is reachable",
                                url, curl_easy_strerror(c));
        if (c == CURLE_COULDNT_RESOLVE_HOST)
                return sbx_fail(err, EHOSTUNREACH,
                                "cannot resolve the registry in '%s': check DNS, or use "
                                "`setup --from-debian` where no registry is reachable",
                                url);
        return sbx_fail(err, EIO, "request to '%s' failed: %s", url, curl_easy_strerror(c));
}

/* One GET. @b or @s receives the body. Headers: Accept (for manifests), Authorization. */
static int http_get(struct http *h, const char *url, const char *accept, struct body *b,
                    struct sink *s, struct sbx_error *err)
{
        struct curl_slist *hdrs = NULL;
        _cleanup_free_ char *authz = NULL;
        CURLcode c;

        curl_easy_reset(h->curl);
        curl_easy_setopt(h->curl, CURLOPT_URL, url);
        curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR,
                         h->ref->plain_http ? "http,https" : "https");
        curl_easy_setopt(h->curl, CURLOPT_REDIR_PROTOCOLS_STR,
                         h->ref->plain_http ? "http,https" : "https");
        curl_easy_setopt(h->curl, CURLOPT_FOLLOWLOCATION, 1L); /* blobs redirect to a CDN */
        curl_easy_setopt(h->curl, CURLOPT_MAXREDIRS, 5L);
        curl_easy_setopt(h->curl, CURLOPT_UNRESTRICTED_AUTH, 0L); /* no token to other hosts */
        curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT, 30L);
        curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_LIMIT, 1L); /* stalled for 60 s: give up */
        curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_TIME, 60L);
        curl_easy_setopt(h->curl, CURLOPT_USERAGENT, "vestibule-mcp/" VESTIBULE_VERSION);
        curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, h);
        curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, on_xfer);
        curl_easy_setopt(h->curl, CURLOPT_XFERINFODATA, h);
        curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
        if (b) {
                curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
                curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, b);
        } else {
                curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_blob);
                curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, s);
        }
        if (accept)
                hdrs = curl_slist_append(hdrs, accept);
        if (h->bearer) {
                authz = xasprintf("Authorization: Bearer %s", h->bearer);
                hdrs = curl_slist_append(hdrs, authz);
        }
        curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, hdrs);
        c = curl_easy_perform(h->curl);
        curl_slist_free_all(hdrs);
        if (c == CURLE_WRITE_ERROR && ((b && b->too_big) || (s && s->too_big)))
                return sbx_fail(err, EBADMSG, "'%s' sent more bytes than the manifest declares",
                                url);
        if (c != CURLE_OK)
                return curl_error(h, c, url, err);
        curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &h->status);
        return 0;
}

/* The value of @key in a WWW-Authenticate challenge (key="value"). */
static char *challenge_param(const char *hdr, const char *key)
{
        const char *p = hdr;
        size_t klen = strlen(key);

        while ((p = strcasestr(p, key))) {
                if ((p == hdr || p[-1] == ' ' || p[-1] == ',') && p[klen] == '=' &&
                    p[klen + 1] == '"') {
                        const char *v = p + klen + 2, *end = strchr(v, '"');

                        return end ? xstrndup(v, (size_t)(end - v)) : NULL;
                }
                p += klen;
        }
        return NULL;
}

/* Anonymous bearer token for the 401 challenge in h->auth_hdr. */
static int fetch_token(struct http *h, struct sbx_error *err)
{
        _cleanup_free_ char *realm = NULL, *service = NULL, *scope = NULL, *url = NULL;
        _cleanup_free_ char *esc_service = NULL, *esc_scope = NULL;
        struct body b = {.buf = {.max = MAX_SMALL_BODY}};
        json_object *j, *t = NULL;
        int r;

        if (!h->auth_hdr || strncasecmp(h->auth_hdr, "Bearer ", 7) != 0)
                return sbx_fail(err, EACCES,
                                "registry '%s' asks for authentication this client does not "
                                "do ('%s'): only anonymous bearer tokens are supported",
                                h->ref->host, h->auth_hdr ? h->auth_hdr : "none given");
        realm = challenge_param(h->auth_hdr, "realm");
        service = challenge_param(h->auth_hdr, "service");
        scope = challenge_param(h->auth_hdr, "scope");
        if (!realm || (strncmp(realm, "https://", 8) != 0 &&
                       !(h->ref->plain_http && strncmp(realm, "http://", 7) == 0)))
                return sbx_fail(err, EACCES, "registry '%s' names an unusable token realm '%s'",
                                h->ref->host, realm ? realm : "");
        esc_service = service ? curl_easy_escape(h->curl, service, 0) : NULL;
        esc_scope = curl_easy_escape(h->curl, scope ? scope : "", 0);
        url = xasprintf("%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?",
                        esc_service ? esc_service : "", esc_scope ? esc_scope : "");
        free(h->bearer);
        h->bearer = NULL;
        r = http_get(h, url, NULL, &b, NULL, err);
        if (r < 0) {
                sbx_buf_done(&b.buf);
                return r;
        }
        if (h->status != 200) {
                sbx_buf_done(&b.buf);
                return sbx_fail(err, EACCES, "the token service '%s' answered HTTP %ld", realm,
                                h->status);
        }
        j = json_tokener_parse(b.buf.data ? b.buf.data : "");
        sbx_buf_done(&b.buf);
        if (j && !json_object_object_get_ex(j, "token", &t))
                json_object_object_get_ex(j, "access_token", &t);
        if (!t || !json_object_is_type(t, json_type_string)) {
                json_object_put(j);
                return sbx_fail(err, EACCES, "the token service '%s' sent no token", realm);
        }
        h->bearer = xstrdup(json_object_get_string(t));
        json_object_put(j);
        return 0;
}

/* GET with one retry after a bearer-token challenge; 200 required. */
static int registry_get(struct http *h, const char *path, const char *accept, struct body *b,
                        struct sink *s, struct sbx_error *err)
{
        _cleanup_free_ char *url =
            xasprintf("%s://%s/v2/%s/%s", h->ref->plain_http ? "http" : "https", h->ref->host,
                      h->ref->repository, path);
        int r, attempt;

        for (attempt = 0; attempt < 2; attempt++) {
                if (b) {
                        sbx_buf_done(&b->buf);
                }
                if (s) {
                        rewind(s->f);
                        if (ftruncate(fileno(s->f), 0) < 0)
                                return sbx_fail(err, errno, "cannot truncate a download");
                        r = sbx_sha256_init(&s->md, err);
                        if (r < 0)
                                return r;
                        s->done = 0;
                }
                r = http_get(h, url, accept, b, s, err);
                if (r < 0)
                        return r;
                if (h->status == 401 && attempt == 0) {
                        r = fetch_token(h, err);
                        if (r < 0)
                                return r;
                        continue;
                }
                break;
        }
        if (h->status == 200)
                return 0;
        if (h->status == 401 || h->status == 403)
                return sbx_fail(err, EACCES, "registry refused '%s' (HTTP %ld)", url, h->status);
        if (h->status == 404)
                return sbx_fail(err, ENOENT, "registry has no '%s' (HTTP 404): is the pin right?",
                                url);
        return sbx_fail(err, EIO, "registry answered HTTP %ld for '%s'", h->status, url);
}

/* Fetch the manifest @digest, check its bytes, parse it. */
static int get_manifest(struct http *h, const char *digest, json_object **ret,
                        struct sbx_error *err)
{
        _cleanup_free_ char *path = xasprintf("manifests/%s", digest);
        struct body b = {.buf = {.max = MAX_SMALL_BODY}};
        char hex[65];
        json_object *j;
        int r;

        r = registry_get(h, path, accept_manifests, &b, NULL, err);
        if (r < 0) {
                sbx_buf_done(&b.buf);
                return r;
        }
        r = sbx_sha256_hex(b.buf.data, b.buf.len, hex, err);
        if (r < 0) {
                sbx_buf_done(&b.buf);
                return r;
        }
        if (strcmp(hex, digest + 7) != 0) {
                sbx_buf_done(&b.buf);
                return sbx_fail(err, EBADMSG,
                                "manifest %s of '%s/%s' arrived with sha256:%s: refused (tampered "
                                "or corrupted)",
                                digest, h->ref->host, h->ref->repository, hex);
        }
        j = json_tokener_parse(b.buf.data ? b.buf.data : "");
        sbx_buf_done(&b.buf);
        if (!j || !json_object_is_type(j, json_type_object)) {
                json_object_put(j);
                return sbx_fail(err, EBADMSG, "manifest %s is not JSON", digest);
        }
        *ret = j;
        return 0;
}

static const char *jstr(json_object *o, const char *key)
{
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

static const char *machine_arch(void)
{
        struct utsname u;

        if (uname(&u) < 0)
                return "amd64";
        if (strcmp(u.machine, "x86_64") == 0)
                return "amd64";
        if (strcmp(u.machine, "aarch64") == 0)
                return "arm64";
        if (strncmp(u.machine, "armv7", 5) == 0)
                return "arm";
        if (strcmp(u.machine, "ppc64le") == 0)
                return "ppc64le";
        if (strcmp(u.machine, "s390x") == 0)
                return "s390x";
        return "unknown";
}

static bool is_index(json_object *m, const char *ctype)
{
        const char *mt = jstr(m, "mediaType");
        json_object *v;

        if (mt && (strcmp(mt, "application/vnd.oci.image.index.v1+json") == 0 ||
                   strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json") == 0))
                return true;
        if (!mt && ctype && strstr(ctype, "index"))
                return true;
        return !mt && json_object_object_get_ex(m, "manifests", &v);
}

static bool layer_type_ok(const char *mt)
{
        static const char *const ok[] = {
            "application/vnd.oci.image.layer.v1.tar",
            "application/vnd.oci.image.layer.v1.tar+gzip",
            "application/vnd.oci.image.layer.v1.tar+zstd",
            "application/vnd.docker.image.rootfs.diff.tar.gzip",
        };
        size_t i;

        for (i = 0; i < ELEMENTSOF(ok); i++)
                if (mt && strcmp(mt, ok[i]) == 0)
                        return true;
        return false;
}

void registry_image_done(struct registry_image *img)
{
        size_t i;

        if (!img)
                return;
        for (i = 0; i < img->n_layers; i++) {
                free(img->layer_paths[i]);
                free(img->layer_sha256[i]);
        }
        free(img->layer_paths);
        free(img->layer_sha256);
        free(img->manifest_digest);
        memset(img, 0, sizeof(*img));
}

static void curl_cleanupp(CURL **c)
{
        if (*c)
                curl_easy_cleanup(*c);
}

static void json_putp(json_object **j)
{
        if (*j)
                json_object_put(*j);
}

static int fetch_blob(struct http *h, const char *digest, uint64_t size, const char *path,
                      const char *label, struct sbx_error *err)
{
        _cleanup_free_ char *p = xasprintf("blobs/%s", digest);
        struct sink s = {.limit = size, .label = label, .o = h->o};
        char hex[SBX_SHA256_HEX_LEN + 1];
        int fd, r;

        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return sbx_fail(err, errno, "cannot create '%s': %s", path, strerror(errno));
        s.f = fdopen(fd, "w");
        if (!s.f) {
                close(fd);
                unlink(path);
                return sbx_fail(err, ENOMEM, "out of memory");
        }
        r = sbx_sha256_init(&s.md, err);
        if (r < 0) {
                fclose(s.f);
                unlink(path);
                sbx_sha256_done(&s.md);
                return r;
        }
        clock_gettime(CLOCK_MONOTONIC, &s.start);
        s.last = s.start;
        s.last_step = 0;
        r = registry_get(h, p, NULL, NULL, &s, err);
        if (r == 0 && fflush(s.f) != 0)
                r = sbx_fail(err, errno, "cannot write '%s': %s", path, strerror(errno));
        if (r == 0) {
                if (sbx_sha256_final_hex(&s.md, hex) < 0 || strcmp(hex, digest + 7) != 0 ||
                    s.done != size)
                        r = sbx_fail(err, EBADMSG,
                                     "blob %s of '%s/%s' arrived as sha256:%s (%llu of %llu "
                                     "bytes): refused (tampered or corrupted)",
                                     digest, h->ref->host, h->ref->repository, hex,
                                     (unsigned long long)s.done, (unsigned long long)size);
        }
        if (r == 0 && h->o && h->o->progress) {
                struct timespec now;

                clock_gettime(CLOCK_MONOTONIC, &now);
                setup_progress_line(h->o->progress, h->o->progress_tty, label, "downloaded", s.done,
                                    size,
                                    (double)(now.tv_sec - s.start.tv_sec) +
                                        (double)(now.tv_nsec - s.start.tv_nsec) / 1e9,
                                    true);
        }
        fclose(s.f);
        sbx_sha256_done(&s.md);
        if (r < 0)
                unlink(path);
        return r;
}

int registry_pull(const struct registry_ref *ref, const char *workdir, const char *label,
                  const struct setup_opts *o, struct registry_image *ret, struct sbx_error *err)
{
        struct sbx_error lib_err = {0};
        _cleanup_(curl_cleanupp) CURL *curl =
            lazy_curl_load(&lib_err) < 0 || lazy_crypto_load(&lib_err) < 0 ? NULL
                                                                           : curl_easy_init();
        _cleanup_(json_putp) json_object *top = NULL;
        _cleanup_(json_putp) json_object *plat = NULL;
        struct http h = {.curl = curl, .ref = ref, .o = o};
        struct registry_image img = {0};
        json_object *m, *layers = NULL;
        const char *arch = machine_arch();
        char *digest = ref->digest;
        size_t i, n;
        int r;

        if (!curl)
                return lib_err.code ? sbx_fail(err, lib_err.code, "%s", lib_err.msg)
                                    : sbx_fail(err, ENOMEM, "cannot start libcurl");
        r = get_manifest(&h, ref->digest, &top, err);
        if (r < 0)
                goto out;
        m = top;
        if (is_index(top, h.content_type)) {
                json_object *list = NULL;

                digest = NULL;
                if (json_object_object_get_ex(top, "manifests", &list) &&
                    json_object_is_type(list, json_type_array)) {
                        for (i = 0; i < json_object_array_length(list) && !digest; i++) {
                                json_object *e = json_object_array_get_idx(list, i), *p = NULL;

                                json_object_object_get_ex(e, "platform", &p);
                                if (p && jstr(p, "os") && strcmp(jstr(p, "os"), "linux") == 0 &&
                                    jstr(p, "architecture") &&
                                    strcmp(jstr(p, "architecture"), arch) == 0 &&
                                    jstr(e, "digest") && is_sha256_digest(jstr(e, "digest")))
                                        digest = (char *)jstr(e, "digest");
                        }
                }
                if (!digest) {
                        r = sbx_fail(err, ENOENT, "image %s has no linux/%s variant", ref->digest,
                                     arch);
                        goto out;
                }
                r = get_manifest(&h, digest, &plat, err);
                if (r < 0)
                        goto out;
                m = plat;
                if (is_index(m, h.content_type)) {
                        r = sbx_fail(err, EBADMSG, "image %s: an index inside an index", digest);
                        goto out;
                }
        }
        if (!json_object_object_get_ex(m, "layers", &layers) ||
            !json_object_is_type(layers, json_type_array) ||
            json_object_array_length(layers) == 0) {
                r = sbx_fail(err, EBADMSG, "manifest %s lists no layers", digest);
                goto out;
        }
        n = json_object_array_length(layers);
        img.layer_paths = xcalloc(n + 1, sizeof(char *));
        img.layer_sha256 = xcalloc(n + 1, sizeof(char *));
        img.manifest_digest = xstrdup(digest);
        for (i = 0; i < n; i++) {
                json_object *l = json_object_array_get_idx(layers, i), *sz = NULL;
                const char *ld = jstr(l, "digest"), *mt = jstr(l, "mediaType");
                _cleanup_free_ char *lab = xasprintf("%s layer %zu/%zu", label, i + 1, n);
                _cleanup_free_ char *path = xasprintf("%s/layer-%zu", workdir, i + 1);
                int64_t size;

                if (!ld || !is_sha256_digest(ld) || !layer_type_ok(mt) ||
                    !json_object_object_get_ex(l, "size", &sz) ||
                    (size = json_object_get_int64(sz)) <= 0) {
                        r = sbx_fail(err, EBADMSG,
                                     "manifest %s: layer %zu is not a usable tar layer (media "
                                     "type '%s')",
                                     digest, i + 1, mt ? mt : "none");
                        goto out;
                }
                r = fetch_blob(&h, ld, (uint64_t)size, path, lab, err);
                if (r < 0)
                        goto out;
                img.layer_paths[i] = TAKE_PTR(path);
                img.layer_sha256[i] = xstrdup(ld + 7);
                img.n_layers = i + 1;
        }
        *ret = img;
        memset(&img, 0, sizeof(img));
        r = 0;
out:
        registry_image_done(&img);
        free(h.bearer);
        free(h.auth_hdr);
        free(h.content_type);
        return r;
}
