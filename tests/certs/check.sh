#!/bin/sh
# Checks `ncclguard certs` with the openssl command line: what create writes,
# CA reuse, inspect's exit codes and messages, bad input, webhook-config.
# shellcheck disable=SC2015
set -u

: "${NCCLGUARD:?set NCCLGUARD to the ncclguard binary}"
cd "$(dirname "$0")/../.." || exit 1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
# expect RC WHAT CMD...: runs CMD, output in $T/out and $T/err.
expect() {
    want=$1 what=$2
    shift 2
    "$@" >"$T/out" 2>"$T/err"
    got=$?
    if [ "$got" -eq "$want" ]; then ok; else
        bad "$what: exit $got, expected $want"; sed 's/^/  /' "$T/err" >&2
    fi
}
# has FILE PATTERN WHAT: FILE contains the fixed string PATTERN.
has() {
    if grep -qF -- "$2" "$1"; then ok; else
        bad "$3: '$2' not in $1"; sed 's/^/  /' "$1" >&2
    fi
}
mode() { stat -c %a "$1"; }

# --- create: EC with extra DNS and IP SANs --------------------------------
D=$T/ec
expect 0 "create ec" "$NCCLGUARD" certs create --service ncclguard \
    --namespace gpu-system --out "$D" --san localhost --san 127.0.0.1 \
    --san 2001:db8::1 --san '*.example.org'
cp "$T/out" "$T/bundle1"
has "$T/err" "created a new CA" "create says it made a CA"
for f in ca.crt ca.key tls.crt tls.key; do
    [ -s "$D/$f" ] && ok || bad "create did not write $f"
done
[ "$(mode "$D/tls.key")" = 600 ] && ok || bad "tls.key mode $(mode "$D/tls.key")"
[ "$(mode "$D/ca.key")" = 600 ] && ok || bad "ca.key mode $(mode "$D/ca.key")"
[ "$(mode "$D")" = 700 ] && ok || bad "out dir mode $(mode "$D")"
expect 0 "openssl verify" openssl verify -CAfile "$D/ca.crt" "$D/tls.crt"
has "$T/out" "tls.crt: OK" "openssl verify output"
openssl x509 -in "$D/tls.crt" -noout -text >"$T/text"
has "$T/text" "DNS:ncclguard, DNS:ncclguard.gpu-system, DNS:ncclguard.gpu-system.svc, DNS:ncclguard.gpu-system.svc.cluster.local" "service SANs"
has "$T/text" "DNS:localhost" "--san localhost"
has "$T/text" "IP Address:127.0.0.1" "--san 127.0.0.1 as an iPAddress"
has "$T/text" "IP Address:2001:DB8:0:0:0:0:0:1" "--san 2001:db8::1 as an iPAddress"
has "$T/text" "DNS:*.example.org" "wildcard --san"
# The whole list, in order: the four service names, then each --san once,
# and nothing else.
sans=$(grep -A1 'X509v3 Subject Alternative Name' "$T/text" | tail -n 1 | sed 's/^ *//')
[ "$sans" = "DNS:ncclguard, DNS:ncclguard.gpu-system, DNS:ncclguard.gpu-system.svc, DNS:ncclguard.gpu-system.svc.cluster.local, DNS:localhost, IP Address:127.0.0.1, IP Address:2001:DB8:0:0:0:0:0:1, DNS:*.example.org" ] &&
    ok || bad "SAN list: $sans"
