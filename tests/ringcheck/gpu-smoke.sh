#!/usr/bin/env bash
# The ring check's first run on real GPUs (make gpu-smoke): about three
# minutes on a machine with one or more NVIDIA GPUs, the real CUDA runtime
# and NCCL. Every run has a timeout around it; the script prints what it
# measured and ends non-zero when a step does not behave as documented.
#
#   RINGCHECK=path/to/ncclguard-ringcheck tests/ringcheck/gpu-smoke.sh
#
# GPU_SMOKE_DOUBLE=DIR rehearses the script against the CUDA/NCCL test
# double in DIR (no GPU): it checks the script's steps, not the GPUs, and
# skips the forced bootstrap failure (the double ignores
# NCCL_SOCKET_FAMILY). make check-ringcheck runs the rehearsal. GPU_SMOKE_BW sets the bandwidth size (default
# 256Mi; 1Mi in the rehearsal, whose reductions run on the CPU).
set -u -o pipefail

RINGCHECK=${RINGCHECK:-build/ncclguard-ringcheck}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpu-smoke.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

NODE_ENV=()
SLOW_ENV=()
if [ -n "${GPU_SMOKE_DOUBLE:-}" ]; then
    export LD_LIBRARY_PATH=$GPU_SMOKE_DOUBLE FAKENCCL_DIR=$TMP
    export FAKECUDA_DEVICES=${FAKECUDA_DEVICES:-2}
    # The "nodes" see one GPU each and talk over TCP, as on a GPU with
    # CUDA_VISIBLE_DEVICES=0 and NCCL_HOSTID; their init takes 1.5 s, as a
    # real one across nodes can, so that step 5 can stop a worker in it.
    NODE_ENV=(FAKECUDA_DEVICES=1 FAKENCCL_NET=1 FAKENCCL_INIT_DELAY_MS=1500)
    SLOW_ENV=(FAKENCCL_INIT_DELAY_MS=1500)
    BW=${GPU_SMOKE_BW:-1Mi}
elif [ ! -e /dev/nvidiactl ] || ! command -v nvidia-smi >/dev/null; then
    echo "SKIP gpu-smoke (no NVIDIA GPU here: /dev/nvidiactl or nvidia-smi missing)"
    exit 0
fi
if [ ! -x "$RINGCHECK" ]; then
    echo "SKIP gpu-smoke ($RINGCHECK is not built: make ringcheck)"
    exit 0
fi
command -v jq >/dev/null || { echo "gpu-smoke: needs jq"; exit 1; }
BW=${BW:-${GPU_SMOKE_BW:-256Mi}}

if [ -n "${GPU_SMOKE_DOUBLE:-}" ]; then
    NGPU=$FAKECUDA_DEVICES
    echo "gpu-smoke: rehearsal against the test double, $NGPU GPUs"
else
    NGPU=$(nvidia-smi -L | grep -c '^GPU ')
    echo "gpu-smoke: $NGPU GPUs; $(nvidia-smi --query-gpu=name,driver_version \
        --format=csv,noheader | head -1)"
fi

# find_sup PID: the ring check's supervisor at or below PID (through
# timeout and subshells); its children are the workers (forked, same name).
find_sup() {
    local p=$1 c
    for _ in 1 2 3 4 5; do
        if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "ncclguard-ringc" ]; then
            echo "$p"
            return 0
        fi
        c=$(pgrep -P "$p" | head -1)
        [ -n "$c" ] || return 1
        p=$c
    done
    return 1
}

check() { # check WHAT CONDITION-RESULT
    if [ "$2" = 0 ]; then pass=$((pass + 1)); echo "  ok: $1"
    else fail=$((fail + 1)); echo "  FAILED: $1"; fi
}

