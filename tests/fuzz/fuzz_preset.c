/* fuzz_preset.c - libFuzzer target: the agent preset parser (src/config/presets.c,
 * config_preset_parse) on any bytes, as a preset file of src/config/presets/ could hold, and
 * the URL host extraction (config_url_host) the preset's url-env entries go through. Crashes,
 * leaks and UB are findings; a refused file is a normal outcome.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh preset SECONDS. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/presets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct config_preset p = {0};
        struct sbx_error err = {0};
        char *copy;

        if (config_preset_parse((const char *)data, size, "/home/u", &p, &err) == 0)
                config_preset_done(&p);
        copy = malloc(size + 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        copy[size] = '\0';
        free(config_url_host(copy));
        free(copy);
        return 0;
}
