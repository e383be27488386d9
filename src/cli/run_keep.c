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

#include "common/cleanup.h"
#include "common/utf8.h"
#include "common/xalloc.h"

/* One sweep (nftw keeps no user pointer). */
static struct {
        const char *const *keep;
        char *const *before, *const *allow;
        char **found;
        size_t n, seen;
} ks;

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
        if (f->level == 0)
                return FTW_CONTINUE;
        for (size_t i = 0; ks.keep[i]; i++) {
                if (fnmatch(ks.keep[i], path + f->base, 0) != 0)
                        continue;
                if (!listed(ks.before, path) && !listed(ks.allow, path)) {
                        ks.found = xrealloc(ks.found, (ks.n + 1) * sizeof(*ks.found));
                        ks.found[ks.n++] = xstrdup(path);
                }
                return flag == FTW_D ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
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

int run_keep_sweep(char *const *allow, const char *const *keep, char *const *before)
{
        int moved = 0, r = 0;

        if (!keep || !keep[0])
                return 0;
        memset(&ks, 0, sizeof(ks));
        ks.keep = keep;
        ks.before = before;
        ks.allow = allow;
        for (size_t i = 0; allow && allow[i]; i++)
                if (nftw(allow[i], keep_one, 32, FTW_PHYS | FTW_ACTIONRETVAL) == 1) {
                        fprintf(stderr,
                                "vestibule: more than %d entries under '%s': the check for "
                                ".git, .envrc, .vscode made during the run is incomplete\n",
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
                                "vestibule: moved aside: '%s' -> '%s': made during the run, and "
                                "git, direnv or an editor would run it on this host; look at it, "
                                "then rename it back if you trust it\n",
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
