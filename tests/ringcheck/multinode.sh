#!/usr/bin/env bash
# The cross-node ring check with 2-3 "pods": processes of the real binary,
# each in its own network namespace on a bridge (in a namespace of its own,
# so nothing is added to the host's network), against the NCCL double in
# network mode (a real TCP exchange between the namespaces). One fault per
# case; every pod must give its verdict within its cross-node deadline + 1 s.
#
#   RINGCHECK=path/to/ncclguard-ringcheck FAKES=dir RDV_CLIENT=rdv-client \
#       multinode.sh
# MN_KEEP=DIR keeps the last case's outputs there (out.I, rep.I, tl.I).
#
# Names resolve through /etc/netns/NS/hosts, which `ip netns exec` mounts
# over /etc/hosts in that namespace; the late-DNS case writes it mid-run.
set -u

: "${RINGCHECK:?set RINGCHECK to the binary}"
: "${FAKES:?set FAKES to the folder with the test double}"
: "${RDV_CLIENT:?set RDV_CLIENT to the rendezvous test client (rdv-client)}"

P=ncg-mn-$$
SW=$P-sw
NS=()
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ringcheck-mn.XXXXXX")
pass=0
fail=0
CASE=setup

cleanup() {
    local pids
    pids=$(jobs -p)
    [ -n "$pids" ] && kill $pids 2>/dev/null
    for ns in "${NS[@]}" "$SW"; do
        ip netns del "$ns" 2>/dev/null
        rm -rf "/etc/netns/$ns"
    done
    [ -n "${MN_KEEP:-}" ] && cp -r "$TMP" "$MN_KEEP"
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

skip() {
    echo "SKIP multinode ($*)"
    exit 0
}

if [ "$(id -u)" != 0 ]; then skip "needs root for ip netns"; fi
command -v ip >/dev/null || skip "no ip command"
command -v jq >/dev/null || skip "no jq"
ip netns add "$SW" 2>"$TMP/err" || skip "cannot create a network namespace: $(cat "$TMP/err")"
ip -n "$SW" link add br0 type bridge 2>"$TMP/err" ||
    skip "cannot create a bridge: $(cat "$TMP/err")"
ip -n "$SW" link set br0 up
ip -n "$SW" link set lo up

# pod I: namespace $P-I with eth0 = 10.77.0.(I+1)/24 on the bridge.
for i in 0 1 2 3; do
    ns=$P-$i
    NS+=("$ns")
    ip netns add "$ns" || skip "cannot create namespace $ns"
    ip -n "$ns" link add eth0 type veth peer name p$i netns "$SW" ||
        skip "cannot create a veth pair"
    ip -n "$SW" link set p$i master br0 up
    ip -n "$ns" addr add 10.77.0.$((i + 1))/24 dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # A container bridge that goes nowhere, as docker0 on a node (a veth
    # pair whose other end stays in the namespace: no module needed).
    ip -n "$ns" link add docker0 type veth peer name dk0 ||
        skip "cannot create a veth pair"
    ip -n "$ns" addr add 172.17.0.1/16 dev docker0
    ip -n "$ns" link set dk0 up
    ip -n "$ns" link set docker0 up
    mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1 localhost\n' >"/etc/netns/$ns/hosts"
done
hosts_add_leader() { # POD: leader.test resolves in pod POD
    printf '127.0.0.1 localhost\n10.77.0.1 leader.test\n' >"/etc/netns/$P-$1/hosts"
}
hosts_drop_leader() {
    printf '127.0.0.1 localhost\n' >"/etc/netns/$P-$1/hosts"
}
for i in 0 1 2 3; do hosts_add_leader $i; done
# A refused connection proves that the bridge carries packets.
timeout 3 ip netns exec "$P-1" bash -c 'exec 3<>/dev/tcp/10.77.0.1/9' \
    2>&1 | grep -q refused ||
    skip "the namespaces cannot reach each other over the bridge"

ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $CASE: $*"
    for f in "$TMP"/out.*; do
        [ -f "$f" ] || continue
        echo "---- $f"
        grep -E 'cross-node|FAILED|WARN' "$f" | sed -e 's/^/    /' | tail -25
    done
    echo "----"
}

