/* stamp.c - what a warm spare was built from, checked again when a call takes it (native.h,
 * "stamp.c"; docs/native.md, "Warm spares"). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "native/native.h"
#include "run/user_site.h"

/* Every setting a native sandbox is built from: paths it binds, sizes of its mounts, its
 * limits, the ids it maps, the code's largest size (/sandbox's size). */
static void settings_text(const struct sbx_config *cfg, char *buf, size_t size)
{
        native_strf(buf, size,
                    "workspace=%s ro=%d rootfs=%s tmpfs_mb=%u pids_max=%u mem_mb=%u cpu_pct=%u "
                    "max_concurrent=%u max_code_bytes=%zu run_as=%d:%u:%u",
                    cfg->workspace_dir ? cfg->workspace_dir : "", cfg->workspace_ro,
                    cfg->rootfs_dir ? cfg->rootfs_dir : "", cfg->tmpfs_mb, cfg->pids_max,
                    cfg->mem_mb, cfg->cpu_pct, cfg->max_concurrent, cfg->max_code_bytes,
                    cfg->run_as_set, (unsigned)cfg->run_as_uid, (unsigned)cfg->run_as_gid);
}

int native_stamp_take(const struct sbx_config *cfg, int tree_fd, const char *grade, unsigned gen,
                      struct native_stamp *ret, struct sbx_error *err)
{
        struct stat ws, tree;

        if (stat(cfg->workspace_dir, &ws) < 0)
                return sbx_fail(err, errno, "cannot stat the workspace '%s': %m",
                                cfg->workspace_dir);
        if (tree_fd < 0 || fstat(tree_fd, &tree) < 0)
                return sbx_fail(err, EBADF, "the rootfs tree is not held");
        memset(ret, 0, sizeof(*ret));
        settings_text(cfg, ret->settings, sizeof(ret->settings));
        ret->ws_dev = ws.st_dev;
        ret->ws_ino = ws.st_ino;
        ret->tree_dev = tree.st_dev;
        ret->tree_ino = tree.st_ino;
        ret->probe_gen = gen;
        ret->user_site = sbx_workspace_user_site(cfg);
        native_strf(ret->grade, sizeof(ret->grade), "%s", grade);
        return 0;
}

int native_stamp_check(const struct native_stamp *st, const struct sbx_config *cfg,
                       const char *tree_path, const char *grade, unsigned gen,
                       struct sbx_error *err)
{
        char now[sizeof(st->settings)];
        struct stat ws, tree;

        settings_text(cfg, now, sizeof(now));
        if (strcmp(now, st->settings) != 0)
                return sbx_fail(err, ESTALE, "the settings changed since the spare was built");
        if (stat(cfg->workspace_dir, &ws) < 0 || ws.st_dev != st->ws_dev || ws.st_ino != st->ws_ino)
                return sbx_fail(err, ESTALE,
                                "the workspace folder '%s' is not the one the spare bound",
                                cfg->workspace_dir);
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
        if (sbx_workspace_user_site(cfg) != st->user_site)
                return sbx_fail(err, ESTALE,
                                "the workspace's Python user site (.local, where pip installs) "
                                "appeared or went since the spare was built: its interpreter "
                                "would not see it");
        return 0;
}
