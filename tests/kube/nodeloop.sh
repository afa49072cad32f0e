#!/usr/bin/env bash
# The node loop on a real kube-apiserver (tests/kube/cluster.sh), with the
# objects deploy/ renders (self-signed overlay, watchdog and node-health
# components) applied as they are: its ServiceAccount, RBAC and
# ValidatingAdmissionPolicies in force, and real service-account tokens
# bound to stand-in DaemonSet pods, which carry the node-name claim. There
# is no kubelet: pods are bound by spec.nodeName and their statuses are
# written through pods/status, with termination messages the ring check
# wrote against its test double.
#
#   NODELOOP=... RINGCHECK=... FAKES=... [KUBE_RELEASE=1.37] tests/kube/nodeloop.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
: "${NODELOOP:?set NODELOOP to build/ncclguard-nodeloop}"
: "${RINGCHECK:?set RINGCHECK to build/ncclguard-ringcheck}"
: "${FAKES:?set FAKES to the folder with the test double}"
rel=${KUBE_RELEASE:-1.37}
tag="k8s $rel"
if [ ! -x "$RINGCHECK" ]; then
    echo "FAIL - $tag: no ring check at $RINGCHECK (make ringcheck needs the CUDA runtime and NCCL: make deps)"
    echo "0 passed, 1 failed"
    exit 1
fi

# shellcheck source=tests/kube/cluster.sh
. "$here/cluster.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/kube-nodeloop.XXXXXX")
LOOP_PIDS=()
cleanup() {
    local p
    for p in "${LOOP_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    kube_down
    [ -n "${KUBE_KEEP:-}" ] && cp -r "$W" "$KUBE_KEEP"; rm -rf "$W"
}
trap cleanup EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   - $tag: $1"; }
bad() {
    fail=$((fail + 1))
    echo "FAIL - $tag: $1"
    [ -n "${2:-}" ] && printf '%s\n' "$2" | head -c 1500 | sed 's/^/    /'
    return 0
}
check() { local n=$1; shift; if "$@"; then ok "$n"; else bad "$n"; fi; }
# eventually SECONDS CMD...: CMD succeeds within SECONDS (the machine may
# be loaded; passing cases take about a second).
eventually() {
    local t=$(($1 * 5))
    shift
    for _ in $(seq "$t"); do "$@" && return 0; sleep 0.2; done
    return 1
}
jqt() { jq -e "$@" >/dev/null 2>&1; }
# post_lines FILE PATH [TOKENFILE]: POSTs each line of FILE to PATH, four
# requests at a time, as the administrator or with the bearer token in
# TOKENFILE; prints how many were created (201).
post_lines() {
    local part pids=()
    split -l "$((($(wc -l <"$1") + 3) / 4))" -d "$1" "$1.part."
    for part in "$1".part.??; do
        (while IFS= read -r line; do
            printf '%s' "$line" >"$part.one"
            if [ -n "${3:-}" ]; then
                curl -sS -o /dev/null -w '%{http_code}\n' --max-time 20 --cacert "$KUBE_CA" \
                    -H "Authorization: Bearer $(cat "$3")" -H 'Content-Type: application/json' \
                    -X POST --data-binary @"$part.one" "$KUBE_SERVER$2"
            else
                kube_api POST "$2" "$part.one" | tail -n 1 | sed 's/^HTTP //'
            fi
        done <"$part" >"$part.codes") &
        pids+=($!)
    done
    wait "${pids[@]}"
    cat "$1".part.??.codes | grep -c '^201$'
}

# Termination messages the ring check writes (against its test double).
MSGTMP=$W
# shellcheck source=tests/nodeloop/msg.sh
. "$root/tests/nodeloop/msg.sh"
msg p2p_fallback FAKECUDA_DEVICES=4 FAKENCCL_P2P_BROKEN=1,2 -- \
    --expect-gpus 4 --timeout 20 --phase-timeout 3 --on-failure fallback \
    --fallback-conf "$W/nccl.conf"
msg p2p_fail FAKECUDA_DEVICES=2 FAKENCCL_P2P_BROKEN=0,1 -- --expect-gpus 2 \
    --timeout 20 --mode group