expect 0 "inspect the new leaf" "$NCCLGUARD" certs inspect "$D/tls.crt"
has "$T/out" "SANs:        DNS:ncclguard, DNS:ncclguard.gpu-system, DNS:ncclguard.gpu-system.svc, DNS:ncclguard.gpu-system.svc.cluster.local, DNS:localhost, IP:127.0.0.1, IP:2001:db8::1, DNS:*.example.org" "inspect's SAN line"
has "$T/out" "subject:     CN=ncclguard.gpu-system.svc" "inspect's subject line"
grep -qx "EKU:         serverAuth" "$T/out" && ok || bad "inspect's EKU line: $(grep EKU "$T/out")"
expect 0 "inspect the CA" "$NCCLGUARD" certs inspect "$D/ca.crt"
[ "$(grep -c '^EKU:' "$T/out")" = 1 ] && ok || bad "inspect's CA EKU lines: $(grep EKU "$T/out")"
has "$T/text" "X509v3 Subject Key Identifier" "subjectKeyIdentifier"
has "$T/text" "X509v3 Authority Key Identifier" "authorityKeyIdentifier"
has "$T/text" "TLS Web Server Authentication" "serverAuth EKU"
has "$T/text" "id-ecPublicKey" "EC key"
has "$T/text" "CA:FALSE" "leaf is not a CA"
has "$T/text" "Subject: CN = ncclguard.gpu-system.svc" "leaf subject"
openssl x509 -in "$D/ca.crt" -noout -text >"$T/catext"
has "$T/catext" "CA:TRUE" "CA basicConstraints"
has "$T/catext" "Certificate Sign" "CA keyUsage"
# The key matches the certificate.
k=$(openssl pkey -in "$D/tls.key" -pubout | openssl sha256)
c=$(openssl x509 -in "$D/tls.crt" -pubkey -noout | openssl sha256)
[ "$k" = "$c" ] && ok || bad "tls.key does not match tls.crt"
# The printed caBundle is base64 of ca.crt.
base64 -d "$T/bundle1" >"$T/bundle1.pem" 2>/dev/null
cmp -s "$T/bundle1.pem" "$D/ca.crt" && ok || bad "printed caBundle is not ca.crt"

# --- rotation: the CA in DIR is reused byte for byte ---------------------
cp "$D/ca.crt" "$T/ca.before"
cp "$D/tls.crt" "$T/tls.before"
expect 0 "create again" "$NCCLGUARD" certs create --service ncclguard \
    --namespace gpu-system --out "$D" --san localhost --san 127.0.0.1 \
    --san 2001:db8::1 --san '*.example.org'
has "$T/err" "reused the CA" "second create reuses the CA"
cmp -s "$T/ca.before" "$D/ca.crt" && ok || bad "ca.crt changed on rotation"
cmp -s "$T/out" "$T/bundle1" && ok || bad "caBundle changed on rotation"
cmp -s "$T/tls.before" "$D/tls.crt" && bad "tls.crt not rotated" || ok
expect 0 "rotated cert verifies" openssl verify -CAfile "$T/ca.before" "$D/tls.crt"
# --ca-dir takes the CA from elsewhere (a read-only Secret mount in the Job).
expect 0 "create --ca-dir" "$NCCLGUARD" certs create --service ncclguard \
    --namespace gpu-system --out "$T/other" --ca-dir "$D"
cmp -s "$D/ca.crt" "$T/other/ca.crt" && ok || bad "--ca-dir did not copy ca.crt"
cmp -s "$D/ca.key" "$T/other/ca.key" && ok || bad "--ca-dir did not copy ca.key"
[ "$(mode "$T/other/ca.key")" = 600 ] && ok || bad "copied ca.key mode $(mode "$T/other/ca.key")"
expect 0 "verify --ca-dir cert" openssl verify -CAfile "$D/ca.crt" "$T/other/tls.crt"

# A CA made elsewhere (openssl req -x509) is reused as it is.
mkdir -p "$T/byo"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/byo/ca.key" \
    -out "$T/byo/ca.crt" -days 30 -subj "/CN=platform CA" 2>/dev/null
cp "$T/byo/ca.crt" "$T/byo.ca"
expect 0 "create with an openssl CA" "$NCCLGUARD" certs create --service wh \
    --namespace infra --out "$T/byo" --days 365
has "$T/err" "the CA expires in" "serving cert shortened to the CA's life"
cmp -s "$T/byo.ca" "$T/byo/ca.crt" && ok || bad "openssl CA rewritten"
expect 0 "openssl CA verifies" openssl verify -CAfile "$T/byo.ca" "$T/byo/tls.crt"
expect 0 "inspect openssl-CA cert" "$NCCLGUARD" certs inspect "$T/byo/tls.crt" \
    --ca "$T/byo.ca" --check-host wh.infra.svc.cluster.local
has "$T/out" "issuer:      CN=platform CA" "issuer is the openssl CA"
expect 2 "inspect with a missing CA file is bad input" "$NCCLGUARD" certs \
    inspect "$D/tls.crt" --ca "$T/nope.crt"
