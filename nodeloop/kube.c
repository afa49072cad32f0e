/* Kubernetes API requests and watches for the node loop, with libcurl. */
#include "nodeloop/kube.h"

#include "watchdog/event.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KUBE_ANSWER_MAX (8u << 20)
#define KUBE_LINE_MAX (4u << 20)

/* Headers for one request; NULL on failure (why filled). */
static struct curl_slist *
headers(const struct kube_client *kc, const char *content_type, char *why,
        size_t wn)
{
    struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json"),
                      *n;
    char line[300];

    if (h == NULL)
        goto oom;
    if (content_type != NULL) {
        snprintf(line, sizeof(line), "Content-Type: %s", content_type);
        if ((n = curl_slist_append(h, line)) == NULL)
            goto oom;
        h = n;
    }
    if (kc->token_file != NULL && kc->token_file[0] != '\0') {
        char token[8192], auth[8300];

        if (wd_token_read(kc->token_file, token, sizeof(token)) != 0) {
            snprintf(why, wn, "cannot read the service-account token %s: %s",
                     kc->token_file, errno ? strerror(errno) : "empty or bad");
            explicit_bzero(token, sizeof(token));
            curl_slist_free_all(h);
            return NULL;
        }
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        explicit_bzero(token, sizeof(token));
        n = curl_slist_append(h, auth);
        explicit_bzero(auth, sizeof(auth));
        if (n == NULL)
            goto oom;
        h = n;
    }
    return h;
oom:
    curl_slist_free_all(h);
    snprintf(why, wn, "out of memory");
    return NULL;
}

static size_t
answer_cb(char *p, size_t size, size_t nmemb, void *ud)
{
    struct buf *b = ud;

    return buf_add(b, p, size * nmemb) == 0 ? size * nmemb : 0;
}

static CURL *
handle(const struct kube_client *kc, const char *method, const char *path,
       struct curl_slist *h, char *url, size_t un)
{
    CURL *c;
    int write = method != NULL &&
                (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
                 strcmp(method, "PATCH") == 0);
    int w =
        write && kc->field_manager != NULL
            ? snprintf(url, un, "%s%s%cfieldManager=%s", kc->api_server, path,
                       strchr(path, '?') != NULL ? '&' : '?', kc->field_manager)
            : snprintf(url, un, "%s%s", kc->api_server, path);

    if (w < 0 || (size_t)w >= un || (c = curl_easy_init()) == NULL)
        return NULL;
    if (kc->user_agent != NULL)
        curl_easy_setopt(c, CURLOPT_USERAGENT, kc->user_agent);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    if (kc->ca_file != NULL && kc->ca_file[0] != '\0')
        curl_easy_setopt(c, CURLOPT_CAINFO, kc->ca_file);
    return c;
}

long
kube_request(const struct kube_client *kc, const char *method, const char *path,
             const char *content_type, const char *body, struct buf *resp,
             char *why, size_t wn)
{
    struct curl_slist *h;
    char url[1024];
    CURL *c;
    CURLcode rc;
    long code = -1;

    buf_release(resp);
    buf_init(resp, KUBE_ANSWER_MAX);
    if ((h = headers(kc, content_type, why, wn)) == NULL)
        return -1;
    if ((c = handle(kc, method, path, h, url, sizeof(url))) == NULL) {
        snprintf(why, wn, "cannot set up a request to %s", path);
        curl_slist_free_all(h);
        return -1;
    }
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body != NULL)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, kc->timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, answer_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
    rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        snprintf(why, wn, "%s %s: %s", method, path, curl_easy_strerror(rc));
    else
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return code;
}

struct watch_ctx {
    struct buf line;
    int (*on_line)(const char *, size_t, void *);
    void *ud;
    int stopped, toolong;
};

static size_t
watch_cb(char *p, size_t size, size_t nmemb, void *ud)
{
    struct watch_ctx *w = ud;
    size_t n = size * nmemb, i = 0;

    while (i < n) {
        char *nl = memchr(p + i, '\n', n - i);
        size_t take = nl != NULL ? (size_t)(nl - (p + i)) : n - i;

        if (buf_add(&w->line, p + i, take) != 0) {
            w->toolong = 1;
            return 0;
        }
        i += take;
        if (nl == NULL)
            break;
        i++;
        if (w->line.len > 0 && w->on_line(w->line.p, w->line.len, w->ud)) {
            w->stopped = 1;
            return 0;
        }
        buf_reset(&w->line);
    }
    return n;
}

long
kube_watch(const struct kube_client *kc, const char *path, long max_ms,
           int (*on_line)(const char *line, size_t len, void *ud), void *ud,
           char *why, size_t wn)
{
    struct watch_ctx w = {{NULL, 0, 0, KUBE_LINE_MAX}, on_line, ud, 0, 0};
    struct curl_slist *h;
    char url[1024];
    CURL *c;
    CURLcode rc;
    long code = -1;

    if ((h = headers(kc, NULL, why, wn)) == NULL)
        return -1;
    if ((c = handle(kc, "GET", path, h, url, sizeof(url))) == NULL) {
        snprintf(why, wn, "cannot set up a watch of %s", path);
        curl_slist_free_all(h);
        return -1;
    }
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, max_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
    rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (w.stopped)
        rc = CURLE_OK;
    else if (w.toolong)
        snprintf(why, wn, "watch %s: an event over %u bytes", path,
                 KUBE_LINE_MAX);
    else if (rc != CURLE_OK)
        snprintf(why, wn, "watch %s: %s", path, curl_easy_strerror(rc));
    if (rc != CURLE_OK)
        code = -1;
    buf_release(&w.line);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return code;
}
