/* user_site.c - a Python user site in the workspace. See user_site.h. */
#include "run/user_site.h"

#include <glob.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

bool sbx_workspace_user_site(const struct sbx_config *cfg)
{
        _cleanup_free_ char *pattern = NULL;
        glob_t g = {0};
        bool found;

        if (!cfg->workspace_dir)
                return false;
        pattern = xasprintf("%s/.local/lib/python*/site-packages", cfg->workspace_dir);
        found = glob(pattern, GLOB_ONLYDIR | GLOB_NOSORT, NULL, &g) == 0 && g.gl_pathc > 0;
        globfree(&g);
        return found;
}
