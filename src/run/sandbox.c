/* sandbox.c - the lifecycle's steps in order, for one program (sandbox.h). */
#include "run/sandbox.h"

#include "run/backend.h"
#include "run/warden.h"

int sandbox_run_program(const struct sandbox_ops *ops, struct sandbox *sb,
                        const struct run_request *req, struct run_result *res,
                        struct sbx_error *err)
{
        struct sandbox_io io = {.out_fd = -1, .err_fd = -1, .pidfd = -1, .ended_fd = -1};
        struct sandbox_watch w = {.forced = RUN_OUTCOME_NONE};
        struct sbx_error collect_err = {0};
        uint64_t start_ms = sbx_now_ms();
        int r, rc;

        r = ops->start(sb, req, &io, err);
        if (r < 0)
                return r;
        r = warden_watch(req, ops, sb, &io, start_ms, res, &w, err);
        /* collect always follows a start: it reaps; a warden failure stays the answer */
        rc = ops->collect(sb, &w, res, r < 0 ? &collect_err : err);
        return r < 0 ? r : rc;
}

int sandbox_run_once(struct backend *b, const struct run_request *req, struct run_result *res,
                     struct sbx_error *err)
{
        const struct sandbox_ops *ops = b->ops->sandbox;
        struct sandbox_spec spec = {
            .language = req->language,
            .cfg = req->cfg ? req->cfg : b->cfg,
            .mode = SANDBOX_MODE_ONE_SHOT,
        };
        struct sandbox *sb = NULL;
        int r;

        r = ops->prepare(b, &spec, &sb, err);
        if (r < 0)
                return r;
        r = sandbox_run_program(ops, sb, req, res, err);
        ops->destroy(sb);
        return r;
}
