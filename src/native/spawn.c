/* spawn.c - one sandbox's setup, as two ordered step lists (as nsjail does it): the parent's
 * (native_spawn) and the child's (child_main). The parent writes the id maps and places the
 * child in its cgroup; the child mounts, pivot_roots, drops every privilege, loads the seccomp
 * filter built before clone, and becomes the init of its own pid namespace: it forks the
 * program, reaps everything, and exits when the program ends, which makes the kernel kill
 * whatever else is left in the namespace (setsid and double-forked daemons included).
 *
 * The child is a copy of a multi-threaded server made by a raw clone3: it may only use
 * async-signal-safe calls (no malloc, no stdio, no fork() with its atfork locks). Everything
 * it needs is prepared before the clone; its errors go back to the parent as a struct
 * sbx_error over the sync socket. */
#include "native/native.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "run/warden.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
struct mount_attr {
        uint64_t attr_set, attr_clr, propagation, userns_fd;
};
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

/* strerror() may take the locale lock, which another server thread may have held at our
 * clone; the description table needs no lock (glibc 2.32+). */
static const char *safe_strerror(int e)
{
        const char *d = strerrordesc_np(e);
        return d ? d : "unknown error";
}

/* A setup that takes longer than this is stuck: the child is killed and the run Blocked. */
#define NATIVE_SETUP_TIMEOUT_MS 15000

/* Fixed fds in the child once its setup begins. */
#define FD_SYNC 3
#define FD_CELL_IN 4    /* a session's interpreter: cells in (native_spawn.cells) */
#define FD_STATUS_OUT 5 /* ...and one status record per cell out */

enum msg_type {
        MSG_ERROR = 1, /* setup failed: err says what and how to fix it */
        MSG_READY,     /* the filter is loaded; SCM_RIGHTS carries the listener fd */
        MSG_STATUS,    /* the program ended: status is its wait status */
        MSG_HELLO,     /* the child made itself dumpable: its id maps can be written now */
};

struct native_msg {
        int type;
        int status;
        int tasks;      /* MSG_STATUS: tasks of the run counted before init's final kill, or -1 */
        char left[128]; /* MSG_STATUS: names of the processes other than init and the program */
        struct native_child_info info;
        struct sbx_error err;
};

/* ---- the child ------------------------------------------------------------------------ */

/* Send @m with @n_fds fds (SCM_RIGHTS; at most NATIVE_PASS_FDS) over the sync socket. */
static void child_send_fds(int fd, const struct native_msg *m, const int *fds, int n_fds)
{
        struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
        union {
                char buf[CMSG_SPACE(NATIVE_PASS_FDS * sizeof(int))];
                struct cmsghdr align;
        } u;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

        if (n_fds > 0) {
                memset(&u, 0, sizeof(u));
                mh.msg_control = u.buf;
                mh.msg_controllen = CMSG_SPACE((size_t)n_fds * sizeof(int));
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN((size_t)n_fds * sizeof(int));
                memcpy(CMSG_DATA(c), fds, (size_t)n_fds * sizeof(int));
        }
        while (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
                ;
}

static void child_send(int fd, const struct native_msg *m, int pass_fd)
{
        child_send_fds(fd, m, &pass_fd, pass_fd >= 0 ? 1 : 0);
}

__attribute__((noreturn, format(printf, 2, 3))) static void child_fail(int code, const char *fmt,
                                                                       ...)
{
        struct native_msg m = {.type = MSG_ERROR};
        va_list ap;

        m.err.code = code > 0 ? code : EIO;
        va_start(ap, fmt);
        vsnprintf(m.err.msg, sizeof(m.err.msg), fmt, ap);
        va_end(ap);
        child_send(FD_SYNC, &m, -1);
        _exit(127);
}

/* Move @fds[i] to fd number i for i in [0, n), whatever numbers they have now. */
static void child_place_fds(int *fds, int n)
{
        int high[8];

        for (int i = 0; i < n; i++) {
                high[i] = fcntl(fds[i], F_DUPFD, 64);
                if (high[i] < 0)
                        _exit(126);
        }
        for (int i = 0; i < n; i++)
                if (dup2(high[i], i) < 0)
                        _exit(126);
        if (syscall(SYS_close_range, n, ~0U, 0) < 0)
                _exit(126);
}

static void child_mount(const char *src, const char *dst, const char *type, unsigned long flags,
                        const char *data, const char *why)
{
        if (mount(src, dst, type, flags, data) < 0)
                child_fail(errno, "cannot mount %s on '%s' (%s): %s", type ? type : src, dst, why,
                           safe_strerror(errno));
}

/* Set mount attributes on @path and everything below it (5.12+), falling back to a remount of
 * the top mount alone, which is all there is for a fresh bind of a plain directory. */
static void child_setattr(const char *path, uint64_t attrs, unsigned long fallback_flags)
{
        struct mount_attr a = {.attr_set = attrs};

        if (syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &a, sizeof(a)) == 0)
                return;
        if (errno != ENOSYS)
                child_fail(errno, "cannot make '%s' read-only/nosuid: %s", path,
                           safe_strerror(errno));
        child_mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | fallback_flags, NULL,
                    "remount of a bind mount");
}

/* /dev: a small tmpfs holding the five harmless device nodes (bound from the host: a user
 * namespace cannot mknod), the fd symlinks, and /dev/shm; no tty, no disks. */
static void child_make_dev(void)
{
        static const char *const nodes[] = {"null", "zero", "full", "random", "urandom"};
        static const char *const links[][2] = {
            {"/proc/self/fd", "dev/fd"},
            {"/proc/self/fd/0", "dev/stdin"},
            {"/proc/self/fd/1", "dev/stdout"},
            {"/proc/self/fd/2", "dev/stderr"},
        };
        char host[32], inner[32];

        child_mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755",
                    "a user namespace may mount tmpfs; check that the rootfs has /dev");
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
                snprintf(host, sizeof(host), "/dev/%s", nodes[i]);
                snprintf(inner, sizeof(inner), "dev/%s", nodes[i]);
                int fd = open(inner, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
                if (fd < 0)
                        child_fail(errno, "cannot create '/%s' in the sandbox: %s", inner,
                                   safe_strerror(errno));
                close(fd);
                child_mount(host, inner, NULL, MS_BIND, NULL, "bind of the host device node");
        }
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                if (symlink(links[i][0], links[i][1]) < 0)
                        child_fail(errno, "cannot create '/%s': %s", links[i][1],
                                   safe_strerror(errno));
        /* /dev/shm: POSIX semaphores and shared memory (python's multiprocessing). A folder of
         * the run's one scratch tmpfs (see child_make_tmp), so it shares /tmp's size and
         * inode caps instead of being a second, unstated tmpfs. */
        if (mkdir("dev/shm", 0755) < 0)
                child_fail(errno, "cannot create '/dev/shm': %s", safe_strerror(errno));
        child_mount("tmp/shm", "dev/shm", NULL, MS_BIND, NULL,
                    "bind of the scratch tmpfs's shm folder");
        child_setattr("dev/shm", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                      MS_NOSUID | MS_NODEV | MS_NOEXEC);
        child_mount(NULL, "dev", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
                    "size=64k,mode=0755", "making /dev read-only");
}

/* The run's one scratch tmpfs, capped in bytes (VESTIBULE_TMPFS_MB) and in inodes (one per
 * 4 KiB page, at least 1024: empty files cost kernel memory that the byte cap does not
 * count). Its folders "tmp" and "shm" become /tmp and /dev/shm; the tmpfs's own root is
 * covered and reachable from neither. Step one: mount it and make the folders. */
