/* backend.c - the container backend: one fresh locked-down container per sandbox on Docker or
 * Podman through the Engine API. This file holds the sandbox lifecycle only (src/run/sandbox.h):
 * prepare (the engine ready: probe.c; sweep leftovers; the code folder or volumes: handin.c;
 * create and verify the engine's answer: container.c; a session's runner: cells.c; a spare
 * started: spare.c), start (hand the code in, arm attach + wait in one curl_multi, start),
 * supervise (the warden pumps that multi as its stream source), collect (exit, OOM, usage,
 * copy-back), destroy (removal in the background); both ops tables (one program, sessions) and
 * the constructor. */
#include "engine/engine.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/trace.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "engine/cells.h"
#include "engine/conn.h"
#include "engine/container.h"
#include "engine/ctrcg.h"
#include "engine/handin.h"
#include "engine/probe.h"
#include "engine/spare.h"
#include "engine/state.h"
#include "run/backend.h"
#include "run/run.h"
#include "run/runners.h"
#include "run/sandbox.h"
#include "run/warden.h"
#include "workspace/workspace.h"

/* The server's own clock ends a run at its deadline (the warden's). The in-container `timeout`
 * wrapper is only the backstop for a server that died mid-run: it fires this much later, so it
 * never decides an outcome the server is there to see (its exit statuses 124/137 are also ones
 * the code can choose), and stopping it (SIGSTOP) cannot stretch a run. */
#define ENGINE_INNER_BACKSTOP_S 2
/* The kill at the deadline waits this long past it: a program that ended just before its
 * deadline is not killed (and called timed out) only because the engine's answer to the wait
 * was still on its way (container teardown + wait: 50-150 ms measured on Docker 20.10). */
#define ENGINE_DEADLINE_SLACK_MS 250
#define ENGINE_KILL_WAIT_MS 2000 /* after our kill: the longest wait for the stream's end */
#define ENGINE_DRAIN_MS 2000     /* after exit, the attach stream must end within this */
/* A warm spare (spare.h): its in-container backstop counts from the container's start, so it
 * gets VESTIBULE_WARM_IDLE_S more, plus this margin; start() refuses a spare older than the
 * idle time plus half of it, so the backstop left at the hand-over is never under a run's. */
#define ENGINE_SPARE_MARGIN_S 10
#define ENGINE_SPARE_READY_MS 5000 /* at the hand-over: the interpreter's open() of its FIFO */

/* The uid:gid code runs as. Never root. */
static int run_ids(const struct backend *b, const struct engine_state *st, uid_t *uid, gid_t *gid,
                   struct sbx_error *err)
{
        /* Rootless Podman: keep-id maps our uid to itself inside; the service runs as us. */
        if (!st->rootless_podman && geteuid() == 0) {
                if (!b->cfg->run_as_set || b->cfg->run_as_uid == 0)
                        return sbx_fail(err, EPERM,
                                        "this server runs as root and never runs code as root: set "
                                        "VESTIBULE_RUN_AS=uid:gid to an unprivileged user, "
                                        "then restart the server");
                *uid = b->cfg->run_as_uid;
                *gid = b->cfg->run_as_gid;
        } else if (st->rootless_docker) {
                /* Rootless Docker maps the container's uid 0 to the user running it (us) and
                 * every other uid to a subordinate id here that cannot reach our 0700 folders
                 * and pipes: 0:0 inside is our own uid, as keep-id is on Podman. CapDrop ALL and
                 * no-new-privileges (checked in inspect) leave it no capability in the engine's
                 * user namespace. https://docs.docker.com/engine/security/rootless/ */
                *uid = 0;
                *gid = 0;
                return 0;
        } else {
                *uid = geteuid();
                *gid = getegid();
        }
        if (*uid == 0)
                return sbx_fail(err, EPERM, "refusing to run code as uid 0");
        return 0;
}

static const char *image_for(const struct sbx_config *cfg, enum sbx_language l)
{
        return engine_image_for(cfg, sbx_language_name(l));
}

static int engine_probe(struct backend *b, struct backend_probe *ret, struct sbx_error *err)
{
        struct engine_state *st = b->state;
        struct sbx_error e = {0};
        char have[8];
        uid_t uid = (uid_t)-1; /* set by run_ids() */
        gid_t gid = (gid_t)-1;
        int r;

        memset(ret, 0, sizeof(*ret));
        r = engine_probe_ready(st, b->cfg, &e);
        if (r == 0)
                r = run_ids(b, st, &uid, &gid, &e);
        if (r == 0)
                r = engine_image_label(&st->conn, image_for(b->cfg, SBX_LANG_PYTHON),
                                       "vestibule.image", have, sizeof(have), &e);
        if (r == 0)
                r = engine_image_label(&st->conn, image_for(b->cfg, SBX_LANG_NODE),
                                       "vestibule.image", have, sizeof(have), &e);
        if (r < 0) {
                ret->usable = false;
                snprintf(ret->blocked, sizeof(ret->blocked), "%s", e.msg);
                if (err)
                        *err = e;
                return 0;
        }
        pthread_mutex_lock(&st->lock);
        if (!st->warned_unpinned) {
                st->warned_unpinned = true;
                const char *imgs[] = {image_for(b->cfg, SBX_LANG_PYTHON),
                                      image_for(b->cfg, SBX_LANG_NODE)};
                for (size_t i = 0; i < ELEMENTSOF(imgs); i++)
                        if (!strstr(imgs[i], "@sha256:"))
                                log_warning("sandbox image '%s' is not pinned to a digest: what "
                                            "runs can change when the tag moves; pin it "
                                            "(name@sha256:...) for reproducible runs",
                                            imgs[i]);
        }
        ret->usable = true;
        ret->degraded = strncmp(st->grade, "container-degraded", 18) == 0;
        snprintf(ret->grade, sizeof(ret->grade), "%s", st->grade);
        pthread_mutex_unlock(&st->lock);
        return 0;
}

static void set_not_measured(struct run_measure *m, const char *why)
{
        m->measured = false;
        snprintf(m->why, sizeof(m->why), "%s", why);
}

/* ---------------------------------------------------------------------------------------- */
/* The sandbox lifecycle (src/run/sandbox.h): one created, checked container per sandbox    */

