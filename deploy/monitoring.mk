# deploy/monitoring/: the Prometheus and Grafana kustomize component and its
# check (renders it, scrapes a running server for the metric names, and runs
# promtool when Debian's prometheus package provides it).
DEB_PKGS += prometheus

.PHONY: check-monitoring
check-monitoring: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard bash tests/monitoring/check.sh

CHECKS += check-monitoring
