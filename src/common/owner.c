/* owner.c - owner labels: which process of which host made a thing (owner.h). */
#include "common/owner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"

unsigned long long sbx_proc_start_time(pid_t pid)
{
        char path[64], buf[1024];
        unsigned long long st = 0;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (sbx_read_small_file(AT_FDCWD, path, SBX_READ_PREFIX, buf, sizeof(buf)) <= 0)
                return 0;
        char *p = strrchr(buf, ')'); /* comm may hold spaces and ')' */
        if (!p)
                return 0;
        p++;
        for (int field = 3; field < 22 && p; field++) {
                p = strchr(p + 1, ' ');
        }
        if (p)
                sscanf(p, " %llu", &st);
        return st;
}

/* "<hostname>@<inode of @pid's pid namespace>" into @ret: the part of a label that says whose
 * /proc can judge it. Return: 0, or -errno when the namespace link cannot be read. */
static int owner_place(pid_t pid, char *ret, size_t size)
{
        char host[256] = "", path[64], link[64];
        unsigned long long ino;
        ssize_t n;

        if (gethostname(host, sizeof(host) - 1) < 0 || !*host)
                snprintf(host, sizeof(host), "localhost");
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        n = readlink(path, link, sizeof(link) - 1);
        if (n < 0)
                return -errno;
        link[n] = '\0';
        if (sscanf(link, "pid:[%llu]", &ino) != 1)
                return -EPROTO;
        snprintf(ret, size, "%s@%llu", host, ino);
        return 0;
}

int sbx_owner_label(pid_t pid, char *ret, size_t size)
{
        char place[320];
        unsigned long long st = sbx_proc_start_time(pid);

        if (!st)
                return -ESRCH;
        int r = owner_place(pid, place, sizeof(place));
        if (r < 0)
                return r;
        snprintf(ret, size, "%s:%d:%llu", place, (int)pid, st);
        return 0;
}

bool sbx_owner_alive(const char *label)
{
        char host[256] = "", place[320];
        const char *c1, *c2;
        char *end;
        long pid;
        unsigned long long st;

        if (!label || !*label)
                return false; /* ours (vestibule.run=1) but unowned: a leftover */
        c2 = strrchr(label, ':');
        if (!c2 || c2 == label)
                return false;
        c1 = c2 - 1;
        while (c1 > label && *c1 != ':')
                c1--;
        if (*c1 != ':')
                return false;
        /* ours to judge by /proc: a label of this host name and this pid namespace, or one of
         * this host name without a namespace (written before labels held it). Any other is
         * another host's server (a shared daemon), or one of this host name in another pid
         * namespace (a container run with the host's name): its pids are not ours. */
        size_t hl = (size_t)(c1 - label);
        bool ours = owner_place(getpid(), place, sizeof(place)) == 0 && hl == strlen(place) &&
                    strncmp(label, place, hl) == 0;
        bool ours_older = gethostname(host, sizeof(host) - 1) == 0 && hl == strlen(host) &&
                          strncmp(label, host, hl) == 0;
        if (!ours && !ours_older)
                return true;
        /* both fields plain decimal digits (strtol alone takes a sign and spaces) */
        if (strspn(c1 + 1, "0123456789") != (size_t)(c2 - c1 - 1) || c2 == c1 + 1 || !c2[1] ||
            strspn(c2 + 1, "0123456789") != strlen(c2 + 1))
                return false;
        errno = 0;
        pid = strtol(c1 + 1, &end, 10);
        if (errno || end != c2 || pid <= 0)
                return false;
        st = strtoull(c2 + 1, &end, 10);
        if (errno || *end)
                return false;
        return sbx_proc_start_time((pid_t)pid) == st;
}

unsigned sbx_owner_gone_each(const char *prefix,
                             int (*fn)(int tmp_fd, const char *name, const char *owner_file,
                                       void *ud),
                             void *ud)
{
        static const char suffix[] = ".owner";
        _cleanup_close_ int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int dfd = tmp >= 0 ? dup(tmp) : -1;
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        struct dirent *de;
        unsigned n = 0;

        if (!d) {
                if (dfd >= 0)
                        close(dfd);
                return 0;
        }
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name), sl = sizeof(suffix) - 1;
                char label[320] = "", name[256];
                if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 || len <= sl ||
                    strcmp(de->d_name + len - sl, suffix) != 0 || len - sl >= sizeof(name))
                        continue;
                _cleanup_close_ int of =
                    openat(tmp, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                ssize_t got = of >= 0 ? read(of, label, sizeof(label) - 1) : -1;
                if (got <= 0)
                        continue;
                label[got] = '\0';
                if (sbx_owner_alive(label))
                        continue;
                snprintf(name, sizeof(name), "%.*s", (int)(len - sl), de->d_name);
                n += (unsigned)fn(tmp, name, de->d_name, ud);
        }
        closedir(d);
        return n;
}
