/* handin.c - how a run's code and workspace reach its container: on an engine that sees our
 * files, a private code folder bind-mounted read-only at /sandbox (the workspace is bind-mounted
 * as is); on one that does not (a remote engine), two labelled volumes filled through a helper
 * container's archive API before the start, checked from the run container, and /workspace
 * copied back after the run (bounded). The tar and unpack are volume.c's; see
 * docs/design/engine.md and docs/design/engine-api.md §3. */
#include "engine/handin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "engine/conn.h"
#include "engine/container.h"
#include "engine/state.h"

/* Volume mode's copy-back (issue 12 #25): what went in, plus this much new. File data counts
 * what is written (holes are kept, not counted); the transfer counts the archive itself, in
 * which Docker sends a hole as zeros. */
#define ENGINE_COPYBACK_GROWTH_BYTES (1ull << 30)
#define ENGINE_COPYBACK_TAR_GROWTH_BYTES (4ull << 30)
#define ENGINE_COPYBACK_GROWTH_ENTRIES 100000

/* Next to each code folder, "<folder>.owner" (0600) holds this server's owner label: the
 * start-up sweep of a later server removes the folders of one killed mid-run. The label is
 * kept out of the folder's own name, which the run sees in its mountinfo. */
static void owner_file_write(const char *dir)
{
        char label[160];
        _cleanup_free_ char *path = xasprintf("%s.owner", dir);
        _cleanup_close_ int fd =
            open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 || sbx_owner_label(getpid(), label, sizeof(label)) < 0)
                return;
        (void)!write(fd, label, strlen(label));
}

static void owner_file_remove(const char *dir)
{
        _cleanup_free_ char *path = xasprintf("%s.owner", dir);
        (void)unlink(path);
}

/* "<@dir>/sitecustomize.py" (egress.h, egress_sitecustomize), 0444, owned by this server: the
 * workspace's user site on sys.path without its start-up files. Return 0, or -1 with errno. */
static int sitecustomize_write(const char *dir)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, EGRESS_SITECUSTOMIZE_NAME);
        _cleanup_close_ int fd =
            open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
        size_t len = strlen(egress_sitecustomize);

        if (fd < 0)
                return -1;
        if (fchmod(fd, 0444) < 0 || write(fd, egress_sitecustomize, len) != (ssize_t)len) {
                if (errno == 0)
                        errno = EIO;
                return -1;
        }
        return 0;
}

/* A private host dir holding the code (0700, the script 0600), owned by the uid the code runs
 * as (@uid:@gid), who alone reads it through the bind mount: no other local user can read the
 * code during the run. A server that is not root runs code as itself (or, on rootless Podman,
 * as itself mapped by keep-id), so its own 0700 is already right. @shared (rootless Docker:
 * the container's uid is a subordinate id on this host, which no mode but "others" reaches):
 * 0755/0644 as before, see docs/design/engine.md. */
int engine_code_dir_make(uid_t uid, gid_t gid, bool shared, char **ret_dir, struct sbx_error *err)
{
        _cleanup_free_ char *dir = xstrdup("/tmp/" ENGINE_CODE_DIR_PREFIX "XXXXXX");
        bool give = geteuid() == 0 && uid != 0;

        if (!mkdtemp(dir)) /* 0700 */
                return sbx_fail(err, errno, "cannot create a temp dir for the code: %m");
        owner_file_write(dir);
        if ((give && chown(dir, uid, gid) < 0) || (shared && chmod(dir, 0755) < 0) ||
            sitecustomize_write(dir) < 0) {
                int e = errno;
                engine_code_dir_remove(dir);
                return sbx_fail(err, e, "cannot give the code folder '%s' to %u: %s", dir,
                                (unsigned)uid, strerror(e));
        }
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

/* The script (0600, or 0644 @shared) of @req in @dir, owned by @uid:@gid: the code's file. */
int engine_code_write(const char *dir, const struct run_request *req, uid_t uid, gid_t gid,
                      bool shared, char **ret_file, struct sbx_error *err)
{
        _cleanup_free_ char *file = xasprintf("%s/%s", dir, sbx_language_script(req->language));
        _cleanup_close_ int fd = -1;
        bool give = geteuid() == 0 && uid != 0;
        size_t off = 0;
        int e;

        fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || fchmod(fd, shared ? 0644 : 0600) < 0 || (give && fchown(fd, uid, gid) < 0))
                goto fail;
        while (off < req->code_len) {
                ssize_t n = write(fd, req->code + off, req->code_len - off);
                if (n < 0)
                        goto fail;
                off += (size_t)n;
        }
        *ret_file = TAKE_PTR(file);
        return 0;
fail:
        e = errno;
        if (fd >= 0)
                unlink(file);
        return sbx_fail(err, e, "cannot write the code to '%s': %s", file, strerror(e));
}

