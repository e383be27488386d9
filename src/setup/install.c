/* install.c - one language's rootfs: lock, skip-if-installed, unpack into a temporary tree,
 * check it, swap it in atomically, record it (see setup.h for the layout and the rules). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "lazy/sha256.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "rootfs/hold.h"
#include "setup/setup.h"
#include "setup/setup_internal.h"

#ifndef VESTIBULE_VERSION
#define VESTIBULE_VERSION "unknown"
#endif

static void json_putp(json_object **j)
{
        if (*j)
                json_object_put(*j);
}

static bool language_ok(const char *l)
{
        return l && (strcmp(l, "python") == 0 || strcmp(l, "node") == 0);
}

static int mkdir_p(const char *path, mode_t mode)
{
        _cleanup_free_ char *p = xstrdup(path);
        char *s;

        for (s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int setup_installed_identity(const char *rootfs_dir, const char *language, char **ret_identity,
                             char **ret_recipe, struct sbx_error *err)
{
        _cleanup_free_ char *rec = xasprintf("%s/%s.json", rootfs_dir, language);
        _cleanup_free_ char *tree = xasprintf("%s/%s", rootfs_dir, language);
        _cleanup_(json_putp) json_object *j = NULL;
        json_object *id = NULL, *recipe = NULL;
        struct stat st;

        if (lstat(tree, &st) < 0 || !S_ISDIR(st.st_mode) || access(rec, F_OK) < 0)
                return sbx_fail(err, ENOENT, "no %s rootfs installed in '%s'", language,
                                rootfs_dir);
        j = json_object_from_file(rec);
        if (!j || !json_object_object_get_ex(j, "identity", &id) ||
            !json_object_is_type(id, json_type_string))
                return sbx_fail(err, EBADMSG, "'%s' is not a setup record: run setup again", rec);
        *ret_identity = xstrdup(json_object_get_string(id));
        if (ret_recipe)
                *ret_recipe = json_object_object_get_ex(j, "recipe", &recipe) &&
                                      json_object_is_type(recipe, json_type_string)
                                  ? xstrdup(json_object_get_string(recipe))
                                  : NULL;
        return 0;
}

/* Remove what a killed setup of @language left behind (we hold the lock: none is running). */
static void sweep_leftovers(int dfd, const char *language)
{
        _cleanup_free_ char *partial = xasprintf(".%s.partial-", language);
        _cleanup_free_ char *old = xasprintf(".%s.old-", language);
        _cleanup_free_ char *rec = xasprintf(".%s.json.tmp", language);
        _cleanup_strv_free_ char **names = NULL;
        ssize_t n = sbx_dir_names(dfd, ".", &names);

        for (ssize_t i = 0; i < n; i++) {
                if (strncmp(names[i], partial, strlen(partial)) != 0 &&
                    strncmp(names[i], old, strlen(old)) != 0 && strcmp(names[i], rec) != 0)
                        continue;
                /* an old tree (or, after a kill between the swap and its rename, a .partial-
                 * one) may still be a live run's /: only what no run holds goes */
                int r = setup_remove_unheld(dfd, names[i]);

                if (r == -EBUSY)
                        log_info("'%s' is still used by a running sandbox, left for later",
                                 names[i]);
                else if (r < 0)
                        log_warning("cannot remove leftover '%s': %s, ignoring", names[i],
                                    strerror(-r));
                else
                        log_info("removed '%s', left by an earlier setup", names[i]);
        }
}

