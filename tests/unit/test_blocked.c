/* test_blocked.c - the Blocked: catalogue of issue 6: for each way a host can refuse a run, the
 * text a run_code call gets (through the real run service, ladder and backend probe) names the
 * exact fix and says retry or restart, and `doctor` explains it with the same text.
 *
 * Real on this host: user namespaces disabled (user.max_user_namespaces=0, set in a user
 * namespace of the test's own, which the kernel honours for it and its children), rootfs not
 * set up, daemon not reachable, socket permission denied (the test user and the root-owned
 * Docker socket), invalid setting, server started as root.
 * Injected facts (this host cannot have them): Ubuntu's apparmor_restrict_unprivileged_userns
 * (a tmpfs over /proc/sys/kernel in a private mount namespace holding that sysctl file set to 1),
 * a kernel too old (the kernel's own UNAME26 personality, under which uname() reports 2.6.x),
 * and the Docker snap refusing no-new-privileges (a proxy in front of the real Docker Engine
 * answers the container start with the snap's AppArmor error). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <regex.h>
#include <sched.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "doctor/doctor.h"
#include "service/service.h"
#include "testutil.h"

#define ROOTFS "/var/tmp/vestibule-images/rootfs"
#define DOCKER_SOCK "/var/run/docker.sock"
#define TEST_USER "vestibule-test"

/* ---- settings as a user sets them --------------------------------------------------------- */

static char *scratch; /* this test's temp dir */

static void var(const char *name, const char *value)
{
        fake_env_set(name, value);
        /* the engine's endpoint lookup reads the process environment */
        if (strcmp(name, "DOCKER_HOST") == 0 || strcmp(name, "XDG_RUNTIME_DIR") == 0) {
                if (value)
                        setenv(name, value, 1);
                else
                        unsetenv(name);
        }
}

static char ws_dir[512], audit_dir[512], no_engine[512];

static void setup(void)
{
        fake_env_reset();
        scratch = sbx_test_tmpdir();
        /* tests that become the test user make their own folders in it */
        ck_assert_int_eq(chmod(scratch, 01777), 0);
        snprintf(ws_dir, sizeof(ws_dir), "%s/ws", scratch);
        snprintf(audit_dir, sizeof(audit_dir), "%s/audit", scratch);
        snprintf(no_engine, sizeof(no_engine), "unix://%s/no-engine.sock", scratch);
        var("VESTIBULE_ROOTFS_DIR", ROOTFS);
        var("VESTIBULE_WORKSPACE", ws_dir);
        var("VESTIBULE_AUDIT_DIR", audit_dir);
        var("VESTIBULE_CONFIG", "/nonexistent/vestibule-blocked-test.yaml");
        /* no engine unless a test names one: the container rung is Blocked at once */
        var("DOCKER_HOST", no_engine);
        unsetenv("CONTAINER_HOST");
        if (geteuid() == 0)
                var("VESTIBULE_RUN_AS", "2000:2000");
}

static struct sbx_config *load(void)
{
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};

        ck_assert_int_eq(config_load_from(fake_getenv, NULL, &c, &err), 0);
        return c;
}

/* ---- what a run and doctor say ------------------------------------------------------------ */

/* The Blocked: text a run_code call gets with the settings so far (*@ret, caller frees). */
static char *run_blocked(void)
{
        struct sbx_config *c = load();
        struct run_service *svc = NULL;
        struct sbx_error err = {0};
        struct run_result res = {0};
        struct run_call call = {
            .language = "python", .code = "print(6*7)", .code_len = 10, .cancel_fd = -1};
        int r;

        /* the workspace, made by whoever runs the server (a root server's belongs to RUN_AS) */
        if (mkdir(ws_dir, 0700) == 0 && geteuid() == 0 && c->run_as_set &&
            chown(ws_dir, c->run_as_uid, c->run_as_gid) < 0)
                ck_assert_int_eq(errno, EINVAL); /* in a user namespace without that id */
        ck_assert_int_eq(run_service_new(c, &svc, &err), 0);
        r = run_service_execute(svc, &call, &res, &err);
        ck_assert_msg(r < 0, "the run was not refused: isolation %s, output %s", res.isolation,
                      res.out.data ? res.out.data : "");
        run_result_done(&res);
        run_service_free(svc);
        config_free(c);
        return xstrdup(err.msg);
}

