# Shell helpers shared by bench/run.sh, bench/soak.sh and bench/faults.sh:
# throwaway certificates, starting and stopping servers, CPU pinning, RSS.
# Expects NCCLGUARD and LOADGEN in the environment and sets $work.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${BENCH_OUT:-$root/build/bench}
mkdir -p "$work"
server_pid=

# Two or more CPUs: the server gets CPU 0, the load generator CPU 1.
if [ "$(nproc)" -ge 2 ]; then
    PIN_SERVER="taskset -c 0"
    PIN_LOAD="taskset -c 1"
else
    PIN_SERVER=
    PIN_LOAD=
fi

# A CA and a serving certificate for 127.0.0.1 in $1 (default $work/tls).
make_certs() {
    local d=${1:-$work/tls} cn=${2:-bench}
    mkdir -p "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -days 2 -subj "/CN=$cn-ca" -keyout "$d/ca.key" -out "$d/ca.crt" \
        2>/dev/null &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj /CN=127.0.0.1 -keyout "$d/tls.key" -out "$d/tls.csr" \
        2>/dev/null &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/ext" &&
    openssl x509 -req -in "$d/tls.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" \
        -CAcreateserial -days 2 -extfile "$d/ext" -out "$d/tls.crt" \
        2>/dev/null
}

free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 40000))
        ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
    done
}

# status of GET $1 on $port, trusting $work/tls/ca.crt (or $CAFILE)
http_get() {
    curl -sS --max-time 5 --cacert "${CAFILE:-$work/tls/ca.crt}" \
        -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port$1" 2>/dev/null
}

# Waits until GET $1 (default /readyz) answers $2 (default 200; "any" takes
# any HTTP status, for a server without a readiness path).
wait_ready() {
    local path=${1:-/readyz} want=${2:-200} i code
    for i in $(seq 1 200); do
        code=$(http_get "$path")
        [ "$code" = "$want" ] && return 0
        [ "$want" = any ] && [ -n "$code" ] && [ "$code" != 000 ] && return 0
        kill -0 "$server_pid" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# Starts ncclguard serve pinned to the server CPU; sets port and server_pid.
start_ncclguard() {
    port=$(free_port)
    $PIN_SERVER "$NCCLGUARD" serve --listen "127.0.0.1:$port" \
        --cert "${CERT:-$work/tls/tls.crt}" --key "${KEY:-$work/tls/tls.key}" \
        --policy "${POLICY:-$root/policy/default.yaml}" "$@" \
        >"${SERVER_LOG:-$work/ncclguard.log}" 2>&1 &
    server_pid=$!
    wait_ready || { echo "bench: ncclguard did not start:" >&2
        tail -5 "${SERVER_LOG:-$work/ncclguard.log}" >&2; return 1; }
}

# Starts nginx answering POST /mutate with the bytes of file $1. The static
# module refuses POST with 405, which error_page turns into an internal
# GET of the same file answered 200: the body is read and discarded, the
# file served as is.
start_nginx() {
    port=$(free_port)
    mkdir -p "$work/nginx"
    cp "$1" "$work/nginx/mutate.json"
    cat >"$work/nginx/nginx.conf" <<EOC
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    client_max_body_size 4m;
    client_body_buffer_size 4m;
    keepalive_requests 100000000;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate ${CERT:-$work/tls/tls.crt};
        ssl_certificate_key ${KEY:-$work/tls/tls.key};
        ssl_protocols TLSv1.2 TLSv1.3;
        location = /mutate {
            default_type application/json;
            alias $work/nginx/mutate.json;
            error_page 405 =200 \$uri;
        }
        location = /readyz { return 200 'ok'; }
    }
}
EOC
    $PIN_SERVER nginx -c "$work/nginx/nginx.conf" -g 'daemon off;' \
        >"$work/nginx/stdout.log" 2>&1 &
    server_pid=$!
    wait_ready || { echo "bench: nginx did not start:" >&2
        cat "$work/nginx/error.log" >&2; return 1; }
}

# Starts the Go standard-library peer ($PEER_GO_BIN, built from
# ../shared/bench/peer-go) on the server CPU with one Go thread, same
# certificate. It has no /readyz, so any answer on /mutate means it is up.
start_peer_go() {
    port=$(free_port)
    GOMAXPROCS=1 $PIN_SERVER "$PEER_GO_BIN" -addr "127.0.0.1:$port" \
        -cert "${CERT:-$work/tls/tls.crt}" -key "${KEY:-$work/tls/tls.key}" \
        >"$work/peer-go.log" 2>&1 &
    server_pid=$!
    wait_ready /mutate any || { echo "bench: the Go peer did not start:" >&2
        tail -5 "$work/peer-go.log" >&2; return 1; }
}

stop_server() {
    if [ -n "$server_pid" ]; then
        kill -TERM "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
        server_pid=
    fi
}

# Peak and current resident memory (KiB) of $1 and its children (nginx
# workers), from /proc.
rss_kib() {
    local pid=$1 field=${2:-VmRSS} total=0 p v
    for p in $pid $(pgrep -P "$pid" 2>/dev/null); do
        v=$(awk -v f="$field:" '$1 == f { print $2 }' "/proc/$p/status" \
            2>/dev/null)
        [ -n "$v" ] && total=$((total + v))
    done
    echo "$total"
}

# For nginx the measured process is its single worker.
worker_pid() {
    local c
    c=$(pgrep -P "$1" | head -1)
    echo "${c:-$1}"
}
