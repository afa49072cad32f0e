#!/usr/bin/env bash
# TLS: refused pairs at load, host verification, TLS versions, client
# certificates, and certificate rotation under load with no failed request.
set -u
. "$(dirname "$0")/lib.sh"
ng_setup
D=$NG_DIR/data
POLICY=${NG_POLICY:-$NG_ROOT/policy/default.yaml}
T=$NG_TMP

ng_make_ca "$T" && ng_make_cert "$T" tls 1 && ng_make_cert "$T" expired -1 &&
    ng_make_cert "$T" other 1 DNS:other.example || exit 1

# Pairs refused at load: the server does not start, and says why.
out=$("$NCCLGUARD" serve --listen 127.0.0.1:0 --cert "$T/expired.crt" \
    --key "$T/expired.key" --policy "$POLICY" 2>&1)
ng_eq "expired certificate: exit 1" $? 1
ng_contains "expired certificate: says expired" "$out" "certificate expired at"
out=$("$NCCLGUARD" serve --listen 127.0.0.1:0 --cert "$T/tls.crt" \
    --key "$T/other.key" --policy "$POLICY" 2>&1)
ng_eq "key not matching its certificate: exit 1" $? 1
ng_contains "key not matching: says so" "$out" \
    "private key does not match the certificate"
printf 'not a pem\n' >"$T/junk.pem"
out=$("$NCCLGUARD" serve --listen 127.0.0.1:0 --cert "$T/junk.pem" \
    --key "$T/tls.key" --policy "$POLICY" 2>&1)
ng_eq "garbage certificate: exit 1" $? 1
ng_contains "garbage certificate: says so" "$out" "no PEM certificate"
out=$("$NCCLGUARD" serve --listen 127.0.0.1:0 --cert "$T/missing.crt" \
    --key "$T/tls.key" --policy "$POLICY" 2>&1)
ng_eq "missing certificate file: exit 1" $? 1
ng_contains "missing certificate file: names it" "$out" "missing.crt"

# A certificate that expires while served: /readyz turns 503. (The server
# must be up within those seconds, so this waits longer under valgrind.)
ng_make_short_cert "$T" short $((3 * NG_SCALE)) || exit 1
ng_serve_start --cert "$T/short.crt" --key "$T/short.key" --policy "$POLICY" \
    --reload-interval 0 || exit 1
ng_eq "certificate about to expire: ready" \
    "$(ng_curl -o /dev/null -w '%{http_code}' "$NG_URL/readyz")" 200
end=$(date -d "$(openssl x509 -in "$T/short.crt" -noout -enddate | cut -d= -f2)" +%s)
while [ "$(date +%s)" -le "$end" ]; do sleep 0.2; done
ng_eq "certificate expired while served: /readyz is 503" \
    "$(ng_curl -k -o "$T/ready.out" -w '%{http_code}' "$NG_URL/readyz")" 503
ng_contains "expired: /readyz says why" "$(cat "$T/ready.out")" "expired"
ng_eq "expired: /healthz still 200" \
    "$(ng_curl -k -o /dev/null -w '%{http_code}' "$NG_URL/healthz")" 200
ng_serve_stop

# A server whose certificate names only other.example.
ng_serve_start --cert "$T/other.crt" --key "$T/other.key" --policy "$POLICY" \
    --reload-interval 0 || exit 1
ng_curl -o /dev/null "$NG_URL/healthz" 2>/dev/null
ng_eq "wrong host: curl refuses the certificate (exit 60)" $? 60
ng_eq "right host via --resolve: 200" "$(ng_curl -o /dev/null -w '%{http_code}' \
    --resolve "other.example:$NG_PORT:127.0.0.1" \
    "https://other.example:$NG_PORT/healthz")" 200
ng_serve_stop

ng_serve_start --cert "$T/tls.crt" --key "$T/tls.key" --policy "$POLICY" \
    --reload-interval 0 || exit 1

# Versions: 1.2 and 1.3 accepted, 1.1 refused.
for v in 1_2 1_3; do
    out=$(openssl s_client -connect "127.0.0.1:$NG_PORT" -tls$v \
        -CAfile "$T/ca.crt" </dev/null 2>&1)
    ng_contains "TLS ${v/_/.} accepted" "$out" "Verify return code: 0 (ok)"
done
out=$(openssl s_client -connect "127.0.0.1:$NG_PORT" -tls1_1 \
    -cipher 'DEFAULT@SECLEVEL=0' </dev/null 2>&1)
ng_eq "TLS 1.1 refused: s_client fails" $? 1
ng_contains "TLS 1.1 refused: no cipher agreed" "$out" "Cipher is (NONE)"
ng_eq "TLS 1.1 refused: curl fails too" "$(ng_curl --tlsv1.1 --tls-max 1.1 \
    -o /dev/null -w '%{http_code}' "$NG_URL/healthz" 2>/dev/null)" 000

