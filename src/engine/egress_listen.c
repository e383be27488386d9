/* egress_listen.c - the container backend's end of the egress allowlist (docs/design/egress.md,
 * "container backend"): the sandbox container keeps NetworkMode none (its own network
 * namespace with only lo), and the server makes the one way out itself: a TCP listener on
 * 127.0.0.1 created INSIDE the running container's network namespace by a short-lived child
 * that enters it with setns(2). The listening socket comes back over a socketpair
 * (SCM_RIGHTS) and stays in that namespace; the server's proxy accepts on it. Nothing runs in
 * the container for this, nothing is mounted into it, and the container has no other route.
 *
 * Entering the namespace needs CAP_SYS_ADMIN over the user namespace that owns it:
 *   - rootful Docker / Podman: the initial user namespace: the server must be root;
 *   - rootless Podman (and rootless Docker): a user namespace the server's user created, in
 *     which that user holds every capability (user_namespaces(7) "Capabilities"): the child
 *     first enters that user namespace (ioctl NS_GET_USERNS, ioctl_ns(2)), then the network
 *     namespace. setns(2) into a user namespace needs a single-threaded caller: a forked
 *     child is one.
 * Anything else fails closed: the caller kills the container before its code starts. */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "engine/conn.h"

#define EGRESS_CHILD_MS 5000    /* the namespace-entering child must answer within this */
#define EGRESS_TAG_WAIT_MS 5000 /* the container's init must have exec'd within this */

/* What the child reports when it cannot hand a socket back: the step and its errno. */
struct egress_child_msg {
        int step; /* enum egress_step */
        int code; /* positive errno */
};

enum egress_step {
        STEP_OK,
        STEP_SETNS_NET,
        STEP_GET_USERNS,
        STEP_SETNS_USER,
        STEP_SOCKET,
        STEP_BIND,
        STEP_LISTEN,
        STEP_SEND,
};

static const char *step_name(int step)
{
        switch (step) {
        case STEP_SETNS_NET:
                return "setns(CLONE_NEWNET) into the container's network namespace";
        case STEP_GET_USERNS:
                return "ioctl(NS_GET_USERNS) on the container's network namespace";
        case STEP_SETNS_USER:
                return "setns(CLONE_NEWUSER) into the user namespace that owns it";
        case STEP_SOCKET:
                return "socket(AF_INET) inside the container";
        case STEP_BIND:
                return "bind(127.0.0.1) inside the container";
        case STEP_LISTEN:
                return "listen() inside the container";
        case STEP_SEND:
                return "handing the socket back";
        default:
                return "?";
        }
}

/* The forked child: async-signal-safe system calls only (the parent has threads). */
static _Noreturn void child_listen(int netns_fd, uint16_t port, int sock)
{
        struct egress_child_msg m = {0};
        int fd;

        if (setns(netns_fd, CLONE_NEWNET) < 0) {
                if (errno != EPERM) {
                        m = (struct egress_child_msg){STEP_SETNS_NET, errno};
                        goto fail;
                }
                /* Not privileged over it from here: enter its owner first (rootless engines). */
                int userns_fd = ioctl(netns_fd, NS_GET_USERNS);
                if (userns_fd < 0) {
                        m = (struct egress_child_msg){STEP_GET_USERNS, errno};
                        goto fail;
                }
                if (setns(userns_fd, CLONE_NEWUSER) < 0) {
                        m = (struct egress_child_msg){STEP_SETNS_USER, errno};
                        goto fail;
                }
                if (setns(netns_fd, CLONE_NEWNET) < 0) {
                        m = (struct egress_child_msg){STEP_SETNS_NET, errno};
                        goto fail;
                }
        }
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                m = (struct egress_child_msg){STEP_SOCKET, errno};
                goto fail;
        }
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                m = (struct egress_child_msg){STEP_BIND, errno};
                goto fail;
        }
        if (listen(fd, 128) < 0) {
                m = (struct egress_child_msg){STEP_LISTEN, errno};
                goto fail;
        }
        {
                char cbuf[CMSG_SPACE(sizeof(int))] = {0};
                struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
                struct msghdr mh = {.msg_iov = &iov,
                                    .msg_iovlen = 1,
                                    .msg_control = cbuf,
                                    .msg_controllen = sizeof(cbuf)};
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
                if (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
                        _exit(3);
                _exit(0);
        }
fail:
        (void)!write(sock, &m, sizeof(m));
        _exit(2);
}

/* The network namespace of the sandbox container's process @pid (@pidfd: the same process),
 * opened into *@ret_fd: refused when that process has ended (its pid may be another's now)
 * and when it is the server's own namespace (a listener there would be the host's). */
