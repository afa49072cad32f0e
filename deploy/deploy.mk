# deploy/: kustomize rendering checks.
DEB_PKGS += jq yq binutils

.PHONY: check-deploy
check-deploy: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard sh tests/deploy/check.sh

CHECKS += check-deploy
