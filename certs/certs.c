/* Webhook certificates with OpenSSL 3 EVP APIs: create, inspect, caBundle. */
#include "certs/certs.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/buffer.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "base/file.h"

/* Certificates start a little in the past so that a node whose clock lags
 * the one that signed them still accepts them. */
#define CERTS_BACKDATE_SECONDS (5 * 60)

static const char ca_common_name[] = "ncclguard webhook CA";

/* Appends the newest OpenSSL error, if any, to a message. */
static void
set_ssl_error(struct ng_error *err, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256];

    if (e == 0) {
        ng_error_set(err, 0, 0, "%s", what);
    } else {
        ERR_error_string_n(e, buf, sizeof(buf));
        ng_error_set(err, 0, 0, "%s: %s", what, buf);
    }
    ERR_clear_error();
}

bool
certs_is_dns_label(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

        if (!alnum && c != '-')
            return false;
        if (c == '-' && (i == 0 || i == n - 1))
            return false;
    }
    return true;
}

bool
certs_is_dns_name(const char *s)
{
    size_t n = strlen(s), label = 0;

    if (strncmp(s, "*.", 2) == 0) {
        s += 2;
        n -= 2;
    }
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i <= n; i++) {
        char c = s[i];

        if (c == '.' || c == '\0') {
            if (label == 0 || label > 63 || s[i - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)c) && c != '-')
            return false;
        if (c == '-' && label == 0)
            return false;
        label++;
    }
    return true;
}

/* true when s is a dotted IPv4 or an IPv6 address. */
static bool
is_ip(const char *s)
{
    unsigned char buf[16];

    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/*
 * Writes data to dir/name through a temporary file and a rename, with the
 * given mode. Returns 0 or -1 with err filled.
 */
static int
file_write_atomic(const char *dir, const char *name, const void *data,
                  size_t len, mode_t mode, struct ng_error *err)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    const char *p = data;
    int fd = -1, n;

    n = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        ng_error_set(err, 0, 0, "path too long: %s/%s", dir, name);
        return -1;
    }
    n = snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        ng_error_set(err, 0, 0, "path too long: %s/%s", dir, name);
        return -1;
    }
    fd = mkstemp(tmp);
    if (fd < 0) {
        ng_error_set(err, 0, 0, "cannot create a file in %s: %s", dir,
                     strerror(errno));
        return -1;
    }
    if (fchmod(fd, mode) != 0) {
        ng_error_set(err, 0, 0, "cannot set the mode of %s: %s", tmp,
                     strerror(errno));
        goto fail;
    }
    while (len > 0) {
        ssize_t w = write(fd, p, len);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            ng_error_set(err, 0, 0, "cannot write %s: %s", path,
                         strerror(errno));
            goto fail;
        }
        p += w;
        len -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        fd = -1;
        ng_error_set(err, 0, 0, "cannot write %s: %s", path, strerror(errno));
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        ng_error_set(err, 0, 0, "cannot rename %s to %s: %s", tmp, path,
                     strerror(errno));
        goto fail;
    }
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return -1;
}

/* Writes a certificate as PEM to dir/name, mode 0644. */
static int
cert_write(const char *dir, const char *name, X509 *cert, struct ng_error *err)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *data = NULL;
    long len;
    int rc = -1;

    if (bio == NULL || !PEM_write_bio_X509(bio, cert)) {
        set_ssl_error(err, "cannot encode a certificate");
        goto out;
    }
    len = BIO_get_mem_data(bio, &data);
    rc = file_write_atomic(dir, name, data, (size_t)len, 0644, err);
out:
    BIO_free(bio);
    return rc;
}

/* Writes a private key as PKCS#8 PEM to dir/name, mode 0600, through a
 * secure-heap buffer that is wiped before it is freed. */
static int
key_write(const char *dir, const char *name, EVP_PKEY *key,
          struct ng_error *err)
{
    BIO *bio = BIO_new(BIO_s_secmem());
    char *data = NULL;
    long len = 0;
    int rc = -1;

    if (bio == NULL ||
        !PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL)) {
        set_ssl_error(err, "cannot encode a private key");
        goto out;
    }
    len = BIO_get_mem_data(bio, &data);
    rc = file_write_atomic(dir, name, data, (size_t)len, 0600, err);
out:
    if (data != NULL && len > 0)
        OPENSSL_cleanse(data, (size_t)len);
    BIO_free(bio);
    return rc;
}

static EVP_PKEY *
key_generate(enum certs_key_type type, struct ng_error *err)
{
    EVP_PKEY *key;

    if (type == CERTS_KEY_RSA)
        key = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    else
        key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (key == NULL)
        set_ssl_error(err, "cannot generate a private key");
    return key;
}

/* Adds one extension given in OpenSSL's configuration syntax; value is a
 * constant of this file, never user input. */
static int
ext_add(X509 *cert, X509V3_CTX *ctx, int nid, const char *value,
        struct ng_error *err)
{
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    int ok;

    if (ext == NULL) {
        set_ssl_error(err, "cannot build a certificate extension");
        return -1;
    }
    ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    if (!ok) {
        set_ssl_error(err, "cannot add a certificate extension");
        return -1;
    }
    return 0;
}

/* A new certificate with a random serial, subject CN=cn, validity from a
 * little before now for the given days, and pubkey. */
static X509 *
cert_new(const char *cn, int days, EVP_PKEY *pubkey, struct ng_error *err)
{
    X509 *cert = X509_new();
    X509_NAME *subject = NULL;
    BIGNUM *bn = BN_new();
    ASN1_INTEGER *serial = NULL;

    if (cert == NULL || bn == NULL)
        goto fail;
    /* Positive 127-bit serials, as RFC 5280 asks for at most 20 octets. */
    if (!X509_set_version(cert, X509_VERSION_3) ||
        !BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY))
        goto fail;
    serial = BN_to_ASN1_INTEGER(bn, NULL);
    if (serial == NULL || !X509_set_serialNumber(cert, serial))
        goto fail;
    if (X509_gmtime_adj(X509_getm_notBefore(cert), -CERTS_BACKDATE_SECONDS) ==
            NULL ||
        X509_time_adj_ex(X509_getm_notAfter(cert), days, 0, NULL) == NULL)
        goto fail;
    subject = X509_get_subject_name(cert);
    if (!X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                    (const unsigned char *)cn, -1, -1, 0))
        goto fail;
    if (!X509_set_pubkey(cert, pubkey))
        goto fail;
    ASN1_INTEGER_free(serial);
    BN_free(bn);
    return cert;
