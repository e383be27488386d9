/* cmd_setup.c - `vestibule-mcp setup`: src/setup does the work (setup_main()), and ends with
 * doctor's readiness line (handed in here: doctor sits above setup). */
#include "cli/commands.h"
#include "doctor/doctor.h"
#include "setup/setup.h"

int cmd_setup(int argc, char **argv)
{
        setup_readiness_hook = doctor_readiness_print;
        return setup_main(argc, argv);
}
