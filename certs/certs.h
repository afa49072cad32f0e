/* Webhook certificates with OpenSSL 3: a CA, a serving certificate signed by
 * it, inspection and verification, and the caBundle the apiserver needs. */
#ifndef NCCLGUARD_CERTS_H
#define NCCLGUARD_CERTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/error.h"

/* Bounds on validity periods, in days. A serving certificate may be created
 * with 0 days (it expires at once), which tests and drills use. */
#define CERTS_MAX_DAYS 36500
/* At most this many extra --san entries. */
#define CERTS_MAX_SANS 64
/* Certificate and key files larger than this are refused as input. */
#define CERTS_MAX_FILE (1024 * 1024)

enum certs_key_type {
    CERTS_KEY_EC = 0, /* ECDSA P-256 */
    CERTS_KEY_RSA = 1 /* RSA 2048 */
};

/* What `ncclguard certs create` needs. Every pointer is borrowed. */
struct certs_create_opts {
    const char *service; /* Service name, a DNS-1035 label */
    const char *ns;      /* its namespace, a DNS-1123 label */
    const char *out_dir; /* created (mode 0700) if missing */
    const char *ca_dir;  /* existing CA to reuse; NULL means out_dir */
    int days;            /* serving certificate, 0..CERTS_MAX_DAYS */
    int ca_days;         /* new CA, 1..CERTS_MAX_DAYS */
    enum certs_key_type key_type;
    const char *const *sans; /* extra DNS names or IP addresses */
    size_t n_sans;
    /* Renewal mode (`--renew-before`): when renew is true, a serving pair
     * already in current_dir (NULL means out_dir) is kept, and copied to
     * out_dir, if it is signed by the CA in use, names every SAN above,
     * has a key of key_type matching the certificate, and stays valid for
     * more than renew_before_days (1..CERTS_MAX_DAYS) more days. Otherwise
     * a new pair is issued, as when renew is false. */
    bool renew;
    int renew_before_days;
    const char *current_dir;
};

/* What certs_create() did. Release with certs_create_result_release(). */
struct certs_create_result {
    bool ca_reused;         /* an existing CA signed the new certificate */
    char *ca_bundle;        /* base64 of the PEM ca.crt, owned */
    char warning[256];      /* non-fatal note for the user, or "" */
    bool kept;              /* renewal mode kept the current serving pair */
    long long seconds_left; /* of the serving certificate in out_dir */
    char reason[256];       /* renewal mode: why the pair was kept or issued */
};

/*
 * Creates (or reuses, when ca_dir holds ca.crt and ca.key) a CA and writes
 * out_dir/ca.crt, out_dir/ca.key (0600), out_dir/tls.crt and out_dir/tls.key
 * (0600). Each file is written to a temporary name and renamed, so a reader
 * never sees half a file. The serving certificate carries the SANs
 * svc, svc.ns, svc.ns.svc, svc.ns.svc.cluster.local and opts->sans, and the
 * serverAuth extended key usage. A reused CA keeps ca.crt byte for byte, so
 * the caBundle does not change. Private keys are wiped from memory.
 *
 * On success returns 0 and fills *res (caller releases it). On failure
 * returns -1, fills err, and leaves *res empty; files already renamed into
 * place stay (each is complete). Not safe to run twice at once on one
 * directory; otherwise thread-safe.
 */
int certs_create(const struct certs_create_opts *opts,
                 struct certs_create_result *res, struct ng_error *err)
    __attribute__((warn_unused_result));

/* Frees what res owns. Safe on a zeroed or already released result. */
void certs_create_result_release(struct certs_create_result *res);

/*
 * Reads the first PEM certificate in path and returns the base64 of the
 * whole file, the form a webhook's clientConfig.caBundle takes. Returns a
 * string the caller frees with free(), or NULL with err filled when the file
 * is unreadable, too large or holds no certificate.
 */
char *certs_ca_bundle_from_file(const char *path, struct ng_error *err)
    __attribute__((warn_unused_result));

/*
 * Reads a file holding a base64 caBundle (as `certs create` prints it),
 * checks that it decodes into a PEM certificate, and returns it without
 * surrounding white space (caller frees). NULL with err filled otherwise.
 */
char *certs_ca_bundle_load(const char *path, struct ng_error *err)
    __attribute__((warn_unused_result));

/* Outcome of certs_inspect(). */
enum certs_status {
    CERTS_OK = 0,       /* readable, valid now, and every check asked passed */
    CERTS_FAILED = 1,   /* expired, not yet valid, wrong CA or wrong host */
    CERTS_BAD_INPUT = 2 /* a file is missing, unreadable or not a certificate */
};

/*
 * Prints path's first certificate (subject, SANs, issuer, validity, days
 * left, key type, extended key usage) to out. Checks that it is valid now;
 * with ca_path, verifies it against the certificates in ca_path; with host
 * (a DNS name or IP address), checks that it names host; with
 * renew_before_days > 0, checks that it stays valid for more than that many
 * days (a certificate inside its renewal window fails). Stops at bad input
 * but runs every check otherwise; err gets the first failure. Thread-safe.
 */
enum certs_status certs_inspect(const char *path, const char *ca_path,
                                const char *host, int renew_before_days,
                                FILE *out, struct ng_error *err)
    __attribute__((warn_unused_result));

/* Values for the MutatingWebhookConfiguration; every pointer is borrowed. */
struct certs_webhook_opts {
    const char *name;      /* object name, "ncclguard" */
    const char *service;   /* Service the apiserver calls */
    const char *ns;        /* and its namespace */
    const char *ca_bundle; /* base64 PEM, as certs_ca_bundle_from_file() */
    /* GPU resource names for the CEL matchCondition; NULL means any
     * extended resource (a name with a '/'), which does not depend on
     * the policy. */
    const char *const *gpu_resources;
    size_t n_gpu_resources;
};

/* The default policy's GPU resource names, as compiled in: a static array
 * of *n entries. Thread-safe. */
const char *const *certs_default_gpu_resources(size_t *n);

/*
 * Writes the MutatingWebhookConfiguration as YAML to out. It is the object
 * in deploy/base/mutatingwebhookconfiguration.yaml with the names and the
 * caBundle filled in (a check keeps the two equal). Returns 0, or -1 with
 * err filled when a value is not a valid name (GPU resource names must be
 * Kubernetes resource names, which keeps them safe inside a CEL string) or
 * the write fails. Thread-safe.
 */
int certs_webhook_write(const struct certs_webhook_opts *opts, FILE *out,
                        struct ng_error *err)
    __attribute__((warn_unused_result));

/*
 * Writes the strategic merge patch that sets only the caBundle of the
 * webhook configuration's one webhook (merged by its name, so every other
 * field stays with whoever applied it). opts->name is the object's name;
 * service, ns and gpu_resources are not used. Returns 0, or -1 with err
 * filled as certs_webhook_write(). Thread-safe.
 */
int certs_webhook_ca_patch_write(const struct certs_webhook_opts *opts,
                                 FILE *out, struct ng_error *err)
    __attribute__((warn_unused_result));

/* true when s is a DNS-1123 label (namespace names): [a-z0-9-], at most 63,
 * starting and ending with an alphanumeric. */
bool certs_is_dns_label(const char *s);

/* true when s is a DNS name usable as a SAN: dot-separated labels of
 * [A-Za-z0-9-] (a leading "*." allowed), at most 253 characters. */
bool certs_is_dns_name(const char *s);

#endif
