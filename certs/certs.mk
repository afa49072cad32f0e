# certs/: the OpenSSL certificate tool and its checks.
LIB_SRCS += certs/certs.c
UNIT_TESTS += certs
DEB_PKGS += openssl

.PHONY: check-certs
check-certs: $(BUILD)/ncclguard
	NCCLGUARD=$(abspath $(BUILD))/ncclguard sh tests/certs/check.sh

CHECKS += check-certs

# test_certs injects OpenSSL and write(2) failures through link-time wraps
# of the library's calls.
CERTS_TEST_WRAP := -Wl,--wrap=X509_sign,--wrap=BN_new,--wrap=BIO_new \
	-Wl,--wrap=X509_STORE_CTX_new,--wrap=ASN1_TIME_to_tm,--wrap=write
$(BUILD)/tests/test_certs: $(BUILD)/obj/tests/unit/test_certs.o \
		$(BUILD)/libncclguard.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(CERTS_TEST_WRAP) -o $@ $^ $(LDLIBS)
