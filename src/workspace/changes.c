/* changes.c - workspace snapshots, their difference, image sniffing and jailed whole-file
 * reads. See changes.h. */
#include "workspace/changes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "workspace/workspace-internal.h"

/* One open folder on the walk's explicit stack (never the C stack). */
struct walk_level {
        DIR *d;
        size_t prefix_len; /* length of the path (with its trailing '/') of this folder */
};

struct entries {
        struct ws_entry *v;
        size_t n, cap;
};

static void entries_add(struct entries *e, const char *path, const struct stat *st)
{
        GREEDY_REALLOC(e->v, e->cap, e->n + 1);
        e->v[e->n++] = (struct ws_entry){
            .path = xstrdup(path),
            .size = (uint64_t)st->st_size,
            .mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
            .ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec,
            .ino = (uint64_t)st->st_ino,
            .dev = (uint64_t)st->st_dev,
        };
}

static int entry_cmp(const void *a, const void *b)
{
        return strcmp(((const struct ws_entry *)a)->path, ((const struct ws_entry *)b)->path);
}

static void mark_incomplete(struct ws_snapshot *s, const char *why)
{
        if (s->incomplete)
                return;
        s->incomplete = true;
        snprintf(s->why, sizeof(s->why), "%s", why);
}

/* Cut the path in @b back to @len bytes and append @name, with a '/' after when @dir; the new
 * length. @b has no max, so the appends cannot fail. */
static size_t path_put(struct sbx_buf *b, size_t len, const char *name, bool dir)
{
        b->len = len;
        (void)sbx_buf_puts(b, name);
        if (dir)
                (void)sbx_buf_puts(b, "/");
        return b->len;
}

/* Open the folder @name beneath @parent for the walk; NULL (and @s marked incomplete unless
 * it is simply gone) when it cannot be: O_NOFOLLOW refuses a symlink swapped in. */
