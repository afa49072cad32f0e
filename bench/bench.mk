# bench/: make bench against nginx and the Go peer, make soak, make faults
# (none of them is part of make test). See bench/RESULTS.md for the numbers.
BENCH_DEB_PKGS := wrk nginx-light iproute2 procps util-linux
# Only the Go peer's column needs these; make bench goes on without them.
BENCH_OPT_DEB_PKGS := golang-go

# The plain Go standard-library webhook that make bench measures against
# (bench/RESULTS.md). It lives outside the repository, next to the main checkout;
# where it is absent, or go is, make bench skips its column and says so.
PEER_GO ?= $(abspath ../shared/bench/peer-go)
PEER_GO_BIN = $(BUILD)/bench/peer-go
GO ?= go

$(BUILD)/bench/ncclguard-loadgen: $(BUILD)/obj/bench/loadgen.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ -lssl -lcrypto -lpthread

# Allocations are counted by wrapping the library's allocator calls.
MICROBENCH_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc \
	-Wl,--wrap=free,--wrap=strdup,--wrap=strndup,--wrap=posix_memalign
$(BUILD)/bench/ncclguard-microbench: $(BUILD)/obj/bench/microbench.o \
		$(BUILD)/libncclguard.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(MICROBENCH_WRAP) -o $@ $^ $(LDLIBS)

BENCH_BINS = $(BUILD)/ncclguard $(BUILD)/bench/ncclguard-loadgen \
	$(BUILD)/bench/ncclguard-microbench
# The peer uses the standard library only, so the build needs no network:
# GOPROXY=off makes a module download fail instead of being tried, and the
# caches live under $(BUILD) (the peer's folder may be read-only).
$(PEER_GO_BIN): $(wildcard $(PEER_GO)/*.go $(PEER_GO)/go.mod)
	@mkdir -p $(dir $@)
	cd $(PEER_GO) && GOCACHE=$(abspath $(BUILD))/go/cache \
		GOPATH=$(abspath $(BUILD))/go/path GOPROXY=off GOFLAGS=-mod=readonly \
		GOTOOLCHAIN=local CGO_ENABLED=0 $(GO) build -o $(abspath $@) .

# Builds the peer where it can; otherwise removes a stale binary and says
# why, and bench/run.sh skips the column.
.PHONY: bench-peer-go
bench-peer-go:
	@if [ ! -f "$(PEER_GO)/go.mod" ]; then \
		echo "SKIP go peer (no $(PEER_GO); set PEER_GO=...)"; \
		rm -f $(PEER_GO_BIN); \
	elif ! command -v $(GO) >/dev/null 2>&1; then \
		echo "SKIP go peer ($(GO) not found: apt-get install golang-go)"; \
		rm -f $(PEER_GO_BIN); \
	else $(MAKE) --no-print-directory $(PEER_GO_BIN) || { \
		echo "SKIP go peer (go build failed in $(PEER_GO))"; \
		rm -f $(PEER_GO_BIN); }; fi

BENCH_ENV = NCCLGUARD=$(abspath $(BUILD))/ncclguard \
	LOADGEN=$(abspath $(BUILD))/bench/ncclguard-loadgen \
	MICROBENCH=$(abspath $(BUILD))/bench/ncclguard-microbench \
	BENCH_OUT=$(abspath $(BUILD))/bench \
	PEER=$(abspath $(BUILD))/tests/ncclguard-peer \
	PEER_GO=$(PEER_GO) PEER_GO_BIN=$(abspath $(PEER_GO_BIN))

# The load tools are installed here rather than by make deps: only the
# benchmark needs them.
.PHONY: bench-deps bench-clock bench soak faults bench-hostile
bench-deps:
	@$(call deb_missing,$(BENCH_DEB_PKGS)); \
	if [ -n "$$missing" ]; then $(call deb_install,make bench); fi
	@$(call deb_missing,$(BENCH_OPT_DEB_PKGS)); \
	if [ -n "$$missing" ]; then { $(call deb_install,make bench); } || \
		echo "make bench: could not install$$missing; going on"; fi

# make bench's wall time is counted from here (before the build), as the
# first prerequisite; bench/run.sh prints it.
bench-clock:
	@mkdir -p $(BUILD)/bench && date +%s.%N >$(BUILD)/bench/start-time

bench: bench-clock deps bench-deps
	$(MAKE) $(BENCH_BINS)
	@$(MAKE) --no-print-directory bench-peer-go
	BENCH_START=$$(cat $(BUILD)/bench/start-time) $(BENCH_ENV) bench/run.sh

soak: deps bench-deps
	$(MAKE) $(BENCH_BINS)
	$(BENCH_ENV) bench/soak.sh

faults: deps bench-deps
	$(MAKE) $(BENCH_BINS) $(BUILD)/tests/ncclguard-peer
	$(BENCH_ENV) bench/faults.sh

# Two hostile 4 MiB reviews against the cost rule (needs python3).
bench-hostile: $(BUILD)/bench/ncclguard-microbench
	$(BENCH_ENV) bench/hostile.sh
