/* Unit tests for certs/: name checks, create, inspect, caBundle, webhook. */
#include "certs/certs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "harness.h"

/*
 * The tests' clock. OpenSSL reads the time with time(3) wherever it is not
 * given one: X509_time_adj_ex() behind X509_gmtime_adj() and
 * X509_cmp_current_time() (openssl/openssl crypto/x509/x509_vfy.c), and
 * ASN1_TIME_to_tm() for ASN1_TIME_diff() from now (crypto/asn1/a_time.c).
 * Defined here, time() takes the place of libc's for this program and for
 * libcrypto, so that a test can issue a certificate at a chosen second and
 * look at it at another. 0 is the real clock.
 */
static time_t fake_now;

time_t
time(time_t *t)
{
    time_t now = fake_now;

    if (now == 0) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        now = ts.tv_sec;
    }
    if (t != NULL)
        *t = now;
    return now;
}

static const struct {
    const char *s;
    bool label;
    bool name;
} names[] = {
    {"ncclguard", true, true},
    {"gpu-system", true, true},
    {"a", true, true},
    {"0abc", true, true},
    {"", false, false},
    {"-a", false, false},
    {"a-", false, false},
    {"Upper", false, true},
    {"a.b", false, true},
    {"*.example.org", false, true},
    {"a..b", false, false},
    {"a.-b", false, false},
    {"a_b", false, false},
    {"a b", false, false},
    {"a,DNS:b", false, false},
    {"*", false, false},
    {"x.*.y", false, false},
    {"123456789012345678901234567890123456789012345678901234567890123", true,
     true},
    {"1234567890123456789012345678901234567890123456789012345678901234", false,
     false},
    /* Only a-z, 0-9 and '-' in a label: not the bytes just past 'z'. */
    {"z", true, true},
    {"a{b", false, false},
    {"a|b", false, false},
    {"a~b", false, false},
    {"a.b{", false, false},
};

static void
test_names(void)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (certs_is_dns_label(names[i].s) != names[i].label ||
            certs_is_dns_name(names[i].s) != names[i].name)
            fprintf(stderr, "name case %zu: '%s'\n", i, names[i].s);
        CHECK(certs_is_dns_label(names[i].s) == names[i].label);
        CHECK(certs_is_dns_name(names[i].s) == names[i].name);
    }
    /* A name is at most 253 bytes (RFC 1035 2.3.4, as text without the
     * final dot): three labels of 63 and one of 61 or 62. */
    {
        char name[300];

        memset(name, 'a', sizeof(name));
        name[63] = name[127] = name[191] = '.';
        name[253] = '\0';
        CHECK(certs_is_dns_name(name));
        name[253] = 'a';
        name[254] = '\0';
        CHECK(!certs_is_dns_name(name));
        /* A wildcard's "*." does not count. */
        {
            char wild[300] = "*.";

            name[253] = '\0';
            memcpy(wild + 2, name, 254);
            CHECK(certs_is_dns_name(wild));
            wild[255] = 'a';
            wild[256] = '\0';
            CHECK(!certs_is_dns_name(wild));
        }
    }
}

/* Writes a file (helper for bad-input cases). */
static void
put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    if (f == NULL)
        return;
    fputs(text, f);
    fclose(f);
}

