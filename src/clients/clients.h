/* clients.h - MCP clients' configuration files: where each client keeps its servers, the entry
 * that starts vestibule-mcp, and a merge that adds or updates that one entry and keeps every
 * other byte's meaning (other servers, other settings). Used by `vestibule-mcp install-client`.
 *
 * Formats, as each client documents them (checked against the clients' own `mcp list` in
 * tests/package/install-client.sh):
 *   claude-code     ~/.claude.json, "mcpServers": {NAME: {type: "stdio", command, args, env}}
 *                   (what `claude mcp add --scope user` writes;
 * docs.claude.com/en/docs/claude-code/mcp) claude-desktop
 * ~/.config/Claude/claude_desktop_config.json, "mcpServers": {NAME: {command, args, env}}
 * (modelcontextprotocol.io/quickstart/user) cursor          ~/.cursor/mcp.json, "mcpServers"
 * (docs.cursor.com/context/mcp) vscode          ~/.config/Code/User/mcp.json (the user profile's
 * mcp.json), "servers": {NAME: {type: "stdio", command, args, env}}
 *                   (code.visualstudio.com/docs/copilot/reference/mcp-configuration)
 *   gemini          ~/.gemini/settings.json, "mcpServers" (gemini-cli docs/tools/mcp-server.md)
 *   opencode        ~/.config/opencode/opencode.json, "mcp": {NAME: {type: "local", command:
 *                   [cmd, args...], enabled: true, environment}} (opencode.ai/docs/mcp-servers)
 *   codex           ~/.codex/config.toml, [mcp_servers.NAME] command, args, env = {...}
 *                   (github.com/openai/codex docs/config.md)
 *
 * JSON files are parsed strictly (json-c JSON_TOKENER_STRICT): a file with comments or trailing
 * commas is refused, since rewriting it would silently drop them; so is one json-c would not
 * write back as it reads (an integer beyond 64 bits, a lone UTF-16 surrogate escape).
 * TOML is not parsed in full: a line scanner that follows strings, multi-line strings and
 * multi-line arrays finds the table headers, rewrites only the [mcp_servers.NAME] table (and
 * its [.env] sub-table, merged into it), and refuses a file where NAME is defined any other
 * way (dotted keys, an inline table), where mcp_servers itself is an inline table, or that it
 * cannot follow (an unterminated string, a header it cannot read). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

enum client_format {
        CLIENT_FORMAT_JSON_MCPSERVERS,  /* "mcpServers": {NAME: {command, args, env}} */
        CLIENT_FORMAT_JSON_CLAUDE_CODE, /* the same, with "type": "stdio" and args/env always */
        CLIENT_FORMAT_JSON_VSCODE,      /* "servers": {NAME: {type: "stdio", ...}} */
        CLIENT_FORMAT_JSON_OPENCODE,    /* "mcp": {NAME: {type: "local", command: [...], ...}} */
        CLIENT_FORMAT_TOML_CODEX,       /* [mcp_servers.NAME] */
};

struct client_info {
        const char *id;        /* "claude-code", as given on the command line */
        const char *title;     /* "Claude Code" */
        const char *home_path; /* default file below $HOME, or NULL */
        const char *xdg_path;  /* default file below $XDG_CONFIG_HOME (else ~/.config) */
        enum client_format format;
        bool gui; /* started from a desktop: may lack the shell's PATH */
};

/* The server entry to write. Strings are borrowed. */
struct client_server {
        const char *name;        /* [A-Za-z0-9_-], 1..64 bytes (clients_name_valid()) */
        const char *command;     /* an absolute path, or a program found on PATH ("npx") */
        const char *const *args; /* n_args arguments after the command */
        size_t n_args;
        const char *const *env; /* n_env "NAME=VALUE" strings, NAME [A-Z0-9_]+ */
        size_t n_env;
        /* install-client --wrap/--unwrap: in codex's TOML, replace only the values of "command"
         * and "args" and leave every other byte of the entry as written (env unused); the JSON
         * merge keeps the entry's other keys anyway */
        bool command_only;
};

/** clients_find() - the client called @id, or NULL. */
const struct client_info *clients_find(const char *id);

/** clients_ids() - the valid ids, comma separated ("claude-code, claude-desktop, ..."). */
const char *clients_ids(void);

/** clients_name_valid() - @name is 1..64 bytes of [A-Za-z0-9_-]. */
bool clients_name_valid(const char *name);

/**
 * clients_default_path() - @c's configuration file for a user whose home is @home.
 * @xdg_config_home: $XDG_CONFIG_HOME, or NULL/"" for ~/.config.
 * Return: a new string the caller frees.
 */
char *clients_default_path(const struct client_info *c, const char *home,
                           const char *xdg_config_home);

/**
 * clients_render() - the entry alone, as it goes into @c's file: for JSON a document holding
 * just the servers object ({"mcpServers": {NAME: {...}}}), for TOML the table.
 * Return: a new string the caller frees.
 */
char *clients_render(const struct client_info *c, const struct client_server *s);