struct sandbox {
        struct backend *b;
        struct engine_state *st;
        const struct sbx_config *cfg;
        enum sbx_language language;
        uid_t uid;
        gid_t gid;
        /* the engine's state when prepared (under st->lock, then ours) */
        char owner[160], grade[320], cgroup[128], usage_why[160], seccomp_profile[512];
        char runtime[72]; /* VESTIBULE_CONTAINER_RUNTIME as probed; "" = the engine's */
        char runtime_fifo_why[240], runtime_uds_why[240]; /* what it refuses (state.h) */
        bool volumes, hostcg, podman, rootless_docker;
        char image[256];
        const char *interp;
        /* the spec's network: RUN_NETWORK_ALLOWLIST = the code waits for its relay to the
         * proxy's socket, which start() makes in the code folder (egress_listen.c) */
        enum run_network network;
        char relay_py[1024], relay_js[1024]; /* the relay's sources (egress_relay_source()) */
        char wait_sh[640];                   /* the wait script (egress_relay_wait_script()) */
        struct egress_session *egress; /* the run's proxy, from start to collect (or destroy) */
        struct engine_egress_stream *estream; /* remote engine: the bridge's exec stream */
        unsigned backstop_s; /* the in-container `timeout`'s, from the longest timeout */
        char degraded[128];  /* limits the engine did not keep */
        char *code_dir, *code_file;
        struct engine_handin hv;
        char *id;                /* the run container, once created */
        int kmsg_fd, kmsg_r;     /* Podman: the kernel log, for its OOM kills */
        struct engine_ctrcg ccg; /* Podman with a parent cgroup: the container's own, polled */
        uint64_t memory_bytes;
        /* supervision: the warden's thread pumps; kill() may come from any thread */
        pthread_mutex_t lock;
        bool supervising; /* attach + wait armed, the container started */
        bool exited;      /* the wait answered: nothing left to kill */
        bool kill_wanted; /* kill() asked while it ran */
        bool killed_sync; /* kill() killed it itself (not supervised) */
        struct engine_xfers rx;
        struct sandbox_stream stream;
        uint64_t t_kill;
        struct sbx_trace trace; /* the phases' times (VESTIBULE_TRACE), prepare to destroy */
        /* SANDBOX_MODE_CELLS through the cells ops: the session's runner (cells.c) */
        bool session;
        struct engine_cells *cells;
        /* a warm spare (spare.h): started in prepare, its interpreter blocked on @fifo (on
         * the volume path: a bash waiting for its hand-in, hv.helper kept for it) */
        bool spare;
        bool handed;   /* start() was called: a second hand-over is refused */
        bool building; /* counted in st->building until prepare() returns (engine_shutdown()) */
        char *fifo;
        struct engine_spare_stamp stamp;
        uint64_t cpu_before_us; /* the run's cgroup CPU at the hand-over (the start-up's) */
};

static void sandbox_destroy(struct sandbox *sb);

/* What cells.c reads of @sb now (cells.h), into @ret; the pointers are @sb's. Return @ret. */
static const struct engine_sb_view *sb_view(struct sandbox *sb, struct engine_sb_view *ret)
{
        *ret = (struct engine_sb_view){.conn = &sb->st->conn,
                                       .cfg = sb->cfg,
                                       .language = sb->language,
                                       .id = sb->id,
                                       .code_dir = sb->code_dir,
                                       .cgroup = sb->cgroup,
                                       .usage_why = sb->usage_why,
                                       .image = sb->image,
                                       .uid = sb->uid,
                                       .gid = sb->gid,
                                       .podman = sb->podman,
                                       .volumes = sb->volumes,
                                       .rootless_docker = sb->rootless_docker,
                                       .memory_bytes = sb->memory_bytes};
        return ret;
}

/* The engine's state for one sandbox: ready, the run's ids, the grade and settings as of now. */
static int sandbox_snapshot(struct sandbox *sb, struct sbx_error *err)
{
        struct engine_state *st = sb->st;
        int r;

        r = engine_probe_ready(st, sb->b->cfg, err);
        if (r == 0)
                r = run_ids(sb->b, st, &sb->uid, &sb->gid, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&st->lock);
        bool shutting = st->shutting_down;
        sb->volumes = st->volumes;
        snprintf(sb->grade, sizeof(sb->grade), "%s", st->grade);
        snprintf(sb->runtime, sizeof(sb->runtime), "%s", st->runtime);
        snprintf(sb->runtime_fifo_why, sizeof(sb->runtime_fifo_why), "%s", st->runtime_fifo_why);
        snprintf(sb->runtime_uds_why, sizeof(sb->runtime_uds_why), "%s", st->runtime_uds_why);
        snprintf(sb->owner, sizeof(sb->owner), "%s", st->owner);
        if (st->hostcg)
                engine_hostcg_name(st->owner, ++st->run_seq, sb->cgroup, sizeof(sb->cgroup));
        sb->hostcg = st->hostcg;
        snprintf(sb->usage_why, sizeof(sb->usage_why), "%s", st->usage_why);
        sb->podman = st->conn.podman;
        sb->rootless_docker = st->rootless_docker;
        snprintf(sb->seccomp_profile, sizeof(sb->seccomp_profile), "%s", st->seccomp_profile);
        if (!shutting) /* the exit sweep waits for this prepare() (engine_shutdown()) */
        {
                st->building++;
                sb->building = true;
        }
        pthread_mutex_unlock(&st->lock);
        if (shutting)
                return sbx_fail(err, ESHUTDOWN, "the server is shutting down: nothing was run");
        if (sb->seccomp_profile[0] && access(sb->seccomp_profile, R_OK) < 0) {
                /* removed since the probe (a cleaned runtime dir): write it again, or refuse */
                r = engine_seccomp_profile_again(st, sb->seccomp_profile,
                                                 sizeof(sb->seccomp_profile), err);
                if (r < 0)
                        return r;
        }
        /* the runs' cgroups on the host: not readable by other local users (made 0700 at
         * every run: the engine recreates the top 0755 if it was removed meanwhile) */
        if (sb->hostcg)
                engine_hostcg_private_top();
        return 0;
}

/* The sweep before each sandbox; an engine that is gone is said now rather than half-way. */
static int sandbox_sweep(struct engine_state *st, struct sbx_error *err)
{
        struct sbx_error e2 = {0};

        if (engine_sweep(&st->conn, &e2) >= 0)
                return 0;
        if (e2.code == ECONNREFUSED || e2.code == ENOENT || e2.code == EACCES) {
                /* connect and read /info again next time: it may come back changed */
                pthread_mutex_lock(&st->lock);
                st->ready = false;
                pthread_mutex_unlock(&st->lock);
                *err = e2;
                return -e2.code;
        }
        log_debug("%s, ignoring", e2.msg);
        return 0;
}

/* The longest command and environment of a run container (with their NULL). */
#define SANDBOX_CMD_MAX 12
#define SANDBOX_ENV_MAX 32