static void
test_create_inspect(const char *dir)
{
    const char *sans[] = {"10.1.2.3", "webhook.local"};
    struct certs_create_opts o = {
        .service = "ncclguard",
        .ns = "ncclguard",
        .out_dir = dir,
        .days = 10,
        .ca_days = 20,
        .key_type = CERTS_KEY_EC,
        .sans = sans,
        .n_sans = 2,
    };
    struct certs_create_result r1 = {0}, r2 = {0};
    struct ng_error err = {0};
    char crt[512], ca[512], key[512], bundle_path[512];
    struct stat st;
    FILE *null = fopen("/dev/null", "w");
    char *b = NULL;

    snprintf(crt, sizeof(crt), "%s/tls.crt", dir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(key, sizeof(key), "%s/tls.key", dir);
    snprintf(bundle_path, sizeof(bundle_path), "%s/bundle", dir);

    CHECK_INT(certs_create(&o, &r1, &err), 0);
    CHECK(!r1.ca_reused);
    CHECK(r1.ca_bundle != NULL &&
          strncmp(r1.ca_bundle, "LS0tLS1CRUdJTi", 14) == 0);
    CHECK(stat(key, &st) == 0 && (st.st_mode & 0777) == 0600);

    CHECK_INT(certs_inspect(crt, ca, "ncclguard.ncclguard.svc", 0, null, &err),
              CERTS_OK);
    CHECK_INT(certs_inspect(crt, ca, "10.1.2.3", 0, null, &err), CERTS_OK);
    CHECK_INT(certs_inspect(crt, ca, "webhook.local", 0, null, &err), CERTS_OK);
    CHECK_INT(certs_inspect(crt, NULL, "other.svc", 0, null, &err),
              CERTS_FAILED);
    CHECK(strstr(err.msg, "does not name host 'other.svc'") != NULL);
    /* A leaf is not its own trust anchor. */
    CHECK_INT(certs_inspect(crt, crt, NULL, 0, null, &err), CERTS_FAILED);
    CHECK(strstr(err.msg, "does not verify against") != NULL);
    CHECK_INT(certs_inspect(key, NULL, NULL, 0, null, &err), CERTS_BAD_INPUT);
    CHECK(strstr(err.msg, "no PEM certificate found") != NULL);

    /* Rotation keeps the CA and so the caBundle. */
    o.n_sans = 0;
    CHECK_INT(certs_create(&o, &r2, &err), 0);
    CHECK(r2.ca_reused);
    CHECK(r1.ca_bundle && r2.ca_bundle &&
          strcmp(r1.ca_bundle, r2.ca_bundle) == 0);
    /* The CA lasts 20 days, so 30 days are capped with a warning. */
    certs_create_result_release(&r2);
    o.days = 30;
    CHECK_INT(certs_create(&o, &r2, &err), 0);
    CHECK(strstr(r2.warning, "the CA expires in") != NULL);
    certs_create_result_release(&r2);
    certs_create_result_release(&r2); /* released twice is harmless */
    CHECK(r2.ca_bundle == NULL);

    /* Renewal mode: the pair in out_dir (10 days left at most) is kept
     * while more than renew_before_days are left, byte for byte. */
    {
        struct certs_create_result r3 = {0};
        char before[4096], after[4096], other[512];
        FILE *fb;
        size_t nb = 0, na = 0;

        o.days = 10;
        o.n_sans = 2;
        CHECK_INT(certs_create(&o, &r3, &err), 0);
        certs_create_result_release(&r3);
        fb = fopen(crt, "r");
        if (fb != NULL) {
            nb = fread(before, 1, sizeof(before), fb);
            fclose(fb);
        }
        o.renew = true;
        o.renew_before_days = 5;
        CHECK_INT(certs_create(&o, &r3, &err), 0);
        CHECK(r3.kept);
        /* 10 days from signing: 10 within the same second, else 9. */
        CHECK(strstr(r3.reason, "good for 9 more days") != NULL ||
              strstr(r3.reason, "good for 10 more days") != NULL);
        CHECK(strstr(r3.reason, "(renewed at 5 days left)") != NULL);
        CHECK(r3.seconds_left > 9 * 86400);
        certs_create_result_release(&r3);
        fb = fopen(crt, "r");
        if (fb != NULL) {
            na = fread(after, 1, sizeof(after), fb);
            fclose(fb);
        }
        CHECK(nb > 0 && na == nb && memcmp(before, after, nb) == 0);
        /* Into another folder: the kept pair is copied there. */
        snprintf(other, sizeof(other), "%s-copy", dir);
        o.out_dir = other;
        o.ca_dir = dir;
        o.current_dir = dir;
        CHECK_INT(certs_create(&o, &r3, &err), 0);
        CHECK(r3.kept);
        certs_create_result_release(&r3);
        snprintf(other, sizeof(other), "%s-copy/tls.crt", dir);
        fb = fopen(other, "r");
        if (fb != NULL) {
            na = fread(after, 1, sizeof(after), fb);
            fclose(fb);
        }
        CHECK(na == nb && memcmp(before, after, nb) == 0);
        snprintf(other, sizeof(other), "%s-copy/tls.key", dir);
        CHECK(stat(other, &st) == 0 && (st.st_mode & 0777) == 0600);
        o.out_dir = dir;
        o.ca_dir = NULL;
        o.current_dir = NULL;
        /* Inside the window (10 days left, renew at 10): a new pair. */
        o.renew_before_days = 10;
        o.n_sans = 0;
        CHECK_INT(certs_create(&o, &r3, &err), 0);
        CHECK(!r3.kept);
        CHECK(strstr(r3.reason, "within --renew-before 10") != NULL);
        certs_create_result_release(&r3);
        /* A SAN the current pair lacks: a new pair, which then stays. */
        o.renew_before_days = 1;
        o.n_sans = 2;
        CHECK_INT(certs_create(&o, &r3, &err), 0);
        CHECK(!r3.kept);
        CHECK(strstr(r3.reason, "does not name 10.1.2.3") != NULL);
        certs_create_result_release(&r3);
        CHECK_INT(certs_create(&o, &r3, &err), 0);
        CHECK(r3.kept);
        certs_create_result_release(&r3);
        /* Another key type: a new pair. */
        o.key_type = CERTS_KEY_RSA;
        CHECK_INT(certs_create(&o, &r3, &err), 0);
        CHECK(!r3.kept);
        CHECK(strstr(r3.reason, "is not an RSA key") != NULL);
        certs_create_result_release(&r3);
        o.key_type = CERTS_KEY_EC;
        /* Out of range. */
        o.renew_before_days = 0;
        CHECK_INT(certs_create(&o, &r3, &err), -1);
        CHECK(strstr(err.msg, "invalid renew-before days 0") != NULL);
        o.renew = false;
        o.renew_before_days = 0;

        /* inspect --renew-before: the same window. */
        CHECK_INT(certs_inspect(crt, ca, NULL, 9, null, &err), CERTS_OK);
        CHECK_INT(certs_inspect(crt, ca, NULL, 10, null, &err), CERTS_FAILED);
        CHECK(strstr(err.msg, "is due for renewal") != NULL);
    }

    /* caBundle from the PEM file equals the printed one and loads back. */
    b = certs_ca_bundle_from_file(ca, &err);
    CHECK(b != NULL && r1.ca_bundle != NULL && strcmp(b, r1.ca_bundle) == 0);
    if (b != NULL) {
        char *text = malloc(strlen(b) + 3);

        if (text != NULL) {
            snprintf(text, strlen(b) + 3, " %s\n", b);
            put(bundle_path, text);
            free(text);
        }
        free(b);
    }
    b = certs_ca_bundle_load(bundle_path, &err);
    CHECK(b != NULL && r1.ca_bundle != NULL && strcmp(b, r1.ca_bundle) == 0);
    free(b);
    put(bundle_path, "QUJD\n"); /* "ABC": base64, but not a certificate */
    b = certs_ca_bundle_load(bundle_path, &err);
    CHECK(b == NULL);
    CHECK(strstr(err.msg, "does not decode into a PEM certificate") != NULL);
    put(bundle_path, "-----BEGIN CERTIFICATE-----\n");
    b = certs_ca_bundle_load(bundle_path, &err);
    CHECK(b == NULL);
    CHECK(strstr(err.msg, "not a base64 caBundle") != NULL);

    certs_create_result_release(&r1);
    if (null != NULL)
        fclose(null);
}

static void
test_create_bad(const char *dir)
{
    static const struct {
        const char *service, *ns;
        int days, ca_days;
        const char *san;
        const char *msg;
    } cases[] = {
        {"1svc", "ns", 1, 1, NULL, "invalid service name '1svc'"},
        {"svc", "NS", 1, 1, NULL, "invalid namespace 'NS'"},
        {"svc", "ns", -1, 1, NULL, "invalid days -1"},
        {"svc", "ns", CERTS_MAX_DAYS + 1, 1, NULL, "invalid days"},
        {"svc", "ns", 1, 0, NULL, "invalid CA days 0"},
        {"svc", "ns", 1, CERTS_MAX_DAYS + 1, NULL, "invalid CA days"},
        {"svc", "ns", 1, 1, "bad name", "invalid SAN 'bad name'"},
        {"svc", "ns", 1, 1, "300.1.1.1.", "invalid SAN"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *sans[1] = {cases[i].san};
        struct certs_create_opts o = {
            .service = cases[i].service,
            .ns = cases[i].ns,
            .out_dir = dir,
            .days = cases[i].days,
            .ca_days = cases[i].ca_days,
            .sans = sans,
            .n_sans = cases[i].san != NULL,
        };
        struct certs_create_result r = {0};
        struct ng_error err = {0};

        CHECK_INT(certs_create(&o, &r, &err), -1);
        CHECK(r.ca_bundle == NULL);
        if (strstr(err.msg, cases[i].msg) == NULL)
            fprintf(stderr, "case %zu: got '%s'\n", i, err.msg);
        CHECK(strstr(err.msg, cases[i].msg) != NULL);
    }
}

static void
test_webhook(void)
{
    struct certs_webhook_opts o = {"ncclguard", "svc", "ns",
                                   "TFMwdA==",  NULL,  0};
    struct ng_error err = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (f == NULL)
        return;
    CHECK_INT(certs_webhook_write(&o, f, &err), 0);
    fclose(f);
    CHECK(buf != NULL && strstr(buf, "caBundle: \"TFMwdA==\"") != NULL);
    CHECK(buf != NULL && strstr(buf, "failurePolicy: Ignore") != NULL);
    CHECK(buf != NULL && strstr(buf, "kube-node-lease, ns]") != NULL);
    /* No names: any extended resource, whatever the policy says. */
    CHECK(buf != NULL &&
          strstr(buf, "limits.exists(r, r.contains('/'))") != NULL);
    CHECK(buf != NULL &&
          strstr(buf, "requests.exists(r, r.contains('/'))") != NULL);
    CHECK(buf != NULL && strstr(buf, "r in [") == NULL);
    CHECK(buf != NULL && strstr(buf, "%R") == NULL);
    free(buf);

    /* The caBundle patch holds the webhook's name key and its caBundle,
     * and no field that kustomize applies. */
    buf = NULL;
    f = open_memstream(&buf, &len);
    if (f == NULL)
        return;
    CHECK_INT(certs_webhook_ca_patch_write(&o, f, &err), 0);
    fclose(f);
    CHECK(buf != NULL && strstr(buf, "  - name: pods.ncclguard.io\n"
                                     "    clientConfig:\n"
                                     "      caBundle: \"TFMwdA==\"\n") != NULL);
    CHECK(buf != NULL && strstr(buf, "matchConditions") == NULL);
    CHECK(buf != NULL && strstr(buf, "service") == NULL);
    free(buf);
    o.ca_bundle = "not base64!";
    CHECK_INT(certs_webhook_ca_patch_write(&o, stdout, &err), -1);
    CHECK(strstr(err.msg, "not base64") != NULL);
    o.ca_bundle = "TFMwdA==";

    {
        const char *gpus[] = {"nvidia.com/gpu", "amd.com/gpu"};
        const char *evil[] = {"x') || true || ('"};
        size_t n = 0;

        CHECK(certs_default_gpu_resources(&n) != NULL && n == 1);
        buf = NULL;
        f = open_memstream(&buf, &len);
        if (f == NULL)
            return;
        o.gpu_resources = gpus;
        o.n_gpu_resources = 2;
        CHECK_INT(certs_webhook_write(&o, f, &err), 0);
        fclose(f);
        CHECK(buf != NULL &&
              strstr(buf, "r in ['nvidia.com/gpu', 'amd.com/gpu']") != NULL);
        free(buf);
        /* A name that would break out of the CEL string is refused. */
        o.gpu_resources = evil;
        o.n_gpu_resources = 1;
        CHECK_INT(certs_webhook_write(&o, stdout, &err), -1);
        CHECK(strstr(err.msg, "invalid GPU resource name") != NULL);
        o.n_gpu_resources = 0;
        CHECK_INT(certs_webhook_write(&o, stdout, &err), -1);
        CHECK(strstr(err.msg, "no GPU resource names") != NULL);
        o.gpu_resources = NULL;
    }

    o.ca_bundle = "not base64!";
    CHECK_INT(certs_webhook_write(&o, stdout, &err), -1);
    CHECK(strstr(err.msg, "not base64") != NULL);
    o.ca_bundle = "TFMwdA==";
    o.ns = "Bad_NS";
    CHECK_INT(certs_webhook_write(&o, stdout, &err), -1);
    CHECK(strstr(err.msg, "invalid namespace 'Bad_NS'") != NULL);
}

/*
 * The bounds are inclusive: days and CA days of CERTS_MAX_DAYS and
 * CERTS_MAX_SANS names are accepted, one more SAN is not.
 */
static void
test_create_bounds(const char *dir)
{
    static const char *sans[CERTS_MAX_SANS + 1];
    char san_text[CERTS_MAX_SANS + 1][24];
    struct certs_create_opts o = {
        .service = "svc",
        .ns = "ns",
        .out_dir = dir,
        .days = CERTS_MAX_DAYS,
        .ca_days = CERTS_MAX_DAYS,
        .sans = sans,
        .n_sans = CERTS_MAX_SANS,
    };
    struct certs_create_result r = {0};
    struct ng_error err = {0};

    for (int i = 0; i <= CERTS_MAX_SANS; i++) {
        snprintf(san_text[i], sizeof(san_text[i]), "n%d.example", i);
        sans[i] = san_text[i];
    }
    CHECK_INT(certs_create(&o, &r, &err), 0);
    if (r.ca_bundle == NULL)
        fprintf(stderr, "create at the bounds: %s\n", err.msg);
    certs_create_result_release(&r);
    o.n_sans = CERTS_MAX_SANS + 1;
    CHECK_INT(certs_create(&o, &r, &err), -1);
    CHECK(strstr(err.msg, "too many SANs") != NULL);
}

/*
 * A caBundle file is base64 and nothing else (whitespace around it
 * aside): '+', '/' and '=' are base64, '-' is not; an empty one has length
 * 0. The words say which.
 */
static void
test_bundle_text(const char *dir)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"ab+c", "does not decode into a PEM certificate"},
        {"ab/c", "does not decode into a PEM certificate"},
        {"abc=", "does not decode into a PEM certificate"},
        {" \n\tabcd\n", "does not decode into a PEM certificate"},
        {"ab-c", "unexpected character at byte 3"},
        {"abc", "length 3 is not"},
        {"   \n", "length 0 is not"},
        {"", "length 0 is not"},
    };
    char path[128];

    snprintf(path, sizeof(path), "%s.bundle", dir);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct ng_error err = {0};
        char *b;

        put(path, cases[i].text);
        b = certs_ca_bundle_load(path, &err);
        CHECK(b == NULL);
        free(b);
        if (strstr(err.msg, cases[i].msg) == NULL)
            fprintf(stderr, "bundle '%s': %s\n", cases[i].text, err.msg);
        CHECK(strstr(err.msg, cases[i].msg) != NULL);
    }
    unlink(path);
}

