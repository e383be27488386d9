/* container.c - one sandbox container on the Engine API: create (one at a time on rootless
 * Podman, its transient keep-id error retried), inspect, the image's programs checked in the
 * created container, start (the refusals of known cause told apart), kill, the attach + wait
 * transfers of a run on one curl_multi, and the removal in the background (container, volumes,
 * parent cgroup). The sandbox lifecycle (backend.c), the sessions (cells.c) and the spares call
 * these; the requests themselves are api.c's (docs.docker.com/engine/api/v1.41/#tag/Container). */
#include "engine/container.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "config/pins.h"
#include "engine/conn.h"
#include "engine/state.h"

#define ENGINE_CREATE_RETRIES 2       /* Podman's transient keep-id create error */
#define ENGINE_CGROUP_RMDIR_TRIES 100 /* x 100 ms: a run's parent cgroup, after the removal */
/* attach + wait must be armed within this: start's own bound (engine_container_start()).
 * Podman's compat attach to a created container first makes it in the OCI runtime ("preparing
 * container <id> for attach": runc create, conmon), the work Docker does in start; measured on
 * rootful Podman 4.3 with curl, 0.3-1.1 s for the attach's headers at load 25 on 2 cores, and
 * the CI dry run's verify once got none within the 10 s this was (scripts/verify-namespaces.sh) */
#define ENGINE_ARM_MS 60000

static void leg_done(struct engine_leg *l)
{
        engine_xfer_free(l->x);
        l->x = NULL;
        engine_reply_done(&l->rep);
}

static void attach_emit(void *ud, int stream, const char *buf, size_t n)
{
        struct engine_attach *a = ud;
        if (a->emit)
                a->emit(a->emit_userdata, stream, buf, n);
}

static size_t attach_data(void *ud, const char *data, size_t n)
{
        struct engine_attach *a = ud;
        if (engine_demux_feed(&a->dmx, data, n, attach_emit, a) < 0) {
                a->proto_error = true;
                return 0;
        }
        return n;
}

/* POST /containers/{id}/kill?signal=KILL; 409: it is not running (any more). */
static struct engine_call kill_call(const char *id)
{
        return (struct engine_call){.path = "/containers/{}/kill",
                                    .parts = {id},
                                    .query = {{"signal", "KILL"}},
                                    .ok = {204, 404, 409},
                                    .timeout_ms = 15000,
                                    .what = "kill the sandbox container"};
}

void engine_container_kill(const struct engine_conn *c, const char *id)
{
        struct engine_call call = kill_call(id);
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        struct sbx_error e = {0};

        call.timeout_ms = 10000;
        if (engine_post(c, &call, &rep, &e) < 0)
                log_debug("kill %.12s: %s", id, e.msg);
}

static int leg_add(struct engine_xfers *rx, struct engine_leg *l, const struct engine_conn *c,
                   const struct engine_call *call, struct sbx_error *err)
{
        int r = engine_xfer_new(c, l == &rx->stats ? "GET" : "POST", call, &l->rep, &l->x, err);
        if (r < 0)
                return r;
        curl_multi_add_handle(rx->m, engine_xfer_handle(l->x));
        return 0;
}

/* Drive the multi once; mark the legs that ended, with their checked result. */
void engine_xfers_pump(struct engine_xfers *rx)
{
        struct engine_leg *legs[] = {&rx->attach, &rx->wait, &rx->kill, &rx->stats};
        CURLMsg *msg;
        int running = 0, q;

        curl_multi_perform(rx->m, &running);
        while ((msg = curl_multi_info_read(rx->m, &q))) {
                if (msg->msg != CURLMSG_DONE)
                        continue;
                for (size_t i = 0; i < ELEMENTSOF(legs); i++)
                        if (legs[i]->x && engine_xfer_handle(legs[i]->x) == msg->easy_handle &&
                            !legs[i]->done) {
                                legs[i]->done = true;
                                legs[i]->rc =
                                    engine_xfer_finish(legs[i]->x, msg->data.result, &legs[i]->err);
                        }
        }
}

void engine_xfers_done(struct engine_xfers *rx)
{
        struct engine_leg *legs[] = {&rx->attach, &rx->wait, &rx->kill, &rx->stats};
        for (size_t i = 0; i < ELEMENTSOF(legs); i++) {
                if (legs[i]->x)
                        curl_multi_remove_handle(rx->m, engine_xfer_handle(legs[i]->x));
                leg_done(legs[i]);
        }
        if (rx->m)
                curl_multi_cleanup(rx->m);
        rx->m = NULL;
        engine_stats_done(&rx->st);
}