static struct doctor_report *doctor(void)
{
        struct sbx_config *c = load();
        struct doctor_report *r = xcalloc(1, sizeof(*r));

        doctor_collect(c, r);
        config_free(c);
        return r;
}

/* @text names every fix in the NULL-ended list and says retry or restart. */
static void assert_names_fix(const char *text, ...)
{
        regex_t re;
        va_list ap;

        ck_assert_msg(text && text[0], "no Blocked text");
        va_start(ap, text);
        for (const char *f = va_arg(ap, const char *); f; f = va_arg(ap, const char *))
                ck_assert_msg(strstr(text, f), "the Blocked text does not name '%s':\n%s", f, text);
        va_end(ap);
        ck_assert_int_eq(regcomp(&re, "\\b(retry|restart)\\b", REG_EXTENDED | REG_NOSUB), 0);
        ck_assert_msg(regexec(&re, text, 0, NULL, 0) == 0,
                      "the Blocked text says neither retry nor restart:\n%s", text);
        regfree(&re);
}

/* doctor agrees: nothing would run, and its text is the run's. */
static void assert_doctor_says(const char *run_text)
{
        _cleanup_free_ struct doctor_report *d = doctor();

        ck_assert_msg(!d->usable, "doctor says a run would execute (%s): %s", d->picked, d->grade);
        ck_assert_msg(strcmp(d->blocked, run_text) == 0, "doctor: %s\nrun:    %s", d->blocked,
                      run_text);
}

static const struct doctor_check *find_check(const struct doctor_backend *b, const char *name)
{
        for (size_t i = 0; i < b->n_checks; i++)
                if (strcmp(b->checks[i].name, name) == 0)
                        return &b->checks[i];
        ck_abort_msg("doctor has no '%s' check for %s", name, b->name);
        return NULL;
}

static bool can_clone_userns(void)
{
        pid_t p = (pid_t)syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL, NULL,
                                 NULL, 0);
        int st;

        if (p == 0)
                _exit(0);
        if (p < 0)
                return false;
        waitpid(p, &st, 0);
        return true;
}

/* ---- native ------------------------------------------------------------------------------- */

START_TEST(apparmor_restricts_userns_injected)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ struct doctor_report *d = NULL;
        const char *aa = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";
        struct stat st;
        FILE *f;
        _cleanup_free_ char *profile_fix = NULL;
        char exe[PATH_MAX];

        if (geteuid() != 0)
                sbx_test_skip("needs root: a private mount namespace over /proc/sys/kernel");
        /* control: this kernel has no such restriction (not Ubuntu), so native is usable */
        ck_assert_msg(stat(aa, &st) < 0, "this host really has %s: test it for real", aa);
        var("VESTIBULE_BACKEND", "native");
        d = doctor();
        ck_assert_msg(d->usable, "control: native is not usable here: %s", d->blocked);
        free(d);

        /* the injected fact: the sysctl file, set to 1 as on Ubuntu 23.10+ */
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        ck_assert_int_eq(mount("tmpfs", "/proc/sys/kernel", "tmpfs", 0, "mode=0755"), 0);
        f = fopen(aa, "w");
        ck_assert_ptr_nonnull(f);
        fputs("1\n", f);
        fclose(f);

        text = run_blocked();
        ck_assert(realpath("/proc/self/exe", exe));
        profile_fix = xasprintf("sudo '%s' setup --apparmor", exe);
        assert_names_fix(text, "kernel.apparmor_restrict_unprivileged_userns=1",
                         "/etc/apparmor.d/vestibule-mcp-npm", profile_fix,
                         "sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0",
                         "container backend", "restart the server", NULL);
        /* the profile (this binary only) comes before the machine-wide sysctl */
        ck_assert_msg(strstr(text, profile_fix) <
                          strstr(text, "sudo sysctl kernel.apparmor_restrict_unprivileged_userns"),
                      "%s", text);
        assert_doctor_says(text);
        d = doctor();
        const struct doctor_check *c = find_check(&d->native, "user namespaces");
        ck_assert_int_eq(c->status, DOCTOR_FAIL);
        ck_assert_msg(strstr(c->value, profile_fix), "%s", c->value);
        ck_assert_msg(
            strstr(c->value, "sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0"), "%s",
            c->value);
        c = find_check(&d->native, "apparmor profile");
        ck_assert_int_eq(c->status, DOCTOR_FAIL);
        ck_assert_msg(strstr(c->value, profile_fix), "%s", c->value);
}
END_TEST

