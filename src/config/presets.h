/* presets.h - the agent presets of `vestibule-mcp run --agent NAME -- CMD`: one data file per
 * agent in src/config/presets/ (NAME.preset, its format explained in claude.preset), built
 * into the binary as secrets.list is, parsed here. A preset names the agent's own state under
 * $HOME (read-write, not masked), the variables it needs although the secrets list drops them,
 * and the hosts its network may reach. The caller (src/cli/run_agent.c) turns it into the
 * --allow, --env and --net of the run. docs/run-command.md. */
#pragma once

#include <stddef.h>

#include "common/error.h"

/* A "guard" entry: a file of the agent's whose @keys carry commands the agent runs on the host
 * when it starts outside the sandbox (hooks, MCP servers): src/cli/run_guard.h restores them. */
struct config_guard {
        char *path;  /* absolute: $HOME joined with the entry's FILE */
        char **keys; /* NULL-ended: dot-separated paths ("hooks", "projects.*.mcpServers"; '*'
                      * is any member); for a .toml file the table or key names */
};

/* One preset, parsed. Every array is NULL-ended and owned, as are its strings. */
struct config_preset {
        char *command;  /* the executable it is for ("claude"), or NULL when it names none */
        char **home;    /* absolute: $HOME joined with each "home" entry (none when no $HOME) */
        char **env;     /* variable names passed on ("env") */
        char **hosts;   /* host names ("host") */
        char **url_env; /* variable names whose URL's host is allowed when set ("url-env") */
        struct config_guard *guards; /* "guard" entries, @n_guards of them (none when no $HOME) */
        size_t n_guards;
        char **readonly; /* absolute: "readonly" entries, paths under $HOME kept read-only */
};

/**
 * config_preset_parse() - parse @len bytes of @text (a preset file's bytes; untrusted, not
 * NUL-ended, may hold NULs) into @ret, "home" entries joined with @home (absolute; NULL =
 * leave them out, as the guard and readonly entries). Lines are "KIND VALUE WHY" (KIND command,
 * home, env, host, url-env or readonly) or "guard FILE KEY[,KEY...] WHY"; '#' lines and blank
 * lines are skipped. A home, readonly or guard path must be relative without "..", a host a
 * host name, an env name letters, digits and '_', a KEY letters, digits, "_-" and '.'-separated
 * parts ('*' alone is a part too).
 * Return: 0, or -EINVAL with @err naming the line and what is wrong (@ret untouched).
 */
int config_preset_parse(const char *text, size_t len, const char *home, struct config_preset *ret,
                        struct sbx_error *err);

/**
 * config_preset_load() - the built-in preset @name parsed (config_preset_parse, @home as
 * there). Return: 0; -ENOENT with @err listing the known names when there is no such preset;
 * -EINVAL for a broken built-in file (a build from a broken tree).
 */
int config_preset_load(const char *name, const char *home, struct config_preset *ret,
                       struct sbx_error *err);

/** config_preset_names() - the built-in presets' names, ", "-separated; static. */
const char *config_preset_names(void);

/** config_preset_done() - free what @p holds; @p may be all zero. */
void config_preset_done(struct config_preset *p);

/**
 * config_url_host() - the host of @url ("scheme://[user@]host[:port][/...]", a bracketed
 * IPv6 literal without its brackets), lower-cased, as a new string; NULL when @url has no
 * "scheme://" or an empty host. RFC 3986 section 3.2.
 */
char *config_url_host(const char *url);

/**
 * config_preset_url_hosts() - the hosts of the @p->url_env variables that are set in this
 * process's environment and hold a URL with a host (config_url_host), NULL-ended and owned
 * (free with config_strv_free()); an empty array when none is set.
 */
char **config_preset_url_hosts(const struct config_preset *p);
