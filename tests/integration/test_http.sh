#!/usr/bin/env bash
# Routes, status codes, AdmissionReview round trips, body limits, metrics
# and the admission log line, against the real server over TLS.
set -u
. "$(dirname "$0")/lib.sh"
ng_setup
D=$NG_DIR/data
POLICY=${NG_POLICY:-$NG_ROOT/policy/default.yaml}

ng_make_ca "$NG_TMP" && ng_make_cert "$NG_TMP" tls 1 || exit 1

# Flags from the environment: the body cap comes from NCCLGUARD_MAX_BODY.
NCCLGUARD_MAX_BODY=64Ki NCCLGUARD_LOG_LEVEL=info \
    ng_serve_start --cert "$NG_TMP/tls.crt" --key "$NG_TMP/tls.key" \
    --policy "$POLICY" || exit 1

out=$(ng_curl -i "$NG_URL/healthz")
ng_contains "GET /healthz is 200" "$out" "HTTP/1.1 200"
ng_contains "GET /healthz says ok" "$out" "ok"
ng_eq "GET /readyz is 200" \
    "$(ng_curl -o /dev/null -w '%{http_code}' "$NG_URL/readyz")" 200
ng_eq "HEAD /healthz is 200" \
    "$(ng_curl -I -o /dev/null -w '%{http_code}' "$NG_URL/healthz")" 200

# One AdmissionReview v1 and one v1beta1: uid and apiVersion echoed.
out=$(ng_post "$D/review-v1.json")
ng_eq "POST /mutate v1 is 200" "$(tail -n 1 <<<"$out")" 200
body=$(sed '$d' <<<"$out")
ng_contains "v1 response echoes the uid" "$body" \
    '"uid":"7d3f6a52-1c44-4b7e-9a0e-5b1f2d3c4e01"'
ng_contains "v1 response keeps apiVersion v1" "$body" \
    '"apiVersion":"admission.k8s.io/v1"'
ng_contains "v1 response is an AdmissionReview" "$body" \
    '"kind":"AdmissionReview"'
ng_contains "v1 response allows" "$body" '"allowed":true'
ng_contains "GPU pod gets a JSONPatch" "$body" '"patchType":"JSONPatch"'
# What the admission log line must count for this review.
v1_ops=$(jq -r '.response.patch' <<<"$body" | base64 -d | jq 'length')
v1_warnings=$(jq '.response.warnings // [] | length' <<<"$body")

out=$(ng_post "$D/review-v1beta1.json")
ng_eq "POST /mutate v1beta1 is 200" "$(tail -n 1 <<<"$out")" 200
ng_contains "v1beta1 response keeps apiVersion v1beta1" "$out" \
    '"apiVersion":"admission.k8s.io/v1beta1"'
ng_contains "v1beta1 response echoes the uid" "$out" \
    '"uid":"7d3f6a52-1c44-4b7e-9a0e-5b1f2d3c4eb1"'

# Bad bodies: 400 with a one-line reason.
printf '{"apiVersion": "admission.k8s.io/v1", "kind": ' >"$NG_TMP/trunc.json"
out=$(ng_post "$NG_TMP/trunc.json")
ng_eq "malformed JSON is 400" "$(tail -n 1 <<<"$out")" 400
reason=$(sed '$d' <<<"$out")
ng_eq "400 reason is one line" "$(printf '%s\n' "$reason" | wc -l)" 1
ng_check "400 reason is not empty" test -n "$reason"
printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}' \
    >"$NG_TMP/pod.json"
out=$(ng_post "$NG_TMP/pod.json")
ng_eq "a Pod that is not an AdmissionReview is 400" "$(tail -n 1 <<<"$out")" 400
: >"$NG_TMP/empty.json"
ng_eq "an empty body is 400" "$(ng_post "$NG_TMP/empty.json" | tail -n 1)" 400

# Routes and methods.
ng_eq "unknown path is 404" \
    "$(ng_curl -o /dev/null -w '%{http_code}' "$NG_URL/nope")" 404
out=$(ng_curl -i "$NG_URL/mutate")
ng_contains "GET /mutate is 405" "$out" "HTTP/1.1 405"
ng_contains "405 on /mutate names POST in Allow" "$(tr -d '\r' <<<"$out")" \
    "Allow: POST"
out=$(ng_curl -i -X POST -d x "$NG_URL/healthz")
ng_contains "POST /healthz is 405" "$out" "HTTP/1.1 405"
ng_contains "405 on /healthz names GET in Allow" "$(tr -d '\r' <<<"$out")" \
    "Allow: GET, HEAD"
