/* run_overlay.h - `vestibule-mcp run --overlay [--apply]`: the host folders that hold each
 * project folder's overlayfs upper and work layers, and what happens to them after the run
 * (listed on stderr, applied with --apply, removed). The mount itself is src/native/spawn.c's
 * (native_host_view.overlay); the listing and applying are src/workspace/overlay.c's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Where the layers go: a disk folder (a tmpfs before Linux 6.6 has no user xattrs, which an
 * unprivileged overlay's whiteouts and opaque folders need), never in the sandbox's view. */
#define RUN_OVERLAY_BASE "/var/tmp"

/**
 * run_overlay_make() - a new private folder RUN_OVERLAY_BASE/vestibule-overlay-XXXXXX holding
 * I/u and I/w for I in 0..@n_dirs-1 (mode 0700, the caller's).
 * @ret_dir: on success a new string (free()); untouched on error.
 * Return: 0, or -1 with the reason on stderr.
 */
int run_overlay_make(size_t n_dirs, char **ret_dir);

/**
 * run_overlay_finish() - after the run: for each @allow[I] (NULL-ended, canonical), list what
 * @dir/I/u holds on stderr (names escaped, sbx_term_escape()); with @apply and @code 0, apply
 * it to @allow[I] (src/workspace/overlay.h says how each kind is applied or refused); then
 * remove @dir.
 * @keep: the secrets list's "keep" patterns (never applied), NULL-ended.
 * Return: @code, or 125 when --apply was asked and not every change could be applied (the
 * reason on stderr).
 */
int run_overlay_finish(const char *dir, char *const *allow, const char *const *keep, bool apply,
                       int code);
