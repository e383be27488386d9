/* confine.c - what the egress proxy process gives up before it reads a byte from the sandbox:
 * it is not dumpable (no process of its uid may ptrace it, read its /proc/PID/fd or take its
 * fds with pidfd_getfd(2)), it gains no privilege by exec (no_new_privs), and a small seccomp
 * filter denies what a proxy never needs: exec, the cross-process calls, namespaces, mounts,
 * BPF and kernel keys, and every socket family but IPv4, IPv6 and netlink (a unix socket such
 * as the Engine API's /var/run/docker.sock, reachable by path through the docker group that an
 * unprivileged server's user may keep: tests/adversarial/server.md). */
#include "egress/egress-internal.h"

#include <errno.h>
#include <stdbool.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "common/cleanup.h"

/* The calls the proxy never makes; each is refused with EPERM. */
static const char *const denied[] = {
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "pidfd_open",
    "setns",
    "unshare",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsmount",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "io_uring_setup",
    "socketpair",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
};

static int add_rules(scmp_filter_ctx ctx)
{
        static const int families[] = {AF_INET, AF_INET6, AF_NETLINK};
        int r;

        for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
                int nr = seccomp_syscall_resolve_name(denied[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue; /* not on this architecture */
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
                if (r < 0)
                        return r;
        }
        /* socket(domain, ...): every family but these is EAFNOSUPPORT, as a kernel without it
         * (libseccomp takes one comparison per argument a rule: one rule per family) */
        for (unsigned f = 0; f < 64; f++) {
                bool keep = false;
                for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
                        keep |= (unsigned)families[i] == f;
                if (keep)
                        continue;
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                     SCMP_A0(SCMP_CMP_EQ, f));
                if (r < 0)
                        return r;
        }
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_GE, 64));
        return r;
}

int egress_proxy_confine(void)
{
        scmp_filter_ctx ctx;
        int r;

        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        r = add_rules(ctx);
        if (r >= 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r < 0 ? r : 0;
}
