/* Unit tests for server/reload: snapshots swap, old ones stay valid while
 * referenced, broken files are refused and the last good one kept. */
#include "server/reload.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/x509.h>

#include "harness.h"
#include "server/log.h"
#include "server/metrics.h"

static char dir[] = "/tmp/ncclguard-reload-XXXXXX";
static char policy_path[256], cert_path[256], key_path[256];

static void
write_file(const char *path, const void *data, size_t len)
{
    char tmp[300];
    FILE *f;

    /* Write aside and rename, as an atomic update does. */
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL)
        return;
    fwrite(data, 1, len, f);
    fclose(f);
    rename(tmp, path);
}

static void
write_text(const char *path, const char *text)
{
    write_file(path, text, strlen(text));
}

/* Writes a fresh self-signed P-256 pair valid for a day. */
static void
write_pair(const char *crt_path, const char *k_path)
{
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    gnutls_datum_t c = {NULL, 0}, k = {NULL, 0};
    unsigned char serial[8];
    time_t now = time(NULL);

    gnutls_x509_privkey_init(&key);
    gnutls_x509_privkey_generate(
        key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1),
        0);
    gnutls_x509_crt_init(&crt);
    gnutls_x509_crt_set_version(crt, 3);
    for (size_t i = 0; i < sizeof(serial); i++)
        serial[i] = (unsigned char)(rand() & 0x7f);
    gnutls_x509_crt_set_serial(crt, serial, sizeof(serial));
    gnutls_x509_crt_set_activation_time(crt, now - 60);
    gnutls_x509_crt_set_expiration_time(crt, now + 86400);
    gnutls_x509_crt_set_dn(crt, "CN=reload.test", NULL);
    gnutls_x509_crt_set_key(crt, key);
    gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
    gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &c);
    gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &k);
    write_file(k_path, k.data, k.size);
    write_file(crt_path, c.data, c.size);
    gnutls_free(c.data);
    gnutls_free(k.data);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
}

/* The value of an unlabelled metric in a fresh scrape. */
static long long
metric(const char *name)
{
    struct metrics_gauges g = {0};
    size_t len = 0, n = strlen(name);
    char *text = metrics_render(&g, &len);
    long long v = -1;

    for (char *p = text; p != NULL && (p = strstr(p, name)) != NULL; p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ') {
            v = strtoll(p + n + 1, NULL, 10);
            break;
        }
    free(text);
    return v;
}

static const char good1[] = "apiVersion: ncclguard.io/v1alpha1\n"
                            "kind: Policy\n"
                            "defaults:\n"
                            "  shm: {perGPU: 4Gi}\n";
static const char good2[] = "apiVersion: ncclguard.io/v1alpha1\n"
                            "kind: Policy\n"
                            "defaults:\n"
                            "  shm: {perGPU: 8Gi}\n";
static const char bad[] = "apiVersion: ncclguard.io/v1alpha1\n"
                          "kind: Policy\n"
                          "defaults:\n"
                          "  shm: {perGPU: 4Gb}\n";