START_TEST(userns_disabled_real)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ struct doctor_report *d = NULL;
        char map[64];
        uid_t uid = geteuid();
        gid_t gid = getegid();
        int fd;

        /* control: user namespaces work here */
        ck_assert(can_clone_userns());
        /* A user namespace of our own (root in it), whose user.max_user_namespaces we set to 0:
         * the kernel then refuses any user namespace below it, for real. */
        ck_assert_int_eq(unshare(CLONE_NEWUSER), 0);
        fd = open("/proc/self/setgroups", O_WRONLY);
        ck_assert(fd >= 0 && write(fd, "deny", 4) == 4);
        close(fd);
        snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
        fd = open("/proc/self/uid_map", O_WRONLY);
        ck_assert(fd >= 0 && write(fd, map, strlen(map)) == (ssize_t)strlen(map));
        close(fd);
        snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
        fd = open("/proc/self/gid_map", O_WRONLY);
        ck_assert(fd >= 0 && write(fd, map, strlen(map)) == (ssize_t)strlen(map));
        close(fd);
        fd = open("/proc/sys/user/max_user_namespaces", O_WRONLY);
        ck_assert_msg(fd >= 0, "cannot open max_user_namespaces: %m");
        ck_assert_int_eq(write(fd, "0", 1), 1);
        close(fd);
        ck_assert_msg(!can_clone_userns(), "user namespaces still work with the sysctl at 0");

        /* uid 0 in this namespace: the server must name an unprivileged user to run code as */
        var("VESTIBULE_RUN_AS", "2000:2000");
        var("VESTIBULE_BACKEND", "native");
        text = run_blocked();
        assert_names_fix(text, "user namespaces are disabled",
                         "sudo sysctl user.max_user_namespaces=15000", "restart the server", NULL);
        assert_doctor_says(text);
        d = doctor();
        ck_assert_int_eq(find_check(&d->native, "user namespaces")->status, DOCTOR_FAIL);
}
END_TEST

START_TEST(kernel_too_old_injected)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ struct doctor_report *d = NULL;
        struct utsname u;

        if (geteuid() == 0)
                sbx_test_become_user();
        /* the injected fact: the kernel's UNAME26 personality makes uname() say 2.6.x */
        ck_assert(uname(&u) == 0 && strncmp(u.release, "2.6.", 4) != 0);
        ck_assert_int_ne(personality(PER_LINUX | UNAME26), -1);
        ck_assert(uname(&u) == 0);
        ck_assert_msg(strncmp(u.release, "2.6.", 4) == 0, "uname says %s", u.release);

        var("VESTIBULE_RUN_AS", NULL);
        var("VESTIBULE_BACKEND", "native");
        text = run_blocked();
        assert_names_fix(text, "needs Linux 5.9 or later", "upgrade the kernel and reboot",
                         "VESTIBULE_BACKEND=container, then restart the server", NULL);
        assert_doctor_says(text);
        d = doctor();
        ck_assert_int_eq(find_check(&d->native, "kernel")->status, DOCTOR_FAIL);
        ck_assert_ptr_nonnull(strstr(find_check(&d->native, "kernel")->value, "2.6."));
}
END_TEST

START_TEST(rootfs_not_set_up_real)
{
        _cleanup_free_ char *text = NULL, *empty = xasprintf("%s/rootfs", scratch);
        static char rootfs[512];
        _cleanup_free_ struct doctor_report *d = NULL;

        ck_assert_int_eq(mkdir(empty, 0755), 0);
        snprintf(rootfs, sizeof(rootfs), "%s", empty);
        var("VESTIBULE_ROOTFS_DIR", rootfs);
        var("VESTIBULE_BACKEND", "native");
        text = run_blocked();
        assert_names_fix(text, "rootfs not set up", "run `vestibule-mcp setup`",
                         "VESTIBULE_ROOTFS_DIR", "then retry", NULL);
        assert_doctor_says(text);
        d = doctor();
        ck_assert_int_eq(find_check(&d->native, "rootfs python")->status, DOCTOR_FAIL);

        /* auto with no engine either: Blocked with both reasons, each with its fix */
        free(text);
        var("VESTIBULE_BACKEND", "auto");
        text = run_blocked();
        assert_names_fix(text, "native: rootfs not set up", "run `vestibule-mcp setup`",
                         "container: cannot reach Docker Engine", "start it", NULL);
        assert_doctor_says(text);
}
END_TEST

