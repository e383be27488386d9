/* test_rundir.c - the user's runtime folder and bus socket found without XDG_RUNTIME_DIR or
 * DBUS_SESSION_BUS_ADDRESS (common/rundir.h): real folders, sockets and symlinks made in a
 * temporary base folder standing in for /run/user, each refusal next to the accepted control. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/rundir.h"
#include "common/xalloc.h"
#include "testutil.h"

#define NOBODY 65534

static char *base;
static uid_t me;
static char dir[4096], sock[4200];

/* A listening unix socket at @path (what dbus-daemon or dbus-broker leave there). */
static void make_socket(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
        memcpy(sa.sun_path, path, strlen(path) + 1);
        ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind '%s': %m", path);
        ck_assert_int_eq(listen(fd, 1), 0);
        /* the fd stays open for the test's (forked) life */
}

/* base/UID as logind makes it (0700, ours) with a bus socket in it. */
static void setup(void)
{
        base = sbx_test_tmpdir();
        ck_assert_int_eq(chmod(base, 0755), 0);
        me = geteuid();
        snprintf(dir, sizeof(dir), "%s/%u", base, (unsigned)me);
        snprintf(sock, sizeof(sock), "%s/bus", dir);
        ck_assert_int_eq(mkdir(dir, 0700), 0);
        ck_assert_int_eq(chmod(dir, 0700), 0); /* whatever the umask */
        make_socket(sock);
}

static void teardown(void)
{
        char cmd[4200];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
        if (system(cmd) != 0)
                fprintf(stderr, "cannot remove '%s'\n", base);
        free(base);
}

/* The resolve cases need only who we are. */
static void setup_me(void)
{
        me = geteuid();
}

static int find(char *ret, size_t size, struct sbx_error *err)
{
        return sbx_user_bus_address(base, me, ret, size, err);
}

START_TEST(logind_layout_is_found)
{
        struct sbx_error err = {0};
        char addr[4300], want[4300], rd[4096];

        ck_assert_msg(find(addr, sizeof(addr), &err) == 0, "%s", err.msg);
        snprintf(want, sizeof(want), "unix:path=%s", sock);
        ck_assert_str_eq(addr, want);
        ck_assert_msg(sbx_user_runtime_dir(base, me, rd, sizeof(rd), &err) == 0, "%s", err.msg);
        ck_assert_str_eq(rd, dir);
}
END_TEST

START_TEST(missing_folder_or_socket_refused)
{
        struct sbx_error err = {0};
        char addr[4300];

        ck_assert_int_eq(unlink(sock), 0);
        ck_assert_int_eq(find(addr, sizeof(addr), &err), -ENOENT);
        ck_assert_msg(strstr(err.msg, "no bus socket") && strstr(err.msg, sock), "%s", err.msg);
        ck_assert_int_eq(rmdir(dir), 0);
        ck_assert_int_eq(find(addr, sizeof(addr), &err), -ENOENT);
        ck_assert_msg(strstr(err.msg, "no runtime folder") && strstr(err.msg, dir), "%s", err.msg);
}
END_TEST

START_TEST(folder_of_another_uid_refused)
{
        struct sbx_error err = {0};
        char addr[4300];

        /* our folder, checked for another uid: it is not theirs */
        ck_assert_int_eq(sbx_runtime_dir_check(dir, me + 1, &err), -EPERM);
        ck_assert_msg(strstr(err.msg, "belongs to uid"), "%s", err.msg);
        ck_assert_msg(sbx_runtime_dir_check(dir, me, &err) == 0, "control: %s", err.msg);
        ck_assert_msg(find(addr, sizeof(addr), &err) == 0, "control: %s", err.msg);

        /* as root: a folder really owned by someone else at our own path */
        if (me != 0)
                return;
        ck_assert_int_eq(chown(dir, NOBODY, NOBODY), 0);
        ck_assert_int_eq(find(addr, sizeof(addr), &err), -EPERM);
        ck_assert_msg(strstr(err.msg, "belongs to uid 65534, not 0"), "%s", err.msg);
}
END_TEST

