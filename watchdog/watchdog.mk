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

# The library last: the node loop reads the webhook's policy through it
# (policy_load, policy_quarantine; policy/policy.mk lists its objects).
# --as-needed keeps the libraries the agent never calls (libmicrohttpd,
# GnuTLS, simdjson, libstdc++) out of its NEEDED entries, which
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

# --- node loop (docs/nodeloop.md): classification, node state, the API
# client, and its checks against a fake API server (tests/nodeloop).
NL_SRCS := watchdog/nodeclass.c watchdog/nodestate.c watchdog/kube.c \
	watchdog/nodeloop.c
$(BUILD)/ncclguard-watchdog: $(NL_SRCS:%.c=$(BUILD)/obj/%.o)
WD_LIBS += -lpthread
.PHONY: check-nodeloop
# nodejs only: some machines' nodejs package ships npm itself and conflicts
# with Debian's npm package, so npm is installed below only when missing.
DEB_PKGS += nodejs
# The CEL evaluator that checks the ValidatingAdmissionPolicies
# (tests/nodeloop/vap.cjs), from the npm registry into the build folder; a
# failed install is a SKIP there, not a build failure.
NL_CEL := $(BUILD)/npm/node_modules/@bufbuild/cel/package.json
$(NL_CEL):
	@command -v npm >/dev/null || { sudo=""; [ "$$(id -u)" -eq 0 ] || \
		sudo=sudo; DEBIAN_FRONTEND=noninteractive $$sudo apt-get install \
		-y -q --no-install-recommends npm; } || true
	-npm install --silent --no-audit --no-fund --prefix $(BUILD)/npm \
		@bufbuild/cel@0.6.1
check-nodeloop: watchdog ringcheck $(NL_CEL)
	CEL_MODULES=$(abspath $(BUILD))/npm/node_modules \
	WATCHDOG=$(abspath $(BUILD))/ncclguard-watchdog \
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	FAKES=$(abspath $(BUILD))/fakes SANITIZED="$(SAN)" \
		tests/nodeloop/run.sh
CHECKS += check-nodeloop
# Some cases alone, by tag (tests/nodeloop/run.sh): for example
# make check-nodeloop-classify, make check-nodeloop-quarantine+validation+vap.
check-nodeloop-%: watchdog ringcheck $(NL_CEL)
	NODELOOP_CASES="$(subst +, ,$*)" \
	CEL_MODULES=$(abspath $(BUILD))/npm/node_modules \
	WATCHDOG=$(abspath $(BUILD))/ncclguard-watchdog \
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	FAKES=$(abspath $(BUILD))/fakes SANITIZED="$(SAN)" \
		tests/nodeloop/run.sh
