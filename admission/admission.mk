# admission/: the admission core. AdmissionReview bytes and a policy in,
# response bytes and a log record out; no I/O, no locks. The server, the
# dry run and the policy tests all call it.
LIB_SRCS += admission/mutate.c admission/patch.c admission/review.c \
	admission/jsonmem.c admission/jobmember.c
UNIT_TESTS += patch patch_check mutate review jsonmem
# Every argument list the webhook injects goes through the ring check's own
# parser (it needs no CUDA).
$(BUILD)/tests/test_mutate: $(BUILD)/obj/ringcheck/opts.o

# The core's headers must stay includable from C++ (the parser's wrapper is
# C++): they compile alone as C++, and no C file of the product uses the
# keyword `namespace` as a name (tests/cxx/check.sh).
CXX_HEADERS := admission/mutate.h admission/review.h policy/policy.h
DEB_PKGS += g++

.PHONY: check-cxx-headers
check-cxx-headers:
	CXX="$(CXX)" CPPFLAGS="-I. $(PKG_CFLAGS)" sh tests/cxx/check.sh \
		$(CXX_HEADERS)

CHECKS += check-cxx-headers
