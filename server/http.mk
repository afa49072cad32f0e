# server/ HTTP side: serve, TLS, metrics, logs, reload, integration tests, make run.
LIB_SRCS += server/http.c server/metrics.c server/log.c server/reload.c \
	server/tlspair.c server/heldsend.c
UNIT_TESTS += tlspair metrics log reload http heldsend
CHECKS += check-http

# The integration tests start the real binary with throwaway certificates
# and talk to it with curl and openssl, as the API server would.
.PHONY: check-http
check-http: $(BUILD)/ncclguard $(BUILD)/tests/ncclguard-peer
	NCCLGUARD=$(abspath $(BUILD))/ncclguard \
		NG_PEER=$(abspath $(BUILD))/tests/ncclguard-peer \
		bash tests/integration/run.sh

# make run: build (after deps, in a fresh make so pkg-config sees what deps
# installed), throwaway certificates for 127.0.0.1/localhost, then serve on
# https://127.0.0.1:8443 in the foreground until Ctrl-C.
RUN_CERTS = $(BUILD)/run-certs
RUN_SAMPLE = deploy/examples/admissionreview-gpu-pod.json

run: deps
	$(MAKE) all
	$(MAKE) run-serve

.PHONY: run-serve
run-serve: $(BUILD)/ncclguard
	$(BUILD)/ncclguard certs create --service ncclguard \
		--namespace ncclguard --out $(RUN_CERTS) --san 127.0.0.1 \
		--san localhost >/dev/null
	@echo
	@echo "Serving on https://127.0.0.1:8443 (Ctrl-C stops). Try:"
	@echo
	@echo "  curl --cacert $(RUN_CERTS)/ca.crt -H 'Content-Type: application/json' \\"
	@echo "    --data-binary @$(RUN_SAMPLE) https://127.0.0.1:8443/mutate"
	@echo
	@echo "and to read the patch:  ... | jq -r .response.patch | base64 -d | jq ."
	@echo
	exec $(BUILD)/ncclguard serve --listen 127.0.0.1:8443 \
		--cert $(RUN_CERTS)/tls.crt --key $(RUN_CERTS)/tls.key \
		--policy policy/default.yaml

# The misbehaving clients of the transport tests (tests/integration/peer.c).
$(BUILD)/tests/ncclguard-peer: $(BUILD)/obj/tests/integration/peer.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ -lssl -lcrypto

# test_http starts the server in process and injects failures (the clock,
# libc's calloc and realloc, a response libmicrohttpd cannot allocate,
# GnuTLS failing a verification, a review held in the admission) through
# link-time wraps of the library's calls.
HTTP_TEST_WRAP := -Wl,--wrap=time,--wrap=calloc,--wrap=realloc \
	-Wl,--wrap=MHD_create_response_from_buffer \
	-Wl,--wrap=gnutls_certificate_verify_peers,--wrap=review_handle \
	-Wl,--wrap=review_handle_padded
$(BUILD)/tests/test_http: $(BUILD)/obj/tests/unit/test_http.o \
		$(BUILD)/libncclguard.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(HTTP_TEST_WRAP) -o $@ $^ $(LDLIBS)

# test_heldsend stops sends at every byte through link-time wraps.
$(BUILD)/tests/test_heldsend: $(BUILD)/obj/tests/unit/test_heldsend.o \
		$(BUILD)/libncclguard.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -Wl,--wrap=send,--wrap=sendmsg -o $@ $^ $(LDLIBS)