void engine_code_dir_remove(const char *dir)
{
        _cleanup_free_ char *sc = xasprintf("%s/%s", dir, EGRESS_SITECUSTOMIZE_NAME);

        (void)unlink(sc);
        rmdir(dir);
        owner_file_remove(dir);
}

static void note_add(struct run_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_add(struct run_result *res, const char *fmt, ...)
{
        char note[sizeof(res->notes)];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(note, sizeof(note), fmt, ap);
        va_end(ap);
        /* one note, one line: a workspace file name holding '\n' is stored escaped */
        run_result_note(res, "%s", note);
}

/* Two labelled volumes, filled through a created-never-started helper container's archive API
 * (docs/design/engine-api.md §3: Docker refuses archive PUTs into a read-only rootfs or volume, so
 * the run container itself cannot take them), then the helper is removed. */
int engine_handin_volumes(struct engine_state *st, uid_t uid, gid_t gid, const char *owner,
                          struct engine_handin *h, struct sbx_error *err)
{
        int r;

        if (engine_volume_name("code", h->code_vol, sizeof(h->code_vol)) < 0 ||
            engine_volume_name("ws", h->ws_vol, sizeof(h->ws_vol)) < 0)
                return sbx_fail(err, EIO, "cannot draw random volume names: getrandom failed");
        r = engine_volume_create(&st->conn, h->code_vol, owner, NULL, err);
        if (r < 0)
                return r;
        h->vols[0] = h->code_vol;
        /* Podman takes the workspace root's owner from the driver option (its archive
         * extraction keeps a "./" entry's owner off the mount point; Docker's gets it from the
         * tar's workspace/ entry) */
        _cleanup_free_ char *ws_owner =
            st->conn.podman ? xasprintf("uid=%u,gid=%u", (unsigned)uid, (unsigned)gid) : NULL;
        r = engine_volume_create(&st->conn, h->ws_vol, owner, ws_owner, err);
        if (r < 0)
                return r;
        h->vols[1] = h->ws_vol;
        return 0;
}

/* At start: the code and a copy of the workspace into the volumes, through a helper (the
 * spare's kept one, else one made and removed here). */
int engine_handin_fill(struct engine_state *st, const struct sbx_config *cfg,
                       const struct run_request *req, const char *image, uid_t uid, gid_t gid,
                       const char *owner, struct engine_handin *h, struct sbx_error *err)
{
        _cleanup_close_ int fd = -1, wfd = -1;
        _cleanup_(json_putp) json_object *body = NULL;
        _cleanup_free_ char *made = NULL;
        const char *helper = h->helper;
        int r;

        fd = engine_tmpfile(err);
        if (fd < 0)
                return fd;
        r = engine_handin_tar(fd, st->conn.podman ? ENGINE_HANDIN_CODE : ENGINE_HANDIN_BOTH,
                              sbx_language_script(req->language), req->code, req->code_len,
                              cfg->workspace_dir, uid, gid, &h->manifest, &h->skipped, err);
        if (r < 0)
                return sbx_wrap(err, "copying the workspace for the engine");
        if (st->conn.podman) {
                wfd = engine_tmpfile(err);
                if (wfd < 0)
                        return wfd;
                r = engine_handin_tar(wfd, ENGINE_HANDIN_WORKSPACE,
                                      sbx_language_script(req->language), req->code, req->code_len,
                                      cfg->workspace_dir, uid, gid, &h->manifest, &h->skipped, err);
                if (r < 0)
                        return sbx_wrap(err, "copying the workspace for the engine");
        }

        if (!helper) {
                body =
                    engine_helper_body(image, h->code_vol, h->ws_vol, owner, st->rootless_podman);
                r = engine_container_create(st, body, image, "create the hand-in helper container",
                                            &made, err);
                if (r < 0)
                        return r;
                helper = made;
        }
        if (st->conn.podman) { /* the code last: its tar ends with ENGINE_HANDIN_GO */
                r = engine_archive_put(&st->conn, helper, "/workspace", wfd, err);
                if (r == 0)
                        r = engine_archive_put(&st->conn, helper, "/sandbox", fd, err);
        } else {
                r = engine_archive_put(&st->conn, helper, "/", fd, err);
        }
        struct sbx_error e2 = {0};
        if (made && container_remove(&st->conn, made, &e2) < 0)
                log_warning("%s (the next start's sweep removes it), ignoring", e2.msg);
        return r;
}

int engine_handin_helper_make(struct engine_state *st, const char *image, const char *owner,
                              const char *wait_s, struct engine_handin *h, struct sbx_error *err)
{
        _cleanup_(json_putp) json_object *body =
            engine_helper_body(image, h->code_vol, h->ws_vol, owner, st->rootless_podman);
        json_object *cmd = json_object_new_array();
        int r;

        /* started, so that the engine's archive calls find its file system mounted */
        json_object_array_add(cmd, json_object_new_string(ENGINE_SLEEP_PATH));
        json_object_array_add(cmd, json_object_new_string(wait_s));
        json_object_object_add(body, "Cmd", cmd);
        r = engine_container_create(st, body, image, "create the spare's hand-in helper",
                                    &h->helper, err);
        return r < 0 ? r : engine_container_start(&st->conn, h->helper, image, err);
}

/* Before start: the run container sees the hand-in through its own mounts (the script, and a
 * top-level entry of the workspace copy that is not a symlink). Without this check an engine that
 * put the archive elsewhere would run nothing useful, and the copy-back would take the empty
 * workspace for deletions. */
int engine_handin_check(struct engine_state *st, const struct run_request *req, const char *id,
                        const struct engine_handin *h, struct sbx_error *err)
{
        _cleanup_free_ char *script = xasprintf("/sandbox/%s", sbx_language_script(req->language));
        int r = engine_archive_stat(&st->conn, id, script, err);

        for (size_t i = 0; r == 0 && i < h->manifest.n; i++) {
                /* not a symlink: Podman's archive stat follows it (a link to a path the
                 * container lacks answered 404 on Podman 4.3 over tcp, 2026-12-02) */
                if (strchr(h->manifest.v[i].rel, '/') || S_ISLNK(h->manifest.v[i].mode))
                        continue;
                _cleanup_free_ char *p = xasprintf("/workspace/%s", h->manifest.v[i].rel);
                r = engine_archive_stat(&st->conn, id, p, err);
                break;
        }
        if (r == -ENOENT) {
                char what[200];
                snprintf(what, sizeof(what), "%.199s", err->msg);
                return sbx_fail(err, EIO,
                                "the container engine at '%s' did not hand the code and workspace "
                                "volumes to the sandbox container (%s), so nothing was run: "
                                "report this with the engine's version",
                                st->conn.ep.host, what);
        }
        return r;
}

/* After the run: the run container's /workspace back into the host folder. */
static void copy_back(struct engine_state *st, const struct sbx_config *cfg, const char *id,
                      const struct engine_handin *h, uid_t uid, gid_t gid, struct run_result *res)
{
        _cleanup_close_ int fd = -1;
        struct sbx_error e = {0};
        struct engine_copyback cb = {0};
        int r;

        /* Bounded: what went in, plus ENGINE_COPYBACK_GROWTH_BYTES of new data (the run can
         * write without limit into its volume, and Docker's archive sends holes as zeros). */
        uint64_t in_bytes = 0;
        for (size_t i = 0; i < h->manifest.n; i++)
                if (S_ISREG(h->manifest.v[i].mode))
                        in_bytes += (uint64_t)h->manifest.v[i].size;
        struct engine_copyback_caps caps = {
            .max_entries = h->manifest.n + ENGINE_COPYBACK_GROWTH_ENTRIES,
            .max_data_bytes = in_bytes + ENGINE_COPYBACK_GROWTH_BYTES,
            .max_tar_bytes = in_bytes + ENGINE_COPYBACK_TAR_GROWTH_BYTES,
        };
        fd = engine_tmpfile(&e);
        r = fd < 0 ? fd
                   : engine_archive_get_max(&st->conn, h->helper ? h->helper : id, "/workspace/.",
                                            fd, caps.max_tar_bytes, &caps.input_cut, &e);
        if (r == 0)
                r = engine_workspace_unpack_capped(fd, cfg->workspace_dir, &h->manifest, uid, gid,
                                                   geteuid() == 0, &caps, &cb, &e);
        if (r < 0) {
                log_warning("workspace copy-back: %s", e.msg);
                note_add(res,
                         "workspace: the run's changes were NOT all copied back from the "
                         "engine (%.300s)",
                         e.msg);
                return;
        }
        log_debug("workspace copy-back: %u files (%u unchanged, kept), %u folders, %u "
                  "symlinks, %u deleted, %u refused",
                  cb.files, cb.kept, cb.dirs, cb.symlinks, cb.deleted, cb.refused);
        if (cb.capped) {
                log_warning("workspace copy-back: %s", cb.cap_note);
                note_add(res,
                         "workspace: NOT all of the run's changes were copied back: %s; nothing "
                         "was deleted",
                         cb.cap_note);
        }
        if (cb.refused)
                note_add(res,
                         "workspace: %u entr%s of the run's workspace not copied back (first: "
                         "%.200s)",
                         cb.refused, cb.refused == 1 ? "y" : "ies", cb.first_refusal);
}

void engine_handin_collect(struct engine_state *st, const struct sbx_config *cfg, const char *id,
                           const struct engine_handin *h, uid_t uid, gid_t gid,
                           struct run_result *res)
{
        if (!cfg->workspace_ro)
                copy_back(st, cfg, id, h, uid, gid, res);
        if (h->skipped)
                note_add(res,
                         "workspace: %u socket%s, fifo%s, device%s or folder%s nested deeper "
                         "than 128 not copied to the remote engine",
                         h->skipped, h->skipped == 1 ? "" : "s", h->skipped == 1 ? "" : "s",
                         h->skipped == 1 ? "" : "s", h->skipped == 1 ? "" : "s");
}
