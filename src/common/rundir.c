/* rundir.c - the user's runtime folder and bus socket, checked before use. See rundir.h. */
#include "common/rundir.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int sbx_runtime_dir_check(const char *path, uid_t uid, struct sbx_error *err)
{
        struct stat st;

        if (lstat(path, &st) < 0) {
                int e = errno;
                return sbx_fail(err, e, "no runtime folder '%s' (%s)", path, strerror(e));
        }
        if (S_ISLNK(st.st_mode))
                return sbx_fail(err, ELOOP, "the runtime folder '%s' is a symbolic link", path);
        if (!S_ISDIR(st.st_mode))
                return sbx_fail(err, ENOTDIR, "the runtime folder '%s' is not a directory", path);
        if (st.st_uid != uid)
                return sbx_fail(err, EPERM, "the runtime folder '%s' belongs to uid %u, not %u",
                                path, (unsigned)st.st_uid, (unsigned)uid);
        if ((st.st_mode & 07777) != 0700)
                return sbx_fail(err, EACCES, "the runtime folder '%s' has mode %04o, not 0700",
                                path, (unsigned)(st.st_mode & 07777));
        return 0;
}

int sbx_bus_socket_check(const char *path, uid_t uid, struct sbx_error *err)
{
        struct stat st;

        if (lstat(path, &st) < 0) {
                int e = errno;
                return sbx_fail(err, e, "no bus socket '%s' (%s)", path, strerror(e));
        }
        if (S_ISLNK(st.st_mode))
                return sbx_fail(err, ELOOP, "the bus socket '%s' is a symbolic link", path);
        if (!S_ISSOCK(st.st_mode))
                return sbx_fail(err, ENOTSOCK, "'%s' is not a socket", path);
        if (st.st_uid != uid)
                return sbx_fail(err, EPERM, "the bus socket '%s' belongs to uid %u, not %u", path,
                                (unsigned)st.st_uid, (unsigned)uid);
        return 0;
}

int sbx_user_runtime_dir(const char *base, uid_t uid, char *ret, size_t size, struct sbx_error *err)
{
        char path[4096];
        struct stat st;
        int n, r;

        n = snprintf(path, sizeof(path), "%s/%u", base, (unsigned)uid);
        if (n < 0 || (size_t)n >= sizeof(path) || (size_t)n >= size)
                return sbx_fail(err, ENAMETOOLONG, "the runtime folder path under '%s' is too long",
                                base);
        /* The parent too: whoever may rename entries in it could swap our folder for theirs
         * between this check and the connect. logind's /run/user is root's, mode 0755. */
        if (lstat(base, &st) < 0) {
                int e = errno;
                return sbx_fail(err, e, "no '%s' (%s)", base, strerror(e));
        }
        if (!S_ISDIR(st.st_mode) || (st.st_uid != 0 && st.st_uid != uid) ||
            (st.st_mode & (S_IWGRP | S_IWOTH)))
                return sbx_fail(err, EPERM,
                                "'%s' is not a directory only root (or uid %u) may change (owner "
                                "uid %u, mode %04o)",
                                base, (unsigned)uid, (unsigned)st.st_uid,
                                (unsigned)(st.st_mode & 07777));
        r = sbx_runtime_dir_check(path, uid, err);
        if (r < 0)
                return r;
        memcpy(ret, path, (size_t)n + 1);
        return 0;
}

int sbx_bus_unix_address(const char *socket_path, char *ret, size_t size, struct sbx_error *err)
{
        char addr[4096 * 3 + 16];
        int n;

        if (strlen(socket_path) >= 4096)
                return sbx_fail(err, ENAMETOOLONG, "the socket path '%.64s...' is too long",
                                socket_path);
        /* D-Bus addresses escape every byte outside [-0-9A-Za-z_/.\\*] as %XX (the D-Bus
         * specification, "Server Addresses"). */
        n = snprintf(addr, sizeof(addr), "unix:path=");
        for (const unsigned char *p = (const unsigned char *)socket_path; *p; p++) {
                bool plain = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                             (*p >= 'A' && *p <= 'Z') || strchr("-_/.\\*", *p);
                if (plain)
                        addr[n++] = (char)*p;
                else
                        n += snprintf(addr + n, sizeof(addr) - (size_t)n, "%%%02x", *p);
        }
        addr[n] = '\0';
        if ((size_t)n >= size)
                return sbx_fail(err, ENAMETOOLONG, "the user bus address for '%s' is too long",
                                socket_path);
        memcpy(ret, addr, (size_t)n + 1);
        return 0;
}

int sbx_user_bus_address(const char *base, uid_t uid, char *ret, size_t size, struct sbx_error *err)
{
        char dir[4096], sock[4200];
        int r;

        r = sbx_user_runtime_dir(base, uid, dir, sizeof(dir), err);
        if (r < 0)
                return r;
        snprintf(sock, sizeof(sock), "%s/bus", dir);
        r = sbx_bus_socket_check(sock, uid, err);
        if (r < 0)
                return r;
        return sbx_bus_unix_address(sock, ret, size, err);
}

int sbx_user_bus_resolve(const char *env_address, const char *env_runtime_dir, uid_t uid, char *ret,
                         size_t size, struct sbx_error *err)
{
        char sock[4200];
        int n;

        if (env_address && env_address[0]) {
                n = snprintf(ret, size, "%s", env_address);
                if (n < 0 || (size_t)n >= size)
                        return sbx_fail(err, ENAMETOOLONG,
                                        "DBUS_SESSION_BUS_ADDRESS is too long (%d bytes)", n);
                return 0;
        }
        if (env_runtime_dir && env_runtime_dir[0]) {
                n = snprintf(sock, sizeof(sock), "%s/bus", env_runtime_dir);
                if (n < 0 || (size_t)n >= sizeof(sock))
                        return sbx_fail(err, ENAMETOOLONG, "XDG_RUNTIME_DIR is too long");
                return sbx_bus_unix_address(sock, ret, size, err);
        }
        return sbx_user_bus_address(SBX_USER_RUNTIME_BASE, uid, ret, size, err);
}
