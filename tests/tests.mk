# tests/: the unit-test runner, the summing-up of `make test`, and the
# prerequisites checks share; other checks live in their folder's fragment.
UNIT_BINS = $(UNIT_TESTS:%=$(BUILD)/tests/test_%)

.PHONY: check-unit check-summary check-unit-bins
check-unit: $(UNIT_BINS)
	@for t in $(UNIT_BINS); do echo "== $$t"; $$t || exit 1; done

# tests/run-checks.sh itself: its counts, and CI=true refusing a skip that
# tests/skips.allow does not list.
check-summary:
	bash tests/summary/check.sh

CHECKS := check-unit check-summary $(CHECKS)

# ss (tests/integration/test_limits.sh counts the server's connections).
DEB_PKGS += iproute2

# The deploy check reads which libraries the ring check links: build it
# first, so that running `make check-deploy` alone checks it too.
check-deploy: ringcheck

# One unit test or one integration file alone (make mutants names these):
#   make check-unit-mutate     build/tests/test_mutate
#   make check-http-limits     tests/integration/test_limits.sh
check-unit-%: $(BUILD)/tests/test_%
	$<

check-http-%: $(BUILD)/ncclguard $(BUILD)/tests/ncclguard-peer
	NCCLGUARD=$(abspath $(BUILD))/ncclguard \
		NG_PEER=$(abspath $(BUILD))/tests/ncclguard-peer \
		bash tests/integration/run.sh test_$*.sh
check-unit-bins: $(UNIT_BINS)
