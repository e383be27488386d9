/* run_container.c - `run -- CMD` on the container backend (run_container.h). */
#include "cli/run_container.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "engine/hostrun.h"

int run_container_host(const struct sbx_config *cfg, const struct native_host_req *req,
                       struct native_host_result *res, struct sbx_error *err)
{
        const struct native_host_view *v = &req->view;
        struct engine_host_req q = {
            .system = v->system,
            .rw = v->rw,
            .ro = v->ro,
            .masks = v->masks,
            .home = v->home,
            .cwd = v->cwd,
            .exe = v->exe,
            .argv = req->argv,
            .envp = req->envp,
            .timeout_ms = req->timeout_ms,
            .egress = req->egress,
            .cancel_fd = req->cancel_fd,
        };
        struct engine_host_result r = {0};
        struct sigaction ign = {.sa_handler = SIG_IGN}, old;

        /* the relay writes our stdout: a reader gone (`| head`) is EPIPE there, passed on to
         * the command, not our death by SIGPIPE (which would leave its folder to the sweep) */
        sigaction(SIGPIPE, &ign, &old);
        int rc = engine_host_run(cfg, &q, &r, err);
        sigaction(SIGPIPE, &old, NULL);

        memset(res, 0, sizeof(*res));
        snprintf(res->grade, sizeof(res->grade), "%s", r.grade);
        res->degraded = r.degraded;
        res->exit_code = r.exit_code;
        res->timed_out = r.timed_out;
        res->cancel_signal = r.cancel_signal;
        res->wall_ms = r.wall_ms;
        snprintf(res->tried, sizeof(res->tried), "%s", r.tried);
        return rc;
}
