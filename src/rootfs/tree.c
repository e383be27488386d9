/* tree.c - see tree.h. */
#include "rootfs/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/error.h"

/* chmod the directory @name under @dfd, never through a symlink: it is opened
 * O_PATH|O_NOFOLLOW|O_DIRECTORY and changed through its /proc/self/fd link (fchmod(2) refuses
 * O_PATH fds; fchmodat(2) has no working AT_SYMLINK_NOFOLLOW before Linux 6.6's fchmodat2).
 * A directory swapped for a symlink after the fstatat() below is left alone (-ELOOP). */
static int chmod_dir_nofollow(int dfd, const char *name, mode_t mode)
{
        char proc[64];
        int fd, r = 0;

        fd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOTDIR ? -ELOOP : -errno;
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        if (chmod(proc, mode) < 0)
                r = -errno;
        close(fd);
        return r;
}

/* Folders nested deeper than this are left in place (-ELOOP): each level is a stack frame and
 * an fd, and a tree a run wrote can be as deep as its paths are long. */
#define REMOVE_MAX_DEPTH 256

static int remove_tree(int dfd, const char *name, unsigned depth)
{
        struct stat st, parent;
        DIR *d;
        int fd, r = 0;
        bool again = true;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
                        return -errno;
                return 0;
        }
        if (depth > REMOVE_MAX_DEPTH)
                return -ELOOP;
        if (fstat(dfd, &parent) < 0)
                return -errno;
        if (parent.st_dev != st.st_dev)
                return -EXDEV; /* a mount point: never delete into another filesystem */
        if ((st.st_mode & 0700) != 0700) {
                r = chmod_dir_nofollow(dfd, name, (st.st_mode | 0700) & 07777);
                if (r < 0)
                        return r;
        }
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                close(fd);
                return r;
        }
        /* Removing while reading may hide entries from readdir: repeat until a pass finds none. */
        while (again && r == 0) {
                struct dirent *de;

                again = false;
                rewinddir(d);
                while ((de = readdir(d))) {
                        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                                continue;
                        r = remove_tree(dirfd(d), de->d_name, depth + 1);
                        if (r < 0)
                                break;
                        again = true;
                }
        }
        closedir(d);
        if (r < 0)
                return r;
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

int setup_remove_tree(int dfd, const char *name)
{
        return remove_tree(dfd, name, 0);
}

int rootfs_check_tree(const char *rootfs, const char *exe, struct sbx_error *err)
{
        static const char *const dirs[] = {"tmp", "proc", "dev", "workspace", "sandbox"};
        static const char *const bins[] = {"usr/local/bin", "usr/bin", "bin"};
        _cleanup_close_ int fd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        char rel[128];
        bool found = false;

        if (fd < 0)
                return sbx_fail(err, ENOENT,
                                "rootfs not set up: '%s' is missing; run `vestibule-mcp setup` "
                                "(with the same VESTIBULE_ROOTFS_DIR), then retry",
                                rootfs);
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                if (fstatat(fd, dirs[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        return sbx_fail(err, ENOENT,
                                        "rootfs '%s' is incomplete: no /%s directory; run "
                                        "`vestibule-mcp setup` again, then retry",
                                        rootfs, dirs[i]);
        for (size_t i = 0; i < ELEMENTSOF(bins) && !found; i++) {
                if (snprintf(rel, sizeof(rel), "%s/%s", bins[i], exe) >= (int)sizeof(rel))
                        continue; /* no such name in a tree */
                found = fstatat(fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
        }
        if (!found)
                return sbx_fail(err, ENOENT,
                                "rootfs '%s' has no '%s'; run `vestibule-mcp setup` again, then "
                                "retry",
                                rootfs, exe);
        return 0;
}
