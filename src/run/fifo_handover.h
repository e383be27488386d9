/* fifo_handover.h - handing a warm spare its program through the FIFO its interpreter is
 * blocked opening (src/run/fifo_handover.c). Shared by the backends whose spare's /sandbox is a
 * host folder: the container backend (src/engine/spare.c) and the gvisor backend
 * (src/gvisor/spare.c). The design: docs/design/lifecycle.md, "Container spares". */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "config/config.h"

/**
 * sbx_fifo_handover() - hand @len bytes of @code to the interpreter blocked opening the FIFO
 * @fifo (an absolute host path in the run's own code folder): open it O_WRONLY|O_NONBLOCK
 * (ENXIO while no reader holds it: retried every 2 ms for up to @ready_ms, an interpreter still
 * starting), put a regular file with the same code in its place (written as @fifo's folder's
 * ".next-<name>", then rename(2)): whatever opens the name later (tracebacks, node's
 * readFileSync(__filename)) reads the code; mode 0644 when @shared else 0600, given to
 * @uid:@gid when this process is root and @uid is not 0. Then the code is written into the
 * pipe (its buffer raised to @len with F_SETPIPE_SZ past 64 KiB), waiting for room until
 * @deadline_ms (sbx_now_ms() clock), and closed: EOF ends the program text. SIGPIPE is held in
 * the calling thread (a reader that went away is -EPIPE, fifo(7), never a signal).
 * Return: 0; -ENXIO (no reader: the spare is dead), -EPIPE, -ETIMEDOUT, or another -errno, each
 * with @err.
 */
int sbx_fifo_handover(const char *fifo, const char *code, size_t len, uid_t uid, gid_t gid,
                      bool shared, unsigned ready_ms, uint64_t deadline_ms, struct sbx_error *err);

/**
 * sbx_workspace_user_site() - whether @cfg's workspace holds a Python user site
 * (.local/lib/python*\/site-packages: PYTHONUSERBASE=/workspace/.local, src/egress's
 * environment, is where pip installs). Python's site module adds it to sys.path only when it
 * exists as the interpreter starts (docs.python.org/3/library/site.html), so a spare started
 * before it appeared (or went) is stale.
 */
bool sbx_workspace_user_site(const struct sbx_config *cfg);
