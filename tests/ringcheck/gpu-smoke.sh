#!/usr/bin/env bash
# The ring check's first run on real GPUs (make gpu-smoke): about three
# minutes on a machine with one or more NVIDIA GPUs, the real CUDA runtime
# and NCCL. Every run has a timeout around it; the script prints what it
# measured and ends non-zero when a step does not behave as documented.
#
#   RINGCHECK=path/to/ncclguard-ringcheck tests/ringcheck/gpu-smoke.sh
set -u -o pipefail

RINGCHECK=${RINGCHECK:-build/ncclguard-ringcheck}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpu-smoke.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

if [ ! -e /dev/nvidiactl ] || ! command -v nvidia-smi >/dev/null; then
    echo "SKIP gpu-smoke (no NVIDIA GPU here: /dev/nvidiactl or nvidia-smi missing)"
    exit 0
fi
if [ ! -x "$RINGCHECK" ]; then
    echo "SKIP gpu-smoke ($RINGCHECK is not built: make ringcheck)"
    exit 0
fi
command -v jq >/dev/null || { echo "gpu-smoke: needs jq"; exit 1; }

NGPU=$(nvidia-smi -L | grep -c '^GPU ')
echo "gpu-smoke: $NGPU GPUs; $(nvidia-smi --query-gpu=name,driver_version \
    --format=csv,noheader | head -1)"

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
run process 120 -- --expect-gpus "$NGPU" --mode process --timeout 100
check "process mode exits 0" "$([ "$RC" -eq 0 ]; echo $?)"
run group 120 -- --expect-gpus "$NGPU" --mode group --timeout 100
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
child=$(pgrep -P "$pid" | head -1)
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
run bootstrap 120 NCCL_SOCKET_IFNAME=lo NCCL_SOCKET_FAMILY=AF_INET6 -- \
    --expect-gpus "$NGPU" --timeout 60 --phase-timeout 10
check "exit 3" "$([ "$RC" -eq 3 ]; echo $?)"
check "a diagnosis in the report" \
    "$(jq -e '.diagnosis != null' "$TMP/bootstrap.json" >/dev/null; echo $?)"

echo "== 4. two \"nodes\" on GPU 0 (NCCL_HOSTID), across the network"
node() { # node RANK NAME ARGS...: one pod of a two-node LeaderWorkerSet
    local rank=$1 name=$2
    shift 2
    timeout -k 5 90 env CUDA_VISIBLE_DEVICES=0 NCCL_HOSTID="smoke-node-$rank" \
        NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 POD_IP=127.0.0.1 \
        LWS_LEADER_ADDRESS=127.0.0.1 LWS_GROUP_SIZE=2 \
        LWS_WORKER_INDEX="$rank" NCCLGUARD_JOB_ID="gpu-smoke-$name" \
        "$RINGCHECK" --expect-gpus 1 --multi-node auto \
        --rendezvous-port 29471 --multi-node-timeout 60 --timeout 80 \
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
t0=$(date +%s%N)
node 0 stop --phase-timeout 8 & p0=$!
node 1 stop --phase-timeout 8 & p1=$!
# Stop node 1's worker once the cross-node phase runs.
for _ in $(seq 1 300); do
    grep -q 'cross-node' "$TMP/stop-1.log" 2>/dev/null &&
        child=$(pgrep -P "$p1" -n 2>/dev/null) && [ -n "$child" ] &&
        pgrep -P "$child" >/dev/null 2>&1 && break
    sleep 0.1
done
worker=$(pgrep -P "$(pgrep -P "$p1" -n)" -n 2>/dev/null)
[ -n "$worker" ] && kill -STOP "$worker"
wait "$p0"; r0=$?
[ -n "$worker" ] && kill -CONT "$worker" 2>/dev/null
wait "$p1"; r1=$?
MS=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "stopped worker (pid ${worker:-none}): exits $r0 and $r1 in $MS ms"
grep -ohE 'aborted their communicators \([^)]*\)|did not abort in time[^;]*' \
    "$TMP/stop-0.log" "$TMP/stop-0.tl" 2>/dev/null | sort -u | sed 's/^/  /'
check "node 0 ends non-zero, with a verdict" \
    "$([ "$r0" -ne 0 ] && [ -s "$TMP/stop-0.tl" ]; echo $?)"
check "node 0's abort within the grace" \
    "$(grep -q 'aborted their communicators (in' "$TMP/stop-0.log"; echo $?)"

echo "gpu-smoke: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
