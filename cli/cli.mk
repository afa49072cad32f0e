# cli/: the ncclguard command line: the dispatcher (main.c), `mutate` (the
# dry run over workload files), `policy lint|test` and `certs`.
LIB_SRCS += cli/mutate_cmd.c cli/workload.c cli/yamljson.c cli/policytest.c \
	cli/policy_cmd.c cli/certs_cmd.c
UNIT_TESTS += yamljson workload
# The corpus check reads the dry run's JSON with jq; kubectl comes from the
# machine (make deps warns when it is missing).
DEB_PKGS += jq

# Every upstream GPU manifest in tests/data/corpus through `ncclguard
# mutate`, kubectl and (once it exists) `ncclguard serve`.
.PHONY: check-corpus
check-corpus: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard tests/corpus/check.sh

CHECKS += check-corpus
