/* probe.c - a static helper that runs inside a sandbox and reports what it can see, one
 * "key=value" line per check, so tests compare it against a control run outside. Built
 * without sanitizers and statically, so it runs in any rootfs. Checks are added by the
 * backends' test suites; with no arguments it prints its uid. */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
        printf("uid=%d\n", (int)getuid());
        return 0;
}
