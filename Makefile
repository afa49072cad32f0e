# ncclguard build: one plain Makefile; each folder adds its part in a fragment.
#
#   make            build build/ncclguard (and build/ncclguard-ringcheck when
#                   CUDA and NCCL are found under CUDA_HOME)
#   make deps       install the Debian packages the build and tests need
#   make run        deps + build + throwaway certs + serve on 127.0.0.1:8443
#   make test       deps + build + every check
#   make asan       the whole suite again under ASan and UBSan
#   make valgrind   unit and integration suites under memcheck
#   make fuzz       run each libFuzzer target for FUZZ_SECONDS
#   make bench      benchmark against nginx (see bench/)
#   make mutants    break the product on purpose; every change must fail a test
#   make format / make lint

CUDA_HOME ?= /usr/local/cuda
BUILD ?= build
CC ?= cc
CFLAGS ?= -O2 -g
SAN ?=

PKGS := libmicrohttpd jansson yaml-0.1 openssl gnutls
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN := -Wall -Wextra -Wshadow -Wmissing-prototypes -Werror
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) \
	-Ipolicy -Iserver -Icerts -Iwatchdog -Itests/unit $(PKG_CFLAGS) -MMD -MP
LDLIBS := $(PKG_LIBS) -lpthread -lm

# Debian packages the build and the test suite need. Fragments append.
DEB_PKGS := pkg-config libmicrohttpd-dev libjansson-dev libyaml-dev \
	libssl-dev libgnutls28-dev gnutls-bin openssl curl clang \
	libclang-rt-14-dev

# Fragments append to these:
#   LIB_SRCS     sources linked into build/libncclguard.a (not main.c)
#   UNIT_TESTS   names X of tests/unit/test_X.c, linked with the library
#   CHECKS       phony targets that `make test` runs, in order
LIB_SRCS :=
UNIT_TESTS :=
CHECKS :=

.PHONY: all deps run test check asan valgrind fuzz bench format lint clean

all: $(BUILD)/ncclguard

include policy/policy.mk
include server/server.mk
include server/http.mk
include certs/certs.mk
include deploy/deploy.mk
include ringcheck/ringcheck.mk
include watchdog/watchdog.mk
include tests/fuzz/fuzz.mk
include bench/bench.mk
include tests/tests.mk
include tests/mutants/mutants.mk

LIB_OBJS = $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/libncclguard.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/ncclguard: $(BUILD)/obj/server/main.o $(BUILD)/libncclguard.a
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/test_%: $(BUILD)/obj/tests/unit/test_%.o $(BUILD)/libncclguard.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

deps:
	@missing=""; \
	for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
			grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make deps: installing$$missing"; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q \
			--no-install-recommends $$missing; \
	else \
		echo "make deps: all Debian packages present"; \
	fi
	@command -v kubectl >/dev/null || \
		echo "make deps: warning: kubectl not found; corpus checks need it"

# `test` and `run` re-enter make after deps so that pkg-config sees the
# libraries that deps may just have installed.
test: deps
	$(MAKE) all ringcheck
	$(MAKE) --no-print-directory check

# Each check runs in turn, even after one fails; the last line sums them
# up: "N passed, N failed, N skipped" (see tests/run-checks.sh; under
# CI=true a skip not in tests/skips.allow fails the run).
check:
	@tests/run-checks.sh $(BUILD)/checks "$(MAKE)" $(CHECKS)

ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
asan: deps
	$(MAKE) --no-print-directory BUILD=build-asan SAN="$(ASAN_FLAGS)" \
		CFLAGS="-O1 -g" \
		ASAN_OPTIONS=detect_leaks=1 all ringcheck check

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

lint:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability \
		--inline-suppr -Ipolicy -Iserver -Icerts \
		$$(git ls-files '*.c')

clean:
	rm -rf build build-asan build-fuzz build-valgrind

.SECONDARY:

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
