# tests/fuzz/: libFuzzer targets, corpus replay, make fuzz, make valgrind.
#
# Each target tests/fuzz/fuzz_X.c defines LLVMFuzzerTestOneInput. It is
# built twice: by `make fuzz` with clang and libFuzzer, and by every build
# (any $(CC), with $(SAN) under make asan) as $(BUILD)/fuzz/replay_X, which
# runs the seed corpus tests/fuzz/corpus/X/ in check-fuzz-replay.

DEB_PKGS += valgrind jq

# A target is built once the module it fuzzes is in the library.
FUZZ_ALL := quantity policy review yaml pem wdspec
fuzz_needs_quantity := policy/quantity.c
fuzz_needs_policy := policy/policy.c
fuzz_needs_review := admission/review.c
fuzz_needs_yaml := cli/yamljson.c cli/workload.c
fuzz_needs_pem := server/tlspair.c
fuzz_needs_wdspec := contract/wdspec.c
FUZZ_TARGETS := $(foreach t,$(FUZZ_ALL),$(if $(filter-out \
	$(LIB_SRCS),$(fuzz_needs_$(t))),,$(t)))

# Targets of modules that are not in the library (the node agent's, the
# ring check's): each links its modules' objects, listed in fuzz_objs_X,
# and is built once those sources are in the tree.
FUZZ_OBJ_ALL := ras nccllog rcproto rendezvous nodeclass nodeloop
fuzz_objs_ras := watchdog/ras.c
fuzz_objs_nccllog := ringcheck/nccllog.c
fuzz_objs_rcproto := ringcheck/proto.c
fuzz_objs_rendezvous := ringcheck/rendezvous.c
fuzz_objs_nodeclass := nodeloop/nodeclass.c
# fuzz_nodeloop.c includes the node loop's files itself (its list and watch
# decoding is file-local) and answers its API requests in place of kube.c.
fuzz_objs_nodeloop := nodeloop/nodeclass.c nodeloop/nodestate.c
fuzz_libs_rendezvous := -lcrypto
fuzz_libs_nodeloop := $(shell pkg-config --libs libcurl 2>/dev/null)
FUZZ_OBJ_TARGETS := $(foreach t,$(FUZZ_OBJ_ALL),$(if $(filter-out \
	$(wildcard $(fuzz_objs_$(t)) tests/fuzz/fuzz_$(t).c),$\
	$(fuzz_objs_$(t)) tests/fuzz/fuzz_$(t).c),,$(t)))
$(foreach t,$(FUZZ_OBJ_TARGETS),$(eval $$(BUILD)/fuzz/replay_$(t) \
	$$(BUILD)/fuzz/fuzz_$(t): $(fuzz_objs_$(t):%.c=$$(BUILD)/obj/%.o)))
FUZZ_TARGETS += $(FUZZ_OBJ_TARGETS)

# Extra seed directories replayed and fuzzed along with corpus/X/.
fuzz_seeds_yaml := tests/data/corpus/manifests
fuzz_seeds_review := tests/bad-inputs

FUZZ_SECONDS ?= 60
FUZZ_BUILD := build-fuzz
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=all -fno-omit-frame-pointer

REPLAY_BINS = $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)

$(BUILD)/fuzz/replay_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o \
		$(BUILD)/obj/tests/fuzz/replay.o $(BUILD)/libncclguard.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $(filter %.o,$^) $(filter %.a,$^) \
		$(LDLIBS) $(fuzz_libs_$*)

# libFuzzer binaries: only inside `make fuzz`, where SAN has fuzzer-no-link.
$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/libncclguard.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -fsanitize=fuzzer -o $@ $(filter %.o,$^) \
		$(filter %.a,$^) $(LDLIBS) $(fuzz_libs_$*)

# One target's replay: seeds and regression inputs, under $(SAN) if any.
fuzz_replay_one = $(BUILD)/fuzz/replay_$(1) tests/fuzz/corpus/$(1) \
	$(fuzz_seeds_$(1)) || { echo "check-fuzz-replay: fuzz_$(1) failed;" \
	"rerun with: $(BUILD)/fuzz/replay_$(1) -v tests/fuzz/corpus/$(1)"; \
	exit 1; }

.PHONY: check-fuzz-replay fuzz-bins
check-fuzz-replay: $(REPLAY_BINS)
	@$(foreach t,$(FUZZ_TARGETS),$(call fuzz_replay_one,$(t));) \
		echo "check-fuzz-replay: replayed targets: $(strip $(FUZZ_TARGETS))"

CHECKS += check-fuzz-replay

fuzz-bins: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)

# One libFuzzer run: new inputs go to build-fuzz/corpus/X (the checked-in
# seeds stay small), crashes to build-fuzz/artifacts/X/.
fuzz_run_one = mkdir -p $(FUZZ_BUILD)/corpus/$(1) \
	$(FUZZ_BUILD)/artifacts/$(1); echo "== fuzz_$(1) for $(FUZZ_SECONDS)s"; \
	$(FUZZ_BUILD)/fuzz/fuzz_$(1) -max_total_time=$(FUZZ_SECONDS) \
	-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix=$(FUZZ_BUILD)/artifacts/$(1)/ \
	$(if $(wildcard tests/fuzz/$(1).dict),-dict=tests/fuzz/$(1).dict) \
	$(FUZZ_BUILD)/corpus/$(1) tests/fuzz/corpus/$(1) $(fuzz_seeds_$(1)) \
	2>$(FUZZ_BUILD)/fuzz_$(1).log || rc=1; \
	grep -E '^(INFO: seed corpus|stat::number_of_executed_units|stat::new_units_added|SUMMARY|==[0-9]+==ERROR)' \
	$(FUZZ_BUILD)/fuzz_$(1).log || true

