/* Entry points of the ncclguard subcommands; each returns the exit status. */
#ifndef NCCLGUARD_CMD_H
#define NCCLGUARD_CMD_H

int cmd_serve(int argc, char **argv);  /* server/serve.c */
int cmd_mutate(int argc, char **argv); /* cli/mutate_cmd.c */
int cmd_policy(int argc, char **argv); /* policy lint | test: policy/ */
int cmd_certs(int argc, char **argv);  /* certs/ */

#endif
