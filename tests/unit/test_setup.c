/* test_setup.c - the setup module: images/pins, safe unpacking of crafted tarballs (escapes,
 * links, devices, setuid, whiteouts), and installs that are atomic, skip when unchanged and
 * leave nothing behind when they fail or are cancelled. */
#include "lazy/archive.h"
#include "lazy/curl.h"
#include <netinet/in.h>
#include "lazy/crypto.h"
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/chase.h"
#include "common/cleanup.h"
#include "lazy/sha256.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "run/backend.h"
#include "run/run.h"
#include "rootfs/hold.h"
#include "setup/pins.h"
#include "setup/registry.h"
#include "setup/setup.h"
#include "setup/setup_internal.h"
#include "setup/setup_run.h"
#include "testutil.h"
#include "native/backend.h"

#define REAL_PYTHON_TAR "/var/tmp/vestibule-images/python.tar"

/* ---- crafting tarballs with libarchive */

static struct archive *tb_open(const char *path)
{
        struct archive *a = archive_write_new();

        ck_assert_ptr_nonnull(a);
        ck_assert_int_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
        return a;
}

static void tb_close(struct archive *a)
{
        ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
}

static void tb_add(struct archive *a, const char *name, mode_t type, mode_t perm,
                   const char *content, const char *link, const char *hardlink, dev_t rdev)
{
        struct archive_entry *e = archive_entry_new();
        size_t len = content ? strlen(content) : 0;

        archive_entry_set_pathname(e, name);
        archive_entry_set_filetype(e, type);
        archive_entry_set_perm(e, perm);
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        archive_entry_set_mtime(e, 1794182400, 0);
        archive_entry_set_size(e, (la_int64_t)len);
        if (link)
                archive_entry_set_symlink(e, link);
        if (hardlink) {
                archive_entry_set_hardlink(e, hardlink);
                archive_entry_set_size(e, 0);
                len = 0;
        }
        if (rdev)
                archive_entry_set_rdev(e, rdev);
        ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
        if (len)
                ck_assert_int_eq(archive_write_data(a, content, len), (la_ssize_t)len);
        archive_entry_free(e);
}

#define tb_file(a, n, perm, c) tb_add(a, n, AE_IFREG, perm, c, NULL, NULL, 0)
#define tb_dir(a, n) tb_add(a, n, AE_IFDIR, 0755, NULL, NULL, NULL, 0)
#define tb_symlink(a, n, target) tb_add(a, n, AE_IFLNK, 0777, NULL, target, NULL, 0)
#define tb_hardlink(a, n, target) tb_add(a, n, AE_IFREG, 0644, NULL, NULL, target, 0)

/* A minimal rootfs the install checks accept (python3, bash, timeout). */
static void tb_minimal_rootfs(struct archive *a, const char *marker)
{
        tb_dir(a, "./");
        tb_dir(a, "./usr/");
        tb_dir(a, "./usr/bin/");
        tb_file(a, "./usr/bin/python3.11", 0755, "#!/bin/sh\necho python\n");
        tb_symlink(a, "./usr/bin/python3", "python3.11");
        tb_file(a, "./usr/bin/bash", 0755, "bash");
        tb_file(a, "./usr/bin/timeout", 0755, "timeout");
        tb_symlink(a, "./bin", "usr/bin");
        tb_dir(a, "./etc/");
        tb_file(a, "./etc/marker", 0644, marker);
        tb_dir(a, "./etc/alternatives/");
        tb_symlink(a, "./etc/alternatives/python", "/usr/bin/python3");
}

/* ---- fixture: T/tree (the unpack target), T/outside (must never change) */

static char *T, *tree, *outside;

/* fx_setup_in: the fixture in the new folder @t (taken). */
static void fx_setup_in(char *t)
{
        T = t;
        tree = xasprintf("%s/tree", T);
        outside = xasprintf("%s/outside", T);
        ck_assert_int_eq(mkdir(tree, 0755), 0);
        ck_assert_int_eq(mkdir(outside, 0755), 0);
        {
                _cleanup_free_ char *secret = xasprintf("%s/secret", outside);
                FILE *f = fopen(secret, "w");

                ck_assert_ptr_nonnull(f);
                fputs("original\n", f);
                fclose(f);
        }
}

static void fx_setup(void)
{
        fx_setup_in(sbx_test_tmpdir());
}

static void fx_teardown(void)
{
        int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        setup_remove_tree(fd, T + 1);
        close(fd);
        free(T);
        free(tree);
        free(outside);
}

static char *pathf(const char *fmt, const char *a)
{
        return xasprintf(fmt, a);
}

static bool exists(const char *p)
{
        struct stat st;

        return lstat(p, &st) == 0;
}

/* The outside folder holds exactly its one untouched file. */
static void assert_outside_untouched(void)
{
        _cleanup_free_ char *secret = xasprintf("%s/secret", outside);
        char buf[64] = {0};
        DIR *d;
        int n = 0;
        FILE *f = fopen(secret, "r");

        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
        fclose(f);
        ck_assert_str_eq(buf, "original\n");
        d = opendir(outside);
        ck_assert_ptr_nonnull(d);
        for (struct dirent *de; (de = readdir(d));)
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        ck_assert_int_eq(n, 1);
}

static int unpack(const char *tar, struct setup_unpack_stats *st, struct sbx_error *err)
{
        return setup_unpack_layer(tree, tar, "test", NULL, NULL, st, NULL, err);
}

/* ---- pins */

START_TEST(pins_file_parses_and_recipe_matches_build_sh)
{
        struct setup_pins p = {0};
        struct sbx_error err = {0};
        _cleanup_free_ char *dir = NULL, *script = NULL;
        char hex[65];

        ck_assert_msg(setup_pins_load(&p, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(p.python_registry,
                         "docker.io/library/python@sha256:"
                         "5e2bdb1b0d542d5039cffb8181c65930093949194a65c365dfb1b0fe13a4fa5b");
        ck_assert_str_eq(p.node_registry,
                         "docker.io/library/node@sha256:"
                         "5ec23b7c622b00547753bc6ffd78085dd868a68aeb41c8e0a1418f033e13d96d");
        ck_assert_str_eq(p.python_debian, "vestibule/python:bookworm");
        ck_assert_str_eq(p.node_debian, "vestibule/node:bookworm");
        ck_assert_int_eq(setup_images_dir(&dir, &err), 0);
        script = xasprintf("%s/build.sh", dir);
        ck_assert_int_eq(sbx_sha256_file(script, NULL, hex, &err), 0);
        ck_assert_msg(strcmp(p.debian_recipe + strlen("sha256:"), hex) == 0,
                      "images/pins debian.recipe is %s but images/build.sh is sha256:%s: re-pin it",
                      p.debian_recipe, hex);
        setup_pins_done(&p);
}
END_TEST

START_TEST(pins_reject_bad_input)
{
        static const char *good_rest = "python.debian=a:b\nnode.debian=c:d\n"
                                       "debian.recipe=sha256:"
                                       "0000000000000000000000000000000000000000000000000000000000"
                                       "000000\n";
        static const char *digest =
            "sha256:5e2bdb1b0d542d5039cffb8181c65930093949194a65c365dfb1b0fe13a4fa5b";
        struct setup_pins p = {0};
        struct sbx_error err = {0};
        _cleanup_free_ char *ok = xasprintf("# c\npython.registry=python@%s  # 2026-11-09\n"
                                            "node.registry=node@%s\n%s",
                                            digest, digest, good_rest);
        _cleanup_free_ char *tag = xasprintf("python.registry=python:3.12-slim\n"
                                             "node.registry=node@%s\n%s",
                                             digest, good_rest);
        _cleanup_free_ char *unknown = xasprintf("%s\npyhton.registry=python@%s\n", ok, digest);
        _cleanup_free_ char *missing = xasprintf("node.registry=node@%s\n%s", digest, good_rest);
        _cleanup_free_ char *junk = xasprintf("python.registry=python@%s trailing\n"
                                              "node.registry=node@%s\n%s",
                                              digest, digest, good_rest);

        ck_assert_msg(setup_pins_parse(ok, &p, &err) == 0, "%s", err.msg); /* control */
        ck_assert_str_eq(p.python_registry, "python@sha256:5e2bdb1b0d542d5039cffb8181c65930093949"
                                            "194a65c365dfb1b0fe13a4fa5b");
        setup_pins_done(&p);
        ck_assert_int_eq(setup_pins_parse(tag, &p, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "pinned"));
        ck_assert_int_eq(setup_pins_parse(unknown, &p, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "unknown key"));
        ck_assert_int_eq(setup_pins_parse(missing, &p, &err), -EINVAL);
        ck_assert_int_eq(setup_pins_parse(junk, &p, &err), -EINVAL);
}
END_TEST

/* ---- names */

START_TEST(names_normalize_or_refuse)
{
        static const struct {
                const char *in, *out;
        } ok[] = {
            {"./usr/bin/", "usr/bin"},
            {"usr//lib/./x", "usr/lib/x"},
            {"./", ""},
            {"a/b..c/..d", "a/b..c/..d"},
            {"...", "..."},
        };
        static const char *bad[] = {"../x", "a/../../x", "a/..", "/etc/passwd", "..", "//x"};
        const char *why;
        size_t i;

        for (i = 0; i < ELEMENTSOF(ok); i++) {
                _cleanup_free_ char *out = NULL;

                ck_assert_int_eq(sbx_path_clean(ok[i].in, &out, &why), 0);
                ck_assert_str_eq(out, ok[i].out);
        }
        for (i = 0; i < ELEMENTSOF(bad); i++) {
                char *out = NULL;

                ck_assert_msg(sbx_path_clean(bad[i], &out, &why) == -EPERM, "%s", bad[i]);
                ck_assert_ptr_null(out);
        }
}
END_TEST

/* ---- unpack: escapes */

START_TEST(unpack_control_plain_files_land_inside)
{
        _cleanup_free_ char *tar = pathf("%s/ok.tar", T), *f = pathf("%s/tree/a/b", T);
        struct setup_unpack_stats st = {0};
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);

        tb_dir(a, "./a/");
        tb_file(a, "./a/b", 0644, "hello");
        tb_close(a);
        ck_assert_msg(unpack(tar, &st, &err) == 0, "%s", err.msg);
        ck_assert(exists(f));
        ck_assert_int_eq(st.files, 1);
        ck_assert_int_eq(st.dirs, 1);
        assert_outside_untouched();
}
END_TEST

START_TEST(unpack_refuses_dotdot)
{
        _cleanup_free_ char *tar = pathf("%s/dotdot.tar", T);
        _cleanup_free_ char *escaped = pathf("%s/escaped", T);
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);

        tb_file(a, "../escaped", 0644, "pwned");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "'..'"));
        ck_assert(!exists(escaped));

        a = tb_open(tar);
        tb_dir(a, "a/");
        tb_file(a, "a/../../escaped", 0644, "pwned");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        ck_assert(!exists(escaped));
        assert_outside_untouched();
}
END_TEST

START_TEST(unpack_refuses_absolute_name)
{
        _cleanup_free_ char *tar = pathf("%s/abs.tar", T);
        _cleanup_free_ char *name = pathf("%s/outside/abs", T);
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);

        tb_file(a, name, 0644, "pwned");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "absolute"));
        ck_assert(!exists(name));
        assert_outside_untouched();
}
END_TEST

START_TEST(unpack_never_writes_through_a_symlink)
{
        _cleanup_free_ char *tar = pathf("%s/sym.tar", T);
        _cleanup_free_ char *through = pathf("%s/outside/pwned", T);
        _cleanup_free_ char *rel = pathf("%s/outside", T);
        struct sbx_error err = {0};
        struct archive *a;

        /* absolute symlink out, then a file under it */
        a = tb_open(tar);
        tb_symlink(a, "link", outside);
        tb_file(a, "link/pwned", 0644, "pwned");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "symlink"));
        ck_assert(!exists(through));

        /* relative symlink climbing out, then a directory and a file under it */
        a = tb_open(tar);
        tb_symlink(a, "rel", "../outside");
        tb_dir(a, "rel/sub/");
        tb_file(a, "rel/pwned", 0644, "pwned");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        ck_assert(!exists(through));
        assert_outside_untouched();
        (void)rel;
}
END_TEST

