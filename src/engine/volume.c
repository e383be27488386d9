/* volume.c - the hand-in for a daemon whose filesystem is not ours (tcp://, Docker Desktop, a
 * forwarded socket): the code and a copy of the workspace go into two named volumes through
 * the archive API of a created-never-started helper container (docs/design/engine-api.md §3), the
 * run container mounts them (/sandbox read-only), and after the run the workspace comes back
 * through GET .../archive and is unpacked into the host workspace with the same refusals as
 * setup's unpacker: no absolute names, no '..', never writing through a symlink. */
#include "engine/engine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "lazy/archive.h"
#include "rootfs/tree.h"

#include "common/chase.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "egress/egress.h"

#define VOLUME_XFER_TIMEOUT_MS 300000L /* one archive PUT/GET: large workspaces take a while */
#define VOLUME_MAX_DEPTH 128           /* deeper host workspace folders are left out */

/* ---------------------------------------------------------------------------------------- */
/* The manifest: what went in, to tell deletions made by the run from files added meanwhile */

void engine_manifest_done(struct engine_manifest *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->n; i++)
                free(m->v[i].rel);
        free(m->v);
        m->v = NULL;
        m->n = m->cap = 0;
}

static void manifest_add(struct engine_manifest *m, const char *rel, const struct stat *st)
{
        GREEDY_REALLOC(m->v, m->cap, m->n + 1);
        m->v[m->n].rel = xstrdup(rel);
        m->v[m->n].mode = st->st_mode;
        m->v[m->n].size = st->st_size;
        m->v[m->n].mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
        m->n++;
}

/* ---------------------------------------------------------------------------------------- */
/* Building the hand-in tar                                                                 */

static int tar_fail(struct archive *a, const char *what, struct sbx_error *err)
{
        int e = archive_errno(a) > 0 ? archive_errno(a) : EIO;
        return sbx_fail(err, e, "cannot build the archive for the container engine (%s): %s", what,
                        archive_error_string(a) ? archive_error_string(a) : "unknown error");
}

static int tar_header(struct archive *a, const char *name, mode_t type_perm, int64_t size,
                      uid_t uid, gid_t gid, const char *symlink, time_t mtime,
                      struct sbx_error *err)
{
        _cleanup_(archive_entry_freep) struct archive_entry *e = archive_entry_new();

        archive_entry_set_pathname(e, name);
        archive_entry_set_mode(e, type_perm);
        archive_entry_set_size(e, S_ISREG(type_perm) ? size : 0);
        archive_entry_set_uid(e, uid);
        archive_entry_set_gid(e, gid);
        archive_entry_set_mtime(e, mtime, 0);
        if (symlink)
                archive_entry_set_symlink(e, symlink);
        if (archive_write_header(a, e) != ARCHIVE_OK)
                return tar_fail(a, name, err);
        return 0;
}

static int tar_data(struct archive *a, const char *name, const void *p, size_t n,
                    struct sbx_error *err)
{
        while (n > 0) {
                la_ssize_t w = archive_write_data(a, p, n);
                if (w <= 0)
                        return tar_fail(a, name, err);
                p = (const char *)p + w;
                n -= (size_t)w;
        }
        return 0;
}

struct walk {
        struct archive *a;
        uid_t uid;
        gid_t gid;
        struct engine_manifest *m;
        unsigned skipped;      /* sockets, fifos, devices: nothing a bind mount would show usefully;
                                  and folders deeper than VOLUME_MAX_DEPTH */
        unsigned skipped_deep; /* of those, the folders */
        char *buf;             /* VOLUME_COPY_BUF bytes: file data on its way into the tar */
        char *target;          /* PATH_MAX bytes: a symlink's target */
};

/* One open folder of the walk: an explicit stack of these, on the heap, replaces recursion
 * (the walk runs on a server worker thread with a 256 KiB stack, and a workspace can be as
 * deep as VOLUME_MAX_DEPTH). Each frame holds one fd. */
struct walk_frame {
        DIR *d;
        char *prefix; /* tar name of this folder */
        char *rel;    /* workspace-relative path of this folder ("" = the root) */
};

#define VOLUME_COPY_BUF 65536

static void walk_frame_done(struct walk_frame *f)
{
        if (f->d)
                closedir(f->d);
        free(f->prefix);
        free(f->rel);
        memset(f, 0, sizeof(*f));
}

/* Add one regular file (entry @base of folder @dfd) to the tar. */
static int walk_file(struct walk *w, int dfd, const char *base, const char *name, const char *crel,
                     mode_t perm, struct sbx_error *err)
{
        _cleanup_close_ int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat fst;
        off_t left;
        int r;

        if (fd < 0 || fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode))
                return sbx_fail(err, errno ? errno : EIO, "cannot read workspace file '%s': %m",
                                crel);
        r = tar_header(w->a, name, S_IFREG | perm, fst.st_size, w->uid, w->gid, NULL,
                       fst.st_mtim.tv_sec, err);
        if (r < 0)
                return r;
        /* exactly the size in the header: a file growing meanwhile is cut, one shrinking is
         * padded with zeros (tar needs the promised bytes) */
        for (left = fst.st_size; left > 0;) {
                size_t want = left < VOLUME_COPY_BUF ? (size_t)left : VOLUME_COPY_BUF;
                ssize_t n = read(fd, w->buf, want);
                if (n < 0)
                        return sbx_fail(err, errno, "cannot read workspace file '%s': %m", crel);
                if (n == 0) {
                        n = (ssize_t)want;
                        memset(w->buf, 0, want);
                }
                r = tar_data(w->a, name, w->buf, (size_t)n, err);
                if (r < 0)
                        return r;
                left -= n;
        }
        manifest_add(w->m, crel, &fst);
        return 0;
}

