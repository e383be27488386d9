/* toml.h - Codex's ~/.codex/config.toml, for clients.c and wrap.c only: the [mcp_servers.NAME]
 * table written, merged, read back, and its command rewritten in place (--wrap). Format:
 * github.com/openai/codex docs/config.md ("mcp_servers"); the TOML grammar is toml.io/en/v1.0.0.
 * What the line scanner follows and refuses is in clients.h. */
#pragma once

#include <stdio.h>

#include "clients/clients.h"
#include "clients/wrap.h"
#include "common/error.h"

/**
 * clients_toml_render() - @s as its own table: "[mcp_servers.NAME]\ncommand = ...\nargs = [...]\n"
 * and "env = { ... }" when it has env. Return: a new string the caller frees.
 */
char *clients_toml_render(const struct client_server *s);

/**
 * clients_toml_merge() - clients_merge() for the TOML file @old_text (NULL = none): the
 * [mcp_servers.NAME] table (and its [.env] sub-table) rewritten as one table holding @s, the old
 * table's other keys and the env values @s does not set kept; every byte outside it unchanged.
 * Return: 0 (*@ret_text NULL when nothing would change), or -EINVAL with @err naming the line,
 * or the env when its values would not read back from the one inline table (over 64, a comment
 * or a bare ',' in a value), or when the merged file would pass the editor's limits (16 of our
 * tables, 128 keys in them, 64 env values) and so not read back: what a run writes, the next run
 * reads and leaves alone.
 */
int clients_toml_merge(const char *old_text, const struct client_server *s, char **ret_text,
                       char **ret_kept, struct sbx_error *err);

/**
 * clients_toml_set_command() - @old_text with only the values of "command" and "args" of
 * [mcp_servers.@s->name] replaced by @s's (an "args" line added after "command" when there was
 * none); every other byte, the entry's env and other keys and their comments included, as it
 * was. For --wrap/--unwrap, which must change the command and nothing else.
 * Return: 0 (*@ret_text NULL when nothing would change), -ENOENT when there is no such table
 * with a "command", or -EINVAL (a file the scanner cannot follow, or one that the added "args"
 * line would take past its 128 keys); @err names the fix.
 */
int clients_toml_set_command(const char *old_text, const struct client_server *s, char **ret_text,
                             struct sbx_error *err);

/**
 * clients_toml_read_entry() - the stdio server @name of the TOML @text into @ret: "command" and
 * "args" (basic or literal strings, single-line), the env values (an inline table, a
 * [mcp_servers.NAME.env] table or dotted env.K keys) as "K=V", and the names in "env_vars" (which
 * Codex forwards from its own environment) as bare "K".
 * Return: 0; -ENOENT with the servers the file has listed; -EINVAL for what is not a stdio
 * server ("url"), a value that is not a string (or an array of strings), a multi-line string, or
 * text the scanner cannot follow. @err names the fix.
 */
int clients_toml_read_entry(const char *text, const char *name, struct client_entry *ret,
                            struct sbx_error *err);

/** clients_list_add() - append ", @name" (or "@name" first) to the list being written to @b. */
void clients_list_add(FILE *b, const char *name);

/**
 * clients_kept_text() - "env A, B; settings c, d" from the two lists (both freed), or NULL when
 * both are empty. Return: a new string the caller frees, or NULL.
 */
char *clients_kept_text(char *env, char *keys);
