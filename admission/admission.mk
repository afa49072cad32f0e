# admission/: the admission core. AdmissionReview bytes and a policy in,
# response bytes and a log record out; no I/O, no locks. The server, the
# dry run and the policy tests all call it.
LIB_SRCS += admission/mutate.c admission/patch.c admission/review.c \
	admission/jsonmem.c admission/jobmember.c
UNIT_TESTS += patch patch_check mutate review jsonmem
# Every argument list the webhook injects goes through the ring check's own
# parser (it needs no CUDA).
$(BUILD)/tests/test_mutate: $(BUILD)/obj/ringcheck/opts.o
