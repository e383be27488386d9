/* main.c - vestibule-mcp: serve MCP on stdio (no arguments) or run a subcommand. */
#include "cli/cli.h"

int main(int argc, char **argv)
{
        return cli_main(argc, argv);
}
