#!/usr/bin/env bash
# The webhook on a real kube-apiserver (tests/kube/cluster.sh): registered
# from the rendered deploy/ objects, with only clientConfig pointed at a
# local `ncclguard serve` and its caBundle, then pods created with the
# kubectl of the same release.
#
#   NCCLGUARD=build/ncclguard [KUBE_RELEASE=1.37] tests/kube/webhook.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
NCCLGUARD=${NCCLGUARD:-$root/build/ncclguard}
POLICY=${POLICY:-$root/policy/default.yaml}
rel=${KUBE_RELEASE:-1.37}

# shellcheck source=tests/integration/lib.sh
. "$root/tests/integration/lib.sh"
# shellcheck source=tests/kube/cluster.sh
. "$here/cluster.sh"
ng_setup
trap 'kube_down; ng_cleanup' EXIT
W=$NG_TMP
jqt() { jq -e "$@" >/dev/null; } # jqt FILTER FILE: true or false, silently

kube_up "$W/kube" "$rel" || { echo "FAIL: the control plane did not start"; echo "0 passed, 1 failed"; exit 1; }
tag="k8s $rel"

ng_make_ca "$W" && ng_make_cert "$W" tls 1 || { echo "FAIL: certificates"; exit 1; }
ng_serve_start --cert "$W/tls.crt" --key "$W/tls.key" --policy "$POLICY" \
    --namespace ncclguard || { echo "FAIL: ncclguard serve did not start"; exit 1; }

# The registration as deploy/ renders it; only clientConfig changes.
kubectl kustomize "$root/deploy/base" >"$W/rendered.yaml" ||
    { echo "FAIL: kubectl kustomize deploy/base"; exit 1; }
kubectl create --dry-run=client -o json -f "$W/rendered.yaml" >"$W/rendered.json" 2>"$W/render.err" ||
    { echo "FAIL: the rendered objects do not decode: $(head -c 300 "$W/render.err")"; exit 1; }
jq -s --arg url "$NG_URL/mutate" --arg ca "$(base64 -w0 "$W/ca.crt")" '
    [.[] | if .kind == "List" then .items[] else . end
     | select(.kind == "MutatingWebhookConfiguration")][0]
    | .webhooks |= map(.clientConfig = {url: $url, caBundle: $ca})' \
    "$W/rendered.json" >"$W/mwc.json"
ng_check "$tag: deploy/base renders one MutatingWebhookConfiguration" \
    jqt '.kind == "MutatingWebhookConfiguration" and (.webhooks | length) == 1' "$W/mwc.json"
ng_check "$tag: the apiserver accepts the registration" kubectl apply -f "$W/mwc.json"

kube_ns ml
kube_ns optout
kubectl label namespace optout ncclguard.io/inject=false >/dev/null

