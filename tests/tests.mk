# tests/: the unit-test runner; other checks live in their folder's fragment.
UNIT_BINS = $(UNIT_TESTS:%=$(BUILD)/tests/test_%)

.PHONY: check-unit
check-unit: $(UNIT_BINS)
	@for t in $(UNIT_BINS); do echo "== $$t"; $$t || exit 1; done

CHECKS := check-unit $(CHECKS)
