/* config.h - the settings: VESTIBULE_* environment variables over an optional YAML file,
 * read once at start into a validated struct sbx_config. The only module that calls getenv.
 *
 * An invalid value never stops the server: config_load() still returns a usable struct with
 * defaults and sets @invalid, and every tool call is then answered Blocked: with @invalid_msg
 * (the setting's name, the bad value and the fix). Nothing runs while it is set, the audit
 * directory included. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

enum sbx_backend_choice {
        SBX_BACKEND_AUTO = 0,
        SBX_BACKEND_NATIVE,
        SBX_BACKEND_CONTAINER,
        SBX_BACKEND_NAIVE,  /* development only: no isolation, reported as isolation: none */
        SBX_BACKEND_GVISOR, /* runsc, rootless: gVisor's Sentry between the code and the kernel */
};

enum sbx_runtime_choice {
        SBX_RUNTIME_AUTO = 0, /* Docker, then Podman */
        SBX_RUNTIME_DOCKER,
        SBX_RUNTIME_PODMAN,
};

enum sbx_image_source {
        SBX_IMAGE_SOURCE_REGISTRY = 0, /* pinned digests pulled by setup */
        SBX_IMAGE_SOURCE_DEBIAN,       /* built from Debian packages with mmdebstrap */
};

/* Where the container engine is, as the docker and podman CLIs read it from the environment
 * (not VESTIBULE_* settings: kept as given, unvalidated; src/engine/endpoint.c interprets
 * them). NULL = unset or blank. Owned by the struct. */
struct sbx_engine_env {
        char *docker_host;       /* DOCKER_HOST */
        char *docker_context;    /* DOCKER_CONTEXT */
        char *docker_config;     /* DOCKER_CONFIG */
        char *docker_tls_verify; /* DOCKER_TLS_VERIFY */
        char *docker_cert_path;  /* DOCKER_CERT_PATH */
        char *container_host;    /* CONTAINER_HOST (Podman) */
        char *home;              /* HOME, else the password database's home (getpwuid_r) */
        char *xdg_runtime_dir;   /* XDG_RUNTIME_DIR as given (NULL: not passed) */
        char *user_bus_address;  /* DBUS_SESSION_BUS_ADDRESS as given (native: the user bus) */
};

/* The egress allowlist settings, parsed (docs/design/egress.md). */
struct sbx_egress_rule {
        char *name;  /* lower case, no trailing dot; owned */
        bool suffix; /* written ".example.com": the name and every name under it */
};
struct sbx_egress_pin {
        char *host;    /* lower case; owned */
        char addr[46]; /* numeric IPv4 or IPv6 address (INET6_ADDRSTRLEN) */
        uint16_t port; /* 0 = the port the request asked for */
};
struct sbx_egress {
        struct sbx_egress_rule *rules; /* VESTIBULE_EGRESS_ALLOW; owned; empty = no network */
        size_t n_rules, cap_rules;     /* used, room for (GREEDY_REALLOC); the same below */
        uint16_t *ports;               /* VESTIBULE_EGRESS_PORTS, default 443,80; owned */
        size_t n_ports, cap_ports;
        struct sbx_egress_pin *pins; /* VESTIBULE_EGRESS_PIN host=addr[:port],...; owned */
        size_t n_pins, cap_pins;
        /* The raw values as given ("" when unset), for the proxy process's argv. Owned. */
        char *allow_raw, *ports_raw, *pin_raw;
};

struct sbx_config {
        /* Paths: absolute, '~' expanded, no trailing '/'. Owned by the struct. */
        char *workspace_dir; /* VESTIBULE_WORKSPACE, default ~/.vestibule/workspace */
        char *rootfs_dir;    /* VESTIBULE_ROOTFS_DIR, default ~/.vestibule/rootfs */
        char *audit_dir;     /* VESTIBULE_AUDIT_DIR, default ~/.vestibule/audit */
        char *config_file;   /* the YAML file read, or NULL when there was none */
        bool workspace_ro;   /* VESTIBULE_WORKSPACE_RO, default off */

