# server/: the webhook, the dry run and their checks.
LIB_SRCS += server/serve.c server/mutate_cmd.c server/mutate.c \
	server/patch.c server/review.c server/workload.c server/yamljson.c \
	server/jsonmem.c server/jobmember.c
UNIT_TESTS += patch patch_check mutate review yamljson workload jsonmem
# Every argument list the webhook injects goes through the ring check's own
# parser (it needs no CUDA).
$(BUILD)/tests/test_mutate: $(BUILD)/obj/ringcheck/opts.o
# The corpus check reads the dry run's JSON with jq; kubectl comes from the
# machine (make deps warns when it is missing).
DEB_PKGS += jq

# Every upstream GPU manifest in tests/data/corpus through `ncclguard
# mutate`, kubectl and (once it exists) `ncclguard serve`.
.PHONY: check-corpus
check-corpus: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard tests/corpus/check.sh

CHECKS += check-corpus
