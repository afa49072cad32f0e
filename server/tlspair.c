/* A serving certificate chain and its private key, parsed and checked with
 * GnuTLS, ready to hand to a TLS handshake. */
#include "server/tlspair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/x509.h>

#include "base/file.h"

struct tlspair {
    gnutls_pcert_st chain[TLSPAIR_MAX_CHAIN];
    unsigned int n_chain;
    gnutls_privkey_t key;
    int64_t not_after;
    int64_t not_before;
};

/* Allowed clock skew for a freshly issued certificate's notBefore. */
#define SKEW_SECONDS 300

static void
format_utc(int64_t t, char *buf, size_t n)
{
    struct tm tm;
    time_t tt = (time_t)t;

    if (gmtime_r(&tt, &tm) == NULL ||
        strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, n, "%lld", (long long)t);
}

/*
 * Copies len bytes into a NUL-terminated buffer: GnuTLS's PEM decoder
 * looks for markers with string functions, so a buffer straight from a
 * file or a fuzzer must be terminated.
 */
static char *
terminated_copy(const char *s, size_t len)
{
    char *b = malloc(len + 1);
    if (b == NULL)
        return NULL;
    if (len > 0)
        memcpy(b, s, len);
    b[len] = '\0';
    return b;
}

/* True when the two public keys are the same key. */
static int
same_public_key(gnutls_pubkey_t a, gnutls_pubkey_t b)
{
    gnutls_datum_t da = {NULL, 0}, db = {NULL, 0};
    int same = 0;

    if (gnutls_pubkey_export2(a, GNUTLS_X509_FMT_DER, &da) < 0 ||
        gnutls_pubkey_export2(b, GNUTLS_X509_FMT_DER, &db) < 0)
        goto done;
    same = da.size == db.size && memcmp(da.data, db.data, da.size) == 0;
done:
    gnutls_free(da.data);
    gnutls_free(db.data);
    return same;
}

