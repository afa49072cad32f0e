#!/usr/bin/env bash
# Checks tests/run-checks.sh's summing-up on made-up check logs: counts,
# a failing check without a summary line, CI=true refusing a skip that is
# not on the allow-list, and lines that look like a skip or a summary but
# are not one failing the run.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
run=$root/tests/run-checks.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; sed 's/^/  /' "$T/out" >&2; }

# summarize NAME WANT_RC WANT_LAST [ENV...]: runs --summarize on $T/logs.
summarize() {
    local name=$1 want_rc=$2 want_last=$3 rc
    shift 3
    env "$@" "$run" --summarize "$T/logs" >"$T/out" 2>&1
    rc=$?
    [ "$rc" = "$want_rc" ] && ok || bad "$name: exit $rc, want $want_rc"
    [ "$(tail -n 1 "$T/out")" = "$want_last" ] && ok ||
        bad "$name: last line '$(tail -n 1 "$T/out")', want '$want_last'"
}

mkdir -p "$T/logs"
printf '== build/tests/test_a\n3 passed, 0 failed\n== build/tests/test_b\n4 passed, 0 failed\n' \
    >"$T/logs/01-check-unit.log"
echo 0 >"$T/logs/01-check-unit.rc"
printf 'tests/x: 5 passed, 0 failed\nSKIP ring check against the double (no NCCL)\n' \
    >"$T/logs/02-check-x.log"
echo 0 >"$T/logs/02-check-x.rc"
printf 'corpus: all checks passed\n' >"$T/logs/03-check-corpus.log"
echo 0 >"$T/logs/03-check-corpus.rc"
echo '# test allow-list' >"$T/allow"

summarize "sums the summary lines; a check without one counts once" 0 \
    "13 passed, 0 failed, 1 skipped" CI= SKIPS_ALLOW="$T/allow"
summarize "CI=true: a skip not allowed fails" 1 \
    "13 passed, 1 failed, 1 skipped" CI=true SKIPS_ALLOW="$T/allow"
grep -qF 'under CI=true: SKIP ring check against the double' "$T/out" &&
    ok || bad "CI=true: the refused skip is not named"
echo 'ring check *' >>"$T/allow"
summarize "CI=true: an allowed skip passes" 0 \
    "13 passed, 0 failed, 1 skipped" CI=true SKIPS_ALLOW="$T/allow"

# A check that fails without printing a summary line still counts a failure.
printf 'corpus: FAILED\n' >"$T/logs/03-check-corpus.log"
echo 2 >"$T/logs/03-check-corpus.rc"
summarize "a failed check without a summary line" 1 \
    "12 passed, 1 failed, 1 skipped" CI= SKIPS_ALLOW="$T/allow"
grep -qx 'make test: failed: 03-check-corpus' "$T/out" && ok ||
    bad "the failed check is not named"
# One that exits non-zero after "N passed, 0 failed" counts one too, and
# failures in a summary line are added up.
printf 'corpus: all checks passed\n' >"$T/logs/03-check-corpus.log"
echo 0 >"$T/logs/03-check-corpus.rc"
printf '3 passed, 0 failed\n4 passed, 2 failed\n' >"$T/logs/01-check-unit.log"
echo 1 >"$T/logs/01-check-unit.rc"
summarize "failures in summary lines are summed" 1 \
    "13 passed, 2 failed, 1 skipped" CI= SKIPS_ALLOW="$T/allow"
printf '3 passed, 0 failed\n' >"$T/logs/01-check-unit.log"
summarize "exit non-zero with no failure counted" 1 \
    "9 passed, 1 failed, 1 skipped" CI= SKIPS_ALLOW="$T/allow"

# Lines that look like a skip or a summary but are neither form fail the
# run in every mode. The first is the watchdog log of before: its skip had
# a colon, so CI=true summed it up as "1 passed, 0 failed, 0 skipped" and
# exit 0. one_log TEXT RC: the only log is a check that printed TEXT and
# exited RC.
one_log() {
    rm -rf "$T/logs" && mkdir -p "$T/logs"
    printf '%b' "$1" >"$T/logs/01-check-x.log"
    echo "$2" >"$T/logs/01-check-x.rc"
}
one_log 'SKIP: pid-reuse (needs a private PID namespace)\nok   a\n' 0
summarize "CI=true: 'SKIP:' with a colon is not read as a pass" 1 \
    "1 passed, 1 failed, 0 skipped" CI=true SKIPS_ALLOW="$T/allow"
