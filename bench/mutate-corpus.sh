#!/usr/bin/env bash
# mutate-corpus.sh NCCLGUARD OUTDIR: `ncclguard mutate` with every policy of
# the tree over every input, as -o jsonpatch and -o yaml, each run's stdout,
# stderr and exit status kept in OUTDIR. Run it with the old binary and the
# new one into two folders and `diff -r` them: a change that must keep the
# patches byte-identical leaves no difference (bench/RESULTS.md, round 3:
# 34 policies x 76 inputs x 2 = 5,168 runs).
set -u
bin=${1:?usage: mutate-corpus.sh NCCLGUARD OUTDIR}
out=${2:?usage: mutate-corpus.sh NCCLGUARD OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root" || exit 1
# Policies that load and policies refused by design (tests/policy/): the
# refusals' messages and exit status are compared too.
pols=(policy/default.yaml policy/examples/inference-training.yaml
    policy/examples/rdma.yaml policy/examples/tiers.yaml
    deploy/base/policy.yaml tests/policy/*.yaml
    tests/fuzz/corpus/policy/default.yaml tests/fuzz/corpus/policy/rules.yaml
    tests/watchdog/policy.yaml deploy/components/node-health/policy.yaml)
ins=(tests/data/corpus/manifests/*.yaml bench/reviews/*.json
    policy/examples/inputs/*.yaml deploy/examples/*.yaml deploy/examples/*.json)
n=0
for p in "${pols[@]}"; do
    for i in "${ins[@]}"; do
        for f in jsonpatch yaml; do
            k=$(echo "$p-$i-$f" | tr '/' '_')
            "$bin" mutate --policy "$p" -o "$f" "$i" >"$out/$k.out" \
                2>"$out/$k.err"
            echo $? >"$out/$k.rc"
            n=$((n + 1))
        done
    done
done
echo "$n runs (${#pols[@]} policies x ${#ins[@]} inputs x 2) in $out"
