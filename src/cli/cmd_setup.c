/* cmd_setup.c - `vestibule-mcp setup`: src/setup does the work (setup_main(), or
 * setup_apparmor() for `setup --apparmor`), and ends with doctor's readiness line (passed down
 * from here: doctor sits above setup). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "doctor/doctor.h"
#include "setup/setup.h"

int cmd_setup(int argc, char **argv)
{
        struct sbx_error err = {0};

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--apparmor") != 0)
                        continue;
                if (argc != 2) {
                        fprintf(stderr, "setup: --apparmor goes alone\n");
                        return 2;
                }
                if (setup_apparmor(stdout, &err) < 0) {
                        fprintf(stderr, "setup: %s\n", err.msg);
                        return 1;
                }
                return 0;
        }
        return setup_main(argc, argv, doctor_readiness_print);
}