/* Arm attach + wait (next-exit) in one multi: both answers' headers in, both 200. */
int engine_xfers_arm(struct engine_xfers *rx, const struct engine_conn *c, const char *id,
                     struct sbx_error *err)
{
        struct engine_call attach = {.path = "/containers/{}/attach",
                                     .parts = {id},
                                     .query = {{"stream", "1"}, {"stdout", "1"}, {"stderr", "1"}},
                                     .ok = {200},
                                     .body = ENGINE_BODY_STREAM,
                                     .on_data = attach_data,
                                     .userdata = &rx->a,
                                     .what = "attach to the sandbox container"};
        struct engine_call wait = {.path = "/containers/{}/wait",
                                   .parts = {id},
                                   .query = {{"condition", "next-exit"}},
                                   .ok = {200},
                                   .body = ENGINE_BODY_JSON,
                                   .what = "wait for the sandbox container"};
        uint64_t t_arm = sbx_now_ms();
        int r;

        rx->m = curl_multi_init();
        if (!rx->m)
                abort();
        r = leg_add(rx, &rx->attach, c, &attach, err);
        if (r == 0)
                r = leg_add(rx, &rx->wait, c, &wait, err);
        if (r < 0)
                return r;
        for (;;) {
                engine_xfers_pump(rx);
                struct engine_leg *ended = rx->attach.done ? &rx->attach
                                           : rx->wait.done ? &rx->wait
                                                           : NULL;
                if (ended && ended->rc < 0) {
                        *err = ended->err;
                        return ended->rc;
                }
                if (engine_xfer_headers_done(rx->attach.x) &&
                    engine_xfer_headers_done(rx->wait.x) &&
                    engine_xfer_status(rx->attach.x) == 200 &&
                    engine_xfer_status(rx->wait.x) == 200)
                        return 0;
                if (ended || sbx_now_ms() - t_arm > ENGINE_ARM_MS)
                        return sbx_fail(err, EIO,
                                        "the container engine did not accept attach/wait for the "
                                        "new container (attach HTTP %ld, wait HTTP %ld): check "
                                        "that it is healthy",
                                        engine_xfer_status(rx->attach.x),
                                        engine_xfer_status(rx->wait.x));
                curl_multi_poll(rx->m, NULL, 0, 50, NULL);
        }
}

int engine_xfers_kill(struct engine_xfers *rx, const struct engine_conn *c, const char *id,
                      struct sbx_error *err)
{
        struct engine_call kc = kill_call(id);

        return leg_add(rx, &rx->kill, c, &kc, err);
}

int engine_xfers_stats(struct engine_xfers *rx, const struct engine_conn *c, const char *id,
                       struct sbx_error *err)
{
        struct engine_call call = {.path = "/containers/{}/stats",
                                   .parts = {id},
                                   .query = {{"stream", "1"}},
                                   .ok = {200},
                                   .body = ENGINE_BODY_STREAM,
                                   .on_data = engine_stats_feed,
                                   .userdata = &rx->st,
                                   .what = "read the sandbox container's usage"};

        /* Podman 4.3's compat stream sends one sample and then nothing; libpod's streams one
         * every @interval seconds (measured 1.0-1.9 s apart on a loaded host, 2026-12-02) */
        if (c->podman)
                call = (struct engine_call){
                    .path = "/v4.0.0/libpod/containers/stats",
                    .unversioned = true,
                    .query = {{"containers", id}, {"stream", "true"}, {"interval", "1"}},
                    .ok = {200},
                    .body = ENGINE_BODY_STREAM,
                    .on_data = engine_stats_feed,
                    .userdata = &rx->st,
                    .what = "read the sandbox container's usage (libpod)"};

        if (!rx->m || rx->stats.x)
                return sbx_fail(err, EINVAL, "the run's transfers are not armed");
        return leg_add(rx, &rx->stats, c, &call, err);
}