START_TEST(socket_of_another_uid_refused)
{
        struct sbx_error err = {0};
        char addr[4300];

        ck_assert_int_eq(sbx_bus_socket_check(sock, me + 1, &err), -EPERM);
        ck_assert_msg(strstr(err.msg, "belongs to uid"), "%s", err.msg);
        ck_assert_msg(sbx_bus_socket_check(sock, me, &err) == 0, "control: %s", err.msg);
        if (me != 0)
                return;
        ck_assert_int_eq(lchown(sock, NOBODY, NOBODY), 0);
        ck_assert_int_eq(find(addr, sizeof(addr), &err), -EPERM);
        ck_assert_msg(strstr(err.msg, "bus socket") && strstr(err.msg, "65534"), "%s", err.msg);
}
END_TEST

START_TEST(symlinks_refused)
{
        struct sbx_error err = {0};
        char addr[4300], real[4200], real_sock[4300];

        /* the folder: base/UID -> a good folder elsewhere */
        snprintf(real, sizeof(real), "%s/real", base);
        ck_assert_int_eq(rename(dir, real), 0);
        ck_assert_int_eq(symlink(real, dir), 0);
        ck_assert_int_eq(find(addr, sizeof(addr), &err), -ELOOP);
        ck_assert_msg(strstr(err.msg, "symbolic link"), "%s", err.msg);
        ck_assert_int_eq(unlink(dir), 0);
        ck_assert_int_eq(rename(real, dir), 0);
        ck_assert_msg(find(addr, sizeof(addr), &err) == 0, "control: %s", err.msg);

        /* the socket: bus -> a real socket beside it */
        snprintf(real_sock, sizeof(real_sock), "%s/real-bus", dir);
        ck_assert_int_eq(rename(sock, real_sock), 0);
        ck_assert_int_eq(symlink(real_sock, sock), 0);
        ck_assert_int_eq(find(addr, sizeof(addr), &err), -ELOOP);
        ck_assert_msg(strstr(err.msg, "bus socket") && strstr(err.msg, "symbolic link"), "%s",
                      err.msg);
}
END_TEST

START_TEST(wrong_mode_refused)
{
        static const mode_t bad[] = {0755, 0750, 0701, 0711, 0770, 0777, 01700};
        struct sbx_error err = {0};
        char addr[4300];

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_int_eq(chmod(dir, bad[i]), 0);
                ck_assert_int_eq(find(addr, sizeof(addr), &err), -EACCES);
                ck_assert_msg(strstr(err.msg, "not 0700"), "%04o: %s", bad[i], err.msg);
        }
        ck_assert_int_eq(chmod(dir, 0700), 0);
        ck_assert_msg(find(addr, sizeof(addr), &err) == 0, "control: %s", err.msg);
}
END_TEST

