/* help.c - what every command's option loop shares (apart from cli.c, which dispatches to the
 * commands: they call this, not back into it). */
#include <string.h>

#include "cli/commands.h"

bool cli_is_help(const char *arg)
{
        return arg && (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0);
}

int cli_opt_value(int argc, char **argv, int *i, const char *lng, const char *shrt,
                  const char **ret)
{
        const char *a = argv[*i];
        size_t n = strlen(lng);

        if (strncmp(a, lng, n) == 0 && a[n] == '=') {
                *ret = a + n + 1;
                return 1;
        }
        if (strcmp(a, lng) != 0 && (!shrt || strcmp(a, shrt) != 0))
                return 0;
        if (*i + 1 >= argc)
                return -1;
        *ret = argv[++*i];
        return 1;
}
