# nodeloop/: the node loop build/ncclguard-nodeloop (docs/nodeloop.md):
# classification, node state, the API client, and its checks against a fake
# API server (tests/nodeloop). A program of its own beside the hang agent
# (watchdog/); it shares the agent's token reader (watchdog/event.c).
#
#   make nodeloop          build $(BUILD)/ncclguard-nodeloop
#   make check-nodeloop    run tests/nodeloop against a fake API server
#   make check-nodeloop-classify    some cases alone, by tag (below)
NL_SRCS := nodeloop/main.c nodeloop/loop.c nodeloop/metrics.c \
	nodeloop/node.c nodeloop/pods.c nodeloop/watch.c \
	nodeloop/nodeclass.c nodeloop/nodestate.c nodeloop/kube.c
NL_OBJS = $(NL_SRCS:%.c=$(BUILD)/obj/%.o)
NL_LIBS := $(shell pkg-config --libs libcurl jansson 2>/dev/null) -lpthread

.PHONY: nodeloop check-nodeloop
all: nodeloop
nodeloop: $(BUILD)/ncclguard-nodeloop

# The library last: the node loop reads the webhook's policy through it
# (policy_load, policy_quarantine; policy/policy.mk lists its objects).
# --as-needed keeps the libraries the loop never calls (libmicrohttpd,
# GnuTLS, simdjson, libstdc++) out of its NEEDED entries, which
# tests/deploy/check.sh holds against the image's runtime packages.
$(BUILD)/ncclguard-nodeloop: $(NL_OBJS) $(BUILD)/obj/watchdog/event.o \
		$(BUILD)/obj/contract/wdspec.o $(BUILD)/obj/base/error.o \
		$(BUILD)/obj/base/buf.o $(BUILD)/libncclguard.a
	$(CC) $(CFLAGS) $(SAN) -o $@ $(filter %.o,$^) $(filter %.a,$^) \
		-Wl,--as-needed $(NL_LIBS) $(LDLIBS)

# The node loop names itself (User-Agent) with the build's version.
$(BUILD)/obj/nodeloop/main.o: $(BUILD)/gen/version.h

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

# The hang agent runs once beside the loop (its metrics, one case), and the
# fake NVML it loads is built with it.
check-nodeloop: nodeloop watchdog ringcheck $(NL_CEL)
	CEL_MODULES=$(abspath $(BUILD))/npm/node_modules \
	NODELOOP=$(abspath $(BUILD))/ncclguard-nodeloop \
	WATCHDOG=$(abspath $(BUILD))/ncclguard-watchdog \
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	FAKES=$(abspath $(BUILD))/fakes SANITIZED="$(SAN)" \
		tests/nodeloop/run.sh
CHECKS += check-nodeloop
# Some cases alone, by tag (tests/nodeloop/run.sh): for example
# make check-nodeloop-classify, make check-nodeloop-quarantine+validation+vap.
check-nodeloop-%: nodeloop watchdog ringcheck $(NL_CEL)
	NODELOOP_CASES="$(subst +, ,$*)" \
	CEL_MODULES=$(abspath $(BUILD))/npm/node_modules \
	NODELOOP=$(abspath $(BUILD))/ncclguard-nodeloop \
	WATCHDOG=$(abspath $(BUILD))/ncclguard-watchdog \
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	FAKES=$(abspath $(BUILD))/fakes SANITIZED="$(SAN)" \
		tests/nodeloop/run.sh