# run NAME LIMIT_S ENV... -- ARGS...: one check with a timeout around it.
# Sets RC, MS (wall time) and LOG; prints the summary line.
run() {
    local name=$1 limit=$2 envs=() t0
    shift 2
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    LOG=$TMP/$name.log
    t0=$(date +%s%N)
    timeout -k 5 "$limit" env "${envs[@]}" "$RINGCHECK" \
        --report "$TMP/$name.json" --termination-log "$TMP/$name.tl" "$@" \
        >"$LOG" 2>&1
    RC=$?
    MS=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "$name: exit $RC in $MS ms"
    jq -c '{ringcheck, exit, phase_name, busbw_gbps, algbw_gbps, cure,
            diagnosis, transport: .nccl_transport.intra,
            p2p: .nccl_transport.p2p, nvls: .nccl_transport.nvls,
            id_addr}' "$TMP/$name.json" 2>/dev/null | sed 's/^/  /'
    grep -E 'NCCL chose|aborted their|did not abort|needed SIGKILL' "$LOG" |
        sed 's/^/  /' | cut -c1-300
}

echo "== 1. both modes pass"
run process 120 -- --expect-gpus "$NGPU" --mode process --timeout 100 \
    --bw-bytes "$BW"
check "process mode exits 0" "$([ "$RC" -eq 0 ]; echo $?)"
run group 120 -- --expect-gpus "$NGPU" --mode group --timeout 100 \
    --bw-bytes "$BW"
check "group mode exits 0" "$([ "$RC" -eq 0 ]; echo $?)"

echo "== 2. a 2 s deadline gives exit 4 within 3 s"
# A stopped worker makes the run outlast its deadline whatever the GPUs'
# speed: the deadline, not the worker, must end it.
t0=$(date +%s%N)
timeout -k 5 20 "$RINGCHECK" --expect-gpus "$NGPU" --timeout 2 \
    --report "$TMP/deadline.json" --termination-log "$TMP/deadline.tl" \
    >"$TMP/deadline.log" 2>&1 &
pid=$!
sleep 0.5
sup=$(find_sup "$pid")
child=$( [ -n "$sup" ] && pgrep -P "$sup" | head -1)
[ -n "$child" ] && kill -STOP "$child"
wait "$pid"
RC=$?
MS=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "deadline: exit $RC in $MS ms (worker $child stopped at 0.5 s)"
head -3 "$TMP/deadline.tl" 2>/dev/null | sed 's/^/  /' | cut -c1-300
check "exit 4" "$([ "$RC" -eq 4 ]; echo $?)"
check "within 3 s" "$([ "$MS" -le 3000 ]; echo $?)"

echo "== 3. a forced bootstrap failure gives exit 3 with a diagnosis"
# IPv6 only on lo leaves NCCL no interface: lo's ::1 never counts
# (socket.cc), so ncclGetUniqueId fails in the bootstrap.
if [ -n "${GPU_SMOKE_DOUBLE:-}" ]; then
    echo "SKIP gpu-smoke step 3 (the test double ignores NCCL_SOCKET_FAMILY)"
else
    run bootstrap 120 NCCL_SOCKET_IFNAME=lo NCCL_SOCKET_FAMILY=AF_INET6 -- \
        --expect-gpus "$NGPU" --timeout 60 --phase-timeout 10 --bw-bytes "$BW"
    check "exit 3" "$([ "$RC" -eq 3 ]; echo $?)"
    check "a diagnosis in the report" \
        "$(jq -e '.diagnosis != null' "$TMP/bootstrap.json" >/dev/null; echo $?)"
fi

echo "== 4. two \"nodes\" on GPU 0 (NCCL_HOSTID), across the network"
node() { # node RANK NAME ARGS...: one pod of a two-node LeaderWorkerSet
    local rank=$1 name=$2
    shift 2
    timeout -k 5 90 env "${NODE_ENV[@]}" CUDA_VISIBLE_DEVICES=0 \
        NCCL_HOSTID="smoke-node-$rank" \
        NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 POD_IP=127.0.0.1 \
        LWS_LEADER_ADDRESS=127.0.0.1 LWS_GROUP_SIZE=2 \
        LWS_WORKER_INDEX="$rank" NCCLGUARD_JOB_ID="gpu-smoke-$name" \
        "$RINGCHECK" --expect-gpus 1 --multi-node auto \
        --rendezvous-port 29471 --multi-node-timeout 60 --timeout 80 \
        --bw-bytes "$BW" \
        --report "$TMP/$name-$rank.json" \
        --termination-log "$TMP/$name-$rank.tl" "$@" \
        >"$TMP/$name-$rank.log" 2>&1
}
t0=$(date +%s%N)
node 0 two & p0=$!
node 1 two & p1=$!
wait "$p0"; r0=$?
wait "$p1"; r1=$?
MS=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "two nodes: exits $r0 and $r1 in $MS ms"
jq -c '{ringcheck, exit, multinode}' "$TMP/two-0.json" 2>/dev/null |
    cut -c1-600 | sed 's/^/  /'
