/* http.c - the engine's HTTP API over libcurl (unix socket, or tcp with TLS client certs), and
 * API version negotiation (docs/design/engine-api.md §6). */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lazy/curl.h"

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

/* libcurl's socket for the Engine API, opened close-on-exec in the same call (libcurl 7.88
 * opens its own without SOCK_CLOEXEC): a process the server starts (the egress proxy, running
 * as VESTIBULE_RUN_AS) must never inherit a connection to the engine. CURLOPT_OPENSOCKETFUNCTION
 * (https://curl.se/libcurl/c/CURLOPT_OPENSOCKETFUNCTION.html); tests/adversarial/server.md. */
static curl_socket_t open_cloexec(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
        (void)clientp;
        (void)purpose;
        return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

void *engine_easy_new(const struct engine_conn *c, const char *target, bool versioned)
{
        CURL *h = curl_easy_init();
        _cleanup_free_ char *url = NULL;

        if (!h)
                abort(); /* out of memory, as xmalloc */
        if (versioned && c->api[0])
                url = xasprintf("%s/v%s%s", c->ep.base_url, c->api, target);
        else
                url = xasprintf("%s%s", c->ep.base_url, target);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_PROXY, ""); /* never through an HTTP proxy from the env */
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
        curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_cloexec);
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
