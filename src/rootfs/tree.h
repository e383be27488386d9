/* tree.h - removing a rootfs tree (or any tree a run or an unpack left) beneath a directory fd:
 * no symlink followed, no mount point crossed. Used by setup (a replaced or half-unpacked
 * tree), the rootfs hold (an old tree no run holds), verify (its scratch folders) and the
 * engine's copy-back (a folder the run replaced by a file). */
#pragma once

#include "common/error.h"

/**
 * setup_remove_tree() - delete @name under @dirfd recursively without following symlinks and
 * without crossing into other filesystems, making directories writable first (sandboxed code
 * and tarballs can leave 0500 directories). Missing is fine.
 * Return: 0 or -errno: -EXDEV at a mount point, -ELOOP below 256 levels of folders (what lies
 * deeper is left in place).
 */
int setup_remove_tree(int dirfd, const char *name);

/**
 * rootfs_check_tree() - whether the rootfs tree @rootfs (an absolute folder, e.g.
 * VESTIBULE_ROOTFS_DIR/python) is whole enough to run @exe (a program name, e.g. "python3"):
 * the folders a sandbox mounts over (tmp, proc, dev, workspace, sandbox) and @exe in
 * usr/local/bin, usr/bin or bin. Nothing is followed or changed. Used by the native and the
 * gvisor backends' probes and runs; the layout is what `vestibule-mcp setup` unpacks
 * (docs/design/rootfs.md).
 * Return: 0, or -ENOENT with @err naming the missing piece and `vestibule-mcp setup` as the fix.
 */
int rootfs_check_tree(const char *rootfs, const char *exe, struct sbx_error *err);
