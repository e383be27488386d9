/* test_engine_egress.c - engine_egress_listen() (src/engine/egress_listen.c) on the real kernel:
 * the listener it returns lives in the target process's network namespace (a process there
 * connects; the same port on the host's loopback refuses), both as root (a namespace of the
 * initial user namespace, as rootful Docker makes) and as the unprivileged test user (a
 * namespace inside a user namespace of its own, as rootless Podman makes); with a control
 * where no listener is made and the process inside cannot connect. And the refusals: the
 * server's own namespace, a process that has ended, an unprivileged caller on a root-owned
 * namespace (the message names the fix). */
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "engine/engine.h"
#include "testutil.h"

/* A process in a network namespace of its own (with a user namespace of its own when not
 * root), lo up, that connects to 127.0.0.1:@port when told to and reports the result. */
struct inside {
        pid_t pid;
        int go_w;     /* write a byte: connect now */
        int result_r; /* reads 'Y' (connected) or the connect errno as a byte */
};

static uint16_t test_port(void)
{
        return (uint16_t)(41000 + getpid() % 20000);
}

static void lo_up(void)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {0};
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                _exit(10);
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                _exit(11);
        close(s);
}

static void inside_start(struct inside *in, uint16_t port)
{
        int ready[2], go[2], result[2];
        ck_assert_int_eq(pipe(ready), 0);
        ck_assert_int_eq(pipe(go), 0);
        ck_assert_int_eq(pipe(result), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int flags = CLONE_NEWNET | (geteuid() != 0 ? CLONE_NEWUSER : 0);
                char c;
                /* sbx_test_become_user() left us non-dumpable (a uid change does): a process
                 * an engine starts is dumpable, which lets its owner open its namespaces */
                if (prctl(PR_SET_DUMPABLE, 1) < 0)
                        _exit(9);
                if (unshare(flags) < 0)
                        _exit(12);
                lo_up();
                if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
                        _exit(13);
                int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct sockaddr_in sa = {.sin_family = AF_INET,
                                         .sin_port = htons(port),
                                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                /* 'Y', or the errno as a byte (the ones expected here are below 128) */
                unsigned char u = connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0
                                      ? (unsigned char)'Y'
                                      : (unsigned char)(errno & 0x7f);
                c = (char)u;
                if (write(result[1], &c, 1) != 1)
                        _exit(14);
                _exit(0);
        }
        close(ready[1]);
        close(go[0]);
        close(result[1]);
        char c = 0;
        ck_assert_msg(read(ready[0], &c, 1) == 1, "the process inside did not start (unshare)");
        close(ready[0]);
        *in = (struct inside){.pid = pid, .go_w = go[1], .result_r = result[0]};
}

static char inside_connect(struct inside *in)
{
        char c = 0;
        ck_assert_int_eq(write(in->go_w, "g", 1), 1);
        ck_assert_int_eq(read(in->result_r, &c, 1), 1);
        int st;
        ck_assert_int_eq(waitpid(in->pid, &st, 0), in->pid);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        close(in->go_w);
        close(in->result_r);
        return c;
}

static int host_connect(uint16_t port)
{
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int r = connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : errno;
        close(s);
        return r;
}

/* The listener is inside: the process there connects, the host's loopback refuses. */
static void listener_is_inside(void)
{
        struct inside in;
        struct sbx_error err = {0};
        uint16_t port = test_port();
        int fd = -1;

        inside_start(&in, port);
        int pidfd = (int)syscall(SYS_pidfd_open, in.pid, 0);
        ck_assert_int_ge(pidfd, 0);
        int r = engine_egress_listen(pidfd, in.pid, port, &fd, &err);
        ck_assert_msg(r == 0, "engine_egress_listen: %s", err.msg);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(host_connect(port), ECONNREFUSED);
        ck_assert_int_eq(inside_connect(&in), 'Y');
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ck_assert_int_eq(poll(&p, 1, 5000), 1);
        int c = accept(fd, NULL, NULL);
        ck_assert_int_ge(c, 0);
        close(c);
        close(fd);
        close(pidfd);
}

START_TEST(listener_inside_as_root)
{
        listener_is_inside();
}
END_TEST

START_TEST(listener_inside_a_user_namespace_of_ours)
{
        sbx_test_become_user();
        listener_is_inside();
}
END_TEST

/* The control: with no listener made, the process inside cannot connect. */
START_TEST(control_no_listener_no_route)
{
        struct inside in;
        inside_start(&in, test_port());
        ck_assert_int_eq(inside_connect(&in), ECONNREFUSED);
}
END_TEST

START_TEST(own_namespace_refused)
{
        struct sbx_error err = {0};
        int fd = -1;
        int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
        ck_assert_int_ge(pidfd, 0);
        ck_assert_int_eq(engine_egress_listen(pidfd, getpid(), test_port(), &fd, &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "shares the server's network namespace"));
        ck_assert_int_eq(fd, -1);
        ck_assert_int_eq(host_connect(test_port()), ECONNREFUSED);
}
END_TEST

START_TEST(ended_process_refused)
{
        struct sbx_error err = {0};
        int fd = -1;
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (unshare(CLONE_NEWNET | (geteuid() ? CLONE_NEWUSER : 0)) < 0)
                        _exit(1);
                _exit(0);
        }
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        ck_assert_int_ge(pidfd, 0);
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        ck_assert_int_eq(poll(&p, 1, 5000), 1); /* it has ended (a zombie until reaped) */
        int r = engine_egress_listen(pidfd, pid, test_port(), &fd, &err);
        ck_assert_msg(r < 0, "a listener was made for an ended process");
        ck_assert_int_eq(fd, -1);
        waitpid(pid, NULL, 0);
}
END_TEST

