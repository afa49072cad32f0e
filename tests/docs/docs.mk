# tests/docs/: every example in README.md and docs/*.md is linted, dry-run,
# rendered or run (see tests/docs/check.sh for the markers).
.PHONY: check-docs
# The docs run every program they show: ncclguard-watchdog and
# ncclguard-nodeloop too (docs/watchdog.md, docs/nodeloop.md), and the
# blocks marked <!-- on the test apiserver --> need the control plane of
# tests/kube.
check-docs: $(BUILD)/ncclguard $(BUILD)/ncclguard-watchdog \
		$(BUILD)/ncclguard-nodeloop kube
	NCCLGUARD=$(abspath $(BUILD))/ncclguard bash tests/docs/check.sh

CHECKS += check-docs
