# ringcheck/: the init-container binary (needs CUDA and NCCL under CUDA_HOME)
# and its CUDA/NCCL test double (tests/fakes) and integration tests.
#
#   make ringcheck          build $(BUILD)/ncclguard-ringcheck and the double
#   make check-ringcheck    run tests/ringcheck against the double
RC_SRCS := ringcheck/main.c ringcheck/opts.c ringcheck/proto.c \
	ringcheck/worker.c ringcheck/supervisor.c ringcheck/check.c \
	ringcheck/report.c ringcheck/netcheck.c ringcheck/topo.c \
	ringcheck/rendezvous.c ringcheck/multinode.c ringcheck/nccllog.c
RC_OBJS = $(RC_SRCS:%.c=$(BUILD)/obj/%.o)
# The NCCL catalog needs libc and base/text only: link their objects alone,
# not the library (which needs jansson, libyaml, ...).
RC_NCCLENV_OBJ = $(BUILD)/obj/contract/ncclenv.o $(BUILD)/obj/base/text.o

# CUDA comes from CUDA_HOME; NCCL from NCCL_HOME, CUDA_HOME, or the system
# (Debian/Ubuntu's libnccl-dev puts it in /usr/include and the multiarch
# library folder, as in the CUDA container images).
RC_COMMA := ,
RC_MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
RC_CUDART_DIR := $(patsubst %/,%,$(firstword $(dir $(wildcard \
	$(CUDA_HOME)/lib64/libcudart.so $(CUDA_HOME)/lib/libcudart.so))))
RC_NCCL_INC := $(patsubst %/,%,$(firstword $(dir $(wildcard \
	$(if $(NCCL_HOME),$(NCCL_HOME)/include/nccl.h) \
	$(CUDA_HOME)/include/nccl.h /usr/include/nccl.h))))
RC_NCCL_DIR := $(patsubst %/,%,$(firstword $(dir $(wildcard \
	$(if $(NCCL_HOME),$(NCCL_HOME)/lib/libnccl.so.2) \
	$(CUDA_HOME)/lib64/libnccl.so.2 $(CUDA_HOME)/lib/libnccl.so.2 \
	$(if $(RC_MULTIARCH),/usr/lib/$(RC_MULTIARCH)/libnccl.so.2) \
	/usr/lib64/libnccl.so.2))))
RC_HAVE_CUDA := $(and $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),$\
	$(RC_CUDART_DIR),$(RC_NCCL_INC),$(RC_NCCL_DIR))
RC_CUDA_CFLAGS := -isystem $(CUDA_HOME)/include \
	$(if $(filter-out $(CUDA_HOME)/include /usr/include,$(RC_NCCL_INC)),$\
	-isystem $(RC_NCCL_INC))
RC_LIBDIRS := $(sort $(RC_CUDART_DIR) $(RC_NCCL_DIR))
# RUNPATH, not RPATH, so that LD_LIBRARY_PATH (the test double) wins.
RC_CUDA_LIBS := $(addprefix -L,$(RC_LIBDIRS)) -Wl,--enable-new-dtags \
	$(addprefix -Wl$(RC_COMMA)-rpath$(RC_COMMA),$(filter-out /usr/lib/%,$\
	$(RC_LIBDIRS))) -lcudart -l:libnccl.so.2 -lcrypto

# The CUDA runtime's major version (12 or 13), from its header: the
# double's soname and symbol version follow it, as the real library's do
# (libcudart.so.12 with CUDA 12, libcudart.so.13 with CUDA 13).
RC_CUDA_MAJOR := $(shell sed -n 's/^\#define CUDART_VERSION *\([0-9]*\).*/\1/p' \
	$(CUDA_HOME)/include/cuda_runtime_api.h 2>/dev/null | \
	awk '{ print int($$1 / 1000) }')
RC_CUDART_SO := libcudart.so.$(RC_CUDA_MAJOR)
RC_FAKES = $(BUILD)/fakes/$(RC_CUDART_SO) $(BUILD)/fakes/libnccl.so.2
DEB_PKGS += jq shellcheck
# ringcheck/cuda-wheels.sh downloads the pinned wheels with pip.
DEB_PKGS += python3-pip