static void child_make_tmp(unsigned tmpfs_mb)
{
        unsigned mb = tmpfs_mb ? tmpfs_mb : 1, inodes = mb * 256 < 1024 ? 1024 : mb * 256;
        char opts[96];

        snprintf(opts, sizeof(opts), "size=%um,nr_inodes=%u,mode=0755", mb, inodes);
        child_mount("tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts,
                    "the rootfs needs a /tmp directory: run `vestibule-mcp setup` again");
        if (mkdir("tmp/tmp", 01777) < 0 || chmod("tmp/tmp", 01777) < 0 ||
            mkdir("tmp/shm", 01777) < 0 || chmod("tmp/shm", 01777) < 0)
                child_fail(errno, "cannot make the scratch folders on /tmp: %s",
                           safe_strerror(errno));
}

/* Step two, after /dev/shm was bound: cover the tmpfs's root with its "tmp" folder. */
static void child_cover_tmp(void)
{
        child_mount("tmp/tmp", "tmp", NULL, MS_BIND, NULL,
                    "bind of the scratch tmpfs's tmp folder");
        child_setattr("tmp", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, MS_NOSUID | MS_NODEV);
}

/* /sandbox, where the program's file will be, made before the code exists (a warm spare,
 * docs/native.md "Warm spares"): its own tmpfs T (sized for VESTIBULE_MAX_CODE_BYTES), with two
 * folders: "s", which becomes /sandbox (read-only, noexec), and "stage", which nothing inside
 * can reach. The program's file is written into stage/<script> through @ret[0] at the
 * hand-over and renamed into s/ (native_handover()); until then s/<script> is a FIFO the
 * interpreter is blocked opening (@fifo), or absent (the program waits on the go pipe before
 * it execs, bash). T's own root is covered by the bind of s, like the scratch tmpfs's: the
 * only ways into stage/ and into a writable s/ are the fds in @ret, which go to the server
 * and are closed here. @ret: the program file (O_WRONLY; in stage/, or s/ for bash), s/ and
 * stage/ (O_PATH). */
/* /sandbox/sitecustomize.py (egress.h, egress_sitecustomize): the user site on sys.path
 * without its start-up files; read-only with the rest of /sandbox. */
