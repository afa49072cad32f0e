#!/usr/bin/env bash
# Corpus check: every upstream GPU manifest goes through `ncclguard mutate`;
# every pod (template) in it is checked with kubectl the way the apiserver
# would treat the webhook's answer.
#
#   NCCLGUARD=build/ncclguard tests/corpus/check.sh [MANIFEST...]
#
# For each pod template: the patch applies (`kubectl patch --local
# --type=json`), the result decodes as a typed Pod (`kubectl set env
# --local`), every GPU container has the profile first in envFrom and
# exactly one /dev/shm mount, non-GPU pods are untouched, and a second pass
# gives an empty patch. When tests/integration/lib.sh can start a server,
# the same AdmissionReviews also go through `ncclguard serve`, which must
# answer with the very patch the dry run computed, byte for byte (both
# call the admission core's review_handle(); this proves they agree).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
NCCLGUARD=${NCCLGUARD:-$root/build/ncclguard}
POLICY=${POLICY:-$root/policy/default.yaml}
# Resource names and profile of the policy under test (the defaults of
# policy/default.yaml); used to find GPU containers independently of the
# webhook's own count.
GPU_RESOURCES=${GPU_RESOURCES:-nvidia.com/gpu}
PROFILE=${PROFILE:-nccl-production-profile}

for tool in jq kubectl; do
    command -v "$tool" >/dev/null || { echo "corpus: $tool not found" >&2; exit 1; }
done