static int open_sandbox_netns(int pidfd, pid_t pid, int *ret_fd, struct sbx_error *err)
{
        char path[64];
        _cleanup_close_ int netns_fd = -1, self_fd = -1;
        struct stat st_ns, st_self;

        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
        netns_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (netns_fd < 0) {
                int e = errno;
                if (e == EACCES || e == EPERM)
                        return sbx_fail(err, e,
                                        "egress: cannot open the sandbox container's network "
                                        "namespace (%s: %s): on a rootful engine (Docker, "
                                        "rootful Podman) only a server running as root may "
                                        "enter it; run the server as root with "
                                        "VESTIBULE_RUN_AS, or use rootless Podman; the run was "
                                        "not started",
                                        path, strerror(e));
                return sbx_fail(err, e,
                                "egress: cannot open the sandbox container's network namespace "
                                "(%s: %s); the run was not started",
                                path, strerror(e));
        }
        /* Still the process @pidfd holds: else the pid was reused and the namespace may be
         * another's. A process that exited makes its pidfd readable (pidfd_open(2)). */
        struct pollfd pf = {.fd = pidfd, .events = POLLIN};
        if (poll(&pf, 1, 0) != 0)
                return sbx_fail(err, ESRCH,
                                "egress: the sandbox container's process %d ended before its "
                                "way out was made; nothing was run",
                                (int)pid);
        /* Never the server's own network namespace: a listener there would be the host's. */
        self_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self_fd < 0 || fstat(netns_fd, &st_ns) < 0 || fstat(self_fd, &st_self) < 0)
                return sbx_fail(err, errno, "egress: cannot compare network namespaces: %s",
                                strerror(errno));
        if (st_ns.st_dev == st_self.st_dev && st_ns.st_ino == st_self.st_ino)
                return sbx_fail(err, EPERM,
                                "egress: the sandbox container shares the server's network "
                                "namespace (its network mode is not none): refusing to open a "
                                "listener there; nothing was run");
        *ret_fd = TAKE_FD(netns_fd);
        return 0;
}

int engine_egress_listen(int pidfd, pid_t pid, uint16_t port, int *ret_fd, struct sbx_error *err)
{
        _cleanup_close_ int netns_fd = -1;
        int sp[2], r;

        r = open_sandbox_netns(pidfd, pid, &netns_fd, err);
        if (r < 0)
                return r;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return sbx_fail(err, errno, "egress: socketpair: %s", strerror(errno));
        pid_t child = fork();
        if (child < 0) {
                int e = errno;
                close(sp[0]);
                close(sp[1]);
                return sbx_fail(err, e, "egress: fork: %s", strerror(e));
        }
        if (child == 0) {
                close(sp[0]);
                child_listen(netns_fd, port, sp[1]);
        }
        close(sp[1]);
        _cleanup_close_ int rd = sp[0];

        struct egress_child_msg m = {.step = -1};
        char cbuf[CMSG_SPACE(sizeof(int))] = {0};
        struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        int fd = -1;
        struct pollfd rp = {.fd = rd, .events = POLLIN};
        int pr = poll(&rp, 1, EGRESS_CHILD_MS);
        ssize_t n = pr > 0 ? recvmsg(rd, &mh, MSG_CMSG_CLOEXEC) : -1;
        if (n == (ssize_t)sizeof(m)) {
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
                        memcpy(&fd, CMSG_DATA(cm), sizeof(int));
        }
        if (pr <= 0)
                kill(child, SIGKILL);
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
                ;
        if (fd >= 0 && m.step == STEP_OK) {
                *ret_fd = fd;
                return 0;
        }
        if (fd >= 0)
                close(fd);
        if (n != (ssize_t)sizeof(m))
                return sbx_fail(err, EIO,
                                "egress: the helper that enters the sandbox's network namespace "
                                "gave no answer; nothing was run");
        if (m.step == STEP_SETNS_USER || (m.step == STEP_SETNS_NET && m.code == EPERM))
                return sbx_fail(err, m.code,
                                "egress: %s failed: %s; the server may not enter this "
                                "container's namespaces (a rootful engine needs the server to "
                                "run as root with VESTIBULE_RUN_AS; a rootless one, the server "
                                "running as the engine's user); nothing was run",
                                step_name(m.step), strerror(m.code));
        return sbx_fail(err, m.code, "egress: %s failed: %s; nothing was run", step_name(m.step),
                        strerror(m.code));
}

const char *engine_egress_wait_script(uint16_t port, char *buf, size_t size)
{
        /* /proc/net/tcp: "sl local rem st ...", IPv4 in host byte order as hex (x86 and arm64:
         * little-endian, 127.0.0.1 = 0100007F), state 0A = LISTEN (proc(5), "/proc/net/tcp").
         * Bash only: `$(<file)` and [[ ]] need no program from the image but sleep. */
        snprintf(buf, size,
                 "until [[ \"$(</proc/net/tcp)\" == *\" 0100007F:%04X 00000000:0000 0A \"* ]]; "
                 "do sleep 0.01; done; exec \"$@\"",
                 (unsigned)port);
        return buf;
}

int engine_egress_tag(char *buf, size_t size)
{
        uint64_t rnd;
        if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                return -EIO;
        snprintf(buf, size, "%s%016llx", ENGINE_EGRESS_TAG_PREFIX, (unsigned long long)rnd);
        return 0;
}

/* The run's tag from the container's own command (Config.Cmd), and whether the held process
 * @pid carries it in its command line (/proc/PID/cmdline, proc(5)): the init of the container
 * (docker-init, catatonit) runs our command as its arguments. A pid the engine reports in a
 * pid namespace of its own (rootless Docker with --pidns) names another process here, which
 * does not carry the tag. */
