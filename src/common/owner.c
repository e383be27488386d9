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

int sbx_owner_label(pid_t pid, char *ret, size_t size)
{
        char host[256] = "";
        unsigned long long st = sbx_proc_start_time(pid);

        if (gethostname(host, sizeof(host) - 1) < 0 || !*host)
                snprintf(host, sizeof(host), "localhost");
        if (!st)
                return -ESRCH;
        snprintf(ret, size, "%s:%d:%llu", host, (int)pid, st);
        return 0;
}

bool sbx_owner_alive(const char *label)
{
        char host[256] = "";
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
        gethostname(host, sizeof(host) - 1);
        if ((size_t)(c1 - label) != strlen(host) || strncmp(label, host, strlen(host)) != 0)
                return true; /* another host's server (a shared daemon): not ours to judge */
        errno = 0;
        pid = strtol(c1 + 1, &end, 10);
        if (errno || end != c2 || pid <= 0)
                return false;
        st = strtoull(c2 + 1, &end, 10);
        if (*end)
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
