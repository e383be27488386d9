/* hold.c - a run's hold on its rootfs tree, and setup's side of it: delete an old tree only
 * when no run holds it (see hold.h for the protocol). */
#include "rootfs/hold.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "rootfs/tree.h"

/* flock() that retries when a signal interrupts the wait. */
static int flock_retry(int fd, int op)
{
        int r;

        do
                r = flock(fd, op);
        while (r < 0 && errno == EINTR);
        return r < 0 ? -errno : 0;
}

int setup_rootfs_hold(const char *rootfs_dir, const char *tree, struct setup_rootfs_hold *ret,
                      struct sbx_error *err)
{
        _cleanup_close_ int dfd = -1, swap_fd = -1, tree_fd = -1;
        int r;

        dfd = open(rootfs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return sbx_fail(err, errno,
                                "cannot open the rootfs folder '%s': %s; run `vestibule-mcp "
                                "setup`",
                                rootfs_dir, strerror(errno));
        swap_fd = openat(dfd, SETUP_SWAP_LOCK, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (swap_fd < 0 && errno != ENOENT)
                return sbx_fail(err, errno, "cannot open '%s/" SETUP_SWAP_LOCK "': %s", rootfs_dir,
                                strerror(errno));
        if (swap_fd >= 0) {
                r = flock_retry(swap_fd, LOCK_SH);
                if (r < 0)
                        return sbx_fail(err, -r, "cannot lock '%s/" SETUP_SWAP_LOCK "': %s",
                                        rootfs_dir, strerror(-r));
        }
        /* a tree may be the user's symlink to a rootfs elsewhere (the mount follows it too):
         * the lock is on the directory the run mounts */
        tree_fd = openat(dfd, tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tree_fd < 0)
                return sbx_fail(err, errno,
                                "cannot open the rootfs '%s/%s': %s; run `vestibule-mcp setup`",
                                rootfs_dir, tree, strerror(errno));
        r = flock_retry(tree_fd, LOCK_SH);
        if (r < 0)
                return sbx_fail(err, -r, "cannot lock the rootfs '%s/%s': %s", rootfs_dir, tree,
                                strerror(-r));
        *ret = (struct setup_rootfs_hold){
            .tree_fd = TAKE_FD(tree_fd),
            .swap_fd = TAKE_FD(swap_fd),
            .active = true,
        };
        return 0;
}

void setup_rootfs_settled(struct setup_rootfs_hold *h)
{
        if (!h->active || h->swap_fd < 0)
                return;
        close(h->swap_fd); /* closing drops the flock */
        h->swap_fd = -1;
}

void setup_rootfs_release(struct setup_rootfs_hold *h)
{
        if (!h->active)
                return;
        setup_rootfs_settled(h);
        if (h->tree_fd >= 0)
                close(h->tree_fd);
        h->tree_fd = -1;
        h->active = false;
}

int setup_remove_unheld(int dfd, const char *name)
{
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

        if (fd < 0 && errno == ENOENT)
                return 0;
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0)
                return errno == EWOULDBLOCK ? -EBUSY : -errno;
        /* not a directory (a stray file): nothing can hold it */
        return setup_remove_tree(dfd, name);
}

int setup_rootfs_collect(const char *rootfs_dir)
{
        _cleanup_close_ int dfd = open(rootfs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int lockfd = -1;
        _cleanup_strv_free_ char **names = NULL;
        int removed = 0;

        if (dfd < 0)
                return -errno;
        /* a setup working here collects by itself */
        lockfd = openat(dfd, ".setup.lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (lockfd >= 0 && flock(lockfd, LOCK_EX | LOCK_NB) < 0)
                return 0;
        ssize_t n = sbx_dir_names(dfd, ".", &names);
        if (n < 0)
                return (int)n;
        for (ssize_t i = 0; i < n; i++) {
                int r;

                if (!strstr(names[i], ".old-"))
                        continue;
                r = setup_remove_unheld(dfd, names[i]);
                if (r == 0)
                        removed++;
                else if (r != -EBUSY)
                        log_debug("cannot remove the old rootfs '%s/%s': %s", rootfs_dir, names[i],
                                  strerror(-r));
        }
        return removed;
}
