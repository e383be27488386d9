/* handover.c - giving a spawned sandbox its program, once (native_handover()): the program's
 * file written into /sandbox's stage folder, renamed over the FIFO the interpreter waits on and
 * streamed through it (python, node), or put in place before the go byte (bash, and the host
 * view's command, which execs then). Moved out of spawn.c, which sets the sandbox up. */
#include "native/native.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"

/* Poll @fd for @events until @deadline_ms (sbx_now_ms() clock), also watching @ended_fd (or
 * -1). Return 0 when ready, -ESRCH when @ended_fd turned readable first, -ETIMEDOUT, -errno. */
static int wait_fd_or_end(int fd, short events, int ended_fd, uint64_t deadline_ms, int cap_ms)
{
        for (;;) {
                struct pollfd p[2] = {{.fd = fd, .events = events},
                                      {.fd = ended_fd, .events = POLLIN}};
                uint64_t now = sbx_now_ms();
                int r, wait_ms;

                if (now >= deadline_ms)
                        return -ETIMEDOUT;
                wait_ms = (int)(deadline_ms - now < 1000 ? deadline_ms - now : 1000);
                if (cap_ms >= 0 && wait_ms > cap_ms)
                        wait_ms = cap_ms;
                r = poll(p, ended_fd >= 0 ? 2 : 1, wait_ms);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (ended_fd >= 0 && p[1].revents)
                        return -ESRCH;
                if (fd < 0 ? r == 0 : p[0].revents != 0)
                        return 0;
        }
}

/* Write all of @buf into the FIFO @fd (O_NONBLOCK) as the interpreter reads it. SIGPIPE is
 * held in this thread and a pending one taken away, so a reader that died is -EPIPE here
 * and never a signal to the server. */
static int write_fifo(int fd, const char *buf, size_t len, int ended_fd, uint64_t deadline_ms)
{
        sigset_t pipe_set, old;
        int r = 0;

        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
        while (len > 0) {
                ssize_t w = write(fd, buf, len);
                if (w > 0) {
                        buf += w;
                        len -= (size_t)w;
                        continue;
                }
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0 && errno != EAGAIN) {
                        r = -errno;
                        break;
                }
                r = wait_fd_or_end(fd, POLLOUT, ended_fd, deadline_ms, -1);
                if (r < 0)
                        break;
        }
        if (r == -EPIPE && !sigismember(&old, SIGPIPE)) {
                struct timespec zero = {0};
                while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
                        ;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return r;
}

static void close_hand(struct native_sandbox *sb)
{
        int *fds[] = {&sb->code_fd, &sb->sdir_fd, &sb->stage_fd, &sb->go_fd};

        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (*fds[i] >= 0) {
                        close(*fds[i]);
                        *fds[i] = -1;
                }
}

int native_handover(struct native_sandbox *sb, const char *code, size_t code_len, int ended_fd,
                    uint64_t deadline_ms, struct sbx_error *err)
{
        _cleanup_close_ int fifo = -1;
        size_t off = 0;
        int r;

        if (sb->code_fd < 0)
                return sbx_fail(err, EALREADY,
                                "this sandbox was handed its program already; a sandbox runs "
                                "one program and is never reused");
        /* 1. The program's file, in the stage folder nothing inside can reach. */
        while (off < code_len) {
                ssize_t w = pwrite(sb->code_fd, code + off, code_len - off, (off_t)off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        r = sbx_fail(err, errno ? errno : EIO,
                                     "cannot write the program into the sandbox's /sandbox: %m");
                        goto out;
                }
                off += (size_t)w;
        }
        close(sb->code_fd);
        sb->code_fd = -1;
        /* 2. The interpreter holds the FIFO open for reading once it has started: until then
         *    a non-blocking open for writing fails with ENXIO (fifo(7)). */
        while (sb->fifo) {
                fifo =
                    openat(sb->sdir_fd, sb->script, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
                if (fifo >= 0)
                        break;
                if (errno != ENXIO) {
                        r = sbx_fail(err, errno, "cannot open the sandbox's program FIFO: %m");
                        goto out;
                }
                r = wait_fd_or_end(-1, 0, ended_fd, deadline_ms, 1);
                if (r < 0)
                        goto fail_wait;
        }
        /* 3. The file takes the FIFO's name (bash's is in place already): what the program
         *    finds at /sandbox/<script> is the code, as a regular read-only file. Replacing a
         *    name creates none, which a root server may do here too. */
        if (sb->fifo && renameat(sb->stage_fd, sb->script, sb->sdir_fd, sb->script) < 0) {
                r = sbx_fail(err, errno, "cannot put the program in place in /sandbox: %m");
                goto out;
        }
        /* 4. Go: the code through the FIFO, or the go byte (the program execs bash). */
        if (sb->fifo) {
                r = write_fifo(fifo, code, code_len, ended_fd, deadline_ms);
                if (r < 0)
                        goto fail_wait;
        } else if (write(sb->go_fd, "G", 1) != 1) {
                r = sbx_fail(err, EPIPE, "the sandbox's program is gone before its start");
                goto out;
        }
        r = 0;
        goto out;
fail_wait:
        if (r == -ESRCH)
                r = sbx_fail(err, ESRCH, "the sandbox's interpreter ended before it took the code");
        else if (r == -ETIMEDOUT)
                r = sbx_fail(err, ETIMEDOUT,
                             "the sandbox's interpreter did not take the code before the run's "
                             "deadline (is the host overloaded?); retry");
        else
                r = sbx_fail(err, -r, "cannot hand the code to the sandbox's interpreter: %s",
                             strerror(-r));
out:
        close_hand(sb);
        return r;
}

void native_sandbox_hand_close(struct native_sandbox *sb)
{
        close_hand(sb);
}