static void child_write_sitecustomize(void)
{
        int fd = open("sandbox/s/" EGRESS_SITECUSTOMIZE_NAME,
                      O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
        size_t len = strlen(egress_sitecustomize);

        if (fd < 0 || write(fd, egress_sitecustomize, len) != (ssize_t)len)
                child_fail(errno, "cannot write /sandbox/" EGRESS_SITECUSTOMIZE_NAME ": %s",
                           safe_strerror(errno));
        close(fd);
}

static void child_make_sandbox(const struct native_spawn *sp, int ret[3])
{
        char opts[96], path[80];

        /* the program, one page of ours (sitecustomize.py), and a spare page */
        snprintf(opts, sizeof(opts), "size=%zu,mode=0755", (sp->code_max | 4095) + 4097 + 4096);
        child_mount("tmpfs", "sandbox", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts,
                    "the rootfs needs a /sandbox directory: run `vestibule-mcp setup` again");
        if (mkdir("sandbox/s", 0755) < 0 || mkdir("sandbox/stage", 0700) < 0)
                child_fail(errno, "cannot make the folders of /sandbox: %s", safe_strerror(errno));
        /* bash execs only at the hand-over, so its file may wait in /sandbox itself: the
         * server then writes it and renames nothing (a root server could not create a name
         * on this tmpfs, whose user namespace does not map it: EOVERFLOW) */
        snprintf(path, sizeof(path), "sandbox/%s/%s", sp->fifo ? "stage" : "s", sp->script);
        ret[0] = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (ret[0] < 0)
                child_fail(errno, "cannot create the program's file in /sandbox: %s",
                           safe_strerror(errno));
        if (sp->fifo) {
                snprintf(path, sizeof(path), "sandbox/s/%s", sp->script);
                if (mknod(path, S_IFIFO | 0644, 0) < 0)
                        child_fail(errno, "cannot create the program's FIFO in /sandbox: %s",
                                   safe_strerror(errno));
        }
        child_write_sitecustomize();
        ret[1] = open("sandbox/s", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        ret[2] = open("sandbox/stage", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (ret[1] < 0 || ret[2] < 0)
                child_fail(errno, "cannot open the folders of /sandbox: %s", safe_strerror(errno));
        child_mount("sandbox/s", "sandbox", NULL, MS_BIND, NULL, "bind of /sandbox's own folder");
        child_setattr("sandbox",
                      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                      MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
}

/* Host facts the run has no use for, hidden the way container runtimes mask /proc paths: an
 * empty, read-only file bound over each (the host's /dev/null, read-only). The kernel command
 * line and boot id name the host and its boot; /proc/keys and /proc/key-users list the keys
 * of the user's uid, which is the sandbox's uid on the host; the rest expose kernel
 * addresses and other tasks' timing. A path this kernel lacks is skipped. */
static void child_mask_proc(void)
{
        static const char *const masked[] = {
            "proc/cmdline",     "proc/sys/kernel/random/boot_id",
            "proc/keys",        "proc/key-users",
            "proc/kcore",       "proc/timer_list",
            "proc/sched_debug", "proc/latency_stats",
        };

        for (size_t i = 0; i < ELEMENTSOF(masked); i++) {
                if (access(masked[i], F_OK) < 0)
                        continue;
                child_mount("/dev/null", masked[i], NULL, MS_BIND, NULL, "masking a /proc file");
                child_setattr(masked[i], MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
                              MS_RDONLY | MS_NOSUID | MS_NOEXEC);
        }
}

/* The network namespace starts with lo down; bring it up, so 127.0.0.1 works inside. */
static void child_lo_up(void)
{
        struct ifreq ifr = {0};
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        if (s < 0)
                child_fail(errno, "cannot open a socket to bring up lo: %s", safe_strerror(errno));
        memcpy(ifr.ifr_name, "lo", 3);
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                child_fail(errno, "cannot read lo's flags: %s", safe_strerror(errno));
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                child_fail(errno, "cannot bring up lo: %s", safe_strerror(errno));
        close(s);
}

/* The egress channel: the one listener on 127.0.0.1:EGRESS_PORT of the run's own network
 * namespace. Made here, before the program exists, and passed to the server, which hands it
 * to the run's proxy: a connection to it is the only way out of a namespace with only lo. */
static int child_egress_listener(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(EGRESS_PORT)};
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

        if (s < 0)
                child_fail(errno, "cannot open the egress listener: %s", safe_strerror(errno));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 64) < 0)
                child_fail(errno, "cannot listen on 127.0.0.1:%d for the egress proxy: %s",
                           EGRESS_PORT, safe_strerror(errno));
        return s;
}

static void child_drop_caps(void)
{
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2] = {{0}};

        for (int cap = 0; cap <= 63; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        child_fail(errno, "cannot drop capability %d from the bounding set: %s",
                                   cap, safe_strerror(errno));
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                child_fail(errno, "cannot clear the ambient capabilities: %s",
                           safe_strerror(errno));
        if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
                child_fail(errno, "cannot clear keep-capabilities: %s", safe_strerror(errno));
        if (syscall(SYS_capset, &hdr, data) < 0)
                child_fail(errno, "cannot drop all capabilities: %s", safe_strerror(errno));
}

static void child_set_userns_limit(const struct native_userns_limit *l)
{
        char path[96];
        size_t len = strlen(l->value);
        int fd;

        snprintf(path, sizeof(path), "proc/sys/user/%s", l->file);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
                return; /* an older kernel without this quota: nothing to cap */
        if (fd < 0 || write(fd, l->value, len) != (ssize_t)len)
                child_fail(errno, "cannot set user.%s=%s in the run's user namespace: %s", l->file,
                           l->value, safe_strerror(errno));
        close(fd);
}

static void child_set_rlimit(int res, rlim_t soft, rlim_t hard, const char *name)
{
        struct rlimit rl = {.rlim_cur = soft, .rlim_max = hard};

        if (setrlimit(res, &rl) < 0)
                child_fail(errno, "cannot set %s: %s", name, safe_strerror(errno));
}

static void child_reset_signals(void)
{
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigset_t none;

        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        sigaction(sig, &dfl, NULL); /* EINVAL for the libc-reserved ones */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Entries of directory @dir that are tasks (names starting with a digit), or -1. Raw
 * getdents64: init is a clone of a threaded server and must not call opendir's malloc. */
static int count_numeric_entries(const char *dir)
{
        char buf[4096];
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
        long k;

        if (fd < 0)
                return -1;
        while ((k = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
                for (long off = 0; off < k;) {
                        const char *name = buf + off + 19; /* d_ino, d_off, d_reclen, d_type */
                        unsigned short reclen;
                        memcpy(&reclen, buf + off + 16, sizeof(reclen));
                        off += reclen;
                        if (name[0] >= '1' && name[0] <= '9')
                                n++;
                }
        close(fd);
        return n;
}

/* init, when the program ended: how many tasks (threads included, as RLIMIT_NPROC counts
 * them) the run still has, itself included. Its /proc shows only the run's pid namespace.
 * @left (@size bytes): the names (comm) of the processes other than init and @prog, ", "
 * between them, as many as fit. */
static int init_count_tasks(pid_t prog, char *left, size_t size)
{
        char buf[4096], path[64], comm[20];
        size_t used = 0;
        int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
        long k;

        if (fd < 0)
                return -1;
        while ((k = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
                for (long off = 0; off < k;) {
                        const char *name = buf + off + 19;
                        unsigned short reclen;
                        memcpy(&reclen, buf + off + 16, sizeof(reclen));
                        off += reclen;
                        if (name[0] < '1' || name[0] > '9')
                                continue;
                        snprintf(path, sizeof(path), "/proc/%s/task", name);
                        int t = count_numeric_entries(path);
                        n += t > 0 ? t : 1;
                        if (atoi(name) == 1 || atoi(name) == prog)
                                continue;
                        snprintf(path, sizeof(path), "/proc/%s/comm", name);
                        if (sbx_read_small_file(AT_FDCWD, path, SBX_READ_PREFIX, comm,
                                                sizeof(comm)) > 0 &&
                            used + strlen(comm) + 3 < size)
                                used += (size_t)snprintf(left + used, size - used, "%s%.*s",
                                                         used ? ", " : "", (int)strcspn(comm, "\n"),
                                                         comm);
                }
        close(fd);
        return n;
}

/* The program: pid 2 of the namespace. It keeps the sync socket (close-on-exec) only to say
 * why an exec failed. */
__attribute__((noreturn)) static void program_main(const struct native_spawn *sp, int go_r)
{
        static const char *const path[] = {"/usr/local/bin",  "/usr/bin",  "/bin",
                                           "/usr/local/sbin", "/usr/sbin", "/sbin"};
        char exe[256];
        int err = ENOENT;

        if (fcntl(FD_SYNC, F_SETFD, FD_CLOEXEC) < 0)
                _exit(126);
        /* A session's interpreter leads its own group (an interrupt reaches its foreground job).
         * A host view command gets the terminal as fds 0-2 but a session of its own, so the
         * terminal is not its controlling one: TIOCSTI (pushing keystrokes into the user's
         * shell, CVE-2017-5226 for bubblewrap) fails with EPERM. The caller forwards the
         * terminal's signals instead (hostrun.c). */
        if (sp->cells || sp->host_view)
                (void)setsid(); /* pid 2 leads no group yet: cannot fail */
        /* with a pty of its own (hostrun.h pty_slave), that one is its controlling terminal
         * (job control and ^C inside); the user's terminal it never holds */
        for (int i = 0; sp->host_view && sp->host_view->pty_slave > 0 && i < 3; i++)
                if (isatty(i) && ioctl(i, TIOCSCTTY, 0) == 0)
                        break;
        if (go_r >= 0) {
                /* the program's file is in place once the go byte is here (native_handover);
                 * EOF: the sandbox is being destroyed unused */
                char go;
                ssize_t n;
                do
                        n = read(go_r, &go, 1);
                while (n < 0 && errno == EINTR);
                if (n != 1)
                        _exit(125);
                close(go_r);
        }
        if (sp->host_view) {
                execve(sp->host_view->exe, (char *const *)sp->argv, (char *const *)sp->envp);
                child_fail(errno, "cannot execute '%s' in the sandbox: %s", sp->host_view->exe,
                           safe_strerror(errno));
        }
        for (size_t i = 0; i < ELEMENTSOF(path); i++) {
                snprintf(exe, sizeof(exe), "%s/%s", path[i], sp->argv[0]);
                execve(exe, (char *const *)sp->argv,
                       (char *const *)(sp->envp ? sp->envp : egress_base_env));
                if (errno != ENOENT)
                        err = errno;
        }
        child_fail(err,
                   "cannot execute '%s' in the sandbox: %s; the rootfs lacks it: run "
                   "`vestibule-mcp setup` again",
                   sp->argv[0], safe_strerror(err));
}

/* ---- the host view (native_spawn.host_view) ----------------------------------------- */

/* mkdir -p of @rel (relative to the cwd, the root being built); the last part a folder, or an
 * empty file when @file (a bind target for a file). Async-signal-safe: a stack copy. */
static void child_mkdir_p(const char *rel, bool file)
{
        char buf[4096];
        size_t len = strlen(rel);

        if (len == 0)
                return;
        if (len >= sizeof(buf))
                child_fail(ENAMETOOLONG, "path '/%s' is too long for the host view", rel);
        memcpy(buf, rel, len + 1);
        for (size_t i = 1; i <= len; i++) {
                if (buf[i] != '/' && buf[i] != '\0')
                        continue;
                bool last = buf[i] == '\0';
                buf[i] = '\0';
                if (last && file) {
                        int fd = open(buf, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
                        if (fd < 0)
                                child_fail(errno, "cannot make the bind target '/%s': %s", buf,
                                           safe_strerror(errno));
                        close(fd);
                } else if (mkdir(buf, 0755) < 0 && errno != EEXIST) {
                        child_fail(errno,
                                   "cannot make '/%s' in the host view: %s; a folder given to "
                                   "--allow or --allow-read may not lie under a read-only "
                                   "system folder",
                                   buf, safe_strerror(errno));
                }
                if (!last)
                        buf[i] = '/';
        }
}

/* Bind the host's @path at the same path in the root being built (the cwd), recursively,
 * read-only unless @rw, never suid nor devices. A host path that is absent is skipped when
 * @optional; a host symlink (/bin -> usr/bin) is recreated as that symlink. */
static void child_host_bind(const char *path, bool rw, bool optional)
{
        const char *rel = path + 1;
        char link[256];
        struct stat st;

        if (lstat(path, &st) < 0) {
                if (optional)
                        return;
                child_fail(errno, "cannot bind '%s' into the sandbox: %s", path,
                           safe_strerror(errno));
        }
        if (S_ISLNK(st.st_mode)) {
                ssize_t n = readlink(path, link, sizeof(link) - 1);
                if (n < 0 || (size_t)n >= sizeof(link) - 1)
                        child_fail(errno ? errno : ENAMETOOLONG, "cannot read the symlink '%s'",
                                   path);
                link[n] = '\0';
                if (symlink(link, rel) < 0 && errno != EEXIST)
                        child_fail(errno, "cannot copy the symlink '%s': %s", path,
                                   safe_strerror(errno));
                return;
        }
        child_mkdir_p(rel, !S_ISDIR(st.st_mode));
        child_mount(path, rel, NULL, MS_BIND | MS_REC, NULL, "bind of a host folder");
        child_setattr(rel, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY),
                      MS_NOSUID | MS_NODEV | (rw ? 0 : MS_RDONLY));
}

/* First part, in place of the rootfs bind: a tmpfs on @sp->rootfs as the root, the system
 * folders in it read-only, and the mount points the common steps need. */
static void child_host_root(const struct native_spawn *sp)
{
        static const char *const points[] = {"tmp", "proc", "dev", "sandbox"};
        const struct native_host_view *hv = sp->host_view;

        child_mount("tmpfs", sp->rootfs, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755",
                    "the host view's root");
        if (chdir(sp->rootfs) < 0)
                child_fail(errno, "cannot enter the host view's root '%s': %s", sp->rootfs,
                           safe_strerror(errno));
        for (size_t i = 0; i < ELEMENTSOF(points); i++)
                if (mkdir(points[i], 0755) < 0)
                        child_fail(errno, "cannot make '/%s' in the host view: %s", points[i],
                                   safe_strerror(errno));
        for (size_t i = 0; hv->system[i]; i++)
                child_host_bind(hv->system[i], false, true);
}

/* Mask @path in the tree built so far (the caller lists only paths the view shows; one that is
 * not there fails the run, closed): the empty /dev/null over a file, an
 * empty read-only tmpfs over a folder. A symlink is left alone (its target is masked if it
 * is a secret itself, and it resolves only inside the sandbox's own tree). */
static void child_host_mask(const char *path)
{
        const char *rel = path + 1;
        struct stat st;

        if (fstatat(AT_FDCWD, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                child_fail(errno, "cannot mask '%s': it is on the host but not in the view: %s",
                           path, safe_strerror(errno));
        if (S_ISLNK(st.st_mode))
                return;
        if (S_ISDIR(st.st_mode))
                child_mount("tmpfs", rel, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                            "size=4k,nr_inodes=1,mode=0555", "masking a secret folder");
        else
                child_mount("/dev/null", rel, NULL, MS_BIND, NULL, "masking a secret file");
        /* not nodev: the mask over a file is the /dev/null node, which must stay openable */
        child_setattr(rel, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
                      MS_RDONLY | MS_NOSUID | MS_NOEXEC);
}

/* @src into @dst (@cap bytes) with ',', ':' and '\\' escaped as overlayfs's option parser wants
 * them (Documentation/filesystems/overlayfs.rst). Fails the run when it does not fit. */
static void child_escape_opt(char *dst, size_t cap, const char *src)
{
        size_t n = 0;

        for (; *src; src++) {
                if (n + 3 >= cap)
                        child_fail(ENAMETOOLONG, "path too long for an overlay mount");
                if (*src == ',' || *src == ':' || *src == '\\')
                        dst[n++] = '\\';
                dst[n++] = *src;
        }
        dst[n] = '\0';
}

/* --overlay: the host's @path read-only as the lower layer of an overlayfs at the same path,
 * its upper and work folders @dir/@i/u and @dir/@i/w (made by the caller, on the host), so
 * what the command writes lands there. userxattr: the user namespace's own overlay (Linux
 * 5.11), which also creates no redirect: a folder renamed is copied (EXDEV to rename(2)). */
static void child_host_overlay(const char *path, const char *dir, size_t i)
{
        char lower[1400], base[1400], opts[4096];
        int n;

        child_escape_opt(lower, sizeof(lower), path);
        child_escape_opt(base, sizeof(base), dir);
        n = snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s/%zu/u,workdir=%s/%zu/w,userxattr",
                     lower, base, i, base, i);
        if (n < 0 || (size_t)n >= sizeof(opts))
                child_fail(ENAMETOOLONG, "the overlay options for '%s' are too long", path);
        child_mkdir_p(path + 1, false);
        child_mount("overlay", path + 1, "overlay", MS_NOSUID | MS_NODEV, opts,
                    "the overlay needs Linux 5.11+ (unprivileged overlayfs) and an upper folder "
                    "with user xattrs (/var/tmp)");
}

/* Second part, once the scratch tmpfs covers /tmp (so a project under the host's /tmp is
 * bound on top of it): $HOME (a folder of the scratch tmpfs; first, so a project under it is
 * bound on top), the project folders, the read-only extras, the masks; then the root tmpfs
 * turns read-only. */
static void child_host_finish(const struct native_spawn *sp)
{
        const struct native_host_view *hv = sp->host_view;

        if (hv->home) {
                child_mkdir_p(hv->home + 1, false);
                if (mkdir("tmp/.home", 0700) < 0 && errno != EEXIST)
                        child_fail(errno, "cannot make the private home: %s", safe_strerror(errno));
                child_mount("tmp/.home", hv->home + 1, NULL, MS_BIND, NULL,
                            "bind of the private, empty home");
        }
        for (size_t i = 0; hv->rw[i]; i++)
                if (hv->overlay)
                        child_host_overlay(hv->rw[i], hv->overlay, i);
                else
                        child_host_bind(hv->rw[i], true, false);
        for (size_t i = 0; hv->ro[i]; i++)
                child_host_bind(hv->ro[i], false, false);
        for (size_t i = 0; hv->masks[i]; i++)
                child_host_mask(hv->masks[i]);
        child_mount(NULL, ".", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL,
                    "making the host view's root read-only");
}

/* The rootfs tree read-only and the workspace (run_code's filesystem). */
static void child_build_rootfs(const struct native_spawn *sp)
{
        child_mount(sp->rootfs, sp->rootfs, NULL, MS_BIND | MS_REC, NULL,
                    "the rootfs must exist: run `vestibule-mcp setup`");
        child_setattr(sp->rootfs, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                      MS_RDONLY | MS_NOSUID | MS_NODEV);
        if (chdir(sp->rootfs) < 0)
                child_fail(errno, "cannot enter the rootfs '%s': %s", sp->rootfs,
                           safe_strerror(errno));
        /* The workspace while we still have the server's host ids (a root server's default
         * workspace lies under /root, which the RUN_AS user cannot traverse). */
        child_mount(sp->workspace, "workspace", NULL, MS_BIND | MS_REC, NULL,
                    "check VESTIBULE_WORKSPACE; the rootfs needs a /workspace directory");
        child_setattr("workspace",
                      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                          (sp->workspace_ro ? MOUNT_ATTR_RDONLY : 0),
                      MS_NOSUID | MS_NODEV | (sp->workspace_ro ? MS_RDONLY : 0));
}

/* /proc of the run's pid namespace, and the per-user quotas of its user namespace. */
static void child_mount_proc(const struct native_spawn *sp, struct native_child_info *info)
{
        if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible") ==
            0)
                info->proc_hidepid = true;
        else
                child_mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
                            "proc needs a pid namespace and a fully visible /proc on the host");
        {
                struct stat st;
                if (stat("proc/self/ns/pid", &st) == 0)
                        info->pidns_ino = st.st_ino;
        }
        /* The per-user quotas of the run's own user namespace (written through the fresh
         * /proc, while we still hold CAP_SYS_RESOURCE in it): the sandbox's uid is the
         * server's on the host, and these counts are charged to every ancestor namespace. */
        for (unsigned i = 0; i < sp->n_userns_limits; i++)
                child_set_userns_limit(&sp->userns_limits[i]);
}

/* Step 4 of child_main(): the sandbox's filesystem under the rootfs, before pivot_root: the
 * rootfs and workspace binds, /tmp, /proc, /dev, the masks, the hand-over folders (@hand) and,
 * without a FIFO, the go pipe (its read end into *@ret_go_r, its write end into @hand[3]).
 * Nothing mounted here propagates back to the host. */
static void child_build_fs(const struct native_spawn *sp, struct native_child_info *info,
                           int hand[4], int *ret_go_r)
{
        child_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, "making the mount tree private");
        if (sp->host_view) {
                /* the files made from here on belong to the sandbox user (see below) */
                syscall(SYS_setfsgid, NATIVE_INNER_GID);
                syscall(SYS_setfsuid, NATIVE_INNER_UID);
                child_host_root(sp);
        } else {
                child_build_rootfs(sp);
        }
        info->mark_us[NATIVE_MARK_ROOTFS] = sbx_trace_now_us();
        /* Files we create from here on (the /dev entries, the script) belong to the sandbox
         * user: a root server's own uid is not mapped in here, and a tmpfs of this user
         * namespace refuses files owned by an unmapped id (EOVERFLOW). */
        syscall(SYS_setfsgid, NATIVE_INNER_GID);
        syscall(SYS_setfsuid, NATIVE_INNER_UID);
        child_make_tmp(sp->tmpfs_mb);
        child_mount_proc(sp, info);
        child_make_dev();
        child_cover_tmp();
        if (sp->host_view)
                child_host_finish(sp);
        child_mask_proc();
        child_make_sandbox(sp, hand);
        /* The go pipe: the program reads one byte from it before it execs (bash, which
         * starts in a millisecond and reads a FIFO a byte at a time) */
        if (!sp->fifo) {
                int gp[2];
                if (pipe2(gp, O_CLOEXEC) < 0)
                        child_fail(errno, "cannot create the go pipe: %s", safe_strerror(errno));
                *ret_go_r = gp[0];
                hand[3] = gp[1];
        }
}

/* Step 8 of child_main(): the sandbox user, no capabilities, no_new_privs, not dumpable.
 * Raw syscalls: glibc's wrappers broadcast the change to every thread it knows of, under a
 * lock another server thread may have held at our clone (a deadlock). */
static void child_become_user(const struct native_spawn *sp)
{
        if (sp->host_root && syscall(SYS_setgroups, 0, NULL) < 0)
                child_fail(errno, "cannot clear the supplementary groups: %s",
                           safe_strerror(errno));
        if (syscall(SYS_setresgid, NATIVE_INNER_GID, NATIVE_INNER_GID, NATIVE_INNER_GID) < 0 ||
            syscall(SYS_setresuid, NATIVE_INNER_UID, NATIVE_INNER_UID, NATIVE_INNER_UID) < 0)
                child_fail(errno, "cannot switch to uid %d: %s", NATIVE_INNER_UID,
                           safe_strerror(errno));
        /* a credential change clears the death signal: set it again */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        /* Its own, empty session keyring (keyrings(7)): the server's one is not the run's.
         * The filter refuses keyctl, add_key and request_key inside anyway; a kernel
         * without keys (ENOSYS) or a user at the key quota (EDQUOT) keeps the inherited
         * one, which the code then cannot reach through those calls nor /proc/keys. */
        if (syscall(SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, NULL) < 0 && errno != ENOSYS &&
            errno != EDQUOT)
                child_fail(errno, "cannot give the run its own session keyring: %s",
                           safe_strerror(errno));
        child_drop_caps();
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                child_fail(errno, "cannot set no_new_privs: %s", safe_strerror(errno));
        /* init is not dumpable: the program (same uid) cannot ptrace it to escape its filter */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* Step 11 of child_main(), as init: hold none of the run's pipes, reap every process of the
 * namespace, and when @prog ends kill and reap the rest, pass its status (and, with
 * count_tasks, the run's task count) to the parent, wait to be released, and exit. */
__attribute__((noreturn)) static void child_init(const struct native_spawn *sp, pid_t prog)
{
        char go;
        ssize_t n;

        /* init writes nothing there: the pipes end with the run's other processes */
        if (sp->cells) {
                close(FD_CELL_IN);
                close(FD_STATUS_OUT);
        }
        close(STDIN_FILENO);
        close(STDOUT_FILENO);
        close(STDERR_FILENO);
        for (;;) {
                int st, tasks = -1;
                char left[128] = "";
                pid_t p;

                if (sp->count_tasks) {
                        /* Look before reaping: the program, a zombie now, still holds its
                         * RLIMIT_NPROC charge (released when reaped), so the count is the
                         * run's charge at its end, the program included. */
                        siginfo_t si;
                        memset(&si, 0, sizeof(si));
                        if (waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) < 0) {
                                if (errno == EINTR)
                                        continue;
                                _exit(125);
                        }
                        if (si.si_pid == prog)
                                tasks = init_count_tasks(prog, left, sizeof(left));
                        p = wait4(si.si_pid, &st, 0, NULL);
                } else {
                        p = wait4(-1, &st, 0, NULL);
                }
                if (p < 0 && errno == EINTR)
                        continue;
                if (p < 0)
                        _exit(125);
                if (p != prog)
                        continue;
                /* The program ended: nothing else of the run may outlive it. Kill the rest of
                 * the namespace and reap it, so the run's cgroup holds only us while the
                 * parent reads it; then wait to be released. */
                for (;;) {
                        kill(-1, SIGKILL);
                        if (wait4(-1, NULL, __WALL, NULL) < 0 && errno == ECHILD)
                                break;
                }
                struct native_msg done = {.type = MSG_STATUS, .status = st, .tasks = tasks};
                memcpy(done.left, left, sizeof(left));
                child_send(FD_SYNC, &done, -1);
                do
                        n = read(FD_SYNC, &go, 1);
                while (n < 0 && errno == EINTR);
                _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        }
}

/* Steps 1 to 3 of child_main(): die with the server, take a clean signal state, place the fds
 * (0 /dev/null, 1 and 2 the output pipes, 3 the sync socket, 4 and 5 a cell session's
 * pipes; no other), then wait for the parent's go (id maps written, cgroup placed). */
static void child_enter(const struct native_spawn *sp, int out_w, int err_w, int sync_fd,
                        uint64_t entry_us, struct native_child_info *info)
{
        char go;
        ssize_t n;
        int fds[6], null_fd;

        /* 1. A killed server leaves nothing: we die with it (the sync read below also sees EOF
         *    if it died before this point). */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        /* A server that changed its ids (setresuid from root) is not dumpable, which makes our
         * /proc/PID files root's: the parent could not write our id maps. Become dumpable and
         * say so (the parent, seeing itself not dumpable, waits for this). */
        if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1) {
                struct native_msg hello = {.type = MSG_HELLO};
                prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
                child_send(sync_fd, &hello, -1);
        }

        /* Signal state is inherited from the server: an ignored SIGCHLD would make init's
         * children vanish unreaped, an ignored SIGPIPE would survive into the program. */
        child_reset_signals();

        /* 2. Standard fds: stdin /dev/null, stdout/stderr the pipes, 3 the sync socket; every
         *    other inherited fd (the server's sockets, the audit log...) is closed. */
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
                _exit(126);
        fds[0] = null_fd;
        fds[1] = out_w;
        fds[2] = err_w;
        /* The host view runs a command for a person at a terminal: it gets our own 0-2 (a
         * closed one stays /dev/null). */
        for (int i = 0; sp->host_view && i < 3; i++)
                fds[i] = sp->host_view->pty_slave > 0 && isatty(i) ? sp->host_view->pty_slave
                         : fcntl(i, F_GETFD) >= 0                  ? i
                                                                   : null_fd;
        fds[3] = sync_fd;
        fds[4] = sp->cells ? sp->cell_in_fd : -1;
        fds[5] = sp->cells ? sp->status_out_fd : -1;
        child_place_fds(fds, sp->cells ? 6 : 4);
        info->mark_us[NATIVE_MARK_ENTRY] = entry_us;

        /* 3. Wait for the parent to write the id maps (and place us in our cgroup). */
        do
                n = read(FD_SYNC, &go, 1);
        while (n < 0 && errno == EINTR);
        if (n != 1 || go != 'G')
                _exit(125);
        /* Placed into a systemd scope after the clone: the cgroup namespace is created now,
         * so it is rooted at the run's own cgroup, as with CLONE_INTO_CGROUP. */
        if (sp->after_clone && unshare(CLONE_NEWCGROUP) < 0)
                child_fail(errno, "cannot create the cgroup namespace: %s", safe_strerror(errno));
        info->mark_us[NATIVE_MARK_GO] = sbx_trace_now_us();
}

/* The end of step 10 of child_main(): READY to the parent with the seccomp @listener, the
 * hand-over fds @hand (the go pipe's [3] only without a FIFO) and the @egress listener (network
 * "allowlist", else -1); init keeps none of them, the server's proxy holds the egress
 * listener's only copy. */
static void child_report_ready(struct native_msg *msg, int listener, const int hand[4], int egress)
{
        int pass[NATIVE_PASS_FDS] = {listener, hand[0], hand[1], hand[2]};
        int n_pass = 4;

        msg->type = MSG_READY;
        if (hand[3] >= 0)
                pass[n_pass++] = hand[3];
        if (egress >= 0)
                pass[n_pass++] = egress;
        child_send_fds(FD_SYNC, msg, pass, n_pass);
        for (int i = 0; i < n_pass; i++)
                close(pass[i]);
}

__attribute__((noreturn)) static void child_main(const struct native_spawn *sp, int out_w,
                                                 int err_w, int sync_fd)
{
        uint64_t entry_us = sbx_trace_now_us(); /* vDSO clock_gettime: async-signal-safe */
        struct native_msg msg = {0};
        int listener, egress = -1, r, hand[4] = {-1, -1, -1, -1}, go_r = -1;

        child_enter(sp, out_w, err_w, sync_fd, entry_us, &msg.info);

        /* 4. Filesystem: nothing we mount propagates back to the host. */
        child_build_fs(sp, &msg.info, hand, &go_r);
        msg.info.mark_us[NATIVE_MARK_MOUNTS] = sbx_trace_now_us();

        /* 5. pivot_root into it and drop the host's tree entirely. */
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                child_fail(errno, "cannot pivot_root into '%s': %s", sp->rootfs,
                           safe_strerror(errno));
        if (umount2(".", MNT_DETACH) < 0)
                child_fail(errno, "cannot detach the host's root: %s", safe_strerror(errno));
        if (chdir(sp->host_view ? sp->host_view->cwd : "/workspace") < 0)
                child_fail(errno, "cannot enter '%s': %s",
                           sp->host_view ? sp->host_view->cwd : "/workspace", safe_strerror(errno));

        msg.info.mark_us[NATIVE_MARK_PIVOT] = sbx_trace_now_us();

        /* 6. uts and net namespaces. */
        if (sethostname("vestibule", 9) < 0)
                child_fail(errno, "cannot set the hostname: %s", safe_strerror(errno));
        child_lo_up();
        if (sp->egress)
                egress = child_egress_listener();

        msg.info.mark_us[NATIVE_MARK_UTS_NET] = sbx_trace_now_us();

        /* 7. Limits that rlimits can honestly give. RLIMIT_NPROC counts per user in the run's
         *    own user namespace (5.14+), so it caps this run's processes and threads. */
        child_set_rlimit(RLIMIT_CORE, 0, 0, "RLIMIT_CORE");
        child_set_rlimit(RLIMIT_NOFILE, 1024, 1024, "RLIMIT_NOFILE");
        if (sp->pids_max > 0)
                child_set_rlimit(RLIMIT_NPROC, sp->pids_max, sp->pids_max, "RLIMIT_NPROC");
        umask(022);

        /* 8. Become the sandbox user, then drop every capability. A root server's supplementary
         *    groups are cleared (its parent allowed setgroups for this user namespace). */
        child_become_user(sp);

        msg.info.mark_us[NATIVE_MARK_CREDS] = sbx_trace_now_us();

        /* 9. Landlock, the second layer over the filesystem. */
        r = native_landlock_apply(sp->workspace_ro || sp->host_view,
                                  sp->host_view ? sp->host_view->writable : NULL);
        if (r < 0)
                child_fail(-r, "cannot apply Landlock: %s", safe_strerror(-r));
        msg.info.landlock_abi = r;
        msg.info.mark_us[NATIVE_MARK_LANDLOCK] = sbx_trace_now_us();

        /* 10. Last: the seccomp filter (built before clone), with a listener for reports. */
        listener = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                SECCOMP_FILTER_FLAG_NEW_LISTENER, &sp->filter->prog);
        if (listener < 0)
                child_fail(errno,
                           "cannot load the seccomp filter: %s; the kernel needs seccomp "
                           "user notification (5.0+)",
                           safe_strerror(errno));
        msg.info.mark_us[NATIVE_MARK_SECCOMP] = sbx_trace_now_us();
        child_report_ready(&msg, listener, hand, egress);

        /* 11. Init: fork the program (raw clone: glibc's fork() would take locks another
         *     server thread may have held at our clone), reap everything, pass its status. */
        pid_t prog = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
        if (prog < 0)
                child_fail(errno, "cannot start the program: %s", safe_strerror(errno));
        if (prog == 0)
                program_main(sp, go_r);
        if (go_r >= 0)
                close(go_r);
        child_init(sp, prog);
}

/* ---- the parent ----------------------------------------------------------------------- */

static long read_user_sysctl(const char *file)
{
        char path[96], buf[32];

        snprintf(path, sizeof(path), "/proc/sys/user/%s", file);
        if (sbx_read_small_file(AT_FDCWD, path, SBX_READ_PREFIX, buf, sizeof(buf)) <= 0)
                return -1;
        return strtol(buf, NULL, 10);
}

unsigned native_userns_limits(unsigned max_concurrent,
                              struct native_userns_limit ret[NATIVE_USERNS_LIMITS])
{
        /* Share of the user's own quota: all concurrent runs together take at most half. */
        static const struct {
                const char *file;
                long floor, ceiling;
        } shared[] = {
            {"max_inotify_instances", 1, 64},
            {"max_inotify_watches", 64, 65536},
        };
        /* None at all: a run creates no namespace and no fanotify group (the filter refuses
         * unshare, setns, clone with namespace flags, clone3 and fanotify_init). */
        static const char *const zero[] = {
            "max_user_namespaces",   "max_pid_namespaces",  "max_uts_namespaces",
            "max_ipc_namespaces",    "max_net_namespaces",  "max_mnt_namespaces",
            "max_cgroup_namespaces", "max_time_namespaces", "max_fanotify_groups",
            "max_fanotify_marks",
        };
        unsigned n = 0, runs = max_concurrent ? max_concurrent : 1;

        for (size_t i = 0; i < ELEMENTSOF(shared) && n < NATIVE_USERNS_LIMITS; i++) {
                long host = read_user_sysctl(shared[i].file), v;
                if (host < 0)
                        continue;
                v = host / (2 * (long)runs);
                if (v > shared[i].ceiling)
                        v = shared[i].ceiling;
                if (v < shared[i].floor)
                        v = shared[i].floor;
                ret[n].file = shared[i].file;
                snprintf(ret[n].value, sizeof(ret[n].value), "%ld", v);
                n++;
        }
        for (size_t i = 0; i < ELEMENTSOF(zero) && n < NATIVE_USERNS_LIMITS; i++) {
                ret[n].file = zero[i];
                snprintf(ret[n].value, sizeof(ret[n].value), "0");
                n++;
        }
        return n;
}

static int write_file_at(const char *path, const char *data, struct sbx_error *err)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        size_t len = strlen(data);

        if (fd < 0)
                return sbx_fail(err, errno, "cannot open '%s': %m", path);
        if (write(fd, data, len) != (ssize_t)len)
                return sbx_fail(err, errno, "cannot write '%s' to '%s': %m", data, path);
        return 0;
}

static int write_id_maps(const struct native_spawn *sp, pid_t pid, struct sbx_error *err)
{
        char path[64], map[64];
        int r;

        /* An unprivileged parent must deny setgroups before it may write a gid map; a root
         * parent allows it so the child can clear root's supplementary groups. */
        snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
        r = write_file_at(path, sp->host_root ? "allow" : "deny", err);
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
        snprintf(map, sizeof(map), "%d %u 1\n", NATIVE_INNER_UID, (unsigned)sp->host_uid);
        r = write_file_at(path, map, err);
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
        snprintf(map, sizeof(map), "%d %u 1\n", NATIVE_INNER_GID, (unsigned)sp->host_gid);
        return write_file_at(path, map, err);
}

static int fd_above_2(int fd)
{
        int nfd;

        if (fd > 2 || fd < 0)
                return fd;
        nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        return nfd;
}

static pid_t do_clone(const struct native_spawn *sp, int *ret_pidfd)
{
        uint64_t ns = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS |
                      CLONE_NEWIPC | (sp->after_clone ? 0 : CLONE_NEWCGROUP);
        struct clone_args args = {
            .flags = ns | CLONE_PIDFD,
            .pidfd = (uint64_t)(uintptr_t)ret_pidfd,
            .exit_signal = SIGCHLD,
        };
        long pid;

        if (sp->cgroup_fd >= 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t)sp->cgroup_fd;
        }
        pid = syscall(SYS_clone3, &args, sizeof(args));
        if (pid < 0 && errno == ENOSYS && sp->cgroup_fd < 0) {
                /* clone3 filtered (a server inside a container): clone(2) with a pidfd */
                pid = syscall(SYS_clone, (unsigned long)(ns | CLONE_PIDFD | SIGCHLD), NULL,
                              ret_pidfd, NULL, 0);
        }
        return (pid_t)pid;
}

/* One message; its SCM_RIGHTS fds (close-on-exec) into @ret_fds[0..@n_fds), the rest -1.
 * Fds beyond @n_fds are closed. */
static int recv_msg_fds(int fd, struct native_msg *m, int *ret_fds, int n_fds)
{
        struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
        union {
                char buf[CMSG_SPACE(NATIVE_PASS_FDS * sizeof(int))];
                struct cmsghdr align;
        } u;
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = u.buf,
                            .msg_controllen = sizeof(u.buf)};
        ssize_t n;

        for (int i = 0; i < n_fds; i++)
                ret_fds[i] = -1;
        do
                n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                int got = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)), f;
                for (int i = 0; i < got; i++) {
                        memcpy(&f, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof(int));
                        if (i < n_fds)
                                ret_fds[i] = f;
                        else
                                close(f);
                }
        }
        if (n != sizeof(*m))
                return -ENODATA;
        return 0;
}

