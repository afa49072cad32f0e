#!/bin/sh
# Golden test for `ncclguard policy lint`: each broken policy in
# tests/policy/*.yaml is linted and the output plus exit status compared
# with tests/policy/NAME.golden. profile-*.yaml files are linted as
# --profile ConfigMaps. UPDATE=1 rewrites the golden files.
set -u
: "${NCCLGUARD:?set NCCLGUARD to the ncclguard binary}"
cd "$(dirname "$0")/../.." || exit 1
pass=0
fail=0
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
for f in tests/policy/*.yaml; do
    name=${f%.yaml}
    case $(basename "$f") in
    profile-*) "$NCCLGUARD" policy lint --profile "$f" >"$tmp" 2>&1 ;;
    *) "$NCCLGUARD" policy lint "$f" >"$tmp" 2>&1 ;;
    esac
    echo "exit $?" >>"$tmp"
    if [ "${UPDATE:-0}" = 1 ]; then
        cp "$tmp" "$name.golden"
    fi
    if diff -u "$name.golden" "$tmp"; then
        pass=$((pass + 1))
    else
        echo "FAIL: $f (expected $name.golden)"
        fail=$((fail + 1))
    fi
done
echo "tests/policy: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
