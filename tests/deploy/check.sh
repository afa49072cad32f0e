#!/bin/sh
# Renders every kustomize overlay offline and checks the objects: the webhook
# registration, Service, probes against the server's routes, the GPU names
# the CEL condition sends, the certificate plumbing of each overlay, the
# profile component, the policy copy and the Dockerfiles.
# shellcheck disable=SC2013,SC2015,SC2016
set -u

: "${NCCLGUARD:?set NCCLGUARD to the ncclguard binary}"
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# check WHAT JSON FILTER [jq args]: FILTER must be true on JSON (a file).
check() {
    what=$1 json=$2 filter=$3
    shift 3
    if jq -e "$@" "$filter" "$json" >/dev/null 2>"$T/jqerr"; then ok; else
        bad "$what"
        echo "  jq: $filter" >&2
        sed 's/^/  /' "$T/jqerr" >&2
    fi
}

# render DIR NAME: kubectl kustomize DIR as a JSON array in $T/NAME.json.
render() {
    if kubectl kustomize "$1" >"$T/$2.yaml" 2>"$T/err" &&
        yq -s . "$T/$2.yaml" >"$T/$2.json" 2>>"$T/err"; then ok; else
        bad "kubectl kustomize $1"
        sed 's/^/  /' "$T/err" >&2
        echo '[]' >"$T/$2.json"
    fi
}

render deploy/base base
render deploy/overlays/self-signed ss
render deploy/overlays/cert-manager cm
# A user's overlay: self-signed plus the profile component.
mkdir -p "$T/user"
rel=$(realpath --relative-to="$T/user" "$ROOT")
cat >"$T/user/kustomization.yaml" <<EOK
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel/deploy/overlays/self-signed]
components: [$rel/deploy/components/nccl-profile]
EOK
render "$T/user" user

# --- one object per file in deploy/ --------------------------------------
# shellcheck disable=SC2044 # no spaces in these paths
for f in $(find deploy -name '*.yaml' ! -name kustomization.yaml ! -name kustomizeconfig.yaml ! -path 'deploy/examples/*'); do
    [ "$f" = deploy/base/policy.yaml ] && continue
    [ "$f" = deploy/components/node-health/policy.yaml ] && continue
    # A top-level kind: line per object, and no document separator.
    n=$(grep -c '^kind:' "$f")
    [ "$n" = 1 ] && ! grep -q '^---' "$f" && ok ||
        bad "$f holds $n objects, expected one"
done

