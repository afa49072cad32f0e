/* The policy and serving-certificate snapshots in force, and the watcher
 * that replaces them when their files change (inotify, SIGHUP, polling). */
#include "server/reload.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>

#include "base/file.h"
#include "server/log.h"
#include "server/metrics.h"

#define DIGEST_LEN 32
#define MAX_WATCHES 3

struct reload {
    char *policy_path, *cert_path, *key_path;
    unsigned int interval;

    /* Guards only the two pointers below while a reference is taken or a
     * snapshot swapped: a few instructions, never held across work. */
    pthread_mutex_t lock;
    struct policy_snap *policy;
    struct cert_snap *cert;

    /* Fingerprints of the file contents in force and of the last content
     * that failed, so a broken file is reported once, not every poll. */
    unsigned char policy_good[DIGEST_LEN], policy_bad[DIGEST_LEN];
    bool policy_bad_set;
    unsigned char cert_good[DIGEST_LEN], cert_bad[DIGEST_LEN];
    bool cert_bad_set;

    int inotify_fd;
    int event_fd;
    atomic_bool stop;
    pthread_t thread;
    bool running;
};

static char *
dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

static void
digest(const void *a, size_t alen, const void *b, size_t blen,
       unsigned char out[DIGEST_LEN])
{
    gnutls_hash_hd_t h;

    memset(out, 0, DIGEST_LEN);
    if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) < 0)
        return;
    if (alen > 0)
        gnutls_hash(h, a, alen);
    if (blen > 0)
        gnutls_hash(h, b, blen);
    gnutls_hash_deinit(h, out);
}

static void
policy_snap_free(struct policy_snap *s)
{
    if (s == NULL)
        return;
    policy_free(s->pol);
    free(s);
}

static void
cert_snap_free(struct cert_snap *s)
{
    if (s == NULL)
        return;
    tlspair_free(s->pair);
    free(s);
}

void
reload_policy_release(struct policy_snap *s)
{
    if (s != NULL &&
        atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        policy_snap_free(s);
}

void
reload_cert_release(struct cert_snap *s)
{
    if (s != NULL &&
        atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        cert_snap_free(s);
}

struct policy_snap *
reload_policy_acquire(struct reload *r)
{
    struct policy_snap *s;

    pthread_mutex_lock(&r->lock);
    s = r->policy;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&r->lock);
    return s;
}

struct cert_snap *
reload_cert_acquire(struct reload *r)
{
    struct cert_snap *s;

    pthread_mutex_lock(&r->lock);
    s = r->cert;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&r->lock);
    return s;
}

/*
 * Loads the policy file. Returns 1 when a new snapshot was swapped in, 0
 * when nothing changed, -1 when the file failed (err set, old one kept).
 */
static int
policy_try(struct reload *r, bool force, bool first, struct ng_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    unsigned char fp[DIGEST_LEN];
    struct policy_snap *s = NULL, *old;
    struct ng_error e;
    int rc = -1;

    buf = file_read(r->policy_path, RELOAD_MAX_POLICY_BYTES, &len, err);
    if (buf == NULL) {
        memset(fp, 0xff, sizeof(fp));
        goto failed;
    }
    digest(buf, len, NULL, 0, fp);
    if (!first && memcmp(fp, r->policy_good, DIGEST_LEN) == 0) {
        r->policy_bad_set = false;
        rc = 0;
        goto done;
    }
    if (!first && !force && r->policy_bad_set &&
        memcmp(fp, r->policy_bad, DIGEST_LEN) == 0) {
        rc = 0;
        goto done;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        ng_error_set(err, 0, 0, "out of memory");
        goto failed;
    }
    ng_error_clear(&e);
    s->pol = policy_load(buf, len, r->policy_path, &e);
    if (s->pol == NULL) {
        char msg[sizeof(e.msg) + 64];
        ng_error_format(&e, r->policy_path, msg, sizeof(msg));
        ng_error_set(err, e.line, e.col, "%s", msg);
        goto failed;
    }
    snprintf(s->hash, sizeof(s->hash), "%s", policy_hash(s->pol));
    atomic_init(&s->refs, 1);
    memcpy(r->policy_good, fp, DIGEST_LEN);
    r->policy_bad_set = false;

    pthread_mutex_lock(&r->lock);
    old = r->policy;
    s->generation = old ? old->generation + 1 : 1;
    r->policy = s;
    pthread_mutex_unlock(&r->lock);
    reload_policy_release(old);
    rc = 1;
    goto done;
failed:
    if (!first) {
        memcpy(r->policy_bad, fp, DIGEST_LEN);
        r->policy_bad_set = true;
    }
    policy_snap_free(s);
done:
    free(buf);
    return rc;
}