/* The create body of @sb's run container. */
static json_object *sandbox_body(struct sandbox *sb, struct engine_run_spec *spec,
                                 const char *cmd[SANDBOX_CMD_MAX], const char *env[SANDBOX_ENV_MAX],
                                 char timeout_arg[16], char script[64])
{
        struct engine_state *st = sb->st;
        const struct sbx_config *cfg = sb->cfg;

        snprintf(script, 64, "/sandbox/%s", sbx_language_script(sb->language));
        snprintf(timeout_arg, 16, "%u", sb->backstop_s);
        const char *plain[] = {ENGINE_TIMEOUT_PATH, "--kill-after=1", timeout_arg,
                               sb->interp,          script,           NULL};
        /* network "allowlist": the relay starts, and the code once the relay listens
         * (egress_listen.c); on a remote engine the server's exec starts the bridge, the code
         * waits for it (egress_stream.c; the relays' sources are "" there) */
        const char *waiting[] = {
            ENGINE_TIMEOUT_PATH,
            "--kill-after=1",
            timeout_arg,
            ENGINE_BASH_PATH,
            "-c",
            sb->volumes
                ? engine_egress_wait_bridge_script(EGRESS_PORT, sb->wait_sh, sizeof(sb->wait_sh))
                : egress_relay_wait_script(EGRESS_PORT, sb->wait_sh, sizeof(sb->wait_sh)),
            "vestibule-egress",
            sb->relay_py,
            sb->relay_js,
            sb->interp,
            script,
            NULL};
        static_assert(sizeof(waiting) <= SANDBOX_CMD_MAX * sizeof(char *), "cmd too short");
        if (sb->network == RUN_NETWORK_ALLOWLIST)
                memcpy(cmd, waiting, sizeof(waiting));
        else
                memcpy(cmd, plain, sizeof(plain));
        if (sb->cells) /* a session: the runner, no backstop (it lives across calls) */
                engine_cells_cmd(sb->cells, sb->language, sb->interp, cmd, SANDBOX_CMD_MAX);
        else if (sb->spare && sb->volumes) /* it waits for its hand-in's marker (spare.h) */
                (void)engine_spare_wait_cmd(cmd, SANDBOX_CMD_MAX, timeout_arg);
        /* after ours: the proxy variables (allowlist only), pip's and npm's persistence
         * (egress_sandbox_env()), PATH with pip's scripts */
        size_t n_env = 0;
        for (const char *const *e = egress_sandbox_env(sb->network);
             *e && n_env < SANDBOX_ENV_MAX - 2; e++)
                env[n_env++] = *e;
        env[n_env++] = EGRESS_SANDBOX_PATH;
        env[n_env] = NULL;
        /* Docker: our generated profile as JSON (the API takes the profile itself); Podman:
         * the path of the one derived from its default. None on an engine without seccomp
         * (the grade says so). */
        const char *secprof = sb->seccomp_profile[0] ? sb->seccomp_profile : NULL;
        if (!sb->podman && !strstr(sb->grade, "no seccomp filter"))
                secprof = st->seccomp_json;
        *spec = (struct engine_run_spec){
            .image = sb->image,
            .cmd = cmd,
            .uid = sb->uid,
            .gid = sb->gid,
            .workspace = cfg->workspace_dir,
            .workspace_ro = cfg->workspace_ro,
            .code_dir = sb->code_dir,
            .workspace_volume = sb->volumes ? sb->hv.ws_vol : NULL,
            .code_volume = sb->volumes ? sb->hv.code_vol : NULL,
            .memory_bytes = sb->memory_bytes,
            .nano_cpus = (uint64_t)cfg->cpu_pct * 10000000ull,
            .pids_max = cfg->pids_max,
            .tmpfs_mb = cfg->tmpfs_mb,
            .owner = sb->owner,
            .podman = sb->podman,
            .userns_keep_id = st->rootless_podman,
            .init = !sb->cells, /* a session's command is its own pid 1 (cells.c) */
            .open_stdin = sb->cells && sb->volumes, /* its cells and lifeline (cells.c) */
            .cgroup_parent = *sb->cgroup ? sb->cgroup : NULL,
            .runtime = *sb->runtime ? sb->runtime : NULL,
            .seccomp_profile = secprof,
            .extra_env = env,
        };
        return engine_create_body(spec);
}

/* Create the run container and check the engine's view of it, option by option. */
static int sandbox_create(struct sandbox *sb, struct sbx_error *err)
{
        struct engine_run_spec spec;
        const char *cmd[SANDBOX_CMD_MAX], *env[SANDBOX_ENV_MAX];
        char timeout_arg[16], script[64];
        _cleanup_(json_putp) json_object *body =
            sandbox_body(sb, &spec, cmd, env, timeout_arg, script);
        _cleanup_(json_putp) json_object *inspect = NULL;
        int r;

        r = engine_container_create(sb->st, body, sb->image, "create the sandbox", &sb->id, err);
        sbx_trace_lap(&sb->trace, "create");
        if (r < 0)
                return r;
        r = engine_container_inspect(sb->st, sb->id, spec.userns_keep_id, &inspect, err);
        if (r == 0)
                r = engine_verify_inspect(inspect, &spec, sb->degraded, sizeof(sb->degraded), err);
        if (r == 0) {
                const char *image_id = json_object_get_string(engine_jget(inspect, "Image"));
                if (image_id && sb->spare)
                        snprintf(sb->stamp.image_id, sizeof(sb->stamp.image_id), "%s",
                                 strncmp(image_id, "sha256:", 7) == 0 ? image_id + 7 : image_id);
                r = engine_container_programs_check(sb->st, sb->id,
                                                    image_id && *image_id ? image_id : sb->image,
                                                    sb->image, sb->interp, err);
        }
        sbx_trace_lap(&sb->trace, "inspect_verify");
        return r;
}

/* What a sandbox of @sb's spec cannot be here, said before anything is made: a spare with a
 * network; and the allowlist's relay (a local engine: a remote one gets the bridge by exec,
 * egress_stream.c). */
static int prepare_refusals(struct sandbox *sb, struct sbx_error *err)
{
        if (sb->spare && sb->network != RUN_NETWORK_NONE)
                return sbx_fail(err, EINVAL, "a warm spare is built for network \"none\" only");
        if ((sb->session || sb->spare) && *sb->runtime_fifo_why)
                return sbx_fail(err, EOPNOTSUPP, "%s on the container runtime '%s': %s",
                                sb->session ? "no sessions" : "no warm spare", sb->runtime,
                                sb->runtime_fifo_why);
        if (sb->network == RUN_NETWORK_ALLOWLIST && *sb->runtime_uds_why)
                return sbx_fail(err, EOPNOTSUPP,
                                "network \"allowlist\" on the container runtime '%s': %s; or use "
                                "network \"none\"",
                                sb->runtime, sb->runtime_uds_why);
        /* the relay in the image's own interpreter: python3 where there is one (both our
         * images), else node (egress_relay_wait_script() picks) */
        if (sb->network == RUN_NETWORK_ALLOWLIST && !sb->volumes &&
            (egress_relay_source("python3", ENGINE_EGRESS_SOCK_IN, EGRESS_PORT, sb->relay_py,
                                 sizeof(sb->relay_py)) < 0 ||
             egress_relay_source("node", ENGINE_EGRESS_SOCK_IN, EGRESS_PORT, sb->relay_js,
                                 sizeof(sb->relay_js)) < 0))
                return sbx_fail(err, ENOSPC, "egress: the relay's source does not fit");
        return 0;
}

/* Whether the server is shutting down, said as an error: nothing more is made for a sandbox
 * then (the exit sweep comes after its prepare() returns, engine_shutdown()). */
static int still_on(struct sandbox *sb, struct sbx_error *err)
{
        pthread_mutex_lock(&sb->st->lock);
        bool shutting = sb->st->shutting_down;
        pthread_mutex_unlock(&sb->st->lock);
        return shutting ? sbx_fail(err, ESHUTDOWN, "the server is shutting down: nothing was run")
                        : 0;
}

/* A prepare() counted by sandbox_snapshot() is over: the exit sweep may go on. */
static void building_done(struct engine_state *st, bool counted)
{
        if (!counted)
                return;
        pthread_mutex_lock(&st->lock);
        st->building--;
        pthread_cond_broadcast(&st->removed);
        pthread_mutex_unlock(&st->lock);
}

/* A session on the volume path: the runner's source as the "code" of the hand-in (the same
 * /sandbox/<script> a local engine's code folder holds) and the workspace's copy, into the
 * volumes before the start, checked through the container's own mounts. */
static int cells_handin(struct sandbox *sb, struct sbx_error *err)
{
        struct run_request req = {.language = sb->language};
        size_t len;
        int r;

        req.code = sbx_runner_source(sb->language, &len);
        req.code_len = len;
        r = engine_handin_fill(sb->st, sb->cfg, &req, sb->image, sb->uid, sb->gid, sb->owner,
                               &sb->hv, err);
        if (r == 0)
                r = engine_handin_check(sb->st, &req, sb->id, &sb->hv, err);
        sbx_trace_lap(&sb->trace, "handin");
        return r;
}

/* What prepare() makes on the engine, each step only while the server is not shutting down: a
 * container made after the exit sweep would mount by name volumes the sweep removed, and Docker
 * would make them again (engine_volume_options()). */
