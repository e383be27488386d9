/* wrap.h - `install-client --wrap NAME CLIENT`: read a server entry a client's JSON file already
 * holds (its command, args and env), so that the CLI can write it back started through
 * `vestibule-mcp mcp wrap ... -- COMMAND ARGS...` with clients_install() (same backup, flock and
 * refusals as install-client), and the reverse for --unwrap. Formats as in clients.h; codex's
 * TOML is read by clients_toml_read_entry() (toml.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "clients/clients.h"
#include "common/error.h"

/* One stdio server entry as the file has it. Arrays NULL-ended, owned, as are the strings. */
struct client_entry {
        char *command;
        char **args; /* n_args */
        size_t n_args;
        char **env; /* "NAME=VALUE", n_env */
        size_t n_env;
};

/**
 * clients_read_entry() - the stdio server @name in @text (the contents of @c's JSON file) into
 * @ret: "command" and "args" (opencode: the "command" array), and "env" (opencode:
 * "environment") as NAME=VALUE.
 * codex: [mcp_servers.NAME] as clients_toml_read_entry() reads it (env_vars names as bare "K").
 * Return: 0; -ENOENT when the file has no such entry (@err lists the names it has); -EINVAL for
 * text that is not strict JSON (or TOML the scanner cannot follow), an entry that is not a stdio
 * server (a "url"), or values that are not strings. @err names the fix.
 */
int clients_read_entry(const struct client_info *c, const char *text, const char *name,
                       struct client_entry *ret, struct sbx_error *err);

/** clients_entry_done() - free what @e holds; @e may be all zero. */
void clients_entry_done(struct client_entry *e);

/**
 * clients_entry_wrapped() - @e already starts `vestibule-mcp mcp wrap` (by a path whose name is
 * vestibule-mcp, by @self (this binary's path, may be NULL), or `npx -y vestibule-mcp`);
 * *@ret_cmd_at (may be NULL) gets the index in @e->args of the wrapped command (after "--"), or
 * @e->n_args when there is no "--".
 */
bool clients_entry_wrapped(const struct client_entry *e, const char *self, size_t *ret_cmd_at);