/* As policy_try() for the certificate pair. */
static int
cert_try(struct reload *r, bool force, bool first, struct ng_error *err)
{
    char *cert = NULL, *key = NULL;
    size_t cert_len = 0, key_len = 0;
    unsigned char fp[DIGEST_LEN];
    struct cert_snap *s = NULL, *old;
    struct ng_error e;
    int rc = -1;

    memset(fp, 0xff, sizeof(fp));
    cert = file_read(r->cert_path, TLSPAIR_MAX_PEM, &cert_len, err);
    if (cert == NULL)
        goto failed;
    key = file_read(r->key_path, TLSPAIR_MAX_PEM, &key_len, err);
    if (key == NULL)
        goto failed;
    digest(cert, cert_len, key, key_len, fp);
    if (!first && memcmp(fp, r->cert_good, DIGEST_LEN) == 0) {
        r->cert_bad_set = false;
        rc = 0;
        goto done;
    }
    if (!first && !force && r->cert_bad_set &&
        memcmp(fp, r->cert_bad, DIGEST_LEN) == 0) {
        rc = 0;
        goto done;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        ng_error_set(err, 0, 0, "out of memory");
        goto failed;
    }
    ng_error_clear(&e);
    s->pair = tlspair_load(cert, cert_len, key, key_len, time(NULL), &e);
    if (s->pair == NULL) {
        ng_error_set(err, 0, 0, "%s, %s: %s", r->cert_path, r->key_path, e.msg);
        goto failed;
    }
    atomic_init(&s->refs, 1);
    memcpy(r->cert_good, fp, DIGEST_LEN);
    r->cert_bad_set = false;

    pthread_mutex_lock(&r->lock);
    old = r->cert;
    s->generation = old ? old->generation + 1 : 1;
    r->cert = s;
    pthread_mutex_unlock(&r->lock);
    reload_cert_release(old);
    rc = 1;
    goto done;
failed:
    if (!first) {
        memcpy(r->cert_bad, fp, DIGEST_LEN);
        r->cert_bad_set = true;
    }
    cert_snap_free(s);
done:
    free(cert);
    file_free_secret(key, key_len);
    return rc;
}

struct reload *
reload_new(const struct reload_config *cfg, struct ng_error *err)
{
    struct reload *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        ng_error_set(err, 0, 0, "out of memory");
        return NULL;
    }
    r->inotify_fd = -1;
    r->event_fd = -1;
    pthread_mutex_init(&r->lock, NULL);
    atomic_init(&r->stop, false);
    r->interval = cfg->interval_seconds;
    r->policy_path = dup_string(cfg->policy_path);
    r->cert_path = dup_string(cfg->cert_path);
    r->key_path = dup_string(cfg->key_path);
    if (r->policy_path == NULL || r->cert_path == NULL || r->key_path == NULL) {
        ng_error_set(err, 0, 0, "out of memory");
        goto fail;
    }
    if (policy_try(r, true, true, err) != 1)
        goto fail;
    if (cert_try(r, true, true, err) != 1)
        goto fail;
    return r;
