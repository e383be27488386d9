/* fuzz_guard.c - libFuzzer target: run --agent's TOML line scanner (src/cli/run_guard.c,
 * run_guard_toml_guarded) on any bytes, as sandboxed code may leave an agent's config.toml. The
 * guarded keys are codex.preset's. Crashes, leaks and UB are findings; -1 (cannot tell) is a
 * normal outcome. Properties checked: the output is made of lines of the input (a table line as
 * written, a key line after its "@"), and a second scan of the same bytes says the same.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh guard SECONDS. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/run_guard.h"
#include "common/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether @text holds @line (@m bytes) as a whole line. */
static bool holds_line(const char *text, const char *line, size_t m)
{
        const char *hit = text, *end = text + strlen(text);

        if (m == 0)
                return true;
        while ((hit = memmem(hit, (size_t)(end - hit), line, m))) {
                if ((hit == text || hit[-1] == '\n') && (hit[m] == '\n' || hit[m] == '\0'))
                        return true;
                hit++;
        }
        return false;
}

static const char keys[] =
    "mcp_servers,notify,profiles,model_providers,shell_environment_policy,hooks";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct sbx_buf a = {0}, b = {0};
        char *text = malloc(size + 1);
        int ra, rb;

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        ra = run_guard_toml_guarded(text, keys, &a);
        rb = run_guard_toml_guarded(text, keys, &b);
        if (ra != rb || (ra == 0 && (a.len != b.len || (a.len && memcmp(a.data, b.data, a.len)))))
                abort(); /* the same bytes, another answer */
        for (const char *l = ra == 0 && a.data ? a.data : ""; *l;) {
                size_t n = strcspn(l, "\n");
                /* a key line is "@" and the line; a table's line is as written (which may start
                 * with "@" itself) */
                if (!holds_line(text, l, n) && !(*l == '@' && holds_line(text, l + 1, n - 1)))
                        abort(); /* a line the input does not hold */
                l += n + (l[n] == '\n');
        }
        sbx_buf_done(&a);
        sbx_buf_done(&b);
        free(text);
        return 0;
}