fail:
    set_ssl_error(err, "cannot build a certificate");
    ASN1_INTEGER_free(serial);
    BN_free(bn);
    X509_free(cert);
    return NULL;
}

static X509 *
ca_cert_new(EVP_PKEY *key, int days, struct ng_error *err)
{
    X509 *cert = cert_new(ca_common_name, days, key, err);
    X509V3_CTX ctx;

    if (cert == NULL)
        return NULL;
    if (!X509_set_issuer_name(cert, X509_get_subject_name(cert))) {
        set_ssl_error(err, "cannot build the CA certificate");
        goto fail;
    }
    X509V3_set_ctx(&ctx, cert, cert, NULL, NULL, 0);
    if (ext_add(cert, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0",
                err) != 0 ||
        ext_add(cert, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign",
                err) != 0 ||
        ext_add(cert, &ctx, NID_subject_key_identifier, "hash", err) != 0 ||
        ext_add(cert, &ctx, NID_authority_key_identifier, "keyid:always",
                err) != 0)
        goto fail;
    if (X509_sign(cert, key, EVP_sha256()) == 0) {
        set_ssl_error(err, "cannot sign the CA certificate");
        goto fail;
    }
    return cert;
fail:
    X509_free(cert);
    return NULL;
}

/* Appends one SAN (DNS name or IP address) to names. */
static int
san_push(GENERAL_NAMES *names, const char *value, struct ng_error *err)
{
    GENERAL_NAME *gn = NULL;

    if (is_ip(value)) {
        ASN1_OCTET_STRING *ip = a2i_IPADDRESS(value);

        if (ip == NULL)
            goto fail;
        gn = GENERAL_NAME_new();
        if (gn == NULL) {
            ASN1_OCTET_STRING_free(ip);
            goto fail;
        }
        GENERAL_NAME_set0_value(gn, GEN_IPADD, ip);
    } else {
        ASN1_IA5STRING *dns = ASN1_IA5STRING_new();

        if (dns == NULL || !ASN1_STRING_set(dns, value, -1)) {
            ASN1_IA5STRING_free(dns);
            goto fail;
        }
        gn = GENERAL_NAME_new();
        if (gn == NULL) {
            ASN1_IA5STRING_free(dns);
            goto fail;
        }
        GENERAL_NAME_set0_value(gn, GEN_DNS, dns);
    }
    if (!sk_GENERAL_NAME_push(names, gn)) {
        GENERAL_NAME_free(gn);
        goto fail;
    }
    return 0;
fail:
    set_ssl_error(err, "cannot build the subject alternative names");
    return -1;
}

static X509 *
serving_cert_new(const struct certs_create_opts *o, EVP_PKEY *key, X509 *ca,
                 EVP_PKEY *ca_key, int days, struct ng_error *err)
{
    char names[4][200], cn[160];
    GENERAL_NAMES *sans = NULL;
    X509 *cert = NULL;
    X509V3_CTX ctx;
    int n;

    n = snprintf(cn, sizeof(cn), "%s.%s.svc", o->service, o->ns);
    if (n < 0 || (size_t)n >= sizeof(cn)) {
        ng_error_set(err, 0, 0, "service and namespace names too long");
        return NULL;
    }
    snprintf(names[0], sizeof(names[0]), "%s", o->service);
    snprintf(names[1], sizeof(names[1]), "%s.%s", o->service, o->ns);
    snprintf(names[2], sizeof(names[2]), "%s", cn);
    snprintf(names[3], sizeof(names[3]), "%s.cluster.local", cn);

    cert = cert_new(cn, days, key, err);
    if (cert == NULL)
        return NULL;
    if (!X509_set_issuer_name(cert, X509_get_subject_name(ca))) {
        set_ssl_error(err, "cannot build the serving certificate");
        goto fail;
    }
    X509V3_set_ctx(&ctx, ca, cert, NULL, NULL, 0);
    if (ext_add(cert, &ctx, NID_basic_constraints, "critical,CA:FALSE", err) !=
            0 ||
        ext_add(cert, &ctx, NID_key_usage,
                o->key_type == CERTS_KEY_RSA
                    ? "critical,digitalSignature,keyEncipherment"
                    : "critical,digitalSignature",
                err) != 0 ||
        ext_add(cert, &ctx, NID_ext_key_usage, "serverAuth", err) != 0 ||
        ext_add(cert, &ctx, NID_subject_key_identifier, "hash", err) != 0 ||
        ext_add(cert, &ctx, NID_authority_key_identifier, "keyid:always",
                err) != 0)
        goto fail;

    sans = sk_GENERAL_NAME_new_null();
    if (sans == NULL) {
        set_ssl_error(err, "cannot build the subject alternative names");
        goto fail;
    }
    for (size_t i = 0; i < 4; i++)
        if (san_push(sans, names[i], err) != 0)
            goto fail;
    for (size_t i = 0; i < o->n_sans; i++)
        if (san_push(sans, o->sans[i], err) != 0)
            goto fail;
    if (!X509_add1_ext_i2d(cert, NID_subject_alt_name, sans, 0,
                           X509V3_ADD_DEFAULT)) {
        set_ssl_error(err, "cannot add the subject alternative names");
        goto fail;
    }
    GENERAL_NAMES_free(sans);
    sans = NULL;
    if (X509_sign(cert, ca_key, EVP_sha256()) == 0) {
        set_ssl_error(err, "cannot sign the serving certificate");
        goto fail;
    }
    return cert;
fail:
    GENERAL_NAMES_free(sans);
    X509_free(cert);
    return NULL;
}

/* Parses the first certificate of a PEM buffer; NULL if there is none. */
static X509 *
pem_cert_parse(const char *buf, size_t len)
{
    BIO *bio = BIO_new_mem_buf(buf, (int)len);
    X509 *cert = NULL;

    if (bio != NULL)
        cert = PEM_read_bio_X509(bio, NULL, NULL, NULL);
    BIO_free(bio);
    ERR_clear_error();
    return cert;
}

/* true when path exists (as anything). */
static bool
path_exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

/*
 * Loads dir/ca.crt and dir/ca.key when both exist. Returns 1 with *cert,
 * *key and the raw files filled, 0 when neither exists, -1 on any problem
 * (one missing, unreadable, not matching, not a CA, expired).
 */
