#!/usr/bin/env bash
# make bench: ncclguard serve against nginx (a static AdmissionReview over
# TLS, same certificate) in one run: wrk throughput and latency per review
# size, peak RSS, p99 at a fixed 1,000 req/s, /readyz time after exec, and
# the in-process micro-benchmark. Writes $BENCH_OUT/summary.md.
set -u
. "$(dirname "$0")/common.sh"

SECONDS_PER_RUN=${BENCH_SECONDS:-10}
CONNS=${BENCH_CONNS:-16}
REVIEWS=${BENCH_REVIEWS:-small medium large}
summary=$work/summary.md
trap 'stop_server' EXIT

make_certs "$work/tls" || { echo "bench: cannot create certificates" >&2; exit 1; }
CAFILE=$work/tls/ca.crt

# wrk, pinned, after a short warm-up; prints the wrk_result line.
wrk_run() {
    local body=$1
    BODY=$body $PIN_LOAD wrk -t1 -c"$CONNS" -d2s -s "$root/bench/wrk.lua" \
        "https://127.0.0.1:$port/mutate" >/dev/null 2>&1
    BODY=$body $PIN_LOAD wrk -t1 -c"$CONNS" -d"${SECONDS_PER_RUN}s" \
        --latency -s "$root/bench/wrk.lua" "https://127.0.0.1:$port/mutate" \
        2>&1 | grep '^wrk_result'
}

field() { sed -n -E "s/(^|.* )$1=([^ ]*).*/\2/p" <<<"$2"; }
ms() { awk -v u="$1" 'BEGIN { printf "%.3f", u / 1000 }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

{
    echo "## make bench, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "- kernel $(uname -r); $(nginx -v 2>&1 | sed 's/.*: //'); $(wrk --version 2>&1 | head -1 | cut -d' ' -f1,2)"
    echo "- pinning: server '${PIN_SERVER:-none}', load generator '${PIN_LOAD:-none}'; wrk -t1 -c$CONNS, ${SECONDS_PER_RUN}s per run after a 2s warm-up"
    echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "### Throughput and latency (wrk, HTTPS keep-alive)"
    echo
    echo "| review | bytes | server | req/s | ratio to nginx | p50 ms | p99 ms | p99.9 ms | errors | peak RSS MiB |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$summary"

rm -f "$work"/resp-*.json
for r in $REVIEWS; do
    body=$root/bench/reviews/$r.json
    size=$(stat -c %s "$body")
    start_ncclguard || exit 1
    # nginx serves exactly what ncclguard answers for this review.
    curl -sS --cacert "$CAFILE" -H 'Content-Type: application/json' \
        --data-binary @"$body" -o "$work/resp-$r.json" \
        "https://127.0.0.1:$port/mutate"
    ng=$(wrk_run "$body")
    ng_rss=$(rss_kib "$server_pid" VmHWM)
    stop_server
    start_nginx "$work/resp-$r.json" || exit 1
    nx=$(wrk_run "$body")
    nx_rss=$(rss_kib "$(worker_pid "$server_pid")" VmHWM)
    stop_server
    ratio=$(awk -v a="$(field rps "$ng")" -v b="$(field rps "$nx")" \
        'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    for who in ncclguard nginx; do
        if [ $who = ncclguard ]; then line=$ng rss=$ng_rss rt=$ratio
        else line=$nx rss=$nx_rss rt=1.00; fi
        echo "| $r | $size | $who | $(field rps "$line") | $rt | $(ms "$(field p50_us "$line")") | $(ms "$(field p99_us "$line")") | $(ms "$(field p999_us "$line")") | $(( $(field socket_errors "$line") + $(field non2xx "$line") )) | $(mib "$rss") |" >>"$summary"
    done
done

{
    echo
    echo "### p99 at a fixed 1,000 req/s (ncclguard-loadgen, open loop)"
    echo
    echo "bench/loadgen.c sends at a fixed schedule over 8 keep-alive TLS"
    echo "connections and measures each request from its scheduled send time,"
    echo "so a stall counts against every request queued behind it. Each"
    echo "measured run follows a 2s warm-up at the same rate."
    echo
    echo "| review | server | sent | failures | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms |"
    echo "|---|---|---|---|---|---|---|---|---|"
} >>"$summary"
for r in small medium; do
    body=$root/bench/reviews/$r.json
    if [ ! -s "$work/resp-$r.json" ]; then
        start_ncclguard || exit 1
        curl -sS --cacert "$CAFILE" -H 'Content-Type: application/json' \
            --data-binary @"$body" -o "$work/resp-$r.json" \
            "https://127.0.0.1:$port/mutate"
        stop_server
    fi
    for who in ncclguard nginx; do
        if [ $who = ncclguard ]; then start_ncclguard || exit 1
        else start_nginx "$work/resp-$r.json" || exit 1; fi
        # A 2s warm-up at the same rate first, as for wrk: the measured
        # run is the steady state, not the first requests after start.
        $PIN_LOAD "$LOADGEN" --port "$port" --cacert "$CAFILE" \
            --body "$body" --rate 1000 --duration 2 --conns 8 >/dev/null
        out=$($PIN_LOAD "$LOADGEN" --port "$port" --cacert "$CAFILE" \
            --body "$body" --rate 1000 --duration "$SECONDS_PER_RUN" \
            --conns 8)
        stop_server
        lat=$(grep '^latency_ms' <<<"$out")
        echo "| $r | $who | $(field ok "$(grep '^ok=' <<<"$out")") | $(field failures "$(grep '^ok=' <<<"$out")") | $(field p50 "$lat") | $(field p90 "$lat") | $(field p99 "$lat") | $(field p999 "$lat") | $(field max "$lat") |" >>"$summary"
    done
done

{
    echo
    echo "### /readyz: time from exec to the first 200 (20 starts)"
    echo
} >>"$summary"
times=()
for i in $(seq 1 20); do
    port=$(free_port)
    t=$($PIN_LOAD "$LOADGEN" --port "$port" --cacert "$CAFILE" --readyz -- \
        $PIN_SERVER "$NCCLGUARD" serve --listen "127.0.0.1:$port" \
        --cert "$work/tls/tls.crt" --key "$work/tls/tls.key" \
        --policy "$root/policy/default.yaml" 2>/dev/null |
        sed -n 's/^readyz_ms=//p')
    [ -n "$t" ] && times+=("$t")
done
printf '%s\n' "${times[@]}" | sort -n | awk '
    { v[NR] = $1 }
    END { if (NR == 0) { print "no start reached 200"; exit }
          printf "min %.1f ms, median %.1f ms, max %.1f ms over %d starts\n",
              v[1], v[int((NR + 1) / 2)], v[NR], NR }' >>"$summary"

{
    echo
    echo "### In-process micro-benchmark (bench/microbench.c)"
    echo
    echo '```'
    MICROBENCH_SECONDS=${MICROBENCH_SECONDS:-2} $PIN_SERVER "$MICROBENCH" \
        "$root/policy/default.yaml" "$root"/bench/reviews/{small,medium,large,nongpu}.json 2>&1
    echo '```'
} >>"$summary"

cat "$summary"