fail:
    reload_free(r);
    return NULL;
}

void
reload_check(struct reload *r, bool force)
{
    struct ng_error e;
    int rc;
    json_t *f;

    ng_error_clear(&e);
    rc = policy_try(r, force, false, &e);
    /* A bad file is counted once in the errors counter; this gauge stays
     * up until the file loads again, so an alert can wait on it. */
    metrics_policy_reload_failing_set(r->policy_bad_set);
    if (rc < 0) {
        metrics_policy_reload_record(0);
        log_error_write(LOG_ERROR,
                        "policy reload failed; keeping the last "
                        "good policy",
                        "path", r->policy_path, "%s", e.msg);
    } else if (rc > 0) {
        struct policy_snap *s = reload_policy_acquire(r);
        metrics_policy_reload_record(1);
        f = json_pack("{s:s,s:I,s:s}", "path", r->policy_path, "generation",
                      (json_int_t)s->generation, "hash", s->hash);
        log_fields_write(LOG_INFO, "policy reloaded", f);
        json_decref(f);
        reload_policy_release(s);
    }

    ng_error_clear(&e);
    rc = cert_try(r, force, false, &e);
    if (rc < 0) {
        metrics_cert_reload_record(0);
        log_error_write(LOG_ERROR,
                        "certificate reload failed; keeping the "
                        "last good pair",
                        "path", r->cert_path, "%s", e.msg);
    } else if (rc > 0) {
        struct cert_snap *s = reload_cert_acquire(r);
        metrics_cert_reload_record(1);
        f = json_pack("{s:s,s:I,s:I}", "path", r->cert_path, "generation",
                      (json_int_t)s->generation, "not_after",
                      (json_int_t)tlspair_not_after(s->pair));
        log_fields_write(LOG_INFO, "certificate reloaded", f);
        json_decref(f);
        reload_cert_release(s);
    }
}

/* Watches the directory holding path: a Kubernetes volume update renames
 * the ..data symlink there, which is an event on the directory, never on
 * the file's own name. */
static void
watch_dir_of(struct reload *r, const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');

    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    if (inotify_add_watch(r->inotify_fd, dir,
                          IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM |
                              IN_CREATE | IN_DELETE | IN_ATTRIB) < 0)
        log_error_write(LOG_WARN,
                        "cannot watch directory; relying on polling "
                        "and SIGHUP",
                        "dir", dir, "%s", strerror(errno));
}

/* Reads and drops whatever is queued on fd. */
static void
drain(int fd)
{
    char buf[4096] __attribute__((aligned(8)));
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

static const char *
base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/*
 * Reads the queued inotify events and says whether one concerns our files:
 * their own names, the kubelet's "..data" names, or the directory itself.
 * Other files in the same directory (logs, editors' temporaries) are
 * ignored.
 */
static bool
relevant_events(struct reload *r)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool hit = false;
    ssize_t n;

    while ((n = read(r->inotify_fd, buf, sizeof(buf))) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            const char *name = ev->len > 0 ? ev->name : "";
            if (ev->len == 0 || strncmp(name, "..", 2) == 0 ||
                strcmp(name, base_name(r->policy_path)) == 0 ||
                strcmp(name, base_name(r->cert_path)) == 0 ||
                strcmp(name, base_name(r->key_path)) == 0)
                hit = true;
            p += sizeof(struct inotify_event) + ev->len;
        }
    }
    return hit;
}

/* A change to our files is checked once its events have paused this long
 * (a copy or a symlink swap comes as a burst), */
#define SETTLE_MS 30
/* but never later than this after its first event, however long the
 * burst. */
#define SETTLE_MAX_MS 200

static uint64_t
now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Milliseconds from now until the earlier of two deadlines (0 = none),
 * for poll(2): -1 when there is none. */
