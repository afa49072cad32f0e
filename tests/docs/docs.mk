# tests/docs/: every example in README.md and docs/*.md is linted, dry-run,
# rendered or run (see tests/docs/check.sh for the markers).
.PHONY: check-docs
check-docs: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard bash tests/docs/check.sh

CHECKS += check-docs
