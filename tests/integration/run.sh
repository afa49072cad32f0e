#!/usr/bin/env bash
# Runs every tests/integration/test_*.sh (or the ones named) and sums up.
set -u
cd "$(dirname "$0")" || exit 1
failed=0
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(test_*.sh)
for t in "${tests[@]}"; do
    echo "== integration: $t"
    start=$(date +%s%N)
    if bash "$t"; then
        status=ok
    else
        status=FAILED
        failed=$((failed + 1))
    fi
    ms=$((($(date +%s%N) - start) / 1000000))
    printf '== %s %s (%d.%03d s)\n' "$t" "$status" $((ms / 1000)) $((ms % 1000))
done
[ "$failed" -eq 0 ] || { echo "integration: $failed file(s) failed"; exit 1; }
echo "integration: all passed"