static int recv_msg(int fd, struct native_msg *m, int *ret_fd)
{
        int f = -1, r = recv_msg_fds(fd, m, &f, 1);

        if (ret_fd)
                *ret_fd = f;
        else if (f >= 0)
                close(f);
        return r;
}

/* 0 when @fd is readable (or hung up) within @timeout_ms, else -ETIMEDOUT / -errno. */
static int wait_readable(int fd, int timeout_ms)
{
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r;

        do
                r = poll(&pfd, 1, timeout_ms);
        while (r < 0 && errno == EINTR);
        if (r < 0)
                return -errno;
        return r == 0 ? -ETIMEDOUT : 0;
}

static void kill_and_reap(pid_t pid, int pidfd)
{
        if (pidfd >= 0)
                syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        else
                kill(pid, SIGKILL);
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
                ;
}

/* The child's own phases, from its checkpoints; the lap clock moves to now. */
static void trace_child(struct sbx_trace *t, const struct native_child_info *info)
{
        static const char *const names[NATIVE_MARK_COUNT] = {
            [NATIVE_MARK_GO] = "go_wakeup",
            [NATIVE_MARK_ROOTFS] = "mount_rootfs",
            [NATIVE_MARK_MOUNTS] = "mount_tmp_proc_dev_sandbox",
            [NATIVE_MARK_PIVOT] = "pivot_root",
            [NATIVE_MARK_UTS_NET] = "uts_net",
            [NATIVE_MARK_CREDS] = "creds_caps",
            [NATIVE_MARK_LANDLOCK] = "landlock",
            [NATIVE_MARK_SECCOMP] = "seccomp_load",
        };
        uint64_t now, prev = t->last_us;

        if (!t->on)
                return;
        for (int i = NATIVE_MARK_GO; i < NATIVE_MARK_COUNT; i++) {
                uint64_t at = info->mark_us[i];
                sbx_trace_span(t, names[i], at > prev ? at - prev : 0);
                if (at > prev)
                        prev = at;
        }
        now = sbx_trace_now_us();
        sbx_trace_span(t, "ready_msg", now > prev ? now - prev : 0);
        t->last_us = now;
}