has "$T/err" "cannot open" "missing CA message"

# --- RSA ------------------------------------------------------------------
expect 0 "create rsa" "$NCCLGUARD" certs create --service web --namespace ns \
    --out "$T/rsa" --key rsa --days 30
openssl x509 -in "$T/rsa/tls.crt" -noout -text >"$T/text"
has "$T/text" "rsaEncryption" "RSA key"
has "$T/text" "(2048 bit)" "RSA 2048"
has "$T/text" "Key Encipherment" "RSA keyUsage"
expect 0 "inspect rsa" "$NCCLGUARD" certs inspect "$T/rsa/tls.crt" \
    --ca "$T/rsa/ca.crt" --check-host web.ns.svc
has "$T/out" "RSA 2048" "inspect shows the RSA key"
# Whole days left, rounded down: 29 once a second has passed since signing.
grep -Eqx 'days left: +(29|30)' "$T/out" && ok || bad "inspect days left: $(grep 'days left' "$T/out")"

# --- inspect ----------------------------------------------------------------
expect 0 "inspect good" "$NCCLGUARD" certs inspect "$D/tls.crt" \
    --ca "$D/ca.crt" --check-host ncclguard.gpu-system.svc
has "$T/out" "chain:       ok" "inspect chain ok"
has "$T/out" "host:        ok" "inspect host ok"
has "$T/out" "EKU:         serverAuth" "inspect EKU"
has "$T/out" "IP:2001:db8::1" "inspect IPv6 SAN"
expect 0 "inspect IP host" "$NCCLGUARD" certs inspect "$D/tls.crt" --check-host 127.0.0.1
expect 0 "inspect wildcard host" "$NCCLGUARD" certs inspect "$D/tls.crt" --check-host a.example.org
expect 1 "inspect wrong host" "$NCCLGUARD" certs inspect "$D/tls.crt" --check-host evil.example.com
has "$T/err" "does not name host 'evil.example.com'" "wrong host message"
expect 1 "inspect wrong IP" "$NCCLGUARD" certs inspect "$D/tls.crt" --check-host 10.0.0.1
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$T/other.key" -out "$T/other.crt" -days 1 -subj /CN=other \
    2>/dev/null
expect 1 "inspect wrong CA" "$NCCLGUARD" certs inspect "$D/tls.crt" --ca "$T/other.crt"
has "$T/err" "does not verify against" "wrong CA message"
expect 0 "create expired" "$NCCLGUARD" certs create --service ncclguard \
    --namespace gpu-system --out "$T/expired" --days 0
sleep 1
expect 1 "inspect expired" "$NCCLGUARD" certs inspect "$T/expired/tls.crt"
has "$T/err" "has expired" "expired message"
expect 1 "openssl agrees it expired" openssl x509 -in "$T/expired/tls.crt" -noout -checkend 0
expect 2 "inspect missing file" "$NCCLGUARD" certs inspect "$T/nope.crt"
has "$T/err" "cannot open" "missing file message"
printf 'not a certificate\n' >"$T/garbage.pem"
expect 2 "inspect garbage" "$NCCLGUARD" certs inspect "$T/garbage.pem"
has "$T/err" "no PEM certificate found" "garbage message"
expect 2 "inspect garbage CA" "$NCCLGUARD" certs inspect "$D/tls.crt" --ca "$T/garbage.pem"
expect 2 "inspect no file" "$NCCLGUARD" certs inspect

# --- bad input to create ----------------------------------------------------
for days in -1 abc 99999 "" 12x; do
    expect 2 "create --days '$days'" "$NCCLGUARD" certs create --service s \
        --namespace n --out "$T/bad" --days "$days"
    has "$T/err" "invalid --days" "--days '$days' message"
done
expect 2 "create --ca-days 0" "$NCCLGUARD" certs create --service s \
    --namespace n --out "$T/bad" --ca-days 0
expect 2 "create --key dsa" "$NCCLGUARD" certs create --service s \
    --namespace n --out "$T/bad" --key dsa
