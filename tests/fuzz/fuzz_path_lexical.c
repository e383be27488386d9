/* fuzz_path_lexical.c - libFuzzer target: sbx_path_lexical() (src/common/chase.c), which names
 * the path a sandboxed program passed to open(2) in the audit (src/native/seccomp.c, read from
 * the program's memory: any bytes) and a user's --allow-read as typed (src/cli/cmd_run_cmd.c).
 * The input is "CWD\nPATH" (no newline: PATH alone, cwd "/"). Checked on every input: the
 * result starts with '/', has no empty, "." or ".." component and no trailing '/' (unless it
 * is "/"), and is no longer than cwd + path + 2. A violation aborts.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh path_lexical SECONDS. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/chase.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *out, size_t max)
{
        size_t len = strlen(out);

        if (out[0] != '/' || len > max || (len > 1 && out[len - 1] == '/'))
                abort();
        for (const char *c = out; *c; c++) {
                if (*c != '/')
                        continue;
                if (c[1] == '/' || (c[1] == '.' && (c[2] == '/' || c[2] == '\0')) ||
                    (c[1] == '.' && c[2] == '.' && (c[3] == '/' || c[3] == '\0')))
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *in = malloc(size + 1), *nl, *out;
        const char *cwd = "/", *path;

        if (!in)
                return 0;
        memcpy(in, data, size);
        in[size] = '\0'; /* a NUL inside ends the string, as a C path does */
        nl = strchr(in, '\n');
        path = in;
        if (nl) {
                *nl = '\0';
                cwd = in;
                path = nl + 1;
        }
        out = sbx_path_lexical(path, cwd);
        check(out, strlen(cwd) + strlen(path) + 2);
        free(out);
        free(in);
        return 0;
}