/* Step 4 of native_spawn(): the child's id maps (after its hello when the server is not
 * dumpable), then its cgroup placement where clone3 did not do it (@sp->after_clone). On
 * failure the child is killed and reaped. */
static int parent_map_ids(const struct native_spawn *sp, pid_t pid, int pidfd, int sync_p,
                          struct sbx_error *err)
{
        struct native_msg m;
        int r;

        if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1) {
                memset(&m, 0, sizeof(m));
                r = wait_readable(sync_p, NATIVE_SETUP_TIMEOUT_MS);
                if (r == 0)
                        r = recv_msg(sync_p, &m, NULL);
                if (r < 0 || m.type != MSG_HELLO) {
                        kill_and_reap(pid, pidfd);
                        return sbx_fail(err, EIO,
                                        "the sandbox died before its id maps were "
                                        "written");
                }
        }
        r = write_id_maps(sp, pid, err);
        if (r < 0) {
                sbx_wrap(err, "cannot map the sandbox user to uid %u", (unsigned)sp->host_uid);
                kill_and_reap(pid, pidfd);
                return r;
        }
        if (sp->trace)
                sbx_trace_lap(sp->trace, "idmap");
        if (sp->after_clone && sp->after_clone(sp->after_clone_ud, pid, err) < 0) {
                kill_and_reap(pid, pidfd);
                return -err->code;
        }
        if (sp->after_clone && sp->trace)
                sbx_trace_lap(sp->trace, "scope");
        return 0;
}