static int sandbox_make(struct sandbox *sb, enum sandbox_mode mode, struct sbx_error *err)
{
        struct engine_sb_view v;
        int r;

        r = still_on(sb, err);
        if (r == 0)
                r = sb->volumes
                        ? engine_handin_volumes(sb->st, sb->uid, sb->gid, sb->owner, &sb->hv, err)
                        : engine_code_dir_make(sb->uid, sb->gid, sb->rootless_docker, &sb->code_dir,
                                               err);
        if (r == 0)
                r = still_on(sb, err);
        if (r == 0 && sb->spare && sb->volumes) {
                char wait_s[16]; /* the helper goes with its spare, under the same backstop */
                snprintf(wait_s, sizeof(wait_s), "%u", sb->backstop_s);
                r = engine_handin_helper_make(sb->st, sb->image, sb->owner, wait_s, &sb->hv, err);
        } else if (r == 0 && sb->spare)
                r = engine_spare_fifo_make(sb->code_dir, sbx_language_script(sb->language), sb->uid,
                                           sb->gid, sb->rootless_docker, &sb->fifo, err);
        sbx_trace_lap(&sb->trace, sb->volumes ? "handin_volumes" : "code_dir");
        if (r == 0 && mode == SANDBOX_MODE_CELLS)
                r = engine_cells_new(sb_view(sb, &v), &sb->cells, err);
        if (r == 0)
                r = still_on(sb, err);
        if (r == 0)
                r = sandbox_create(sb, err);
        if (r == 0 && sb->cells && sb->volumes)
                r = cells_handin(sb, err);
        if (r == 0 && sb->cells)
                r = engine_cells_launch(sb_view(sb, &v), sb->cells, err);
        if (r == 0 && sb->spare)
                r = engine_spare_start(&sb->st->conn, sb->id, sb->cfg, sb->image, sb->grade,
                                       &sb->rx, &sb->stamp, &sb->trace, err);
        return r;
}

/* prepare() of both ops tables: @session when through the cells ops (a CELLS spec through the
 * one-program ops is refused). */
static int sandbox_prepare(struct backend *b, const struct sandbox_spec *spec, bool session,
                           struct sandbox **ret, struct sbx_error *err)
{
        struct sandbox *sb = xcalloc(1, sizeof(*sb));
        struct engine_sb_view v;
        int r;

        sb->session = session;

        if (spec->mode != SANDBOX_MODE_ONE_SHOT && spec->mode != SANDBOX_MODE_CELLS) {
                free(sb);
                return sbx_fail(err, EOPNOTSUPP,
                                "the container backend runs one program per sandbox");
        }
        sb->b = b;
        sb->st = b->state;
        sb->cfg = spec->cfg;
        sb->language = spec->language;
        sb->network = spec->network;
        sb->spare = spec->spare;
        sb->kmsg_fd = -1;
        sb->kmsg_r = -ENOENT;
        pthread_mutex_init(&sb->lock, NULL);
        sb->backstop_s =
            (sb->cfg->max_timeout_s ? sb->cfg->max_timeout_s : 60) + ENGINE_INNER_BACKSTOP_S;
        if (sb->spare) /* it waits for its call under the same backstop (spare.h) */
                sb->backstop_s +=
                    sb->cfg->warm_idle_s + sb->cfg->warm_idle_s / 2 + ENGINE_SPARE_MARGIN_S;
        sb->memory_bytes = (uint64_t)sb->cfg->mem_mb << 20;
        sbx_trace_begin(&sb->trace, sb->cfg->trace_timing,
                        sb->spare ? "container-spare" : "container");
        snprintf(sb->image, sizeof(sb->image), "%s", image_for(sb->cfg, spec->language));
        sb->interp = engine_interp_for(sb->image, spec->language);
        r = sandbox_snapshot(sb, err);
        struct engine_state *st = sb->st; /* @sb may be gone below */
        bool sb_building = sb->building;
        if (r == 0 && spec->mode == SANDBOX_MODE_CELLS)
                r = sb->session
                        ? engine_cells_check(sb_view(sb, &v), err)
                        : sbx_fail(err, EOPNOTSUPP, "container sandbox: cells without their steps");
        if (r == 0)
                r = prepare_refusals(sb, err);
        sbx_trace_lap(&sb->trace, "prepare");
        if (r == 0)
                r = sandbox_sweep(sb->st, err);
        if (r == 0)
                r = workspace_ensure(sb->cfg->workspace_dir, err);
        sbx_trace_lap(&sb->trace, "sweep");
        if (r == 0)
                r = sandbox_make(sb, spec->mode, err);
        if (r < 0)
                sandbox_destroy(sb); /* its removal is counted before building_done() */
        building_done(st, sb_building);
        if (r < 0)
                return r;
        *ret = sb;
        return 0;
}

/* The stream source's fds: curl's sockets, and a wake at least every 100 ms (a kill() from
 * another thread is carried out at the next pump; a socket past FD_SETSIZE, which
 * curl_multi_fdset leaves out, is served at that pace too). */
static unsigned engine_stream_fds(void *userdata, struct pollfd *fds, unsigned max, int *timeout_ms)
{
        struct sandbox *sb = userdata;

        return engine_xfers_fds(&sb->rx, fds, max, timeout_ms);
}

/* Perform the run's transfers: output to the warden, the kill when one was asked for, and
 * whether the program and its output are over. */
static unsigned engine_stream_pump(void *userdata, sandbox_emit_fn emit, void *emit_userdata)
{
        struct sandbox *sb = userdata;
        struct engine_xfers *rx = &sb->rx;
        uint64_t now = sbx_now_ms();
        unsigned flags = 0;

        pthread_mutex_lock(&sb->lock);
        bool kill = sb->kill_wanted;
        pthread_mutex_unlock(&sb->lock);
        pthread_mutex_lock(&sb->st->lock);
        kill |= sb->st->shutting_down; /* a server without a registry (run once) stops too */
        pthread_mutex_unlock(&sb->st->lock);
        if (kill && !sb->t_kill && !rx->wait.done) {
                /* The kill goes through the same multi: the stream keeps being drained
                 * meanwhile (Podman's kill blocks while the container is stuck writing to an
                 * unread attach). */
                struct sbx_error ke = {0};
                if (engine_xfers_kill(rx, &sb->st->conn, sb->id, &ke) < 0)
                        log_debug("kill %.12s: %s", sb->id, ke.msg);
                sb->t_kill = now;
                log_debug("run %.12s: stopping", sb->id);
        }
        if (*sb->ccg.mem)
                (void)engine_ctrcg_poll(&sb->ccg, now); /* rate-limited: floods pump often */
        rx->a.emit = emit;
        rx->a.emit_userdata = emit_userdata;
        engine_xfers_pump(rx);
        rx->a.emit = NULL;
        if (rx->wait.done) {
                pthread_mutex_lock(&sb->lock);
                sb->exited = true;
                pthread_mutex_unlock(&sb->lock);
        }
        /* After our kill the stream's end (or the kill's answer) says the container is gone;
         * Podman's compat wait can take seconds to answer after a kill, and nothing waits on it
         * past a short bound: the forced removal finishes the container in any case. */
        bool kill_over = sb->t_kill && ((rx->attach.done && (rx->wait.done || rx->kill.done)) ||
                                        now - sb->t_kill > ENGINE_KILL_WAIT_MS);
        if (rx->wait.done || kill_over)
                flags |= SANDBOX_STREAM_ENDED;
        /* output past our kill is not wanted: no drain after it */
        if (rx->attach.done || kill_over || (rx->wait.done && sb->t_kill))
                flags |= SANDBOX_STREAM_EOF;
        return flags;
}

/* Podman never reports OOM kills: the kernel's log will (hostcg.c). Opened before the
 * program's start, positioned at its end. */