/* ---- container ---------------------------------------------------------------------------- */

START_TEST(daemon_not_reachable_real)
{
        _cleanup_free_ char *text = NULL;

        var("VESTIBULE_BACKEND", "container");
        var("VESTIBULE_RUNTIME", "docker");
        text = run_blocked();
        assert_names_fix(text, "cannot reach Docker Engine",
                         "start it (sudo systemctl start docker, or start Docker Desktop), then "
                         "retry",
                         "DOCKER_HOST", NULL);
        assert_doctor_says(text);
}
END_TEST

START_TEST(socket_permission_denied_real)
{
        _cleanup_free_ char *text = NULL;
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        struct stat st;
        int fd;

        if (geteuid() != 0)
                sbx_test_skip("needs root: the test user and the root-owned Docker socket");
        if (stat(DOCKER_SOCK, &st) < 0 || !S_ISSOCK(st.st_mode))
                sbx_test_skip("no Docker Engine socket at " DOCKER_SOCK);
        /* control: root can open the socket */
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", DOCKER_SOCK);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        close(fd);

        sbx_test_become_user();
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), -1);
        ck_assert_int_eq(errno, EACCES);
        close(fd);
        var("VESTIBULE_RUN_AS", NULL);
        var("VESTIBULE_BACKEND", "container");
        var("VESTIBULE_RUNTIME", "docker");
        var("DOCKER_HOST", "unix://" DOCKER_SOCK);
        text = run_blocked();
        assert_names_fix(text, "permission denied", "docker group", "sudo usermod -aG docker",
                         "restart your agent", "can become root", NULL);
        assert_doctor_says(text);
}
END_TEST

/* A proxy in front of the real Docker Engine that answers a container start the way the Docker
 * snap does when its AppArmor confinement refuses no-new-privileges; everything else passes. */
static const char snap_error[] =
    "{\"message\":\"failed to create task for container: failed to create shim task: OCI runtime "
    "create failed: runc create failed: unable to start container process: error during "
    "container init: apparmor failed to apply profile: write /proc/self/attr/apparmor/exec: "
    "operation not permitted (snap.docker.dockerd)\"}";

static void pump(int from, int to)
{
        char b[16384];
        ssize_t k;

        while ((k = read(from, b, sizeof(b))) > 0)
                if (write(to, b, (size_t)k) != k)
                        break;
        shutdown(to, SHUT_WR);
}

static void snap_proxy_serve(int c)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        char head[16384];
        size_t n = 0;
        ssize_t k;
        int t;

        /* the request line and headers (a start request has no body) */
        while (n < sizeof(head) - 1 && (k = read(c, head + n, sizeof(head) - 1 - n)) > 0) {
                n += (size_t)k;
                head[n] = '\0';
                if (strstr(head, "\r\n\r\n"))
                        break;
        }
        head[n] = '\0';
        if (strncmp(head, "POST ", 5) == 0 && strstr(head, "/start ") &&
            strstr(head, "/containers/")) {
                char resp[1024];
                int len = snprintf(resp, sizeof(resp),
                                   "HTTP/1.1 500 Internal Server Error\r\nContent-Type: "
                                   "application/json\r\nContent-Length: %zu\r\nConnection: "
                                   "close\r\n\r\n%s",
                                   strlen(snap_error), snap_error);
                if (write(c, resp, (size_t)len) != len)
                        _exit(1);
                _exit(0);
        }
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", DOCKER_SOCK);
        t = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(t, (struct sockaddr *)&a, sizeof(a)) < 0 || write(t, head, n) != (ssize_t)n)
                _exit(1);
        if (fork() == 0) {
                pump(c, t);
                _exit(0);
        }
        pump(t, c);
        _exit(0);
}

