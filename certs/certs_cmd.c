/* ncclguard certs: placeholder until the module lands (replaced by its owner). */
#include "cmd.h"

#include <stdio.h>

int
cmd_certs(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "ncclguard certs: not built yet\n");
    return 1;
}
