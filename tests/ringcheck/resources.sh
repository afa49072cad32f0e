#!/usr/bin/env bash
# What the ring check costs, measured in a cgroup of its own against the
# CUDA/NCCL test double: CPU time and peak memory of the whole check (the
# supervisor and its workers), and whether it still passes under a tight CPU
# limit (cpu.max on cgroup v2, cpu.cfs_quota_us on v1: the same CFS
# bandwidth limit that a container's CPU limit sets) it is throttled and
# still ends with its own verdict. Wall and CPU time are printed, never
# asserted: on shared cores they measure the neighbours.
#
#   RINGCHECK=... FAKES=... resources.sh [--report]
# --report prints the figures only (for docs/ringcheck.md), no assertions.
# shellcheck disable=SC2015 # ok || bad, as in the other test scripts
set -u

: "${RINGCHECK:?set RINGCHECK to the binary}"
: "${FAKES:?set FAKES to the folder with the test double}"

REPORT=0
[ "${1:-}" = "--report" ] && REPORT=1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ringcheck-res.XXXXXX")
CG=ncclguard-rc-$$
pass=0
fail=0
DIRS=()

cleanup() {
    for d in "${DIRS[@]}"; do rmdir "$d" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT

skip() {
    echo "SKIP ringcheck resources ($*)"
    exit 0
}
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

[ "$(id -u)" = 0 ] || skip "needs root to create cgroups"
# Under ASan and UBSan the check runs several times slower and holds the
# sanitizers' shadow memory: its CPU time, its peak memory and its run
# under a 100m quota say nothing about the real binary. The plain build
# measures and asserts them.
[ -z "${SANITIZED:-}" ] || skip "under sanitizers the figures are the sanitizers' own"

# The cgroup layout: v2 when its controllers are there, else v1's cpu,
# cpuacct and memory hierarchies.
if [ -f /sys/fs/cgroup/cgroup.controllers ] &&
    grep -qw cpu /sys/fs/cgroup/cgroup.controllers &&
    grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    MODE=v2
    for c in cpu memory; do
        grep -qw "$c" /sys/fs/cgroup/cgroup.subtree_control ||
            echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
            skip "cannot enable the $c controller for child cgroups"
    done
elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] &&
    [ -f /sys/fs/cgroup/cpuacct/cpuacct.usage ] &&
    [ -f /sys/fs/cgroup/memory/memory.max_usage_in_bytes ]; then
    MODE=v1
else
    skip "no cgroup v2 cpu and memory controllers, nor v1 cpu, cpuacct and memory hierarchies"
fi

# mkcg NAME: a fresh cgroup (v2: one folder; v1: one per hierarchy).
mkcg() {
    local d
    if [ "$MODE" = v2 ]; then
        d=/sys/fs/cgroup/$CG-$1
        mkdir "$d" 2>/dev/null || skip "cannot create a cgroup under /sys/fs/cgroup"
        DIRS+=("$d")
    else
        for h in cpu cpuacct memory; do
            d=/sys/fs/cgroup/$h/$CG-$1
            mkdir "$d" 2>/dev/null || skip "cannot create a cgroup under /sys/fs/cgroup/$h"
            DIRS+=("$d")
        done
    fi
}

# limit NAME QUOTA_US PERIOD_US
limit() {
    if [ "$MODE" = v2 ]; then
        echo "$2 $3" >"/sys/fs/cgroup/$CG-$1/cpu.max"
    else
        echo "$3" >"/sys/fs/cgroup/cpu/$CG-$1/cpu.cfs_period_us"
        echo "$2" >"/sys/fs/cgroup/cpu/$CG-$1/cpu.cfs_quota_us"
    fi
}

# incg NAME CMD...: runs CMD inside cgroup NAME.
incg() {
    local name=$1
    shift
    if [ "$MODE" = v2 ]; then
        sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' \
            "/sys/fs/cgroup/$CG-$name" "$@"
    else
        sh -c 'for h in cpu cpuacct memory; do
                   echo $$ >"/sys/fs/cgroup/$h/$0/cgroup.procs" || exit 125
               done; exec "$@"' "$CG-$name" "$@"
    fi
}