expect 2 "create without --out" "$NCCLGUARD" certs create --service s --namespace n
expect 2 "create --days without value" "$NCCLGUARD" certs create --service s \
    --namespace n --out "$T/bad" --days
expect 1 "create bad service" "$NCCLGUARD" certs create --service Web_1 \
    --namespace n --out "$T/bad"
has "$T/err" "invalid service name 'Web_1'" "bad service message"
expect 1 "create bad SAN" "$NCCLGUARD" certs create --service s \
    --namespace n --out "$T/bad" --san 'a,DNS:evil'
has "$T/err" "invalid SAN 'a,DNS:evil'" "bad SAN message"
mkdir -p "$T/badca"
cp "$T/garbage.pem" "$T/badca/ca.crt"
cp "$D/ca.key" "$T/badca/ca.key"
expect 1 "create with garbage ca.crt" "$NCCLGUARD" certs create --service s \
    --namespace n --out "$T/badca"
has "$T/err" "no PEM certificate found" "garbage ca.crt message"
mkdir -p "$T/halfca"
cp "$D/ca.crt" "$T/halfca/ca.crt"
expect 1 "create with ca.crt only" "$NCCLGUARD" certs create --service s \
    --namespace n --out "$T/halfca"
has "$T/err" "but not" "ca.crt without ca.key message"
mkdir -p "$T/halfkey"
cp "$D/ca.key" "$T/halfkey/ca.key"
expect 1 "create with ca.key only" "$NCCLGUARD" certs create --service s \
    --namespace n --out "$T/halfkey"
has "$T/err" "halfkey/ca.key but not $T/halfkey/ca.crt" "ca.key without ca.crt message"
mkdir -p "$T/mismatch"
cp "$D/ca.crt" "$T/mismatch/ca.crt"
cp "$T/rsa/ca.key" "$T/mismatch/ca.key"
expect 1 "create with mismatched CA key" "$NCCLGUARD" certs create \
    --service s --namespace n --out "$T/mismatch"
has "$T/err" "does not match" "mismatched CA key message"
[ -e "$T/mismatch/tls.crt" ] && bad "a failed create wrote tls.crt" || ok

# --- renewal: --renew-before keeps a good pair, renews one that is due ------
R=$T/renew
expect 0 "create for renewal" "$NCCLGUARD" certs create --service ncclguard \
    --namespace ncclguard --out "$R" --days 60
cp "$R/tls.crt" "$T/r.crt"
cp "$R/tls.key" "$T/r.key"
expect 0 "create --renew-before 30 with 60 days left" "$NCCLGUARD" certs create \
    --service ncclguard --namespace ncclguard --out "$R" --days 60 --renew-before 30
has "$T/err" "kept the serving certificate" "60 days left, renew at 30: kept"
cmp -s "$T/r.crt" "$R/tls.crt" && cmp -s "$T/r.key" "$R/tls.key" && ok ||
    bad "a kept pair was rewritten"
# The Job's layout: the CA and the current pair come from read-only
# Secret mounts, the output goes to an empty folder.
mkdir -p "$T/rca" "$T/rcur"
cp "$R/ca.crt" "$R/ca.key" "$T/rca/"
cp "$R/tls.crt" "$R/tls.key" "$T/rcur/"
expect 0 "create --renew-before --current" "$NCCLGUARD" certs create \
    --service ncclguard --namespace ncclguard --out "$T/rout" --ca-dir "$T/rca" \
    --current "$T/rcur" --days 60 --renew-before 30
has "$T/err" "kept the serving certificate" "--current: kept"
cmp -s "$T/r.crt" "$T/rout/tls.crt" && cmp -s "$T/r.key" "$T/rout/tls.key" && ok ||
    bad "--current: the kept pair was not copied to --out"
[ "$(mode "$T/rout/tls.key")" = 600 ] && ok || bad "copied tls.key mode $(mode "$T/rout/tls.key")"
cmp -s "$T/rca/ca.crt" "$T/rout/ca.crt" && ok || bad "--current: ca.crt not copied"
# Due: 60 days left is within --renew-before 60.
expect 0 "create --renew-before 60 with 60 days left" "$NCCLGUARD" certs create \
    --service ncclguard --namespace ncclguard --out "$R" --days 365 --renew-before 60