unsigned engine_xfers_fds(struct engine_xfers *rx, struct pollfd *fds, unsigned max,
                          int *timeout_ms)
{
        fd_set rd, wr, ex;
        int maxfd = -1;
        long curl_ms = -1;
        unsigned n = 0;

        FD_ZERO(&rd);
        FD_ZERO(&wr);
        FD_ZERO(&ex);
        curl_multi_fdset(rx->m, &rd, &wr, &ex, &maxfd);
        for (int fd = 0; fd <= maxfd && n < max; fd++) {
                short ev = 0;
                if (FD_ISSET(fd, &rd))
                        ev |= POLLIN;
                if (FD_ISSET(fd, &wr))
                        ev |= POLLOUT;
                if (FD_ISSET(fd, &ex))
                        ev |= POLLPRI;
                if (ev)
                        fds[n++] = (struct pollfd){.fd = fd, .events = ev};
        }
        curl_multi_timeout(rx->m, &curl_ms);
        *timeout_ms = curl_ms >= 0 && curl_ms < 100 ? (int)curl_ms : 100;
        return n;
}

/* POST /containers/{id}/start, with the refusals that have a known cause told apart. */
int engine_container_start(const struct engine_conn *c, const char *id, const char *image,
                           struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        int r;

        r = engine_post(c,
                        &(struct engine_call){.path = "/containers/{}/start",
                                              .parts = {id},
                                              .ok = {204, 304},
                                              .timeout_ms = 60000,
                                              .what = "start the sandbox"},
                        &rep, err);
        if (r == 0 || rep.status == 0)
                return r;
        if (strstr(rep.msg, "\"timeout\"") &&
            (strstr(rep.msg, "not found") || strstr(rep.msg, "no such file")))
                return sbx_fail(err, ENOENT,
                                "the sandbox image '%s' has no coreutils `timeout`, which every "
                                "run needs: use an image that provides bash, timeout and the "
                                "interpreter, or run `vestibule-mcp setup`",
                                image);
        if (strcasestr(rep.msg, "no new privileges") || strcasestr(rep.msg, "no_new_privs") ||
            (strcasestr(rep.msg, "apparmor") && strcasestr(rep.msg, "snap")))
                /* The Docker snap's own confinement refuses the no-new-privileges every sandbox
                 * is started with; Vestibule does not drop it. */
                return sbx_fail(err, EPERM,
                                "the container engine refused no-new-privileges, which every "
                                "sandbox needs; the Docker snap does this: install Docker Engine "
                                "from your distribution (apt install docker.io) or docker.com "
                                "instead of the snap (sudo snap remove docker), then restart the "
                                "server (engine said: %.160s)",
                                rep.msg);
        return r;
}

struct removal {
        struct engine_state *st;
        char
            *id[2]; /* the run container, the hand-in helper kept for a spare; either may be NULL */
        char *cgroup;     /* the run's parent cgroup (hostcg.c), or NULL */
        char *volumes[2]; /* the run's hand-in volumes, removed after the container; may be NULL */
};

static void volumes_remove(const struct engine_conn *c, const char *const volumes[2])
{
        for (size_t i = 0; i < 2; i++) {
                struct sbx_error e = {0};
                if (volumes[i] && engine_volume_remove(c, volumes[i], &e) < 0)
                        log_warning("%s (the next start's sweep removes it), ignoring", e.msg);
        }
}

static void *removal_thread(void *p)
{
        struct removal *rm = p;
        struct engine_state *st = rm->st;
        bool left = false;

        for (size_t i = 0; i < 2; i++) { /* the volumes only once no container holds them */
                struct sbx_error e = {0};
                if (rm->id[i] && container_remove(&st->conn, rm->id[i], &e) < 0) {
                        log_warning("%s (the next start's sweep removes it), ignoring", e.msg);
                        left = true;
                }
        }
        if (!left)
                volumes_remove(&st->conn, (const char *const *)rm->volumes);
        /* Podman's conmon and its `container cleanup` can outlive the DELETE by a moment:
         * retry (this thread is off the result's path); the next start's sweep is the rest */
        for (unsigned i = 0; rm->cgroup && i < ENGINE_CGROUP_RMDIR_TRIES; i++) {
                if (engine_hostcg_remove(rm->cgroup) == 0)
                        break;
                usleep(100000);
        }
        free(rm->id[0]);
        free(rm->id[1]);
        free(rm->cgroup);
        free(rm->volumes[0]);
        free(rm->volumes[1]);
        free(rm);
        pthread_mutex_lock(&st->lock);
        st->pending_removals--;
        pthread_cond_broadcast(&st->removed);
        pthread_mutex_unlock(&st->lock);
        return NULL;
}

