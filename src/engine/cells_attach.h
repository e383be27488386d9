/* cells_attach.h - a container session's hijacked connections (Engine API "Hijacking"). On the
 * volume path, its one attach connection: cells go in on the container's stdin, the cell's
 * stdout, stderr and the supervisor's status records come back on its stdout and stderr
 * (cellstream.c); a relay thread turns it into three local pipes (out, err, status) and one
 * pipe for cells, so cells.c and the warden see what they see on a local engine. And the
 * lifeline exec's connection (another uid's FIFO, held while the server lives). Private to
 * src/engine; see docs/design/sessions.md ("Sessions on the volume path"). */
#pragma once

#include <sys/types.h>

#include "common/error.h"
#include "engine/engine.h"

struct engine_cells_attach;

/* The local ends the relay hands over: read ends of out, err and status; the write end cells
 * go into (all O_CLOEXEC; the caller owns and closes them). */
struct engine_cells_attach_fds {
        int out_r, err_r, status_r, cells_w;
};

/**
 * engine_cells_attach_open() - before the container's start: POST /containers/{@id}/attach
 * ?stream=1&stdin=1&stdout=1&stderr=1 with "Upgrade: tcp" (101, or 200 from an engine that
 * answers so), then a relay thread: bytes written to @ret_fds->cells_w go to the container's
 * stdin; the stream is parsed with @mark (engine_cellstream_init()) into the out, err and
 * status pipes (a record goes into status as "<record>\n" after every byte before it went into
 * out and err). When the stream ends, or breaks ("broken" goes into status: not a record), the
 * three write ends close (status reads POLLHUP). The connection is the session's lifeline: it
 * lives until engine_cells_attach_close(). Source: Docker Engine API v1.41, ContainerAttach,
 * https://docs.docker.com/engine/api/v1.41/#tag/Container/operation/ContainerAttach
 * @c, @id:   the engine and the container's id; borrowed for the call.
 * @mark:     the session's mark, as engine_cellstream_init() takes it (copied).
 * @ret:      on success the relay, owned by the caller: engine_cells_attach_close().
 * @ret_fds:  on success four pipe ends (pipe(7)), the caller's to close: out_r, err_r and
 *            status_r O_NONBLOCK; status_r gives lines of at most ENGINE_CELLSTREAM_REC_MAX
 *            bytes plus '
'. cells_w blocks; the relay sends what it reads there, waiting up
 *            to 5 s for room on the connection, else the stream ends. The relay writes into
 *            the three pipes with blocking writes, in the stream's order; a pipe whose read end
 *            is closed drops the rest of its stream (the relay ignores SIGPIPE).
 * Untouched on error. Return: 0 with *@ret (and @ret_fds) filled, or -errno with @err
 * (nothing is left open): pipe2(2)/fcntl(2)'s (-EMFILE), engine_hijack()'s -ECONNREFUSED (the
 * engine cannot be reached), -EIO (the request could not be sent), -ETIMEDOUT (no answer's head
 * within 10 s), -EPROTO (the connection closed, an answer over 4 KiB, or not 101/200: @err
 * quotes it), or pthread_create(3)'s (-EAGAIN).
 */
int engine_cells_attach_open(const struct engine_conn *c, const char *id, const char *mark,
                             struct engine_cells_attach **ret,
                             struct engine_cells_attach_fds *ret_fds, struct sbx_error *err);

struct engine_cells_lifeline;

/**
 * engine_cells_lifeline_open() - after the runner's "ready": an exec in container @id as @uid
 * (not the code's: the code can neither signal it, nor open its fds through /proc, nor write
 * its FIFO) that makes a FIFO "/tmp/.vestibule-life.XXXXXX/l" (0644, in a 0711 folder), holds
 * it open for both and prints its path; its stdin is a hijacked connection kept open in *@ret
 * until engine_cells_lifeline_close(): when the server goes, the engine closes it, the exec
 * ends and the FIFO has no writer left, which the session's supervisor sees (cells.c). Used on
 * the volume path and by a server that is not root on a local engine. Source: Docker Engine API
 * v1.41, ExecStart ("Hijacking"),
 * https://docs.docker.com/engine/api/v1.41/#tag/Exec/operation/ExecStart (and ContainerExec,
 * #tag/Exec/operation/ContainerExec, for the exec it creates; mkfifo(1), fifo(7)).
 * @c, @id: the engine and the container's id; borrowed for the call.
 * @uid:    the exec's user, as "UID:UID" (gid = @uid too).
 * @ret:    on success the held connection, owned by the caller: engine_cells_lifeline_close().
 * Untouched on error. Return: 0 with *@ret and the FIFO's path (NUL-terminated, < 96 bytes,
 * checked: "/tmp/.vestibule-life.<X>/l" of [A-Za-z0-9./_-]) in @ret_path, or -errno with @err
 * (nothing is left open): engine_exec_create()'s (the engine's refusal, 30 s at most; -EPROTO
 * for an exec id that is not hex), engine_exec_hijack()'s -ECONNREFUSED / -EIO / -ETIMEDOUT
 * (10 s) / -EPROTO, or -EPROTO when the exec did not print its FIFO's path within 10 s (@err
 * names `vestibule-mcp doctor`).
 */
int engine_cells_lifeline_open(const struct engine_conn *c, const char *id, uid_t uid,
                               struct engine_cells_lifeline **ret, char ret_path[96],
                               struct sbx_error *err);

/**
 * engine_cells_lifeline_close() - close the lifeline's connection and free @l (the engine then
 * closes the exec's stdin, its `cat` ends and the FIFO has no writer left; the FIFO's folder
 * stays in the container's /tmp, which goes with the container). NULL is fine. No errors.
 */
void engine_cells_lifeline_close(struct engine_cells_lifeline *l);

/**
 * engine_cells_attach_close() - stop the relay (a byte on its stop pipe, then pthread_join(3)),
 * close the connection (the engine then closes the container's stdin: StdinOnce), close the
 * relay's own pipe ends and free @a; the caller's ends (engine_cells_attach_fds) stay the
 * caller's. NULL is fine. No errors. Blocks until the relay thread ends: a relay blocked
 * writing into a full pipe whose read end the caller holds ends only when that pipe is read
 * or closed.
 */
void engine_cells_attach_close(struct engine_cells_attach *a);