.PHONY: ringcheck check-ringcheck check-ringcheck-fast
all: ringcheck

ifneq ($(RC_HAVE_CUDA),)
ringcheck: $(BUILD)/ncclguard-ringcheck $(RC_FAKES)

$(RC_OBJS): ALL_CFLAGS += $(RC_CUDA_CFLAGS)

$(BUILD)/ncclguard-ringcheck: $(RC_OBJS) $(RC_NCCLENV_OBJ)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(RC_CUDA_LIBS) -lpthread -lm

# The test double: shared libraries with the real sonames. The runtime's
# symbols carry its version node, as the real library's do.
$(BUILD)/fakes/$(RC_CUDART_SO): tests/fakes/fake_cudart.c tests/fakes/fake.h \
		tests/fakes/libcudart.map
	@mkdir -p $(dir $@)
	sed 's/^libcudart\.so\.[0-9]* {/$(RC_CUDART_SO) {/' \
		tests/fakes/libcudart.map >$(BUILD)/fakes/libcudart.map
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -fPIC -shared \
		$(RC_CUDA_CFLAGS) -Itests/fakes -Wl,-soname,$(RC_CUDART_SO) \
		-Wl,--version-script=$(BUILD)/fakes/libcudart.map -o $@ $<

$(BUILD)/fakes/libnccl.so.2: tests/fakes/fake_nccl.c tests/fakes/fake.h \
		tests/fakes/fake_net.c tests/fakes/fake_net.h \
		tests/fakes/libnccl.map $(BUILD)/fakes/$(RC_CUDART_SO)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -fPIC -shared \
		$(RC_CUDA_CFLAGS) -Itests/fakes -Wl,-soname,libnccl.so.2 \
		-Wl,--version-script=tests/fakes/libnccl.map -o $@ \
		tests/fakes/fake_nccl.c tests/fakes/fake_net.c \
		-L$(BUILD)/fakes -l:$(RC_CUDART_SO) -lpthread

# A stranger on the rendezvous port, for the cross-node tests.
$(BUILD)/tests/rdv-client: $(BUILD)/obj/tests/ringcheck/rdv_client.o \
		$(BUILD)/obj/ringcheck/rendezvous.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ -lcrypto

check-ringcheck: ringcheck check-gpu-smoke-lint $(BUILD)/tests/rdv-client
	GPU_SMOKE_DOUBLE=$(abspath $(BUILD))/fakes \
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
		tests/ringcheck/gpu-smoke.sh
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	FAKES=$(abspath $(BUILD))/fakes SANITIZED="$(SAN)" \
		tests/ringcheck/run.sh
	$(MAKE) --no-print-directory check-ringcheck-multinode

# The cross-node cases alone (network namespaces; needs root), or only
# those whose name contains WORD: make check-ringcheck-mn-WORD.
.PHONY: check-ringcheck-multinode
check-ringcheck-multinode: ringcheck $(BUILD)/tests/rdv-client
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	RDV_CLIENT=$(abspath $(BUILD))/tests/rdv-client \
	FAKES=$(abspath $(BUILD))/fakes tests/ringcheck/multinode.sh

check-ringcheck-mn-%: ringcheck $(BUILD)/tests/rdv-client
	MN_ONLY='$*' RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	RDV_CLIENT=$(abspath $(BUILD))/tests/rdv-client \
	FAKES=$(abspath $(BUILD))/fakes tests/ringcheck/multinode.sh

# The single-pod cases only, stopping at the first failure: what make
# mutants runs for the ring check's own rules.
check-ringcheck-fast: ringcheck
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	FAKES=$(abspath $(BUILD))/fakes SANITIZED="$(SAN)" RINGCHECK_FAILFAST=1 \
		tests/ringcheck/run.sh
else
ringcheck:
	@echo "SKIP ncclguard-ringcheck build ($(BUILD)/ncclguard-ringcheck" \
		"not built: need CUDA_HOME=$(CUDA_HOME) with" \
		"include/cuda_runtime_api.h and lib64/libcudart.so, and NCCL 2" \
		"(nccl.h, libnccl.so.2) in NCCL_HOME, CUDA_HOME or the system)"

