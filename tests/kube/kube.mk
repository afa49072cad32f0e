# tests/kube/: a real kube-apiserver, etcd and kubectl, built from their Go
# modules (tests/kube/build.sh) into KUBE_CACHE, which `make clean` keeps,
# and the checks that run against them.
#
#   make kube                 build every release of KUBE_RELEASES (warm: seconds)
#   make check-kube-webhook   the webhook registered on the real server (1.37)
#   make check-kube-webhook-1.34   the same on the oldest release tested
#   make check-kube-nodeloop  the node loop, its RBAC and admission policies
KUBE_RELEASES := 1.37 1.34
KUBE_CACHE ?= $(HOME)/.cache/ncclguard/kube
export KUBE_CACHE
KUBE_VERSION := $(shell sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$$/\1/p' \
	tests/kube/k8s-1.37/go.mod)
KUBE_BIN := $(KUBE_CACHE)/$(KUBE_VERSION)/bin
# Every check uses the kubectl built here, not whatever kubectl the machine
# has (a vendor build of unknown origin, or Debian's 1.20).
export PATH := $(KUBE_BIN):$(PATH)

.PHONY: kube check-kube-webhook check-kube-webhook-1.34 check-kube-nodeloop \
	check-kube-nodeloop-1.34
kube:
	@for r in $(KUBE_RELEASES); do tests/kube/build.sh $$r >/dev/null || exit 1; done
	@echo "kube: $(KUBE_RELEASES) ready in $(KUBE_CACHE)"

check-kube-webhook: $(BUILD)/ncclguard kube
	NCCLGUARD=$(abspath $(BUILD))/ncclguard KUBE_RELEASE=1.37 tests/kube/webhook.sh

check-kube-webhook-1.34: $(BUILD)/ncclguard kube
	NCCLGUARD=$(abspath $(BUILD))/ncclguard KUBE_RELEASE=1.34 tests/kube/webhook.sh

CHECKS += check-kube-webhook check-kube-webhook-1.34

check-kube-nodeloop: nodeloop ringcheck kube
	NODELOOP=$(abspath $(BUILD))/ncclguard-nodeloop \
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	FAKES=$(abspath $(BUILD))/fakes KUBE_RELEASE=1.37 tests/kube/nodeloop.sh

check-kube-nodeloop-1.34: nodeloop ringcheck kube
	NODELOOP=$(abspath $(BUILD))/ncclguard-nodeloop \
	RINGCHECK=$(abspath $(BUILD))/ncclguard-ringcheck \
	FAKES=$(abspath $(BUILD))/fakes KUBE_RELEASE=1.34 tests/kube/nodeloop.sh

CHECKS += check-kube-nodeloop check-kube-nodeloop-1.34
