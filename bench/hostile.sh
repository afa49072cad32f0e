#!/usr/bin/env bash
# Hostile reviews against the cost rule (every review costs time linear in
# its size): builds two AdmissionReviews of about 4 MiB and times them with
# ncclguard-microbench, failing when one takes longer than HOSTILE_MAX_MS
# (default 100 ms) per review.
#
#   taken-names.json  a GPU pod with 90,000 volumes, among them the run
#                     ncclguard-shm, ncclguard-shm-2 ... ncclguard-shm-1000
#                     and the same runs for the other names the webhook
#                     picks, so that every unique-name search walks them;
#   zero-volumes.json a GPU pod whose volumes are [0,0,...] (2 million
#                     entries that are not objects);
#   deep-refusal.json a review carrying 1,000 nested levels of 2,000 zeros
#                     each with an integer beyond 64 bits at the bottom: it
#                     is refused (400), and the decoder must not rescan the
#                     nest once per level to say where.
#
#   MICROBENCH=build/bench/ncclguard-microbench bench/hostile.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
MICROBENCH=${MICROBENCH:-$root/build/bench/ncclguard-microbench}
POLICY=${POLICY:-$root/policy/default.yaml}
HOSTILE_MAX_MS=${HOSTILE_MAX_MS:-100}
out=${BENCH_OUT:-$root/build/bench}
mkdir -p "$out"

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]

def review(volumes, ctr_extra=None):
    c = {"name": "train", "image": "pytorch",
         "resources": {"limits": {"nvidia.com/gpu": "8"}}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "hostile", "namespace": "ml"},
           "spec": {"containers": [c], "volumes": volumes}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "0f0e0d0c-0b0a-0908-0706-050403020100",
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1",
                                     "resource": "pods"},
                        "namespace": "ml", "operation": "CREATE",
                        "object": pod}}

vols = []
for base in ("ncclguard-shm", "ncclguard-run", "ncclguard-watchdog"):
    vols.append({"name": base, "configMap": {"name": "x"}})
    vols += [{"name": "%s-%d" % (base, i), "configMap": {"name": "x"}}
             for i in range(2, 1000)]
i = 0
while len(vols) < 90000:
    vols.append({"name": "ncclguard-shm-x%d" % i, "emptyDir": {}})
    i += 1
with open(out + "/taken-names.json", "w") as f:
    json.dump(review(vols), f, separators=(",", ":"))
with open(out + "/zero-volumes.json", "w") as f:
    f.write(json.dumps(review([]), separators=(",", ":"))
            .replace('"volumes":[]', '"volumes":[' + ",".join(["0"] * 2000000) + "]"))
nest = ",".join(["0"] * 2000)
deep = "[[" + nest + "]," 
with open(out + "/deep-refusal.json", "w") as f:
    text = json.dumps(review([]), separators=(",", ":"))
    f.write(text[:-1] + ',"x":' + deep * 1000 + "18446744073709551615"
            + "]" * 1000 + "}")
PY

fail=0
for r in taken-names zero-volumes deep-refusal; do
    line=$(MICROBENCH_ITERS=${HOSTILE_ITERS:-5} "$MICROBENCH" "$POLICY" "$out/$r.json")
    echo "$line"
    ns=$(printf '%s\n' "$line" | sed -n 's/.*review_handle *\([0-9.]*\) ns\/op.*/\1/p')
    ms=$(awk -v ns="$ns" 'BEGIN { printf "%.1f", ns / 1e6 }')
    if awk -v ms="$ms" -v max="$HOSTILE_MAX_MS" 'BEGIN { exit !(ms < max) }'; then
        echo "hostile: $r.json $(stat -c %s "$out/$r.json") B answered in $ms ms (< $HOSTILE_MAX_MS ms)"
    else
        echo "hostile: FAIL: $r.json took $ms ms per review, over $HOSTILE_MAX_MS ms" >&2
        fail=1
    fi
done
exit $fail
