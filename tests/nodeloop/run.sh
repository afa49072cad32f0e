#!/usr/bin/env bash
# The node loop (docs/nodeloop.md) end to end, without a cluster: real
# termination messages from the ring check against its CUDA/NCCL test
# double, classified by the node loop; then the real node loop
# (`ncclguard-nodeloop`) against a fake API server (fake_kube.py) that applies every
# patch with `kubectl patch --local`. Each case checks the Node, its
# Events, the pods' Events and the metrics.
#
#   NODELOOP=... WATCHDOG=... RINGCHECK=... FAKES=... run.sh
#
# WATCHDOG is the hang agent, run once beside the node loop for its metrics.
set -u

: "${NODELOOP:?set NODELOOP to build/ncclguard-nodeloop}"
: "${WATCHDOG:?set WATCHDOG to build/ncclguard-watchdog}"
: "${RINGCHECK:?set RINGCHECK to build/ncclguard-ringcheck}"
: "${FAKES:?set FAKES to the folder with the test double}"
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/nodeloop-test.XXXXXX")
pass=0
fail=0
CASE=setup
AGENT_PID=
AGENT2_PID=
FAKE_PID=

cleanup() {
    [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null
    [ -n "$AGENT2_PID" ] && kill "$AGENT2_PID" 2>/dev/null
    [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null
    wait 2>/dev/null
    if [ -n "${NODELOOP_KEEP:-}" ]; then cp "$TMP"/patches.jsonl "$TMP"/validation-pod.json "$TMP"/vap.json "$NODELOOP_KEEP"/ 2>/dev/null; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); }
CASE_FAILED=0
bad() {
    fail=$((fail + 1))
    CASE_FAILED=1
    echo "FAIL: $CASE: $*"
    if [ -f "$TMP/agent.log" ]; then
        echo "---- agent log (last 15 lines)"
        tail -15 "$TMP/agent.log" | sed 's/^/    /'
    fi
}

# NODELOOP_CASES="tag ...": run only the cases with these tags (make
# check-nodeloop-TAG+TAG; tests/mutants uses them); empty: every case.
want() { [ -z "${NODELOOP_CASES:-}" ] || [[ " $NODELOOP_CASES " == *" $1 "* ]]; }
SKIPPING=0

for tool in jq kubectl python3 curl; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIP node loop checks ($tool is not installed)"
        echo "0 passed, 0 failed"
        exit 0
    fi
done
if [ ! -x "$RINGCHECK" ]; then
    echo "SKIP node loop checks (no ncclguard-ringcheck: CUDA and NCCL were not found at build time)"
    echo "0 passed, 0 failed"
    exit 0
fi

# ---- 1. real termination messages, classified --------------------------
# msg NAME ENV... -- ARGS... (msg.sh): the check's termination message
# against the double, in $TMP/msg/NAME.tl and .rc.
MSGTMP=$TMP
# shellcheck source=tests/nodeloop/msg.sh
. "$HERE/msg.sh"
# classified NAME JQ: the agent's classification of that message.
classified() {
    local out
    out=$("$NODELOOP" --classify "$(cat "$TMP/msg/$1.rc")" \
        "$TMP/msg/$1.tl")
    if printf '%s\n' "$out" | jq -e "$2" >/dev/null 2>&1; then ok; else
        bad "$1: classification $out fails $2"
        sed 's/^/    /' "$TMP/msg/$1.tl"
    fi
}

CASE="classification of real ring-check verdicts"
msg pass FAKECUDA_DEVICES=2 -- --expect-gpus 2 --timeout 20
msg pass8 FAKECUDA_DEVICES=8 -- --expect-gpus 8 --timeout 20
msg p2p_fallback FAKECUDA_DEVICES=4 FAKENCCL_P2P_BROKEN=1,2 -- \
    --expect-gpus 4 --timeout 20 --phase-timeout 3 --on-failure fallback \
    --fallback-conf "$TMP/nccl.conf"
msg p2p_fail FAKECUDA_DEVICES=2 FAKENCCL_P2P_BROKEN=0,1 -- --expect-gpus 2 \
    --timeout 20 --mode group
msg p2p_warn FAKECUDA_DEVICES=2 FAKENCCL_P2P_BROKEN=0,1,hang -- \
    --expect-gpus 2 --timeout 20 --phase-timeout 2 --on-failure warn
msg wrong FAKECUDA_DEVICES=2 FAKENCCL_WRONG=1 -- --expect-gpus 2 --timeout 20
msg pair_hang FAKECUDA_DEVICES=4 FAKENCCL_HANG_COLL=3 NCCL_P2P_DISABLE=1 \
    NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 -- \
    --expect-gpus 4 --timeout 20 --phase-timeout 1
msg ifname FAKECUDA_DEVICES=2 NCCL_SOCKET_IFNAME=net9 -- --expect-gpus 2 \
    --timeout 20
msg nodev FAKECUDA_DEVICES=0 -- --expect-gpus 2 --timeout 20
msg mismatch FAKECUDA_DEVICES=2 -- --expect-gpus 4 --timeout 20
msg dup FAKECUDA_DEVICES=2 FAKECUDA_DUPLICATE=0,1 -- --expect-gpus 2 \
    --timeout 20
msg shm FAKECUDA_DEVICES=2 NCCL_BUFFSIZE=1099511627776 -- --expect-gpus 2 \
    --timeout 20
msg hang_nodiag FAKECUDA_DEVICES=2 FAKENCCL_HANG_INIT=0 -- --expect-gpus 2 \
    --timeout 20 --phase-timeout 2 --no-diagnose
msg slow FAKECUDA_DEVICES=2 FAKENCCL_BUSBW_GBPS=0.5 -- --expect-gpus 2 \
    --timeout 20 --min-busbw 5 --no-diagnose
msg crash FAKECUDA_DEVICES=2 FAKENCCL_CRASH=1 -- --expect-gpus 2 \
    --timeout 20 --phase-timeout 2 --no-diagnose
msg usage -- --mode ring
# A cross-node verdict: tests/nodeloop/data/cross-*.tl are the termination
# logs of pods 0 (the leader) and 2 of tests/ringcheck/multinode.sh's case
# "one node's init hangs" (that case needs root and network namespaces, so
# they are kept as the binary wrote them; the pods' hostnames are pod-0 ..
# pod-2). Only the leader's names the failing pair.
for f in cross-leader cross-worker; do
    cp "$HERE/data/$f.tl" "$TMP/msg/$f.tl"
    echo 4 >"$TMP/msg/$f.rc"
done
# The watchdog's hang report for a lost GPU (pod_hang in watchdog/agent.c).
printf 'ncclguard-watchdog: NCCLHang: GPU 2 lost 3x200ms (NVML_ERROR_GPU_IS_LOST: fallen off the bus, an Xid-class fault; see the node'"'"'s kernel log); no checkpoint configured; SIGTERM now\npod ml/t uid u\n' >"$TMP/msg/hang_lost.tl"
echo 0 >"$TMP/msg/hang_lost.rc"

if want classify; then
classified pass '.verdict == "pass" and .class == "none"'
classified p2p_fallback '.verdict == "fallback" and .class == "node" and .reason == "P2PBroken" and .cure == "NCCL_P2P_DISABLE=1" and .code == 3 and .phase == 4'
classified p2p_fail '.verdict == "fail" and .class == "node" and .reason == "P2PBroken"'
classified p2p_warn '.verdict == "warn" and .class == "node" and .reason == "P2PBroken" and .code == 4'
classified wrong '.verdict == "fail" and .class == "node" and .reason == "WrongResults" and .code == 7'
classified pair_hang '.verdict == "fail" and .class == "node" and .reason == "GPUPairFails" and .code == 4'
classified ifname '.verdict == "fail" and .class == "job" and .reason == "SocketIfnameMissing"'
classified nodev '.class == "node" and .reason == "NoGPUOrDriver" and .code == 9'
classified mismatch '.class == "node" and .reason == "GPUCountMismatch"'
classified dup '.class == "node" and .reason == "DuplicateGPUs"'
classified shm '.class == "job" and .reason == "ShmTooSmall"'
classified hang_nodiag '.verdict == "fail" and .class == "unknown" and .code == 4'
classified slow '.class == "unknown" and .reason == "BandwidthLow" and .code == 8'
classified crash '.class == "unknown" and .code == 3'
classified usage '.verdict == "cannot-run" and .class == "job" and .reason == "UsageError"'
# The node agent's own hang report (watchdog/agent.c writes it into the
# container's termination message): shown, never held against the node.
printf 'ncclguard-watchdog: NCCLHang: 2/2 GPUs idle 5x60s, CPU 1.0 cores, 1 sockets CLOSE_WAIT, 0 queues stuck; no checkpoint configured; SIGTERM now\npod ml/t uid u\n' >"$TMP/msg/hang.tl"
echo 0 >"$TMP/msg/hang.rc"
classified hang '.verdict == "hang" and .class == "unknown"'
classified cross-leader '.verdict == "fail" and .class == "pair" and .reason == "NodePairFails" and .phase == 7 and .pair_hosts == ["pod-0", "pod-2"]'
classified cross-worker '.class == "job" and .reason == "CrossNodeIncomplete" and .phase == 7 and .pair_hosts == null'
# A lost GPU in the hang report is shown as one, but a container can write
# its own termination message: only the watchdog's Node Event counts.
classified hang_lost '.verdict == "lost-gpu" and .class == "unknown" and .reason == "GPULost"'
# Killed without a message (OOM, eviction): no verdict.
: >"$TMP/msg/killed.tl"
echo 137 >"$TMP/msg/killed.rc"
classified killed '.verdict == "cannot-run" and .class == "unknown"'
fi

# ---- 2. the loop against a fake API server -----------------------------
NODE=gpu-1
NS=ncclguard-watchdog
PORT=0
PATCHES=$TMP/patches.jsonl

api() { [ "$SKIPPING" = 1 ] && return 0; curl -sS -X "$1" "http://127.0.0.1:$PORT$2" ${3:+-H 'Content-Type: application/json' --data-binary "$3"}; }
state() { api GET /fake/state; }

start_fake() {
    [ "$SKIPPING" = 1 ] && return 0
    rm -f "$TMP/port"
    python3 "$HERE/fake_kube.py" "$TMP/port" "$PATCHES" 2>"$TMP/fake.err" &
    FAKE_PID=$!
    for _ in $(seq 100); do [ -f "$TMP/port" ] && break; sleep 0.05; done
    PORT=$(cat "$TMP/port")
}
stop_fake() {
    [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null
    wait "$FAKE_PID" 2>/dev/null
    FAKE_PID=
}

# node NAME GPUS TAINTED: a GPU Node as the kubelet reports it (Ready
# condition, allocatable GPUs, another taint that must survive).
node() {
    [ "$SKIPPING" = 1 ] && return 0
    local taints='[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]'
    [ "$3" = 1 ] && taints='[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"},{"key":"ncclguard.io/nccl-unhealthy","value":"node","effect":"NoSchedule"}]'
    api POST /fake/node "$(jq -nc --arg n "$1" --arg g "$2" --argjson t "$taints" '{
        apiVersion: "v1", kind: "Node",
        metadata: {name: $n, uid: ("uid-" + $n),
                   labels: {"kubernetes.io/hostname": $n,
                            "nvidia.com/gpu.present": "true"}},
        spec: {taints: $t},
        status: {allocatable: {cpu: "64", "nvidia.com/gpu": $g},
                 conditions: [{type: "Ready", status: "True",
                               reason: "KubeletReady",
                               message: "kubelet is posting ready status",
                               lastHeartbeatTime: "2026-12-01T00:00:00Z",
                               lastTransitionTime: "2026-12-01T00:00:00Z"}]}}')" >/dev/null
}

# cluster N_GPU_NODES N_TAINTED: gpu-1 plus others, some tainted already.
cluster() {
    node "$NODE" 8 0
    for i in $(seq 2 "$1"); do
        node "gpu-$i" 8 "$([ "$i" -le $(($2 + 1)) ] && echo 1 || echo 0)"
    done
}

# pod NAME MSG [RESTARTS [LASTMSG]]: a GPU pod on gpu-1 whose ring check
# ended with message MSG (and before that, LASTMSG).
pod() {
    [ "$SKIPPING" = 1 ] && return 0
    local name=$1 m=$2 restarts=${3:-0} last=${4:-}
    local now node=${POD_NODE:-$NODE}
    now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    api POST /fake/pod "$(jq -nc --arg n "$name" --arg node "$node" \
        --arg now "$now" --argjson rc "$restarts" \
        --rawfile msg "$TMP/msg/$m.tl" --argjson ex "$(cat "$TMP/msg/$m.rc")" \
        --arg last "$last" \
        --rawfile lmsg "$TMP/msg/${last:-$m}.tl" \
        --argjson lex "$(cat "$TMP/msg/${last:-$m}.rc")" '{
        apiVersion: "v1", kind: "Pod",
        metadata: {name: $n, namespace: "ml", uid: ("uid-" + $n)},
        spec: {nodeName: $node,
               initContainers: [{name: "ncclguard-ringcheck", image: "rc",
                                 resources: {limits: {"nvidia.com/gpu": "4"}}}],
               containers: [{name: "train", image: "t",
                             resources: {limits: {"nvidia.com/gpu": "4"}}}]},
        status: {phase: "Pending",
                 initContainerStatuses: [{name: "ncclguard-ringcheck",
                     restartCount: $rc, ready: false,
                     state: {terminated: {exitCode: $ex,
                         reason: (if $ex == 0 then "Completed" else "Error" end),
                         message: $msg, startedAt: $now, finishedAt: $now}},
                     lastState: (if $last == "" then {} else {terminated: {
                         exitCode: $lex, reason: "Error", message: $lmsg,
                         startedAt: $now, finishedAt: $now}} end)}]}}')" >/dev/null
}