gpu_pod() { # gpu_pod NAME [ANNOTATIONS_JSON]
    jq -n --arg n "$1" --argjson a "${2:-{\}}" '{
        apiVersion: "v1", kind: "Pod",
        metadata: {name: $n, annotations: $a},
        spec: {nodeName: "gpu-1", restartPolicy: "Never",
               containers: [{name: "train", image: "pytorch/pytorch:2.5.1",
                   command: ["torchrun", "--nproc-per-node=4", "train.py"],
                   resources: {limits: {"nvidia.com/gpu": "4"}}}]}}'
}
cpu_pod() {
    jq -n --arg n "$1" '{apiVersion: "v1", kind: "Pod", metadata: {name: $n},
        spec: {containers: [{name: "web", image: "nginx:1.27",
            resources: {limits: {cpu: "1"}}}]}}'
}
mutated() { # mutated FILE: the stored pod carries what the webhook adds
    jq -e '(.spec.initContainers // [] | map(.name) | index("ncclguard-ringcheck")) != null
        and ([.spec.containers[0].envFrom[]?.configMapRef.name] | index("nccl-production-profile")) != null
        and ([.spec.volumes[]? | select(.emptyDir.medium == "Memory")] | length) == 1
        and (.metadata.annotations // {} | keys | map(select(startswith("ncclguard.io/"))) | length) > 0' "$1" >/dev/null
}
untouched() {
    jq -e '(.spec.initContainers // []) == [] and
        ([.spec.containers[].envFrom[]?] | length) == 0 and
        (.metadata.annotations // {} | keys
         | map(select(startswith("ncclguard.io/") and . != "ncclguard.io/inject")) | length) == 0' "$1" >/dev/null
}
mutated_any() { # the webhook's own annotation on a stored pod
    jq -e '.metadata.annotations["ncclguard.io/mutated"] // "" | length > 0' "$1" >/dev/null
}

# The apiserver reads webhook registrations through an informer: wait
# until a server-side dry run shows the mutation.
for _ in $(seq 1 100); do
    gpu_pod probe | kubectl -n ml create --dry-run=server -o json -f - >"$W/probe.json" 2>/dev/null &&
        mutated "$W/probe.json" && break
    sleep 0.2
done

# A GPU pod created with kubectl create is stored mutated.
gpu_pod train-a | kubectl -n ml create -f - >/dev/null 2>"$W/err" ||
    echo "create: $(cat "$W/err")"
kubectl -n ml get pod train-a -o json >"$W/a.json" 2>/dev/null
ng_check "$tag: a GPU pod is stored mutated (ring check, profile envFrom, memory /dev/shm, annotations)" mutated "$W/a.json"
ng_check "$tag: the ring check runs first, before the pod's own init containers" \
    jqt '.spec.initContainers[0].name == "ncclguard-ringcheck"' "$W/a.json"

# A CPU pod is stored untouched, and never sent (matchConditions).
before=$(ng_metric ncclguard_admission_duration_seconds_count)
cpu_pod web | kubectl -n ml create -f - >/dev/null 2>&1
kubectl -n ml get pod web -o json >"$W/web.json" 2>/dev/null
ng_check "$tag: a CPU pod is stored untouched" untouched "$W/web.json"

# ncclguard.io/inject: "false", by the real CEL of matchConditions.
gpu_pod opted '{"ncclguard.io/inject":"false"}' | kubectl -n ml create -f - >/dev/null 2>&1
kubectl -n ml get pod opted -o json >"$W/opted.json" 2>/dev/null
ng_check "$tag: ncclguard.io/inject=false on the pod: stored untouched" untouched "$W/opted.json"
gpu_pod nsout | kubectl -n optout create -f - >/dev/null 2>&1
kubectl -n optout get pod nsout -o json >"$W/nsout.json" 2>/dev/null
ng_check "$tag: a namespace labelled ncclguard.io/inject=false: stored untouched" untouched "$W/nsout.json"
after=$(ng_metric ncclguard_admission_duration_seconds_count)
ng_eq "$tag: the CPU pod and both opted-out pods never reached the webhook" \
    "$((after - before))" 0

# Idempotence: the stored pod, reviewed again, needs no patch.
jq '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
     request: {uid: "again", kind: {group: "", version: "v1", kind: "Pod"},
               resource: {group: "", version: "v1", resource: "pods"},
               namespace: "ml", operation: "CREATE", object: .}}' "$W/a.json" >"$W/again.json"
ng_eq "$tag: the stored pod reviewed again gets no patch" \
    "$(ng_curl -H 'Content-Type: application/json' --data-binary "@$W/again.json" "$NG_URL/mutate" |
        jq -r '.response.patch // "none"')" none