check-ringcheck check-ringcheck-fast:
	@echo "SKIP $@ (no CUDA runtime or NCCL found, so neither" \
		"the ring check nor its test double is built; see make ringcheck)"

check-ringcheck-multinode:
	@echo "SKIP check-ringcheck-multinode (no CUDA runtime or NCCL found," \
		"so neither the ring check nor its test double is built)"

check-ringcheck-mn-%:
	@echo "SKIP check-ringcheck-mn-$* (no CUDA runtime or NCCL found," \
		"so neither the ring check nor its test double is built)"
endif

CHECKS += check-ringcheck

# The check's CPU time and peak memory in a cgroup of its own (printed), and
# its run under a 100m and a 250m CPU quota: throttled, and ending with its
# own verdict (docs/ringcheck.md, Resources). No timing is asserted.
.PHONY: check-ringcheck-resources
ifneq ($(RC_HAVE_CUDA),)
check-ringcheck-resources: ringcheck
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck SANITIZED="$(SAN)" \
	FAKES=$(abspath $(BUILD))/fakes tests/ringcheck/resources.sh
else
check-ringcheck-resources:
	@echo "SKIP check-ringcheck-resources (no CUDA runtime or NCCL found)"
endif
CHECKS += check-ringcheck-resources

# The first run on real GPUs: about three minutes on a machine with NVIDIA
# GPUs (see docs/ringcheck.md); prints SKIP elsewhere. Not part of make
# test, which has no GPU; its script is linted there.
.PHONY: gpu-smoke check-gpu-smoke-lint
gpu-smoke: ringcheck
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
		tests/ringcheck/gpu-smoke.sh

check-gpu-smoke-lint:
	bash -n tests/ringcheck/gpu-smoke.sh
	bash -n tests/ringcheck/resources.sh
	@if command -v shellcheck >/dev/null; then \
		shellcheck tests/ringcheck/gpu-smoke.sh \
			tests/ringcheck/resources.sh && \
		echo "gpu-smoke.sh: bash -n and shellcheck clean"; \
	else echo "SKIP shellcheck of gpu-smoke.sh (shellcheck not installed)"; fi

# Unit tests of the ring check's libc-only modules (no CUDA needed): the
# worker protocol and the network preflight.
RC_UNIT_BINS = $(BUILD)/tests/test_rcproto $(BUILD)/tests/test_rcnetcheck \
	$(BUILD)/tests/test_rcpattern $(BUILD)/tests/test_rcnccllog \
	$(BUILD)/tests/test_rcreport

$(BUILD)/tests/test_rcproto: $(BUILD)/obj/tests/unit/test_rcproto.o \
		$(BUILD)/obj/ringcheck/proto.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^

$(BUILD)/tests/test_rcnetcheck: $(BUILD)/obj/tests/unit/test_rcnetcheck.o \
		$(BUILD)/obj/ringcheck/netcheck.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^

$(BUILD)/tests/test_rcnccllog: $(BUILD)/obj/tests/unit/test_rcnccllog.o \
		$(BUILD)/obj/ringcheck/nccllog.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^

# The report links what it writes with: the NCCL log's summary and
# base/text; jansson only reads the JSON back.
$(BUILD)/tests/test_rcreport: $(BUILD)/obj/tests/unit/test_rcreport.o \
		$(BUILD)/obj/ringcheck/report.o $(BUILD)/obj/ringcheck/nccllog.o \
		$(BUILD)/obj/base/text.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ -ljansson

$(BUILD)/tests/test_rcpattern: $(BUILD)/obj/tests/unit/test_rcpattern.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^

.PHONY: check-ringcheck-unit
check-ringcheck-unit: $(RC_UNIT_BINS)
	@for t in $(RC_UNIT_BINS); do echo "== $$t"; $$t || exit 1; done

CHECKS += check-ringcheck-unit

# The rendezvous protocol is libc-only: its unit test links it alone.
UNIT_TESTS += rendezvous
$(BUILD)/tests/test_rendezvous: $(BUILD)/obj/ringcheck/rendezvous.o
