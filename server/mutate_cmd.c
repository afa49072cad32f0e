/* ncclguard mutate: placeholder until the module lands (replaced by its owner). */
#include "cmd.h"

#include <stdio.h>

int
cmd_mutate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "ncclguard mutate: not built yet\n");
    return 1;
}
