#!/usr/bin/env bash
# `ncclguard mutate` never goes silent and says things right: GPU objects
# without a pod template are reported with the paths of their GPU
# requests; KServe predictors and Trainer TrainJobs are shown as the pods
# their controllers create; not-GPU verdicts give the reason; DRA pods get
# in through ncclguard.io/claim-gpus or the policy's dra.claimTemplates;
# summaries count and name pods right; -o review writes JSON lines.
set -u
export LC_ALL=C
: "${NCCLGUARD:?set NCCLGUARD to the ncclguard binary}"
cd "$(dirname "$0")/../.." || exit 1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
POL=policy/default.yaml
C=tests/data/corpus/manifests
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
bad() { failed=$((failed + 1)); echo "FAIL - $1"; [ -f "${2:-}" ] && sed 's/^/       /' "$2"; return 0; }

# mutate ARGS...: runs the dry run with the default policy; stdout in
# $T/out, stderr in $T/err, exit status in $rc.
mutate() {
    "$NCCLGUARD" mutate --policy "$POL" "$@" >"$T/out" 2>"$T/err"
    rc=$?
}
has() { # has WHAT FILE TEXT: FILE contains TEXT (fixed string)
    if grep -qF -- "$3" "$2"; then ok "$1"; else bad "$1: no '$3' in" "$2"; fi
}
hasnt() {
    if grep -qF -- "$3" "$2"; then bad "$1: '$3' in" "$2"; else ok "$1"; fi
}

# --- summaries ---------------------------------------------------------------
mutate deploy/examples/opt-out-pod.yaml
has "opt-out pod shows its real GPU count (was 0 GPUs)" "$T/err" \
    'Pod notebook: skipped (1 GPU, rule default): annotation ncclguard.io/inject is "false"'
cat >"$T/noname.yaml" <<'EOY'
apiVersion: v1
kind: Pod
spec:
  containers:
    - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
EOY
mutate "$T/noname.yaml"
has "a pod without a name: 'Pod:', GPUs plural" "$T/err" "document 1: Pod: patched (2 GPUs, rule default)"
hasnt "no 'Pod :' with an empty name" "$T/err" "Pod :"
cat >"$T/list.yaml" <<'EOY'
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: a}
    spec:
      containers:
        - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
EOY
mutate "$T/list.yaml"
has "a List item is named by its kind and name" "$T/err" \
    "document 1: Pod a (List /items/0): patched (1 GPU, rule default)"
hasnt "no 'List  /items/0'" "$T/err" "List  /"

# --- GPU objects without a pod template ------------------------------------------
mutate "$C/45-nim-aks-dynamo-disagg-planner.yaml"
[ "$rc" = 0 ] && ok "Dynamo graph deployment: exit 0" || bad "Dynamo: exit $rc" "$T/err"
has "Dynamo: the GPU request paths are named" "$T/err" \
    "DynamoGraphDeployment vllm-disagg-planner: asks for GPUs at /spec/services/VllmDecodeWorker/resources/limits/gpu"
has "Dynamo: every path" "$T/err" "also /spec/services/VllmPrefillWorker/resources/limits/gpu"
has "Dynamo: says the webhook sees the pods it creates" "$T/err" \
    "the webhook will see the pods its controller creates"
mutate "$C/42-kserve-isvc-huggingface-llama2.yaml"
has "KServe InferenceService: the predictor's pod is shown" "$T/err" \
    "InferenceService huggingface-llama2 /spec/predictor/model: patched (1 GPU, rule default)"
has "KServe: says KServe creates the pods" "$T/err" "the pods KServe creates"
yq -S . "$C/42-kserve-isvc-huggingface-llama2.yaml" >"$T/a.json"
yq -S . "$T/out" >"$T/b.json"
cmp -s "$T/a.json" "$T/b.json" && ok "KServe: the object itself is written back unchanged" ||
    bad "KServe: the object was changed"
