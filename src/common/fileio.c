/* fileio.c - see fileio.h. */
#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

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
