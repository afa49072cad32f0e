/* ncclguard: dispatches to the subcommands. */
#include "cli/cmd.h"
#include "version.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"serve", cmd_serve, "run the HTTPS admission webhook"},
    {"mutate", cmd_mutate, "dry run: show what the webhook does to files"},
    {"policy", cmd_policy, "lint or test a policy file"},
    {"certs", cmd_certs, "create and inspect webhook certificates"},
};

static void
usage(FILE *out)
{
    fprintf(out, "usage: ncclguard <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\nRun 'ncclguard <command> --help' for its options;\n"
                 "'ncclguard --version' prints the version.\n");
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("ncclguard %s\n", NCCLGUARD_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "ncclguard: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
