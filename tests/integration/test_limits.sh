#!/usr/bin/env bash
# Connection limits and the default worker count: --per-ip-connections
# refuses one address's extra connections and not another's,
# --max-connections caps them all, and without --threads the server runs
# one worker per CPU it may use (affinity mask, lowered to a cgroup v2 CPU
# limit).
set -u
. "$(dirname "$0")/lib.sh"
ng_setup
POLICY=${NG_POLICY:-$NG_ROOT/policy/default.yaml}
T=$NG_TMP

ng_make_ca "$T" && ng_make_cert "$T" tls 1 || exit 1

# status [CURL ARGS...]: the /healthz status, 000 when refused.
status() {
    ng_curl -o /dev/null -w '%{http_code}' "$@" "$NG_URL/healthz" 2>/dev/null
}
# A plain TCP connection counts against the limits from accept on, before
# any TLS handshake.
hold() { # hold FD
    eval "exec $1<>/dev/tcp/127.0.0.1/$NG_PORT"
}
release() { eval "exec $1<&-"; }
# owned: connections the server process holds on its port (accepted, in
# any state but listening), from ss; a held connection counts against the
# limits once accepted, and stops counting once the server closed it.
owned() {
    ss -Htnp state connected "( sport = :$NG_PORT )" 2>/dev/null |
        grep -c "pid=$NG_PID,"
}
# wait_owned N: until the server holds exactly N (~3 s, scaled).
wait_owned() {
    local _
    for _ in $(seq 1 $((150 * NG_SCALE))); do
        [ "$(owned)" = "$1" ] && return 0
        sleep 0.02
    done
    echo "the server holds $(owned) connections, expected $1" >&2
    return 1
}

# --- per address ------------------------------------------------------------
# Over the per-address limit a connection is accepted and closed at once.
ng_serve_start --cert "$T/tls.crt" --key "$T/tls.key" --policy "$POLICY" \
    --threads 1 --max-connections 100 --per-ip-connections 2 \
    --connection-timeout 0 || exit 1
# The start-up probe's connection must be gone first: it counts too.
ng_check "per-ip 2: no connection left from the start-up probe" wait_owned 0
hold 5
hold 6
ng_check "per-ip 2: the server accepted two held connections" wait_owned 2
ng_eq "per-ip 2: a third connection from 127.0.0.1 is refused" "$(status)" 000
ng_eq "per-ip 2: one from 127.0.0.2 is served" \
    "$(status --interface 127.0.0.2)" 200
release 5
ng_check "per-ip 2: the server closed one" wait_owned 1
ng_eq "per-ip 2: after one closes, 127.0.0.1 is served again" "$(status)" 200
release 6
ng_serve_stop

# --- request headers ----------------------------------------------------------
# libmicrohttpd's pool per connection is 8 KiB (server/http.c, CONN_POOL):
# a request with 6,000 bytes of headers is served, twice on one kept-alive
# connection (the second after the pool was reset), and so is the 97 KB
# review, whose body passes through the small read buffer; a header of
# 9,000 bytes is refused with 431, as nginx's default 8k line limit
# refuses it, and the server goes on serving.
ng_serve_start --cert "$T/tls.crt" --key "$T/tls.key" --policy "$POLICY" \
    --threads 1 || exit 1
