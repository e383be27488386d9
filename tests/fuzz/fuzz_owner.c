/* fuzz_owner.c - libFuzzer target: the owner-label judge (src/common/owner.c, sbx_owner_alive)
 * on any bytes, as another local user may plant a "<folder>.owner" file in /tmp, and any client
 * of a shared engine may label a container vestibule.owner. Crashes and UB are findings.
 * Properties checked: a label with fewer than two ':' never counts as alive (it cannot name a
 * process, and a sweep must be able to remove what carries it); a label of this process's own
 * place (host name and pid namespace) with this process's pid counts as alive exactly when the
 * start time is this process's, in plain decimal digits (no sign or space, which the number
 * reader alone would take).
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh owner SECONDS. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/owner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static char me[320];
        static size_t place_len;
        char *label = malloc(size + 1);

        if (!label)
                return 0;
        if (!*me) {
                if (sbx_owner_label(getpid(), me, sizeof(me)) < 0)
                        abort();
                place_len = strcspn(me, ":");
        }
        memcpy(label, data, size);
        label[size] = '\0';

        bool alive = sbx_owner_alive(label);
        size_t colons = 0;
        for (const char *p = label; *p; p++)
                colons += *p == ':';
        if (colons < 2 && alive)
                abort(); /* a label that names no process kept as alive */

        /* the input after our own place and pid: "<place>:<our pid>:<input>" is alive exactly
         * when the input is our start time in plain decimal digits (an input with a ':' moves
         * the fields: then it is another place's) */
        char *ours = NULL;
        if (!strchr(label, ':') &&
            asprintf(&ours, "%.*s:%d:%s", (int)place_len, me, (int)getpid(), label) >= 0) {
                size_t n = strlen(label);
                bool digits = n > 0 && n < 20 && strspn(label, "0123456789") == n;
                bool want = digits && strtoull(label, NULL, 10) == sbx_proc_start_time(getpid());
                if (sbx_owner_alive(ours) != want)
                        abort();
                free(ours);
        }
        if (strcmp(label, me) == 0 && !alive)
                abort(); /* our own label judged gone */
        free(label);
        return 0;
}
