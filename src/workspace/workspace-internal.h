/* workspace-internal.h - the two ways workspace_read() opens a path beneath the workspace,
 * exposed for the unit tests (so the fallback walk is tested on a kernel that has openat2). */
#pragma once

#include "common/error.h"

/* Called with the relative path as given: @shown is its escaped form for messages. */

/**
 * workspace_open_openat2() - open @rel beneath @root_fd with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), O_RDONLY|O_NONBLOCK|O_NOFOLLOW.
 * Return: a new fd, or -ENOSYS (no openat2: use the walk) or another -errno with @err.
 */
int workspace_open_openat2(int root_fd, const char *rel, struct sbx_error *err);

/**
 * workspace_open_walk() - the same by hand, one component at a time: each directory opened
 * with O_NOFOLLOW|O_DIRECTORY relative to the one before, ".." pops back to the previous fd
 * (and refuses to leave @root_fd), the last component opened O_NOFOLLOW|O_NONBLOCK.
 * Return: a new fd, or -errno with @err (-ELOOP symlink, -EXDEV escape, -ENOENT, -ENOTDIR).
 */
int workspace_open_walk(int root_fd, const char *rel, struct sbx_error *err);