struct tlspair *
tlspair_load(const char *cert, size_t cert_len, const char *key, size_t key_len,
             time_t now, struct ng_error *err)
{
    struct tlspair *p = NULL;
    char *cert_copy = NULL, *key_copy = NULL;
    gnutls_pubkey_t key_pub = NULL;
    gnutls_x509_crt_t leaf = NULL;
    gnutls_datum_t d;
    int rc;
    char when[64];

    if (cert_len == 0 || memmem(cert, cert_len, "-----BEGIN", 10) == NULL) {
        ng_error_set(err, 0, 0, "certificate: no PEM certificate found");
        goto fail;
    }
    if (key_len == 0 || memmem(key, key_len, "-----BEGIN", 10) == NULL) {
        ng_error_set(err, 0, 0, "private key: no PEM key found");
        goto fail;
    }
    if (cert_len > TLSPAIR_MAX_PEM || key_len > TLSPAIR_MAX_PEM) {
        ng_error_set(err, 0, 0, "certificate or key larger than %d bytes",
                     TLSPAIR_MAX_PEM);
        goto fail;
    }
    p = calloc(1, sizeof(*p));
    cert_copy = terminated_copy(cert, cert_len);
    key_copy = terminated_copy(key, key_len);
    if (p == NULL || cert_copy == NULL || key_copy == NULL) {
        ng_error_set(err, 0, 0, "out of memory");
        goto fail;
    }

    d.data = (unsigned char *)cert_copy;
    d.size = (unsigned int)cert_len;
    p->n_chain = TLSPAIR_MAX_CHAIN;
    rc = gnutls_pcert_list_import_x509_raw(
        p->chain, &p->n_chain, &d, GNUTLS_X509_FMT_PEM,
        GNUTLS_X509_CRT_LIST_FAIL_IF_UNSORTED |
            GNUTLS_X509_CRT_LIST_IMPORT_FAIL_IF_EXCEED);
    if (rc == GNUTLS_E_SHORT_MEMORY_BUFFER) {
        p->n_chain = 0;
        ng_error_set(err, 0, 0, "certificate: chain longer than %d",
                     TLSPAIR_MAX_CHAIN);
        goto fail;
    }
    if (rc < 0 || p->n_chain == 0) {
        p->n_chain = 0;
        ng_error_set(err, 0, 0, "certificate: cannot parse PEM: %s",
                     gnutls_strerror(rc));
        goto fail;
    }

    if (gnutls_privkey_init(&p->key) < 0) {
        ng_error_set(err, 0, 0, "out of memory");
        goto fail;
    }
    d.data = (unsigned char *)key_copy;
    d.size = (unsigned int)key_len;
    rc = gnutls_privkey_import_x509_raw(p->key, &d, GNUTLS_X509_FMT_PEM, NULL,
                                        0);
    if (rc < 0) {
        ng_error_set(err, 0, 0, "private key: cannot parse PEM: %s",
                     gnutls_strerror(rc));
        goto fail;
    }

    if (gnutls_pubkey_init(&key_pub) < 0 ||
        gnutls_pubkey_import_privkey(key_pub, p->key, 0, 0) < 0) {
        ng_error_set(err, 0, 0, "private key: cannot derive its public key");
        goto fail;
    }
    if (!same_public_key(key_pub, p->chain[0].pubkey)) {
        ng_error_set(err, 0, 0, "private key does not match the certificate");
        goto fail;
    }

    if (gnutls_x509_crt_init(&leaf) < 0 ||
        gnutls_x509_crt_import(leaf, &p->chain[0].cert, GNUTLS_X509_FMT_DER) <
            0) {
        ng_error_set(err, 0, 0, "certificate: cannot read the leaf");
        goto fail;
    }
    p->not_after = (int64_t)gnutls_x509_crt_get_expiration_time(leaf);
    p->not_before = (int64_t)gnutls_x509_crt_get_activation_time(leaf);
    if (p->not_after == -1 || p->not_before == -1) {
        ng_error_set(err, 0, 0, "certificate: cannot read its validity");
        goto fail;
    }
    if (p->not_after <= (int64_t)now) {
        format_utc(p->not_after, when, sizeof(when));
        ng_error_set(err, 0, 0, "certificate expired at %s", when);
        goto fail;
    }
    if (p->not_before > (int64_t)now + SKEW_SECONDS) {
        format_utc(p->not_before, when, sizeof(when));
        ng_error_set(err, 0, 0, "certificate not valid before %s", when);
        goto fail;
    }

    gnutls_x509_crt_deinit(leaf);
    gnutls_pubkey_deinit(key_pub);
    free(cert_copy);
    gnutls_memset(key_copy, 0, key_len);
    free(key_copy);
    return p;
fail:
    if (leaf != NULL)
        gnutls_x509_crt_deinit(leaf);
    if (key_pub != NULL)
        gnutls_pubkey_deinit(key_pub);
    free(cert_copy);
    if (key_copy != NULL) {
        gnutls_memset(key_copy, 0, key_len);
        free(key_copy);
    }
    tlspair_free(p);
    return NULL;
}

void
tlspair_free(struct tlspair *p)
{
    if (p == NULL)
        return;
    for (unsigned int i = 0; i < p->n_chain; i++)
        gnutls_pcert_deinit(&p->chain[i]);
    if (p->key != NULL)
        gnutls_privkey_deinit(p->key);
    free(p);
}

int64_t
tlspair_not_after(const struct tlspair *p)
{
    return p->not_after;
}

int64_t
tlspair_not_before(const struct tlspair *p)
{
    return p->not_before;
}

void
tlspair_credentials(const struct tlspair *p, gnutls_pcert_st **chain,
                    unsigned int *n, gnutls_privkey_t *key)
{
    /* GnuTLS's callback type is not const-correct; it only reads these. */
    struct tlspair *q = (struct tlspair *)p;
    *chain = q->chain;
    *n = q->n_chain;
    *key = q->key;
}

struct tlspair *
tlspair_load_files(const char *cert_path, const char *key_path, time_t now,
                   struct ng_error *err)
{
    char *cert = NULL, *key = NULL;
    size_t cert_len = 0, key_len = 0;
    struct tlspair *p = NULL;
    struct ng_error e;

    cert = file_read(cert_path, TLSPAIR_MAX_PEM, &cert_len, err);
    if (cert == NULL)
        goto done;
    key = file_read(key_path, TLSPAIR_MAX_PEM, &key_len, err);
    if (key == NULL)
        goto done;
    ng_error_clear(&e);
    p = tlspair_load(cert, cert_len, key, key_len, now, &e);
    if (p == NULL)
        ng_error_set(err, 0, 0, "%s, %s: %s", cert_path, key_path, e.msg);
done:
    free(cert);
    file_free_secret(key, key_len);
    return p;
}
