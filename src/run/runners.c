/* runners.c - the session runners' sources, built into the binary with .incbin (their text
 * is in src/run/runners/, readable and linted as what it is), and their status records. */
#include "run/runners.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"

#ifndef VESTIBULE_RUNNERS_DIR
#error "VESTIBULE_RUNNERS_DIR must name src/run/runners (CMakeLists.txt)"
#endif

#define RUNNER_BLOB(sym, file)                                                                     \
        __asm__(".section .rodata\n"                                                               \
                ".balign 16\n"                                                                     \
                ".global " #sym "\n" #sym ":\n"                                                    \
                ".incbin \"" VESTIBULE_RUNNERS_DIR "/" file "\"\n"                                 \
                "1:\n"                                                                             \
                ".byte 0\n"                                                                        \
                ".balign 8\n"                                                                      \
                ".global " #sym "_len\n" #sym "_len:\n"                                            \
                ".quad 1b - " #sym "\n"                                                            \
                ".previous\n")

RUNNER_BLOB(sbx_runner_python, "python.py");
RUNNER_BLOB(sbx_runner_node, "node.js");
RUNNER_BLOB(sbx_runner_bash, "bash.sh");

/* each source, NUL-terminated, and its length without the NUL (computed by the assembler) */
extern const char sbx_runner_python[], sbx_runner_node[], sbx_runner_bash[];
extern const unsigned long long sbx_runner_python_len, sbx_runner_node_len, sbx_runner_bash_len;

const char *sbx_runner_source(enum sbx_language l, size_t *ret_len)
{
        switch (l) {
        case SBX_LANG_NODE:
                *ret_len = (size_t)sbx_runner_node_len;
                return sbx_runner_node;
        case SBX_LANG_BASH:
                *ret_len = (size_t)sbx_runner_bash_len;
                return sbx_runner_bash;
        case SBX_LANG_PYTHON:
        default:
                *ret_len = (size_t)sbx_runner_python_len;
                return sbx_runner_python;
        }
}

const char *const *sbx_runner_argv(enum sbx_language l)
{
        static const char *const python[] = {"python3", "/sandbox/main.py", NULL};
        static const char *const node[] = {"node", "--expose-internals", "/sandbox/main.js", NULL};
        static const char *const bash[] = {"bash", "/sandbox/main.sh", NULL};

        switch (l) {
        case SBX_LANG_NODE:
                return node;
        case SBX_LANG_BASH:
                return bash;
        case SBX_LANG_PYTHON:
        default:
                return python;
        }
}

int sbx_runner_status_parse(const char *line, size_t len, struct sbx_runner_status *ret)
{
        char buf[96], kind[16];
        long long seq;
        int code, used = 0;

        if (len == 0 || len >= sizeof(buf))
                return -EBADMSG;
        memcpy(buf, line, len);
        buf[len] = '\0';
        if (sscanf(buf, "%lld %15[a-z] %d%n", &seq, kind, &code, &used) != 3 ||
            (size_t)used != len || seq < 0)
                return -EBADMSG;
        ret->seq = seq;
        memcpy(ret->kind, kind, sizeof(kind));
        ret->code = code;
        return 0;
}

/* Write all of @buf to @fd (non-blocking), waiting for room at most until @until. */
static int write_all(int fd, const char *buf, size_t len, uint64_t until)
{
        while (len > 0) {
                ssize_t n = write(fd, buf, len);
                if (n > 0) {
                        buf += n;
                        len -= (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno != EAGAIN)
                        return -errno;
                uint64_t now = sbx_now_ms();
                if (now >= until)
                        return -ETIMEDOUT;
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                (void)poll(&p, 1, (int)(until - now));
        }
        return 0;
}

int sbx_runner_send_cell(int fd, long long seq, const char *code, size_t len, uint64_t until_ms)
{
        char head[48];
        int n = snprintf(head, sizeof(head), "%lld %zu\n", seq, len), r;

        if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        r = write_all(fd, head, (size_t)n, until_ms);
        if (r == 0)
                r = write_all(fd, code, len, until_ms);
        return r;
}

int sbx_runner_check_cell(const struct run_request *req, enum sbx_language l, struct sbx_error *err)
{
        if (req->network != RUN_NETWORK_NONE)
                return sbx_fail(err, EINVAL,
                                "network \"allowlist\" is not available in a session (its "
                                "sandbox has no network)");
        if (l == SBX_LANG_BASH && memchr(req->code, '\0', req->code_len))
                return sbx_fail(err, EINVAL,
                                "bash code with a NUL byte cannot run in a session (the shell "
                                "cannot hold it): remove it");
        return 0;
}

int sbx_runner_take_record(struct sbx_runner_records *rs, struct sbx_runner_status *ret)
{
        char *nl = memchr(rs->buf, '\n', rs->len);

        if (!nl)
                return rs->len == sizeof(rs->buf) ? -EBADMSG : 0;
        size_t n = (size_t)(nl - rs->buf);
        int r = sbx_runner_status_parse(rs->buf, n, ret);
        memmove(rs->buf, nl + 1, rs->len - n - 1);
        rs->len -= n + 1;
        return r < 0 ? r : 1;
}

bool sbx_runner_channel_broken(int r, struct run_result *res)
{
        if (r == 0 || r == -EPIPE)
                return false;
        res->outcome = RUN_OUTCOME_SIGNALED;
        res->term_signal = SIGKILL;
        res->exit_code = 0;
        snprintf(res->session_ended, sizeof(res->session_ended),
                 "the session's status channel from its interpreter was corrupted (%s: code in "
                 "the session wrote to it), so the server could not tell how the cell ended and "
                 "ended the session; start another with session_start",
                 r == -EBADMSG ? "a line that is not a status record"
                               : "no status record of this cell");
        return true;
}

size_t sbx_runner_drop_startup(int fd)
{
        char buf[16384];
        size_t dropped = 0;

        while (dropped < (1u << 20)) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int pr = poll(&p, 1, 0);
                if (pr < 0 && errno == EINTR)
                        continue;
                if (pr <= 0 || !(p.revents & POLLIN))
                        break;
                ssize_t k = read(fd, buf, sizeof(buf));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                dropped += (size_t)k;
        }
        return dropped;
}