msg pass8 FAKECUDA_DEVICES=8 -- --expect-gpus 8 --timeout 20

kube_up "$W/kube" "$rel" || { bad "the control plane did not start"; echo "$pass passed, $fail failed"; exit 1; }

# ---- deploy/, as rendered, applied to the real server --------------------
mkdir -p "$W/k"
cat >"$W/k/kustomization.yaml" <<EOK
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$(realpath --relative-to="$W/k" "$root/deploy/overlays/self-signed")]
components: [$(realpath --relative-to="$W/k" "$root/deploy/components/watchdog"), $(realpath --relative-to="$W/k" "$root/deploy/components/node-health")]
EOK
kubectl kustomize "$W/k" >"$W/all.yaml" 2>"$W/err" || bad "kubectl kustomize" "$(cat "$W/err")"
# PodMonitor and PrometheusRule need the Prometheus Operator's CRDs; the
# webhook registration points at a Service with no endpoints here.
yq -s '{apiVersion: "v1", kind: "List", items: [.[] | select(.kind != "PodMonitor" and
    .kind != "PrometheusRule" and .kind != "MutatingWebhookConfiguration")]}' \
    "$W/all.yaml" >"$W/all.json" 2>"$W/err" || bad "yq" "$(cat "$W/err")"
if kubectl apply --server-side -f "$W/all.json" >"$W/apply.out" 2>&1; then
    ok "every object deploy/ renders (overlay self-signed, components watchdog and node-health, $(jq '.items | length' "$W/all.json") objects) is accepted"
else
    bad "deploy/'s objects refused" "$(grep -iv 'serverside-applied\|created\|configured' "$W/apply.out")"
fi
NS=ncclguard-watchdog
# No controller manager: its ServiceAccount controller would create each
# namespace's default ServiceAccount, which pods without one name.
for ns in $(kubectl get namespaces -o jsonpath='{.items[*].metadata.name}'); do kube_ns "$ns"; done

for n in gpu-1 gpu-2 gpu-3 gpu-4; do kube_node "$n" 8 || bad "node $n"; done
kube_ns ml

# Stand-ins for the DaemonSets' pods: a real TokenRequest bound to a pod
# carries the pod's node in authentication.kubernetes.io/node-name, which
# the policies read.
standin() { # standin NAME SA NODE
    jq -n --arg n "$1" --arg sa "$2" --arg node "$3" '{apiVersion: "v1", kind: "Pod",
        metadata: {name: $n}, spec: {serviceAccountName: $sa, nodeName: $node,
        containers: [{name: "c", image: "agent:test"}]}}' |
        kubectl -n "$NS" create -f - >/dev/null 2>"$W/err" ||
        bad "stand-in pod $1" "$(cat "$W/err")"
}
standin loop-gpu-1 ncclguard-node-loop gpu-1
standin loop-gpu-2 ncclguard-node-loop gpu-2
standin loop-gpu-3 ncclguard-node-loop gpu-3
standin loop-gpu-4 ncclguard-node-loop gpu-4
standin wd-gpu-1 ncclguard-watchdog gpu-1
standin wd-gpu-3 ncclguard-watchdog gpu-3
kube_token "$NS" ncclguard-node-loop loop-gpu-1 >"$W/tok-loop-1" &&
    kube_token "$NS" ncclguard-node-loop loop-gpu-2 >"$W/tok-loop-2" &&
    kube_token "$NS" ncclguard-node-loop loop-gpu-3 >"$W/tok-loop-3" &&
    kube_token "$NS" ncclguard-node-loop loop-gpu-4 >"$W/tok-loop-4" &&
    kube_token "$NS" ncclguard-watchdog wd-gpu-1 >"$W/tok-wd-1" &&
    kube_token "$NS" ncclguard-watchdog wd-gpu-3 >"$W/tok-wd-3" ||
    bad "TokenRequest"
jq -n '{apiVersion: "v1", kind: "Pod", metadata: {name: "stranger"},
    spec: {nodeName: "gpu-1", containers: [{name: "c", image: "x"}]}}' |
    kubectl -n ml create -f - >/dev/null