has "$T/err" "issued a new serving certificate" "due: renewed"
has "$T/err" "within --renew-before 60" "due: says why"
cmp -s "$T/r.crt" "$R/tls.crt" && bad "a due pair was kept" || ok
cmp -s "$T/rca/ca.crt" "$R/ca.crt" && ok || bad "renewal changed the CA"
expect 0 "renewed pair verifies" openssl verify -CAfile "$R/ca.crt" "$R/tls.crt"
# A pair from another CA is renewed, whatever its days left.
expect 0 "create --renew-before with a foreign pair" "$NCCLGUARD" certs create \
    --service ncclguard --namespace ncclguard --out "$T/rout2" --ca-dir "$T/rca" \
    --current "$D" --renew-before 30
has "$T/err" "is not signed by the CA in use" "foreign pair: renewed, says why"
# No current pair: issued.
expect 0 "create --renew-before, no current pair" "$NCCLGUARD" certs create \
    --service ncclguard --namespace ncclguard --out "$T/rout3" --ca-dir "$T/rca" \
    --current "$T/empty" --renew-before 30
has "$T/err" "no current serving certificate" "no pair: issued, says why"
expect 2 "create --renew-before 0" "$NCCLGUARD" certs create --service s \
    --namespace n --out "$T/bad" --renew-before 0
has "$T/err" "invalid --renew-before" "--renew-before 0 message"
expect 2 "create --current without --renew-before" "$NCCLGUARD" certs create \
    --service s --namespace n --out "$T/bad" --current "$R"
has "$T/err" "--current needs --renew-before" "--current alone message"
# inspect --renew-before: exit 1 inside the window, 0 outside.
expect 0 "inspect --renew-before 364 on 365 days" "$NCCLGUARD" certs inspect \
    "$R/tls.crt" --renew-before 364
has "$T/out" "renewal:     ok" "inspect renewal ok line"
expect 1 "inspect --renew-before 365 on 365 days" "$NCCLGUARD" certs inspect \
    "$R/tls.crt" --renew-before 365
has "$T/err" "is due for renewal" "inspect due message"
expect 2 "inspect --renew-before x" "$NCCLGUARD" certs inspect "$R/tls.crt" \
    --renew-before x

# --- webhook-config ---------------------------------------------------------
expect 0 "webhook-config --ca-file" "$NCCLGUARD" certs webhook-config \
    --ca-file "$D/ca.crt" --namespace gpu-system
cp "$T/out" "$T/wh1.yaml"
has "$T/wh1.yaml" "caBundle: \"$(cat "$T/bundle1")\"" "caBundle in webhook-config"
has "$T/wh1.yaml" "namespace: gpu-system" "service namespace"
expect 0 "webhook-config --ca-bundle-file" "$NCCLGUARD" certs webhook-config \
    --ca-bundle-file "$T/bundle1" --namespace gpu-system --output "$T/wh2.yaml"
cmp -s "$T/wh1.yaml" "$T/wh2.yaml" && ok || bad "--ca-bundle-file and --ca-file differ"
expect 1 "webhook-config garbage bundle" "$NCCLGUARD" certs webhook-config \
    --ca-bundle-file "$T/garbage.pem"
has "$T/err" "not a base64 caBundle" "garbage bundle message"
expect 1 "webhook-config garbage CA" "$NCCLGUARD" certs webhook-config \
    --ca-file "$T/garbage.pem"
# --policy: the CEL condition names that policy's GPU resources.
sed 's#gpuResources: \[nvidia.com/gpu\]#gpuResources: [nvidia.com/gpu, example.com/accel]#' \
    policy/default.yaml >"$T/policy.yaml"
grep -q example.com/accel "$T/policy.yaml" && ok || bad "could not edit the policy copy"
expect 0 "webhook-config --policy" "$NCCLGUARD" certs webhook-config \
    --ca-file "$D/ca.crt" --policy "$T/policy.yaml"
has "$T/out" "r in ['nvidia.com/gpu', 'example.com/accel']" "--policy GPU names in CEL"
expect 0 "webhook-config --policy default" "$NCCLGUARD" certs webhook-config \
    --ca-file "$D/ca.crt" --namespace gpu-system --policy policy/default.yaml
