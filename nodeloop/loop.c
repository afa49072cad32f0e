/* The node loop's shared helpers: the clock, the JSON log line, and the
 * quarantine policy in force (read, reloaded on a change or SIGHUP). */
#include "nodeloop/loop.h"

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/file.h"
#include "nodeloop/nodestate.h"
#include "policy/policy.h"

/* The policy file is read whole, at most this much (the webhook's cap,
 * RELOAD_MAX_POLICY_BYTES in server/reload.h). */
#define NL_POLICY_MAX (4u << 20)

int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
rfc3339(int64_t ms, char *buf, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "2026-12-01T21:40:25Z" (optionally with fractions) -> ms; -1 bad. */
int64_t
parse_time(const char *s)
{
    struct tm tm;
    const char *end;

    if (s == NULL)
        return -1;
    memset(&tm, 0, sizeof(tm));
    end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (end == NULL)
        return -1;
    return (int64_t)timegm(&tm) * 1000;
}

void
logj(const char *what, json_t *fields)
{
    char ts[32];
    char *text;

    rfc3339(now_ms(), ts, sizeof(ts));
    if (fields == NULL)
        fields = json_object();
    json_object_set_new(fields, "ts", json_string(ts));
    json_object_set_new(fields, "event", json_string(what));
    text = json_dumps(fields, JSON_COMPACT | JSON_SORT_KEYS);
    if (text != NULL) {
        printf("%s\n", text);
        fflush(stdout);
        free(text);
    }
    json_decref(fields);
}

/* --- the policy --------------------------------------------------------- */

volatile sig_atomic_t nl_hup;

void
on_hup(int sig)
{
    (void)sig;
    nl_hup = 1;
}

/* The quarantine settings in force: the policy's block (or the built-in
 * defaults without --policy), then every flag given on top. */
void
policy_apply(struct nl_opts *o, const struct policy_quarantine *q)
{
    const struct nq_policy *f = &o->flag_pol;

    if (q != NULL) {
        o->pol.mode = q->mode == QUARANTINE_TAINT ? NQ_QUARANTINE : NQ_OBSERVE;
        o->pol.threshold = q->threshold;
        o->pol.window_ms = q->window_ms;
        o->pol.cooldown_ms = q->cooldown_ms;
        o->pol.cooldown_max_ms = q->cooldown_max_ms;
        o->pol.expiry_ms = q->expiry_ms;
        o->pol.max_share_permille = q->max_share_permille;
    }
    if (o->flags_set & NLF_MODE)
        o->pol.mode = f->mode;
    if (o->flags_set & NLF_THRESHOLD)
        o->pol.threshold = f->threshold;
    if (o->flags_set & NLF_WINDOW)
        o->pol.window_ms = f->window_ms;
    if (o->flags_set & NLF_COOLDOWN)
        o->pol.cooldown_ms = f->cooldown_ms;
    if (o->flags_set & NLF_COOLDOWN_MAX)
        o->pol.cooldown_max_ms = f->cooldown_max_ms;
    if (o->flags_set & NLF_EXPIRY)
        o->pol.expiry_ms = f->expiry_ms;
    if (o->flags_set & NLF_SHARE)
        o->pol.max_share_permille = f->max_share_permille;
}

/*
 * Reads the policy file and, when its bytes changed (or force: SIGHUP),
 * loads it and puts its quarantine block in force. The same rules as the
 * webhook's reload (policy_try in server/reload.c): a file that does not
 * load leaves the last good policy in force, is reported once (not on
 * every step while it stays the same), and raises the failing gauge until
 * a good one comes. Returns 0 when a policy is in force, -1 when none
 * ever loaded (at start: the loop does not run without it).
 */
int
policy_reload(struct nl *nl, int force)
{
    struct nl_opts *o = nl->o;
    struct ng_error e;
    struct policy *p;
    char msg[sizeof(e.msg) + 600];
    size_t len = 0;
    char *buf;

    if (o->policy_path == NULL)
        return 0;
    ng_error_clear(&e);
    buf = file_read(o->policy_path, NL_POLICY_MAX, &len, &e);
    if (buf != NULL && !force && nl->pol_seen != NULL &&
        len == nl->pol_seen_len && memcmp(buf, nl->pol_seen, len) == 0) {
        free(buf);
        return 0;
    }
    p = buf != NULL ? policy_load(buf, len, o->policy_path, &e) : NULL;
    if (p == NULL) {
        int first = nl->pol_seen == NULL;

        ng_error_format(&e, o->policy_path, msg, sizeof(msg));
        pthread_mutex_lock(&nl->mu);
        nl->pol_reload_errors++;
        nl->pol_failing = 1;
        pthread_mutex_unlock(&nl->mu);
        logj("policy-error",
             json_pack("{s:s,s:s}", "path", o->policy_path, "error", msg));
        /* Remembered as seen, so the same bad bytes are not reported on
         * every step; a file that cannot be read is tried again. */
        if (buf != NULL) {
            free(nl->pol_seen);
            nl->pol_seen = buf;
            nl->pol_seen_len = len;
        }
        return first ? -1 : 0;
    }
    pthread_mutex_lock(&nl->mu);
    policy_apply(o, policy_quarantine(p));
    nl->pol_reloads++;
    nl->pol_failing = 0;
    pthread_mutex_unlock(&nl->mu);
    logj("policy",
         json_pack("{s:s,s:s,s:s,s:i,s:I,s:I,s:I,s:I,s:i}", "path",
                   o->policy_path, "hash", policy_hash(p), "mode",
                   o->pol.mode == NQ_QUARANTINE ? "quarantine" : "observe",
                   "threshold", o->pol.threshold, "windowMs",
                   (json_int_t)o->pol.window_ms, "cooldownMs",
                   (json_int_t)o->pol.cooldown_ms, "cooldownMaxMs",
                   (json_int_t)o->pol.cooldown_max_ms, "expiryMs",
                   (json_int_t)o->pol.expiry_ms, "maxSharePermille",
                   o->pol.max_share_permille));
    policy_free(p);
    free(nl->pol_seen);
    nl->pol_seen = buf;
    nl->pol_seen_len = len;
    return 0;
}