/* Step 5 of native_spawn(): go, then READY with its fds into @got (-1 where none came) and
 * the child's checkpoints into *@ret_m, or the child's own error. On failure every fd that
 * came is closed and the child is killed and reaped. */
static int parent_await_ready(const struct native_spawn *sp, pid_t pid, int pidfd, int sync_p,
                              struct native_msg *ret_m, int got[NATIVE_PASS_FDS],
                              struct sbx_error *err)
{
        struct native_msg m;
        int listener, egress = -1, r;

        if (send(sync_p, "G", 1, MSG_NOSIGNAL) != 1) { /* no SIGPIPE into the server */
                r = sbx_fail(err, errno ? errno : EPIPE,
                             "the sandbox died before its setup began: %m");
                kill_and_reap(pid, pidfd);
                return r;
        }
        memset(&m, 0, sizeof(m));
        r = wait_readable(sync_p, NATIVE_SETUP_TIMEOUT_MS);
        if (r == 0)
                r = recv_msg_fds(sync_p, &m, got, NATIVE_PASS_FDS);
        listener = got[0];
        /* after the hand-over fds (the go pipe's at [4] only without a FIFO) the egress
         * listener, when asked for */
        if (sp->egress)
                egress = got[sp->fifo ? 4 : 5];
        if (r == 0 && m.type == MSG_READY &&
            (got[1] < 0 || got[2] < 0 || got[3] < 0 || (!sp->fifo && got[4] < 0)))
                r = -EBADMSG; /* the hand-over fds must all be there */
        if (r == -ETIMEDOUT) {
                kill_and_reap(pid, pidfd);
                return sbx_fail(err, ETIMEDOUT,
                                "the sandbox's setup did not finish within %d ms (is the host "
                                "overloaded?); retry",
                                NATIVE_SETUP_TIMEOUT_MS);
        }
        if (r < 0 || m.type != MSG_READY || listener < 0 || (sp->egress && egress < 0)) {
                for (int i = 0; i < NATIVE_PASS_FDS; i++)
                        if (got[i] >= 0)
                                close(got[i]);
                if (r == 0 && m.type == MSG_ERROR) {
                        m.err.msg[sizeof(m.err.msg) - 1] = '\0';
                        r = sbx_fail(err, m.err.code, "sandbox setup failed: %s", m.err.msg);
                } else {
                        r = sbx_fail(err, EIO,
                                     "the sandbox died during its setup without saying why");
                }
                kill_and_reap(pid, pidfd);
                return r;
        }
        *ret_m = m;
        return 0;
}

