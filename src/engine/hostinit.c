/* hostinit.c - the init (PID 1) of a `run -- CMD` container (hostrun.h): the engine's own init
 * (docker-init at /sbin/docker-init) cannot be mounted into the host view, whose /usr is the
 * host's, read-only. This one is vestibule-mcp itself, bound read-only into the container and
 * started as `host-init EXE ARGV0 ARGS...`:
 *  1. block the signals it forwards, and SIGCHLD, into a signalfd (signalfd(2));
 *  2. open the lifeline /sandbox/life (a FIFO whose only writer is the run's vestibule-mcp on
 *     the host: its end, even by SIGKILL, is POLLHUP here);
 *  3. fork the command: stdio from the FIFOs /sandbox/in, out, err; execve(2) of EXE, whose
 *     failure is 127 (ENOENT, ENOTDIR) or 126 (anything else), said on its stderr;
 *  4. forward SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH to it; reap every
 *     child; when the command ends, kill what is left and exit with its status, 128+N for a
 *     signal N; when the lifeline ends first, kill everything (kill(-1), PID 1 of its own pid
 *     namespace) and exit 137. */
#include "engine/hostrun.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const int hostinit_forwarded[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM,
                                         SIGUSR1, SIGUSR2, SIGWINCH};

/* Step 3, in the child: never returns. */
static void hostinit_exec(char **argv)
{
        static const char *const io[] = {ENGINE_HOSTRUN_DIR "/in", ENGINE_HOSTRUN_DIR "/out",
                                         ENGINE_HOSTRUN_DIR "/err"};
        sigset_t none;

        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int fd = 0; fd < 3; fd++) {
                int f = open(io[fd], fd == 0 ? O_RDONLY : O_WRONLY);
                if (f < 0 || dup2(f, fd) < 0)
                        _exit(125);
                if (f != fd)
                        close(f);
        }
        execve(argv[0], argv + 1, environ);
        int e = errno;
        fprintf(stderr, "vestibule-mcp run: %s: %s\n", argv[0], strerror(e));
        _exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
}

int engine_host_init_main(int argc, char **argv)
{
        sigset_t set;
        int sfd, life;
        pid_t child;

        if (argc < 3)
                return 125;
        sigemptyset(&set);
        for (size_t i = 0; i < sizeof(hostinit_forwarded) / sizeof(int); i++)
                sigaddset(&set, hostinit_forwarded[i]);
        sigaddset(&set, SIGCHLD);
        sigprocmask(SIG_BLOCK, &set, NULL);
        sfd = signalfd(-1, &set, SFD_CLOEXEC);
        life = open(ENGINE_HOSTRUN_DIR "/life", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (sfd < 0 || life < 0)
                return 125;
        child = fork();
        if (child < 0)
                return 125;
        if (child == 0)
                hostinit_exec(argv + 1);
        for (;;) {
                struct pollfd p[2] = {{.fd = sfd, .events = POLLIN},
                                      {.fd = life, .events = POLLIN}};
                struct signalfd_siginfo si;
                int st;
                pid_t w;

                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        return 125;
                if (p[1].revents & (POLLHUP | POLLERR)) {
                        kill(-1, SIGKILL); /* the run's vestibule-mcp is gone */
                        return 128 + SIGKILL;
                }
                if (!(p[0].revents & POLLIN) || read(sfd, &si, sizeof(si)) != sizeof(si))
                        continue;
                if (si.ssi_signo != SIGCHLD) {
                        kill(child, (int)si.ssi_signo);
                        continue;
                }
                while ((w = waitpid(-1, &st, WNOHANG)) > 0)
                        if (w == child) {
                                kill(-1, SIGKILL); /* what it left: the namespace ends anyway */
                                return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
                        }
        }
}
