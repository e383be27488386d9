/* unpack.c - one tarball (a rootfs or an OCI layer) into a directory, by the safety rules in
 * setup.h: our own checks on every name before libarchive sees it, then libarchive's secure
 * extraction flags as a second line. */
#include "lazy/archive.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/chase.h"
#include "common/cleanup.h"
#include "common/fileio.h"
#include "lazy/sha256.h"
#include "common/xalloc.h"
#include "setup/setup.h"
#include "setup/setup_internal.h"

#define WHITEOUT_PREFIX ".wh."
#define WHITEOUT_OPAQUE ".wh..wh..opq"
#define READ_CHUNK ((size_t)128 * 1024)

/* ---- a set of relative paths: what the current layer wrote (opaque whiteouts keep those) */

struct pathset {
        char **slots;
        size_t cap, n;
};

static uint64_t hash_str(const char *s)
{
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */

        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 1099511628211ULL;
        }
        return h;
}

static bool pathset_has(const struct pathset *set, const char *p)
{
        size_t i;

        if (set->cap == 0)
                return false;
        for (i = hash_str(p) & (set->cap - 1); set->slots[i]; i = (i + 1) & (set->cap - 1))
                if (strcmp(set->slots[i], p) == 0)
                        return true;
        return false;
}

static void pathset_put1(struct pathset *set, const char *p)
{
        size_t i;

        if (pathset_has(set, p))
                return;
        if ((set->n + 1) * 2 > set->cap) {
                struct pathset bigger = {.cap = set->cap ? set->cap * 2 : 1024};

                bigger.slots = xcalloc(bigger.cap, sizeof(char *));
                for (i = 0; i < set->cap; i++) {
                        if (set->slots[i]) {
                                size_t j = hash_str(set->slots[i]) & (bigger.cap - 1);

                                while (bigger.slots[j])
                                        j = (j + 1) & (bigger.cap - 1);
                                bigger.slots[j] = set->slots[i];
                                bigger.n++;
                        }
                }
                free(set->slots);
                *set = bigger;
        }
        for (i = hash_str(p) & (set->cap - 1); set->slots[i]; i = (i + 1) & (set->cap - 1))
                ;
        set->slots[i] = xstrdup(p);
        set->n++;
}

/* Add @p and every ancestor of it: a layer that writes a/b/c without an entry for a/b still
 * owns a/b as far as an opaque whiteout on a is concerned. */
static void pathset_put(struct pathset *set, const char *p)
{
        _cleanup_free_ char *copy = xstrdup(p);
        char *slash;

        pathset_put1(set, copy);
        while ((slash = strrchr(copy, '/'))) {
                *slash = '\0';
                pathset_put1(set, copy);
        }
}

static void pathset_done(struct pathset *set)
{
        size_t i;

        for (i = 0; i < set->cap; i++)
                free(set->slots[i]);
        free(set->slots);
        memset(set, 0, sizeof(*set));
}

/* Open the directory @rel (relative, normalized; "" = @rootfd itself) under @rootfd without
 * following any symlink. Return: an fd, -ENOENT when a component is missing, -ELOOP when a
 * component is a symlink or not a directory, or another -errno. */
static int open_dir_beneath(int rootfd, const char *rel)
{
        int fd = sbx_chase(rootfd, rel[0] ? rel : ".", SBX_CHASE_NO_SYMLINKS, O_PATH | O_DIRECTORY,
                           NULL);

        return fd == -ENOTDIR ? -ELOOP : fd;
}

/* The parent directories of @rel must be real directories (or not exist yet). */
static int check_parents(int rootfd, const char *rel)
{
        _cleanup_free_ char *parent = xstrdup(rel);
        char *slash = strrchr(parent, '/');
        int fd;

        if (!slash)
                return 0;
        *slash = '\0';
        fd = open_dir_beneath(rootfd, parent);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        close(fd);
        return 0;
}

/* chmod the directory @rel (relative, normalized) beneath @rootfd, never through a symlink:
 * every component is opened O_PATH|O_NOFOLLOW as a directory, then the mode is set through
 * the fd's /proc/self/fd link, which names that very inode (fchmod(2) refuses O_PATH fds, and
 * fchmodat(2) has no working AT_SYMLINK_NOFOLLOW before fchmodat2, Linux 6.6). A layer can
 * replace a folder by a symlink to $HOME after we noted its mode: then nothing is changed.
 * Return: 0, -ELOOP when a component is a symlink or not a directory, or another -errno. */
