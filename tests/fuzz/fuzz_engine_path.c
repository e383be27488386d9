/* fuzz_engine_path.c - libFuzzer target: the Engine API layer's escaping of ids, names and
 * paths into a request target (src/engine/api.c: engine_escape(), engine_call_target()). Those
 * bytes come from outside: container ids from the engine's answers, image names from the
 * settings, workspace entry names (a run chooses them) in the archive API's ?path=. The first
 * input byte picks path part (even) or query value (odd); the rest is the part. Checked on
 * every input: a refusal only for a NUL, an over-long part, or (path) an empty part or a "." /
 * ".." piece; an accepted part comes out as unreserved bytes and %XX only and decodes back to
 * the input; in a whole target it adds no '/', '?', '&', '#' of its own. A violation aborts.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh engine_path SECONDS. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "engine/engine.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        sbx_log_set_level((enum sbx_log_level) - 1);
        return 0;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1; /* lower case is not what we write */
}

/* Decode @enc, checking its alphabet; it must give back @in (@n bytes). */
static void check_encoding(const char *enc, const char *in, size_t n)
{
        size_t o = 0;
        for (const char *p = enc; *p; o++) {
                unsigned char c = (unsigned char)*p;
                if (o >= n)
                        abort(); /* longer than the input */
                if (c == '%') {
                        int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
                        if (lo < 0)
                                abort();
                        if ((unsigned char)in[o] != (unsigned char)(hi * 16 + lo) ||
                            engine_unreserved((unsigned char)in[o]))
                                abort(); /* wrong byte, or an unreserved byte encoded */
                        p += 3;
                } else {
                        if (!engine_unreserved(c) || in[o] != *p)
                                abort();
                        p++;
                }
        }
        if (o != n)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        bool query = data[0] & 1;
        const char *in = (const char *)data + 1;
        size_t n = size - 1;
        char *enc = NULL;
        struct sbx_error err = {0};

        int r = engine_escape(in, n, query, &enc, &err);
        bool has_nul = memchr(in, '\0', n) != NULL;
        bool must_refuse =
            has_nul || n > ENGINE_PART_MAX_BYTES || (!query && (n == 0 || engine_dot_piece(in, n)));
        if (must_refuse != (r < 0))
                abort();
        if (r < 0) {
                if (enc || !err.msg[0])
                        abort(); /* a refusal leaves no output and says why */
                return 0;
        }
        check_encoding(enc, in, n);
        free(enc);

        /* The part in a whole target: the template's '/', '?', '&' are the only ones. */
        char *part = strndup(in, n), *t = NULL;
        struct engine_call call = {.path = "/containers/{}/archive",
                                   .parts = {part},
                                   .query = {{"path", part}, {"force", "1"}}};
        if (!part)
                abort();
        r = engine_call_target(&call, &t, &err);
        size_t plen = strlen(part); /* cut at the first NUL, as a C string is */
        bool target_refused =
            plen == 0 || plen > ENGINE_PART_MAX_BYTES || engine_dot_piece(part, plen);
        if (target_refused != (r < 0))
                abort();
        if (r == 0) {
                size_t slashes = 0, qmarks = 0, amps = 0;
                for (const char *p = t; *p; p++) {
                        slashes += *p == '/';
                        qmarks += *p == '?';
                        amps += *p == '&';
                        if (*p == '#' || *p == ' ' || (unsigned char)*p < 0x20)
                                abort();
                }
                if (slashes != 3 || qmarks != 1 || amps != 1)
                        abort();
        }
        free(t);
        free(part);
        return 0;
}
