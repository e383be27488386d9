/* fileio.h - listing a directory's names, and reading a small file whole into the caller's
 * buffer: the one-line values of
 * procfs, sysfs and cgroupfs (proc(5), cgroups(7)) and markers such
 * as a rootfs's /etc/vestibule/variant. sbx_read_small_file() calls only open(2), read(2) and
 * close(2): no allocation, so it is safe between fork and exec too. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

enum {
        /* O_NOFOLLOW | O_NONBLOCK: the last component may not be a symlink and a fifo does
         * not block (for files in trees that others write). */
        SBX_READ_NOFOLLOW = 1 << 0,
        /* Keep only the first line, without its '\n'. */
        SBX_READ_FIRST_LINE = 1 << 1,
        /* A file longer than the buffer is not an error: its first @size - 1 bytes are kept. */
        SBX_READ_PREFIX = 1 << 2,
};

/**
 * sbx_read_small_file() - read @path (relative to @dir_fd, or AT_FDCWD) into @buf.
 * @flags: SBX_READ_* above.
 * @buf:   the caller's; @size >= 2 bytes. On success NUL-terminated; on error "".
 * Return: the bytes kept (without the NUL), or a negative errno: what open(2) or read(2)
 * says, -EFBIG when the file holds more than @size - 1 bytes (without SBX_READ_PREFIX),
 * -EINVAL for @size < 2. Reads until end of file, as a proc file may come in several reads
 * (proc(5): seq_file); EINTR is retried.
 */
ssize_t sbx_read_small_file(int dir_fd, const char *path, unsigned flags, char *buf, size_t size);

/**
 * sbx_dir_names() - the names in the directory @dir_fd, "." and ".." left out, in readdir(3)
 * order, read in full before the caller changes anything (removing while reading may hide
 * entries from readdir).
 * @dir_fd:     an open directory (O_PATH is enough: it is reopened); borrowed.
 * @prefix:     NULL, or keep only names that start with it.
 * @ret_names:  on success a NULL-terminated array (free with strv_freep(), common/cleanup.h);
 *              untouched on error.
 * Return: the number of names, or a negative errno from openat(2)/fdopendir(3)/readdir(3).
 */
ssize_t sbx_dir_names(int dir_fd, const char *prefix, char ***ret_names);
