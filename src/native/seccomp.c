/* seccomp.c - the native sandbox's syscall profile and the supervisor that answers and
 * reports the dangerous calls.
 *
 * The allowlist follows what Docker's default profile allows a container without added
 * capabilities (written out here from that profile's behaviour, not copied): calls that need
 * CAP_SYS_ADMIN & co. in Docker (mount, unshare, setns, bpf, ...) are not in it. The named
 * dangerous calls go to SCMP_ACT_NOTIFY so the server can say which ones the code tried;
 * everything else outside the list fails with EPERM silently, and clone3 with ENOSYS so that
 * glibc and runtimes fall back to clone(2), whose namespace flags this filter can inspect
 * (clone3 passes them in memory, out of a BPF filter's reach). */
#include "native/native.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/uio.h>
#include <sys/un.h>

#include "common/chase.h"
#include "common/cleanup.h"
#include "common/syscalls.h"
#include "common/xalloc.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/* clone(2) flags that create namespaces: the same as unshare(2), so reported the same way. */
#define NS_FLAGS                                                                                   \
        ((uint64_t)(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |     \
                    CLONE_NEWNET | CLONE_NEWCGROUP | 0x00000080 /* CLONE_NEWTIME */))

static void seccomp_releasep(scmp_filter_ctx *ctx)
{
        if (*ctx)
                seccomp_release(*ctx);
}

bool native_filter_is_notified(const char *name)
{
        for (size_t i = 0; i < sbx_denied_syscalls_n; i++)
                if (strcmp(sbx_denied_syscalls[i], name) == 0)
                        return true;
        return false;
}

static int add_named(scmp_filter_ctx ctx, uint32_t action, const char *name, struct sbx_error *err)
{
        int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name);
        int r;

        if (nr < 0)
                return 0; /* not on this architecture / unknown to this libseccomp */
        r = seccomp_rule_add(ctx, action, nr, 0);
        if (r < 0)
                return sbx_fail(err, -r, "cannot add seccomp rule for '%s': %s", name,
                                strerror(-r));
        return 0;
}

/* Syscall @nr: NOTIFY when the low 32 bits of argument @arg equal @value, ALLOW otherwise.
 * The kernel reads a family or a command as a 32-bit int, while a filter sees the whole
 * 64-bit register: a plain "!= 40" would let 0x100000028 through as AF_VSOCK.
 * (libseccomp's SCMP_A0_32() only casts the datum; the comparison stays 64-bit.) "Low 32 bits
 * differ" is an OR over the bits, one rule per bit (rules of a syscall are alternatives). */
static int add_low32_split(scmp_filter_ctx ctx, int nr, unsigned arg, uint32_t value,
                           struct sbx_error *err)
{
        int r = 0;

        for (unsigned bit = 0; r == 0 && bit < 32; bit++) {
                uint64_t m = (uint64_t)1 << bit;
                struct scmp_arg_cmp c = SCMP_CMP64(arg, SCMP_CMP_MASKED_EQ, m, ~value & m);
                r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &c);
        }
        if (r == 0) {
                struct scmp_arg_cmp c = SCMP_CMP64(arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, value);
                r = seccomp_rule_add_array(ctx, SCMP_ACT_NOTIFY, nr, 1, &c);
        }
        if (r < 0)
                return sbx_fail(err, -r, "cannot add the seccomp rules for syscall %d: %s", nr,
                                strerror(-r));
        return 0;
}

/* Calls a host run's supervisor watches (native_filter_build_host()): sent to it, recorded
 * when they name a secret or an address, then let through unchanged. */
static const char *const watched_calls[] = {"open", "openat", "openat2", "connect", "sendto", NULL};

static bool is_watched(const char *name)
{
        for (size_t i = 0; watched_calls[i]; i++)
                if (strcmp(watched_calls[i], name) == 0)
                        return true;
        return false;
}

