/* http.c - the engine's HTTP API over libcurl (unix socket, or tcp with TLS client certs), and
 * API version negotiation (docs/design/engine-api.md §6). */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lazy/curl.h"

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

void engine_response_done(struct engine_response *r)
{
        if (!r)
                return;
        free(r->body);
        r->body = NULL;
        r->len = 0;
}

void *engine_easy_new(const struct engine_conn *c, const char *path, bool versioned)
{
        CURL *h = curl_easy_init();
        _cleanup_free_ char *url = NULL;

        if (!h)
                abort(); /* out of memory, as xmalloc */
        if (versioned && c->api[0])
                url = xasprintf("%s/v%s%s", c->ep.base_url, c->api, path);
        else
                url = xasprintf("%s%s", c->ep.base_url, path);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_PROXY, ""); /* never through an HTTP proxy from the env */
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
        if (c->ep.is_unix)
                curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->ep.sock_path);
        if (c->ep.tls) {
                if (c->ep.cert_dir[0]) {
                        _cleanup_free_ char *ca = xasprintf("%s/ca.pem", c->ep.cert_dir);
                        _cleanup_free_ char *cert = xasprintf("%s/cert.pem", c->ep.cert_dir);
                        _cleanup_free_ char *key = xasprintf("%s/key.pem", c->ep.cert_dir);
                        curl_easy_setopt(h, CURLOPT_CAINFO, ca);
                        curl_easy_setopt(h, CURLOPT_SSLCERT, cert);
                        curl_easy_setopt(h, CURLOPT_SSLKEY, key);
                }
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, c->ep.tls_verify ? 1L : 0L);
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, c->ep.tls_verify ? 2L : 0L);
        }
        return h;
}

int engine_unreachable_error(const struct engine_endpoint *ep, int os_errno, const char *curl_msg,
                             struct sbx_error *err)
{
        const char *where = ep->is_unix ? ep->sock_path : ep->base_url;

        if ((os_errno == EACCES || os_errno == EPERM) && ep->is_unix &&
            strstr(ep->sock_path, "podman"))
                return sbx_fail(err, EACCES,
                                "cannot open Podman's socket '%s': permission denied (it belongs "
                                "to another user): use this user's own rootless Podman "
                                "(systemctl --user start podman.socket; its socket is "
                                "$XDG_RUNTIME_DIR/podman/podman.sock) or set CONTAINER_HOST",
                                where);
        if (os_errno == EACCES || os_errno == EPERM)
                return sbx_fail(err, EACCES,
                                "cannot open the Docker Engine socket '%s': permission denied. "
                                "This user may not open docker's socket: add it to the docker "
                                "group (sudo usermod -aG docker $USER), log out and back in, then "
                                "restart your agent. Know that members of the docker group can "
                                "become root on this machine; rootless Docker or Podman avoid that",
                                where);
        return sbx_fail(err, os_errno == ENOENT ? ENOENT : ECONNREFUSED,
                        "cannot reach Docker Engine at '%s' (%s, from %s): start it (sudo "
                        "systemctl start docker, or start Docker Desktop), then retry; or set "
                        "DOCKER_HOST and restart the server",
                        where, curl_msg && *curl_msg ? curl_msg : strerror(os_errno), ep->origin);
}

static size_t buf_write(char *data, size_t size, size_t nmemb, void *ud)
{
        size_t n = size * nmemb;

        /* over the cap: an answer bigger than we would ever parse, abort the transfer */
        return sbx_buf_add(ud, data, n) < 0 ? 0 : n;
}

static void header_value(const char *line, size_t n, const char *name, char *ret, size_t size)
{
        size_t nl = strlen(name);
        if (n <= nl + 1 || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
                return;
        const char *v = line + nl + 1;
        size_t vn = n - nl - 1;
        while (vn && (*v == ' ' || *v == '\t'))
                v++, vn--;
        while (vn && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' '))
                vn--;
        snprintf(ret, size, "%.*s", (int)vn, v);
}

static size_t hdr_write(char *data, size_t size, size_t nmemb, void *ud)
{
        struct engine_response *r = ud;
        size_t n = size * nmemb;
        header_value(data, n, "Api-Version", r->api_version, sizeof(r->api_version));
        header_value(data, n, "Libpod-Api-Version", r->libpod_api, sizeof(r->libpod_api));
        header_value(data, n, "Server", r->server, sizeof(r->server));
        return n;
}

