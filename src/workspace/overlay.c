/* overlay.c - the changes of an overlayfs upper folder, listed and applied from the host
 * (`vestibule-mcp run --overlay/--apply`). See overlay.h for what each kind of entry becomes
 * and why; Documentation/filesystems/overlayfs.rst for whiteouts, opaque folders and the
 * user.overlay.* xattrs (userxattr). */
#include "workspace/overlay.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/chase.h"
#include "common/cleanup.h"
#include "common/utf8.h"
#include "common/xalloc.h"

/* Removal recurses at most this deep (a deeper real tree is left, and said). */
#define WS_OVL_REMOVE_DEPTH 256

const char *ws_ovl_kind_name(enum ws_ovl_kind k)
{
        static const char *const names[] = {"added", "changed", "replaced", "deleted", "refused"};

        return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

void ws_overlay_list_done(struct ws_ovl_list *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i].path);
        free(l->v);
        memset(l, 0, sizeof(*l));
}

/* One walk of the upper folder. */
struct ovl_walk {
        struct ws_ovl_list *l;
        int real_fd;
        const char *const *keep;
        size_t seen;
};

static void ovl_add(struct ovl_walk *w, const char *rel, char type, enum ws_ovl_kind kind,
                    uint64_t bytes, const char *why)
{
        struct ws_ovl_list *l = w->l;

        if (l->n == 0 || (l->n >= 16 && (l->n & (l->n - 1)) == 0))
                l->v = xrealloc(l->v, (l->n ? l->n * 2 : 16) * sizeof(*l->v));
        l->v[l->n++] = (struct ws_ovl_entry){
            .path = xstrdup(rel), .type = type, .kind = kind, .bytes = bytes, .why = why};
}

/* Some component of @rel matches a "keep" pattern. */
static bool ovl_kept(const char *const *keep, const char *rel)
{
        _cleanup_free_ char *copy = xstrdup(rel);
        char *save = NULL;

        for (char *c = strtok_r(copy, "/", &save); c && keep; c = strtok_r(NULL, "/", &save))
                for (size_t i = 0; keep[i]; i++)
                        if (fnmatch(keep[i], c, 0) == 0)
                                return true;
        return false;
}

