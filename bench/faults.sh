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
#  E. transport attacks (stalled handshakes, bodies held open against a
#     256 Mi figure, slowloris from eight addresses): for each, the
#     server's CPU, its peak RSS and a fresh client's review latency
#     while it lasts.
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
for flags in "" "--connection-timeout 5 --header-timeout 7"; do
    note ""
    note "server flags: ${flags:-(defaults: --connection-timeout 30 --header-timeout 10 --per-ip-connections 128)}"
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
        # The silent half goes at the idle timeout (5 s), the dripping
        # half, never idle, at the header deadline (7 s).
        last=$(sed -n -E 's/.*last after ([0-9.]+)s.*/\1/p' "$fw/idle.out")
        closed=$(sed -n -E 's/.*idle_closed_by_server=([0-9]+) of ([0-9]+).*/\1 \2/p' "$fw/idle.out")
        check "slowloris [$flags]: silent and dripping connections all closed by the timeout and the deadline" \
            "$(awk -v l="${last:-0}" -v c="${closed:-0 1}" 'BEGIN { split(c, n, " "); exit !(l >= 6.5 && l < 9 && n[1] == n[2]) }'; echo $?)" \
            "${closed% *} of ${closed#* } closed, the last after ${last:-?}s"
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

# ---- E: transport attacks ----
# attack NAME SECONDS "SERVER FLAGS" PEER-ARGS...: starts a server, runs
# ncclguard-peer (@PORT@ in its arguments becomes the port) for SECONDS, samples RSS every 0.2 s and a fresh review
# from 127.0.0.1 every 0.5 s, and writes one table row.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
attack() {
    local name=$1 secs=$2 flags=$3 t0 t1 peak=0 r lat=() codes=() bad=0 i
    shift 3
    # shellcheck disable=SC2086
    start_ncclguard $flags || exit 1
    local args=() a
    for a in "$@"; do args+=("${a//@PORT@/$port}"); done
    $PIN_LOAD "${args[@]}" >"$fw/attack.out" 2>&1 &
    local apid=$!
    sleep 0.5
    t0=$(ticks "$server_pid")
    local start=$SECONDS
    for i in $(seq 1 $((secs * 2 - 1))); do
        read -r ms code < <(curl -sS --max-time 5 --cacert "$CAFILE" \
            -o /dev/null -w '%{time_total} %{http_code}\n' \
            -H 'Content-Type: application/json' \
            --data-binary @"$root/bench/reviews/small.json" \
            "https://127.0.0.1:$port/mutate" 2>/dev/null |
            awk '{ printf "%d %s\n", $1 * 1000, $2 }')
        lat+=("${ms:-5000}")
        [ "${code:-000}" = 200 ] || bad=$((bad + 1))
        for _ in 1 2; do
            r=$(awk '/^VmRSS:/ { print $2 }' "/proc/$server_pid/status")
            [ "${r:-0}" -gt "$peak" ] && peak=$r
            sleep 0.2
        done
    done
    t1=$(ticks "$server_pid")
    local el=$((SECONDS - start))
    [ "$el" -ge 1 ] || el=1
    wait "$apid"
    local cpu p50 max
    cpu=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v s="$el" 'BEGIN { printf "%.0f", 100 * t / hz / s }')
    p50=$(printf '%s\n' "${lat[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
    max=$(printf '%s\n' "${lat[@]}" | sort -n | tail -n 1)
    note "| $name | $cpu % | $((peak / 1024)) MiB | ${#lat[@]} | $p50 ms | $max ms | $bad |"
    echo "$name: $(cat "$fw/attack.out" | tr "\n" " ")" >>"$fw/attacks.txt"
    attack_cpu=$cpu attack_rss=$((peak / 1024)) attack_max=$max attack_bad=$bad
    stop_server
}
note ""
note "### E. transport attacks (server on one CPU, --threads 1), a fresh review from 127.0.0.1 every 0.5 s"
note ""
note "| attack | server CPU | peak RSS | reviews | p50 | max | failed |"
note "|---|---|---|---|---|---|---|"
: >"$fw/attacks.txt"
attack "300 stalled handshakes from 127.0.0.2-4 (100 x 5-byte record header, 100 x half, 100 x whole ClientHello), 8 s" 8 \
    "--threads 1" bash -c "
    \"$PEER\" --port \$0 --source 127.0.0.2 --conns 100 --hold 8 raw '16 03 01 02 00' &
    \"$PEER\" --port \$0 --source 127.0.0.3 --conns 100 --hold 8 hello half &
    \"$PEER\" --port \$0 --source 127.0.0.4 --conns 100 --hold 8 hello whole & wait" @PORT@
e_cpu=$attack_cpu e_bad=$attack_bad
attack "70 x 4 MiB bodies announced, all but 1 byte sent, held (--memory-limit 256Mi), 8 s" 8 \
    "--threads 1 --memory-limit 256Mi" \
    "$PEER" --port @PORT@ --conns 70 --hold 8 body 4194304 4194303
f_rss=$attack_rss f_bad=$attack_bad
srcs=()
for i in 2 3 4 5 6 7 8 9; do srcs+=(--source "127.0.0.$i"); done
attack "slowloris: 8 addresses x 128 TLS connections, partial headers, a byte a second, reconnecting, 12 s" 12 \
    "--threads 1" "$PEER" --port @PORT@ "${srcs[@]}" --conns 1024 --hold 12 \
    --every 1000 --reconnect trickle
g_max=$attack_max g_bad=$attack_bad
note ""
sed 's/^/    /' "$fw/attacks.txt" | tee -a "$report" >/dev/null
check "stalled handshakes: server CPU under 5 %" \
    "$([ "$e_cpu" -lt 5 ] && [ "$e_bad" = 0 ]; echo $?)" "$e_cpu %, $e_bad failed reviews"
check "held bodies: RSS under the 256 Mi figure, reviews served" \
    "$([ "$f_rss" -lt 256 ] && [ "$f_bad" = 0 ]; echo $?)" "peak $f_rss MiB, $f_bad failed reviews"
check "slowloris from 8 addresses: every fresh review in < 1 s" \
    "$([ "$g_max" -lt 1000 ] && [ "$g_bad" = 0 ]; echo $?)" "max $g_max ms, $g_bad failed"

note ""
note "faults: $failed check(s) failed"
[ "$failed" -eq 0 ]