/* walk_tree, a folder: opened without following a symlink, its header written and listed.
 * Return the open folder, which the caller pushes, or NULL with @err set. */
static DIR *walk_enter_dir(struct walk *w, int dfd, const char *dname, const char *name,
                           const char *crel, const struct stat *st, struct sbx_error *err)
{
        int sub = openat(dfd, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *sd = sub >= 0 ? fdopendir(sub) : NULL;
        if (!sd) {
                sbx_fail(err, errno, "cannot open workspace folder '%s': %m", crel);
                if (sub >= 0)
                        close(sub);
                return NULL;
        }
        /* never set-id bits into the sandbox */
        if (tar_header(w->a, name, S_IFDIR | (st->st_mode & 0777), 0, w->uid, w->gid, NULL,
                       st->st_mtim.tv_sec, err) < 0) {
                closedir(sd);
                return NULL;
        }
        manifest_add(w->m, crel, st);
        return sd;
}

/* walk_tree, a symlink: it goes in as a symlink (inside the container it resolves in the
 * container's tree, as it would through a bind mount), and is listed. */
static int walk_symlink(struct walk *w, int dfd, const char *dname, const char *name,
                        const char *crel, const struct stat *st, struct sbx_error *err)
{
        ssize_t tn = readlinkat(dfd, dname, w->target, PATH_MAX - 1);
        int r;

        if (tn < 0)
                return sbx_fail(err, errno, "cannot read workspace symlink '%s': %m", crel);
        w->target[tn] = '\0';
        r = tar_header(w->a, name, S_IFLNK | 0777, 0, w->uid, w->gid, w->target, st->st_mtim.tv_sec,
                       err);
        if (r == 0)
                manifest_add(w->m, crel, st);
        return r;
}

/* walk_tree, a folder deeper than VOLUME_MAX_DEPTH: left out, not refused (a run can make
 * such a tree, and refusing it blocked every later run until the user removed it), counted,
 * and logged once with its place. Not in the manifest, so the copy-back never deletes it. */
static void walk_skip_deep(struct walk *w, const char *crel)
{
        if (w->skipped_deep++ == 0)
                log_warning("workspace folder '%.200s' is nested deeper than %d folders: left out "
                            "of the remote engine's copy",
                            crel, VOLUME_MAX_DEPTH);
        w->skipped++;
}

/* Push @f on the walk's stack @stack (*@n frames of *@cap), grown as needed. The stack. */
static struct walk_frame *walk_push(struct walk_frame *stack, size_t *n, size_t *cap,
                                    struct walk_frame f)
{
        GREEDY_REALLOC(stack, *cap, *n + 1);
        stack[(*n)++] = f;
        return stack;
}

/* Add the content of folder @root_fd (tar name @root_prefix) to the tar, depth first, never
 * following a symlink. Folders deeper than VOLUME_MAX_DEPTH are left out (counted in
 * w->skipped). */
static int walk_tree(struct walk *w, int root_fd, const char *root_prefix, struct sbx_error *err)
{
        _cleanup_free_ struct walk_frame *stack = NULL;
        size_t n = 0, cap = 0;
        int r = 0;

        w->buf = xmalloc(VOLUME_COPY_BUF);
        w->target = xmalloc(PATH_MAX);
        int dup_fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        DIR *rootd = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        if (!rootd) {
                r = sbx_fail(err, errno, "cannot read the workspace folder: %m");
                if (dup_fd >= 0)
                        close(dup_fd);
                goto out;
        }
        cap = 16;
        stack = xcalloc(cap, sizeof(*stack));
        stack[n++] = (struct walk_frame){rootd, xstrdup(root_prefix), xstrdup("")};

        while (n > 0) {
                struct walk_frame *f = &stack[n - 1];
                struct dirent *de;
                struct stat st;

                errno = 0;
                de = readdir(f->d);
                if (!de) {
                        if (errno) {
                                r = sbx_fail(err, errno,
                                             "cannot read the workspace folder '%s': %m", f->rel);
                                goto out;
                        }
                        walk_frame_done(&stack[--n]);
                        continue;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int dfd = dirfd(f->d);
                _cleanup_free_ char *name = xasprintf("%s/%s", f->prefix, de->d_name);
                _cleanup_free_ char *crel =
                    *f->rel ? xasprintf("%s/%s", f->rel, de->d_name) : xstrdup(de->d_name);
                if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue; /* removed meanwhile */
                        r = sbx_fail(err, errno, "cannot stat workspace entry '%s': %m", crel);
                        goto out;
                }
                mode_t perm = st.st_mode & 0777; /* never set-id bits into the sandbox */
                if (S_ISDIR(st.st_mode) && n > VOLUME_MAX_DEPTH) {
                        walk_skip_deep(w, crel);
                } else if (S_ISDIR(st.st_mode)) {
                        DIR *sd = walk_enter_dir(w, dfd, de->d_name, name, crel, &st, err);
                        if (!sd) {
                                r = -err->code;
                                goto out;
                        }
                        stack = walk_push(stack, &n, &cap,
                                          (struct walk_frame){sd, TAKE_PTR(name), TAKE_PTR(crel)});
                } else if (S_ISREG(st.st_mode)) {
                        r = walk_file(w, dfd, de->d_name, name, crel, perm, err);
                        if (r < 0)
                                goto out;
                } else if (S_ISLNK(st.st_mode)) {
                        r = walk_symlink(w, dfd, de->d_name, name, crel, &st, err);
                        if (r < 0)
                                goto out;
                } else {
                        w->skipped++;
                }
        }
out:
        while (n > 0)
                walk_frame_done(&stack[--n]);
        free(w->buf);
        free(w->target);
        w->buf = w->target = NULL;
        return r;
}

static ssize_t fd_write_cb(struct archive *a, void *ud, const void *buf, size_t n)
{
        int fd = *(int *)ud;
        size_t off = 0;
        (void)a;
        while (off < n) {
                ssize_t w = write(fd, (const char *)buf + off, n - off);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        archive_set_error(a, errno, "cannot write the temporary archive: %s",
                                          strerror(errno));
                        return -1;
                }
                off += (size_t)w;
        }
        return (ssize_t)n;
}

