/* landlock.c - the second layer over the sandbox's filesystem view: even if a mount were
 * writable by mistake, writes succeed only beneath /tmp and /workspace (and to the /dev
 * nodes). Reads are not handled, so everything in the new root stays readable. Raw syscalls
 * only: this runs in the cloned child, where nothing may allocate. */
#include "native/native.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

/* scoped (ABI 6) may be missing from older uapi headers; the struct grows, the kernel reads
 * only the size we pass. */
struct ll_ruleset_attr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net;
        uint64_t scoped;
};

#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

int native_landlock_abi(void)
{
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        return abi < 0 ? 0 : (int)abi;
}

static int allow_path(int ruleset, const char *path, uint64_t access)
{
        struct landlock_path_beneath_attr pb = {.allowed_access = access};
        int fd = open(path, O_PATH | O_CLOEXEC);
        struct stat st;
        long r;

        if (fd < 0)
                return -errno;
        /* a file (an agent's ~/.claude.json) takes the file rights only: the folder rights on
         * a file are EINVAL (landlock_add_rule(2)) */
        if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
                pb.allowed_access &= LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE;
        pb.parent_fd = fd;
        r = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
        close(fd);
        return r < 0 ? -errno : 0;
}

int native_landlock_apply(bool workspace_ro, const char *const *writable)
{
        static const char *const devs[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                           "/dev/urandom"};
        struct ll_ruleset_attr attr = {0};
        uint64_t write_dir, write_file;
        size_t attr_size;
        int abi = native_landlock_abi(), ruleset, r;

        if (abi <= 0)
                return 0;
        write_file = LANDLOCK_ACCESS_FS_WRITE_FILE;
        write_dir = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                    LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                    LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                    LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
        if (abi >= 2)
                write_dir |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3) {
                write_dir |= LANDLOCK_ACCESS_FS_TRUNCATE;
                write_file |= LANDLOCK_ACCESS_FS_TRUNCATE;
        }
        attr.handled_access_fs = write_dir;
        attr_size = sizeof(uint64_t);
        if (abi >= 6) {
                /* the run's processes may not signal, or reach abstract sockets of, anything
                 * outside their own Landlock domain */
                attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
                attr_size = sizeof(attr);
        }
        ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
        if (ruleset < 0)
                return -errno;
        r = allow_path(ruleset, "/tmp", write_dir);
        if (r == 0)
                r = allow_path(ruleset, "/dev/shm", write_dir);
        if (r == 0 && !workspace_ro)
                r = allow_path(ruleset, "/workspace", write_dir);
        for (size_t i = 0; r == 0 && writable && writable[i]; i++)
                r = allow_path(ruleset, writable[i], write_dir);
        for (size_t i = 0; r == 0 && i < sizeof(devs) / sizeof(devs[0]); i++)
                r = allow_path(ruleset, devs[i], write_file);
        if (r == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                r = -errno;
        if (r == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
                r = -errno;
        close(ruleset);
        return r < 0 ? r : abi;
}
