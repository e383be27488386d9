/* sandbox_int.h - what the container backend's session cells (cells.c) share with its sandbox
 * lifecycle (backend.c): the steps cells.c reuses, a read-only view of a prepared sandbox, and
 * the hooks backend.c calls for a sandbox of mode SANDBOX_MODE_CELLS. Private to src/engine;
 * see docs/design/sessions.md ("The container backend"). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "engine/engine.h"
#include "run/backend.h"
#include "run/run.h"
#include "run/sandbox.h"

struct engine_cells;

/* What cells.c reads of one container sandbox; every pointer is borrowed from the sandbox and
 * valid until destroy. */
struct engine_sb_view {
        const struct engine_conn *conn;
        const struct sbx_config *cfg;
        enum sbx_language language;
        const char *id;        /* the container's id once created, else NULL */
        const char *code_dir;  /* the host folder bind-mounted read-only at /sandbox, or NULL */
        const char *cgroup;    /* the run's parent cgroup (hostcg.c), or "" */
        const char *usage_why; /* why usage is not measured when @cgroup is "" */
        const char *image;
        uid_t uid; /* the ids the code runs as (and owns the code folder as) */
        gid_t gid;
        bool podman;
        bool volumes;         /* the engine cannot see our files (hand-in volumes) */
        bool rootless_docker; /* the container's uid is a subordinate id of this host */
        uint64_t memory_bytes;
        void *cells; /* SANDBOX_MODE_CELLS: cells.c's struct engine_cells, else NULL */
};

/** engine_sb_view() - fill @ret with @sb's facts (see struct engine_sb_view). */
void engine_sb_view(struct sandbox *sb, struct engine_sb_view *ret);

/* The steps that make a SANDBOX_MODE_CELLS sandbox's runner, handed to backend.c by cells.c
 * (so that backend.c names nothing of cells.c); @c is cells.c's struct engine_cells. See the
 * engine_cells_* functions below for what each does. */
struct engine_cells_hooks {
        int (*check)(struct sandbox *sb, struct sbx_error *err);
        int (*make)(struct sandbox *sb, void **ret_c, struct sbx_error *err);
        void (*cmd)(const void *c, enum sbx_language l, const char **cmd, size_t max);
        int (*launch)(struct sandbox *sb, struct sbx_error *err);
        void (*free)(void *c);
};

/* backend.c's sandbox steps (src/run/sandbox.h for shapes and errors), reused by the cells
 * ops. engine_sb_prepare() builds one-program sandboxes (a CELLS spec is refused);
 * engine_sb_prepare_cells() builds a CELLS sandbox with @hooks (borrowed; static). */
int engine_sb_prepare(struct backend *b, const struct sandbox_spec *spec, struct sandbox **ret,
                      struct sbx_error *err);
int engine_sb_prepare_cells(struct backend *b, const struct sandbox_spec *spec,
                            const struct engine_cells_hooks *hooks, struct sandbox **ret,
                            struct sbx_error *err);

/* backend.c's backend ops (src/run/backend.h), put into the ops table by ops.c. */
int engine_probe(struct backend *b, struct backend_probe *ret, struct sbx_error *err);
void engine_shutdown(struct backend *b);
void engine_destroy(struct backend *b);
extern const struct sandbox_ops engine_sandbox_ops;

/**
 * engine_backend_make() - a container backend of @ops (ops.c's table) over @cfg (borrowed)
 * with @getenv_fn (NULL: getenv) for the engine's environment. Return 0 with *@ret (free with
 * its ops' destroy), or -errno with @err (libcurl cannot be loaded; no /proc).
 */
int engine_backend_make(const struct sbx_config *cfg, engine_getenv_fn getenv_fn,
                        const struct backend_ops *ops, struct backend **ret, struct sbx_error *err);
void engine_sb_kill(struct sandbox *sb);
void engine_sb_destroy(struct sandbox *sb);

/* backend.c: the result's isolation grade (with the limits the engine did not keep), notes. */
void collect_finish(struct sandbox *sb, struct run_result *res);

/* ---- cells.c: the steps of a SANDBOX_MODE_CELLS sandbox (handed to backend.c as hooks) ---- */

/**
 * engine_cells_check() - right after the engine's state is known: can this engine serve a
 * session? Return 0, or -EOPNOTSUPP with @err holding the Blocked: text naming the fix (a
 * remote engine, rootless Docker).
 */
int engine_cells_check(struct sandbox *sb, struct sbx_error *err);

/**
 * engine_cells_new() - after the code folder exists: the runner's source and the four FIFOs
 * (cells, status, out, err) in it, owned by the run's ids. *@ret freed by engine_cells_free().
 * Return 0 or -errno with @err.
 */
int engine_cells_new(struct sandbox *sb, struct engine_cells **ret, struct sbx_error *err);

/**
 * engine_cells_cmd() - the container's command for a session: a bash wrapper that opens the
 * FIFOs as the runner's fds 4, 5, 1 and 2, then execs the runner (sbx_runner_argv()). Fills
 * @cmd (NULL-terminated, at most @max entries with the NULL); the strings are static or @c's.
 */
void engine_cells_cmd(const struct engine_cells *c, enum sbx_language l, const char **cmd,
                      size_t max);

/**
 * engine_cells_launch() - after the container is created and checked: open our ends of the
 * FIFOs, start the container, wait (bounded) for the runner's "ready" record, find the
 * runner's host pid for the interrupt. Return 0 or -errno with @err.
 */
int engine_cells_launch(struct sandbox *sb, struct sbx_error *err);

/** engine_cells_free() - close our FIFO ends and remove the files; NULL is fine. */
void engine_cells_free(struct engine_cells *c);

/* The container backend's session ops (backend_ops.cells, in ops.c's table). */
extern const struct sandbox_ops engine_cells_ops;
