/* cmd_doctor.c - `vestibule-mcp doctor`: a placeholder until issue 6 brings it. */
#include "cli/commands.h"

int cmd_doctor(int argc, char **argv)
{
        return cli_not_available("doctor", 6, argc, argv,
                                 "Usage: vestibule-mcp doctor [--json]\n\n"
                                 "Say what each backend would give on this host, and why.\n"
                                 "(Not available yet: see issue 6.)\n");
}