# pod_running NAME NODE: a GPU pod whose ring check still runs.
pod_running() {
    [ "$SKIPPING" = 1 ] && return 0
    api POST /fake/pod "$(jq -nc --arg n "$1" --arg node "$2" '{
        apiVersion: "v1", kind: "Pod",
        metadata: {name: $n, namespace: "ml", uid: ("uid-" + $n)},
        spec: {nodeName: $node,
               initContainers: [{name: "ncclguard-ringcheck", image: "rc"}],
               containers: [{name: "train", image: "t",
                             resources: {limits: {"nvidia.com/gpu": "2"}}}]},
        status: {phase: "Pending",
                 initContainerStatuses: [{name: "ncclguard-ringcheck",
                     restartCount: 0, ready: false,
                     state: {running: {startedAt: "2026-12-01T00:00:00Z"}}}]}}')" >/dev/null
}

# pod_main NAME MSG: a pod on gpu-1 whose ring check passed and whose
# main container ended with message MSG (the watchdog's hang report).
pod_main() {
    [ "$SKIPPING" = 1 ] && return 0
    api POST /fake/pod "$(jq -nc --arg n "$1" --arg node "$NODE" \
        --rawfile msg "$TMP/msg/$2.tl" --rawfile ok "$TMP/msg/pass.tl" '{
        apiVersion: "v1", kind: "Pod",
        metadata: {name: $n, namespace: "ml", uid: ("uid-" + $n)},
        spec: {nodeName: $node,
               initContainers: [{name: "ncclguard-ringcheck", image: "rc"}],
               containers: [{name: "train", image: "t"}]},
        status: {phase: "Failed",
                 initContainerStatuses: [{name: "ncclguard-ringcheck",
                     restartCount: 0, ready: false,
                     state: {terminated: {exitCode: 0, reason: "Completed",
                         message: $ok, finishedAt: "2026-12-01T00:00:00Z"}}}],
                 containerStatuses: [{name: "train", restartCount: 0,
                     ready: false, state: {terminated: {exitCode: 143,
                         reason: "Error", message: $msg,
                         finishedAt: "2026-12-01T00:00:00Z"}}}]}}')" >/dev/null
}

