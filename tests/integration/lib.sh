# shellcheck shell=bash
# Helpers for integration tests that start the real `ncclguard serve`:
# throwaway certificates (openssl CLI), a server on a free loopback port,
# curl wrappers and assertions. Source it; set NCCLGUARD to the binary.
#
#   ng_setup                      temp dir in $NG_TMP, removed on exit
#   ng_make_ca DIR                DIR/ca.crt, DIR/ca.key
#   ng_make_cert DIR NAME [DAYS] [SAN...]
#                                 DIR/NAME.crt, DIR/NAME.key signed by
#                                 DIR/ca.*; DAYS may be negative (expired);
#                                 SANs default to IP:127.0.0.1 DNS:localhost
#   ng_make_short_cert DIR NAME SECS  valid for SECS more seconds only
#   ng_serve_start ARGS...        starts serve on 127.0.0.1:0, waits for
#                                 /readyz; sets NG_PID NG_PORT NG_URL NG_LOG
#                                 (extra ARGS go last, so they win);
#                                 NG_PROBE_ARGS adds curl flags to the probe
#   ng_serve_stop                 SIGTERM, wait; sets NG_EXIT
#   ng_curl ARGS...               curl -sS with the CA and a 10 s cap
#   ng_post FILE [PATH]           POST FILE as JSON; prints body, then the
#                                 status on the last line
#   ng_check NAME COND...         runs COND; counts a pass or a failure
#   ng_eq NAME GOT WANT / ng_contains NAME HAYSTACK NEEDLE
#   ng_metric NAME                value of a metric line from /metrics
#   ng_summary                    prints "N passed, N failed"; exit status

NG_PASSED=0
NG_FAILED=0
NG_PID=
NG_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NG_ROOT=$(cd "$NG_DIR/../.." && pwd)
: "${NCCLGUARD:=$NG_ROOT/build/ncclguard}"
# Under valgrind (make valgrind wraps the binary in a script and sets
# NCCLGUARD_START_TIMEOUT) everything is ~20 times slower: waits, time
# limits and load volumes scale by NG_SCALE.
NG_SCALE=1
if [ -n "${NCCLGUARD_START_TIMEOUT:-}" ] ||
    [ "$(head -c 2 "$NCCLGUARD" 2>/dev/null)" = '#!' ]; then
    NG_SCALE=20
fi
NG_START_TIMEOUT=${NCCLGUARD_START_TIMEOUT:-10}

ng_setup() {
    NG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/ncclguard-it.XXXXXX")
    trap ng_cleanup EXIT
}

ng_cleanup() {
    if [ -n "$NG_PID" ] && kill -0 "$NG_PID" 2>/dev/null; then
        kill -KILL "$NG_PID" 2>/dev/null
        wait "$NG_PID" 2>/dev/null
    fi
    [ -n "${NG_TMP:-}" ] && rm -rf "$NG_TMP"
}

ng_pass() {
    NG_PASSED=$((NG_PASSED + 1))
    echo "ok   - $1"
}

ng_fail() {
    NG_FAILED=$((NG_FAILED + 1))
    echo "FAIL - $1${2:+: $2}"
}

ng_check() {
    local name=$1
    shift
    if "$@"; then ng_pass "$name"; else ng_fail "$name"; fi
}

ng_eq() {
    if [ "$2" = "$3" ]; then ng_pass "$1"; else ng_fail "$1" "got '$2', want '$3'"; fi
}

ng_contains() {
    case $2 in
    *"$3"*) ng_pass "$1" ;;
    *) ng_fail "$1" "'$3' not in: $(printf '%s' "$2" | head -c 400)" ;;
    esac
}

ng_summary() {
    echo "$NG_PASSED passed, $NG_FAILED failed"
    [ "$NG_FAILED" -eq 0 ]
}

ng_make_ca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$1/ca.key" -out "$1/ca.crt" -days 2 \
        -subj "/CN=ncclguard test CA $RANDOM" 2>/dev/null
}

