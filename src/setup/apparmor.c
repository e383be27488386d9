/* apparmor.c - `setup --apparmor`: write the profile that grants this binary user namespaces
 * (src/common/apparmor.h) to /etc/apparmor.d and load it, for installs the .deb did not make;
 * and the one-line hint a plain `setup` prints where Ubuntu's restriction applies. */
#include "setup/setup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/apparmor.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

/* apparmor_parser's places on Debian and Ubuntu (usrmerge or not). */
static const char *find_parser(void)
{
        static const char *const where[] = {"/usr/sbin/apparmor_parser", "/sbin/apparmor_parser"};

        for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
                if (access(where[i], X_OK) == 0)
                        return where[i];
        return NULL;
}

/* @text into @path whole, through a temporary file renamed over it (mode 0644). */
static int write_profile(const char *path, const char *text, struct sbx_error *err)
{
        _cleanup_free_ char *tmp = xasprintf("%s.vestibule-tmp", path);
        _cleanup_close_ int fd = -1;
        size_t len = strlen(text);

        if (mkdir("/etc/apparmor.d", 0755) < 0 && errno != EEXIST)
                return sbx_fail(err, errno, "cannot make /etc/apparmor.d: %m");
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return sbx_fail(err, errno, "cannot write '%s': %m", tmp);
        if (write(fd, text, len) != (ssize_t)len || fchmod(fd, 0644) < 0 || fsync(fd) < 0) {
                int e = errno ? errno : EIO;
                unlink(tmp);
                return sbx_fail(err, e, "cannot write '%s': %s", tmp, strerror(e));
        }
        if (rename(tmp, path) < 0) {
                int e = errno;
                unlink(tmp);
                return sbx_fail(err, e, "cannot rename '%s' to '%s': %s", tmp, path, strerror(e));
        }
        return 0;
}

/* apparmor_parser -r -W @file: load (or replace) the profile and write its cache. */
static int load_profile(const char *parser, const char *file, struct sbx_error *err)
{
        pid_t pid = fork();
        int st = 0;

        if (pid < 0)
                return sbx_fail(err, errno, "cannot fork: %m");
        if (pid == 0) {
                execl(parser, parser, "-r", "-W", file, (char *)NULL);
                _exit(127);
        }
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return sbx_fail(err, EIO,
                                "%s -r -W %s failed (its message is above; exit %d): the "
                                "profile is written but not loaded",
                                parser, file, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 0;
}

int setup_apparmor(FILE *out, struct sbx_error *err)
{
        _cleanup_free_ struct sbx_apparmor *a = xmalloc(sizeof(*a));
        _cleanup_free_ char *text = NULL;
        const char *parser;
        int r;

        sbx_apparmor_read("", a);
        if (geteuid() != 0)
                return sbx_fail(err, EPERM,
                                "--apparmor writes %s and loads it, which needs root: run "
                                "sudo '%s' setup --apparmor",
                                a->file, a->exe);
        /* AppArmor 3 cannot read the profile (abi 4.0, `userns`), and one unreadable profile
         * in /etc/apparmor.d fails apparmor.service at boot; its kernels have no restriction */
        if (access("/etc/apparmor.d/abi/4.0", F_OK) < 0)
                return sbx_fail(err, ENOENT,
                                "AppArmor 4 is not installed (no /etc/apparmor.d/abi/4.0): the "
                                "profile needs it, and an older AppArmor would fail to load it at "
                                "boot. Where the restriction is (Ubuntu 23.10+) AppArmor 4 is: "
                                "sudo apt-get install apparmor; elsewhere native needs no profile");
        if (strcmp(a->exe, SBX_APPARMOR_DEB_EXE) == 0 && a->file_exists) {
                /* the .deb's own file (a conffile, maybe with the admin's changes): load it */
                fprintf(out, "setup: %s is there (the .deb's)\n", a->file);
        } else {
                r = sbx_apparmor_profile_text(a->name, a->exe, &text, err);
                if (r < 0)
                        return r;
                r = write_profile(a->file, text, err);
                if (r < 0)
                        return r;
                fprintf(out,
                        "setup: wrote %s: it grants %s user namespaces and confines "
                        "nothing else\n",
                        a->file, a->exe);
        }
        if (!a->running) {
                fprintf(out,
                        "setup: AppArmor is not running on this kernel (no %s): nothing to "
                        "load, and native needs no profile here\n",
                        SBX_APPARMOR_FS);
                return 0;
        }
        parser = find_parser();
        if (!parser)
                return sbx_fail(err, ENOENT,
                                "apparmor_parser is not installed: sudo apt-get install "
                                "apparmor, then sudo apparmor_parser -r %s",
                                a->file);
        r = load_profile(parser, a->file, err);
        if (r < 0)
                return r;
        fprintf(out,
                "setup: loaded %s; restart the MCP server (or your client) so that it "
                "starts under it\n",
                a->file);
        return 0;
}

void setup_apparmor_hint(FILE *out)
{
        _cleanup_free_ struct sbx_apparmor *a = xmalloc(sizeof(*a));
        char fix[PATH_MAX + 64];

        sbx_apparmor_read("", a);
        if (a->restrict_userns != 1 || a->attached)
                return;
        sbx_apparmor_fix(a, fix, sizeof(fix));
        fprintf(out,
                "native isolation: Ubuntu restricts unprivileged user namespaces "
                "(kernel.apparmor_restrict_unprivileged_userns=1); the AppArmor profile %s "
                "grants them to this binary only. Install and load it with:\n  %s\n",
                a->file, fix);
}
