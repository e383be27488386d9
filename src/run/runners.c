/* runners.c - the session runners' sources, built into the binary with .incbin (their text
 * is in src/run/runners/, readable and linted as what it is), and their status records. */
#include "run/runners.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifndef VESTIBULE_RUNNERS_DIR
#error "VESTIBULE_RUNNERS_DIR must name src/run/runners (CMakeLists.txt)"
#endif

#define RUNNER_BLOB(sym, file)                                                                     \
        __asm__(".section .rodata\n"                                                               \
                ".balign 16\n"                                                                     \
                ".global " #sym "\n" #sym ":\n"                                                    \
                ".incbin \"" VESTIBULE_RUNNERS_DIR "/" file "\"\n"                                 \
                ".global " #sym "_end\n" #sym "_end:\n"                                            \
                ".byte 0\n"                                                                        \
                ".previous\n")

RUNNER_BLOB(sbx_runner_python, "python.py");
RUNNER_BLOB(sbx_runner_node, "node.js");
RUNNER_BLOB(sbx_runner_bash, "bash.sh");

extern const char sbx_runner_python[], sbx_runner_python_end[];
extern const char sbx_runner_node[], sbx_runner_node_end[];
extern const char sbx_runner_bash[], sbx_runner_bash_end[];

const char *sbx_runner_source(enum sbx_language l, size_t *ret_len)
{
        switch (l) {
        case SBX_LANG_NODE:
                *ret_len = (size_t)(sbx_runner_node_end - sbx_runner_node);
                return sbx_runner_node;
        case SBX_LANG_BASH:
                *ret_len = (size_t)(sbx_runner_bash_end - sbx_runner_bash);
                return sbx_runner_bash;
        case SBX_LANG_PYTHON:
        default:
                *ret_len = (size_t)(sbx_runner_python_end - sbx_runner_python);
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
