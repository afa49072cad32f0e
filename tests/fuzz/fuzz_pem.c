/* Fuzz target: the serving certificate and key loader (tlspair_load). The
 * input is the PEM chain, a NUL byte, then the PEM key. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/tlspair.h"

/* A fixed clock so that a seed's validity never changes under the test:
 * 2026-12-29T00:00:00Z. */
#define FUZZ_PEM_NOW ((time_t)1798502400)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *cert = (const char *)data, *key = "";
    size_t cert_len = size, key_len = 0;
    const uint8_t *nul = memchr(data, '\0', size);
    struct ng_error err;
    struct tlspair *p;

    if (nul != NULL) {
        cert_len = (size_t)(nul - data);
        key = (const char *)nul + 1;
        key_len = size - cert_len - 1;
    }
    ng_error_clear(&err);
    p = tlspair_load(cert, cert_len, key, key_len, FUZZ_PEM_NOW, &err);
    if (p == NULL) {
        FUZZ_ASSERT(err.msg[0] != '\0');
        return 0;
    }
    /* A pair that loads is valid now and hands out a leaf and a key. */
    gnutls_pcert_st *chain = NULL;
    unsigned int n = 0;
    gnutls_privkey_t pk = NULL;

    FUZZ_ASSERT(tlspair_not_before(p) <= (int64_t)FUZZ_PEM_NOW + 300);
    FUZZ_ASSERT(tlspair_not_after(p) >= (int64_t)FUZZ_PEM_NOW);
    tlspair_credentials(p, &chain, &n, &pk);
    FUZZ_ASSERT(chain != NULL && n >= 1 && n <= TLSPAIR_MAX_CHAIN);
    FUZZ_ASSERT(pk != NULL);
    tlspair_free(p);
    return 0;
}
