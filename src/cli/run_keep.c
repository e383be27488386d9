/* run_keep.c - keep names made during a `run -- CMD` moved aside after it. See run_keep.h. */
#include "cli/run_keep.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/utf8.h"
#include "common/xalloc.h"

/* One sweep (nftw keeps no user pointer). */
static struct {
        const char *const *keep;
        char *const *before, *const *allow;
        char **found;
        size_t n, seen;
        time_t since; /* the run's start, less a second: ctimes from then on are the run's */
} ks;

/* @dir/@name exists (not followed); @st gets it. */
static bool has(const char *dir, const char *name, struct stat *st)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);

        return lstat(p, st) == 0;
}

/* @dir is a folder git takes as a repository of its own, whatever its name (git's setup.c,
 * is_git_directory(): a HEAD, and objects/ and refs/ or a commondir file), and its HEAD, config
 * or commondir changed during the run (ctime, which the command cannot set back). Its config
 * (core.fsmonitor, core.hooksPath, core.worktree) would run commands on the host's next git
 * call in or below it. */
static bool git_dir_changed(const char *dir)
{
        struct stat h, o, r, c;
        bool common = has(dir, "commondir", &c);

        if (!has(dir, "HEAD", &h) || !(common || (has(dir, "objects", &o) && S_ISDIR(o.st_mode) &&
                                                  has(dir, "refs", &r) && S_ISDIR(r.st_mode))))
                return false;
        return h.st_ctime >= ks.since || (common && c.st_ctime >= ks.since) ||
               (has(dir, "config", &c) && c.st_ctime >= ks.since);
}

static bool listed(char *const *v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

static int keep_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
        (void)st;
        if (++ks.seen > RUN_KEEP_WALK_MAX)
                return 1;
        for (size_t i = 0; f->level > 0 && ks.keep && ks.keep[i]; i++) {
                if (fnmatch(ks.keep[i], path + f->base, 0) != 0)
                        continue;
                if (!listed(ks.before, path) && !listed(ks.allow, path)) {
                        ks.found = xrealloc(ks.found, (ks.n + 1) * sizeof(*ks.found));
                        ks.found[ks.n++] = xstrdup(path);
                }
                return flag == FTW_D ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
        }
        if (flag == FTW_D && git_dir_changed(path)) {
                ks.found = xrealloc(ks.found, (ks.n + 1) * sizeof(*ks.found));
                ks.found[ks.n++] = xasprintf("%s/HEAD", path);
        }
        return FTW_CONTINUE;
}

/* Rename @path to @path.vestibule-moved[.N], never over anything. 0 or -errno. */
static int move_aside(const char *path, char **ret_to)
{
        for (unsigned k = 0; k < 100; k++) {
                char *to = k ? xasprintf("%s.vestibule-moved.%u", path, k)
                             : xasprintf("%s.vestibule-moved", path);
                if (renameat2(AT_FDCWD, path, AT_FDCWD, to, RENAME_NOREPLACE) == 0) {
                        *ret_to = to;
                        return 0;
                }
                free(to);
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

int run_keep_sweep(char *const *allow, const char *const *keep, char *const *before, time_t since)
{
        int moved = 0, r = 0;

        memset(&ks, 0, sizeof(ks));
        ks.keep = keep;
        ks.before = before;
        ks.allow = allow;
        ks.since = since - 1;
        for (size_t i = 0; allow && allow[i]; i++)
                if (nftw(allow[i], keep_one, 32, FTW_PHYS | FTW_ACTIONRETVAL) == 1) {
                        fprintf(stderr,
                                "vestibule: more than %d entries under '%s': the check for "
                                ".git, .envrc, .vscode and git repositories made during the run "
                                "is incomplete\n",
                                RUN_KEEP_WALK_MAX, allow[i]);
                        r = -1;
                }
        for (size_t i = 0; i < ks.n; i++) {
                _cleanup_free_ char *q = sbx_term_escape(ks.found[i], strlen(ks.found[i]), false);
                _cleanup_free_ char *to = NULL;
                int k = move_aside(ks.found[i], &to);

                if (k == 0) {
                        _cleanup_free_ char *qt = sbx_term_escape(to, strlen(to), false);
                        fprintf(stderr,
                                "vestibule: moved aside: '%s' -> '%s': made or changed during "
                                "the run, and git, direnv or an editor would run it on this host; "
                                "look at it, then rename it back if you trust it\n",
                                q, qt);
                        moved++;
                } else {
                        fprintf(stderr,
                                "vestibule: WARNING: '%s' was made during the run and could not "
                                "be moved aside (%s): remove it before git, direnv or an editor "
                                "runs it\n",
                                q, strerror(-k));
                        r = -1;
                }
                free(ks.found[i]);
        }
        free(ks.found);
        memset(&ks, 0, sizeof(ks));
        return r < 0 ? -1 : moved;
}
