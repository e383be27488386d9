/* chase.h - the one path resolver beneath a root directory, and the one cleaner of archive
 * member names. Everything that opens a path chosen by sandboxed code or by an archive (the
 * workspace reads, the engine's copy-back, setup's image unpack) goes through here, so the
 * checks that keep it beneath the root exist once.
 *
 * Semantics are those of openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS: the path is
 * resolved component by component from @root_fd; '..' may climb back only as far as the root;
 * an absolute path or an absolute symlink target is an escape; proc's magic links
 * (/proc/PID/fd/N, /proc/PID/root, ...) are refused; a symlink whose relative target stays
 * beneath the root is followed (unless SBX_CHASE_NO_SYMLINKS). Where openat2 is missing (ENOSYS:
 * Linux < 5.6, or a seccomp profile that hides it) a walker gives the same answers with one
 * openat(O_PATH | O_NOFOLLOW) per component, keeping an fd for each directory it passed so that
 * '..' goes back to the fd it came from and never asks the kernel for a parent.
 * docs/design/chase.md sets out both paths and what the walker treats as a magic link. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

enum {
        /* Refuse every symlink on the way, the last component included (-ELOOP). */
        SBX_CHASE_NO_SYMLINKS = 1 << 0,
        /* Create a missing directory on the way (with struct sbx_chase_mkdir); the walker
         * only, as openat2 creates nothing. */
        SBX_CHASE_MKDIR = 1 << 1,
        /* Never call openat2: the walker alone (the tests and the fuzz target compare both). */
        SBX_CHASE_WALK = 1 << 2,
};

/* How SBX_CHASE_MKDIR creates a directory: @mode (before the umask); with @chown, then
 * owned by @uid:@gid (fchownat, best effort: a failure leaves it the caller's). */
struct sbx_chase_mkdir {
        mode_t mode;
        uid_t uid;
        gid_t gid;
        bool chown;
};

/* Symlinks followed on one resolution before -ELOOP; the kernel's own limit (MAXSYMLINKS,
 * path_resolution(7)). */
#define SBX_CHASE_MAX_LINKS 40

/**
 * sbx_chase() - open @path beneath the directory @root_fd and never outside it.
 * @root_fd:    an open directory (O_PATH is enough); borrowed, never closed.
 * @path:       relative, NUL-terminated; "." is the root itself; a trailing '/' asks for a
 *              directory. Not "" (-ENOENT, as openat2 says).
 * @flags:      SBX_CHASE_* above.
 * @open_flags: open(2) flags for the last component (O_RDONLY, O_PATH, O_DIRECTORY,
 *              O_NONBLOCK, O_NOFOLLOW, ...); O_CLOEXEC is always added. O_CREAT and
 *              O_TMPFILE are refused (-EINVAL): create through sbx_chase_parent().
 * @mk:         with SBX_CHASE_MKDIR, how to create; else NULL.
 * Return: a new fd (the caller closes it), or a negative errno and nothing open:
 * -EXDEV (an absolute @path, a '..' above the root, an absolute symlink), -ELOOP (a symlink
 * under SBX_CHASE_NO_SYMLINKS or a last component with O_NOFOLLOW, a magic link, more than
 * SBX_CHASE_MAX_LINKS links), -ENOENT, -ENOTDIR, -EINVAL, or what open(2) says.
 * Source: openat2(2), path_resolution(7); docs/design/chase.md.
 */
int sbx_chase(int root_fd, const char *path, unsigned flags, int open_flags,
              const struct sbx_chase_mkdir *mk);

/**
 * sbx_chase_parent() - open the directory that holds @path's last component, beneath
 * @root_fd, for the *at() calls that create, rename or remove that name.
 * @path:     relative, without a trailing '/'; its last component is a name (not "." or "..").
 * @flags:    as for sbx_chase(); with SBX_CHASE_MKDIR the missing parents are created.
 * @ret_base: on success points into @path at its last component; untouched on error.
 * Return: a new O_RDONLY | O_DIRECTORY fd, or a negative errno as sbx_chase() (-EINVAL for a
 * last component that is not a name).
 */
int sbx_chase_parent(int root_fd, const char *path, unsigned flags,
                     const struct sbx_chase_mkdir *mk, const char **ret_base);

/**
 * sbx_path_clean() - an archive member name as a clean relative path: "./" prefixes, empty
 * and "." components dropped, slashes folded ("" = the root itself).
 * @name:    NUL-terminated, as the archive gives it.
 * @ret:     on success a new string (free()); untouched on error.
 * @ret_why: on -EPERM a static phrase naming the reason ("an absolute name", "a '..'
 *           component"); untouched on success.
 * Return: 0, or -EPERM for an absolute name or any '..' component (refused, not resolved: an
 * archive has no business climbing, and refusing keeps the rule one line long).
 * Source: the tar member name rules, libarchive's ARCHIVE_EXTRACT_SECURE_NODOTDOT and
 * ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS (archive_write_disk(3)).
 */
int sbx_path_clean(const char *name, char **ret, const char **ret_why);

/**
 * sbx_path_lexical() - @path made absolute against @cwd (used when @path is relative; absolute
 * itself, else "/" is taken), with empty and "." components dropped and ".." taking back the
 * component before it (never above "/"), by name only: no symlink is looked at, so "docs/.."
 * is "." even when docs is a link. For naming what a path says (a user's --allow-read as
 * typed, a path a sandboxed program passed to open(2) for the audit), never to open it.
 * Return: a new string (free()), "/" or "/a/b" with no trailing '/'. Any input is accepted.
 */
char *sbx_path_lexical(const char *path, const char *cwd);