/*
 * certs_webhook_write() refuses what it would write wrongly: a bad
 * service, namespace or empty caBundle, a GPU resource name past 253
 * bytes; a name of exactly 253 bytes is fine. Nothing is written then.
 */
static void
test_webhook_refusals(void)
{
    static char long_name[300];
    const char *gpus[1] = {long_name};
    struct certs_webhook_opts ok = {"ncclguard", "svc", "ns",
                                    "TFMwdA==",  NULL,  0};
    struct {
        struct certs_webhook_opts o;
        const char *msg;
    } cases[] = {
        {ok, "invalid service name 'A'"},
        {ok, "invalid namespace 'a b'"},
        {ok, "caBundle"},
        {ok, "invalid webhook configuration name 'a b'"},
    };
    FILE *null = fopen("/dev/null", "w");

    if (null == NULL)
        return;
    cases[0].o.service = "A";
    cases[1].o.ns = "a b";
    cases[2].o.ca_bundle = "";
    cases[3].o.name = "a b";
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct ng_error err = {0};
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        if (f == NULL)
            break;
        CHECK_INT(certs_webhook_write(&cases[i].o, f, &err), -1);
        fclose(f);
        if (strstr(err.msg, cases[i].msg) == NULL)
            fprintf(stderr, "webhook case %zu: '%s'\n", i, err.msg);
        CHECK(strstr(err.msg, cases[i].msg) != NULL);
        CHECK(len == 0);
        free(buf);
    }
    memset(long_name, 'g', 253);
    long_name[253] = '\0';
    ok.gpu_resources = gpus;
    ok.n_gpu_resources = 1;
    {
        struct ng_error err = {0};

        CHECK_INT(certs_webhook_write(&ok, null, &err), 0);
        long_name[253] = 'g';
        long_name[254] = '\0';
        CHECK_INT(certs_webhook_write(&ok, null, &err), -1);
    }
    fclose(null);
}