/**
 * clients_merge() - @old_text with @s's entry added, or merged into one of that name: the old
 * entry's own settings stay (its env values @s does not set, and keys other than the command,
 * its args and "type"/"enabled"), @s's values win on the same name.
 * @old_text: the file's contents; NULL or only white space = no file yet.
 * @ret_text: on success with a change, the new contents (caller frees); NULL when the entry is
 *            already there exactly as it would be written (nothing to write).
 * @ret_kept: may be NULL; on success what was kept from the old entry, for the user
 *            ("env VESTIBULE_WORKSPACE, VESTIBULE_SECRETS; settings timeout"), or NULL for
 *            nothing (caller frees).
 * Return: 0, or -EINVAL when @old_text cannot be edited safely (not strict JSON, not an object,
 * the servers key not an object, TOML it cannot follow); @err says what and where.
 */
int clients_merge(const struct client_info *c, const char *old_text, const struct client_server *s,
                  char **ret_text, char **ret_kept, struct sbx_error *err);

/**
 * clients_install() - merge @s into the file at @path (see clients_merge()): read it (a missing
 * file is empty; a symlink, even a dangling one, is followed and its target edited), merge, and
 * when that changes anything first back up the old file (clients_backup() into @backup_dir),
 * then write the new contents to a temporary file in the target's folder with the old file's
 * mode (0600 for a new one) and rename() it into place, creating missing parent folders 0700.
 * Runs hold an flock(2) on the target's folder from the read to the rename, so concurrent runs
 * each see the other's entry. Refused, file untouched: a target that is not a regular file
 * (a FIFO, a device, a folder), one with no owner write bit (0400: the user made it read-only),
 * one with more than one hard link (rename() would split them), and -EPERM when another uid
 * than the effective one owns the target (or, when it does not exist yet, the nearest folder
 * above it that does) or the backup folder: root's run on a user's HOME (sudo -E) would leave
 * them root's. A sticky folder (/tmp) counts as ours.
 * @backup_dir: the folder for backups (created 0700), or NULL for beside @path.
 * @ret_backup: the backup's path when one was written (caller frees), else NULL. May be NULL.
 * @ret_kept: as for clients_merge(). May be NULL.
 * Return: 1 written, 0 already up to date (nothing touched), or -errno with @err; on any error
 * the file is untouched.
 */
int clients_install(const struct client_info *c, const char *path, const struct client_server *s,
                    const char *backup_dir, char **ret_backup, char **ret_kept,
                    struct sbx_error *err);

/**
 * clients_backup() - copy the file @path to "<folder>/<name>.vestibule-backup-<UTC
 * YYYYmmddTHHMMSS>" (".1", ".2"... when that exists), mode 0600, where <folder> is @backup_dir
 * (created 0700 with its parents) or, for NULL, @path's own folder.
 * @ret_backup: the copy's path (caller frees), or NULL when @path does not exist.
 * Return: 0 or -errno with @err; -EPERM when another uid owns @path or @backup_dir (see
 * clients_install()).
 */
int clients_backup(const char *path, const char *backup_dir, char **ret_backup,
                   struct sbx_error *err);

/**
 * clients_entry_equal_json() - the JSON file @text already holds @s for a client of @format.
 * Used for Claude Code, whose file `claude mcp add` writes: when it is already there the CLI is
 * not run at all. Return: true or false (false also for unreadable text).
 */
bool clients_entry_equal_json(const struct client_info *c, const char *text,
                              const struct client_server *s);

/**
 * clients_merged_env() - for Claude Code's CLI (`claude mcp add -e NAME=VALUE`): the env the
 * entry @s gets once merged into the JSON @old_text (see clients_merge()): @s's values, then the
 * old entry's values @s does not set.
 * @ret_env: a NULL-terminated array of new "NAME=VALUE" strings (caller frees each and it).
 * @ret_other: the old entry's other settings, which `claude mcp add` cannot carry
 *             ("timeout, trust"), or NULL (caller frees).
 * Source: `claude mcp add --help` (-e NAME=VALUE, repeatable), and
 * docs.claude.com/en/docs/claude-code/mcp.
 * Return: the number of strings in @ret_env.
 */
int clients_merged_env(const struct client_info *c, const char *old_text,
                       const struct client_server *s, char ***ret_env, char **ret_other);

/* The system whose client an entry is for (install-client --os). */
enum client_os { CLIENT_OS_LINUX, CLIENT_OS_MACOS, CLIENT_OS_WINDOWS };

/**
 * clients_os_path() - @c's configuration file on @os (paths.c): Linux as
 * clients_default_path() (@home, ~/.config); macOS below @home ("~" when NULL), e.g.
 * "<home>/Library/Application Support/Claude/claude_desktop_config.json"; Windows as the user
 * would type it, e.g. "%APPDATA%\Claude\claude_desktop_config.json" (not a path here).
 * Return: a new string the caller frees; NULL for a client with no known path on @os (only
 * claude-desktop, cursor, vscode and claude-code have macOS and Windows paths).
 */
char *clients_os_path(const struct client_info *c, enum client_os os, const char *home);

/**
 * clients_wsl_path() - from inside WSL, @c's configuration file on the Windows side, whose user
 * profile folder is @win_home as WSL mounts it ("/mnt/c/Users/<name>"): Claude Desktop's
 * "<win_home>/AppData/Roaming/Claude/claude_desktop_config.json", Cursor's
 * "<win_home>/.cursor/mcp.json".
 * @ret_path: the file (caller frees). @ret_folder: the folder that must already exist for the
 * Windows side to be reachable ("<win_home>/AppData/Roaming", or @win_home; caller frees).
 * Return: 0, or -1 (nothing set) for a client other than claude-desktop and cursor.
 */
int clients_wsl_path(const struct client_info *c, const char *win_home, char **ret_path,
                     char **ret_folder);
