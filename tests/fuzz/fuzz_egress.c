/* fuzz_egress.c - libFuzzer target: the egress proxy's request-head parser, the decision on a
 * parsed request, and the upstream head built from it (offsets into the untrusted buffer), as
 * the proxy runs them on bytes from the sandbox; an input whose first byte is 'A' is an
 * upstream's answer head, rewritten as the proxy sends it to the client (egress_answer_head());
 * one whose first byte is 'R' is fed to the record folding instead (the server reads the proxy's
 * record file, which a compromised proxy could fill with anything). Crashes, leaks and UB are
 * findings; a refused request is a normal outcome. Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang;
 * run: scripts/fuzz.sh egress SECONDS. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "config/config.h"
#include "egress/egress-internal.h"
#include "run/run.h"

static struct sbx_egress pol;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        struct sbx_error err = {0};

        (void)argc;
        (void)argv;
        sbx_log_set_level((enum sbx_log_level) - 1);
        if (config_egress_parse("pypi.org,.pythonhosted.org,10.0.0.1,::1", "443,80",
                                "pypi.org=127.0.0.1:3141", &pol, &err) < 0)
                abort();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct egress_request rq;
        char *copy;

        if (size > 0 && data[0] == 'A') {
                /* an exact-size copy, so ASan sees any read past the input */
                char *a = malloc(size);
                size_t end, n = 0;
                memcpy(a, data + 1, size - 1);
                end = egress_answer_head_end(a, size - 1);
                if (end > size - 1)
                        abort();
                if (end) {
                        char *out = egress_answer_head(a, end, &n);
                        if (n > 2 * end + 64)
                                abort();
                        free(out);
                }
                free(a);
                return 0;
        }
        if (size > 0 && data[0] == 'R') {
                struct run_egress g = {0};
                egress_records_parse((const char *)data + 1, size - 1, &g);
                for (size_t i = 0; i < g.n_entries; i++)
                        if (strnlen(g.entries[i].host, sizeof(g.entries[i].host)) >=
                            sizeof(g.entries[i].host))
                                abort(); /* a host must stay NUL-terminated */
                free(g.entries);
                return 0;
        }
        /* an exact-size copy, so ASan sees any read past the input */
        copy = malloc(size ? size : 1);
        memcpy(copy, data, size);
        memset(&rq, 0, sizeof(rq));
        if (egress_parse_request(copy, size, &rq) == 1) {
                if (rq.head_len > size || rq.line_end > rq.head_len ||
                    strnlen(rq.host, sizeof(rq.host)) >= sizeof(rq.host))
                        abort();
                (void)egress_decide_name(&pol, &rq);
                (void)config_egress_pin(&pol, rq.host);
                if (!rq.connect) {
                        size_t n = 0;
                        int64_t body = -1;

                        free(egress_upstream_head(copy, &rq, &n));
                        if (egress_request_body(copy, &rq, &body) == 0 && body < 0)
                                abort();
                }
        }
        free(copy);
        return 0;
}