/*
 * The option checks that would otherwise let create go on (an empty --out,
 * a key type that is neither, renew-before past its bound), and renewal
 * mode's reasons for issuing anew: a DNS name the pair lacks (looked up
 * whole, not as a prefix of a longer SAN or the other way), a key file
 * that holds no key, a --current folder whose file names pass PATH_MAX.
 */
static void
test_renew_edges(const char *dir)
{
    const char *sans[] = {"a.example.org"};
    struct certs_create_opts o = {
        .service = "svc",
        .ns = "ns",
        .out_dir = dir,
        .days = 30,
        .ca_days = 60,
        .key_type = CERTS_KEY_EC,
        .sans = sans,
        .n_sans = 1,
    };
    struct certs_create_result r = {0};
    struct ng_error err = {0};
    char key[256], *deep;

    snprintf(key, sizeof(key), "%s/tls.key", dir);
    o.out_dir = "";
    CHECK_INT(certs_create(&o, &r, &err), -1);
    CHECK_STR(err.msg, "no output directory given");
    o.out_dir = dir;
    o.key_type = (enum certs_key_type)7;
    CHECK_INT(certs_create(&o, &r, &err), -1);
    CHECK_STR(err.msg, "invalid key type");
    o.key_type = CERTS_KEY_EC;
    o.renew = true;
    o.renew_before_days = CERTS_MAX_DAYS + 1;
    CHECK_INT(certs_create(&o, &r, &err), -1);
    CHECK(strstr(err.msg, "invalid renew-before days 36501") != NULL);
    o.renew = false;

    /* A new CA: a serving certificate as long as the CA is not shortened,
     * one a day longer is. */
    o.days = 60;
    CHECK_INT(certs_create(&o, &r, &err), 0);
    CHECK(!r.ca_reused);
    CHECK_STR(r.warning, "");
    certs_create_result_release(&r);
    {
        char other[256];
        struct certs_create_opts p = o;

        snprintf(other, sizeof(other), "%s-longer", dir);
        p.out_dir = other;
        p.days = 61;
        CHECK_INT(certs_create(&p, &r, &err), 0);
        CHECK_STR(r.warning, "the serving certificate is valid for 60 days, "
                             "as long as the CA, instead of 61");
        certs_create_result_release(&r);
    }
    o.days = 30;
    CHECK_INT(certs_create(&o, &r, &err), 0);
    certs_create_result_release(&r);
    o.renew = true;
    o.renew_before_days = CERTS_MAX_DAYS;
    /* Past the bound is refused, the bound itself taken (and due). */
    CHECK_INT(certs_create(&o, &r, &err), 0);
    CHECK(!r.kept);
    certs_create_result_release(&r);
    o.renew_before_days = 1;
    CHECK_INT(certs_create(&o, &r, &err), 0);
    CHECK(r.kept);
    certs_create_result_release(&r);
    {
        static const char *const lacking[] = {"new.example", "a.example",
                                              "b.a.example.org"};

        for (size_t i = 0; i < sizeof(lacking) / sizeof(lacking[0]); i++) {
            char want[128];
            const char *ask[2] = {"a.example.org", lacking[i]};

            o.sans = ask;
            o.n_sans = 2;
            CHECK_INT(certs_create(&o, &r, &err), 0);
            CHECK(!r.kept);
            snprintf(want, sizeof(want), "does not name %s", lacking[i]);
            if (strstr(r.reason, want) == NULL)
                fprintf(stderr, "renew asking %s: '%s'\n", lacking[i],
                        r.reason);
            CHECK(strstr(r.reason, want) != NULL);
            certs_create_result_release(&r);
            /* Back to the pair without it. */
            o.renew = false;
            o.sans = sans;
            o.n_sans = 1;
            CHECK_INT(certs_create(&o, &r, &err), 0);
            certs_create_result_release(&r);
            o.renew = true;
        }
    }
    /* A kept pair and a reused CA in the folder they are written to are
     * left as they are, not rewritten (the same inodes). */
    {
        char crt[256], ca[256];
        struct stat a, b, c, d;

        snprintf(crt, sizeof(crt), "%s/tls.crt", dir);
        snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
        CHECK(stat(crt, &a) == 0 && stat(ca, &b) == 0);
        CHECK_INT(certs_create(&o, &r, &err), 0);
        CHECK(r.kept && r.ca_reused);
        certs_create_result_release(&r);
        CHECK(stat(crt, &c) == 0 && stat(ca, &d) == 0);
        CHECK(a.st_ino == c.st_ino);
        CHECK(b.st_ino == d.st_ino);
    }
    certs_create_result_release(NULL);
    /* The key file holds no key. */
    put(key, "not a key\n");
    CHECK_INT(certs_create(&o, &r, &err), 0);
    CHECK(!r.kept);
    CHECK(strstr(r.reason, "holds no PEM certificate or key") != NULL);
    certs_create_result_release(&r);
    /* A --current whose "/tls.crt" ends exactly at PATH_MAX (4096 with
     * the NUL): too long, said as such; it need not exist. */
    deep = malloc(4096);
    if (deep != NULL) {
        memset(deep, 'd', 4088);
        deep[0] = '/';
        deep[4088] = '\0';
        o.current_dir = deep;
        CHECK_INT(certs_create(&o, &r, &err), 0);
        CHECK(!r.kept);
        CHECK(strncmp(r.reason, "path too long: /ddd", 19) == 0);
        certs_create_result_release(&r);
        deep[4087] = '\0';
        CHECK_INT(certs_create(&o, &r, &err), 0);
        CHECK(strncmp(r.reason, "no current serving certificate in /ddd", 38) ==
              0);
        certs_create_result_release(&r);
        o.current_dir = NULL;
        free(deep);
    }
}

