/* hold.h - a run's hold on the rootfs tree it uses, so `vestibule-mcp setup` never deletes a tree
 * under a live sandbox.
 *
 * setup replaces VESTIBULE_ROOTFS_DIR/<language>/ by swapping a new tree in (renameat2
 * RENAME_EXCHANGE); the old tree keeps existing under another name. A running native sandbox
 * has that old tree bind-mounted as its /, so deleting it would remove files under the run. The
 * protocol, all with flock(2) on files of the rootfs folder:
 *
 *   a run (native backend, warm spares)          setup (install.c)
 *   -----------------------------------          ------------------
 *   LOCK_SH  .swap.lock                          LOCK_EX .swap.lock   (waits for the few ms a
 *   open <language>/, LOCK_SH on it                                    run needs to mount)
 *   spawn: the tree is bind-mounted              open <language>/ (the old tree)
 *   unlock .swap.lock  (setup_rootfs_settled)    renameat2 RENAME_EXCHANGE; unlock .swap.lock
 *   ... the run ...                              LOCK_EX|LOCK_NB on the old tree:
 *   close the tree fd   (setup_rootfs_release)     got it: nobody runs on it, delete it now
 *                                                  busy: rename it .<language>.old-XXXXXX and
 *                                                  leave it; the next setup (or
 *                                                  setup_rootfs_collect(), which the MCP
 *                                                  server calls when it starts) deletes it
 *                                                  once no run holds it
 *
 * Holding .swap.lock shared from opening the tree until it is mounted makes "the tree the run
 * locked" and "the tree the run mounted" the same one: no swap can happen in between. The lock
 * is shared, so runs never wait for each other; setup's exclusive lock waits at most for runs
 * being spawned. .swap.lock is created by setup (mode 0644): a rootfs folder that setup never
 * touched has none, and a run then holds the tree only (nothing can swap it but setup, which
 * creates the file before it unpacks anything).
 *
 * flock(2) locks belong to the open file description: every fd here is O_CLOEXEC, and the
 * native sandbox's child closes every inherited fd, so no sandboxed process ever holds one.
 */
#pragma once

#include <stdbool.h>

#include "common/error.h"

/* A run's hold: release with setup_rootfs_release() (accepts a zeroed or released one). */
struct setup_rootfs_hold {
        int tree_fd; /* the tree, LOCK_SH; -1 when none */
        int swap_fd; /* .swap.lock, LOCK_SH until setup_rootfs_settled(); -1 when none */
        bool active; /* the fds above are valid (a zeroed struct holds nothing) */
};

/* The lock file in the rootfs folder (see above). */
#define SETUP_SWAP_LOCK ".swap.lock"

/**
 * setup_rootfs_hold() - take a hold on @rootfs_dir/@tree (e.g. "python") before the run mounts
 * it: .swap.lock shared (when it exists; blocks only while a setup swaps), then the tree opened
 * (no symlink followed in its last component) and locked shared.
 * @ret: filled on success; release it with setup_rootfs_release().
 * Return: 0, or -errno with @err (-ENOENT when the tree is missing: run setup).
 */
int setup_rootfs_hold(const char *rootfs_dir, const char *tree, struct setup_rootfs_hold *ret,
                      struct sbx_error *err);

/** setup_rootfs_settled() - the tree is mounted (or was never): let setups swap again. Keeps
 * the hold on the tree. Idempotent. */
void setup_rootfs_settled(struct setup_rootfs_hold *h);

/** setup_rootfs_release() - the run is over: drop the hold (and .swap.lock if still held).
 * Accepts a zeroed or already released hold. */
void setup_rootfs_release(struct setup_rootfs_hold *h);

/**
 * setup_rootfs_collect() - delete the old trees (.<language>.old-*) that setup left in
 * @rootfs_dir because a run held them, those that no run holds any more (LOCK_EX|LOCK_NB on
 * each). Best effort: what is held or cannot be removed stays for the next call.
 * Return: the number of trees removed, or -errno when @rootfs_dir cannot be read.
 */
int setup_rootfs_collect(const char *rootfs_dir);

/**
 * setup_remove_unheld() - setup_remove_tree(@dfd, @name) unless a run holds that tree
 * (above): takes LOCK_EX|LOCK_NB on it first. Missing is fine.
 * Return: 0, -EBUSY when a run holds it (it stays), or -errno.
 */
int setup_remove_unheld(int dfd, const char *name);
