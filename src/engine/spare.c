/* spare.c - the container backend's warm spares: the program's FIFO, the hand-over through
 * it, and the stamp checked at the hand-over. See spare.h. */
#include "engine/spare.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/trace.h"
#include "common/xalloc.h"
#include "engine/container.h"
#include "engine/engine.h"
#include "engine/handin.h"
#include "run/fifo_handover.h"
#include "run/warden.h"

void engine_spare_settings(const struct sbx_config *cfg, const char *image, char *buf, size_t size)
{
        struct stat ws = {0};

        if (!cfg->workspace_dir || stat(cfg->workspace_dir, &ws) < 0)
                memset(&ws, 0, sizeof(ws));
        snprintf(buf, size,
                 "image=%s workspace=%s ws=%llu:%llu ro=%d tmpfs_mb=%u pids_max=%u mem_mb=%u "
                 "cpu_pct=%u max_timeout_s=%u warm_idle_s=%u run_as=%d:%u:%u user_site=%d",
                 image, cfg->workspace_dir ? cfg->workspace_dir : "", (unsigned long long)ws.st_dev,
                 (unsigned long long)ws.st_ino, cfg->workspace_ro, cfg->tmpfs_mb, cfg->pids_max,
                 cfg->mem_mb, cfg->cpu_pct, cfg->max_timeout_s, cfg->warm_idle_s, cfg->run_as_set,
                 (unsigned)cfg->run_as_uid, (unsigned)cfg->run_as_gid, sbx_workspace_user_site(cfg));
}

int engine_spare_fifo_make(const char *dir, const char *script, uid_t uid, gid_t gid, bool shared,
                           char **ret_path, struct sbx_error *err)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, script);
        bool give = geteuid() == 0 && uid != 0;
        mode_t mode = shared ? 0644 : 0600;

        if (mkfifo(path, mode) < 0)
                return sbx_fail(err, errno, "cannot make the spare's program FIFO '%s': %m", path);
        /* mkfifo applies the umask; lchown: the name is ours, made just now in our folder */
        if (chmod(path, mode) < 0 || (give && lchown(path, uid, gid) < 0)) {
                int e = errno;
                unlink(path);
                return sbx_fail(err, e, "cannot give the spare's program FIFO '%s' to %u: %s", path,
                                (unsigned)uid, strerror(e));
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

int engine_spare_image_id(const struct engine_conn *c, const char *ref, char *ret, size_t size,
                          struct sbx_error *err)
{
        _cleanup_(json_putp) json_object *info = NULL;
        json_object *idj = NULL;
        const char *id;
        int r;

        r = engine_image_inspect(c, ref, &info, err);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(info, "Id", &idj) || !(id = json_object_get_string(idj)) ||
            !*id)
                return sbx_fail(err, EPROTO,
                                "the container engine inspected image '%s' without "
                                "its Id",
                                ref);
        if (strncmp(id, "sha256:", 7) == 0)
                id += 7;
        snprintf(ret, size, "%s", id);
        return 0;
}

int engine_spare_check(const struct engine_spare_stamp *st, const struct sbx_config *cfg,
                       const char *image, const char *image_id_now, const char *grade_now,
                       uint64_t max_age_ms, struct sbx_error *err)
{
        char now[sizeof(st->settings)];
        uint64_t age = sbx_now_ms() - st->started_ms;

        engine_spare_settings(cfg, image, now, sizeof(now));
        if (strcmp(now, st->settings) != 0)
                return sbx_fail(err, ESTALE,
                                "the settings changed since the spare container was built");
        if (strcmp(image_id_now, st->image_id) != 0)
                return sbx_fail(err, ESTALE,
                                "the image '%s' is another one now (setup: %.19s, the spare has "
                                "%.19s)",
                                image, image_id_now, st->image_id);
        if (strcmp(grade_now, st->grade) != 0)
                return sbx_fail(err, ESTALE,
                                "the engine's grade changed since the spare was built ('%s', now "
                                "'%s')",
                                st->grade, grade_now);
        if (age > max_age_ms)
                return sbx_fail(err, ESTALE,
                                "the spare container is %llu s old, past its idle time",
                                (unsigned long long)(age / 1000));
        return 0;
}

int engine_spare_handover(const char *fifo, const char *code, size_t len, uid_t uid, gid_t gid,
                          bool shared, unsigned ready_ms, uint64_t deadline_ms,
                          struct sbx_error *err)
{
        return sbx_fifo_handover(fifo, code, len, uid, gid, shared, ready_ms, deadline_ms, err);
}

int engine_spare_start(const struct engine_conn *c, const char *id, const struct sbx_config *cfg,
                       const char *image, const char *grade, struct engine_xfers *rx,
                       struct engine_spare_stamp *stamp, struct sbx_trace *trace,
                       struct sbx_error *err)
{
        int r;

        engine_spare_settings(cfg, image, stamp->settings, sizeof(stamp->settings));
        snprintf(stamp->grade, sizeof(stamp->grade), "%s", grade);
        r = engine_xfers_arm(rx, c, id, err);
        sbx_trace_lap(trace, "arm_attach_wait");
        if (r == 0)
                r = engine_container_start(c, id, image, err);
        stamp->started_ms = sbx_now_ms();
        sbx_trace_lap(trace, "start");
        return r;
}

int engine_spare_waiting(struct engine_xfers *rx, struct sbx_error *err)
{
        engine_xfers_pump(rx); /* what it printed while it waited is no run's: dropped */
        if (rx->attach.done || rx->wait.done)
                return sbx_fail(err, ESTALE, "the spare container ended before its hand-over");
        return 0;
}

/* The spare's wait on the volume path (spare.h, engine_spare_wait_cmd()). `sleep 1 & wait`:
 * bash's wait returns at once on a trapped signal (bash(1), SIGNALS); the sleep is then ended
 * and reaped (no zombie in the run's /proc). env(1) drops what bash adds to the environment
 * (_, SHLVL, PWD, OLDPWD): the program sees the environment a cold run's sees. */
static const char spare_wait_sh[] =
    "trap : WINCH; e=$((SECONDS + $1)); shift; "
    "while [ ! -e /sandbox/" ENGINE_HANDIN_GO " ]; do [ $SECONDS -lt $e ] || exit 124; "
    "sleep 1 & s=$!; wait $s; kill $s 2>/dev/null; wait $s; done; "
    "exec /usr/bin/env -u _ -u SHLVL -u PWD -u OLDPWD \"$@\"";

int engine_spare_wait_cmd(const char **cmd, size_t max, const char *wait_s)
{
        const char *head[] = {ENGINE_BASH_PATH, "-c", spare_wait_sh, "vestibule-spare", wait_s};
        size_t n = 0, k = ELEMENTSOF(head);

        while (cmd[n])
                n++;
        if (n + k + 1 > max)
                return -E2BIG;
        memmove(cmd + k, cmd, (n + 1) * sizeof(*cmd));
        memcpy(cmd, head, sizeof(head));
        return 0;
}

int engine_spare_nudge(const struct engine_conn *c, const char *id, struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};

        return engine_post(c,
                           &(struct engine_call){.path = "/containers/{}/kill",
                                                 .parts = {id},
                                                 .query = {{"signal", "WINCH"}},
                                                 .ok = {204},
                                                 .timeout_ms = 10000,
                                                 .what = "wake the spare container"},
                           &rep, err);
}
