/* spare.c - the gvisor backend's warm spares: the stamp checked at the hand-over. See
 * spare.h. */
#include "gvisor/spare.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "run/user_site.h"

/* Every setting a gvisor sandbox is built from. */
static void settings_text(const struct sbx_config *cfg, char *buf, size_t size)
{
        struct stat ws = {0};

        if (!cfg->workspace_dir || stat(cfg->workspace_dir, &ws) < 0)
                memset(&ws, 0, sizeof(ws));
        snprintf(buf, size,
                 "workspace=%s ws=%llu:%llu ro=%d rootfs=%s tmpfs_mb=%u max_code_bytes=%zu "
                 "user_site=%d",
                 cfg->workspace_dir ? cfg->workspace_dir : "", (unsigned long long)ws.st_dev,
                 (unsigned long long)ws.st_ino, cfg->workspace_ro,
                 cfg->rootfs_dir ? cfg->rootfs_dir : "", cfg->tmpfs_mb, cfg->max_code_bytes,
                 sbx_workspace_user_site(cfg));
}

int gvisor_spare_stamp_take(const struct sbx_config *cfg, const char *tree_path, const char *grade,
                            unsigned gen, struct gvisor_stamp *ret, struct sbx_error *err)
{
        struct stat tree;

        if (stat(tree_path, &tree) < 0)
                return sbx_fail(err, errno, "cannot stat the rootfs tree '%s': %m", tree_path);
        memset(ret, 0, sizeof(*ret));
        settings_text(cfg, ret->settings, sizeof(ret->settings));
        snprintf(ret->grade, sizeof(ret->grade), "%s", grade);
        ret->probe_gen = gen;
        ret->tree_dev = tree.st_dev;
        ret->tree_ino = tree.st_ino;
        ret->made_ms = sbx_now_ms();
        return 0;
}

int gvisor_spare_stamp_check(const struct gvisor_stamp *st, const struct sbx_config *cfg,
                             const char *tree_path, const char *grade, unsigned gen,
                             struct sbx_error *err)
{
        char now[sizeof(st->settings)];
        uint64_t max_age_ms = (uint64_t)cfg->warm_idle_s * 1500u + 10000u;
        struct stat tree;

        settings_text(cfg, now, sizeof(now));
        if (strcmp(now, st->settings) != 0)
                return sbx_fail(err, ESTALE,
                                "the settings, the workspace or its Python user site changed "
                                "since the spare was built");
        if (stat(tree_path, &tree) < 0 || tree.st_dev != st->tree_dev ||
            tree.st_ino != st->tree_ino)
                return sbx_fail(err, ESTALE,
                                "the rootfs '%s' was replaced (setup) since the spare was built",
                                tree_path);
        if (gen != st->probe_gen || strcmp(grade, st->grade) != 0)
                return sbx_fail(err, ESTALE,
                                "the probe's answer changed since the spare was built ('%s', now "
                                "'%s')",
                                st->grade, grade);
        if (sbx_now_ms() - st->made_ms > max_age_ms)
                return sbx_fail(err, ESTALE, "the spare is older than %llu s",
                                (unsigned long long)(max_age_ms / 1000));
        return 0;
}