pad() { head -c "$1" /dev/zero | tr '\0' a; }
review=$NG_DIR/data/review-v1.json
large=$NG_ROOT/bench/reviews/managed-large.json
# post_padded N FILE [FILE...]: status and new connections of each POST of
# FILE with an N-byte X-Pad header, all on one connection where it can.
post_padded() {
    local n=$1 f args=()
    shift
    for f in "$@"; do
        # --next starts each transfer's options afresh (the CA too).
        [ ${#args[@]} -eq 0 ] || args+=(--next)
        args+=(--cacert "${NG_CA:-$NG_TMP/ca.crt}" -X POST \
            -H 'Content-Type: application/json' -H "X-Pad: $(pad "$n")" \
            --data-binary "@$f" -o /dev/null \
            -w '%{http_code} %{num_connects}\n' "$NG_URL/mutate")
    done
    ng_curl "${args[@]}" 2>/dev/null
}
ng_eq "6,000 bytes of headers: two reviews served on one connection" \
    "$(post_padded 6000 "$review" "$review" | tr '\n' ' ')" "200 1 200 0 "
ng_eq "6,000 bytes of headers: the 97 KB review is served" \
    "$(post_padded 6000 "$large" | tr '\n' ' ')" "200 1 "
ng_eq "a 9,000-byte header is refused with 431" \
    "$(post_padded 9000 "$review" | tr '\n' ' ')" "431 1 "
ng_eq "after the 431 a review is served" \
    "$(post_padded 10 "$review" | tr '\n' ' ')" "200 1 "
ng_serve_stop

# --- in all -------------------------------------------------------------------
# --max-connections 3: once more than seven eighths of the slots less one
# (here 2) are open, each new connection sheds the oldest incomplete one,
# so slow or silent clients never fill the pool and a new client (the API
# server) is always served. Held connections never time out here
# (--connection-timeout 0, --header-timeout 0), however slowly the server
# runs (valgrind).
ng_serve_start --cert "$T/tls.crt" --key "$T/tls.key" --policy "$POLICY" \
    --threads 1 --max-connections 3 --per-ip-connections 0 \
    --connection-timeout 0 --header-timeout 0 || exit 1
ng_check "max 3: no connection left from the start-up probe" wait_owned 0
# closed FD: the server closed it (EOF or reset at once, not a 1 s wait).
closed() {
    timeout 1 head -c 1 <&"$1" >/dev/null 2>&1
    [ $? -ne 124 ]
}
still_open() { ! closed "$1"; }
hold 5
ng_check "max 3: the first held connection is accepted" wait_owned 1
hold 6
ng_check "max 3: the second held connection is accepted" wait_owned 2
hold 7
ng_check "max 3: a third incomplete connection sheds one: two stay" \
    wait_owned 2
ng_check "max 3: the one shed is the oldest" closed 5
ng_check "max 3: the newest is kept" still_open 7
ng_eq "max 3: a new client from another address is served" \
    "$(status --max-time 2 --interface 127.0.0.2)" 200
ng_check "max 3: never more than 3 open after it" test "$(owned)" -le 3
release 5
release 6
release 7
ng_serve_stop

# --- worker threads -------------------------------------------------------------
# threads_logged: the "threads" field of the listening line.
threads_logged() {
    sed -n 's/.*"msg":"listening".*"threads":\([0-9]*\).*/\1/p' "$NG_LOG" |
        head -n 1
}
ncpu=$(nproc)
# This machine's own CPU limit, if it has one (a container with --cpus).
usable=$ncpu
if read -r quota period 2>/dev/null </sys/fs/cgroup/cpu.max &&
    [ "$quota" != max ] && [ "${period:-0}" -gt 0 ]; then
    limit=$(((quota + period - 1) / period))
    [ "$limit" -lt "$usable" ] && usable=$limit
fi
ng_serve_start --cert "$T/tls.crt" --key "$T/tls.key" --policy "$POLICY" ||
    exit 1
ng_eq "threads default to the CPUs usable ($usable)" "$(threads_logged)" "$usable"
ng_serve_stop
ng_serve_start --cert "$T/tls.crt" --key "$T/tls.key" --policy "$POLICY" \
    --threads 3 || exit 1
ng_eq "--threads 3 wins" "$(threads_logged)" 3
ng_serve_stop
# serve_as WRAPPER ARGS...: ng_serve_start with NCCLGUARD run by WRAPPER
# (a script that execs it, so NG_PID stays the server's).
serve_as() {
    local real=$NCCLGUARD rc
    NCCLGUARD=$1
    shift
    ng_serve_start "$@"
    rc=$?
    NCCLGUARD=$real
    return $rc
}
printf '#!/bin/sh\nexec taskset -c 0 "%s" "$@"\n' "$NCCLGUARD" >"$T/one-cpu"
# cpu.max QUOTA: the cgroup v2 CPU limit of QUOTA/100000 CPUs, in a private
# mount namespace (tmpfs over /sys/fs/cgroup; needs CAP_SYS_ADMIN).
# Root gets a plain mount namespace; other users map themselves to root in
# a new user namespace (unshare -r), where mounting tmpfs is allowed too.
unshare_m=""
for u in "unshare -m" "unshare -r -m"; do
    if $u --propagation private sh -c 'mount -t tmpfs cg /sys/fs/cgroup' \
        2>"$T/unshare.err"; then
        unshare_m=$u
        break
    fi
done
printf '#!/bin/sh\nq=$1; shift\nexec %s --propagation private sh -c '"'"'mount -t tmpfs cg /sys/fs/cgroup && echo "$0 100000" >/sys/fs/cgroup/cpu.max && exec "$@"'"'"' "$q" "%s" "$@"\n' \
    "$unshare_m" "$NCCLGUARD" >"$T/cpu-max"
chmod +x "$T/one-cpu" "$T/cpu-max"
for q in 50000 100000 300000; do
    printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$T/cpu-max" "$q" >"$T/quota-$q"
    chmod +x "$T/quota-$q"
done

if [ "$ncpu" -lt 2 ]; then
    echo "SKIP threads from the affinity mask and the cgroup limit (one CPU only: nproc is $ncpu)"
else
    serve_as "$T/one-cpu" --cert "$T/tls.crt" --key "$T/tls.key" \
        --policy "$POLICY" || exit 1
    ng_eq "affinity of one CPU: one worker" "$(threads_logged)" 1
    ng_serve_stop
    if [ -z "$unshare_m" ]; then
        echo "SKIP threads from the cgroup CPU limit (cannot mount a private /sys/fs/cgroup: $(head -n 1 "$T/unshare.err"))"
    else
        three=$((ncpu < 3 ? ncpu : 3))
        for qw in 100000:1 50000:1 300000:$three; do
            q=${qw%:*}
            serve_as "$T/quota-$q" --cert "$T/tls.crt" --key "$T/tls.key" \
                --policy "$POLICY" || exit 1
            ng_eq "cgroup cpu.max $q/100000: ${qw#*:} worker(s)" \
                "$(threads_logged)" "${qw#*:}"
            ng_serve_stop
        done
        ng_eq "the server under a CPU limit exits 0" "$NG_EXIT" 0
    fi
fi

ng_summary
