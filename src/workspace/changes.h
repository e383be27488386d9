/* changes.h - what a run created or changed in the workspace folder, and the images among
 * them, seen from the host: a snapshot of every regular file's (size, mtime, ctime, inode)
 * before the run, another after, and the difference.
 *
 * The walk never follows a symlink: each directory is opened relative to its parent's fd with
 * O_NOFOLLOW|O_DIRECTORY (openat(2)), so code that swaps a folder for a symlink during the
 * walk makes that folder unreadable, never the walk leave the workspace. It does not recurse
 * on the stack, stops at a depth and an entry cap, and says so. Images are told from their
 * first bytes (PNG, JPEG, GIF, WebP signatures), never from their names, and read through
 * workspace_open() (sbx_chase(), common/chase.h, with no symlink followed).
 *
 * Two runs in flight at once share the workspace: a file one of them wrote can show up in
 * the other's list. The list says "changed in the workspace during this run", nothing more.
 * docs/design/results.md describes how the lists and images reach the result. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Deeper folders are not walked; the snapshot says it is incomplete. */
#define WS_SNAPSHOT_MAX_DEPTH 32

struct ws_entry {
        char *path; /* relative to the workspace, '/'-separated; owned */
        uint64_t size;
        int64_t mtime_ns, ctime_ns;
        uint64_t ino, dev;
};

struct ws_snapshot {
        struct ws_entry *v; /* sorted by path (strcmp) */
        size_t n;
        bool incomplete; /* the entry cap or the depth cap was hit, or a folder was unreadable */
        char why[160];   /* when incomplete: which cap or folder, for the result note */
};

/**
 * ws_snapshot_take() - record every regular file beneath @dir (symlinks, devices, fifos and
 * sockets are skipped and never opened).
 * @max_entries: stop after this many directory entries seen (files and folders together);
 *               the snapshot is then marked incomplete.
 * @ret: filled; release with ws_snapshot_done(). On failure it is empty.
 * Return: 0 (also for an incomplete snapshot), or -errno when @dir itself cannot be opened
 * (-ENOENT, -ENOTDIR, -ELOOP for a symlink), with @err naming the folder.
 */
int ws_snapshot_take(const char *dir, size_t max_entries, struct ws_snapshot *ret,
                     struct sbx_error *err);

/** ws_snapshot_done() - free what @s holds; @s is left empty. NULL-safe. */
void ws_snapshot_done(struct ws_snapshot *s);

enum ws_change_kind {
        WS_NEW = 0, /* not in the snapshot before */
        WS_CHANGED, /* size, mtime, ctime or inode differ */
};

struct ws_change {
        char *path; /* owned */
        uint64_t bytes;
        enum ws_change_kind kind;
};

struct ws_changes {
        struct ws_change *v; /* in path order, at most the @max_list given to ws_changes_diff() */
        size_t n;
        size_t more; /* changed files beyond the listed ones */
};

/**
 * ws_changes_diff() - the regular files of @after that are new or changed against @before.
 * Deleted files are not listed. @max_list caps the list; the rest are counted in ->more.
 * @ret: filled; release with ws_changes_done(). Never fails.
 */
void ws_changes_diff(const struct ws_snapshot *before, const struct ws_snapshot *after,
                     size_t max_list, struct ws_changes *ret);

/** ws_changes_done() - free what @c holds; NULL-safe. */
void ws_changes_done(struct ws_changes *c);

/** ws_change_kind_name() - "new" or "changed". Static string. */
const char *ws_change_kind_name(enum ws_change_kind k);

/**
 * ws_sniff_image() - the MIME type of an image from its first bytes: "image/png",
 * "image/jpeg", "image/gif", "image/webp", or NULL when @buf (@n bytes) starts with none of
 * their signatures (PNG spec 5.2; JFIF SOI FF D8 FF; GIF87a/GIF89a; RIFF....WEBP).
 * Static string.
 */
const char *ws_sniff_image(const unsigned char *buf, size_t n);

/**
 * ws_image_size() - the width and height in pixels an image declares in its header, from @n
 * bytes of it at @buf (a PNG's IHDR, PNG spec 11.2.2; a GIF's logical screen, GIF89a 18; a
 * JPEG's first start-of-frame segment, ITU T.81 B.2.2, anywhere in @buf; a WebP's VP8, VP8L
 * or VP8X header, RFC 9649). What decoding would make of the rest is not checked.
 * Return: 0 with *@ret_w and *@ret_h set, or -EBADMSG when @buf is none of these or its header
 * is cut short or malformed.
 */
int ws_image_size(const unsigned char *buf, size_t n, uint32_t *ret_w, uint32_t *ret_h);

/**
 * ws_sniff_file() - ws_sniff_image() over the first bytes of the regular file @rel beneath
 * @dir, opened as ws_read_file() does (no symlink followed).
 * @ret_size: the file's size (0 when it cannot be opened).
 * Return: the image MIME type (static string), or NULL: not an image, or not readable.
 */
const char *ws_sniff_file(const char *dir, const char *rel, uint64_t *ret_size);

/**
 * ws_read_file() - read the regular file @rel beneath @dir when it is at most @max_bytes long,
 * without following any symlink (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or the
 * O_NOFOLLOW walk on kernels without openat2).
 * @ret_data: new buffer of *@ret_len bytes (caller frees). @ret_size: the file's size, also
 * when it is too large.
 * Return: 0; -EFBIG when the file is larger than @max_bytes (nothing read); -ELOOP for a
 * symlink anywhere on the path; -EINVAL when it is not a regular file; another -errno from
 * open or read; @err names the path (escaped) and what to do.
 */
int ws_read_file(const char *dir, const char *rel, size_t max_bytes, unsigned char **ret_data,
                 size_t *ret_len, uint64_t *ret_size, struct sbx_error *err);
