/* cli.h - the command line: no arguments serves MCP on stdio; subcommands setup, run, audit,
 * doctor, verify, version, install-client, each with --help. Returns the process exit code. */
#pragma once

int cli_main(int argc, char **argv);
