#!/usr/bin/env bash
# Shutdown as docs/serve.md promises it: after SIGTERM /readyz answers 503
# on a connection that was already open, and a request that never finishes
# holds the drain for at most 25 s, after which the server still exits 0.
# (That cap is the product's constant, so this file takes about 25 s.)
set -u
. "$(dirname "$0")/lib.sh"
ng_setup
D=$NG_DIR/data
POLICY=${NG_POLICY:-$NG_ROOT/policy/default.yaml}
T=$NG_TMP

ng_make_ca "$T" && ng_make_cert "$T" tls 1 || exit 1
# No header deadline and no minimum body rate: the slow upload must last
# past the drain cap.
ng_serve_start --cert "$T/tls.crt" --key "$T/tls.key" --policy "$POLICY" \
    --header-timeout 0 --min-body-rate 0 || exit 1

# A: a review uploaded so slowly (60 KB at 1 KB/s) that it outlasts the cap.
size=$(wc -c <"$D/review-v1.json")
{ head -c $((60000 - size)) /dev/zero | tr '\0' ' '; cat "$D/review-v1.json"; } \
    >"$T/slow.json"
# (curl itself, not ng_curl: its 10 s cap would end the upload first.)
curl -sS --max-time $((70 * NG_SCALE)) --cacert "$T/ca.crt" --limit-rate 1k -o /dev/null -w '%{http_code}' -X POST \
    -H 'Content-Type: application/json' --data-binary "@$T/slow.json" \
    "$NG_URL/mutate" >"$T/slow.code" 2>/dev/null &
slow=$!

# B: a keep-alive connection opened now, used again after SIGTERM.
mkfifo "$T/b.in"
openssl s_client -quiet -connect "127.0.0.1:$NG_PORT" -CAfile "$T/ca.crt" \
    <"$T/b.in" >"$T/b.out" 2>"$T/b.err" &
bcl=$!
exec 8>"$T/b.in"
get() { printf 'GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n' "$1" >&8; }
# wait_for FILE PATTERN: up to ~3 s (scaled) for PATTERN to appear.
wait_for() {
    local _
    for _ in $(seq 1 $((150 * NG_SCALE))); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.02
    done
    return 1
}
get /readyz
ng_check "before SIGTERM: /readyz on the kept-alive connection is 200" \
    wait_for "$T/b.out" '^HTTP/1.1 200'

for _ in $(seq 1 $((100 * NG_SCALE))); do
    [ "$(ng_metric ncclguard_requests_in_flight)" -ge 2 ] 2>/dev/null && break
    sleep 0.02
done
pid=$NG_PID
start=$(date +%s%N)
kill -TERM "$pid"
sleep 0.2
get /readyz
ng_check "after SIGTERM: /readyz on that connection is 503" \
    wait_for "$T/b.out" '^HTTP/1.1 503'
ng_check "after SIGTERM: /readyz says it is shutting down" \
    wait_for "$T/b.out" 'shutting down'
ng_check "after SIGTERM: the server keeps running while the upload goes on" \
    kill -0 "$pid"
exec 8>&-

wait "$pid"
ng_eq "a drain that hits the cap still exits 0" $? 0
NG_PID=
ms=$((($(date +%s%N) - start) / 1000000))
ng_check "the drain is capped at 25 s (took ${ms} ms)" \
    test "$ms" -ge 24500 -a "$ms" -lt $((28000 * NG_SCALE))
ng_contains "the capped drain is logged" "$(cat "$NG_LOG")" \
    '"msg":"drain timed out; closing connections"'
wait "$slow"
ng_check "the endless upload got no answer ($(cat "$T/slow.code"))" \
    test "$(cat "$T/slow.code")" != 200
kill "$bcl" 2>/dev/null
wait "$bcl" 2>/dev/null

ng_summary
