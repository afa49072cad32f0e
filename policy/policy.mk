# policy/: YAML rule engine, quantities, NCCL catalog, policy lint/test.
LIB_SRCS += policy/error.c policy/policy_cmd.c