/* @ctx compiled to classic BPF (seccomp_export_bpf() into a memfd, read back) into @ret. */
static int filter_export(scmp_filter_ctx ctx, struct native_filter *ret, struct sbx_error *err)
{
        _cleanup_close_ int mfd = -1;
        struct stat st;
        struct sock_filter *insns;
        int r;

        mfd = memfd_create("vestibule-seccomp", MFD_CLOEXEC);
        if (mfd < 0)
                return sbx_fail(err, errno, "cannot create a memfd for the seccomp filter: %m");
        r = seccomp_export_bpf(ctx, mfd);
        if (r < 0)
                return sbx_fail(err, -r, "cannot compile the seccomp filter: %s", strerror(-r));
        if (fstat(mfd, &st) < 0)
                return sbx_fail(err, errno, "cannot stat the seccomp filter memfd: %m");
        if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
            st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return sbx_fail(err, E2BIG, "the compiled seccomp filter has a bad size (%lld)",
                                (long long)st.st_size);
        insns = xmalloc(st.st_size);
        if (pread(mfd, insns, st.st_size, 0) != st.st_size) {
                free(insns);
                return sbx_fail(err, EIO, "cannot read back the compiled seccomp filter");
        }
        ret->prog.len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
        ret->prog.filter = insns;
        return 0;
}

static int filter_build(struct native_filter *ret, bool watch, struct sbx_error *err)
{
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
        if (!ctx)
                return sbx_fail(err, ENOMEM, "cannot create a seccomp filter context");
        /* A call through another ABI (int 0x80, x32) would bypass every name above. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return sbx_fail(err, -r, "cannot set the seccomp bad-architecture action: %s",
                                strerror(-r));

        /* A binary tree over the syscall numbers instead of a linear scan: every syscall the
         * program makes runs this filter. Older libseccomp lacks the attribute: keep linear. */
        (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);

        for (size_t i = 0; i < sbx_sandbox_syscalls_n; i++) {
                const char *name = sbx_sandbox_syscalls[i];
                bool w = watch && is_watched(name);
                if (w && strcmp(name, "sendto") == 0) {
                        /* only a sendto with an address (UDP, a DNS query): a connected
                         * socket's data passes without the round trip */
                        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendto), 1,
                                             SCMP_A4(SCMP_CMP_EQ, 0));
                        if (r == 0)
                                r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendto), 1,
                                                     SCMP_A4(SCMP_CMP_NE, 0));
                        if (r < 0)
                                return sbx_fail(err, -r, "cannot add the rules for sendto: %s",
                                                strerror(-r));
                        continue;
                }
                r = add_named(ctx, w ? SCMP_ACT_NOTIFY : SCMP_ACT_ALLOW, name, err);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < sbx_denied_syscalls_n; i++) {
                r = add_named(ctx, SCMP_ACT_NOTIFY, sbx_denied_syscalls[i], err);
                if (r < 0)
                        return r;
        }
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0)
                return sbx_fail(err, -r, "cannot add the seccomp rule for clone3: %s",
                                strerror(-r));
        /* clone: threads and processes yes, new namespaces no (reported like unshare). */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0));
        for (int bit = 0; r == 0 && bit < 64; bit++) {
                uint64_t flag = (uint64_t)1 << bit;
                if (NS_FLAGS & flag)
                        r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(clone), 1,
                                             SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        }
        if (r < 0)
                return sbx_fail(err, -r, "cannot add the seccomp rules for clone: %s",
                                strerror(-r));
        /* socket: every family but AF_VSOCK, which a network namespace does not isolate.
         * fcntl: every command but F_SETLEASE: a lease on a workspace file makes every host
         * process that opens it wait up to /proc/sys/fs/lease-break-time (45 s by default)
         * for the sandbox to give it up. Both refused and reported. */
        r = add_low32_split(ctx, SCMP_SYS(socket), 0, AF_VSOCK, err);
        if (r < 0)
                return r;
        r = add_low32_split(ctx, SCMP_SYS(fcntl), 1, F_SETLEASE, err);
        if (r < 0)
                return r;
        /* personality: only the values Docker allows (PER_LINUX, its 32-bit flavours, query). */
        static const uint64_t personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
        for (size_t i = 0; i < ELEMENTSOF(personas); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                                     SCMP_A0(SCMP_CMP_EQ, personas[i]));
                if (r < 0)
                        return sbx_fail(err, -r, "cannot add the seccomp rule for personality: %s",
                                        strerror(-r));
        }

        return filter_export(ctx, ret, err);
}