# Rotation under load: clients keep making new connections while the pair
# is replaced five times (each an atomic rename, as a Secret update is);
# every request must succeed, and new handshakes must see the new serial.
load() {
    local end=$((SECONDS + $1)) n=0
    while [ $SECONDS -lt $end ]; do
        ng_curl -o /dev/null -w '%{http_code}\n' -X POST \
            -H 'Content-Type: application/json' \
            --data-binary "@$D/review-v1.json" "$NG_URL/mutate" 2>&1
        n=$((n + 1))
    done
}
serial_served() {
    openssl s_client -connect "127.0.0.1:$NG_PORT" -CAfile "$T/ca.crt" \
        </dev/null 2>/dev/null | openssl x509 -noout -serial | cut -d= -f2
}
load 4 >"$T/codes.1" &
lp1=$!
load 4 >"$T/codes.2" &
lp2=$!
for i in 1 2 3 4 5; do
    sleep 0.5
    ng_make_cert "$T" "rot$i" 1 || break
    cp "$T/rot$i.crt" "$T/new.crt" && cp "$T/rot$i.key" "$T/new.key"
    # Key first, then the certificate: each rename is atomic, and the
    # moment in between (new key, old certificate) is a mismatched pair
    # that must be refused without harm.
    mv "$T/new.key" "$T/tls.key" && mv "$T/new.crt" "$T/tls.crt"
done
want=$(openssl x509 -in "$T/rot5.crt" -noout -serial | cut -d= -f2)
for _ in $(seq 1 $((100 * NG_SCALE))); do
    [ "$(serial_served)" = "$want" ] && break
    sleep 0.02
done
wait $lp1 $lp2
total=$(cat "$T/codes.1" "$T/codes.2" | wc -l)
bad=$(cat "$T/codes.1" "$T/codes.2" | grep -vc '^200$')
ng_check "rotation under load: at least 40 requests made ($total)" test "$total" -ge $((40 / NG_SCALE))
ng_eq "rotation under load: zero failed requests" "$bad" 0
ng_eq "rotation: new handshakes get the last certificate" "$(serial_served)" "$want"
gen=$(ng_metric ncclguard_cert_generation)
ng_check "rotation: certificate generation advanced ($gen)" test "${gen:-0}" -ge 2
ng_eq "rotation: notAfter metric follows the new certificate" \
    "$(ng_metric ncclguard_cert_not_after_seconds)" \
    "$(date -d "$(openssl x509 -in "$T/rot5.crt" -noout -enddate | cut -d= -f2)" +%s)"

# A broken pair is refused, counted, and the last good one keeps serving.
errs=$(ng_metric ncclguard_cert_reload_errors_total)
cp "$T/other.key" "$T/new.key" && mv "$T/new.key" "$T/tls.key"
kill -HUP "$NG_PID"
for _ in $(seq 1 $((100 * NG_SCALE))); do
    [ "$(ng_metric ncclguard_cert_reload_errors_total)" -gt "$errs" ] && break
    sleep 0.02
done
ng_check "broken pair: reload error counted" \
    test "$(ng_metric ncclguard_cert_reload_errors_total)" -gt "$errs"
ng_eq "broken pair: old certificate still served" "$(serial_served)" "$want"
ng_eq "broken pair: still ready" \
    "$(ng_curl -o /dev/null -w '%{http_code}' "$NG_URL/readyz")" 200
ng_contains "broken pair: failure logged" "$(cat "$NG_LOG")" \
    "certificate reload failed"
ng_serve_stop

# Client certificates: with --client-ca, a review without a certificate or
# with one from another CA is refused; one from the CA is served. Probes
# and scrapes, which present no certificate, still get through.
mkdir -p "$T/clients" && ng_make_ca "$T/clients" &&
    ng_make_cert "$T/clients" client 1 DNS:kube-apiserver || exit 1
mkdir -p "$T/rogue" && ng_make_ca "$T/rogue" &&
    ng_make_cert "$T/rogue" client 1 DNS:kube-apiserver || exit 1
cp "$T/rot5.crt" "$T/tls.crt" && cp "$T/rot5.key" "$T/tls.key"
ng_serve_start --cert "$T/tls.crt" --key "$T/tls.key" --policy "$POLICY" \
    --client-ca "$T/clients/ca.crt" || exit 1
review() {
    ng_curl -o "$T/cc.out" -w '%{http_code}' -X POST \
        -H 'Content-Type: application/json' \
        --data-binary "@$D/review-v1.json" "$@" "$NG_URL/mutate" 2>/dev/null
}
ng_eq "client CA: review without a client certificate is 403" "$(review)" 403
ng_contains "client CA: 403 says a certificate is required" \
    "$(cat "$T/cc.out")" "client certificate required"
ng_eq "client CA: certificate from another CA is 403" \
    "$(review --cert "$T/rogue/client.crt" --key "$T/rogue/client.key")" 403
ng_contains "client CA: 403 says not trusted" "$(cat "$T/cc.out")" \
    "client certificate not trusted"
ng_eq "client CA: trusted client certificate is served" \
    "$(review --cert "$T/clients/client.crt" --key "$T/clients/client.key")" 200
ng_contains "client CA: its answer echoes the uid" "$(cat "$T/cc.out")" \
    '"uid":"7d3f6a52-1c44-4b7e-9a0e-5b1f2d3c4e01"'
ng_eq "client CA: /readyz without a certificate (kubelet probe) is 200" \
    "$(ng_curl -o /dev/null -w '%{http_code}' "$NG_URL/readyz")" 200
ng_eq "client CA: refusals counted" \
    "$(ng_metric ncclguard_client_cert_rejects_total)" 2
ng_serve_stop
ng_eq "client CA server exits 0 on SIGTERM" "$NG_EXIT" 0

ng_summary