static int
ca_load(const char *dir, X509 **cert_out, EVP_PKEY **key_out, char **crt_raw,
        size_t *crt_len, char **key_raw, size_t *key_len, struct ng_error *err)
{
    char crt_path[PATH_MAX], key_path[PATH_MAX];
    X509 *cert = NULL;
    EVP_PKEY *key = NULL;
    BIO *bio = NULL;
    char *crt = NULL, *keybuf = NULL;
    size_t clen = 0, klen = 0;
    bool have_crt, have_key;
    int n1, n2;

    n1 = snprintf(crt_path, sizeof(crt_path), "%s/ca.crt", dir);
    n2 = snprintf(key_path, sizeof(key_path), "%s/ca.key", dir);
    if (n1 < 0 || n2 < 0 || (size_t)n1 >= sizeof(crt_path) ||
        (size_t)n2 >= sizeof(key_path)) {
        ng_error_set(err, 0, 0, "path too long: %s", dir);
        return -1;
    }
    have_crt = path_exists(crt_path);
    have_key = path_exists(key_path);
    if (!have_crt && !have_key)
        return 0;
    if (!have_key) {
        ng_error_set(err, 0, 0,
                     "found %s but not %s: cannot sign with this CA (remove "
                     "ca.crt to create a new CA, which changes the caBundle)",
                     crt_path, key_path);
        return -1;
    }
    if (!have_crt) {
        ng_error_set(err, 0, 0, "found %s but not %s", key_path, crt_path);
        return -1;
    }
    crt = file_read(crt_path, CERTS_MAX_FILE, &clen, err);
    if (crt == NULL)
        goto fail;
    cert = pem_cert_parse(crt, clen);
    if (cert == NULL) {
        ng_error_set(err, 0, 0,
                     "%s: no PEM certificate found (expected -----BEGIN "
                     "CERTIFICATE-----)",
                     crt_path);
        goto fail;
    }
    keybuf = file_read(key_path, CERTS_MAX_FILE, &klen, err);
    if (keybuf == NULL)
        goto fail;
    bio = BIO_new_mem_buf(keybuf, (int)klen);
    if (bio != NULL)
        key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    ERR_clear_error();
    if (key == NULL) {
        ng_error_set(err, 0, 0,
                     "%s: no PEM private key found (expected -----BEGIN "
                     "PRIVATE KEY-----)",
                     key_path);
        goto fail;
    }
    if (X509_check_ca(cert) != 1) {
        ng_error_set(err, 0, 0, "%s is not a CA certificate", crt_path);
        goto fail;
    }
    if (X509_check_private_key(cert, key) != 1) {
        ERR_clear_error();
        ng_error_set(err, 0, 0, "%s does not match the certificate in %s",
                     key_path, crt_path);
        goto fail;
    }
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
        ng_error_set(err, 0, 0,
                     "the CA in %s has expired: remove ca.crt and ca.key to "
                     "create a new one",
                     crt_path);
        goto fail;
    }
    *cert_out = cert;
    *key_out = key;
    *crt_raw = crt;
    *crt_len = clen;
    *key_raw = keybuf;
    *key_len = klen;
    return 1;
fail:
    X509_free(cert);
    EVP_PKEY_free(key);
    free(crt);
    file_free_secret(keybuf, klen);
    return -1;
}

/* Base64 of len bytes, one line, heap-allocated. */
static char *
base64_encode(const unsigned char *data, size_t len)
{
    size_t out_len;
    char *out;

    if (len > (size_t)INT_MAX / 2)
        return NULL;
    out_len = 4 * ((len + 2) / 3) + 1;
    out = malloc(out_len);
    if (out == NULL)
        return NULL;
    EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    return out;
}

static int
create_opts_check(const struct certs_create_opts *o, struct ng_error *err)
{
    if (o->service == NULL || !certs_is_dns_label(o->service) ||
        !isalpha((unsigned char)o->service[0])) {
        ng_error_set(err, 0, 0,
                     "invalid service name '%s': expected a DNS-1035 label "
                     "(lower-case letters, digits and '-', starting with a "
                     "letter, at most 63 characters)",
                     o->service ? o->service : "");
        return -1;
    }
    if (o->ns == NULL || !certs_is_dns_label(o->ns)) {
        ng_error_set(err, 0, 0,
                     "invalid namespace '%s': expected a DNS-1123 label "
                     "(lower-case letters, digits and '-', at most 63 "
                     "characters)",
                     o->ns ? o->ns : "");
        return -1;
    }
    if (o->out_dir == NULL || o->out_dir[0] == '\0') {
        ng_error_set(err, 0, 0, "no output directory given");
        return -1;
    }
    if (o->days < 0 || o->days > CERTS_MAX_DAYS) {
        ng_error_set(err, 0, 0, "invalid days %d: expected 0 to %d", o->days,
                     CERTS_MAX_DAYS);
        return -1;
    }
    if (o->ca_days < 1 || o->ca_days > CERTS_MAX_DAYS) {
        ng_error_set(err, 0, 0, "invalid CA days %d: expected 1 to %d",
                     o->ca_days, CERTS_MAX_DAYS);
        return -1;
    }
    if (o->key_type != CERTS_KEY_EC && o->key_type != CERTS_KEY_RSA) {
        ng_error_set(err, 0, 0, "invalid key type");
        return -1;
    }
    if (o->n_sans > CERTS_MAX_SANS) {
        ng_error_set(err, 0, 0, "too many SANs (%zu): at most %d", o->n_sans,
                     CERTS_MAX_SANS);
        return -1;
    }
    if (o->renew &&
        (o->renew_before_days < 1 || o->renew_before_days > CERTS_MAX_DAYS)) {
        ng_error_set(err, 0, 0,
                     "invalid renew-before days %d: expected 1 to %d",
                     o->renew_before_days, CERTS_MAX_DAYS);
        return -1;
    }
    for (size_t i = 0; i < o->n_sans; i++) {
        if (!is_ip(o->sans[i]) && !certs_is_dns_name(o->sans[i])) {
            ng_error_set(err, 0, 0,
                         "invalid SAN '%s': expected a DNS name or an IP "
                         "address",
                         o->sans[i]);
            return -1;
        }
    }
    return 0;
}

/* Seconds from now until t; negative when t has passed. */
static long long
seconds_until(const ASN1_TIME *t)
{
    int days = 0, secs = 0;

    if (!ASN1_TIME_diff(&days, &secs, NULL, t))
        return 0;
    return (long long)days * 86400 + secs;
}

/* Fills a renewal reason; a long path may shorten it, which is fine for a
 * message. */
