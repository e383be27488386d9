/* spare.h - what makes a container sandbox a warm spare (issue 17; docs/design/lifecycle.md,
 * "Container spares"): the program's FIFO in the bind-mounted code folder, the hand-over
 * through it, and the stamp of what the spare was built from, checked again at the hand-over.
 *
 * A spare is a run container created, verified and STARTED ahead of any call, its attach and
 * wait armed, its interpreter (`timeout ... python3 /sandbox/main.py`) blocked in open() of
 * /sandbox/<script>, which is a FIFO the server made. A call hands the code over: the FIFO's
 * name is replaced by a regular file holding the same code (so a traceback, `__file__` or a
 * second read sees the code, not a FIFO with no writer), then the code goes through the FIFO
 * the interpreter already holds, which is closed: EOF ends its program text. On an engine that
 * cannot see our files (the volume path) the spare is a bash waiting for a marker in its code
 * volume instead (engine_spare_wait_cmd()); its code and workspace go in at the call through a
 * helper made with the spare (handin.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "config/config.h"

struct engine_conn;
struct engine_xfers;
struct sbx_trace;

/* What a container spare was built from; every field must be the same at the hand-over. */
struct engine_spare_stamp {
        char settings[768];  /* engine_spare_settings() */
        char image_id[160];  /* the image the container was created from, without "sha256:" */
        char grade[320];     /* the engine's grade when prepared */
        uint64_t started_ms; /* when the container was started (sbx_now_ms()) */
};

/**
 * engine_spare_settings() - every setting a run container is built from (image, workspace
 * path and its inode, read-only, limits, the uid it runs as, the backstop's inputs) and
 * whether the workspace holds a Python user site (python adds it to sys.path only if it exists
 * when the interpreter starts: docs.python.org/3/library/site.html), as one line in @buf.
 */
void engine_spare_settings(const struct sbx_config *cfg, const char *image, char *buf, size_t size);

/**
 * engine_spare_fifo_make() - the program's FIFO "<@dir>/<@script>" (mkfifo(3)), mode 0600
 * (0644 @shared: rootless Docker, whose container uid is a subordinate id here), owned by
 * @uid:@gid when this process is root (the uid the code runs as reads it; rootless Podman's
 * keep-id maps this server's own uid to that uid already). @dir is the run's private code
 * folder (0700, @uid's). Return: 0 with the path in *@ret_path (free() it), or -errno.
 */
int engine_spare_fifo_make(const char *dir, const char *script, uid_t uid, gid_t gid, bool shared,
                           char **ret_path, struct sbx_error *err);

/**
 * engine_spare_image_id() - the id of image @ref now (GET /images/{ref}/json, "Id"), without
 * a "sha256:" prefix, into @ret. Return: 0, or -errno (-ENOENT: no such image) with @err.
 */
int engine_spare_image_id(const struct engine_conn *c, const char *ref, char *ret, size_t size,
                          struct sbx_error *err);

/**
 * engine_spare_check() - whether the spare stamped @st may run a call now: the same settings
 * (@cfg, @image), the same image id (@image_id_now: a setup re-tagged the image), the same
 * grade (@grade_now: the engine's answer now), and not older than @max_age_ms (its in-container
 * `timeout` backstop started with the container). Return: 0, or -ESTALE with @err saying what
 * changed (the caller destroys the spare unused).
 */
int engine_spare_check(const struct engine_spare_stamp *st, const struct sbx_config *cfg,
                       const char *image, const char *image_id_now, const char *grade_now,
                       uint64_t max_age_ms, struct sbx_error *err);

/**
 * engine_spare_handover() - hand @len bytes of @code to the interpreter blocked on the FIFO
 * @fifo: open it for writing (O_NONBLOCK: ENXIO while no reader has it open, retried until
 * @ready_ms from now), put a regular file with the same code (0600/0644 @shared, @uid:@gid as
 * root) in its place (rename(2)), write the code into the pipe (its buffer raised to @len when
 * more than the default: F_SETPIPE_SZ, fcntl(2)), and close it. Bounded by @deadline_ms
 * (sbx_now_ms() clock). SIGPIPE is kept from the process (blocked and consumed in this thread).
 * Return: 0; -ENXIO (no interpreter is reading: it died, or never started), -EPIPE (it went
 * away mid-way), -ETIMEDOUT, another -errno; @err names what failed.
 */
int engine_spare_handover(const char *fifo, const char *code, size_t len, uid_t uid, gid_t gid,
                          bool shared, unsigned ready_ms, uint64_t deadline_ms,
                          struct sbx_error *err);

/**
 * engine_spare_start() - right after a spare's create: stamp what it is built from (@cfg's
 * settings for @image, the engine's @grade) into @stamp, arm attach + wait on @rx (zeroed;
 * engine_xfers_arm(), container.c), start container @id (engine_container_start()): its
 * interpreter starts and blocks in open() of the FIFO. stamp->started_ms is the start's time
 * (sbx_now_ms()). Laps "arm_attach_wait" and "start" on @trace. Return: 0 or -errno with @err
 * (the caller destroys the spare).
 */
int engine_spare_start(const struct engine_conn *c, const char *id, const struct sbx_config *cfg,
                       const char *image, const char *grade, struct engine_xfers *rx,
                       struct engine_spare_stamp *stamp, struct sbx_trace *trace,
                       struct sbx_error *err);

/**
 * engine_spare_waiting() - at the hand-over: drive @rx once (what the spare printed while it
 * waited is no run's: dropped) and check its container still runs (neither attach nor wait
 * ended). Return: 0, or -ESTALE with @err (the caller destroys it unused).
 */
int engine_spare_waiting(struct engine_xfers *rx, struct sbx_error *err);

/**
 * engine_spare_wait_cmd() - a spare on the volume path (no FIFO: the engine cannot see our
 * files): the run's command @cmd (NULL-terminated, e.g. `timeout ... python3 /sandbox/main.py`)
 * is moved 5 places on, and in front goes a bash (ENGINE_BASH_PATH) that waits, up to @wait_s
 * seconds (a decimal string, borrowed), for /sandbox/ENGINE_HANDIN_GO (handin.h), then execs
 * the run's command through env(1), with the environment a cold run's program gets. A SIGWINCH
 * (engine_spare_nudge()) ends its wait at once, and it looks at least once a second in any
 * case (a signal that came before its trap was set is not lost for good). Waited too long:
 * exit 124, as timeout(1) does. @max is @cmd's room with the NULL.
 * Return: 0, or -E2BIG when the command does not fit (@cmd unchanged).
 */
int engine_spare_wait_cmd(const char **cmd, size_t max, const char *wait_s);

/**
 * engine_spare_nudge() - POST /containers/{@id}/kill?signal=WINCH (Engine API, ContainerKill):
 * the container's init (docker-init, catatonit) passes it on to the waiting bash. Return: 0,
 * or -errno with @err (409: the container does not run).
 */
int engine_spare_nudge(const struct engine_conn *c, const char *id, struct sbx_error *err);
