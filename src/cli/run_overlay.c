/* run_overlay.c - the overlay layers of `vestibule-mcp run --overlay`, made before the run and
 * listed, applied (--apply) and removed after it. See run_overlay.h. */
#include "cli/run_overlay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "workspace/overlay.h"

int run_overlay_make(size_t n_dirs, char **ret_dir)
{
        _cleanup_free_ char *dir = xstrdup(RUN_OVERLAY_BASE "/vestibule-overlay-XXXXXX");

        if (!mkdtemp(dir)) {
                fprintf(stderr,
                        "vestibule-mcp run: --overlay: cannot make a folder under " RUN_OVERLAY_BASE
                        ": %s; check that it exists and is writable\n",
                        strerror(errno));
                return -1;
        }
        for (size_t i = 0; i < n_dirs; i++) {
                const char *parts[] = {"", "/u", "/w"};
                for (size_t k = 0; k < 3; k++) {
                        _cleanup_free_ char *p = xasprintf("%s/%zu%s", dir, i, parts[k]);
                        if (mkdir(p, 0700) < 0) {
                                fprintf(stderr,
                                        "vestibule-mcp run: --overlay: cannot make '%s': %s\n", p,
                                        strerror(errno));
                                (void)ws_overlay_remove(dir);
                                return -1;
                        }
                }
        }
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

/* The listing of one folder's changes, on stderr. */
static void print_changes(const char *real, const struct ws_ovl_list *l, const char *state)
{
        _cleanup_free_ char *qr = sbx_term_escape(real, strlen(real), false);

        fprintf(stderr, "vestibule: overlay of %s: %zu change%s%s (%s)\n", qr, l->n,
                l->n == 1 ? "" : "s", l->incomplete ? ", list incomplete" : "", state);
        for (size_t i = 0; i < l->n; i++) {
                const struct ws_ovl_entry *e = &l->v[i];
                _cleanup_free_ char *q = sbx_term_escape(e->path, strlen(e->path), false);

                fprintf(stderr, "vestibule:   %-8s %s%s%s%s\n", ws_ovl_kind_name(e->kind), q,
                        e->type == 'd' ? "/" : (e->type == 'l' ? " (symlink)" : ""),
                        e->why ? ": " : "", e->why ? e->why : "");
        }
}

int run_overlay_finish(const char *dir, char *const *allow, const char *const *keep, bool apply,
                       int code)
{
        int out = code;

        for (size_t i = 0; allow && allow[i]; i++) {
                _cleanup_free_ char *upper = xasprintf("%s/%zu/u", dir, i);
                struct ws_ovl_list l = {0};
                struct sbx_error err = {0};
                size_t applied = 0;
                char state[96];

                if (ws_overlay_changes(upper, allow[i], keep, &l, &err) < 0) {
                        fprintf(stderr, "vestibule-mcp run: %s\n", err.msg);
                        out = apply ? 125 : out;
                        continue;
                }
                if (!apply)
                        snprintf(state, sizeof(state), "not applied; --apply applies them");
                else if (code != 0)
                        snprintf(state, sizeof(state), "not applied: the command ended with %d",
                                 code);
                else
                        snprintf(state, sizeof(state), "applying");
                print_changes(allow[i], &l, state);
                if (apply && code == 0) {
                        if (ws_overlay_apply(upper, allow[i], &l, &applied, &err) < 0) {
                                fprintf(stderr, "vestibule-mcp run: --apply: %s\n", err.msg);
                                out = 125;
                        }
                        fprintf(stderr, "vestibule: overlay: %zu applied\n", applied);
                }
                ws_overlay_list_done(&l);
        }
        if (ws_overlay_remove(dir) < 0)
                fprintf(stderr, "vestibule: overlay: could not remove '%s' in full, ignoring\n",
                        dir);
        return out;
}
