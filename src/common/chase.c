/* chase.c - the path resolver beneath a root (openat2 first, the walker where it is missing)
 * and the archive name cleaner. See chase.h and docs/design/chase.md. */
#include "common/chase.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
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

/* One walk of the path, component by component, from the root down. */
struct walker {
        struct dir_stack st; /* the directories walked into; st.fd[0] is the root (borrowed) */
        char *rest;          /* the path still to walk (owned; replaced when a link is followed) */
        char *p;             /* where the walk is in @rest */
        unsigned links;      /* symlinks followed so far */
        unsigned flags;      /* SBX_CHASE_* */
        int open_flags;
        const struct sbx_chase_mkdir *mk;
};

static void walker_done(struct walker *w)
{
        dir_stack_done(&w->st);
        free(w->rest);
}

/* One component of the path: its text at @name (@len bytes, not NUL-terminated in @rest). */
struct component {
        char *name;
        size_t len;
        bool must_be_dir; /* a '/' follows it */
        bool last;        /* nothing but '/'s follows it */
};

/* Take the next component of the path: skip '/'s, then up to the next '/' or the end; the walk
 * moves past it (to the '/' or the NUL after it). False at the end of the path. */
static bool next_component(struct walker *w, struct component *ret)
{
        char *after;

        while (*w->p == '/')
                w->p++;
        if (!*w->p)
                return false;
        ret->name = w->p;
        ret->len = strcspn(w->p, "/");
        w->p += ret->len;
        ret->must_be_dir = *w->p == '/';
        for (after = w->p; *after == '/'; after++)
                ;
        ret->last = *after == '\0';
        return true;
}

/* Look up @c (NUL-terminated) in @cur without following it: an O_PATH fd, or -errno. A missing
 * directory is created first with SBX_CHASE_MKDIR (a missing last component only when a
 * directory is wanted: O_DIRECTORY or a trailing '/'). */
