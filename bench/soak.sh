#!/usr/bin/env bash
# make soak: SOAK_REQUESTS (1,000,000) reviews mixing GPU, non-GPU and
# malformed bodies against one `ncclguard serve`, sampling its RSS every
# second. Passes when every answer has its expected status and RSS grows
# by less than 1 MiB between the end of the warm-up (the first 10% of the
# requests) and the end. Writes $BENCH_OUT/soak.md and soak-rss.tsv.
set -u
. "$(dirname "$0")/common.sh"

REQUESTS=${SOAK_REQUESTS:-1000000}
trap 'stop_server; [ -n "${sampler:-}" ] && kill "$sampler" 2>/dev/null' EXIT
make_certs "$work/tls" || exit 1
CAFILE=$work/tls/ca.crt
start_ncclguard --log-level error || exit 1

bad=$root/tests/bad-inputs
bodies=(
    "$root/bench/reviews/small.json:200"
    "$root/bench/reviews/medium.json:200"
    "$root/bench/reviews/nongpu.json:200"
    "$bad/huge-quantity-string.json:200"
    "$bad/truncated.json:400"
    "$bad/invalid-utf8.json:400"
    "$bad/wrong-review-kind.json:400"
    "$bad/nul-escape.json:400"
)
args=()
for b in "${bodies[@]}"; do args+=(--body "$b"); done

rss_log=$work/soak-rss.tsv
echo -e "seconds\trss_kib" >"$rss_log"
start=$(date +%s.%N)
(
    while kill -0 "$server_pid" 2>/dev/null; do
        echo -e "$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }')\t$(rss_kib "$server_pid")"
        sleep 1
    done
) >>"$rss_log" &
sampler=$!
rss_start=$(rss_kib "$server_pid")

out=$($PIN_LOAD "$LOADGEN" --port "$port" --cacert "$CAFILE" --conns 8 \
    --requests "$REQUESTS" "${args[@]}")
lg_rc=$?
elapsed=$(sed -n -E 's/.*elapsed_s=([0-9.]+).*/\1/p' <<<"$out")
rss_end=$(rss_kib "$server_pid")
hwm=$(rss_kib "$server_pid" VmHWM)
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
sampler=
# RSS after the warm-up: the first sample at or after 10% of the run.
rss_warm=$(awk -v t="$(awk -v e="$elapsed" 'BEGIN { print e / 10 }')" \
    'NR > 1 && $1 >= t { print $2; exit }' "$rss_log")
rss_warm=${rss_warm:-$rss_start}
growth=$((rss_end - rss_warm))
alive=$(http_get /healthz)
stop_server

verdict=PASS
[ "$lg_rc" -eq 0 ] || verdict="FAIL (unexpected statuses)"
[ "$growth" -lt 1024 ] || verdict="FAIL (RSS grew ${growth} KiB)"
[ "$alive" = 200 ] || verdict="FAIL (/healthz $alive after the soak)"
{
    echo "## make soak, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- $REQUESTS requests over 8 keep-alive connections, round-robin over: $(for b in "${bodies[@]}"; do basename "${b%:*}" | tr '\n' ' '; done)"
    echo '```'
    echo "$out"
    echo '```'
    echo "- RSS: $rss_start KiB at start, $rss_warm KiB after the warm-up (10%), $rss_end KiB at the end; peak $hwm KiB"
    echo "- growth after warm-up: $growth KiB (limit < 1024 KiB); /healthz afterwards: $alive"
    echo "- verdict: $verdict"
} | tee "$work/soak.md"
[ "$verdict" = PASS ]
