#!/usr/bin/env bash
# The route table of server/http.c, from outside: each route answers its
# methods and refuses every other with 405, an Allow header listing its
# methods and "method not allowed; use M"; any other path is 404 "not
# found"; and the refusals of a review (400 framing, 413, 415) keep their
# exact status and text.
set -u
. "$(dirname "$0")/lib.sh"
ng_setup
D=$NG_DIR/data
POLICY=${NG_POLICY:-$NG_ROOT/policy/default.yaml}

ng_make_ca "$NG_TMP" && ng_make_cert "$NG_TMP" tls 1 || exit 1
ng_serve_start --cert "$NG_TMP/tls.crt" --key "$NG_TMP/tls.key" \
    --policy "$POLICY" --max-body 64Ki || exit 1

# request METHOD PATH [curl args]: "STATUS|ALLOW|CONTENT-TYPE|BODY" with
# the body's newlines as \n.
request() {
    local method=$1 path=$2 code
    : >"$NG_TMP/h"
    : >"$NG_TMP/b"
    shift 2
    if [ "$method" = HEAD ]; then
        code=$(ng_curl -I -D "$NG_TMP/h" -o /dev/null -w '%{http_code}' \
            "$@" "$NG_URL$path")
        : >"$NG_TMP/b"
    else
        code=$(ng_curl -X "$method" -D "$NG_TMP/h" -o "$NG_TMP/b" \
            -w '%{http_code}' "$@" "$NG_URL$path")
    fi
    printf '%s|%s|%s|%s' "$code" \
        "$(tr -d '\r' <"$NG_TMP/h" | sed -n 's/^[Aa]llow: //p')" \
        "$(tr -d '\r' <"$NG_TMP/h" | sed -n 's/^[Cc]ontent-[Tt]ype: //p')" \
        "$(sed -z 's/\n/\\n/g' "$NG_TMP/b")"
}

TEXT='text/plain; charset=utf-8'

# The table: path and methods, as the Allow header lists them.
routes=("/mutate|POST" "/healthz|GET, HEAD" "/readyz|GET, HEAD"
    "/metrics|GET, HEAD")
for entry in "${routes[@]}"; do
    path=${entry%%|*}
    methods=${entry#*|}
    for m in GET HEAD POST PUT DELETE PATCH OPTIONS; do
        case ", $methods," in
        *", $m,"*)
            got=$(request "$m" "$path" -H 'Content-Type: application/json' \
                --data-binary "@$D/review-v1.json")
            [ "$m" = HEAD ] &&
                got=$(request HEAD "$path")
            ng_eq "$m $path is answered 200" "${got%%|*}" 200
            ;;
        *)
            got=$(request "$m" "$path")
            if [ "$m" = HEAD ]; then
                ng_eq "HEAD $path is 405, Allow: $methods" "$got" \
                    "405|$methods|$TEXT|"
            else
                ng_eq "$m $path is 405, Allow: $methods, says use ${methods%%,*}" \
                    "$got" "405|$methods|$TEXT|method not allowed; use ${methods%%,*}\\n"
            fi
            ;;
        esac
    done
done
ng_eq "a query string does not change the route" \
    "$(request GET '/healthz?probe=1')" "200||$TEXT|ok\\n"

# Paths not in the table, however close: 404 for every method.
for path in / /nope /mutate/ /MUTATE /healthz/ /metricsx /mutate/x //mutate; do
    for m in GET POST; do
        ng_eq "$m $path is 404" "$(request "$m" "$path" \
            -H 'Content-Type: application/json' --data-binary '{}')" \
            "404||$TEXT|not found\\n"
    done
done

# The review's own refusals, with their exact text.
ng_eq "POST /mutate as text/plain is 415" \
    "$(request POST /mutate -H 'Content-Type: text/plain' \
        --data-binary "@$D/review-v1.json")" \
    "415||$TEXT|content type must be application/json\\n"
head -c 70000 /dev/zero | tr '\0' ' ' >"$NG_TMP/big.json"
ng_eq "POST /mutate over --max-body is 413 (announced)" \
    "$(request POST /mutate -H 'Content-Type: application/json' \
        --data-binary "@$NG_TMP/big.json")" \
    "413||$TEXT|request body too large\\n"
ng_eq "POST /mutate over --max-body is 413 (chunked)" \
    "$(request POST /mutate -H 'Content-Type: application/json' \
        -H 'Transfer-Encoding: chunked' --data-binary "@$NG_TMP/big.json")" \
    "413||$TEXT|request body too large\\n"

# Ambiguous framing, sent raw: 400 with the reason, connection closed.
raw() { # raw HEADERS BODY: the whole answer, \r removed
    printf 'POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n%s\r\n%s' \
        "$1" "$2" |
        timeout $((10 * NG_SCALE)) openssl s_client -quiet -ign_eof \
            -connect "127.0.0.1:$NG_PORT" -CAfile "$NG_TMP/ca.crt" \
            2>/dev/null | tr -d '\r'
}
framing_case() { # framing_case NAME HEADERS BODY REASON
    local out
    out=$(raw "$2" "$3")
    ng_eq "framing $1: 400" "$(head -n 1 <<<"$out")" "HTTP/1.1 400 Bad Request"
    ng_eq "framing $1: reason" "$(sed '1,/^$/d' <<<"$out")" "bad request: $4"
}
framing_case two-cl $'Content-Length: 2\r\nContent-Length: 3\r\n' '{}x' \
    "Content-Length fields that differ"
framing_case cl-te $'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n' \
    $'2\r\n{}\r\n0\r\n\r\n' "Content-Length and Transfer-Encoding together"
framing_case gzip $'Transfer-Encoding: gzip, chunked\r\n' \
    $'2\r\n{}\r\n0\r\n\r\n' 'Transfer-Encoding must be exactly "chunked"'

ng_eq "still serving reviews" "$(ng_post "$D/review-v1.json" | tail -n 1)" 200
ng_serve_stop
ng_eq "SIGTERM exits 0" "$NG_EXIT" 0
ng_summary