static int
wait_ms(uint64_t now, uint64_t a, uint64_t b)
{
    uint64_t next = a;

    if (next == 0 || (b != 0 && b < next))
        next = b;
    if (next == 0)
        return -1;
    return next <= now ? 0 : (int)(next - now);
}

/*
 * The watcher. Three things make it check the files, each on its own
 * clock, so that none can hold another back: SIGHUP (at once, forced),
 * the interval (when it is due), and inotify events on our own files
 * (after SETTLE_MS of quiet, at most SETTLE_MAX_MS after the first).
 * Events on other files in the same directories are read and dropped
 * without touching either clock: a log file appended every few
 * milliseconds next to the policy used to postpone every reload.
 */
static void *
watcher_main(void *arg)
{
    struct reload *r = arg;
    struct pollfd p[2];
    uint64_t interval_ms = (uint64_t)r->interval * 1000;
    uint64_t next_poll = 0, settle_at = 0, first_event = 0;

    p[0].fd = r->inotify_fd;
    p[0].events = POLLIN;
    p[1].fd = r->event_fd;
    p[1].events = POLLIN;
    if (interval_ms > 0)
        next_poll = now_ms() + interval_ms;
    while (!atomic_load(&r->stop)) {
        uint64_t now = now_ms();
        int n = poll(p, 2, wait_ms(now, next_poll, settle_at));
        bool force = false, due = false;

        if (n < 0 && errno != EINTR)
            break;
        if (atomic_load(&r->stop))
            break;
        now = now_ms();
        if (n > 0 && (p[1].revents & POLLIN)) {
            drain(r->event_fd);
            force = true;
        }
        if (n > 0 && (p[0].revents & POLLIN) && relevant_events(r)) {
            if (settle_at == 0)
                first_event = now;
            settle_at = now + SETTLE_MS;
            if (settle_at > first_event + SETTLE_MAX_MS)
                settle_at = first_event + SETTLE_MAX_MS;
        }
        if (settle_at != 0 && now >= settle_at)
            due = true;
        if (next_poll != 0 && now >= next_poll)
            due = true;
        if (force || due) {
            reload_check(r, force);
            settle_at = 0;
            if (interval_ms > 0)
                next_poll = now_ms() + interval_ms;
        }
    }
    return NULL;
}

int
reload_start(struct reload *r, struct ng_error *err)
{
    pthread_attr_t attr;
    int rc;

    r->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->event_fd < 0) {
        ng_error_set(err, 0, 0, "eventfd: %s", strerror(errno));
        return -1;
    }
    r->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (r->inotify_fd < 0) {
        log_error_write(LOG_WARN,
                        "inotify unavailable; relying on polling "
                        "and SIGHUP",
                        NULL, NULL, "%s", strerror(errno));
    } else {
        watch_dir_of(r, r->policy_path);
        watch_dir_of(r, r->cert_path);
        watch_dir_of(r, r->key_path);
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    rc = pthread_create(&r->thread, &attr, watcher_main, r);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        ng_error_set(err, 0, 0, "cannot start the reload thread: %s",
                     strerror(rc));
        return -1;
    }
    r->running = true;
    return 0;
}

void
reload_request(struct reload *r)
{
    uint64_t one = 1;

    /* A full counter (EAGAIN) already means "reload pending". */
    if (r->event_fd >= 0 && write(r->event_fd, &one, sizeof(one)) < 0)
        return;
}

void
reload_free(struct reload *r)
{
    if (r == NULL)
        return;
    if (r->running) {
        atomic_store(&r->stop, true);
        reload_request(r);
        pthread_join(r->thread, NULL);
    }
    if (r->inotify_fd >= 0)
        close(r->inotify_fd);
    if (r->event_fd >= 0)
        close(r->event_fd);
    reload_policy_release(r->policy);
    reload_cert_release(r->cert);
    pthread_mutex_destroy(&r->lock);
    free(r->policy_path);
    free(r->cert_path);
    free(r->key_path);
    free(r);
}