static void kmsg_open(struct sandbox *sb)
{
        if (!sb->podman)
                return;
        sb->kmsg_fd = engine_kmsg_open();
        if (sb->kmsg_fd < 0)
                log_debug("cannot read the kernel log (%s): Podman's OOM kills are reported as "
                          "likely only",
                          strerror(-sb->kmsg_fd));
}

/* The engine's stats are the container's own only where its memory and pids limits hold (a
 * cgroup of its own): rootless Podman on cgroup v1 has none and answers with the host's
 * figures (2.5 GiB, cpu 0, no pids: measured here). Not wanted either where the host's cgroup
 * is read (a root server: hostcg.c's exact figures). */
static bool stats_wanted(const struct sandbox *sb)
{
        static const char *const limits[] = {"memory", "pids"};

        if (*sb->cgroup)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(limits); i++)
                if (strstr(sb->grade, limits[i]) || strstr(sb->degraded, limits[i]))
                        return false;
        return true;
}

/* The program runs: the warden pumps the run's multi from now on, its clock from @start_ms.
 * Without the host's cgroups (not root, or an engine elsewhere) the engine's stats stream is
 * read beside attach and wait: the container's cgroup is gone once it exits (stats.c). */
static void supervise_from(struct sandbox *sb, uint64_t start_ms, struct sandbox_io *ret_io)
{
        struct sbx_error e = {0};

        if (stats_wanted(sb) && engine_xfers_stats(&sb->rx, &sb->st->conn, sb->id, &e) < 0)
                log_debug("run %.12s: no usage from the engine: %s", sb->id, e.msg);
        /* Podman's monitor shares the parent: the container's own folder, polled while it
         * lives, gives its peaks (Podman's cgroupfs manager names it libpod-<id>) */
        if (*sb->cgroup && sb->podman) {
                _cleanup_free_ char *leaf = xasprintf("libpod-%s", sb->id);
                int r = engine_ctrcg_at(&sb->ccg, sb->cgroup, leaf);
                if (r < 0)
                        log_debug("run %.12s: the container's own cgroup is not read (%s)", sb->id,
                                  strerror(-r));
        }
        pthread_mutex_lock(&sb->lock);
        sb->supervising = true;
        pthread_mutex_unlock(&sb->lock);
        sb->stream = (struct sandbox_stream){
            .fds = engine_stream_fds, .pump = engine_stream_pump, .userdata = sb};
        *ret_io = (struct sandbox_io){
            .out_fd = -1,
            .err_fd = -1,
            .pidfd = -1,
            .ended_fd = -1,
            .stream = &sb->stream,
            .start_ms = start_ms,
            .grace_ms = ENGINE_DEADLINE_SLACK_MS,
            .drain_ms = ENGINE_DRAIN_MS,
        };
}

/* A spare is used only if everything it was built from is so now, and it still waits. */
static int spare_fresh(struct sandbox *sb, struct sbx_error *err)
{
        struct engine_state *st = sb->st;
        /* + 1 s: VESTIBULE_WARM_IDLE_S=0 still lets a spare the keeper has not dropped yet
         * run (its backstop has ENGINE_SPARE_MARGIN_S more) */
        uint64_t max_age_ms =
            ((uint64_t)sb->cfg->warm_idle_s + sb->cfg->warm_idle_s / 2 + 1) * 1000u;
        char grade[sizeof(st->grade)], image_id[sizeof(sb->stamp.image_id)];
        bool ready, shutting;
        int r;

        pthread_mutex_lock(&st->lock);
        ready = st->ready;
        shutting = st->shutting_down;
        snprintf(grade, sizeof(grade), "%s", st->grade);
        pthread_mutex_unlock(&st->lock);
        if (shutting)
                return sbx_fail(err, ESHUTDOWN, "the server is shutting down: nothing was run");
        if (!ready)
                return sbx_fail(err, ESTALE,
                                "the container engine is probed again since the spare was built");
        /* a setup may have re-tagged the image: one inspect of it per hand-over */
        r = engine_spare_image_id(&st->conn, sb->image, image_id, sizeof(image_id), err);
        if (r == -ENOENT)
                return sbx_fail(err, ESTALE, "the image '%s' is gone since the spare was built",
                                sb->image);
        if (r == 0)
                r = engine_spare_check(&sb->stamp, sb->cfg, sb->image, image_id, grade, max_age_ms,
                                       err);
        if (r < 0)
                return r;
        return engine_spare_waiting(&sb->rx, err);
}

/* A spare on the volume path: the code and the workspace copy into its volumes through the
 * kept helper (the marker last: the spare starts nothing before it sees it), the wake-up
 * (spare.h, engine_spare_wait_cmd()), then the check that the spare sees its volumes, while its
 * program starts. A spare that does not see them never sees the marker either: it ran nothing
 * when the check finds them missing (the caller's destroy removes it, as after any failed
 * start). */
static int spare_handin(struct sandbox *sb, const struct run_request *req, struct sbx_error *err)
{
        struct engine_state *st = sb->st;
        int r = engine_handin_fill(st, sb->cfg, req, sb->image, sb->uid, sb->gid, sb->owner,
                                   &sb->hv, err);

        sbx_trace_lap(&sb->trace, "handin");
        if (r == 0 && engine_spare_nudge(&st->conn, sb->id, err) < 0) {
                char why[sizeof(err->msg)]; /* it no longer runs: the service makes its own */
                snprintf(why, sizeof(why), "%s", err->msg);
                r = sbx_fail(err, ESTALE, "%s", why);
        }
        sbx_trace_lap(&sb->trace, "handover");
        if (r == 0)
                r = engine_handin_check(st, req, sb->id, &sb->hv, err);
        sbx_trace_lap(&sb->trace, "handin_check");
        return r;
}

/* start() of a spare: check it, then hand the code over through its FIFO (spare.h), or on the
 * volume path through its volumes. */
static int spare_handover(struct sandbox *sb, const struct run_request *req,
                          struct sandbox_io *ret_io, struct sbx_error *err)
{
        struct run_usage before = {0};
        uint64_t t0;
        int r;

        /* the request path's trace starts here; the spare's setup was traced apart */
        sbx_trace_end(&sb->trace);
        sbx_trace_begin(&sb->trace, sb->cfg->trace_timing, "container");
        r = spare_fresh(sb, err);
        sbx_trace_lap(&sb->trace, "spare_check");
        if (r < 0)
                return r;
        kmsg_open(sb);
        /* the run's CPU counts from the hand-over: the interpreter's start-up is not its */
        if (*sb->cgroup) {
                engine_hostcg_read(sb->cgroup, sb->podman, &before);
                sb->cpu_before_us = before.cpu_us.measured ? before.cpu_us.value : 0;
        }
        t0 = sbx_now_ms();
        if (sb->volumes) {
                r = spare_handin(sb, req, err);
                if (r < 0) /* nothing of the code ran (no marker, or no wake-up) */
                        return r;
                supervise_from(sb, t0, ret_io);
                return 0;
        }
        r = engine_spare_handover(sb->fifo, req->code, req->code_len, sb->uid, sb->gid,
                                  sb->rootless_docker, ENGINE_SPARE_READY_MS,
                                  t0 + (uint64_t)req->timeout_s * 1000u, err);
        sbx_trace_lap(&sb->trace, "handover");
        if (r == -ENXIO) { /* nothing of the code ran: the service builds its own sandbox */
                char why[sizeof(err->msg)];
                snprintf(why, sizeof(why), "%s", err->msg);
                return sbx_fail(err, ESTALE, "%s", why);
        }
        if (r < 0)
                return r;
        supervise_from(sb, t0, ret_io);
        return 0;
}

