/* workspace.c - the workspace folder: created on first use, and read_workspace's jailed reads.
 *
 * The workspace is written by sandboxed code, so everything in it is untrusted: it can hold
 * symlinks pointing anywhere on the host, fifos that would block a reader forever, and paths
 * crafted to climb out. A read therefore:
 *  - refuses an empty or absolute path, and one whose ".." components climb above the
 *    workspace (checked lexically first, so the message is the same on every kernel);
 *  - opens it through sbx_chase() (common/chase.h: openat2(RESOLVE_BENEATH |
 *    RESOLVE_NO_MAGICLINKS), or its walker where openat2 is missing) with SBX_CHASE_NO_SYMLINKS
 *    from an fd of the workspace, so no component, the last included, may be a symlink, even
 *    one pointing back inside;
 *  - opens the file O_NONBLOCK (a fifo opens at once instead of waiting for a writer) and
 *    checks with fstat() on that fd that it is a regular file before reading a byte;
 *  - reads at most @cap bytes, reports the full size, and says "binary" for a NUL byte or
 *    invalid UTF-8 rather than handing raw bytes on. */
#include "workspace/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/chase.h"
#include "common/cleanup.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "workspace/workspace-internal.h"

#define OPEN_FILE_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

/* The path as the caller gave it, made safe to quote: at most ~120 bytes, control bytes and
 * bytes >= 0x7f as \xNN (the message goes back to an agent and may reach a terminal). */
static void show_path(const char *p, char *buf, size_t size)
{
        size_t o = 0;

        for (size_t i = 0; p[i] && o + 8 < size; i++) {
                unsigned char ch = (unsigned char)p[i];
                if (o >= 120) {
                        memcpy(buf + o, "...", 3);
                        o += 3;
                        break;
                }
                if (ch < 0x20 || ch >= 0x7f || ch == '\'') {
                        static const char hex[] = "0123456789abcdef";
                        buf[o++] = '\\';
                        buf[o++] = 'x';
                        buf[o++] = hex[ch >> 4];
                        buf[o++] = hex[ch & 15];
                } else
                        buf[o++] = (char)ch;
        }
        buf[o] = '\0';
}

static int mkdir_one(const char *path, struct sbx_error *err)
{
        struct stat st;

        if (mkdir(path, 0700) == 0)
                return 0;
        if (errno != EEXIST)
                return sbx_fail(err, errno,
                                "cannot create the workspace folder '%s': %s; fix the permissions "
                                "of its parent folder or set VESTIBULE_WORKSPACE to a folder you "
                                "can write, and restart the server",
                                path, strerror(errno));
        if (stat(path, &st) < 0)
                return sbx_fail(err, errno, "cannot use the workspace folder '%s': %s", path,
                                strerror(errno));
        if (!S_ISDIR(st.st_mode))
                return sbx_fail(err, ENOTDIR,
                                "cannot use '%s' for the workspace: it exists and is not a folder; "
                                "move it away or set VESTIBULE_WORKSPACE to another folder, and "
                                "restart the server",
                                path);
        return 0;
}

int workspace_ensure(const char *dir, struct sbx_error *err)
{
        _cleanup_free_ char *p = NULL;
        int r;

        if (!dir || dir[0] != '/')
                return sbx_fail(err, EINVAL,
                                "the workspace folder '%s' is not an absolute path; set "
                                "VESTIBULE_WORKSPACE to one and restart the server",
                                dir ? dir : "");
        p = xstrdup(dir);
        /* Each missing parent too, each 0700; existing ones keep their mode. */
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                r = mkdir_one(p, err);
                *s = '/';
                if (r < 0)
                        return r;
        }
        return mkdir_one(p, err);
}

/* Map an open failure to the message an agent can act on. */
static int open_error(int e, const char *shown, struct sbx_error *err)
{
        switch (e) {
        case ELOOP:
                return sbx_fail(err, ELOOP,
                                "cannot read '%s': it is, or passes through, a symlink, and "
                                "read_workspace refuses every symlink (sandboxed code can plant "
                                "one pointing anywhere on this machine); read the real file by its "
                                "own path relative to the workspace",
                                shown);
        case EXDEV:
                return sbx_fail(err, EXDEV,
                                "cannot read '%s': it leads outside the workspace; use a path "
                                "relative to the workspace that stays inside it",
                                shown);
        case ENOENT:
                return sbx_fail(err, ENOENT,
                                "cannot read '%s': no such file in the workspace (paths are "
                                "relative to the workspace, the folder runs see as /workspace)",
                                shown);
        case ENOTDIR:
                return sbx_fail(err, ENOTDIR,
                                "cannot read '%s': a part of the path is not a folder; use a path "
                                "relative to the workspace",
                                shown);
        case EACCES:
        case EPERM:
                return sbx_fail(err, e,
                                "cannot read '%s' in the workspace: permission denied (code in "
                                "the sandbox may have changed its mode; run chmod in a run_code "
                                "call to fix it)",
                                shown);
        default:
                return sbx_fail(err, e, "cannot read '%s' in the workspace: %s", shown,
                                strerror(e));
        }
}

