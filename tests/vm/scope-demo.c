/* scope-demo: the cgroup path of the native backend, shown end to end on a real systemd host.
 *
 * Built on the host against libsystemd (scripts/vm/selftest.sh does it) and run inside the test
 * VM as the unprivileged user. It asks the *user* manager over sd-bus (StartTransientUnit) for
 * a transient scope holding four of its children, with MemoryMax=64M, MemorySwapMax=0,
 * TasksMax=16, CPUQuota=50% and Delegate=yes, then checks from outside, in the scope's cgroup
 * files, that each limit is there and bites:
 *   - cpu.max is "50000 100000" and a child that burns 300 ms of CPU is throttled (cpu.stat),
 *   - pids.max is 16 and a child forking 30 times is refused (pids.events "max" > 0),
 *   - memory.max is 64 MiB, memory.swap.max 0, and a child touching 200 MiB is OOM-killed
 *     (SIGKILL, memory.events "oom_kill" > 0, memory.peak near the limit),
 *   - cgroup.controllers of the delegated scope lists cpu, memory and pids.
 * A fourth child (the holder) keeps the scope alive so the files can be read after the others
 * die, as the warden must read usage after the sandbox exits.
 * Prints one "ok"/"FAIL" line per check; exit 0 only when every check passed.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#define MEMORY_MAX_BYTES (64ULL << 20)
#define HOG_BYTES (200ULL << 20)
#define TASKS_MAX 16
#define FORKS_TRIED 30
#define CPU_QUOTA_USEC_PER_SEC 500000ULL /* 50 % */

enum role { ROLE_HOLDER, ROLE_SPINNER, ROLE_FORKER, ROLE_HOG, ROLE_COUNT };

static int failures;

static void check(bool ok, const char *what, const char *detail)
{
        printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail ? ": " : "", detail ? detail : "");
        if (!ok)
                failures++;
}

/* Child bodies. Each waits for one byte on its pipe: it must be in the scope before it acts. */
static long now_ms(clockid_t clock)
{
        struct timespec ts;
        clock_gettime(clock, &ts);
        return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Burn cpu_ms of CPU time, giving up after wall_ms (a starved emulated guest is slow). */
static int spin_cpu_ms(long cpu_ms, long wall_ms)
{
        long until = now_ms(CLOCK_MONOTONIC) + wall_ms;
        while (now_ms(CLOCK_PROCESS_CPUTIME_ID) < cpu_ms)
                if (now_ms(CLOCK_MONOTONIC) > until)
                        return 1;
        return 0;
}

static int fork_many(void)
{
        int refused = 0;
        for (int i = 0; i < FORKS_TRIED; i++) {
                pid_t p = fork();
                if (p == 0) {
                        pause();
                        _exit(0);
                }
                if (p < 0 && errno == EAGAIN)
                        refused++;
        }
        return refused > 0 ? 0 : 1;
}

static int hog_memory(void)
{
        volatile char *p = malloc(HOG_BYTES);
        if (!p)
                return 2;
        for (size_t i = 0; i < HOG_BYTES; i += 4096)
                p[i] = 1;
        return 3; /* survived: the limit did not bite */
}

static pid_t spawn(enum role role, int *ret_go_fd)
{
        int fds[2];
        if (pipe(fds) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                char c;
                close(fds[1]);
                setpgid(0, 0); /* own group: the forker's offspring die with one kill */
                if (read(fds[0], &c, 1) != 1)
                        _exit(4);
                switch (role) {
                case ROLE_HOLDER:
                        pause();
                        _exit(0);
                case ROLE_SPINNER:
                        _exit(spin_cpu_ms(300, 60000));
                case ROLE_FORKER:
                        _exit(fork_many());
                case ROLE_HOG:
                        _exit(hog_memory());
                default:
                        _exit(5);
                }
        }
        close(fds[0]);
        *ret_go_fd = fds[1];
        return pid;
}

static int release(int go_fd)
{
        return write(go_fd, "g", 1) == 1 ? 0 : -errno;
}

static int read_cgroup_file(const char *cgdir, const char *name, char *buf, size_t size)
{
        char path[512];
        snprintf(path, sizeof path, "%s/%s", cgdir, name);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        size_t n = fread(buf, 1, size - 1, f);
        fclose(f);
        buf[n] = '\0';
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = '\0';
        return 0;
}

/* "key value" lines (cpu.stat, memory.events, pids.events): the value of key, or -1. */
static long long keyed_value(const char *text, const char *key)
{
        size_t klen = strlen(key);
        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, key, klen) == 0 && l[klen] == ' ')
                        return atoll(l + klen + 1);
        return -1;
}