ng_eq "DELETE /metrics is 405" "$(ng_curl -X DELETE -o /dev/null \
    -w '%{http_code}' "$NG_URL/metrics")" 405

# Content types.
ng_eq "text/plain body is 415" "$(ng_curl -X POST -H 'Content-Type: text/plain' \
    --data-binary "@$D/review-v1.json" -o /dev/null -w '%{http_code}' \
    "$NG_URL/mutate")" 415
ng_eq "no Content-Type is 415" "$(ng_curl -X POST -H 'Content-Type:' \
    --data-binary "@$D/review-v1.json" -o /dev/null -w '%{http_code}' \
    "$NG_URL/mutate")" 415
ng_eq "application/json; charset=utf-8 is accepted" "$(ng_curl -X POST \
    -H 'Content-Type: application/json; charset=utf-8' \
    --data-binary "@$D/review-v1.json" -o /dev/null -w '%{http_code}' \
    "$NG_URL/mutate")" 200

# Body cap (64 KiB from the environment): the review padded with spaces to
# exactly the cap passes, one byte more is refused, announced or chunked.
size=$(wc -c <"$D/review-v1.json")
{ head -c $((65536 - size)) /dev/zero | tr '\0' ' '; cat "$D/review-v1.json"; } \
    >"$NG_TMP/at-cap.json"
{ printf ' '; cat "$NG_TMP/at-cap.json"; } >"$NG_TMP/over-cap.json"
ng_eq "body of exactly --max-body is served" \
    "$(ng_post "$NG_TMP/at-cap.json" | tail -n 1)" 200
ng_eq "body one byte over --max-body is 413 (Content-Length)" \
    "$(ng_post "$NG_TMP/over-cap.json" | tail -n 1)" 413
ng_eq "body over --max-body is 413 (chunked)" "$(ng_curl -X POST \
    -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' \
    --data-binary "@$NG_TMP/over-cap.json" -o /dev/null -w '%{http_code}' \
    "$NG_URL/mutate")" 413
head -c 5000000 /dev/zero | tr '\0' ' ' >"$NG_TMP/huge.json"
ng_eq "5 MB body is 413 (curl waits for 100 Continue)" \
    "$(ng_post "$NG_TMP/huge.json" | tail -n 1)" 413
ng_eq "5 MB body sent straight away is 413 (read and dropped)" \
    "$(ng_curl -X POST -H 'Content-Type: application/json' -H 'Expect:' \
    --data-binary "@$NG_TMP/huge.json" -o /dev/null -w '%{http_code}' \
    "$NG_URL/mutate")" 413

# Keep-alive: two requests, one connection.
out=$(ng_curl -v -o /dev/null -o /dev/null "$NG_URL/healthz" \
    "$NG_URL/readyz" 2>&1)
ng_contains "keep-alive reuses the connection" "$out" "Re-using existing connection"

# Still serving after all of the above.
ng_eq "server still answers after bad requests" \
    "$(ng_post "$D/review-v1.json" | tail -n 1)" 200

# Metrics.
m=$(ng_curl "$NG_URL/metrics")
ng_contains "metrics: content type is Prometheus text" \
    "$(ng_curl -sI "$NG_URL/metrics" | tr -d '\r')" "text/plain; version=0.0.4"
ng_eq "metrics: 5 admissions answered 200" "$(awk '
    /^ncclguard_admissions_total/ && !/bad_request/ { n += $2 } END { print n }' <<<"$m")" 5