ng_make_cert() {
    local dir=$1 name=$2 days=${3:-1} san
    shift 3 2>/dev/null || shift $#
    if [ $# -eq 0 ]; then set -- IP:127.0.0.1 DNS:localhost; fi
    san=$(IFS=,; echo "$*")
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' \
        "$san" >"$dir/$name.ext"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$dir/$name.key" -out "$dir/$name.csr" \
        -subj "/CN=$name" 2>/dev/null &&
        openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" \
            -CAkey "$dir/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
            -out "$dir/$name.crt" -days "$days" -extfile "$dir/$name.ext" \
            2>/dev/null
}

# ng_make_short_cert DIR NAME SECONDS: like ng_make_cert, valid from a
# minute ago until SECONDS from now (openssl ca takes exact dates).
ng_make_short_cert() {
    local dir=$1 name=$2 secs=$3 db=$1/cadb.$2
    mkdir -p "$db" && : >"$db/index.txt"
    printf '[ ca ]\ndefault_ca = c\n[ c ]\ndatabase = %s/index.txt\nserial = %s/serial\nnew_certs_dir = %s\ndefault_md = sha256\npolicy = p\nunique_subject = no\n[ p ]\ncommonName = supplied\n' \
        "$db" "$db" "$db" >"$db/ca.cnf"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' \
        >"$db/ext"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$dir/$name.key" -out "$db/req.csr" -subj "/CN=$name" \
        2>/dev/null &&
        openssl ca -batch -config "$db/ca.cnf" -cert "$dir/ca.crt" \
            -keyfile "$dir/ca.key" -in "$db/req.csr" -out "$dir/$name.crt" \
            -rand_serial -notext -extfile "$db/ext" \
            -startdate "$(date -u -d '-1 min' +%Y%m%d%H%M%SZ)" \
            -enddate "$(date -u -d "+$secs sec" +%Y%m%d%H%M%SZ)" 2>/dev/null
}

# Waits for the "listening" line, then for /readyz.
ng_serve_start() {
    NG_LOG=$NG_TMP/serve.$RANDOM.log
    : >"$NG_LOG"
    "$NCCLGUARD" serve --listen 127.0.0.1:0 "$@" >"$NG_LOG" 2>&1 &
    NG_PID=$!
    NG_PORT=
    local _
    for _ in $(seq 1 $((NG_START_TIMEOUT * 50))); do
        NG_PORT=$(sed -n 's/.*"msg":"listening".*"port":\([0-9]*\).*/\1/p' \
            "$NG_LOG" | head -n 1)
        [ -n "$NG_PORT" ] && break
        kill -0 "$NG_PID" 2>/dev/null || break
        sleep 0.02
    done
    if [ -z "$NG_PORT" ]; then
        echo "ncclguard serve did not start:" >&2
        cat "$NG_LOG" >&2
        return 1
    fi
    NG_URL=https://127.0.0.1:$NG_PORT
    for _ in $(seq 1 $((NG_START_TIMEOUT * 50))); do
        # The probe checks readiness, not the certificate's name.
        [ "$(ng_curl -k ${NG_PROBE_ARGS:-} -o /dev/null -w '%{http_code}' \
            "$NG_URL/readyz" 2>/dev/null)" = 200 ] &&
            return 0
        sleep 0.02
    done
    echo "ncclguard serve never became ready" >&2
    return 1
}

ng_serve_stop() {
    NG_EXIT=
    [ -n "$NG_PID" ] || return 0
    kill -TERM "$NG_PID" 2>/dev/null
    wait "$NG_PID"
    NG_EXIT=$?
    NG_PID=
}

ng_curl() {
    curl -sS --max-time $((10 * NG_SCALE)) --cacert "${NG_CA:-$NG_TMP/ca.crt}" "$@"
}

ng_post() {
    ng_curl -X POST -H 'Content-Type: application/json' \
        --data-binary "@$1" -w '\n%{http_code}' "$NG_URL${2:-/mutate}"
}

ng_metric() {
    ng_curl "$NG_URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'
}

# Polls until `ng_metric NAME` equals WANT, for at most ~3 s (scaled).
ng_wait_metric() {
    local _
    for _ in $(seq 1 $((150 * NG_SCALE))); do
        [ "$(ng_metric "$1")" = "$2" ] && return 0
        sleep 0.02
    done
    return 1
}