static int sandbox_start(struct sandbox *sb, const struct run_request *req,
                         struct sandbox_io *ret_io, struct sbx_error *err)
{
        struct engine_state *st = sb->st;
        int r;

        if (sb->handed)
                return sbx_fail(err, EALREADY,
                                "this sandbox ran a program already; a sandbox runs one program "
                                "and is never handed a second");

        /* Fail closed: the network is the sandbox's (its command waits for a listener or
         * not), never another than the call asked for. */
        if (req->network != sb->network)
                return sbx_fail(err, EINVAL,
                                "container sandbox: prepared for network \"%s\", the call asks "
                                "for \"%s\"",
                                sb->network == RUN_NETWORK_ALLOWLIST ? "allowlist" : "none",
                                req->network == RUN_NETWORK_ALLOWLIST ? "allowlist" : "none");
        if (req->language != sb->language)
                return sbx_fail(err, EINVAL, "container sandbox: start() of another language");
        sb->handed = true;
        if (sb->spare)
                return spare_handover(sb, req, ret_io, err);
        r = sb->volumes ? engine_handin_fill(st, sb->cfg, req, sb->image, sb->uid, sb->gid,
                                             sb->owner, &sb->hv, err)
                        : engine_code_write(sb->code_dir, req, sb->uid, sb->gid,
                                            sb->rootless_docker, &sb->code_file, err);
        if (r == 0 && sb->volumes)
                r = engine_handin_check(st, req, sb->id, &sb->hv, err);
        sbx_trace_lap(&sb->trace, sb->volumes ? "handin" : "code");
        if (r == 0 && sb->network == RUN_NETWORK_ALLOWLIST) {
                /* the proxy on its socket in the code folder, before the container starts: its
                 * relay connects there (egress_listen.c). Fail closed: on error destroy()
                 * removes the container unrun. */
                r = sb->volumes
                        ? engine_egress_stream_proxy(sb->cfg, &sb->estream, &sb->egress, err)
                        : engine_egress_begin(sb->code_dir, sb->cfg, &sb->egress, err);
                sbx_trace_lap(&sb->trace, "egress");
        }
        if (r < 0)
                return r;
        kmsg_open(sb);
        r = engine_xfers_arm(&sb->rx, &st->conn, sb->id, err);
        sbx_trace_lap(&sb->trace, "arm_attach_wait");
        if (r == 0)
                r = engine_container_start(&st->conn, sb->id, sb->image, err);
        sbx_trace_lap(&sb->trace, "start");
        if (r == 0 && sb->estream) {
                /* the bridge by exec, as another uid; its code waits for it. Fail closed: on
                 * error destroy() kills the container before its code ran */
                r = engine_egress_stream_attach(sb->estream, &st->conn, sb->id, sb->uid, err);
                sbx_trace_lap(&sb->trace, "egress_bridge");
        }
        if (r < 0)
                return r;
        supervise_from(sb, sbx_now_ms(), ret_io);
        return 0;
}

/* kill(): while the warden pumps, the kill leg goes into its multi at the next pump; before
 * the start (a spare) or after it, a request of its own. Nothing once the wait answered. */
static void sandbox_kill(struct sandbox *sb)
{
        pthread_mutex_lock(&sb->lock);
        bool now = !sb->exited && !sb->supervising && sb->id && !sb->killed_sync;
        if (!sb->exited)
                sb->kill_wanted = true;
        if (now)
                sb->killed_sync = true;
        pthread_mutex_unlock(&sb->lock);
        if (now)
                engine_container_kill(&sb->st->conn, sb->id);
}

/* The exit status: the wait's answer, else (a run not stopped) the inspect's; and the engine's
 * OOM verdict. Return 0, or -EIO when the result is unknown. */
static int collect_exit(struct sandbox *sb, const struct sandbox_watch *w, int *ret_exit,
                        bool *ret_oom, bool *ret_wait_ok, struct sbx_error *err)
{
        struct engine_xfers *rx = &sb->rx;
        _cleanup_(json_putp) json_object *inspect = NULL;
        struct sbx_error e3 = {0};
        json_object *sc;
        bool wait_ok = false;

        *ret_oom = false;
        *ret_exit = 0;
        if (rx->wait.done && rx->wait.rc == 0 &&
            json_object_object_get_ex(rx->wait.rep.json, "StatusCode", &sc)) {
                wait_ok = true;
                *ret_exit = json_object_get_int(sc);
        }
        /* A run we stopped has its outcome already: no inspect, which on Podman can block
         * while the kill is carried out. */
        if (w->forced == RUN_OUTCOME_NONE && !sb->t_kill &&
            engine_container_inspect(sb->st, sb->id, false, &inspect, &e3) == 0) {
                json_object *state = engine_jget(inspect, "State");
                *ret_oom = json_object_get_boolean(engine_jget(state, "OOMKilled"));
                if (!wait_ok && engine_jget(state, "ExitCode") &&
                    !json_object_get_boolean(engine_jget(state, "Running"))) {
                        *ret_exit = json_object_get_int(engine_jget(state, "ExitCode"));
                        wait_ok = true;
                }
        }
        *ret_wait_ok = wait_ok;
        if (!wait_ok && w->forced == RUN_OUTCOME_NONE && !sb->t_kill)
                return sbx_fail(err, EIO,
                                "%s: the run's result is unknown; check the container engine (it "
                                "may have stopped) and retry",
                                rx->wait.done ? rx->wait.err.msg
                                              : "the engine gave no exit status");
        return 0;
}

/* The engine answered the stats leg with 200 (rootless Podman on cgroup v1 refuses it), or
 * samples came: its figures, or their absence, mean something. */
static bool stats_answered(struct engine_xfers *rx)
{
        struct engine_leg *l = &rx->stats;

        if (!l->x)
                return false;
        if (rx->st.samples > 0)
                return true;
        return engine_xfer_headers_done(l->x) && engine_xfer_status(l->x) == 200 &&
               !(l->done && l->rc < 0);
}

/* Usage from the run's parent cgroup, else from the engine's stats samples (stats.c); and
 * Podman's OOM kills from the kernel's log. */
static void collect_usage(struct sandbox *sb, bool stopped, bool *oom, struct run_result *res)
{
        const struct sbx_config *cfg = sb->cfg;

        if (*sb->ccg.mem)
                (void)engine_ctrcg_poll(&sb->ccg, 0); /* a last look: mostly gone by now */
        if (*sb->cgroup) {
                engine_hostcg_read(sb->cgroup, sb->podman, &res->usage);
                if (sb->podman) /* the polls' peaks, lower bounds; and a refused fork */
                        engine_ctrcg_usage(&sb->ccg, cfg->pids_max, &res->usage, res->limits_hit,
                                           sizeof(res->limits_hit));
                /* a spare: its interpreter's start-up, before the hand-over, is not the run's */
                if (res->usage.cpu_us.measured)
                        res->usage.cpu_us.value = res->usage.cpu_us.value > sb->cpu_before_us
                                                      ? res->usage.cpu_us.value - sb->cpu_before_us
                                                      : 0;
                /* the parent holds the container only (Docker): a peak at the cap means a
                 * fork was refused there */
                if (res->usage.pids_peak.measured && cfg->pids_max &&
                    res->usage.pids_peak.value >= cfg->pids_max)
                        snprintf(res->limits_hit, sizeof(res->limits_hit),
                                 "pids (the cap of %u was reached)", cfg->pids_max);
        } else if (stats_answered(&sb->rx)) {
                engine_stats_usage(&sb->rx.st,
                                   sb->spare ? "a warm spare's container CPU holds its "
                                               "interpreter's start-up, which the engine's "
                                               "samples cannot tell apart"
                                             : NULL,
                                   &res->usage);
                /* a sample at the cap: a fork was refused there (a sample seen, not a guess) */
                if (res->usage.pids_peak.measured && cfg->pids_max &&
                    res->usage.pids_peak.value >= cfg->pids_max)
                        snprintf(res->limits_hit, sizeof(res->limits_hit),
                                 "pids (the cap of %u was reached)", cfg->pids_max);
        } else {
                set_not_measured(&res->usage.cpu_us, sb->usage_why);
                set_not_measured(&res->usage.mem_peak_bytes, sb->usage_why);
                set_not_measured(&res->usage.pids_peak, sb->usage_why);
        }
        /* Podman never says: did the kernel OOM-kill something of this container? (Any exit
         * status: a child may have been killed while the program went on.) */
        if (!*oom && sb->podman && !stopped && sb->kmsg_fd >= 0) {
                sb->kmsg_r = engine_kmsg_find_oom(sb->kmsg_fd, sb->id);
                *oom = sb->kmsg_r == 1;
        }
}

