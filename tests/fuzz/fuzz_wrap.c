/* fuzz_wrap.c - libFuzzer target: the reader in front of `mcp wrap`'s audit (src/cli/
 * wrap_audit.c) on any bytes, as a client writes lines to the wrapped server and the server (a
 * third party's code) writes back. Each input is one line: through wrap_json_read() in both
 * modes (strict for the client's lines, lenient for the server's) and through
 * wrap_audit_request() with a log that cannot be opened (so every tools/call in it is refused
 * without touching a disk; the log path is a file under /dev/null). Checked, besides crashes,
 * leaks and UB: strict mode reads nothing lenient mode refuses; a refusal is "" or one line
 * that json-c reads back as an error response (or an array of them) with a code; a line
 * relayed with no refusal holds no tools/call that strict mode finds.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh wrap SECONDS. */
#include <fcntl.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/wrap_audit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* @e is an error response with an integer code. */
static void check_error(json_object *e)
{
        json_object *err, *code;

        if (!json_object_object_get_ex(e, "error", &err) ||
            !json_object_object_get_ex(err, "code", &code) ||
            !json_object_is_type(code, json_type_int))
                abort();
}

/* @o (a message strict mode read) holds a tools/call: one, or one in a batch. */
static bool holds_call(json_object *o)
{
        size_t n = json_object_is_type(o, json_type_array) ? json_object_array_length(o) : 1;

        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_is_type(o, json_type_array)
                                     ? json_object_array_get_idx(o, i)
                                     : o,
                            *m;

                if (json_object_object_get_ex(e, "method", &m) &&
                    json_object_is_type(m, json_type_string) &&
                    strcmp(json_object_get_string(m), "tools/call") == 0)
                        return true;
        }
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct wrap_audit *a;
        static int null_fd = -1, err_fd = -1;
        const char *line = (const char *)data, *why = NULL;
        json_object *strict, *lenient;
        char *refusal = NULL;

        if (!a) {
                setenv("VESTIBULE_AUDIT_DIR", "/dev/null/vestibule-fuzz", 1);
                null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                err_fd = fcntl(2, F_DUPFD_CLOEXEC, 10);
                a = wrap_audit_open("fuzz", "native");
        }
        strict = wrap_json_read(line, size, true, &why);
        lenient = wrap_json_read(line, size, false, NULL);
        if (!why && strict && !lenient)
                abort(); /* strict read what lenient could not (JSON null reads as NULL) */
        /* the wrap's stderr lines (one per call) would drown libFuzzer's */
        dup2(null_fd, 2);
        wrap_audit_request(a, line, size, &refusal);
        dup2(err_fd, 2);
        if (!refusal && !why && strict && holds_call(strict))
                abort(); /* a call relayed unrecorded */
        if (refusal && refusal[0]) {
                size_t len = strlen(refusal);
                json_object *o;

                if (refusal[len - 1] != '\n' || memchr(refusal, '\n', len - 1))
                        abort();
                o = json_tokener_parse(refusal);
                if (!o)
                        abort();
                if (json_object_is_type(o, json_type_array)) {
                        if (json_object_array_length(o) == 0)
                                abort();
                        for (size_t i = 0; i < json_object_array_length(o); i++)
                                check_error(json_object_array_get_idx(o, i));
                } else {
                        check_error(o);
                }
                json_object_put(o);
        }
        free(refusal);
        json_object_put(strict);
        json_object_put(lenient);
        return 0;
}
