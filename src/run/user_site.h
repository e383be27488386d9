/* user_site.h - whether the workspace holds a Python user site (src/run/user_site.c), for the
 * backends that check a warm spare against what it was built from (src/gvisor/spare.c). */
#pragma once

#include <stdbool.h>

#include "config/config.h"

/**
 * sbx_workspace_user_site() - whether @cfg's workspace holds a Python user site
 * (.local/lib/python*\/site-packages: PYTHONUSERBASE=/workspace/.local, src/egress's
 * environment, is where pip installs). Python's site module adds it to sys.path only when it
 * exists as the interpreter starts (docs.python.org/3/library/site.html), so a spare whose
 * interpreter may have started before it appeared (or went) is stale.
 */
bool sbx_workspace_user_site(const struct sbx_config *cfg);