work=$(mktemp -d)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# The upstream corpus, and the examples users are pointed at.
if [ $# -gt 0 ]; then
    manifests=("$@")
else
    manifests=("$root"/tests/data/corpus/manifests/*.yaml
        "$root"/deploy/examples/*.yaml "$root"/deploy/examples/*.json)
fi

fail=0
failf() { echo "corpus: FAIL: $*" >&2; fail=1; }

mut() { "$NCCLGUARD" mutate -q --policy "$POLICY" "$@"; }

# The command line: exit statuses and where errors point.
rc=0
out=$(printf 'kind: Pod\nspec:\n  containers: [\n' |
    "$NCCLGUARD" mutate --policy "$POLICY" - 2>&1) || rc=$?
[ $rc -eq 1 ] || failf "unreadable input: exit $rc, want 1"
case $out in *"<stdin>:4:1: "*) ;; *) failf "unreadable input: no <stdin>:4:1 in: $out" ;; esac
rc=0
"$NCCLGUARD" mutate --policy "$POLICY" >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || failf "no FILE: exit $rc, want 2"
rc=0
"$NCCLGUARD" mutate --policy "$POLICY" -o toml - </dev/null >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || failf "-o toml: exit $rc, want 2"
rc=0
"$NCCLGUARD" mutate --policy "$work/none.yaml" - </dev/null >/dev/null 2>&1 || rc=$?
[ $rc -eq 1 ] || failf "missing policy: exit $rc, want 1"
# A duplicate key is a warning with line:col, not an error: exit 0.
rc=0
out=$("$NCCLGUARD" mutate --policy "$POLICY" -o patch \
    "$root/tests/data/corpus/manifests/29-gke-rdma-nccl-test-pods.yaml" 2>&1 >/dev/null) || rc=$?
[ $rc -eq 0 ] || failf "duplicate key: exit $rc, want 0 (a warning)"
case $out in *"29-gke-rdma-nccl-test-pods.yaml:81:7: duplicate key \"resources\""*) ;;
*) failf "duplicate key: no line:col warning in: $(printf '%s' "$out" | head -c 300)" ;; esac
rc=0
out=$(printf '' | "$NCCLGUARD" mutate --policy "$POLICY" -o json - 2>&1) || rc=$?
[ $rc -eq 0 ] || failf "empty input: exit $rc, want 0"

# --webhook-namespace (default $POD_NAMESPACE): the webhook's own namespace
# is skipped, as the server skips it; the flag wins over the variable.
own_pod='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"gpu-system"},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"nvidia.com/gpu":1}}}]}}'
own() { # own WANT WHAT [ENV...] -- [FLAGS...]
    local want=$1 what=$2 envs=() got
    shift 2
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    got=$(printf '%s' "$own_pod" | env -u POD_NAMESPACE "${envs[@]}" \
        "$NCCLGUARD" mutate -q --policy "$POLICY" -o patch "$@" - |
        jq -r '.[0].result') || got="(mutate failed)"
    [ "$got" = "$want" ] || failf "$what: result $got, want $want"
}
own skipped "--webhook-namespace names the pod's namespace" -- --webhook-namespace gpu-system
own patched "--webhook-namespace names another namespace" -- --webhook-namespace ncclguard
own skipped "POD_NAMESPACE names the pod's namespace" POD_NAMESPACE=gpu-system --
own patched "no webhook namespace at all" --
own patched "--webhook-namespace wins over POD_NAMESPACE" POD_NAMESPACE=gpu-system -- \
    --webhook-namespace ncclguard

# 0. Each example says what the default policy does to its pods
#    ("# ncclguard-expect: patched,not_gpu"); JSON examples are patched.
for m in "${manifests[@]}"; do
    case "$m" in */deploy/examples/*) ;; *) continue ;; esac
    want=$(sed -n 's/^# ncclguard-expect: *//p' "$m")
    [ -n "$want" ] || want=patched
    [ "$want" != none ] || want="" # no pod in it (a NetworkPolicy)
    got=$(mut -o patch "$m" 2>/dev/null | jq -r '[.[].result] | join(",")') || got="(mutate failed)"
    [ "$got" = "$want" ] || failf "$(basename "$m"): results $got, expected $want"
done

# The NetworkPolicy example opens the rendezvous port of the policy under
# test between the pods it selects.
np=$root/deploy/examples/multinode-networkpolicy.yaml
if [ -f "$np" ]; then
    port=$(sed -n 's/^ *rendezvousPort: *\([0-9]*\).*/\1/p' "$POLICY" | head -n 1)
    [ -n "$port" ] || port=29450
    "$NCCLGUARD" mutate -q --policy "$POLICY" -o json "$np" 2>/dev/null |
        jq -e --argjson port "$port" '.kind == "NetworkPolicy" and
            (.spec.podSelector.matchLabels as $sel
             | [.spec.ingress[] | select(.from[0].podSelector.matchLabels == $sel)
                | .ports[] | select(.protocol == "TCP" and .port == $port)]
             | length == 1)' >/dev/null ||
        failf "$(basename "$np"): no TCP $port ingress between the pods it selects"
fi

# 1. Every manifest: the dry run succeeds and writes YAML that reads back;
#    the mutated manifest needs nothing more (second pass on templates).
n_files=0
for m in "${manifests[@]}"; do
    b=$(basename "$m")
    n_files=$((n_files + 1))
    if ! mut "$m" >"$work/$b.out.yaml" 2>"$work/$b.err"; then
        failf "$b: ncclguard mutate failed: $(head -c 300 "$work/$b.err")"
        continue
    fi
    if ! mut -o patch "$work/$b.out.yaml" >"$work/$b.again.json" 2>"$work/$b.err2"; then
        failf "$b: mutated YAML does not read back: $(head -c 300 "$work/$b.err2")"
        continue
    fi
    # A pod derived from an object without a template (KServe, Trainer)
    # is not written back into it, so it is patched again by design.
    bad=$(jq -r '.[] | select((.patch | length) > 0 and .derivedPod == null) | .pointer' "$work/$b.again.json")
    [ -z "$bad" ] || failf "$b: second pass on the mutated manifest patches $bad"
    mut -o review "$m" >>"$work/reviews.jsonl" 2>/dev/null ||
        failf "$b: ncclguard mutate -o review failed"
done

# 2. The patch for every pod, from the dry run on the reviews (one call),
#    and the same patches as the bytes the core wrote (one line per pod).
mut -o patch "$work/reviews.jsonl" >"$work/patches.json" 2>/dev/null ||
    failf "ncclguard mutate -o patch on the reviews failed"
mut -o jsonpatch "$work/reviews.jsonl" >"$work/patches.txt" 2>/dev/null ||
    failf "ncclguard mutate -o jsonpatch on the reviews failed"
n_pods=$(wc -l <"$work/reviews.jsonl")
[ "$(jq length "$work/patches.json")" -eq "$n_pods" ] ||
    failf "expected $n_pods patch entries, got $(jq length "$work/patches.json")"

# 3. Through the real server: the same reviews over HTTPS, answered with
#    the dry run's patch (one curl process, one kept-alive connection).
if [ -f "$root/tests/integration/lib.sh" ] &&
    grep -q '^ng_serve_start' "$root/tests/integration/lib.sh"; then
    # shellcheck source=/dev/null
    . "$root/tests/integration/lib.sh"
    NG_TMP=$work/server
    mkdir -p "$NG_TMP" "$work/sreq" "$work/sresp"
    ng_make_ca "$NG_TMP" && ng_make_cert "$NG_TMP" tls 1 ||
        failf "cannot make a test certificate"
    if ng_serve_start --cert "$NG_TMP/tls.crt" --key "$NG_TMP/tls.key" \
        --policy "$POLICY"; then
        server_pid=$NG_PID
        split -l 1 -d -a 4 "$work/reviews.jsonl" "$work/sreq/r"
        args=()
        for f in "$work"/sreq/r*; do
            args+=(--next -sS --cacert "$NG_TMP/ca.crt" -H 'Content-Type: application/json'
                --data-binary "@$f" -o "$work/sresp/$(basename "$f")" "$NG_URL/mutate")
        done
        curl "${args[@]:1}" || failf "curl to the server failed"
        # Every answer (one jq call for all): the uid echoed, and the dry
        # run's patch or none.
        jq -c '[.request.uid, .request.object.metadata.name]' \
            "$work/reviews.jsonl" >"$work/uids.txt"
        jq -c '.[].patch' "$work/patches.json" >"$work/want.txt"
        jq -c '[.response.uid, (.response.patch // "" |
                if . == "" then [] else (@base64d | fromjson) end)]' \
            "$work"/sresp/r* >"$work/got.txt" 2>"$work/jqerr" ||
            failf "server answers are not JSON: $(head -c 300 "$work/jqerr")"
        jq -n -r --slurpfile u "$work/uids.txt" --slurpfile w "$work/want.txt" \
            --slurpfile g "$work/got.txt" '
            range(0; $u | length) as $i
            | if ($g[$i] // null) == null then "pod \($i): no answer"
              elif $g[$i][0] != $u[$i][0] then "pod \($i) (\($u[$i][1])): uid not echoed"
              elif $g[$i][1] != $w[$i] then "pod \($i) (\($u[$i][1])): server patch differs from the dry run'"'"'s"
              else empty end' >"$work/server-verdicts.txt"
        while IFS= read -r line; do failf "$line"; done <"$work/server-verdicts.txt"
        # serve == mutate, byte for byte: every answer's patch, base64
        # decoded by coreutils (not re-read as JSON), against the dry
        # run's -o jsonpatch line for the same pod; no patch is "".
        jq -r '.response.patch // ""' "$work"/sresp/r* >"$work/served.b64"
        : >"$work/served.txt"
        while IFS= read -r b64; do
            if [ -n "$b64" ]; then
                printf '%s' "$b64" | base64 -d >>"$work/served.txt" ||
                    failf "server patch is not base64: $(printf '%s' "$b64" | head -c 80)"
            fi
            echo >>"$work/served.txt"
        done <"$work/served.b64"
        jq -r '.request.object.metadata.name' "$work/reviews.jsonl" >"$work/names.txt"
        n_same=0
        exec 3<"$work/patches.txt" 4<"$work/served.txt" 5<"$work/names.txt"
        i=0
        while IFS= read -r pname <&5; do
            IFS= read -r mine <&3 || mine="(no line from mutate -o jsonpatch)"
            IFS= read -r theirs <&4 || theirs="(no answer)"
            if [ "$mine" = "$theirs" ]; then
                n_same=$((n_same + 1))
            else
                at=$(cmp <(printf '%s' "$mine") <(printf '%s' "$theirs") 2>&1 |
                    sed -n 's/.* byte \([0-9]*\).*/\1/p' || true)
                at=${at:-1}
                from=$((at > 40 ? at - 40 : 0))
                failf "pod $i ($pname): server patch bytes differ from mutate -o jsonpatch at byte $at: mutate ...${mine:$from:80}... serve ...${theirs:$from:80}..."
            fi
            i=$((i + 1))
        done
        exec 3<&- 4<&- 5<&-
        cmp -s "$work/patches.txt" "$work/served.txt" ||
            failf "mutate -o jsonpatch and the server's decoded patches differ (cmp)"
        i=$(wc -l <"$work/got.txt")
        [ "$i" -eq "$n_pods" ] || failf "server answered $i of $n_pods reviews"
        ng_serve_stop
        [ "$NG_EXIT" = 0 ] || failf "server exit status $NG_EXIT after SIGTERM"
        server_pid=""
        via_server="yes ($i reviews, $n_same patches byte-identical)"
    else
        failf "ncclguard serve did not start"
        via_server=no
    fi
else
    echo "SKIP corpus through ncclguard serve (tests/integration/lib.sh has no ng_serve_start)"
    via_server="no (skipped)"
fi

# 4. Apply every patch with kubectl, the way the apiserver applies it.
mkdir -p "$work/pods" "$work/patched" "$work/ops"
jq -c '.request.object' "$work/reviews.jsonl" | split -l 1 -d -a 4 - "$work/pods/p"
jq -c '.[].patch' "$work/patches.json" | split -l 1 -d -a 4 - "$work/ops/p"
jq -r '.[] | "\(.result) \(.name)"' "$work/patches.json" >"$work/results.txt"
for pod in "$work"/pods/p*; do
    b=$(basename "$pod")
    out="$work/patched/$b.json"
    if [ "$(cat "$work/ops/$b")" = "[]" ]; then
        cp "$pod" "$out"
    elif ! kubectl patch --local --type=json -f "$pod" -p "$(cat "$work/ops/$b")" \
        -o json >"$out" 2>"$work/kerr"; then
        failf "pod $b ($(sed -n "$((10#${b#p} + 1))p" "$work/results.txt")): kubectl patch: $(head -c 300 "$work/kerr")"
        cp "$pod" "$out"
    fi
done

# 5. Every patched pod decodes as a typed Pod (one kubectl call).
if ! kubectl set env --local -f "$work/patched" X=1 -o json >"$work/typed.json" 2>"$work/kerr"; then
    failf "kubectl set env: $(head -c 500 "$work/kerr")"
fi

# 6. Per pod (one jq call for all): GPU containers carry the profile first
#    and one /dev/shm mount; pods left alone (no GPU, skipped, bad count)
#    are untouched, and a pod with a whole positive GPU count is never
#    called "not_gpu".
jq -s . "$work"/pods/p* >"$work/orig.json"
jq -s . "$work"/patched/*.json >"$work/new.json"
# The verdict per pod, as a jq program over $origs, $news and $entries
# (three slurped arrays), $res and $profile; run on the corpus below and
# on hand-made pods first, so that the check itself is tested.
# ringcheck_ours is the admission core's rule for its own ring check
# (ctr_is_ringcheck() in admission/plan_names.c): an init container named
# ncclguard-ringcheck, or ncclguard-ringcheck-N (the name it takes when
# the pod already has a container called ncclguard-ringcheck) whose first
# argument is --expect-gpus. Only that container is spared the GPU rules.
verdict_jq='
    def gpus: ((.resources.limits // {}) as $l | (.resources.requests // {}) as $r
        | [$res[] | ($l[.] // $r[.] // 0) | tostring | tonumber? // 0] | add);
    def shm: [(.volumeMounts // [])[] | select(.mountPath | sub("/+$"; "") == "/dev/shm")] | length;
    def ringcheck_ours: (.name // "") as $n
        | $n == "ncclguard-ringcheck"
          or (($n | test("^ncclguard-ringcheck-[1-9][0-9]*$"))
              and ((.args // [])[0] == "--expect-gpus"));
    def verdict($orig; $new; $result):
        [($orig.spec.containers // [])[], ($orig.spec.initContainers // [])[] | gpus] as $counts
        | ($counts | add // 0) as $total
        | ([$counts[] | select(. < 0 or . != floor)] | length == 0) as $whole
        | if ($orig.spec.os.name // "") == "windows" and $orig != $new then
              "Windows pod changed (\($result)): NCCL, tmpfs /dev/shm and the Linux ring check do not apply"
          elif $result == "patched" or $result == "unchanged" then
              [($new.spec.containers // [])[],
               (($new.spec.initContainers // [])[] | select(ringcheck_ours | not))
               | select(gpus > 0)
               | if (.envFrom[0].configMapRef.name // "") != $profile then
                     "container \(.name): profile not first in envFrom"
                 elif shm != 1 then
                     "container \(.name): \(shm) /dev/shm mounts"
                 else empty end] | join("; ")
          elif $orig != $new then "pod left alone (\($result)) but changed"
          elif $result == "not_gpu" and $whole and $total > 0 then
              "\($total) GPUs but not mutated"
          else "" end;
    range(0; $origs[0] | length) as $i
    | verdict($origs[0][$i]; $news[0][$i]; $entries[0][$i].result) as $v
    | select($v != "")
    | "pod \($i) (\($origs[0][$i].metadata.name), \($entries[0][$i].result)): \($v)"
    '
verdicts() { # verdicts ORIGS NEWS ENTRIES: one line per pod that fails
    jq -n -r --slurpfile origs "$1" --slurpfile news "$2" --slurpfile entries "$3" \
        --argjson res "$res_json" --arg profile "$PROFILE" "$verdict_jq"
}
res_json=$(printf '%s' "$GPU_RESOURCES" | jq -R 'split(",")')

# The verdict on hand-made pods: the injected ncclguard-ringcheck-2 (which
# here lacks the profile) is spared; a user's container called
# ncclguard-ringcheck, or an init container that only looks numbered,
# is held to the GPU rules.
jq -n --arg r "${GPU_RESOURCES%%,*}" '
    def gpu($n): {resources: {limits: {($r): $n}}};
    {metadata: {name: "self"}, spec: {containers: [{name: "t"} + gpu(4),
        {name: "ncclguard-ringcheck"} + gpu(2)]}} as $orig
    | [$orig, $orig, $orig]' >"$work/self-orig.json"
jq -n --arg p "$PROFILE" --arg r "${GPU_RESOURCES%%,*}" '
    def gpu($n): {resources: {limits: {($r): $n}}};
    def good($name; $n): {name: $name, envFrom: [{configMapRef: {name: $p}}],
        volumeMounts: [{name: "shm", mountPath: "/dev/shm"}]} + gpu($n);
    [{metadata: {name: "ours"}, spec: {containers: [good("t"; 4), good("ncclguard-ringcheck"; 2)],
        initContainers: [{name: "ncclguard-ringcheck-2", args: ["--expect-gpus", "6"]} + gpu(6)]}},
     {metadata: {name: "user"}, spec: {containers: [good("t"; 4), {name: "ncclguard-ringcheck"} + gpu(2)],
        initContainers: [{name: "ncclguard-ringcheck-2", args: ["--expect-gpus", "6"]} + gpu(6)]}},
     {metadata: {name: "lookalike"}, spec: {containers: [good("t"; 4), good("ncclguard-ringcheck"; 2)],
        initContainers: [{name: "ncclguard-ringcheck-2", args: ["--mode", "quick"]} + gpu(6)]}}]
    ' >"$work/self-new.json"
echo '[{"result":"patched"},{"result":"patched"},{"result":"patched"}]' >"$work/self-entries.json"
verdicts "$work/self-orig.json" "$work/self-new.json" "$work/self-entries.json" >"$work/self-verdicts.txt"
printf '%s\n' \
    "pod 1 (self, patched): container ncclguard-ringcheck: profile not first in envFrom" \
    "pod 2 (self, patched): container ncclguard-ringcheck-2: profile not first in envFrom" |
    diff -u - "$work/self-verdicts.txt" >"$work/self-diff.txt" ||
    failf "the corpus verdict does not know the webhook's ring check by the core's rule: $(cat "$work/self-diff.txt")"

verdicts "$work/orig.json" "$work/new.json" "$work/patches.json" >"$work/verdicts.txt"
# A manifest may name a known product bug that its pod exposes:
#   # ncclguard-known-bug: POD-NAME: TEXT OF THE VERDICT
# Such a verdict is reported as XFAIL instead of failing; a marker that
# matches no verdict fails, so that a fixed bug has its marker removed.
grep -h '^# ncclguard-known-bug: ' "${manifests[@]}" 2>/dev/null |
    sed 's/^# ncclguard-known-bug: //' >"$work/known.txt" || true
: >"$work/known-hit.txt"
while IFS= read -r line; do
    known=""
    while IFS= read -r k; do
        kpod=${k%%: *}
        ktext=${k#*: }
        case $line in *"($kpod, "*"$ktext"*) known=$k ;; esac
    done <"$work/known.txt"
    if [ -n "$known" ]; then
        echo "XFAIL corpus: $line (known product bug, marked in its manifest)"
        echo "$known" >>"$work/known-hit.txt"
    else
        failf "$line"
    fi
done <"$work/verdicts.txt"
while IFS= read -r k; do
    grep -qxF -- "$k" "$work/known-hit.txt" ||
        failf "known-bug marker '$k' matches no failure any more: remove it from its manifest"
done <"$work/known.txt"
[ "$(jq length "$work/orig.json")" -eq "$n_pods" ] ||
    failf "checked $(jq length "$work/orig.json") pods, expected $n_pods"

# 6b. Least privilege (issue 23): the ring check never gets a secret. No
#     secretKeyRef, resourceFieldRef or envFrom secretRef in an injected
#     ncclguard-ringcheck, and every plain or ConfigMap variable it gets is
#     NCCL's, CUDA's, PyTorch's NCCL one, a membership variable, or one a
#     copied $(NAME) needs (the pods in the corpus need none other).
jq -r '
    def ours: (.name // "") | test("^ncclguard-ringcheck(-[1-9][0-9]*)?$");
    .metadata.name as $pod
    | (.spec.initContainers // [])[] | select(ours)
    | ((.env // [])[]
       | select((.valueFrom.secretKeyRef // .valueFrom.resourceFieldRef) != null
                or ((.valueFrom.fieldRef == null)
                    and (.name | test("^(NCCL_|CUDA_|TORCH_NCCL_|LWS_|PET_|MASTER_|WORLD_SIZE$|RANK$|JOB_COMPLETION_INDEX$|VC_TASK_INDEX$|POD_IP$|NCCLGUARD_)") | not)))
       | "pod \($pod): ring check gets env \(.name) (\(.valueFrom // {} | keys | join(",")))"),
      ((.envFrom // [])[] | select(.secretRef != null)
       | "pod \($pod): ring check gets envFrom secretRef \(.secretRef.name)")
    ' "$work"/patched/*.json >"$work/leaks.txt"
while IFS= read -r line; do failf "least privilege: $line"; done <"$work/leaks.txt"
n_secret_pods=$(jq -s '[.[] | select([.. | objects | select(has("secretKeyRef") or has("secretRef"))] | length > 0)] | length' "$work"/pods/p*)

# 7. Second pass: the patched pods need nothing more (one call).
jq -c . "$work"/patched/*.json >"$work/patched.jsonl"
if mut -o patch "$work/patched.jsonl" >"$work/second.json" 2>/dev/null; then
    bad=$(jq -r '.[] | select((.patch | length) > 0) | "\(.name): \(.patch | map(.path) | join(" "))"' "$work/second.json")
    [ -z "$bad" ] || failf "second pass patches again: $bad"
else
    failf "ncclguard mutate on the patched pods failed"
fi

# 8. Multi-node: every LeaderWorkerSet, JobSet, TrainJob and PyTorchJob
#    manifest (and the Trainer runtimes) says whether its pods got the
#    multi-node check; every other manifest's pods stay single-pod. One
#    word per manifest for its GPU pods with a ring check: multi, single,
#    or none (no pod gets a check: no GPU count, one GPU, no template).
n_multi=0
multinode_expect() {
    case $1 in
    09-instaslice-kueue-pytorchjob-mig.yaml) echo none ;; # MIG slices only
    10-lws-*.yaml | 11-lws-*.yaml | 12-lws-*.yaml | 13-gke-lws-*.yaml) echo multi ;;
    14-llm-d-wide-ep-decode-lws.yaml) echo multi ;;
    # PyTorchJob: no multi-node check (its master's name resolves only
    # once the master is Ready); these pods have one GPU, so no check.
    16-training-operator-pytorchjob-*.yaml | 17-training-operator-pytorchjob-*.yaml) echo none ;;
    20-aws-hyperpod-pytorchjob-elastic-imagenet.yaml) echo none ;; # no Master, 1 GPU
    50-jobset-dra-gpu-claim.yaml | 51-jobset-pytorch-resnet-cpu.yaml) echo none ;;
    52-trainer-trainjob-lammps-gpus.yaml) echo none ;; # the runtime holds the template
    53-trainer-torchtune-clustertrainingruntime.yaml) echo multi ;;
    pytorchjob.yaml) echo single ;; # its Master asks for no GPU
    *) echo "" ;;
    esac
}
for m in "${manifests[@]}"; do
    case "$m" in *.yaml) ;; *) continue ;; esac
    b=$(basename "$m")
    want=$(multinode_expect "$b")
    if [ -z "$want" ] && grep -qE '^kind: *(LeaderWorkerSet|JobSet|TrainJob|PyTorchJob|ClusterTrainingRuntime|TrainingRuntime) *$' "$m"; then
        failf "$b: a job operator's manifest without a multi-node expectation in tests/corpus/check.sh"
        continue
    fi
    if ! mut -o patch "$m" >"$work/$b.mn.json" 2>/dev/null; then
        failf "$b: ncclguard mutate -o patch failed"
        continue
    fi
    got=$(jq -r '[.[] | select(.injected | index("ringcheck"))
                 | if .multiNode then "multi" else "single" end] | unique
                 | if length == 0 then "none" else join(",") end' "$work/$b.mn.json")
    [ -n "$want" ] || want=$(printf '%s' "$got" | sed 's/multi/single/')
    if [ "$got" != "$want" ]; then
        failf "$b: ring check $got, expected $want: $(jq -r '[.[].ringCheck] | unique | join("; ")' "$work/$b.mn.json" | head -c 300)"
    fi
    # The summary says it: which operator, and that the check is on.
    jq -r '.[] | select(.multiNode) | .ringCheck' "$work/$b.mn.json" |
        { grep -v '^multi-node (.*), rendezvous port [0-9]*$' || true; } >"$work/mn-bad.txt"
    while IFS= read -r line; do failf "$b: multi-node summary \"$line\""; done <"$work/mn-bad.txt"
    if [ "$want" = multi ]; then n_multi=$((n_multi + 1)); fi
done

patched=$(jq '[.[] | select(.result == "patched")] | length' "$work/patches.json")
echo "corpus: $n_files manifests, $n_pods pod templates ($patched patched, $n_multi manifests with the multi-node check); via server: $via_server"
echo "corpus: least privilege: $n_secret_pods pod templates use secrets; $(wc -l <"$work/leaks.txt") leaks into the ring check"
if [ "$fail" -ne 0 ]; then
    echo "corpus: FAILED" >&2
    exit 1
fi
echo "corpus: all checks passed"