void engine_container_remove_later(struct engine_state *st, const char *id, const char *helper,
                                   const char *cgroup, const char *const volumes[2])
{
        struct removal *rm = xcalloc(1, sizeof(*rm));
        pthread_attr_t attr;
        pthread_t t;

        rm->st = st;
        rm->id[0] = id ? xstrdup(id) : NULL;
        rm->id[1] = helper ? xstrdup(helper) : NULL;
        rm->cgroup = *cgroup ? xstrdup(cgroup) : NULL;
        for (size_t i = 0; volumes && i < 2; i++)
                rm->volumes[i] = volumes[i] ? xstrdup(volumes[i]) : NULL;
        pthread_mutex_lock(&st->lock);
        st->pending_removals++;
        pthread_mutex_unlock(&st->lock);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, removal_thread, rm) != 0)
                removal_thread(rm); /* no thread: do it here */
        pthread_attr_destroy(&attr);
}

/* Wait (bounded) until every background removal has finished. */
void engine_removals_wait(struct engine_state *st, unsigned timeout_s)
{
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += timeout_s;
        pthread_mutex_lock(&st->lock);
        while (st->pending_removals > 0)
                if (pthread_cond_timedwait(&st->removed, &st->lock, &dl) != 0)
                        break;
        if (st->pending_removals > 0)
                log_warning("%u sandbox container(s) still being removed at exit; the next "
                            "start's sweep removes them",
                            st->pending_removals);
        pthread_mutex_unlock(&st->lock);
}

/* Where the run's PATH (body.c's Env) looks for `timeout` and the interpreter. */
static const char *const run_path_dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};

/* Before the start: the image of the created container @id (image id @image_id) holds
 * coreutils `timeout` and @interp in the run's PATH. Checked through the archive API (a stat in
 * the container's filesystem, nothing runs), once per image id and interpreter. This is what
 * tells "the image lacks the interpreter" apart from a run: the run's own output and exit
 * status never decide a refusal (a program can print the wrapper's words and exit 127). */
const char *engine_interp_for(const char *image, enum sbx_language l)
{
        bool debian = image && (strcmp(image, SBX_DEBIAN_IMAGE_PYTHON) == 0 ||
                                strcmp(image, SBX_DEBIAN_IMAGE_NODE) == 0);
        bool pinned = image && (strcmp(image, SBX_PIN_IMAGE_PYTHON) == 0 ||
                                strcmp(image, SBX_PIN_IMAGE_NODE) == 0);

        if (l == SBX_LANG_BASH)
                return ENGINE_BASH_PATH;
        if (l == SBX_LANG_NODE)
                return debian ? "/usr/bin/node" : pinned ? "/usr/local/bin/node" : "node";
        return debian ? "/usr/bin/python3" : pinned ? "/usr/local/bin/python3" : "python3";
}

/* Whether @prog is in the created container @id: at its path when absolute, else in one of
 * run_path_dirs. Return 1 (found), 0 (not), or -errno with @err. */
static int program_present(struct engine_state *st, const char *id, const char *prog,
                           struct sbx_error *err)
{
        size_t n = prog[0] == '/' ? 1 : ELEMENTSOF(run_path_dirs);

        for (size_t d = 0; d < n; d++) {
                _cleanup_free_ char *path =
                    prog[0] == '/' ? xstrdup(prog) : xasprintf("%s/%s", run_path_dirs[d], prog);
                struct sbx_error e = {0};
                int r = engine_archive_stat(&st->conn, id, path, &e);
                if (r == 0)
                        return 1;
                if (r != -ENOENT) {
                        *err = e;
                        return r;
                }
        }
        return 0;
}

int engine_container_programs_check(struct engine_state *st, const char *id, const char *image_id,
                                    const char *image, const char *interp, struct sbx_error *err)
{
        _cleanup_free_ char *key = xasprintf("%s %s", image_id, interp);
        const char *progs[] = {ENGINE_TIMEOUT_PATH, interp};
        bool cached = false;
        int r;

        pthread_mutex_lock(&st->lock);
        for (size_t i = 0; i < st->n_programs_ok && !cached; i++)
                cached = strcmp(st->programs_ok[i], key) == 0;
        pthread_mutex_unlock(&st->lock);
        if (cached)
                return 0;
        for (size_t p = 0; p < ELEMENTSOF(progs); p++) {
                r = program_present(st, id, progs[p], err);
                if (r < 0)
                        return r;
                if (r > 0)
                        continue;
                if (p == 0)
                        return sbx_fail(err, ENOENT,
                                        "the sandbox image '%s' has no coreutils `timeout` at "
                                        "%s, which every run needs: use an image that provides "
                                        "bash, timeout and the interpreter, or run `vestibule-mcp "
                                        "setup`",
                                        image, ENGINE_TIMEOUT_PATH);
                const char *base = strrchr(interp, '/');
                return sbx_fail(err, ENOENT,
                                "the sandbox image '%s' has no '%s'%s%s: use an image that "
                                "provides bash, timeout and the interpreter, or run "
                                "`vestibule-mcp setup`",
                                image, base ? base + 1 : interp, base ? " at " : "",
                                base ? interp : "");
        }
        pthread_mutex_lock(&st->lock);
        GREEDY_REALLOC(st->programs_ok, st->cap_programs_ok, st->n_programs_ok + 1);
        st->programs_ok[st->n_programs_ok++] = TAKE_PTR(key);
        pthread_mutex_unlock(&st->lock);
        return 0;
}

