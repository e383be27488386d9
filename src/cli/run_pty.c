/* run_pty.c - the command's own pty and its relay to the real terminal. See run_pty.h. */
#include "cli/run_pty.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* How often the relay looks at the real terminal's size (SIGWINCH goes to the caller's
 * signalfd, not to this thread), in ms. */
#define RUN_PTY_WINSIZE_MS 200

/* Write all of @n bytes, or give up on an error (the terminal went away). */
static void write_all(int fd, const char *buf, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, buf, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return;
                buf += w;
                n -= (size_t)w;
        }
}

/* Copy one read of @from to @to. Return the bytes copied, 0 at EOF/EIO, -1 nothing now. */
static ssize_t pump(int from, int to)
{
        char buf[8192];
        ssize_t n = read(from, buf, sizeof(buf));

        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return -1;
        if (n <= 0)
                return 0;
        write_all(to, buf, (size_t)n);
        return n;
}

/* Whether this process's group is the terminal's foreground one (a job-control shell's `&` or
 * `bg` makes it a background one). tcgetpgrp(3) */
static bool in_foreground(void)
{
        pid_t fg = tcgetpgrp(STDIN_FILENO);

        return fg < 0 || fg == getpgrp();
}

/* tcsetattr(3) on the real terminal with SIGTTOU blocked: from a background group the kernel
 * then does it instead of stopping the whole process (tty_check_change(); a stopped run whose
 * SIGTERM waits in the caller's signalfd would never end). Only called in the foreground, or to
 * put back what this process set. */
static void set_modes(const struct termios *t)
{
        sigset_t ttou, old;

        sigemptyset(&ttou);
        sigaddset(&ttou, SIGTTOU);
        pthread_sigmask(SIG_BLOCK, &ttou, &old);
        (void)tcsetattr(STDIN_FILENO, TCSADRAIN, t);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* In the foreground and not yet raw: the real terminal in raw mode for the run (once). */
static void raw_when_foreground(struct run_pty *p)
{
        struct termios raw;

        if (p->raw_on || !in_foreground())
                return;
        raw = p->saved;
        cfmakeraw(&raw);
        set_modes(&raw);
        p->raw_on = true;
}

static void sync_winsize(struct run_pty *p, struct winsize *last)
{
        struct winsize ws;

        if (ioctl(p->tty_fd, TIOCGWINSZ, &ws) == 0 && memcmp(&ws, last, sizeof(ws)) != 0) {
                *last = ws;
                (void)ioctl(p->master, TIOCSWINSZ, &ws);
        }
}

static void *relay(void *arg)
{
        struct run_pty *p = arg;
        struct winsize last = {0};
        bool in_open = true;

        for (;;) {
                /* the real terminal is read only while the run is the foreground job: a
                 * background one never takes what is typed for the shell, and never stops on
                 * SIGTTIN (its SIGTERM must still end it) */
                bool fg = p->input && in_foreground();
                struct pollfd f[3] = {{.fd = p->master, .events = POLLIN},
                                      {.fd = p->stop[0], .events = POLLIN},
                                      {.fd = in_open && fg ? STDIN_FILENO : -1, .events = POLLIN}};
                if (fg)
                        raw_when_foreground(p);
                sync_winsize(p, &last);
                if (poll(f, 3, RUN_PTY_WINSIZE_MS) < 0 && errno != EINTR)
                        break;
                if (f[0].revents && pump(p->master, p->out_fd) == 0)
                        break; /* every copy of the slave closed: the command is gone */
                if (f[1].revents)
                        break;
                if (f[2].revents && pump(STDIN_FILENO, p->master) == 0)
                        in_open = false;
        }
        /* what the command wrote before it ended */
        while (pump(p->master, p->out_fd) > 0)
                ;
        return NULL;
}

/* The pty: master non-blocking, the slave opened without becoming our controlling terminal. */
static int open_pty(struct run_pty *p)
{
        char name[64];

        p->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (p->master < 0 || grantpt(p->master) < 0 || unlockpt(p->master) < 0 ||
            ptsname_r(p->master, name, sizeof(name)) != 0)
                return -errno;
        p->slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (p->slave < 0)
                return -errno;
        (void)fcntl(p->master, F_SETFL, O_NONBLOCK);
        return 0;
}

int run_pty_start(struct run_pty *p)
{
        struct termios slave_modes;
        struct winsize ws;
        int r;

        *p = (struct run_pty){.master = -1, .slave = -1, .stop = {-1, -1}};
        /* any of fds 0-2 a terminal: a terminal fd is open for reading and writing, so one on
         * fd 1 or 2 alone would let the command read what is typed for the shell, and set its
         * modes (tests/adversarial/server.md) */
        p->input = isatty(STDIN_FILENO);
        p->tty_fd = p->input ? 0 : isatty(STDOUT_FILENO) ? 1 : isatty(STDERR_FILENO) ? 2 : -1;
        if (p->tty_fd < 0 || tcgetattr(p->tty_fd, &p->saved) < 0)
                return 0;
        p->have_saved = p->input; /* only stdin's modes are ever changed, and put back */
        p->out_fd = isatty(STDOUT_FILENO) ? 1 : isatty(STDERR_FILENO) ? 2 : 0;
        r = open_pty(p);
        if (r == 0 && pipe2(p->stop, O_CLOEXEC) < 0)
                r = -errno;
        if (r < 0) {
                fprintf(stderr, "vestibule-mcp run: cannot make the command's own terminal: %s\n",
                        strerror(-r));
                run_pty_stop(p);
                return r;
        }
        /* output only: the real terminal keeps its modes and does the output processing */
        slave_modes = p->saved;
        if (!p->input)
                slave_modes.c_oflag &= ~(tcflag_t)OPOST;
        (void)tcsetattr(p->slave, TCSANOW, &slave_modes);
        if (ioctl(p->tty_fd, TIOCGWINSZ, &ws) == 0)
                (void)ioctl(p->slave, TIOCSWINSZ, &ws);
        if (p->input)
                raw_when_foreground(p); /* a background run: the relay does it once in front */
        if (pthread_create(&p->thread, NULL, relay, p) != 0) {
                fprintf(stderr, "vestibule-mcp run: cannot start the terminal relay\n");
                run_pty_stop(p);
                return -EAGAIN;
        }
        p->thread_on = true;
        return 1;
}

void run_pty_stop(struct run_pty *p)
{
        if (p->slave >= 0)
                close(p->slave); /* the command's copies are gone: the master reads EIO */
        p->slave = -1;
        if (p->thread_on) {
                (void)!write(p->stop[1], "x", 1);
                pthread_join(p->thread, NULL);
                p->thread_on = false;
        }
        if (p->have_saved && p->raw_on)
                set_modes(&p->saved);
        p->have_saved = p->raw_on = false;
        for (int *fd = (int[]){p->master, p->stop[0], p->stop[1]}, i = 0; i < 3; i++)
                if (fd[i] >= 0)
                        close(fd[i]);
        p->master = p->stop[0] = p->stop[1] = -1;
}