ng_eq "metrics: 3 bad requests" \
    "$(awk '$1 == "ncclguard_admissions_total{result=\"bad_request\"}" { print $2 }' <<<"$m")" 3
ng_eq "metrics: histogram count equals admissions" \
    "$(awk '$1 == "ncclguard_admission_duration_seconds_count" { print $2 }' <<<"$m")" 8
ng_eq "metrics: +Inf bucket equals count" \
    "$(awk '$1 == "ncclguard_admission_duration_seconds_bucket{le=\"+Inf\"}" { print $2 }' <<<"$m")" 8
ng_eq "metrics: 413 answers counted" \
    "$(awk '$1 == "ncclguard_http_responses_total{code=\"413\"}" { print $2 }' <<<"$m")" 4
ng_eq "metrics: policy generation 1" \
    "$(awk '$1 == "ncclguard_policy_generation" { print $2 }' <<<"$m")" 1
ng_contains "metrics: policy hash shown" "$m" 'ncclguard_policy_info{hash="'
want=$(date -d "$(openssl x509 -in "$NG_TMP/tls.crt" -noout -enddate | cut -d= -f2)" +%s)
ng_eq "metrics: cert notAfter matches the certificate" \
    "$(awk '$1 == "ncclguard_cert_not_after_seconds" { print $2 }' <<<"$m")" "$want"
for name in ncclguard_patch_operations_total ncclguard_patched_pods_total \
    ncclguard_warnings_total ncclguard_errors_total \
    ncclguard_policy_reload_errors_total ncclguard_cert_reload_errors_total; do
    ng_contains "metrics: $name present" "$m" "
$name "
done

# The admission log line.
line=$(grep '"msg":"admission"' "$NG_LOG" | grep 5b1f2d3c4e01 | head -n 1)
# A JSON object, and not an empty line: jq 1.6 accepts empty input.
is_json_object() { [ -n "$1" ] && jq -e 'type == "object"' <<<"$1" >/dev/null; }
ng_check "admission log line is JSON" is_json_object "$line"
ng_contains "log line has the uid" "$line" '"uid":"7d3f6a52-1c44-4b7e-9a0e-5b1f2d3c4e01"'
ng_contains "log line has the duration" "$line" '"duration_us":'
ng_contains "log line has the result" "$line" '"result":"'
# Once: the server adds a result of its own only to a record without one
# (jq would keep the last of two and hide the first).
ng_eq "log line names its result once" "$(grep -o '"result":' <<<"$line" | wc -l)" 1
# The server's numbers at the end of the line, written without printf.
ng_eq "log line: status 200" "$(jq -r '.status' <<<"$line")" 200
ng_eq "log line: patch_ops counts the patch's ops ($v1_ops)" \
    "$(jq -r '.patch_ops' <<<"$line")" "$v1_ops"
ng_eq "log line: warnings_count counts the response's warnings" \
    "$(jq -r '.warnings_count' <<<"$line")" "$v1_warnings"
ng_eq "log line: policy_generation 1" \
    "$(jq -r '.policy_generation' <<<"$line")" 1
ng_eq "log line: duration_us is a number" \
    "$(jq -r '.duration_us | type' <<<"$line")" number
bad=$(grep '"msg":"admission"' "$NG_LOG" | grep '"status":400' | head -n 1)
ng_check "a bad request's log line is JSON" is_json_object "$bad"
ng_eq "a bad request's log line: status 400, no ops" \
    "$(jq -r '"\(.status) \(.patch_ops) \(.result)"' <<<"$bad")" "400 0 bad_request"

ng_serve_stop
ng_eq "SIGTERM exits 0" "$NG_EXIT" 0

# Started with stdin closed (a container may have none), the server's
# first descriptor, its listening socket, is 0: a socket like any other.
# shellcheck disable=SC2016 # expanded by the inner shell
printf '#!/bin/sh\nexec "$NG_REAL" "$@" <&-\n' >"$NG_TMP/no-stdin.sh"
chmod +x "$NG_TMP/no-stdin.sh"
NG_REAL=$NCCLGUARD NCCLGUARD=$NG_TMP/no-stdin.sh
export NG_REAL
ng_serve_start --cert "$NG_TMP/tls.crt" --key "$NG_TMP/tls.key" \
    --policy "$POLICY" || exit 1
NCCLGUARD=$NG_REAL
ng_eq "stdin closed: listening on descriptor 0" \
    "$(readlink "/proc/$NG_PID/fd/0" | cut -d: -f1)" socket
ng_eq "stdin closed: /healthz is 200" \
    "$(ng_curl -o /dev/null -w '%{http_code}' "$NG_URL/healthz")" 200
ng_serve_stop

# Command line.
out=$("$NCCLGUARD" serve --help)
for f in --listen --cert --key --policy --client-ca --namespace --max-body \
    --threads --connection-timeout --max-connections --per-ip-connections \
    --reload-interval --log-level NCCLGUARD_LISTEN NCCLGUARD_MAX_BODY; do
    ng_contains "--help lists $f" "$out" "$f"
done
"$NCCLGUARD" serve --bogus >/dev/null 2>&1
ng_eq "unknown flag exits 2" $? 2
"$NCCLGUARD" serve --cert x --key y >/dev/null 2>&1
ng_eq "missing --policy exits 2" $? 2
err=$("$NCCLGUARD" serve --cert x --key y --policy z --max-body lots 2>&1)
ng_contains "bad --max-body says what is expected" "$err" "expected bytes"

ng_summary