/* A stream whose first write fails (EIO) and whose later writes succeed:
 * the error stays on the stream although the last flush works. */
static ssize_t
flaky_write(void *cookie, const char *buf, size_t n)
{
    int *calls = cookie;

    (void)buf;
    if ((*calls)++ == 0) {
        errno = EIO;
        return -1;
    }
    return (ssize_t)n;
}

static FILE *
flaky_open(int *calls)
{
    cookie_io_functions_t io = {NULL, flaky_write, NULL, NULL};
    FILE *f;

    *calls = 0;
    f = fopencookie(calls, "w", io);
    if (f != NULL)
        setvbuf(f, NULL, _IONBF, 0);
    return f;
}

/* A write error on the output stream (a full disk: /dev/full) is an
 * error of both webhook writers, with its reason. */
static void
test_webhook_write_error(void)
{
    struct certs_webhook_opts o = {"ncclguard", "svc", "ns",
                                   "TFMwdA==",  NULL,  0};
    struct ng_error err = {0};
    FILE *full = fopen("/dev/full", "w");

    if (full == NULL) {
        CHECK(full != NULL);
        return;
    }
    CHECK_INT(certs_webhook_write(&o, full, &err), -1);
    CHECK_STR(err.msg, "cannot write the webhook configuration: No space "
                       "left on device");
    clearerr(full);
    CHECK_INT(certs_webhook_ca_patch_write(&o, full, &err), -1);
    CHECK_STR(err.msg,
              "cannot write the webhook patch: No space left on device");
    fclose(full);
    /* A write that failed partway, then a flush that works. */
    {
        int calls;
        FILE *f = flaky_open(&calls);

        CHECK(f != NULL);
        if (f != NULL) {
            CHECK_INT(certs_webhook_write(&o, f, &err), -1);
            CHECK(strncmp(err.msg, "cannot write the webhook configuration",
                          38) == 0);
            CHECK(calls > 1);
            fclose(f);
        }
        f = flaky_open(&calls);
        if (f != NULL) {
            CHECK_INT(certs_webhook_ca_patch_write(&o, f, &err), -1);
            CHECK(strncmp(err.msg, "cannot write the webhook patch", 30) == 0);
            fclose(f);
        }
    }
    /* No caBundle, no service: refused, not read. */
    {
        struct certs_webhook_opts n = o;
        FILE *null = fopen("/dev/null", "w");

        n.ca_bundle = NULL;
        CHECK_INT(certs_webhook_write(&n, null ? null : stderr, &err), -1);
        CHECK_STR(err.msg, "the caBundle is not base64");
        n = o;
        n.service = NULL;
        CHECK_INT(certs_webhook_write(&n, null ? null : stderr, &err), -1);
        CHECK_STR(err.msg, "invalid service name ''");
        n = o;
        n.ns = NULL;
        CHECK_INT(certs_webhook_write(&n, null ? null : stderr, &err), -1);
        CHECK_STR(err.msg, "invalid namespace ''");
        n = o;
        n.name = NULL;
        CHECK_INT(certs_webhook_ca_patch_write(&n, null ? null : stderr, &err),
                  -1);
        CHECK_STR(err.msg, "invalid webhook configuration name ''");
        if (null != NULL)
            fclose(null);
    }
    /* An empty GPU resource name is not a name. */
    {
        const char *gpus[1] = {""};
        FILE *null = fopen("/dev/null", "w");

        o.gpu_resources = gpus;
        o.n_gpu_resources = 1;
        CHECK_INT(certs_webhook_write(&o, null ? null : stderr, &err), -1);
        CHECK(strstr(err.msg, "invalid GPU resource name ''") != NULL);
        if (null != NULL)
            fclose(null);
    }
}

