# admission/: the admission core. AdmissionReview bytes and a policy in,
# response bytes and a log record out; no I/O, no locks. The server, the
# dry run and the policy tests all call it.
LIB_SRCS += admission/mutate.c admission/patch.c admission/review.c \
	admission/plan.c admission/plan_names.c admission/plan_gpus.c \
	admission/plan_env.c admission/plan_shm.c admission/plan_ipc.c \
	admission/plan_watchdog.c admission/plan_ringcheck.c admission/plan_emit.c \
	admission/jsonmem.c admission/jobmember.c admission/jsonwrite.c
UNIT_TESTS += patch patch_check mutate review jsonmem fastjson
# Multi-node job membership: gangs and the job token.
UNIT_TESTS += jobmember
# Every argument list the webhook injects goes through the ring check's own
# parser (it needs no CUDA).
$(BUILD)/tests/test_mutate: $(BUILD)/obj/ringcheck/opts.o
# test_mutate fails libc's allocations of the core in turn (out of memory
# at each one) through link-time wraps of the core's calls.
MUTATE_TEST_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
$(BUILD)/tests/test_mutate: $(BUILD)/obj/tests/unit/test_mutate.o \
		$(BUILD)/obj/ringcheck/opts.o $(BUILD)/libncclguard.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(MUTATE_TEST_WRAP) -o $@ $^ $(LDLIBS)

# test_fastjson fails the decoder's allocations in turn the same way.
$(BUILD)/tests/test_fastjson: $(BUILD)/obj/tests/unit/test_fastjson.o \
		$(BUILD)/libncclguard.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(MUTATE_TEST_WRAP) -o $@ $^ $(LDLIBS)

# The core's headers must stay includable from C++ (the parser's wrapper is
# C++): they compile alone as C++, and no C file of the product uses the
# keyword `namespace` as a name (tests/cxx/check.sh).
CXX_HEADERS := admission/mutate.h admission/review.h policy/policy.h

.PHONY: check-cxx-headers
check-cxx-headers:
	CXX="$(CXX_FOR_CC)" CPPFLAGS="-I. $(PKG_CFLAGS)" sh tests/cxx/check.sh \
		$(CXX_HEADERS)

CHECKS += check-cxx-headers

# The review decoder is the one C++ file: it wraps simdjson (Debian's
# libsimdjson-dev) behind the C header admission/fastjson.h. It is always
# optimised (simdjson's templates are slow at -O0), never throws
# (-fno-exceptions: simdjson's error-code API only), and goes into the
# library next to the C objects ($^ of the archive rule takes it).
DEB_PKGS += libsimdjson-dev g++
LDLIBS += -lsimdjson -lstdc++
CXX_FOR_CC = $(if $(findstring clang,$(CC)),clang++,g++)
FASTJSON_CXXFLAGS = -std=c++17 -fno-exceptions -fno-rtti \
	$(filter-out -Wmissing-prototypes,$(WARN)) $(CFLAGS) -O2 $(SAN) -I. \
	$(PKG_CFLAGS) -MMD -MP

$(BUILD)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX_FOR_CC) $(FASTJSON_CXXFLAGS) -c -o $@ $<

$(BUILD)/libncclguard.a: $(BUILD)/obj/admission/fastjson.o
