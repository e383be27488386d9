/* help.c - what every command's option loop shares (apart from cli.c, which dispatches to the
 * commands: they call this, not back into it). */
#include <string.h>

#include "cli/commands.h"

bool cli_is_help(const char *arg)
{
        return arg && (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0);
}
