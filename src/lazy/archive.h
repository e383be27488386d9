/* lazy/archive.h - libarchive (libarchive.so.13, Debian package libarchive13), loaded on
 * first use.
 *
 * Include this instead of <archive.h> / <archive_entry.h>. Only setup unpacks (and the tests
 * write) tar archives; a server never maps libarchive nor what it drags in (libxml2, ICU,
 * libstdc++, nettle, acl, lzma ...). Call lazy_archive_load() before the first archive_*
 * call (setup does at the start of an unpack); when it is missing the error says
 * "libarchive13 is not installed ...: apt-get install libarchive13". See lazy/lazy.h. */
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include "common/error.h"

/* Every libarchive function the code calls; add a name here when a new one is needed. */
#define LAZY_ARCHIVE_SYMBOLS(X)                                                                    \
        X(archive_entry_copy_hardlink)                                                             \
        X(archive_entry_copy_pathname)                                                             \
        X(archive_entry_filetype)                                                                  \
        X(archive_entry_free)                                                                      \
        X(archive_entry_gid)                                                                       \
        X(archive_entry_hardlink)                                                                  \
        X(archive_entry_mode)                                                                      \
        X(archive_entry_mtime)                                                                     \
        X(archive_entry_new)                                                                       \
        X(archive_entry_pathname)                                                                  \
        X(archive_entry_perm)                                                                      \
        X(archive_entry_set_fflags)                                                                \
        X(archive_entry_set_filetype)                                                              \
        X(archive_entry_set_gid)                                                                   \
        X(archive_entry_set_hardlink)                                                              \
        X(archive_entry_set_mode)                                                                  \
        X(archive_entry_set_mtime)                                                                 \
        X(archive_entry_set_pathname)                                                              \
        X(archive_entry_set_perm)                                                                  \
        X(archive_entry_set_rdev)                                                                  \
        X(archive_entry_set_size)                                                                  \
        X(archive_entry_set_symlink)                                                               \
        X(archive_entry_set_uid)                                                                   \
        X(archive_entry_set_uname)                                                                 \
        X(archive_entry_size)                                                                      \
        X(archive_entry_symlink)                                                                   \
        X(archive_entry_uid)                                                                       \
        X(archive_entry_xattr_clear)                                                               \
        X(archive_errno)                                                                           \
        X(archive_error_string)                                                                    \
        X(archive_read_data)                                                                       \
        X(archive_read_data_block)                                                                 \
        X(archive_read_free)                                                                       \
        X(archive_read_new)                                                                        \
        X(archive_read_next_header)                                                                \
        X(archive_read_open)                                                                       \
        X(archive_read_open_fd)                                                                    \
        X(archive_read_support_filter_bzip2)                                                       \
        X(archive_read_support_filter_gzip)                                                        \
        X(archive_read_support_filter_none)                                                        \
        X(archive_read_support_filter_xz)                                                          \
        X(archive_read_support_filter_zstd)                                                        \
        X(archive_read_support_format_tar)                                                         \
        X(archive_set_error)                                                                       \
        X(archive_write_add_filter_gzip)                                                           \
        X(archive_write_close)                                                                     \
        X(archive_write_data)                                                                      \
        X(archive_write_data_block)                                                                \
        X(archive_write_disk_new)                                                                  \
        X(archive_write_disk_set_options)                                                          \
        X(archive_write_finish_entry)                                                              \
        X(archive_write_free)                                                                      \
        X(archive_write_header)                                                                    \
        X(archive_write_new)                                                                       \
        X(archive_write_open2)                                                                     \
        X(archive_write_open_fd)                                                                   \
        X(archive_write_open_filename)                                                             \
        X(archive_write_set_bytes_in_last_block)                                                   \
        X(archive_write_set_format_pax_restricted)

struct lazy_archive_table {
/* NOLINTNEXTLINE(bugprone-macro-parentheses): a declarator cannot be parenthesised */
#define LAZY_FIELD_(name) __typeof__(&name) name;
        LAZY_ARCHIVE_SYMBOLS(LAZY_FIELD_)
#undef LAZY_FIELD_
};

/**
 * lazy_archive_load() - load libarchive.so.13 and resolve every name above, once per process.
 * Thread-safe; cheap after the first call.
 * Return: 0, or -ENOENT (libarchive13 not installed) / -ENOSYS (a build without one of the
 * functions), with @err naming the package to install.
 */
int lazy_archive_load(struct sbx_error *err);

/** lazy_archive() - the resolved table; loads first, aborts if that fails (see lazy.h). */
const struct lazy_archive_table *lazy_archive(void);

