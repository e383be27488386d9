/* probe.c - a static helper that runs inside a sandbox and reports what it can see, one
 * "key=value" line per check, so tests compare it against a control run outside. Built
 * without sanitizers and statically, so it runs in any rootfs.
 *
 * With no arguments it prints its uid. Arguments (any order):
 *   all            every check below that needs no argument
 *   read=PATH      read_PATH=ok | errno name      (can it read a planted host file?)
 *   write=PATH     write_PATH=ok | errno name     (can it create a file there?)
 *   sleep=S        sleep S seconds at the end (with MARKER in argv for process scans)
 *   daemon=MARKER  double-fork + setsid a child that sleeps 60 s with MARKER in its argv
 *   forkbomb=MARKER fork until refused; print forks=N; children sleep with MARKER
 *   vsock          try socket(AF_VSOCK)
 *   int80          getpid through the i386 syscall ABI (x86-64 only)
 * Checks printed by "all": uid gid caps (CapEff/CapPrm/CapInh/CapBnd/CapAmb) nnp seccomp
 * groups ifaces pids fds hostname mount unshare bpf keyctl clone_ns ptrace clone3. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *errname(int e)
{
        switch (e) {
        case 0:
                return "ok";
        case EPERM:
                return "EPERM";
        case EACCES:
                return "EACCES";
        case ENOENT:
                return "ENOENT";
        case EROFS:
                return "EROFS";
        case ENOSYS:
                return "ENOSYS";
        case EINVAL:
                return "EINVAL";
        case EAGAIN:
                return "EAGAIN";
        case EAFNOSUPPORT:
                return "EAFNOSUPPORT";
        default:
                return "other";
        }
}

static void status_field(const char *key, const char *label)
{
        char line[256];
        FILE *f = fopen("/proc/self/status", "r");

        if (!f) {
                printf("%s=unreadable\n", label);
                return;
        }
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':') {
                        char *v = line + strlen(key) + 1;
                        v += strspn(v, " \t");
                        v[strcspn(v, "\n")] = '\0';
                        printf("%s=%s\n", label, v);
                        fclose(f);
                        return;
                }
        fclose(f);
        printf("%s=missing\n", label);
}

static void ifaces(void)
{
        char line[256], list[512] = "";
        FILE *f = fopen("/proc/net/dev", "r");
        int n = 0;

        if (f) {
                while (fgets(line, sizeof(line), f)) {
                        char *colon = strchr(line, ':');
                        if (!colon || ++n == 0)
                                continue;
                        *colon = '\0';
                        char *name = line + strspn(line, " ");
                        if (list[0])
                                strncat(list, ",", sizeof(list) - strlen(list) - 1);
                        strncat(list, name, sizeof(list) - strlen(list) - 1);
                }
                fclose(f);
        }
        printf("ifaces=%s\n", f ? list : "unreadable");
}

static void pids(void)
{
        DIR *d = opendir("/proc");
        struct dirent *e;
        int n = 0;

        if (!d) {
                printf("pids=unreadable\n");
                return;
        }
        while ((e = readdir(d)))
                if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
                        n++;
        closedir(d);
        printf("pids=%d\n", n);
}

static void fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        char list[1024] = "";

        if (!d) {
                printf("fds=unreadable\n");
                return;
        }
        while ((e = readdir(d))) {
                if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
                        continue;
                if (list[0])
                        strncat(list, ",", sizeof(list) - strlen(list) - 1);
                strncat(list, e->d_name, sizeof(list) - strlen(list) - 1);
        }
        closedir(d);
        printf("fds=%s\n", list);
}

static int try_errno(long r)
{
        return r < 0 ? errno : 0;
}

static void all(void)
{
        char host[128] = "";
        struct clone_args ca = {.exit_signal = SIGCHLD};
        long r;

        printf("uid=%d\n", (int)getuid());
        printf("gid=%d\n", (int)getgid());
        status_field("CapEff", "cap_eff");
        status_field("CapPrm", "cap_prm");
        status_field("CapInh", "cap_inh");
        status_field("CapBnd", "cap_bnd");
        status_field("CapAmb", "cap_amb");
        status_field("NoNewPrivs", "nnp");
        status_field("Groups", "groups");
        status_field("Seccomp", "seccomp");
        ifaces();
        pids();
        fds();
        gethostname(host, sizeof(host) - 1);
        printf("hostname=%s\n", host);
        printf("mount=%s\n", errname(try_errno(mount("none", "/tmp", "tmpfs", 0, NULL))));
        /* unshare in a child: outside a sandbox it succeeds and must not change us */
        pid_t c = fork();
        if (c == 0)
                _exit(unshare(CLONE_NEWUSER) < 0 ? errno : 0);
        int st = 0;
        waitpid(c, &st, 0);
        printf("unshare=%s\n", errname(WIFEXITED(st) ? WEXITSTATUS(st) : EIO));
        printf("bpf=%s\n", errname(try_errno(syscall(SYS_bpf, 0 /* MAP_CREATE */, NULL, 0))));
        printf("keyctl=%s\n", errname(try_errno(syscall(SYS_keyctl, 0, 0, 0, 0, 0))));
        /* clone(2) with a namespace flag: the same as unshare */
        r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        printf("clone_ns=%s\n", errname(r < 0 ? errno : 0));
        /* ptrace stays allowed, as in Docker's profile: debuggers work inside */
        c = fork();
        if (c == 0)
                _exit(ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0 ? errno : 0);
        waitpid(c, &st, 0);
        printf("ptrace=%s\n", errname(WIFEXITED(st) ? WEXITSTATUS(st) : EIO));
        r = syscall(SYS_clone3, &ca, sizeof(ca));
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        printf("clone3=%s\n", errname(r < 0 ? errno : 0));
}

