/* cmd_setup.c - `vestibule-mcp setup`: src/setup does the work (setup_main()), and ends with
 * doctor's readiness line (passed down from here: doctor sits above setup). */
#include "cli/commands.h"
#include "doctor/doctor.h"
#include "setup/setup.h"

int cmd_setup(int argc, char **argv)
{
        return setup_main(argc, argv, doctor_readiness_print);
}
