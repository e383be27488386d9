/* apparmor.c - the userns profile's text, place and install command, and whether it is loaded
 * and applies here. See apparmor.h. */
#include "common/apparmor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/xalloc.h"

#ifndef VESTIBULE_APPARMOR_PROFILE
#error "VESTIBULE_APPARMOR_PROFILE must name packaging/apparmor/vestibule-mcp.in (CMakeLists.txt)"
#endif

/* The template, built in so that an npm install can write it (`setup --apparmor`); the .deb's
 * copy is made from the same file by scripts/package.sh. NUL-terminated. */
__asm__(".section .rodata\n"
        ".balign 16\n"
        ".global sbx_apparmor_template\n"
        "sbx_apparmor_template:\n"
        ".incbin \"" VESTIBULE_APPARMOR_PROFILE "\"\n"
        ".byte 0\n"
        ".previous\n");
extern const char sbx_apparmor_template[];

int sbx_apparmor_profiles_find(const char *list, const char *name)
{
        size_t n = strlen(name);

        for (const char *l = list; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, name, n) == 0 && (l[n] == ' ' || l[n] == '\n' || l[n] == '\0'))
                        return 1;
        return 0;
}

bool sbx_apparmor_label_is(const char *label, const char *name)
{
        size_t n = strlen(name);
        const char *p = label, *end = label + strcspn(label, " \n");

        /* a stack is "A//&B"; a child profile "A//B" is another profile */
        while (p < end) {
                const char *amp = strstr(p, "//&");
                const char *stop = amp && amp < end ? amp : end;

                if ((size_t)(stop - p) == n && strncmp(p, name, n) == 0)
                        return true;
                p = stop + 3;
        }
        return false;
}

/* The whole of a (small) text file under @root, or NULL. */
static char *read_text(const char *root, const char *path, int *ret_errno)
{
        _cleanup_free_ char *full = xasprintf("%s%s", root, path);
        _cleanup_fclose_ FILE *f = fopen(full, "re");
        char *text = NULL;
        size_t size = 0;
        ssize_t n;

        if (!f) {
                *ret_errno = errno;
                return NULL;
        }
        n = getdelim(&text, &size, '\0', f);
        if (n < 0) {
                free(text);
                *ret_errno = ferror(f) ? EIO : 0;
                return feof(f) ? xstrdup("") : NULL;
        }
        return text;
}

void sbx_apparmor_read(const char *root, struct sbx_apparmor *ret)
{
        _cleanup_free_ char *v = NULL, *label = NULL, *list = NULL, *fs = NULL, *file = NULL;
        char exe[PATH_MAX];
        ssize_t n;
        int e = 0;

        memset(ret, 0, sizeof(*ret));
        v = read_text(root, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", &e);
        ret->restrict_userns = v ? atoi(v) != 0 : -1;
        fs = xasprintf("%s" SBX_APPARMOR_FS, root);
        ret->running = access(fs, F_OK) == 0;
        /* apparmor/current since Linux 5.8 (LSM stacking); the shared attr/current before */
        label = read_text(root, "/proc/self/attr/apparmor/current", &e);
        if (!label && ret->running)
                label = read_text(root, "/proc/self/attr/current", &e);
        if (label)
                snprintf(ret->label, sizeof(ret->label), "%.*s", (int)strcspn(label, "\n"), label);
        n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        exe[n > 0 ? n : 0] = '\0';
        snprintf(ret->exe, sizeof(ret->exe), "%s", exe);
        snprintf(ret->name, sizeof(ret->name), "%s",
                 strcmp(exe, SBX_APPARMOR_DEB_EXE) == 0 ? "vestibule-mcp" : "vestibule-mcp-npm");
        snprintf(ret->file, sizeof(ret->file), "/etc/apparmor.d/%s", ret->name);
        file = xasprintf("%s%s", root, ret->file);
        ret->file_exists = access(file, F_OK) == 0;
        list = read_text(root, SBX_APPARMOR_FS "/profiles", &e);
        ret->loaded = list ? sbx_apparmor_profiles_find(list, ret->name) : -(e ? e : EIO);
        ret->attached = ret->label[0] && sbx_apparmor_label_is(ret->label, ret->name);
        if (ret->attached)
                ret->loaded = 1;
}

/* A copy of @t with every @from replaced by @to (caller frees). */
static char *replace(const char *t, const char *from, const char *to)
{
        size_t nf = strlen(from), nt = strlen(to), len = 0, count = 0;
        char *out, *o;

        for (const char *p = strstr(t, from); p; p = strstr(p + nf, from))
                count++;
        out = o = xmalloc(strlen(t) + count * nt + 1);
        for (const char *p = t, *hit; *p; p = hit + nf) {
                hit = strstr(p, from);
                len = hit ? (size_t)(hit - p) : strlen(p);
                memcpy(o, p, len);
                o += len;
                if (!hit)
                        break;
                memcpy(o, to, nt);
                o += nt;
        }
        *o = '\0';
        return out;
}

int sbx_apparmor_profile_text(const char *name, const char *exe, char **ret, struct sbx_error *err)
{
        _cleanup_free_ char *named = NULL;

        if (exe[0] != '/')
                return sbx_fail(err, EINVAL, "the binary's path '%s' is not absolute", exe);
        for (const char *p = exe; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f || strchr("\"\\*?[]{}^", *p))
                        return sbx_fail(err, EINVAL,
                                        "the binary's path '%s' holds '%c', which an AppArmor "
                                        "attachment reads as a pattern: move it to a plain "
                                        "path, or install the .deb (its profile is ready-made)",
                                        exe, *p >= 0x20 ? *p : '?');
        named = replace(sbx_apparmor_template, "@NAME@", name);
        *ret = replace(named, "@PATH@", exe);
        return 0;
}

void sbx_apparmor_fix(const struct sbx_apparmor *a, char *buf, size_t size)
{
        if (strcmp(a->exe, SBX_APPARMOR_DEB_EXE) == 0 && a->file_exists)
                snprintf(buf, size, "sudo apparmor_parser -r %s", a->file);
        else
                snprintf(buf, size, "sudo '%s' setup --apparmor", a->exe);
}
