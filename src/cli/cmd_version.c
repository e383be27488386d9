/* cmd_version.c - `vestibule-mcp version`. */
#include <stdio.h>

#include "cli/commands.h"

int cmd_version(int argc, char **argv)
{
        for (int i = 1; i < argc; i++) {
                if (cli_is_help(argv[i])) {
                        puts("Usage: vestibule-mcp version\n\nPrint the version.");
                        return 0;
                }
                fprintf(stderr, "vestibule-mcp version: unexpected argument '%s'\n", argv[i]);
                return 2;
        }
        printf("vestibule-mcp %s\n", VESTIBULE_VERSION);
        return 0;
}
