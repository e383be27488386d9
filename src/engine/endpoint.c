/* endpoint.c - where the engine is: DOCKER_HOST, the docker CLI's contexts, then the sockets
 * Docker, Docker Desktop, rootless Docker, Colima, OrbStack, Rancher Desktop and Podman listen
 * on. Same order as the docker CLI (docs/design/engine-api.md §9), so a user's setup just works. */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/rundir.h"
#include "lazy/sha256.h"
#include "common/xalloc.h"

static const char *env_nonempty(const char *v)
{
        return v && *v ? v : NULL;
}

int engine_context_hash(const char *name, char ret[65], struct sbx_error *err)
{
        return sbx_sha256_hex(name, strlen(name), ret, err);
}

bool engine_host_is_loopback(const char *name, size_t n)
{
        char buf[256];
        struct in_addr a4;
        struct in6_addr a6;

        if (n == 0 || n >= sizeof(buf))
                return false;
        memcpy(buf, name, n);
        buf[n] = '\0';
        if (strcasecmp(buf, "localhost") == 0)
                return true; /* curl resolves it to the loopback itself, never through DNS */
        if (inet_pton(AF_INET, buf, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, buf, &a6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&a6) ||
                       (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
        return false;
}

int engine_endpoint_parse(const char *host, bool tls, struct engine_endpoint *ret,
                          struct sbx_error *err)
{
        struct engine_endpoint ep = {0};

        memset(ret, 0, sizeof(*ret));
        if (!host || !*host)
                return sbx_fail(err, EINVAL,
                                "empty Docker host address: set DOCKER_HOST to "
                                "unix:///path/to/docker.sock or tcp://host:port");
        if (strlen(host) >= sizeof(ep.host))
                return sbx_fail(err, ENAMETOOLONG, "Docker host address too long: '%.60s...'",
                                host);
        snprintf(ep.host, sizeof(ep.host), "%s", host);

        if (strncmp(host, "unix://", 7) == 0) {
                const char *path = host + 7;
                if (path[0] != '/')
                        return sbx_fail(err, EINVAL,
                                        "Docker host '%s' is not an absolute unix socket path: "
                                        "use unix:///path/to/docker.sock",
                                        host);
                if (strlen(path) >= sizeof(ep.sock_path))
                        return sbx_fail(err, ENAMETOOLONG,
                                        "Docker socket path '%s' is longer than the %zu bytes a "
                                        "unix socket address holds: use a shorter path (a symlink)",
                                        path, sizeof(ep.sock_path) - 1);
                ep.is_unix = true;
                ep.local = true;
                snprintf(ep.sock_path, sizeof(ep.sock_path), "%s", path);
                snprintf(ep.base_url, sizeof(ep.base_url), "http://localhost");
        } else if (strncmp(host, "tcp://", 6) == 0) {
                const char *hp = host + 6;
                size_t n = strcspn(hp, "/?#");
                if (n == 0 || n > 255)
                        return sbx_fail(err, EINVAL,
                                        "Docker host '%s' has no host name: use tcp://host:port",
                                        host);
                bool has_port = memchr(hp, ':', n) != NULL && hp[0] != '[';
                if (hp[0] == '[') /* [v6]:port */
                        has_port = strstr(hp, "]:") != NULL && (size_t)(strstr(hp, "]:") - hp) < n;
                /* the host name without the port, for the plaintext check */
                const char *hn = hp;
                size_t hn_len = n;
                if (hp[0] == '[') {
                        const char *rb = memchr(hp, ']', n);
                        hn = hp + 1;
                        hn_len = rb ? (size_t)(rb - hp) - 1 : 0;
                } else if (memchr(hp, ':', n)) {
                        hn_len = (size_t)((const char *)memchr(hp, ':', n) - hp);
                }
                /* Whoever can reach an engine's API is root on its host, and plain HTTP lets
                 * anyone on the path read and rewrite every request: only the loopback may be
                 * spoken to in the clear. */
                if (!tls && !engine_host_is_loopback(hn, hn_len))
                        return sbx_fail(err, EPERM,
                                        "refusing plain (unencrypted, unauthenticated) HTTP to the "
                                        "container engine at '%s': set DOCKER_TLS_VERIFY=1 and "
                                        "DOCKER_CERT_PATH to a folder with ca.pem, cert.pem and "
                                        "key.pem (the daemon's --tlsverify setup), or forward the "
                                        "engine's socket (ssh -L /tmp/docker.sock:/var/run/"
                                        "docker.sock host) and use unix://",
                                        host);
                ep.tls = tls;
                ep.tls_verify = tls;
                snprintf(ep.base_url, sizeof(ep.base_url), "%s://%.*s%s", tls ? "https" : "http",
                         (int)n, hp, has_port ? "" : (tls ? ":2376" : ":2375"));
        } else if (strncmp(host, "npipe://", 8) == 0) {
                return sbx_fail(err, EPROTONOSUPPORT,
                                "Docker host '%s' is a Windows named pipe, which this build cannot "
                                "open: run Vestibule inside WSL2 with Docker Desktop's WSL "
                                "integration, or set DOCKER_HOST to a unix:// or tcp:// address",
                                host);
        } else if (strncmp(host, "ssh://", 6) == 0) {
                return sbx_fail(
                    err, EPROTONOSUPPORT,
                    "Docker host '%s' uses ssh://, which needs the docker CLI's ssh "
                    "helper: forward the remote socket (ssh -L /tmp/docker.sock:"
                    "/var/run/docker.sock host) and set DOCKER_HOST=unix:///tmp/docker.sock",
                    host);
        } else {
                return sbx_fail(err, EPROTONOSUPPORT,
                                "Docker host '%s' has an unsupported scheme: use unix:///path or "
                                "tcp://host:port",
                                host);
        }
        *ret = ep;
        return 0;
}

int engine_cert_dir_check(const char *dir, const char *origin, struct sbx_error *err)
{
        static const char *const files[] = {"ca.pem", "cert.pem", "key.pem"};

        if (!dir || !*dir)
                return sbx_fail(err, ENOENT,
                                "DOCKER_TLS_VERIFY is set but there is no folder with the TLS "
                                "certificates: set DOCKER_CERT_PATH to the folder holding "
                                "ca.pem, cert.pem and key.pem");
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *f = xasprintf("%s/%s", dir, files[i]);
                if (access(f, R_OK) < 0)
                        return sbx_fail(err, errno,
                                        "cannot read '%s' (%s, from %s): DOCKER_TLS_VERIFY needs "
                                        "ca.pem, cert.pem and key.pem there; set DOCKER_CERT_PATH "
                                        "to the folder the daemon's client certificates are in",
                                        f, strerror(errno), origin);
        }
        return 0;
}

static bool is_socket(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static char *read_file_small(const char *path, size_t cap)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char *buf = xmalloc(cap + 1);
        size_t n = fread(buf, 1, cap, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

/* $DOCKER_CONFIG, else $HOME/.docker; NULL when neither is known. */
static char *docker_config_dir(const struct sbx_engine_env *env)
{
        const char *dc = env_nonempty(env->docker_config);
        const char *home = env_nonempty(env->home);

        if (dc)
                return xstrdup(dc);
        if (home)
                return xasprintf("%s/.docker", home);
        return NULL;
}

/* The endpoint of context @name from the CLI's context store. */
static int context_endpoint(const char *cfgdir, const char *name, struct engine_endpoint *ret,
                            struct sbx_error *err)
{
        char hash[65];
        int r = engine_context_hash(name, hash, err);
        if (r < 0)
                return sbx_wrap(err, "Docker context '%s'", name);
        _cleanup_free_ char *meta = xasprintf("%s/contexts/meta/%s/meta.json", cfgdir, hash);
        _cleanup_free_ char *text = read_file_small(meta, 1 << 20);
        _cleanup_(json_putp) json_object *j = NULL;
        json_object *eps, *docker, *hostj, *skip;

        if (!text)
                return sbx_fail(err, ENOENT,
                                "Docker context '%s' not found ('%s' is missing): check "
                                "DOCKER_CONTEXT / currentContext in %s/config.json",
                                name, meta, cfgdir);
        j = json_tokener_parse(text);
        if (!j || !json_object_object_get_ex(j, "Endpoints", &eps) ||
            !json_object_object_get_ex(eps, "docker", &docker) ||
            !json_object_object_get_ex(docker, "Host", &hostj) ||
            !json_object_is_type(hostj, json_type_string))
                return sbx_fail(err, EINVAL,
                                "Docker context '%s' has no Endpoints.docker.Host in '%s': fix "
                                "the context or select another",
                                name, meta);
        _cleanup_free_ char *tlsdir = xasprintf("%s/contexts/tls/%s/docker", cfgdir, hash);
        struct stat st;
        bool has_tls = stat(tlsdir, &st) == 0 && S_ISDIR(st.st_mode);
        r = engine_endpoint_parse(json_object_get_string(hostj), has_tls, ret, err);
        if (r < 0)
                return sbx_wrap(err, "Docker context '%s'", name);
        if (has_tls && !ret->is_unix) {
                snprintf(ret->cert_dir, sizeof(ret->cert_dir), "%s", tlsdir);
                ret->tls_verify = !(json_object_object_get_ex(docker, "SkipTLSVerify", &skip) &&
                                    json_object_get_boolean(skip));
        }
        ret->explicit_choice = true;
        snprintf(ret->origin, sizeof(ret->origin), "Docker context '%.100s'", name);
        return 0;
}

/* The context to use: DOCKER_CONTEXT, else config.json's currentContext; NULL = default. */
static char *current_context(const struct sbx_engine_env *env, const char *cfgdir)
{
        const char *dc = env_nonempty(env->docker_context);
        if (dc)
                return strcmp(dc, "default") == 0 ? NULL : xstrdup(dc);
        if (!cfgdir)
                return NULL;
        _cleanup_free_ char *path = xasprintf("%s/config.json", cfgdir);
        _cleanup_free_ char *text = read_file_small(path, 1 << 20);
        if (!text)
                return NULL;
        _cleanup_(json_putp) json_object *j = json_tokener_parse(text);
        json_object *cc;
        if (!j || !json_object_object_get_ex(j, "currentContext", &cc) ||
            !json_object_is_type(cc, json_type_string))
                return NULL;
        const char *name = json_object_get_string(cc);
        if (!*name || strcmp(name, "default") == 0)
                return NULL;
        return xstrdup(name);
}

struct endpoint_list {
        struct engine_endpoint *v;
        size_t n, cap;
};

static void list_push(struct endpoint_list *l, const struct engine_endpoint *ep)
{
        for (size_t i = 0; i < l->n; i++)
                if (strcmp(l->v[i].host, ep->host) == 0)
                        return;
        GREEDY_REALLOC(l->v, l->cap, l->n + 1);
        l->v[l->n++] = *ep;
}

/* Add unix socket @path when it exists; else note it in @missing. */
static void try_socket(struct endpoint_list *l, const char *path, const char *origin, char *missing,
                       size_t missing_size)
{
        struct engine_endpoint ep;
        _cleanup_free_ char *host = xasprintf("unix://%s", path);

        if (!is_socket(path)) {
                if (!missing || !missing_size)
                        return;
                size_t used = strlen(missing);
                if (used + 4 < missing_size)
                        snprintf(missing + used, missing_size - used, "%s'%s'", used ? ", " : "",
                                 path);
                return;
        }
        if (engine_endpoint_parse(host, false, &ep, NULL) < 0)
                return;
        snprintf(ep.origin, sizeof(ep.origin), "%s", origin);
        list_push(l, &ep);
}

static void docker_sockets(struct endpoint_list *l, const char *home, const char *xdg, char *miss,
                           size_t ms)
{
        try_socket(l, "/var/run/docker.sock", "Docker's default socket", miss, ms);
        try_socket(l, "/run/docker.sock", "Docker's default socket", miss, ms);
        if (home) {
                _cleanup_free_ char *a = xasprintf("%s/.docker/run/docker.sock", home);
                _cleanup_free_ char *b = xasprintf("%s/.docker/desktop/docker.sock", home);
                try_socket(l, a, "Docker Desktop's socket", miss, ms);
                try_socket(l, b, "Docker Desktop's socket", miss, ms);
        }
        if (xdg) {
                _cleanup_free_ char *c = xasprintf("%s/docker.sock", xdg);
                try_socket(l, c, "rootless Docker's socket", miss, ms);
        }
        if (home) {
                _cleanup_free_ char *d = xasprintf("%s/.colima/default/docker.sock", home);
                _cleanup_free_ char *e = xasprintf("%s/.orbstack/run/docker.sock", home);
                _cleanup_free_ char *f = xasprintf("%s/.rd/docker.sock", home);
                try_socket(l, d, "Colima's socket", miss, ms);
                try_socket(l, e, "OrbStack's socket", miss, ms);
                try_socket(l, f, "Rancher Desktop's socket", miss, ms);
        }
}

/* Podman's clients pick the rootful socket as root and the user's own rootless one otherwise;
 * we try both, in that order, so a root-only /run/podman socket (permission denied) never hides
 * a working rootless service of the user. */
static void podman_sockets(struct endpoint_list *l, const char *home, const char *xdg, char *miss,
                           size_t ms)
{
        bool root = geteuid() == 0;

        if (root)
                try_socket(l, "/run/podman/podman.sock", "Podman's socket", miss, ms);
        if (xdg) {
                _cleanup_free_ char *a = xasprintf("%s/podman/podman.sock", xdg);
                try_socket(l, a, "rootless Podman's socket", miss, ms);
        }
        if (!root)
                try_socket(l, "/run/podman/podman.sock", "Podman's socket", miss, ms);
        if (home) {
                _cleanup_free_ char *b =
                    xasprintf("%s/.local/share/containers/podman/machine/podman.sock", home);
                try_socket(l, b, "podman machine's socket", miss, ms);
        }
}

int engine_endpoints_resolve(enum sbx_runtime_choice runtime, engine_getenv_fn getenv_fn,
                             struct engine_endpoint **ret, size_t *ret_n, char *ret_missing,
                             size_t missing_size, struct sbx_error *err)
{
        struct sbx_engine_env env = {0};
        int r;

        config_engine_env_fill(getenv_fn, &env);
        r = engine_endpoints_resolve_env(runtime, &env, ret, ret_n, ret_missing, missing_size, err);
        config_engine_env_done(&env);
        return r;
}

int engine_endpoints_resolve_env(enum sbx_runtime_choice runtime, const struct sbx_engine_env *env,
                                 struct engine_endpoint **ret, size_t *ret_n, char *ret_missing,
                                 size_t missing_size, struct sbx_error *err)
{
        struct endpoint_list l = {0};
        struct engine_endpoint ep;
        const char *home = env_nonempty(env->home);
        const char *xdg = env_nonempty(env->xdg_runtime_dir);
        char xdg_def[4096];
        int r;

        /* Without XDG_RUNTIME_DIR (an MCP client's bare environment, runuser, su, cron) the
         * user's runtime folder is still /run/user/UID, as Podman itself assumes, when it
         * exists and is ours (common/rundir.h checks owner, mode and that it is no symlink). */
        if (!xdg && geteuid() != 0 &&
            sbx_user_runtime_dir(SBX_USER_RUNTIME_BASE, geteuid(), xdg_def, sizeof(xdg_def),
                                 NULL) == 0)
                xdg = xdg_def;

        if (ret_missing && missing_size)
                ret_missing[0] = '\0';

        if (runtime == SBX_RUNTIME_PODMAN) {
                const char *ch = env_nonempty(env->container_host);
                if (ch) {
                        r = engine_endpoint_parse(ch, false, &ep, err);
                        if (r < 0)
                                return sbx_wrap(err, "CONTAINER_HOST");
                        ep.explicit_choice = true;
                        snprintf(ep.origin, sizeof(ep.origin), "CONTAINER_HOST");
                        list_push(&l, &ep);
                } else {
                        podman_sockets(&l, home, xdg, ret_missing, missing_size);
                }
                *ret = l.v;
                *ret_n = l.n;
                return 0;
        }

        const char *dh = env_nonempty(env->docker_host);
        if (dh) {
                const char *tv = env_nonempty(env->docker_tls_verify);
                bool tls = tv && strcmp(tv, "0") != 0;
                r = engine_endpoint_parse(dh, tls, &ep, err);
                if (r < 0)
                        return sbx_wrap(err, "DOCKER_HOST");
                if (tls && !ep.is_unix) {
                        const char *cp = env_nonempty(env->docker_cert_path);
                        _cleanup_free_ char *def = home ? xasprintf("%s/.docker", home) : NULL;
                        snprintf(ep.cert_dir, sizeof(ep.cert_dir), "%s", cp ? cp : def ? def : "");
                        r = engine_cert_dir_check(
                            ep.cert_dir, cp ? "DOCKER_CERT_PATH" : "the default ~/.docker", err);
                        if (r < 0)
                                return r;
                }
                ep.explicit_choice = true;
                snprintf(ep.origin, sizeof(ep.origin), "DOCKER_HOST");
                list_push(&l, &ep);
                *ret = l.v;
                *ret_n = l.n;
                return 0;
        }

        _cleanup_free_ char *cfgdir = docker_config_dir(env);
        _cleanup_free_ char *ctx = current_context(env, cfgdir);
        if (ctx) {
                if (!cfgdir)
                        return sbx_fail(err, ENOENT,
                                        "Docker context '%s' is selected but neither DOCKER_CONFIG "
                                        "nor HOME is set to find it",
                                        ctx);
                r = context_endpoint(cfgdir, ctx, &ep, err);
                if (r < 0)
                        return r;
                list_push(&l, &ep);
                *ret = l.v;
                *ret_n = l.n;
                return 0;
        }

        docker_sockets(&l, home, xdg, ret_missing, missing_size);
        if (runtime == SBX_RUNTIME_AUTO)
                podman_sockets(&l, home, xdg, ret_missing, missing_size);
        *ret = l.v;
        *ret_n = l.n;
        return 0;
}