static void why_set(char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
why_set(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
}

/* true when cert has a DNS SAN equal to name (ASCII case-insensitive): a
 * literal comparison, so that a wildcard SAN asked for is found as it is. */
static bool
cert_has_dns_san(X509 *cert, const char *name)
{
    GENERAL_NAMES *names =
        X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    bool found = false;

    for (int i = 0; names != NULL && i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        const unsigned char *d;
        size_t n = strlen(name);

        if (g->type != GEN_DNS)
            continue;
        d = ASN1_STRING_get0_data(g->d.dNSName);
        if ((size_t)ASN1_STRING_length(g->d.dNSName) == n &&
            strncasecmp((const char *)d, name, n) == 0) {
            found = true;
            break;
        }
    }
    GENERAL_NAMES_free(names);
    ERR_clear_error();
    return found;
}

/*
 * Renewal mode: whether the serving pair in dir can stay. Returns true
 * with *cert_out, *crt_raw and *key_raw (the files, the key to be wiped)
 * filled when it is signed by ca, names every name o asks for, has a key
 * of o->key_type that matches it, is valid now and for more than
 * o->renew_before_days more days. Otherwise returns false with why filled
 * and nothing to free. Errors reading the files count as "issue anew".
 */
static bool
current_pair_keep(const struct certs_create_opts *o, const char *dir, X509 *ca,
                  X509 **cert_out, char **crt_raw, size_t *crt_len,
                  char **key_raw, size_t *key_len, char *why, size_t why_len)
{
    char crt_path[PATH_MAX], key_path[PATH_MAX], names[4][200];
    char *crt = NULL, *keybuf = NULL;
    size_t clen = 0, klen = 0;
    struct ng_error rerr = {0};
    EVP_PKEY *key = NULL, *ca_pub;
    X509 *cert = NULL;
    long long left;
    BIO *bio = NULL;
    int want_type, n1, n2;

    n1 = snprintf(crt_path, sizeof(crt_path), "%s/tls.crt", dir);
    n2 = snprintf(key_path, sizeof(key_path), "%s/tls.key", dir);
    if (n1 < 0 || n2 < 0 || (size_t)n1 >= sizeof(crt_path) ||
        (size_t)n2 >= sizeof(key_path)) {
        why_set(why, why_len, "path too long: %s", dir);
        return false;
    }
    if (!path_exists(crt_path) || !path_exists(key_path)) {
        why_set(why, why_len, "no current serving certificate in %s", dir);
        return false;
    }
    crt = file_read(crt_path, CERTS_MAX_FILE, &clen, &rerr);
    if (crt != NULL)
        keybuf = file_read(key_path, CERTS_MAX_FILE, &klen, &rerr);
    if (crt == NULL || keybuf == NULL) {
        why_set(why, why_len, "%s", rerr.msg);
        goto fail;
    }
    cert = pem_cert_parse(crt, clen);
    bio = BIO_new_mem_buf(keybuf, (int)klen);
    if (bio != NULL)
        key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    ERR_clear_error();
    if (cert == NULL || key == NULL) {
        why_set(why, why_len, "%s or %s holds no PEM certificate or key",
                crt_path, key_path);
        goto fail;
    }
    if (X509_check_private_key(cert, key) != 1) {
        ERR_clear_error();
        why_set(why, why_len, "%s does not match %s", key_path, crt_path);
        goto fail;
    }
    want_type = o->key_type == CERTS_KEY_RSA ? EVP_PKEY_RSA : EVP_PKEY_EC;
    if (EVP_PKEY_get_base_id(key) != want_type) {
        why_set(why, why_len, "%s is not an %s key", key_path,
                o->key_type == CERTS_KEY_RSA ? "RSA" : "EC");
        goto fail;
    }
    ca_pub = X509_get0_pubkey(ca);
    if (ca_pub == NULL || X509_check_issued(ca, cert) != X509_V_OK ||
        X509_verify(cert, ca_pub) != 1) {
        ERR_clear_error();
        why_set(why, why_len, "%s is not signed by the CA in use", crt_path);
        goto fail;
    }
    snprintf(names[0], sizeof(names[0]), "%s", o->service);
    snprintf(names[1], sizeof(names[1]), "%s.%s", o->service, o->ns);
    snprintf(names[2], sizeof(names[2]), "%s.%s.svc", o->service, o->ns);
    snprintf(names[3], sizeof(names[3]), "%s.%s.svc.cluster.local", o->service,
             o->ns);
    for (size_t i = 0; i < 4 + o->n_sans; i++) {
        const char *name = i < 4 ? names[i] : o->sans[i - 4];
        bool named = is_ip(name) ? X509_check_ip_asc(cert, name, 0) == 1
                                 : cert_has_dns_san(cert, name);

        ERR_clear_error();
        if (!named) {
            why_set(why, why_len, "%s does not name %s", crt_path, name);
            goto fail;
        }
    }
    if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
        why_set(why, why_len, "%s is not valid yet", crt_path);
        goto fail;
    }
    left = seconds_until(X509_get0_notAfter(cert));
    if (left <= (long long)o->renew_before_days * 86400) {
        why_set(why, why_len,
                "%s expires in %lld days, within --renew-before %d", crt_path,
                left > 0 ? left / 86400 : 0, o->renew_before_days);
        goto fail;
    }
    why_set(why, why_len,
            "%s is good for %lld more days (renewed at %d days left)", crt_path,
            left / 86400, o->renew_before_days);
    EVP_PKEY_free(key);
    *cert_out = cert;
    *crt_raw = crt;
    *crt_len = clen;
    *key_raw = keybuf;
    *key_len = klen;
    return true;
fail:
    EVP_PKEY_free(key);
    X509_free(cert);
    free(crt);
    file_free_secret(keybuf, klen);
    return false;
}

int
certs_create(const struct certs_create_opts *o, struct certs_create_result *res,
             struct ng_error *err)
{
    const char *ca_dir = o->ca_dir != NULL ? o->ca_dir : o->out_dir;
    X509 *ca = NULL, *cert = NULL;
    EVP_PKEY *ca_key = NULL, *key = NULL;
    char *crt_raw = NULL, *key_raw = NULL, *bundle = NULL;
    char *cur_crt = NULL, *cur_key = NULL;
    size_t crt_len = 0, key_len = 0, cur_crt_len = 0, cur_key_len = 0;
    const char *cur_dir = o->current_dir != NULL ? o->current_dir : o->out_dir;
    bool reused = false, same_dir, kept = false;
    int days = o->days, loaded;
    char warning[256] = "", reason[256] = "";
    BIO *bio = NULL;

