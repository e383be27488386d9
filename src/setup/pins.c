/* pins.c - reading images/pins. */
#include "setup/pins.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

#ifndef VESTIBULE_SOURCE_DIR
#define VESTIBULE_SOURCE_DIR ""
#endif

static bool is_hex64(const char *s)
{
        size_t i;

        for (i = 0; i < 64; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return s[64] == '\0';
}

/* name@sha256:<64 hex>, name non-empty, no blanks (already guaranteed by the parser). */
static bool is_pinned_ref(const char *v)
{
        const char *at = strstr(v, "@sha256:");

        return at && at != v && is_hex64(at + strlen("@sha256:"));
}

void setup_pins_done(struct setup_pins *p)
{
        if (!p)
                return;
        free(p->python_registry);
        free(p->node_registry);
        free(p->python_debian);
        free(p->node_debian);
        free(p->debian_recipe);
        memset(p, 0, sizeof(*p));
}

int setup_pins_parse(const char *text, struct setup_pins *ret, struct sbx_error *err)
{
        struct setup_pins p = {0};
        const char *line = text;
        unsigned lineno = 0;
        int r = 0;

        while (line && *line) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t)(nl - line) : strlen(line);
                _cleanup_free_ char *l = xstrndup(line, len);
                char *s = l, *eq, *val, *end, **slot = NULL;

                lineno++;
                line = nl ? nl + 1 : NULL;
                while (*s == ' ' || *s == '\t' || *s == '\r')
                        s++;
                if (*s == '\0' || *s == '#' || *s == '\r')
                        continue;
                eq = strchr(s, '=');
                if (!eq) {
                        r = sbx_fail(err, EINVAL, "images/pins line %u: expected key=value",
                                     lineno);
                        goto fail;
                }
                *eq = '\0';
                val = eq + 1;
                end = val + strcspn(val, " \t\r");
                if (*end) {
                        char *rest = end + strspn(end, " \t\r");
                        if (*rest && *rest != '#') {
                                r = sbx_fail(err, EINVAL,
                                             "images/pins line %u: text after the value of '%s' "
                                             "must be a '# comment'",
                                             lineno, s);
                                goto fail;
                        }
                        *end = '\0';
                }
                if (strcmp(s, "python.registry") == 0)
                        slot = &p.python_registry;
                else if (strcmp(s, "node.registry") == 0)
                        slot = &p.node_registry;
                else if (strcmp(s, "python.debian") == 0)
                        slot = &p.python_debian;
                else if (strcmp(s, "node.debian") == 0)
                        slot = &p.node_debian;
                else if (strcmp(s, "debian.recipe") == 0)
                        slot = &p.debian_recipe;
                if (!slot) {
                        r = sbx_fail(err, EINVAL, "images/pins line %u: unknown key '%s'", lineno,
                                     s);
                        goto fail;
                }
                if (*slot) {
                        r = sbx_fail(err, EINVAL, "images/pins line %u: '%s' set twice", lineno, s);
                        goto fail;
                }
                if (*val == '\0') {
                        r = sbx_fail(err, EINVAL, "images/pins line %u: '%s' is empty", lineno, s);
                        goto fail;
                }
                if ((slot == &p.python_registry || slot == &p.node_registry) &&
                    !is_pinned_ref(val)) {
                        r = sbx_fail(err, EINVAL,
                                     "images/pins line %u: '%s' must be pinned as "
                                     "name@sha256:<64 lowercase hex digits>, got '%s'",
                                     lineno, s, val);
                        goto fail;
                }
                if (slot == &p.debian_recipe &&
                    !(strncmp(val, "sha256:", 7) == 0 && is_hex64(val + 7))) {
                        r = sbx_fail(err, EINVAL,
                                     "images/pins line %u: debian.recipe must be "
                                     "sha256:<64 lowercase hex digits>, got '%s'",
                                     lineno, val);
                        goto fail;
                }
                *slot = xstrdup(val);
        }
        if (!p.python_registry || !p.node_registry || !p.python_debian || !p.node_debian ||
            !p.debian_recipe) {
                r = sbx_fail(err, EINVAL,
                             "images/pins lacks one of python.registry, node.registry, "
                             "python.debian, node.debian, debian.recipe");
                goto fail;
        }
        *ret = p;
        return 0;
fail:
        setup_pins_done(&p);
        return r;
}

static bool has_pins(const char *dir)
{
        _cleanup_free_ char *f = xasprintf("%s/pins", dir);

        return access(f, R_OK) == 0;
}

int setup_images_dir(char **ret_dir, struct sbx_error *err)
{
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        _cleanup_free_ char *installed = NULL, *source = NULL;

        if (n > 0) {
                char *slash;

                exe[n] = '\0';
                slash = strrchr(exe, '/');
                if (slash) {
                        *slash = '\0';
                        installed = xasprintf("%s/../share/vestibule/images", exe);
                        if (has_pins(installed)) {
                                *ret_dir = TAKE_PTR(installed);
                                return 0;
                        }
                }
        }
        if (VESTIBULE_SOURCE_DIR[0]) {
                source = xasprintf("%s/images", VESTIBULE_SOURCE_DIR);
                if (has_pins(source)) {
                        *ret_dir = TAKE_PTR(source);
                        return 0;
                }
        }
        return sbx_fail(err, ENOENT,
                        "cannot find images/pins: looked in '%s' and '%s'; reinstall Vestibule "
                        "(the pins are installed under share/vestibule/images)",
                        installed ? installed : "(no executable path)",
                        source ? source : "(no source directory compiled in)");
}

int setup_pins_load(struct setup_pins *ret, struct sbx_error *err)
{
        _cleanup_free_ char *dir = NULL, *path = NULL, *text = NULL;
        FILE *f;
        size_t len;
        bool failed;
        int r;

        r = setup_images_dir(&dir, err);
        if (r < 0)
                return r;
        path = xasprintf("%s/pins", dir);
        f = fopen(path, "re");
        if (!f)
                return sbx_fail(err, errno, "cannot open '%s': %s", path, strerror(errno));
        text = xmalloc(65536);
        len = fread(text, 1, 65535, f);
        failed = ferror(f) != 0;
        fclose(f);
        if (failed)
                return sbx_fail(err, EIO, "cannot read '%s'", path);
        if (len == 65535)
                return sbx_fail(err, EFBIG, "'%s' is larger than 64 KiB: not a pins file", path);
        text[len] = '\0';
        r = setup_pins_parse(text, ret, err);
        if (r < 0)
                return sbx_wrap(err, "%s", path);
        return 0;
}
