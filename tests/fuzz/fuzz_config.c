/* fuzz_config.c - libFuzzer target: the settings parser of src/config, both halves. The input
 * is split at its first NUL byte: before it, lines "VAR=value" that stand for the process
 * environment (read through config_load_from()'s getenv function, as the MCP client's env
 * block would give them); after it, the YAML text of the config file (libyaml, loaded as the
 * server loads it). Every field of the result is then read, so a half-built config shows up.
 * Crashes, leaks and UB are findings; an invalid config is a normal outcome.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh config SECONDS. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "config/config.h"

#define MAX_VARS 32

static char *env_names[MAX_VARS], *env_values[MAX_VARS];
static size_t n_env;

static const char *fuzz_getenv(const char *name)
{
        for (size_t i = 0; i < n_env; i++)
                if (strcmp(env_names[i], name) == 0)
                        return env_values[i];
        return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        sbx_log_set_level((enum sbx_log_level) - 1);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const uint8_t *nul = memchr(data, 0, size);
        size_t env_len = nul ? (size_t)(nul - data) : size;
        char *env = strndup((const char *)data, env_len), *yaml = NULL, *save = NULL, *line;
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};

        if (!env)
                abort();
        if (nul) {
                yaml = xmalloc(size - env_len);
                memcpy(yaml, nul + 1, size - env_len - 1);
                yaml[size - env_len - 1] = '\0';
        }
        n_env = 0;
        /* Unless the input names them, a home to expand '~' against, as every client gives. */
        env_names[n_env] = xstrdup("HOME");
        env_values[n_env++] = xstrdup("/nonexistent/home/fuzz");
        for (line = strtok_r(env, "\n", &save); line && n_env < MAX_VARS;
             line = strtok_r(NULL, "\n", &save)) {
                char *eq = strchr(line, '=');
                if (!eq)
                        continue;
                *eq = '\0';
                if (strcmp(line, "HOME") == 0) {
                        free(env_values[0]);
                        env_values[0] = xstrdup(eq + 1);
                        continue;
                }
                env_names[n_env] = xstrdup(line);
                env_values[n_env++] = xstrdup(eq + 1);
        }
        if (config_load_from(fuzz_getenv, yaml, &c, &err) == 0) {
                /* read what a caller reads: the paths must be set, the message terminated */
                if (!c->workspace_dir || !c->rootfs_dir || !c->audit_dir)
                        abort();
                if (c->invalid &&
                    strnlen(c->invalid_msg, sizeof(c->invalid_msg)) == sizeof(c->invalid_msg))
                        abort();
                if (c->workspace_dir[0] != '/' || c->rootfs_dir[0] != '/' || c->audit_dir[0] != '/')
                        abort();
                config_free(c);
        } else if (strnlen(err.msg, sizeof(err.msg)) == sizeof(err.msg)) {
                abort();
        }
        for (size_t i = 0; i < n_env; i++) {
                free(env_names[i]);
                free(env_values[i]);
        }
        free(env);
        free(yaml);
        return 0;
}