int native_filter_build(struct native_filter *ret, struct sbx_error *err)
{
        return filter_build(ret, false, err);
}

int native_filter_build_host(struct native_filter *ret, struct sbx_error *err)
{
        return filter_build(ret, true, err);
}

void native_filter_done(struct native_filter *f)
{
        if (!f)
                return;
        free(f->prog.filter);
        f->prog.filter = NULL;
        f->prog.len = 0;
}

/* ---- the supervisor ------------------------------------------------------------------- */

/* Add @name to the ", "-separated list @list (@size bytes) unless it is there; a list too
 * full counts it in *@unlisted. */
static void record_in(char *list, size_t size, unsigned *unlisted, const char *name)
{
        size_t len = strlen(list), nlen = strlen(name);
        const char *p = list;

        /* unique: look for ", name," boundaries */
        while ((p = strstr(p, name))) {
                bool start = p == list || (p >= list + 2 && p[-1] == ' ' && p[-2] == ',');
                bool end = p[nlen] == '\0' || p[nlen] == ',';
                if (start && end)
                        return;
                p += nlen;
        }
        if (len + (len ? 2 : 0) + nlen + 1 > size) {
                (*unlisted)++; /* the line is full: the result says "+N more" */
                return;
        }
        snprintf(list + len, size - len, "%s%s", len ? ", " : "", name);
}

static void record(struct native_notify *n, const char *name)
{
        record_in(n->names, sizeof(n->names), &n->unlisted, name);
}

static void name_of(const struct seccomp_notif *req, char *buf, size_t size)
{
        _cleanup_free_ char *name = seccomp_syscall_resolve_num_arch(req->data.arch, req->data.nr);

        if (name && strcmp(name, "socket") == 0 && (uint32_t)req->data.args[0] == AF_VSOCK)
                snprintf(buf, size, "socket(AF_VSOCK)");
        else if (name && strcmp(name, "fcntl") == 0)
                snprintf(buf, size, "fcntl(F_SETLEASE)");
        else if (name && strcmp(name, "clone") == 0)
                snprintf(buf, size, "clone(namespaces)");
        else if (name)
                snprintf(buf, size, "%s", name);
        else
                snprintf(buf, size, "syscall %d", req->data.nr);
}

static void on_sync(struct native_notify *n)
{
        struct sbx_error e = {0};
        int status = 0, tasks = -1;
        char left[128] = "";
        int r = native_sandbox_read(n->sync_fd, &status, &tasks, left, &e);
        uint64_t at_us = sbx_trace_now_us();

        if (r == -ENOEXEC) {
                pthread_mutex_lock(&n->lock);
                n->exec_failed = true;
                n->exec_err = e;
                pthread_mutex_unlock(&n->lock);
                return;
        }
        if (r < 0) {
                n->sync_fd = -1; /* EOF: init is gone */
                return;
        }
        if (n->on_exit)
                n->on_exit(n->on_exit_ud);
        pthread_mutex_lock(&n->lock);
        n->have_status = true;
        n->status = status;
        n->tasks_at_end = tasks;
        memcpy(n->left, left, sizeof(left));
        n->status_us = at_us;
        pthread_mutex_unlock(&n->lock);
        native_sandbox_release(n->sync_fd);
        n->sync_fd = -1;
        {
                uint64_t one = 1;
                if (write(n->ended_fd, &one, sizeof(one)) < 0) {
                        /* an eventfd write of 1 cannot fail */
                }
        }
}

/* Up to @size - 1 bytes of the caller's memory at @addr into @buf (NUL-ended); the bytes read,
 * or -1. /proc/PID/mem reads page by page and stops at the first unmapped one. The id is
 * checked after the open, so a recycled pid's memory is never read (seccomp_unotify(2)). */