static int cgroup_of(pid_t pid, char *buf, size_t size)
{
        char path[64], line[256];
        snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        int r = -ENOENT;
        while (fgets(line, sizeof line, f))
                if (strncmp(line, "0::", 3) == 0) {
                        line[strcspn(line, "\n")] = '\0';
                        r = snprintf(buf, size, "/sys/fs/cgroup%s", line + 3) < (int)size
                                ? 0
                                : -ENAMETOOLONG;
                }
        fclose(f);
        return r;
}

/* StartTransientUnit on the user manager, then wait for its job to finish. */
static int start_scope(sd_bus *bus, const char *unit, const pid_t *pids, size_t n_pids)
{
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL, *reply = NULL;
        const char *job = NULL;
        int r;

        r = sd_bus_match_signal(bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                "org.freedesktop.systemd1.Manager", "JobRemoved", NULL, NULL);
        if (r < 0)
                goto out;
        r = sd_bus_message_new_method_call(
            bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager", "StartTransientUnit");
        if (r < 0)
                goto out;
        r = sd_bus_message_append(m, "ss", unit, "fail");
        if (r < 0)
                goto out;
        r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r < 0)
                goto out;
        r = sd_bus_message_append(m, "(sv)(sv)(sv)(sv)(sv)(sv)", "Description", "s",
                                  "vestibule VM scope demo", "MemoryMax", "t", MEMORY_MAX_BYTES,
                                  "MemorySwapMax", "t", (uint64_t)0, "TasksMax", "t",
                                  (uint64_t)TASKS_MAX, "CPUQuotaPerSecUSec", "t",
                                  CPU_QUOTA_USEC_PER_SEC, "Delegate", "b", 1);
        if (r < 0)
                goto out;
        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "PIDs");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "au");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "u");
        for (size_t i = 0; r >= 0 && i < n_pids; i++)
                r = sd_bus_message_append(m, "u", (uint32_t)pids[i]);
        for (int i = 0; r >= 0 && i < 4; i++)
                r = sd_bus_message_close_container(m); /* a(u), v, r, a(sv) */
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sa(sv))", 0);
        if (r < 0)
                goto out;
        r = sd_bus_call(bus, m, 0, &error, &reply);
        if (r < 0) {
                fprintf(stderr, "StartTransientUnit(%s): %s\n", unit,
                        error.message ? error.message : strerror(-r));
                goto out;
        }
        r = sd_bus_message_read(reply, "o", &job);
        if (r < 0)
                goto out;
        /* Wait for JobRemoved of our job; its result must be "done". */
        for (int rounds = 0; rounds < 200; rounds++) {
                sd_bus_message *sig = NULL;
                r = sd_bus_process(bus, &sig);
                if (r < 0)
                        goto out;
                if (sig && sd_bus_message_is_signal(sig, "org.freedesktop.systemd1.Manager",
                                                    "JobRemoved")) {
                        uint32_t id;
                        const char *path, *u, *result;
                        if (sd_bus_message_read(sig, "uoss", &id, &path, &u, &result) >= 0 &&
                            strcmp(path, job) == 0) {
                                r = strcmp(result, "done") == 0 ? 0 : -EIO;
                                if (r < 0)
                                        fprintf(stderr, "job for %s: %s\n", unit, result);
                                sd_bus_message_unref(sig);
                                goto out;
                        }
                }
                sd_bus_message_unref(sig);
                if (r == 0 && sd_bus_wait(bus, 100000) < 0)
                        break;
        }
        r = -ETIMEDOUT;
out:
        sd_bus_error_free(&error);
        sd_bus_message_unref(m);
        sd_bus_message_unref(reply);
        return r;
}

