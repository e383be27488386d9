/* secrets.h - what `vestibule-mcp run -- CMD` keeps from the command it runs: the list in
 * src/config/secrets.list (one entry a line, each with why), built into the binary, and the
 * host facts the host view starts from ($HOME, $PATH, the environment), which only config/
 * reads. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* The list, parsed. Every array is NULL-ended and owned, as are its strings. */
struct config_secrets {
        char **home;  /* absolute: $HOME joined with each "home" entry */
        char **paths; /* absolute host paths ("path" entries) */
        char **files; /* fnmatch(3) globs of names inside allowed folders ("file") */
        char **env;   /* fnmatch(3) globs of environment variable names ("env") */
        char **keep;  /* fnmatch(3) globs of names kept read-only in allowed folders ("keep") */
};

/**
 * config_secrets_load() - parse the built-in list (src/config/secrets.list) into @ret, the
 * "home" entries joined with @home (absolute; NULL = leave them out).
 * Return: 0, or -EINVAL with @err naming the bad line (a build from a broken list).
 */
int config_secrets_load(const char *home, struct config_secrets *ret, struct sbx_error *err);

/** config_secrets_done() - free what @s holds. */
void config_secrets_done(struct config_secrets *s);

/** config_secrets_text() - the built-in list as written (for --help and docs); static. */
const char *config_secrets_text(void);

/** config_secret_env_name() - whether the variable @name matches an "env" glob of @s. */
bool config_secret_env_name(const struct config_secrets *s, const char *name);

/**
 * config_host_env() - a copy of this process's environment (environ(7)) without the
 * variables @s names, NULL-ended, owned (free with config_strv_free()); *@ret_dropped (may be
 * NULL) gets how many were left out.
 */
char **config_host_env(const struct config_secrets *s, size_t *ret_dropped);

/** config_host_var() - getenv(@name) for the host view ($HOME, $PATH, $PWD); NULL = unset or
 * empty. Borrowed from the environment. */
const char *config_host_var(const char *name);

/** config_strv_free() - free a NULL-ended array of strings and the strings. Returns NULL. */
char **config_strv_free(char **v);

/* For _cleanup_(config_strv_freep). */
static inline void config_strv_freep(char ***v)
{
        config_strv_free(*v);
}
