# server/: the webhook, the dry run and their checks.
LIB_SRCS += server/serve.c server/mutate_cmd.c