    memset(res, 0, sizeof(*res));
    if (create_opts_check(o, err) != 0)
        return -1;
    if (mkdir(o->out_dir, 0700) != 0 && errno != EEXIST) {
        ng_error_set(err, 0, 0, "cannot create directory %s: %s", o->out_dir,
                     strerror(errno));
        return -1;
    }

    loaded = ca_load(ca_dir, &ca, &ca_key, &crt_raw, &crt_len, &key_raw,
                     &key_len, err);
    if (loaded < 0)
        goto fail;
    if (loaded == 1) {
        long long left = seconds_until(X509_get0_notAfter(ca));

        reused = true;
        /* A serving certificate cannot outlive the CA that signs it. */
        if ((long long)days * 86400 > left) {
            days = (int)(left / 86400);
            snprintf(warning, sizeof(warning),
                     "the CA expires in %d days: the serving certificate is "
                     "valid for %d days instead of %d",
                     days, days, o->days);
        }
    } else {
        ca_key = key_generate(o->key_type, err);
        if (ca_key == NULL)
            goto fail;
        ca = ca_cert_new(ca_key, o->ca_days, err);
        if (ca == NULL)
            goto fail;
        if (days > o->ca_days) {
            snprintf(warning, sizeof(warning),
                     "the serving certificate is valid for %d days, as long "
                     "as the CA, instead of %d",
                     o->ca_days, days);
            days = o->ca_days;
        }
    }

    /* Renewal mode: a serving pair that is still good stays as it is, so
     * running the renewal often changes nothing until it is due. A new CA
     * never verifies the old pair, so it always gets a new one. */
    if (o->renew)
        kept =
            current_pair_keep(o, cur_dir, ca, &cert, &cur_crt, &cur_crt_len,
                              &cur_key, &cur_key_len, reason, sizeof(reason));
    if (kept) {
        warning[0] = '\0'; /* the kept certificate was shortened, if at all,
                            * when it was issued */
    } else {
        key = key_generate(o->key_type, err);
        if (key == NULL)
            goto fail;
        cert = serving_cert_new(o, key, ca, ca_key, days, err);
        if (cert == NULL)
            goto fail;
    }

    /* The CA files go first: a tls.crt on disk always has its CA next to
     * it. A reused CA is copied byte for byte, never re-encoded. */
    same_dir = reused && strcmp(ca_dir, o->out_dir) == 0;
    if (!reused) {
        if (key_write(o->out_dir, "ca.key", ca_key, err) != 0 ||
            cert_write(o->out_dir, "ca.crt", ca, err) != 0)
            goto fail;
    } else if (!same_dir) {
        if (file_write_atomic(o->out_dir, "ca.key", key_raw, key_len, 0600,
                              err) != 0 ||
            file_write_atomic(o->out_dir, "ca.crt", crt_raw, crt_len, 0644,
                              err) != 0)
            goto fail;
    }
    if (kept) {
        /* Byte for byte: the Secret built from these files is then the
         * same, and storing it again changes nothing. */
        if (strcmp(cur_dir, o->out_dir) != 0 &&
            (file_write_atomic(o->out_dir, "tls.key", cur_key, cur_key_len,
                               0600, err) != 0 ||
             file_write_atomic(o->out_dir, "tls.crt", cur_crt, cur_crt_len,
                               0644, err) != 0))
            goto fail;
    } else if (key_write(o->out_dir, "tls.key", key, err) != 0 ||
               cert_write(o->out_dir, "tls.crt", cert, err) != 0) {
        goto fail;
    }

    if (reused) {
        bundle = base64_encode((const unsigned char *)crt_raw, crt_len);
    } else {
        char *data = NULL;
        long len;

        bio = BIO_new(BIO_s_mem());
        if (bio == NULL || !PEM_write_bio_X509(bio, ca)) {
            set_ssl_error(err, "cannot encode the CA certificate");
            goto fail;
        }
        len = BIO_get_mem_data(bio, &data);
        bundle = base64_encode((const unsigned char *)data, (size_t)len);
    }
    if (bundle == NULL) {
        ng_error_set(err, 0, 0, "out of memory encoding the caBundle");
        goto fail;
    }

    res->ca_reused = reused;
    res->ca_bundle = bundle;
    res->kept = kept;
    res->seconds_left = seconds_until(X509_get0_notAfter(cert));
    snprintf(res->warning, sizeof(res->warning), "%s", warning);
    snprintf(res->reason, sizeof(res->reason), "%s", reason);
    BIO_free(bio);
    X509_free(ca);
    X509_free(cert);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    free(crt_raw);
    file_free_secret(key_raw, key_len);
    free(cur_crt);
    file_free_secret(cur_key, cur_key_len);
    return 0;
fail:
    BIO_free(bio);
    X509_free(ca);
    X509_free(cert);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    free(crt_raw);
    file_free_secret(key_raw, key_len);
    free(cur_crt);
    file_free_secret(cur_key, cur_key_len);
    return -1;
}

void
certs_create_result_release(struct certs_create_result *res)
{
    if (res == NULL)
        return;
    free(res->ca_bundle);
    res->ca_bundle = NULL;
    res->ca_reused = false;
    res->kept = false;
    res->seconds_left = 0;
    res->warning[0] = '\0';
    res->reason[0] = '\0';
}

char *
certs_ca_bundle_from_file(const char *path, struct ng_error *err)
{
    size_t len = 0;
    char *buf = file_read(path, CERTS_MAX_FILE, &len, err), *out;
    X509 *cert;

    if (buf == NULL)
        return NULL;
    cert = pem_cert_parse(buf, len);
    if (cert == NULL) {
        ng_error_set(err, 0, 0,
                     "%s: no PEM certificate found (expected -----BEGIN "
                     "CERTIFICATE-----)",
                     path);
        free(buf);
        return NULL;
    }
    X509_free(cert);
    out = base64_encode((const unsigned char *)buf, len);
    if (out == NULL)
        ng_error_set(err, 0, 0, "out of memory encoding %s", path);
    free(buf);
    return out;
}

