# server/ HTTP side: serve, TLS, metrics, logs, reload, integration tests, make run.
LIB_SRCS += server/http.c server/metrics.c server/log.c server/reload.c \
	server/tlspair.c
UNIT_TESTS += tlspair metrics log
CHECKS += check-http

# The integration tests start the real binary with throwaway certificates
# and talk to it with curl and openssl, as the API server would.
.PHONY: check-http
check-http: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard bash tests/integration/run.sh
DEB_PKGS += jq