static int chmod_dir_beneath(int rootfd, const char *rel, mode_t mode)
{
        _cleanup_close_ int fd = -1;
        char proc[64];

        fd = open_dir_beneath(rootfd, rel);
        if (fd < 0)
                return fd;
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        if (chmod(proc, mode) < 0)
                return -errno;
        return 0;
}

/* ---- parents made writable for a non-root unpack, their modes restored after the layer */

struct modefix {
        char *rel;
        mode_t mode;
};

struct modefixes {
        struct modefix *v;
        size_t n, cap;
};

/* As non-root, a directory an earlier layer left without u+w cannot take new entries or lose
 * whited-out ones: lend it u+w until the layer ends. Root needs none of this. */
static int lend_parent_write(int rootfd, const char *rel, struct modefixes *fx)
{
        _cleanup_free_ char *parent = xstrdup(rel);
        char *slash = strrchr(parent, '/');
        struct stat st;
        int r;

        if (!slash)
                return 0; /* the tree's root: our own temporary directory */
        *slash = '\0';
        _cleanup_close_ int pfd = open_dir_beneath(rootfd, parent);
        if (pfd == -ENOENT || pfd == -ELOOP)
                return 0; /* nothing to lend: the entry is refused or its folder made later */
        if (pfd < 0)
                return pfd;
        if (fstat(pfd, &st) < 0)
                return -errno;
        if (st.st_mode & S_IWUSR)
                return 0;
        r = chmod_dir_beneath(rootfd, parent, (st.st_mode | S_IWUSR) & 07777);
        if (r < 0)
                return r;
        GREEDY_REALLOC(fx->v, fx->cap, fx->n + 1);
        fx->v[fx->n].rel = TAKE_PTR(parent);
        fx->v[fx->n].mode = st.st_mode & 07777;
        fx->n++;
        return 0;
}

/* Give back the modes lent above, except where this layer set the directory's mode itself. */
static void modefixes_restore(int rootfd, struct modefixes *fx, const struct pathset *entries)
{
        size_t i;

        for (i = fx->n; i-- > 0;) {
                /* The layer may since have replaced a folder on the way by a symlink: the
                 * walk refuses it (-ELOOP) and nothing outside the tree changes. */
                if (!pathset_has(entries, fx->v[i].rel))
                        (void)chmod_dir_beneath(rootfd, fx->v[i].rel, fx->v[i].mode);
                free(fx->v[i].rel);
        }
        free(fx->v);
        fx->v = NULL;
        fx->n = fx->cap = 0;
}

/* Opaque whiteout: remove from @dfd (the directory @rel) everything the current layer did not
 * write, descending into the directories it did write. */
