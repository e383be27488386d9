/* service.h - the run service: everything between a tool call and a backend. It validates a
 * request against the settings, refuses to run code as root, takes a concurrency slot (waiting
 * up to 5 s), picks the backend (ladder.c), writes the audit records, and returns the result.
 * Both the MCP server and `vestibule-mcp run` call it, so both take exactly the same path. */
#pragma once

#include "common/error.h"
#include "config/config.h"
#include "run/backend.h"
#include "run/run.h"

struct run_service;

/* The Blocked: text (without the prefix) for a server started as root with no unprivileged
 * VESTIBULE_RUN_AS. The run service refuses every call with it; doctor and verify say the same. */
#define RUN_SERVICE_ROOT_BLOCKED                                                                   \
        "the server runs as root, so code would run as root: start vestibule-mcp as your own "     \
        "user, or set VESTIBULE_RUN_AS=uid:gid to an unprivileged id (retry after restart)"

/**
 * run_service_new() - build the service for the server's life.
 * @cfg: borrowed; must outlive the service. An invalid config is accepted: every call is
 *       then refused with cfg->invalid_msg.
 * Return: 0 and *@ret, or -errno with @err (nothing here fails on a bad host: backends that
 * cannot work are found when the first call probes them).
 */
int run_service_new(const struct sbx_config *cfg, struct run_service **ret, struct sbx_error *err);

/**
 * run_service_new_with() - run_service_new() with the ladder's backend constructors given
 * (NULL = the real ones; see ladder_new()): tests drive the service over backend doubles.
 */
int run_service_new_with(const struct sbx_config *cfg, backend_ctor_fn native,
                         backend_ctor_fn container, struct run_service **ret,
                         struct sbx_error *err);

/** run_service_free() - shut every backend down (killing runs in flight) and free. NULL ok. */
struct run_service *run_service_free(struct run_service *s);

/** run_service_shutdown() - kill every run in flight now (SIGTERM/EOF path). Thread-safe. */
void run_service_shutdown(struct run_service *s);

/* A run_code call as the tool receives it, before validation. */
struct run_call {
        const char *language; /* as given; validated here */
        const char *code;
        size_t code_len;
        long long timeout_s; /* <= 0: not given -> cfg->default_timeout_s */
        int cancel_fd;       /* -1 = not cancellable */
        run_progress_fn progress;
        void *progress_userdata;
        const char *network; /* "none" (default, also NULL) or "allowlist"; validated here */
        const char *session; /* a handle from run_service_session_start(), or NULL: a fresh
                                sandbox for this call */
};

/**
 * run_service_execute() - validate, audit, run and fill @res.
 * Return: 0 with @res filled (its text made by run_result_format()), or a negative errno with
 * @err->msg holding the text of the Blocked: reply (without the "Blocked: " prefix): an
 * invalid setting, root without VESTIBULE_RUN_AS, bad arguments (-EINVAL: these are the
 * caller's fault, shown as a tool error), no free slot after 5 s (-EBUSY), no usable backend.
 */
int run_service_execute(struct run_service *s, const struct run_call *call, struct run_result *res,
                        struct sbx_error *err);

/* A started session, as session_start shows it. */
struct run_session_started {
        char id[48];          /* the handle: opaque, unguessable, valid in this process only */
        char isolation[320];  /* the grade its sandbox has */
        char audit_note[256]; /* "" = recorded */
};

/**
 * run_service_session_start() - a new session (docs/design/sessions.md): one live sandbox of
 * @language ("python"|"node"|"bash") whose interpreter keeps its state across calls, kept
 * until run_service_session_end(), VESTIBULE_SESSION_IDLE_S without a call, or server exit.
 * Return: 0 with @ret; or -errno with @err holding the Blocked: text: -EUSERS at
 * VESTIBULE_MAX_SESSIONS, -EOPNOTSUPP on a backend without sessions, or what preparing the
 * sandbox said.
 */
int run_service_session_start(struct run_service *s, const char *language,
                              struct run_session_started *ret, struct sbx_error *err);

/**
 * run_service_session_end() - end session @id now; *@ret_calls gets how many calls it ran.
 * Return: 0, -ENOENT (@err says why: ended, expired, another server's, not a handle), -EBUSY
 * (a call runs in it).
 */
int run_service_session_end(struct run_service *s, const char *id, unsigned long long *ret_calls,
                            struct sbx_error *err);

/* A workspace file as read_workspace shows it (docs/design/results.md). Strings owned. */
struct run_ws_file {
        char *text;     /* the file's text, escaped; "" for an empty or a binary file */
        uint64_t bytes; /* the file's size */
        uint64_t bytes_shown;
        bool binary;     /* NUL bytes or invalid UTF-8: not shown */
        char *truncated; /* "N of M bytes not shown", or NULL */
        char *note;      /* "empty file", "binary file, N bytes: not shown", or NULL */
        /* A binary file of at most VESTIBULE_MAX_IMAGE_BYTES: its bytes, for image content
         * (@mime set: told from the bytes) or an embedded resource; NULL otherwise. */
        unsigned char *blob;
        size_t blob_len;
        const char *mime;
};

/**
 * run_service_read_workspace_file() - read_workspace's work: resolve @path beneath the
 * workspace with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) and describe what it holds.
 * Return: 0 and @ret filled (free with run_ws_file_done()), or -errno and @err.
 */
int run_service_read_workspace_file(struct run_service *s, const char *path,
                                    struct run_ws_file *ret, struct sbx_error *err);

/** run_ws_file_done() - free what @f holds; @f itself is not freed. NULL ok. */
void run_ws_file_done(struct run_ws_file *f);

/** run_ws_file_text() - @f as the text block shows it: the text, then "[truncated: ...]"; or
 * the note. A new string; the caller frees it. */
char *run_ws_file_text(const struct run_ws_file *f);

/**
 * run_service_read_workspace() - read_workspace's work: resolve @path beneath the workspace
 * with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) and return its text.
 * Return: 0 and a new string in *@ret_text (caller frees), or -errno and @err.
 */
int run_service_read_workspace(struct run_service *s, const char *path, char **ret_text,
                               struct sbx_error *err);

/** run_service_config() - the config the service was built with. */
const struct sbx_config *run_service_config(struct run_service *s);
