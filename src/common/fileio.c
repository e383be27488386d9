/* fileio.c - see fileio.h. */
#include "common/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

ssize_t sbx_read_small_file(int dir_fd, const char *path, unsigned flags, char *buf, size_t size)
{
        int oflags = O_RDONLY | O_CLOEXEC | O_NOCTTY;
        size_t len = 0;
        int fd, e = 0;

        if (!buf || size < 2)
                return -EINVAL;
        buf[0] = '\0';
        if (flags & SBX_READ_NOFOLLOW)
                oflags |= O_NOFOLLOW | O_NONBLOCK;
        fd = openat(dir_fd, path, oflags);
        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n;

                if (len == size - 1) {
                        char more;
                        if (flags & SBX_READ_PREFIX)
                                break;
                        do
                                n = read(fd, &more, 1);
                        while (n < 0 && errno == EINTR);
                        if (n != 0)
                                e = n < 0 ? errno : EFBIG;
                        break;
                }
                n = read(fd, buf + len, size - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        e = errno;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(fd);
        if (e) {
                buf[0] = '\0';
                return -e;
        }
        buf[len] = '\0';
        if (flags & SBX_READ_FIRST_LINE) {
                len = strcspn(buf, "\n");
                buf[len] = '\0';
        }
        return (ssize_t)len;
}

ssize_t sbx_dir_names(int dir_fd, const char *prefix, char ***ret_names)
{
        _cleanup_strv_free_ char **names = NULL;
        size_t n = 0, cap = 0, plen = prefix ? strlen(prefix) : 0;
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

        if (!d) {
                int e = errno;
                if (fd >= 0)
                        close(fd);
                return -e;
        }
        names = xcalloc(1, sizeof(char *));
        for (;;) {
                struct dirent *de;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        int e = errno;
                        closedir(d);
                        if (e)
                                return -e;
                        break;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (prefix && strncmp(de->d_name, prefix, plen) != 0)
                        continue;
                GREEDY_REALLOC(names, cap, n + 2);
                names[n++] = xstrdup(de->d_name);
                names[n] = NULL;
        }
        *ret_names = TAKE_PTR(names);
        return (ssize_t)n;
}
