# shellcheck shell=bash
# A real control plane on loopback for the tests: etcd and kube-apiserver
# built from their Go modules (tests/kube/build.sh), started the way a
# cluster's control plane runs them, and the kubectl of the same release.
# There is no kubelet, scheduler or controller manager: the tests play
# those parts through the API (pods bound by spec.nodeName, statuses written
# through pods/status, the default ServiceAccount created per namespace).
#
# Sourced by a test script:
#   . tests/kube/cluster.sh
#   kube_up DIR [RELEASE]       starts etcd and kube-apiserver (RELEASE 1.37
#                               by default); exports KUBECONFIG, KUBE_SERVER,
#                               KUBE_CA, KUBE_BIN; puts KUBE_BIN first in PATH
#   kube_down                   stops both (also on the caller's EXIT trap)
#   kube_restart_apiserver      stops and starts kube-apiserver on its port
#   kube_ns NAME                a Namespace and its default ServiceAccount
#   kube_node NAME [GPUS]       a GPU Node (GPUS allocatable, a Ready
#                               condition, the nvidia.com/gpu taint)
#   kube_token NS SA POD [SECS] a TokenRequest token bound to POD (which
#                               carries the node-name claim of POD's node)
#   kube_pod_status NS POD JSON writes status as a kubelet would
#   kube_api METHOD PATH [FILE] one request as the administrator (curl)
#
# The flags follow what kubeadm gives a control plane: RBAC and Node
# authorization, the default admission plugins (MutatingAdmissionWebhook,
# ValidatingAdmissionPolicy, ServiceAccount, NodeRestriction, ...), a
# service-account issuer with its signing key, TLS with a client CA.

KUBE_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

kube_log() { echo "kube: $*" >&2; }

# A free loopback TCP port.
kube_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

kube_certs() {
    local d=$1
    (
        cd "$d" || exit 1
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt \
            -days 2 -subj "/CN=ncclguard-test-ca" 2>/dev/null || exit 1
        openssl req -newkey rsa:2048 -nodes -keyout apiserver.key \
            -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null || exit 1
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc,IP:10.96.0.1\nextendedKeyUsage=serverAuth\n' >apiserver.ext
        openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key \
            -CAcreateserial -days 2 -extfile apiserver.ext \
            -out apiserver.crt 2>/dev/null || exit 1
        # The administrator: system:masters, as kubeadm's admin.conf.
        openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr \
            -subj "/O=system:masters/CN=kubernetes-admin" 2>/dev/null || exit 1
        printf 'extendedKeyUsage=clientAuth\n' >client.ext
        openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key \
            -CAcreateserial -days 2 -extfile client.ext \
            -out admin.crt 2>/dev/null || exit 1
        openssl genrsa -out sa.key 2048 2>/dev/null || exit 1
        openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null || exit 1
    )
}

kube_wait_ready() {
    local _
    for _ in $(seq 1 600); do
        if curl -sf --max-time 2 --cacert "$KUBE_DIR/ca.crt" \
            --cert "$KUBE_DIR/admin.crt" --key "$KUBE_DIR/admin.key" \
            "$KUBE_SERVER/readyz" >/dev/null 2>&1; then
            return 0
        fi
        if ! kill -0 "$KUBE_APISERVER_PID" 2>/dev/null; then
            kube_log "kube-apiserver exited; its log:"
            tail -20 "$KUBE_DIR/apiserver.log" >&2
            return 1
        fi
        sleep 0.2
    done
    kube_log "kube-apiserver not ready after 120 s; its log:"
    tail -20 "$KUBE_DIR/apiserver.log" >&2
    return 1
}

kube_start_apiserver() {
    "$KUBE_BIN/kube-apiserver" \
        --etcd-servers="http://127.0.0.1:$KUBE_ETCD_PORT" \
        --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
        --endpoint-reconciler-type=none \
        --secure-port="$KUBE_PORT" \
        --tls-cert-file="$KUBE_DIR/apiserver.crt" \
        --tls-private-key-file="$KUBE_DIR/apiserver.key" \
        --client-ca-file="$KUBE_DIR/ca.crt" \
        --authorization-mode=Node,RBAC \
        --enable-admission-plugins=NodeRestriction \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --service-account-key-file="$KUBE_DIR/sa.pub" \
        --service-account-signing-key-file="$KUBE_DIR/sa.key" \
        --api-audiences=https://kubernetes.default.svc.cluster.local \
        --service-cluster-ip-range=10.96.0.0/12 \
        --allow-privileged=true \
        --cert-dir="$KUBE_DIR/apiserver-certs" \
        ${KUBE_APISERVER_FLAGS:-} \
        >>"$KUBE_DIR/apiserver.log" 2>&1 &
    KUBE_APISERVER_PID=$!
    kube_wait_ready
}