/* Runs certs_inspect() at fake_now; its report goes to out (size n). */
static enum certs_status
inspect_at(time_t now, const char *crt, const char *ca, const char *host,
           int renew_before_days, char *out, size_t n, struct ng_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    enum certs_status st;

    fake_now = now;
    err->msg[0] = '\0';
    st = certs_inspect(crt, ca, host, renew_before_days, f ? f : stderr, err);
    if (f != NULL)
        fclose(f);
    snprintf(out, n, "%s", buf ? buf : "");
    free(buf);
    fake_now = 0;
    return st;
}

/* Runs certs_create() at fake_now. */
static int
create_at(time_t now, const struct certs_create_opts *o,
          struct certs_create_result *r, struct ng_error *err)
{
    int rc;

    fake_now = now;
    certs_create_result_release(r);
    err->msg[0] = '\0';
    rc = certs_create(o, r, err);
    fake_now = 0;
    return rc;
}

/*
 * The validity rules at their exact seconds, on the tests' clock: a
 * certificate issued at T0 for D days runs from T0 - 5 min to T0 + D days;
 * it has expired at its notAfter (OpenSSL's X509_cmp_time() counts the
 * same second as past, and inspect agrees with the verifier); a serving
 * certificate as long as its CA is not shortened; renewal is due with
 * exactly renew_before_days left; a CA that has expired is refused; and an
 * expired certificate says so before it says that a foreign CA does not
 * verify it.
 */
static void
test_clock(const char *dir)
{
    /* 2027-01-15T08:00:00Z, a UTCTime instant with no DST or leap issue. */
    const time_t t0 = 1800000000, day = 86400;
    char crt[256], ca[256], key[256], other[256], other_ca[256], out[4096];
    struct certs_create_opts o = {
        .service = "svc",
        .ns = "ns",
        .out_dir = dir,
        .days = 10,
        .ca_days = 20,
        .key_type = CERTS_KEY_EC,
    };
    struct certs_create_result r = {0};
    struct ng_error err = {0};

    snprintf(crt, sizeof(crt), "%s/tls.crt", dir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(key, sizeof(key), "%s/tls.key", dir);
    snprintf(other, sizeof(other), "%s-other", dir);
    snprintf(other_ca, sizeof(other_ca), "%s-other/ca.crt", dir);

    CHECK_INT(create_at(t0, &o, &r, &err), 0);
    CHECK_STR(r.warning, "");
    CHECK_INT(r.seconds_left, 10 * day);

    /* The times as issued, and days left rounded down. */
    CHECK_INT(inspect_at(t0, crt, ca, NULL, 0, out, sizeof(out), &err),
              CERTS_OK);
    CHECK(strstr(out, "not before:  2027-01-15T07:55:00Z\n") != NULL);
    CHECK(strstr(out, "not after:   2027-01-25T08:00:00Z\n") != NULL);
    CHECK(strstr(out, "days left:   10\n") != NULL);
    CHECK(strstr(out, "chain:       ok") != NULL);
    CHECK(strstr(out, "renewal:") == NULL); /* not asked for */
    CHECK_INT(inspect_at(t0 + 1, crt, NULL, NULL, 0, out, sizeof(out), &err),
              CERTS_OK);
    CHECK(strstr(out, "days left:   9\n") != NULL);
    /* The last second before notAfter is valid; notAfter itself is not. */
    CHECK_INT(
        inspect_at(t0 + 10 * day - 1, crt, ca, NULL, 0, out, sizeof(out), &err),
        CERTS_OK);
    CHECK(strstr(out, "days left:   0\n") != NULL);
    CHECK_INT(
        inspect_at(t0 + 10 * day, crt, ca, NULL, 0, out, sizeof(out), &err),
        CERTS_FAILED);
    CHECK(strstr(err.msg, "has expired (not after 2027-01-25T08:00:00Z)") !=
          NULL);
    CHECK_INT(inspect_at(t0 + 10 * day + 1, crt, NULL, NULL, 0, out,
                         sizeof(out), &err),
              CERTS_FAILED);
    CHECK(strstr(out, "days left:   -1\n") != NULL);
    CHECK_INT(
        inspect_at(t0 + 12 * day, crt, NULL, NULL, 0, out, sizeof(out), &err),
        CERTS_FAILED);
    CHECK(strstr(out, "days left:   -2\n") != NULL);
    /* notBefore itself is valid; the second before it is not. */
    CHECK_INT(inspect_at(t0 - 300, crt, ca, NULL, 0, out, sizeof(out), &err),
              CERTS_OK);
    CHECK_INT(inspect_at(t0 - 301, crt, ca, NULL, 0, out, sizeof(out), &err),
              CERTS_FAILED);
    CHECK(strstr(err.msg,
                 "is not valid yet (not before 2027-01-15T07:55:00Z)") != NULL);

    /* Renewal: due with exactly renew_before_days left. */
    CHECK_INT(inspect_at(t0, crt, NULL, NULL, 10, out, sizeof(out), &err),
              CERTS_FAILED);
    CHECK(strstr(out, "renewal:     DUE (10 days or fewer left)") != NULL);
    CHECK(strstr(err.msg, "expires in 10 days, within --renew-before 10") !=
          NULL);
    CHECK_INT(inspect_at(t0 + 1, crt, NULL, NULL, 9, out, sizeof(out), &err),
              CERTS_OK);
    CHECK(strstr(out, "renewal:     ok (more than 9 days left)") != NULL);
    /* The smallest window, one day, with one day left. */
    CHECK_INT(
        inspect_at(t0 + 9 * day, crt, NULL, NULL, 1, out, sizeof(out), &err),
        CERTS_FAILED);
    CHECK(strstr(err.msg, "expires in 1 days, within --renew-before 1") !=
          NULL);
    /* Expired and due: the expiry is the message. */
    CHECK_INT(
        inspect_at(t0 + 11 * day, crt, NULL, NULL, 30, out, sizeof(out), &err),
        CERTS_FAILED);
    CHECK(strstr(err.msg, "has expired") != NULL);

    /* Expired, from a foreign CA, and not naming the host: the expiry is
     * the message; a CA file that holds no certificate outranks it all. */
    {
        struct certs_create_opts f = o;
        struct certs_create_result fr = {0};

        f.out_dir = other;
        CHECK_INT(create_at(t0, &f, &fr, &err), 0);
        certs_create_result_release(&fr);
    }
    CHECK_INT(inspect_at(t0, crt, other_ca, NULL, 0, out, sizeof(out), &err),
              CERTS_FAILED);
    CHECK(strstr(err.msg, "does not verify against") != NULL);
    CHECK_INT(inspect_at(t0 + 11 * day, crt, other_ca, "x.example", 0, out,
                         sizeof(out), &err),
              CERTS_FAILED);
    CHECK(strstr(out, "chain:       FAILED") != NULL);
    CHECK(strstr(out, "host:        FAILED (x.example)") != NULL);
    CHECK(strstr(err.msg, "has expired") != NULL);
    CHECK_INT(inspect_at(t0, crt, NULL, "x.example", 0, out, sizeof(out), &err),
              CERTS_FAILED);
    CHECK(strstr(err.msg, "does not name host 'x.example'") != NULL);
    CHECK_INT(inspect_at(t0 + 11 * day, crt, key, "x.example", 0, out,
                         sizeof(out), &err),
              CERTS_BAD_INPUT);
    CHECK(strstr(err.msg, "no PEM certificate found") != NULL);

    /* A reused CA of 20 days left: 20 days are not shortened, 21 are; a
     * second later 19 whole days are left. */
    o.days = 20;
    CHECK_INT(create_at(t0, &o, &r, &err), 0);
    CHECK(r.ca_reused);
    CHECK_STR(r.warning, "");
    CHECK_INT(r.seconds_left, 20 * day);
    o.days = 21;
    CHECK_INT(create_at(t0, &o, &r, &err), 0);
    CHECK_STR(r.warning, "the CA expires in 20 days: the serving certificate "
                         "is valid for 20 days instead of 21");
    CHECK_INT(r.seconds_left, 20 * day);
    o.days = 20;
    CHECK_INT(create_at(t0 + 1, &o, &r, &err), 0);
    CHECK_STR(r.warning, "the CA expires in 19 days: the serving certificate "
                         "is valid for 19 days instead of 20");
    CHECK_INT(r.seconds_left, 19 * day);

    /* Renewal mode on the pair just issued at t0 + 1 for 19 days: due
     * with 19 days left, kept with 18; not valid yet the second before its
     * notBefore (t0 + 1 - 5 min), kept at it. */
    o.renew = true;
    o.renew_before_days = 19;
    CHECK_INT(create_at(t0 + 1, &o, &r, &err), 0);
    CHECK(!r.kept);
    CHECK(strstr(r.reason, "expires in 19 days, within --renew-before 19") !=
          NULL);
    o.renew_before_days = 18;
    CHECK_INT(create_at(t0 + 1, &o, &r, &err), 0);
    CHECK(r.kept);
    CHECK(strstr(r.reason, "is good for 19 more days (renewed at 18 days "
                           "left)") != NULL);
    CHECK_INT(r.seconds_left, 19 * day);
    CHECK_INT(create_at(t0 - 299, &o, &r, &err), 0);
    CHECK(r.kept);
    CHECK_INT(create_at(t0 - 300, &o, &r, &err), 0);
    CHECK(!r.kept);
    CHECK(strstr(r.reason, "is not valid yet") != NULL);
    o.renew = false;

    /* The CA's last second (the serving certificate shortened to 0 whole
     * days), then its end: refused once it has expired. */
    o.days = 1;
    CHECK_INT(create_at(t0 + 20 * day - 1, &o, &r, &err), 0);
    CHECK_STR(r.warning, "the CA expires in 0 days: the serving certificate "
                         "is valid for 0 days instead of 1");
    CHECK_INT(create_at(t0 + 20 * day, &o, &r, &err), -1);
    CHECK(strstr(err.msg, "has expired: remove ca.crt and ca.key") != NULL);
    certs_create_result_release(&r);
    fake_now = 0;
}

/*
 * Failures injected into certs.c's calls through link-time wraps
 * (certs/certs.mk: -Wl,--wrap=NAME; only calls from the library's objects
 * are redirected). Each *_fail_at counts calls down from when a test arms
 * it: the call that brings it to 0 fails, the others pass through.
 */
int __real_X509_sign(X509 *x, EVP_PKEY *pkey, const EVP_MD *md);
int __wrap_X509_sign(X509 *x, EVP_PKEY *pkey, const EVP_MD *md);
BIGNUM *__real_BN_new(void);
BIGNUM *__wrap_BN_new(void);
BIO *__real_BIO_new(const BIO_METHOD *type);
BIO *__wrap_BIO_new(const BIO_METHOD *type);
X509_STORE_CTX *__real_X509_STORE_CTX_new(void);
X509_STORE_CTX *__wrap_X509_STORE_CTX_new(void);
int __real_ASN1_TIME_to_tm(const ASN1_TIME *s, struct tm *tm);
int __wrap_ASN1_TIME_to_tm(const ASN1_TIME *s, struct tm *tm);
ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n);

