/* workspace.h - the workspace folder on the host: created on first use, and read_workspace's
 * jailed reads (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or a per-component
 * O_NOFOLLOW walk where openat2 is missing: absolute paths, ".." escapes and every symlink
 * are refused). openat2(2), Linux 5.6. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/** workspace_ensure() - mkdir -p @dir (0700 for what it creates). Return 0 or -errno. */
int workspace_ensure(const char *dir, struct sbx_error *err);

/**
 * workspace_read() - read the regular file @rel (relative, beneath @dir) up to @cap bytes.
 * @ret_data: new buffer (caller frees), NUL-terminated after *@ret_len bytes.
 * @ret_total: the file's full size; *@ret_binary: true when it is not text (NUL bytes or
 * invalid UTF-8), so the caller says so instead of dumping bytes.
 * Return: 0, or -EINVAL (absolute path, empty), -EXDEV (escapes via ".."), -ELOOP (a symlink),
 * -ENOENT, -EISDIR / -EINVAL (not a regular file); @err names the path and the fix.
 */
int workspace_read(const char *dir, const char *rel, size_t cap, char **ret_data, size_t *ret_len,
                   size_t *ret_total, bool *ret_binary, struct sbx_error *err);