kube_up() {
    KUBE_DIR=$1
    local rel=${2:-${KUBE_RELEASE:-1.37}}
    mkdir -p "$KUBE_DIR"
    KUBE_BIN=$("$KUBE_HERE/build.sh" "$rel") || return 1
    export KUBE_BIN
    export PATH="$KUBE_BIN:$PATH"
    kube_certs "$KUBE_DIR" || { kube_log "openssl could not make the certificates"; return 1; }
    KUBE_ETCD_PORT=$(kube_port)
    local peer
    peer=$(kube_port)
    "$KUBE_BIN/etcd" --data-dir "$KUBE_DIR/etcd" --name test \
        --listen-client-urls "http://127.0.0.1:$KUBE_ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$KUBE_ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "test=http://127.0.0.1:$peer" \
        --unsafe-no-fsync --log-level warn \
        >"$KUBE_DIR/etcd.log" 2>&1 &
    KUBE_ETCD_PID=$!
    KUBE_PORT=$(kube_port)
    export KUBE_SERVER="https://127.0.0.1:$KUBE_PORT"
    export KUBE_CA="$KUBE_DIR/ca.crt"
    kube_start_apiserver || return 1
    export KUBECONFIG="$KUBE_DIR/kubeconfig"
    kubectl config set-cluster test --server="$KUBE_SERVER" \
        --certificate-authority="$KUBE_CA" --embed-certs >/dev/null &&
        kubectl config set-credentials admin --client-certificate="$KUBE_DIR/admin.crt" \
            --client-key="$KUBE_DIR/admin.key" --embed-certs >/dev/null &&
        kubectl config set-context test --cluster=test --user=admin >/dev/null &&
        kubectl config use-context test >/dev/null || return 1
    # Wait for the bootstrap RBAC roles (the poststarthook) and the default
    # namespace's existence before any test uses them.
    local _
    for _ in $(seq 1 100); do
        kubectl get clusterrole system:node >/dev/null 2>&1 &&
            kubectl get namespace default >/dev/null 2>&1 && break
        sleep 0.2
    done
    kubectl -n default create serviceaccount default >/dev/null 2>&1
    kube_log "kube-apiserver $(kubectl version -o json 2>/dev/null | jq -r .serverVersion.gitVersion) and etcd ready at $KUBE_SERVER"
}

# kube_stop PID: SIGTERM, then SIGKILL after 5 s (kube-apiserver drains
# open watches on SIGTERM for up to a minute).
kube_stop() {
    [ -n "${1:-}" ] || return 0
    kill "$1" 2>/dev/null || return 0
    local _
    for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}

kube_restart_apiserver() {
    kube_stop "$KUBE_APISERVER_PID"
    kube_start_apiserver
}

kube_down() {
    kube_stop "${KUBE_APISERVER_PID:-}"
    kube_stop "${KUBE_ETCD_PID:-}"
    KUBE_APISERVER_PID=
    KUBE_ETCD_PID=
}

kube_ns() {
    kubectl create namespace "$1" >/dev/null 2>&1
    # No controller manager: the ServiceAccount admission plugin refuses a
    # pod whose ServiceAccount does not exist, so create the default one.
    kubectl -n "$1" create serviceaccount default >/dev/null 2>&1
    return 0
}

kube_node() {
    local name=$1 gpus=${2:-8}
    kubectl apply -f - >/dev/null <<NODE || return 1
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels:
    kubernetes.io/hostname: $name
    nvidia.com/gpu.present: "true"
spec:
  # GPU nodes commonly carry this taint (the GPU Operator's, or set by
  # hand) so that only pods that ask for GPUs land there.
  taints:
    - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
NODE
    kubectl patch node "$name" --subresource=status --type=merge -p \
        "{\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"$gpus\",\"cpu\":\"64\",\"memory\":\"512Gi\",\"pods\":\"110\"},\"allocatable\":{\"nvidia.com/gpu\":\"$gpus\",\"cpu\":\"64\",\"memory\":\"512Gi\",\"pods\":\"110\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"test\",\"lastHeartbeatTime\":\"$(date -u +%FT%TZ)\",\"lastTransitionTime\":\"$(date -u +%FT%TZ)\"}]}}" \
        >/dev/null
}

kube_token() {
    local ns=$1 sa=$2 pod=$3 secs=${4:-3600} uid
    uid=$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.metadata.uid}') || return 1
    kubectl -n "$ns" create token "$sa" --bound-object-kind=Pod \
        --bound-object-name="$pod" --bound-object-uid="$uid" --duration="${secs}s"
}

# kube_api METHOD PATH [FILE|-] [CONTENT-TYPE]: one request as the
# administrator, with curl (a kubectl process costs a second or more on a
# loaded machine); prints the answer and "\nHTTP <code>" last.
kube_api() {
    local ct=${4:-application/json}
    curl -sS --max-time 30 --cacert "$KUBE_DIR/ca.crt" \
        --cert "$KUBE_DIR/admin.crt" --key "$KUBE_DIR/admin.key" \
        -X "$1" ${3:+-H "Content-Type: $ct" --data-binary "@$3"} \
        -w '\nHTTP %{http_code}\n' "$KUBE_SERVER$2"
}

kube_pod_status() {
    kubectl -n "$1" patch pod "$2" --subresource=status --type=merge -p "$3" >/dev/null
}
