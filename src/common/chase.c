/* chase.c - the path resolver beneath a root (openat2 first, the walker where it is missing)
 * and the archive name cleaner. See chase.h and docs/design/chase.md. */
#include "common/chase.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

/* 0 = not tried yet, 1 = openat2 works, -1 = ENOSYS seen: the walker from then on. */
static atomic_int have_openat2;

/* The directories the walker has passed: [0] is the root (borrowed), the rest its own. */
struct dir_stack {
        int *fd;
        size_t n, cap;
};

static void dir_stack_done(struct dir_stack *s)
{
        for (size_t i = 1; i < s->n; i++)
                close(s->fd[i]);
        free(s->fd);
}

static void dir_stack_push(struct dir_stack *s, int fd)
{
        GREEDY_REALLOC(s->fd, s->cap, s->n + 1);
        s->fd[s->n++] = fd;
}

/* Whether a symlink found in @dir_fd is one of proc's magic links. The walker cannot tell a
 * magic link from a plain one by its text, so every symlink in a procfs directory counts (the
 * plain ones there, such as /proc/self, are refused too: conservative, see chase.md). */
static bool in_procfs(int dir_fd)
{
        struct statfs sfs;

        return fstatfs(dir_fd, &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC;
}

/* Create the missing directory @name in @dir_fd as @mk says; EEXIST is fine (a race). */
static int make_dir(int dir_fd, const char *name, const struct sbx_chase_mkdir *mk)
{
        if (mkdirat(dir_fd, name, mk ? mk->mode : 0755) < 0 && errno != EEXIST)
                return -errno;
        if (mk && mk->chown)
                (void)fchownat(dir_fd, name, mk->uid, mk->gid, AT_SYMLINK_NOFOLLOW);
        return 0;
}

/* Replace the walk's remaining text: @target, then @rest (which starts at a '/' or is ""). */
static char *splice_rest(const char *target, const char *rest)
{
        return xasprintf("%s%s", target, rest);
}

static int walk(int root_fd, const char *path, unsigned flags, int open_flags,
                const struct sbx_chase_mkdir *mk)
{
        _cleanup_(dir_stack_done) struct dir_stack st = {0};
        _cleanup_free_ char *todo = xstrdup(path);
        char *p = todo;
        unsigned links = 0;

        dir_stack_push(&st, root_fd);
        for (;;) {
                int cur = st.fd[st.n - 1];

                while (*p == '/')
                        p++;
                if (!*p) { /* the path named the directory we are in */
                        int out = openat(cur, ".", (open_flags & ~O_NOFOLLOW) | O_CLOEXEC);
                        return out < 0 ? -errno : out;
                }

                char *comp = p;
                size_t len = strcspn(p, "/");
                p += len;
                bool must_be_dir = *p == '/';
                char *after = p;
                while (*after == '/')
                        after++;
                bool last = *after == '\0';
                char saved = *p;

                if (len == 1 && comp[0] == '.')
                        continue;
                if (len == 2 && comp[0] == '.' && comp[1] == '.') {
                        if (st.n == 1)
                                return -EXDEV;
                        close(st.fd[--st.n]);
                        continue;
                }
                *p = '\0';
                _cleanup_close_ int fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT && (flags & SBX_CHASE_MKDIR) &&
                    (!last || (open_flags & O_DIRECTORY) || must_be_dir)) {
                        int r = make_dir(cur, comp, mk);
                        if (r < 0) {
                                *p = saved;
                                return r;
                        }
                        fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                }
                if (fd < 0) {
                        *p = saved;
                        return -errno;
                }
                struct stat sb;
                if (fstat(fd, &sb) < 0) {
                        *p = saved;
                        return -errno;
                }
                if (S_ISLNK(sb.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t tn;

                        *p = saved;
                        /* openat2(2): O_PATH | O_NOFOLLOW gives the link itself, even under
                         * RESOLVE_NO_SYMLINKS; without O_PATH, O_NOFOLLOW says ELOOP */
                        if (last && !must_be_dir && (open_flags & O_NOFOLLOW))
                                return (open_flags & O_PATH) ? TAKE_FD(fd) : -ELOOP;
                        if (flags & SBX_CHASE_NO_SYMLINKS)
                                return -ELOOP;
                        if (in_procfs(cur) || ++links > SBX_CHASE_MAX_LINKS)
                                return -ELOOP;
                        tn = readlinkat(fd, "", target, sizeof(target) - 1);
                        if (tn < 0)
                                return -errno;
                        target[tn] = '\0';
                        if (tn == 0)
                                return -ENOENT;
                        if (target[0] == '/')
                                return -EXDEV;
                        char *next = splice_rest(target, p);
                        free(todo);
                        todo = next;
                        p = todo;
                        continue;
                }
                if (S_ISDIR(sb.st_mode)) {
                        *p = saved;
                        dir_stack_push(&st, TAKE_FD(fd));
                        continue;
                }
                if (must_be_dir) {
                        *p = saved;
                        return -ENOTDIR;
                }
                /* the last component, not a directory nor a symlink: open it for real. A
                 * swap to a symlink since the look above meets O_NOFOLLOW (-ELOOP). */
                if (open_flags & O_PATH)
                        return TAKE_FD(fd);
                int out = openat(cur, comp, open_flags | O_NOFOLLOW | O_CLOEXEC);
                *p = saved;
                return out < 0 ? -errno : out;
        }
}

int sbx_chase(int root_fd, const char *path, unsigned flags, int open_flags,
              const struct sbx_chase_mkdir *mk)
{
        if (!path || (open_flags & O_CREAT) || (open_flags & O_TMPFILE) == O_TMPFILE)
                return -EINVAL;
        if (path[0] == '/')
                return -EXDEV;
        if (!path[0])
                return -ENOENT;
        if (!(flags & (SBX_CHASE_WALK | SBX_CHASE_MKDIR)) && atomic_load(&have_openat2) >= 0) {
                struct open_how how = {
                    .flags = (unsigned)open_flags | O_CLOEXEC,
                    .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
                               ((flags & SBX_CHASE_NO_SYMLINKS) ? RESOLVE_NO_SYMLINKS : 0),
                };
                /* EAGAIN: a rename or mount raced the lookup; the kernel asks to retry. */
                for (int attempt = 0; attempt < 16; attempt++) {
                        long fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
                        if (fd >= 0) {
                                atomic_store(&have_openat2, 1);
                                return (int)fd;
                        }
                        if (errno != EAGAIN)
                                break;
                }
                if (errno != ENOSYS)
                        return -errno;
                atomic_store(&have_openat2, -1);
        }
        return walk(root_fd, path, flags, open_flags, mk);
}

int sbx_chase_parent(int root_fd, const char *path, unsigned flags,
                     const struct sbx_chase_mkdir *mk, const char **ret_base)
{
        const char *slash, *base;
        int fd;

        if (!path)
                return -EINVAL;
        if (path[0] == '/')
                return -EXDEV;
        slash = strrchr(path, '/');
        base = slash ? slash + 1 : path;
        if (!base[0] || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
                return -EINVAL;
        if (slash) {
                _cleanup_free_ char *parent = xstrndup(path, (size_t)(slash - path));
                fd =
                    sbx_chase(root_fd, parent[0] ? parent : ".", flags, O_RDONLY | O_DIRECTORY, mk);
        } else {
                fd = sbx_chase(root_fd, ".", flags, O_RDONLY | O_DIRECTORY, mk);
        }
        if (fd < 0)
                return fd;
        *ret_base = base;
        return fd;
}

int sbx_path_clean(const char *name, char **ret, const char **ret_why)
{
        _cleanup_free_ char *out = xmalloc(strlen(name) + 1);
        const char *p = name;
        size_t o = 0;

        if (name[0] == '/') {
                *ret_why = "an absolute name";
                return -EPERM;
        }
        while (*p) {
                size_t len = strcspn(p, "/");

                if (len == 2 && p[0] == '.' && p[1] == '.') {
                        *ret_why = "a '..' component";
                        return -EPERM;
                }
                if (len > 0 && !(len == 1 && p[0] == '.')) {
                        if (o > 0)
                                out[o++] = '/';
                        memcpy(out + o, p, len);
                        o += len;
                }
                p += len;
                while (*p == '/')
                        p++;
        }
        out[o] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}
