#!/usr/bin/env bash
# The command line says the same thing everywhere: help texts agree, a
# usage error says what is wrong, a subcommand's --help is about it.
set -u
: "${NCCLGUARD:?set NCCLGUARD to the ncclguard binary}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
bad() { failed=$((failed + 1)); echo "FAIL - $1"; [ -f "${2:-}" ] && sed 's/^/       /' "$2"; return 0; }
run() { "$NCCLGUARD" "$@" >"$T/out" 2>"$T/err"; rc=$?; }

run policy lint
[ "$rc" = 2 ] && ok "bare policy lint exits 2" || bad "bare policy lint exits $rc"
head -n 1 "$T/err" | grep -qx 'ncclguard policy lint: no file given: name one or more policy files (or --profile FILE)' &&
    ok "bare policy lint says what is missing, first" || bad "bare policy lint message" "$T/err"

# Which files are tests: the same words in both helps.
run policy --help
grep -q '\*\.test\.yaml under each' "$T/out" && ok "policy --help: *.test.yaml under each DIR" ||
    bad "policy --help names the test files differently" "$T/out"
grep -q '\*\.yaml under DIR' "$T/out" && bad "policy --help still says *.yaml under DIR" "$T/out" ||
    ok "policy --help no longer says *.yaml under DIR"
run policy test --help
grep -q '\*\.test\.yaml under each DIR' "$T/out" && ok "policy test --help: *.test.yaml under each DIR" ||
    bad "policy test --help" "$T/out"

run certs create --help
[ "$rc" = 0 ] && ok "certs create --help exits 0" || bad "certs create --help exits $rc"
grep -q '^  create --service' "$T/out" && ! grep -q 'inspect FILE\|webhook-config' "$T/out" &&
    ok "certs create --help prints only create's help" || bad "certs create --help" "$T/out"
run certs webhook-config -h
grep -q '^  webhook-config' "$T/out" && ! grep -q '^  create' "$T/out" &&
    ok "certs webhook-config -h prints only its help" || bad "certs webhook-config -h" "$T/out"
run certs --help
[ "$(grep -c '^  \(create\|inspect\|webhook-config\) ' "$T/out")" = 3 ] &&
    ok "certs --help lists all three" || bad "certs --help" "$T/out"

run --version
grep -qE '^ncclguard [0-9]+\.[0-9]+\.[0-9]+' "$T/out" && ok "ncclguard --version" || bad "--version" "$T/out"
run --help
grep -q -- '--version' "$T/out" && ok "ncclguard --help mentions --version" || bad "--help" "$T/out"

echo "tests/cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
