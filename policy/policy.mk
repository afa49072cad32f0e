# policy/: YAML rule engine, quantities, policy lint/test.
LIB_SRCS += policy/diag.c policy/quantity.c policy/ytree.c \
	policy/match.c policy/validate.c \
	policy/schema.c policy/policy.c policy/decide.c policy/template.c
UNIT_TESTS += quantity policy match schema

# Golden outputs of `policy lint` on the broken policies in tests/policy/.
.PHONY: check-policy-lint
check-policy-lint: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard sh tests/policy/check.sh

CHECKS += check-policy-lint

# The shipped policies must lint clean (warnings allowed).
POLICY_EXAMPLES := policy/default.yaml \
	$(filter-out %.test.yaml,$(wildcard policy/examples/*.yaml))

.PHONY: check-policy-examples
check-policy-examples: $(BUILD)/ncclguard
	$(BUILD)/ncclguard policy lint $(POLICY_EXAMPLES)

CHECKS += check-policy-examples

# `policy test` on the shipped examples (all must pass), and on fixtures
# that must fail with exactly the report in tests/policy/policytest/.
.PHONY: check-policy-test
check-policy-test: $(BUILD)/ncclguard
	$(BUILD)/ncclguard policy test policy/examples
	@out=$$($(BUILD)/ncclguard policy test tests/policy/policytest); \
	rc=$$?; \
	printf '%s\nexit %s\n' "$$out" "$$rc" | \
		diff -u tests/policy/policytest/expected.out - && \
		echo "check-policy-test: failing fixtures reported as expected"

CHECKS += check-policy-test
