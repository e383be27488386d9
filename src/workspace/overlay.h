/* overlay.h - the changes `vestibule-mcp run --overlay` left in an overlayfs upper folder, read
 * from the host after the run, and their application to the real folder (--apply).
 *
 * The upper folder was written by the sandboxed command, so every byte of it is hostile: the
 * walk opens each folder relative to its parent with O_NOFOLLOW|O_DIRECTORY and never follows a
 * symlink; the real folder is reached only through sbx_chase_parent() with
 * SBX_CHASE_NO_SYMLINKS (common/chase.h), so a symlink already in the real folder, or one the
 * apply itself made, is never walked through. What applying does with each kind of entry:
 *  - regular file: its bytes copied into a new file beside the target, then renamed over the
 *    name (a hard link the real name shares with a file elsewhere is never written through);
 *    mode & 0777 only (no setuid, setgid, sticky); xattrs not copied;
 *  - folder: made (0755 & its mode); an opaque one (the command replaced a folder) first has
 *    the real one removed;
 *  - whiteout (a 0/0 character device, or a deleted name): the real name removed, a folder
 *    with what it holds;
 *  - symlink: made only when its target is relative and stays inside the folder by name;
 *    an absolute target, or one climbing out, is refused;
 *  - fifo, socket, any other device, a redirect or metacopy xattr: refused;
 *  - a name the host runs (the secrets list's "keep" names: .git, .envrc, .vscode) anywhere on
 *    the path: refused.
 * A refused entry is listed with its reason and left out; the rest is applied.
 * Source: Documentation/filesystems/overlayfs.rst (whiteouts, opaque folders, userxattr). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* The walk stops past this many entries or this depth (the list says it is incomplete, and
 * --apply then applies nothing). */
#define WS_OVL_MAX_ENTRIES 100000
#define WS_OVL_MAX_DEPTH 64

enum ws_ovl_kind {
        WS_OVL_ADDED = 0, /* not in the real folder */
        WS_OVL_CHANGED,   /* a file or symlink that replaces one of the same type */
        WS_OVL_REPLACED,  /* a different type, or an opaque folder, over a real entry */
        WS_OVL_DELETED,   /* a whiteout */
        WS_OVL_REFUSED,   /* listed, never applied: ->why says why */
};

struct ws_ovl_entry {
        char *path; /* relative to the folder, '/'-separated, raw bytes (may hold '\n'); owned */
        char type;  /* 'f' file, 'd' folder, 'l' symlink, 'w' whiteout, '?' other */
        enum ws_ovl_kind kind;
        uint64_t bytes;  /* a file's size */
        const char *why; /* REFUSED: a static phrase */
};

struct ws_ovl_list {
        struct ws_ovl_entry *v; /* parents before what they hold */
        size_t n;
        bool incomplete; /* a cap was hit or a folder of the upper layer was unreadable */
};

/**
 * ws_overlay_changes() - what the upper folder @upper holds against the real folder @real.
 * A folder the command only passed through (copied up, not opaque, a folder in @real too) is
 * not listed; what it holds is.
 * @keep: fnmatch(3) patterns of names never applied (the secrets list's "keep"), NULL-ended;
 *        may be NULL.
 * @ret:  filled; release with ws_overlay_list_done().
 * Return: 0, or -errno when @upper or @real cannot be opened (@err names it).
 */
int ws_overlay_changes(const char *upper, const char *real, const char *const *keep,
                       struct ws_ovl_list *ret, struct sbx_error *err);

/**
 * ws_overlay_apply() - apply @l (from ws_overlay_changes() on the same @upper and @real) to
 * @real, entry by entry, as the file comment says; REFUSED entries are skipped.
 * @ret_applied: how many entries were applied.
 * Return: 0 when every entry that was not refused was applied; -EAGAIN when @l is incomplete
 * (nothing applied); else the first -errno, after which the rest is still tried (@err names
 * the first path that failed, escaped).
 */
int ws_overlay_apply(const char *upper, const char *real, const struct ws_ovl_list *l,
                     size_t *ret_applied, struct sbx_error *err);

/** ws_overlay_list_done() - free what @l holds; NULL-safe. */
void ws_overlay_list_done(struct ws_ovl_list *l);

/**
 * ws_overlay_remove() - remove @dir and everything beneath it, symlinks never followed, folders
 * made writable first (overlayfs leaves its work folder mode 0). Best effort.
 * Return: 0, or the first -errno.
 */
int ws_overlay_remove(const char *dir);

/** ws_ovl_kind_name() - "added", "changed", "replaced", "deleted", "refused". Static. */
const char *ws_ovl_kind_name(enum ws_ovl_kind k);