# usage NAME: "CPU_SECONDS PEAK_MIB THROTTLED"
usage() {
    local cpu peak thr
    if [ "$MODE" = v2 ]; then
        local d=/sys/fs/cgroup/$CG-$1
        cpu=$(awk '$1 == "usage_usec" { printf "%.2f", $2 / 1e6 }' "$d/cpu.stat")
        thr=$(awk '$1 == "nr_throttled" { print $2 }' "$d/cpu.stat")
        if [ -f "$d/memory.peak" ]; then
            peak=$(awk '{ printf "%.0f", $1 / 1048576 }' "$d/memory.peak")
        else
            peak=unknown
        fi
    else
        cpu=$(awk '{ printf "%.2f", $1 / 1e9 }' \
            "/sys/fs/cgroup/cpuacct/$CG-$1/cpuacct.usage")
        thr=$(awk '$1 == "nr_throttled" { print $2 }' \
            "/sys/fs/cgroup/cpu/$CG-$1/cpu.stat")
        peak=$(awk '{ printf "%.0f", $1 / 1048576 }' \
            "/sys/fs/cgroup/memory/$CG-$1/memory.max_usage_in_bytes")
    fi
    echo "$cpu $peak ${thr:-0}"
}

# check NAME GPUS MODE TIMEOUT ARGS...: one check inside cgroup NAME;
# sets RC, MS and the usage figures CPU PEAK THR.
check() {
    local name=$1 gpus=$2 mode=$3 to=$4 t0
    shift 4
    mkdir -p "$TMP/shm"
    t0=$(date +%s%N)
    incg "$name" timeout -k 2 120 env LD_LIBRARY_PATH="$FAKES" \
        FAKENCCL_DIR="$TMP/shm" FAKECUDA_DEVICES="$gpus" \
        NCCL_BUFFSIZE=1048576 "$RINGCHECK" --expect-gpus "$gpus" \
        --mode "$mode" --timeout "$to" --termination-log "$TMP/tl" "$@" \
        >"$TMP/$name.out" 2>&1
    RC=$?
    MS=$(( ($(date +%s%N) - t0) / 1000000 ))
    read -r CPU PEAK THR <<<"$(usage "$name")"
    printf '%-34s exit %d, %6d ms wall, %5s s CPU, peak %4s MiB, throttled %s times\n' \
        "$name ($gpus GPUs, $mode$( [ $# -gt 0 ] && printf ', %s' "$*"))" \
        "$RC" "$MS" "$CPU" "$PEAK" "$THR"
}

echo "ringcheck resources (cgroup $MODE, $(nproc) CPUs; the double's GPUs are host memory)"
for g in 2 8; do
    for m in process group; do
        mkcg "free-$g-$m"
        check "free-$g-$m" "$g" "$m" 60 --bw-bytes 1Mi
        [ "$RC" -eq 0 ] && ok || bad "the check failed without a CPU limit ($g GPUs, $m)"
    done
done
# A larger bandwidth size: on the double the GPUs' buffers are host memory
# and its reductions run on the CPU, so this shows the double's cost more
# than the check's.
mkcg free-8-bw
check free-8-bw 8 process 60 --bw-bytes 16Mi
[ "$RC" -eq 0 ] && ok || bad "the check failed with a 16 MiB bandwidth size"

# Under a tight limit (100m, the CPU limit of a Guaranteed pod whose limits
# the check takes, and 250m) what is asserted is the limit, not the speed:
# the quota throttled the check, and the check ended with a verdict of its
# own, a pass or its timeout class (exit 4, when the throttled phases ran
# past their deadlines on a loaded machine), not a crash, wrong results or
# a kill from outside. How long it took is a figure, printed above, not a
# test: a test of speed is a benchmark.
for q in 10000 25000; do
    mkcg "cpu$q"
    limit "cpu$q" "$q" 100000
    check "cpu$q" 8 process 100 --bw-bytes 1Mi
    case $RC in
    0) ok ;;
    4) if grep -qi 'timeout\|deadline\|hang' "$TMP/tl" 2>/dev/null; then
           ok
           echo "note: under $q/100000 us the check ran past its deadline (exit 4), as a limit allows"
       else
           bad "exit 4 under a CPU quota of $q/100000 us without a timeout verdict: $(head -3 "$TMP/tl" 2>/dev/null)"
       fi ;;
    *) bad "the check failed under a CPU quota of $q/100000 us (exit $RC): $(head -3 "$TMP/tl" 2>/dev/null)" ;;
    esac
    [ "$THR" -gt 0 ] 2>/dev/null && ok || bad "the quota $q/100000 did not throttle the check (throttled $THR), so the test proves nothing"
done

[ "$REPORT" -eq 1 ] && exit 0
echo "resources: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