kube_token ml default stranger >"$W/tok-stranger" || bad "TokenRequest (stranger)"
claims() {
    python3 -c 'import base64, sys
p = open(sys.argv[1]).read().strip().split(".")[1]
print(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)).decode())' "$1"
}
claims "$W/tok-loop-1" >"$W/claims.json"
check "a bound token carries its pod's node (kubernetes.io.node.name gpu-1)" \
    jqt '.["kubernetes.io"].node.name == "gpu-1"' "$W/claims.json"

# ---- the evidence Events' policy, with real tokens ------------------------
# as TOKEN: POST an Event; prints the HTTP status.
post_as() { # post_as TOKENFILE PATH JSON
    curl -sS -o "$W/post.out" -w '%{http_code}' --max-time 20 --cacert "$KUBE_CA" \
        -H "Authorization: Bearer $(cat "$1")" -H 'Content-Type: application/json' \
        -X POST --data-binary "$3" "$KUBE_SERVER$2"
}
ev() { # ev NAME REASON ABOUT REPORTER
    jq -nc --arg n "$1" --arg r "$2" --arg about "$3" --arg rep "$4" '{
        apiVersion: "v1", kind: "Event", metadata: {name: $n, namespace: "default",
            annotations: {"ncclguard.io/evidence": ({node: $rep, reason: $r} | tostring)}},
        involvedObject: {apiVersion: "v1", kind: "Node", name: $about, uid: $about},
        reason: $r, message: "test", type: "Warning",
        source: {component: "test", host: $rep},
        firstTimestamp: "2026-12-01T00:00:00Z", lastTimestamp: "2026-12-01T00:00:00Z",
        count: 1, reportingComponent: "ncclguard.io/test", reportingInstance: $rep}'
}
# The NCCLGPULost Event a node's own watchdog posts when NVML reports a
# lost GPU (watchdog/agent_event.c), its evidence stamped now.
gpulost_ev() { # gpulost_ev NAME NODE KEY POD GPUS
    jq -nc --arg n "$1" --arg node "$2" --arg key "$3" --arg pod "$4" --arg gpus "$5" \
        --argjson at "$(date +%s%3N)" '{
        apiVersion: "v1", kind: "Event", metadata: {name: $n, namespace: "default",
            annotations: {"ncclguard.io/evidence": ({key: $key, pod: $pod,
                node: $node, reason: "GPULost", gpus: $gpus, at: $at} | tojson)}},
        involvedObject: {apiVersion: "v1", kind: "Node", name: $node, uid: $node},
        reason: "NCCLGPULost", message: "test", type: "Warning",
        source: {component: "ncclguard-watchdog", host: $node},
        firstTimestamp: "2026-12-01T00:00:00Z", lastTimestamp: "2026-12-01T00:00:00Z",
        count: 1, reportingComponent: "ncclguard.io/watchdog", reportingInstance: $node}'
}
E=/api/v1/namespaces/default/events
code=$(post_as "$W/tok-wd-1" "$E" "$(ev gpulost-own NCCLGPULost gpu-1 gpu-1)")
[ "$code" = 201 ] && ok "NCCLGPULost from the watchdog of the node it is about: admitted (core/v1)" ||
    bad "NCCLGPULost from the node's own watchdog: HTTP $code, want 201" "$(cat "$W/post.out")"
code=$(post_as "$W/tok-wd-1" "$E" "$(ev gpulost-other NCCLGPULost gpu-2 gpu-1)")
[ "$code" = 403 ] || [ "$code" = 422 ] && ok "NCCLGPULost about another node: refused ($code)" ||
    bad "NCCLGPULost about another node: HTTP $code, want a refusal" "$(cat "$W/post.out")"
code=$(post_as "$W/tok-loop-2" "$E" "$(ev pair-ok NCCLNodePairFailed gpu-1 gpu-2)")
[ "$code" = 201 ] && ok "NCCLNodePairFailed from another node's loop naming itself: admitted" ||
    bad "NCCLNodePairFailed from gpu-2's loop: HTTP $code, want 201" "$(cat "$W/post.out")"
code=$(post_as "$W/tok-loop-2" "$E" "$(ev pair-lie NCCLNodePairFailed gpu-1 gpu-3)")
[ "$code" = 403 ] || [ "$code" = 422 ] && ok "NCCLNodePairFailed naming a third node as its reporter: refused ($code)" ||
    bad "NCCLNodePairFailed naming gpu-3: HTTP $code, want a refusal" "$(cat "$W/post.out")"
