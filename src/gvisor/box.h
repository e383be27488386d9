/* box.h - one gvisor sandbox's folder and runsc, for the session ops (cells.c); the one-shot
 * lifecycle steps in backend.c use the same box. Internal to src/gvisor. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"
#include "run/backend.h"

struct gvisor_box;

/**
 * gvisor_box_open() - a new box for @language on @b (borrowed; must outlive the box): the
 * probe's answer checked (usable, not shutting down), the folder /tmp/vestibule-gvisor-XXXXXX
 * (code, bundle, state), the rootfs tree held. @host_fifo: runsc will run with
 * --host-fifo=open (runsc.h). Free with gvisor_box_free().
 * Return: 0 with *@ret set; -ESTALE when the probe's isolation cannot be had, -ESHUTDOWN, or
 * another -errno, each with @err.
 */
int gvisor_box_open(struct backend *b, enum sbx_language language, bool host_fifo,
                    struct gvisor_box **ret, struct sbx_error *err);

/** gvisor_box_code_dir() - the host folder seen read-only at /sandbox (borrowed). */
const char *gvisor_box_code_dir(const struct gvisor_box *x);
/**
 * gvisor_box_chan() - the box's channel folder (made on the first call, 0700): bound
 * read-write at /sandbox/chan by gvisor_box_run() (spec.h). *@ret: borrowed.
 * Return: 0, or -errno with @err.
 */
int gvisor_box_chan(struct gvisor_box *x, const char **ret, struct sbx_error *err);
/** gvisor_box_grade() - the probe's isolation grade at open (borrowed). */
const char *gvisor_box_grade(const struct gvisor_box *x);
/** gvisor_box_rootfs() - the rootfs tree's path (borrowed). */
const char *gvisor_box_rootfs(const struct gvisor_box *x);

/**
 * gvisor_box_write() - @len bytes of @data as the new file @name (0444) in the code folder,
 * and sitecustomize.py beside it when @with_site. Return: 0, or -errno with @err.
 */
int gvisor_box_write(struct gvisor_box *x, const char *name, const char *data, size_t len,
                     bool with_site, struct sbx_error *err);

/**
 * gvisor_box_run() - config.json for @argv (NULL-ended, borrowed), then runsc started.
 * *@ret_out and *@ret_err: read ends of the program's stdout and stderr (the box's: closed by
 * gvisor_box_free()); *@ret_pidfd: runsc's pidfd (readable once it exited) or -1.
 * Return: 0, or -errno with @err.
 */
int gvisor_box_run(struct gvisor_box *x, const char *const *argv, int *ret_out, int *ret_err,
                   int *ret_pidfd, struct sbx_error *err);

/** gvisor_box_kill() - SIGKILL runsc's group and every process of the box's state folder
 *  (gvisor_runsc_kill()); any thread, any time, idempotent. */
void gvisor_box_kill(struct gvisor_box *x);

/** gvisor_box_free() - kill, reap, remove the folder, release the tree; accepts NULL. */
void gvisor_box_free(struct gvisor_box *x);

/** gvisor_cells_ops - the session ops (cells.c), for backend_ops.cells. */
extern const struct sandbox_ops gvisor_cells_ops;

/**
 * gvisor_owner_write() - "@dir.owner" (0644, made new: O_EXCL, no link followed) beside the box's
 * folder @dir (/tmp/vestibule-gvisor-XXXXXX, < 80 bytes), holding this server's owner label
 * (common/owner.h), so that the next server's gvisor_sweep_dirs() removes @dir when this server
 * died without doing it. Return: 0, or -errno with @err.
 */
int gvisor_owner_write(const char *dir, struct sbx_error *err);

/** gvisor_owner_remove() - unlink "@dir.owner" (after @dir itself is gone); missing is fine. */
void gvisor_owner_remove(const char *dir);

/**
 * gvisor_sweep_dirs() - remove the /tmp/vestibule-gvisor-XXXXXX folders of servers of this host
 * that are gone (their "<folder>.owner" names a dead process): first SIGKILL every process still
 * naming the folder's state folder (gvisor_runsc_kill(); waits up to 2 s for them to go), then
 * the folder (setup_remove_tree(): no link followed, no mount crossed), then the owner file. A
 * folder whose processes or files this user cannot remove (another user's) is left, with its
 * owner file. Called by the backend's first probe. Return: how many folders were removed.
 */
unsigned gvisor_sweep_dirs(void);
