#!/usr/bin/env bash
# make faults: faults under load against a real `ncclguard serve`.
#  A. while wrk runs: rotate the certificate (Kubernetes-style symlink
#     swap), flip the policy between good and bad versions, SIGHUP storms,
#     with handshakes churning alongside; zero failed requests allowed.
#  B. SIGTERM drain under fixed-rate load: no request sent before the
#     signal may fail, and the server exits 0.
#  C. slowloris: idle connections from 127.0.0.2 while a client on
#     127.0.0.1 keeps sending; that client must see no failure.
#  D. open and drop 10,000 connections; the server keeps serving and
#     returns to its open-descriptor baseline.
# Writes $BENCH_OUT/faults.md; exits non-zero when a check fails.
set -u
. "$(dirname "$0")/common.sh"

fw=$work/faults
rm -rf "$fw"
mkdir -p "$fw"
report=$fw/faults.md
failed=0
trap 'stop_server' EXIT
note() { echo "$*" | tee -a "$report"; }
check() { # check NAME CONDITION-RESULT(0 ok) DETAIL
    if [ "$2" -eq 0 ]; then note "- PASS $1: $3"
    else note "- FAIL $1: $3"; failed=$((failed + 1)); fi
}
field() { sed -n -E "s/(^|.* )$1=([^ ]*).*/\2/p" <<<"$2"; }

make_certs "$work/tls" || exit 1
CAFILE=$work/tls/ca.crt

# A new leaf for 127.0.0.1 from the same CA, into directory $1.
new_leaf() {
    mkdir -p "$1"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj /CN=127.0.0.1 -keyout "$1/tls.key" -out "$1/tls.csr" \
        2>/dev/null &&
    openssl x509 -req -in "$1/tls.csr" -CA "$work/tls/ca.crt" \
        -CAkey "$work/tls/ca.key" -CAcreateserial -days 2 \
        -extfile "$work/tls/ext" -out "$1/tls.crt" 2>/dev/null
}
# Atomically points dir/..data at dir/$2, as the kubelet updates a volume.
swap_data() {
    ln -sfn "$2" "$1/..data_tmp" && mv -T "$1/..data_tmp" "$1/..data"
}
served_fingerprint() {
    openssl s_client -connect "127.0.0.1:$port" -servername localhost \
        </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 \
        2>/dev/null
}

# The secret and the config map, laid out the way the kubelet mounts them.
sec=$fw/secret cm=$fw/configmap
new_leaf "$sec/..v1" || exit 1
swap_data "$sec" ..v1
ln -s ..data/tls.crt "$sec/tls.crt"
ln -s ..data/tls.key "$sec/tls.key"
mkdir -p "$cm/..good" "$cm/..bad"
cp "$root/policy/default.yaml" "$cm/..good/policy.yaml"
{ cat "$root/policy/default.yaml"; printf '\ndefaults: [this is: not, valid\n'; } \
    >"$cm/..bad/policy.yaml"
swap_data "$cm" ..good
ln -s ..data/policy.yaml "$cm/policy.yaml"
export CERT=$sec/tls.crt KEY=$sec/tls.key POLICY=$cm/policy.yaml

echo "## make faults, $(date -u '+%Y-%m-%d %H:%M UTC')" >"$report"
echo >>"$report"

# ---- A: reloads under wrk ----
start_ncclguard || exit 1
pid=$server_pid
BODY=$root/bench/reviews/small.json $PIN_LOAD wrk -t1 -c16 -d20s \
    -s "$root/bench/wrk.lua" "https://127.0.0.1:$port/mutate" \
    >"$fw/wrk-a.out" 2>&1 &
wrk_pid=$!
sleep 2
new_leaf "$sec/..v2" && swap_data "$sec" ..v2
$PIN_LOAD "$LOADGEN" --port "$port" --cacert "$CAFILE" --churn 3000 \
    --conns 4 >"$fw/churn-a.out" 2>&1 &
churn_pid=$!
for i in $(seq 1 10); do
    swap_data "$cm" ..bad; kill -HUP "$pid"; sleep 0.3
    swap_data "$cm" ..good; kill -HUP "$pid"; sleep 0.3
done
storm_start=$(date +%s.%N)
for i in $(seq 1 2000); do kill -HUP "$pid" 2>/dev/null || break; done
storm_end=$(date +%s.%N)
new_leaf "$sec/..v3" && swap_data "$sec" ..v3
wait "$churn_pid"
wait "$wrk_pid"
sleep 1
res=$(grep '^wrk_result' "$fw/wrk-a.out")
note "### A. certificate rotation x2, policy good/bad flips x10, 2000 SIGHUPs, under wrk -c16 for 20s"
note ""
note "    $res"
note "    $(cat "$fw/churn-a.out")"
note "    SIGHUP storm: 2000 signals in $(awk -v a="$storm_start" -v b="$storm_end" 'BEGIN { printf "%.2f", b - a }')s"
errs=$(( $(field socket_errors "$res") + $(field non2xx "$res") ))
check "no failed request under reloads" "$([ -n "$res" ] && [ "$errs" -eq 0 ]; echo $?)" \
    "$(field requests "$res") requests, $errs errors or non-2xx"
check "no failed handshake during rotation" \
    "$([ "$(field failed "$(cat "$fw/churn-a.out")")" = 0 ]; echo $?)" \
    "$(cat "$fw/churn-a.out")"
want=$(openssl x509 -noout -fingerprint -sha256 -in "$sec/..v3/tls.crt")
got=$(served_fingerprint)
check "rotated certificate served" "$([ "$want" = "$got" ]; echo $?)" \
    "served ${got#*=}"
