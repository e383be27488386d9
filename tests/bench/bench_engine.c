/* bench_engine.c - N print(1) runs through the container backend; prints one wall time in ms
 * per line (the whole ops->run: create, verify, attach/wait, start, exit, remove). Built and
 * run by scripts/bench-engine.sh next to `docker run --rm` with the same flags. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "config/config.h"
#include "engine/engine.h"
#include "run/backend.h"
#include "run/run.h"
#include "workspace/workspace.h"

/* Stand-ins for other modules' functions until they are linked in (weak: real ones win). */
__attribute__((weak)) uint64_t run_stream_append(struct run_stream *s, const void *buf, size_t n,
                                                 size_t cap)
{
        if (s->len < cap) {
                size_t take = cap - s->len < n ? cap - s->len : n;
                s->data = xrealloc(s->data, s->len + take + 1);
                memcpy(s->data + s->len, buf, take);
                s->len += take;
                s->data[s->len] = '\0';
        }
        s->total += n;
        return s->total;
}
__attribute__((weak)) const char *sbx_language_script(enum sbx_language l)
{
        return l == SBX_LANG_NODE ? "main.js" : l == SBX_LANG_BASH ? "main.sh" : "main.py";
}
__attribute__((weak)) int workspace_ensure(const char *dir, struct sbx_error *err)
{
        (void)err;
        return access(dir, F_OK) == 0 ? 0 : -1;
}

static const char *bench_getenv(const char *k)
{
        return getenv(k);
}

int main(int argc, char **argv)
{
        int n = argc > 1 ? atoi(argv[1]) : 30;
        const char *ws = argc > 2 ? argv[2] : "/tmp";
        struct sbx_config cfg = {0};
        struct backend *b = NULL;
        struct sbx_error err = {0};

        cfg.workspace_dir = (char *)ws;
        cfg.runtime = SBX_RUNTIME_AUTO;
        cfg.image_python = (char *)"vestibule/python:bookworm";
        cfg.image_node = (char *)"vestibule/node:bookworm";
        cfg.max_output_bytes = 20000;
        cfg.mem_mb = 256;
        cfg.cpu_pct = 75;
        cfg.pids_max = 64;
        cfg.tmpfs_mb = 64;
        if (geteuid() == 0) {
                cfg.run_as_set = true;
                cfg.run_as_uid = 2000;
                cfg.run_as_gid = 2000;
        }
        if (engine_backend_new_with_env(&cfg, bench_getenv, &b, &err) < 0) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
        }
        for (int i = -2; i < n; i++) { /* two warm-up runs */
                struct run_request req = {.language = SBX_LANG_PYTHON,
                                          .code = "print(1)\n",
                                          .code_len = 9,
                                          .timeout_s = 10,
                                          .cfg = &cfg,
                                          .cancel_fd = -1};
                struct run_result res = {0};
                struct timespec t0, t1;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                int r = b->ops->run(b, &req, &res, &err);
                clock_gettime(CLOCK_MONOTONIC, &t1);
                if (r < 0 || !res.out.data || strcmp(res.out.data, "1\n") != 0) {
                        fprintf(stderr, "run %d failed: %s\n", i, r < 0 ? err.msg : "bad output");
                        return 1;
                }
                if (i >= 0)
                        printf("%.1f\n", (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                                             (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
                free(res.out.data);
                free(res.err.data);
        }
        b->ops->shutdown(b);
        b->ops->destroy(b);
        free(b);
        return 0;
}
