/* tree.h - removing a rootfs tree (or any tree a run or an unpack left) beneath a directory fd:
 * no symlink followed, no mount point crossed. Used by setup (a replaced or half-unpacked
 * tree), the rootfs hold (an old tree no run holds), verify (its scratch folders) and the
 * engine's copy-back (a folder the run replaced by a file). */
#pragma once

/**
 * setup_remove_tree() - delete @name under @dirfd recursively without following symlinks and
 * without crossing into other filesystems, making directories writable first (sandboxed code
 * and tarballs can leave 0500 directories). Missing is fine.
 * Return: 0 or -errno: -EXDEV at a mount point, -ELOOP below 256 levels of folders (what lies
 * deeper is left in place).
 */
int setup_remove_tree(int dirfd, const char *name);