/* "<@code_root>/sitecustomize.py" (egress.h, egress_sitecustomize), root's, 0444. */
static int tar_sitecustomize(struct archive *a, const char *code_root, time_t now,
                             struct sbx_error *err)
{
        _cleanup_free_ char *name = xasprintf("%s/%s", code_root, EGRESS_SITECUSTOMIZE_NAME);
        size_t len = strlen(egress_sitecustomize);
        int r = tar_header(a, name, S_IFREG | 0444, (int64_t)len, 0, 0, NULL, now, err);

        return r < 0 ? r : tar_data(a, name, egress_sitecustomize, len, err);
}

static int handin_tar(int fd, enum engine_handin_part part, const char *script_name,
                      const char *code, size_t code_len, const char *workspace_dir, uid_t uid,
                      gid_t gid, struct engine_manifest *ret_manifest, unsigned *ret_skipped,
                      struct sbx_error *err)
{
        _cleanup_(archive_write_freep) struct archive *a = archive_write_new();
        struct engine_manifest m = {0};
        const char *code_root = part == ENGINE_HANDIN_BOTH ? "sandbox" : ".";
        const char *ws_root = part == ENGINE_HANDIN_BOTH ? "workspace" : ".";
        _cleanup_free_ char *script = xasprintf("%s/%s", code_root, script_name);
        time_t now = time(NULL);
        int r = 0;

        if (!a)
                abort();
        archive_write_set_format_pax_restricted(a);
        archive_write_set_bytes_in_last_block(a, 1);
        if (archive_write_open2(a, &fd, NULL, fd_write_cb, NULL, NULL) != ARCHIVE_OK)
                return tar_fail(a, "open", err);

        /* /sandbox: root-owned, readable by all; the run mounts it read-only anyway. */
        if (part != ENGINE_HANDIN_WORKSPACE) {
                r = tar_header(a, code_root, S_IFDIR | 0755, 0, 0, 0, NULL, now, err);
                if (r == 0)
                        r = tar_header(a, script, S_IFREG | 0644, (int64_t)code_len, 0, 0, NULL,
                                       now, err);
                if (r == 0)
                        r = tar_data(a, script, code, code_len, err);
                if (r == 0)
                        r = tar_sitecustomize(a, code_root, now, err);
                if (r < 0)
                        return r;
        }