grep -qF "is not 'SKIP <what> (<why>)' or 'N passed, N failed': SKIP: pid-reuse" \
    "$T/out" && ok || bad "the unreadable skip line is not named"
summarize "without CI too: 'SKIP:' fails" 1 \
    "1 passed, 1 failed, 0 skipped" CI= SKIPS_ALLOW="$T/allow"
for text in 'skipped pid-reuse' 'tests/x: skipping the PID case' \
    'ringcheck: SKIPPED' 'Skip: no GPU' 'SKIP no reason given' \
    'SKIP  (empty what)' 'SKIP x ( )' '3 passed' \
    'tests/x: 2 passed, 0 failed, junk' '  4 passed, 0 failed' \
    'tests/x: 1 failed' '0 skipped'; do
    one_log "$text\n" 0
    summarize "not understood: '$text'" 1 "1 passed, 1 failed, 0 skipped" \
        CI= SKIPS_ALLOW="$T/allow"
done
# A summary that counts skips must match the SKIP lines printed.
one_log 'tests/w: 2 passed, 0 failed, 1 skipped\n' 0
summarize "a skip counted but not printed" 1 "2 passed, 1 failed, 0 skipped" \
    CI= SKIPS_ALLOW="$T/allow"
grep -qF '01-check-x says 1 skipped but printed 0 SKIP line(s)' "$T/out" &&
    ok || bad "the miscounted skip is not named"
one_log 'SKIP ring check against the double (no NCCL)\ntests/w: 2 passed, 0 failed, 1 skipped\n' 0
summarize "a summary with its skip printed" 0 "2 passed, 0 failed, 1 skipped" \
    CI= SKIPS_ALLOW="$T/allow"
summarize "the same under CI=true, allowed" 0 "2 passed, 0 failed, 1 skipped" \
    CI=true SKIPS_ALLOW="$T/allow"
# Words in the middle of a line are not a skip or a summary.
one_log 'WARNING: no PID namespace, so one case is skipped\nok   - 3 passed the lint\ntests/x: 5 passed, 0 failed\n' 0
summarize "skip and passed in mid-line are plain text" 0 \
    "5 passed, 0 failed, 0 skipped" CI=true SKIPS_ALLOW="$T/allow"

# How long the checks took: the .ms files summed and rounded, one line just
# before the last; none without .ms files (every case above).
grep -q '^checks took' "$T/out" && bad "a 'checks took' line without .ms files" || ok
one_log 'tests/w: 2 passed, 0 failed\n' 0
printf 'corpus: all checks passed\n' >"$T/logs/02-check-y.log"
echo 0 >"$T/logs/02-check-y.rc"
echo 1500 >"$T/logs/01-check-x.ms"
echo 311700 >"$T/logs/02-check-y.ms"
summarize "the checks' wall time is summed" 0 "3 passed, 0 failed, 0 skipped" \
    CI= SKIPS_ALLOW="$T/allow"
[ "$(tail -n 2 "$T/out" | head -n 1)" = "checks took 313 s" ] && ok ||
    bad "the line before the last is not 'checks took 313 s'"
# The real run: a stand-in for make whose checks take at least a second
# each. The time is a lower bound, so a slow machine cannot fail this.
cat >"$T/make" <<'EOM'
#!/bin/sh
sleep 1
echo "$2: 1 passed, 0 failed"
EOM
chmod +x "$T/make"
"$run" "$T/run" "$T/make" check-a check-b >"$T/out" 2>&1
rc=$?
[ "$rc" = 0 ] && ok || bad "run mode: exit $rc"
[ "$(tail -n 1 "$T/out")" = "2 passed, 0 failed, 0 skipped" ] && ok ||
    bad "run mode: last line '$(tail -n 1 "$T/out")'"
took=$(tail -n 2 "$T/out" | head -n 1)
if [[ $took =~ ^checks\ took\ ([0-9]+)\ s$ ]] && [ "${BASH_REMATCH[1]}" -ge 2 ]; then
    ok
else
    bad "run mode: the line before the last is '$took', want 'checks took N s' with N >= 2"
fi
[ -s "$T/run/01-check-a.ms" ] && [ -s "$T/run/02-check-b.ms" ] && ok ||
    bad "run mode: no .ms file per check"

echo "tests/summary: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
