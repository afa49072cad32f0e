#!/usr/bin/env bash
# SIGTERM: the listener closes at once, a request in flight finishes with
# its answer, and the process exits 0.
set -u
. "$(dirname "$0")/lib.sh"
ng_setup
D=$NG_DIR/data
POLICY=${NG_POLICY:-$NG_ROOT/policy/default.yaml}
T=$NG_TMP

ng_make_ca "$T" && ng_make_cert "$T" tls 1 || exit 1
ng_serve_start --cert "$T/tls.crt" --key "$T/tls.key" --policy "$POLICY" ||
    exit 1

# A 60 KB review uploaded at 30 KB/s takes about 2 s.
size=$(wc -c <"$D/review-v1.json")
{ head -c $((60000 - size)) /dev/zero | tr '\0' ' '; cat "$D/review-v1.json"; } \
    >"$T/slow.json"
ng_curl --limit-rate 30k -o "$T/slow.out" -w '%{http_code}' -X POST \
    -H 'Content-Type: application/json' --data-binary "@$T/slow.json" \
    "$NG_URL/mutate" >"$T/slow.code" 2>"$T/slow.err" &
cp=$!
# Wait until the request is in flight (its headers have been read).
for _ in $(seq 1 $((100 * NG_SCALE))); do
    [ "$(ng_metric ncclguard_requests_in_flight)" -ge 2 ] 2>/dev/null && break
    sleep 0.02
done
pid=$NG_PID
start=$(date +%s%N)
kill -TERM "$pid"
sleep 0.2
ng_curl -o /dev/null "$NG_URL/healthz" 2>/dev/null
ng_eq "after SIGTERM new connections are refused (curl exit 7)" $? 7
ng_check "server still running while the request is in flight" kill -0 "$pid"
wait "$cp"
ng_eq "request in flight at SIGTERM answered 200" "$(cat "$T/slow.code")" 200
ng_contains "its answer is the review's response" "$(cat "$T/slow.out")" \
    '"uid":"7d3f6a52-1c44-4b7e-9a0e-5b1f2d3c4e01"'
wait "$pid"
ng_eq "server exits 0 after draining" $? 0
NG_PID=
ms=$((($(date +%s%N) - start) / 1000000))
ng_check "drain ended soon after the last request (${ms} ms)" test "$ms" -lt $((5000 * NG_SCALE))
ng_contains "drain logged" "$(cat "$NG_LOG")" '"msg":"stopped"'

# SIGTERM on an idle server exits at once.
ng_serve_start --cert "$T/tls.crt" --key "$T/tls.key" --policy "$POLICY" ||
    exit 1
start=$(date +%s%N)
ng_serve_stop
ms=$((($(date +%s%N) - start) / 1000000))
ng_eq "idle server: SIGTERM exits 0" "$NG_EXIT" 0
ng_check "idle server: exits within 1 s (${ms} ms)" test "$ms" -lt $((1000 * NG_SCALE))

ng_summary
