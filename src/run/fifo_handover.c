/* fifo_handover.c - a warm spare's program through its FIFO. See fifo_handover.h. */
#include "run/fifo_handover.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
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
#include "common/xalloc.h"

bool sbx_workspace_user_site(const struct sbx_config *cfg)
{
        _cleanup_free_ char *pattern = NULL;
        glob_t g = {0};
        bool found;

        if (!cfg->workspace_dir)
                return false;
        pattern = xasprintf("%s/.local/lib/python*/site-packages", cfg->workspace_dir);
        found = glob(pattern, GLOB_ONLYDIR | GLOB_NOSORT, NULL, &g) == 0 && g.gl_pathc > 0;
        globfree(&g);
        return found;
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
                if (n < 0 && errno == EINTR)
                        continue;
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

int sbx_fifo_handover(const char *fifo, const char *code, size_t len, uid_t uid, gid_t gid,
                      bool shared, unsigned ready_ms, uint64_t deadline_ms, struct sbx_error *err)
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
