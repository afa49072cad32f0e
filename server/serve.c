/* ncclguard serve: placeholder until the module lands (replaced by its owner). */
#include "cmd.h"

#include <stdio.h>

int
cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "ncclguard serve: not built yet\n");
    return 1;
}