        if (workspace_dir && part != ENGINE_HANDIN_CODE) {
                /* the folder itself may be a symlink the user set up, as a bind mount's source
                 * may; nothing beneath it is followed */
                _cleanup_close_ int wfd = open(workspace_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                struct stat st;
                if (wfd < 0 || fstat(wfd, &st) < 0)
                        return sbx_fail(err, errno, "cannot open the workspace '%s': %m",
                                        workspace_dir);
                /* The volume root takes this entry's owner: the run's user must own
                 * /workspace, as it owns the host folder behind a bind mount. */
                r = tar_header(a, ws_root, S_IFDIR | (st.st_mode & 0777), 0, uid, gid, NULL,
                               st.st_mtim.tv_sec, err);
                if (r < 0)
                        return r;
                struct walk w = {.a = a, .uid = uid, .gid = gid, .m = &m};
                r = walk_tree(&w, wfd, ws_root, err);
                if (r < 0) {
                        engine_manifest_done(&m);
                        return r;
                }
                if (ret_skipped)
                        *ret_skipped = w.skipped;
        }
        /* last: a spare waits for it (engine.h, ENGINE_HANDIN_GO) */
        if (part != ENGINE_HANDIN_WORKSPACE) {
                _cleanup_free_ char *go = xasprintf("%s/%s", code_root, ENGINE_HANDIN_GO);
                r = tar_header(a, go, S_IFREG | 0644, 0, 0, 0, NULL, now, err);
        }
        if (r < 0 || archive_write_close(a) != ARCHIVE_OK) {
                engine_manifest_done(&m);
                return r < 0 ? r : tar_fail(a, "close", err);
        }
        if (ret_manifest)
                *ret_manifest = m;
        else
                engine_manifest_done(&m);
        return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Unpacking the run's workspace back into the host folder                                  */

/* Open (creating missing ones, 0755) the directories of @rel's parent beneath @rootfd, never
 * following a symlink (sbx_chase_parent()): a component that is a symlink or a file is
 * refused (-ELOOP). Sets *@ret_base to @rel's last component. Return an fd or -errno. */
static int open_parent_beneath(int rootfd, const char *rel, const char **ret_base, uid_t uid,
                               gid_t gid, bool create, bool chown_new)
{
        const struct sbx_chase_mkdir mk = {
            .mode = 0755, .uid = uid, .gid = gid, .chown = chown_new};
        int fd = sbx_chase_parent(
            rootfd, rel, SBX_CHASE_NO_SYMLINKS | (create ? SBX_CHASE_MKDIR : 0), &mk, ret_base);

        return fd == -ENOTDIR ? -ELOOP : fd;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

struct names {
        char **v;
        size_t n, cap;
};

static void names_done(struct names *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
}

static void refusal(struct engine_copyback *cb, const char *name, const char *why)
{
        cb->refused++;
        if (!cb->first_refusal[0])
                snprintf(cb->first_refusal, sizeof(cb->first_refusal), "'%.120s': %.70s", name,
                         why);
}

/* Whether @n bytes at @p are all zero. */
static bool all_zero(const char *p, size_t n)
{
        return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

#define HOLE_CHUNK 4096 /* zero runs this long (aligned) become holes */

/* A new file for the copy-back under a random name in @pfd (O_EXCL, never through a
 * symlink), its name into @tmp. Return the fd, or -errno. */
static int temp_open(int pfd, char *tmp, size_t size)
{
        for (unsigned i = 0; i < 100; i++) {
                uint32_t rnd = 0;
                if (getrandom(&rnd, sizeof(rnd), 0) < 0)
                        rnd = (uint32_t)random();
                snprintf(tmp, size, ".vestibule-copyback-%08x", rnd);
                int fd =
                    openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd >= 0)
                        return fd;
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

/* @len bytes of @buf at file offset @off into @fd, chunk by chunk aligned to the file: runs of
 * zeros are skipped (holes), the rest written and taken from *@data_left (-EFBIG when it would
 * go below 0). Return 0 or -errno. */
static int write_sparse(int fd, const void *buf, size_t len, uint64_t off, uint64_t *data_left)
{
        for (size_t done = 0; done < len;) {
                uint64_t pos = off + done;
                size_t n = HOLE_CHUNK - (size_t)(pos % HOLE_CHUNK);
                if (n > len - done)
                        n = len - done;
                const char *p = (const char *)buf + done;
                if (!all_zero(p, n)) {
                        if (n > *data_left)
                                return -EFBIG;
                        *data_left -= n;
                        for (size_t w_done = 0; w_done < n;) {
                                ssize_t w =
                                    pwrite(fd, p + w_done, n - w_done, (off_t)(pos + w_done));
                                if (w < 0)
                                        return -errno;
                                w_done += (size_t)w;
                        }
                }
                done += n;
        }
        return 0;
}

/* Write a regular file entry of @size bytes: a new temp name in the parent, then rename over
 * @base, so an existing symlink at @base is replaced, never followed. Runs of zeros are not
 * written but left as holes (Docker's archive has no sparse entries: a truncate()d file comes
 * as zeros), and the size is set at the end. *@data_left is the copy-back's remaining byte
 * budget for what is written: -EFBIG (nothing of this file kept) when it would go below 0.
 * Return 0 when written, 1 when the host's file was the same (same_as_host()) and is kept. */
/* Whether the host's @base in @pfd is a regular file with @tmp's content (both in @pfd), the
 * permission bits @perm and (with @do_chown) the owner @uid:@gid: the run left it as it was,
 * so the copy-back keeps the host's file (its inode and mtime), and the changes snapshot
 * (src/workspace/changes.c) does not take it for one the run wrote. Docker's archive carries
 * mtimes in whole seconds, so they are not compared: the bytes are. */
#define SAME_CHUNK ((size_t)65536)
static bool same_as_host(int pfd, const char *base, const char *tmp, mode_t perm, uid_t uid,
                         gid_t gid, bool do_chown)
{
        struct stat hs, ts;

        /* only a regular file is opened (O_NONBLOCK: a fifo put there meanwhile never blocks) */
        if (fstatat(pfd, base, &hs, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(hs.st_mode))
                return false;
        _cleanup_close_ int hfd =
            openat(pfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        _cleanup_close_ int tfd = openat(pfd, tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (hfd < 0 || tfd < 0 || fstat(hfd, &hs) < 0 || fstat(tfd, &ts) < 0)
                return false;
        _cleanup_free_ char *hb = xmalloc(2 * SAME_CHUNK);
        char *tb = hb + SAME_CHUNK;
        if (!S_ISREG(hs.st_mode) || hs.st_size != ts.st_size ||
            (hs.st_mode & 07777) != (perm & 0777) ||
            (do_chown && (hs.st_uid != uid || hs.st_gid != gid)))
                return false;
        for (off_t off = 0; off < hs.st_size;) {
                size_t n = (uint64_t)(hs.st_size - off) < SAME_CHUNK ? (size_t)(hs.st_size - off)
                                                                     : SAME_CHUNK;
                if (pread(hfd, hb, n, off) != (ssize_t)n || pread(tfd, tb, n, off) != (ssize_t)n ||
                    memcmp(hb, tb, n) != 0)
                        return false;
                off += (off_t)n;
        }
        return true;
}

static int put_file(struct archive *a, int pfd, const char *base, mode_t perm, time_t mtime,
                    int64_t size, uint64_t *data_left, uid_t uid, gid_t gid, bool do_chown)
{
        char tmp[64];
        _cleanup_close_ int fd = -1;
        const void *buf;
        size_t len;
        la_int64_t off;
        int64_t end = 0;
        int r = 0;

        fd = temp_open(pfd, tmp, sizeof(tmp));
        if (fd < 0)
                return fd;
        for (;;) {
                int ar = archive_read_data_block(a, &buf, &len, &off);
                if (ar == ARCHIVE_EOF)
                        break;
                if (ar != ARCHIVE_OK) {
                        r = -EIO;
                        goto fail;
                }
                r = write_sparse(fd, buf, len, (uint64_t)off, data_left);
                if (r < 0)
                        goto fail;
                if ((int64_t)off + (int64_t)len > end)
                        end = (int64_t)off + (int64_t)len;
        }
        /* the size: where the data ended or the header said (holes at the end included) */
        if (size > end)
                end = size;
        if (ftruncate(fd, (off_t)end) < 0) {
                r = -errno;
                goto fail;
        }
        if (do_chown && fchown(fd, uid, gid) < 0) {
                r = -errno;
                goto fail;
        }
        if (fchmod(fd, perm & 0777) < 0) {
                r = -errno;
                goto fail;
        }
        if (same_as_host(pfd, base, tmp, perm, uid, gid, do_chown)) {
                unlinkat(pfd, tmp, 0);
                return 1; /* kept as it was */
        }
        struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = mtime}};
        (void)futimens(fd, ts);
        struct stat st;
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
                r = setup_remove_tree(pfd, base);
                if (r < 0)
                        goto fail;
        }
        if (renameat(pfd, tmp, pfd, base) < 0) {
                r = -errno;
                goto fail;
        }
        return 0;
fail:
        unlinkat(pfd, tmp, 0);
        return r;
}

static int put_symlink(int pfd, const char *base, const char *target, uid_t uid, gid_t gid,
                       bool do_chown)
{
        char tmp[64];
        int r = -EEXIST;

        for (unsigned i = 0; i < 100; i++) {
                uint32_t rnd = 0;
                if (getrandom(&rnd, sizeof(rnd), 0) < 0)
                        rnd = (uint32_t)random();
                snprintf(tmp, sizeof(tmp), ".vestibule-copyback-%08x", rnd);
                if (symlinkat(target, pfd, tmp) == 0) {
                        r = 0;
                        break;
                }
                if (errno != EEXIST)
                        return -errno;
        }
        if (r < 0)
                return r;
        if (do_chown)
                (void)fchownat(pfd, tmp, uid, gid, AT_SYMLINK_NOFOLLOW);
        struct stat st;
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
                r = setup_remove_tree(pfd, base);
                if (r < 0) {
                        unlinkat(pfd, tmp, 0);
                        return r;
                }
        }
        if (renameat(pfd, tmp, pfd, base) < 0) {
                r = -errno;
                unlinkat(pfd, tmp, 0);
                return r;
        }
        return 0;
}

static int put_dir(int pfd, const char *base, mode_t perm, uid_t uid, gid_t gid, bool do_chown)
{
        struct stat st;

        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
                /* the run replaced a file or symlink by a folder */
                if (unlinkat(pfd, base, 0) < 0)
                        return -errno;
        }
        if (mkdirat(pfd, base, 0700) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOTDIR ? -ELOOP : -errno;
        if (do_chown && fchown(fd, uid, gid) < 0)
                return -errno;
        /* u+rwx kept: the server must still be able to write into it */
        if (fchmod(fd, (perm & 0777) | 0700) < 0)
                return -errno;
        return 0;
}

/* Hardlink @base to @target (an earlier entry of the same tar, beneath the root). */
static int put_hardlink(int rootfd, int pfd, const char *base, const char *target_rel)
{
        const char *tbase = NULL;
        _cleanup_close_ int tfd =
            open_parent_beneath(rootfd, target_rel, &tbase, 0, 0, false, false);
        char tmp[64];
        struct stat st;

        if (tfd < 0)
                return tfd;
        if (fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EPERM; /* only files: never a link to a symlink or a folder */
        for (unsigned i = 0; i < 100; i++) {
                uint32_t rnd = 0;
                if (getrandom(&rnd, sizeof(rnd), 0) < 0)
                        rnd = (uint32_t)random();
                snprintf(tmp, sizeof(tmp), ".vestibule-copyback-%08x", rnd);
                if (linkat(tfd, tbase, pfd, tmp, 0) == 0) {
                        if (renameat(pfd, tmp, pfd, base) < 0) {
                                int e = errno;
                                unlinkat(pfd, tmp, 0);
                                return -e;
                        }
                        return 0;
                }
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

static int unpack_one(struct archive *a, struct archive_entry *e, int rootfd, const char *rel,
                      uint64_t *data_left, uid_t uid, gid_t gid, bool do_chown,
                      struct engine_copyback *cb)
{
        const char *base = NULL;
        mode_t mode = archive_entry_mode(e);
        const char *hl = archive_entry_hardlink(e);
        int r;

        _cleanup_close_ int pfd = open_parent_beneath(rootfd, rel, &base, uid, gid, true, do_chown);
        if (pfd < 0) {
                refusal(cb, rel,
                        pfd == -ELOOP ? "its folder is a symlink or a file on this machine"
                                      : strerror(-pfd));
                return 0;
        }
        if (hl) {
                _cleanup_free_ char *t = NULL;
                const char *why = NULL;
                if (sbx_path_clean(hl, &t, &why) < 0 || !*t) {
                        refusal(cb, rel, why ? why : "a hardlink to the root");
                        return 0;
                }
                r = put_hardlink(rootfd, pfd, base, t);
                if (r < 0)
                        refusal(cb, rel, "a hardlink to something that is not a file in it");
                else
                        cb->files++;
                return 0;
        }
        switch (mode & S_IFMT) {
        case S_IFDIR:
                r = put_dir(pfd, base, mode, uid, gid, do_chown);
                if (r == 0)
                        cb->dirs++;
                break;
        case S_IFREG:
                r = put_file(a, pfd, base, mode, archive_entry_mtime(e), archive_entry_size(e),
                             data_left, uid, gid, do_chown);
                if (r == -EFBIG)
                        return r; /* the byte cap: the caller stops and says so */
                if (r == 1)
                        cb->kept++;
                if (r >= 0)
                        cb->files++;
                if (r > 0)
                        r = 0;
                break;
        case S_IFLNK:
                r = put_symlink(pfd, base, archive_entry_symlink(e) ? archive_entry_symlink(e) : "",
                                uid, gid, do_chown);
                if (r == 0)
                        cb->symlinks++;
                break;
        default:
                refusal(cb, rel, "not a file, folder or symlink");
                return 0;
        }
        if (r < 0) {
                if (r == -ENOSPC || r == -EDQUOT || r == -EIO)
                        return r; /* the host cannot take it: stop, say so */
                refusal(cb, rel, strerror(-r));
        }
        return 0;
}

/* Whether @base in @pfd (me->rel's folder, opened beneath the workspace) is as it went in. */
static bool manifest_unchanged(int pfd, const char *base, const struct engine_manifest_entry *me)
{
        struct stat st;
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        if ((st.st_mode & S_IFMT) != (me->mode & S_IFMT))
                return false;
        if (S_ISDIR(st.st_mode))
                return true; /* a folder is removed only when empty (rmdir) */
        return st.st_size == me->size &&
               (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == me->mtime_ns;
}

static void cap_note(struct engine_copyback *cb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cap_note(struct engine_copyback *cb, const char *fmt, ...)
{
        va_list ap;
        cb->capped = true;
        va_start(ap, fmt);
        vsnprintf(cb->cap_note, sizeof(cb->cap_note), fmt, ap);
        va_end(ap);
}

/* A name the copy-back's temporary files take (temp_open()): never one from the engine. */
static bool copyback_reserved(const char *rel)
{
        return strncmp(rel, ".vestibule-copyback-", 20) == 0 ||
               strstr(rel, "/.vestibule-copyback-") != NULL;
}

/* The copy-back's deletions: what went in (@m), is no longer in the run's workspace (not in
 * @seen, sorted here), and is unchanged on this machine since (another run or tool may have
 * written it meanwhile: kept). Deepest first, so a removed folder is empty by the time it is
 * removed. Return how many were removed. */
static unsigned unpack_deletions(int rootfd, const struct engine_manifest *m, struct names *seen)
{
        unsigned deleted = 0;

        if (seen->n > 0)
                qsort(seen->v, seen->n, sizeof(char *), cmp_str);
        for (size_t i = m ? m->n : 0; i-- > 0;) {
                const struct engine_manifest_entry *me = &m->v[i];
                const char *key = me->rel;
                if (seen->n > 0 && bsearch(&key, seen->v, seen->n, sizeof(char *), cmp_str))
                        continue;
                const char *base = NULL;
                _cleanup_close_ int pfd =
                    open_parent_beneath(rootfd, me->rel, &base, 0, 0, false, false);
                if (pfd < 0 || !manifest_unchanged(pfd, base, me))
                        continue;
                if (unlinkat(pfd, base, S_ISDIR(me->mode) ? AT_REMOVEDIR : 0) == 0)
                        deleted++;
        }
        return deleted;
}

static int workspace_unpack(int tar_fd, const char *workspace_dir, const struct engine_manifest *m,
                            uid_t uid, gid_t gid, bool do_chown,
                            const struct engine_copyback_caps *caps, struct engine_copyback *ret,
                            struct sbx_error *err)
{
        _cleanup_(archive_read_freep) struct archive *a = archive_read_new();
        _cleanup_close_ int rootfd = open(workspace_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct archive_entry *e;
        struct names seen = {0};
        struct engine_copyback cb = {0};
        uint64_t data_left = caps->max_data_bytes, entries = 0;
        int r = 0, ar;

        if (!a)
                abort();
        if (rootfd < 0)
                return sbx_fail(err, errno, "cannot open the workspace '%s': %m", workspace_dir);
        archive_read_support_format_tar(a);
        if (archive_read_open_fd(a, tar_fd, 65536) != ARCHIVE_OK)
                return sbx_fail(err, EPROTO,
                                "the engine's copy of the workspace is not a tar archive: %s",
                                archive_error_string(a));
        while ((ar = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
                _cleanup_free_ char *rel = NULL;
                const char *why = NULL;
                const char *name = archive_entry_pathname(e);
                if (!name || sbx_path_clean(name, &rel, &why) < 0) {
                        refusal(&cb, name ? name : "(no name)", why ? why : "no name");
                        continue;
                }
                if (!*rel)
                        continue; /* the root: the host folder stays as it is */
                if (copyback_reserved(rel)) {
                        refusal(&cb, rel, "a name reserved for the copy-back's temporary files");
                        continue;
                }
                if (++entries > caps->max_entries) {
                        cap_note(&cb,
                                 "the copy-back stopped after %llu entries (its cap) at '%.120s'",
                                 (unsigned long long)caps->max_entries, rel);
                        goto out;
                }
                GREEDY_REALLOC(seen.v, seen.cap, seen.n + 1);
                seen.v[seen.n++] = xstrdup(rel);
                r = unpack_one(a, e, rootfd, rel, &data_left, uid, gid, do_chown, &cb);
                if (r == -EFBIG) {
                        cap_note(&cb,
                                 "the copy-back stopped at %llu MiB of file data (its cap) at "
                                 "'%.120s'",
                                 (unsigned long long)(caps->max_data_bytes >> 20), rel);
                        r = 0;
                        goto out;
                }
                if (r < 0) {
                        r = sbx_fail(err, -r,
                                     "cannot copy '%s' back into the workspace '%s': %s: free "
                                     "space on this machine",
                                     rel, workspace_dir, strerror(-r));
                        goto out;
                }
        }
        if (ar != ARCHIVE_EOF && caps->input_cut) {
                /* the transfer itself was stopped at its cap: what came whole is written */
                cap_note(&cb,
                         "the copy-back stopped at %llu MiB of archive from the engine (its "
                         "cap)",
                         (unsigned long long)(caps->max_tar_bytes >> 20));
                goto out;
        }
        if (ar != ARCHIVE_EOF) {
                r = sbx_fail(err, EPROTO,
                             "the engine's copy of the workspace broke off: %s: the workspace "
                             "holds only part of the run's changes",
                             archive_error_string(a));
                goto out;
        }

        cb.deleted += unpack_deletions(rootfd, m, &seen);
out:
        names_done(&seen);
        if (ret)
                *ret = cb;
        return r;
}

/* ---------------------------------------------------------------------------------------- */
/* Engine calls: volumes, the helper, archive PUT/GET                                        */

int engine_volume_create(const struct engine_conn *c, const char *name, const char *owner,
                         const char *driver_o, struct sbx_error *err)
{
        _cleanup_(json_putp) json_object *body = json_object_new_object();
        json_object *labels = json_object_new_object();
        int r;

        json_object_object_add(body, "Name", json_object_new_string(name));
        json_object_object_add(body, "Driver", json_object_new_string("local"));
        json_object_object_add(labels, "vestibule.run", json_object_new_string("1"));
        json_object_object_add(labels, "vestibule.owner", json_object_new_string(owner));
        json_object_object_add(body, "Labels", labels);
        if (driver_o) {
                json_object *opts = json_object_new_object();
                json_object_object_add(opts, "o", json_object_new_string(driver_o));
                json_object_object_add(body, "DriverOpts", opts);
        }
        struct engine_reply rep = {0};
        r = engine_post(c,
                        &(struct engine_call){
                            .path = "/volumes/create",
                            .json = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN),
                            .ok = {201, 200},
                            .timeout_ms = 30000,
                            .what = "create a volume for the code"},
                        &rep, err);
        engine_reply_done(&rep);
        return r;
}

int engine_volume_remove(const struct engine_conn *c, const char *name, struct sbx_error *err)
{
        struct engine_reply rep = {0};
        int r;

        r = engine_delete(c,
                          &(struct engine_call){.path = "/volumes/{}",
                                                .parts = {name},
                                                .query = {{"force", "1"}},
                                                .ok = {204, 200, 404},
                                                .timeout_ms = 30000,
                                                .what = "remove a hand-in volume"},
                          &rep, err);
        engine_reply_done(&rep);
        return r;
}

int engine_volume_name(const char *kind, char *ret, size_t size)
{
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -errno;
        snprintf(ret, size, "vestibule-%s-%016llx", kind, (unsigned long long)rnd);
        return 0;
}

json_object *engine_volume_options(const char *owner)
{
        json_object *vo = json_object_new_object(), *labels = json_object_new_object();

        json_object_object_add(vo, "NoCopy", json_object_new_boolean(true));
        json_object_object_add(labels, "vestibule.run", json_object_new_string("1"));
        json_object_object_add(labels, "vestibule.owner", json_object_new_string(owner));
        json_object_object_add(vo, "Labels", labels);
        return vo;
}

json_object *engine_helper_body(const char *image, const char *code_volume,
                                const char *workspace_volume, const char *owner, bool keep_id)
{
        json_object *b = json_object_new_object(), *hc = json_object_new_object();
        json_object *labels = json_object_new_object(), *mounts = json_object_new_array();
        json_object *cmd = json_object_new_array(), *capdrop = json_object_new_array();
        const char *vols[2][2] = {{code_volume, "/sandbox"}, {workspace_volume, "/workspace"}};

        json_object_object_add(b, "Image", json_object_new_string(image));
        json_object_array_add(cmd, json_object_new_string("true"));
        json_object_object_add(b, "Cmd", cmd);
        json_object_object_add(b, "Entrypoint", json_object_new_array());
        json_object_object_add(b, "NetworkDisabled", json_object_new_boolean(true));
        json_object_object_add(labels, "vestibule.run", json_object_new_string("1"));
        json_object_object_add(labels, "vestibule.helper", json_object_new_string("1"));
        json_object_object_add(labels, "vestibule.owner", json_object_new_string(owner));
        json_object_object_add(b, "Labels", labels);
        /* Never started; locked down all the same in case something starts it. */
        json_object_object_add(hc, "NetworkMode", json_object_new_string("none"));
        json_object_array_add(capdrop, json_object_new_string("ALL"));
        json_object_object_add(hc, "CapDrop", capdrop);
        for (size_t i = 0; i < 2; i++) {
                if (!vols[i][0])
                        continue;
                json_object *m = json_object_new_object();
                json_object_object_add(m, "Type", json_object_new_string("volume"));
                json_object_object_add(m, "Source", json_object_new_string(vols[i][0]));
                json_object_object_add(m, "Target", json_object_new_string(vols[i][1]));
                json_object_object_add(m, "ReadOnly", json_object_new_boolean(false));
                /* no copy of the image's directory into the new volume: its root takes the
                 * owner and mode of the tar's entry (engine_create_body() does the same); our
                 * labels on a volume the engine makes again here (engine_volume_options()) */
                json_object_object_add(m, "VolumeOptions", engine_volume_options(owner));
                json_object_array_add(mounts, m);
        }
        json_object_object_add(hc, "Mounts", mounts);
        json_object_object_add(hc, "AutoRemove", json_object_new_boolean(false));
        /* rootless Podman: the same id mapping as the run, so the tar's owner is the run's */
        if (keep_id)
                json_object_object_add(hc, "UsernsMode", json_object_new_string("keep-id"));
        json_object_object_add(b, "HostConfig", hc);
        return b;
}

/* GET archive: the answer into a file, stopped past a cap. */
struct fd_sink {
        int fd;
        uint64_t max_bytes; /* stop past this many body bytes (0 = no cap) */
        uint64_t got;
        bool cut;
        bool write_failed;
        int write_errno;
};

static size_t fd_write_all(struct fd_sink *io, const char *data, size_t n)
{
        for (size_t off = 0; off < n;) {
                ssize_t w = write(io->fd, data + off, n - off);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        io->write_failed = true;
                        io->write_errno = errno;
                        return 0;
                }
                off += (size_t)w;
        }
        return n;
}

static size_t sink_data(void *ud, const char *data, size_t n)
{
        struct fd_sink *io = ud;

        if (io->max_bytes && io->got + n > io->max_bytes) {
                size_t room = (size_t)(io->max_bytes - io->got);
                if (room && fd_write_all(io, data, room) != room)
                        return 0;
                io->got += room;
                io->cut = true;
                return 0; /* ends the transfer */
        }
        io->got += n;
        return fd_write_all(io, data, n);
}

int engine_archive_put(const struct engine_conn *c, const char *id, const char *path, int fd,
                       struct sbx_error *err)
{
        _cleanup_free_ char *what = xasprintf("take the code archive for '%s'", path);
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};

        return engine_put(c,
                          &(struct engine_call){.path = "/containers/{}/archive",
                                                .parts = {id},
                                                .query = {{"path", path}},
                                                .ok = {200},
                                                .upload = true,
                                                .upload_fd = fd,
                                                .content_type = "application/x-tar",
                                                .timeout_ms = VOLUME_XFER_TIMEOUT_MS,
                                                .what = what},
                          &rep, err);
}

int engine_archive_stat(const struct engine_conn *c, const char *id, const char *path,
                        struct sbx_error *err)
{
        _cleanup_free_ char *what = xasprintf("check '%s' in the sandbox container", path);
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        int r;

        r = engine_head(c,
                        &(struct engine_call){.path = "/containers/{}/archive",
                                              .parts = {id},
                                              .query = {{"path", path}},
                                              .ok = {200},
                                              .timeout_ms = 30000,
                                              .what = what},
                        &rep, err);
        if (r == -ENOENT)
                return sbx_fail(err, ENOENT, "'%s' is not in the sandbox container", path);
        return r;
}

int engine_archive_get(const struct engine_conn *c, const char *id, const char *path, int fd,
                       struct sbx_error *err)
{
        bool cut = false;
        return engine_archive_get_max(c, id, path, fd, 0, &cut, err);
}

int engine_archive_get_max(const struct engine_conn *c, const char *id, const char *path, int fd,
                           uint64_t max_bytes, bool *ret_cut, struct sbx_error *err)
{
        _cleanup_free_ char *what = xasprintf("hand back '%s' of the sandbox container", path);
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        struct fd_sink io = {.fd = fd, .max_bytes = max_bytes};
        int r;

        r = engine_get(c,
                       &(struct engine_call){.path = "/containers/{}/archive",
                                             .parts = {id},
                                             .query = {{"path", path}},
                                             .ok = {200},
                                             .body = ENGINE_BODY_STREAM,
                                             .on_data = sink_data,
                                             .userdata = &io,
                                             .timeout_ms = VOLUME_XFER_TIMEOUT_MS,
                                             .what = what},
                       &rep, err);
        *ret_cut = io.cut;
        if (io.write_failed)
                return sbx_fail(err, io.write_errno,
                                "cannot store the run's workspace on this machine: %s: free "
                                "space in /tmp",
                                strerror(io.write_errno));
        if (r < 0)
                return r;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return sbx_fail(err, errno, "cannot read the run's workspace archive: %m");
        return 0; /* with io.cut: the first max_bytes, a cut tar: the caller says so */
}

int engine_tmpfile(struct sbx_error *err)
{
        const char *dirs[] = {"/var/tmp", "/tmp"};
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                int fd = open(dirs[i], O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
                if (fd >= 0)
                        return fd;
        }
        char path[] = "/tmp/vestibule-xfer-XXXXXX";
        int fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0)
                return sbx_fail(err, errno, "cannot create a temporary file in /tmp: %m");
        unlink(path);
        return fd;
}

bool engine_daemon_shares_files(const struct engine_endpoint *ep, const char *os_name,
                                const char *daemon_name, const char *our_host, char *why,
                                size_t why_size)
{
        if (!ep->is_unix) {
                snprintf(why, why_size, "the engine is reached over tcp:// (%s)", ep->base_url);
                return false;
        }
        if (os_name && strcasestr(os_name, "Docker Desktop")) {
                snprintf(why, why_size,
                         "Docker Desktop runs the engine in its own VM, which sees only the "
                         "folders shared with it");
                return false;
        }
        if (strstr(ep->sock_path, "/.local/share/containers/podman/machine/") ||
            (os_name && strcasestr(os_name, "podman machine"))) {
                snprintf(why, why_size, "podman machine runs the engine in its own VM");
                return false;
        }
        if (!daemon_name || !our_host || !*daemon_name || strcmp(daemon_name, our_host) != 0) {
                snprintf(why, why_size,
                         "the engine runs on host '%.80s', not on this one ('%.80s'): a "
                         "forwarded socket",
                         daemon_name ? daemon_name : "", our_host ? our_host : "");
                return false;
        }
        if (why_size)
                why[0] = '\0';
        return true;
}

/* The public entry points load libarchive first (lazy/archive.h): the helpers above call it
 * in their initialisers. */
int engine_handin_tar(int fd, enum engine_handin_part part, const char *script_name,
                      const char *code, size_t code_len, const char *workspace_dir, uid_t uid,
                      gid_t gid, struct engine_manifest *ret_manifest, unsigned *ret_skipped,
                      struct sbx_error *err)
{
        int r = lazy_archive_load(err);

        if (r < 0)
                return r;
        return handin_tar(fd, part, script_name, code, code_len, workspace_dir, uid, gid,
                          ret_manifest, ret_skipped, err);
}

int engine_workspace_unpack(int tar_fd, const char *workspace_dir, const struct engine_manifest *m,
                            uid_t uid, gid_t gid, bool do_chown, struct engine_copyback *ret,
                            struct sbx_error *err)
{
        const struct engine_copyback_caps none = {.max_entries = UINT64_MAX,
                                                  .max_data_bytes = UINT64_MAX};
        return engine_workspace_unpack_capped(tar_fd, workspace_dir, m, uid, gid, do_chown, &none,
                                              ret, err);
}

int engine_workspace_unpack_capped(int tar_fd, const char *workspace_dir,
                                   const struct engine_manifest *m, uid_t uid, gid_t gid,
                                   bool do_chown, const struct engine_copyback_caps *caps,
                                   struct engine_copyback *ret, struct sbx_error *err)
{
        int r = lazy_archive_load(err);

        if (r < 0)
                return r;
        return workspace_unpack(tar_fd, workspace_dir, m, uid, gid, do_chown, caps, ret, err);
}
