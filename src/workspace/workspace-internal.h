/* workspace-internal.h - how workspace_read() opens a path beneath the workspace, exposed for
 * changes.c and the unit tests (which run it through both of sbx_chase()'s paths). */
#pragma once

#include "common/error.h"

/**
 * workspace_open() - open @rel beneath @root_fd through sbx_chase() (common/chase.h) with
 * SBX_CHASE_NO_SYMLINKS, O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_NOCTTY|O_CLOEXEC: no symlink on the
 * way, the last component included, even one pointing back inside.
 * @rel:         relative; as the caller gave it (quoted, escaped, in messages).
 * @chase_flags: 0, or SBX_CHASE_WALK to test the walker on a kernel with openat2.
 * Return: a new fd (a directory for "sub/"; the caller's fstat tells), or -errno with @err:
 * -ELOOP symlink, -EXDEV escape or absolute path, -EISDIR the workspace itself, -ENOENT,
 * -ENOTDIR, -EACCES.
 */
int workspace_open(int root_fd, const char *rel, unsigned chase_flags, struct sbx_error *err);