# Reinvocation: a second webhook that adds a GPU container after ncclguard
# ran; reinvocationPolicy IfNeeded calls ncclguard again, which mutates
# the new container too, and the result is still accepted.
cat >"$W/adder.py" <<'PY'
import base64, json, ssl, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        rev = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        pod = rev["request"]["object"]
        names = [c["name"] for c in pod["spec"]["containers"]]
        patch = []
        if "sidecar-gpu" not in names:
            patch = [{"op": "add", "path": "/spec/containers/-", "value": {
                "name": "sidecar-gpu", "image": "busybox:1.36",
                "resources": {"limits": {"nvidia.com/gpu": "4"}}}}]
        resp = {"uid": rev["request"]["uid"], "allowed": True}
        if patch:
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
srv = HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
open(sys.argv[1], "w").write(str(srv.server_address[1]))
srv.serve_forever()
PY
python3 "$W/adder.py" "$W/adder.port" "$W/tls.crt" "$W/tls.key" &
adder_pid=$!
for _ in $(seq 50); do [ -s "$W/adder.port" ] && break; sleep 0.1; done
# Webhooks run in name order: ncclguard's "pods.ncclguard.io" before
# "adder.test.example" (registration names "ncclguard" < "zz-adder").
jq -n --arg url "https://127.0.0.1:$(cat "$W/adder.port")/" --arg ca "$(base64 -w0 "$W/ca.crt")" '{
    apiVersion: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration",
    metadata: {name: "zz-adder"},
    webhooks: [{name: "adder.test.example", admissionReviewVersions: ["v1"], sideEffects: "None",
        failurePolicy: "Fail", timeoutSeconds: 5, reinvocationPolicy: "Never",
        clientConfig: {url: $url, caBundle: $ca},
        namespaceSelector: {matchLabels: {"kubernetes.io/metadata.name": "reinvoke"}},
        rules: [{apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}]}]}' |
    kubectl apply -f - >/dev/null
kube_ns reinvoke
for _ in $(seq 1 100); do
    cpu_pod probe | kubectl -n reinvoke create --dry-run=server -o json -f - >"$W/rprobe.json" 2>/dev/null &&
        jq -e '[.spec.containers[].name] | index("sidecar-gpu") != null' "$W/rprobe.json" >/dev/null && break
    sleep 0.2
done
gpu_pod reinvoked | kubectl -n reinvoke create -f - >/dev/null 2>"$W/err" || echo "create: $(cat "$W/err")"
kubectl -n reinvoke get pod reinvoked -o json >"$W/re.json" 2>/dev/null
ng_check "$tag: reinvocation: the container added by a later webhook gets the profile too" \
    jqt '[.spec.containers[] | select(.name == "sidecar-gpu") | .envFrom[]?.configMapRef.name] | index("nccl-production-profile") != null' "$W/re.json"
ng_check "$tag: reinvocation: still one ring check and one /dev/shm volume" \
    jqt '([.spec.initContainers[] | select(.name == "ncclguard-ringcheck")] | length) == 1 and ([.spec.volumes[] | select(.emptyDir.medium == "Memory")] | length) == 1' "$W/re.json"
kill "$adder_pid" 2>/dev/null
kubectl delete mutatingwebhookconfiguration zz-adder >/dev/null 2>&1

