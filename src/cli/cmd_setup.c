/* cmd_setup.c - `vestibule-mcp setup`: src/setup does the work (issue 3). */
#include "cli/commands.h"
#include "setup/setup.h"

int cmd_setup(int argc, char **argv)
{
        return setup_main(argc, argv);
}
