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
 * Return: 0 with *@ret (and @ret_fds) filled, or -errno with @err (nothing is left open).
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
 * https://docs.docker.com/engine/api/v1.41/#tag/Exec/operation/ExecStart
 * Return: 0 with *@ret and the FIFO's path (NUL-terminated, < 96 bytes, checked:
 * [A-Za-z0-9./_-]) in @ret_path, or -errno with @err (nothing is left open).
 */
int engine_cells_lifeline_open(const struct engine_conn *c, const char *id, uid_t uid,
                               struct engine_cells_lifeline **ret, char ret_path[96],
                               struct sbx_error *err);

/** engine_cells_lifeline_close() - close the lifeline's connection (the exec then ends); NULL
 * is fine. */
void engine_cells_lifeline_close(struct engine_cells_lifeline *l);

/** engine_cells_attach_close() - stop the relay, close the connection (the engine then closes
 * the container's stdin: StdinOnce) and the relay's pipe ends; NULL is fine. */
void engine_cells_attach_close(struct engine_cells_attach *a);