char *
certs_ca_bundle_load(const char *path, struct ng_error *err)
{
    size_t len = 0, start = 0, end, dlen;
    char *buf = file_read(path, CERTS_MAX_FILE, &len, err), *out = NULL;
    unsigned char *decoded = NULL;
    X509 *cert = NULL;
    int n;

    if (buf == NULL)
        return NULL;
    while (start < len && isspace((unsigned char)buf[start]))
        start++;
    end = len;
    while (end > start && isspace((unsigned char)buf[end - 1]))
        end--;
    for (size_t i = start; i < end; i++) {
        unsigned char c = (unsigned char)buf[i];

        if (!isalnum(c) && c != '+' && c != '/' && c != '=') {
            ng_error_set(err, 0, 0,
                         "%s: not a base64 caBundle (unexpected character "
                         "at byte %zu); use --ca-file for a PEM file",
                         path, i + 1);
            goto out;
        }
    }
    dlen = end - start;
    if (dlen == 0 || dlen % 4 != 0) {
        ng_error_set(err, 0, 0,
                     "%s: not a base64 caBundle (length %zu is not a "
                     "multiple of 4)",
                     path, dlen);
        goto out;
    }
    decoded = malloc(dlen / 4 * 3 + 1);
    if (decoded == NULL) {
        ng_error_set(err, 0, 0, "out of memory reading %s", path);
        goto out;
    }
    n = EVP_DecodeBlock(decoded, (const unsigned char *)buf + start, (int)dlen);
    if (n < 0) {
        ng_error_set(err, 0, 0, "%s: not a base64 caBundle", path);
        goto out;
    }
    cert = pem_cert_parse((const char *)decoded, (size_t)n);
    if (cert == NULL) {
        ng_error_set(err, 0, 0,
                     "%s: the caBundle does not decode into a PEM "
                     "certificate",
                     path);
        goto out;
    }
    out = malloc(dlen + 1);
    if (out == NULL) {
        ng_error_set(err, 0, 0, "out of memory reading %s", path);
        goto out;
    }
    memcpy(out, buf + start, dlen);
    out[dlen] = '\0';
out:
    X509_free(cert);
    free(decoded);
    free(buf);
    return out;
}

/* Formats an ASN1_TIME as RFC 3339 UTC. */
static void
time_format(const ASN1_TIME *t, char *buf, size_t n)
{
    struct tm tm;

    if (!ASN1_TIME_to_tm(t, &tm)) {
        snprintf(buf, n, "(invalid time)");
        return;
    }
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Prints an X509_NAME on one line, RFC 2253 style. */
static void
name_print(FILE *out, const char *label, const X509_NAME *name)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *data = NULL;
    long len = 0;

    if (bio != NULL && X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253) >= 0)
        len = BIO_get_mem_data(bio, &data);
    fprintf(out, "%-12s %.*s\n", label, (int)len, data ? data : "");
    BIO_free(bio);
}

static void
sans_print(FILE *out, X509 *cert)
{
    GENERAL_NAMES *sans =
        X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    int n = sans ? sk_GENERAL_NAME_num(sans) : 0;

    fprintf(out, "%-12s", "SANs:");
    if (n == 0)
        fprintf(out, " (none)");
    for (int i = 0; i < n; i++) {
        const GENERAL_NAME *gn = sk_GENERAL_NAME_value(sans, i);
        const char *sep = i == 0 ? " " : ", ";

        if (gn->type == GEN_DNS) {
            fprintf(out, "%sDNS:%.*s", sep, ASN1_STRING_length(gn->d.dNSName),
                    (const char *)ASN1_STRING_get0_data(gn->d.dNSName));
        } else if (gn->type == GEN_IPADD) {
            const unsigned char *ip = ASN1_STRING_get0_data(gn->d.iPAddress);
            int iplen = ASN1_STRING_length(gn->d.iPAddress);
            char text[INET6_ADDRSTRLEN] = "?";

            if (iplen == 4)
                inet_ntop(AF_INET, ip, text, sizeof(text));
            else if (iplen == 16)
                inet_ntop(AF_INET6, ip, text, sizeof(text));
            fprintf(out, "%sIP:%s", sep, text);
        } else {
            fprintf(out, "%s(other)", sep);
        }
    }
    fprintf(out, "\n");
    GENERAL_NAMES_free(sans);
}

static void
key_print(FILE *out, X509 *cert)
{
    EVP_PKEY *key = X509_get0_pubkey(cert);
    char group[64] = "";
    size_t glen = 0;

    if (key == NULL) {
        fprintf(out, "%-12s (unreadable)\n", "key:");
        return;
    }
    if (EVP_PKEY_is_a(key, "EC")) {
        if (!EVP_PKEY_get_utf8_string_param(key, "group", group, sizeof(group),
                                            &glen))
            snprintf(group, sizeof(group), "unknown curve");
        fprintf(out, "%-12s EC %s\n", "key:", group);
    } else if (EVP_PKEY_is_a(key, "RSA")) {
        fprintf(out, "%-12s RSA %d\n", "key:", EVP_PKEY_get_bits(key));
    } else {
        fprintf(out, "%-12s %s %d\n", "key:", EVP_PKEY_get0_type_name(key),
                EVP_PKEY_get_bits(key));
    }
    ERR_clear_error();
}

static void
usage_print(FILE *out, X509 *cert)
{
    uint32_t xku = X509_get_extended_key_usage(cert);

    fprintf(out, "%-12s %s\n", "CA:", X509_check_ca(cert) ? "yes" : "no");
    if (xku == UINT32_MAX) {
        fprintf(out, "%-12s (any)\n", "EKU:");
        return;
    }
    fprintf(out, "%-12s%s%s%s\n",
            "EKU:", xku & XKU_SSL_SERVER ? " serverAuth" : "",
            xku & XKU_SSL_CLIENT ? " clientAuth" : "",
            (xku & (XKU_SSL_SERVER | XKU_SSL_CLIENT)) == 0 ? " (none)" : "");
}