code=$(post_as "$W/tok-loop-2" "$E" "$(ev pair-self NCCLNodePairFailed gpu-2 gpu-2)")
[ "$code" = 403 ] || [ "$code" = 422 ] && ok "NCCLNodePairFailed about its own node: refused ($code)" ||
    bad "NCCLNodePairFailed about its own node: HTTP $code, want a refusal" "$(cat "$W/post.out")"
code=$(post_as "$W/tok-stranger" "$E" "$(ev gpulost-stranger NCCLGPULost gpu-1 gpu-1)")
[ "$code" = 403 ] || [ "$code" = 422 ] && ok "NCCLGPULost from a stranger bound to a pod on that node: refused ($code)" ||
    bad "NCCLGPULost from a stranger: HTTP $code, want a refusal" "$(cat "$W/post.out")"
v1ev=$(jq -nc '{apiVersion: "events.k8s.io/v1", kind: "Event",
    metadata: {name: "v1-gpulost", namespace: "default"},
    eventTime: "2026-12-01T00:00:00.000000Z", reason: "NCCLGPULost", note: "x",
    type: "Warning", action: "Report", reportingController: "ncclguard.io/test",
    reportingInstance: "gpu-1", regarding: {kind: "Node", name: "gpu-1"}}')
code=$(post_as "$W/tok-wd-1" /apis/events.k8s.io/v1/namespaces/default/events "$v1ev")
[ "$code" = 403 ] || [ "$code" = 422 ] && ok "NCCLGPULost through events.k8s.io/v1: refused ($code)" ||
    bad "NCCLGPULost through events.k8s.io: HTTP $code, want a refusal" "$(cat "$W/post.out")"
# The same reasons are not anyone's to post through the admin either way:
# an ordinary Event through events.k8s.io is untouched by the policies.
v1ok=$(jq -nc '{apiVersion: "events.k8s.io/v1", kind: "Event",
    metadata: {name: "v1-other", namespace: "default"},
    eventTime: "2026-12-01T00:00:00.000000Z", reason: "Scheduled", note: "x",
    type: "Normal", action: "Binding", reportingController: "test",
    reportingInstance: "test", regarding: {kind: "Node", name: "gpu-1"}}')
out=$(printf '%s' "$v1ok" | kube_api POST /apis/events.k8s.io/v1/namespaces/default/events -)
[ "${out##*HTTP }" = 201 ] && ok "an ordinary Event through events.k8s.io/v1: admitted" ||
    bad "an ordinary events.k8s.io Event: ${out##*HTTP }"

# The node policy: a node loop changes its own Node only.
printf '{"status":{"conditions":[{"type":"NCCLHealthy","status":"False","reason":"Forged","message":"x"}]}}' >"$W/forge.json"
code=$(curl -sS -o "$W/post.out" -w '%{http_code}' --max-time 20 --cacert "$KUBE_CA" \
    -H "Authorization: Bearer $(cat "$W/tok-loop-2")" -H 'Content-Type: application/strategic-merge-patch+json' \
    -X PATCH --data-binary @"$W/forge.json" "$KUBE_SERVER/api/v1/nodes/gpu-1/status")
[ "$code" = 403 ] || [ "$code" = 422 ] && ok "gpu-2's loop writing gpu-1's condition: refused ($code)" ||
    bad "gpu-2's loop wrote gpu-1's condition: HTTP $code" "$(cat "$W/post.out")"
# The pods policy: the loop creates validation pods only.
jq -nc '{apiVersion: "v1", kind: "Pod", metadata: {name: "not-validation"},
    spec: {nodeName: "gpu-2", containers: [{name: "c", image: "busybox:1.36"}]}}' >"$W/rogue.json"
code=$(curl -sS -o "$W/post.out" -w '%{http_code}' --max-time 20 --cacert "$KUBE_CA" \
    -H "Authorization: Bearer $(cat "$W/tok-loop-2")" -H 'Content-Type: application/json' \
    -X POST --data-binary @"$W/rogue.json" "$KUBE_SERVER/api/v1/namespaces/$NS/pods")
