#!/usr/bin/env bash
# Posts every body listed in cases.tsv to a real `ncclguard serve` over
# HTTPS and checks the status (and, for 200, the patch), that the server
# still answers /healthz after each one, and that it exits 0 on SIGTERM.
# Usage: NCCLGUARD=build/ncclguard tests/bad-inputs/check.sh
set -u

NCCLGUARD=${NCCLGUARD:?set NCCLGUARD to the ncclguard binary}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../integration/lib.sh
. "$root/tests/integration/lib.sh"
ng_setup
work=$NG_TMP
failures=0

fail() {
    echo "bad-inputs: FAIL: $*" >&2
    failures=$((failures + 1))
}

get() {
    ng_curl -o /dev/null -w '%{http_code}' "$NG_URL$1" 2>/dev/null
}

# Generated bodies: too big to check in, or simply easier to build here.
generate() {
    local name=$1 out=$work/$1
    local head='{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"9f0e","kind":{"group":"","version":"v1","kind":"Pod"},"namespace":"ml","operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"pad":"'
    local tail='"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}}'
    case $name in
    too-large | too-large-chunked)
        { printf '%s' "$head"; head -c $((4194305 - ${#head} - ${#tail})) \
            /dev/zero | tr '\0' x; printf '%s' "$tail"; } >"$out" ;;
    just-under-cap)
        { printf '%s' "$head"; head -c $((4194304 - ${#head} - ${#tail})) \
            /dev/zero | tr '\0' x; printf '%s' "$tail"; } >"$out" ;;
    nested-10000)
        { printf '%s' "${head%\"metadata*}"; printf '"metadata":'
          head -c 10000 /dev/zero | tr '\0' '['
          head -c 10000 /dev/zero | tr '\0' ']'; printf '}}}'; } >"$out" ;;
    *) echo "bad-inputs: unknown generated body @$name" >&2; return 1 ;;
    esac
}

run_case() {
    local status=$1 ctype=$2 file=$3 want=$4 why=$5 body extra=()
    if [ "${file#@}" != "$file" ]; then
        generate "${file#@}" || { fail "$file: cannot generate"; return; }
        body=$work/${file#@}
        [ "$file" = @too-large-chunked ] &&
            extra=(-H 'Transfer-Encoding: chunked')
    else
        body=$here/$file
    fi
    local got
    got=$(ng_curl -o "$work/resp" -w '%{http_code}' \
        -H "Content-Type: $ctype" "${extra[@]}" --data-binary @"$body" \
        "$NG_URL/mutate" 2>"$work/curl.err")
    if [ "$got" != "$status" ]; then
        fail "$file ($why): status $got, want $status;" \
            "response: $(head -c 300 "$work/resp" 2>/dev/null)" \
            "$(cat "$work/curl.err")"
    elif [ "$status" = 200 ]; then
        local allowed patch
        allowed=$(jq -r '.response.allowed' "$work/resp" 2>/dev/null)
        patch=$(jq -r '.response.patch // "none"' "$work/resp" 2>/dev/null)
        if [ "$allowed" != true ]; then
            fail "$file ($why): response.allowed is '$allowed'"
        elif [ "$want" = patch ] && [ "$patch" = none ]; then
            fail "$file ($why): expected a patch, got none"
        elif [ "$want" != patch ] && [ "$want" != - ] && [ "$patch" != none ]; then
            fail "$file ($why): expected no patch, got one"
        elif [ "$want" = warn ] &&
            [ "$(jq -r '.response.warnings | length' "$work/resp")" -lt 1 ]; then
            fail "$file ($why): expected a warning, got none"
        fi
    elif [ ! -s "$work/resp" ] && [ "$status" != 413 ]; then
        fail "$file ($why): status $got without a reason in the body"
    fi
    if ! kill -0 "$NG_PID" 2>/dev/null; then
        fail "$file ($why): the server died; its log:"
        tail -20 "$NG_LOG" >&2
        NG_PID=
        return 1
    fi
    local health
    health=$(get /healthz)
    [ "$health" = 200 ] ||
        fail "$file ($why): /healthz answered $health afterwards"
    echo "ok $status $file"
}

ng_make_ca "$work" && ng_make_cert "$work" tls ||
    { echo "bad-inputs: cannot create certificates" >&2; exit 1; }
ng_serve_start --cert "$work/tls.crt" --key "$work/tls.key" \
    --policy "$root/policy/default.yaml" || exit 1
cases=0
while read -r status ctype file want why; do
    case $status in '#'* | '') continue ;; esac
    cases=$((cases + 1))
    run_case "$status" "$ctype" "$file" "$want" "$why" || break
done <"$here/cases.tsv"

# A client that connects and never sends a ClientHello must cost no CPU
# and be closed after --connection-timeout (regression: with
# MHD_USE_TURBO a worker spun at 100% and the timeout never fired).
if [ -n "$NG_PID" ]; then
    ng_serve_stop
    [ "$NG_EXIT" = 0 ] || { fail "server exited $NG_EXIT after SIGTERM; its log:"
        tail -20 "$NG_LOG" >&2; }
fi
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$NG_PID/stat"; }
ng_serve_start --cert "$work/tls.crt" --key "$work/tls.key" \
    --policy "$root/policy/default.yaml" --connection-timeout 1 || exit 1
exec 3<>"/dev/tcp/127.0.0.1/$NG_PORT"
t0=$(cpu_ticks)
start=$(date +%s%N)
timeout 5 cat <&3 >/dev/null
closed=$?
waited_ms=$(( ($(date +%s%N) - start) / 1000000 ))
ticks=$(( $(cpu_ticks) - t0 ))
exec 3<&-
cases=$((cases + 2))
if [ "$closed" = 0 ] && [ "$waited_ms" -lt 3000 ]; then
    echo "ok idle connection without a handshake closed after ${waited_ms} ms"
else
    fail "idle connection without a handshake still open after ${waited_ms} ms"
fi
# 100 ticks are one CPU-second; an idle wait should use almost none.
if [ "$ticks" -le 20 ]; then
    echo "ok server used $ticks CPU ticks while the idle client waited"
else
    fail "server burned $ticks CPU ticks (1/100 s) on one idle connection"
fi
[ "$(get /healthz)" = 200 ] || fail "/healthz failed after the idle client"

if [ -n "$NG_PID" ]; then
    ng_serve_stop
    [ "$NG_EXIT" = 0 ] || { fail "server exited $NG_EXIT after SIGTERM; its log:"
        tail -20 "$NG_LOG" >&2; }
fi
if [ "$failures" -ne 0 ]; then
    echo "bad-inputs: $failures of $cases cases failed" >&2
    exit 1
fi
echo "bad-inputs: all $cases cases got their status; server kept serving"