# gone NAME: the pod ends (its GPUs are free again).
gone() { [ "$SKIPPING" = 1 ] && return 0; api DELETE "/api/v1/namespaces/ml/pods/$1" >/dev/null; }

agent() {
    [ "$SKIPPING" = 1 ] && return 0
    "$NODELOOP" --api-server "http://127.0.0.1:$PORT" \
        --node-name "$NODE" --namespace "$NS" --image rc:test \
        --watch-timeout 1s --tick 200ms --heartbeat 1h \
        --metrics-file "$TMP/metrics" "$@" >>"$TMP/agent.log" 2>&1 &
    AGENT_PID=$!
}
stop_agent() {
    [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null
    wait "$AGENT_PID" 2>/dev/null
    AGENT_PID=
    [ -n "$AGENT2_PID" ] && kill "$AGENT2_PID" 2>/dev/null
    wait "$AGENT2_PID" 2>/dev/null
    AGENT2_PID=
}
# agent2 NODE ARGS...: a second node's agent (its own log and metrics).
agent2() {
    [ "$SKIPPING" = 1 ] && return 0
    local node=$1
    shift
    "$NODELOOP" --api-server "http://127.0.0.1:$PORT" \
        --node-name "$node" --namespace "$NS" --image rc:test \
        --watch-timeout 1s --tick 200ms --heartbeat 1h \
        --metrics-file "$TMP/metrics2" "$@" >>"$TMP/agent2.log" 2>&1 &
    AGENT2_PID=$!
}

# wait_for JQ [SECONDS]: polls the fake's state until JQ holds (40 s by
# default: the machine may be loaded; passing cases take about a second).
wait_for() {
    [ "$SKIPPING" = 1 ] && return 0
    local t=$((${2:-40} * 10))
    for _ in $(seq "$t"); do
        state | jq -e "$1" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}
expect() {
    [ "$SKIPPING" = 1 ] && return 0
    # After a failure in this case, later checks do not wait (a broken
    # build fails fast, under make mutants too).
    local wait=${2:-40}
    [ "$CASE_FAILED" = 1 ] && wait=1
    if wait_for "$1" "$wait"; then ok; else
        bad "never true: $1"
        state | jq -c "{node: .nodes[\"$NODE\"] | {taints: .spec.taints, ann: .metadata.annotations, cond: [.status.conditions[] | select(.type == \"NCCLHealthy\")]}, events: [.events[] | .reason]}" 2>/dev/null | cut -c1-1500
    fi
}
# expect_stays JQ SECONDS: JQ still holds after SECONDS.
expect_stays() {
    [ "$SKIPPING" = 1 ] && return 0
    sleep "$2"
    if state | jq -e "$1" >/dev/null 2>&1; then ok; else bad "no longer true: $1"; fi
}
expect_metric() {
    [ "$SKIPPING" = 1 ] && return 0
    if grep -qE "$1" "$TMP/metrics" 2>/dev/null; then ok; else
        bad "metrics lack /$1/"
    fi
}

N='.nodes["gpu-1"]'
COND="[$N.status.conditions[] | select(.type == \"NCCLHealthy\")][0]"
TAINT="[$N.spec.taints[]? | select(.key == \"ncclguard.io/nccl-unhealthy\")]"
ST="($N.metadata.annotations[\"ncclguard.io/nccl-state\"] // \"{}\" | fromjson)"
nev() { echo "([.events[] | select(.reason == \"$1\")] | length)"; }

# new_case NAME: a fresh fake API server and cluster for each case.
new_case() {
    CASE=$2
    stop_agent
    stop_fake
    SKIPPING=0
    CASE_FAILED=0
    want "$1" || SKIPPING=1
    : >"$TMP/agent.log"
    : >"$TMP/agent2.log"
    rm -f "$TMP/metrics" "$TMP/metrics2"
    start_fake
}

new_case quarantine "two node-class failures from different pods taint in quarantine mode"
cluster 10 0
agent --mode quarantine --threshold 2 --cooldown 1h
expect "$COND.status == \"True\" and $COND.reason == \"NCCLChecksPass\""
# Two verdicts from ONE pod (a restart) are not two pods.
pod a p2p_fail 1 wrong
expect "$ST.evidence | length == 2"
expect "$COND.reason == \"NCCLFailuresSeen\""
expect_stays "($TAINT | length) == 0" 1
pod b p2p_fallback
expect "$TAINT == [{key: \"ncclguard.io/nccl-unhealthy\", value: \"node\", effect: \"NoSchedule\"}]"
expect "$COND.status == \"False\" and $COND.reason == \"NCCLQuarantined\""
expect "$N.spec.taints | map(.key) | index(\"nvidia.com/gpu\") != null"
expect "[$N.status.conditions[] | select(.type == \"Ready\")] | length == 1"
expect "$(nev NCCLQuarantined) == 1"
expect "[.events[] | select(.involvedObject.kind == \"Node\" and .involvedObject.name == \"gpu-1\")] | length >= 1"
# Every verdict is an Event on its pod: a's two failures, b's fallback.
expect "[.events[] | select(.involvedObject.name == \"a\" and .reason == \"NCCLRingCheckFailed\")] | length == 2"
expect "[.events[] | select(.involvedObject.name == \"b\" and .reason == \"NCCLRingCheckFallback\" and (.message | test(\"NCCL_P2P_DISABLE=1\")))] | length == 1"
expect "[.patches[].patch | .. | objects | select(.effect? == \"NoExecute\")] | length == 0"
expect_metric 'ncclguard_node_state\{node="gpu-1",state="quarantined"\} 1'
expect_metric 'ncclguard_node_verdicts_total\{node="gpu-1",verdict="fallback",class="node"\} 1'
expect_metric 'ncclguard_node_taints_total\{node="gpu-1",action="applied"\} 1'

new_case observe "observe mode only sets the condition"
cluster 10 0
agent --mode observe --threshold 2
pod a p2p_fail
pod b wrong
expect "$COND.status == \"False\" and $COND.reason == \"NCCLNodeUnhealthy\""
expect "$(nev NCCLNodeUnhealthy) == 1"
expect_stays "($TAINT | length) == 0" 1

new_case job "job-class failures never count"
cluster 10 0
agent --mode quarantine --threshold 2
pod a ifname
pod b shm
pod c usage
pod d hang_nodiag
expect "[.events[] | select(.involvedObject.kind == \"Pod\")] | length == 4"
expect_stays "($TAINT | length) == 0 and $COND.reason == \"NCCLChecksPass\" and ($ST.evidence | length) == 0" 1
expect_metric 'ncclguard_node_verdicts_total\{node="gpu-1",verdict="fail",class="job"\} 2'
expect_metric 'ncclguard_node_verdicts_total\{node="gpu-1",verdict="cannot-run",class="job"\} 1'

new_case breaker "the breaker holds at the share"
# 10 GPU nodes, one tainted already: a second is 20 % > 10 %.
cluster 10 1
agent --mode quarantine --threshold 2 --max-share 10
pod a p2p_fail
pod b wrong
expect "$COND.status == \"False\" and $COND.reason == \"NCCLQuarantineWithheld\""
expect "$(nev NCCLQuarantineWithheld) == 1"
expect_stays "($TAINT | length) == 0" 1
expect_metric 'ncclguard_node_breaker_open\{node="gpu-1"\} 1'
expect_metric 'ncclguard_node_taints_total\{node="gpu-1",action="withheld"\} 1'

new_case breaker "the breaker lets the first node of ten through (10 % is not more than 10 %)"
cluster 10 0
agent --mode quarantine --threshold 2 --max-share 10
pod a p2p_fail
pod b wrong
expect "($TAINT | length) == 1"

new_case validation "a passing validation pod lifts the taint"
cluster 10 0
agent --mode quarantine --threshold 2 --cooldown 1s
pod a p2p_fail
pod b wrong
expect "($TAINT | length) == 1"
# The GPUs are busy (a and b still hold them): no validation pod yet.
expect_stays "[.pods[] | select(.metadata.namespace == \"$NS\")] | length == 0" 2
gone a
gone b
VP="[.pods[] | select(.metadata.namespace == \"$NS\")]"
expect "$VP | length == 1 and (.[0].spec.nodeName == \"gpu-1\") and (.[0].spec.containers[0].resources.limits[\"nvidia.com/gpu\"] == \"8\") and (.[0].spec.tolerations[0].key == \"ncclguard.io/nccl-unhealthy\") and (.[0].spec.containers[0].image == \"rc:test\") and (.[0].spec.restartPolicy == \"Never\")" 40
VNAME=$(state | jq -r "$VP | .[0].metadata.name")
state | jq "$VP | .[0]" >"$TMP/validation-pod.json"
api POST /fake/pod "$(state | jq -c --rawfile m "$TMP/msg/pass8.tl" "$VP | .[0] | .status = {phase: \"Succeeded\", containerStatuses: [{name: \"ringcheck\", restartCount: 0, state: {terminated: {exitCode: 0, reason: \"Completed\", message: \$m, finishedAt: \"2026-12-01T00:00:00Z\"}}}]}")" >/dev/null
expect "($TAINT | length) == 0 and $COND.status == \"True\""
expect "$(nev NCCLValidationPassed) == 1"
expect "[.pods[] | select(.metadata.name == \"$VNAME\")] | length == 0"
expect_metric 'ncclguard_node_validations_total\{node="gpu-1",result="pass"\} 1'

new_case validation "a failing validation pod keeps the taint, with a longer cooldown"
cluster 10 0
agent --mode quarantine --threshold 2 --cooldown 1s --cooldown-max 1h
pod a p2p_fail
pod b wrong
gone a
gone b
VP="[.pods[] | select(.metadata.namespace == \"$NS\")]"
expect "$VP | length == 1" 40
api POST /fake/pod "$(state | jq -c --rawfile m "$TMP/msg/p2p_fail.tl" "$VP | .[0] | .status = {phase: \"Failed\", containerStatuses: [{name: \"ringcheck\", restartCount: 0, state: {terminated: {exitCode: 3, reason: \"Error\", message: \$m, finishedAt: \"2026-12-01T00:00:00Z\"}}}]}")" >/dev/null
expect "$(nev NCCLValidationFailed) == 1"
expect "$ST.fails == 1 and ($ST.nextCheck - $ST.quarantinedAt) >= 2000"
expect "($TAINT | length) == 1 and $COND.reason == \"NCCLQuarantined\""
expect_metric 'ncclguard_node_validations_total\{node="gpu-1",result="fail"\} 1'
# The next try comes after the doubled cooldown (2 s).
expect "$VP | length == 1" 40

new_case expiry "the quarantine expires"
cluster 10 0
agent --mode quarantine --threshold 2 --cooldown 1h --expiry 3s
pod a p2p_fail
pod b wrong
expect "($TAINT | length) == 1"
expect "($TAINT | length) == 0 and $COND.status == \"True\"" 40
expect "$(nev NCCLQuarantineExpired) == 1"

new_case byhand "a taint removed with kubectl alone is respected"
cluster 10 0
agent --mode quarantine --threshold 2 --cooldown 1h
pod a p2p_fail
pod b wrong
expect "($TAINT | length) == 1"
# What `kubectl taint nodes gpu-1 ncclguard.io/nccl-unhealthy-` sends.
[ "$SKIPPING" = 1 ] || curl -sS -X PATCH \
    -H 'Content-Type: application/json-patch+json' \
    "http://127.0.0.1:$PORT/api/v1/nodes/$NODE" --data-binary \
    "$(state | jq -c "[{op: \"replace\", path: \"/spec/taints\", value: [$N.spec.taints[] | select(.key != \"ncclguard.io/nccl-unhealthy\")]}]")" >/dev/null
expect "$(nev NCCLQuarantineLiftedByHand) == 1 and $COND.status == \"True\" and $ST.state == \"healthy\""
expect_stays "($TAINT | length) == 0" 1
# A restarted agent lists pods a and b again: what the lift forgot stays
# forgotten.
stop_agent
agent --mode quarantine --threshold 2 --cooldown 1h
expect_stays "($TAINT | length) == 0 and ($ST.evidence | length) == 0 and $ST.clearedAt > 0" 2

new_case restart "an agent restart keeps its state (it lives in the API)"
cluster 10 0
agent --mode quarantine --threshold 2 --cooldown 1h
pod a p2p_fail
expect "$ST.evidence | length == 1"
stop_agent
agent --mode quarantine --threshold 2 --cooldown 1h
# The relist sees pod a again: it counts once, and its Event is not
# posted twice.
expect_stays "($ST.evidence | length) == 1 and ([.events[] | select(.involvedObject.name == \"a\")] | length) == 1" 2
stop_agent
# Pod a goes while no agent runs: its evidence now lives only on the Node.
gone a
agent --mode quarantine --threshold 2 --cooldown 1h
pod b wrong
expect "($TAINT | length) == 1"
stop_agent
agent --mode quarantine --threshold 2 --cooldown 1h
expect_stays "($TAINT | length) == 1 and $ST.state == \"quarantined\"" 2
expect_metric 'ncclguard_node_state\{node="gpu-1",state="quarantined"\} 1'

new_case watch "a watch drop loses no evidence (resumed, not relisted)"
cluster 10 0
agent --mode quarantine --threshold 2 --cooldown 1h
pod a p2p_fail
expect "$ST.evidence | length == 1"
LISTS=$(state | jq .lists)
api POST /fake/drop '{"hold": 1.5}' >/dev/null
sleep 0.3
pod b wrong
expect "($TAINT | length) == 1"
expect ".lists == $LISTS"
expect_metric 'ncclguard_node_watch_restarts_total\{node="gpu-1",why="dropped"\} [1-9]'

new_case watch "a 410 Gone relists and still sees every pod"
cluster 10 0
agent --mode quarantine --threshold 2 --cooldown 1h
pod a p2p_fail
expect "$ST.evidence | length == 1"
LISTS=$(state | jq .lists)
api POST /fake/drop '{"hold": 1.0}' >/dev/null
sleep 0.3
pod b wrong
api POST /fake/compact '{}' >/dev/null
expect "($TAINT | length) == 1"
expect ".lists > $LISTS"
expect_metric 'ncclguard_node_watch_restarts_total\{node="gpu-1",why="gone"\} [1-9]'

new_case pair "a pair verdict names the other node; that node counts it once its own evidence agrees"
cluster 3 0
N2='.nodes["gpu-2"]'
ST2="($N2.metadata.annotations[\"ncclguard.io/nccl-state\"] // \"{}\" | fromjson)"
PAIREV='[.events[] | select(.reason == "NCCLNodePairFailed")]'
agent --mode observe --event-poll 200ms
agent2 gpu-2 --mode observe --event-poll 200ms
# A three-node job: pod-0 (the leader) on gpu-1, pod-1 on gpu-3, pod-2 on
# gpu-2, whose ring check is still running.
pod_running pod-2 gpu-2
POD_NODE=gpu-3 pod pod-1 cross-worker
pod pod-0 cross-leader
expect "$PAIREV | length == 1 and (.[0].involvedObject | .kind == \"Node\" and .name == \"gpu-2\") and .[0].related.name == \"pod-0\" and .[0].type == \"Warning\" and (.[0].metadata.annotations[\"ncclguard.io/evidence\"] | fromjson | .node == \"gpu-1\" and .pod == \"ml/pod-0\" and .key == \"uid-pod-0/ncclguard-ringcheck/0\")"
# The leader's node counts its own pair verdict.
expect "$ST.evidence | length == 1 and .[0].class == \"pair\" and (.[0] | has(\"peer\") | not)"
# gpu-2 has no evidence of its own yet: the Event does not count there.
expect_stays "($ST2.evidence // []) | length == 0" 1
# pod-2's own check fails in the cross-node phase: now it agrees.
POD_NODE=gpu-2 pod pod-2 cross-worker
expect "$ST2.evidence | length == 1 and .[0].class == \"pair\" and .[0].peer == \"gpu-1\" and .[0].pod == \"ml/pod-0\""
expect "$ST2.crossFailAt > 0"
# Counted once, however often it is read again; gpu-3 was not named.
expect_stays "($ST2.evidence | length) == 1 and ($PAIREV | length) == 1 and ([.events[] | select(.involvedObject.name == \"gpu-3\")] | length) == 0" 1
expect_metric 'ncclguard_node_peer_evidence_total\{node="gpu-1",action="pair-sent"\} 1'
if [ "$SKIPPING" = 0 ]; then
    grep -qE 'ncclguard_node_peer_evidence_total\{node="gpu-2",action="pair-counted"\} 1' "$TMP/metrics2" && ok ||
        bad "gpu-2's metrics lack pair-counted 1"
    # For the admission policies' check (section 4).
    state | jq -c '.events[] | select(.reason == "NCCLNodePairFailed")' >>"$TMP/events.jsonl"
fi

new_case gpulost "the watchdog's lost GPU counts as node-class evidence"
cluster 10 0
agent --mode quarantine --threshold 2 --cooldown 1h --event-poll 200ms
# lost_event POD NODE: the Event the watchdog posts on its Node for a
# lost GPU (node_gpu_lost_event in watchdog/agent.c, contract/nodeevent.h).
lost_event() {
    [ "$SKIPPING" = 1 ] && return 0
    api POST /api/v1/namespaces/default/events "$(jq -nc --arg p "$1" --arg node "$2" '{
        apiVersion: "v1", kind: "Event",
        metadata: {name: ($node + ".ncclguard-gpulost.uid-" + $p), namespace: "default",
                   annotations: {"ncclguard.io/evidence": ({key: ("uid-" + $p + "/gpu-lost"),
                       pod: ("ml/" + $p), node: $node, reason: "GPULost",
                       at: (now * 1000 | floor), gpus: "2"} | tojson)}},
        involvedObject: {apiVersion: "v1", kind: "Node", name: "gpu-1"},
        related: {apiVersion: "v1", kind: "Pod", name: $p, namespace: "ml"},
        reason: "NCCLGPULost", type: "Warning",
        message: "NVML reports GPU 2 lost (NVML_ERROR_GPU_IS_LOST)",
        source: {component: "ncclguard-watchdog", host: $node},
        reportingComponent: "ncclguard-watchdog", reportingInstance: $node}')" >/dev/null
}
# The same lost GPU in a container's own termination message: shown, not
# counted (the container could have written it).
pod_main t1 hang_lost
expect "[.events[] | select(.involvedObject.name == \"t1\" and .reason == \"NCCLHang\" and (.message | test(\"lost-gpu, unknown class \\\\(GPULost\\\\)\")))] | length == 1"
lost_event a gpu-1
expect "$ST.evidence | length == 1 and .[0].class == \"node\" and .[0].reason == \"GPULost\" and .[0].key == \"uid-a/gpu-lost\""
# Another node's watchdog cannot speak for this one.
lost_event b gpu-7
expect_stays "($ST.evidence | length) == 1 and ($TAINT | length) == 0" 1
# One that says it comes from another node than its annotation names.
[ "$SKIPPING" = 1 ] || api POST /api/v1/namespaces/default/events "$(state | jq -c '.events[] | select(.reason == "NCCLGPULost" and .involvedObject.kind == "Node" and .reportingInstance == "gpu-1")' | head -1 | jq -c '.metadata.name = "forged" | .reportingInstance = "gpu-7" | .metadata.annotations["ncclguard.io/evidence"] |= (fromjson | .key = "uid-d/gpu-lost" | tojson) | del(.metadata.resourceVersion)')" >/dev/null
expect_stays "($ST.evidence | length) == 1 and ($TAINT | length) == 0" 1
lost_event c gpu-1
expect "($TAINT | length) == 1 and $TAINT[0].value == \"node\""
expect_metric 'ncclguard_node_peer_evidence_total\{node="gpu-1",action="gpu-lost-counted"\} 2'
expect_metric 'ncclguard_node_verdicts_total\{node="gpu-1",verdict="lost-gpu",class="node"\} 2'
[ "$SKIPPING" = 1 ] || state | jq -c '.events[] | select(.reason == "NCCLGPULost" and .involvedObject.kind == "Node" and .metadata.name != "forged" and .reportingInstance == "gpu-1")' | head -1 >>"$TMP/events.jsonl"

new_case policy "the default policy only observes; a policy with mode quarantine taints"
cluster 10 0
POL=$TMP/policy.yaml
cp "$HERE/../../policy/default.yaml" "$POL"
# No quarantine flag: the settings are the policy's.
agent --policy "$POL" --cooldown 1h
pod a p2p_fail
pod b wrong
expect "$COND.status == \"False\" and $COND.reason == \"NCCLNodeUnhealthy\""
expect_stays "($TAINT | length) == 0" 1
expect_metric 'ncclguard_node_quarantine_mode\{node="gpu-1",mode="observe"\} 1'
# The ConfigMap changes: the same file, now in quarantine mode. The loop
# reads it on its next step and quarantines the node it had only marked.
[ "$SKIPPING" = 1 ] || sed 's/^    mode: observe$/    mode: quarantine/' "$HERE/../../policy/default.yaml" >"$POL.new"
[ "$SKIPPING" = 1 ] || { grep -q '^    mode: quarantine$' "$POL.new" && ok || bad "the quarantine block's mode line moved in policy/default.yaml"; }
[ "$SKIPPING" = 1 ] || mv "$POL.new" "$POL"
expect "$TAINT == [{key: \"ncclguard.io/nccl-unhealthy\", value: \"node\", effect: \"NoSchedule\"}] and $COND.reason == \"NCCLQuarantined\""
expect_metric 'ncclguard_node_quarantine_mode\{node="gpu-1",mode="quarantine"\} 1'
expect_metric 'ncclguard_node_policy_reloads_total\{node="gpu-1",result="ok"\} 2'
# A broken file keeps the last good policy, and says so once.
[ "$SKIPPING" = 1 ] || printf 'defaults: [\n' >"$POL"
expect_stays "($TAINT | length) == 1" 1
expect_metric 'ncclguard_node_policy_reload_failing\{node="gpu-1"\} 1'
expect_metric 'ncclguard_node_quarantine_mode\{node="gpu-1",mode="quarantine"\} 1'
if [ "$SKIPPING" = 0 ]; then
    [ "$(grep -c '"event":"policy-error"' "$TMP/agent.log")" = 1 ] && ok || bad "the broken policy was reported $(grep -c '"event":"policy-error"' "$TMP/agent.log") times"
fi

new_case policy "a quarantine flag overrides the policy"
cluster 10 0
sed 's/^    mode: observe$/    mode: quarantine/' "$HERE/../../policy/default.yaml" >"$TMP/policy.yaml"
agent --policy "$TMP/policy.yaml" --mode observe
pod a p2p_fail
pod b wrong
expect "$COND.reason == \"NCCLNodeUnhealthy\""
expect_stays "($TAINT | length) == 0" 1
# A policy that does not load stops the start, as it does the webhook's.
if [ "$SKIPPING" = 0 ]; then
    printf 'defaults: [\n' >"$TMP/bad-policy.yaml"
    "$NODELOOP" --api-server "http://127.0.0.1:$PORT" --node-name "$NODE" \
        --namespace "$NS" --policy "$TMP/bad-policy.yaml" --run-for 1s >"$TMP/bad.out" 2>&1
    [ $? = 1 ] && grep -q 'bad-policy.yaml:2:1' "$TMP/bad.out" && ok || bad "a broken policy at start: $(cat "$TMP/bad.out")"
fi

new_case garbled "a 200 answer that is not JSON is an API error, logged and counted, and the loop goes on"
cluster 10 0
api POST /fake/garble '{"path": "/api/v1/nodes/gpu-1", "count": 2}' >/dev/null
api POST /fake/garble '{"path": "/api/v1/nodes", "count": 1}' >/dev/null
agent --mode quarantine --threshold 2
expect "$COND.status == \"True\" and $COND.reason == \"NCCLChecksPass\""
pod a p2p_fail
pod b wrong
expect "($TAINT | length) == 1"
if [ "$SKIPPING" = 0 ]; then
    for _ in $(seq 50); do
        grep -qE 'ncclguard_node_api_errors_total\{node="gpu-1"\} [3-9]' "$TMP/metrics" 2>/dev/null && break
        sleep 0.2
    done
fi
expect_metric 'ncclguard_node_api_errors_total\{node="gpu-1"\} 3$'
if [ "$SKIPPING" = 0 ]; then
    n=$(grep '"event":"api-error"' "$TMP/agent.log" | grep -c 'the answer is not JSON.*a proxy.*502 Bad Gateway')
    [ "$n" = 3 ] && ok || bad "$n api-error lines say the answer is not JSON and show it, not 3: $(grep api-error "$TMP/agent.log" | head -5)"
fi

# ---- 3. every patch the agent sent, replayed on its Node ---------------
CASE="every patch applies to a real Node manifest with kubectl patch --local"
stop_agent
SKIPPING=0
n=0
want replay &&
while IFS= read -r rec; do
    n=$((n + 1))
    printf '%s\n' "$rec" | jq .before >"$TMP/before.json"
    type=$(printf '%s\n' "$rec" | jq -r .type)
    case $type in
    application/json-patch+json) t=json ;;
    application/strategic-merge-patch+json) t=strategic ;;
    *) t=merge ;;
    esac
    p=$(printf '%s\n' "$rec" | jq -c .patch)
    path=$(printf '%s\n' "$rec" | jq -r .path)
    if ! kubectl patch --local -f "$TMP/before.json" --type "$t" -p "$p" \
        -o json >"$TMP/after.json" 2>"$TMP/kerr"; then
        bad "patch $n ($path) does not apply: $(cat "$TMP/kerr")"
        continue
    fi
    # Our own patches touch only the condition, the state annotation and
    # the taint list; the test's by-hand kubectl patch is the one exception
    # (it changes taints only).
    if [[ $path == /api/v1/nodes/*/status ]]; then
        printf '%s\n' "$rec" | jq -e '.patch | keys == ["status"] and (.status | keys == ["conditions"]) and (.status.conditions | length == 1) and (.status.conditions[0] | keys == ["lastHeartbeatTime","lastTransitionTime","message","reason","status","type"]) and .status.conditions[0].type == "NCCLHealthy"' >/dev/null && ok || bad "status patch $n: $p"
        printf '%s\n' "$rec" | jq -e --slurpfile a "$TMP/after.json" '(.after.status | .conditions |= sort_by(.type)) == ($a[0].status | .conditions |= sort_by(.type))' >/dev/null && ok || bad "status patch $n: another result than the fake's"
        jq -e '[.status.conditions[] | select(.type == "Ready")] | length == 1' "$TMP/after.json" >/dev/null && ok || bad "status patch $n lost the Ready condition"
    else
        printf '%s\n' "$rec" | jq -e '.patch | type == "array" and all(.[]; .path == "/metadata/resourceVersion" or .path == "/metadata/annotations" or .path == "/metadata/annotations/ncclguard.io~1nccl-state" or .path == "/spec/taints")' >/dev/null && ok || bad "node patch $n touches more: $p"
        printf '%s\n' "$rec" | jq -e --slurpfile a "$TMP/after.json" '.after.spec == $a[0].spec and .after.metadata.annotations == $a[0].metadata.annotations' >/dev/null && ok || bad "node patch $n: another result than the fake's"
        jq -e '[.spec.taints[]? | select(.key == "nvidia.com/gpu")] | length == 1' "$TMP/after.json" >/dev/null && ok || bad "node patch $n lost another taint"
        jq -e '[.spec.taints[]? | select(.effect == "NoExecute")] | length == 0' "$TMP/after.json" >/dev/null && ok || bad "node patch $n adds NoExecute"
    fi
done <"$PATCHES"
want replay && { [ "$n" -gt 5 ] && ok || bad "only $n patches recorded"; }

CASE="lastTransitionTime changes only with the status"
if want replay; then
    state | jq -e "$COND.lastTransitionTime <= $COND.lastHeartbeatTime" >/dev/null && ok || bad "transition after heartbeat"
fi

# ---- 4. the ValidatingAdmissionPolicies, evaluated ----------------------
CASE="the admission policies allow the agent's requests and nothing more"
if ! want vap; then
    :
elif ! type -P node >/dev/null; then
    echo "SKIP the admission policies' CEL (node is not installed)"
elif [ ! -d "${CEL_MODULES:-}/@bufbuild/cel" ]; then
    echo "SKIP the admission policies' CEL (no @bufbuild/cel under CEL_MODULES: npm install failed)"
else
    mkdir -p "$TMP/k"
    cat >"$TMP/k/kustomization.yaml" <<EOK
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$(realpath --relative-to="$TMP/k" "$HERE/../../deploy/overlays/self-signed")]
components: [$(realpath --relative-to="$TMP/k" "$HERE/../../deploy/components/watchdog"), $(realpath --relative-to="$TMP/k" "$HERE/../../deploy/components/node-health")]
EOK
    if kubectl kustomize "$TMP/k" | yq -s '[.[] | select(.kind == "ValidatingAdmissionPolicy")]' >"$TMP/vap.json" 2>"$TMP/kerr"; then
        ok
        evfile=
        if want pair && want gpulost; then evfile=$TMP/events.jsonl; fi
        out=$(command node "$HERE/vap.cjs" "$TMP/vap.json" "$PATCHES" "$TMP/validation-pod.json" $evfile 2>&1)
        echo "$out" | grep -v '^vap:'
        p=$(echo "$out" | sed -n 's/^vap: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
        if [ -n "$p" ]; then
            pass=$((pass + ${p% *}))
            fail=$((fail + ${p#* }))
        else
            bad "vap.cjs: $out"
        fi
    else
        bad "kubectl kustomize: $(cat "$TMP/kerr")"
    fi
fi

# ---- 5. the alerts and the dashboard read only what the agents export ---
NH=$HERE/../../deploy/components/node-health
CASE="every metric in the node-health rules and dashboard is exported"
if want alerts; then
    # The node loop's families: a short run against the fake (every
    # family is written from the first step on).
    stop_agent
    stop_fake
    SKIPPING=0
    start_fake
    node "$NODE" 8 0
    : >"$TMP/agent.log"
    rm -f "$TMP/metrics"
    agent --run-for 2s
    for _ in $(seq 100); do [ -s "$TMP/metrics" ] && break; sleep 0.1; done
    stop_agent
    # The watchdog's: one short run without GPUs.
    "$WATCHDOG" --nvml "$FAKES/libnvidia-ml.so.1" --scan 50ms \
        --metrics-addr 127.0.0.1 --metrics-port 0 --port-file "$TMP/wdport" \
        --api-server off --run-for 3s >"$TMP/wd.log" 2>&1 &
    WD_PID=$!
    for _ in $(seq 100); do [ -s "$TMP/wdport" ] && break; sleep 0.05; done
    curl -s "http://127.0.0.1:$(cat "$TMP/wdport" 2>/dev/null)/metrics" >"$TMP/wdmetrics" 2>/dev/null
    kill "$WD_PID" 2>/dev/null
    wait "$WD_PID" 2>/dev/null
    # Families as their TYPE lines declare them: a counter with no sample
    # yet (no verdict of that kind) is still exported.
    cat "$TMP/metrics" "$TMP/wdmetrics" 2>/dev/null | sed -n 's/^# TYPE \([^ ]*\) .*/\1/p' | sort -u >"$TMP/exported"
    grep -q '^ncclguard_watchdog_hangs_total$' "$TMP/exported" && grep -q '^ncclguard_node_state$' "$TMP/exported" && ok ||
        bad "no metrics scraped from the node loop or the watchdog"
    names=$( {
        yq -r '.spec.groups[].rules[].expr' "$NH/prometheusrule.yaml"
        jq -r '.panels[].targets[].expr' "$NH/dashboard.json"
    } | grep -oE 'ncclguard_[a-z_]+' | sort -u)
    [ -n "$names" ] && ok || bad "no metric names in the rules or the dashboard"
    for m in $names; do
        if grep -qx "$m" "$TMP/exported"; then ok; else bad "$m is not exported"; fi
    done
    jq -e '(.panels | length > 0) and ([.panels[] | .targets | length > 0 and all(.expr | length > 0)] | all) and
        ([.panels[].id] | length == (unique | length))' "$NH/dashboard.json" >/dev/null && ok ||
        bad "dashboard.json: no panels, a panel without queries, or duplicate ids"
    # Nodes by state and the verdicts, as the dashboard promises.
    jq -e '[.panels[].targets[].expr] | any(test("ncclguard_node_state")) and any(test("ncclguard_node_verdicts_total"))' \
        "$NH/dashboard.json" >/dev/null && ok || bad "the dashboard lacks the node states or the verdicts"
    if command -v promtool >/dev/null 2>&1; then
        mkdir -p "$TMP/prom"
        yq -y '.spec' "$NH/prometheusrule.yaml" >"$TMP/prom/full.yaml"
        promtool check rules "$TMP/prom/full.yaml" >"$TMP/perr" 2>&1 && ok || bad "promtool check rules: $(cat "$TMP/perr")"
        yq -y '.spec | del(.groups[].rules[].annotations)' "$NH/prometheusrule.yaml" >"$TMP/prom/rules.yaml"
        cp "$HERE/alerts.test.yaml" "$TMP/prom/"
        (cd "$TMP/prom" && promtool test rules alerts.test.yaml) >"$TMP/perr" 2>&1 && ok ||
            bad "promtool test rules tests/nodeloop/alerts.test.yaml: $(cat "$TMP/perr")"
    else
        echo "SKIP node-health promtool check rules and alert unit tests (promtool not installed; make deps installs Debian's prometheus package)"
    fi
fi

if want options; then
CASE="a number option out of range names the option and its range"
    out=$("$NODELOOP" --metrics-port 70000 2>&1)
    rc=$?
    [ "$rc" -eq 2 ] && ok || bad "exit status $rc, want 2"
    [ "$out" = 'ncclguard-nodeloop: --metrics-port must be a whole number from 0 to 65535, got "70000"' ] &&
        ok || bad "message: $out"
    out=$("$NODELOOP" --threshold x 2>&1)
    [[ $out == *'--threshold must be a whole number from 1 to 3600, got "x"'* ]] && ok || bad "message: $out"
fi

stop_agent
stop_fake
echo "nodeloop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