/* The outcome of a run the warden did not stop (or whose deadline kill came too late). */
static void collect_outcome(struct sandbox *sb, int exit_code, bool oom, struct run_result *res)
{
        bool limits_applied = !strstr(sb->grade, "memory") && !strstr(sb->degraded, "memory");

        if (oom && exit_code == 137) {
                /* the main program was the one killed (timeout exits 128 + SIGKILL) */
                res->outcome = RUN_OUTCOME_SIGNALED;
                res->term_signal = SIGKILL;
                res->oom_killed = true;
        } else if (oom) {
                /* another process of the run was OOM-killed; the program's own exit stands */
                res->outcome = RUN_OUTCOME_EXITED;
                res->exit_code = exit_code;
                res->oom_killed = true;
        } else if ((exit_code == 124 || exit_code == 137) &&
                   res->usage.wall_ms >= (uint64_t)sb->backstop_s * 1000u) {
                /* the backstop wrapper fired: only possible when the server's own kill at the
                 * deadline did not land (the code cannot run that long otherwise) */
                res->outcome = RUN_OUTCOME_TIMED_OUT;
        } else if (exit_code == 137 && sb->podman && limits_applied && sb->kmsg_r < 0) {
                /* Podman never reports OOM kills (docs/design/engine-api.md §7) and the kernel's
                 * log could not be read (or lost records): say what we know. */
                res->outcome = RUN_OUTCOME_SIGNALED;
                res->term_signal = SIGKILL;
                snprintf(res->notes, sizeof(res->notes),
                         "killed by SIGKILL before its deadline; Podman does not report "
                         "out-of-memory kills, and the %u MiB memory cap is the likely cause",
                         sb->cfg->mem_mb);
        } else {
                res->outcome = RUN_OUTCOME_EXITED;
                res->exit_code = exit_code;
        }
}

/* The workspace back (volumes), the notes, and the grade the run had. */
static void collect_finish(struct sandbox *sb, struct run_result *res)
{
        if (sb->volumes)
                engine_handin_collect(sb->st, sb->cfg, sb->id, &sb->hv, sb->uid, sb->gid, res);
        /* "container" or "container (runtime ...)": the limits the engine dropped, after the
         * runtime's words */
        size_t rt = strncmp(sb->grade, "container (", 11) == 0 ? strlen(sb->grade) - 12 : 0;
        if (*sb->degraded &&
            (strcmp(sb->grade, "container") == 0 || strncmp(sb->grade, "container (", 11) == 0))
                snprintf(res->isolation, sizeof(res->isolation),
                         "container-degraded (%.*s%slimits not applied: %s: the engine did not "
                         "keep them)",
                         (int)rt, sb->grade + 11, rt ? "; " : "", sb->degraded);
        else
                snprintf(res->isolation, sizeof(res->isolation), "%s", sb->grade);
}

static int sandbox_collect(struct sandbox *sb, const struct sandbox_watch *w,
                           struct run_result *res, struct sbx_error *err)
{
        struct engine_xfers *rx = &sb->rx;
        int exit_code = 0, r;
        bool oom = false, wait_ok = false;
        enum run_outcome forced = w->forced;

        snprintf(res->backend, sizeof(res->backend), "container");
        snprintf(res->image, sizeof(res->image), "%s", sb->image);
        sbx_trace_lap(&sb->trace, "wait_stream");
        if (sb->egress) { /* the container has exited or been killed: its connections are done */
                sb->estream = engine_egress_stream_end(sb->estream);
                egress_session_finish(TAKE_PTR(sb->egress), &res->egress);
                engine_egress_end(sb->code_dir);
        }
        r = collect_exit(sb, w, &exit_code, &oom, &wait_ok, err);
        sbx_trace_lap(&sb->trace, "collect_inspect");
        if (r < 0)
                return r;
        /* Our deadline kill found the container no longer running (409), or the container
         * did not end by our SIGKILL (its status is not 128 + 9): the program had ended by
         * itself just before, its exit status stands. */
        bool ended_itself = false;
        if (forced == RUN_OUTCOME_TIMED_OUT && wait_ok &&
            ((rx->kill.done && rx->kill.rep.status == 409) || exit_code != 137)) {
                log_debug("run %.12s: ended by itself before the deadline kill", sb->id);
                forced = RUN_OUTCOME_NONE;
                ended_itself = true;
        }
        collect_usage(sb, forced != RUN_OUTCOME_NONE || sb->t_kill, &oom, res);
        res->mem_limit_bytes = sb->memory_bytes;
        if (rx->a.proto_error)
                snprintf(res->notes, sizeof(res->notes),
                         "output cut: the engine's output stream lost its framing");
        if (forced != RUN_OUTCOME_NONE)
                res->outcome = forced;
        /* killed from outside the warden (the server shuts down); not our deadline kill that
         * came after the program's own end (t_kill is set by that kill too) */
        else if (sb->t_kill && !ended_itself)
                res->outcome = RUN_OUTCOME_CANCELLED;
        else
                collect_outcome(sb, exit_code, oom, res);
        collect_finish(sb, res);
        sbx_trace_lap(&sb->trace, "usage_copy_back");
        return 0;
}

/* destroy(): the container, its volumes and parent cgroup go in the background (shutdown waits
 * for them); the code folder here. */
static void sandbox_destroy(struct sandbox *sb)
{
        if (!sb)
                return;
        engine_cells_free(TAKE_PTR(sb->cells)); /* its files out of the code folder */
        if (sb->egress) {
                /* started but never collected: kill the container first (its connections
                 * end with it), then the proxy; its decisions go nowhere */
                struct run_result dropped = {0};
                sandbox_kill(sb);
                sb->estream = engine_egress_stream_end(sb->estream);
                egress_session_finish(TAKE_PTR(sb->egress), &dropped.egress);
                run_result_done(&dropped);
        }
        if (sb->network == RUN_NETWORK_ALLOWLIST)
                engine_egress_end(sb->code_dir); /* a socket left by a failed start */
        engine_xfers_done(&sb->rx);
        if (sb->id || sb->hv.helper || sb->hv.vols[0] || sb->hv.vols[1] || *sb->cgroup)
                engine_container_remove_later(sb->st, sb->id, sb->hv.helper, sb->cgroup,
                                              sb->hv.vols);
        sbx_trace_lap(&sb->trace, "remove_dispatch");
        engine_manifest_done(&sb->hv.manifest);
        if (sb->code_file)
                unlink(sb->code_file);
        if (sb->fifo) /* the FIFO, or the code in its place after the hand-over */
                unlink(sb->fifo);
        if (sb->code_dir)
                engine_code_dir_remove(sb->code_dir);
        if (sb->kmsg_fd >= 0)
                close(sb->kmsg_fd);
        free(sb->code_file);
        free(sb->fifo);
        free(sb->code_dir);
        free(sb->id);
        free(sb->hv.helper);
        sbx_trace_lap(&sb->trace, "finish");
        sbx_trace_end(&sb->trace);
        pthread_mutex_destroy(&sb->lock);
        free(sb);
}