START_TEST(wrong_types_refused)
{
        struct sbx_error err = {0};
        char addr[4300];
        int fd;

        /* bus is a regular file */
        ck_assert_int_eq(unlink(sock), 0);
        fd = open(sock, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(find(addr, sizeof(addr), &err), -ENOTSOCK);
        /* the runtime folder is a file */
        ck_assert_int_eq(unlink(sock), 0);
        ck_assert_int_eq(rmdir(dir), 0);
        fd = open(dir, O_CREAT | O_WRONLY | O_CLOEXEC, 0700);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(find(addr, sizeof(addr), &err), -ENOTDIR);
}
END_TEST

START_TEST(base_others_may_write_refused)
{
        struct sbx_error err = {0};
        char addr[4300];

        /* whoever may rename entries in the base could swap the folder after the check */
        ck_assert_int_eq(chmod(base, 01777), 0);
        ck_assert_int_eq(find(addr, sizeof(addr), &err), -EPERM);
        ck_assert_msg(strstr(err.msg, "only root"), "%s", err.msg);
        ck_assert_int_eq(chmod(base, 0775), 0);
        ck_assert_int_eq(find(addr, sizeof(addr), &err), -EPERM);
        ck_assert_int_eq(chmod(base, 0755), 0);
        ck_assert_msg(find(addr, sizeof(addr), &err) == 0, "control: %s", err.msg);
}
END_TEST

START_TEST(environment_wins_as_sd_bus_does)
{
        struct sbx_error err = {0};
        char addr[4300];

        /* DBUS_SESSION_BUS_ADDRESS as given, even beside a runtime folder */
        ck_assert_int_eq(
            sbx_user_bus_resolve("unix:path=/x/bus,guid=1", "/y", me, addr, sizeof(addr), &err), 0);
        ck_assert_str_eq(addr, "unix:path=/x/bus,guid=1");
        /* XDG_RUNTIME_DIR + /bus, escaped as a D-Bus address */
        ck_assert_int_eq(sbx_user_bus_resolve(NULL, "/run/a b,c", me, addr, sizeof(addr), &err), 0);
        ck_assert_str_eq(addr, "unix:path=/run/a%20b%2cc/bus");
        ck_assert_int_eq(sbx_user_bus_resolve("", "/r", me, addr, sizeof(addr), &err), 0);
        ck_assert_str_eq(addr, "unix:path=/r/bus");
}
END_TEST

START_TEST(neither_variable_looks_in_run_user)
{
        struct sbx_error err = {0};
        char addr[4300], want[64];
        int r = sbx_user_bus_resolve(NULL, "", me, addr, sizeof(addr), &err);

        /* whatever this host has: either its /run/user/UID/bus, or a reason naming that path;
         * in the test VM (a lingering user with its manager running) it must be found */
        snprintf(want, sizeof(want), "/run/user/%u", (unsigned)me);
        const char *vm = getenv("VESTIBULE_VM");
        if (vm && strcmp(vm, "1") == 0)
                ck_assert_msg(r == 0, "not found in the VM: %s", err.msg);
        if (r == 0)
                ck_assert_msg(strstr(addr, want) && strstr(addr, "/bus"), "%s", addr);
        else
                ck_assert_msg(strstr(err.msg, "/run/user"), "%s", err.msg);
}
END_TEST

START_TEST(long_paths_refused)
{
        struct sbx_error err = {0};
        char addr[32];

        ck_assert_int_eq(sbx_user_bus_resolve(NULL, "/a-rather-long-runtime-folder", me, addr,
                                              sizeof(addr), &err),
                         -ENAMETOOLONG);
        ck_assert_int_eq(sbx_user_bus_resolve(NULL, "/r", me, addr, sizeof(addr), &err), 0);
        ck_assert_str_eq(addr, "unix:path=/r/bus");
}
END_TEST

static Suite *rundir_suite(void)
{
        Suite *s = suite_create("rundir");
        TCase *tc = tcase_create("checks");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, logind_layout_is_found);
        tcase_add_test(tc, missing_folder_or_socket_refused);
        tcase_add_test(tc, folder_of_another_uid_refused);
        tcase_add_test(tc, socket_of_another_uid_refused);
        tcase_add_test(tc, symlinks_refused);
        tcase_add_test(tc, wrong_mode_refused);
        tcase_add_test(tc, wrong_types_refused);
        tcase_add_test(tc, base_others_may_write_refused);
        suite_add_tcase(s, tc);
        tc = tcase_create("resolve");
        tcase_add_checked_fixture(tc, setup_me, NULL);
        tcase_add_test(tc, environment_wins_as_sd_bus_does);
        tcase_add_test(tc, neither_variable_looks_in_run_user);
        tcase_add_test(tc, long_paths_refused);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(rundir_suite());
}