# Runs every target for FUZZ_SECONDS; fails when any of them crashed.
fuzz: deps
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang CFLAGS="-O1 -g" \
		SAN="$(FUZZ_SAN)" fuzz-bins
	@rc=0; $(foreach t,$(FUZZ_TARGETS),$(call fuzz_run_one,$(t));) \
	found=$$(find $(FUZZ_BUILD)/artifacts -type f | sort); \
	if [ -n "$$found" ]; then \
		echo "make fuzz: crashes (fix, then add each to tests/fuzz/corpus/<target>/):"; \
		echo "$$found"; exit 1; fi; \
	[ $$rc -eq 0 ] || { echo "make fuzz: a target failed, see $(FUZZ_BUILD)/fuzz_*.log"; exit 1; }; \
	echo "make fuzz: no crashes in $(strip $(FUZZ_TARGETS)) ($(FUZZ_SECONDS)s each)"

# Bad request bodies against a real server (tests/bad-inputs/cases.tsv);
# part of `make test` once the HTTPS server is in the tree.
.PHONY: check-bad-inputs
check-bad-inputs: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard tests/bad-inputs/check.sh

ifneq ($(wildcard tests/integration/lib.sh),)
CHECKS += check-bad-inputs
endif

# make valgrind: memcheck with leak checking over the unit tests, the corpus
# replays, and every other check with build-valgrind/ncclguard replaced by
# a wrapper that runs the real binary under valgrind (the server flows of
# the integration and bad-input checks included). Each process writes
# build-valgrind/vg/<pid>.log; any error or definite/indirect leak fails.
# The wrapper turns the per-request JSON arena off (NCCLGUARD_JSON_ARENA=0)
# so that memcheck sees every jansson value; make asan keeps the arena on,
# with ASan poisoning (admission/jsonmem.c), so the production allocator runs
# under a memory checker too.
VG_BUILD := build-valgrind
VG := valgrind --tool=memcheck --leak-check=full \
	--show-leak-kinds=definite,indirect \
	--errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
	--track-origins=no --num-callers=30 \
	--suppressions=$(CURDIR)/tests/fuzz/valgrind.supp
VG_CHECKS = $(filter-out check-unit check-fuzz-replay,$(CHECKS))

.PHONY: valgrind valgrind-run
valgrind: deps
	$(MAKE) BUILD=$(VG_BUILD) CFLAGS="-O1 -g" all ringcheck \
		$(UNIT_TESTS:%=$(VG_BUILD)/tests/test_%) \
		$(FUZZ_TARGETS:%=$(VG_BUILD)/fuzz/replay_%)
	$(MAKE) BUILD=$(VG_BUILD) CFLAGS="-O1 -g" valgrind-run

valgrind-run:
	@rm -rf $(BUILD)/vg && mkdir -p $(BUILD)/vg
	@set -e; for t in $(UNIT_TESTS); do echo "== valgrind test_$$t"; \
		$(VG) --log-file=$(BUILD)/vg/test_$$t.%p.log \
			$(BUILD)/tests/test_$$t >$(BUILD)/vg/test_$$t.out 2>&1 || { \
			cat $(BUILD)/vg/test_$$t.out; exit 1; }; \
		tail -1 $(BUILD)/vg/test_$$t.out; done
	@set -e; $(foreach t,$(FUZZ_TARGETS),echo "== valgrind replay_$(t)"; \
		$(VG) --log-file=$(BUILD)/vg/replay_$(t).%p.log \
		$(BUILD)/fuzz/replay_$(t) tests/fuzz/corpus/$(t) $(fuzz_seeds_$(t));)
	@head -c 2 $(BUILD)/ncclguard | grep -q '#!' || \
		mv $(BUILD)/ncclguard $(BUILD)/ncclguard.real
	@printf '#!/bin/sh\nNCCLGUARD_JSON_ARENA=0 exec %s --log-file=%s/vg/ncclguard.%%p.log %s/ncclguard.real "$$@"\n' \
		"$(VG)" "$(abspath $(BUILD))" "$(abspath $(BUILD))" \
		>$(BUILD)/ncclguard && chmod +x $(BUILD)/ncclguard
	@echo "== valgrind over: $(strip $(VG_CHECKS))"
	@rc=0; $(if $(strip $(VG_CHECKS)),$(MAKE) BUILD=$(BUILD) \
		CFLAGS="$(CFLAGS)" NCCLGUARD_START_TIMEOUT=300 \
		$(VG_CHECKS) || rc=1;) \
	mv $(BUILD)/ncclguard.real $(BUILD)/ncclguard; \
	bad=$$(grep -lE 'ERROR SUMMARY: [1-9]|definitely lost: [1-9]|indirectly lost: [1-9]' \
		$(BUILD)/vg/*.log 2>/dev/null); \
	n=$$(ls $(BUILD)/vg/*.log 2>/dev/null | wc -l); \
	if [ -n "$$bad" ]; then echo "make valgrind: errors or leaks in:"; \
		for f in $$bad; do echo "--- $$f"; grep -A30 -E '^==[0-9]+== (Invalid|Conditional|Syscall|Mismatched|.*definitely lost in|.*indirectly lost in)' $$f | head -60; done; rc=1; fi; \
	[ $$rc -eq 0 ] || { echo "make valgrind: FAILED"; exit 1; }; \
	echo "make valgrind: $$n processes checked, no memcheck errors, no leaks"
