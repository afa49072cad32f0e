/* A serving certificate chain and its private key, parsed and checked with
 * GnuTLS, ready to hand to a TLS handshake. */
#ifndef NCCLGUARD_TLSPAIR_H
#define NCCLGUARD_TLSPAIR_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include "base/error.h"

struct tlspair;

/* Caps on what a pair may hold. */
#define TLSPAIR_MAX_CHAIN 8
#define TLSPAIR_MAX_PEM (1024 * 1024)

/*
 * Parses a PEM certificate chain (leaf first, then intermediates) and a PEM
 * private key (PKCS#8, PKCS#1 or SEC1) and checks that they belong
 * together: the key's public half equals the leaf's, the leaf is valid at
 * `now` (notBefore at most 5 minutes ahead, to allow for clock skew, and
 * notAfter not passed). The buffers are borrowed and need no NUL; nothing
 * outside them is read, and neither is changed. Returns a new pair (free
 * with tlspair_free()), or NULL with err filled ("certificate expired at
 * 2026-01-01T00:00:00Z", "private key does not match the certificate",
 * ...). A pure function of its inputs apart from allocation: safe to call
 * from several threads, and to fuzz.
 */
struct tlspair *tlspair_load(const char *cert, size_t cert_len, const char *key,
                             size_t key_len, time_t now, struct ng_error *err)
    __attribute__((warn_unused_result));

/* Reads both files and calls tlspair_load(); err names the file at fault. */
struct tlspair *tlspair_load_files(const char *cert_path, const char *key_path,
                                   time_t now, struct ng_error *err)
    __attribute__((warn_unused_result));

/* Frees a pair and wipes its key. tlspair_free(NULL) is a no-op. */
void tlspair_free(struct tlspair *p);

/* The leaf's notAfter and notBefore, Unix seconds. */
int64_t tlspair_not_after(const struct tlspair *p);
int64_t tlspair_not_before(const struct tlspair *p);

/*
 * The chain and key in the form gnutls_certificate_retrieve_function2
 * returns them. Borrowed from p: valid while p lives. GnuTLS only reads
 * them, so several handshakes may use one pair at once.
 */
void tlspair_credentials(const struct tlspair *p, gnutls_pcert_st **chain,
                         unsigned int *n, gnutls_privkey_t *key);

#endif