static void sleep_marker(int seconds)
{
        while (seconds > 0)
                seconds = (int)sleep((unsigned)seconds);
}

/* Re-exec ourselves as "probe sleep=60 MARKER" so the marker shows in /proc/PID/cmdline. */
__attribute__((noreturn)) static void exec_sleeper(const char *self, const char *marker)
{
        char *argv[] = {(char *)self, "sleep=60", (char *)marker, NULL};
        execv(self, argv);
        sleep_marker(60);
        _exit(0);
}

int main(int argc, char **argv)
{
        int sleep_s = 0;

        setvbuf(stdout, NULL, _IONBF, 0);
        if (argc == 1) {
                printf("uid=%d\n", (int)getuid());
                return 0;
        }
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                if (strcmp(a, "all") == 0) {
                        all();
                } else if (strncmp(a, "read=", 5) == 0) {
                        int fd = open(a + 5, O_RDONLY | O_CLOEXEC);
                        printf("read_%s=%s\n", a + 5, errname(fd < 0 ? errno : 0));
                        if (fd >= 0)
                                close(fd);
                } else if (strncmp(a, "write=", 6) == 0) {
                        int fd = open(a + 6, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                        printf("write_%s=%s\n", a + 6, errname(fd < 0 ? errno : 0));
                        if (fd >= 0) {
                                close(fd);
                                unlink(a + 6);
                        }
                } else if (strncmp(a, "sleep=", 6) == 0) {
                        sleep_s = atoi(a + 6);
                } else if (strncmp(a, "daemon=", 7) == 0) {
                        pid_t p = fork();
                        if (p == 0) {
                                setsid();
                                if (fork() == 0) {
                                        for (int fd = 0; fd < 3; fd++)
                                                close(fd);
                                        exec_sleeper(argv[0], a + 7);
                                }
                                _exit(0);
                        }
                        waitpid(p, NULL, 0);
                        printf("daemon=started\n");
                } else if (strncmp(a, "forkbomb=", 9) == 0) {
                        int n = 0;
                        for (;;) {
                                pid_t p = fork();
                                if (p == 0)
                                        exec_sleeper(argv[0], a + 9);
                                if (p < 0)
                                        break;
                                n++;
                                if (n >= 100000)
                                        break;
                        }
                        printf("forks=%d\nfork_error=%s\n", n, errname(errno));
                } else if (strcmp(a, "int80") == 0) {
                        /* getpid through the 32-bit syscall ABI (a filter written for
                         * x86-64 numbers must not let it through) */
                        long ret = 20; /* __NR_getpid on i386 */
#if defined(__x86_64__)
                        __asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
#endif
                        printf("int80=%s\n", ret > 0 ? "ok" : "refused");
                } else if (strcmp(a, "vsock") == 0) {
                        int s = socket(40 /* AF_VSOCK */, SOCK_STREAM, 0);
                        printf("vsock=%s\n", errname(s < 0 ? errno : 0));
                }
        }
        sleep_marker(sleep_s);
        return 0;
}