# --- what every installation shares -----------------------------------------
for o in ss cm user; do
    J=$T/$o.json
    check "$o: one Namespace, every namespaced object in it" "$J" '
        ([.[] | select(.kind == "Namespace")] | length == 1) and
        ((.[] | select(.kind == "Namespace") | .metadata.name) as $ns |
         [.[] | select(.kind == "Deployment" or .kind == "Service" or
                       .kind == "ServiceAccount" or .kind == "Job" or
                       .kind == "CronJob" or .kind == "NetworkPolicy" or
                       .kind == "ResourceQuota" or
                       .kind == "PodDisruptionBudget") |
          .metadata.namespace == $ns] | all)'
    check "$o: one MutatingWebhookConfiguration with one webhook" "$J" '
        [.[] | select(.kind == "MutatingWebhookConfiguration")] |
        length == 1 and (.[0].webhooks | length == 1)'
    W='(.[] | select(.kind == "MutatingWebhookConfiguration") | .webhooks[0])'
    check "$o: webhook admissionReviewVersions [v1]" "$J" "$W.admissionReviewVersions == [\"v1\"]"
    check "$o: webhook sideEffects None" "$J" "$W.sideEffects == \"None\""
    check "$o: webhook failurePolicy Ignore" "$J" "$W.failurePolicy == \"Ignore\""
    check "$o: webhook timeoutSeconds 1..5" "$J" "$W.timeoutSeconds >= 1 and $W.timeoutSeconds <= 5"
    check "$o: webhook reinvocationPolicy IfNeeded" "$J" "$W.reinvocationPolicy == \"IfNeeded\""
    check "$o: webhook rules: pods CREATE only" "$J" "$W.rules == [{
        apiGroups: [\"\"], apiVersions: [\"v1\"], operations: [\"CREATE\"],
        resources: [\"pods\"], scope: \"Namespaced\"}]"
    check "$o: webhook calls the Service on 443 at /mutate" "$J" "
        (.[] | select(.kind == \"Service\")) as \$svc |
        $W.clientConfig.service == {name: \$svc.metadata.name,
            namespace: \$svc.metadata.namespace, path: \"/mutate\", port: 443} and
        ([\$svc.spec.ports[] | select(.port == 443)] | length == 1)"
    check "$o: namespaceSelector skips kube-system, kube-public, kube-node-lease and its own namespace" "$J" "
        (.[] | select(.kind == \"Namespace\") | .metadata.name) as \$ns |
        [$W.namespaceSelector.matchExpressions[] |
         select(.key == \"kubernetes.io/metadata.name\" and .operator == \"NotIn\") |
         .values] | length == 1 and
        (.[0] | index(\"kube-system\") != null and index(\"kube-public\") != null and
                index(\"kube-node-lease\") != null and index(\$ns) != null)"
    check "$o: namespaceSelector honours the opt-out label" "$J" "
        [$W.namespaceSelector.matchExpressions[] |
         select(.key == \"ncclguard.io/inject\" and .operator == \"NotIn\" and
                .values == [\"false\"])] | length == 1"
    check "$o: no objectSelector and no matchLabels that would narrow it" "$J" "
        ($W.objectSelector == null) and ($W.namespaceSelector.matchLabels == null)"
    check "$o: CEL looks at containers and initContainers, limits and requests" "$J" "
        [$W.matchConditions[] | select(.name == \"requests-gpu\") | .expression] |
        length == 1 and (.[0] | contains(\"object.spec.containers\") and
            contains(\"object.spec.initContainers\") and
            contains(\"resources.limits\") and contains(\"resources.requests\"))"
    check "$o: CEL also sends pods with DRA resource claims" "$J" "
        [$W.matchConditions[] | select(.name == \"requests-gpu\") | .expression] |
        .[0] | contains(\"size(object.spec.resourceClaims) > 0\")"
    check "$o: CEL parentheses balance" "$J" "
        [$W.matchConditions[].expression | explode |
         (map(select(. == 40)) | length) == (map(select(. == 41)) | length)] | all"

    D='(.[] | select(.kind == "Deployment"))'
    C="($D.spec.template.spec.containers[0])"
    check "$o: Deployment 2 replicas, topology spread on hostname and zone" "$J" "
        $D.spec.replicas == 2 and
        ([$D.spec.template.spec.topologySpreadConstraints[].topologyKey] |
         index(\"kubernetes.io/hostname\") != null and
         index(\"topology.kubernetes.io/zone\") != null)"
    check "$o: Deployment image" "$J" "$C.image == \"ghcr.io/ncclguard/ncclguard:0.1.0\""
    check "$o: Deployment args" "$J" "$C.args == [\"serve\", \"--listen\",
        \"0.0.0.0:8443\", \"--cert\", \"/certs/tls.crt\", \"--key\",
        \"/certs/tls.key\", \"--policy\", \"/etc/ncclguard/policy.yaml\"]"
    check "$o: POD_NAMESPACE from the downward API" "$J" "
        [$C.env[] | select(.name == \"POD_NAMESPACE\") |
         .valueFrom.fieldRef.fieldPath] == [\"metadata.namespace\"]"
    check "$o: requests and limits for cpu and memory" "$J" "
        $C.resources.requests.cpu and $C.resources.requests.memory and
        $C.resources.limits.cpu and $C.resources.limits.memory"
    check "$o: locked down (non-root, read-only root, drop ALL, RuntimeDefault)" "$J" "
        $D.spec.template.spec.securityContext.runAsNonRoot == true and
        $D.spec.template.spec.securityContext.runAsUser > 0 and
        $D.spec.template.spec.securityContext.seccompProfile.type == \"RuntimeDefault\" and
        $C.securityContext.readOnlyRootFilesystem == true and
        $C.securityContext.allowPrivilegeEscalation == false and
        $C.securityContext.capabilities.drop == [\"ALL\"] and
        $C.securityContext.runAsNonRoot == true and
        $C.securityContext.seccompProfile.type == \"RuntimeDefault\" and
        ($C.securityContext.capabilities.add == null)"
    # The probes hit the server's own routes on its HTTPS port.
    check "$o: liveness /healthz and readiness /readyz over HTTPS on 8443" "$J" "
        ($C.ports | map({(.name): .containerPort}) | add) as \$ports |
        def port(p): if (p | type) == \"number\" then p else \$ports[p] end;
        $C.livenessProbe.httpGet.path == \"/healthz\" and
        $C.livenessProbe.httpGet.scheme == \"HTTPS\" and
        port($C.livenessProbe.httpGet.port) == 8443 and
        $C.readinessProbe.httpGet.path == \"/readyz\" and
        $C.readinessProbe.httpGet.scheme == \"HTTPS\" and
        port($C.readinessProbe.httpGet.port) == 8443"
    check "$o: Service 443 -> the container's 8443" "$J" "
        ($C.ports | map({(.name): .containerPort}) | add) as \$ports |
        (.[] | select(.kind == \"Service\") | .spec.ports[0]) as \$p |
        \$p.port == 443 and
        (if (\$p.targetPort | type) == \"number\" then \$p.targetPort
         else \$ports[\$p.targetPort] end) == 8443"
    check "$o: Service and PDB select the webhook pods" "$J" "
        $D.spec.template.metadata.labels as \$l |
        (.[] | select(.kind == \"Service\") | .spec.selector |
         to_entries | all(\$l[.key] == .value)) and
        (.[] | select(.kind == \"PodDisruptionBudget\") |
         .spec.selector.matchLabels | to_entries | all(\$l[.key] == .value))"
    check "$o: PDB keeps at least one of the replicas" "$J" "
        (.[] | select(.kind == \"PodDisruptionBudget\") | .spec.minAvailable) as \$m |
        \$m >= 1 and \$m < $D.spec.replicas"
    check "$o: certificate Secret mounted where --cert and --key point" "$J" "
        ($D.spec.template.spec.volumes[] | select(.secret) ) as \$v |
        [$C.volumeMounts[] | select(.name == \$v.name and .mountPath == \"/certs\" and
                                    .readOnly == true and .subPath == null)] | length == 1"
    check "$o: policy ConfigMap mounted at /etc/ncclguard with policy.yaml" "$J" "
        ($D.spec.template.spec.volumes[] | select(.configMap)) as \$v |
        ([.[] | select(.kind == \"ConfigMap\" and .metadata.name == \$v.configMap.name) |
          .data[\"policy.yaml\"]] | length == 1) and
        ([$C.volumeMounts[] | select(.name == \$v.name and .mountPath == \"/etc/ncclguard\" and
                                     .subPath == null)] | length == 1)"
    check "$o: webhook ServiceAccount has no token and no RBAC" "$J" "
        $D.spec.template.spec.serviceAccountName as \$sa |
        $D.spec.template.spec.automountServiceAccountToken == false and
        ([.[] | select(.kind == \"RoleBinding\" or .kind == \"ClusterRoleBinding\") |
          .subjects[] | select(.name == \$sa)] | length == 0)"
    check "$o: NCCL profile ConfigMap with NCCL_ variables and its marker" "$J" '
        [.[] | select(.kind == "ConfigMap" and .metadata.name == "nccl-production-profile")] |
        length >= 1 and all(.data | length > 1 and
            .NCCLGUARD_PROFILE == "nccl-production-profile" and
            (del(.NCCLGUARD_PROFILE) | keys | all(startswith("NCCL_"))))'
done

# --- network policy, priority, Kubernetes version -------------------------
for o in ss cm; do
    J=$T/$o.json
    D='(.[] | select(.kind == "Deployment"))'
    check "$o: a default-deny ingress policy covers every pod of the namespace" "$J" "
        $D.metadata.namespace as \$ns |
        [.[] | select(.kind == \"NetworkPolicy\" and .metadata.namespace == \$ns and
                      .spec.podSelector == {} and .spec.policyTypes == [\"Ingress\"] and
                      ((.spec.ingress // []) | length == 0))] | length == 1"
    # The port the webhook listens on, whatever the source (the apiserver's
    # address cannot be named portably); no other port and no egress rule.
    check "$o: the webhook pods take TCP on their container port 8443 only, from any source" "$J" "
        $D as \$d | \$d.spec.template.metadata.labels as \$l |
        (\$d.spec.template.spec.containers[0].ports | map({(.name): .containerPort}) | add) as \$ports |
        (.[] | select(.kind == \"Service\") | .spec.ports[0].targetPort) as \$tp |
        (if (\$tp | type) == \"number\" then \$tp else \$ports[\$tp] end) as \$port |
        [.[] | select(.kind == \"NetworkPolicy\" and .spec.podSelector.matchLabels != null and
                      (.spec.podSelector.matchLabels | to_entries | all(\$l[.key] == .value)))] as \$np |
        (\$np | length == 1) and \$port == 8443 and
        \$np[0].spec.policyTypes == [\"Ingress\"] and
        \$np[0].spec.ingress == [{ports: [{protocol: \"TCP\", port: \$port}]}]"
    check "$o: the webhook runs at system-cluster-critical, with a quota scope that admits it" "$J" "
        $D as \$d |
        \$d.spec.template.spec.priorityClassName == \"system-cluster-critical\" and
        ([.[] | select(.kind == \"ResourceQuota\" and .metadata.namespace == \$d.metadata.namespace) |
          select(.spec.scopeSelector.matchExpressions | any(
              .scopeName == \"PriorityClass\" and .operator == \"In\" and
              (.values | index(\"system-cluster-critical\") != null))) |
          select((.spec.hard.pods | tonumber) >=
                 \$d.spec.replicas + \$d.spec.strategy.rollingUpdate.maxSurge) |
          select(.spec.hard | keys == [\"pods\"])] | length == 1)"
    # Every kind at an API version that Kubernetes 1.34 serves (the minimum:
    # the oldest release tests/kube runs), cert-manager's aside.
    check "$o: every object's apiVersion is served by Kubernetes 1.34" "$J" '
        [.[] | .apiVersion | select(startswith("cert-manager.io/") | not)] - ["v1",
         "apps/v1", "batch/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
         "networking.k8s.io/v1", "admissionregistration.k8s.io/v1"] == []'
done
grep -q 'Kubernetes 1.34 or later' docs/deploy.md && grep -q 'Kubernetes 1.34 or later' README.md &&
    ! grep -q 'Kubernetes 1\.\(2[0-9]\|3[0-3]\) or later' README.md docs/*.md &&
    ok || bad "docs/deploy.md and README.md must state the minimum, Kubernetes 1.34 or later (the oldest release tests/kube runs), and no doc an older one"

# --- the real server, started with the Deployment's own arguments ---------
# Paths map to a throwaway certificate and the policy copy; the listen
# address to a free loopback port. The probes and the webhook's path must
# answer as the kubelet and the apiserver expect.
J=$T/ss.json
DEP='(.[] | select(.kind == "Deployment") | .spec.template.spec.containers[0])'
mkdir -p "$T/srv"
"$NCCLGUARD" certs create --service ncclguard --namespace ncclguard \
    --out "$T/srv/certs" --san 127.0.0.1 >/dev/null 2>&1
jq -r "$DEP.args[]" "$J" | sed -e 's#^0\.0\.0\.0:8443$#127.0.0.1:0#' \
    -e "s#^/certs/#$T/srv/certs/#" -e "s#^/etc/ncclguard/#$ROOT/deploy/base/#" \
    >"$T/srv/args"
: >"$T/srv/log"
# shellcheck disable=SC2046
POD_NAMESPACE=ncclguard "$NCCLGUARD" $(cat "$T/srv/args") >"$T/srv/log" 2>&1 &
srv=$!
port=
for _ in $(seq 50); do
    port=$(sed -n 's/.*"msg":"listening".*"port":\([0-9]*\).*/\1/p' "$T/srv/log")
    [ -n "$port" ] && break
    kill -0 "$srv" 2>/dev/null || break
    sleep 0.1
done
if [ -n "$port" ]; then
    ok
    for probe in livenessProbe readinessProbe; do
        path=$(jq -r "$DEP.$probe.httpGet.path" "$J")
        scheme=$(jq -r "$DEP.$probe.httpGet.scheme" "$J" | tr '[:upper:]' '[:lower:]')
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
            --cacert "$T/srv/certs/ca.crt" "$scheme://127.0.0.1:$port$path")
        [ "$code" -ge 200 ] && [ "$code" -lt 400 ] && ok ||
            bad "$probe $scheme $path answered $code (the kubelet wants 2xx or 3xx)"
    done
    wpath=$(jq -r '.[] | select(.kind == "MutatingWebhookConfiguration") |
        .webhooks[0].clientConfig.service.path' "$J")
    curl -s --max-time 5 --cacert "$T/srv/certs/ca.crt" \
        -H 'Content-Type: application/json' \
        --data-binary @deploy/examples/admissionreview-gpu-pod.json \
        -o "$T/srv/review.json" -w '%{http_code}' \
        "https://127.0.0.1:$port$wpath" >"$T/srv/code"
    check "the webhook's path $wpath answers an AdmissionReview" "$T/srv/review.json" '
        .kind == "AdmissionReview" and .response.allowed == true and
        (.response.uid | type == "string")'
    [ "$(cat "$T/srv/code")" = 200 ] && ok || bad "POST $wpath answered $(cat "$T/srv/code")"
else
    bad "ncclguard serve did not start with the Deployment's arguments"
    sed 's/^/  /' "$T/srv/log" >&2
fi
kill "$srv" 2>/dev/null
wait "$srv" 2>/dev/null

# --- self-signed: CronJob, RBAC, and the CronJob's steps run here ---------
J=$T/ss.json
CJ='(.[] | select(.kind == "CronJob"))'
JT="($CJ.spec.jobTemplate.spec.template)"
check "self-signed: one CronJob and no Job (a Job's pod template is immutable, so a new image tag would fail kubectl apply)" "$J" "
    ([.[] | select(.kind == \"CronJob\")] | length == 1) and
    ([.[] | select(.kind == \"Job\")] | length == 0)"
check "self-signed: the CronJob runs one at a time, cleans up after itself" "$J" "
    $CJ.spec.concurrencyPolicy == \"Forbid\" and
    ($CJ.spec.schedule | split(\" \") | length == 5) and
    $CJ.spec.successfulJobsHistoryLimit >= 1 and
    $CJ.spec.jobTemplate.spec.ttlSecondsAfterFinished > 0 and
    $CJ.spec.jobTemplate.spec.activeDeadlineSeconds > 0"
# Renewal happens well before expiry: the window is at least twice as long
# as the time between runs (hourly here), and shorter than the validity.
check "self-signed: renews before expiry, runs at least daily" "$J" "
    $JT.spec.initContainers[0].args as \$a |
    (\$a | index(\"--renew-before\")) as \$i | (\$a[\$i + 1] | tonumber) as \$rb |
    (\$a | index(\"--days\")) as \$j | (\$a[\$j + 1] | tonumber) as \$d |
    \$rb >= 2 and \$rb < \$d and
    ($CJ.spec.schedule | split(\" \") | .[2:] == [\"*\", \"*\", \"*\"]) and
    (\$a | index(\"--current\")) != null"
check "self-signed: the CronJob creates for the Service's name and namespace" "$J" "
    (.[] | select(.kind == \"Service\")) as \$s |
    $JT.spec.initContainers[0].args as \$a |
    \$a[0:2] == [\"certs\", \"create\"] and
    (\$a | index(\"--service\")) as \$i | \$a[\$i + 1] == \$s.metadata.name and
    (\$a | index(\"--namespace\")) as \$j | \$a[\$j + 1] == \$s.metadata.namespace"
check "self-signed: the CronJob reads the pair in service from the Secret the Deployment mounts" "$J" "
    (.[] | select(.kind == \"Deployment\") | .spec.template.spec.volumes[] |
     select(.secret) | .secret.secretName) as \$name |
    $JT.spec.initContainers[0].args as \$a |
    (\$a | index(\"--current\")) as \$i | \$a[\$i + 1] as \$dir |
    ($JT.spec.initContainers[0].volumeMounts[] | select(.mountPath == \$dir) | .name) as \$m |
    ($JT.spec.volumes[] | select(.name == \$m) | .secret) as \$v |
    \$v.secretName == \$name and \$v.optional == true"
check "self-signed: the CronJob's script writes the Secret the Deployment mounts" "$J" "
    (.[] | select(.kind == \"Deployment\") | .spec.template.spec.volumes[] |
     select(.secret) | .secret.secretName) as \$name |
    $JT.spec.containers[0].command[-1] |
    contains(\"create secret generic \" + \$name) and contains(\"kubernetes.io/tls\")"
check "self-signed: the CronJob reads no policy (the webhook configuration does not depend on it)" "$J" "
    ([$JT.spec.volumes[] | select(.configMap)] | length == 0) and
    ($JT.spec.initContainers[1].args | index(\"--policy\")) == null and
    ($JT.spec.initContainers[1].args | index(\"--ca-bundle-only\")) != null"
check "self-signed: the CronJob's pod runs restricted" "$J" "
    $JT.spec.securityContext.runAsNonRoot == true and
    $JT.spec.securityContext.seccompProfile.type == \"RuntimeDefault\" and
    ([$JT.spec.initContainers[], $JT.spec.containers[] |
      .securityContext.allowPrivilegeEscalation == false and
      .securityContext.capabilities.drop == [\"ALL\"]] | all)"
check "self-signed: Role lets the CronJob create, get and patch its Secrets" "$J" '
    ([.[] | select(.kind == "Role") | .rules[] | select(.resources == ["secrets"]) |
      .verbs[]] | index("create") != null and index("get") != null and
      index("patch") != null) and
    ([.[] | select(.kind == "RoleBinding") | .subjects[].name] | index("ncclguard-certs") != null)'
check "self-signed: ClusterRole lets the CronJob patch only this webhook configuration" "$J" '
    (.[] | select(.kind == "MutatingWebhookConfiguration") | .metadata.name) as $mwc |
    [.[] | select(.kind == "ClusterRole") | .rules[]] ==
      [{apiGroups: ["admissionregistration.k8s.io"],
        resources: ["mutatingwebhookconfigurations"], resourceNames: [$mwc],
        verbs: ["get", "patch"]}] and
    ([.[] | select(.kind == "ClusterRoleBinding") | .subjects[].name] | index("ncclguard-certs") != null)'
check "self-signed: the CronJob's ServiceAccount is the one bound" "$J" "
    $JT.spec.serviceAccountName == \"ncclguard-certs\""

# Run the CronJob's two ncclguard steps with its own arguments (/work, /ca
# and /tls mapped to temporary folders), then its kubectl script against a
# stand-in that applies the patch to the rendered webhook configuration.
jobargs() {
    jq -r "$JT.spec.initContainers[$1].args[]" "$J" |
        sed -e "s#^/work#$T/work#" -e "s#^/ca\$#$T/ca#" -e "s#^/tls\$#$T/tls#"
}
runjob() {
    # shellcheck disable=SC2046
    if "$NCCLGUARD" $(jobargs 0) >"$T/bundle$1" 2>"$T/err" &&
        "$NCCLGUARD" $(jobargs 1) 2>>"$T/err"; then ok; else
        bad "the CronJob's ncclguard steps failed (run $1)"
        sed 's/^/  /' "$T/err" >&2
    fi
}
mkdir -p "$T/ca" "$T/tls"
runjob 1
jq '.[] | select(.kind == "MutatingWebhookConfiguration")' "$J" >"$T/mwc.json"
# The kubectl stand-in: `create ... --dry-run=client` runs the real kubectl
# (offline), `apply` keeps what it is given, `patch` runs the real kubectl
# patch --local on the rendered webhook configuration with the script's own
# --type and patch file.
REAL_KUBECTL=$(command -v kubectl)
mkdir -p "$T/bin" "$T/applied"
cat >"$T/bin/kubectl" <<EOK
#!/bin/sh
case " \$* " in
*" create "*) exec "$REAL_KUBECTL" "\$@" ;;
*" apply "*) n=\$(ls "$T/applied" | grep -c "args\$")
    echo "\$*" >"$T/applied/\$n.args"; cat >"$T/applied/\$n.yaml" ;;
*" patch mutatingwebhookconfiguration ncclguard "*) echo "\$*" >"$T/patch.args"
    shift 3
    exec "$REAL_KUBECTL" patch --local -f "$T/mwc.json" "\$@" -o json >"$T/patched.json" ;;
*) echo "unexpected kubectl \$*" >&2; exit 1 ;;
esac
EOK
chmod +x "$T/bin/kubectl"
jq -r "$JT.spec.containers[0].command[-1]" "$J" |
    sed "s#/work/#$T/work/#g" >"$T/apply.sh"
if PATH="$T/bin:$PATH" sh -eu "$T/apply.sh" >"$T/out" 2>&1; then ok; else
    bad "the CronJob's kubectl script failed"
    sed 's/^/  /' "$T/out" >&2
fi
for n in 0 1; do
    yq . "$T/applied/$n.yaml" >"$T/applied/$n.json" 2>/dev/null ||
        echo null >"$T/applied/$n.json"
    grep -q -- '--server-side' "$T/applied/$n.args" 2>/dev/null && ok ||
        bad "the CronJob applies Secret $n without --server-side (keys would land in an annotation)"
done
check "self-signed: the CronJob stores the CA and its key in ncclguard-ca" "$T/applied/0.json" '
    .kind == "Secret" and .metadata.name == "ncclguard-ca" and
    (.data | keys) == ["ca.crt", "ca.key"]'
check "self-signed: the CronJob stores a TLS Secret the Deployment mounts" "$T/applied/1.json" '
    .kind == "Secret" and .type == "kubernetes.io/tls" and
    .metadata.name == $name and .metadata.namespace == $ns and
    (.data | keys) == ["ca.crt", "tls.crt", "tls.key"]' \
    --arg name "$(jq -r '.[] | select(.kind == "Deployment") | .spec.template.spec.volumes[] | select(.secret) | .secret.secretName' "$J")" \
    --arg ns "$(jq -r '.[] | select(.kind == "Deployment") | .metadata.namespace' "$J")"
jq -r '.data["tls.crt"] // empty' "$T/applied/1.json" | base64 -d >"$T/s.crt"
jq -r '.data["ca.crt"] // empty' "$T/applied/1.json" | base64 -d >"$T/s.ca"
if openssl verify -CAfile "$T/s.ca" "$T/s.crt" >/dev/null 2>&1 &&
    "$NCCLGUARD" certs inspect "$T/s.crt" --ca "$T/s.ca" \
        --check-host ncclguard.ncclguard.svc >/dev/null 2>&1; then ok; else
    bad "the stored tls.crt does not verify against the stored ca.crt for ncclguard.ncclguard.svc"
fi
check "self-signed: the patch sets the printed caBundle" "$T/patched.json" \
    '.webhooks[0].clientConfig.caBundle == $b' --arg b "$(cat "$T/bundle1")"
# The patch changes nothing but the caBundle: every other field keeps what
# kubectl apply -k put there (a merge patch would replace the webhooks list).
jq -S 'del(.webhooks[0].clientConfig.caBundle)' "$T/patched.json" >"$T/a"
jq -S . "$T/mwc.json" >"$T/b"
if cmp -s "$T/a" "$T/b"; then ok; else
    bad "the CronJob's patch changes more of the webhook configuration than its caBundle"
    diff "$T/b" "$T/a" | sed 's/^/  /' >&2
fi
grep -q -- '--type=strategic' "$T/patch.args" 2>/dev/null && ok ||
    bad "the CronJob's patch is not a strategic merge patch: $(cat "$T/patch.args" 2>/dev/null)"
# One writer per field. Leaf paths of the webhook configuration, with list
# items keyed by name (how both strategic merge and server-side apply merge
# webhooks and matchConditions): the CronJob's patch and the kustomize
# output share only the keys that identify the object and the webhook.
PATHS='def keyed: if type == "object" then with_entries(.value |= keyed)
    elif type == "array" and (map(type == "object" and has("name")) | all) and length > 0
    then map({key: .name, value: (. | keyed)}) | from_entries
    elif type == "array" then "atomic-list" else . end;
    [keyed | paths(scalars) | map(tostring) | join(".")]'
yq . "$T/work/webhook-patch.yaml" | jq "$PATHS" >"$T/patch.paths"
jq "$PATHS" "$T/mwc.json" >"$T/mwc.paths"
check "self-signed: the CronJob and kubectl apply -k write no field of the webhook configuration in common" \
    "$T/patch.paths" '($p - ["webhooks.pods.ncclguard.io.name"]) as $mine |
        ($mine | length > 0) and ([$mine[] | select(. as $x | $k | index($x))] | length == 0)' \
    --argjson p "$(cat "$T/patch.paths")" --argjson k "$(cat "$T/mwc.paths")"
check "cert-manager: kustomize leaves the caBundle to cainjector" "$T/cm.json" '
    [.[] | select(.kind == "MutatingWebhookConfiguration") | .webhooks[].clientConfig | has("caBundle")] == [false]'
# `certs webhook-config` renders exactly the base object (a drift between
# certs.c and the YAML fails here).
"$NCCLGUARD" certs webhook-config --ca-file "$T/work/ca.crt" >"$T/full.yaml" 2>"$T/err"
yq . "$T/full.yaml" | jq -S 'del(.webhooks[0].clientConfig.caBundle)' >"$T/a"
if cmp -s "$T/a" "$T/b"; then ok; else
    bad "certs webhook-config differs from deploy/base/mutatingwebhookconfiguration.yaml"
    diff "$T/b" "$T/a" | sed 's/^/  /' >&2
fi
# The next run finds the CA in ncclguard-ca and the pair in ncclguard-tls
# (their mounts) and changes nothing: same caBundle, same files, so storing
# the Secrets again is a no-op.
cp "$T/work/ca.crt" "$T/work/ca.key" "$T/ca/"
cp "$T/work/tls.crt" "$T/work/tls.key" "$T/tls/"
rm -rf "$T/work"
runjob 2
cmp -s "$T/bundle1" "$T/bundle2" && ok || bad "a second run changed the caBundle"
cmp -s "$T/tls/tls.crt" "$T/work/tls.crt" && cmp -s "$T/tls/tls.key" "$T/work/tls.key" && ok ||
    bad "a second run replaced a serving pair that was not due"
grep -q "kept the serving certificate" "$T/err" && ok ||
    bad "a second run did not say it kept the pair: $(cat "$T/err")"
# A pair inside the renewal window is replaced, signed by the same CA.
"$NCCLGUARD" certs create --service ncclguard --namespace ncclguard \
    --out "$T/short" --ca-dir "$T/ca" --days 3 >/dev/null 2>&1
cp "$T/short/tls.crt" "$T/short/tls.key" "$T/tls/"
rm -rf "$T/work"
runjob 3
cmp -s "$T/bundle1" "$T/bundle3" && ok || bad "renewal changed the caBundle"
if ! cmp -s "$T/short/tls.crt" "$T/work/tls.crt" &&
    "$NCCLGUARD" certs inspect "$T/work/tls.crt" --ca "$T/ca/ca.crt" \
        --renew-before 300 >/dev/null 2>&1; then ok; else
    bad "a pair 3 days from expiry was not renewed for a year"
fi

# --- kubectl apply -k twice, and after an upgrade ---------------------------
# Rendering is deterministic, so applying again changes nothing; after a new
# image tag and policy, only fields that may change do. Immutable fields:
# a Job's pod template (no Job at all), selectors of Deployments,
# DaemonSets and PodDisruptionBudgets stay as they were.
render deploy/overlays/self-signed ss2
cmp -s "$T/ss.yaml" "$T/ss2.yaml" && ok || bad "two renders of deploy/overlays/self-signed differ"
# --- cert-manager -------------------------------------------------------------
J=$T/cm.json
check "cert-manager: serving Certificate writes the Secret the Deployment mounts" "$J" '
    (.[] | select(.kind == "Deployment") | .spec.template.spec.volumes[] |
     select(.secret) | .secret.secretName) as $name |
    [.[] | select(.kind == "Certificate" and .spec.secretName == $name and
                  (.spec.isCA | not))] | length == 1'
check "cert-manager: serving Certificate names the Service and is for server auth" "$J" '
    (.[] | select(.kind == "Service") | .metadata) as $s |
    (.[] | select(.kind == "Certificate" and (.spec.isCA | not)) | .spec) as $c |
    ($c.dnsNames | sort) == ([$s.name, "\($s.name).\($s.namespace)",
        "\($s.name).\($s.namespace).svc",
        "\($s.name).\($s.namespace).svc.cluster.local"] | sort) and
    ($c.usages | index("server auth") != null)'
check "cert-manager: inject-ca-from names the serving Certificate" "$J" '
    (.[] | select(.kind == "Certificate" and (.spec.isCA | not)) | .metadata) as $c |
    (.[] | select(.kind == "MutatingWebhookConfiguration") |
     .metadata.annotations["cert-manager.io/inject-ca-from"]) == "\($c.namespace)/\($c.name)"'
check "cert-manager: serving Certificate issued by a CA Issuer backed by the CA Certificate" "$J" '
    (.[] | select(.kind == "Certificate" and (.spec.isCA | not)) | .spec.issuerRef.name) as $i |
    (.[] | select(.kind == "Issuer" and .metadata.name == $i) | .spec.ca.secretName) as $ca |
    [.[] | select(.kind == "Certificate" and .spec.isCA == true and .spec.secretName == $ca)] |
    length == 1'
check "cert-manager: no caBundle, no Job and no CronJob" "$J" '
    ((.[] | select(.kind == "MutatingWebhookConfiguration") | .webhooks[0].clientConfig.caBundle) == null) and
    ([.[] | select(.kind == "Job" or .kind == "CronJob")] | length == 0)'

# --- the profile component ------------------------------------------------------
check "component: the profile lands in each listed namespace, same data" "$T/user.json" '
    [.[] | select(.kind == "ConfigMap" and .metadata.name == "nccl-production-profile")] as $p |
    ($p | map(.metadata.namespace) | sort) == ["ml-inference", "ml-training", "ncclguard"] and
    ($p | map(.data) | unique | length == 1)'

# --- policy copy, GPU names, ring-check image, profile lint ---------------------
if [ -f policy/default.yaml ]; then
    cmp -s policy/default.yaml deploy/base/policy.yaml && ok ||
        bad "deploy/base/policy.yaml differs from policy/default.yaml (cp policy/default.yaml deploy/base/policy.yaml)"
    cmp -s policy/default.yaml deploy/components/node-health/policy.yaml && ok ||
        bad "deploy/components/node-health/policy.yaml differs from policy/default.yaml (cp policy/default.yaml deploy/components/node-health/policy.yaml)"
    yq . policy/default.yaml >"$T/policy.json"
    # The CEL condition names no resource: it sends every pod that asks
    # for an extended resource (a name with a '/'), so a policy with other
    # GPU names needs no new webhook configuration. Every GPU resource of
    # the default policy is such a name.
    check "CEL tests any extended resource, in limits and requests of containers and init containers" "$T/base.json" '
        (.[] | select(.kind == "MutatingWebhookConfiguration") |
         .webhooks[0].matchConditions[] | select(.name == "requests-gpu") | .expression) as $e |
        ([$e | scan("exists\\(r, r\\.contains")] | length == 4) and
        ($e | contains("r in [") | not)'
    check "every GPU resource of policy/default.yaml is an extended resource the CEL sends" \
        "$T/policy.json" '[.. | objects | .gpuResources? // empty] | first |
        length > 0 and all(contains("/"))'
else
    bad "policy/default.yaml is missing"
fi
check "profile: NCCL_SOCKET_IFNAME excludes lo and docker, within NCCL's 16 entries" "$T/base.json" '
    (.[] | select(.kind == "ConfigMap" and .metadata.name == "nccl-production-profile") |
     .data.NCCL_SOCKET_IFNAME) as $v |
    ($v | startswith("^")) and
    ($v | ltrimstr("^") | split(",")) as $l |
    ($l | length <= 16) and ($l | index("lo") != null and index("docker") != null)'
# The profile must pass the NCCL-aware lint with no error and no warning.
if "$NCCLGUARD" policy lint --profile deploy/base/nccl-production-profile.yaml \
    >"$T/out" 2>&1 && grep -qx '0 errors, 0 warnings' "$T/out"; then ok; else
    bad "policy lint --profile deploy/base/nccl-production-profile.yaml"
    sed 's/^/  /' "$T/out" >&2
fi

# --- Dockerfiles (no engine here: static checks) --------------------------------
WD=deploy/docker/webhook.Dockerfile
RD=deploy/docker/ringcheck.Dockerfile
# The runtime stage installs the package of every library the binary links
# directly (its NEEDED entries); apt brings in their own dependencies.
runtime=$(awk '/^FROM /{n++} n == 2' "$WD")
ldd "$NCCLGUARD" >"$T/ldd"
for name in $(readelf -d "$NCCLGUARD" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    case $name in # sanitizer runtimes of make asan, never in an image
    libasan.so.* | libubsan.so.* | liblsan.so.* | libtsan.so.*) continue ;;
    esac
    lib=$(awk -v n="$name" '$1 == n && $2 == "=>" {print $3}' "$T/ldd")
    [ -n "$lib" ] || { bad "ldd does not resolve $name"; continue; }
    pkg=$( (dpkg -S "$lib" || dpkg -S "$(readlink -f "$lib")" ||
        dpkg -S "/usr$lib") 2>/dev/null | head -n1 | cut -d: -f1)
    case $pkg in
    libc6 | libgcc-s1 | "") continue ;; # in every Debian base image
    esac
    echo "$runtime" | grep -qw -- "$pkg" && ok ||
        bad "$WD: runtime stage lacks $pkg (for $lib)"
done
# The build stage installs the -dev package of every pkg-config module the
# Makefile builds with.
build_stage=$(awk '/^FROM /{n++} n == 1' "$WD")
for m in $(sed -n 's/^PKGS := //p' Makefile); do
    pc=$(pkg-config --variable=pcfiledir "$m" 2>/dev/null)/$m.pc
    pkg=$( (dpkg -S "$pc" || dpkg -S "$(readlink -f "$pc")") 2>/dev/null |
        head -n1 | cut -d: -f1)
    if [ -z "$pkg" ]; then
        bad "no Debian package found for pkg-config module $m"
    elif echo "$build_stage" | grep -qw -- "$pkg"; then ok; else
        bad "$WD: build stage lacks $pkg (pkg-config $m)"
    fi
done
for f in "$WD" "$RD"; do
    [ "$(grep -c '^FROM ' "$f")" -ge 2 ] && ok || bad "$f is not multi-stage"
    user=$(awk '/^USER /{u=$2} END{print u}' "$f")
    case $user in
    0 | 0:* | root | root:* | "") bad "$f runs as root ('$user')" ;;
    [0-9]*) ok ;;
    *) bad "$f: USER '$user' is not numeric (runAsNonRoot needs a number)" ;;
    esac
done
grep -q 'ghcr.io/ncclguard/ncclguard:0.1.0' "$WD" && ok || bad "$WD does not name its image"
grep -q 'ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0' "$RD" && ok || bad "$RD does not name its image"
grep -q '^FROM nvidia/cuda:.*-runtime-' "$RD" && ok || bad "$RD: runtime stage is not a CUDA runtime image"
grep -qw libnccl2 "$RD" && ok || bad "$RD does not install NCCL"
# The ring check links only what the CUDA runtime image has: CUDA's runtime,
# NCCL and the C and C++ runtimes. A new dependency fails here until the
# Dockerfile installs it.
# `make check-deploy` builds it first (when CUDA and NCCL are found); run
# alone, or without CUDA, this part says it did not run.
RC=${RINGCHECK:-$(dirname "$NCCLGUARD")/ncclguard-ringcheck}
if [ ! -x "$RC" ]; then
    echo "SKIP deploy: libraries of ncclguard-ringcheck against $RD ($RC not built; make ringcheck builds it)"
else
    for lib in $(ldd "$RC" | awk '/=>/ {print $1}'); do
        case $lib in
        libasan.so.* | libubsan.so.* | liblsan.so.* | libtsan.so.*) ;;
        libcudart.so.* | libnccl.so.2 | libc.so.* | libm.so.* | libdl.so.* | \
            libpthread.so.* | librt.so.* | libstdc++.so.* | libgcc_s.so.*) ok ;;
        # The rendezvous's HMAC (the job token).
        libcrypto.so.3)
            grep -qw libssl3t64 "$RD" && ok ||
                bad "$RD does not install libssl3t64, whose $lib ncclguard-ringcheck links" ;;
        *) bad "$RD: the runtime stage may lack $lib, which ncclguard-ringcheck links" ;;
        esac
    done
fi
if [ -f policy/default.yaml ]; then
    # The Deployment, not the policy, names the ring-check image, so that
    # kustomize's images: reaches it.
    check "policy/default.yaml names no ring-check image (the Deployment does)" \
        "$T/policy.json" '[.. | objects | .image? // empty] | length == 0'
fi
RCENV='(.[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].env[] |
    select(.name == "NCCLGUARD_RINGCHECK_IMAGE") | .value)'
check "the Deployment's NCCLGUARD_RINGCHECK_IMAGE is the image ringcheck.Dockerfile builds" \
    "$T/base.json" "$RCENV == \"ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0\""
# One images: entry per image moves everything to another registry: the
# webhook and CronJob containers, and the ring-check image the webhook injects.
mkdir -p "$T/reg"
rel=$(realpath --relative-to="$T/reg" "$ROOT")
cat >"$T/reg/kustomization.yaml" <<EOK
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel/deploy/overlays/self-signed]
images:
  - name: ghcr.io/ncclguard/ncclguard
    newName: registry.example.com/ml/ncclguard
    newTag: "9.9"
  - name: ghcr.io/ncclguard/ncclguard-ringcheck
    newName: registry.example.com/ml/ncclguard-ringcheck
    newTag: "9.9"
configMapGenerator:
  - name: ncclguard-policy
    namespace: ncclguard
    behavior: replace
    files: [policy.yaml]
EOK
cp policy/examples/tiers.yaml "$T/reg/policy.yaml"
render "$T/reg" reg
# The policy is replaced in an overlay, never edited in deploy/base: the
# ConfigMap keeps its name (no hash suffix), so the Deployment's volume
# still finds it, and holds the overlay's file.
check "configMapGenerator behavior: replace swaps the policy, same name" "$T/reg.json" '
    [.[] | select(.kind == "ConfigMap" and (.metadata.name | startswith("ncclguard-policy")))] as $cm |
    ($cm | length == 1) and $cm[0].metadata.name == "ncclguard-policy" and
    $cm[0].data["policy.yaml"] == ($want | rtrimstr("x")) and
    ([.[] | select(.kind == "Deployment") |
      .spec.template.spec.volumes[]? | .configMap.name // empty] | index("ncclguard-policy") != null)' \
    --arg want "$(cat policy/examples/tiers.yaml; printf x)"
check "images: rewrites the webhook and CronJob images" "$T/reg.json" '
    [.[] | select(.kind == "Deployment" or .kind == "CronJob") |
     (.spec.template // .spec.jobTemplate.spec.template).spec |
     (.containers + (.initContainers // []))[] | .image |
     select(startswith("ghcr.io/ncclguard/") or
            startswith("registry.example.com/"))] as $i |
    ($i | length >= 2) and
    ($i | all(. == "registry.example.com/ml/ncclguard:9.9"))'
check "images: rewrites NCCLGUARD_RINGCHECK_IMAGE" "$T/reg.json" \
    "$RCENV == \"registry.example.com/ml/ncclguard-ringcheck:9.9\""
# Upgrading (new tags, another policy) over an installation changes no
# immutable field, so kubectl apply -k goes through: the two renders differ
# only where the API allows a change.
check "upgrade: no Job, and the selectors (immutable) are the same" "$T/reg.json" '
    def sel: [.[] | select(.kind == "Deployment" or .kind == "DaemonSet" or
                           .kind == "StatefulSet") |
              {kind, name: .metadata.name, sel: .spec.selector}];
    ([.[] | select(.kind == "Job")] | length == 0) and (sel == ($old[0] | sel))' \
    --slurpfile old "$T/ss.json"
check "upgrade: the renders differ, and only in images and the policy" "$T/reg.json" '
    [paths(scalars) as $p | select(getpath($p) != ($old[0] | getpath($p))) |
     $p | map(tostring) | join(".")] as $d |
    ($d | length > 0) and
    ($d | all(test("\\.image$|\\.env\\.[0-9]+\\.value$|\\.data\\.policy\\.yaml$")))' \
    --slurpfile old "$T/ss.json"

# --- the watchdog component ------------------------------------------------------
mkdir -p "$T/wd"
cat >"$T/wd/kustomization.yaml" <<EOK
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel/deploy/overlays/self-signed]
components: [$rel/deploy/components/watchdog]
EOK
render "$T/wd" wd
J=$T/wd.json
DS='(.[] | select(.kind == "DaemonSet" and .metadata.name == "ncclguard-watchdog"))'
check "watchdog: a DaemonSet on GPU nodes, as the GPU operator labels and taints them" "$J" "
    $DS.spec.template.spec as \$s |
    \$s.nodeSelector == {\"nvidia.com/gpu.present\": \"true\"} and
    (\$s.tolerations | index({key: \"nvidia.com/gpu\", operator: \"Exists\", effect: \"NoSchedule\"}) != null)"
check "watchdog: hostPID, NVML through the nvidia runtime, no GPU requested" "$J" "
    $DS.spec.template.spec as \$s |
    \$s.hostPID == true and \$s.runtimeClassName == \"nvidia\" and
    (\$s.hostNetwork | not) and
    ([\$s.containers[0].env[] | select(.name == \"NVIDIA_VISIBLE_DEVICES\") | .value] == [\"all\"]) and
    ([\$s.containers[0].env[] | select(.name == \"NVIDIA_DRIVER_CAPABILITIES\") | .value] == [\"utility\"]) and
    ([\$s.containers[].resources | .. | objects | keys[]] | index(\"nvidia.com/gpu\") == null) and
    ([\$s.volumes[]? | select(.hostPath)] | length == 0)"
check "watchdog: only SYS_PTRACE and KILL, no escalation, read-only root" "$J" "
    $DS.spec.template.spec.containers[0].securityContext as \$c |
    \$c.capabilities.drop == [\"ALL\"] and
    (\$c.capabilities.add | sort) == [\"KILL\", \"SYS_PTRACE\"] and
    \$c.allowPrivilegeEscalation == false and \$c.readOnlyRootFilesystem == true and
    (\$c.privileged | not)"
check "watchdog: its own namespace admits hostPID; the webhook's stays restricted" "$J" "
    $DS.metadata.namespace as \$ns |
    (.[] | select(.kind == \"Namespace\" and .metadata.name == \$ns) |
      .metadata.labels[\"pod-security.kubernetes.io/enforce\"] == \"privileged\") and
    (.[] | select(.kind == \"Deployment\") | .metadata.namespace) != \$ns and
    (.[] | select(.kind == \"Namespace\" and .metadata.name == \"ncclguard\") |
      .metadata.labels[\"pod-security.kubernetes.io/enforce\"] == \"restricted\")"
check "watchdog: requests and limits for CPU and memory" "$J" "
    $DS.spec.template.spec.containers[0].resources as \$r |
    (\$r.requests.cpu and \$r.requests.memory and \$r.limits.cpu and \$r.limits.memory) != null"
check "watchdog: RBAC grants creating Events and listing pods, nothing else, to its ServiceAccount" "$J" "
    $DS as \$ds |
    ([.[] | select(.kind == \"ClusterRole\" and .metadata.name == \"ncclguard-watchdog\") | .rules[]] ==
      [{apiGroups: [\"\"], resources: [\"events\"], verbs: [\"create\"]},
       {apiGroups: [\"\"], resources: [\"pods\"], verbs: [\"list\"]}]) and
    (.[] | select(.kind == \"ClusterRoleBinding\" and .metadata.name == \"ncclguard-watchdog\") |
      .roleRef.name == \"ncclguard-watchdog\" and
      .subjects == [{kind: \"ServiceAccount\", name: \$ds.spec.template.spec.serviceAccountName,
                     namespace: \$ds.metadata.namespace}]) and
    ([.[] | select(.kind == \"ServiceAccount\" and .metadata.name == \"ncclguard-watchdog\")] | length == 1)"
# The DaemonSet's own arguments start the real agent, and its liveness probe
# path answers on its metrics port.
WDBIN=$(dirname "$NCCLGUARD")/ncclguard-watchdog
if [ -x "$WDBIN" ]; then
    jq -r "$DS.spec.template.spec.containers[0].args[]" "$J" >"$T/wdargs"
    probe=$(jq -r "$DS.spec.template.spec.containers[0].livenessProbe.httpGet.path" "$J")
    # shellcheck disable=SC2046
    "$WDBIN" $(cat "$T/wdargs") --metrics-addr 127.0.0.1 --metrics-port 0 \
        --port-file "$T/wdport" --nvml "$T/none.so" --api-server off \
        --run-for 3s >"$T/wdlog" 2>&1 &
    wdpid=$!
    for _ in $(seq 100); do [ -s "$T/wdport" ] && break; sleep 0.02; done
    if curl -sf "http://127.0.0.1:$(cat "$T/wdport" 2>/dev/null)$probe" >/dev/null 2>&1; then ok; else
        bad "ncclguard-watchdog with the DaemonSet's args does not answer $probe"
        sed 's/^/  /' "$T/wdlog" >&2
    fi
    kill "$wdpid" 2>/dev/null
    wait "$wdpid" 2>/dev/null
    # The runtime stage installs the package of every library they link:
    # the agent's, and the node loop's (the image ships both programs).
    WDD=deploy/docker/watchdog.Dockerfile
    wdrt=$(awk '/^FROM /{n++} n == 2' "$WDD")
    NLBIN=$(dirname "$NCCLGUARD")/ncclguard-nodeloop
    for bin in "$WDBIN" "$NLBIN"; do
        if [ ! -x "$bin" ]; then
            echo "SKIP the runtime packages of $bin (not built)"
            continue
        fi
        for name in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
            case $name in
            libasan.so.* | libubsan.so.* | libc.so.* | libm.so.*) continue ;;
            esac
            lib=$(ldd "$bin" | awk -v n="$name" '$1 == n && $2 == "=>" {print $3}')
            pkg=$( (dpkg -S "$lib" || dpkg -S "$(readlink -f "$lib")" ||
                dpkg -S "/usr$lib") 2>/dev/null | head -n1 | cut -d: -f1)
            case $pkg in libc6 | libgcc-s1 | "") continue ;; esac
            # libcurl4-openssl-dev builds against libcurl4 (the OpenSSL flavour).
            echo "$wdrt" | grep -qw -- "${pkg%%:*}" && ok ||
                bad "$WDD: runtime stage lacks $pkg (for $lib, $(basename "$bin"))"
        done
    done
    # The node loop is in the image where the DaemonSet's command says.
    grep -qx 'COPY --from=build /out/ncclguard-nodeloop /usr/local/bin/ncclguard-nodeloop' "$WDD" && ok ||
        bad "$WDD does not install /usr/local/bin/ncclguard-nodeloop"
    grep -q 'ghcr.io/ncclguard/ncclguard-watchdog:0.1.0' "$WDD" && ok || bad "$WDD does not name its image"
    check "watchdog: the DaemonSet runs the image watchdog.Dockerfile builds" "$J" \
        "$DS.spec.template.spec.containers[0].image == \"ghcr.io/ncclguard/ncclguard-watchdog:0.1.0\""
else
    echo "SKIP watchdog DaemonSet args and Dockerfile ($WDBIN not built)"
fi

# --- the node-health component (docs/nodeloop.md) -------------------------------
mkdir -p "$T/nh"
cat >"$T/nh/kustomization.yaml" <<EOK
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel/deploy/overlays/self-signed]
components: [$rel/deploy/components/watchdog, $rel/deploy/components/node-health]
EOK
render "$T/nh" nh
J=$T/nh.json
NL='(.[] | select(.kind == "DaemonSet" and .metadata.name == "ncclguard-node-loop"))'
check "node-health: the node loop runs on GPU nodes, its own taint tolerated, locked down" "$J" "
    $NL.spec.template.spec as \$s | \$s.containers[0] as \$c |
    \$s.nodeSelector == {\"nvidia.com/gpu.present\": \"true\"} and
    (\$s.tolerations | index({key: \"ncclguard.io/nccl-unhealthy\", operator: \"Exists\", effect: \"NoSchedule\"}) != null) and
    (\$s.hostPID | not) and (\$s.hostNetwork | not) and \$s.securityContext.runAsNonRoot == true and
    \$c.securityContext.capabilities.drop == [\"ALL\"] and (\$c.securityContext.capabilities.add | not) and
    \$c.securityContext.readOnlyRootFilesystem == true and \$c.securityContext.allowPrivilegeEscalation == false and
    \$c.command == [\"/usr/local/bin/ncclguard-nodeloop\"] and
    \$c.image == \"ghcr.io/ncclguard/ncclguard-watchdog:0.1.0\" and
    ([\$s.volumes[]? | select(.hostPath)] | length == 0)"
check "node-health: RBAC grants what docs/nodeloop.md lists, nothing wider" "$J" '
    ([.[] | select(.kind == "ClusterRole" and .metadata.name == "ncclguard-node-loop") | .rules[]] ==
      [{apiGroups: [""], resources: ["pods"], verbs: ["list", "watch"]},
       {apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "patch"]},
       {apiGroups: [""], resources: ["nodes/status"], verbs: ["patch"]},
       {apiGroups: [""], resources: ["events"], verbs: ["create"]}]) and
    ([.[] | select(.kind == "Role" and .metadata.name == "ncclguard-node-loop") |
      [.metadata.namespace, .rules]] == [["ncclguard-watchdog",
      [{apiGroups: [""], resources: ["pods"], verbs: ["create", "delete"]}]]]) and
    ([.[] | select(.kind == "Role" and .metadata.name == "ncclguard-node-loop-events") |
      [.metadata.namespace, .rules]] == [["default",
      [{apiGroups: [""], resources: ["events"], verbs: ["list"]}]]]) and
    ([.[] | select(.kind == "RoleBinding" or .kind == "ClusterRoleBinding") |
      select(.subjects[]?.name == "ncclguard-node-loop") | .roleRef.name] | sort ==
      ["ncclguard-node-loop", "ncclguard-node-loop", "ncclguard-node-loop-events"])'
check "node-health: every ValidatingAdmissionPolicy is bound, and denies" "$J" '
    [.[] | select(.kind == "ValidatingAdmissionPolicy") | .metadata.name] as $p |
    ($p | length == 4) and
    ([.[] | select(.kind == "ValidatingAdmissionPolicyBinding") | [.spec.policyName, .spec.validationActions]] | sort) ==
      ($p | sort | map([., ["Deny"]]))'
check "node-health: the PodMonitors scrape a named port of the node loop and of the watchdog" "$J" '
    [.[] | select(.kind == "DaemonSet")] as $ds |
    [.[] | select(.kind == "PodMonitor")] as $pm |
    ($pm | length == 2) and
    ($pm | all(. as $m | $ds | any(.spec.template.metadata.labels as $l |
        ($m.spec.selector.matchLabels | to_entries | all($l[.key] == .value)) and
        ([.spec.template.spec.containers[].ports[]?.name] | index($m.spec.podMetricsEndpoints[0].port) != null))))'
check "node-health: alerts on hangs, fallbacks, quarantined nodes and breaker trips, each explained" "$J" '
    [.[] | select(.kind == "PrometheusRule" and .metadata.name == "ncclguard-node-loop") | .spec.groups[].rules[]] as $r |
    ([$r[].alert] | sort) == ["NcclguardFallbacksApplied", "NcclguardNCCLHang", "NcclguardNodeQuarantined",
                              "NcclguardNodeUnhealthy", "NcclguardQuarantineBreakerOpen"] and
    ($r | all((.annotations.summary | length > 0) and (.annotations.description | length > 0) and
              (.labels.severity | IN("info", "warning", "critical"))))'
check "node-health: the dashboard ConfigMap carries the Grafana sidecar label and shows the node states" "$J" '
    [.[] | select(.kind == "ConfigMap" and .metadata.name == "ncclguard-node-health-dashboard")] |
    length == 1 and (.[0].metadata.labels.grafana_dashboard == "1") and
    (.[0].data["dashboard.json"] | fromjson | [.panels[].targets[].expr] | any(test("ncclguard_node_state")))'
check "node-health: every apiVersion is served by Kubernetes 1.34 (ValidatingAdmissionPolicy v1 is GA since 1.30)" "$J" '
    [.[] | .apiVersion] - ["v1", "apps/v1", "batch/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
        "networking.k8s.io/v1", "admissionregistration.k8s.io/v1", "monitoring.coreos.com/v1"] == []'
check "node-health: the node loop reads the policy ConfigMap of its namespace, as the webhook does, and no quarantine flag overrides it" "$J" "
    $NL as \$ds | \$ds.spec.template.spec as \$s | \$s.containers[0] as \$c |
    (\$c.args | index(\"--policy\")) as \$i | \$c.args[\$i + 1] == \"/etc/ncclguard/policy.yaml\" and
    ([\$c.args[] | select(IN(\"--mode\", \"--threshold\", \"--window\", \"--cooldown\", \"--cooldown-max\",
        \"--expiry\", \"--max-share\"))] | length == 0) and
    ([\$c.volumeMounts[] | select(.mountPath == \"/etc/ncclguard\" and (.subPath | not))] | length == 1) and
    ([\$s.volumes[] | select(.configMap.name == \"ncclguard-policy\")] | length == 1) and
    ([.[] | select(.kind == \"ConfigMap\" and .metadata.name == \"ncclguard-policy\" and
        .metadata.namespace == \$ds.metadata.namespace) | .data[\"policy.yaml\"]] | length == 1)"
check "node-health: its policy is the webhook's, byte for byte" "$J" '
    [.[] | select(.kind == "ConfigMap" and .metadata.name == "ncclguard-policy") | .data["policy.yaml"]] |
    length == 2 and (unique | length == 1)'
grep -q 'Kubernetes 1.34 or later' docs/nodeloop.md && ok ||
    bad "docs/nodeloop.md must state the node-health minimum, Kubernetes 1.34 or later"
# The DaemonSet's arguments parse (a usage error exits 2; no API server
# here, so the loop itself gives up after --run-for).
NLBIN=$(dirname "$NCCLGUARD")/ncclguard-nodeloop
if [ -x "$NLBIN" ]; then
    jq -r "$NL.spec.template.spec.containers[0].args[]" "$J" | grep -v -- '--metrics-port' |
        grep -vx '9465' >"$T/nlargs"
    # shellcheck disable=SC2046
    NODE_NAME=n POD_NAMESPACE=ns "$NLBIN" $(cat "$T/nlargs") --api-server http://127.0.0.1:9 \
        --run-for 1s >"$T/nllog" 2>&1
    [ $? -ne 2 ] && ok || { bad "ncclguard-nodeloop refuses the node loop's DaemonSet args"; sed 's/^/  /' "$T/nllog" >&2; }
else
    echo "SKIP node loop DaemonSet args ($NLBIN not built)"
fi

echo "tests/deploy: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