check "still ready after the bad policy" \
    "$([ "$(http_get /readyz)" = 200 ] && kill -0 "$pid"; echo $?)" \
    "/readyz $(http_get /readyz)"
curl -sS --cacert "$CAFILE" "https://127.0.0.1:$port/metrics" \
    >"$fw/metrics-a.txt" 2>/dev/null
note "    reload metrics: $(grep -i 'reload' "$fw/metrics-a.txt" | grep -v '^#' | tr '\n' ';' | head -c 600)"

# ---- B: SIGTERM drain ----
note ""
note "### B. SIGTERM drain under 1,000 req/s (the 1.7 KB review, 16 connections)"
note ""
$PIN_LOAD "$LOADGEN" --port "$port" --cacert "$CAFILE" \
    --body "$root/bench/reviews/small.json" --rate 1000 --duration 6 \
    --conns 16 >"$fw/drain.out" 2>&1 &
lg=$!
sleep 3
term_at=$(date +%s.%N)
kill -TERM "$pid"
wait "$pid"
rc=$?
server_pid=
exit_at=$(date +%s.%N)
wait "$lg"
note "    $(tr '\n' ' ' <"$fw/drain.out")"
note "    SIGTERM at $term_at, exit $rc after $(awk -v a="$term_at" -v b="$exit_at" 'BEGIN { printf "%.3f", b - a }')s"
first_sent=$(field first_failed_sent_epoch "$(cat "$fw/drain.out")")
ok=$(field ok "$(grep '^ok=' "$fw/drain.out")")
check "drain: exit status 0" "$([ "$rc" = 0 ]; echo $?)" "exit $rc"
check "drain: no request sent before SIGTERM failed" \
    "$([ "${ok:-0}" -gt 0 ] && { [ -z "$first_sent" ] || awk -v f="$first_sent" -v t="$term_at" 'BEGIN { exit !(f >= t) }'; }; echo $?)" \
    "${ok:-0} answered; first failed request was sent at ${first_sent:-none}"

# ---- C: slowloris ----
note ""
note "### C. slowloris: 2,000 idle connections from 127.0.0.2 (half never send a ClientHello, half drip a header byte a second), client on 127.0.0.1 at 500 req/s"
for flags in "" "--connection-timeout 5"; do
    note ""
    note "server flags: ${flags:-(defaults: --connection-timeout 30 --per-ip-connections 128)}"
    # shellcheck disable=SC2086
    start_ncclguard $flags || exit 1
    $PIN_LOAD "$LOADGEN" --port "$port" --cacert "$CAFILE" \
        --source 127.0.0.2 --idle 2000 --hold 12 >"$fw/idle.out" 2>&1 &
    idle_pid=$!
    sleep 2
    $PIN_LOAD "$LOADGEN" --port "$port" --cacert "$CAFILE" \
        --body "$root/bench/reviews/small.json" --rate 500 --duration 8 \
        --conns 4 >"$fw/victim.out" 2>&1
    wait "$idle_pid"
    note "    idle: $(tr '\n' ' ' <"$fw/idle.out")"
    note "    client: $(grep -E '^(ok|latency)' "$fw/victim.out" | tr '\n' ' ')"
    v=$(grep '^ok=' "$fw/victim.out")
    p99=$(field p99 "$(grep '^latency' "$fw/victim.out")")
    check "slowloris [${flags:-defaults}]: client served" \
        "$([ "$(field failures "$v")" = 0 ] && [ "$(field ok "$v")" -gt 0 ] && awk -v p="$p99" 'BEGIN { exit !(p < 100) }'; echo $?)" \
        "$v, p99 ${p99} ms"
    if [ -n "$flags" ]; then
        last=$(sed -n -E 's/.*last after ([0-9.]+)s.*/\1/p' "$fw/idle.out")
        check "slowloris [$flags]: silent connections closed by the timeout" \
            "$(awk -v l="${last:-0}" 'BEGIN { exit !(l >= 4.5 && l < 8) }'; echo $?)" \
            "last idle connection closed after ${last:-?}s"
    fi
    stop_server
done

# ---- D: churn ----
note ""
note "### D. open and drop 10,000 connections (half TCP-only with RST, half after a TLS handshake)"
start_ncclguard || exit 1
sleep 0.5
fds0=$(ls "/proc/$server_pid/fd" | wc -l)
rss0=$(rss_kib "$server_pid")
$PIN_LOAD "$LOADGEN" --port "$port" --cacert "$CAFILE" --churn 10000 \
    --conns 8 >"$fw/churn-d.out" 2>&1
sleep 2
fds1=$(ls "/proc/$server_pid/fd" | wc -l)
rss1=$(rss_kib "$server_pid")
st=$(curl -sS --cacert "$CAFILE" -o /dev/null -w '%{http_code}' \
    -H 'Content-Type: application/json' \
    --data-binary @"$root/bench/reviews/small.json" \
    "https://127.0.0.1:$port/mutate")
note "    $(cat "$fw/churn-d.out"); descriptors $fds0 -> $fds1; RSS $rss0 -> $rss1 KiB"
check "churn: still serving" "$([ "$st" = 200 ]; echo $?)" "POST /mutate $st afterwards"
check "churn: no descriptor leak" "$([ "$fds1" -le "$((fds0 + 2))" ]; echo $?)" \
    "$fds0 open before, $fds1 after"
stop_server

note ""
note "faults: $failed check(s) failed"
[ "$failed" -eq 0 ]
