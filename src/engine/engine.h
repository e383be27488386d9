/* engine.h - the container backend's own pieces: finding the engine (Docker or Podman) like
 * the docker CLI does, talking its HTTP API over libcurl (unix socket or tcp), negotiating the
 * API version, the create body and the check of the engine's answer, the attach stream
 * demultiplexer, and image import; and the backend's constructor and start-up sweep, for the
 * service (src/service/ladder.c, service.c) and doctor. Besides those, only src/engine and its
 * tests include this header; the rest of the server sees the engine through run/backend.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "common/error.h"
#include "common/owner.h"
#include "config/config.h"
#include "config/pins.h"

/* ---------------------------------------------------------------------------------------- */
/* Endpoint resolution (endpoint.c)                                                          */

/* Reads one environment variable; returns NULL when unset. Injected so tests need no real
 * environment. The server itself passes NULL where one is taken: then the DOCKER_* variables
 * come from the config (struct sbx_engine_env, read by config_load(); docs/design/style.md: only
 * src/config reads the environment). */
typedef const char *(*engine_getenv_fn)(const char *name);

/** engine_env_getenv() - the process environment as config reads it (secure_getenv), for
 * callers that want a live read through an engine_getenv_fn (setup, tests). */
static inline const char *engine_env_getenv(const char *name)
{
        return config_process_getenv(name);
}

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
 *        "npipe://" and "ssh://" are refused with the fix in @err, and so is tcp:// without
 *        TLS to anything but the loopback (-EPERM, naming DOCKER_TLS_VERIFY).
 * @tls_verify: whether TLS is asked for (DOCKER_TLS_VERIFY or a context's TLS data).
 * Return: 0, or -EINVAL / -EPROTONOSUPPORT / -ENAMETOOLONG with @err naming the fix.
 */
int engine_endpoint_parse(const char *host, bool tls, struct engine_endpoint *ret,
                          struct sbx_error *err);

/** engine_host_is_loopback() - whether the host name @name (@n bytes, no port, no brackets) is
 * the loopback: "localhost", 127.0.0.0/8, ::1 (or ::ffff:127.x). Plain tcp:// is refused to
 * anything else. */
bool engine_host_is_loopback(const char *name, size_t n);

/** engine_cert_dir_check() - ca.pem, cert.pem and key.pem readable in @dir (@origin names
 * where @dir came from, for the message). Return 0, or -errno with the fix in @err. */
int engine_cert_dir_check(const char *dir, const char *origin, struct sbx_error *err);

/** engine_context_hash() - lower-case hex sha256 of @name into @ret (65 bytes), as the
 * docker CLI names a context's directory under contexts/meta/. Return 0, or -errno with @err
 * set when libcrypto cannot be loaded (lazy/sha256.h). */
int engine_context_hash(const char *name, char ret[65], struct sbx_error *err);

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

/** engine_endpoints_resolve_env() - the same, from the variables in @env (the config's). */
int engine_endpoints_resolve_env(enum sbx_runtime_choice runtime, const struct sbx_engine_env *env,
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

/**
 * engine_easy_new() - a curl easy handle set up for @c (unix socket or tcp+TLS) and the URL
 * of @target (a request target starting with '/', already escaped: engine_call_target()):
 * the versioned prefix "/v<api>" is added when @versioned and @c->api is set. Caller frees
 * with curl_easy_cleanup(). Only api.c calls it, and hijack.c for the hijacked attach and exec
 * streams (CURLOPT_CONNECT_ONLY), which engine_call() cannot carry: everything else goes through
 * engine_call().
 */
void *engine_easy_new(const struct engine_conn *c, const char *target, bool versioned);

/** engine_unreachable_error() - fill @err with the Blocked: text for a failed connect to @c
 * (@os_errno from CURLINFO_OS_ERRNO, @curl_msg the library's text). Return -errno. */
int engine_unreachable_error(const struct engine_endpoint *ep, int os_errno, const char *curl_msg,
                             struct sbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* The Engine API calls (api.c)                                                              */

/* Every request to the engine goes through engine_get() / engine_post() / engine_put() /
 * engine_head() / engine_delete() (or, for transfers driven by a curl_multi, through
 * engine_xfer_new() and engine_xfer_finish()), which build the request target from a template
 * whose parts they percent-encode themselves, and check the answer's status in one place
 * (https://docs.docker.com/engine/api/v1.43/; docs/design/engine-api.md). */

#define ENGINE_CALL_MAX_PARTS 4
#define ENGINE_CALL_MAX_QUERY 8
#define ENGINE_CALL_MAX_OK 4
#define ENGINE_PART_MAX_BYTES 4096 /* one path part or query value, before encoding */

/* What becomes of the answer's body (when its status is one of the call's @ok). */
enum engine_body {
        ENGINE_BODY_NONE = 0, /* discarded */
        ENGINE_BODY_JSON,     /* parsed into engine_reply.json (NULL for an empty body) */
        ENGINE_BODY_RAW,      /* kept in engine_reply.raw (NUL-terminated) */
        ENGINE_BODY_STREAM,   /* handed to @on_data as it arrives */
};

struct engine_query {
        const char *name;  /* NULL ends the list */
        const char *value; /* percent-encoded; NULL = the parameter is left out */
};

/* One call. Designated initialisers leave what is not needed zero. */
struct engine_call {
        /* "/containers/{}/json": each "{}" takes the next of @parts, percent-encoded as one
         * path part (engine_escape()); the template itself is a literal of ours */
        const char *path;
        const char *parts[ENGINE_CALL_MAX_PARTS];
        struct engine_query query[ENGINE_CALL_MAX_QUERY];
        long ok[ENGINE_CALL_MAX_OK]; /* the statuses that mean success; {0}: any 2xx */
        bool any_status;             /* no status check: the caller reads engine_reply.status */
        enum engine_body body;
        long timeout_ms;  /* whole call; 0 = none */
        bool unversioned; /* no "/v<api>" prefix (/_ping, /version, Podman's /v4.0.0/libpod) */
        const char *what; /* "inspect the sandbox container": what failed, for the message */
        const char *json; /* request body, Content-Type application/json; NULL = none */
        /* request body streamed from a file: POST/PUT read @upload_fd from offset 0 */
        bool upload;
        int upload_fd;
        const char *content_type;   /* with @upload: "application/x-tar" */
        const char *const *headers; /* extra request headers, NULL-terminated; may be NULL */
        /* ENGINE_BODY_STREAM: called with each piece of a successful answer's body; return @n
         * to go on, anything else stops the transfer (engine_reply.stopped) */
        size_t (*on_data)(void *userdata, const char *buf, size_t n);
        void *userdata;
};

struct engine_reply {
        long status;       /* HTTP status; 0 = no answer */
        json_object *json; /* ENGINE_BODY_JSON and a successful status; owned */
        char *raw;         /* ENGINE_BODY_RAW and a successful status; owned, NUL-terminated */
        size_t len;
        bool stopped;         /* ENGINE_BODY_STREAM: @on_data stopped the transfer */
        char msg[300];        /* a refused call: the engine's "message" (or the body's start) */
        char api_version[16]; /* Api-Version header */
        char libpod_api[32];  /* Libpod-Api-Version header */
        char server[128];     /* Server header */
};

/** engine_reply_done() - free what @r holds (json, raw); @r may be NULL. */
void engine_reply_done(struct engine_reply *r);

/** engine_unreserved() - whether byte @ch is RFC 3986 §2.3 "unreserved" (A-Z a-z 0-9 - . _ ~),
 * the bytes engine_escape() leaves as they are. */
bool engine_unreserved(unsigned char ch);

/** engine_dot_piece() - whether one of the '/'-separated pieces of the @n bytes at @s is "." or
 * ".." (RFC 3986 §3.3 dot-segments), which engine_escape() refuses in a path part. */
bool engine_dot_piece(const char *s, size_t n);

/**
 * engine_escape() - percent-encode @n bytes of @s (RFC 3986 §2: every byte but the unreserved
 * A-Z a-z 0-9 - . _ ~ becomes %XX) into a new string *@ret (free() it).
 * @query: true for a query value; false for a path part, which must not be empty and whose
 *         '/'-separated pieces must not be "." or ".." (the engine decodes the path before
 *         routing it, so an id "../../images/x" would reach another endpoint).
 * Return: 0, or -EINVAL (a NUL byte; a path part "", "." or ".." or holding such a piece) or
 * -ENAMETOOLONG (over ENGINE_PART_MAX_BYTES) with the reason in @err; *@ret untouched then.
 */
int engine_escape(const char *s, size_t n, bool query, char **ret, struct sbx_error *err);

/**
 * engine_call_target() - the request target of @call: its path template with every "{}"
 * replaced by the next part, escaped, then "?name=value&..." of its query. No "/v<api>" prefix.
 * Return: 0 with a new string in *@ret, or -EINVAL (a bad part, more or fewer parts than
 * "{}"s) / -ENAMETOOLONG with @err naming the part.
 */
int engine_call_target(const struct engine_call *call, char **ret, struct sbx_error *err);

/**
 * engine_call() - one request to the engine behind @c, answered in full.
 * @method: "GET", "POST", "PUT", "HEAD" or "DELETE" (the wrappers below pass it).
 * @ret:    the answer (engine_reply_done() it, also after an error: a refused status leaves
 *          status and msg set).
 * Return: 0 when the status is one of @call->ok; else -errno with @err naming the fix:
 * -ECONNREFUSED / -ENOENT / -EACCES (engine unreachable: the Blocked: text), -EPROTO (TLS, or
 * a JSON body that is not JSON), -ETIMEDOUT, -EIO (transfer failed, or HTTP 5xx and others),
 * and by the refused status: -EINVAL (400), -EACCES (401, 403), -ENOENT (404), -EBUSY (409).
 */
int engine_call(const struct engine_conn *c, const char *method, const struct engine_call *call,
                struct engine_reply *ret, struct sbx_error *err);

/* engine_call() with the method in the name. */
int engine_get(const struct engine_conn *c, const struct engine_call *call,
               struct engine_reply *ret, struct sbx_error *err);
int engine_post(const struct engine_conn *c, const struct engine_call *call,
                struct engine_reply *ret, struct sbx_error *err);
int engine_put(const struct engine_conn *c, const struct engine_call *call,
               struct engine_reply *ret, struct sbx_error *err);
int engine_head(const struct engine_conn *c, const struct engine_call *call,
                struct engine_reply *ret, struct sbx_error *err);
int engine_delete(const struct engine_conn *c, const struct engine_call *call,
                  struct engine_reply *ret, struct sbx_error *err);

/* One call in flight on a curl_multi the caller drives (the run's attach, wait and kill). */
struct engine_xfer;

/**
 * engine_xfer_new() - set up @call (copied, with @ret as its answer) as a curl easy handle
 * for a multi: add engine_xfer_handle() to it, perform, and on CURLMSG_DONE call
 * engine_xfer_finish() with the transfer's result. @c and @ret must outlive the transfer.
 * Return: 0 with a new transfer in *@ret_x (engine_xfer_free() it), or -EINVAL (a bad part).
 */
int engine_xfer_new(const struct engine_conn *c, const char *method, const struct engine_call *call,
                    struct engine_reply *ret, struct engine_xfer **ret_x, struct sbx_error *err);

/** engine_xfer_handle() - the CURL easy handle of @x (its CURLOPT_PRIVATE is @x). */
void *engine_xfer_handle(struct engine_xfer *x);

/** engine_xfer_headers_done() - whether @x's answer headers are all in (its status known). */
bool engine_xfer_headers_done(const struct engine_xfer *x);

/** engine_xfer_status() - @x's HTTP status so far; 0 before the status line. */
long engine_xfer_status(const struct engine_xfer *x);

/**
 * engine_xfer_finish() - the end of @x: its curl result @curl_result (a CURLcode) judged and
 * the status checked as engine_call() does, the body (JSON/raw) into the reply. Return as
 * engine_call().
 */
int engine_xfer_finish(struct engine_xfer *x, int curl_result, struct sbx_error *err);

/** engine_xfer_free() - free @x (its easy handle too: remove it from the multi first). */
void engine_xfer_free(struct engine_xfer *x);

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
        const char *code_dir; /* host dir bound read-only at /sandbox */
        /* A daemon that cannot see our files: named volumes instead of the two binds (set
         * both; then workspace and code_dir are not used in the body). */
        const char *workspace_volume; /* at /workspace (read-only with workspace_ro) */
        const char *code_volume;      /* at /sandbox, read-only */
        uint64_t memory_bytes;        /* Memory = MemorySwap */
        uint64_t nano_cpus;
        unsigned pids_max;
        unsigned tmpfs_mb;
        const char *owner; /* vestibule.owner label */
        bool podman;
        bool userns_keep_id;         /* rootless Podman: map our uid to itself */
        bool init;                   /* an init as PID 1 (docker-init / catatonit) */
        bool open_stdin;             /* stdin attached and open, closed when the one attached client
                                      * goes (StdinOnce): a session's lifeline on the volume path */
        const char *cgroup_parent;   /* HostConfig.CgroupParent (hostcg.c); NULL = the engine's */
        const char *runtime;         /* HostConfig.Runtime (runtime.c); NULL = the engine's */
        const char *seccomp_profile; /* SecurityOpt seccomp=<this>: Docker: our profile's JSON
                                      * text; Podman: host path of our derived profile; NULL =
                                      * the engine's default */
        /* More "NAME=value" entries after ours (NULL-ended; a PATH= replaces ours): the
         * egress proxy variables and pip's persistence (egress_sandbox_env()). */
        const char *const *extra_env;
};

/** engine_create_body() - the POST /containers/create body for @spec (docs/design/engine-api.md
 * §1). Return: a new json_object (json_object_put() it). */
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
/* What the host kernel says about a rootful engine's container (hostcg.c)                   */

struct run_usage;

/**
 * engine_hostcg_available() - whether this server can give each run a parent cgroup of its
 * own and read it: root, with the cgroup v1 memory, cpuacct and pids hierarchies mounted at
 * their roots and writable. Return: 0, or -errno with the reason (for a `not measured:`) in @why.
 */
int engine_hostcg_available(char *why, size_t size);

/** engine_hostcg_mount() - the mount point of the cgroup v1 hierarchy holding controller @ctrl
 * ("memory", "pids", "cpuacct") into @ret, from /proc/self/mountinfo (proc(5)). Return 0;
 * -ENOENT (no such v1 hierarchy: a cgroup v2 host), -EXDEV (mounted from a subtree, so the
 * engine's cgroup paths would not map onto it), or -errno of the open. */
int engine_hostcg_mount(const char *ctrl, char *ret, size_t size);

/** engine_hostcg_name() - the CgroupParent of run @seq of the server labelled @owner:
 * "/vestibule/<pid>-<start time>-<seq>" (the sweep reads the owner back from it). */
void engine_hostcg_name(const char *owner, unsigned long seq, char *ret, size_t size);

/** engine_hostcg_read() - the peak memory (memory.max_usage_in_bytes), CPU time
 * (cpuacct.usage) and peak task count (pids.peak) of parent cgroup @rel into @u; a figure
 * that cannot be read is `not measured` with the reason. @podman: the engine's monitor
 * shares @rel (<rel>/conmon): its CPU is subtracted exactly; the peaks are lower bounds
 * (run_measure.at_least): the parent's watermark minus the monitor's. */
void engine_hostcg_read(const char *rel, bool podman, struct run_usage *u);

/** engine_hostcg_remove() - remove parent cgroup @rel (and Podman's monitor cgroup in it)
 * from every cgroup hierarchy. Return: 0, or -EBUSY when it is still in use somewhere (the
 * engine's monitor or cleanup process may outlive the container's removal briefly). */
int engine_hostcg_remove(const char *rel);

/** engine_hostcg_private_top() - create /vestibule in every cgroup hierarchy mounted at its
 * root, mode 0700 (made so when it exists): the runs' cgroups below it, which the runtime
 * creates 0755 with 0644 files (memory use, process counts, the container id), are then
 * unreachable for other local users. Failures are debug lines. */
void engine_hostcg_private_top(void);

/** engine_hostcg_sweep() - remove the empty parent cgroups of servers that are gone.
 * Return: how many directories were removed. */
unsigned engine_hostcg_sweep(void);

/** engine_kmsg_open() - /dev/kmsg, non-blocking, positioned after the last record.
 * Return: the fd, or -errno (-EPERM without CAP_SYSLOG under dmesg_restrict). */
int engine_kmsg_open(void);

/** engine_kmsg_line_is_oom_of() - whether kmsg record @rec is the kernel's oom-kill record
 * for the memory cgroup of container @id (its oom_memcg path ends in the full id). */
bool engine_kmsg_line_is_oom_of(const char *rec, const char *id);

/**
 * engine_kmsg_find_oom() - read the records after @fd's position, looking for the oom-kill
 * record of container @id.
 * Return: 1 found, 0 not there, -ENODATA when records were lost before they were read.
 */
int engine_kmsg_find_oom(int fd, const char *id);

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
 * move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr), and the native sandbox's other
 * named dangerous calls (io_uring_*, bpf, keyctl, perf_event_open, userfaultfd, ...) fail with
 * EPERM; socket(AF_VSOCK) fails with EPERM (other families as @def says); clone3 fails
 * with ENOSYS (so runtimes fall back to clone); clone is allowed only without CLONE_NEW* flags
 * (EPERM with any, arg 1 on s390/s390x). Those names are removed from every rule of @def so no
 * rule of @def can allow them again. @def is not changed.
 * Return: 0 with *@ret (json_object_put() it), or -EINVAL when @def is not a profile.
 */
int engine_seccomp_profile_derive(json_object *def, json_object **ret, struct sbx_error *err);

/**
 * engine_seccomp_profile_docker() - the seccomp profile we hand Docker, as JSON text for
 * HostConfig.SecurityOpt "seccomp=<json>" (the Engine API takes the profile itself there, as
 * the docker CLI sends it; see docs/design/engine.md): default SCMP_ACT_ERRNO (EPERM) with the
 * native sandbox's allowlist, clone without CLONE_NEW* flags, clone3 ENOSYS, socket for every
 * family but AF_VSOCK, personality only as Docker allows it. Everything else is refused: io_uring,
 * bpf, keyrings, namespaces, mounts... Docker's default profile is not on disk and allows
 * io_uring and AF_VSOCK (20.10), so ours is generated, not derived.
 * Return: a new string (free() it).
 */
char *engine_seccomp_profile_docker(void);

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
/* Owner labels, the leftover sweep and connecting (conn.c)                                 */

/* The owner labels themselves: common/owner.h (sbx_owner_label(), sbx_owner_alive()). */

/* The "host" of the owner label of a server in its OCI image whose container the engine it
 * talks to knows: "container/<64 hex id>:<pid>:<start>". A hostname holds no '/', so no host's
 * label looks so. Any server on that engine (in the image or not) judges such an owner by its
 * container: gone when the engine answers 404 or the container does not run (a `docker kill`
 * of the server's container), which sbx_owner_alive() cannot see from another host name. */
#define ENGINE_OWNER_CONTAINER "container/"

/**
 * engine_self_container_id() - this process's container id, from the bind mounts the engine
 * makes for /etc/hostname, /etc/hosts and /etc/resolv.conf (Docker:
 * /var/lib/docker/containers/<id>/..., Podman: .../overlay-containers/<id>/userdata/...), in
 * @mountinfo (proc(5): /proc/self/mountinfo). Only meaningful in the server's own image
 * (config_in_container()): a CI machine that is itself a container has such mounts too, of an
 * engine the server does not talk to; the caller also asks the engine whether it knows the id.
 * @ret: @size >= 65 bytes for the 64 lowercase hex digits.
 * Return: 0, or -ENOENT (no such mount, unreadable file).
 */
int engine_self_container_id(const char *mountinfo, char *ret, size_t size);

/**
 * engine_owner_in_container() - rewrite the owner label @owner ("<host>@<pidns>:<pid>:<start>",
 * from sbx_owner_label(); @size bytes) in place to ENGINE_OWNER_CONTAINER "<@id>:<pid>:<start>".
 * Return: 0, -EINVAL (@owner not a label, @id not 64 characters), -ENAMETOOLONG (@owner is
 * then cut).
 */
int engine_owner_in_container(char *owner, size_t size, const char *id);

/**
 * engine_sweep() - remove containers labelled vestibule.run=1 whose owner process is gone (a
 * label of this host whose process is gone; an ENGINE_OWNER_CONTAINER label whose container
 * the engine no longer runs), then such volumes.
 * Return: the number removed (>= 0), or -errno.
 */
int engine_sweep(const struct engine_conn *c, struct sbx_error *err);

/**
 * engine_connect() - resolve the endpoint for @cfg's runtime (from @cfg->engine_env, or through
 * @getenv_fn when not NULL: tests), ping it and negotiate the API version.
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
 * engine_image_inspect() - GET /images/{@ref}/json (Docker Engine API "ImageInspect";
 * https://docs.docker.com/reference/api/engine/version/v1.41/#tag/Image/operation/ImageInspect):
 * the one place an image is looked up by name, id or name@digest.
 * @ret_info: on success the parsed answer (an object), for the caller to json_object_put();
 * untouched on error.
 * Return: 0, -ENOENT (no such image; @err says so), or -errno (the engine could not answer).
 */
int engine_image_inspect(const struct engine_conn *c, const char *ref, json_object **ret_info,
                         struct sbx_error *err);

/**
 * engine_image_label() - the value of label @key on image @ref into @ret ("" when absent).
 * Return: 0, -ENOENT (no such image), or -errno.
 */
int engine_image_label(const struct engine_conn *c, const char *ref, const char *key, char *ret,
                       size_t size, struct sbx_error *err);

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
/** engine_setup_import_with_env() - the same, reading DOCKER_* etc. through @getenv_fn (NULL:
 * from @cfg->engine_env, as engine_setup_import()). */
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

/* ---------------------------------------------------------------------------------------- */
/* Hand-in through volumes for a daemon that cannot see our files (volume.c)                 */

/* One entry of the host workspace as it went into the volume. */
struct engine_manifest_entry {
        char *rel; /* workspace-relative path */
        mode_t mode;
        off_t size;
        int64_t mtime_ns;
};

struct engine_manifest {
        struct engine_manifest_entry *v;
        size_t n, cap; /* entries used, room for (GREEDY_REALLOC) */
};

/** engine_manifest_done() - free what @m holds. */
void engine_manifest_done(struct engine_manifest *m);

/* What the copy-back did. */
struct engine_copyback {
        unsigned files, dirs, symlinks, deleted;
        unsigned kept;           /* of files: the host's was the same, left as it was */
        unsigned refused;        /* entries not written (see first_refusal) */
        char first_refusal[200]; /* "'name': why" of the first refused entry */
        bool capped;             /* a cap stopped it: the workspace holds part of the changes,
                                  * and nothing was deleted */
        char cap_note[240];      /* which cap, where */
};

/* Bounds on one copy-back (a run can write without limit into its workspace volume). */
struct engine_copyback_caps {
        uint64_t max_entries;    /* archive members written */
        uint64_t max_data_bytes; /* file bytes written (runs of zeros become holes, uncounted) */
        uint64_t max_tar_bytes;  /* the transfer's cap, for the note (engine_archive_get_max) */
        bool input_cut;          /* the transfer was stopped at max_tar_bytes */
};

/* Which part of the hand-in a tar holds, and where it is PUT. Docker extracts an archive PUT
 * at "/" into the volumes mounted below it, and skips a "./" entry (the volume root would keep
 * root's owner): one tar at "/" with sandbox/ and workspace/. Podman writes a PUT at "/" into
 * the container's own root, not its volumes: one tar per mount point, PUT at that path. */
enum engine_handin_part {
        ENGINE_HANDIN_BOTH,      /* sandbox/... and workspace/..., PUT at "/" (Docker) */
        ENGINE_HANDIN_CODE,      /* ./ and ./<script>, PUT at /sandbox (Podman) */
        ENGINE_HANDIN_WORKSPACE, /* ./ and the workspace, PUT at /workspace (Podman) */
};

/* The empty file that ends every code hand-in, /sandbox/ENGINE_HANDIN_GO: a warm spare on the
 * volume path starts its program once it is there (spare.h), so it is the tar's last entry and
 * Podman's code tar goes in after its workspace tar. */
#define ENGINE_HANDIN_GO "vestibule-go"

/**
 * engine_handin_tar() - write to @fd the hand-in tar (@part): the code directory (root 0755)
 * holding @script_name (root 0644, @code), and when @workspace_dir is set, a copy of that
 * folder, every entry owned by @uid:@gid (so the volume root is the run user's, as the host
 * folder is behind a bind mount). Symlinks go in as symlinks and are never followed; set-id
 * bits are dropped; sockets, fifos, devices and folders nested deeper than 128 are left out
 * (*@ret_skipped counts them; the copy-back never deletes them). With the code, the last entry
 * is the empty ENGINE_HANDIN_GO in the code directory (root 0644).
 * @ret_manifest: what went in (for engine_workspace_unpack()'s deletions); may be NULL.
 * Return: 0 or -errno with @err.
 */
int engine_handin_tar(int fd, enum engine_handin_part part, const char *script_name,
                      const char *code, size_t code_len, const char *workspace_dir, uid_t uid,
                      gid_t gid, struct engine_manifest *ret_manifest, unsigned *ret_skipped,
                      struct sbx_error *err);

/**
 * engine_workspace_unpack() - unpack the tar on @tar_fd (GET .../archive?path=/workspace/.)
 * into @workspace_dir. Names that are absolute or hold '..', entries whose folder on this
 * machine is a symlink or a file, hardlinks to anything but a file of the same tree, and
 * anything but files, folders and symlinks are refused (counted in @ret, not written); a file
 * or symlink replaces what is there by rename, never writing through a symlink. Entries of @m
 * missing from the tar and unchanged on this machine since they went in are deleted (the run
 * deleted them). With @do_chown (a server running as root) what is written belongs to
 * @uid:@gid, as the run user's writes through a bind mount would.
 * Return: 0 (refusals are in @ret), or -errno when the host cannot take the copy or the tar is
 * broken (@ret still says what was done).
 */
int engine_workspace_unpack(int tar_fd, const char *workspace_dir, const struct engine_manifest *m,
                            uid_t uid, gid_t gid, bool do_chown, struct engine_copyback *ret,
                            struct sbx_error *err);

/**
 * engine_workspace_unpack_capped() - engine_workspace_unpack() within @caps: past
 * max_entries entries or max_data_bytes of file data it stops (the file that would pass the
 * byte cap is not written), sets @ret->capped with the note, deletes nothing, and returns 0. A
 * tar that ends early because the transfer was cut (@caps->input_cut) is the same. Files keep
 * their holes: runs of zeros (4 KiB aligned) are not written. Docker's archive API has no
 * sparse entries (a truncate()d file comes as zeros), so this is where holes come back.
 */
int engine_workspace_unpack_capped(int tar_fd, const char *workspace_dir,
                                   const struct engine_manifest *m, uid_t uid, gid_t gid,
                                   bool do_chown, const struct engine_copyback_caps *caps,
                                   struct engine_copyback *ret, struct sbx_error *err);

/** engine_volume_name() - "vestibule-<kind>-<16 random hex>" into @ret. Return 0 or -errno. */
int engine_volume_name(const char *kind, char *ret, size_t size);

/** engine_volume_create() - POST /volumes/create @name labelled vestibule.run=1 and
 * vestibule.owner=@owner (the sweep removes it once @owner is gone); @driver_o: the local
 * driver's "o" option (Podman: "uid=N,gid=N" makes the volume root that user's), NULL = none.
 * Return 0 or -errno. */
int engine_volume_create(const struct engine_conn *c, const char *name, const char *owner,
                         const char *driver_o, struct sbx_error *err);

/** engine_volume_remove() - DELETE /volumes/@name (force); a missing one is fine. */
int engine_volume_remove(const struct engine_conn *c, const char *name, struct sbx_error *err);

/**
 * engine_volume_options() - a volume mount's VolumeOptions, new (the caller owns it): NoCopy (an
 * empty volume stays as filled, not taking the image directory's content and owner) and Labels
 * vestibule.run=1, vestibule.owner=@owner. Docker makes a mount's named volume that does not
 * exist at the container's create, with these labels ("VolumeOptions" of a Mount,
 * https://docs.docker.com/reference/api/engine/version/v1.41/#tag/Container/operation/ContainerCreate):
 * a volume our exit sweep removed before a late create mounted it is still found by a sweep
 * (tests/unit/test_engine_remote.c, volume_made_again_at_create_is_labelled).
 */
json_object *engine_volume_options(const char *owner);

/** engine_helper_body() - the create body of the helper container: @image, never started
 * (Cmd true, no network, no capabilities), @code_volume at /sandbox and @workspace_volume
 * (NULL = none) at /workspace, both writable, labelled like a run (plus vestibule.helper=1);
 * @keep_id: UsernsMode keep-id, as the run on rootless Podman. */
json_object *engine_helper_body(const char *image, const char *code_volume,
                                const char *workspace_volume, const char *owner, bool keep_id);

/** engine_archive_put() - PUT the tar on @fd (from offset 0) into container @id at @path. */
int engine_archive_put(const struct engine_conn *c, const char *id, const char *path, int fd,
                       struct sbx_error *err);

/** engine_archive_stat() - HEAD container @id's @path: 0 when it exists, -ENOENT when not, or
 * -errno. */
int engine_archive_stat(const struct engine_conn *c, const char *id, const char *path,
                        struct sbx_error *err);

/** engine_archive_get() - GET container @id's @path as a tar into @fd, rewound on success. */
int engine_archive_get(const struct engine_conn *c, const char *id, const char *path, int fd,
                       struct sbx_error *err);

/** engine_archive_get_max() - engine_archive_get() that stops after @max_bytes (0 = no cap):
 * then *@ret_cut is true and @fd holds the first @max_bytes (a cut tar). */
int engine_archive_get_max(const struct engine_conn *c, const char *id, const char *path, int fd,
                           uint64_t max_bytes, bool *ret_cut, struct sbx_error *err);

/**
 * engine_daemon_shares_files() - whether bind mounts of this machine's paths reach the engine's
 * containers: a unix socket (@ep) whose daemon reports this machine's host name (/info Name =
 * @our_host) and is not Docker Desktop or podman machine (/info OperatingSystem @os_name), both
 * of which run the engine in a VM seeing only shared folders. Everything else (tcp://, a
 * forwarded socket of another host) gets the volume hand-in; @why says which, for the log.
 */
bool engine_daemon_shares_files(const struct engine_endpoint *ep, const char *os_name,
                                const char *daemon_name, const char *our_host, char *why,
                                size_t why_size);

/** engine_tmpfile() - an unnamed temporary file (O_TMPFILE in /var/tmp or /tmp), or -errno. */
int engine_tmpfile(struct sbx_error *err);

struct backend;
/**
 * engine_backend_new() - a new container backend in *@ret (free with backend_free(),
 * run/backend.h); @cfg is borrowed and must outlive it. Only allocates: finding and probing the
 * engine happen in its probe() (src/engine/backend.c). Return: 0, or -errno with @err.
 */
int engine_backend_new(const struct sbx_config *cfg, struct backend **ret, struct sbx_error *err);

/**
 * engine_sweep_at_start() - at server start, in a background thread: remove the sandbox
 * containers and volumes left on the container engine by servers that are gone (killed with
 * a run in flight; vestibule.owner label names a dead process of this host), log how many
 * (info). Only for VESTIBULE_BACKEND=container (under auto the container backend's first
 * probe sweeps, so a host where native wins never maps libcurl); an unreachable engine is a
 * debug line. Never blocks, never removes a live server's containers (src/engine/sweep.c).
 */
void engine_sweep_at_start(const struct sbx_config *cfg);

/**
 * engine_backend_new_with_env() - engine_backend_new() reading DOCKER_* and friends through
 * @getenv_fn (tests inject an environment; NULL: from @cfg->engine_env, as
 * engine_backend_new()). Return 0 or -errno.
 */
int engine_backend_new_with_env(const struct sbx_config *cfg, engine_getenv_fn getenv_fn,
                                struct backend **ret, struct sbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* The egress allowlist's way out of a network-none container (egress_listen.c,               */
/* docs/design/egress.md "container backend")                                                 */

/* The proxy's unix socket in the run's code folder (so /sandbox/ENGINE_EGRESS_SOCK inside). */
#define ENGINE_EGRESS_SOCK ".egress.sock"
#define ENGINE_EGRESS_SOCK_IN "/sandbox/" ENGINE_EGRESS_SOCK

struct egress_session;
/**
 * engine_egress_begin() - the egress allowlist of one run on a local engine: a listening unix
 * socket at "@code_dir/ENGINE_EGRESS_SOCK" (egress_listen_unix(): mode 0666 inside the run's
 * private folder) and the run's proxy on it (egress_session_start(), same thread as the
 * egress_session_finish() that ends it). Call it before the container starts; its relay
 * reaches the socket at ENGINE_EGRESS_SOCK_IN. Nothing enters the container's namespaces.
 * Return: 0 and *@ret, or -errno with @err naming what failed (the socket is removed again;
 * the caller removes the container unrun and the run is Blocked:).
 */
int engine_egress_begin(const char *code_dir, const struct sbx_config *cfg,
                        struct egress_session **ret, struct sbx_error *err);

/** engine_egress_end() - remove the socket engine_egress_begin() made in @code_dir (NULL: none);
 * errors are ignored. Call it after egress_session_finish(). */
void engine_egress_end(const char *code_dir);

/**
 * engine_egress_wait_bridge_script() - a bash script, for `bash -c SCRIPT NAME _ _ ARGV...` (the
 * two ignored arguments stand where egress_relay_wait_script() takes the relays), for an
 * allowlist container on a remote engine (egress_stream.c): it starts no relay (the server's
 * exec starts the bridge once the container runs) and waits until 127.0.0.1:@port listens in
 * its own network namespace (/proc/net/tcp, proc(5)), then execs ARGV. Nothing listening
 * within 10 s: status 125 and a line on stderr, before ARGV runs. Written into @buf (@size
 * bytes; 640 suffice). Return: @buf.
 */
const char *engine_egress_wait_bridge_script(uint16_t port, char *buf, size_t size);

/**
 * engine_egress_bridge() - the source of the bridge that the server's exec runs inside an
 * allowlist container on a remote engine (egress_stream.c): it listens on 127.0.0.1:@port and
 * carries each connection as frames on its stdout and stdin (type, connection id and length as
 * u32 big-endian, payload: egress_frames.h), deciding nothing; stdin's end resets every
 * connection, stops the listener and exits 3. @lang: "python3" (for `python3 -I -c`) or "node"
 * (for `node -e`). Written into @buf (@size bytes; 3072 suffice). Return: 0; -EINVAL for another
 * @lang; -ENOSPC when @buf is too small.
 */
int engine_egress_bridge(const char *lang, uint16_t port, char *buf, size_t size);

struct engine_egress_stream;
/**
 * engine_egress_stream_proxy() - the egress allowlist of one run on a remote engine (the volume
 * path; docs/design/egress.md "on a remote engine"), part 1, before the container starts: the
 * run's proxy (egress_session_start(), same thread as the egress_session_finish() that ends
 * it) on a unix socket in a new private folder of this machine (/tmp/vestibule-egress-XXXXXX,
 * 0700). Return: 0 with *@ret (end it with engine_egress_stream_end()) and *@ret_proxy (the
 * caller finishes it), or -errno with @err (nothing left over: the run is Blocked:).
 */
int engine_egress_stream_proxy(const struct sbx_config *cfg, struct engine_egress_stream **ret,
                               struct egress_session **ret_proxy, struct sbx_error *err);

/**
 * engine_egress_stream_attach() - part 2, once container @id runs: one exec in it as another uid
 * than @code_uid (65534, or 65533 when the code is 65534) running the bridge (the image's
 * `python3 -I`, else its `node`: engine_egress_bridge()), which listens on 127.0.0.1:EGRESS_PORT
 * there, its stdin and stdout hijacked (Engine API POST /exec/{id}/start, Upgrade: tcp) and carried
 * by a thread of @s that connects every connection the bridge announces to the run's proxy and
 * nothing else. @c is borrowed for the call. Return: 0, or -errno with @err (the caller kills the
 * run: fail closed).
 */
int engine_egress_stream_attach(struct engine_egress_stream *s, const struct engine_conn *c,
                                const char *id, uid_t code_uid, struct sbx_error *err);

/** engine_egress_stream_end() - stop the thread, close the stream (the bridge then stops
 * listening and exits) and every connection, remove the private folder, free @s. Accepts
 * NULL. Return: NULL. Call it before egress_session_finish() of the run's proxy. */
struct engine_egress_stream *engine_egress_stream_end(struct engine_egress_stream *s);

/* json-c cleanup helper (docs/design/style.md: library helpers live in the module using the
 * library). */
static inline void json_putp(json_object **o)
{
        if (*o)
                json_object_put(*o);
}
