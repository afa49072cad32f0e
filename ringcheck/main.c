/* ncclguard-ringcheck: proves the NCCL ring works on a pod's GPUs. */
#include "ringcheck/check.h"
#include "ringcheck/opts.h"
#include "ringcheck/supervisor.h"
#include "ringcheck/worker.h"

#include <stdio.h>
#include <string.h>

#include "version.h"

int
main(int argc, char **argv)
{
    struct rc_opts o;
    char err[256];

    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("ncclguard-ringcheck %s\n", NCCLGUARD_VERSION);
        return 0;
    }
    if (rc_opts_parse(argc, argv, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "ncclguard-ringcheck: %s\n", err);
        fprintf(stderr, "ncclguard-ringcheck: see --help\n");
        return RC_EXIT_USAGE;
    }
    if (o.help) {
        rc_opts_usage(stdout);
        return 0;
    }
    sv_init();
    return check_run(&o);
}
