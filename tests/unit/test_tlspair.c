/* Unit tests for server/tlspair: parsing, key match, validity, bounds. */
#include "server/tlspair.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/x509.h>

#include "harness.h"

struct pem {
    gnutls_datum_t crt, key;
};

/* Makes a self-signed P-256 certificate valid from nb to na (Unix time). */
static void
make_pair(time_t nb, time_t na, struct pem *out)
{
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    unsigned char serial[8];

    gnutls_x509_privkey_init(&key);
    gnutls_x509_privkey_generate(
        key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1),
        0);
    gnutls_x509_crt_init(&crt);
    gnutls_x509_crt_set_version(crt, 3);
    for (size_t i = 0; i < sizeof(serial); i++)
        serial[i] = (unsigned char)(rand() & 0x7f);
    gnutls_x509_crt_set_serial(crt, serial, sizeof(serial));
    gnutls_x509_crt_set_activation_time(crt, nb);
    gnutls_x509_crt_set_expiration_time(crt, na);
    gnutls_x509_crt_set_dn(crt, "CN=ncclguard.test", NULL);
    gnutls_x509_crt_set_key(crt, key);
    gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
    gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &out->crt);
    gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &out->key);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
}

static void
free_pair(struct pem *p)
{
    gnutls_free(p->crt.data);
    gnutls_free(p->key.data);
}

static struct tlspair *
load(const struct pem *p, time_t now, struct ng_error *e)
{
    ng_error_clear(e);
    return tlspair_load((const char *)p->crt.data, p->crt.size,
                        (const char *)p->key.data, p->key.size, now, e);
}

static int
contains(const char *s, const char *needle)
{
    return strstr(s, needle) != NULL;
}

int
main(void)
{
    time_t now = time(NULL);
    struct pem a, b, old, future;
    struct ng_error e;
    struct tlspair *p;

    srand((unsigned)now);
    make_pair(now - 3600, now + 86400, &a);
    make_pair(now - 3600, now + 86400, &b);
    make_pair(now - 7200, now - 3600, &old);
    make_pair(now + 7200, now + 86400, &future);

    /* A good pair loads and reports its validity and chain. */
    p = load(&a, now, &e);
    CHECK(p != NULL);
    if (p != NULL) {
        gnutls_pcert_st *chain;
        unsigned int n;
        gnutls_privkey_t key;
        CHECK_INT(tlspair_not_after(p), now + 86400);
        CHECK_INT(tlspair_not_before(p), now - 3600);
        tlspair_credentials(p, &chain, &n, &key);
        CHECK_INT(n, 1);
        CHECK(key != NULL);
    }
    tlspair_free(p);

    /* A key from another pair is refused. */
    CHECK(tlspair_load((const char *)a.crt.data, a.crt.size,
                       (const char *)b.key.data, b.key.size, now, &e) == NULL);
    CHECK(contains(e.msg, "private key does not match the certificate"));

    /* Expired, and not yet valid (beyond the 5-minute skew). */
    CHECK(load(&old, now, &e) == NULL);
    CHECK(contains(e.msg, "certificate expired at"));
    CHECK(load(&future, now, &e) == NULL);
    CHECK(contains(e.msg, "not valid before"));
    /* The same pair loads once its time has come. */
    p = load(&future, now + 7300, &e);
    CHECK(p != NULL);
    tlspair_free(p);
    /* A pair is refused exactly at its notAfter. */
    CHECK(load(&a, now + 86400, &e) == NULL);

    /* Garbage, empty and truncated inputs. */
    CHECK(tlspair_load("", 0, "", 0, now, &e) == NULL);
    CHECK(contains(e.msg, "no PEM certificate"));
    CHECK(tlspair_load("hello", 5, (const char *)a.key.data, a.key.size, now,
                       &e) == NULL);
    CHECK(tlspair_load((const char *)a.crt.data, a.crt.size / 2,
                       (const char *)a.key.data, a.key.size, now, &e) == NULL);
    CHECK(contains(e.msg, "certificate: cannot parse PEM"));
    CHECK(tlspair_load((const char *)a.crt.data, a.crt.size,
                       (const char *)a.key.data, a.key.size / 2, now,
                       &e) == NULL);
    CHECK(contains(e.msg, "private key: cannot parse PEM"));
    /* A certificate where the key should be. */
    CHECK(tlspair_load((const char *)a.crt.data, a.crt.size,
                       (const char *)a.crt.data, a.crt.size, now, &e) == NULL);

    /* Not NUL-terminated input is read only within its length. */
    {
        char *crt = malloc(a.crt.size), *key = malloc(a.key.size);
        memcpy(crt, a.crt.data, a.crt.size);
        memcpy(key, a.key.data, a.key.size);
        p = tlspair_load(crt, a.crt.size, key, a.key.size, now, &e);
        CHECK(p != NULL);
        tlspair_free(p);
        free(crt);
        free(key);
    }

    /* A chain longer than TLSPAIR_MAX_CHAIN is refused. */
    {
        size_t n = a.crt.size * (TLSPAIR_MAX_CHAIN + 1);
        char *chain = malloc(n);
        for (int i = 0; i <= TLSPAIR_MAX_CHAIN; i++)
            memcpy(chain + (size_t)i * a.crt.size, a.crt.data, a.crt.size);
        p = tlspair_load(chain, n, (const char *)a.key.data, a.key.size, now,
                         &e);
        CHECK(p == NULL);
        tlspair_free(p);
        free(chain);
    }

    tlspair_free(NULL);
    free_pair(&a);
    free_pair(&b);
    free_pair(&old);
    free_pair(&future);
    return harness_finish();
}