static int lookup(const struct walker *w, int cur, const struct component *c)
{
        int fd = openat(cur, c->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0 && errno == ENOENT && (w->flags & SBX_CHASE_MKDIR) &&
            (!c->last || (w->open_flags & O_DIRECTORY) || c->must_be_dir)) {
                int r = make_dir(cur, c->name, w->mk);
                if (r < 0)
                        return r;
                fd = openat(cur, c->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        }
        return fd < 0 ? -errno : fd;
}

/* Follow the symlink @link_fd found in @cur: its target replaces the component, and the walk
 * goes on from the directory it was found in. 0, or -ELOOP (symlinks refused, a link in procfs
 * (magic links), more than SBX_CHASE_MAX_LINKS), -EXDEV (an absolute target), -ENOENT (an
 * empty target) or readlinkat's -errno. */
static int follow_link(struct walker *w, int cur, int link_fd)
{
        char target[PATH_MAX];
        ssize_t tn;
        char *next;

        if (w->flags & SBX_CHASE_NO_SYMLINKS)
                return -ELOOP;
        if (in_procfs(cur) || ++w->links > SBX_CHASE_MAX_LINKS)
                return -ELOOP;
        tn = readlinkat(link_fd, "", target, sizeof(target) - 1);
        if (tn < 0)
                return -errno;
        target[tn] = '\0';
        if (tn == 0)
                return -ENOENT;
        if (target[0] == '/')
                return -EXDEV;
        next = xasprintf("%s%s", target, w->p); /* the target, then the rest of the path */
        free(w->rest);
        w->rest = w->p = next;
        return 0;
}

/* Open the last component @c of the walk, in @cur, for real (@fd: its O_PATH fd, which
 * O_PATH returns as it is). Not a directory nor a symlink when it was looked at: a swap to a
 * symlink since then meets O_NOFOLLOW (-ELOOP). The new fd, or -errno. */
static int open_last(const struct walker *w, int cur, const struct component *c, int *fd)
{
        int out;

        if (w->open_flags & O_PATH)
                return TAKE_FD(*fd);
        out = openat(cur, c->name, w->open_flags | O_NOFOLLOW | O_CLOEXEC);
        return out < 0 ? -errno : out;
}

/* Walk one component @c (NUL-terminated) of the path in @cur: a directory is walked into, a
 * symlink handed back in *@ret_link_fd (-1 otherwise) for the caller to follow once the path is
 * whole again (*@ret_done false for both), the last component opened (*@ret_done true). The fd
 * to return when done, 0 to go on, or -errno (done). */
static int walk_component(struct walker *w, int cur, const struct component *c, bool *ret_done,
                          int *ret_link_fd)
{
        _cleanup_close_ int fd = lookup(w, cur, c);
        struct stat sb;

        *ret_done = true;
        *ret_link_fd = -1;
        if (fd < 0)
                return fd;
        if (fstat(fd, &sb) < 0)
                return -errno;
        if (S_ISLNK(sb.st_mode)) {
                /* openat2(2): O_PATH | O_NOFOLLOW gives the link itself, even under
                 * RESOLVE_NO_SYMLINKS; without O_PATH, O_NOFOLLOW says ELOOP */
                if (c->last && !c->must_be_dir && (w->open_flags & O_NOFOLLOW))
                        return (w->open_flags & O_PATH) ? TAKE_FD(fd) : -ELOOP;
                *ret_done = false;
                *ret_link_fd = TAKE_FD(fd);
                return 0;
        }
        if (S_ISDIR(sb.st_mode)) {
                dir_stack_push(&w->st, TAKE_FD(fd));
                *ret_done = false;
                return 0;
        }
        if (c->must_be_dir)
                return -ENOTDIR;
        return open_last(w, cur, c, &fd);
}

/* The walk, one component at a time: '.' stays, '..' goes back up (never above the root:
 * -EXDEV), anything else is walk_component()'s. The fd, or -errno. */
static int walk(int root_fd, const char *path, unsigned flags, int open_flags,
                const struct sbx_chase_mkdir *mk)
{
        _cleanup_(walker_done) struct walker w = {
            .flags = flags, .open_flags = open_flags, .mk = mk};
        struct component c;

        w.rest = w.p = xstrdup(path);
        dir_stack_push(&w.st, root_fd);
        for (;;) {
                int cur = w.st.fd[w.st.n - 1], link_fd, r;
                bool done;
                char saved;

                if (!next_component(&w, &c)) { /* the path named the directory we are in */
                        r = openat(cur, ".", (open_flags & ~O_NOFOLLOW) | O_CLOEXEC);
                        return r < 0 ? -errno : r;
                }
                if (c.len == 1 && c.name[0] == '.')
                        continue;
                if (c.len == 2 && c.name[0] == '.' && c.name[1] == '.') {
                        if (w.st.n == 1)
                                return -EXDEV;
                        close(w.st.fd[--w.st.n]);
                        continue;
                }
                saved = *w.p;
                *w.p = '\0';
                r = walk_component(&w, cur, &c, &done, &link_fd);
                *w.p = saved;
                if (done)
                        return r;
                if (link_fd >= 0) {
                        r = follow_link(&w, cur, link_fd);
                        close(link_fd);
                        if (r < 0)
                                return r;
                }
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

char *sbx_path_lexical(const char *path, const char *cwd)
{
        const char *base = cwd && cwd[0] == '/' ? cwd : "/";
        _cleanup_free_ char *all = path[0] == '/' ? xstrdup(path) : xasprintf("%s/%s", base, path);
        char *out = xcalloc(strlen(all) + 2, 1), *save = NULL;
        size_t n = 0;

        for (char *c = strtok_r(all, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (strcmp(c, ".") == 0)
                        continue;
                if (strcmp(c, "..") == 0) {
                        while (n > 0 && out[n - 1] != '/')
                                n--;
                        n = n > 0 ? n - 1 : 0;
                        out[n] = '\0';
                        continue;
                }
                n += (size_t)sprintf(out + n, "/%s", c);
        }
        if (n == 0) {
                out[0] = '/';
                out[1] = '\0';
        }
        return out;
}