has "$T/out" "limits.exists(r, r in ['nvidia.com/gpu'])" "--policy default narrows to nvidia.com/gpu"
# Without --policy: any extended resource, so the object never depends on
# the policy (and nothing rewrites it when the policy changes).
has "$T/wh1.yaml" "limits.exists(r, r.contains('/'))" "no --policy: any extended resource (limits)"
has "$T/wh1.yaml" "requests.exists(r, r.contains('/'))" "no --policy: any extended resource (requests)"
grep -q "r in \[" "$T/wh1.yaml" && bad "no --policy still lists resource names" || ok
# --ca-bundle-only: the caBundle under the webhook's name key, nothing else.
expect 0 "webhook-config --ca-bundle-only" "$NCCLGUARD" certs webhook-config \
    --ca-bundle-file "$T/bundle1" --ca-bundle-only
yq . "$T/out" >"$T/patch.json" 2>/dev/null || echo null >"$T/patch.json"
if jq -e --arg b "$(cat "$T/bundle1")" \
    '. == {webhooks: [{name: "pods.ncclguard.io", clientConfig: {caBundle: $b}}]}' \
    "$T/patch.json" >/dev/null; then ok; else
    bad "--ca-bundle-only is not just the caBundle: $(cat "$T/out")"
fi
expect 2 "webhook-config --ca-bundle-only --policy" "$NCCLGUARD" certs \
    webhook-config --ca-file "$D/ca.crt" --ca-bundle-only --policy policy/default.yaml
has "$T/err" "drop --policy" "--ca-bundle-only with --policy message"
printf 'apiVersion: ncclguard.io/v1alpha1\nkind: Nope\n' >"$T/badpolicy.yaml"
expect 1 "webhook-config bad --policy" "$NCCLGUARD" certs webhook-config \
    --ca-file "$D/ca.crt" --policy "$T/badpolicy.yaml"
has "$T/err" "badpolicy.yaml:" "bad policy message names the file"
expect 2 "webhook-config without CA" "$NCCLGUARD" certs webhook-config
expect 1 "webhook-config bad namespace" "$NCCLGUARD" certs webhook-config \
    --ca-file "$D/ca.crt" --namespace 'a b'

# Serials are random and positive: the CA and the leaf differ, neither is 0.
s_ca=$(openssl x509 -in "$D/ca.crt" -noout -serial)
s_tls=$(openssl x509 -in "$D/tls.crt" -noout -serial)
[ "$s_ca" != "$s_tls" ] && [ "$s_ca" != serial=00 ] && [ "$s_tls" != serial=00 ] &&
    ok || bad "serials: CA $s_ca, leaf $s_tls"

# With stdin closed, the first file created gets descriptor 0, which is a
# file like any other (a Job's container may start without stdin).
# shellcheck disable=SC2016 # expanded by the inner shell
expect 0 "create with stdin closed" sh -c '"$1" certs create --service s \
    --namespace n --out "$2" <&-' sh "$NCCLGUARD" "$T/nostdin"
for f in ca.crt ca.key tls.crt tls.key; do
    [ -s "$T/nostdin/$f" ] && ok || bad "create with stdin closed did not write $f"
done

# An --out whose files fit PATH_MAX but whose temporary names do not
# (DIR/.tls.key.XXXXXX): refused as too long, nothing half-written. The
# directory is real: 4082 bytes of nested names under $T.
deep=$T/deep
while [ $((${#deep} + 201)) -lt 4082 ]; do
    deep=$deep/$(head -c 200 /dev/zero | tr '\0' b)
done
deep=$deep/$(head -c $((4082 - ${#deep} - 1)) /dev/zero | tr '\0' c)
mkdir -p "$(dirname "$deep")"
expect 1 "create in a 4082-byte directory" "$NCCLGUARD" certs create \
    --service s --namespace n --out "$deep"
case $(cat "$T/err") in
"ncclguard certs create: path too long: $T/deep/"*) ok ;;
*) bad "create in a 4082-byte directory: $(head -c 200 "$T/err")" ;;
esac
[ -z "$(ls -A "$deep" 2>/dev/null)" ] && ok || bad "files left in the deep directory"
rm -rf "$T/deep"

echo "tests/certs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