static bool pid_runs_tag(pid_t pid, json_object *inspect)
{
        json_object *cfgj = NULL, *cmdj = NULL;
        const char *tag = NULL;
        if (!json_object_object_get_ex(inspect, "Config", &cfgj) ||
            !json_object_object_get_ex(cfgj, "Cmd", &cmdj) ||
            !json_object_is_type(cmdj, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(cmdj); i++) {
                const char *a = json_object_get_string(json_object_array_get_idx(cmdj, i));
                if (a &&
                    strncmp(a, ENGINE_EGRESS_TAG_PREFIX, strlen(ENGINE_EGRESS_TAG_PREFIX)) == 0)
                        tag = a;
        }
        if (!tag)
                return false;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        _cleanup_free_ char *buf = xmalloc(65536);
        size_t len = 0;
        for (;;) {
                ssize_t n = read(fd, buf + len, 65536 - len);
                if (n <= 0)
                        break;
                len += (size_t)n;
                if (len == 65536)
                        break;
        }
        /* one whole NUL-terminated argument equal to the tag */
        for (size_t i = 0; i < len;) {
                size_t n = strnlen(buf + i, len - i);
                if (n == strlen(tag) && memcmp(buf + i, tag, n) == 0)
                        return true;
                i += n + 1;
        }
        return false;
}

int engine_egress_begin(const struct engine_conn *c, const char *id, const struct sbx_config *cfg,
                        struct egress_session **ret, struct sbx_error *err)
{
        const struct engine_call inspect_call = {.path = "/containers/{}/json",
                                                 .parts = {id},
                                                 .body = ENGINE_BODY_JSON,
                                                 .timeout_ms = 10000,
                                                 .what = "egress: inspect the started sandbox"};
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        json_object *inspect = NULL, *state = NULL, *pidj = NULL;
        int fd = -1, r;

        r = engine_get(c, &inspect_call, &rep, err);
        if (r < 0)
                return sbx_wrap(err, "egress: inspecting the started sandbox");
        inspect = rep.json;
        if (!inspect || !json_object_object_get_ex(inspect, "State", &state) ||
            !json_object_object_get_ex(state, "Pid", &pidj))
                return sbx_fail(err, EIO,
                                "egress: the container engine did not give the started sandbox's "
                                "process (HTTP %ld); nothing was run",
                                rep.status);
        pid_t pid = (pid_t)json_object_get_int(pidj);
        if (pid <= 0)
                return sbx_fail(err, ESRCH,
                                "egress: the container engine gave no process for the started "
                                "sandbox (pid %d); nothing was run",
                                (int)pid);
        /* Hold the process (pidfd_open(2)), then ask the engine again: if the container still
         * runs as @pid after the hold began, the held process is the container's (a pid cannot
         * be reused while its process lives, and engine_egress_listen() checks it still
         * does). Works where /proc/PID/cgroup does not name the container (rootless Podman on
         * cgroup v1). */
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return sbx_fail(err, errno,
                                "egress: cannot hold the sandbox's process %d (pidfd_open: %s); "
                                "nothing was run",
                                (int)pid, strerror(errno));
        engine_reply_done(&rep);
        rep = (struct engine_reply){0};
        r = engine_get(c, &inspect_call, &rep, err);
        if (r < 0)
                return sbx_wrap(err, "egress: inspecting the started sandbox");
        inspect = rep.json;
        json_object *runj = NULL;
        if (!inspect || !json_object_object_get_ex(inspect, "State", &state) ||
            !json_object_object_get_ex(state, "Pid", &pidj) ||
            json_object_get_int(pidj) != (int)pid ||
            !json_object_object_get_ex(state, "Running", &runj) || !json_object_get_boolean(runj))
                return sbx_fail(err, ESRCH,
                                "egress: the sandbox container %.12s is no longer running as "
                                "process %d; nothing was run",
                                id, (int)pid);
        /* The engine answers the start once the runtime let the process go; its exec of the
         * container's init (docker-init, catatonit) may still be under way ("runc init"): the
         * same process, so wait for its command line a little. */
        bool tagged = false;
        for (unsigned i = 0; i < EGRESS_TAG_WAIT_MS / 5 && !(tagged = pid_runs_tag(pid, inspect));
             i++)
                usleep(5000);
        if (!tagged)
                return sbx_fail(err, ESRCH,
                                "egress: process %d does not run the sandbox container %.12s's "
                                "command (the engine may report pids of another pid namespace, "
                                "as rootless Docker with its own pid namespace does); the "
                                "allowlist cannot be set up, nothing was run",
                                (int)pid, id);
        r = engine_egress_listen(pidfd, pid, EGRESS_PORT, &fd, err);
        if (r < 0)
                return r;
        /* fd is taken by the session, on success and on error */
        r = egress_session_start(cfg, fd, ret, err);
        if (r < 0)
                return sbx_wrap(err, "egress: the proxy did not start; nothing was run");
        return 0;
}
