/* ncclguard policy: placeholder until the module lands (replaced by its owner). */
#include "cmd.h"

#include <stdio.h>

int
cmd_policy(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "ncclguard policy: not built yet\n");
    return 1;
}
