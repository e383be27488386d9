/* cmd_verify.c - `vestibule-mcp verify`: a placeholder until issue 6 brings it. */
#include "cli/commands.h"

int cmd_verify(int argc, char **argv)
{
        return cli_not_available("verify", 6, argc, argv,
                                 "Usage: vestibule-mcp verify\n\n"
                                 "Prove the isolation grade from outside the sandbox.\n"
                                 "(Not available yet: see issue 6.)\n");
}
