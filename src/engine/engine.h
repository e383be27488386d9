/* engine.h - the container backend's own pieces: finding the engine (Docker or Podman) like
 * the docker CLI does, talking its HTTP API over libcurl (unix socket or tcp), negotiating the
 * API version, the create body and the check of the engine's answer, the attach stream
 * demultiplexer, and image import. Only src/engine and its tests include this header; the
 * rest of the server sees the engine through backend.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "common/error.h"
#include "config/config.h"
#include "config/pins.h"

/* ---------------------------------------------------------------------------------------- */
/* Endpoint resolution (endpoint.c)                                                          */

/* Reads one environment variable; returns NULL when unset. Injected so tests need no real
 * environment (STYLE.md: only src/config calls getenv; engine_env_getenv() is the one place
 * in src/engine that does, for the DOCKER_* variables config does not own). */
typedef const char *(*engine_getenv_fn)(const char *name);

/** engine_env_getenv() - the process environment (secure_getenv), for engine_endpoints_resolve().
 */
const char *engine_env_getenv(const char *name);

struct engine_endpoint {
        char host[512]; /* as given: "unix:///var/run/docker.sock", "tcp://h:2376" */
        bool is_unix;
        char sock_path[108]; /* is_unix: the socket path (sun_path limit) */
        char base_url[300];  /* "http://localhost" (unix) or "http(s)://h:port" (tcp) */
        bool tls;            /* https with client certificates */
        bool tls_verify;    /* verify the server certificate (DOCKER_TLS_VERIFY / !SkipTLSVerify) */
        char cert_dir[512]; /* ca.pem, cert.pem, key.pem; "" = none */
        bool local;         /* the daemon sees this host's filesystem (bind mounts work) */
        bool explicit_choice; /* from DOCKER_HOST / a context: no fallback to other sockets */
        char origin[128];     /* "DOCKER_HOST", "context 'colima'", "Docker's default socket" */
};

/**
 * engine_endpoint_parse() - parse a DOCKER_HOST-style address.
 * @host: "unix:///path", "tcp://host:port" ("tcp://host" = port 2375, or 2376 with TLS);
 *        "npipe://" and "ssh://" are refused with the fix in @err.
 * @tls_verify: whether TLS is asked for (DOCKER_TLS_VERIFY or a context's TLS data).
 * Return: 0, or -EINVAL / -EPROTONOSUPPORT / -ENAMETOOLONG with @err naming the fix.
 */
int engine_endpoint_parse(const char *host, bool tls, struct engine_endpoint *ret,
                          struct sbx_error *err);

/** engine_context_hash() - lower-case hex sha256 of @name into @ret (65 bytes), as the
 * docker CLI names a context's directory under contexts/meta/. */
void engine_context_hash(const char *name, char ret[65]);

/**
 * engine_endpoints_resolve() - the endpoints to try, in order, for @runtime:
 * DOCKER_HOST; else DOCKER_CONTEXT or config.json's currentContext (not "default"): that
 * context's Endpoints.docker.Host; else the known sockets that exist on this host (Docker's,
 * Docker Desktop's, rootless Docker's, Colima/OrbStack/Rancher Desktop, then Podman's for
 * auto). For podman: CONTAINER_HOST, else Podman's sockets. DOCKER_HOST and a context are
 * explicit: only that one is returned.
 * @ret: new array of *@ret_n endpoints (caller frees); *@ret_n may be 0 (nothing found:
 *       @ret_missing then names the places looked at, for the Blocked: text).
 * Return: 0, or -errno when an explicit choice is unusable (bad DOCKER_HOST, context missing).
 */