static ssize_t peek(const struct native_notify *n, const struct seccomp_notif *req, uint64_t addr,
                    char *buf, size_t size)
{
        size_t got = 0;

        /* process_vm_readv(2) stops at an unmapped page: read up to each page's end */
        while (got < size - 1) {
                size_t room = 4096 - (size_t)((addr + got) % 4096);
                struct iovec l = {.iov_base = buf + got, .iov_len = room};
                struct iovec r = {.iov_base = (void *)(uintptr_t)(addr + got)};
                if (l.iov_len > size - 1 - got)
                        l.iov_len = size - 1 - got;
                r.iov_len = l.iov_len;
                ssize_t k = process_vm_readv((pid_t)req->pid, &l, 1, &r, 1, 0);
                if (k <= 0)
                        break;
                got += (size_t)k;
                if (memchr(buf + got - k, '\0', (size_t)k))
                        break;
        }
        /* the caller still waits for us: the memory was its (a recycled pid fails here) */
        if (got == 0 || ioctl(n->listener_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0)
                return -1;
        buf[got] = '\0';
        return (ssize_t)got;
}

/* @p made absolute against the caller's directory @dirfd, or its cwd, as its /proc link names
 * it, and lexically clean (sbx_path_lexical()). Best effort: a symlink on the way is not
 * followed, and the caller can change the path after it was read (the masks, not this record,
 * keep the secret out). Returns a new string. */
static char *absolute(const struct seccomp_notif *req, int dirfd, const char *p)
{
        char link[64], base[PATH_MAX] = "/";

        if (p[0] != '/') {
                if (dirfd == AT_FDCWD)
                        native_strf(link, sizeof(link), "/proc/%u/cwd", req->pid);
                else
                        native_strf(link, sizeof(link), "/proc/%u/fd/%d", req->pid, dirfd);
                ssize_t k = readlink(link, base, sizeof(base) - 1);
                base[k > 0 ? k : 1] = '\0';
        }
        return sbx_path_lexical(p, base);
}

/* The native numbers of watched_calls, resolved once per run by notify_start(). */
static int watched_nr(const struct native_notify *n, const char *name)
{
        for (size_t i = 0; watched_calls[i]; i++)
                if (strcmp(watched_calls[i], name) == 0)
                        return n->watch_nr[i];
        return -1;
}

/* A watched open: recorded when the path is a watched one or beneath it. */
static void watch_open(struct native_notify *n, const struct seccomp_notif *req)
{
        bool at = req->data.nr != watched_nr(n, "open");
        char p[PATH_MAX], what[PATH_MAX + 16];
        _cleanup_free_ char *abs_path = NULL;

        if (!n->watch || peek(n, req, req->data.args[at ? 1 : 0], p, sizeof(p)) <= 0)
                return;
        abs_path = absolute(req, at ? (int)req->data.args[0] : AT_FDCWD, p);
        for (size_t i = 0; n->watch[i]; i++) {
                size_t len = strlen(n->watch[i]);
                if (strncmp(abs_path, n->watch[i], len) != 0 ||
                    (abs_path[len] != '\0' && abs_path[len] != '/'))
                        continue;
                native_strf(what, sizeof(what), "open %s", abs_path);
                pthread_mutex_lock(&n->lock);
                record_in(n->tried, sizeof(n->tried), &n->tried_unlisted, what);
                pthread_mutex_unlock(&n->lock);
                return;
        }
}

/* A watched connect, or a sendto with an address (@verb): the address (argument @arg, its
 * length the next one), recorded (the egress proxy's own address aside). */
static void watch_connect(struct native_notify *n, const struct seccomp_notif *req,
                          const char *verb, unsigned arg)
{
        char sa[sizeof(struct sockaddr_storage) + 1], host[INET6_ADDRSTRLEN], what[160];
        uint64_t len =
            req->data.args[arg + 1] < sizeof(sa) - 1 ? req->data.args[arg + 1] : sizeof(sa) - 1;
        sa_family_t fam;
        uint16_t port;
        ssize_t k =
            len >= sizeof(fam) ? peek(n, req, req->data.args[arg], sa, (size_t)len + 1) : -1;

        if (k < (ssize_t)sizeof(fam))
                return;
        memcpy(&fam, sa, sizeof(fam));
        if (fam == AF_INET && k >= (ssize_t)sizeof(struct sockaddr_in)) {
                struct sockaddr_in in;
                memcpy(&in, sa, sizeof(in));
                inet_ntop(AF_INET, &in.sin_addr, host, sizeof(host));
                port = ntohs(in.sin_port);
                if (n->skip_port && port == n->skip_port && strcmp(host, "127.0.0.1") == 0)
                        return;
                native_strf(what, sizeof(what), "%s %s:%u", verb, host, port);
        } else if (fam == AF_INET6 && k >= (ssize_t)sizeof(struct sockaddr_in6)) {
                struct sockaddr_in6 in6;
                memcpy(&in6, sa, sizeof(in6));
                inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof(host));
                native_strf(what, sizeof(what), "%s [%s]:%u", verb, host, ntohs(in6.sin6_port));
        } else if (fam == AF_UNIX && k > (ssize_t)sizeof(fam)) {
                const char *path = sa + sizeof(fam);
                native_strf(what, sizeof(what), "%s unix:%s%.100s", verb, path[0] ? "" : "@",
                            path[0] ? path : path + 1);
        } else {
                return;
        }
        pthread_mutex_lock(&n->lock);
        record_in(n->tried, sizeof(n->tried), &n->tried_unlisted, what);
        pthread_mutex_unlock(&n->lock);
}

