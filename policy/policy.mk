# policy/: YAML rule engine, quantities, NCCL catalog, policy lint/test.
LIB_SRCS += policy/error.c policy/diag.c policy/quantity.c policy/ytree.c \
	policy/match.c policy/ncclenv.c policy/policy.c policy/policy_cmd.c
UNIT_TESTS += quantity policy
