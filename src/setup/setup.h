/* setup.h - `vestibule-mcp setup`: the sandbox root filesystems the native backend runs code in,
 * pulled by digest from their registry (the default: images/pins, or VESTIBULE_IMAGE_*; see
 * registry.h), installed from a rootfs tarball (--from-tar) or built from Debian packages
 * (--from-debian, images/build.sh), unpacked safely with libarchive into
 * VESTIBULE_ROOTFS_DIR/<language>/. A pull is skipped, without any request, when the record
 * names the pinned digest; downloads go to /var/tmp/vestibule-pull-XXXXXX and builds to
 * /var/tmp/vestibule-build-XXXXXX, both removed afterwards (left only by a hard kill).
 * When a container engine answers, --from-tar / --from-debian also import the same tarball
 * into it under the name the container backend runs (engine_step.c; images/README.md).
 *
 * Layout of VESTIBULE_ROOTFS_DIR (default ~/.vestibule/rootfs):
 *   python/          a whole root tree (also used for bash runs)
 *   node/            a whole root tree
 *   python.json      what python/ was installed from: source, sha256, recipe, time, counts
 *   node.json
 *   .setup.lock      flock(2)ed while a setup runs; one setup at a time
 *   .swap.lock       runs hold it shared from opening their tree until it is mounted; setup
 *                    holds it exclusive for the swap (hold.h)
 *   .<lang>.partial-XXXXXX   only while a setup runs (or after a hard kill: the next setup
 *                    removes it)
 *   .<lang>.old-XXXXXX   a replaced tree a running sandbox still has as its /: kept until no
 *                    run holds it, then removed by the next setup or server start
 *                    (setup_rootfs_collect())
 *
 * A rootfs appears only complete: it is unpacked into .<lang>.partial-XXXXXX next to its final
 * place (same filesystem), checked, then swapped in with renameat2(RENAME_EXCHANGE) (or renamed
 * when there was none), and the old tree is deleted afterwards, unless a run holds it (hold.h).
 * A failed, cancelled (SIGINT) or killed setup never leaves a half tree under the name a run
 * uses, and never deletes a tree under a live run.
 *
 * The safety rules of the unpack (each entry of each tarball / OCI layer):
 *   - names with a '..' component or an absolute name: the whole unpack is refused;
 *   - an entry whose parent path contains a symlink (or a non-directory) is refused: nothing is
 *     ever written through a symlink, whatever its target (libarchive's SECURE_SYMLINKS, and our
 *     own walk before each entry); a final component that exists is unlinked, not written into;
 *   - hardlinks: the target must be a relative, '..'-free name inside the tree, reached without
 *     a symlink, else the unpack is refused;
 *   - symlinks are created as they are, absolute or relative targets alike (/etc/alternatives is
 *     full of absolute ones): they are never followed during the unpack, and resolve inside the
 *     tree when it is used through pivot_root. Host-side code that looks into a rootfs must not
 *     follow them either (openat2 RESOLVE_IN_ROOT);
 *   - device nodes, fifos and sockets are skipped and counted; setuid/setgid bits are stripped
 *     and counted; xattrs (file capabilities included), ACLs and file flags are never restored;
 *   - OCI whiteouts: '.wh.NAME' removes NAME from the layers below, '.wh..wh..opq' empties its
 *     directory of what the layers below put there; neither is created;
 *   - ownership: as non-root the files belong to the user running setup (who is the uid the
 *     sandbox runs as, since only that uid is mapped in its user namespace), with u+r added to
 *     every file and u+rx to every directory so the run can read the whole tree; as root the
 *     numeric uid/gid of the tarball are kept (names are never looked up), as a container
 *     engine does, and a run (as VESTIBULE_RUN_AS, unmapped ids seen as nobody) reads through
 *     the "other" permission bits, like a non-root user in a container;
 *   - the mount points a run needs (dev proc sys tmp workspace sandbox) must be real directories
 *     (a symlink there is refused: mounting onto it would follow it on the host) and are created
 *     when missing; the language's interpreter, bash and timeout must be present.
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "rootfs/tree.h" /* setup_remove_tree() */

/* Counters of one unpack, summed over layers. */
struct setup_unpack_stats {
        uint64_t entries;         /* archive entries read */
        uint64_t files;           /* regular files created */
        uint64_t dirs;            /* directories created or updated */
        uint64_t symlinks;        /* symlinks created */
        uint64_t hardlinks;       /* hardlinks created */
        uint64_t skipped_special; /* device nodes, fifos, sockets: not created */
        uint64_t stripped_setid;  /* entries whose setuid/setgid bits were removed */
        uint64_t whiteouts;       /* OCI whiteouts (.wh.NAME and opaque markers) applied */
        uint64_t file_bytes;      /* bytes of regular file data written */
};

/* How to report and when to stop. */
struct setup_opts {
        FILE *progress;    /* progress lines go here; NULL = quiet */
        bool progress_tty; /* true: one self-updating line (\r); false: plain lines */
        /* Set (by a signal handler) to ask a running unpack to stop: it then removes its
         * temporary tree and returns -EINTR. May be NULL. */
        const volatile sig_atomic_t *cancel;
        bool force; /* install even when the recorded sha256 already matches */
};