static int opaque_clean(int dfd, const char *rel, const struct pathset *mine)
{
        _cleanup_strv_free_ char **names = NULL;
        ssize_t n = sbx_dir_names(dfd, NULL, &names);
        int r = 0;

        if (n < 0)
                return (int)n;
        for (ssize_t i = 0; i < n && r == 0; i++) {
                _cleanup_free_ char *child =
                    rel[0] ? xasprintf("%s/%s", rel, names[i]) : xstrdup(names[i]);

                if (!pathset_has(mine, child)) {
                        r = setup_remove_tree(dfd, names[i]);
                } else {
                        int sub =
                            openat(dfd, names[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                r = opaque_clean(sub, child, mine);
                                close(sub);
                        }
                }
        }
        return r;
}

/* ---- reading with a hash and progress */

struct reader {
        int fd;
        struct sbx_sha256 *md;
        uint64_t done, total;
        const char *label;
        const struct setup_opts *o;
        struct timespec start, last;
        int last_step; /* plain mode: the last quarter reported */
        bool cancelled, io_error;
        unsigned char buf[READ_CHUNK];
};

static double elapsed_s(const struct timespec *a, const struct timespec *b)
{
        return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

void setup_progress_line(FILE *out, bool tty, const char *label, const char *verb, uint64_t done,
                         uint64_t total, double seconds, bool final)
{
        double mb = (double)done / 1e6, tot = (double)total / 1e6;
        double rate = seconds > 0.01 ? mb / seconds : 0;
        int pct = total ? (int)(done * 100 / total) : 100;

        if (!out)
                return;
        if (tty)
                fprintf(out, "\r\033[K%s: %s %.1f of %.1f MB (%d%%), %.1f MB/s%s", label, verb, mb,
                        tot, pct, rate, final ? "\n" : "");
        else
                fprintf(out, "%s: %s %.1f of %.1f MB (%d%%), %.1f MB/s\n", label, verb, mb, tot,
                        pct, rate);
        fflush(out);
}

static void reader_progress(struct reader *rd, bool final)
{
        struct timespec now;
        const struct setup_opts *o = rd->o;

        if (!o || !o->progress)
                return;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (o->progress_tty) {
                if (!final && elapsed_s(&rd->last, &now) < 0.1)
                        return;
        } else {
                int step = rd->total ? (int)(rd->done * 4 / rd->total) : 4;

                if (!final && (step <= rd->last_step || step == 0))
                        return;
                rd->last_step = step;
        }
        rd->last = now;
        setup_progress_line(o->progress, o->progress_tty, rd->label, "unpacked", rd->done,
                            rd->total, elapsed_s(&rd->start, &now), final);
}

static la_ssize_t reader_read(struct archive *a, void *ud, const void **buf)
{
        struct reader *rd = ud;
        ssize_t n;

        for (;;) {
                if (rd->o && rd->o->cancel && *rd->o->cancel) {
                        rd->cancelled = true;
                        archive_set_error(a, EINTR, "cancelled");
                        return -1;
                }
                n = read(rd->fd, rd->buf, sizeof(rd->buf));
                if (n >= 0 || errno != EINTR)
                        break;
        }
        if (n < 0) {
                rd->io_error = true;
                archive_set_error(a, errno, "read: %s", strerror(errno));
                return -1;
        }
        if (n > 0 && sbx_sha256_update(rd->md, rd->buf, (size_t)n) < 0) {
                archive_set_error(a, EIO, "sha256 failed");
                return -1;
        }
        rd->done += (uint64_t)n;
        if (rd->done < rd->total)
                reader_progress(rd, false);
        *buf = rd->buf;
        return n;
}

/* ---- the unpack */

/* Back to the saved working directory (and umask) however the unpack ends. */
struct saved_cwd {
        int fd;
        mode_t umask;
};

static void restore_cwdp(struct saved_cwd *s)
{
        if (s->fd >= 0) {
                if (fchdir(s->fd) < 0)
                        abort(); /* cannot happen for an fd we opened; never continue elsewhere */
                close(s->fd);
                umask(s->umask);
        }
}

/* One entry's whiteout: applies it and returns 1, or 0 when @rel is not a whiteout. */
static int apply_whiteout(int rootfd, const char *rel, const struct pathset *mine,
                          struct setup_unpack_stats *st, struct sbx_error *err)
{
        const char *slash = strrchr(rel, '/');
        const char *base = slash ? slash + 1 : rel;
        _cleanup_free_ char *parent = slash ? xstrndup(rel, (size_t)(slash - rel)) : xstrdup("");
        _cleanup_close_ int pfd = -1;
        int r;

        if (strncmp(base, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) != 0)
                return 0;
        st->whiteouts++;
        pfd = open_dir_beneath(rootfd, parent);
        if (pfd == -ENOENT)
                return 1; /* nothing below to hide */
        if (pfd == -ELOOP)
                return sbx_fail(err, EPERM,
                                "refused whiteout '%s': its directory is reached through a "
                                "symlink",
                                rel);
        if (pfd < 0)
                return sbx_fail(err, -pfd, "cannot open '%s' for whiteout '%s': %s", parent, rel,
                                strerror(-pfd));
        if (strcmp(base, WHITEOUT_OPAQUE) == 0) {
                r = opaque_clean(pfd, parent, mine);
        } else if (strncmp(base, WHITEOUT_PREFIX WHITEOUT_PREFIX, 2 * strlen(WHITEOUT_PREFIX)) ==
                   0) {
                return 1; /* other reserved .wh..wh. markers (aufs): nothing to do */
        } else {
                const char *victim = base + strlen(WHITEOUT_PREFIX);

                if (!*victim || strcmp(victim, ".") == 0 || strcmp(victim, "..") == 0)
                        return sbx_fail(err, EPERM, "refused whiteout '%s': no valid name", rel);
                r = setup_remove_tree(pfd, victim);
        }
        if (r < 0)
                return sbx_fail(err, -r, "cannot apply whiteout '%s': %s", rel, strerror(-r));
        return 1;
}

/* One unpack: the tarball and its reader, the tree, libarchive's two ends, and what this layer
 * wrote so far. */
struct unpack {
        const char *dir, *tar_path;
        int tarfd, rootfd;
        bool as_root;
        struct archive *ar, *aw;
        struct sbx_sha256 md;
        struct reader *rd;
        struct pathset mine;    /* what this layer wrote, and their ancestors */
        struct pathset entries; /* exactly the entries this layer wrote */
        struct modefixes fixes;
        struct setup_unpack_stats st;
        struct sbx_error *err;
};

/* Free what @u holds. libarchive's write end is freed first (it applies deferred directory
 * modes by relative name, so before the caller leaves @dir); lent modes are given back. */
static void unpack_done(struct unpack *u)
{
        archive_write_freep(&u->aw);
        archive_read_freep(&u->ar);
        if (u->rootfd >= 0)
                modefixes_restore(u->rootfd, &u->fixes, &u->entries); /* no-op when restored */
        pathset_done(&u->mine);
        pathset_done(&u->entries);
        sbx_sha256_done(&u->md);
        free(u->rd);
        if (u->tarfd >= 0)
                close(u->tarfd);
        if (u->rootfd >= 0)
                close(u->rootfd);
}

/* Open the tarball (a regular file) and the tree, load libarchive, and set up the reader that
 * hashes every byte read. 0, or -errno with u->err. */
static int unpack_open(struct unpack *u, const char *label, const struct setup_opts *o)
{
        struct stat tst;
        int r;

        /* the reader first: whatever this returns, the steps after it and the cleanup find one */
        u->rd = xcalloc(1, sizeof(*u->rd));
        u->tarfd = open(u->tar_path, O_RDONLY | O_CLOEXEC);
        if (u->tarfd < 0 || fstat(u->tarfd, &tst) < 0)
                return sbx_fail(u->err, errno, "cannot open tarball '%s': %s", u->tar_path,
                                strerror(errno));
        if (!S_ISREG(tst.st_mode))
                return sbx_fail(u->err, EINVAL, "'%s' is not a regular file", u->tar_path);
        u->rootfd = open(u->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (u->rootfd < 0)
                return sbx_fail(u->err, errno, "cannot open '%s': %s", u->dir, strerror(errno));
        r = lazy_archive_load(u->err);
        if (r >= 0)
                r = sbx_sha256_init(&u->md, u->err);
        if (r < 0)
                return r;
        u->rd->fd = u->tarfd;
        u->rd->md = &u->md;
        u->rd->total = (uint64_t)tst.st_size;
        u->rd->label = label;
        u->rd->o = o;
        u->rd->last_step = -1;
        clock_gettime(CLOCK_MONOTONIC, &u->rd->start);
        u->rd->last = u->rd->start;
        return 0;
}

/* libarchive's read end (tar only, the usual compressions) and write end (secure flags). */
static int unpack_archives(struct unpack *u)
{
        int flags;

        u->ar = archive_read_new();
        u->aw = archive_write_disk_new();
        if (!u->ar || !u->aw)
                return sbx_fail(u->err, ENOMEM, "libarchive: out of memory");
        /* the compressions registries and mmdebstrap use; no others (libarchive would run
         * external programs for some) */
        archive_read_support_filter_none(u->ar);
        archive_read_support_filter_gzip(u->ar);
        archive_read_support_filter_xz(u->ar);
        archive_read_support_filter_zstd(u->ar);
        archive_read_support_filter_bzip2(u->ar);
        archive_read_support_format_tar(u->ar); /* tar only: no cpio, zip, iso surprises */
        /* SECURE_*: libarchive's own refusal of '..', absolute names and writing through
         * symlinks, behind our checks below. UNLINK: an existing final component (a symlink
         * from an earlier entry or layer) is replaced, never written through. No XATTR, ACL or
         * FFLAGS: no file capabilities, no immutable files. OWNER only as root, by number. */
        flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_UNLINK |
                ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS;
        if (u->as_root)
                flags |= ARCHIVE_EXTRACT_OWNER;
        archive_write_disk_set_options(u->aw, flags);
        return 0;
}

/* Enter the tree (libarchive's secure-path checks work on relative names) with umask 022,
 * saving the working directory and umask in @cwd. 0, or -errno with u->err. */
static int unpack_enter(struct unpack *u, struct saved_cwd *cwd)
{
        int r;

        cwd->fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cwd->fd < 0)
                return sbx_fail(u->err, errno, "cannot open the working directory: %s",
                                strerror(errno));
        if (fchdir(u->rootfd) < 0) {
                r = sbx_fail(u->err, errno, "cannot enter '%s': %s", u->dir, strerror(errno));
                close(TAKE_FD(cwd->fd));
                return r;
        }
        cwd->umask = umask(022);
        return 0;
}

/* The entry's name, cleaned into *@ret_rel (the caller frees it): refused when it has none or
 * would leave the tree ('..', absolute) or be written through a symlink or a non-directory.
 * As non-root, its folder is lent u+w. 0, 1 for the root itself (skipped: its mode is ours),
 * or -errno with u->err. */
static int entry_name(struct unpack *u, struct archive_entry *e, char **ret_rel)
{
        const char *name = archive_entry_pathname(e), *why = NULL;
        _cleanup_free_ char *rel = NULL;
        int r;

        if (!name)
                return sbx_fail(u->err, EPERM, "refused entry %" PRIu64 " of '%s': no name",
                                u->st.entries, u->tar_path);
        if (sbx_path_clean(name, &rel, &why) < 0)
                return sbx_fail(u->err, EPERM,
                                "refused '%s': entry '%s' has %s, which would leave the rootfs",
                                u->tar_path, name, why);
        if (rel[0] == '\0')
                return 1;
        if (check_parents(u->rootfd, rel) < 0)
                return sbx_fail(u->err, EPERM,
                                "refused '%s': entry '%s' would be written through a symlink or "
                                "a non-directory",
                                u->tar_path, name);
        if (!u->as_root) {
                r = lend_parent_write(u->rootfd, rel, &u->fixes);
                if (r < 0)
                        return sbx_fail(u->err, -r, "cannot make the folder of '%s' writable: %s",
                                        rel, strerror(-r));
        }
        *ret_rel = TAKE_PTR(rel);
        return 0;
}

/* A hardlink entry: its target, cleaned, must name a file (not a folder) this tree already
 * holds, reached without a symlink; the entry is pointed at the cleaned name. 0, or -EPERM
 * with u->err. */
static int entry_hardlink(struct unpack *u, struct archive_entry *e, const char *hl)
{
        const char *name = archive_entry_pathname(e), *why = NULL;
        _cleanup_free_ char *link = NULL;
        struct stat ls;

        if (sbx_path_clean(hl, &link, &why) < 0 || !link[0])
                return sbx_fail(u->err, EPERM,
                                "refused '%s': hardlink '%s' -> '%s' has %s, which would leave "
                                "the rootfs",
                                u->tar_path, name, hl, why ? why : "an empty target");
        if (check_parents(u->rootfd, link) < 0 ||
            fstatat(u->rootfd, link, &ls, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(ls.st_mode))
                return sbx_fail(u->err, EPERM,
                                "refused '%s': hardlink '%s' -> '%s' does not name a file "
                                "already unpacked (reached without a symlink)",
                                u->tar_path, name, hl);
        archive_entry_copy_hardlink(e, link);
        u->st.hardlinks++;
        return 0;
}

/* Count the entry by its kind; 1 for a kind never unpacked (devices, fifos, sockets, unknown
 * types), else 0 (or a refused hardlink's -errno). */
static int entry_kind(struct unpack *u, struct archive_entry *e)
{
        const char *hl = archive_entry_hardlink(e);
        mode_t type = archive_entry_filetype(e);

        if (hl)
                return entry_hardlink(u, e, hl);
        if (type == AE_IFREG) {
                u->st.files++;
                u->st.file_bytes += (uint64_t)archive_entry_size(e);
        } else if (type == AE_IFDIR) {
                u->st.dirs++;
        } else if (type == AE_IFLNK) {
                u->st.symlinks++;
        } else {
                u->st.skipped_special++;
                return 1;
        }
        return 0;
}

/* What the entry @rel may carry: no setuid/setgid, no xattrs or file flags; as non-root the
 * owner can always read it (and enter a folder). Recorded as this layer's. */
static void entry_sanitise(struct unpack *u, struct archive_entry *e, const char *rel)
{
        mode_t perm = archive_entry_perm(e), type = archive_entry_filetype(e);

        archive_entry_copy_pathname(e, rel);
        if (perm & (S_ISUID | S_ISGID)) {
                perm &= (mode_t) ~(S_ISUID | S_ISGID);
                u->st.stripped_setid++;
        }
        if (!u->as_root && type == AE_IFDIR)
                perm |= S_IRUSR | S_IXUSR;
        else if (!u->as_root && type == AE_IFREG)
                perm |= S_IRUSR;
        archive_entry_set_perm(e, perm);
        /* never let libarchive set xattrs or file flags from the archive */
        archive_entry_xattr_clear(e);
        archive_entry_set_fflags(e, 0, 0);
        pathset_put(&u->mine, rel);
        pathset_put1(&u->entries, rel);
}

/* Write the entry @rel and, for a regular file with data, its data. 0, or -errno with u->err. */
static int entry_write(struct unpack *u, struct archive_entry *e, const char *rel)
{
        const void *buf;
        size_t size;
        la_int64_t off;
        int r;

        if (archive_write_header(u->aw, e) < ARCHIVE_WARN)
                return sbx_fail(u->err, EPERM, "cannot unpack '%s' from '%s': %s", rel, u->tar_path,
                                archive_error_string(u->aw));
        if (!archive_entry_hardlink(e) && archive_entry_filetype(e) == AE_IFREG &&
            archive_entry_size(e) > 0) {
                while ((r = archive_read_data_block(u->ar, &buf, &size, &off)) == ARCHIVE_OK)
                        if (archive_write_data_block(u->aw, buf, size, off) < ARCHIVE_OK)
                                return sbx_fail(u->err, EIO, "cannot write '%s': %s", rel,
                                                archive_error_string(u->aw));
                if (r != ARCHIVE_EOF)
                        return sbx_fail(u->err, EBADMSG, "'%s' is corrupt or truncated in '%s': %s",
                                        u->tar_path, rel, archive_error_string(u->ar));
        }
        if (archive_write_finish_entry(u->aw) < ARCHIVE_WARN)
                return sbx_fail(u->err, EIO, "cannot finish '%s': %s", rel,
                                archive_error_string(u->aw));
        return 0;
}

/* One entry of the tarball, by the rules in setup.h: its name, a whiteout, its kind, what it
 * may carry, then written. 0 (written or skipped), or -errno with u->err. */
static int unpack_entry(struct unpack *u, struct archive_entry *e)
{
        _cleanup_free_ char *rel = NULL;
        int r;

        u->st.entries++;
        r = entry_name(u, e, &rel);
        if (r != 0 || !rel) /* 1: nothing to write (the root itself) */
                return r < 0 ? r : 0;
        r = apply_whiteout(u->rootfd, rel, &u->mine, &u->st, u->err);
        if (r != 0)
                return r < 0 ? r : 0;
        r = entry_kind(u, e);
        if (r != 0)
                return r < 0 ? r : 0;
        entry_sanitise(u, e, rel);
        return entry_write(u, e, rel);
}

/* Every entry, to the end of the tarball. 0, or -errno with u->err. */
static int unpack_entries(struct unpack *u)
{
        struct archive_entry *e;
        int r;

        if (archive_read_open(u->ar, u->rd, NULL, reader_read, NULL) != ARCHIVE_OK)
                return sbx_fail(u->err, EBADMSG, "cannot read '%s' as a tarball: %s", u->tar_path,
                                archive_error_string(u->ar));
        for (;;) {
                r = archive_read_next_header(u->ar, &e);
                if (r == ARCHIVE_EOF)
                        return 0;
                if (r < ARCHIVE_WARN)
                        return sbx_fail(u->err, EBADMSG,
                                        "'%s' is corrupt or truncated after %" PRIu64
                                        " entries: %s",
                                        u->tar_path, u->st.entries, archive_error_string(u->ar));
                r = unpack_entry(u, e);
                if (r < 0)
                        return r;
        }
}

/* After the last entry: folder modes and times set (deepest first), lent modes given back, the
 * rest of the tarball hashed, its SHA-256 checked against @expected_sha256 (or NULL) and put
 * in @ret_sha256 (or NULL). 0, or -errno with u->err. */
static int unpack_finish(struct unpack *u, const char *expected_sha256, char *ret_sha256)
{
        char hex[SBX_SHA256_HEX_LEN + 1];
        const void *b;
        la_ssize_t n;
        int r = archive_write_close(u->aw);

        modefixes_restore(u->rootfd, &u->fixes, &u->entries);
        if (r < ARCHIVE_WARN)
                return sbx_fail(u->err, EIO, "cannot finish unpacking '%s': %s", u->tar_path,
                                archive_error_string(u->aw));
        /* hash what libarchive left unread (the end-of-archive padding) */
        while ((n = reader_read(u->ar, u->rd, &b)) != 0)
                if (n < 0)
                        return sbx_fail(u->err, u->rd->cancelled ? EINTR : EIO,
                                        "cannot read '%s': %s", u->tar_path,
                                        archive_error_string(u->ar));
        reader_progress(u->rd, true);
        if (sbx_sha256_final_hex(&u->md, hex) < 0)
                return sbx_fail(u->err, EIO, "SHA-256 of '%s' failed (libcrypto.so.3)",
                                u->tar_path);
        if (expected_sha256 && strcmp(hex, expected_sha256) != 0)
                return sbx_fail(u->err, EBADMSG,
                                "'%s' has sha256:%s but sha256:%s was expected: refused (the "
                                "file changed or was tampered with)",
                                u->tar_path, hex, expected_sha256);
        if (ret_sha256)
                memcpy(ret_sha256, hex, 65);
        return 0;
}

static void stats_add(struct setup_unpack_stats *to, const struct setup_unpack_stats *st)
{
        to->entries += st->entries;
        to->files += st->files;
        to->dirs += st->dirs;
        to->symlinks += st->symlinks;
        to->hardlinks += st->hardlinks;
        to->skipped_special += st->skipped_special;
        to->stripped_setid += st->stripped_setid;
        to->whiteouts += st->whiteouts;
        to->file_bytes += st->file_bytes;
}

int setup_unpack_layer(const char *dir, const char *tar_path, const char *label,
                       const char *expected_sha256, const struct setup_opts *o,
                       struct setup_unpack_stats *stats, char *ret_sha256, struct sbx_error *err)
{
        /* cwd first: cleanups run in reverse, and libarchive applies deferred directory modes
         * by relative name when aw is freed (unpack_done), which must happen before we leave
         * @dir. */
        _cleanup_(restore_cwdp) struct saved_cwd cwd = {.fd = -1};
        _cleanup_(unpack_done) struct unpack u = {
            .dir = dir,
            .tar_path = tar_path,
            .tarfd = -1,
            .rootfd = -1,
            .as_root = geteuid() == 0,
            .err = err,
        };
        int r;

        r = unpack_open(&u, label, o);
        if (r >= 0)
                r = unpack_archives(&u);
        if (r >= 0)
                r = unpack_enter(&u, &cwd);
        if (r < 0)
                return r;
        r = unpack_entries(&u);
        if (r >= 0)
                r = unpack_finish(&u, expected_sha256, ret_sha256);
        if (r < 0 && u.rd->cancelled)
                r = sbx_fail(err, EINTR, "unpacking '%s' was cancelled", tar_path);
        if (r < 0 && o && o->progress && o->progress_tty)
                fputc('\n', o->progress);
        if (r < 0)
                modefixes_restore(u.rootfd, &u.fixes, &u.entries);
        if (stats)
                stats_add(stats, &u.st);
        return r;
}
