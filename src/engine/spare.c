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
#include "run/user_site.h"
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
                 (unsigned)cfg->run_as_uid, (unsigned)cfg->run_as_gid,
                 sbx_workspace_user_site(cfg));
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

/* The code as a regular file in the FIFO's place: what opens the name later reads the code. */
static int file_in_place(const char *fifo, const char *code, size_t len, uid_t uid, gid_t gid,
                         bool shared, struct sbx_error *err)
{
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -1;
        const char *slash = strrchr(fifo, '/');
        bool give = geteuid() == 0 && uid != 0;
        size_t off = 0;
        int e;

        tmp = slash ? xasprintf("%.*s/.next-%s", (int)(slash - fifo), fifo, slash + 1)
                    : xasprintf(".next-%s", fifo);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || fchmod(fd, shared ? 0644 : 0600) < 0 || (give && fchown(fd, uid, gid) < 0))
                goto fail;
        while (off < len) {
                ssize_t n = write(fd, code + off, len - off);
                if (n < 0)
                        goto fail;
                off += (size_t)n;
        }
        if (rename(tmp, fifo) < 0)
                goto fail;
        return 0;
fail:
        e = errno;
        if (fd >= 0)
                unlink(tmp);
        return sbx_fail(err, e, "cannot write the code to '%s': %s", tmp, strerror(e));
}

/* Write it all into the pipe, waiting for room until @deadline_ms. */
static int pipe_write_all(int fd, const char *code, size_t len, uint64_t deadline_ms,
                          struct sbx_error *err)
{
        size_t off = 0;

        while (off < len) {
                ssize_t n = write(fd, code + off, len - off);
                if (n > 0) {
                        off += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EPIPE)
                        return sbx_fail(err, EPIPE,
                                        "the spare's interpreter went away while taking its "
                                        "program (%zu of %zu bytes)",
                                        off, len);
                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        return sbx_fail(err, errno, "cannot hand the code to the spare: %m");
                uint64_t now = sbx_now_ms();
                if (now >= deadline_ms)
                        return sbx_fail(err, ETIMEDOUT,
                                        "the program did not take its code (%zu of %zu bytes) "
                                        "before its deadline",
                                        off, len);
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                (void)poll(&p, 1, (int)(deadline_ms - now < 100 ? deadline_ms - now : 100));
        }
        return 0;
}

int engine_spare_handover(const char *fifo, const char *code, size_t len, uid_t uid, gid_t gid,
                          bool shared, unsigned ready_ms, uint64_t deadline_ms,
                          struct sbx_error *err)
{
        _cleanup_close_ int fd = -1;
        uint64_t until = sbx_now_ms() + ready_ms;
        sigset_t pipe_set, old;
        struct stat st;
        int r;

        /* O_NONBLOCK: ENXIO at once while no reader holds it (never blocks on a dead spare) */
        for (;;) {
                fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
                if (fd >= 0 || errno != ENXIO || sbx_now_ms() >= until)
                        break;
                (void)nanosleep(&(struct timespec){.tv_nsec = 2000000L}, NULL);
        }
        if (fd < 0 && errno == ENXIO)
                return sbx_fail(err, ENXIO,
                                "the spare's interpreter is not waiting for its program (it "
                                "ended, or did not start within %u ms)",
                                ready_ms);
        if (fd < 0)
                return sbx_fail(err, errno, "cannot open the spare's program FIFO '%s': %m", fifo);
        if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode))
                return sbx_fail(err, EINVAL, "'%s' is not the spare's program FIFO", fifo);
        r = file_in_place(fifo, code, len, uid, gid, shared, err);
        if (r < 0)
                return r;
        if (len > 65536)
                (void)fcntl(fd, F_SETPIPE_SZ, (int)(len < (1u << 30) ? len : (1u << 30)));
        /* a reader that went away is EPIPE here, never a signal to the whole server */
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
        r = pipe_write_all(fd, code, len, deadline_ms, err);
        if (r == -EPIPE && !sigismember(&old, SIGPIPE)) {
                struct timespec zero = {0};
                (void)sigtimedwait(&pipe_set, NULL, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return r;
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
