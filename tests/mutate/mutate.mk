# tests/mutate/: what `ncclguard mutate` says about objects it cannot
# mutate, not-GPU pods, DRA pods, and its summary lines.
.PHONY: check-mutate-messages
check-mutate-messages: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard bash tests/mutate/check.sh

CHECKS += check-mutate-messages

# tests/cli/: help texts and usage errors of every subcommand.
.PHONY: check-cli
check-cli: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard bash tests/cli/check.sh

CHECKS += check-cli