static int sign_fail_at, bn_fail_at, secmem_bio_fail_at, ctx_fail_at;
static bool tm_fail;
/* write(): 0 as libc; WRITE_SHORT: one byte short of what is asked
 * (then the last byte alone); WRITE_ZERO, WRITE_EINTR: the next call
 * returns 0 (errno EINTR, as a stale value), or -1 with EINTR. */
enum { WRITE_REAL, WRITE_SHORT, WRITE_ZERO, WRITE_EINTR };
static int write_mode;

static bool
count_down(int *n)
{
    return *n > 0 && --*n == 0;
}

int
__wrap_X509_sign(X509 *x, EVP_PKEY *pkey, const EVP_MD *md)
{
    if (count_down(&sign_fail_at))
        return 0; /* and no OpenSSL error queued */
    return __real_X509_sign(x, pkey, md);
}

BIGNUM *
__wrap_BN_new(void)
{
    return count_down(&bn_fail_at) ? NULL : __real_BN_new();
}

BIO *
__wrap_BIO_new(const BIO_METHOD *type)
{
    if (type == BIO_s_secmem() && count_down(&secmem_bio_fail_at))
        return NULL;
    return __real_BIO_new(type);
}

X509_STORE_CTX *
__wrap_X509_STORE_CTX_new(void)
{
    return count_down(&ctx_fail_at) ? NULL : __real_X509_STORE_CTX_new();
}