int engine_request(const struct engine_conn *c, const char *method, const char *path,
                   bool versioned, const char *json_body, long timeout_ms,
                   struct engine_response *ret, struct sbx_error *err)
{
        CURL *h = engine_easy_new(c, path, versioned);
        struct curl_slist *hdrs = NULL;
        struct sbx_buf b = {.max = 64u << 20};
        struct engine_response r = {0};
        CURLcode rc;
        long os_errno = 0;

        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        if (json_body) {
                hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body);
        } else if (strcmp(method, "POST") == 0) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        }
        if (hdrs)
                curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
                curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, buf_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, hdr_write);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);
        if (timeout_ms > 0)
                curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);

        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
        curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
        curl_easy_cleanup(h);
        curl_slist_free_all(hdrs);

        if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST) {
                sbx_buf_done(&b);
                return engine_unreachable_error(&c->ep, (int)os_errno, curl_easy_strerror(rc), err);
        }
        if (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION ||
            rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CACERT_BADFILE ||
            rc == CURLE_SSL_ISSUER_ERROR || rc == CURLE_SSL_CIPHER) {
                sbx_buf_done(&b);
                return sbx_fail(err, EPROTO,
                                "the TLS handshake with the container engine at '%s' failed "
                                "(%s): check that DOCKER_CERT_PATH ('%s') holds the ca.pem that "
                                "signed the daemon's certificate (issued for this host name) "
                                "and a cert.pem/key.pem the daemon accepts",
                                c->ep.base_url, curl_easy_strerror(rc), c->ep.cert_dir);
        }
        if (rc != CURLE_OK) {
                sbx_buf_done(&b);
                if (rc == CURLE_OPERATION_TIMEDOUT)
                        return sbx_fail(err, ETIMEDOUT,
                                        "the container engine at '%s' did not answer %s %s within "
                                        "%ld ms: check that it is healthy (restart it)",
                                        c->ep.host, method, path, timeout_ms);
                return sbx_fail(err, EIO,
                                "talking to the container engine at '%s' failed (%s %s: %s): check "
                                "that it still runs",
                                c->ep.host, method, path, curl_easy_strerror(rc));
        }
        r.body = sbx_buf_steal(&b, &r.len);
        *ret = r;
        return 0;
}

int engine_request_json(const struct engine_conn *c, const char *method, const char *path,
                        const char *json_body, long timeout_ms, long *ret_status,
                        json_object **ret_json, char *ret_msg, size_t msg_size,
                        struct sbx_error *err)
{
        struct engine_response r = {0};
        json_object *j = NULL, *m;
        int rv;

        rv = engine_request(c, method, path, true, json_body, timeout_ms, &r, err);
        if (rv < 0)
                return rv;
        if (ret_msg && msg_size)
                ret_msg[0] = '\0';
        if (r.len > 0)
                j = json_tokener_parse(r.body);
        if (r.status < 200 || r.status > 299) {
                if (ret_msg && msg_size) {
                        if (j && json_object_object_get_ex(j, "message", &m))
                                snprintf(ret_msg, msg_size, "%s", json_object_get_string(m));
                        else
                                snprintf(ret_msg, msg_size, "%.200s", r.body);
                }
                json_object_put(j);
                j = NULL;
        } else if (r.len > 0 && !j) {
                rv = sbx_fail(err, EPROTO,
                              "the container engine answered %s %s with something that is not "
                              "JSON ('%.80s')",
                              method, path, r.body);
                engine_response_done(&r);
                return rv;
        }
        *ret_status = r.status;
        if (ret_json)
                *ret_json = j;
        else
                json_object_put(j);
        engine_response_done(&r);
        return 0;
}

/* "1.41" -> 1041; -1 when unparsable. */
static long api_num(const char *v)
{
        char *end;
        long major, minor;

        if (!v || !*v)
                return -1;
        errno = 0;
        major = strtol(v, &end, 10);
        if (errno || *end != '.' || major < 0 || major > 99)
                return -1;
        minor = strtol(end + 1, &end, 10);
        if (errno || *end || minor < 0 || minor > 999)
                return -1;
        return major * 1000 + minor;
}

int engine_api_cmp(const char *a, const char *b)
{
        long x = api_num(a), y = api_num(b);
        return x < y ? -1 : x > y ? 1 : 0;
}

int engine_api_negotiate(const char *server_api, const char *server_min, char ret[16],
                         struct sbx_error *err)
{
        const char *pick;

        if (api_num(server_api) < 0)
                return sbx_fail(err, EPROTO,
                                "the container engine did not say which API version it speaks "
                                "(Api-Version '%s'): is this a Docker Engine or Podman socket?",
                                server_api ? server_api : "");
        if (engine_api_cmp(server_api, ENGINE_API_FLOOR) < 0)
                return sbx_fail(err, EPROTO,
                                "the Docker Engine is too old: it speaks API %s, Vestibule needs "
                                "%s or newer (Docker 20.10+): upgrade Docker",
                                server_api, ENGINE_API_FLOOR);
        pick = engine_api_cmp(server_api, ENGINE_API_NEWEST) < 0 ? server_api : ENGINE_API_NEWEST;
        if (server_min && api_num(server_min) >= 0 && engine_api_cmp(pick, server_min) < 0)
                return sbx_fail(err, EPROTO,
                                "the Docker Engine is too new for this Vestibule: it accepts API "
                                "%s and newer, Vestibule speaks up to %s: upgrade Vestibule",
                                server_min, ENGINE_API_NEWEST);
        snprintf(ret, 16, "%s", pick);
        return 0;
}
