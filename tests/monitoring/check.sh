#!/usr/bin/env bash
# deploy/monitoring: the component renders next to an installation overlay;
# the ServiceMonitor finds the Service; every metric name in every alert and
# dashboard expression is one a running `ncclguard serve` exports (or one
# listed below as external); the dashboard is valid JSON; promtool checks
# the rules and runs alerts.test.yaml; the policy_reload_failing gauge
# follows a broken and repaired policy file.
set -u
export LC_ALL=C
# shellcheck source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
ng_setup
T=$NG_TMP
cd "$NG_ROOT" || exit 1

# Metrics from other exporters that the rules read, with where they come
# from. Anything else must be exported by the webhook itself.
EXTERNAL="kube_pod_created kube_pod_container_resource_requests" # kube-state-metrics

# --- the component renders -------------------------------------------------
mkdir -p "$T/user"
rel=$(realpath --relative-to="$T/user" "$NG_ROOT")
cat >"$T/user/kustomization.yaml" <<EOK
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel/deploy/overlays/self-signed]
components: [$rel/deploy/monitoring]
EOK
if kubectl kustomize "$T/user" >"$T/all.yaml" 2>"$T/err" &&
    yq -s . "$T/all.yaml" >"$T/all.json" 2>>"$T/err"; then
    ng_pass "kubectl kustomize: self-signed overlay + deploy/monitoring"
else
    ng_fail "kubectl kustomize: self-signed overlay + deploy/monitoring" "$(cat "$T/err")"
    echo '[]' >"$T/all.json"
fi
J=$T/all.json
jqt() { jq -e "$1" "$J" >/dev/null 2>&1; }
ng_check "one ServiceMonitor, one PrometheusRule, the dashboard ConfigMap, all in ncclguard" jqt '
    [.[] | select(.kind == "ServiceMonitor" or .kind == "PrometheusRule" or
                  (.kind == "ConfigMap" and .metadata.name == "ncclguard-dashboard")) |
     .metadata.namespace] == ["ncclguard", "ncclguard", "ncclguard"]'
ng_check "ServiceMonitor selects the webhook Service and one of its port names" jqt '
    (.[] | select(.kind == "Service" and .metadata.name == "ncclguard")) as $svc |
    (.[] | select(.kind == "ServiceMonitor")) as $sm |
    ($sm.spec.selector.matchLabels | to_entries |
     all(. as $e | $svc.metadata.labels[$e.key] == $e.value)) and
    ($sm.spec.endpoints | all(.port as $p | [$svc.spec.ports[].name] | index($p) != null)) and
    ($sm.spec.namespaceSelector.matchNames == [$svc.metadata.namespace])'
ng_check "ServiceMonitor trusts ca.crt of the Secret the certificate CronJob writes, under the Service name" jqt '
    (.[] | select(.kind == "ServiceMonitor") | .spec.endpoints[0]) as $e |
    $e.scheme == "https" and $e.path == "/metrics" and
    $e.tlsConfig.ca.secret == {name: "ncclguard-tls", key: "ca.crt"} and
    $e.tlsConfig.serverName == "ncclguard.ncclguard.svc" and
    ([.[] | select(.kind == "CronJob") | .. | strings | select(test("ncclguard-tls"))] | length > 0)'
ng_check "PrometheusRule has the five alerts" jqt '
    [.[] | select(.kind == "PrometheusRule") | .spec.groups[].rules[].alert] | sort ==
    ["NcclguardAdmissionErrors", "NcclguardBypassed", "NcclguardCertificateExpiringSoon",
     "NcclguardLatencyOverBudget", "NcclguardPolicyReloadFailing"]'
ng_check "every alert has a summary, a description and a severity" jqt '
    [.[] | select(.kind == "PrometheusRule") | .spec.groups[].rules[] |
     (.annotations.summary | length > 0) and (.annotations.description | length > 0) and
     (.labels.severity | IN("warning", "critical"))] | all'
ng_check "dashboard ConfigMap carries the Grafana sidecar label" jqt '
    .[] | select(.kind == "ConfigMap" and .metadata.name == "ncclguard-dashboard") |
    .metadata.labels.grafana_dashboard == "1" and (.data["dashboard.json"] | length > 0)'

# --- the dashboard parses --------------------------------------------------
D=deploy/monitoring/dashboard.json
if jq -e '(.panels | length > 0) and
          ([.panels[] | .targets | length > 0 and all(.expr | length > 0)] | all) and
          ([.panels[].id] | length == (unique | length))' "$D" >/dev/null 2>"$T/err"; then
    ng_pass "$D parses; every panel has queries; panel ids unique"
else
    ng_fail "$D" "$(cat "$T/err")"
fi

# --- every metric name exists ---------------------------------------------
ng_make_ca "$T" && ng_make_cert "$T" server 1
cp policy/default.yaml "$T/policy.yaml"
ng_serve_start --cert "$T/server.crt" --key "$T/server.key" \
    --policy "$T/policy.yaml" --reload-interval 0 || exit 1
