/* sweep.c - the sweep at server start, in a background thread: the code folders in /tmp,
 * the containers and volumes (conn.c) and the run cgroups (hostcg.c) that servers of this
 * host left when they were killed mid-run (docs/design/engine-api.md §5). Apart from conn.c
 * because it uses hostcg.c, which uses conn.c's owner labels. */
#include "engine/conn.h"
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lazy/curl.h"

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "run/backend.h"

/* ---------------------------------------------------------------------------------------- */
/* The sweep at server start                                                                */

struct start_sweep {
        struct sbx_config cfg; /* runtime and engine_env only (deep copies) */
};

static void start_sweep_free(struct start_sweep *s)
{
        struct sbx_engine_env *e = &s->cfg.engine_env;
        char **strs[] = {
            &e->docker_host,      &e->docker_context, &e->docker_config, &e->docker_tls_verify,
            &e->docker_cert_path, &e->container_host, &e->home,          &e->xdg_runtime_dir};
        for (size_t i = 0; i < ELEMENTSOF(strs); i++)
                free(*strs[i]);
        free(s);
}

static int sweep_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
        (void)st;
        (void)f;
        if (flag == FTW_DP)
                (void)rmdir(path);
        else
                (void)unlink(path);
        return 0;
}

/* A code folder @name of a gone server (sbx_owner_gone_each()'s callback): the script and the
 * folder, never following a link; the owner file goes only with its folder (one left, another
 * user's or a file we could not remove, is tried again by the next sweep, never stranded).
 * Return 1 when removed. */
static int sweep_code_dir(int tmp, const char *name, const char *owner_file, void *ud)
{
        char path[300];

        (void)ud;
        snprintf(path, sizeof(path), "/tmp/%s", name);
        /* a run -- CMD folder (hostrun.c) has subfolders: the whole tree, depth first, no link
         * followed (FTW_PHYS), nothing outside it (FTW_MOUNT) */
        (void)nftw(path, sweep_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        if (access(path, F_OK) == 0 || errno != ENOENT)
                return 0;
        (void)unlinkat(tmp, owner_file, 0);
        return 1;
}

/* The code folders in /tmp of servers of this host that are gone (killed mid-run), found by
 * their "<folder>.owner" files. Return how many folders were removed. */
unsigned engine_sweep_code_dirs(void)
{
        return sbx_owner_gone_each(ENGINE_CODE_DIR_PREFIX, sweep_code_dir, NULL);
}

static void *start_sweep_thread(void *p)
{
        struct start_sweep *s = p;
        struct engine_conn c = {0};
        struct sbx_error err = {0};
        char why[160];
        int n;

        unsigned dirs = engine_sweep_code_dirs();
        if (dirs > 0)
                log_info("removed %u code folder(s) of servers that are gone (start-up sweep)",
                         dirs);
        if (engine_connect(&s->cfg, NULL, &c, &err) < 0) {
                log_debug("start-up sweep: %s; nothing swept", err.msg);
                goto out;
        }
        n = engine_sweep(&c, &err);
        if (n > 0)
                log_info("removed %d leftover sandbox container(s) and volume(s) of servers that "
                         "are gone (start-up sweep)",
                         n);
        else if (n < 0)
                log_debug("start-up sweep: %s, ignoring", err.msg);
        else
                log_debug("start-up sweep: nothing left over on '%s'", c.ep.host);
        if (c.ep.local && engine_hostcg_available(why, sizeof(why)) == 0) {
                unsigned k = engine_hostcg_sweep();
                if (k > 0)
                        log_debug("start-up sweep: removed %u run cgroup(s) of gone servers", k);
        }
out:
        start_sweep_free(s);
        return NULL;
}

void engine_sweep_at_start(const struct sbx_config *cfg)
{
        const struct sbx_engine_env *e = &cfg->engine_env;
        struct start_sweep *s;
        struct sbx_error err = {0};
        pthread_attr_t attr;
        pthread_t t;

        /* Only a server set to the container backend: under auto, a host where native wins
         * never talks to the engine nor maps libcurl (docs/BENCHMARKS.md, footprint); there
         * the sweep runs when the container backend is first probed, as before. */
        if (cfg->invalid || cfg->backend != SBX_BACKEND_CONTAINER)
                return;
        if (lazy_curl_load(&err) < 0) {
                log_debug("start-up sweep: %s", err.msg);
                return;
        }
        s = xcalloc(1, sizeof(*s));
        s->cfg.runtime = cfg->runtime;
        s->cfg.backend = cfg->backend;
#define DUP(f) s->cfg.engine_env.f = e->f ? xstrdup(e->f) : NULL
        DUP(docker_host);
        DUP(docker_context);
        DUP(docker_config);
        DUP(docker_tls_verify);
        DUP(docker_cert_path);
        DUP(container_host);
        DUP(home);
        DUP(xdg_runtime_dir);
#undef DUP
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, (size_t)256 << 10);
        if (pthread_create(&t, &attr, start_sweep_thread, s) != 0) {
                log_debug("start-up sweep: cannot start a thread, ignoring");
                start_sweep_free(s);
        }
        pthread_attr_destroy(&attr);
}
