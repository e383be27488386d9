/* sweep.c - the gvisor backend's sandbox folders of servers that are gone (box.h:
 * gvisor_owner_write(), gvisor_sweep_dirs()). A server killed mid-run (SIGKILL, OOM) cannot
 * remove its /tmp/vestibule-gvisor-XXXXXX folders; each has a "<folder>.owner" file beside it
 * with the server's owner label (common/owner.h), and the next gvisor server's probe removes
 * the folders whose owner is gone, after killing whatever still names their state folder. */
#include "gvisor/box.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/owner.h"
#include "gvisor/runsc.h"
#include "rootfs/tree.h"

#define DIR_PREFIX "vestibule-gvisor-"
#define OWNER_SUFFIX ".owner"
/* A gone owner's sandbox processes die within this. 2 s was not enough on a 2-core host at load
 * ~20 (a dry run of CI: the folder was left, and the sweep runs once a server); only a folder
 * of this user's is waited for. */
#define SWEEP_KILL_WAIT_MS 10000

int gvisor_owner_write(const char *dir, struct sbx_error *err)
{
        char path[96], label[320];
        int r = sbx_owner_label(getpid(), label, sizeof(label));

        if (r < 0)
                return sbx_fail(err, -r, "cannot read this server's start time in /proc");
        snprintf(path, sizeof(path), "%s" OWNER_SUFFIX, dir);
        _cleanup_close_ int fd =
            open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return sbx_fail(err, errno, "cannot make the gvisor sandbox's owner file '%s': %m",
                                path);
        size_t n = strlen(label);
        if (write(fd, label, n) != (ssize_t)n)
                return sbx_fail(err, EIO, "cannot write the gvisor sandbox's owner file '%s'",
                                path);
        return 0;
}

void gvisor_owner_remove(const char *dir)
{
        char path[96];

        snprintf(path, sizeof(path), "%s" OWNER_SUFFIX, dir);
        (void)unlink(path);
}

/* Folder @name (in /tmp, fd @tmp) of a gone owner: its processes killed, then the folder; the
 * owner file goes only with it. Return 1 when removed (sbx_owner_gone_each()'s callback). */
static int sweep_one(int tmp, const char *name, const char *owner_file, void *ud)
{
        char state[300];
        struct stat st;

        (void)ud;
        /* another user's: neither its processes nor its folder are ours to end */
        if (fstatat(tmp, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_uid != geteuid())
                return 0;
        snprintf(state, sizeof(state), "/tmp/%s/state", name);
        /* SIGKILL is not instant: bounded, SWEEP_KILL_WAIT_MS */
        for (uint64_t end = sbx_now_ms() + SWEEP_KILL_WAIT_MS;;) {
                (void)gvisor_runsc_kill(0, state);
                if (gvisor_runsc_left(state) == 0)
                        break;
                if (sbx_now_ms() >= end)
                        return 0; /* not ours to kill (another user's): left as it is */
                usleep(10000);
        }
        if (setup_remove_tree(tmp, name) < 0 ||
            faccessat(tmp, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return 0;
        (void)unlinkat(tmp, owner_file, 0);
        return 1;
}

unsigned gvisor_sweep_dirs(void)
{
        unsigned n = sbx_owner_gone_each(DIR_PREFIX, sweep_one, NULL);

        if (n > 0)
                log_info("gvisor: removed %u sandbox folder(s) of servers that are gone "
                         "(start-up sweep)",
                         n);
        return n;
}