/**
 * setup_unpack_layer() - unpack one tarball (plain or gzip/xz/zstd/bzip2 compressed) into @dir,
 * applying the safety rules above and OCI whiteouts against what @dir already holds.
 * @dir:             an existing directory, normally a .<lang>.partial-* tree; the process's
 *                   working directory is changed to it during the call and restored after
 *                   (libarchive's secure-path checks work on relative names), so do not call
 *                   it from a multi-threaded process.
 * @tar_path:        the tarball.
 * @label:           names the unpack in progress lines ("python", "layer 2/3").
 * @expected_sha256: 64 lowercase hex digits the tarball's bytes must hash to, or NULL.
 * @ret_sha256:      if not NULL, receives the tarball's sha256 (65 bytes, hex, NUL-terminated).
 * @stats:           counters are added to it (not reset).
 * Return: 0; -EPERM for a refused entry (the message names it and the rule), -EBADMSG for a
 * corrupt or truncated tarball or a sha256 mismatch (naming both digests), -EINTR when
 * cancelled, or another -errno from the filesystem. On failure @dir holds a partial tree that
 * the caller must delete (setup_install() does).
 */
int setup_unpack_layer(const char *dir, const char *tar_path, const char *label,
                       const char *expected_sha256, const struct setup_opts *o,
                       struct setup_unpack_stats *stats, char *ret_sha256, struct sbx_error *err);

/* What to install as one language's rootfs. */
struct setup_source {
        const char *language;            /* "python" or "node" */
        const char *description;         /* recorded as "source", e.g. "tar:/path/python.tar" */
        const char *const *layers;       /* tarballs, applied in order (one for a plain rootfs) */
        const char *const *layer_sha256; /* expected sha256 per layer, or NULL (then computed) */
        size_t n_layers;
        /* The identity compared against the record to skip a second install: a manifest
         * digest, or NULL to use the sha256 of the single layer (hashed first, then checked
         * again while unpacking, so the bytes unpacked are the bytes hashed). */
        const char *identity;
        const char *recipe; /* recorded when built from images/build.sh, else NULL */
};

/**
 * setup_install() - install @src as @rootfs_dir/<language>/ (see the layout above): lock,
 * remove leftovers of a killed setup, skip when <language>.json records the same identity and
 * the tree exists (unless @o->force), else unpack every layer into a new temporary tree, check
 * it, swap it in atomically, write <language>.json, delete the old tree.
 * @rootfs_dir:  absolute; created (0755, with parents) when missing.
 * @ret_skipped: if not NULL, set to true when nothing had to be done.
 * @stats:       if not NULL, receives the unpack counters.
 * Return: 0, or -errno with @err (as setup_unpack_layer(); -EBUSY when another setup holds the
 * lock; -ENOENT when the tree lacks the interpreter, bash or timeout). Nothing half-installed
 * remains on any failure.
 */
int setup_install(const char *rootfs_dir, const struct setup_source *src,
                  const struct setup_opts *o, bool *ret_skipped, struct setup_unpack_stats *stats,
                  struct sbx_error *err);

/**
 * setup_installed_identity() - the identity (and recipe, if any) recorded in
 * @rootfs_dir/<language>.json, provided the tree @rootfs_dir/<language>/ exists too.
 * @ret_identity, @ret_recipe: new strings the caller frees (recipe may be set to NULL).
 * Return: 0, -ENOENT when nothing (complete) is installed, -EBADMSG for an unreadable record.
 */
int setup_installed_identity(const char *rootfs_dir, const char *language, char **ret_identity,
                             char **ret_recipe, struct sbx_error *err);

/**
 * setup_apparmor() - `setup --apparmor`, as root: write the AppArmor profile that grants this
 * binary `userns` (sbx_apparmor_profile_text(); /etc/apparmor.d/vestibule-mcp for the .deb's
 * /usr/bin/vestibule-mcp, which the .deb's postinst puts there and is then only loaded, else
 * /etc/apparmor.d/vestibule-mcp-npm for the binary's real path), then load it with
 * `apparmor_parser -r -W` where AppArmor runs. Says what it did on @out.
 * Needs AppArmor 4's userspace (/etc/apparmor.d/abi/4.0).
 * Return: 0; -EPERM when not root (@err holds the sudo command), -EINVAL for a path a profile
 * cannot attach to, -ENOENT without AppArmor 4 or apparmor_parser, -EIO when loading failed, or the
 * errno of writing the file. See apparmor_parser(8).
 */
int setup_apparmor(FILE *out, struct sbx_error *err);

/**
 * setup_apparmor_hint() - where kernel.apparmor_restrict_unprivileged_userns=1 and this process
 * does not run under its profile, print the one command that installs it (sbx_apparmor_fix())
 * to @out; elsewhere nothing.
 */
void setup_apparmor_hint(FILE *out);

/**
 * setup_readiness_fn - the readiness check setup ends with: print "ready in this terminal's
 * environment: isolation <grade>" or the exact "Blocked:" fix to @out and return 0 (ready) or 1
 * (blocked). The `setup` command passes doctor_readiness_print() (src/cli/cmd_setup.c): setup
 * sits below doctor, which reads setup's pins, so the check is handed down as a parameter.
 */
typedef int (*setup_readiness_fn)(FILE *out);

/**
 * setup_main() - `vestibule-mcp setup [--from-tar FILE --language python|node | --from-debian]
 * [--force] [--rootfs-dir DIR]`; without a source option it pulls the pinned images. --help
 * prints the usage. Reads the settings through config_load() (VESTIBULE_ROOTFS_DIR,
 * VESTIBULE_IMAGE_SOURCE, VESTIBULE_IMAGE_PYTHON/NODE). SIGINT/SIGTERM cancel cleanly.
 * @readiness: the check it ends with (see setup_readiness_fn); NULL: it says the check did not
 * run. Return: the process exit code: 0 done, 1 failed, 2 usage error, 130 interrupted.
 */
int setup_main(int argc, char **argv, setup_readiness_fn readiness);