        enum sbx_backend_choice backend; /* VESTIBULE_BACKEND auto|gvisor|native|container|naive */
        enum sbx_runtime_choice runtime; /* VESTIBULE_RUNTIME auto|docker|podman */
        enum sbx_image_source image_source; /* VESTIBULE_IMAGE_SOURCE registry|debian */
        char *image_python;                 /* VESTIBULE_IMAGE_PYTHON, default: the pinned digest */
        char *image_node;                   /* VESTIBULE_IMAGE_NODE, default: the pinned digest */
        /* VESTIBULE_CONTAINER_RUNTIME: the engine's OCI runtime for every sandbox container
         * (HostConfig.Runtime, e.g. runsc: gVisor); NULL = the engine's default. Owned. */
        char *container_runtime;

        unsigned default_timeout_s; /* VESTIBULE_DEFAULT_TIMEOUT_S, default 10 */
        unsigned max_timeout_s;     /* VESTIBULE_MAX_TIMEOUT_S, default 60 */
        size_t max_code_bytes;      /* VESTIBULE_MAX_CODE_BYTES, default 262144 */
        size_t max_output_bytes;    /* VESTIBULE_MAX_OUTPUT_BYTES per stream, default 20000 */
        unsigned mem_mb;            /* VESTIBULE_MEM_MB, default 256 (no swap on top) */
        unsigned cpu_pct;           /* VESTIBULE_CPU_PCT of one core, default 75 */
        unsigned pids_max;          /* VESTIBULE_PIDS_MAX, default 128 */
        unsigned tmpfs_mb;          /* VESTIBULE_TMPFS_MB, default 64 */
        unsigned max_concurrent;    /* VESTIBULE_MAX_CONCURRENT, default 4 */
        unsigned max_images;        /* VESTIBULE_MAX_IMAGES attached per result, default 4 */
        size_t max_image_bytes;     /* VESTIBULE_MAX_IMAGE_BYTES each, default 1 MiB */
        unsigned max_sessions;      /* VESTIBULE_MAX_SESSIONS live at once, default 4 (0: none) */
        unsigned session_idle_s;    /* VESTIBULE_SESSION_IDLE_S until an idle session ends, 900 */
        bool warm;                  /* VESTIBULE_WARM: keep a spare sandbox per language ready
                                       (docs/native.md, "Warm spares"), default on */
        unsigned warm_idle_s;       /* VESTIBULE_WARM_IDLE_S: a spare unused this long is
                                       dropped, default 300 */

        struct sbx_egress egress; /* VESTIBULE_EGRESS_ALLOW, _PORTS, _PIN */

        /* VESTIBULE_RUN_AS=uid:gid: the unprivileged id a server started as root runs code as. */
        bool run_as_set;
        uid_t run_as_uid;
        gid_t run_as_gid;

        /* VESTIBULE_LOG_LEVEL error|warning|info|debug (default info). */
        int log_level;

        /* VESTIBULE_TRACE off|timing (default off): timing makes the backends log one line per
         * sandbox phase with its duration in µs (src/common/trace.h), whatever the log level. */
        bool trace_timing;

        /* The host environment the backends read (DOCKER_HOST and friends, HOME, the runtime
         * folder and the user bus), read with the rest. */
        struct sbx_engine_env engine_env;

        /* This server runs in Vestibule's own server image (config_in_container() found the
         * image's marker, read by config_load() only): the auto ladder never picks native or
         * gvisor here, and the engine's filesystem is never taken for this process's own. */
        bool in_container;
        char in_container_marker[64]; /* the file that said so: SBX_OCI_IMAGE_MARKER */

        /* Set when any setting was invalid; then every tool call is Blocked: with this text. */
        bool invalid;
        char invalid_msg[480];
};

/* The file scripts/oci-image.sh puts into the server's OCI image, and nowhere else. */
#define SBX_OCI_IMAGE_MARKER "/usr/share/vestibule/oci-image"

/**
 * config_in_container() - whether the root filesystem @root ("/" for this process) is
 * Vestibule's own server image (issue 25: `docker run -i … vestibule-mcp` with the engine's
 * socket mounted), told by SBX_OCI_IMAGE_MARKER, which scripts/oci-image.sh writes. Any other
 * container is not meant: Docker's "/.dockerenv" and Podman's "/run/.containerenv" are in every
 * container, also in a privileged dev or CI container where the native backend works (its own
 * probe decides there), and CI's machine is one. A faked root for tests is any folder.
 * @ret_marker: @marker_size bytes for the path that matched ("" when none); may be NULL.
 * Return: true when the marker exists (any file type; lstat(2)).
 */
