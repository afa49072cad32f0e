#!/usr/bin/env bash
# A node that the real node loop has quarantined, on the test apiserver of
# tests/docs/check.sh, for docs/nodeloop.md's "lifting by hand" block.
#
#   quarantine.sh up       applies deploy/ (self-signed overlay, watchdog and
#                          node-health components; the objects that need the
#                          Prometheus Operator's CRDs left out), makes Node
#                          gpu-node-17 (8 GPUs), starts ncclguard-nodeloop
#                          for it with a token bound to a stand-in
#                          of its DaemonSet pod, and reports two ring checks
#                          on that node that found a broken P2P pair (the
#                          verdict docs/nodeloop.md shows); returns once the
#                          node carries the loop's taint
#   quarantine.sh lifted   waits until the loop has seen the taint removed:
#                          no taint, condition NCCLHealthy True
#                          (NCCLChecksPass) and a Node Event
#                          NCCLQuarantineLiftedByHand about this node
#
# Run in the docs check's workspace (the repository's root), with
# KUBECONFIG, KUBE_SERVER and KUBE_CA from tests/kube/cluster.sh's kube_up
# and ncclguard-nodeloop on PATH. The loop's pid goes to $DOCS_PIDS, which
# check.sh stops with the control plane.
set -euo pipefail
: "${KUBE_SERVER:?run from tests/docs/check.sh (no test apiserver)}"
: "${DOCS_PIDS:?run from tests/docs/check.sh (DOCS_PIDS unset)}"
# shellcheck source=tests/kube/cluster.sh
. tests/kube/cluster.sh
NODE=gpu-node-17
NS=ncclguard-watchdog
D=$(dirname "$DOCS_PIDS")/quarantine
mkdir -p "$D"

# eventually SECONDS CMD...: CMD succeeds within SECONDS.
eventually() {
    local t=$(($1 * 5))
    shift
    for _ in $(seq "$t"); do "$@" && return 0; sleep 0.2; done
    return 1
}
cond() {
    kubectl get node "$NODE" -o json |
        jq -e "[.status.conditions[]? | select(.type == \"NCCLHealthy\")][0] | $1" >/dev/null
}
tainted() {
    kubectl get node "$NODE" -o json |
        jq -e '[.spec.taints[]? | select(.key == "ncclguard.io/nccl-unhealthy")] | length == 1' >/dev/null
}

case ${1:-} in
up)
    mkdir -p "$D/k"
    cat >"$D/k/kustomization.yaml" <<EOK
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$(realpath --relative-to="$D/k" deploy/overlays/self-signed)]
components: [$(realpath --relative-to="$D/k" deploy/components/watchdog), $(realpath --relative-to="$D/k" deploy/components/node-health)]
EOK
    kubectl kustomize "$D/k" |
        yq -s '{apiVersion: "v1", kind: "List", items: [.[] |
            select(.kind != "PodMonitor" and .kind != "PrometheusRule")]}' >"$D/all.json"
    kubectl apply --server-side -f "$D/all.json" >/dev/null
    kube_node "$NODE" 8
    jq -n --arg node "$NODE" '{apiVersion: "v1", kind: "Pod",
        metadata: {name: "node-loop-standin"},
        spec: {serviceAccountName: "ncclguard-node-loop", nodeName: $node,
            containers: [{name: "c", image: "standin:test"}]}}' |
        kubectl -n "$NS" create -f - >/dev/null
    kube_token "$NS" ncclguard-node-loop node-loop-standin >"$D/token"
    # One GPU node: the breaker (--max-share, per cent of GPU nodes under
    # the taint) must allow all of them.
    setsid ncclguard-nodeloop --api-server "$KUBE_SERVER" \
        --token-file "$D/token" --ca-file "$KUBE_CA" --node-name "$NODE" \
        --namespace "$NS" --image rc:test --watch-timeout 30s --tick 200ms \
        --heartbeat 1h --event-poll 1s --mode quarantine --threshold 2 \
        --cooldown 1h --max-share 100 >"$D/loop.log" 2>&1 </dev/null &
    echo $! >>"$DOCS_PIDS"
    kube_ns ml
    # The verdict docs/nodeloop.md classifies: the ring check fell back to
    # NCCL_P2P_DISABLE=1 for a broken pair (node class, P2PBroken).
    printf '%s\n' \
        'ncclguard-ringcheck: FALLBACK: the pod starts with NCCL_P2P_DISABLE=1 (written to /run/ncclguard/nccl.conf)' \
        'ncclguard-ringcheck check failed: NCCL error (exit 3) in phase 4 (correctness)' \
        "what: allreduce failed on rank 2 (GPU 2): unhandled cuda error (run with NCCL_DEBUG=INFO for details): transport/p2p.cc:274 Cuda failure 'peer mapping resources exhausted' on GPU 2 (P2P to its peer)" \
        'gpus: pair GPU 1 (00000000:19:00.0) - GPU 2 (00000000:1A:00.0)' \
        'transport: P2P' \
        'diagnosis: passes with NCCL_P2P_DISABLE=1 (P2P transport); failing pair GPU 1 - GPU 2' \
        'fix: set NCCL_P2P_DISABLE=1 for this workload (the fallback file does that)' >"$D/verdict"
    for p in train-a train-b; do
        jq -n --arg n "$p" --arg node "$NODE" '{apiVersion: "v1", kind: "Pod",
            metadata: {name: $n}, spec: {nodeName: $node, restartPolicy: "Never",
                initContainers: [{name: "ncclguard-ringcheck", image: "rc:test",
                    resources: {limits: {"nvidia.com/gpu": "4"}}}],
                containers: [{name: "train", image: "t:test",
                    resources: {limits: {"nvidia.com/gpu": "4"}}}]}}' |
            kubectl -n ml create -f - >/dev/null
        now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
        jq -n --arg now "$now" --rawfile msg "$D/verdict" '{status: {phase: "Pending",
            initContainerStatuses: [{name: "ncclguard-ringcheck", image: "rc:test",
                imageID: "", restartCount: 0, ready: false,
                state: {terminated: {exitCode: 0, reason: "Completed",
                    message: $msg, startedAt: $now, finishedAt: $now}}}]}}' >"$D/status.json"
        kube_pod_status ml "$p" "$(cat "$D/status.json")"
    done
    if ! eventually 60 tainted; then
        echo "quarantine.sh: the node loop did not taint $NODE; its log:" >&2
        tail -20 "$D/loop.log" >&2
        exit 1
    fi
    ;;
lifted)
    lifted_event() {
        kubectl -n default get events -o json | jq -e --arg n "$NODE" '[.items[] |
            select(.reason == "NCCLQuarantineLiftedByHand" and
                   .involvedObject.kind == "Node" and .involvedObject.name == $n)] |
            length == 1' >/dev/null
    }
    if ! eventually 60 cond '.status == "True" and .reason == "NCCLChecksPass"' ||
        ! eventually 30 lifted_event || tainted; then
        echo "quarantine.sh: the node loop did not see the lift by hand; NCCLHealthy, taints, Node Events:" >&2
        kubectl get node "$NODE" -o json |
            jq -c '(.status.conditions[]? | select(.type == "NCCLHealthy")), .spec.taints' >&2
        kubectl -n default get events -o json |
            jq -c '.items[] | select(.involvedObject.kind == "Node") | {reason, involvedObject}' >&2
        tail -20 "$D/loop.log" >&2
        exit 1
    fi
    ;;
*)
    echo "usage: quarantine.sh up|lifted" >&2
    exit 2
    ;;
esac