#ifndef LAZY_ARCHIVE_IMPL
#define archive_entry_copy_hardlink (lazy_archive()->archive_entry_copy_hardlink)
#define archive_entry_copy_pathname (lazy_archive()->archive_entry_copy_pathname)
#define archive_entry_filetype (lazy_archive()->archive_entry_filetype)
#define archive_entry_free (lazy_archive()->archive_entry_free)
#define archive_entry_hardlink (lazy_archive()->archive_entry_hardlink)
#define archive_entry_new (lazy_archive()->archive_entry_new)
#define archive_entry_pathname (lazy_archive()->archive_entry_pathname)
#define archive_entry_perm (lazy_archive()->archive_entry_perm)
#define archive_entry_set_fflags (lazy_archive()->archive_entry_set_fflags)
#define archive_entry_set_filetype (lazy_archive()->archive_entry_set_filetype)
#define archive_entry_set_gid (lazy_archive()->archive_entry_set_gid)
#define archive_entry_set_hardlink (lazy_archive()->archive_entry_set_hardlink)
#define archive_entry_set_mtime (lazy_archive()->archive_entry_set_mtime)
#define archive_entry_set_pathname (lazy_archive()->archive_entry_set_pathname)
#define archive_entry_set_perm (lazy_archive()->archive_entry_set_perm)
#define archive_entry_set_rdev (lazy_archive()->archive_entry_set_rdev)
#define archive_entry_set_size (lazy_archive()->archive_entry_set_size)
#define archive_entry_set_symlink (lazy_archive()->archive_entry_set_symlink)
#define archive_entry_set_uid (lazy_archive()->archive_entry_set_uid)
#define archive_entry_set_uname (lazy_archive()->archive_entry_set_uname)
#define archive_entry_size (lazy_archive()->archive_entry_size)
#define archive_entry_xattr_clear (lazy_archive()->archive_entry_xattr_clear)
#define archive_error_string (lazy_archive()->archive_error_string)
#define archive_read_data_block (lazy_archive()->archive_read_data_block)
#define archive_read_free (lazy_archive()->archive_read_free)
#define archive_read_new (lazy_archive()->archive_read_new)
#define archive_read_next_header (lazy_archive()->archive_read_next_header)
#define archive_read_open (lazy_archive()->archive_read_open)
#define archive_read_support_filter_bzip2 (lazy_archive()->archive_read_support_filter_bzip2)
#define archive_read_support_filter_gzip (lazy_archive()->archive_read_support_filter_gzip)
#define archive_read_support_filter_none (lazy_archive()->archive_read_support_filter_none)
#define archive_read_support_filter_xz (lazy_archive()->archive_read_support_filter_xz)
#define archive_read_support_filter_zstd (lazy_archive()->archive_read_support_filter_zstd)
#define archive_read_support_format_tar (lazy_archive()->archive_read_support_format_tar)
#define archive_set_error (lazy_archive()->archive_set_error)
#define archive_write_add_filter_gzip (lazy_archive()->archive_write_add_filter_gzip)
#define archive_write_close (lazy_archive()->archive_write_close)
#define archive_write_data (lazy_archive()->archive_write_data)
#define archive_write_data_block (lazy_archive()->archive_write_data_block)
#define archive_write_disk_new (lazy_archive()->archive_write_disk_new)
#define archive_write_disk_set_options (lazy_archive()->archive_write_disk_set_options)
#define archive_write_finish_entry (lazy_archive()->archive_write_finish_entry)
#define archive_write_free (lazy_archive()->archive_write_free)
#define archive_write_header (lazy_archive()->archive_write_header)
#define archive_write_new (lazy_archive()->archive_write_new)
#define archive_write_open_filename (lazy_archive()->archive_write_open_filename)
#define archive_write_set_format_pax_restricted                                                    \
        (lazy_archive()->archive_write_set_format_pax_restricted)
#define archive_entry_gid (lazy_archive()->archive_entry_gid)
#define archive_entry_mode (lazy_archive()->archive_entry_mode)
#define archive_entry_mtime (lazy_archive()->archive_entry_mtime)
#define archive_entry_set_mode (lazy_archive()->archive_entry_set_mode)
#define archive_entry_symlink (lazy_archive()->archive_entry_symlink)
#define archive_entry_uid (lazy_archive()->archive_entry_uid)
#define archive_errno (lazy_archive()->archive_errno)
#define archive_read_data (lazy_archive()->archive_read_data)
#define archive_read_open_fd (lazy_archive()->archive_read_open_fd)
#define archive_write_open2 (lazy_archive()->archive_write_open2)
#define archive_write_open_fd (lazy_archive()->archive_write_open_fd)
#define archive_write_set_bytes_in_last_block                                                      \
        (lazy_archive()->archive_write_set_bytes_in_last_block)

/* Cleanup helpers for _cleanup_() (src/common/cleanup.h): free the handle unless NULL. */
static inline void archive_read_freep(struct archive **a)
{
        if (*a)
                archive_read_free(*a);
}

static inline void archive_write_freep(struct archive **a)
{
        if (*a)
                archive_write_free(*a);
}

static inline void archive_entry_freep(struct archive_entry **e)
{
        if (*e)
                archive_entry_free(*e);
}
#endif