int main(void)
{
        sd_bus *bus = NULL;
        pid_t pids[ROLE_COUNT];
        int go[ROLE_COUNT];
        char unit[64], cg[512], buf[4096], detail[600];
        int r, status;

        setvbuf(stdout, NULL, _IOLBF, 0);
        alarm(600); /* never hang a test stage: SIGALRM ends the demo, which then fails */
        r = sd_bus_open_user(&bus);
        if (r < 0) {
                fprintf(stderr, "cannot connect to the user bus: %s (is a user manager running?)\n",
                        strerror(-r));
                return 2;
        }
        for (int i = 0; i < ROLE_COUNT; i++) {
                pids[i] = spawn((enum role)i, &go[i]);
                if (pids[i] < 0) {
                        fprintf(stderr, "fork: %s\n", strerror((int)-pids[i]));
                        return 2;
                }
        }
        snprintf(unit, sizeof unit, "vestibule-demo-%d.scope", (int)getpid());
        r = start_scope(bus, unit, pids, ROLE_COUNT);
        check(r >= 0, "StartTransientUnit on the user bus", unit);
        if (r < 0)
                goto end;

        r = cgroup_of(pids[ROLE_HOG], cg, sizeof cg);
        check(r >= 0 && strstr(cg, unit) != NULL, "children are in the scope's cgroup", cg);
        if (r < 0)
                goto end;
        snprintf(detail, sizeof detail, "%s", cg);

        r = read_cgroup_file(cg, "memory.max", buf, sizeof buf);
        check(r >= 0 && strtoull(buf, NULL, 10) == MEMORY_MAX_BYTES, "memory.max = 64 MiB", buf);
        r = read_cgroup_file(cg, "memory.swap.max", buf, sizeof buf);
        check(r >= 0 && strcmp(buf, "0") == 0, "memory.swap.max = 0", buf);
        r = read_cgroup_file(cg, "pids.max", buf, sizeof buf);
        check(r >= 0 && atoi(buf) == TASKS_MAX, "pids.max = 16", buf);
        r = read_cgroup_file(cg, "cpu.max", buf, sizeof buf);
        check(r >= 0 && strcmp(buf, "50000 100000") == 0, "cpu.max = 50000 100000 (50%)", buf);
        r = read_cgroup_file(cg, "cgroup.controllers", buf, sizeof buf);
        check(r >= 0 && strstr(buf, "cpu") && strstr(buf, "memory") && strstr(buf, "pids"),
              "delegated scope lists cpu memory pids", buf);

        /* CPU: 300 ms of CPU at 50 % takes >= 600 ms of wall time, throttled along the way. */
        printf("..   cpu: a child burns 300 ms of CPU\n");
        release(go[ROLE_SPINNER]);
        waitpid(pids[ROLE_SPINNER], &status, 0);
        r = read_cgroup_file(cg, "cpu.stat", buf, sizeof buf);
        snprintf(detail, sizeof detail, "nr_periods %lld nr_throttled %lld",
                 keyed_value(buf, "nr_periods"), keyed_value(buf, "nr_throttled"));
        check(r >= 0 && keyed_value(buf, "nr_throttled") > 0, "a busy child is cpu-throttled",
              detail);

        /* Tasks: 30 forks against TasksMax=16 (4 children already in the scope). */
        printf("..   pids: a child forks 30 times\n");
        release(go[ROLE_FORKER]);
        waitpid(pids[ROLE_FORKER], &status, 0);
        kill(-pids[ROLE_FORKER], SIGKILL);
        r = read_cgroup_file(cg, "pids.events", buf, sizeof buf);
        snprintf(detail, sizeof detail, "forker exit %d, pids.events max %lld",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, keyed_value(buf, "max"));
        check(r >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                  keyed_value(buf, "max") > 0,
              "forks beyond TasksMax are refused", detail);

        /* Memory: 200 MiB against 64 MiB, no swap: the kernel's OOM killer ends the hog. */
        printf("..   memory: a child touches 200 MiB\n");
        release(go[ROLE_HOG]);
        waitpid(pids[ROLE_HOG], &status, 0);
        r = read_cgroup_file(cg, "memory.events", buf, sizeof buf);
        long long oom_kills = keyed_value(buf, "oom_kill");
        char peak[64] = "?";
        read_cgroup_file(cg, "memory.peak", peak, sizeof peak);
        snprintf(detail, sizeof detail, "%s, memory.events oom_kill %lld, memory.peak %s",
                 WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "not killed by a signal",
                 oom_kills, peak);
        check(r >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && oom_kills > 0,
              "the memory hog is OOM-killed", detail);
        check(kill(pids[ROLE_HOLDER], 0) == 0,
              "the holder (rest of the scope) survived the OOM kill", NULL);

end:
        for (int i = 0; i < ROLE_COUNT; i++) {
                kill(-pids[i], SIGKILL);
                kill(pids[i], SIGKILL);
                waitpid(pids[i], NULL, 0);
        }
        sd_bus_flush_close_unref(bus);
        printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
        return failures ? 1 : 0;
}
