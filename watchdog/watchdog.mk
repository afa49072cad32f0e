# watchdog/: the node agent build/ncclguard-watchdog (NVML through dlopen,
# /proc and cgroups, libcurl for the one Event POST), its fake NVML and its
# tests. No GPU is needed to build or test it.
#
#   make watchdog          build $(BUILD)/ncclguard-watchdog and the fakes
#   make check-watchdog    run tests/watchdog against real child processes
#   make check-watchdog-spin-hang   one case alone (make mutants names these)
#   make check-watchdog-failfast    every case, stopping at the first failure
#                          (WD_FAILFAST=1; the mutation sweep's narrowing)
UNIT_TESTS += wd_spec wd_cgroup wd_procfs wd_rule wd_ras
DEB_PKGS += libcurl4-openssl-dev python3

WD_SRCS := watchdog/main.c watchdog/agent.c watchdog/agent_judge.c \
	watchdog/agent_shm.c watchdog/agent_act.c watchdog/agent_event.c \
	watchdog/agent_hang.c watchdog/cgroup.c \
	watchdog/procfs.c watchdog/nvml.c watchdog/rule.c watchdog/event.c \
	watchdog/mserver.c watchdog/ras.c
WD_OBJS = $(WD_SRCS:%.c=$(BUILD)/obj/%.o)
WD_LIBS := $(shell pkg-config --libs libcurl jansson 2>/dev/null) -ldl -lpthread
WD_TESTBINS = $(BUILD)/fakes/libnvidia-ml.so.1 $(BUILD)/tests/wd_job \
	$(BUILD)/fakes/no_pidfd.so $(BUILD)/fakes/no_realloc.so

.PHONY: watchdog check-watchdog check-watchdog-failfast
all: watchdog
watchdog: $(BUILD)/ncclguard-watchdog $(WD_TESTBINS)

# The library last, for the base/ modules the agent calls (LIB_SRCS lists
# its objects). --as-needed keeps the libraries the agent never calls
# (libmicrohttpd, GnuTLS, simdjson, libstdc++) out of its NEEDED entries, which
# tests/deploy/check.sh holds against the image's runtime packages:
# without it the make asan link kept them all.
$(BUILD)/ncclguard-watchdog: $(WD_OBJS) $(BUILD)/obj/contract/wdspec.o \
		$(BUILD)/obj/base/error.o $(BUILD)/obj/base/buf.o \
		$(BUILD)/libncclguard.a
	$(CC) $(CFLAGS) $(SAN) -o $@ $(filter %.o,$^) $(filter %.a,$^) \
		-Wl,--as-needed $(WD_LIBS) $(LDLIBS)

# The unit tests of the agent's modules link their objects directly.
$(BUILD)/tests/test_wd_cgroup: $(BUILD)/obj/watchdog/cgroup.o
$(BUILD)/tests/test_wd_procfs: $(BUILD)/obj/watchdog/procfs.o
$(BUILD)/tests/test_wd_rule: $(BUILD)/obj/watchdog/rule.o
$(BUILD)/tests/test_wd_ras: $(BUILD)/obj/watchdog/ras.o

# The fake NVML: the real soname, scripted by a file (tests/fakes).
$(BUILD)/fakes/libnvidia-ml.so.1: tests/fakes/fake_nvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -fPIC -shared \
		-Wl,-soname,libnvidia-ml.so.1 -o $@ $< -lpthread

# An LD_PRELOAD that refuses pidfd_open(2): the agent's kill(2) fallback.
$(BUILD)/fakes/no_pidfd.so: tests/fakes/no_pidfd.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -fPIC -shared -o $@ $< -ldl

# An LD_PRELOAD that fails realloc(3) of one size: the agent out of memory.
$(BUILD)/fakes/no_realloc.so: tests/fakes/no_realloc.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -fPIC -shared -o $@ $< -ldl

# A stand-in training job: spins, sleeps, holds CLOSE_WAIT sockets,
# handles SIGUSR1 by writing a checkpoint file.
$(BUILD)/tests/wd_job: tests/watchdog/wd_job.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -o $@ $<

check-watchdog: watchdog $(BUILD)/ncclguard
	WATCHDOG=$(abspath $(BUILD))/ncclguard-watchdog \
	NCCLGUARD=$(abspath $(BUILD))/ncclguard \
	FAKE_NVML=$(abspath $(BUILD))/fakes/libnvidia-ml.so.1 \
	WD_JOB=$(abspath $(BUILD))/tests/wd_job SANITIZED="$(SAN)" \
		tests/watchdog/run.sh

# An explicit rule: make prefers it to the pattern rule below.
check-watchdog-failfast: watchdog $(BUILD)/ncclguard
	WATCHDOG=$(abspath $(BUILD))/ncclguard-watchdog \
	NCCLGUARD=$(abspath $(BUILD))/ncclguard \
	FAKE_NVML=$(abspath $(BUILD))/fakes/libnvidia-ml.so.1 \
	WD_JOB=$(abspath $(BUILD))/tests/wd_job SANITIZED="$(SAN)" \
	WD_FAILFAST=1 tests/watchdog/run.sh

check-watchdog-%: watchdog $(BUILD)/ncclguard
	WATCHDOG=$(abspath $(BUILD))/ncclguard-watchdog \
	NCCLGUARD=$(abspath $(BUILD))/ncclguard \
	FAKE_NVML=$(abspath $(BUILD))/fakes/libnvidia-ml.so.1 \
	WD_JOB=$(abspath $(BUILD))/tests/wd_job SANITIZED="$(SAN)" \
		tests/watchdog/run.sh $*

CHECKS += check-watchdog