[ "$code" = 403 ] || [ "$code" = 422 ] && ok "a node loop creating a pod that is not a validation pod: refused ($code)" ||
    bad "a node loop created an arbitrary pod: HTTP $code" "$(cat "$W/post.out")"

# ---- the node loop itself ---------------------------------------------------
loop() { # loop NODE TOKEN LOG ARGS...
    local node=$1 tok=$2 log=$3
    shift 3
    "$NODELOOP" --api-server "$KUBE_SERVER" --token-file "$tok" \
        --ca-file "$KUBE_CA" --node-name "$node" --namespace "$NS" \
        --image rc:test --watch-timeout 30s --tick 200ms --heartbeat 1h \
        --event-poll 1s "$@" >>"$log" 2>&1 &
    LOOP_PIDS+=($!)
}
# Four GPU Nodes: one under the taint is 25 %; --max-share 50 lets the
# breaker allow it.
loop gpu-1 "$W/tok-loop-1" "$W/loop1.log" --mode quarantine --threshold 2 \
    --cooldown 1h --max-share 50 --metrics-file "$W/metrics1"

node_json() { kubectl get node "$1" -o json --show-managed-fields 2>/dev/null; }
cond_is() { node_json gpu-1 | jqt "[.status.conditions[] | select(.type == \"NCCLHealthy\")][0] | $1"; }
if eventually 60 cond_is '.status == "True" and .reason == "NCCLChecksPass"'; then
    ok "the NCCLHealthy condition lands through nodes/status (RBAC and the node policy allow it)"
else
    bad "no NCCLHealthy condition on gpu-1" "$(tail -15 "$W/loop1.log")"
fi
check "the kubelet's Ready condition is kept" \
    eval 'node_json gpu-1 | jqt "[.status.conditions[] | select(.type == \"Ready\")] | length == 1"'

# A GPU pod on NODE (gpu-1) whose ring check ended with message M.
ringpod() { # ringpod NAME MSG [NODE]
    local now
    now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    jq -n --arg n "$1" --arg node "${3:-gpu-1}" '{apiVersion: "v1", kind: "Pod", metadata: {name: $n},
        spec: {nodeName: $node, restartPolicy: "Never",
            initContainers: [{name: "ncclguard-ringcheck", image: "rc:test",
                resources: {limits: {"nvidia.com/gpu": "4"}}}],
            containers: [{name: "train", image: "t:test",
                resources: {limits: {"nvidia.com/gpu": "4"}}}]}}' |
        kubectl -n ml create -f - >/dev/null 2>"$W/err" || bad "pod $1" "$(cat "$W/err")"
    jq -n --arg now "$now" --rawfile msg "$W/msg/$2.tl" --argjson ex "$(cat "$W/msg/$2.rc")" '{status: {
        phase: "Pending",
        initContainerStatuses: [{name: "ncclguard-ringcheck", image: "rc:test", imageID: "",
            restartCount: 0, ready: false,
            state: {terminated: {exitCode: $ex, reason: (if $ex == 0 then "Completed" else "Error" end),
                message: $msg, startedAt: $now, finishedAt: $now}}}]}}' >"$W/status.json"
    kubectl -n ml patch pod "$1" --subresource=status --type=merge \
        --patch-file "$W/status.json" >/dev/null 2>"$W/err" ||
        bad "pods/status of $1" "$(cat "$W/err")"
}
ringpod a p2p_fail
ringpod b p2p_fallback
taint_is() { node_json gpu-1 | jqt '[.spec.taints[]? | select(.key == "ncclguard.io/nccl-unhealthy")] | length == 1'; }
if eventually 60 taint_is; then
    ok "two node-class verdicts from two pods (statuses written through pods/status): the taint lands"
else
    bad "no taint on gpu-1" "$(tail -15 "$W/loop1.log")"