static DIR *open_child(DIR *parent, const char *name, struct ws_snapshot *s)
{
        int cfd = openat(dirfd(parent), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *cd;

        if (cfd < 0) {
                /* a symlink swapped in (ELOOP/ENOTDIR) or no permission */
                if (errno != ENOENT)
                        mark_incomplete(s, "a folder could not be opened");
                return NULL;
        }
        cd = fdopendir(cfd);
        if (!cd) {
                close(cfd);
                mark_incomplete(s, "a folder could not be opened");
        }
        return cd;
}

/* One walk of ws_snapshot_take(): the stack of open folders, the files found, the path of
 * the entry at hand. */
struct snapshot_walk {
        struct walk_level stack[WS_SNAPSHOT_MAX_DEPTH + 1];
        size_t depth, seen, max_entries;
        struct entries e;
        struct sbx_buf path;
        struct ws_snapshot *ret;
};

/* Open the workspace folder @dir as the walk's first level (O_NOFOLLOW: a workspace that is
 * a symlink is refused). 0, or -errno with @err. */
static int walk_open_root(struct snapshot_walk *w, const char *dir, struct sbx_error *err)
{
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return sbx_fail(err, errno,
                                "cannot open the workspace folder '%s' to list what a run "
                                "changed: %s",
                                dir, strerror(errno));
        w->stack[0].d = fdopendir(fd);
        if (!w->stack[0].d) {
                int e0 = errno;
                close(fd);
                return sbx_fail(err, e0, "cannot read the workspace folder '%s': %s", dir,
                                strerror(e0));
        }
        w->stack[0].prefix_len = 0;
        return 0;
}

/* One entry @name of the folder on top of the stack: a regular file is recorded, a folder is
 * pushed (up to WS_SNAPSHOT_MAX_DEPTH deep), anything else (symlinks, fifos, sockets,
 * devices) is never listed and never opened. */
static void walk_entry(struct snapshot_walk *w, const char *name)
{
        struct walk_level *top = &w->stack[w->depth];
        struct stat st;
        DIR *cd;

        if (fstatat(dirfd(top->d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return; /* gone since readdir: nothing to list */
        if (S_ISREG(st.st_mode)) {
                path_put(&w->path, top->prefix_len, name, false);
                entries_add(&w->e, w->path.data, &st);
                return;
        }
        if (!S_ISDIR(st.st_mode))
                return;
        if (w->depth + 1 > WS_SNAPSHOT_MAX_DEPTH) {
                mark_incomplete(w->ret, "folders nested deeper than 32 levels were not looked "
                                        "into");
                return;
        }
        cd = open_child(top->d, name, w->ret);
        if (!cd)
                return;
        w->depth++;
        w->stack[w->depth].d = cd;
        w->stack[w->depth].prefix_len = path_put(&w->path, top->prefix_len, name, true);
}

/* Read the next entry of the folder on top of the stack and take it (walk_entry()); a folder
 * read to its end is closed and popped. False once the walk is over: the first folder is
 * done, or the entry cap was passed (then every open folder is closed). */
static bool walk_step(struct snapshot_walk *w)
{
        struct dirent *de;

        errno = 0;
        de = readdir(w->stack[w->depth].d);
        if (!de) {
                if (errno != 0)
                        mark_incomplete(w->ret, "a folder could not be read to the end");
                closedir(w->stack[w->depth].d);
                if (w->depth == 0)
                        return false;
                w->depth--;
                return true;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                return true;
        if (++w->seen > w->max_entries) {
                char why[96];
                snprintf(why, sizeof(why), "the workspace has more than %zu entries",
                         w->max_entries);
                mark_incomplete(w->ret, why);
                for (size_t i = 0; i <= w->depth; i++) /* close every open level and stop */
                        closedir(w->stack[i].d);
                return false;
        }
        walk_entry(w, de->d_name);
        return true;
}

int ws_snapshot_take(const char *dir, size_t max_entries, struct ws_snapshot *ret,
                     struct sbx_error *err)
{
        struct snapshot_walk *w = xcalloc(1, sizeof(*w));
        int r;

        *ret = (struct ws_snapshot){0};
        w->max_entries = max_entries;
        w->ret = ret;
        r = walk_open_root(w, dir, err);
        if (r == 0) {
                while (walk_step(w))
                        ;
                if (w->e.n > 1)
                        qsort(w->e.v, w->e.n, sizeof(*w->e.v), entry_cmp);
                ret->v = w->e.v;
                ret->n = w->e.n;
        }
        sbx_buf_done(&w->path);
        free(w);
        return r;
}

void ws_snapshot_done(struct ws_snapshot *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < s->n; i++)
                free(s->v[i].path);
        free(s->v);
        *s = (struct ws_snapshot){0};
}

static bool entry_same(const struct ws_entry *a, const struct ws_entry *b)
{
        return a->size == b->size && a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns &&
               a->ino == b->ino && a->dev == b->dev;
}

void ws_changes_diff(const struct ws_snapshot *before, const struct ws_snapshot *after,
                     size_t max_list, struct ws_changes *ret)
{
        size_t i = 0, j = 0, cap = 0;

        *ret = (struct ws_changes){0};
        for (j = 0; j < after->n; j++) {
                const struct ws_entry *a = &after->v[j];
                enum ws_change_kind kind;
                int c = 1;

                /* both lists are sorted: advance through @before up to a->path */
                while (i < before->n && (c = strcmp(before->v[i].path, a->path)) < 0)
                        i++;
                if (i < before->n && c == 0) {
                        if (entry_same(&before->v[i], a))
                                continue;
                        kind = WS_CHANGED;
                } else {
                        kind = WS_NEW;
                }
                if (ret->n >= max_list) {
                        ret->more++;
                        continue;
                }
                GREEDY_REALLOC(ret->v, cap, ret->n + 1);
                ret->v[ret->n++] = (struct ws_change){
                    .path = xstrdup(a->path),
                    .bytes = a->size,
                    .kind = kind,
                };
        }
}

void ws_changes_done(struct ws_changes *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n; i++)
                free(c->v[i].path);
        free(c->v);
        *c = (struct ws_changes){0};
}

const char *ws_change_kind_name(enum ws_change_kind k)
{
        return k == WS_NEW ? "new" : "changed";
}

const char *ws_sniff_image(const unsigned char *buf, size_t n)
{
        static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

        if (n >= sizeof(png) && memcmp(buf, png, sizeof(png)) == 0)
                return "image/png";
        if (n >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff)
                return "image/jpeg";
        if (n >= 6 && (memcmp(buf, "GIF87a", 6) == 0 || memcmp(buf, "GIF89a", 6) == 0))
                return "image/gif";
        if (n >= 12 && memcmp(buf, "RIFF", 4) == 0 && memcmp(buf + 8, "WEBP", 4) == 0)
                return "image/webp";
        return NULL;
}

static uint32_t be16(const unsigned char *p)
{
        return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t le16(const unsigned char *p)
{
        return (uint32_t)p[1] << 8 | p[0];
}

static uint32_t be32(const unsigned char *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* JPEG: the first start-of-frame segment (SOF0..SOF15 but DHT C4, JPG C8, DAC CC) after the
 * SOI, walking segment lengths (ITU T.81, B.1.1). */
static int jpeg_size(const unsigned char *b, size_t n, uint32_t *w, uint32_t *h)
{
        size_t i = 2;

        while (i + 4 <= n) {
                if (b[i] != 0xff)
                        return -EBADMSG;
                unsigned char m = b[i + 1];
                if (m == 0xff) { /* fill byte */
                        i++;
                        continue;
                }
                if (m == 0x01 || (m >= 0xd0 && m <= 0xd8)) { /* no length */
                        i += 2;
                        continue;
                }
                if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
                        if (i + 9 > n)
                                return -EBADMSG;
                        *h = be16(b + i + 5);
                        *w = be16(b + i + 7);
                        return 0;
                }
                if (m == 0xd9 || m == 0xda) /* end of image, or scan data before any frame */
                        return -EBADMSG;
                i += 2 + be16(b + i + 2);
        }
        return -EBADMSG;
}

/* WebP: the simple lossy ("VP8 "), lossless ("VP8L") or extended ("VP8X") header (RFC 9649). */
static int webp_size(const unsigned char *b, size_t n, uint32_t *w, uint32_t *h)
{
        if (n >= 30 && memcmp(b + 12, "VP8 ", 4) == 0 && b[23] == 0x9d && b[24] == 0x01 &&
            b[25] == 0x2a) {
                *w = le16(b + 26) & 0x3fff;
                *h = le16(b + 28) & 0x3fff;
                return 0;
        }
        if (n >= 25 && memcmp(b + 12, "VP8L", 4) == 0 && b[20] == 0x2f) {
                uint32_t bits = le16(b + 21) | le16(b + 23) << 16;
                *w = (bits & 0x3fff) + 1;
                *h = ((bits >> 14) & 0x3fff) + 1;
                return 0;
        }
        if (n >= 30 && memcmp(b + 12, "VP8X", 4) == 0) {
                *w = (b[24] | (uint32_t)b[25] << 8 | (uint32_t)b[26] << 16) + 1;
                *h = (b[27] | (uint32_t)b[28] << 8 | (uint32_t)b[29] << 16) + 1;
                return 0;
        }
        return -EBADMSG;
}

int ws_image_size(const unsigned char *buf, size_t n, uint32_t *ret_w, uint32_t *ret_h)
{
        const char *mime = ws_sniff_image(buf, n);
        uint32_t w = 0, h = 0;
        int r = -EBADMSG;

        if (!mime)
                return -EBADMSG;
        if (strcmp(mime, "image/png") == 0 && n >= 24 && memcmp(buf + 12, "IHDR", 4) == 0) {
                w = be32(buf + 16);
                h = be32(buf + 20);
                r = 0;
        } else if (strcmp(mime, "image/gif") == 0 && n >= 10) {
                w = le16(buf + 6);
                h = le16(buf + 8);
                r = 0;
        } else if (strcmp(mime, "image/jpeg") == 0) {
                r = jpeg_size(buf, n, &w, &h);
        } else if (strcmp(mime, "image/webp") == 0) {
                r = webp_size(buf, n, &w, &h);
        }
        if (r < 0)
                return r;
        *ret_w = w;
        *ret_h = h;
        return 0;
}

/* Open the regular file @rel beneath @dir, never through a symlink. Return an fd (with its
 * size in *@size) or -errno with @err. */
static int open_file_beneath(const char *dir, const char *rel, uint64_t *size,
                             struct sbx_error *err)
{
        _cleanup_close_ int root = -1, fd = -1;
        struct stat st;
        int r;

        if (rel[0] == '\0')
                return sbx_fail(err, EINVAL, "an empty path names no file in the workspace");
        root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return sbx_fail(err, errno, "cannot open the workspace folder '%s': %s", dir,
                                strerror(errno));
        r = workspace_open(root, rel, 0, err);
        if (r < 0)
                return r;
        fd = r;
        if (fstat(fd, &st) < 0)
                return sbx_fail(err, errno, "cannot stat a workspace file: %s", strerror(errno));
        if (!S_ISREG(st.st_mode))
                return sbx_fail(err, EINVAL, "a workspace entry is not a regular file");
        *size = (uint64_t)st.st_size;
        return TAKE_FD(fd);
}

/* Read up to @n bytes at the start of @fd; the count read, or -errno. */
static ssize_t read_upto(int fd, unsigned char *buf, size_t n)
{
        size_t got = 0;

        while (got < n) {
                ssize_t k = read(fd, buf + got, n - got);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) /* O_NONBLOCK from the jailed open */
                                break;
                        return -errno;
                }
                if (k == 0)
                        break;
                got += (size_t)k;
        }
        return (ssize_t)got;
}

const char *ws_sniff_file(const char *dir, const char *rel, uint64_t *ret_size)
{
        struct sbx_error err = {0};
        unsigned char head[16];
        uint64_t size = 0;
        ssize_t n;
        int fd;

        *ret_size = 0;
        fd = open_file_beneath(dir, rel, &size, &err);
        if (fd < 0)
                return NULL;
        n = read_upto(fd, head, sizeof(head));
        close(fd);
        *ret_size = size;
        return n > 0 ? ws_sniff_image(head, (size_t)n) : NULL;
}

int ws_read_file(const char *dir, const char *rel, size_t max_bytes, unsigned char **ret_data,
                 size_t *ret_len, uint64_t *ret_size, struct sbx_error *err)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ unsigned char *buf = NULL;
        uint64_t size = 0;
        ssize_t got;
        int r;

        *ret_data = NULL;
        *ret_len = 0;
        if (ret_size)
                *ret_size = 0;
        r = open_file_beneath(dir, rel, &size, err);
        if (r < 0)
                return r;
        fd = r;
        if (ret_size)
                *ret_size = size;
        if (size > max_bytes)
                return -EFBIG;
        /* the file may grow while we read: read one byte more than stat said, to notice */
        buf = xmalloc((size_t)size + 1);
        got = read_upto(fd, buf, (size_t)size + 1);
        if (got < 0)
                return sbx_fail(err, (int)-got, "cannot read a workspace file: %s",
                                strerror((int)-got));
        if ((size_t)got > max_bytes)
                return -EFBIG;
        *ret_data = TAKE_PTR(buf);
        *ret_len = (size_t)got;
        return 0;
}
