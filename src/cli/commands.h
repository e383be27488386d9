/* commands.h - the subcommands' entry points (private to src/cli). Each lives in its own file,
 * cmd_<name>.c, so the helper that owns a command can replace that file alone. @argv[0] is the
 * subcommand's name; the return value is the process exit code (0 ok, 1 failed, 2 usage). */
#pragma once

#include <stdbool.h>

int cmd_run(int argc, char **argv);
/* `run [options] -- CMD [ARGS...]`: a host command in the host view (cmd_run_cmd.c). */
int cmd_run_command(int argc, char **argv);
/* `run`: cmd_run_command() when the arguments hold a "--", else cmd_run(). */
int cmd_run_any(int argc, char **argv);
/* `mcp wrap [options] -- SERVER`: a stdio MCP server in the run -- sandbox (cmd_mcp.c). */
int cmd_mcp(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_setup(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_install_client(int argc, char **argv);

/** cli_is_help() - @arg is -h or --help. */
bool cli_is_help(const char *arg);

/**
 * cli_opt_value() - whether @argv[*@i] (of @argc) is the option @lng ("--timeout") or its short
 * form @shrt ("-t"; NULL = none) with a value: "--opt VALUE", "--opt=VALUE" or "-o VALUE". Then
 * *@ret points at the value (inside @argv, borrowed) and *@i at its last word.
 * Return: 1 matched, 0 not this option (nothing changed), -1 its value is missing (the last word).
 */
int cli_opt_value(int argc, char **argv, int *i, const char *lng, const char *shrt,
                  const char **ret);