int engine_endpoints_resolve(enum sbx_runtime_choice runtime, engine_getenv_fn getenv_fn,
                             struct engine_endpoint **ret, size_t *ret_n, char *ret_missing,
                             size_t missing_size, struct sbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* HTTP (http.c)                                                                            */

struct engine_conn {
        struct engine_endpoint ep;
        char api[16];        /* negotiated, e.g. "1.41"; "" before negotiation */
        bool podman;         /* /_ping said Libpod-Api-Version */
        char server[128];    /* the Server: header */
        char libpod_api[32]; /* Podman's Libpod-Api-Version */
};

struct engine_response {
        long status; /* HTTP status; 0 = no answer */
        char *body;  /* NUL-terminated; owned */
        size_t len;
        char api_version[16]; /* Api-Version header */
        char libpod_api[32];  /* Libpod-Api-Version header */
        char server[128];     /* Server header */
};

/** engine_response_done() - free what @r holds. */
void engine_response_done(struct engine_response *r);

/**
 * engine_easy_new() - a curl easy handle set up for @c (unix socket or tcp+TLS) and the URL
 * of @path (a path starting with '/': the versioned prefix "/v<api>" is added when @versioned
 * and @c->api is set). Caller frees with curl_easy_cleanup().
 */
void *engine_easy_new(const struct engine_conn *c, const char *path, bool versioned);

/**
 * engine_request() - one HTTP request, answer buffered.
 * @method: "GET", "POST", "DELETE". @json_body: NULL = no body. @timeout_ms: 0 = none.
 * Return: 0 when an answer came (any status; see @ret->status), or -errno when the engine could
 * not be reached (-EACCES: socket permission; -ECONNREFUSED / -ENOENT: not running) with @err
 * holding the Blocked: text naming the fix.
 */
int engine_request(const struct engine_conn *c, const char *method, const char *path,
                   bool versioned, const char *json_body, long timeout_ms,
                   struct engine_response *ret, struct sbx_error *err);

/** engine_request_json() - engine_request() and parse the body as JSON when 2xx.
 * Return: 0 with *@ret_json (may be NULL for an empty body) and *@ret_status, or -errno. A
 * non-2xx status is not an error here: the caller reads *@ret_status and @ret_msg (the
 * engine's "message", may be empty). */
int engine_request_json(const struct engine_conn *c, const char *method, const char *path,
                        const char *json_body, long timeout_ms, long *ret_status,
                        json_object **ret_json, char *ret_msg, size_t msg_size,
                        struct sbx_error *err);

/** engine_unreachable_error() - fill @err with the Blocked: text for a failed connect to @c
 * (@os_errno from CURLINFO_OS_ERRNO, @curl_msg the library's text). Return -errno. */
int engine_unreachable_error(const struct engine_endpoint *ep, int os_errno, const char *curl_msg,
                             struct sbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Version negotiation (http.c)                                                              */

#define ENGINE_API_FLOOR "1.41"  /* oldest API the create body was verified with */
#define ENGINE_API_NEWEST "1.47" /* newest API version we speak */

/**
 * engine_api_negotiate() - pick the API version: min(@server_api, ENGINE_API_NEWEST), which
 * must be >= ENGINE_API_FLOOR and >= @server_min (the daemon's MinAPIVersion; NULL = unknown).
 * Return: 0 with @ret ("1.41"), or -EPROTO (daemon too old / too new) with the fix in @err.
 */
int engine_api_negotiate(const char *server_api, const char *server_min, char ret[16],
                         struct sbx_error *err);

/** engine_api_cmp() - compare "1.41"-style versions: <0, 0, >0. Unparsable sorts lowest. */
int engine_api_cmp(const char *a, const char *b);

/* ---------------------------------------------------------------------------------------- */
/* Stream demultiplexing (demux.c)                                                           */

/* Docker's multiplexed stream: frames of an 8-byte header [stream, 0, 0, 0, size u32 BE] and
 * size payload bytes; stream 1 = stdout, 2 = stderr (0 = stdin echo, never asked for). */
struct engine_demux {
        unsigned char hdr[8];
        size_t hdr_len;     /* header bytes collected so far */
        int stream;         /* current frame's stream */
        uint32_t remaining; /* payload bytes left in the current frame */
        bool broken;        /* a bad header was seen: everything after is refused */
};

typedef void (*engine_demux_fn)(void *userdata, int stream, const char *buf, size_t n);

/**
 * engine_demux_feed() - feed @n bytes (any split: frames and headers may span calls).
 * Return: 0, or -EPROTO on a header that is not a stdout/stderr frame (then @d stays broken).
 */
int engine_demux_feed(struct engine_demux *d, const char *buf, size_t n, engine_demux_fn fn,
                      void *userdata);

/* ---------------------------------------------------------------------------------------- */
/* The create body and the check of the engine's answer (body.c)                             */

struct engine_run_spec {
        const char *image;
        const char *const *cmd; /* NULL-terminated argv */
        uid_t uid;
        gid_t gid;
        const char *workspace; /* host dir bound at /workspace */
        bool workspace_ro;
        const char *code_dir;  /* host dir bound read-only at /sandbox */
        uint64_t memory_bytes; /* Memory = MemorySwap */
        uint64_t nano_cpus;
        unsigned pids_max;
        unsigned tmpfs_mb;
        const char *owner; /* vestibule.owner label */
        bool podman;
        bool userns_keep_id; /* rootless Podman: map our uid to itself */
        bool init;           /* an init as PID 1 (docker-init / catatonit) */
        const char *seccomp_profile; /* Podman: host path of our derived profile, passed as
                                      * SecurityOpt seccomp=<path>; NULL = engine default */
};

/** engine_create_body() - the POST /containers/create body for @spec (ENGINE_NOTES §1).
 * Return: a new json_object (json_object_put() it). */
json_object *engine_create_body(const struct engine_run_spec *spec);

/**
 * engine_verify_inspect() - check GET /containers/{id}/json against @spec: every lockdown
 * option must have come back as asked. A security option missing or changed is an error
 * (the run must not happen); a resource limit missing is a degraded reason appended to
 * @degraded ("memory, cpu, pids"; comma separated; may stay "").
 * Return: 0, or -EPERM with what the engine dropped in @err.
 */
int engine_verify_inspect(json_object *inspect, const struct engine_run_spec *spec, char *degraded,
                          size_t degraded_size, struct sbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Podman's seccomp profile (seccomp_profile.c)                                              */

/* Podman's default profile (containers-common) lets a container without CAP_SYS_ADMIN call
 * unshare, setns, mount and clone with CLONE_NEW* flags; Docker's does not. We hand Podman a
 * profile derived from its own default that denies those as Docker's does, and keep every other
 * rule. Podman takes `seccomp=` only as a path on its host, so the profile is a file. */

/* The CLONE_NEW* flags clone(2) can carry (CLONE_NEWTIME is clone3/unshare only). */
#define ENGINE_CLONE_NS_MASK 0x7E020000ull

/**
 * engine_seccomp_profile_derive() - from @def, an engine's default seccomp profile (the
 * containers-common / Docker JSON format), a new profile that keeps @def's rules except that:
 * unshare, setns, mount, umount, umount2, pivot_root and the new mount API (open_tree,
 * move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr) fail with EPERM; clone3 fails
 * with ENOSYS (so runtimes fall back to clone); clone is allowed only without CLONE_NEW* flags
 * (EPERM with any, arg 1 on s390/s390x). Those names are removed from every rule of @def so no
 * rule of @def can allow them again. @def is not changed.
 * Return: 0 with *@ret (json_object_put() it), or -EINVAL when @def is not a profile.
 */
int engine_seccomp_profile_derive(json_object *def, json_object **ret, struct sbx_error *err);

/**
 * engine_seccomp_profile_dir() - where this server keeps derived profiles: /run/vestibule/seccomp
 * as root, else $XDG_RUNTIME_DIR/vestibule/seccomp (read through @getenv_fn), else
 * /tmp/vestibule-<uid>/seccomp. Into @ret (@size bytes). Return 0 or -ENAMETOOLONG.
 */
int engine_seccomp_profile_dir(engine_getenv_fn getenv_fn, char *ret, size_t size,
                               struct sbx_error *err);

/**
 * engine_seccomp_profile_prepare() - read the engine's default profile @default_path, derive
 * ours (engine_seccomp_profile_derive()) and write it 0644 as @dir/<sha256 of its text>.json,
 * once: an existing file of that name is used when it is ours, a regular file not writable by
 * others and its content has that hash; otherwise it is replaced. @dir (and its parents) are
 * created 0755 when missing; @dir must belong to us and not be writable by others.
 * Return: 0 with the file's path in @ret (@size bytes), or -errno with the reason in @err
 * (the caller turns it into "namespaces not blocked: ...").
 */
int engine_seccomp_profile_prepare(const char *default_path, const char *dir, char *ret,
                                   size_t size, struct sbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Owner labels and the leftover sweep (backend.c)                                           */

/** engine_owner_label() - "<hostname>:<pid>:<start time in clock ticks>" of process @pid. */
int engine_owner_label(pid_t pid, char *ret, size_t size);

/** engine_owner_alive() - whether the owner label names a live process on this host (a label
 * of another host counts as alive: not ours to judge). */
bool engine_owner_alive(const char *label);

/**
 * engine_sweep() - remove containers labelled vestibule.run=1 whose owner process is gone.
 * Return: the number removed (>= 0), or -errno.
 */
int engine_sweep(const struct engine_conn *c, struct sbx_error *err);

/**
 * engine_connect() - resolve the endpoint for @cfg's runtime (through @getenv_fn), ping it and
 * negotiate the API version.
 * Return: 0 with @ret filled, or -errno with the Blocked: text in @err.
 */
int engine_connect(const struct sbx_config *cfg, engine_getenv_fn getenv_fn,
                   struct engine_conn *ret, struct sbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Images (image.c)                                                                          */

/**
 * engine_image_import() - POST /images/create?fromSrc=- streaming the rootfs tarball @tar as
 * image @ref, with WORKDIR /workspace, USER 1000:1000, a PATH, and labels
 * vestibule.image=1 and vestibule.tar-sha256=<@sha256> (one LABEL per `changes`).
 * Return: 0, or -errno with the engine's message in @err.
 */
int engine_image_import(const struct engine_conn *c, const char *tar, const char *ref,
                        const char *sha256, struct sbx_error *err);

/**
 * engine_image_label() - the value of label @key on image @ref into @ret ("" when absent).
 * Return: 0, -ENOENT (no such image), or -errno.
 */
int engine_image_label(const struct engine_conn *c, const char *ref, const char *key, char *ret,
                       size_t size, struct sbx_error *err);

/** engine_file_sha256() - lower-case hex sha256 of file @path. Return 0 or -errno. */
int engine_file_sha256(const char *path, char ret[65], struct sbx_error *err);

/* The names a Debian-built rootfs (images/build.sh) is imported under, as images/pins says
 * (python.debian, node.debian; tests/unit/test_setup_engine.c fails when they differ). */
#define ENGINE_DEBIAN_IMAGE_PYTHON SBX_DEBIAN_IMAGE_PYTHON /* config/pins.h */
#define ENGINE_DEBIAN_IMAGE_NODE SBX_DEBIAN_IMAGE_NODE

/**
 * engine_image_for() - the image the container backend runs @language ("node"; anything else,
 * bash included, runs in the python image) in: VESTIBULE_IMAGE_PYTHON / _NODE as set, except
 * that with VESTIBULE_IMAGE_SOURCE=debian a setting left at its default (the pinned registry
 * digest) means the Debian-built image, ENGINE_DEBIAN_IMAGE_*. `vestibule-mcp setup` imports
 * under the same name. Return: a string owned by @cfg or static.
 */
const char *engine_image_for(const struct sbx_config *cfg, const char *language);

/**
 * engine_setup_import() - for `vestibule-mcp setup`: connect to the engine @cfg selects and
 * import the rootfs tarball @tar as @ref, unless an image @ref with the same tarball sha256
 * label already exists.
 * Return: 1 when imported, 0 when already present, or -errno with the Blocked: text in @err.
 */
int engine_setup_import(const struct sbx_config *cfg, const char *tar, const char *ref,
                        struct sbx_error *err);
/** engine_setup_import_with_env() - the same, reading DOCKER_* etc. through @getenv_fn. */
int engine_setup_import_with_env(const struct sbx_config *cfg, engine_getenv_fn getenv_fn,
                                 const char *tar, const char *ref, struct sbx_error *err);

/**
 * engine_image_pull() - POST /images/create?fromImage=<name>&tag=<sha256:...>: pull @image
 * (name@sha256:<64 hex>; never a tag) with the engine's progress lines on @progress (NULL =
 * quiet; @tty: one updating line per layer, else a plain line per layer status change), then
 * check that the engine has an image with that RepoDigest.
 * Return: 0, -EINVAL (not pinned), or -errno with the engine's error line in @err.
 */
int engine_image_pull(const struct engine_conn *c, const char *image, FILE *progress, bool tty,
                      struct sbx_error *err);

/**
 * engine_setup_pull() - for `vestibule-mcp setup`: connect to the engine @cfg selects and pull
 * @image by digest unless an image with that RepoDigest is already there.
 * Return: 1 pulled, 0 already present, or -errno (unreachable: the Blocked: text) with @err.
 */
int engine_setup_pull(const struct sbx_config *cfg, const char *image, FILE *progress, bool tty,
                      struct sbx_error *err);

struct backend;
/**
 * engine_backend_new_with_env() - engine_backend_new() reading DOCKER_* and friends through
 * @getenv_fn (tests inject an environment). Return 0 or -errno.
 */
int engine_backend_new_with_env(const struct sbx_config *cfg, engine_getenv_fn getenv_fn,
                                struct backend **ret, struct sbx_error *err);

/* json-c cleanup helper (STYLE.md: library helpers live in the module using the library). */
static inline void json_putp(json_object **o)
{
        if (*o)
                json_object_put(*o);
}