int native_spawn(const struct native_spawn *sp, struct native_sandbox *ret, struct sbx_error *err)
{
        _cleanup_close_ int out_r = -1, out_w = -1, err_r = -1, err_w = -1, sync_p = -1,
                            sync_c = -1, pidfd = -1;
        int p[2], sv[2], r;
        int got[NATIVE_PASS_FDS] = {-1, -1, -1, -1, -1, -1};
        struct native_msg m;
        pid_t pid;

        /* 1. Pipes for the program's output and the sync socket; all close-on-exec, and
         *    above 2 so the child's dup2 onto 0..3 never clobbers one of them. */
        if (pipe2(p, O_CLOEXEC) < 0)
                return sbx_fail(err, errno, "cannot create the stdout pipe: %m");
        out_r = fd_above_2(p[0]);
        out_w = fd_above_2(p[1]);
        if (pipe2(p, O_CLOEXEC) < 0)
                return sbx_fail(err, errno, "cannot create the stderr pipe: %m");
        err_r = fd_above_2(p[0]);
        err_w = fd_above_2(p[1]);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return sbx_fail(err, errno, "cannot create the sync socket: %m");
        sync_p = fd_above_2(sv[0]);
        sync_c = fd_above_2(sv[1]);
        if (out_r < 0 || out_w < 0 || err_r < 0 || err_w < 0 || sync_p < 0 || sync_c < 0)
                return sbx_fail(err, EMFILE, "cannot move the sandbox's fds above 2: %m");
        if (sp->trace)
                sbx_trace_lap(sp->trace, "pipes");

        /* 2. clone3 into the new namespaces (and straight into the run's cgroup). */
        pid = do_clone(sp, &pidfd);
        if (pid < 0) {
                int e = errno;
                if (e == EPERM || e == ENOSPC || e == EUSERS)
                        return sbx_fail(err, e,
                                        "cannot create the sandbox's namespaces: %s; unprivileged "
                                        "user namespaces are disabled or exhausted "
                                        "(sysctl user.max_user_namespaces, "
                                        "kernel.apparmor_restrict_unprivileged_userns, "
                                        "kernel.unprivileged_userns_clone)",
                                        safe_strerror(e));
                return sbx_fail(err, e, "cannot clone the sandbox: %s", safe_strerror(e));
        }
        if (pid == 0)
                child_main(sp, out_w, err_w, sync_c);

        /* 3. Our copies of the child's ends go; EOF on the sync socket now means it died. */
        close(TAKE_FD(out_w));
        close(TAKE_FD(err_w));
        close(TAKE_FD(sync_c));
        if (sp->trace)
                sbx_trace_lap(sp->trace, "clone");

        /* 4. Id maps, then cgroup placement where it is not done by clone3 itself. */
        r = parent_map_ids(sp, pid, pidfd, sync_p, err);
        if (r < 0)
                return r;

        /* 5. Go, and wait for READY (listener fd) or the child's own error. */
        r = parent_await_ready(sp, pid, pidfd, sync_p, &m, got, err);
        if (r < 0)
                return r;

        if (sp->trace)
                trace_child(sp->trace, &m.info);
        ret->pid = pid;
        ret->pidfd = TAKE_FD(pidfd);
        ret->out_fd = TAKE_FD(out_r);
        ret->err_fd = TAKE_FD(err_r);
        ret->sync_fd = TAKE_FD(sync_p);
        ret->listener_fd = got[0];
        ret->egress_fd = sp->egress ? got[sp->fifo ? 4 : 5] : -1;
        ret->code_fd = got[1];
        ret->sdir_fd = got[2];
        ret->stage_fd = got[3];
        ret->go_fd = sp->fifo ? -1 : got[4];
        ret->fifo = sp->fifo;
        native_strf(ret->script, sizeof(ret->script), "%s", sp->script);
        ret->info = m.info;
        return 0;
}

int native_sandbox_read(int sync_fd, int *ret_status, int *ret_tasks, char ret_left[128],
                        struct sbx_error *err)
{
        struct native_msg m;
        int r;

        memset(&m, 0, sizeof(m));
        r = recv_msg(sync_fd, &m, NULL);
        if (r < 0)
                return -ENODATA;
        if (m.type == MSG_ERROR) {
                /* @err keeps the child's errno (ENOENT: not found, EACCES: not executable) */
                m.err.msg[sizeof(m.err.msg) - 1] = '\0';
                sbx_fail(err, m.err.code > 0 ? m.err.code : ENOEXEC, "%s", m.err.msg);
                return -ENOEXEC;
        }
        if (m.type != MSG_STATUS)
                return -ENODATA;
        *ret_status = m.status;
        *ret_tasks = m.tasks;
        m.left[sizeof(m.left) - 1] = '\0';
        memcpy(ret_left, m.left, sizeof(m.left));
        return 0;
}

void native_sandbox_release(int sync_fd)
{
        if (send(sync_fd, "X", 1, MSG_NOSIGNAL) < 0) {
                /* init is gone already: nothing to release */
        }
}
