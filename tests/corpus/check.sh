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
# answer with the very patch the dry run computed.
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
out=$("$NCCLGUARD" mutate --policy "$POLICY" -o patch \
    "$root/tests/data/corpus/manifests/29-gke-rdma-nccl-test-pods.yaml" 2>&1 >/dev/null) || true
case $out in *"29-gke-rdma-nccl-test-pods.yaml:81:7: duplicate key \"resources\""*) ;;
*) failf "duplicate key: no line:col warning in: $(printf '%s' "$out" | head -c 300)" ;; esac
rc=0
out=$(printf '' | "$NCCLGUARD" mutate --policy "$POLICY" -o json - 2>&1) || rc=$?
[ $rc -eq 0 ] || failf "empty input: exit $rc, want 0"

# 0. Each example says what the default policy does to its pods
#    ("# ncclguard-expect: patched,not_gpu"); JSON examples are patched.
for m in "${manifests[@]}"; do
    case "$m" in */deploy/examples/*) ;; *) continue ;; esac
    want=$(sed -n 's/^# ncclguard-expect: *//p' "$m")
    [ -n "$want" ] || want=patched
    got=$(mut -o patch "$m" 2>/dev/null | jq -r '[.[].result] | join(",")') || got="(mutate failed)"
    [ "$got" = "$want" ] || failf "$(basename "$m"): results $got, expected $want"
done

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

# 2. The patch for every pod, from the dry run on the reviews (one call).
mut -o patch "$work/reviews.jsonl" >"$work/patches.json" 2>/dev/null ||
    failf "ncclguard mutate -o patch on the reviews failed"
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
        i=$(wc -l <"$work/got.txt")
        [ "$i" -eq "$n_pods" ] || failf "server answered $i of $n_pods reviews"
        ng_serve_stop
        [ "$NG_EXIT" = 0 ] || failf "server exit status $NG_EXIT after SIGTERM"
        server_pid=""
        via_server="yes ($i reviews)"
    else
        failf "ncclguard serve did not start"
        via_server=no
    fi
else
    via_server="no (tests/integration/lib.sh has no ng_serve_start)"
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
res_json=$(printf '%s' "$GPU_RESOURCES" | jq -R 'split(",")')
jq -n -r --slurpfile origs "$work/orig.json" --slurpfile news "$work/new.json" \
    --slurpfile entries "$work/patches.json" --argjson res "$res_json" \
    --arg profile "$PROFILE" '
    def gpus: ((.resources.limits // {}) as $l | (.resources.requests // {}) as $r
        | [$res[] | ($l[.] // $r[.] // 0) | tostring | tonumber? // 0] | add);
    def shm: [(.volumeMounts // [])[] | select(.mountPath | sub("/+$"; "") == "/dev/shm")] | length;
    def verdict($orig; $new; $result):
        [($orig.spec.containers // [])[], ($orig.spec.initContainers // [])[] | gpus] as $counts
        | ($counts | add // 0) as $total
        | ([$counts[] | select(. < 0 or . != floor)] | length == 0) as $whole
        | if $result == "patched" or $result == "unchanged" then
              [($new.spec.containers // [])[], ($new.spec.initContainers // [])[]
               | select(.name != "ncclguard-ringcheck") | select(gpus > 0)
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
    ' >"$work/verdicts.txt"
while IFS= read -r line; do failf "$line"; done <"$work/verdicts.txt"
[ "$(jq length "$work/orig.json")" -eq "$n_pods" ] ||
    failf "checked $(jq length "$work/orig.json") pods, expected $n_pods"

# 7. Second pass: the patched pods need nothing more (one call).
jq -c . "$work"/patched/*.json >"$work/patched.jsonl"
if mut -o patch "$work/patched.jsonl" >"$work/second.json" 2>/dev/null; then
    bad=$(jq -r '.[] | select((.patch | length) > 0) | "\(.name): \(.patch | map(.path) | join(" "))"' "$work/second.json")
    [ -z "$bad" ] || failf "second pass patches again: $bad"
else
    failf "ncclguard mutate on the patched pods failed"
fi

patched=$(jq '[.[] | select(.result == "patched")] | length' "$work/patches.json")
echo "corpus: $n_files manifests, $n_pods pod templates ($patched patched); via server: $via_server"
if [ "$fail" -ne 0 ]; then
    echo "corpus: FAILED" >&2
    exit 1
fi
echo "corpus: all checks passed"