bool config_in_container(const char *root, char *ret_marker, size_t marker_size);

/**
 * config_load() - read the environment and the YAML file into a new config.
 * The YAML file is $VESTIBULE_CONFIG, else $XDG_CONFIG_HOME/vestibule/config.yaml (XDG default
 * ~/.config); keys are the variable names without VESTIBULE_, in lower case
 * (`mem_mb: 512`). The environment wins over the file. A blank value counts as unset.
 * Numbers: positive whole decimal numbers; on/off: 1/true/yes/on, 0/false/no/off.
 * @ret: on success a new config freed with config_free(); check ->invalid.
 * Return: 0. Only an unusable home directory for defaults is an error: -ENOENT with @err.
 */
int config_load(struct sbx_config **ret, struct sbx_error *err);

/**
 * config_load_from() - like config_load(), but reading variables through @getenv_fn and the
 * YAML text in @yaml_text (may be NULL). For tests: no process environment is read.
 */
int config_load_from(const char *(*getenv_fn)(const char *name), const char *yaml_text,
                     struct sbx_config **ret, struct sbx_error *err);

/**
 * config_engine_env_fill() - read DOCKER_HOST, DOCKER_CONTEXT, DOCKER_CONFIG,
 * DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, CONTAINER_HOST, HOME, XDG_RUNTIME_DIR and
 * DBUS_SESSION_BUS_ADDRESS through @getenv_fn into @ret (blank counts as unset). A missing or
 * relative HOME is taken from the password database (getpwuid_r(3)), as the docker CLI and
 * Podman do; the runtime folder and the user bus are left NULL when not passed: their
 * consumers derive them from /run/user/UID with the checks of common/rundir.h. Every variable
 * and what happens without it: docs/design/environment.md. Free with config_engine_env_done().
 */
void config_engine_env_fill(const char *(*getenv_fn)(const char *name), struct sbx_engine_env *ret);

/** config_engine_env_done() - free what @e holds. */
void config_engine_env_done(struct sbx_engine_env *e);

/**
 * config_is_setting() - @var names a setting this version reads (VESTIBULE_BACKEND, ...,
 * VESTIBULE_CONFIG). For `install-client --env`, which refuses a misspelt name rather than
 * write a setting the server would silently ignore.
 */
bool config_is_setting(const char *var);

/**
 * config_process_getenv() - the process environment (secure_getenv: nothing from it in a
 * set-id process), for callers that pass an environment function to config_load_from() or
 * config_engine_env_fill() (setup, tests). Only src/config reads the environment.
 */
const char *config_process_getenv(const char *name);

/**
 * config_egress_parse() - parse the three egress settings' values into @ret (any may be NULL
 * or "" = unset). ALLOW: names or ".suffix" patterns, IP literals allowed, separated by ',' or
 * spaces. PORTS: numbers 1..65535 (default 443,80). PIN: host=addr or host=addr:port
 * ("[v6]:port"), each host also allowed by ALLOW. The server (config_load) and the proxy
 * process both parse with it. Free with config_egress_done().
 * Return: 0, or -EINVAL with @err naming the setting, the bad item and the fix.
 */
int config_egress_parse(const char *allow, const char *ports, const char *pin,
                        struct sbx_egress *ret, struct sbx_error *err);

/** config_egress_done() - free what @e holds; @e itself is not freed. */
void config_egress_done(struct sbx_egress *e);

/**
 * config_egress_allows() - @host (lower case, no trailing dot) matches a rule of @e: an exact
 * name, or ".suffix" = the suffix's own name or any name ending in ".suffix".
 */
bool config_egress_allows(const struct sbx_egress *e, const char *host);

/** config_egress_pin() - the pin for @host, or NULL. */
const struct sbx_egress_pin *config_egress_pin(const struct sbx_egress *e, const char *host);

/** config_free() - free @c and all it owns. Accepts NULL; returns NULL. */
struct sbx_config *config_free(struct sbx_config *c);

/** config_backend_name() / config_runtime_name() - the setting's spelling of the choice. */
const char *config_backend_name(enum sbx_backend_choice b);
const char *config_runtime_name(enum sbx_runtime_choice r);
