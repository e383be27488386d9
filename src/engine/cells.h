/* cells.h - the container backend's sessions (SANDBOX_MODE_CELLS, src/run/sandbox.h) beneath
 * its sandbox lifecycle: backend.c makes the session's container like a one-shot run's and calls
 * these steps (check, new, cmd, launch; start, kill, alive, interrupt, collect; free) with a
 * view of the sandbox; cells.c names nothing of backend.c. Private to src/engine; see
 * docs/design/sessions.md ("The container backend"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "config/config.h"
#include "engine/engine.h"
#include "run/run.h"
#include "run/sandbox.h"

struct engine_cells;

/* What cells.c reads of one container sandbox, filled by backend.c at each call; every pointer
 * is borrowed from the sandbox and valid until its destroy. */
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
};

/**
 * engine_cells_check() - right after the engine's state is known: can the engine of @v serve a
 * session? Every engine can now (its FIFOs, or the attach connection on the volume path).
 * Return 0 (kept for a refusal to come, with @err holding the Blocked: text naming the fix).
 */
int engine_cells_check(const struct engine_sb_view *v, struct sbx_error *err);

/**
 * engine_cells_new() - after the code folder exists: the runner's source and the five FIFOs
 * (cells, status, out, err, life) in @v's code folder, owned by the run's ids ("life" stays the
 * server's, read-only to others, when the server is root: the code cannot write it); the
 * backstop (VESTIBULE_SESSION_IDLE_S + VESTIBULE_MAX_TIMEOUT_S + 10 s) from @v->cfg. On the volume
 * path (@v->volumes) no file here: a random mark for the supervisor's records and the lifeline
 * exec's uid instead (the runner goes in with the hand-in, backend.c). *@ret freed by
 * engine_cells_free(). Return 0 or -errno with @err.
 */
int engine_cells_new(const struct engine_sb_view *v, struct engine_cells **ret,
                     struct sbx_error *err);

/**
 * engine_cells_cmd() - the container's command for a session, run as its pid 1 (no init): a bash
 * supervisor (by absolute path, ENGINE_BASH_PATH) that opens the FIFOs as the runner's fds 4, 5,
 * 1 and 2, starts the runner (sbx_runner_argv(), its interpreter named @interp:
 * engine_interp_for()) and ends the container when the lifeline ends or no cell came within the
 * backstop (cells.c, cells_wrapper). Fills @cmd (NULL-terminated, at most @max entries with the
 * NULL); the strings are static, @interp or @c's.
 */
void engine_cells_cmd(const struct engine_cells *c, enum sbx_language l, const char *interp,
                      const char **cmd, size_t max);

/**
 * engine_cells_launch() - after the container is created and checked: open our ends of the
 * FIFOs (the volume path: the attach connection, engine_cells_attach_open()), start the container
 * (engine_container_start()), wait (bounded) for the runner's "ready" record, find the runner's
 * host pid for the interrupt (the volume path: start the lifeline exec,
 * engine_cells_attach_lifeline(), instead). Return 0 or -errno with @err.
 */
int engine_cells_launch(const struct engine_sb_view *v, struct engine_cells *c,
                        struct sbx_error *err);

/**
 * engine_cells_start() - start() of a session: hand @req's cell to the runner (its checks:
 * sbx_runner_check_cell()) and fill *@ret_io with the output FIFOs and the status FIFO as the
 * end. Return 0; -ESRCH with @err when the runner is gone (or the cell cannot be handed in:
 * the session is killed); another -errno from the cell's checks.
 */
int engine_cells_start(const struct engine_sb_view *v, struct engine_cells *c,
                       const struct run_request *req, struct sandbox_io *ret_io,
                       struct sbx_error *err);

/** engine_cells_kill() - the session is over: mark it dead and, the first time, kill its
 * container (engine_container_kill()). Any thread. */
void engine_cells_kill(const struct engine_sb_view *v, struct engine_cells *c);

/** engine_cells_alive() - not killed, and the runner still runs (its pidfd, else the status
 * FIFO's hang-up: poll(2)). */
bool engine_cells_alive(struct engine_cells *c);

/** engine_cells_interrupt() - SIGINT to the runner's process group from this host, or through
 * the engine's kill API (signal=INT) when the runner is not seen from here. */
void engine_cells_interrupt(const struct engine_sb_view *v, struct engine_cells *c);

/**
 * engine_cells_collect() - collect() of a session's cell into @res: the cell's status record
 * (exit code, interrupted), the usage of this call (CPU since the last call, the session's
 * peaks), OOM when the runner died of it (the session is then killed). The workspace, notes
 * and grade are the lifecycle's (backend.c).
 */
void engine_cells_collect(const struct engine_sb_view *v, struct engine_cells *c,
                          const struct sandbox_watch *w, struct run_result *res);

/** engine_cells_free() - close our FIFO ends and remove the files; NULL is fine. */
void engine_cells_free(struct engine_cells *c);
