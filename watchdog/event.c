/* One Kubernetes Event POST per hang, with libcurl. */
#include "watchdog/event.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
wd_event_global_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

void
wd_event_global_cleanup(void)
{
    curl_global_cleanup();
}

/* Discards the API server's answer (the created Event). */
static size_t
sink(char *ptr, size_t size, size_t nmemb, void *ud)
{
    (void)ptr;
    (void)ud;
    return size * nmemb;
}

/* A bounded answer body. */
struct sinkbuf {
    char *p;
    size_t n, cap;
    bool toobig;
};

static size_t
sink_keep(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct sinkbuf *b = ud;
    size_t n = size * nmemb;

    if (b->n + n + 1 > b->cap) {
        b->toobig = true;
        return 0; /* makes curl fail the transfer */
    }
    memcpy(b->p + b->n, ptr, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

int
wd_token_read(const char *path, char *buf, size_t n)
{
    ssize_t r;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return -1;
    r = read(fd, buf, n - 1);
    close(fd);
    if (r <= 0)
        return -1;
    while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == '\r'))
        r--;
    buf[r] = '\0';
    for (ssize_t i = 0; i < r; i++)
        if ((unsigned char)buf[i] < 0x21 || buf[i] == 0x7f)
            return -1; /* would break the header */
    return r > 0 ? 0 : -1;
}

long
wd_event_post(const struct wd_event_cfg *cfg, const char *ns, const char *body,
              char *why, size_t wn)
{
    char url[512], token[8192], auth[8300];
    struct curl_slist *h = NULL, *h2;
    CURL *c = NULL;
    CURLcode rc;
    long code = -1;
    int w;

    if (cfg->api_server == NULL || cfg->api_server[0] == '\0') {
        snprintf(why, wn, "no API server configured");
        return -1;
    }
    w = snprintf(url, sizeof(url), "%s/api/v1/namespaces/%s/events",
                 cfg->api_server, ns);
    if (w < 0 || (size_t)w >= sizeof(url)) {
        snprintf(why, wn, "API server URL is too long");
        return -1;
    }
    if (wd_token_read(cfg->token_file, token, sizeof(token)) != 0) {
        snprintf(why, wn, "cannot read the service-account token %s: %s",
                 cfg->token_file, errno ? strerror(errno) : "empty or bad");
        explicit_bzero(token, sizeof(token));
        return -1;
    }
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
    explicit_bzero(token, sizeof(token));
    c = curl_easy_init();
    if (c == NULL)
        goto fail;
    h = curl_slist_append(NULL, "Content-Type: application/json");
    if (h == NULL)
        goto fail;
    h2 = curl_slist_append(h, auth);
    if (h2 == NULL)
        goto fail;
    h = h2;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, cfg->timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https,http");
    if (cfg->ca_file != NULL && cfg->ca_file[0] != '\0')
        curl_easy_setopt(c, CURLOPT_CAINFO, cfg->ca_file);
    rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        snprintf(why, wn, "POST %s: %s", url, curl_easy_strerror(rc));
        goto done;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (code != 201)
        snprintf(why, wn, "POST %s answered %ld", url, code);
    goto done;
fail:
    snprintf(why, wn, "out of memory");
done:
    explicit_bzero(auth, sizeof(auth));
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return code;
}

long
wd_api_get(const struct wd_event_cfg *cfg, const char *path, size_t cap,
           char **body, size_t *len, char *why, size_t wn)
{
    char url[1024], token[8192], auth[8300];
    struct sinkbuf b = {NULL, 0, cap, false};
    struct curl_slist *h = NULL;
    CURL *c = NULL;
    CURLcode rc;
    long code = -1;
    int w;

    *body = NULL;
    *len = 0;
    if (cfg->api_server == NULL || cfg->api_server[0] == '\0') {
        snprintf(why, wn, "no API server configured");
        return -1;
    }
    w = snprintf(url, sizeof(url), "%s%s", cfg->api_server, path);
    if (w < 0 || (size_t)w >= sizeof(url)) {
        snprintf(why, wn, "API URL is too long");
        return -1;
    }
    if (wd_token_read(cfg->token_file, token, sizeof(token)) != 0) {
        snprintf(why, wn, "cannot read the service-account token %s",
                 cfg->token_file);
        explicit_bzero(token, sizeof(token));
        return -1;
    }
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
    explicit_bzero(token, sizeof(token));
    b.p = malloc(cap);
    c = curl_easy_init();
    if (b.p == NULL || c == NULL ||
        (h = curl_slist_append(NULL, auth)) == NULL) {
        snprintf(why, wn, "out of memory");
        goto done;
    }
    b.p[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, cfg->timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_keep);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https,http");
    if (cfg->ca_file != NULL && cfg->ca_file[0] != '\0')
        curl_easy_setopt(c, CURLOPT_CAINFO, cfg->ca_file);
    rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        snprintf(why, wn, "GET %s: %s", url,
                 b.toobig ? "answer too large" : curl_easy_strerror(rc));
        goto done;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) {
        snprintf(why, wn, "GET %s answered %ld", url, code);
        goto done;
    }
    *body = b.p;
    *len = b.n;
    b.p = NULL;
done:
    free(b.p);
    explicit_bzero(auth, sizeof(auth));
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return code;
}