# Every corpus manifest's pods, patched by the webhook, pass the real
# pod validation (server-side dry run: admission and validation run, and
# nothing is stored). What they reference (ServiceAccounts, priority and
# runtime classes) is created first, as it exists on their clusters.
: >"$W/reviews.jsonl"
for m in "$root"/tests/data/corpus/manifests/*.yaml "$root"/deploy/examples/*.yaml; do
    "$NCCLGUARD" mutate -q --policy "$POLICY" -o review "$m" >>"$W/reviews.jsonl" 2>/dev/null ||
        echo "  ncclguard mutate -o review $m failed"
done
"$NCCLGUARD" mutate -q --policy "$POLICY" -o patch "$W/reviews.jsonl" |
    jq -c '.[] | .result' >"$W/results.txt"
jq -r '.request.object.spec.priorityClassName // empty' "$W/reviews.jsonl" | sort -u |
    while read -r pc; do
        kubectl create priorityclass "$pc" --value=1000 >/dev/null 2>&1
    done
jq -r '.request.object.spec.runtimeClassName // empty' "$W/reviews.jsonl" | sort -u |
    while read -r rc; do
        printf '{"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass","metadata":{"name":"%s"},"handler":"%s"}' \
            "$rc" "$rc" | kubectl apply -f - >/dev/null 2>&1
    done
jq -r '"\(.request.namespace // "default") \(.request.object.spec.serviceAccountName // "default")"' \
    "$W/reviews.jsonl" | sort -u | while read -r ns sa; do
    kube_ns "$ns"
    kubectl -n "$ns" create serviceaccount "$sa" >/dev/null 2>&1
done
# dryrun NS FILE: a server-side dry run of the pod (admission and
# validation run, nothing is stored); the stored form on stdout, the
# server's message on stderr.
dryrun() {
    local out code
    out=$(kube_api POST "/api/v1/namespaces/$1/pods?dryRun=All" "$2")
    code=${out##*HTTP }
    out=${out%$'\n'HTTP*}
    if [ "$code" = 201 ] || [ "$code" = 200 ]; then
        printf '%s\n' "$out"
    else
        printf '%s\n' "$out" | jq -r '.message // .' >&2
        return 1
    fi
}
i=0
n=0
bad=0
upstream=0
while IFS= read -r review; do
    i=$((i + 1))
    result=$(sed -n "${i}p" "$W/results.txt")
    ns=$(printf '%s' "$review" | jq -r '.request.namespace // "default"')
    name=$(printf '%s' "$review" | jq -r '.request.object.metadata.name // .request.name // "?"')
    printf '%s' "$review" | jq --arg n "corpus-$i" '.request.object
        | .metadata.name = $n | del(.metadata.generateName) | del(.metadata.namespace)' >"$W/pod.json"
    # The pod as written, past the webhook (opted out): a pod that the
    # apiserver refuses even so (a template placeholder, a pod derived
    # from a custom resource that fills fields in at run time) says
    # nothing about the patch; it is listed, not counted.
    jq '.metadata.annotations["ncclguard.io/inject"] = "false"' "$W/pod.json" >"$W/orig.json"
    if ! dryrun "$ns" "$W/orig.json" >/dev/null 2>"$W/err"; then
        upstream=$((upstream + 1))
        echo "  corpus pod $i ($name): not a valid Pod as written, with or without ncclguard: $(grep -v '^Warning' "$W/err" | tr '\n' ' ' | head -c 200)"
        continue
    fi
    if ! dryrun "$ns" "$W/pod.json" >"$W/out.json" 2>"$W/err"; then
        bad=$((bad + 1))
        echo "  corpus pod $i ($name, $result): valid as written, refused after the webhook: $(head -c 400 "$W/err")"
        continue
    fi
    if [ "$result" = '"patched"' ] && ! mutated_any "$W/out.json"; then
        bad=$((bad + 1))
        echo "  corpus pod $i ($name): the dry run patches it, the apiserver stored it unmutated"
    fi
    n=$((n + 1))
done <"$W/reviews.jsonl"
ng_eq "$tag: every corpus and example pod valid as written ($n of $i; $upstream are not Pods the apiserver accepts even unmutated) is accepted after the webhook" "$bad" 0
ng_check "$tag: the corpus check saw at least 80 valid pods" test "$n" -ge 80

# The webhook down: failurePolicy Ignore lets pods through unmutated,
# within timeoutSeconds, whether the port refuses or the server hangs.
ng_serve_stop
t0=$(date +%s%N)
gpu_pod down-refused | kubectl -n ml create -f - >/dev/null 2>"$W/err"
rc=$?
t1=$(date +%s%N)
kubectl -n ml get pod down-refused -o json >"$W/down.json" 2>/dev/null
ng_check "$tag: webhook down (connection refused): the pod is created, unmutated" untouched "$W/down.json"
ng_check "$tag: webhook down: kubectl create succeeded" test "$rc" -eq 0
# A server that accepts and never answers: the apiserver gives up after
# timeoutSeconds (5) and admits the pod.
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
held = []
while True:
    c, _ = s.accept(); held.append(c)
' "$NG_PORT" &
hang_pid=$!
sleep 0.5
t0=$(date +%s%N)
gpu_pod down-hung | kubectl -n ml create -f - >/dev/null 2>"$W/err"
rc=$?
t1=$(date +%s%N)
kill "$hang_pid" 2>/dev/null
kubectl -n ml get pod down-hung -o json >"$W/hung.json" 2>/dev/null
ms=$(((t1 - t0) / 1000000))
ng_check "$tag: webhook hung: the pod is created, unmutated (after ${ms} ms)" untouched "$W/hung.json"
# timeoutSeconds is 5; the apiserver may retry once on a connection error
# but not on a timeout. The bound is generous: this is not a speed test.
ng_check "$tag: webhook hung: admitted after timeoutSeconds, not held longer than twice that" \
    test "$ms" -ge 4500 -a "$ms" -le 15000

ng_summary