int
__wrap_ASN1_TIME_to_tm(const ASN1_TIME *s, struct tm *tm)
{
    return tm_fail ? 0 : __real_ASN1_TIME_to_tm(s, tm);
}

ssize_t
__wrap_write(int fd, const void *buf, size_t n)
{
    switch (write_mode) {
    case WRITE_SHORT:
        return __real_write(fd, buf, n > 1 ? n - 1 : n);
    case WRITE_ZERO:
        write_mode = WRITE_REAL;
        errno = EINTR;
        return 0;
    case WRITE_EINTR:
        write_mode = WRITE_REAL;
        errno = EINTR;
        return -1;
    default:
        return __real_write(fd, buf, n);
    }
}

/* Whether the file at path ends with "-----\n" (a whole PEM block). */
static bool
pem_whole(const char *path)
{
    char tail[7] = "";
    FILE *f = fopen(path, "r");
    bool ok;

    if (f == NULL)
        return false;
    ok = fseek(f, -6, SEEK_END) == 0 && fread(tail, 1, 6, f) == 6 &&
         strcmp(tail, "-----\n") == 0;
    fclose(f);
    return ok;
}

/* certs_create() with one failure injected by arm(); its status, with
 * err filled. */
static int
create_with(const char *dir, struct ng_error *err)
{
    struct certs_create_opts o = {.service = "svc",
                                  .ns = "ns",
                                  .out_dir = dir,
                                  .days = 30,
                                  .ca_days = 365};
    struct certs_create_result r = {0};
    int rc;

    ERR_clear_error();
    memset(err, 0, sizeof(*err));
    rc = certs_create(&o, &r, err);
    certs_create_result_release(&r);
    return rc;
}

/* OpenSSL failing (signing, a BIGNUM or BIO that cannot be allocated, a
 * verification context, a time it cannot convert) and write(2) returning
 * short, 0 or EINTR: each gives its own words, or is retried. */
static void
test_injected(const char *dir)
{
    struct ng_error err;
    char path[256], ca[256];
    FILE *null = fopen("/dev/null", "w");

    /* X509_sign() failing with no OpenSSL error queued: the words alone,
     * without an empty OpenSSL error after them. */
    sign_fail_at = 1;
    CHECK_INT(create_with(dir, &err), -1);
    CHECK_STR(err.msg, "cannot sign the CA certificate");
    sign_fail_at = 2;
    CHECK_INT(create_with(dir, &err), -1);
    CHECK_STR(err.msg, "cannot sign the serving certificate");
    sign_fail_at = 0;

    /* BN_new() out of memory for the CA's serial, then for the serving
     * certificate's. */
    bn_fail_at = 1;
    CHECK_INT(create_with(dir, &err), -1);
    CHECK_STR(err.msg, "cannot build a certificate");
    bn_fail_at = 2;
    CHECK_INT(create_with(dir, &err), -1);
    CHECK_STR(err.msg, "cannot build a certificate");
    bn_fail_at = 0;

    /* No secure-heap BIO for the first private key. */
    secmem_bio_fail_at = 1;
    CHECK_INT(create_with(dir, &err), -1);
    CHECK_STR(err.msg, "cannot encode a private key");
    secmem_bio_fail_at = 0;

    /* write(2) may write less than asked (POSIX); the rest follows, to
     * the last byte. EINTR is retried. */
    write_mode = WRITE_SHORT;
    CHECK_INT(create_with(dir, &err), 0);
    write_mode = WRITE_REAL;
    snprintf(path, sizeof(path), "%s/tls.crt", dir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    CHECK(pem_whole(path));
    CHECK(pem_whole(ca));
    write_mode = WRITE_EINTR;
    CHECK_INT(create_with(dir, &err), 0);
    CHECK_INT(write_mode, WRITE_REAL);
    /* A write that returns 0 is an error, whatever errno holds. */
    write_mode = WRITE_ZERO;
    CHECK_INT(create_with(dir, &err), -1);
    CHECK(strstr(err.msg, "cannot write") != NULL);
    write_mode = WRITE_REAL;
    /* With stdin closed the temporary file gets descriptor 0 (open(2)
     * returns the lowest free one); a failed write closes it too. */
    {
        int saved = fcntl(0, F_DUPFD_CLOEXEC, 3);

        CHECK(saved > 0);
        close(0);
        write_mode = WRITE_ZERO;
        CHECK_INT(create_with(dir, &err), -1);
        write_mode = WRITE_REAL;
        CHECK(fcntl(0, F_GETFD) == -1);
        if (saved > 0) {
            dup2(saved, 0);
            close(saved);
        }
    }

    /* Verifying against the CA without a store context. */
    CHECK_INT(create_with(dir, &err), 0);
    ctx_fail_at = 1;
    memset(&err, 0, sizeof(err));
    CHECK_INT(certs_inspect(path, ca, NULL, 0, null, &err), CERTS_BAD_INPUT);
    CHECK(strstr(err.msg, "out of memory verifying the chain") != NULL);
    ctx_fail_at = 0;

    /* A time OpenSSL cannot convert is printed as such. */
    {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        enum certs_status st;

        tm_fail = true;
        memset(&err, 0, sizeof(err));
        st = certs_inspect(path, NULL, NULL, 0, f, &err);
        tm_fail = false;
        fclose(f);
        (void)st;
        CHECK(buf != NULL && strstr(buf, "(invalid time)") != NULL);
        free(buf);
    }
    fclose(null);
}

int
main(void)
{
    char dir[] = "/tmp/test_certs.XXXXXX", sub[64], cmd[128];

    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(sub, sizeof(sub), "%s/out", dir);
    test_names();
    test_create_inspect(sub);
    snprintf(sub, sizeof(sub), "%s/bad", dir);
    test_create_bad(sub);
    snprintf(sub, sizeof(sub), "%s/bounds", dir);
    test_create_bounds(sub);
    test_bundle_text(sub);
    test_webhook();
    test_webhook_refusals();
    test_webhook_write_error();
    snprintf(sub, sizeof(sub), "%s/renew", dir);
    test_renew_edges(sub);
    snprintf(sub, sizeof(sub), "%s/clock", dir);
    test_clock(sub);
    snprintf(sub, sizeof(sub), "%s/inject", dir);
    test_injected(sub);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return harness_finish();
}