ng_curl "$NG_URL/metrics" >"$T/scrape"
# Sample names, as Prometheus stores them (histograms as _bucket/_sum/_count).
{
    grep -v '^#' "$T/scrape" | sed 's/[{ ].*//'
    printf '%s\n' $EXTERNAL
} | sort -u >"$T/exported"
ng_check "the scrape has samples" grep -q '^ncclguard_' "$T/exported"

# names EXPR: the metric names one PromQL expression reads. Strings, label
# matchers, ranges and the label lists of by/on/without/ignoring/group_*
# go first; what is left and not a function, keyword or number is a name.
names() {
    printf '%s\n' "$1" | tr '\n' ' ' |
        sed -E 's/"([^"\\]|\\.)*"//g; s/\{[^}]*\}//g; s/\[[^]]*\]//g' |
        sed -E 's/\b(by|on|without|ignoring|group_left|group_right) *\([^)]*\)//g' |
        grep -oE '[A-Za-z_:][A-Za-z0-9_:]* *\(?' |
        grep -vE '\($' | sed 's/ *$//' |
        grep -vxE 'and|or|unless|bool|offset|inf|nan|Inf|NaN' || true
}
{
    jq -c '.[] | select(.kind == "PrometheusRule") | .spec.groups[].rules[] | [.alert, .expr]' "$J"
    jq -c '.panels[] | .title as $t | .targets[] | ["panel " + $t, .expr]' "$D"
} >"$T/exprs"
nexpr=0
while IFS= read -r row; do
    what=$(jq -r '.[0]' <<<"$row")
    expr=$(jq -r '.[1]' <<<"$row")
    nexpr=$((nexpr + 1))
    # Dashboard variables ($job, $__all) are not PromQL.
    expr=${expr//\$job/.*}
    used=$(names "$expr" | sort -u)
    if [ -z "$used" ]; then
        ng_fail "$what: no metric name found in: $expr"
        continue
    fi
    missing=$(comm -23 <(printf '%s\n' "$used") "$T/exported")
    if [ -z "$missing" ]; then
        ng_pass "$what reads only exported metrics ($(echo $used))"
    else
        ng_fail "$what reads metrics nobody exports: $(echo $missing)"
    fi
done <"$T/exprs"
ng_check "expressions found (alerts and panels)" test "$nexpr" -ge 10

# --- every exported family is documented ----------------------------------
for fam in $(sed -n 's/^# TYPE \([^ ]*\) .*/\1/p' "$T/scrape"); do
    grep -q "^| \`$fam[{\`]" docs/serve.md && ng_pass "docs/serve.md documents $fam" ||
        ng_fail "docs/serve.md's metrics table lacks $fam"
done

# --- policy_reload_failing follows the file ------------------------------
ng_eq "policy_reload_failing is 0 with a good policy" \
    "$(ng_metric ncclguard_policy_reload_failing)" 0
printf 'apiVersion: ncclguard.io/v1alpha1\nkind: Policy\ndefaults: [\n' >"$T/policy.yaml"
kill -HUP "$NG_PID"
ng_check "a broken policy file raises policy_reload_failing to 1" \
    ng_wait_metric ncclguard_policy_reload_failing 1
kill -HUP "$NG_PID"
sleep 0.2
ng_eq "... and it stays 1 while the same broken file is read again" \
    "$(ng_metric ncclguard_policy_reload_failing)" 1
cp policy/default.yaml "$T/policy.yaml"
kill -HUP "$NG_PID"
ng_check "restoring the last good file lowers it to 0" \
    ng_wait_metric ncclguard_policy_reload_failing 0
ng_serve_stop

# --- promtool ---------------------------------------------------------------
if command -v promtool >/dev/null 2>&1; then
    mkdir -p "$T/prom"
    jq '.[] | select(.kind == "PrometheusRule") | .spec' "$J" | yq -y . >"$T/prom/full.yaml"
    if promtool check rules "$T/prom/full.yaml" >"$T/err" 2>&1; then
        ng_pass "promtool check rules"
    else
        ng_fail "promtool check rules" "$(cat "$T/err")"
    fi
    jq '.[] | select(.kind == "PrometheusRule") | .spec |
        del(.groups[].rules[].annotations)' "$J" | yq -y . >"$T/prom/rules.yaml"
    cp tests/monitoring/alerts.test.yaml "$T/prom/"
    if promtool test rules "$T/prom/alerts.test.yaml" >"$T/err" 2>&1; then
        ng_pass "promtool test rules tests/monitoring/alerts.test.yaml"
    else
        ng_fail "promtool test rules" "$(cat "$T/err")"
    fi
else
    echo "SKIP promtool check rules and alert unit tests (promtool not installed; make deps installs Debian's prometheus package)"
fi
ng_summary
