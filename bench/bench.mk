# bench/: make bench against nginx, make soak, make faults (none of them is
# part of make test). See bench/RESULTS.md for the numbers.
BENCH_DEB_PKGS := wrk nginx-light iproute2 procps util-linux

$(BUILD)/bench/ncclguard-loadgen: $(BUILD)/obj/bench/loadgen.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ -lssl -lcrypto -lpthread

# Allocations are counted by wrapping the library's allocator calls.
MICROBENCH_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc \
	-Wl,--wrap=free,--wrap=strdup,--wrap=strndup
$(BUILD)/bench/ncclguard-microbench: $(BUILD)/obj/bench/microbench.o \
		$(BUILD)/libncclguard.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(MICROBENCH_WRAP) -o $@ $^ $(LDLIBS)

BENCH_BINS = $(BUILD)/ncclguard $(BUILD)/bench/ncclguard-loadgen \
	$(BUILD)/bench/ncclguard-microbench
BENCH_ENV = NCCLGUARD=$(abspath $(BUILD))/ncclguard \
	LOADGEN=$(abspath $(BUILD))/bench/ncclguard-loadgen \
	MICROBENCH=$(abspath $(BUILD))/bench/ncclguard-microbench \
	BENCH_OUT=$(abspath $(BUILD))/bench \
	PEER=$(abspath $(BUILD))/tests/ncclguard-peer

# The load tools are installed here rather than by make deps: only the
# benchmark needs them.
.PHONY: bench-deps bench soak faults bench-hostile
bench-deps:
	@missing=""; for p in $(BENCH_DEB_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
			grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make bench: installing$$missing"; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q \
			--no-install-recommends $$missing; fi

bench: deps bench-deps
	$(MAKE) $(BENCH_BINS)
	$(BENCH_ENV) bench/run.sh

soak: deps bench-deps
	$(MAKE) $(BENCH_BINS)
	$(BENCH_ENV) bench/soak.sh

faults: deps bench-deps
	$(MAKE) $(BENCH_BINS) $(BUILD)/tests/ncclguard-peer
	$(BENCH_ENV) bench/faults.sh

# Two hostile 4 MiB reviews against the cost rule (needs python3).
bench-hostile: $(BUILD)/bench/ncclguard-microbench
	$(BENCH_ENV) bench/hostile.sh