fi
check "the condition says quarantined" eval "cond_is '.status == \"False\" and .reason == \"NCCLQuarantined\"'"
pod_events() { kubectl -n ml get events -o json | jqt '[.items[] | select(.reason == "NCCLRingCheckFailed" or .reason == "NCCLRingCheckFallback")] | length >= 2'; }
check "each verdict is an Event on its pod" eventually 30 pod_events
# Only the Events section: the condition's reason says NCCLQuarantined too.
described() { kubectl describe node gpu-1 2>/dev/null | sed -n '/^Events:/,$p' | grep -q "NCCLQuarantined"; }
if eventually 30 described; then
    ok "kubectl describe node shows the node loop's Event"
else
    bad "kubectl describe node gpu-1 shows no NCCLQuarantined Event" \
        "$(kubectl get events -A -o json | jq -c '.items[] | select(.involvedObject.kind == "Node") | {reason, involvedObject}')"
fi
# Who wrote what: managedFields names the node loop (fieldManager).
check "managedFields on the Node name ncclguard-node-loop for the taint and the condition" \
    eval 'node_json gpu-1 | jqt "[.metadata.managedFields[] | select(.manager == \"ncclguard-node-loop\")] | (map(.subresource // \"\") | index(\"status\") != null) and length >= 2"'

# The apiserver restarts: the loop's watch breaks, and it goes on.
kube_restart_apiserver || bad "kube-apiserver did not come back"
ringpod c p2p_fail
pod_c_event() { kubectl -n ml get events -o json | jqt '[.items[] | select(.involvedObject.name == "c" and .reason == "NCCLRingCheckFailed")] | length == 1'; }
if eventually 60 pod_c_event; then
    ok "after an apiserver restart the loop watches again and sees a new verdict"
else
    bad "no Event for pod c after the restart" "$(tail -15 "$W/loop1.log")"
fi

# ---- the periodic step runs on a timer ----------------------------------
# A real apiserver sends a watch bookmark about once a minute, and nothing
# else while no pod of the node changes: an evidence Event posted for an
# idle node is read at the next --event-poll (1 s), not at the next pod
# change. gpu-3 has no pods.
loop gpu-3 "$W/tok-loop-3" "$W/loop3.log" --mode quarantine --threshold 2 \
    --max-share 10 --metrics-file "$W/metrics3"
listed3() { grep -q '"event":"listed"' "$W/loop3.log"; }
eventually 60 listed3 || bad "gpu-3's loop never listed its pods" "$(tail -5 "$W/loop3.log")"
sleep 2
# The node's own watchdog reports a lost GPU (what it posts on a real
# node), which the loop counts as its own evidence.
lost=$(gpulost_ev gpulost-idle gpu-3 uid-w/gpu-lost ml/w 2)
code=$(post_as "$W/tok-wd-3" "$E" "$lost")
[ "$code" = 201 ] || bad "NCCLGPULost about gpu-3: HTTP $code" "$(cat "$W/post.out")"
counted3() { grep -q '"event":"gpu-lost-counted"' "$W/loop3.log"; }
if eventually 15 counted3; then
    ok "an idle node's loop reads a new evidence Event on its timer, with no watch traffic"
else
    bad "gpu-3's loop did not count its watchdog's NCCLGPULost within 15 s" "$(tail -5 "$W/loop3.log")"
fi

# ---- the breaker counts past the client's 8 MiB answer cap ---------------
# 440 more GPU Nodes of about 24 KB each (a Node's image list makes them
# that large): listing them in one answer is 10 MiB.
big=$(head -c 24000 /dev/zero | tr '\0' 'x')
for i in $(seq 1 440); do
    printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"big-%d","labels":{"nvidia.com/gpu.present":"true"},"annotations":{"example.com/images":"%s"}}}\n' "$i" "$big"
done >"$W/bignodes.jsonl"
made=$(post_lines "$W/bignodes.jsonl" /api/v1/nodes)
[ "$made" = 440 ] || bad "only $made of the 440 large Nodes were created"
all_nodes=$(kube_api GET '/api/v1/nodes?labelSelector=nvidia.com%2Fgpu.present%3Dtrue' | head -n -1 | wc -c)
check "one list of the GPU Nodes is over 8 MiB ($all_nodes bytes)" test "$all_nodes" -gt 8388608
ringpod f p2p_fail gpu-3
ringpod g p2p_fallback gpu-3
taint3() { node_json gpu-3 | jqt '[.spec.taints[]? | select(.key == "ncclguard.io/nccl-unhealthy")] | length == 1'; }
if eventually 60 taint3; then
    ok "with 444 GPU Nodes (10 MiB of them) the breaker counts them in pages and lets 3 of 444 be tainted"