PORT=29450
# pod I NNODES ENV... -- ARGS...: starts pod I in the background.
pod() {
    local i=$1 n=$2
    shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    rm -f "$TMP/out.$i" "$TMP/tl.$i" "$TMP/rep.$i" "$TMP/conf.$i"
    ip netns exec "$P-$i" unshare -u sh -c 'hostname "$0"; exec "$@"' \
        "pod-$i" env LD_LIBRARY_PATH="$FAKES" LD_BIND_NOW=1 \
        FAKECUDA_DEVICES=2 FAKENCCL_NET=1 FAKENCCL_DIR="$TMP" \
        NCCL_BUFFSIZE=1048576 FAKENCCL_CONNECT_RETRY_S=3 \
        LWS_LEADER_ADDRESS=leader.test LWS_GROUP_SIZE="$n" \
        LWS_WORKER_INDEX="$i" NCCLGUARD_JOB_ID=job-uid-1 "${envs[@]}" \
        "$RINGCHECK" --termination-log "$TL_DIR/tl.$i" \
        --report "$TMP/rep.$i" --fallback-conf "$TMP/conf.$i" \
        --bw-bytes 64Ki --timeout 60 --phase-timeout 3 \
        --multi-node auto --rendezvous-port $PORT "$@" \
        >"$TMP/out.$i" 2>&1 &
    eval "PID$i=$!"
}
TL_DIR=$TMP
# waitpod I: waits for pod I and sets RC.
waitpod() {
    local pid
    eval "pid=\$PID$1"
    wait "$pid"
    RC=$?
}
expect_rc() { # POD CODE
    waitpod "$1"
    [ "$RC" -eq "$2" ] && ok || bad "pod $1: exit $RC, want $2"
    expect_in_time "$1"
}
expect_out() { grep -qE -- "$2" "$TMP/out.$1" && ok || bad "pod $1: output lacks /$2/"; }
expect_tl() {
    grep -qE -- "$2" "$TMP/tl.$1" 2>/dev/null && ok ||
        bad "pod $1: termination log lacks /$2/"
}
expect_json() { # POD JQ
    if [ -f "$TMP/rep.$1" ] && jq -e "$2" "$TMP/rep.$1" >/dev/null; then ok
    else bad "pod $1: JSON fails $2: $(jq -c .multinode "$TMP/rep.$1" 2>&1)"; fi
}
ms() { date -d "$1" +%s%3N; }
# wait_for POD REGEX: until the pod's output matches (at most 10 s).
wait_for() {
    local i
    for i in $(seq 100); do
        grep -qE -- "$2" "$TMP/out.$1" 2>/dev/null && return 0
        sleep 0.1
    done
    bad "pod $1: never printed /$2/"
}
# expect_in_time POD: from "cross-node: starting; deadline in X s" to the
# pod's last line took at most X + 1 s.
expect_in_time() {
    local f=$TMP/out.$1 start lim last
    start=$(grep -m1 'cross-node: starting; deadline in' "$f" | cut -d' ' -f1)
    lim=$(grep -m1 -oE 'deadline in [0-9.]+' "$f" | grep -oE '[0-9.]+$')
    last=$(grep -E '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "$f" | tail -1 | cut -d' ' -f1)
    if [ -z "$start" ] || [ -z "$last" ]; then
        bad "pod $1: no cross-node start or end line"
        return
    fi
    local took=$(($(ms "$last") - $(ms "$start")))
    local max
    max=$(awk -v l="$lim" 'BEGIN { printf "%d", (l + 1) * 1000 }')
    [ "$took" -le "$max" ] && ok ||
        bad "pod $1: verdict after ${took} ms, deadline + 1 s is ${max} ms"
}

# stranger EXPECTED-REGEX JOB RANK NGPUS [TOKEN]: the test client speaks to
# node rank 0 from pod 3's namespace; its answer must match.
stranger() {
    local want=$1 got
    shift
    got=$(ip netns exec "$P-3" "$RDV_CLIENT" 10.77.0.1 $PORT "$@" 2>&1)
    echo "$got" | grep -qE -- "$want" && ok || bad "stranger $*: got '$got', want /$want/"
}

# ---------------------------------------------------------------- cases
case_0() {
    CASE="three pods pass"
    pod 0 3 -- --multi-node-timeout 10
    pod 1 3 -- --multi-node-timeout 10
    pod 2 3 -- --multi-node-timeout 10
    expect_rc 0 0; expect_rc 1 0; expect_rc 2 0
    expect_json 0 '.multinode.status == "pass" and .multinode.world == 6 and .multinode.job_wide and (.multinode.nodes | length) == 3'
    expect_json 0 '[.multinode.nodes[].interface] == ["eth0","eth0","eth0"]'
    expect_json 2 '.multinode.status == "pass" and .multinode.node_rank == 2'
    expect_out 0 'node 2  pod-2 .*eth0 10\.77\.0\.3'
    expect_tl 0 'cross-node \(job-wide verdict\): pass'
    expect_tl 1 'cross-node: pass'
}

case_1() {
    CASE="leader name resolves late"
    hosts_drop_leader 1
    pod 1 2 -- --multi-node-timeout 8
    wait_for 1 'joining node rank 0'
    sleep 0.5
    pod 0 2 -- --multi-node-timeout 8
    sleep 0.3
    hosts_add_leader 1
    expect_rc 0 0; expect_rc 1 0
    expect_out 1 'joined node rank 0 after [2-9][0-9]* attempts'
    expect_json 1 '.multinode.status == "pass"'
}

case_2() {
    CASE="leader name never resolves, on-missing warn and fail"
    hosts_drop_leader 1
    hosts_drop_leader 2
    pod 1 3 -- --multi-node-timeout 2
    pod 2 3 -- --multi-node-timeout 2 --on-missing fail
    expect_rc 1 0; expect_rc 2 4
    expect_json 1 '.ringcheck == "warn" and .multinode.status == "missing"'
    expect_out 1 'name leader.test does not resolve'
    expect_tl 2 'name leader.test does not resolve'
    expect_tl 2 'publishNotReadyAddresses'
    hosts_add_leader 1
    hosts_add_leader 2
}

case_3() {
    CASE="connection refused until the deadline"
    pod 1 2 -- --multi-node-timeout 2
    expect_rc 1 0
    expect_out 1 'connection to 10\.77\.0\.1 port [0-9]+ refused'
    # The retries back off (0.1 s, doubling, at most 1 s): about 5 attempts
    # in 2 s, not one every 0.1 s.
    expect_out 1 'by the cross-node deadline \(2 s, [3-8] attempts\)'
}

case_4() {
    CASE="a peer never arrives"
    pod 0 3 -- --multi-node-timeout 2
    pod 1 3 -- --multi-node-timeout 4
    expect_rc 0 0; expect_rc 1 0
    expect_json 0 '.multinode.status == "missing" and .multinode.missing == [2] and .ringcheck == "warn"'
    expect_tl 0 'missing node ranks: 2'
    expect_json 1 '.multinode.status == "missing"'
    pod 0 3 -- --multi-node-timeout 2 --on-missing fail
    expect_rc 0 4
    expect_json 0 '.code == 4 and .phase_name == "cross-node"'
}

case_5() {
    CASE="a peer dies mid-collective"
    pod 0 3 -- --multi-node-timeout 10
    pod 1 3 -- --multi-node-timeout 10
    pod 2 3 FAKENCCL_CROSS_CRASH=1 -- --multi-node-timeout 10 --no-diagnose
    expect_rc 0 3; expect_rc 1 3; expect_rc 2 3
    expect_json 0 '.multinode.status == "fail" and (.message | test("node [0-9]"))'
    expect_out 0 'connection closed by remote peer|crashed'
    expect_tl 1 'cross-node: fail'
}

case_6() {
    CASE="one node's init hangs"
    # Five rounds, four of them stopped by the phase timeout.
    pod 0 3 -- --multi-node-timeout 25
    pod 1 3 -- --multi-node-timeout 25
    pod 2 3 FAKENCCL_CROSS_HANG_INIT=1 -- --multi-node-timeout 25
    expect_rc 0 4; expect_rc 1 4; expect_rc 2 4
    expect_json 0 '.multinode.diagnosis | test("failing pairs: node 0 - node 2$|failing pairs: node 0 - node 2;")'
    expect_tl 0 'phase 3 \(nccl-init\) did not finish'
    # The phase timeout grows with the nodes: 3 s x (1 + (n - 1) / 8).
    expect_out 0 'round 1: nodes 0,1,2 \(6 ranks\): timeout or hang: .*did not finish within 3\.8 s'
    expect_out 0 'round [0-9]+: nodes 0,2 \(4 ranks\): timeout or hang: .*did not finish within 3\.4 s'
}

case_7() {
    CASE="a stranger with another job id"
    # Node 0 waits through the stranger's whole attempt (up to its 6 s) and
    # then for node 1, so its own deadline is generous: on a loaded 2-core
    # machine 6 s was not always enough. A pass returns as soon as both join.
    pod 0 2 -- --multi-node-timeout 30
    pod 2 2 NCCLGUARD_JOB_ID=other-job LWS_WORKER_INDEX=1 -- --multi-node-timeout 6
    waitpod 2
    [ "$RC" -ne 0 ] && ok || bad "the stranger passed"
    expect_out 2 'rejected us: job id "other-job" is not this job'
    pod 1 2 -- --multi-node-timeout 30
    expect_rc 0 0; expect_rc 1 0
    expect_out 0 'rejected 10\.77\.0\.3: job id'
    expect_json 0 '.multinode.status == "pass" and (.multinode.nodes | length) == 2'
}

case_8() {
    CASE="garbage on the port"
    pod 0 2 -- --multi-node-timeout 6
    wait_for 0 'listening on port'
    ip netns exec "$P-3" bash -c \
        "exec 3<>/dev/tcp/10.77.0.1/$PORT; printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' >&3; sleep 0.2" \
        2>/dev/null
    ip netns exec "$P-3" bash -c \
        "exec 3<>/dev/tcp/10.77.0.1/$PORT; printf 'NCGR\002\001\000\000\377\377\377\377' >&3; sleep 0.2" \
        2>/dev/null
    pod 1 2 -- --multi-node-timeout 6
    expect_rc 0 0; expect_rc 1 0
    expect_out 0 'dropped a connection from 10\.77\.0\.4: not a ncclguard rendezvous frame'
    expect_out 0 'dropped a connection from 10\.77\.0\.4: rendezvous payload of 4294967295 bytes'
}

case_9() {
    CASE="NCCL_SOCKET_IFNAME names an interface one pod lacks"
    pod 0 2 NCCL_SOCKET_IFNAME==eth0 -- --multi-node-timeout 6
    pod 1 2 NCCL_SOCKET_IFNAME==ib0 -- --multi-node-timeout 6
    expect_rc 0 3; expect_rc 1 3
    expect_out 1 'NCCL_SOCKET_IFNAME==ib0: no interface|no socket interface found matching NCCL_SOCKET_IFNAME==ib0'
    expect_json 0 '.multinode.message | test("node 1 .* failed its single-pod check")'
    expect_json 1 '(.multinode.nodes[0].interface == "") and (.multinode.nodes[0].interfaces_present | test("eth0"))'
    expect_tl 0 'node 1: pod-1, [0-9]+ GPUs, no interface; has lo, eth0'
}

case_10() {
    CASE="a pod that picks docker0 cannot reach the others"
    pod 0 2 -- --multi-node-timeout 8 --no-diagnose
    pod 1 2 NCCL_SOCKET_IFNAME=docker FAKENCCL_CONNECT_RETRY_S=1 -- \
        --multi-node-timeout 8 --no-diagnose
    expect_rc 0 3; expect_rc 1 3
    expect_json 0 '.multinode.diagnosis | test("node 1 \\(pod-1\\) uses docker0, a container bridge")'
    expect_json 0 '.multinode.diagnosis | test("interfaces differ")'
}

case_11() {
    CASE="the network transport fails, NCCL_IB_DISABLE=1 cures it, fallback on every pod"
    for i in 0 1 2; do
        pod $i 3 FAKENCCL_CROSS_FAIL_UNLESS=NCCL_IB_DISABLE=1 -- \
            --multi-node-timeout 10 --on-failure fallback
    done
    expect_rc 0 0; expect_rc 1 0; expect_rc 2 0
    for i in 0 1 2; do
        grep -qx 'NCCL_IB_DISABLE=1' "$TMP/conf.$i" 2>/dev/null && ok ||
            bad "pod $i: fallback file lacks NCCL_IB_DISABLE=1"
        expect_json $i '.ringcheck == "fallback" and .cure == "NCCL_IB_DISABLE=1"'
    done
    expect_out 0 'round [0-9]+: nodes 0,1,2 \(6 ranks\) with NCCL_IB_DISABLE=1: pass'
}

case_12() {
    CASE="a follower killed in round 1: the round is void, no cure"
    # Before: round 1 failed, the diagnosis reran on node 0 alone, "passed"
    # with NCCL_IB_DISABLE=1 and wrote that cure.
    pod 0 2 -- --multi-node-timeout 20 --on-failure fallback
    pod 1 2 FAKENCCL_CROSS_HANG_INIT=1 -- --multi-node-timeout 20 --on-failure fallback
    wait_for 1 'round 1: ranks'
    sleep 0.5
    { kill -9 "$PID1"; waitpod 1; } 2>/dev/null
    expect_rc 0 3
    expect_json 0 '.ringcheck == "fail" and .cure == null and .multinode.status == "fail" and .multinode.left == [1]'
    expect_json 0 '.multinode.message | test("node 1 \\(pod-1\\) left during round 1")'
    grep -q 'NCCL_IB_DISABLE' "$TMP/conf.0" 2>/dev/null &&
        bad "pod 0: a cure was written after a node left" || ok
}

case_13() {
    CASE="a follower killed during the diagnosis: aborted, no cure, one verdict"
    pod 0 3 -- --multi-node-timeout 30 --on-failure fallback
    pod 1 3 -- --multi-node-timeout 30 --on-failure fallback
    pod 2 3 FAKENCCL_CROSS_HANG_INIT=1 -- --multi-node-timeout 30 --on-failure fallback
    wait_for 2 'round 2: ranks'
    sleep 0.3
    { kill -9 "$PID2"; waitpod 2; } 2>/dev/null
    expect_rc 0 4; expect_rc 1 4
    expect_json 0 '.cure == null and .multinode.left == [2] and (.multinode.diagnosis | test("aborted: node 2 \\(pod-2\\) left during round 2"))'
    expect_json 1 '.ringcheck == "fail" and .cure == null and (.multinode.message | test("node 2 \\(pod-2\\) left during diagnosis round 2"))'
    for i in 0 1; do
        grep -q 'NCCL_IB_DISABLE' "$TMP/conf.$i" 2>/dev/null &&
            bad "pod $i: a cure was written after a node left" || ok
    done
}

case_14() {
    CASE="an init container that restarts rejoins"
    # Before: the leader kept the dead connection and rejected the new
    # process ("node rank 1 has already joined").
    pod 0 3 -- --multi-node-timeout 15
    pod 1 3 -- --multi-node-timeout 15
    wait_for 0 'node 1 joined from'
    { kill -9 "$PID1"; waitpod 1; } 2>/dev/null
    wait_for 0 "node 1's connection from 10\.77\.0\.2 closed before the rounds"
    pod 1 3 -- --multi-node-timeout 15
    pod 2 3 -- --multi-node-timeout 15
    expect_rc 0 0; expect_rc 1 0; expect_rc 2 0
    expect_json 0 '.multinode.status == "pass" and .multinode.world == 6'
    [ "$(grep -c 'node 1 joined from' "$TMP/out.0")" -eq 2 ] && ok ||
        bad "pod 0: node 1 did not join twice"
}

case_15() {
    CASE="a second process for a joined rank replaces the stale connection"
    pod 0 3 -- --multi-node-timeout 15
    pod 1 3 -- --multi-node-timeout 15
    wait_for 0 'node 1 joined from'
    pod 3 3 LWS_WORKER_INDEX=1 -- --multi-node-timeout 15
    wait_for 0 'node 1 rejoined from 10\.77\.0\.4; its earlier connection from 10\.77\.0\.2 is replaced'
    pod 2 3 -- --multi-node-timeout 15
    expect_rc 0 0; expect_rc 3 0; expect_rc 2 0
    expect_json 0 '.multinode.status == "pass" and .multinode.world == 6'
    expect_json 3 '.multinode.status == "pass" and .multinode.node_rank == 1'
    waitpod 1
}

case_16() {
    CASE="a pod that cured itself does not fail the healthy ones"
    # Node 1's GPUs pass only with NCCL_P2P_DISABLE=1 (its single-pod phases
    # run on the double's shared-memory transport, where that fault lives).
    # Before: node 1 sent its raw failure, node 0 exited 3 and the job never
    # started. Now every pod runs the rounds with node 1's cure and ends with
    # the same verdict and the same fallback file.
    pod 0 3 -- --multi-node-timeout 15 --on-failure fallback
    pod 1 3 FAKENCCL_NET=0 FAKENCCL_P2P_BROKEN=0,1 -- --multi-node-timeout 15 --on-failure fallback
    pod 2 3 -- --multi-node-timeout 15 --on-failure fallback
    expect_rc 0 0; expect_rc 1 0; expect_rc 2 0
    for i in 0 1 2; do
        expect_json $i '.ringcheck == "fallback" and .cure == "NCCL_P2P_DISABLE=1" and .multinode.status == "fallback"'
        grep -qx 'NCCL_P2P_DISABLE=1' "$TMP/conf.$i" 2>/dev/null && ok ||
            bad "pod $i: fallback file lacks NCCL_P2P_DISABLE=1"
    done
    expect_out 0 'node 1 joined from .*its own check passes only with NCCL_P2P_DISABLE=1'
    expect_out 0 'round 1: nodes 0,1,2 \(6 ranks\) with NCCL_P2P_DISABLE=1: pass'
}

case_17() {
    CASE="a cured pod in a job whose ring fails takes the job's failure"
    pod 0 2 -- --multi-node-timeout 10 --on-failure fallback --no-diagnose
    pod 1 2 FAKENCCL_NET=0 FAKENCCL_P2P_BROKEN=0,1 FAKENCCL_CROSS_FAIL_UNLESS=NCCL_IB_DISABLE=1 -- \
        --multi-node-timeout 10 --on-failure fallback --no-diagnose
    expect_rc 0 3; expect_rc 1 3
    expect_json 1 '.ringcheck == "fail" and .cure == null and .multinode.status == "fail"'
}

case_18() {
    CASE="one deadline for the job: a follower that started first stays for the verdict"
    # Node 1 starts 9 s before node 0. Before, it left at its own deadline, in
    # the middle of the diagnosis; now it takes node 0's deadline and gets the
    # job's verdict like everyone else.
    pod 1 3 -- --multi-node-timeout 20
    wait_for 1 'joining node rank 0'
    sleep 9
    pod 0 3 -- --multi-node-timeout 20
    pod 2 3 FAKENCCL_CROSS_HANG_INIT=1 -- --multi-node-timeout 20
    expect_rc 0 4; expect_rc 2 4
    waitpod 1
    [ "$RC" -eq 4 ] && ok || bad "pod 1: exit $RC, want 4"
    # Node 0 started about when node 1 joined, so nearly all of its 20 s
    # are left (20.0 when the join took under 50 ms); node 1's own deadline
    # would have had about 10 s.
    expect_out 1 "the job's deadline from node rank 0: (1[5-9]\.[0-9]|20\.0) s left"
    expect_json 0 '.multinode.left == [] and (.multinode.diagnosis | test("aborted") | not)'
    expect_json 1 '.multinode.message | test("^the ring over 3 nodes \\(6 ranks\\) failed")'
    expect_out 0 'round 2: nodes 0,1,2 \(6 ranks\) with NCCL_IB_DISABLE=1'
}

case_19() {
    CASE="twenty idle connections do not delay a real node"
    # Before: HELLOs were read one at a time with 2 s each, so the real node
    # waited 40 s behind the idle ones, past the 8 s deadline.
    pod 0 2 -- --multi-node-timeout 8
    wait_for 0 'listening on port'
    ip netns exec "$P-3" bash -c \
        "for i in \$(seq 20); do exec {fd}<>/dev/tcp/10.77.0.1/$PORT; done; sleep 9" \
        2>/dev/null &
    IDLE=$!
    sleep 0.5
    pod 1 2 -- --multi-node-timeout 8
    expect_rc 0 0; expect_rc 1 0
    expect_json 0 '.multinode.status == "pass"'
    expect_out 0 'dropped a connection from 10\.77\.0\.4: (no HELLO within its time budget|the gathering ended)'
    kill "$IDLE" 2>/dev/null
    wait "$IDLE" 2>/dev/null
}

case_20() {
    CASE="strangers: a prefix of the job id, an empty id, impossible GPU counts"
    pod 0 3 -- --multi-node-timeout 10
    wait_for 0 'listening on port'
    stranger '^REJECT: job id "job-uid" is not this job' job-uid 2 2
    stranger '^REJECT: job id "job-uid-10" is not this job' job-uid-10 2 2
    stranger '^REJECT: the HELLO has an empty job id' "" 2 2
    stranger '^REJECT: node rank 2 claims 0 GPUs' job-uid-1 2 0
    stranger '^REJECT: node rank 2 claims 2147483647 GPUs' job-uid-1 2 2147483647
    stranger '^REJECT: node rank 3 is outside 1\.\.2' job-uid-1 3 2
    # A node's cure runs on every node: only the fallback's own settings.
    stranger '^REJECT: node rank 2 sent "NCCL_SOCKET_IFNAME=lo", which is no fallback cure' \
        job-uid-1 2 2 - NCCL_SOCKET_IFNAME=lo
    pod 1 3 -- --multi-node-timeout 10
    pod 2 3 -- --multi-node-timeout 10
    expect_rc 0 0; expect_rc 1 0; expect_rc 2 0
    expect_json 0 '.multinode.status == "pass" and .multinode.world == 6'
}

case_21() {
    CASE="a job token: only pods that hold it join"
    TOK=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff
    BAD=ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100
    pod 0 2 NCCLGUARD_JOB_TOKEN=$TOK -- --multi-node-timeout 10
    wait_for 0 'listening on port'
    stranger "^REJECT: node rank 1 does not hold this job's token" job-uid-1 1 2
    stranger "^REJECT: node rank 1 does not hold this job's token" job-uid-1 1 2 $BAD
    pod 1 2 NCCLGUARD_JOB_TOKEN=$TOK -- --multi-node-timeout 10
    expect_rc 0 0; expect_rc 1 0
    expect_json 0 '.multinode.status == "pass" and (.multinode.nodes | length) == 2'
    # The real binary with the right job id but another token is a stranger.
    pod 0 2 NCCLGUARD_JOB_TOKEN=$TOK -- --multi-node-timeout 6
    pod 1 2 NCCLGUARD_JOB_TOKEN=$BAD -- --multi-node-timeout 6 --on-missing fail
    expect_rc 1 9
    expect_out 1 "rejected us: node rank 1 does not hold this job's token"
    waitpod 0
}

case_22() {
    CASE="mixed GPU counts: 2 and 3 GPUs make a world of 5"
    pod 0 2 -- --multi-node-timeout 10
    pod 1 2 FAKECUDA_DEVICES=3 -- --multi-node-timeout 10
    expect_rc 0 0; expect_rc 1 0
    expect_json 0 '.multinode.world == 5 and ([.multinode.nodes[].gpus] == [2,3])'
    expect_out 1 'round 1: ranks 2-4 of 5'
}

case_23() {
    CASE="no NCCLGUARD_JOB_ID: the leader's address and node count identify the job"
    pod 0 2 NCCLGUARD_JOB_ID= -- --multi-node-timeout 10
    pod 1 2 NCCLGUARD_JOB_ID= -- --multi-node-timeout 10
    expect_rc 0 0; expect_rc 1 0
    expect_json 0 '.multinode.status == "pass" and .multinode.job == "leader.test/2"'
    expect_json 1 '.multinode.job == "leader.test/2"'
}

case_24() {
    CASE="--min-busbw-net: the cross-node threshold of its own"
    pod 0 2 -- --multi-node-timeout 10 --min-busbw-net 100000 --no-diagnose
    pod 1 2 -- --multi-node-timeout 10 --min-busbw-net 100000 --no-diagnose
    expect_rc 0 8; expect_rc 1 8
    expect_json 0 '.multinode.message | test("across nodes is below --min-busbw-net 100000")'
}

case_25() {
    CASE="expect inter=ib: a silent fallback to sockets across nodes fails every pod with exit 10"
    # The double asks for IB but finds no HCA ("NET/IB : No device found."),
    # and goes on over NET/Socket without an error, as NCCL does. Before,
    # the cross-node rounds did not look at the transport and all passed.
    for i in 0 1 2; do
        pod $i 3 FAKENCCL_NET_TRANSPORT=ib FAKENCCL_IB_NODEV=1 -- \
            --multi-node-timeout 15 --on-failure fallback \
            --expect-transport inter=ib
    done
    expect_rc 0 10; expect_rc 1 10; expect_rc 2 10
    local m0 mi
    m0=$(jq -r .multinode.message "$TMP/rep.0" 2>/dev/null)
    for i in 0 1 2; do
        expect_json $i '.ringcheck == "fail" and .code == 10 and .cure == null and .multinode.status == "fail" and .multinode.code == 10'
        expect_json $i '.multinode.message | test("works, but not over the transport the policy expects: node [0-9] \\(pod-[0-9]\\): the ring across pods works but over NET/Socket on eth0, not NET/IB \\(--expect-transport inter=ib\\)")'
        mi=$(jq -r .multinode.message "$TMP/rep.$i" 2>/dev/null)
        [ -n "$m0" ] && [ "$mi" = "$m0" ] && ok ||
            bad "pod $i: verdict '$mi' differs from node 0's '$m0'"
        grep -q 'NCCL_IB_DISABLE' "$TMP/conf.$i" 2>/dev/null &&
            bad "pod $i: a cure was written for a transport fallback" || ok
    done
    expect_tl 1 'NET/Socket on eth0, not NET/IB'
    expect_tl 0 'RDMA devices in every pod'
    # The ring works: nothing to diagnose.
    expect_json 0 '.multinode.diagnosis | test("NCCL_IB_DISABLE") | not'
}

case_26() {
    CASE="expect inter=ib: IB across nodes passes; inter=ib-gdr without GDR fails"
    pod 0 2 FAKENCCL_NET_TRANSPORT=ib -- --multi-node-timeout 10 --expect-transport inter=ib
    pod 1 2 FAKENCCL_NET_TRANSPORT=ib -- --multi-node-timeout 10 --expect-transport inter=ib
    expect_rc 0 0; expect_rc 1 0
    expect_out 0 'the transport across nodes is as expected: NET/IB \(--expect-transport inter=ib\)'
    expect_out 1 'the transport across nodes is as expected: NET/IB '
    expect_json 1 '.multinode.status == "pass" and .code == 0'
    pod 0 2 FAKENCCL_NET_TRANSPORT=ib -- --multi-node-timeout 10 --expect-transport inter=ib-gdr --no-diagnose
    pod 1 2 FAKENCCL_NET_TRANSPORT=ib -- --multi-node-timeout 10 --expect-transport inter=ib-gdr --no-diagnose
    expect_rc 0 10; expect_rc 1 10
    expect_json 1 '.multinode.message | test("over NET/IB on mlx5_0, not NET/IB with GPU Direct RDMA")'
    pod 0 2 FAKENCCL_NET_TRANSPORT=ib-gdr -- --multi-node-timeout 10 --expect-transport inter=ib-gdr
    pod 1 2 FAKENCCL_NET_TRANSPORT=ib-gdr -- --multi-node-timeout 10 --expect-transport inter=ib-gdr
    expect_rc 0 0; expect_rc 1 0
    expect_out 0 'the transport across nodes is as expected: NET/IB/GDRDMA'
}

case_27() {
    CASE="the leader's name has four addresses: every one is tried"
    # A name may resolve to several addresses (a Service with more than one
    # family or record); the follower tries up to four of each lookup. Here
    # the first three refuse (loopback addresses, sorted first by
    # getaddrinfo's scope rule) and only the last one is node rank 0.
    printf '127.0.0.1 localhost\n127.0.0.2 leader.test\n127.0.0.3 leader.test\n127.0.0.4 leader.test\n10.77.0.1 leader.test\n' \
        >"/etc/netns/$P-1/hosts"
    pod 0 2 -- --multi-node-timeout 8
    pod 1 2 -- --multi-node-timeout 8
    expect_rc 0 0; expect_rc 1 0
    expect_json 1 '.multinode.status == "pass"'
    hosts_add_leader 1
}

case_28() {
    CASE="a resolver that never answers: the deadline still holds"
    # The leader's name is not in the hosts file and the only nameserver
    # drops every query (an address on the bridge that nobody has, with a
    # permanent neighbour entry so that no ARP failure answers either),
    # with a 30 s resolver timeout. The lookup runs in a child process; the
    # pod gives up on it at its deadline instead of waiting for glibc.
    hosts_drop_leader 1
    ip -n "$P-1" neigh replace 10.77.0.250 lladdr 02:00:00:00:00:99 \
        dev eth0 nud permanent
    printf 'nameserver 10.77.0.250\noptions timeout:30 attempts:1\n' \
        >"/etc/netns/$P-1/resolv.conf"
    pod 1 2 -- --multi-node-timeout 2
    expect_rc 1 0
    expect_out 1 'name leader\.test did not resolve before the deadline \(the resolver did not answer\)'
    expect_json 1 '.multinode.status == "missing" and .ringcheck == "warn"'
    rm -f "/etc/netns/$P-1/resolv.conf"
    hosts_add_leader 1
}

# MN_ONLY=WORD runs only the cases whose name contains WORD (make
# check-ringcheck-mn-WORD), so that one behaviour is checked in seconds.
ran=0
for fn in $(declare -F | awk '$3 ~ /^case_[0-9]+$/ { print $3 }' | sort -t_ -k2 -n); do
    name=$(declare -f "$fn" | sed -n 's/^ *CASE="\([^"]*\)".*/\1/p' | head -1)
    if [ -n "${MN_ONLY:-}" ] && [[ $name != *"$MN_ONLY"* ]]; then continue; fi
    "$fn"
    ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
    echo "FAIL: no case matches MN_ONLY=${MN_ONLY:-}"
    fail=$((fail + 1))
fi

echo "multinode: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