mutate -o patch "$C/42-kserve-isvc-huggingface-llama2.yaml"
if jq -e 'length == 1 and .[0].controller == "KServe" and
          (.[0].patch | length > 0) and
          (.[0].derivedPod.spec.containers[0].name == "kserve-container") and
          (.[0].derivedPod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1")' \
    "$T/out" >/dev/null; then
    ok "KServe: -o patch shows the derived pod and its patch (was [])"
else
    bad "KServe -o patch" "$T/out"
fi
mutate "$C/52-trainer-trainjob-lammps-gpus.yaml"
has "Trainer TrainJob: resourcesPerNode shown as a node's pod" "$T/err" \
    "TrainJob lammps-flux /spec/trainer/resourcesPerNode: patched (1 GPU, rule default)"
mutate -o review "$C/52-trainer-trainjob-lammps-gpus.yaml"
jq -e -s 'length == 1 and .[0].request.object.spec.containers[0].image == "ghcr.io/flux-framework/tutorials:gpu-lammps-hwloc"' \
    "$T/out" >/dev/null && ok "Trainer: -o review posts the derived pod" || bad "Trainer -o review" "$T/out"

# --- not-GPU verdicts give the reason -----------------------------------------
mutate "$C/26-azure-aks-mpijob-rccl-amd.yaml"
has "amd.com/gpu: NCCL is NVIDIA's" "$T/err" "not_gpu (0 GPUs, rule default): asks for amd.com/gpu: NCCL runs on NVIDIA GPUs only"
mutate "$C/05-dra-mig-extended-resource-pod.yaml"
has "MIG slice: no NCCL ring" "$T/err" "asks for a MIG slice (nvidia.com/mig-1g.12gb): one MIG instance has no NCCL ring"
mutate "$C/04-dra-two-containers-shared-gpu.yaml"
has "DRA without a count: says how to give one" "$T/err" \
    "DRA claims, GPU count unknown at admission: annotate ncclguard.io/claim-gpus with it"

# --- DRA ----------------------------------------------------------------------
cat >"$T/dra.yaml" <<'EOY'
apiVersion: v1
kind: Pod
metadata:
  name: dra-train
  namespace: ml
  annotations: {ncclguard.io/claim-gpus: "2"}
spec:
  containers:
    - {name: train, image: x, resources: {claims: [{name: gpus}]}}
    - {name: logger, image: y}
  resourceClaims:
    - {name: gpus, resourceClaimTemplateName: two-gpus}
EOY
mutate -o json "$T/dra.yaml"
has "DRA + claim-gpus annotation: patched for 2 GPUs" "$T/err" "Pod dra-train: patched (2 GPUs, rule default)"
if jq -e '(.spec.initContainers[0].resources.claims == [{name: "gpus"}]) and
          ([.spec.initContainers[0].resources | .limits, .requests | keys[] |
            select(test("gpu"))] | length == 0) and
          (.spec.initContainers[0].args[0:2] == ["--expect-gpus", "2"]) and
          (.spec.containers[0].envFrom | length == 1) and
          (.spec.containers[1].envFrom == null)' "$T/out" >/dev/null; then
    ok "DRA: the ring check shares the claim, no GPU resource; only the claim's container is a GPU container"
else
    bad "DRA mutation" "$T/out"
fi
sed 's/claim-gpus: "2"/claim-gpus: "two"/' "$T/dra.yaml" >"$T/dra-bad.yaml"
mutate "$T/dra-bad.yaml"
has "a bad claim-gpus: a warning that says what to write" "$T/err" \
    'ncclguard: ncclguard.io/claim-gpus "two" is not a GPU count; pod left unchanged: write 1 to 1024'
sed '/annotations:/d' "$T/dra.yaml" >"$T/dra-noann.yaml"
{ cat "$POL"; printf 'dra:\n  claimTemplates:\n    two-gpus: 2\n'; } >"$T/dra-policy.yaml"
"$NCCLGUARD" mutate --policy "$T/dra-policy.yaml" "$T/dra-noann.yaml" >/dev/null 2>"$T/err"
has "DRA + policy dra.claimTemplates: patched for 2 GPUs" "$T/err" "Pod dra-train: patched (2 GPUs, rule default)"
printf 'apiVersion: ncclguard.io/v1alpha1\nkind: Policy\ndra:\n  claimTemplates:\n    two-gpus: 0\n  claimTemplate: {}\n' >"$T/dra-lint.yaml"
"$NCCLGUARD" policy lint "$T/dra-lint.yaml" >"$T/err" 2>&1
has "policy lint: dra.claimTemplates counts are checked" "$T/err" \
    "dra-lint.yaml:5:15: error: dra.claimTemplates value must be between 1 and 1024, got 0"
has "policy lint: unknown dra keys get did-you-mean" "$T/err" 'did you mean "claimTemplates"'

# --- -o review with several templates: JSON lines -------------------------------
mutate -o review "$C/16-training-operator-pytorchjob-mnist-nccl.yaml"
n=$(wc -l <"$T/out")
if [ "$n" -ge 2 ] && jq -e -s 'all(.kind == "AdmissionReview")' "$T/out" >/dev/null &&
    while IFS= read -r l; do printf '%s' "$l" | jq -e . >/dev/null || exit 1; done <"$T/out"; then
    ok "-o review: one AdmissionReview per line ($n lines)"
else
    bad "-o review lines" "$T/out"
fi
has "-o review: says so when there are several" "$T/err" "reviews, one per line; post each on its own"

# --- refused annotations say how to fix them, even under a long rule name --
cat >"$T/strict-policy.yaml" <<'EOY'
apiVersion: ncclguard.io/v1alpha1
kind: Policy
rules:
  - name: a-rule-name-that-is-forty-characters-xx
    match: {namespaces: [ml]}
    settings:
      shm: {enabled: false}
      ringCheck: {allowOptOut: false}
      debug: {allowAnnotation: false}
  - name: no-check-rule-name-of-forty-characters-x
    match: {namespaces: [lab]}
    settings:
      ringCheck: {enabled: false}
EOY
cat >"$T/annotated.yaml" <<'EOY'
apiVersion: v1
kind: Pod
metadata:
  name: a
  namespace: ml
  annotations:
    ncclguard.io/shm-size: 8Gi
    ncclguard.io/ring-check: "false"
    ncclguard.io/debug: "true"
spec:
  containers:
    - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
EOY
"$NCCLGUARD" mutate --policy "$T/strict-policy.yaml" -o patch "$T/annotated.yaml" >"$T/out" 2>/dev/null
sed 's/namespace: ml/namespace: lab/; s/"false"/"true"/' "$T/annotated.yaml" >"$T/annotated2.yaml"
"$NCCLGUARD" mutate --policy "$T/strict-policy.yaml" -o patch "$T/annotated2.yaml" >"$T/out2" 2>/dev/null
if jq -e -s '[.[][].warnings[]] as $w | ($w | length == 4) and
        ($w | all(endswith("; remove the annotation") and (length <= 120)))' \
    "$T/out" "$T/out2" >/dev/null; then
    ok "refused shm-size, opt-out, debug and ring-check annotations end with the fix, within 120 bytes"
else
    bad "refused annotation warnings" "$T/out"
    cat "$T/out2"
fi

# --- a tab in a manifest's indentation -----------------------------------------
printf 'apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n' >"$T/tab.yaml"
mutate "$T/tab.yaml"
[ "$rc" = 1 ] && ok "a tab-indented manifest is unreadable (exit 1)" || bad "tab manifest exit $rc" "$T/err"
has "the tab is named at its line:col, in plain words" "$T/err" "$T/tab.yaml:4:1: tabs cannot indent YAML; use spaces"

# --- the ring check's numbered name -------------------------------------------
# A pod that already has a container called ncclguard-ringcheck gets the
# check as ncclguard-ringcheck-2; `policy test` must know it (ringCheck:
# true), and an init container that only looks numbered is not one.
cat >"$T/clash.test.yaml" <<EOY
apiVersion: ncclguard.io/v1alpha1
kind: PolicyTest
policy: $PWD/$POL
cases:
  - name: the check is injected as ncclguard-ringcheck-2
    namespace: ml
    inputFile: $PWD/$C/94-own-ringcheck-name-clash.yaml
    expect: {status: patched, ringCheck: true}
  - name: a numbered init container without --expect-gpus is not a check
    namespace: ml
    input:
      apiVersion: v1
      kind: Pod
      metadata: {name: p, annotations: {ncclguard.io/ring-check: "false"}}
      spec:
        initContainers:
          - {name: ncclguard-ringcheck-2, image: x, args: [--mode, quick]}
        containers:
          - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 4}}}
    expect: {ringCheck: false}
EOY
"$NCCLGUARD" policy test "$T/clash.test.yaml" >"$T/out" 2>&1
rc=$?
[ "$rc" = 0 ] && [ "$(grep -c '^PASS' "$T/out")" = 2 ] &&
    ok "policy test: ringCheck knows ncclguard-ringcheck-2 as the check, and only by the core's rule" ||
    bad "policy test on the ring check name clash (exit $rc)" "$T/out"
mutate -o json "$C/94-own-ringcheck-name-clash.yaml"
if jq -e '[.spec.initContainers[].name] == ["ncclguard-ringcheck-2"] and
        ([.spec.containers[].name] | index("ncclguard-ringcheck") != null)' "$T/out" >/dev/null; then
    ok "a pod with its own ncclguard-ringcheck container gets the check as ncclguard-ringcheck-2"
else
    bad "ring check name clash: init containers" "$T/out"
fi

echo "tests/mutate: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
