/* ops.c - the container backend's ops table and its constructor: backend.c's one-program
 * sandboxes and cells.c's sessions, named together here so that backend.c names nothing of
 * cells.c (cells.c builds on backend.c: docs/ARCHITECTURE.md). */
#include "engine/engine.h"
#include "engine/sandbox_int.h"
#include "run/backend.h"
#include "run/sandbox.h"

static const struct backend_ops engine_ops = {
    .name = "container",
    .egress = true,
    .probe = engine_probe,
    .run = sandbox_run_once,
    .sandbox = &engine_sandbox_ops,
    .cells = &engine_cells_ops,
    .shutdown = engine_shutdown,
    .destroy = engine_destroy,
};

int engine_backend_new_with_env(const struct sbx_config *cfg, engine_getenv_fn getenv_fn,
                                struct backend **ret, struct sbx_error *err)
{
        return engine_backend_make(cfg, getenv_fn, &engine_ops, ret, err);
}

int engine_backend_new(const struct sbx_config *cfg, struct backend **ret, struct sbx_error *err)
{
        return engine_backend_new_with_env(cfg, NULL, ret, err); /* cfg->engine_env */
}