/* POST /containers/create with @body; the new id into *@ret_id. Creates on rootless Podman
 * go one at a time (create_lock). Rootless Podman 4.3 sometimes answers a keep-id create under
 * parallel runs with a 500 though the same body works a moment later (its user-namespace setup
 * for the request is transient, docs/design/engine-api.md §7): that exact answer is retried,
 * briefly. */
int engine_container_create(struct engine_state *st, json_object *body, const char *image,
                            const char *what, char **ret_id, struct sbx_error *err)
{
        const char *json = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        json_object *idj = NULL;
        int r;

        for (unsigned attempt = 0;; attempt++) {
                engine_reply_done(&rep);
                if (st->rootless_podman)
                        pthread_mutex_lock(&st->create_lock);
                r = engine_post(&st->conn,
                                &(struct engine_call){.path = "/containers/create",
                                                      .json = json,
                                                      .ok = {201},
                                                      .body = ENGINE_BODY_JSON,
                                                      .timeout_ms = 30000,
                                                      .what = what},
                                &rep, err);
                if (st->rootless_podman)
                        pthread_mutex_unlock(&st->create_lock);
                if (r == 0 || attempt >= ENGINE_CREATE_RETRIES || rep.status != 500 ||
                    !strstr(rep.msg, "keep-id requires additional UIDs or GIDs"))
                        break;
                log_debug("create: Podman's transient keep-id error (%s); retry %u of %u", rep.msg,
                          attempt + 1, ENGINE_CREATE_RETRIES);
                usleep(150000u * (attempt + 1));
        }
        if (r < 0 &&
            (rep.status == 404 || (rep.status >= 400 && strcasestr(rep.msg, "no such image"))))
                return sbx_fail(err, ENOENT,
                                "the sandbox image '%s' is missing from the container engine: "
                                "run `vestibule-mcp setup`",
                                image);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(rep.json, "Id", &idj) || !json_object_get_string(idj))
                return sbx_fail(err, EPROTO,
                                "the container engine at '%s' created a container without "
                                "saying its Id: is this a Docker Engine or Podman socket?",
                                st->conn.ep.host);
        *ret_id = xstrdup(json_object_get_string(idj));
        return 0;
}

/* GET /containers/{id}/json (and, for keep-id, libpod's IDMappings, which the compat inspect
 * does not show) into *@ret. */
int engine_container_inspect(struct engine_state *st, const char *id, bool keep_id,
                             json_object **ret, struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0}, lp = {0};
        json_object *hcj, *idm;
        int r;

        r = engine_get(&st->conn,
                       &(struct engine_call){.path = "/containers/{}/json",
                                             .parts = {id},
                                             .ok = {200},
                                             .body = ENGINE_BODY_JSON,
                                             .timeout_ms = 10000,
                                             .what = "inspect the sandbox container"},
                       &rep, err);
        if (r == 0 && !rep.json)
                r = sbx_fail(err, EPROTO,
                             "the container engine inspected the sandbox container "
                             "with an empty answer");
        if (r < 0)
                return r;
        if (keep_id) {
                struct sbx_error e = {0};
                if (engine_get(&st->conn,
                               &(struct engine_call){.path = "/v4.0.0/libpod/containers/{}/json",
                                                     .parts = {id},
                                                     .unversioned = true,
                                                     .ok = {200},
                                                     .body = ENGINE_BODY_JSON,
                                                     .timeout_ms = 10000,
                                                     .what = "inspect the sandbox container "
                                                             "(libpod)"},
                               &lp, &e) == 0 &&
                    json_object_object_get_ex(lp.json, "HostConfig", &hcj) &&
                    json_object_object_get_ex(hcj, "IDMappings", &idm))
                        json_object_object_add(rep.json, "IDMappings", json_object_get(idm));
        }
        *ret = TAKE_PTR(rep.json);
        return 0;
}
