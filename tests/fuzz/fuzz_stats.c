/* fuzz_stats.c - libFuzzer target: the engine's stats stream (src/engine/stats.c:
 * engine_stats_feed()), bytes from the container engine. The input is fed in two reads split
 * at its first byte's value; checked: every read is taken whole, the line buffer never holds
 * more than ENGINE_STATS_LINE_MAX, and the peaks never go down. A violation aborts.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh stats SECONDS. */
#include <stdint.h>
#include <stdlib.h>

#include "engine/stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct engine_stats s = {0};
        size_t cut = size ? data[0] % (size + 1) : 0;
        uint64_t mem, pids;

        if (engine_stats_feed(&s, (const char *)data, cut) != cut)
                abort();
        mem = s.mem_peak;
        pids = s.pids_peak;
        if (engine_stats_feed(&s, (const char *)data + cut, size - cut) != size - cut)
                abort();
        if (s.len > ENGINE_STATS_LINE_MAX || s.mem_peak < mem || s.pids_peak < pids)
                abort();
        engine_stats_feed(&s, "\n", 1);
        engine_stats_done(&s);
        return 0;
}