/* The run's mount points must be real directories: mounting onto a symlink follows it. */
static int check_mount_points(int rootfd, const char *language, struct sbx_error *err)
{
        static const struct {
                const char *name;
                mode_t mode;
        } points[] = {
            {"dev", 0755},  {"proc", 0555},      {"sys", 0555},
            {"tmp", 01777}, {"workspace", 0755}, {"sandbox", 0755},
        };
        size_t i;

        for (i = 0; i < ELEMENTSOF(points); i++) {
                struct stat st;

                if (fstatat(rootfd, points[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                        if (!S_ISDIR(st.st_mode))
                                return sbx_fail(err, EPERM,
                                                "refused the %s rootfs: /%s is not a directory "
                                                "(%s), and a run mounts onto it",
                                                language, points[i].name,
                                                S_ISLNK(st.st_mode) ? "a symlink" : "a file");
                        continue;
                }
                if (errno != ENOENT)
                        return sbx_fail(err, errno, "cannot check /%s in the %s rootfs: %s",
                                        points[i].name, language, strerror(errno));
                if (mkdirat(rootfd, points[i].name, 0700) < 0 ||
                    fchmodat(rootfd, points[i].name, points[i].mode, 0) < 0)
                        return sbx_fail(err, errno, "cannot create /%s in the %s rootfs: %s",
                                        points[i].name, language, strerror(errno));
        }
        if (fchmod(rootfd, 0755) < 0)
                return sbx_fail(err, errno, "cannot chmod the %s rootfs: %s", language,
                                strerror(errno));
        return 0;
}

/* Is one of @paths an executable regular file, symlinks resolved as inside the rootfs? */
static int find_in_root(int rootfd, const char *const *paths, const char **ret_found)
{
        struct open_how how = {
            .flags = O_PATH | O_CLOEXEC,
            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };

        for (; *paths; paths++) {
                struct stat st;
                long fd = syscall(SYS_openat2, rootfd, *paths, &how, sizeof(how));

                if (fd < 0 && errno == ENOSYS)
                        return -ENOSYS;
                if (fd < 0)
                        continue;
                if (fstat((int)fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111)) {
                        close((int)fd);
                        *ret_found = *paths;
                        return 0;
                }
                close((int)fd);
        }
        return -ENOENT;
}

static int check_programs(int rootfd, const char *language, struct sbx_error *err)
{
        static const char *const python[] = {"usr/local/bin/python3", "usr/bin/python3", NULL};
        static const char *const node[] = {"usr/local/bin/node", "usr/bin/node", NULL};
        static const char *const bash[] = {"usr/bin/bash", "bin/bash", NULL};
        static const char *const timeout[] = {"usr/bin/timeout", "bin/timeout", NULL};
        const struct {
                const char *what;
                const char *const *paths;
        } need[] = {
            {strcmp(language, "python") == 0 ? "python3" : "node",
             strcmp(language, "python") == 0 ? python : node},
            {"bash", bash},
            {"timeout (coreutils)", timeout},
        };
        size_t i;

        for (i = 0; i < ELEMENTSOF(need); i++) {
                const char *found = NULL;
                int r = find_in_root(rootfd, need[i].paths, &found);

                if (r == -ENOSYS) {
                        log_warning("cannot check the %s rootfs's programs: no openat2 in this "
                                    "kernel, ignoring",
                                    language);
                        return 0;
                }
                if (r < 0)
                        return sbx_fail(err, ENOENT,
                                        "refused the %s rootfs: it has no %s (looked for /%s and "
                                        "/%s); a sandbox image must provide bash, coreutils "
                                        "timeout and the interpreter",
                                        language, need[i].what, need[i].paths[0], need[i].paths[1]);
        }
        return 0;
}

static int write_record(int dfd, const char *language, const struct setup_source *src,
                        const char *identity, const struct setup_unpack_stats *st,
                        struct sbx_error *err)
{
        _cleanup_(json_putp) json_object *j = json_object_new_object();
        _cleanup_free_ char *tmp = xasprintf(".%s.json.tmp", language);
        _cleanup_free_ char *final = xasprintf("%s.json", language);
        _cleanup_close_ int fd = -1;
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        const char *text;
        size_t len;

        gmtime_r(&now, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_object_object_add(j, "language", json_object_new_string(language));
        json_object_object_add(j, "source", json_object_new_string(src->description));
        json_object_object_add(j, "identity", json_object_new_string(identity));
        if (src->recipe)
                json_object_object_add(j, "recipe", json_object_new_string(src->recipe));
        json_object_object_add(j, "installed_at", json_object_new_string(when));
        json_object_object_add(j, "vestibule_version", json_object_new_string(VESTIBULE_VERSION));
        json_object_object_add(j, "entries", json_object_new_int64((int64_t)st->entries));
        json_object_object_add(j, "file_bytes", json_object_new_int64((int64_t)st->file_bytes));
        json_object_object_add(j, "skipped_special",
                               json_object_new_int64((int64_t)st->skipped_special));
        json_object_object_add(j, "stripped_setid",
                               json_object_new_int64((int64_t)st->stripped_setid));
        json_object_object_add(j, "whiteouts", json_object_new_int64((int64_t)st->whiteouts));
        text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY);
        len = strlen(text);

        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 ||
            fsync(fd) < 0 || renameat(dfd, tmp, dfd, final) < 0) {
                int e = errno ? errno : EIO;
                unlinkat(dfd, tmp, 0);
                return sbx_fail(err, e, "cannot write the setup record '%s': %s", final,
                                strerror(e));
        }
        return 0;
}

/* Rename the old tree @tmpname, which a run holds, to .<language>.old-XXXXXX and leave it: the
 * next setup or setup_rootfs_collect() deletes it once no run holds it. */
static int keep_old_tree(int dfd, const char *tmpname, const char *language, const char *rootfs_dir,
                         const struct setup_opts *o)
{
        static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        char name[64];
        unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
        int i, j;

        for (i = 0; i < 100; i++) {
                int n = snprintf(name, sizeof(name), ".%s.old-", language);

                for (j = 0; j < 6; j++)
                        name[n + j] = chars[rand_r(&seed) % (sizeof(chars) - 1)];
                name[n + 6] = '\0';
                if (renameat2(dfd, tmpname, dfd, name, RENAME_NOREPLACE) == 0)
                        break;
                if (errno != EEXIST) {
                        /* keep it under its .partial- name: sweeps also spare held trees */
                        snprintf(name, sizeof(name), "%s", tmpname);
                        break;
                }
        }
        if (o && o->progress)
                fprintf(o->progress,
                        "%s: the old rootfs is still used by a running sandbox: kept as '%s/%s' "
                        "until it ends (the next setup or server start removes it then)\n",
                        language, rootfs_dir, name);
        return 0;
}

static void unlock_closep(int *fd)
{
        if (*fd >= 0)
                close(*fd); /* closing drops the flock */
}

int setup_install(const char *rootfs_dir, const struct setup_source *src,
                  const struct setup_opts *o, bool *ret_skipped, struct setup_unpack_stats *stats,
                  struct sbx_error *err)
{
        _cleanup_close_ int dfd = -1, treefd = -1, oldfd = -1;
        _cleanup_(unlock_closep) int lockfd = -1, swapfd = -1;
        _cleanup_free_ char *identity = NULL, *have = NULL, *tmpl = NULL;
        _cleanup_free_ char *record = NULL;
        struct setup_unpack_stats st = {0};
        const char *tmpname;
        char hex[65];
        size_t i;
        int r;

        if (!language_ok(src->language))
                return sbx_fail(err, EINVAL, "unknown language '%s': use python or node",
                                src->language ? src->language : "");
        if (!rootfs_dir || rootfs_dir[0] != '/')
                return sbx_fail(err, EINVAL, "the rootfs folder '%s' must be an absolute path",
                                rootfs_dir ? rootfs_dir : "");
        if (src->n_layers == 0 || (src->n_layers > 1 && !src->identity))
                return sbx_fail(err, EINVAL,
                                "nothing to install, or several layers without a "
                                "manifest digest");
        r = mkdir_p(rootfs_dir, 0755);
        if (r < 0)
                return sbx_fail(err, -r, "cannot create the rootfs folder '%s': %s", rootfs_dir,
                                strerror(-r));
        dfd = open(rootfs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return sbx_fail(err, errno, "cannot open '%s': %s", rootfs_dir, strerror(errno));
        lockfd = openat(dfd, ".setup.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (lockfd < 0)
                return sbx_fail(err, errno, "cannot open '%s/.setup.lock': %s", rootfs_dir,
                                strerror(errno));
        if (flock(lockfd, LOCK_EX | LOCK_NB) < 0)
                return sbx_fail(err, errno == EWOULDBLOCK ? EBUSY : errno,
                                "another vestibule-mcp setup is working in '%s': wait for it "
                                "to finish, then run setup again",
                                rootfs_dir);
        /* Runs hold .swap.lock shared while they mount a tree (hold.h): created here, before
         * anything is unpacked, readable by the users runs are started as. */
        swapfd = openat(dfd, SETUP_SWAP_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (swapfd < 0 || fchmod(swapfd, 0644) < 0)
                return sbx_fail(err, errno, "cannot create '%s/" SETUP_SWAP_LOCK "': %s",
                                rootfs_dir, strerror(errno));
        sweep_leftovers(dfd, src->language);

        if (src->identity) {
                identity = xstrdup(src->identity);
        } else {
                if (o && o->progress)
                        fprintf(o->progress, "%s: checking sha256 of '%s'\n", src->language,
                                src->layers[0]);
                r = sbx_sha256_file(src->layers[0], o ? o->cancel : NULL, hex, err);
                if (r < 0)
                        return r;
                identity = xasprintf("sha256:%s", hex);
        }
        if (!(o && o->force) &&
            setup_installed_identity(rootfs_dir, src->language, &have, NULL, NULL) == 0 &&
            strcmp(have, identity) == 0) {
                if (o && o->progress)
                        fprintf(o->progress, "%s: already installed (%s), nothing to do\n",
                                src->language, identity);
                if (ret_skipped)
                        *ret_skipped = true;
                return 0;
        }

        tmpl = xasprintf("%s/.%s.partial-XXXXXX", rootfs_dir, src->language);
        if (!mkdtemp(tmpl))
                return sbx_fail(err, errno, "cannot create a temporary folder in '%s': %s",
                                rootfs_dir, strerror(errno));
        tmpname = strrchr(tmpl, '/') + 1;
        for (i = 0; i < src->n_layers; i++) {
                _cleanup_free_ char *label =
                    src->n_layers == 1
                        ? xstrdup(src->language)
                        : xasprintf("%s layer %zu/%zu", src->language, i + 1, src->n_layers);
                const char *expect = src->layer_sha256 ? src->layer_sha256[i] : NULL;

                if (!expect && !src->identity)
                        expect = identity + strlen("sha256:"); /* the bytes hashed above */
                r = setup_unpack_layer(tmpl, src->layers[i], label, expect, o, &st, NULL, err);
                if (r < 0)
                        goto fail;
        }
        treefd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (treefd < 0) {
                r = sbx_fail(err, errno, "cannot open '%s': %s", tmpl, strerror(errno));
                goto fail;
        }
        r = check_mount_points(treefd, src->language, err);
        if (r < 0)
                goto fail;
        r = check_programs(treefd, src->language, err);
        if (r < 0)
                goto fail;
        if (o && o->cancel && *o->cancel) {
                r = sbx_fail(err, EINTR, "setup of %s was cancelled", src->language);
                goto fail;
        }
        /* Durable before visible; the record goes first, so a crash between the swap and the
         * new record leaves no record (a reinstall), never a record naming the old tree. */
        if (syncfs(treefd) < 0)
                log_warning("syncfs on '%s' failed: %s, ignoring", tmpl, strerror(errno));
        record = xasprintf("%s.json", src->language);
        if (unlinkat(dfd, record, 0) < 0 && errno != ENOENT) {
                r = sbx_fail(err, errno, "cannot remove the old record '%s/%s': %s", rootfs_dir,
                             record, strerror(errno));
                goto fail;
        }
        /* The swap, while no run is between opening a tree and mounting it (hold.h). */
        r = 0;
        while (flock(swapfd, LOCK_EX) < 0) {
                if (errno != EINTR || (o && o->cancel && *o->cancel)) {
                        r = sbx_fail(err, errno, "cannot lock '%s/" SETUP_SWAP_LOCK "': %s",
                                     rootfs_dir, strerror(errno));
                        goto fail;
                }
        }
        oldfd = openat(dfd, src->language, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (renameat2(dfd, tmpname, dfd, src->language, RENAME_EXCHANGE) < 0) {
                if (errno != ENOENT ||
                    renameat2(dfd, tmpname, dfd, src->language, RENAME_NOREPLACE) < 0) {
                        r = sbx_fail(err, errno, "cannot move the new %s rootfs into '%s': %s",
                                     src->language, rootfs_dir, strerror(errno));
                        flock(swapfd, LOCK_UN);
                        goto fail;
                }
        }
        flock(swapfd, LOCK_UN);
        /* tmpname now holds the old tree, if there was one */
        r = write_record(dfd, src->language, src, identity, &st, err);
        if (r < 0)
                goto fail;
        if (oldfd >= 0 && flock(oldfd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
                /* a run has the old tree as its /: deleting it would pull files from under it */
                r = keep_old_tree(dfd, tmpname, src->language, rootfs_dir, o);
        } else {
                r = setup_remove_tree(dfd, tmpname);
                if (r < 0)
                        log_warning("cannot remove the old %s rootfs '%s/%s': %s, ignoring (the "
                                    "next setup removes it)",
                                    src->language, rootfs_dir, tmpname, strerror(-r));
        }
        if (o && o->progress)
                fprintf(o->progress,
                        "%s: installed %s into '%s/%s': %" PRIu64 " entries, %.1f MB; skipped "
                        "%" PRIu64 " device nodes/fifos, stripped %" PRIu64
                        " setuid/setgid bits, applied %" PRIu64 " whiteouts\n",
                        src->language, identity, rootfs_dir, src->language, st.entries,
                        (double)st.file_bytes / 1e6, st.skipped_special, st.stripped_setid,
                        st.whiteouts);
        if (stats)
                *stats = st;
        if (ret_skipped)
                *ret_skipped = false;
        return 0;
fail : {
        /* the partial tree, or after the swap the old one, which a run may hold */
        int rr = setup_remove_unheld(dfd, tmpname);

        if (rr < 0)
                log_warning("cannot remove '%s': %s (the next setup removes it)", tmpl,
                            strerror(-rr));
}
        if (stats)
                *stats = st;
        return r;
}
