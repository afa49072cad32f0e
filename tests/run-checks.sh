#!/usr/bin/env bash
# Runs the checks of `make test` one by one and sums them up in one last
# line, "N passed, N failed, N skipped", after a line saying how long the
# checks took, "checks took N s".
#
#   tests/run-checks.sh LOGDIR MAKE CHECK...   run each CHECK (MAKE CHECK),
#                                              its output in LOGDIR/CHECK.log,
#                                              its exit status in CHECK.rc and
#                                              its wall time (ms) in CHECK.ms
#   tests/run-checks.sh --summarize LOGDIR     only sum up the logs there
#
# Timing: the checks run one after another, so the suite's wall time is the
# sum of the CHECK.ms files, printed in whole seconds (rounded) as "checks
# took N s"; a log without its .ms file adds nothing, and with no .ms file
# at all the line is left out.
#
# Counting: a check's own summary lines ("N passed, N failed", optionally
# after "name: ") are added up; a check that prints none counts as one
# pass or one failure by its exit status, and a check that exits non-zero
# counts at least one failure. Every line "SKIP <what> (<why>)" counts one
# skip. Under CI=true a skip whose <what> matches no pattern in the
# allow-list (SKIPS_ALLOW, default tests/skips.allow: shell globs, one a
# line, # comments) counts as a failure: CI must not pass on a check that
# never ran.
#
# A line that looks like a skip or a summary but is neither of those forms
# ("SKIP: x", "SKIP x" without a reason, "skipped 3", "ringcheck: SKIPPED",
# "3 passed", "tests/x: 2 passed, 0 failed, junk") counts as a failure,
# in every mode: a skip the runner cannot read would otherwise pass
# unseen. A summary may end in ", N skipped"; N must then equal the check's
# SKIP lines, so a check cannot count a skip it did not print.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
allow=${SKIPS_ALLOW:-$root/tests/skips.allow}

# The forms the logs are read for, and what merely looks like them.
summary_re='^([A-Za-z0-9_./-]+: )?([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?$'
summary_like='^[[:space:]]*([A-Za-z0-9_./-]+:[[:space:]]*)?[0-9]+[[:space:]]+(passed|failed|skipped)'
skip_re='^SKIP [^[:space:]].* \(.*[^[:space:]].*\)$'
skip_like='^[[:space:]]*([A-Za-z0-9_./-]+:[[:space:]]*)?[Ss][Kk][Ii][Pp]'

summarize() {
    local dir=$1 log passed=0 failed=0 skipped=0 unexpected=0
    local line what pat ok n_f found rc n_skip claimed ms=0 timed=0
    for log in "$dir"/*.log; do
        [ -e "$log" ] || continue
        rc=0
        [ -f "${log%.log}.rc" ] && rc=$(cat "${log%.log}.rc")
        if [ -f "${log%.log}.ms" ] && [[ $(cat "${log%.log}.ms") =~ ^[0-9]+$ ]]; then
            ms=$((ms + $(cat "${log%.log}.ms")))
            timed=1
        fi
        found=0
        n_f=0
        n_skip=0
        claimed=""
        while IFS= read -r line; do
            if [[ $line =~ $summary_re ]]; then
                passed=$((passed + BASH_REMATCH[2]))
                n_f=$((n_f + BASH_REMATCH[3]))
                [ -n "${BASH_REMATCH[5]}" ] &&
                    claimed=$((${claimed:-0} + BASH_REMATCH[5]))
                found=1
            elif [[ $line =~ $skip_re ]]; then
                skipped=$((skipped + 1))
                n_skip=$((n_skip + 1))
                what=${line#SKIP }
                what=${what%% (*}
                ok=0
                if [ -f "$allow" ]; then
                    while IFS= read -r pat; do
                        case $pat in '#'* | '') continue ;; esac
                        # shellcheck disable=SC2053 # a glob on purpose
                        [[ $what == $pat ]] && { ok=1; break; }
                    done <"$allow"
                fi
                if [ "${CI:-}" = true ] && [ "$ok" = 0 ]; then
                    echo "make test: FAIL: a skip not on $(basename "$allow")" \
                        "under CI=true: $line"
                    unexpected=$((unexpected + 1))
                fi
            elif [[ $line =~ $skip_like ]] || [[ $line =~ $summary_like ]]; then
                echo "make test: FAIL: $(basename "${log%.log}"): a line that" \
                    "looks like a skip or a summary but is not" \
                    "'SKIP <what> (<why>)' or 'N passed, N failed': $line"
                unexpected=$((unexpected + 1))
            fi
        done <"$log"
        if [ -n "$claimed" ] && [ "$claimed" != "$n_skip" ]; then
            echo "make test: FAIL: $(basename "${log%.log}") says $claimed" \
                "skipped but printed $n_skip SKIP line(s)"
            unexpected=$((unexpected + 1))
        fi
        if [ "$found" = 0 ]; then
            if [ "$rc" = 0 ]; then passed=$((passed + 1)); else n_f=1; fi
        elif [ "$rc" != 0 ] && [ "$n_f" = 0 ]; then
            n_f=1
        fi
        [ "$n_f" -gt 0 ] && echo "make test: failed: $(basename "${log%.log}")"
        failed=$((failed + n_f))
    done
    failed=$((failed + unexpected))
    [ "$timed" = 1 ] && echo "checks took $(((ms + 500) / 1000)) s"
    echo "$passed passed, $failed failed, $skipped skipped"
    [ "$failed" -eq 0 ]
}

if [ "${1:-}" = --summarize ]; then
    summarize "${2:?usage: run-checks.sh --summarize LOGDIR}"
    exit
fi

dir=${1:?usage: run-checks.sh LOGDIR MAKE CHECK...}
make=${2:?usage: run-checks.sh LOGDIR MAKE CHECK...}
shift 2
rm -rf "$dir" && mkdir -p "$dir"
i=0
for c in "$@"; do
    # Numbered so that the logs sort in the order the checks ran.
    i=$((i + 1))
    log=$dir/$(printf '%02d' $i)-$c.log
    start=$(date +%s%N)
    $make --no-print-directory "$c" 2>&1 | tee "$log"
    echo "${PIPESTATUS[0]}" >"${log%.log}.rc"
    ms=$((($(date +%s%N) - start) / 1000000))
    echo "$ms" >"${log%.log}.ms"
    printf '== %s: exit %s (%d.%03d s)\n' "$c" "$(cat "${log%.log}.rc")" \
        $((ms / 1000)) $((ms % 1000))
done
summarize "$dir"
