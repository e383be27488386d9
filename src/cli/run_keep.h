/* run_keep.h - after `vestibule-mcp run -- CMD` (without --overlay): the "keep" names of the
 * secrets list (.git, .envrc, .vscode: what git, direnv or an editor on the host runs) that the
 * command created in an --allow folder during the run are moved aside, so the host never runs
 * them under their own name (tests/adversarial/server.md, red team of `run --` #4). Those there
 * at the start were bound read-only and cannot have changed. */
#pragma once

#include <stddef.h>
#include <time.h>

/* The walk stops past this many entries (then every one found so far is still moved, and the
 * incomplete check is said on stderr). */
#define RUN_KEEP_WALK_MAX 200000

/**
 * run_keep_sweep() - walk each @allow folder (NULL-ended, canonical; nftw(3) with FTW_PHYS: no
 * symlink followed) after the run, and rename every entry whose name matches a @keep pattern
 * (fnmatch(3), NULL-ended) and that is not in @before (the paths bound read-only at the start,
 * NULL-ended, may be NULL) nor an @allow folder itself to NAME.vestibule-moved (or
 * NAME.vestibule-moved.N, never replacing anything: renameat2 RENAME_NOREPLACE), saying each on
 * stderr. Also, under any name and in the @allow folders themselves: a folder git would take as
 * a repository (a HEAD, and objects/ and refs/ or a commondir file; git's setup.c
 * is_git_directory()) whose HEAD, config or commondir changed at or after @since (the run's
 * start, wall-clock seconds; by ctime, which the command cannot set back) has its HEAD moved
 * aside the same way: its config (core.fsmonitor, core.worktree) would run a command on the
 * host's next git call there (tests/adversarial/server.md). Only called once the sandbox is gone
 * (init killed every process of the run), so nothing renames under the walk. Return: how many were
 * moved; -1 when one could not be moved or the walk was cut short (said on stderr).
 */
int run_keep_sweep(char *const *allow, const char *const *keep, char *const *before, time_t since);