/* lstat of @rel beneath @root_fd, no symlink followed on the way. 0 or -errno. */
static int ovl_real_lstat(int root_fd, const char *rel, struct stat *st)
{
        const char *base = NULL;
        _cleanup_close_ int dir =
            sbx_chase_parent(root_fd, rel, SBX_CHASE_NO_SYMLINKS, NULL, &base);

        if (dir < 0)
                return dir;
        return fstatat(dir, base, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* A symlink target that stays inside the folder by name, from the folder of @rel. */
static bool ovl_link_inside(const char *rel, const char *target)
{
        _cleanup_free_ char *t = xstrdup(target);
        char *save = NULL;
        long depth = 0;

        if (target[0] == '/' || target[0] == '\0')
                return false;
        for (const char *p = rel; *p; p++)
                depth += *p == '/';
        for (char *c = strtok_r(t, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (strcmp(c, ".") == 0)
                        continue;
                depth += strcmp(c, "..") == 0 ? -1 : 1;
                if (depth < 0)
                        return false;
        }
        return true;
}

static bool ovl_xattr_is(int fd, const char *name, const char *want)
{
        char buf[8];
        ssize_t n = fgetxattr(fd, name, buf, sizeof(buf));

        if (n < 0)
                return false;
        return !want || ((size_t)n == strlen(want) && memcmp(buf, want, (size_t)n) == 0);
}

static void ovl_walk_dir(struct ovl_walk *w, int ufd, const char *prefix, int depth);

/* One folder of the upper layer: listed unless only passed through; then walked. */
static void ovl_one_dir(struct ovl_walk *w, int ufd, const char *name, const char *rel,
                        const struct stat *rs, bool in_real, int depth)
{
        _cleanup_close_ int sub =
            openat(ufd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        bool opaque;

        if (sub < 0) {
                w->l->incomplete = true;
                return;
        }
        if (ovl_xattr_is(sub, "user.overlay.redirect", NULL)) {
                ovl_add(w, rel, 'd', WS_OVL_REFUSED, 0, "a renamed folder (overlay redirect)");
                return;
        }
        opaque = ovl_xattr_is(sub, "user.overlay.opaque", "y");
        if (!in_real)
                ovl_add(w, rel, 'd', WS_OVL_ADDED, 0, NULL);
        else if (opaque || !S_ISDIR(rs->st_mode))
                ovl_add(w, rel, 'd', WS_OVL_REPLACED, 0, NULL);
        if (depth + 1 >= WS_OVL_MAX_DEPTH) {
                w->l->incomplete = true;
                return;
        }
        ovl_walk_dir(w, sub, rel, depth + 1);
}

/* The upper layer's entry @name (at @rel, in the upper folder @ufd) would make or change
 * a git repository under any name: a HEAD or commondir (git takes a folder with a HEAD and
 * objects/ and refs/, or a commondir, as one: setup.c is_git_directory()), or the config
 * beside a HEAD in either layer, whose core.fsmonitor or core.worktree runs commands on the
 * host's next git call there. */
static bool ovl_git_file(const struct ovl_walk *w, int ufd, const char *name, const char *rel)
{
        struct stat st;
        const char *slash = strrchr(rel, '/');
        _cleanup_free_ char *head =
            slash ? xasprintf("%.*s/HEAD", (int)(slash - rel), rel) : xstrdup("HEAD");

        if (strcmp(name, "HEAD") == 0 || strcmp(name, "commondir") == 0)
                return true;
        return strcmp(name, "config") == 0 &&
               (fstatat(ufd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0 ||
                ovl_real_lstat(w->real_fd, head, &st) == 0);
}

/* One entry of the upper layer. */
static void ovl_one(struct ovl_walk *w, int ufd, const char *name, const char *rel, int depth)
{
        struct stat st, rs;
        bool in_real;
        char target[4096];
        ssize_t n;

        if (fstatat(ufd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                w->l->incomplete = true;
                return;
        }
        in_real = ovl_real_lstat(w->real_fd, rel, &rs) == 0;
        if (S_ISCHR(st.st_mode) && st.st_rdev == 0) {
                if (in_real)
                        ovl_add(w, rel, 'w', WS_OVL_DELETED, 0, NULL);
                return;
        }
        if (ovl_kept(w->keep, rel)) {
                ovl_add(w, rel, S_ISDIR(st.st_mode) ? 'd' : 'f', WS_OVL_REFUSED, 0,
                        "a name the host runs (.git, .envrc, .vscode ...)");
                return;
        }
        if (S_ISDIR(st.st_mode))
                return ovl_one_dir(w, ufd, name, rel, &rs, in_real, depth);
        if (!S_ISCHR(st.st_mode) && ovl_git_file(w, ufd, name, rel)) {
                ovl_add(w, rel, S_ISLNK(st.st_mode) ? 'l' : 'f', WS_OVL_REFUSED, 0,
                        "a git repository's HEAD, commondir or config (git runs its config on "
                        "the host)");
                return;
        }
        if (S_ISREG(st.st_mode)) {
                ovl_add(w, rel, 'f',
                        !in_real ? WS_OVL_ADDED
                                 : (S_ISREG(rs.st_mode) ? WS_OVL_CHANGED : WS_OVL_REPLACED),
                        (uint64_t)st.st_size, NULL);
                return;
        }
        if (S_ISLNK(st.st_mode)) {
                n = readlinkat(ufd, name, target, sizeof(target) - 1);
                target[n < 0 ? 0 : n] = '\0';
                if (n <= 0 || !ovl_link_inside(rel, target))
                        ovl_add(w, rel, 'l', WS_OVL_REFUSED, 0,
                                "a symlink whose target is absolute or leaves the folder");
                else
                        ovl_add(w, rel, 'l',
                                !in_real ? WS_OVL_ADDED
                                         : (S_ISLNK(rs.st_mode) ? WS_OVL_CHANGED : WS_OVL_REPLACED),
                                0, NULL);
                return;
        }
        ovl_add(w, rel, '?', WS_OVL_REFUSED, 0, "a fifo, socket or device");
}

static void ovl_walk_dir(struct ovl_walk *w, int ufd, const char *prefix, int depth)
{
        int fd = dup(ufd);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d) {
                if (fd >= 0)
                        close(fd);
                w->l->incomplete = true;
                return;
        }
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (++w->seen > WS_OVL_MAX_ENTRIES) {
                        w->l->incomplete = true;
                        break;
                }
                _cleanup_free_ char *rel =
                    prefix ? xasprintf("%s/%s", prefix, de->d_name) : xstrdup(de->d_name);
                ovl_one(w, dirfd(d), de->d_name, rel, depth);
        }
        closedir(d);
}

int ws_overlay_changes(const char *upper, const char *real, const char *const *keep,
                       struct ws_ovl_list *ret, struct sbx_error *err)
{
        _cleanup_close_ int ufd = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int rfd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct ovl_walk w = {.l = ret, .keep = keep};

        memset(ret, 0, sizeof(*ret));
        if (ufd < 0 || rfd < 0)
                return sbx_fail(err, errno, "cannot open the overlay's folder '%s': %m",
                                ufd < 0 ? upper : real);
        w.real_fd = rfd;
        ovl_walk_dir(&w, ufd, NULL, 0);
        return 0;
}

/* Remove @name in @dirfd, a folder with everything in it; symlinks never followed. */
static int ovl_remove_at(int at, const char *name, int depth)
{
        struct stat st;
        int r = 0;

        if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(at, name, 0) < 0 ? -errno : 0;
        if (depth >= WS_OVL_REMOVE_DEPTH)
                return -ELOOP;
        (void)fchmodat(at, name, 0700, 0);
        {
                int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
                struct dirent *de;

                if (!d) {
                        if (fd >= 0)
                                close(fd);
                        return -errno;
                }
                while ((de = readdir(d)))
                        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
                                int k = ovl_remove_at(dirfd(d), de->d_name, depth + 1);
                                r = r < 0 ? r : k;
                        }
                closedir(d);
        }
        if (unlinkat(at, name, AT_REMOVEDIR) < 0 && r == 0)
                r = -errno;
        return r;
}

int ws_overlay_remove(const char *dir)
{
        _cleanup_free_ char *a = xstrdup(dir), *b = xstrdup(dir);
        _cleanup_close_ int pfd = open(dirname(a), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (pfd < 0)
                return -errno;
        return ovl_remove_at(pfd, basename(b), 0);
}

/* A fresh name beside the target for the new file or symlink, renamed over it after. */
static void ovl_tmp_name(char *buf, size_t n, unsigned k)
{
        snprintf(buf, n, ".vestibule-apply.%d.%u", (int)getpid(), k);
}

/* Copy the upper file @src into a new file in @dir, then rename it over @base. */
static int ovl_put_file(int src, int dir, const char *base)
{
        char tmp[64], buf[65536];
        struct stat st;
        ssize_t n;
        int fd = -1, r = 0;

        if (fstat(src, &st) < 0 || !S_ISREG(st.st_mode))
                return -EINVAL;
        if (ovl_xattr_is(src, "user.overlay.metacopy", NULL))
                return -EPERM; /* its data would be the lower file's: never mounted so */
        for (unsigned k = 0; fd < 0 && k < 100; k++) {
                ovl_tmp_name(tmp, sizeof(tmp), k);
                fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0 && errno != EEXIST)
                        return -errno;
        }
        if (fd < 0)
                return -EEXIST;
        while (r == 0 && (n = read(src, buf, sizeof(buf))) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 || write(fd, buf, (size_t)n) != n)
                        r = -(errno ? errno : EIO);
        }
        if (r == 0 && fchmod(fd, st.st_mode & 0777) < 0)
                r = -errno;
        close(fd);
        if (r == 0 && renameat(dir, tmp, dir, base) < 0)
                r = -errno;
        if (r < 0)
                (void)unlinkat(dir, tmp, 0);
        return r;
}

/* A symlink with @target (already checked to stay inside) made beside @base, renamed over it. */
static int ovl_put_link(const char *target, int dir, const char *base)
{
        char tmp[64];

        ovl_tmp_name(tmp, sizeof(tmp), 0);
        (void)unlinkat(dir, tmp, 0);
        if (symlinkat(target, dir, tmp) < 0)
                return -errno;
        if (renameat(dir, tmp, dir, base) < 0) {
                int e = errno;
                (void)unlinkat(dir, tmp, 0);
                return -e;
        }
        return 0;
}

/* Apply one entry: @ufd the upper folder, @rfd the real one. */
static int ovl_apply_one(int ufd, int rfd, const struct ws_ovl_entry *e)
{
        const char *base = NULL, *ubase = NULL;
        _cleanup_close_ int dir =
            sbx_chase_parent(rfd, e->path, SBX_CHASE_NO_SYMLINKS, NULL, &base);
        _cleanup_close_ int udir = -1, src = -1;
        struct stat st, rs;
        char target[4096];
        ssize_t n;
        int r;

        if (dir < 0)
                return dir;
        if (e->type == 'w')
                return ovl_remove_at(dir, base, 0);
        udir = sbx_chase_parent(ufd, e->path, SBX_CHASE_NO_SYMLINKS, NULL, &ubase);
        if (udir < 0)
                return udir;
        if (fstatat(udir, ubase, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        /* what replaces a folder, or a folder that replaces anything, removes the real one */
        if (e->kind == WS_OVL_REPLACED || (fstatat(dir, base, &rs, AT_SYMLINK_NOFOLLOW) == 0 &&
                                           S_ISDIR(rs.st_mode) && e->type != 'd')) {
                r = ovl_remove_at(dir, base, 0);
                if (r < 0)
                        return r;
        }
        switch (e->type) {
        case 'd':
                if (mkdirat(dir, base, 0755 & (st.st_mode | 0700)) < 0 && errno != EEXIST)
                        return -errno;
                return 0;
        case 'f':
                src = openat(udir, ubase, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                return src < 0 ? -errno : ovl_put_file(src, dir, base);
        case 'l':
                n = readlinkat(udir, ubase, target, sizeof(target) - 1);
                if (n <= 0)
                        return n < 0 ? -errno : -EINVAL;
                target[n] = '\0';
                if (!ovl_link_inside(e->path, target))
                        return -EXDEV; /* changed since the list was made */
                return ovl_put_link(target, dir, base);
        default:
                return -EINVAL;
        }
}

int ws_overlay_apply(const char *upper, const char *real, const struct ws_ovl_list *l,
                     size_t *ret_applied, struct sbx_error *err)
{
        _cleanup_close_ int ufd = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int rfd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        size_t applied = 0;
        int first = 0;

        *ret_applied = 0;
        if (l->incomplete)
                return sbx_fail(err, EAGAIN,
                                "the overlay's changes in '%s' could not all be read (too many, "
                                "too deep or unreadable): nothing applied; copy what you need "
                                "from the listing by hand",
                                real);
        if (ufd < 0 || rfd < 0)
                return sbx_fail(err, errno, "cannot open '%s': %m", ufd < 0 ? upper : real);
        for (size_t i = 0; i < l->n; i++) {
                int r;

                if (l->v[i].kind == WS_OVL_REFUSED)
                        continue;
                r = ovl_apply_one(ufd, rfd, &l->v[i]);
                if (r == 0) {
                        applied++;
                } else if (first == 0) {
                        _cleanup_free_ char *q =
                            sbx_term_escape(l->v[i].path, strlen(l->v[i].path), false);
                        first = sbx_fail(err, -r, "cannot apply '%s' to '%s': %s", q, real,
                                         strerror(-r));
                }
        }
        *ret_applied = applied;
        return first;
}