else
    bad "no taint on gpu-3 among 444 GPU Nodes" "$(grep -v '"event":"listed"' "$W/loop3.log" | tail -6 | cut -c1-400)"
fi

# ---- a taint dropped by another writer is not a lift by hand --------------
# A controller that writes the taints back from a copy older than ours
# drops the taint; managedFields name it, and the loop puts the taint back.
printf '{"spec":{"taints":[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}]}}' >"$W/stale.json"
curl -sS -o /dev/null --cacert "$KUBE_CA" --cert "$KUBE_DIR/admin.crt" --key "$KUBE_DIR/admin.key" \
    -A "stale-controller/1.0" -H 'Content-Type: application/merge-patch+json' -X PATCH \
    --data-binary @"$W/stale.json" "$KUBE_SERVER/api/v1/nodes/gpu-3?fieldManager=stale-controller"
restored() { taint3 && kubectl get events -n default -o json | jqt '[.items[] | select(.reason == "NCCLTaintRestored" and .involvedObject.name == "gpu-3")] | length == 1'; }
if eventually 30 restored; then
    ok "a taint dropped by another controller (managedFields: stale-controller) is put back, with an Event"
else
    bad "the taint dropped by stale-controller did not come back" "$(tail -4 "$W/loop3.log" | cut -c1-300)"
fi
kubectl taint nodes gpu-3 ncclguard.io/nccl-unhealthy- >/dev/null
lifted() { kubectl get events -n default -o json | jqt '[.items[] | select(.reason == "NCCLQuarantineLiftedByHand" and .involvedObject.name == "gpu-3")] | length == 1'; }
if eventually 30 lifted && sleep 2 && ! taint3; then
    ok "kubectl taint nodes ... ncclguard.io/nccl-unhealthy- is a lift by hand: the taint stays off"
else
    bad "the lift by hand was not taken as one" "$(tail -4 "$W/loop3.log" | cut -c1-300)"
fi

# ---- evidence past the first page of Events --------------------------------
# Events list in name order, 500 a page: 600 earlier NCCLGPULost Events
# about gpu-3 whose evidence is unreadable (the loop skips them) come
# before a real one; the loop must follow continue to reach it.
for i in $(seq 1 600); do
    printf '{"apiVersion":"v1","kind":"Event","metadata":{"name":"gpu-3.a%04d","namespace":"default"},"involvedObject":{"apiVersion":"v1","kind":"Node","name":"gpu-3","uid":"gpu-3"},"reason":"NCCLGPULost","message":"noise","type":"Warning","source":{"component":"test","host":"gpu-3"},"firstTimestamp":"2026-12-01T00:00:00Z","lastTimestamp":"2026-12-01T00:00:00Z","count":1,"reportingComponent":"ncclguard.io/watchdog","reportingInstance":"gpu-3"}\n' "$i"
done >"$W/noise.jsonl"
check "600 unreadable NCCLGPULost Events about gpu-3 posted" \
    test "$(post_lines "$W/noise.jsonl" "$E" "$W/tok-wd-3")" = 600
late=$(gpulost_ev gpu-3.zz-late gpu-3 uid-late/gpu-lost ml/late 5)
code=$(post_as "$W/tok-wd-3" "$E" "$late")
[ "$code" = 201 ] || bad "the late NCCLGPULost about gpu-3: HTTP $code" "$(cat "$W/post.out")"
late_counted() { grep -q '"key":"uid-late/gpu-lost"' "$W/loop3.log"; }
if eventually 30 late_counted; then
    ok "an evidence Event on the second page of the node's Events is read (continue followed)"
else
    bad "gpu-3's loop never counted the Event after 600 others" "$(tail -3 "$W/loop3.log" | cut -c1-300)"
fi