static int sandbox_prepare_one(struct backend *b, const struct sandbox_spec *spec,
                               struct sandbox **ret, struct sbx_error *err)
{
        return sandbox_prepare(b, spec, false, ret, err);
}

static const struct sandbox_ops sandbox_ops = {
    .prepare = sandbox_prepare_one,
    .start = sandbox_start,
    .kill = sandbox_kill,
    .collect = sandbox_collect,
    .destroy = sandbox_destroy,
};

/* ---------------------------------------------------------------------------------------- */
/* Sessions (SANDBOX_MODE_CELLS): the same sandbox, running cells.c's runner between calls     */

static int cells_prepare(struct backend *b, const struct sandbox_spec *spec, struct sandbox **ret,
                         struct sbx_error *err)
{
        if (spec->mode != SANDBOX_MODE_CELLS)
                return sbx_fail(err, EOPNOTSUPP, "container cells ops serve sessions only");
        /* fail closed: a session's container has no egress listener */
        if (spec->network != RUN_NETWORK_NONE)
                return sbx_fail(err, EOPNOTSUPP,
                                "network \"allowlist\" is not available in a session");
        return sandbox_prepare(b, spec, true, ret, err);
}

static int cells_start(struct sandbox *sb, const struct run_request *req, struct sandbox_io *ret_io,
                       struct sbx_error *err)
{
        struct engine_sb_view v;

        return engine_cells_start(sb_view(sb, &v), sb->cells, req, ret_io, err);
}

static void cells_kill(struct sandbox *sb)
{
        struct engine_sb_view v;

        engine_cells_kill(sb_view(sb, &v), sb->cells);
}

static bool cells_alive(struct sandbox *sb)
{
        return engine_cells_alive(sb->cells);
}

static void cells_interrupt(struct sandbox *sb)
{
        struct engine_sb_view v;

        engine_cells_interrupt(sb_view(sb, &v), sb->cells);
}

static int cells_collect(struct sandbox *sb, const struct sandbox_watch *w, struct run_result *res,
                         struct sbx_error *err)
{
        struct engine_sb_view v;

        (void)err;
        engine_cells_collect(sb_view(sb, &v), sb->cells, w, res);
        collect_finish(sb, res);
        return 0;
}

static const struct sandbox_ops cells_ops = {
    .prepare = cells_prepare,
    .start = cells_start,
    .kill = cells_kill,
    .collect = cells_collect,
    .destroy = sandbox_destroy,
    .interrupt = cells_interrupt,
    .alive = cells_alive,
};

/* ---------------------------------------------------------------------------------------- */
/* The backend                                                                              */

/* With st->lock held: wait (bounded) until no prepare() is past its snapshot (st->building). */
static void builds_wait_locked(struct engine_state *st, unsigned timeout_s)
{
        struct timespec dl;

        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += timeout_s;
        while (st->building > 0)
                if (pthread_cond_timedwait(&st->removed, &st->lock, &dl) != 0)
                        break;
        if (st->building > 0)
                log_warning("%u sandbox(es) still being prepared at exit: the next start's sweep "
                            "removes what they leave",
                            st->building);
}

static void engine_shutdown(struct backend *b)
{
        struct engine_state *st = b->state;

        /* The live sandboxes are the service's registry's, which killed them already; a run
         * without a registry (run once) sees this flag at its next pump and stops. */
        pthread_mutex_lock(&st->lock);
        st->shutting_down = true;
        bool ready = st->ready;
        /* a prepare() in progress makes nothing more now (still_on()); what it made is in
         * st->pending_removals before it stops counting: no create comes after the sweep */
        builds_wait_locked(st, 30);
        pthread_mutex_unlock(&st->lock);
        engine_removals_wait(st, 30);
        if (!ready)
                return;
        /* Everything else labelled as ours (a run between create and registration). */
        _cleanup_(json_putp) json_object *list = NULL;
        struct sbx_error e = {0};
        if (list_ours(&st->conn, &list, &e) < 0)
                return;
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *ctr = json_object_array_get_idx(list, i), *idj;
                const char *o = labels_get(ctr, "vestibule.owner");
                if (o && strcmp(o, st->owner) == 0 && json_object_object_get_ex(ctr, "Id", &idj))
                        container_remove(&st->conn, json_object_get_string(idj), &e);
        } /* and the hand-in volumes of ours still there */
        if (sweep_volumes(&st->conn, st->owner, &e) < 0)
                log_debug("%s, ignoring", e.msg);
}

static void engine_destroy(struct backend *b)
{
        struct engine_state *st = b->state;
        if (!st)
                return;
        /* a detached removal thread still uses @st: wait for it, a while at least */
        engine_removals_wait(st, 60);
        pthread_mutex_lock(&st->lock);
        unsigned left = st->pending_removals;
        pthread_mutex_unlock(&st->lock);
        if (left > 0) {
                b->state = NULL; /* leak it rather than free under a running thread */
                return;
        }
        for (size_t i = 0; i < st->n_programs_ok; i++)
                free(st->programs_ok[i]);
        free(st->programs_ok);
        free(st->seccomp_json);
        pthread_mutex_destroy(&st->lock);
        pthread_mutex_destroy(&st->create_lock);
        pthread_cond_destroy(&st->removed);
        free(st);
        b->state = NULL;
}

static const struct backend_ops engine_ops = {
    .name = "container",
    .egress = true,
    .probe = engine_probe,
    .run = sandbox_run_once,
    .sandbox = &sandbox_ops,
    .cells = &cells_ops,
    .shutdown = engine_shutdown,
    .destroy = engine_destroy,
};

int engine_backend_new_with_env(const struct sbx_config *cfg, engine_getenv_fn getenv_fn,
                                struct backend **ret, struct sbx_error *err)
{
        struct engine_state *st;
        struct backend *b;
        int r;

        r = lazy_curl_load(err); /* also curl_global_init(), once */
        if (r < 0)
                return r;
        st = xcalloc(1, sizeof(*st));
        b = xcalloc(1, sizeof(*b));
        pthread_mutex_init(&st->lock, NULL);
        pthread_mutex_init(&st->create_lock, NULL);
        pthread_cond_init(&st->removed, NULL);
        st->getenv_fn = getenv_fn;
        if (sbx_owner_label(getpid(), st->owner, sizeof(st->owner)) < 0) {
                free(b);
                pthread_mutex_destroy(&st->lock);
                pthread_cond_destroy(&st->removed);
                free(st);
                return sbx_fail(err, ESRCH,
                                "cannot read this process's start time from /proc/self/stat: "
                                "mount /proc");
        }
        st->seccomp_json = engine_seccomp_profile_docker();
        b->ops = &engine_ops;
        b->cfg = cfg;
        b->state = st;
        *ret = b;
        return 0;
}

int engine_backend_new(const struct sbx_config *cfg, struct backend **ret, struct sbx_error *err)
{
        return engine_backend_new_with_env(cfg, NULL, ret, err); /* cfg->engine_env */
}