/* Verifies cert against the certificates in ca_path. */
static enum certs_status
chain_verify(X509 *cert, const char *ca_path, FILE *out, struct ng_error *err)
{
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    enum certs_status st = CERTS_BAD_INPUT;
    STACK_OF(X509_INFO) *infos = NULL;
    char *buf = NULL;
    size_t len = 0;
    BIO *bio = NULL;
    int added = 0;

    if (store == NULL || ctx == NULL) {
        set_ssl_error(err, "out of memory verifying the chain");
        goto out;
    }
    buf = file_read(ca_path, CERTS_MAX_FILE, &len, err);
    if (buf == NULL)
        goto out;
    bio = BIO_new_mem_buf(buf, (int)len);
    if (bio != NULL)
        infos = PEM_X509_INFO_read_bio(bio, NULL, NULL, NULL);
    ERR_clear_error();
    for (int i = 0; infos != NULL && i < sk_X509_INFO_num(infos); i++) {
        X509_INFO *info = sk_X509_INFO_value(infos, i);

        if (info->x509 != NULL && X509_STORE_add_cert(store, info->x509))
            added++;
    }
    if (added == 0) {
        ng_error_set(err, 0, 0,
                     "%s: no PEM certificate found (expected -----BEGIN "
                     "CERTIFICATE-----)",
                     ca_path);
        goto out;
    }
    if (!X509_STORE_CTX_init(ctx, store, cert, NULL)) {
        set_ssl_error(err, "cannot set up chain verification");
        goto out;
    }
    X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
    if (X509_verify_cert(ctx) == 1) {
        fprintf(out, "%-12s ok (verified against %s)\n", "chain:", ca_path);
        st = CERTS_OK;
    } else {
        int e = X509_STORE_CTX_get_error(ctx);

        fprintf(out, "%-12s FAILED\n", "chain:");
        ng_error_set(err, 0, 0, "does not verify against %s: %s", ca_path,
                     X509_verify_cert_error_string(e));
        st = CERTS_FAILED;
    }
out:
    ERR_clear_error();
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    BIO_free(bio);
    free(buf);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return st;
}

enum certs_status
certs_inspect(const char *path, const char *ca_path, const char *host,
              int renew_before_days, FILE *out, struct ng_error *err)
{
    enum certs_status st = CERTS_OK;
    char before[32], after[32];
    long long left;
    size_t len = 0;
    char *buf;
    X509 *cert;

    buf = file_read(path, CERTS_MAX_FILE, &len, err);
    if (buf == NULL)
        return CERTS_BAD_INPUT;
    cert = pem_cert_parse(buf, len);
    free(buf);
    if (cert == NULL) {
        ng_error_set(err, 0, 0,
                     "%s: no PEM certificate found (expected -----BEGIN "
                     "CERTIFICATE-----)",
                     path);
        return CERTS_BAD_INPUT;
    }

    fprintf(out, "%-12s %s\n", "file:", path);
    name_print(out, "subject:", X509_get_subject_name(cert));
    name_print(out, "issuer:", X509_get_issuer_name(cert));
    sans_print(out, cert);
    time_format(X509_get0_notBefore(cert), before, sizeof(before));
    time_format(X509_get0_notAfter(cert), after, sizeof(after));
    left = seconds_until(X509_get0_notAfter(cert));
    fprintf(out, "%-12s %s\n", "not before:", before);
    fprintf(out, "%-12s %s\n", "not after:", after);
    /* Whole days, rounded towards minus infinity: -1 once expired. */
    fprintf(out, "%-12s %lld\n", "days left:",
            left >= 0 ? left / 86400 : -((-left + 86399) / 86400));
    key_print(out, cert);
    usage_print(out, cert);

    if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
        ng_error_set(err, 0, 0, "%s is not valid yet (not before %s)", path,
                     before);
        st = CERTS_FAILED;
    } else if (left <= 0) {
        ng_error_set(err, 0, 0, "%s has expired (not after %s)", path, after);
        st = CERTS_FAILED;
    }
    if (renew_before_days > 0) {
        if (left > (long long)renew_before_days * 86400) {
            fprintf(out, "%-12s ok (more than %d days left)\n",
                    "renewal:", renew_before_days);
        } else {
            fprintf(out, "%-12s DUE (%d days or fewer left)\n",
                    "renewal:", renew_before_days);
            if (st == CERTS_OK)
                ng_error_set(err, 0, 0,
                             "%s is due for renewal: it expires in %lld "
                             "days, within --renew-before %d",
                             path, left > 0 ? left / 86400 : 0,
                             renew_before_days);
            st = CERTS_FAILED;
        }
    }
    if (ca_path != NULL) {
        struct ng_error chain_err;
        enum certs_status cst = chain_verify(cert, ca_path, out, &chain_err);

        /* Bad input outranks a failed check: the message must say why the
         * exit status is 2. */
        if (cst == CERTS_BAD_INPUT) {
            ng_error_set(err, 0, 0, "%s", chain_err.msg);
            st = cst;
        } else if (cst == CERTS_FAILED && st == CERTS_OK) {
            ng_error_set(err, 0, 0, "%s %s", path, chain_err.msg);
            st = cst;
        }
    }
    if (host != NULL) {
        int ok = is_ip(host) ? X509_check_ip_asc(cert, host, 0)
                             : X509_check_host(cert, host, 0, 0, NULL);

        if (ok == 1) {
            fprintf(out, "%-12s ok (%s)\n", "host:", host);
        } else {
            fprintf(out, "%-12s FAILED (%s)\n", "host:", host);
            if (st == CERTS_OK)
                ng_error_set(err, 0, 0, "%s does not name host '%s'", path,
                             host);
            if (st != CERTS_BAD_INPUT)
                st = CERTS_FAILED;
        }
    }
    ERR_clear_error();
    X509_free(cert);
    return st;
}

/* Extended-resource names that count as GPUs, as policy/default.yaml names
 * them; tests/deploy/check.sh keeps the two lists equal. */
static const char *const gpu_resources[] = {"nvidia.com/gpu"};

/* One matchCondition per entry; "%R" stands for the test on a resource
 * name r: "r in [...]" for the names given, else r.contains('/'), true for
 * every extended resource (they are domain-prefixed; cpu, memory,
 * ephemeral-storage and hugepages-* are not), so that the condition does
 * not depend on the policy and nothing has to rewrite it when the policy
 * changes. The lines are folded with spaces (YAML ">-"). */
static const char *const cond_opt_out[] = {
    "!has(object.metadata.annotations) ||",
    "!('ncclguard.io/inject' in object.metadata.annotations) ||",
    "object.metadata.annotations['ncclguard.io/inject'] != 'false'",
    NULL,
};
static const char *const cond_gpu[] = {
    "object.spec.containers.exists(c, has(c.resources) &&",
    "((has(c.resources.limits) && c.resources.limits.exists(r, %R)) ||",
    "(has(c.resources.requests) && c.resources.requests.exists(r, %R)))) ||",
    "(has(object.spec.initContainers) && object.spec.initContainers.exists(c,",
    "has(c.resources) &&",
    "((has(c.resources.limits) && c.resources.limits.exists(r, %R)) ||",
    "(has(c.resources.requests) && c.resources.requests.exists(r, %R))))) "
    "||",
    /* DRA: the GPUs are in claims, counted from the ncclguard.io/claim-gpus
     * annotation or the policy's dra.claimTemplates (admission/mutate.c). */
    "(has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > "
    "0)",
    NULL,
};