int
main(void)
{
    struct reload_config cfg = {0};
    struct reload *r;
    struct policy_snap *p1, *p2, *p3;
    struct cert_snap *c1, *c2, *c3;
    struct ng_error e;
    char hash1[72];
    int devnull;

    srand((unsigned)time(NULL));
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(policy_path, sizeof(policy_path), "%s/policy.yaml", dir);
    snprintf(cert_path, sizeof(cert_path), "%s/tls.crt", dir);
    snprintf(key_path, sizeof(key_path), "%s/tls.key", dir);
    /* Reload log lines are not what is tested here. */
    devnull = open("/dev/null", O_WRONLY);
    log_output_set(devnull);
    metrics_reset();

    /* Start-up refuses a broken policy. */
    write_text(policy_path, bad);
    write_pair(cert_path, key_path);
    cfg.policy_path = policy_path;
    cfg.cert_path = cert_path;
    cfg.key_path = key_path;
    ng_error_clear(&e);
    r = reload_new(&cfg, &e);
    CHECK(r == NULL);
    CHECK(strstr(e.msg, policy_path) != NULL);

    write_text(policy_path, good1);
    ng_error_clear(&e);
    r = reload_new(&cfg, &e);
    CHECK(r != NULL);
    if (r == NULL) {
        fprintf(stderr, "reload_new: %s\n", e.msg);
        return harness_finish();
    }

    p1 = reload_policy_acquire(r);
    c1 = reload_cert_acquire(r);
    CHECK_INT(p1->generation, 1);
    CHECK_INT(c1->generation, 1);
    CHECK_INT(strlen(p1->hash), 64);
    snprintf(hash1, sizeof(hash1), "%s", p1->hash);

    /* Unchanged files: nothing swapped, nothing counted. */
    reload_check(r, false);
    p2 = reload_policy_acquire(r);
    CHECK(p2 == p1);
    reload_policy_release(p2);
    CHECK_INT(metric("ncclguard_policy_reloads_total"), 0);

    /* A new policy and a new pair are swapped in; the old snapshots stay
     * usable by whoever still holds them. */
    write_text(policy_path, good2);
    write_pair(cert_path, key_path);
    reload_check(r, false);
    p2 = reload_policy_acquire(r);
    c2 = reload_cert_acquire(r);
    CHECK(p2 != p1);
    CHECK_INT(p2->generation, 2);
    CHECK(strcmp(p2->hash, hash1) != 0);
    CHECK_INT(c2->generation, 2);
    CHECK(c2 != c1);
    CHECK_STR(policy_hash(p1->pol), hash1);
    CHECK(tlspair_not_after(c1->pair) > 0);
    CHECK_INT(metric("ncclguard_policy_reloads_total"), 1);
    CHECK_INT(metric("ncclguard_cert_reloads_total"), 1);
    reload_policy_release(p1); /* last reference: freed here */
    reload_cert_release(c1);

    /* A broken policy and a mismatched pair are refused once; the last
     * good ones keep serving. */
    write_text(policy_path, bad);
    {
        char other_crt[300], other_key[300];
        snprintf(other_crt, sizeof(other_crt), "%s/other.crt", dir);
        snprintf(other_key, sizeof(other_key), "%s/other.key", dir);
        write_pair(other_crt, other_key);
        rename(other_key, key_path);
    }
    reload_check(r, false);
    reload_check(r, false); /* the same broken content is not recounted */
    p3 = reload_policy_acquire(r);
    c3 = reload_cert_acquire(r);
    CHECK(p3 == p2);
    CHECK(c3 == c2);
    CHECK_INT(metric("ncclguard_policy_reload_errors_total"), 1);
    CHECK_INT(metric("ncclguard_cert_reload_errors_total"), 1);
    /* A forced check (SIGHUP) reports it again. */
    reload_check(r, true);
    CHECK_INT(metric("ncclguard_policy_reload_errors_total"), 2);
    CHECK_INT(metric("ncclguard_cert_reload_errors_total"), 2);
    reload_policy_release(p3);
    reload_cert_release(c3);

    /* A missing file is a failure too, not a crash. */
    unlink(policy_path);
    reload_check(r, true);
    CHECK_INT(metric("ncclguard_policy_reload_errors_total"), 3);
    p3 = reload_policy_acquire(r);
    CHECK(p3 == p2);
    reload_policy_release(p3);

    /* The good policy back: swapped in as generation 3. */
    write_text(policy_path, good1);
    reload_check(r, false);
    p3 = reload_policy_acquire(r);
    CHECK_INT(p3->generation, 3);
    CHECK_STR(p3->hash, hash1);
    reload_policy_release(p3);

    /* The watcher thread starts and stops cleanly; a held snapshot
     * outlives reload_free(). */
    CHECK_INT(reload_start(r, &e), 0);
    reload_request(r);
    reload_free(r);
    CHECK_STR(policy_hash(p2->pol), p2->hash);
    reload_policy_release(p2);
    reload_cert_release(c2);

    {
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    close(devnull);
    return harness_finish();
}
