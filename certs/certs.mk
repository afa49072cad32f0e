# certs/: the OpenSSL certificate tool and its checks.
LIB_SRCS += certs/certs.c
UNIT_TESTS += certs
DEB_PKGS += openssl

.PHONY: check-certs
check-certs: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard sh tests/certs/check.sh

CHECKS += check-certs
