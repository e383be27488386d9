/* handin.h - a run's code and workspace into its container and back (handin.c): the private
 * code folder of an engine that sees our files, or the hand-in volumes and the copy-back of
 * one that does not. Private to src/engine. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"
#include "config/config.h"
#include "engine/engine.h"
#include "run/run.h"

struct engine_state;

/* The volume hand-in of one run (a daemon that cannot see our files). */
struct engine_handin {
        char code_vol[64], ws_vol[64];
        const char *vols[2]; /* the ones created, for removal; NULL = none */
        struct engine_manifest manifest;
        unsigned skipped; /* sockets, fifos, devices of the workspace not copied in */
        char *helper;     /* a warm spare's hand-in helper, made at prepare and kept; else NULL */
};

/**
 * engine_code_dir_make() - a private host folder for the code,
 * "/tmp/<ENGINE_CODE_DIR_PREFIX>XXXXXX" (mkdtemp(3), 0700), owned by @uid:@gid when this
 * process is root (the uid the code runs as alone reads it through the bind mount); 0755 when
 * @shared (rootless Docker: the container's uid is a subordinate id here,
 * docs/design/engine.md). It holds EGRESS_SITECUSTOMIZE_NAME (egress.h), 0444, from the start.
 * "<folder>.owner" beside it holds this server's owner label for a
 * later server's sweep. Return: 0 with the path in *@ret_dir (free(); remove with
 * engine_code_dir_remove()), or -errno with @err.
 */
int engine_code_dir_make(uid_t uid, gid_t gid, bool shared, char **ret_dir, struct sbx_error *err);

/** engine_code_dir_remove() - unlink our sitecustomize.py and rmdir(2) the (otherwise emptied)
 * code folder @dir and unlink its
 * "<dir>.owner"; errors are ignored (the next start's sweep). */
void engine_code_dir_remove(const char *dir);

/**
 * engine_code_write() - @req's code as "<@dir>/<script>" (sbx_language_script()), created
 * O_EXCL|O_NOFOLLOW, mode 0600 (0644 when @shared), owned by @uid:@gid when this process is
 * root. Return: 0 with the new path in *@ret_file (free()), or -errno with @err (the partial
 * file is removed).
 */
int engine_code_write(const char *dir, const struct run_request *req, uid_t uid, gid_t gid,
                      bool shared, char **ret_file, struct sbx_error *err);

/**
 * engine_handin_volumes() - at prepare: two volumes labelled with @owner, named
 * engine_volume_name("code"/"ws"), into @h (h->vols lists those made, for removal); on Podman
 * the workspace volume is owned by @uid:@gid through its driver options. Return: 0 or -errno
 * with @err.
 */
int engine_handin_volumes(struct engine_state *st, uid_t uid, gid_t gid, const char *owner,
                          struct engine_handin *h, struct sbx_error *err);

/**
 * engine_handin_fill() - at start: @req's code and a copy of @cfg's workspace (the manifest and
 * the skipped count into @h) into @h's volumes, through a created-never-started helper
 * container of @image (PUT /containers/{id}/archive; Docker refuses archive PUTs into a
 * read-only rootfs or volume, so the run container cannot take them), removed after (h->helper,
 * a spare's, is used and kept); /sandbox/ENGINE_HANDIN_GO (engine.h) goes in last. Return: 0
 * or -errno with @err.
 */
int engine_handin_fill(struct engine_state *st, const struct sbx_config *cfg,
                       const struct run_request *req, const char *image, uid_t uid, gid_t gid,
                       const char *owner, struct engine_handin *h, struct sbx_error *err);

/**
 * engine_handin_helper_make() - for a warm spare on the volume path, at prepare: the helper
 * container of @image with @h's volumes (engine_helper_body(), labelled @owner), STARTED with
 * `sleep @wait_s` as its command (nothing else runs in it; the engine's archive calls into a
 * running container skip mounting its file system: the call's PUT and the copy-back's GET go
 * through it), kept in h->helper (free with engine_handin_helper_remove()) so that the
 * call's engine_handin_fill() puts the archives into it without creating one. Return: 0 or
 * -errno with @err.
 */
int engine_handin_helper_make(struct engine_state *st, const char *image, const char *owner,
                              const char *wait_s, struct engine_handin *h, struct sbx_error *err);

/**
 * engine_handin_check() - before the start: run container @id sees the hand-in through its own
 * mounts (the script, and a top-level entry of the workspace copy), through the archive API.
 * Return: 0; -EIO with @err when the engine did not mount them (nothing is run); another -errno.
 */
int engine_handin_check(struct engine_state *st, const struct run_request *req, const char *id,
                        const struct engine_handin *h, struct sbx_error *err);

/**
 * engine_handin_collect() - after the run: unless @cfg's workspace is read-only, container
 * @id's /workspace back into the host folder, bounded by what went in plus 1 GiB of data,
 * 4 GiB of archive and 100,000 entries (engine_workspace_unpack_capped(), volume.c), owned by
 * @uid:@gid; then the notes on @res: what was not copied back, or not copied in (sockets,
 * FIFOs, devices). Failures become notes, never errors.
 */
void engine_handin_collect(struct engine_state *st, const struct sbx_config *cfg, const char *id,
                           const struct engine_handin *h, uid_t uid, gid_t gid,
                           struct run_result *res);