const char *const *
certs_default_gpu_resources(size_t *n)
{
    *n = sizeof(gpu_resources) / sizeof(gpu_resources[0]);
    return gpu_resources;
}

/* true when s is an extended-resource name: [A-Za-z0-9._/-], 1..253. */
static bool
is_resource_name(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n <= 253 &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789._/-") == n;
}

/* Writes one folded expression line, expanding %R to the resource test:
 * the CEL list of gpus when there are some, else any extended resource. */
static void
cel_line_write(FILE *out, const char *line, const char *const *gpus,
               size_t n_gpus)
{
    fputs("          ", out);
    for (const char *p = line; *p != '\0'; p++) {
        if (p[0] == '%' && p[1] == 'R') {
            if (gpus == NULL) {
                fputs("r.contains('/')", out);
            } else {
                fputs("r in [", out);
                for (size_t i = 0; i < n_gpus; i++)
                    fprintf(out, "%s'%s'", i ? ", " : "", gpus[i]);
                fputc(']', out);
            }
            p++;
        } else {
            fputc(*p, out);
        }
    }
    fputc('\n', out);
}

/* Checks the object name and the caBundle shared by both writers. */
static int
webhook_opts_check(const struct certs_webhook_opts *o, struct ng_error *err)
{
    if (o->name == NULL || !certs_is_dns_name(o->name)) {
        ng_error_set(err, 0, 0, "invalid webhook configuration name '%s'",
                     o->name ? o->name : "");
        return -1;
    }
    if (o->ca_bundle == NULL || o->ca_bundle[0] == '\0' ||
        strspn(o->ca_bundle,
               "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
               "0123456789+/=") != strlen(o->ca_bundle)) {
        ng_error_set(err, 0, 0, "the caBundle is not base64");
        return -1;
    }
    return 0;
}

int
certs_webhook_ca_patch_write(const struct certs_webhook_opts *o, FILE *out,
                             struct ng_error *err)
{
    if (webhook_opts_check(o, err) != 0)
        return -1;
    /* Strategic merge: webhooks merge on their name key, clientConfig
     * field by field (the MutatingWebhookConfiguration API reference:
     * "Patch strategy: merge on key name"), so this sets the caBundle and
     * nothing else. */
    fprintf(out,
            "# Rendered by `ncclguard certs webhook-config --ca-bundle-only`:\n"
            "# a strategic merge patch for MutatingWebhookConfiguration %s.\n"
            "webhooks:\n"
            "  - name: pods.ncclguard.io\n"
            "    clientConfig:\n"
            "      caBundle: \"%s\"\n",
            o->name, o->ca_bundle);
    if (fflush(out) != 0 || ferror(out)) {
        ng_error_set(err, 0, 0, "cannot write the webhook patch: %s",
                     strerror(errno));
        return -1;
    }
    return 0;
}

int
certs_webhook_write(const struct certs_webhook_opts *o, FILE *out,
                    struct ng_error *err)
{
    const char *const *gpus = o->gpu_resources;
    size_t n_gpus = o->n_gpu_resources;

    if (webhook_opts_check(o, err) != 0)
        return -1;
    if (o->service == NULL || !certs_is_dns_label(o->service)) {
        ng_error_set(err, 0, 0, "invalid service name '%s'",
                     o->service ? o->service : "");
        return -1;
    }
    if (o->ns == NULL || !certs_is_dns_label(o->ns)) {
        ng_error_set(err, 0, 0, "invalid namespace '%s'", o->ns ? o->ns : "");
        return -1;
    }
    if (gpus != NULL && n_gpus == 0) {
        ng_error_set(err, 0, 0, "no GPU resource names");
        return -1;
    }
    for (size_t i = 0; i < n_gpus; i++) {
        if (!is_resource_name(gpus[i])) {
            ng_error_set(err, 0, 0,
                         "invalid GPU resource name '%s': expected letters, "
                         "digits, '.', '_', '/' and '-'",
                         gpus[i]);
            return -1;
        }
    }

    fprintf(
        out,
        "# Rendered by `ncclguard certs webhook-config`; the same object as\n"
        "# deploy/base/mutatingwebhookconfiguration.yaml plus the caBundle.\n"
        "apiVersion: admissionregistration.k8s.io/v1\n"
        "kind: MutatingWebhookConfiguration\n"
        "metadata:\n"
        "  name: %s\n"
        "  labels:\n"
        "    app.kubernetes.io/name: ncclguard\n"
        "    app.kubernetes.io/component: webhook\n"
        "webhooks:\n"
        "  - name: pods.ncclguard.io\n"
        "    admissionReviewVersions: [\"v1\"]\n"
        "    sideEffects: None\n"
        "    failurePolicy: Ignore\n"
        "    timeoutSeconds: 5\n"
        "    reinvocationPolicy: IfNeeded\n"
        "    matchPolicy: Equivalent\n"
        "    clientConfig:\n"
        "      service:\n"
        "        name: %s\n"
        "        namespace: %s\n"
        "        path: /mutate\n"
        "        port: 443\n"
        "      caBundle: \"%s\"\n"
        "    rules:\n"
        "      - apiGroups: [\"\"]\n"
        "        apiVersions: [\"v1\"]\n"
        "        operations: [\"CREATE\"]\n"
        "        resources: [\"pods\"]\n"
        "        scope: Namespaced\n"
        "    namespaceSelector:\n"
        "      matchExpressions:\n"
        "        - key: kubernetes.io/metadata.name\n"
        "          operator: NotIn\n"
        "          values: [kube-system, kube-public, kube-node-lease, "
        "%s]\n"
        "        - key: ncclguard.io/inject\n"
        "          operator: NotIn\n"
        "          values: [\"false\"]\n"
        "    matchConditions:\n"
        "      - name: not-opted-out\n"
        "        expression: >-\n",
        o->name, o->service, o->ns, o->ca_bundle, o->ns);
    for (size_t i = 0; cond_opt_out[i] != NULL; i++)
        cel_line_write(out, cond_opt_out[i], gpus, n_gpus);
    fprintf(out, "      - name: requests-gpu\n"
                 "        expression: >-\n");
    for (size_t i = 0; cond_gpu[i] != NULL; i++)
        cel_line_write(out, cond_gpu[i], gpus, n_gpus);
    if (fflush(out) != 0 || ferror(out)) {
        ng_error_set(err, 0, 0, "cannot write the webhook configuration: %s",
                     strerror(errno));
        return -1;
    }
    return 0;
}