/* A call of watched_calls: recorded if it names something watched, then let through as the
 * call it is (SECCOMP_USER_NOTIF_FLAG_CONTINUE, Linux 5.5). Never counted as a refusal. */
static bool on_watched(struct native_notify *n, const struct seccomp_notif *req)
{
        struct seccomp_notif_resp resp = {.id = req->id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE};
        bool hit = false;

        for (size_t i = 0; n->watching && watched_calls[i]; i++)
                hit |= n->watch_nr[i] >= 0 && req->data.nr == n->watch_nr[i];
        if (!hit || req->data.arch != n->watch_arch)
                return false;
        if (req->data.nr == watched_nr(n, "connect"))
                watch_connect(n, req, "connect", 1);
        else if (req->data.nr == watched_nr(n, "sendto"))
                watch_connect(n, req, "sendto", 4);
        else
                watch_open(n, req);
        if (ioctl(n->listener_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0) {
                /* ENOENT: the caller was killed meanwhile */
        }
        return true;
}

static void on_notification(struct native_notify *n)
{
        struct seccomp_notif req;
        struct seccomp_notif_resp resp;
        bool last;

        memset(&req, 0, sizeof(req));
        if (ioctl(n->listener_fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
                return; /* EINTR, or ENOENT: the caller died meanwhile */
        if (on_watched(n, &req))
                return;
        memset(&resp, 0, sizeof(resp));
        resp.id = req.id;
        pthread_mutex_lock(&n->lock);
        if (n->reports < NATIVE_MAX_REPORTS) {
                char name[64];
                n->reports++;
                name_of(&req, name, sizeof(name));
                record(n, name);
                resp.error = -EPERM;
        } else {
                n->stopped_reporting = true;
                resp.error = -ENOSYS;
        }
        /* a watching supervisor keeps its listener: without it every open would fail */
        last = n->reports >= NATIVE_MAX_REPORTS && !n->watching;
        if (n->reports >= NATIVE_MAX_REPORTS)
                n->stopped_reporting = true;
        pthread_mutex_unlock(&n->lock);
        if (ioctl(n->listener_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0) {
                /* ENOENT: the caller was killed while we answered */
        }
        if (last) {
                /* The cap is reached: no round trip to the server any more. With the listener
                 * closed, the kernel answers every later notified call with ENOSYS by itself
                 * (seccomp_do_user_notification() when the filter has no listener; a pending
                 * one gets ENOSYS from seccomp_notify_detach()), so a run that loops on a
                 * refused call spends its own CPU, not the server's. */
                close(n->listener_fd);
                n->listener_fd = -1;
        }
}

static void *notify_main(void *arg)
{
        struct native_notify *n = arg;
        bool listening = n->listener_fd >= 0;

        for (;;) {
                struct pollfd pfd[3] = {
                    {.fd = n->stop_fd, .events = POLLIN},
                    {.fd = listening ? n->listener_fd : -1, .events = POLLIN},
                    {.fd = n->sync_fd, .events = POLLIN},
                };
                if (poll(pfd, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (pfd[0].revents)
                        break;
                if (pfd[1].revents & POLLIN) {
                        on_notification(n);
                        listening = n->listener_fd >= 0; /* closed at the reporting cap */
                } else if (pfd[1].revents)
                        listening = false; /* every process of the run has gone */
                if (pfd[2].revents)
                        on_sync(n);
        }
        return NULL;
}

static int notify_start(struct native_notify *n, int listener_fd, int sync_fd,
                        void (*on_exit)(void *ud), void *on_exit_ud, const char *const *watch,
                        uint16_t skip_port, struct sbx_error *err)
{
        int r;

        memset(n, 0, sizeof(*n));
        n->watching = watch != NULL;
        n->watch = watch;
        n->watch_arch = seccomp_arch_native(); /* the AUDIT_ARCH_ value seccomp_data has */
        for (size_t i = 0; watched_calls[i]; i++)
                n->watch_nr[i] =
                    seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, watched_calls[i]);
        /* Linux 6.6: wake the supervisor on the caller's CPU, a round trip per open made
         * cheaper (gVisor's use); older kernels say EINVAL, and it is only speed */
        if (watch && listener_fd >= 0) /* SECCOMP_IOCTL_NOTIF_SET_FLAGS: the flags by value */
                (void)ioctl(listener_fd, _IOW('!', 4, uint64_t),
                            1UL /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP */);
        n->skip_port = skip_port;
        n->listener_fd = listener_fd;
        n->sync_fd = sync_fd;
        n->on_exit = on_exit;
        n->on_exit_ud = on_exit_ud;
        n->tasks_at_end = -1;
        n->stop_fd = eventfd(0, EFD_CLOEXEC);
        n->ended_fd = eventfd(0, EFD_CLOEXEC);
        pthread_mutex_init(&n->lock, NULL);
        if (n->stop_fd < 0 || n->ended_fd < 0)
                return sbx_fail(err, errno,
                                "cannot create an eventfd for the seccomp supervisor: %m");
        r = pthread_create(&n->thread, NULL, notify_main, n);
        if (r != 0)
                return sbx_fail(err, r, "cannot start the seccomp supervisor thread: %s",
                                strerror(r));
        n->started = true;
        return 0;
}

int native_notify_start(struct native_notify *n, int listener_fd, int sync_fd,
                        void (*on_exit)(void *ud), void *on_exit_ud, struct sbx_error *err)
{
        return notify_start(n, listener_fd, sync_fd, on_exit, on_exit_ud, NULL, 0, err);
}

int native_notify_start_watch(struct native_notify *n, int listener_fd, int sync_fd,
                              const char *const *watch, uint16_t skip_port, struct sbx_error *err)
{
        static const char *const none[] = {NULL};

        return notify_start(n, listener_fd, sync_fd, NULL, NULL, watch ? watch : none, skip_port,
                            err);
}

void native_notify_finish(struct native_notify *n, struct run_result *res)
{
        uint64_t one = 1;

        if (n->started) {
                if (write(n->stop_fd, &one, sizeof(one)) < 0) {
                        /* an eventfd write of 1 cannot fail */
                }
                pthread_join(n->thread, NULL);
                n->started = false;
        }
        if (res) {
                native_strf(res->blocked_syscalls, sizeof(res->blocked_syscalls), "%s", n->names);
                res->blocked_syscalls_unlisted = n->unlisted;
                res->blocked_reporting_stopped = n->stopped_reporting;
        }
        if (n->listener_fd >= 0)
                close(n->listener_fd);
        if (n->stop_fd >= 0)
                close(n->stop_fd);
        if (n->ended_fd >= 0)
                close(n->ended_fd);
        n->listener_fd = n->stop_fd = n->ended_fd = -1;
        pthread_mutex_destroy(&n->lock);
}