int workspace_open(int root_fd, const char *rel, unsigned chase_flags, struct sbx_error *err)
{
        char shown[160];
        struct stat st, root_st;
        int fd;

        show_path(rel, shown, sizeof(shown));
        if (rel[0] == '/')
                return sbx_fail(err, EXDEV,
                                "cannot read '%s': absolute paths are refused; use a "
                                "path relative to the workspace",
                                shown);
        fd = sbx_chase(root_fd, rel, chase_flags | SBX_CHASE_NO_SYMLINKS, OPEN_FILE_FLAGS, NULL);
        if (fd < 0)
                return open_error(-fd, shown, err);
        /* "." or "sub/..": the workspace itself is no file to read */
        if (fstat(fd, &st) == 0 && fstat(root_fd, &root_st) == 0 && st.st_dev == root_st.st_dev &&
            st.st_ino == root_st.st_ino) {
                close(fd);
                return sbx_fail(err, EISDIR,
                                "cannot read '%s': it is the workspace folder itself; give a "
                                "file's path relative to the workspace",
                                shown);
        }
        return fd;
}

/* Climbing above the start through "..", judged on the text alone. */
static bool escapes_lexically(const char *rel)
{
        long depth = 0;
        const char *p = rel;

        while (*p) {
                const char *s = p;
                while (*p && *p != '/')
                        p++;
                size_t n = (size_t)(p - s);
                if (n == 2 && s[0] == '.' && s[1] == '.') {
                        if (--depth < 0)
                                return true;
                } else if (n > 0 && !(n == 1 && s[0] == '.'))
                        depth++;
                while (*p == '/')
                        p++;
        }
        return false;
}

static const char *file_type_name(mode_t m)
{
        if (S_ISFIFO(m))
                return "a fifo (named pipe)";
        if (S_ISSOCK(m))
                return "a socket";
        if (S_ISCHR(m))
                return "a character device";
        if (S_ISBLK(m))
                return "a block device";
        if (S_ISLNK(m))
                return "a symlink";
        return "not a regular file";
}

/* Text is valid UTF-8 without NUL bytes. *@len may shrink to drop a character that the cap
 * cut in half (@cut: the file goes on after these bytes). */
static bool looks_binary(const char *data, size_t *len, bool cut)
{
        size_t i = 0, n = *len;

        while (i < n) {
                if (data[i] == '\0')
                        return true;
                int l = sbx_utf8_decode(data + i, n - i, NULL);
                if (l == 0)
                        return true;
                if (l < 0) {
                        if (!cut)
                                return true; /* the file ends inside a character */
                        *len = i;
                        return false;
                }
                i += (size_t)l;
        }
        return false;
}

int workspace_read(const char *dir, const char *rel, size_t cap, char **ret_data, size_t *ret_len,
                   size_t *ret_total, bool *ret_binary, struct sbx_error *err)
{
        _cleanup_close_ int root_fd = -1, fd = -1;
        _cleanup_free_ char *data = NULL;
        char shown[160];
        struct stat st;
        size_t len = 0, total;
        bool binary;

        if (!rel || rel[0] == '\0')
                return sbx_fail(err, EINVAL,
                                "read_workspace needs a path: give a file's path relative to the "
                                "workspace, such as 'results/out.txt'");
        show_path(rel, shown, sizeof(shown));
        if (rel[0] == '/') {
                /* An agent that saw /workspace inside the sandbox often writes it out. */
                const char *tail = strncmp(rel, "/workspace/", 11) == 0 ? rel + 11 : NULL;
                char tail_shown[160];
                if (tail && tail[0] && tail[0] != '/') {
                        show_path(tail, tail_shown, sizeof(tail_shown));
                        return sbx_fail(err, EINVAL,
                                        "cannot read '%s': absolute paths are refused; "
                                        "read_workspace takes a path relative to the workspace: "
                                        "use '%s'",
                                        shown, tail_shown);
                }
                return sbx_fail(err, EINVAL,
                                "cannot read '%s': absolute paths are refused; read_workspace "
                                "takes a path relative to the workspace (the folder runs see as "
                                "/workspace), such as 'results/out.txt'",
                                shown);
        }
        if (escapes_lexically(rel))
                return open_error(EXDEV, shown, err);

        root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0) {
                if (errno == ENOENT)
                        return sbx_fail(err, ENOENT,
                                        "cannot read '%s': the workspace folder '%s' does not "
                                        "exist yet (nothing has been written to it)",
                                        shown, dir);
                return sbx_fail(err, errno, "cannot open the workspace folder '%s': %s", dir,
                                strerror(errno));
        }

        fd = workspace_open(root_fd, rel, 0, err);
        if (fd < 0)
                return fd;

        if (fstat(fd, &st) < 0)
                return sbx_fail(err, errno, "cannot read '%s' in the workspace: fstat: %s", shown,
                                strerror(errno));
        if (S_ISDIR(st.st_mode))
                return sbx_fail(err, EISDIR,
                                "cannot read '%s': it is a folder, not a file; give a file's path "
                                "relative to the workspace (list a folder with run_code, e.g. "
                                "bash 'ls -la /workspace')",
                                shown);
        if (!S_ISREG(st.st_mode))
                return sbx_fail(err, EINVAL,
                                "cannot read '%s': it is %s; read_workspace reads regular files "
                                "only",
                                shown, file_type_name(st.st_mode));

        data = xmalloc(cap + 1);
        while (len < cap) {
                ssize_t r = read(fd, data + len, cap - len);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return sbx_fail(err, errno, "cannot read '%s' in the workspace: %s", shown,
                                        strerror(errno));
                if (r == 0)
                        break;
                len += (size_t)r;
        }
        total = (size_t)st.st_size > len ? (size_t)st.st_size : len;
        binary = looks_binary(data, &len, total > len);
        data[len] = '\0';

        *ret_data = TAKE_PTR(data);
        *ret_len = len;
        *ret_total = total;
        *ret_binary = binary;
        return 0;
}
