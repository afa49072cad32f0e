# ringcheck/: the init-container binary (needs CUDA and NCCL under CUDA_HOME)
# and its CUDA/NCCL test double (tests/fakes) and integration tests.
#
#   make ringcheck          build $(BUILD)/ncclguard-ringcheck and the double
#   make check-ringcheck    run tests/ringcheck against the double
RC_SRCS := ringcheck/main.c ringcheck/opts.c ringcheck/proto.c \
	ringcheck/worker.c ringcheck/supervisor.c ringcheck/check.c \
	ringcheck/report.c
RC_OBJS = $(RC_SRCS:%.c=$(BUILD)/obj/%.o)
# The NCCL catalog is libc-only: link its object alone, not the library
# (which needs jansson, libyaml, ...).
RC_NCCLENV_OBJ = $(BUILD)/obj/policy/ncclenv.o

RC_COMMA := ,
RC_LIBDIRS := $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib)
RC_HAVE_CUDA := $(and $(wildcard $(CUDA_HOME)/include/nccl.h),$(wildcard \
	$(CUDA_HOME)/include/cuda_runtime_api.h),$(wildcard \
	$(addsuffix /libcudart.so,$(RC_LIBDIRS))),$(wildcard \
	$(addsuffix /libnccl.so.2,$(RC_LIBDIRS))))
RC_CUDA_CFLAGS := -isystem $(CUDA_HOME)/include
# RUNPATH, not RPATH, so that LD_LIBRARY_PATH (the test double) wins.
RC_CUDA_LIBS := $(addprefix -L,$(RC_LIBDIRS)) -Wl,--enable-new-dtags \
	$(addprefix -Wl$(RC_COMMA)-rpath$(RC_COMMA),$(RC_LIBDIRS)) \
	-lcudart -l:libnccl.so.2

RC_FAKES = $(BUILD)/fakes/libcudart.so.13 $(BUILD)/fakes/libnccl.so.2
DEB_PKGS += jq

.PHONY: ringcheck check-ringcheck
all: ringcheck

ifneq ($(RC_HAVE_CUDA),)
ringcheck: $(BUILD)/ncclguard-ringcheck $(RC_FAKES)

$(RC_OBJS): ALL_CFLAGS += $(RC_CUDA_CFLAGS)

$(BUILD)/ncclguard-ringcheck: $(RC_OBJS) $(RC_NCCLENV_OBJ)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(RC_CUDA_LIBS) -lpthread -lm

# The test double: shared libraries with the real sonames. The runtime's
# symbols carry its version node, as the real library's do.
$(BUILD)/fakes/libcudart.so.13: tests/fakes/fake_cudart.c tests/fakes/fake.h \
		tests/fakes/libcudart.map
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -fPIC -shared \
		$(RC_CUDA_CFLAGS) -Itests/fakes -Wl,-soname,libcudart.so.13 \
		-Wl,--version-script=tests/fakes/libcudart.map -o $@ $<

$(BUILD)/fakes/libnccl.so.2: tests/fakes/fake_nccl.c tests/fakes/fake.h \
		tests/fakes/libnccl.map $(BUILD)/fakes/libcudart.so.13
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -fPIC -shared \
		$(RC_CUDA_CFLAGS) -Itests/fakes -Wl,-soname,libnccl.so.2 \
		-Wl,--version-script=tests/fakes/libnccl.map -o $@ $< \
		-L$(BUILD)/fakes -l:libcudart.so.13 -lpthread

check-ringcheck: ringcheck
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	FAKES=$(abspath $(BUILD))/fakes SANITIZED="$(SAN)" \
		tests/ringcheck/run.sh
else
ringcheck:
	@echo "ringcheck: SKIPPED: CUDA runtime and NCCL 2 not found under" \
		"CUDA_HOME=$(CUDA_HOME) (need include/nccl.h, lib64/libcudart.so," \
		"lib64/libnccl.so.2); build/ncclguard-ringcheck not built"

check-ringcheck:
	@echo "check-ringcheck: SKIPPED: no CUDA/NCCL under CUDA_HOME=$(CUDA_HOME)"
endif

CHECKS += check-ringcheck