grep -E 'cross-node' "$TMP/two-0.log" | tail -5 | cut -c1-300 | sed 's/^/  /'
check "both nodes exit 0" "$([ "$r0" -eq 0 ] && [ "$r1" -eq 0 ]; echo $?)"

echo "== 5. a stopped worker: abort time against the grace"
if [ "$NGPU" -ge 2 ]; then
    # One pod, one process per GPU: the last rank's worker is stopped once
    # the ring's workers run; the others must abort within their grace.
    t0=$(date +%s%N)
    timeout -k 5 90 env "${SLOW_ENV[@]}" "$RINGCHECK" --expect-gpus "$NGPU" \
        --timeout 60 --phase-timeout 8 --bw-bytes "$BW" --no-diagnose \
        --report "$TMP/stop.json" --termination-log "$TMP/stop.tl" \
        >"$TMP/stop.log" 2>&1 &
    pid=$!
    worker=""
    for _ in $(seq 1 300); do
        sup=$(find_sup "$pid")
        if [ -n "$sup" ] && [ "$(pgrep -P "$sup" | wc -l)" -ge 2 ]; then
            worker=$(pgrep -P "$sup" -n)
            break
        fi
        sleep 0.1
    done
    [ -n "$worker" ] && kill -STOP "$worker"
    wait "$pid"
    r0=$?
    MS=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "stopped worker (pid ${worker:-none}): exit $r0 in $MS ms"
    grep -ohE 'aborted their communicators \([^)]*\)|did not abort in time[^;]*' \
        "$TMP/stop.tl" 2>/dev/null | sort -u | sed 's/^/  /'
    check "exit 4, with a verdict" \
        "$([ "$r0" -eq 4 ] && [ -s "$TMP/stop.tl" ]; echo $?)"
    # "aborted their communicators (in X s at most, abort grace Y s)": X <= Y.
    check "the other ranks' abort within the grace" "$(grep -ohE \
        'in [0-9.]+ s at most, abort grace [0-9.]+ s' "$TMP/stop.tl" |
        awk '{ n++; if ($2 > $8) bad = 1 } END { exit !(n > 0 && !bad) }'
        echo $?)"
else
    # One GPU: the two "nodes" of step 4, node 1's worker stopped in the
    # cross-node phase; both verdicts are shown.
    t0=$(date +%s%N)
    node 0 stop --phase-timeout 8 & p0=$!
    node 1 stop --phase-timeout 8 & p1=$!
    worker=""
    for _ in $(seq 1 300); do
        if grep -q 'cross-node' "$TMP/stop-1.log" 2>/dev/null; then
            sup=$(find_sup "$p1")
            worker=$( [ -n "$sup" ] && pgrep -P "$sup" -n)
            [ -n "$worker" ] && break
        fi
        sleep 0.1
    done
    [ -n "$worker" ] && kill -STOP "$worker"
    wait "$p0"; r0=$?
    wait "$p1"; r1=$?
    MS=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "stopped worker (pid ${worker:-none}): exits $r0 and $r1 in $MS ms"
    grep -ohE 'aborted their communicators \([^)]*\)|did not abort in time[^;]*' \
        "$TMP"/stop-*.log 2>/dev/null | sort -u | sed 's/^/  /'
    check "node 0 ends non-zero, with a verdict" \
        "$([ "$r0" -ne 0 ] && [ -s "$TMP/stop-0.tl" ]; echo $?)"
fi

echo "gpu-smoke: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
