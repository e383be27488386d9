/* cmd_setup.c - `vestibule-mcp setup`: a placeholder until issue 3 brings it. */
#include "cli/commands.h"

int cmd_setup(int argc, char **argv)
{
        return cli_not_available("setup", 3, argc, argv,
                                 "Usage: vestibule-mcp setup\n\n"
                                 "Get what this machine can use to run sandboxes (root\n"
                                 "filesystems or images), then run the same check a first call\n"
                                 "makes. (Not available yet: see issue 3.)\n");
}