START_TEST(unpack_replaces_a_symlink_instead_of_following_it)
{
        _cleanup_free_ char *tar = pathf("%s/over.tar", T);
        _cleanup_free_ char *secret = pathf("%s/outside/secret", T);
        _cleanup_free_ char *inside = pathf("%s/tree/victim", T);
        _cleanup_free_ char *dirlink = pathf("%s/tree/d", T);
        struct sbx_error err = {0};
        struct stat st;
        struct archive *a = tb_open(tar);

        /* a symlink to a file outside, then a regular file of the same name; and a symlink to
         * a directory outside, then a directory of the same name with a file in it */
        tb_symlink(a, "victim", secret);
        tb_file(a, "victim", 0644, "inside");
        tb_symlink(a, "d", outside);
        tb_dir(a, "d/");
        tb_file(a, "d/f", 0644, "inside");
        tb_close(a);
        ck_assert_msg(unpack(tar, NULL, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(lstat(inside, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        ck_assert_int_eq(lstat(dirlink, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        assert_outside_untouched();
}
END_TEST

START_TEST(unpack_keeps_absolute_symlinks_unfollowed)
{
        _cleanup_free_ char *tar = pathf("%s/alt.tar", T);
        _cleanup_free_ char *js = pathf("%s/tree/etc/alternatives/js", T);
        _cleanup_free_ char *up = pathf("%s/tree/up", T);
        struct setup_unpack_stats st = {0};
        struct sbx_error err = {0};
        char buf[256] = {0};
        struct archive *a = tb_open(tar);

        tb_dir(a, "etc/");
        tb_dir(a, "etc/alternatives/");
        tb_symlink(a, "etc/alternatives/js", "/usr/bin/nodejs");
        tb_symlink(a, "up", "../../../../etc/shadow");
        tb_close(a);
        ck_assert_msg(unpack(tar, &st, &err) == 0, "%s", err.msg);
        ck_assert_int_gt(readlink(js, buf, sizeof(buf) - 1), 0);
        ck_assert_str_eq(buf, "/usr/bin/nodejs");
        memset(buf, 0, sizeof(buf));
        ck_assert_int_gt(readlink(up, buf, sizeof(buf) - 1), 0);
        ck_assert_str_eq(buf, "../../../../etc/shadow");
        ck_assert_int_eq(st.symlinks, 2);
}
END_TEST

START_TEST(unpack_refuses_hardlinks_out)
{
        _cleanup_free_ char *tar = pathf("%s/hl.tar", T);
        _cleanup_free_ char *hl = pathf("%s/tree/hl", T);
        _cleanup_free_ char *rel = pathf("%s/outside/secret", T);
        struct sbx_error err = {0};
        struct archive *a;

        a = tb_open(tar);
        tb_hardlink(a, "hl", "/etc/passwd");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "hardlink"));
        ck_assert(!exists(hl));

        a = tb_open(tar);
        tb_hardlink(a, "hl", "../outside/secret");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        ck_assert(!exists(hl));

        /* through a symlink that points out */
        a = tb_open(tar);
        tb_symlink(a, "s", outside);
        tb_hardlink(a, "hl", "s/secret");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        ck_assert(!exists(hl));
        assert_outside_untouched();
        (void)rel;
}
END_TEST

/* setup_unpack_layer()'s parts, each on what only it refuses: the tarball must be a regular
 * file (unpack_open); an entry's folder must be a folder (entry_name) and the root entry only
 * counts; a hardlink must name a file, not a folder or nothing (entry_hardlink); a file cut
 * short in its data is corrupt (entry_write); the counters add up over calls (stats_add).
 * Controls: the same tarballs without the fault unpack. */
START_TEST(unpack_parts_refuse_what_they_must)
{
        _cleanup_free_ char *tar = pathf("%s/parts.tar", T), *big = NULL;
        _cleanup_free_ char *under = pathf("%s/tree/f/x", T);
        struct setup_unpack_stats st = {0};
        struct sbx_error err = {0};
        struct archive *a;

        ck_assert_int_eq(unpack(T, NULL, &err), -EINVAL); /* a folder, not a tarball */
        ck_assert_ptr_nonnull(strstr(err.msg, "is not a regular file"));
        ck_assert_int_eq(unpack(tar, NULL, &err), -ENOENT);

        a = tb_open(tar);
        tb_dir(a, "./");
        tb_file(a, "f", 0644, "file");
        tb_file(a, "f/x", 0644, "under a file");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, &st, &err), -EPERM);
        ck_assert_msg(strstr(err.msg, "entry 'f/x' would be written through a symlink or a "
                                      "non-directory"),
                      "%s", err.msg);
        ck_assert(!exists(under));
        ck_assert_int_eq(st.entries, 3);
        ck_assert_int_eq(st.files, 1);

        a = tb_open(tar);
        tb_dir(a, "d/");
        tb_hardlink(a, "hd", "d");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        ck_assert_msg(strstr(err.msg, "does not name a file already unpacked"), "%s", err.msg);
        a = tb_open(tar);
        tb_hardlink(a, "he", "./");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        ck_assert_msg(strstr(err.msg, "an empty target"), "%s", err.msg);

        /* a file whose data the tarball cuts short */
        big = xmalloc(20000);
        memset(big, 'b', 19999);
        big[19999] = '\0';
        a = tb_open(tar);
        tb_file(a, "big", 0644, big);
        tb_close(a);
        ck_assert_int_eq(truncate(tar, 512 + 8192), 0);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EBADMSG);
        ck_assert_msg(strstr(err.msg, "corrupt or truncated"), "%s", err.msg);

        /* control: whole, it unpacks; the counters add to what the first call counted */
        a = tb_open(tar);
        tb_file(a, "big", 0644, big);
        tb_close(a);
        ck_assert_msg(unpack(tar, &st, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(st.entries, 4);
        ck_assert_int_eq(st.files, 2);
        ck_assert_int_eq(st.file_bytes, 4 + 19999);
        assert_outside_untouched();
}
END_TEST

START_TEST(unpack_hardlink_inside_works)
{
        _cleanup_free_ char *tar = pathf("%s/hl2.tar", T);
        _cleanup_free_ char *a1 = pathf("%s/tree/d/a", T), *b1 = pathf("%s/tree/b", T);
        struct setup_unpack_stats st = {0};
        struct sbx_error err = {0};
        struct stat sa, sb;
        struct archive *a = tb_open(tar);

        tb_dir(a, "d/");
        tb_file(a, "d/a", 0644, "data");
        tb_hardlink(a, "b", "./d/a");
        tb_close(a);
        ck_assert_msg(unpack(tar, &st, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(stat(a1, &sa), 0);
        ck_assert_int_eq(stat(b1, &sb), 0);
        ck_assert_int_eq(sa.st_ino, sb.st_ino);
        ck_assert_int_eq(st.hardlinks, 1);
}
END_TEST

START_TEST(unpack_skips_devices_and_fifos)
{
        _cleanup_free_ char *tar = pathf("%s/dev.tar", T);
        _cleanup_free_ char *null2 = pathf("%s/tree/dev/null2", T);
        _cleanup_free_ char *sda = pathf("%s/tree/dev/sda", T);
        _cleanup_free_ char *fifo = pathf("%s/tree/fifo", T);
        _cleanup_free_ char *after = pathf("%s/tree/after", T);
        struct setup_unpack_stats st = {0};
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);

        tb_dir(a, "dev/");
        tb_add(a, "dev/null2", AE_IFCHR, 0666, NULL, NULL, NULL, makedev(1, 3));
        tb_add(a, "dev/sda", AE_IFBLK, 0660, NULL, NULL, NULL, makedev(8, 0));
        tb_add(a, "fifo", AE_IFIFO, 0644, NULL, NULL, NULL, 0);
        tb_file(a, "after", 0644, "still unpacked");
        tb_close(a);
        ck_assert_msg(unpack(tar, &st, &err) == 0, "%s", err.msg);
        ck_assert(!exists(null2));
        ck_assert(!exists(sda));
        ck_assert(!exists(fifo));
        ck_assert(exists(after)); /* control: the rest of the archive is there */
        ck_assert_int_eq(st.skipped_special, 3);
}
END_TEST

START_TEST(unpack_strips_setuid_setgid)
{
        _cleanup_free_ char *tar = pathf("%s/suid.tar", T);
        _cleanup_free_ char *su = pathf("%s/tree/su", T), *sg = pathf("%s/tree/sg", T);
        _cleanup_free_ char *sd = pathf("%s/tree/sgdir", T), *tmp = pathf("%s/tree/tmp", T);
        struct setup_unpack_stats st = {0};
        struct sbx_error err = {0};
        struct stat s;
        struct archive *a = tb_open(tar);

        tb_file(a, "su", 04755, "x");
        tb_file(a, "sg", 02755, "x");
        tb_add(a, "sgdir/", AE_IFDIR, 02775, NULL, NULL, NULL, 0);
        tb_add(a, "tmp/", AE_IFDIR, 01777, NULL, NULL, NULL, 0);
        tb_close(a);
        ck_assert_msg(unpack(tar, &st, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(stat(su, &s), 0);
        ck_assert_int_eq(s.st_mode & 07777, 0755);
        ck_assert_int_eq(stat(sg, &s), 0);
        ck_assert_int_eq(s.st_mode & 07777, 0755);
        ck_assert_int_eq(stat(sd, &s), 0);
        ck_assert_int_eq(s.st_mode & 07777, 0775);
        ck_assert_int_eq(stat(tmp, &s), 0);
        ck_assert_int_eq(s.st_mode & 07777, 01777); /* control: sticky is kept */
        ck_assert_int_eq(st.stripped_setid, 3);
}
END_TEST

START_TEST(unpack_applies_oci_whiteouts)
{
        _cleanup_free_ char *l1 = pathf("%s/l1.tar", T), *l2 = pathf("%s/l2.tar", T);
        struct setup_unpack_stats st = {0};
        struct sbx_error err = {0};
        struct archive *a;
        static const char *const gone[] = {
            "a/x", "b/z", "b/keepdir/old", "a/.wh.x", "b/.wh..wh..opq", "c"};
        static const char *const kept[] = {"a/y", "b/new", "b/keepdir/fresh", "d/e"};
        size_t i;

        a = tb_open(l1);
        tb_dir(a, "a/");
        tb_file(a, "a/x", 0644, "1");
        tb_file(a, "a/y", 0644, "1");
        tb_dir(a, "b/");
        tb_file(a, "b/z", 0644, "1");
        tb_dir(a, "b/keepdir/");
        tb_file(a, "b/keepdir/old", 0644, "1");
        tb_dir(a, "c/");
        tb_file(a, "c/deep", 0644, "1");
        tb_dir(a, "d/");
        tb_file(a, "d/e", 0644, "1");
        tb_close(a);
        a = tb_open(l2);
        tb_file(a, "a/.wh.x", 0644, "");
        tb_file(a, "b/new", 0644, "2"); /* before the opaque marker: must survive it */
        tb_file(a, "b/.wh..wh..opq", 0644, "");
        tb_file(a, "b/keepdir/fresh", 0644, "2");
        tb_file(a, ".wh.c", 0644, "");
        tb_close(a);
        ck_assert_msg(unpack(l1, &st, &err) == 0, "%s", err.msg);
        ck_assert_msg(unpack(l2, &st, &err) == 0, "%s", err.msg);
        for (i = 0; i < ELEMENTSOF(gone); i++) {
                _cleanup_free_ char *p = xasprintf("%s/%s", tree, gone[i]);
                ck_assert_msg(!exists(p), "%s still exists", gone[i]);
        }
        for (i = 0; i < ELEMENTSOF(kept); i++) {
                _cleanup_free_ char *p = xasprintf("%s/%s", tree, kept[i]);
                ck_assert_msg(exists(p), "%s is missing", kept[i]);
        }
        ck_assert_int_eq(st.whiteouts, 3);
}
END_TEST

START_TEST(unpack_whiteout_cannot_delete_outside)
{
        _cleanup_free_ char *tar = pathf("%s/wh.tar", T);
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);

        tb_symlink(a, "out", outside);
        tb_file(a, "out/.wh.secret", 0644, "");
        tb_file(a, "out/.wh..wh..opq", 0644, "");
        tb_close(a);
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        assert_outside_untouched();
}
END_TEST

START_TEST(unpack_checks_sha256)
{
        _cleanup_free_ char *tar = pathf("%s/h.tar", T);
        struct sbx_error err = {0};
        char hex[65], wrong[65];
        struct archive *a = tb_open(tar);

        tb_file(a, "f", 0644, "x");
        tb_close(a);
        ck_assert_int_eq(sbx_sha256_file(tar, NULL, hex, &err), 0);
        ck_assert_int_eq(setup_unpack_layer(tree, tar, "t", hex, NULL, NULL, NULL, &err), 0);
        memcpy(wrong, hex, sizeof(wrong));
        wrong[0] = wrong[0] == '0' ? '1' : '0';
        ck_assert_int_eq(setup_unpack_layer(tree, tar, "t", wrong, NULL, NULL, NULL, &err),
                         -EBADMSG);
        ck_assert_ptr_nonnull(strstr(err.msg, wrong));
}
END_TEST

START_TEST(unpack_restores_cwd_and_umask)
{
        _cleanup_free_ char *tar = pathf("%s/c.tar", T), *before = NULL, *after = NULL;
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);
        mode_t m;

        tb_file(a, "../bad", 0644, "x");
        tb_close(a);
        umask(077);
        before = get_current_dir_name();
        ck_assert_int_eq(unpack(tar, NULL, &err), -EPERM);
        after = get_current_dir_name();
        ck_assert_str_eq(before, after);
        m = umask(0);
        ck_assert_int_eq(m, 077);
}
END_TEST

/* ---- install */

static char *rootfs;
static struct setup_opts quiet;

static void fx_install_setup(void)
{
        fx_setup();
        rootfs = xasprintf("%s/rootfs", T);
        memset(&quiet, 0, sizeof(quiet));
}

static void fx_install_teardown(void)
{
        free(rootfs);
        fx_teardown();
}

/* Hand the fixture to the unprivileged test user and become it (when root). */
static void become_test_user(void)
{
        _cleanup_free_ char *cmd = NULL;

        if (geteuid() != 0)
                return;
        cmd = xasprintf("chown -R 2000:2000 '%s' && chmod -R a+rX '%s'", T, T);
        ck_assert_int_eq(system(cmd), 0);
        sbx_test_become_user();
}

static int install_tar(const char *tar, const char *lang, const struct setup_opts *o, bool *skipped,
                       struct sbx_error *err)
{
        const char *layers[] = {tar};
        struct setup_source src = {
            .language = lang, .description = "test", .layers = layers, .n_layers = 1};

        return setup_install(rootfs, &src, o, skipped, NULL, err);
}

/* Nothing but @allowed (NULL-terminated) in the rootfs folder (dotfiles: only the locks). */
static void assert_rootfs_holds(const char *const *allowed)
{
        DIR *d = opendir(rootfs);

        if (!d && errno == ENOENT)
                return; /* never created: holds nothing */
        ck_assert_ptr_nonnull(d);
        for (struct dirent *de; (de = readdir(d));) {
                const char *const *p;
                bool ok = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                          strcmp(de->d_name, ".setup.lock") == 0 ||
                          strcmp(de->d_name, SETUP_SWAP_LOCK) == 0;

                for (p = allowed; !ok && *p; p++)
                        ok = strcmp(de->d_name, *p) == 0;
                ck_assert_msg(ok, "unexpected '%s' in the rootfs folder", de->d_name);
        }
        closedir(d);
}

static char *read_marker(void)
{
        _cleanup_free_ char *p = xasprintf("%s/python/etc/marker", rootfs);
        char buf[64] = {0};
        FILE *f = fopen(p, "r");

        if (!f)
                return NULL;
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = '\0';
        fclose(f);
        return xstrdup(buf);
}

START_TEST(install_then_skip_then_force)
{
        _cleanup_free_ char *tar = pathf("%s/py.tar", T), *m = NULL, *id = NULL;
        _cleanup_free_ char *rec = xasprintf("%s/rootfs/python.json", T);
        static const char *const after[] = {"python", "python.json", NULL};
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);
        bool skipped = true;
        struct stat st;
        char hex[65];
        json_object *j, *v;

        tb_minimal_rootfs(a, "one");
        tb_close(a);
        ck_assert_msg(install_tar(tar, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        ck_assert(!skipped);
        m = read_marker();
        ck_assert_str_eq(m, "one");
        assert_rootfs_holds(after);
        /* the run's mount points exist as real directories */
        for (const char *const *p =
                 (const char *const[]){"dev", "proc", "sys", "tmp", "workspace", "sandbox", NULL};
             *p; p++) {
                _cleanup_free_ char *mp = xasprintf("%s/python/%s", rootfs, *p);
                ck_assert_msg(lstat(mp, &st) == 0 && S_ISDIR(st.st_mode), "%s", *p);
        }
        /* the record names the tarball's sha256 */
        ck_assert_int_eq(sbx_sha256_file(tar, NULL, hex, &err), 0);
        j = json_object_from_file(rec);
        ck_assert_ptr_nonnull(j);
        ck_assert(json_object_object_get_ex(j, "identity", &v));
        ck_assert_str_eq(json_object_get_string(v) + strlen("sha256:"), hex);
        json_object_put(j);
        ck_assert_int_eq(setup_installed_identity(rootfs, "python", &id, NULL, &err), 0);

        /* second install of the same bytes: skipped, tree untouched (a file we add stays) */
        {
                _cleanup_free_ char *canary = xasprintf("%s/python/canary", rootfs);
                FILE *f = fopen(canary, "w");
                ck_assert_ptr_nonnull(f);
                fclose(f);
                ck_assert_int_eq(install_tar(tar, "python", &quiet, &skipped, &err), 0);
                ck_assert(skipped);
                ck_assert(exists(canary));
                /* force: reinstalled, the canary is gone */
                quiet.force = true;
                ck_assert_int_eq(install_tar(tar, "python", &quiet, &skipped, &err), 0);
                ck_assert(!skipped);
                ck_assert(!exists(canary));
        }
        assert_rootfs_holds(after);
}
END_TEST

START_TEST(install_replaces_an_older_tree_whole)
{
        _cleanup_free_ char *t1 = pathf("%s/one.tar", T), *t2 = pathf("%s/two.tar", T);
        _cleanup_free_ char *m = NULL;
        static const char *const after[] = {"python", "python.json", NULL};
        struct sbx_error err = {0};
        struct archive *a;
        bool skipped;

        a = tb_open(t1);
        tb_minimal_rootfs(a, "one");
        tb_file(a, "only-in-one", 0644, "x");
        tb_close(a);
        a = tb_open(t2);
        tb_minimal_rootfs(a, "two");
        tb_close(a);
        ck_assert_int_eq(install_tar(t1, "python", &quiet, &skipped, &err), 0);
        ck_assert_msg(install_tar(t2, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        ck_assert(!skipped);
        m = read_marker();
        ck_assert_str_eq(m, "two");
        {
                _cleanup_free_ char *p = xasprintf("%s/python/only-in-one", rootfs);
                ck_assert(!exists(p));
        }
        assert_rootfs_holds(after);
}
END_TEST

START_TEST(install_truncated_leaves_nothing)
{
        _cleanup_free_ char *good = pathf("%s/good.tar", T), *cut = pathf("%s/cut.tar", T);
        _cleanup_free_ char *m = NULL, *id1 = NULL, *id2 = NULL;
        static const char *const nothing[] = {NULL};
        static const char *const old[] = {"python", "python.json", NULL};
        struct sbx_error err = {0};
        struct archive *a = tb_open(good);
        char big[20000];
        struct stat st;
        bool skipped;

        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        tb_minimal_rootfs(a, "good");
        tb_file(a, "big", 0644, big);
        tb_close(a);
        ck_assert_int_eq(stat(good, &st), 0);
        {
                _cleanup_free_ char *cmd =
                    xasprintf("head -c %lld '%s' > '%s'", (long long)st.st_size / 2, good, cut);
                ck_assert_int_eq(system(cmd), 0);
        }
        /* no rootfs before: none after, no temporary folder, no record */
        ck_assert_int_eq(install_tar(cut, "python", &quiet, &skipped, &err), -EBADMSG);
        ck_assert_ptr_nonnull(strstr(err.msg, "truncated"));
        assert_rootfs_holds(nothing);

        /* an installed rootfs stays as it was */
        ck_assert_int_eq(install_tar(good, "python", &quiet, &skipped, &err), 0);
        ck_assert_int_eq(setup_installed_identity(rootfs, "python", &id1, NULL, &err), 0);
        ck_assert_int_eq(install_tar(cut, "python", &quiet, &skipped, &err), -EBADMSG);
        assert_rootfs_holds(old);
        m = read_marker();
        ck_assert_str_eq(m, "good");
        ck_assert_int_eq(setup_installed_identity(rootfs, "python", &id2, NULL, &err), 0);
        ck_assert_str_eq(id1, id2);
}
END_TEST

START_TEST(install_cancelled_leaves_nothing)
{
        _cleanup_free_ char *tar = pathf("%s/py.tar", T);
        static const char *const nothing[] = {NULL};
        static volatile sig_atomic_t cancel = 1;
        struct setup_opts o = {.cancel = &cancel};
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);
        bool skipped;

        tb_minimal_rootfs(a, "x");
        tb_close(a);
        ck_assert_int_eq(install_tar(tar, "python", &o, &skipped, &err), -EINTR);
        assert_rootfs_holds(nothing);
        cancel = 0; /* control: the same install goes through */
        ck_assert_msg(install_tar(tar, "python", &o, &skipped, &err) == 0, "%s", err.msg);
}
END_TEST

START_TEST(install_refuses_unusable_trees)
{
        _cleanup_free_ char *tar = pathf("%s/bad.tar", T);
        static const char *const nothing[] = {NULL};
        struct sbx_error err = {0};
        struct archive *a;
        bool skipped;

        /* no interpreter */
        a = tb_open(tar);
        tb_file(a, "usr/bin/bash", 0755, "bash");
        tb_file(a, "usr/bin/timeout", 0755, "timeout");
        tb_close(a);
        ck_assert_int_eq(install_tar(tar, "python", &quiet, &skipped, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "python3"));
        assert_rootfs_holds(nothing);

        /* a python3 that only exists outside the tree, through an absolute symlink */
        a = tb_open(tar);
        tb_file(a, "usr/bin/bash", 0755, "bash");
        tb_file(a, "usr/bin/timeout", 0755, "timeout");
        tb_symlink(a, "usr/bin/python3", "/usr/bin/python3");
        tb_close(a);
        ck_assert_int_eq(install_tar(tar, "python", &quiet, &skipped, &err), -ENOENT);
        assert_rootfs_holds(nothing);

        /* a mount point that is a symlink out */
        a = tb_open(tar);
        tb_minimal_rootfs(a, "x");
        tb_symlink(a, "workspace", outside);
        tb_close(a);
        ck_assert_int_eq(install_tar(tar, "python", &quiet, &skipped, &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "/workspace"));
        assert_rootfs_holds(nothing);

        /* an unknown language */
        ck_assert_int_eq(install_tar(tar, "ruby", &quiet, &skipped, &err), -EINVAL);
        assert_outside_untouched();
}
END_TEST

START_TEST(install_one_setup_at_a_time)
{
        _cleanup_free_ char *tar = pathf("%s/py.tar", T), *lock = NULL;
        static const char *const after[] = {"python", "python.json", NULL};
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);
        bool skipped;
        int fd;

        tb_minimal_rootfs(a, "x");
        tb_close(a);
        ck_assert_int_eq(mkdir(rootfs, 0755), 0);
        lock = xasprintf("%s/.setup.lock", rootfs);
        fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(flock(fd, LOCK_EX), 0); /* another setup is running */
        ck_assert_int_eq(install_tar(tar, "python", &quiet, &skipped, &err), -EBUSY);
        ck_assert_ptr_nonnull(strstr(err.msg, "another vestibule-mcp setup"));
        close(fd); /* control: once it is done, setup goes through */
        ck_assert_msg(install_tar(tar, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        assert_rootfs_holds(after);
}
END_TEST

START_TEST(install_redoes_a_damaged_record)
{
        _cleanup_free_ char *tar = pathf("%s/py.tar", T), *rec = NULL, *id = NULL;
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);
        bool skipped = true;
        FILE *f;

        tb_minimal_rootfs(a, "x");
        tb_close(a);
        ck_assert_int_eq(install_tar(tar, "python", &quiet, &skipped, &err), 0);
        rec = xasprintf("%s/python.json", rootfs);
        f = fopen(rec, "w");
        ck_assert_ptr_nonnull(f);
        fputs("{not json", f);
        fclose(f);
        ck_assert_int_eq(setup_installed_identity(rootfs, "python", &id, NULL, &err), -EBADMSG);
        ck_assert_int_eq(install_tar(tar, "python", &quiet, &skipped, &err), 0);
        ck_assert(!skipped); /* not trusted: installed again */
        ck_assert_int_eq(setup_installed_identity(rootfs, "python", &id, NULL, &err), 0);
}
END_TEST

START_TEST(install_sweeps_leftovers_of_a_killed_setup)
{
        _cleanup_free_ char *tar = pathf("%s/py.tar", T);
        _cleanup_free_ char *left = xasprintf("%s/rootfs/.python.partial-abc123/usr", T);
        _cleanup_free_ char *other = xasprintf("%s/rootfs/.node.partial-abc123", T);
        static const char *const after[] = {"python", "python.json", ".node.partial-abc123", NULL};
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);
        bool skipped;
        char *cmd = xasprintf("mkdir -p '%s' '%s' && chmod 0500 '%s'", left, other, left);

        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
        tb_minimal_rootfs(a, "x");
        tb_close(a);
        ck_assert_msg(install_tar(tar, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        /* python's leftovers are gone; node's are not python's to remove */
        assert_rootfs_holds(after);
}
END_TEST

START_TEST(install_as_unprivileged_user_owns_and_reads_everything)
{
        _cleanup_free_ char *tar = pathf("%s/py.tar", T);
        _cleanup_free_ char *shadow = NULL, *py = NULL;
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);
        struct stat st;
        bool skipped;

        if (geteuid() != 0)
                return; /* already unprivileged: every other test covers this path */
        tb_minimal_rootfs(a, "x");
        tb_file(a, "etc/shadow", 0000, "root:*:1::::::\n");
        tb_add(a, "root/", AE_IFDIR, 0700, NULL, NULL, NULL, 0);
        tb_close(a);
        become_test_user();
        ck_assert_msg(install_tar(tar, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        shadow = xasprintf("%s/python/etc/shadow", rootfs);
        py = xasprintf("%s/python/usr/bin/python3.11", rootfs);
        ck_assert_int_eq(stat(py, &st), 0);
        ck_assert_int_eq(st.st_uid, 2000);
        ck_assert_int_eq(access(shadow, R_OK), 0); /* u+r added: the run's uid reads the tree */
        {
                _cleanup_free_ char *rootdir = xasprintf("%s/python/root", rootfs);
                ck_assert_int_eq(access(rootdir, R_OK | X_OK), 0);
        }
        /* and it can remove what it installed (0500 dirs included) */
        quiet.force = true;
        ck_assert_int_eq(install_tar(tar, "python", &quiet, &skipped, &err), 0);
}
END_TEST

START_TEST(install_as_root_keeps_numeric_ids)
{
        _cleanup_free_ char *tar = pathf("%s/ids.tar", T), *ws = NULL;
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);
        struct archive_entry *e = archive_entry_new();
        struct stat st;
        bool skipped;

        if (geteuid() != 0) {
                archive_entry_free(e);
                tb_close(a);
                return;
        }
        tb_minimal_rootfs(a, "x");
        archive_entry_set_pathname(e, "workspace/");
        archive_entry_set_filetype(e, AE_IFDIR);
        archive_entry_set_perm(e, 0755);
        archive_entry_set_uid(e, 1000);
        archive_entry_set_gid(e, 1000);
        archive_entry_set_uname(e, "root"); /* a name must never be looked up */
        ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
        archive_entry_free(e);
        tb_close(a);
        ck_assert_msg(install_tar(tar, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        ws = xasprintf("%s/python/workspace", rootfs);
        ck_assert_int_eq(stat(ws, &st), 0);
        ck_assert_int_eq(st.st_uid, 1000);
        ck_assert_int_eq(st.st_gid, 1000);
}
END_TEST

START_TEST(install_real_debian_rootfs)
{
        struct setup_opts o = {.progress = stderr};
        struct setup_unpack_stats st = {0};
        struct sbx_error err = {0};
        const char *layers[] = {REAL_PYTHON_TAR};
        struct setup_source src = {
            .language = "python", .description = "real", .layers = layers, .n_layers = 1};
        bool skipped = true;
        _cleanup_free_ char *alt = NULL;
        char buf[256] = {0};

        ck_assert_msg(setup_install(rootfs, &src, &o, &skipped, &st, &err) == 0, "%s", err.msg);
        ck_assert(!skipped);
        ck_assert_int_gt(st.files, 1000);
        ck_assert_int_eq(st.skipped_special, 0); /* build.sh leaves device nodes out */
        ck_assert_int_eq(st.stripped_setid, 0);  /* and strips setuid itself */
        alt = xasprintf("%s/python/etc/alternatives/which", rootfs);
        if (readlink(alt, buf, sizeof(buf) - 1) > 0)
                ck_assert_int_eq(buf[0], '/'); /* an absolute symlink, kept as it is */
        ck_assert_int_eq(setup_install(rootfs, &src, &o, &skipped, NULL, &err), 0);
        ck_assert(skipped);
}
END_TEST

START_TEST(install_unprivileged_layers_into_read_only_dirs)
{
        _cleanup_free_ char *l1 = pathf("%s/l1.tar", T), *l2 = pathf("%s/l2.tar", T);
        _cleanup_free_ char *ro = NULL, *added = NULL, *gone = NULL;
        const char *layers[2];
        struct setup_source src = {.language = "python",
                                   .description = "layers",
                                   .layers = layers,
                                   .n_layers = 2,
                                   .identity = "sha256:test"};
        struct sbx_error err = {0};
        struct archive *a;
        struct stat st;
        bool skipped;

        layers[0] = l1;
        layers[1] = l2;
        a = tb_open(l1);
        tb_minimal_rootfs(a, "x");
        tb_add(a, "ro/", AE_IFDIR, 0555, NULL, NULL, NULL, 0);
        tb_file(a, "ro/old", 0644, "1");
        tb_close(a);
        a = tb_open(l2);
        tb_file(a, "ro/new", 0644, "2");
        tb_file(a, "ro/.wh.old", 0644, "");
        tb_close(a);
        become_test_user();
        ck_assert_msg(setup_install(rootfs, &src, &quiet, &skipped, NULL, &err) == 0, "%s",
                      err.msg);
        ro = xasprintf("%s/python/ro", rootfs);
        added = xasprintf("%s/python/ro/new", rootfs);
        gone = xasprintf("%s/python/ro/old", rootfs);
        ck_assert(exists(added));
        ck_assert(!exists(gone));
        ck_assert_int_eq(stat(ro, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0555); /* the lent u+w was given back */
}
END_TEST

/* Issue 12, finding 23 (High): a hostile two-layer image. Layer 1 has a folder without u+w
 * (d/.bashrc, mode 0577); layer 2 writes into it (so a non-root unpack lends it u+w and notes
 * its mode), then whites out d and puts a symlink d -> $HOME in its place. Restoring the noted
 * mode with fchmodat(rootfd, "d/.bashrc", 0577, 0) followed the symlink and made the user's
 * ~/.bashrc world-writable. Nothing may ever be changed through a symlink. */
START_TEST(unpack_restore_never_chmods_through_a_symlink)
{
        _cleanup_free_ char *l1 = pathf("%s/l1.tar", T), *l2 = pathf("%s/l2.tar", T);
        _cleanup_free_ char *home = pathf("%s/home", T), *rc = pathf("%s/home/.bashrc", T);
        _cleanup_free_ char *d = NULL;
        const char *layers[2] = {l1, l2};
        struct setup_source src = {.language = "python",
                                   .description = "hostile layers",
                                   .layers = layers,
                                   .n_layers = 2,
                                   .identity = "sha256:hostile"};
        struct sbx_error err = {0};
        struct archive *a;
        struct stat st;
        bool skipped;
        FILE *f;

        ck_assert_int_eq(mkdir(home, 0755), 0);
        f = fopen(rc, "we");
        ck_assert_ptr_nonnull(f);
        fputs("echo hello\n", f);
        fclose(f);
        a = tb_open(l1);
        tb_minimal_rootfs(a, "x");
        tb_dir(a, "d/");
        tb_add(a, "d/.bashrc/", AE_IFDIR, 0577, NULL, NULL, NULL, 0);
        tb_file(a, "d/.bashrc/old", 0644, "1");
        tb_close(a);
        a = tb_open(l2);
        tb_file(a, "d/.bashrc/new", 0644, "2"); /* lends d/.bashrc u+w, noting 0577 */
        tb_file(a, ".wh.d", 0644, "");          /* d goes */
        tb_symlink(a, "d", home);               /* and comes back as a symlink to $HOME */
        tb_close(a);
        become_test_user();
        ck_assert_int_eq(chmod(rc, 0600), 0);
        (void)setup_install(rootfs, &src, &quiet, &skipped, NULL, &err);
        ck_assert_int_eq(stat(rc, &st), 0);
        ck_assert_msg((st.st_mode & 07777) == 0600, "~/.bashrc changed to %04o through a symlink",
                      (unsigned)(st.st_mode & 07777));
        /* control: the layer did replace d by the symlink, so the restore had a path through it */
        d = xasprintf("%s/python/d", rootfs);
        ck_assert_int_eq(lstat(d, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
}
END_TEST

START_TEST(run_from_tar_prints_result_and_honest_readiness)
{
        _cleanup_free_ char *tar = pathf("%s/py.tar", T), *outbuf = NULL;
        size_t outlen = 0;
        FILE *out = open_memstream(&outbuf, &outlen);
        struct setup_run_args args = {
            .rootfs_dir = rootfs, .from_tar = tar, .language = "python", .out = out};
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);

        tb_minimal_rootfs(a, "x");
        tb_close(a);
        ck_assert_msg(setup_run(&args, &err) == 0, "%s", err.msg);
        fflush(out);
        ck_assert_ptr_nonnull(strstr(outbuf, "python rootfs installed"));
        ck_assert_ptr_nonnull(strstr(outbuf, "readiness check not run"));
        ck_assert_ptr_null(strstr(outbuf, "ready in this terminal")); /* never claimed */
        fclose(out);
}
END_TEST

static int fake_ready(FILE *out)
{
        fputs("ready in this terminal's environment: isolation test\n", out);
        return 1; /* pretend Blocked: */
}

START_TEST(run_uses_the_readiness_check_and_its_verdict)
{
        _cleanup_free_ char *tar = pathf("%s/py.tar", T), *outbuf = NULL;
        size_t outlen = 0;
        FILE *out = open_memstream(&outbuf, &outlen);
        struct setup_run_args args = {.rootfs_dir = rootfs,
                                      .from_tar = tar,
                                      .language = "python",
                                      .out = out,
                                      .readiness = fake_ready};
        struct sbx_error err = {0};
        struct archive *a = tb_open(tar);

        tb_minimal_rootfs(a, "x");
        tb_close(a);
        ck_assert_int_eq(setup_run(&args, &err), 1);
        fflush(out);
        ck_assert_ptr_nonnull(strstr(outbuf, "isolation test"));
        fclose(out);
}
END_TEST

START_TEST(run_from_debian_skips_the_build_when_installed_from_this_recipe)
{
        _cleanup_free_ char *tar = pathf("%s/py.tar", T), *outbuf = NULL, *dir = NULL;
        _cleanup_free_ char *script = NULL, *recipe = NULL;
        size_t outlen = 0;
        FILE *out = open_memstream(&outbuf, &outlen);
        struct setup_run_args args = {.rootfs_dir = rootfs, .from_debian = true, .out = out};
        struct sbx_error err = {0};
        const char *layers[] = {tar};
        struct setup_source src = {.description = "test", .layers = layers, .n_layers = 1};
        struct archive *a = tb_open(tar);
        char hex[65];
        bool skipped;

        tb_minimal_rootfs(a, "x");
        tb_file(a, "usr/bin/node", 0755, "node");
        tb_close(a);
        ck_assert_int_eq(setup_images_dir(&dir, &err), 0);
        script = xasprintf("%s/build.sh", dir);
        ck_assert_int_eq(sbx_sha256_file(script, NULL, hex, &err), 0);
        recipe = xasprintf("sha256:%s", hex);
        src.recipe = recipe;
        src.language = "python";
        ck_assert_int_eq(setup_install(rootfs, &src, &quiet, &skipped, NULL, &err), 0);
        src.language = "node";
        ck_assert_int_eq(setup_install(rootfs, &src, &quiet, &skipped, NULL, &err), 0);
        /* both recorded with this recipe: no build (a build would take minutes and print) */
        ck_assert_msg(setup_run(&args, &err) == 0, "%s", err.msg);
        fflush(out);
        ck_assert_ptr_nonnull(strstr(outbuf, "nothing to do"));
        /* --save-tars with both tarballs there and the bytes installed: no build either */
        {
                _cleanup_free_ char *saved = xasprintf("%s/saved", T);
                _cleanup_free_ char *cmd =
                    xasprintf("mkdir -p '%s' && cp '%s' '%s/python.tar' && cp '%s' '%s/node.tar'",
                              saved, tar, saved, tar, saved);

                ck_assert_int_eq(system(cmd), 0);
                args.save_tars = saved;
                ck_assert_msg(setup_run(&args, &err) == 0, "%s", err.msg);
                fflush(out);
                ck_assert_ptr_nonnull(
                    strstr(outbuf, "and their tarballs are saved, nothing to do"));
        }
        fclose(out);
}
END_TEST

START_TEST(run_registry_unreachable_names_the_fix)
{
        /* loopback port 9 (discard): nothing listens; never a default pin (no traffic off
         * this machine from a unit test) */
        static const char *img =
            "127.0.0.1:9/x@sha256:0000000000000000000000000000000000000000000000000000000000000000";
        struct setup_run_args args = {
            .rootfs_dir = rootfs, .out = stdout, .image_python = img, .image_node = img};
        struct sbx_error err = {0};

        ck_assert_int_eq(setup_run(&args, &err), -ECONNREFUSED);
        ck_assert_ptr_nonnull(strstr(err.msg, "--from-debian"));
}
END_TEST

static volatile sig_atomic_t real_cancel;

static void on_alarm(int sig)
{
        (void)sig;
        real_cancel = 1;
}

START_TEST(install_real_cancelled_midway_leaves_nothing)
{
        static const char *const nothing[] = {NULL};
        struct setup_opts o = {.cancel = &real_cancel};
        struct setup_unpack_stats st = {0};
        struct sbx_error err = {0};
        const char *layers[] = {REAL_PYTHON_TAR};
        struct setup_source src = {.language = "python",
                                   .description = "real",
                                   .layers = layers,
                                   .n_layers = 1,
                                   .identity = "sha256:not-hashed-first"};
        struct itimerval it = {.it_value = {.tv_sec = 0, .tv_usec = 300000}};
        bool skipped;

        /* libarchive and libcrypto are loaded on first use (src/lazy): load them before the
         * clock starts, so the 300 ms measure the unpack, not the dynamic linker. */
        ck_assert_msg(lazy_archive_load(&err) == 0 && lazy_crypto_load(&err) == 0, "%s", err.msg);
        signal(SIGALRM, on_alarm);
        ck_assert_int_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
        ck_assert_int_eq(setup_install(rootfs, &src, &o, &skipped, &st, &err), -EINTR);
        ck_assert_int_gt(st.entries, 0); /* it was cancelled midway, not before it began */
        assert_rootfs_holds(nothing);
}
END_TEST

/* ---- a run's hold on its tree: setup never deletes a tree a run has as / (hold.h) */

/* Names in the rootfs folder starting with @prefix. */
static int count_prefixed(const char *prefix)
{
        DIR *d = opendir(rootfs);
        int n = 0;

        ck_assert_ptr_nonnull(d);
        for (struct dirent *de; (de = readdir(d));)
                n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
        closedir(d);
        return n;
}

START_TEST(hold_keeps_the_old_tree_until_released)
{
        _cleanup_free_ char *one = pathf("%s/one.tar", T), *two = pathf("%s/two.tar", T);
        _cleanup_free_ char *three = pathf("%s/three.tar", T), *m = NULL;
        _cleanup_free_ char *held_marker = NULL;
        struct setup_rootfs_hold hold = {0};
        struct sbx_error err = {0};
        struct archive *a;
        bool skipped;
        char buf[16] = "";
        int fd;

        a = tb_open(one);
        tb_minimal_rootfs(a, "one");
        tb_close(a);
        a = tb_open(two);
        tb_minimal_rootfs(a, "two");
        tb_close(a);
        a = tb_open(three);
        tb_minimal_rootfs(a, "three");
        tb_close(a);
        ck_assert_msg(install_tar(one, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);

        /* a run holds tree "one" (mounted: settled) while setup installs "two" */
        ck_assert_msg(setup_rootfs_hold(rootfs, "python", &hold, &err) == 0, "%s", err.msg);
        ck_assert_int_ge(hold.swap_fd, 0); /* setup created .swap.lock */
        setup_rootfs_settled(&hold);
        ck_assert_int_eq(hold.swap_fd, -1);
        ck_assert_msg(install_tar(two, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        m = read_marker();
        ck_assert_str_eq(m, "two");
        ck_assert_int_eq(count_prefixed(".python.old-"), 1);
        /* the held tree is whole: its files are still there, through the run's own fd */
        fd = openat(hold.tree_fd, "etc/marker", O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
        close(fd);
        held_marker = xstrdup(buf);
        ck_assert_str_eq(held_marker, "one");
        /* nothing collects it while held, neither a collect nor the next setup's sweep */
        ck_assert_int_eq(setup_rootfs_collect(rootfs), 0);
        ck_assert_int_eq(count_prefixed(".python.old-"), 1);

        /* released: the next collect deletes it */
        setup_rootfs_release(&hold);
        setup_rootfs_release(&hold); /* idempotent */
        ck_assert_int_eq(setup_rootfs_collect(rootfs), 1);
        ck_assert_int_eq(count_prefixed(".python.old-"), 0);

        /* control: no hold, the old tree is deleted by setup at once */
        ck_assert_msg(install_tar(three, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(count_prefixed(".python.old-"), 0);
        ck_assert_int_eq(count_prefixed(".python.partial-"), 0);

        /* a setup's sweep also removes an unheld old tree left by an earlier setup */
        ck_assert_msg(setup_rootfs_hold(rootfs, "python", &hold, &err) == 0, "%s", err.msg);
        setup_rootfs_settled(&hold);
        ck_assert_msg(install_tar(one, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(count_prefixed(".python.old-"), 1);
        setup_rootfs_release(&hold);
        ck_assert_msg(install_tar(two, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(count_prefixed(".python.old-"), 0);

        /* a missing tree: the hold says to run setup */
        ck_assert_int_eq(setup_rootfs_hold(rootfs, "node", &hold, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "vestibule-mcp setup"));
}
END_TEST

/* While a run holds .swap.lock (between opening its tree and mounting it), setup cannot swap. */
START_TEST(hold_blocks_the_swap_until_settled)
{
        _cleanup_free_ char *one = pathf("%s/one.tar", T), *two = pathf("%s/two.tar", T);
        _cleanup_free_ char *m = NULL;
        struct setup_rootfs_hold hold = {0};
        struct sbx_error err = {0};
        struct archive *a;
        bool skipped;
        int status, i;
        pid_t pid;

        a = tb_open(one);
        tb_minimal_rootfs(a, "one");
        tb_close(a);
        a = tb_open(two);
        tb_minimal_rootfs(a, "two");
        tb_close(a);
        ck_assert_msg(install_tar(one, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        ck_assert_msg(setup_rootfs_hold(rootfs, "python", &hold, &err) == 0, "%s", err.msg);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                setup_rootfs_release(&hold); /* the child's copies: the parent's lock stays */
                _exit(install_tar(two, "python", &quiet, &skipped, &err) == 0 ? 0 : 1);
        }
        /* the child unpacks, then waits on the lock: the name keeps the old tree */
        for (i = 0; i < 20 && count_prefixed(".python.partial-") == 0; i++)
                usleep(50 * 1000);
        usleep(300 * 1000);
        ck_assert_int_eq(waitpid(pid, &status, WNOHANG), 0);
        m = read_marker();
        ck_assert_str_eq(m, "one");
        free(m);
        setup_rootfs_settled(&hold); /* mounted: the swap may go ahead */
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        m = read_marker();
        ck_assert_str_eq(m, "two");
        ck_assert_int_eq(count_prefixed(".python.old-"), 1); /* still held */
        setup_rootfs_release(&hold);
}
END_TEST

/* A real native run sleeping on the real Debian rootfs while setup replaces its tree. */

#define REAL_ROOTFS "/var/tmp/vestibule-images/rootfs"

static struct sbx_config hold_cfg;
static struct backend *hold_be;

struct hold_run {
        const char *code;
        struct run_result res;
        struct sbx_error err;
        int r;
};

static void *hold_run_thread(void *ud)
{
        struct hold_run *h = ud;
        struct run_request req = {
            .language = SBX_LANG_PYTHON,
            .code = h->code,
            .code_len = strlen(h->code),
            .timeout_s = 60,
            .cfg = &hold_cfg,
            .cancel_fd = -1,
        };

        h->r = hold_be->ops->run(hold_be, &req, &h->res, &h->err);
        return NULL;
}

static void fx_hold_setup(void)
{
        _cleanup_free_ char *cmd = NULL, *ws = NULL;
        struct sbx_error err = {0};
        bool same_fs;

        /* T on the real trees' filesystem (not /tmp when that is a tmpfs of its own) */
        fx_setup_in(sbx_test_scratch_near(REAL_ROOTFS, &same_fs));
        rootfs = xasprintf("%s/rootfs", T);
        memset(&quiet, 0, sizeof(quiet));
        chmod(T, 0755);
        ck_assert_int_eq(mkdir(rootfs, 0755), 0);
        /* hardlinked copies of the real trees (same filesystem): cheap, and deleting them
         * unlinks only the copies; copies where no folder there could be made */
        cmd = xasprintf("%s '" REAL_ROOTFS "/python' '%s/python' && "
                        "%s '" REAL_ROOTFS "/node' '%s/node'",
                        same_fs ? "cp -al" : "cp -a", rootfs, same_fs ? "cp -al" : "cp -a", rootfs);
        ck_assert_int_eq(system(cmd), 0);
        ws = xasprintf("%s/ws", T);
        sbx_test_config(&hold_cfg, xstrdup(ws));
        hold_cfg.rootfs_dir = rootfs;
        hold_cfg.tmpfs_mb = 16;
        if (geteuid() == 0) {
                hold_cfg.run_as_set = true;
                hold_cfg.run_as_uid = 2000;
                hold_cfg.run_as_gid = 2000;
        }
        ck_assert_int_eq(native_backend_new(&hold_cfg, &hold_be, &err), 0);
}

static void fx_hold_teardown(void)
{
        hold_be = backend_free(hold_be);
        free(hold_cfg.workspace_dir);
        fx_install_teardown();
}

/* The run starts (writes /workspace/started), waits for /workspace/go, then imports modules it
 * has not loaded yet and reads a file: all from the rootfs it was started on. (Deleting the tree
 * also detaches the run's mounts on it, /workspace included: then 'started' vanishes and the
 * wait ends too.) */
static const char late_reads[] =
    "import os, time\n"
    "open('/workspace/started', 'w').close()\n"
    "while os.path.exists('/workspace/started') and not os.path.exists('/workspace/go'):\n"
    "    time.sleep(0.05)\n"
    "import decimal, email.mime.text, xml.dom.minidom, json\n"
    "print(open('/etc/os-release').read().split()[0], 6*7)\n";

static void start_and_wait(struct hold_run *h, pthread_t *t)
{
        _cleanup_free_ char *started = xasprintf("%s/started", hold_cfg.workspace_dir);
        int i;

        h->code = late_reads;
        ck_assert_int_eq(pthread_create(t, NULL, hold_run_thread, h), 0);
        for (i = 0; i < 600 && !exists(started); i++)
                usleep(50 * 1000);
        ck_assert_msg(exists(started), "the run did not start in 30 s");
}

static void go_and_join(struct hold_run *h, pthread_t t)
{
        _cleanup_free_ char *go = xasprintf("%s/go", hold_cfg.workspace_dir);
        int fd = open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        ck_assert_msg(h->r != 0 || h->res.outcome != RUN_OUTCOME_NONE, "the run did not run");
}

START_TEST(hold_a_real_run_keeps_its_tree_while_setup_replaces_it)
{
        _cleanup_free_ char *tar = pathf("%s/new.tar", T), *m = NULL;
        struct hold_run h = {0};
        struct sbx_error err = {0};
        struct archive *a;
        pthread_t t;
        bool skipped;

        a = tb_open(tar);
        tb_minimal_rootfs(a, "new");
        tb_close(a);
        start_and_wait(&h, &t);
        /* setup replaces the python tree under the sleeping run */
        ck_assert_msg(install_tar(tar, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        m = read_marker();
        ck_assert_str_eq(m, "new");
        ck_assert_int_eq(count_prefixed(".python.old-"), 1);
        go_and_join(&h, t);
        ck_assert_msg(h.r == 0, "%s", h.err.msg);
        ck_assert_msg(h.res.outcome == RUN_OUTCOME_EXITED && h.res.exit_code == 0,
                      "the run lost its tree: exit %d\n%.*s", h.res.exit_code, (int)h.res.err.len,
                      h.res.err.data ? h.res.err.data : "");
        ck_assert_msg(h.res.out.data && strstr(h.res.out.data, "PRETTY_NAME=\"Debian 42"), "%.*s",
                      (int)h.res.out.len, h.res.out.data ? h.res.out.data : "");
        run_result_done(&h.res);
        /* the run is over: nothing holds the old tree, it goes */
        ck_assert_int_eq(setup_rootfs_collect(rootfs), 1);
        ck_assert_int_eq(count_prefixed(".python.old-"), 0);
}
END_TEST

/* Control: the probe can fail. Deleting the tree under the run, as setup did before the hold,
 * makes the run's late imports fail. */
START_TEST(hold_control_deleting_the_tree_under_a_run_breaks_it)
{
        _cleanup_free_ char *aside = xasprintf("%s/aside", T);
        _cleanup_close_ int tfd = open(T, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *py = xasprintf("%s/python", rootfs);
        struct hold_run h = {0};
        pthread_t t;

        start_and_wait(&h, &t);
        ck_assert_int_eq(rename(py, aside), 0);
        ck_assert_int_eq(setup_remove_tree(tfd, "aside"), 0);
        go_and_join(&h, t);
        ck_assert_msg(h.r == 0, "%s", h.err.msg);
        ck_assert_msg(h.res.outcome == RUN_OUTCOME_EXITED && h.res.exit_code != 0,
                      "the run survived the deletion of its tree (outcome %d, exit %d): the probe "
                      "cannot fail: %.*s|%.*s",
                      (int)h.res.outcome, h.res.exit_code, (int)h.res.out.len,
                      h.res.out.data ? h.res.out.data : "", (int)h.res.err.len,
                      h.res.err.data ? h.res.err.data : "");
        ck_assert_msg(h.res.err.data && strstr(h.res.err.data, "Error"), "%.*s", (int)h.res.err.len,
                      h.res.err.data ? h.res.err.data : "");
        run_result_done(&h.res);
}
END_TEST

static char *slurp(const char *path, size_t *ret_len);

/* A real SIGINT (Ctrl-C) to the real `vestibule-mcp setup` process while it unpacks the real
 * rootfs: exit 130, nothing half-installed, an installed tree left as it was. */
static pid_t spawn_setup_cli(const char *tar, const char *errlog)
{
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                _cleanup_free_ char *dh = xasprintf("DOCKER_HOST=unix://%s/no-engine.sock", T);
                _cleanup_free_ char *home = xasprintf("HOME=%s", T);
                char *envp[] = {"PATH=/usr/bin:/bin", home, dh, "LANG=C.UTF-8", NULL};
                int fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

                if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                        _exit(127);
                execle(VESTIBULE_BIN, VESTIBULE_BIN, "setup", "--from-tar", tar, "--language",
                       "python", "--rootfs-dir", rootfs, (char *)NULL, envp);
                _exit(127);
        }
        return pid;
}

/* Wait until a .python.partial-* tree in the rootfs folder holds @what; 1 when it did. */
static int wait_partial_holds(const char *what, pid_t pid)
{
        int i;

        for (i = 0; i < 1200; i++) {
                DIR *d = opendir(rootfs);

                if (d) {
                        for (struct dirent *de; (de = readdir(d));) {
                                _cleanup_free_ char *p = NULL;

                                if (strncmp(de->d_name, ".python.partial-", 16) != 0)
                                        continue;
                                p = xasprintf("%s/%s/%s", rootfs, de->d_name, what);
                                if (exists(p)) {
                                        closedir(d);
                                        return 1;
                                }
                        }
                        closedir(d);
                }
                if (waitpid(pid, NULL, WNOHANG) == pid)
                        return 0;
                usleep(25 * 1000);
        }
        return 0;
}

START_TEST(cli_sigint_mid_unpack_leaves_nothing_half_installed)
{
        _cleanup_free_ char *log = xasprintf("%s/setup.log", T), *small = pathf("%s/small.tar", T);
        _cleanup_free_ char *id1 = NULL, *id2 = NULL, *m = NULL, *text = NULL;
        static const char *const nothing[] = {NULL};
        static const char *const old[] = {"python", "python.json", NULL};
        struct sbx_error err = {0};
        struct archive *a;
        size_t len;
        bool skipped;
        int status;
        pid_t pid;

        /* no rootfs before: Ctrl-C mid-unpack leaves none, nor a partial tree or a record */
        pid = spawn_setup_cli(REAL_PYTHON_TAR, log);
        ck_assert_msg(wait_partial_holds("usr/lib", pid), "setup never got to unpacking");
        ck_assert_int_eq(kill(pid, SIGINT), 0);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        text = slurp(log, &len);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %d: %s", status,
                      text);
        ck_assert_msg(strstr(text, "cancelled"), "%s", text);
        assert_rootfs_holds(nothing);
        free(TAKE_PTR(text));

        /* an installed tree: Ctrl-C mid-unpack of its replacement leaves it as it was */
        a = tb_open(small);
        tb_minimal_rootfs(a, "installed");
        tb_close(a);
        ck_assert_msg(install_tar(small, "python", &quiet, &skipped, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(setup_installed_identity(rootfs, "python", &id1, NULL, &err), 0);
        pid = spawn_setup_cli(REAL_PYTHON_TAR, log);
        ck_assert_msg(wait_partial_holds("usr/lib", pid), "setup never got to unpacking");
        ck_assert_int_eq(kill(pid, SIGINT), 0);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        text = slurp(log, &len);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %d: %s", status,
                      text);
        assert_rootfs_holds(old);
        m = read_marker();
        ck_assert_str_eq(m, "installed");
        ck_assert_int_eq(setup_installed_identity(rootfs, "python", &id2, NULL, &err), 0);
        ck_assert_str_eq(id1, id2);
        free(TAKE_PTR(text));

        /* control: left alone, the same command installs the real tree */
        pid = spawn_setup_cli(REAL_PYTHON_TAR, log);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        text = slurp(log, &len);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 130, "status %d: %s", status,
                      text);
        ck_assert_msg(strstr(text, "python rootfs installed"), "%s", text);
        free(TAKE_PTR(m));
        m = xasprintf("%s/python/usr/bin/python3", rootfs);
        ck_assert(exists(m));
        free(TAKE_PTR(text));
}
END_TEST

/* ---- registry: a real docker-registry on loopback, images pushed through its API */

#define REGISTRY_BIN "/usr/bin/docker-registry"
#define ZERO_DIGEST "sha256:0000000000000000000000000000000000000000000000000000000000000000"

static pid_t registry_pid = -1;
static int registry_port;
static time_t registry_test_start;

START_TEST(ref_parse_forms)
{
        static const char *d =
            "sha256:5e2bdb1b0d542d5039cffb8181c65930093949194a65c365dfb1b0fe13a4fa5b";
        static const struct {
                const char *name, *host, *repo;
                bool plain;
        } ok[] = {
            {"docker.io/library/python", "registry-1.docker.io", "library/python", false},
            {"python:3.12-slim", "registry-1.docker.io", "library/python", false},
            {"someone/tool", "registry-1.docker.io", "someone/tool", false},
            {"127.0.0.1:5000/vestibule/python:bookworm", "127.0.0.1:5000", "vestibule/python",
             true},
            {"localhost:5000/x", "localhost:5000", "x", true},
            {"ghcr.io/o/r", "ghcr.io", "o/r", false},
        };
        struct registry_ref r;
        struct sbx_error err = {0};
        size_t i;

        for (i = 0; i < ELEMENTSOF(ok); i++) {
                _cleanup_free_ char *ref = xasprintf("%s@%s", ok[i].name, d);

                ck_assert_msg(registry_ref_parse(ref, &r, &err) == 0, "%s: %s", ref, err.msg);
                ck_assert_str_eq(r.host, ok[i].host);
                ck_assert_str_eq(r.repository, ok[i].repo);
                ck_assert_str_eq(r.digest, d);
                ck_assert_int_eq(r.plain_http, ok[i].plain);
                registry_ref_done(&r);
        }
        ck_assert_int_eq(registry_ref_parse("python:3.12-slim", &r, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "not pinned"));
        ck_assert_int_eq(registry_ref_parse("python@sha256:abc", &r, &err), -EINVAL);
        ck_assert_int_eq(registry_ref_parse("Bad/Name@" ZERO_DIGEST, &r, &err), -EINVAL);
}
END_TEST

static int free_port(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        port = ntohs(a.sin_port);
        close(fd);
        return port;
}

static size_t discard(char *b, size_t s, size_t n, void *u)
{
        (void)b, (void)u;
        return s * n;
}

static char *location;

static size_t grab_location(char *b, size_t s, size_t n, void *u)
{
        (void)u;
        if (strncasecmp(b, "Location:", 9) == 0) {
                char *v = b + 9;
                while (*v == ' ')
                        v++;
                free(location);
                location = xstrndup(v, strcspn(v, "\r\n"));
        }
        return s * n;
}

/* One request to the test registry; returns the HTTP status. */
static long reg_request(const char *method, const char *url, const char *ctype, const void *body,
                        size_t len)
{
        CURL *c = curl_easy_init();
        struct curl_slist *h = NULL;
        _cleanup_free_ char *ct = ctype ? xasprintf("Content-Type: %s", ctype) : NULL;
        long status = 0;

        ck_assert_ptr_nonnull(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, grab_location);
        if (body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        } else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
        }
        if (ct)
                h = curl_slist_append(h, ct);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        if (curl_easy_perform(c) == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        return status;
}

static char *digest_of(const void *data, size_t len)
{
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned n = 0, i;
        char hex[2 * EVP_MAX_MD_SIZE + 1];

        EVP_Digest(data, len, d, &n, EVP_sha256(), NULL);
        for (i = 0; i < n; i++)
                sprintf(hex + (size_t)2 * i, "%02x", d[i]);
        return xasprintf("sha256:%s", hex);
}

static char *slurp(const char *path, size_t *ret_len)
{
        FILE *f = fopen(path, "rb");
        char *buf;
        long n;

        ck_assert_ptr_nonnull(f);
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        rewind(f);
        buf = xmalloc((size_t)n + 1);
        ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
        buf[n] = '\0';
        fclose(f);
        *ret_len = (size_t)n;
        return buf;
}

/* Push a blob; return its digest. */
static char *push_blob(const char *repo, const void *data, size_t len)
{
        char *digest = digest_of(data, len);
        _cleanup_free_ char *start =
            xasprintf("http://127.0.0.1:%d/v2/%s/blobs/uploads/", registry_port, repo);
        _cleanup_free_ char *put = NULL, *abs = NULL;

        ck_assert_int_eq(reg_request("POST", start, NULL, NULL, 0), 202);
        ck_assert_ptr_nonnull(location);
        abs = location[0] == '/' ? xasprintf("http://127.0.0.1:%d%s", registry_port, location)
                                 : xstrdup(location);
        put = xasprintf("%s%sdigest=%s", abs, strchr(abs, '?') ? "&" : "?", digest);
        ck_assert_int_eq(reg_request("PUT", put, "application/octet-stream", data, len), 201);
        return digest;
}

static char *push_manifest(const char *repo, const char *mediatype, const char *json)
{
        char *digest = digest_of(json, strlen(json));
        _cleanup_free_ char *url =
            xasprintf("http://127.0.0.1:%d/v2/%s/manifests/%s", registry_port, repo, digest);

        ck_assert_int_eq(reg_request("PUT", url, mediatype, json, strlen(json)), 201);
        return digest;
}

static char *layer_gz(const char *path, const char *marker, bool with_whiteout)
{
        struct archive *a = archive_write_new();
        size_t len;

        archive_write_set_format_pax_restricted(a);
        archive_write_add_filter_gzip(a);
        ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
        if (with_whiteout) {
                tb_file(a, "etc/marker", 0644, marker);
                tb_file(a, "etc/.wh.gone", 0644, "");
        } else {
                tb_minimal_rootfs(a, marker);
                tb_file(a, "usr/bin/node", 0755, "node");
                tb_file(a, "etc/gone", 0644, "x");
        }
        tb_close(a);
        return slurp(path, &len);
}

/* An image of two gzip layers (the second replaces /etc/marker and whites out /etc/gone),
 * pushed as an OCI manifest; @ret_layer1 receives the first layer's digest. */
static char *push_image(const char *repo, const char *marker, const char *arch, char **ret_layer1)
{
        _cleanup_free_ char *p1 = xasprintf("%s/l1-%s.tgz", T, marker);
        _cleanup_free_ char *p2 = xasprintf("%s/l2-%s.tgz", T, marker);
        _cleanup_free_ char *cfg = xasprintf("{\"architecture\":\"%s\",\"os\":\"linux\","
                                             "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}",
                                             arch);
        _cleanup_free_ char *d1 = NULL, *d2 = NULL, *dc = NULL, *m = NULL, *b1 = NULL, *b2 = NULL;
        size_t l1, l2;

        free(layer_gz(p1, "base", false));
        free(layer_gz(p2, marker, true));
        b1 = slurp(p1, &l1);
        b2 = slurp(p2, &l2);
        d1 = push_blob(repo, b1, l1);
        d2 = push_blob(repo, b2, l2);
        dc = push_blob(repo, cfg, strlen(cfg));
        m = xasprintf(
            "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
            "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
            "\"digest\":\"%s\",\"size\":%zu},\"layers\":["
            "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
            "\"digest\":\"%s\",\"size\":%zu},"
            "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
            "\"digest\":\"%s\",\"size\":%zu}]}",
            dc, strlen(cfg), d1, l1, d2, l2);
        if (ret_layer1)
                *ret_layer1 = xstrdup(d1);
        return push_manifest(repo, "application/vnd.oci.image.manifest.v1+json", m);
}

/* An index with an arm64 and an amd64 image: the pull must pick this machine's. */
static char *push_index(const char *repo, char **ret_amd64_layer1)
{
        _cleanup_free_ char *arm = push_image(repo, "arm64", "arm64", NULL);
        _cleanup_free_ char *amd = push_image(repo, "amd64", "amd64", ret_amd64_layer1);
        _cleanup_free_ char *idx = xasprintf(
            "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
            "\"manifests\":["
            "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"%s\","
            "\"size\":1,\"platform\":{\"architecture\":\"arm64\",\"os\":\"linux\"}},"
            "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"%s\","
            "\"size\":1,\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"}}]}",
            arm, amd);

        return push_manifest(repo, "application/vnd.oci.image.index.v1+json", idx);
}

static void fx_registry_setup(void)
{
        _cleanup_free_ char *conf = NULL, *url = NULL, *log = NULL;
        FILE *f;
        int i;

        fx_install_setup();
        registry_test_start = time(NULL);
        registry_port = free_port();
        conf = xasprintf("%s/registry.yml", T);
        log = xasprintf("%s/registry.log", T);
        f = fopen(conf, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
                "    rootdirectory: %s/reg\nhttp:\n  addr: 127.0.0.1:%d\n",
                T, registry_port);
        fclose(f);
        registry_pid = fork();
        ck_assert_int_ge(registry_pid, 0);
        if (registry_pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execl(REGISTRY_BIN, REGISTRY_BIN, "serve", conf, (char *)NULL);
                _exit(127);
        }
        url = xasprintf("http://127.0.0.1:%d/v2/", registry_port);
        for (i = 0; i < 100 && reg_request("GET", url, NULL, NULL, 0) != 200; i++)
                usleep(100 * 1000);
        ck_assert_msg(i < 100, "docker-registry did not start on 127.0.0.1:%d", registry_port);
}

static void stop_registry(void)
{
        if (registry_pid > 0) {
                kill(registry_pid, SIGTERM);
                waitpid(registry_pid, NULL, 0);
                registry_pid = -1;
        }
}

static void fx_registry_teardown(void)
{
        stop_registry();
        free(location);
        location = NULL;
        fx_install_teardown();
}

static char *registry_ref(const char *repo, const char *digest)
{
        return xasprintf("127.0.0.1:%d/%s@%s", registry_port, repo, digest);
}

START_TEST(registry_pull_by_index_digest_then_no_network)
{
        _cleanup_free_ char *idx = push_index("vestibule/python", NULL);
        _cleanup_free_ char *ref = registry_ref("vestibule/python", idx);
        _cleanup_free_ char *outbuf = NULL, *marker = NULL, *gone = NULL, *id = NULL;
        size_t outlen = 0;
        FILE *out = open_memstream(&outbuf, &outlen);
        struct setup_run_args a = {
            .rootfs_dir = rootfs, .out = out, .image_python = ref, .image_node = ref};
        struct sbx_error err = {0};

        ck_assert_msg(setup_run(&a, &err) == 0, "%s", err.msg);
        fflush(out);
        ck_assert_ptr_nonnull(strstr(outbuf, "python rootfs installed"));
        marker = read_marker();
        ck_assert_str_eq(marker, "amd64"); /* this machine's variant, with both layers applied */
        gone = xasprintf("%s/python/etc/gone", rootfs);
        ck_assert(!exists(gone)); /* the second layer's whiteout */
        ck_assert_int_eq(setup_installed_identity(rootfs, "python", &id, NULL, &err), 0);
        ck_assert_str_eq(id, idx); /* recorded under the pinned (index) digest */

        /* the registry is gone: a second run must not need it */
        stop_registry();
        ck_assert_msg(setup_run(&a, &err) == 0, "second run touched the network: %s", err.msg);
        fflush(out);
        ck_assert_ptr_nonnull(strstr(outbuf, "already installed from"));
        fclose(out);
        /* control: with the registry gone, an install that does need it fails */
        a.force = true;
        ck_assert_int_eq(setup_run(&a, &err), -ECONNREFUSED);
}
END_TEST

START_TEST(registry_refuses_a_tampered_blob)
{
        _cleanup_free_ char *layer1 = NULL;
        _cleanup_free_ char *idx = push_index("vestibule/python", &layer1);
        _cleanup_free_ char *ref = registry_ref("vestibule/python", idx);
        _cleanup_free_ char *data = NULL;
        static const char *const nothing[] = {NULL};
        struct setup_run_args a = {
            .rootfs_dir = rootfs, .out = stdout, .image_python = ref, .image_node = ref};
        struct sbx_error err = {0};
        FILE *f;

        /* flip one byte of the stored blob, behind the registry's back */
        data = xasprintf("%s/reg/docker/registry/v2/blobs/sha256/%.2s/%s/data", T, layer1 + 7,
                         layer1 + 7);
        f = fopen(data, "r+b");
        ck_assert_msg(f != NULL, "no blob at %s", data);
        fseek(f, 100, SEEK_SET);
        {
                int c = fgetc(f);
                fseek(f, 100, SEEK_SET);
                fputc(c ^ 0xff, f);
        }
        fclose(f);
        ck_assert_int_eq(setup_run(&a, &err), -EBADMSG);
        ck_assert_msg(strstr(err.msg, layer1) != NULL, "%s", err.msg);
        assert_rootfs_holds(nothing);
}
END_TEST

/* Push a one-layer image whose layer is the gzip tarball @layer_path (a minimal rootfs plus the
 * crafted entries); return the manifest digest. */
static char *push_one_layer(const char *repo, const char *layer_path)
{
        static const char cfg[] = "{\"architecture\":\"amd64\",\"os\":\"linux\"}";
        _cleanup_free_ char *b = NULL, *d = NULL, *dc = NULL, *m = NULL;
        size_t l;

        b = slurp(layer_path, &l);
        d = push_blob(repo, b, l);
        dc = push_blob(repo, cfg, strlen(cfg));
        m = xasprintf(
            "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
            "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
            "\"digest\":\"%s\",\"size\":%zu},\"layers\":["
            "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
            "\"digest\":\"%s\",\"size\":%zu}]}",
            dc, strlen(cfg), d, l);
        return push_manifest(repo, "application/vnd.oci.image.manifest.v1+json", m);
}

static struct archive *tgz_open(const char *path)
{
        struct archive *a = archive_write_new();

        archive_write_set_format_pax_restricted(a);
        archive_write_add_filter_gzip(a);
        ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
        return a;
}

/* The /var/tmp/vestibule-pull-* download folders of this process's pulls: none may be left. */
static int count_pull_dirs(void)
{
        DIR *d = opendir("/var/tmp");
        int n = 0;

        ck_assert_ptr_nonnull(d);
        for (struct dirent *de; (de = readdir(d));) {
                _cleanup_free_ char *p = NULL;
                struct stat st;

                if (strncmp(de->d_name, "vestibule-pull-", 15) != 0)
                        continue;
                p = xasprintf("/var/tmp/%s", de->d_name);
                /* only ours: created since this test began (others' may come and go) */
                if (stat(p, &st) == 0 && st.st_ctime >= registry_test_start)
                        n++;
        }
        closedir(d);
        return n;
}

/* Layers with a '../' name or an absolute name, pulled from the registry: the whole install is
 * refused naming the entry, nothing is installed, the download folder is gone. */
START_TEST(registry_refuses_escaping_layers)
{
        static const char *const bad[] = {"../escaped", "/abs-escaped", "./usr/../../escaped2"};
        static const char *const nothing[] = {NULL};
        size_t i;

        for (i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *lp = xasprintf("%s/bad%zu.tgz", T, i);
                _cleanup_free_ char *dm = NULL, *ref = NULL;
                struct archive *a = tgz_open(lp);
                struct sbx_error err = {0};
                struct setup_run_args ra = {.rootfs_dir = rootfs, .out = stdout};

                tb_minimal_rootfs(a, "bad");
                tb_file(a, "./usr/bin/node", 0755, "node");
                tb_file(a, bad[i], 0644, "escaped");
                tb_close(a);
                dm = push_one_layer("vestibule/bad", lp);
                ref = registry_ref("vestibule/bad", dm);
                ra.image_python = ref;
                ra.image_node = ref;
                ck_assert_int_eq(setup_run(&ra, &err), -EPERM);
                ck_assert_msg(strstr(err.msg, "..") || strstr(err.msg, "absolute"), "%s", err.msg);
                assert_rootfs_holds(nothing);
                ck_assert_int_eq(count_pull_dirs(), 0);
        }
        {
                _cleanup_free_ char *esc = xasprintf("%s/escaped", T);
                _cleanup_free_ char *esc2 = xasprintf("%s/escaped2", T);

                ck_assert(!exists(esc) && !exists(esc2) && !exists("/abs-escaped"));
        }
}
END_TEST

/* A layer with a device node, a fifo, a setuid and a setgid file and an absolute symlink,
 * pulled from the registry: installed with the devices left out, the bits stripped, the
 * symlink kept as a symlink that was never followed; the record counts what was neutralised. */
START_TEST(registry_neutralises_devices_setuid_and_absolute_symlinks)
{
        _cleanup_free_ char *lp = xasprintf("%s/mixed.tgz", T);
        _cleanup_free_ char *dm = NULL, *ref = NULL, *rec = NULL, *p = NULL;
        struct archive *a = tgz_open(lp);
        struct sbx_error err = {0};
        struct setup_run_args ra = {.rootfs_dir = rootfs, .out = stdout};
        char buf[64] = "";
        struct stat st;
        ssize_t n;

        tb_minimal_rootfs(a, "mixed");
        tb_file(a, "./usr/bin/node", 0755, "node");
        tb_dir(a, "./dev/");
        tb_add(a, "./dev/sda", AE_IFBLK, 0666, NULL, NULL, NULL, makedev(8, 0));
        tb_add(a, "./dev/mem2", AE_IFCHR, 0666, NULL, NULL, NULL, makedev(1, 1));
        tb_add(a, "./fifo", AE_IFIFO, 0644, NULL, NULL, NULL, 0);
        tb_file(a, "./usr/bin/su2", 04755, "su");
        tb_file(a, "./usr/bin/sg2", 02755, "sg");
        tb_symlink(a, "./etc/host-shadow", "/etc/shadow");
        tb_close(a);
        dm = push_one_layer("vestibule/mixed", lp);
        ref = registry_ref("vestibule/mixed", dm);
        ra.image_python = ref;
        ra.image_node = ref;
        ck_assert_msg(setup_run(&ra, &err) == 0, "%s", err.msg);

        p = xasprintf("%s/python/dev/sda", rootfs);
        ck_assert(!exists(p));
        free(p);
        p = xasprintf("%s/python/dev/mem2", rootfs);
        ck_assert(!exists(p));
        free(p);
        p = xasprintf("%s/python/fifo", rootfs);
        ck_assert(!exists(p));
        free(p);
        p = xasprintf("%s/python/usr/bin/su2", rootfs);
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0755);
        free(p);
        p = xasprintf("%s/python/usr/bin/sg2", rootfs);
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0755);
        free(p);
        p = xasprintf("%s/python/etc/host-shadow", rootfs);
        ck_assert_int_eq(lstat(p, &st), 0);
        ck_assert(S_ISLNK(st.st_mode)); /* kept as a link, resolved only inside the sandbox */
        n = readlink(p, buf, sizeof(buf) - 1);
        ck_assert_int_gt(n, 0);
        buf[n] = '\0';
        ck_assert_str_eq(buf, "/etc/shadow");
        free(p);
        p = xasprintf("%s/python/usr/bin/python3.11", rootfs); /* control: the rest is there */
        ck_assert(exists(p));
        rec = xasprintf("%s/python.json", rootfs);
        {
                _cleanup_free_ char *text = NULL;
                size_t len;

                text = slurp(rec, &len);
                ck_assert_msg(strstr(text, "\"skipped_special\":3"), "%s", text);
                ck_assert_msg(strstr(text, "\"stripped_setid\":2"), "%s", text);
        }
        ck_assert_int_eq(count_pull_dirs(), 0);
}
END_TEST

START_TEST(registry_refuses_a_manifest_that_is_not_the_pinned_one)
{
        _cleanup_free_ char *img = push_image("vestibule/node", "amd64", "amd64", NULL);
        _cleanup_free_ char *tag =
            xasprintf("http://127.0.0.1:%d/v2/vestibule/node/manifests/%s", registry_port, img);
        _cleanup_free_ char *wrong = registry_ref("vestibule/node", ZERO_DIGEST);
        struct setup_run_args a = {
            .rootfs_dir = rootfs, .out = stdout, .image_python = wrong, .image_node = wrong};
        struct sbx_error err = {0};

        (void)tag;
        /* a digest the registry does not have: refused, nothing installed */
        ck_assert_int_lt(setup_run(&a, &err), 0);
        ck_assert_ptr_nonnull(strstr(err.msg, "404"));
}
END_TEST

/* ---- bearer tokens: a small fake registry on loopback that demands one (the real
 * docker-registry needs a JWT signing setup for token auth; this checks our side of the
 * challenge / token / retry exchange) */

struct fake_blob {
        char *path; /* "/v2/x/y/manifests/sha256:..." */
        char *ctype;
        char *data;
        size_t len;
};

struct fake_registry {
        int lfd, port;
        struct fake_blob items[4];
        size_t n_items;
        bool give_token;
        int token_requests, unauthorized, served;
        pthread_t thread;
};

static void fake_reply(int fd, int status, const char *extra, const char *ctype, const char *body,
                       size_t len)
{
        _cleanup_free_ char *head =
            xasprintf("HTTP/1.1 %d X\r\nConnection: close\r\n"
                      "Content-Length: %zu\r\n%s%s%s%s\r\n",
                      status, len, extra ? extra : "", ctype ? "Content-Type: " : "",
                      ctype ? ctype : "", ctype ? "\r\n" : "");

        if (write(fd, head, strlen(head)) < 0 || (len && write(fd, body, len) < 0))
                return;
}

static void *fake_serve(void *ud)
{
        struct fake_registry *fr = ud;

        for (;;) {
                char req[8192];
                size_t got = 0;
                int fd = accept4(fr->lfd, NULL, NULL, SOCK_CLOEXEC);
                char path[4096];
                size_t i;

                if (fd < 0)
                        return NULL;
                while (got < sizeof(req) - 1) {
                        ssize_t n = read(fd, req + got, sizeof(req) - 1 - got);
                        if (n <= 0)
                                break;
                        got += (size_t)n;
                        req[got] = '\0';
                        if (strstr(req, "\r\n\r\n"))
                                break;
                }
                req[got] = '\0';
                if (sscanf(req, "GET %4095s", path) != 1) {
                        close(fd);
                        continue;
                }
                if (strncmp(path, "/token?", 7) == 0) {
                        fr->token_requests++;
                        if (fr->give_token && strstr(path, "service=fake") &&
                            strstr(path, "scope=repository%3Ax%2Fy%3Apull"))
                                fake_reply(fd, 200, NULL, "application/json", "{\"token\":\"T0K\"}",
                                           15);
                        else
                                fake_reply(fd, 401, NULL, NULL, "", 0);
                } else if (!strcasestr(req, "\r\nAuthorization: Bearer T0K\r\n")) {
                        _cleanup_free_ char *chal = xasprintf(
                            "WWW-Authenticate: Bearer realm=\"http://127.0.0.1:%d/token\","
                            "service=\"fake\",scope=\"repository:x/y:pull\"\r\n",
                            fr->port);
                        fr->unauthorized++;
                        fake_reply(fd, 401, chal, NULL, "", 0);
                } else {
                        for (i = 0; i < fr->n_items; i++)
                                if (strcmp(path, fr->items[i].path) == 0)
                                        break;
                        if (i < fr->n_items) {
                                fr->served++;
                                fake_reply(fd, 200, NULL, fr->items[i].ctype, fr->items[i].data,
                                           fr->items[i].len);
                        } else {
                                fake_reply(fd, 404, NULL, NULL, "", 0);
                        }
                }
                close(fd);
        }
}

static void fake_add(struct fake_registry *fr, const char *kind, const char *digest,
                     const char *ctype, const char *data, size_t len)
{
        struct fake_blob *b = &fr->items[fr->n_items++];

        b->path = xasprintf("/v2/x/y/%s/%s", kind, digest);
        b->ctype = ctype ? xstrdup(ctype) : NULL;
        b->data = xmalloc(len + 1);
        memcpy(b->data, data, len);
        b->len = len;
}

/* Start a fake registry holding one single-layer image; returns its manifest digest. */
static char *fake_start(struct fake_registry *fr, bool give_token)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof(a);
        _cleanup_free_ char *p1 = xasprintf("%s/fake.tgz", T), *b1 = NULL, *d1 = NULL;
        _cleanup_free_ char *dc = NULL, *m = NULL;
        static const char cfg[] = "{\"architecture\":\"amd64\",\"os\":\"linux\"}";
        char *dm;
        size_t l1;

        memset(fr, 0, sizeof(*fr));
        fr->give_token = give_token;
        free(layer_gz(p1, "fake", false));
        b1 = slurp(p1, &l1);
        d1 = digest_of(b1, l1);
        dc = digest_of(cfg, strlen(cfg));
        m = xasprintf(
            "{\"schemaVersion\":2,\"mediaType\":"
            "\"application/vnd.docker.distribution.manifest.v2+json\","
            "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\","
            "\"digest\":\"%s\",\"size\":%zu},\"layers\":[{\"mediaType\":"
            "\"application/vnd.docker.image.rootfs.diff.tar.gzip\","
            "\"digest\":\"%s\",\"size\":%zu}]}",
            dc, strlen(cfg), d1, l1);
        dm = digest_of(m, strlen(m));
        fake_add(fr, "manifests", dm, "application/vnd.docker.distribution.manifest.v2+json", m,
                 strlen(m));
        fake_add(fr, "blobs", d1, "application/octet-stream", b1, l1);
        fr->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fr->lfd, 0);
        ck_assert_int_eq(bind(fr->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(fr->lfd, 16), 0);
        ck_assert_int_eq(getsockname(fr->lfd, (struct sockaddr *)&a, &alen), 0);
        fr->port = ntohs(a.sin_port);
        ck_assert_int_eq(pthread_create(&fr->thread, NULL, fake_serve, fr), 0);
        return dm;
}

/* Stop the fake registry's thread and free what it holds. */
static void fake_stop(struct fake_registry *fr)
{
        size_t i;

        shutdown(fr->lfd, SHUT_RDWR); /* accept4() fails: the thread returns */
        pthread_join(fr->thread, NULL);
        close(fr->lfd);
        for (i = 0; i < fr->n_items; i++) {
                free(fr->items[i].path);
                free(fr->items[i].ctype);
                free(fr->items[i].data);
        }
        fr->n_items = 0;
}

START_TEST(registry_bearer_token_challenge_and_retry)
{
        struct fake_registry fr;
        _cleanup_free_ char *dm = fake_start(&fr, true);
        _cleanup_free_ char *ref = xasprintf("127.0.0.1:%d/x/y@%s", fr.port, dm);
        _cleanup_free_ char *marker = NULL;
        struct setup_run_args a = {
            .rootfs_dir = rootfs, .out = stdout, .image_python = ref, .image_node = ref};
        struct sbx_error err = {0};

        ck_assert_msg(setup_run(&a, &err) == 0, "%s", err.msg);
        marker = read_marker();
        ck_assert_str_eq(marker, "fake");
        ck_assert_int_ge(fr.token_requests, 1);
        ck_assert_int_ge(fr.unauthorized, 1);
        ck_assert_int_ge(fr.served, 4); /* manifest + blob, for python and for node */
        fake_stop(&fr);
}
END_TEST

START_TEST(registry_without_a_token_is_refused)
{
        struct fake_registry fr;
        _cleanup_free_ char *dm = fake_start(&fr, false);
        _cleanup_free_ char *ref = xasprintf("127.0.0.1:%d/x/y@%s", fr.port, dm);
        struct setup_run_args a = {
            .rootfs_dir = rootfs, .out = stdout, .image_python = ref, .image_node = ref};
        struct sbx_error err = {0};

        ck_assert_int_eq(setup_run(&a, &err), -EACCES);
        ck_assert_int_eq(fr.served, 0);
        ck_assert_int_ge(fr.token_requests, 1);
        fake_stop(&fr);
}
END_TEST

static Suite *setup_suite(void)
{
        Suite *s = suite_create("setup");
        TCase *tc;

        tc = tcase_create("pins");
        tcase_add_test(tc, pins_file_parses_and_recipe_matches_build_sh);
        tcase_add_test(tc, pins_reject_bad_input);
        suite_add_tcase(s, tc);

        tc = tcase_create("names");
        tcase_add_test(tc, names_normalize_or_refuse);
        suite_add_tcase(s, tc);

        tc = tcase_create("unpack");
        tcase_add_checked_fixture(tc, fx_setup, fx_teardown);
        tcase_add_test(tc, unpack_control_plain_files_land_inside);
        tcase_add_test(tc, unpack_refuses_dotdot);
        tcase_add_test(tc, unpack_refuses_absolute_name);
        tcase_add_test(tc, unpack_never_writes_through_a_symlink);
        tcase_add_test(tc, unpack_replaces_a_symlink_instead_of_following_it);
        tcase_add_test(tc, unpack_keeps_absolute_symlinks_unfollowed);
        tcase_add_test(tc, unpack_refuses_hardlinks_out);
        tcase_add_test(tc, unpack_hardlink_inside_works);
        tcase_add_test(tc, unpack_parts_refuse_what_they_must);
        tcase_add_test(tc, unpack_skips_devices_and_fifos);
        tcase_add_test(tc, unpack_strips_setuid_setgid);
        tcase_add_test(tc, unpack_applies_oci_whiteouts);
        tcase_add_test(tc, unpack_whiteout_cannot_delete_outside);
        tcase_add_test(tc, unpack_checks_sha256);
        tcase_add_test(tc, unpack_restores_cwd_and_umask);
        suite_add_tcase(s, tc);

        tc = tcase_create("install");
        tcase_add_checked_fixture(tc, fx_install_setup, fx_install_teardown);
        tcase_add_test(tc, install_then_skip_then_force);
        tcase_add_test(tc, install_replaces_an_older_tree_whole);
        tcase_add_test(tc, install_truncated_leaves_nothing);
        tcase_add_test(tc, install_cancelled_leaves_nothing);
        tcase_add_test(tc, install_refuses_unusable_trees);
        tcase_add_test(tc, install_sweeps_leftovers_of_a_killed_setup);
        tcase_add_test(tc, install_one_setup_at_a_time);
        tcase_add_test(tc, install_redoes_a_damaged_record);
        tcase_add_test(tc, install_as_unprivileged_user_owns_and_reads_everything);
        tcase_add_test(tc, install_as_root_keeps_numeric_ids);
        tcase_add_test(tc, install_unprivileged_layers_into_read_only_dirs);
        tcase_add_test(tc, unpack_restore_never_chmods_through_a_symlink);
        suite_add_tcase(s, tc);

        tc = tcase_create("rootfs_hold");
        tcase_add_checked_fixture(tc, fx_install_setup, fx_install_teardown);
        tcase_add_test(tc, hold_keeps_the_old_tree_until_released);
        tcase_add_test(tc, hold_blocks_the_swap_until_settled);
        suite_add_tcase(s, tc);

        /* a real native run on the real rootfs trees while setup replaces one */
        if (access(REAL_ROOTFS "/python/usr/bin/python3", X_OK) == 0 &&
            access(REAL_ROOTFS "/node/usr/bin/node", X_OK) == 0) {
                tc = tcase_create("rootfs_hold_real_run");
                tcase_add_checked_fixture(tc, fx_hold_setup, fx_hold_teardown);
                tcase_set_timeout(tc, 180);
                tcase_add_test(tc, hold_a_real_run_keeps_its_tree_while_setup_replaces_it);
                tcase_add_test(tc, hold_control_deleting_the_tree_under_a_run_breaks_it);
                suite_add_tcase(s, tc);
        } else {
                const char *must = getenv("SBX_TEST_MUST_RUN");

                if (must && strcmp(must, "1") == 0)
                        sbx_test_skip(REAL_ROOTFS " has no python and node trees: run setup");
                fprintf(stderr,
                        "note: no trees in " REAL_ROOTFS ", rootfs_hold_real_run not run\n");
        }

        tc = tcase_create("run");
        tcase_add_checked_fixture(tc, fx_install_setup, fx_install_teardown);
        tcase_add_test(tc, run_from_tar_prints_result_and_honest_readiness);
        tcase_add_test(tc, run_uses_the_readiness_check_and_its_verdict);
        tcase_add_test(tc, run_from_debian_skips_the_build_when_installed_from_this_recipe);
        tcase_add_test(tc, run_registry_unreachable_names_the_fix);
        suite_add_tcase(s, tc);

        tc = tcase_create("registry_ref");
        tcase_add_test(tc, ref_parse_forms);
        suite_add_tcase(s, tc);

        tc = tcase_create("registry_auth");
        tcase_add_checked_fixture(tc, fx_install_setup, fx_install_teardown);
        tcase_add_test(tc, registry_bearer_token_challenge_and_retry);
        tcase_add_test(tc, registry_without_a_token_is_refused);
        suite_add_tcase(s, tc);

        if (access(REGISTRY_BIN, X_OK) == 0) {
                tc = tcase_create("registry");
                tcase_add_checked_fixture(tc, fx_registry_setup, fx_registry_teardown);
                tcase_set_timeout(tc, 120);
                tcase_add_test(tc, registry_pull_by_index_digest_then_no_network);
                tcase_add_test(tc, registry_refuses_a_tampered_blob);
                tcase_add_test(tc, registry_refuses_escaping_layers);
                tcase_add_test(tc, registry_neutralises_devices_setuid_and_absolute_symlinks);
                tcase_add_test(tc, registry_refuses_a_manifest_that_is_not_the_pinned_one);
                suite_add_tcase(s, tc);
        } else {
                const char *must = getenv("SBX_TEST_MUST_RUN");

                if (must && strcmp(must, "1") == 0)
                        sbx_test_skip(REGISTRY_BIN " is missing: apt-get install docker-registry");
                fprintf(stderr, "note: " REGISTRY_BIN " missing, registry tests not run\n");
        }

        /* The real Debian-built rootfs (images/build.sh), when this machine has it. */
        if (access(REAL_PYTHON_TAR, R_OK) == 0) {
                tc = tcase_create("real_rootfs");
                tcase_add_checked_fixture(tc, fx_install_setup, fx_install_teardown);
                tcase_set_timeout(tc, 300);
                tcase_add_test(tc, install_real_debian_rootfs);
                tcase_add_test(tc, install_real_cancelled_midway_leaves_nothing);
                tcase_add_test(tc, cli_sigint_mid_unpack_leaves_nothing_half_installed);
                suite_add_tcase(s, tc);
        } else {
                const char *must = getenv("SBX_TEST_MUST_RUN");

                if (must && strcmp(must, "1") == 0)
                        sbx_test_skip(REAL_PYTHON_TAR " is missing: run images/build.sh");
                fprintf(stderr, "note: " REAL_PYTHON_TAR " missing, real_rootfs not run\n");
        }
        return s;
}

int main(void)
{
        /* These suites test setup itself; the readiness check (doctor) is tested by test_verify
         * and test_ladder against the real host: setup_run_args.readiness stays NULL here. */
        return sbx_test_run(setup_suite());
}