/* A server that is not root may not enter a namespace of the initial user namespace (rootful
 * Docker's): refused, naming the fix. */
START_TEST(unprivileged_on_root_namespace_refused)
{
        struct inside in;
        struct sbx_error err = {0};
        int fd = -1;

        inside_start(&in, test_port());
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                sbx_test_become_user();
                int pidfd = (int)syscall(SYS_pidfd_open, in.pid, 0);
                int r = engine_egress_listen(pidfd, in.pid, test_port(), &fd, &err);
                _exit(r == -EACCES && fd == -1 && strstr(err.msg, "as root") ? 0 : 1);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "an unprivileged caller was not refused with EACCES naming root");
        ck_assert_int_eq(inside_connect(&in), ECONNREFUSED);
}
END_TEST

START_TEST(wait_script_names_the_port)
{
        char buf[192];
        const char *s = engine_egress_wait_script(3128, buf, sizeof(buf));
        ck_assert_ptr_nonnull(strstr(s, " 0100007F:0C38 00000000:0000 0A "));
        ck_assert_ptr_nonnull(strstr(s, "exec \"$@\""));
}
END_TEST

/* The create body with the egress environment: ours first, a PATH= among the extras replaces
 * ours (never two PATHs), the extras follow in order. */
START_TEST(create_body_extra_env)
{
        static const char *const cmd[] = {"true", NULL};
        static const char *const extra[] = {"HTTP_PROXY=http://127.0.0.1:3128",
                                            "PATH=/workspace/.local/bin:/usr/bin:/bin", NULL};
        struct engine_run_spec spec = {.image = "i",
                                       .cmd = cmd,
                                       .uid = 1,
                                       .gid = 1,
                                       .workspace = "/w",
                                       .code_dir = "/c",
                                       .tmpfs_mb = 8,
                                       .owner = "o",
                                       .extra_env = extra};
        json_object *b = engine_create_body(&spec), *env = NULL;
        ck_assert(json_object_object_get_ex(b, "Env", &env));
        size_t n = json_object_array_length(env), paths = 0;
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(env, 0)), "HOME=/tmp");
        for (size_t i = 0; i < n; i++)
                paths += strncmp(json_object_get_string(json_object_array_get_idx(env, i)),
                                 "PATH=", 5) == 0;
        ck_assert_uint_eq(paths, 1);
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(env, n - 2)),
                         "HTTP_PROXY=http://127.0.0.1:3128");
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(env, n - 1)),
                         "PATH=/workspace/.local/bin:/usr/bin:/bin");
        json_object_put(b);
        /* the control: without extras, our own PATH */
        spec.extra_env = NULL;
        b = engine_create_body(&spec);
        ck_assert(json_object_object_get_ex(b, "Env", &env));
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(env, 0)),
                         "PATH=/usr/local/bin:/usr/bin:/bin");
        json_object_put(b);
}
END_TEST

static Suite *egress_suite(void)
{
        Suite *s = suite_create("engine_egress");
        TCase *tc = tcase_create("listen");

        tcase_set_timeout(tc, 30);
        if (geteuid() == 0) /* the root-owned namespace cases */
                tcase_add_test(tc, listener_inside_as_root);
        tcase_add_test(tc, listener_inside_a_user_namespace_of_ours);
        tcase_add_test(tc, control_no_listener_no_route);
        tcase_add_test(tc, own_namespace_refused);
        tcase_add_test(tc, ended_process_refused);
        if (geteuid() == 0)
                tcase_add_test(tc, unprivileged_on_root_namespace_refused);
        tcase_add_test(tc, wait_script_names_the_port);
        tcase_add_test(tc, create_body_extra_env);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(egress_suite());
}