# ---- a relist after 410 forgets the pods deleted in the gap ---------------
# gpu-4: quarantined while a running pod holds its 8 GPUs, so no
# validation pod may start. The loop is stopped, the apiserver restarts
# (its watch cache starts anew, later than the loop's resourceVersion),
# the pod is deleted; the loop's watch from its old resourceVersion gets
# 410, it lists again, and the list must replace what it knew.
jq -n '{apiVersion: "v1", kind: "Pod", metadata: {name: "ghost"},
    spec: {nodeName: "gpu-4", containers: [{name: "train", image: "t:test",
        resources: {limits: {"nvidia.com/gpu": "8"}}}]}}' |
    kubectl -n ml create -f - >/dev/null
kube_pod_status ml ghost '{"status":{"phase":"Running"}}'
loop gpu-4 "$W/tok-loop-4" "$W/loop4.log" --mode quarantine --threshold 2 \
    --max-share 100 --cooldown 1s --metrics-file "$W/metrics4"
LOOP4=${LOOP_PIDS[-1]}
ringpod h p2p_fail gpu-4
ringpod i p2p_fallback gpu-4
taint4() { node_json gpu-4 | jqt '[.spec.taints[]? | select(.key == "ncclguard.io/nccl-unhealthy")] | length == 1'; }
eventually 60 taint4 || bad "no taint on gpu-4" "$(tail -5 "$W/loop4.log")"
# Both jobs end (their GPUs are free); only the running pod holds any.
kube_pod_status ml h '{"status":{"phase":"Failed"}}'
kube_pod_status ml i '{"status":{"phase":"Failed"}}'
vpods() { kubectl -n "$NS" get pods -l ncclguard.io/validation-for=gpu-4 -o json 2>/dev/null; }
sleep 3
check "no validation pod while a running pod holds the node's GPUs" \
    eval 'vpods | jqt ".items | length == 0"'
kill -STOP "$LOOP4"
kubectl -n ml create configmap rv-bump --from-literal=a=b >/dev/null
kube_restart_apiserver || bad "kube-apiserver did not come back"
kubectl -n ml delete pod ghost --grace-period=0 --force >/dev/null 2>&1
kill -CONT "$LOOP4"
vstarted() { vpods | jqt '.items | length == 1'; }
if eventually 60 vstarted; then
    ok "after a 410 the relist forgets the pod deleted in the gap, and the validation pod starts"
else
    bad "no validation pod on gpu-4 after the relist" "$(tail -6 "$W/loop4.log" | cut -c1-300)"
fi
check "the loop saw the 410 and listed again" grep -q '"code":410' "$W/loop4.log"
check "the validation pod is opted out of the webhook (ncclguard.io/inject: false), which the policies admit" \
    eval 'vpods | jqt ".items[0].metadata.annotations[\"ncclguard.io/inject\"] == \"false\""'
# The validation pod passes (as the kubelet would report its ring check):
# the taint goes and the condition is True again.
vname=$(vpods | jq -r '.items[0].metadata.name // empty')
if [ -n "$vname" ]; then
    jq -n --rawfile msg "$W/msg/pass8.tl" --arg now "$(date -u +%Y-%m-%dT%H:%M:%SZ)" '{status: {
        phase: "Succeeded",
        containerStatuses: [{name: "ringcheck", image: "rc:test", imageID: "", restartCount: 0, ready: false,
            state: {terminated: {exitCode: 0, reason: "Completed", message: $msg,
                startedAt: $now, finishedAt: $now}}}]}}' >"$W/vstatus.json"
    kubectl -n "$NS" patch pod "$vname" --subresource=status --type=merge \
        --patch-file "$W/vstatus.json" >/dev/null 2>"$W/err" || bad "validation pod status" "$(cat "$W/err")"
fi
lifted4() {
    ! taint4 && node_json gpu-4 | jqt '[.status.conditions[] | select(.type == "NCCLHealthy")][0] | .status == "True"' &&
        kubectl get events -n default -o json | jqt '[.items[] | select(.reason == "NCCLValidationPassed" and .involvedObject.name == "gpu-4")] | length == 1'
}
if eventually 60 lifted4; then
    ok "the passing validation pod lifts the taint (NCCLValidationPassed): the quarantine cycle ends"
else
    bad "gpu-4 still quarantined after its validation passed" "$(tail -4 "$W/loop4.log" | cut -c1-300)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