START_TEST(docker_snap_refuses_nnp_injected)
{
        _cleanup_free_ char *text = NULL, *sock = xasprintf("%s/snap-docker.sock", scratch);
        static char host[512];
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        pid_t proxy;
        int lfd;

        if (geteuid() != 0)
                sbx_test_skip("needs root: rootful Docker with VESTIBULE_RUN_AS");
        if (access(DOCKER_SOCK, F_OK) < 0)
                sbx_test_skip("no Docker Engine socket at " DOCKER_SOCK);
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(lfd, 16), 0);
        proxy = fork();
        ck_assert_int_ge(proxy, 0);
        if (proxy == 0) {
                signal(SIGCHLD, SIG_IGN);
                for (;;) {
                        int c = accept(lfd, NULL, NULL);
                        if (c < 0)
                                continue;
                        if (fork() == 0)
                                snap_proxy_serve(c);
                        close(c);
                }
        }
        close(lfd);
        snprintf(host, sizeof(host), "unix://%s", sock);

        var("VESTIBULE_BACKEND", "container");
        var("VESTIBULE_RUNTIME", "docker");
        var("VESTIBULE_IMAGE_SOURCE", "debian");
        var("DOCKER_HOST", host);
        /* control: the engine behind the proxy is usable, so the refusal comes at start */
        _cleanup_free_ struct doctor_report *d = doctor();
        ck_assert_msg(d->container.probe.usable, "control: %s", d->container.probe.blocked);

        text = run_blocked();
        kill(proxy, SIGKILL);
        waitpid(proxy, NULL, 0);
        assert_names_fix(text, "refused no-new-privileges", "the Docker snap",
                         "apt install docker.io", "sudo snap remove docker", "restart the server",
                         NULL);
}
END_TEST

/* ---- settings and the user ---------------------------------------------------------------- */

START_TEST(invalid_setting_real)
{
        _cleanup_free_ char *text = NULL;

        var("VESTIBULE_MEM_MB", "lots");
        text = run_blocked();
        assert_names_fix(text, "VESTIBULE_MEM_MB", "restart the server", NULL);
        assert_doctor_says(text);
}
END_TEST

START_TEST(server_started_as_root_real)
{
        _cleanup_free_ char *text = NULL;

        if (geteuid() != 0)
                sbx_test_skip("needs root");
        var("VESTIBULE_RUN_AS", NULL);
        text = run_blocked();
        ck_assert_str_eq(text, RUN_SERVICE_ROOT_BLOCKED);
        assert_names_fix(text, "the server runs as root", "start vestibule-mcp as your own user",
                         "VESTIBULE_RUN_AS=uid:gid", "restart", NULL);
        assert_doctor_says(text);
        /* control: with an unprivileged VESTIBULE_RUN_AS the same server is not refused for it */
        var("VESTIBULE_RUN_AS", "2000:2000");
        _cleanup_free_ struct doctor_report *d = doctor();
        ck_assert_msg(d->usable, "%s", d->blocked);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("blocked");
        TCase *tc;
        struct stat st;

        if (stat(ROOTFS "/python", &st) < 0)
                sbx_test_skip("no rootfs trees at " ROOTFS);
        if (geteuid() == 0 && !getpwnam(TEST_USER))
                sbx_test_skip("running as root and there is no user " TEST_USER);

        /* Root only (test_user-only runs leave them out, as the other suites do): a mount
         * namespace over /proc/sys, becoming the test user, rootful Docker with RUN_AS. */
        bool root = geteuid() == 0;

        tc = tcase_create("native");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_set_timeout(tc, 60);
        if (root)
                tcase_add_test(tc, apparmor_restricts_userns_injected);
        tcase_add_test(tc, userns_disabled_real);
        tcase_add_test(tc, kernel_too_old_injected);
        tcase_add_test(tc, rootfs_not_set_up_real);
        suite_add_tcase(s, tc);

        tc = tcase_create("container");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, daemon_not_reachable_real);
        if (root) {
                tcase_add_test(tc, socket_permission_denied_real);
                tcase_add_test(tc, docker_snap_refuses_nnp_injected);
        }
        suite_add_tcase(s, tc);

        tc = tcase_create("settings");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, invalid_setting_real);
        if (root)
                tcase_add_test(tc, server_started_as_root_real);
        suite_add_tcase(s, tc);
        if (!root)
                fprintf(stderr, "not root: the apparmor, socket permission, snap and root cases "
                                "are left out\n");
        return sbx_test_run(s);
}
