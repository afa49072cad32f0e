/* NCCLGUARD_WATCHDOG: defaults, parser and writer shared by the webhook and
 * the watchdog agent. */
#include "contract/wdspec.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int sig;
    bool kills; /* default action terminates the process (signal(7)) */
} signals[] = {
    {"SIGUSR1", SIGUSR1, true},    {"SIGUSR2", SIGUSR2, true},
    {"SIGHUP", SIGHUP, true},      {"SIGINT", SIGINT, true},
    {"SIGWINCH", SIGWINCH, false}, {"SIGURG", SIGURG, false},
    {"SIGCONT", SIGCONT, false},
};
#define N_SIGNALS (sizeof(signals) / sizeof(signals[0]))

static const char *const signal_name_list[] = {"SIGUSR1", "SIGUSR2",  "SIGHUP",
                                               "SIGINT",  "SIGWINCH", "SIGURG",
                                               "SIGCONT", NULL};

void
wd_spec_defaults(struct wd_spec *s)
{
    memset(s, 0, sizeof(*s));
    s->period_ms = 60 * 1000;
    s->idle_periods = 5;
    s->min_cpu_milli = 500;
    s->action = WD_ACTION_REPORT;
    s->checkpoint_signal = 0;
    s->grace_ms = 120 * 1000;
    s->term_ms = 30 * 1000;
}

int
wd_signal_from_name(const char *name)
{
    const char *bare = strncmp(name, "SIG", 3) == 0 ? name + 3 : name;

    for (size_t i = 0; i < N_SIGNALS; i++)
        if (strcmp(signals[i].name + 3, bare) == 0)
            return signals[i].sig;
    return 0;
}

const char *
wd_signal_name(int sig)
{
    if (sig == 0)
        return "none";
    for (size_t i = 0; i < N_SIGNALS; i++)
        if (signals[i].sig == sig)
            return signals[i].name;
    return NULL;
}

const char *const *
wd_signal_names(void)
{
    return signal_name_list;
}

bool
wd_signal_kills_by_default(int sig)
{
    for (size_t i = 0; i < N_SIGNALS; i++)
        if (signals[i].sig == sig)
            return signals[i].kills;
    return true; /* unknown: assume the worst */
}

int
wd_duration_parse(const char *text, size_t len, int64_t *ms,
                  struct ng_error *err)
{
    int64_t v = 0, unit;
    size_t i = 0;

    while (i < len && text[i] >= '0' && text[i] <= '9') {
        if (v > (INT64_MAX - 9) / 10 / 60000) {
            ng_error_set(err, 0, 0, "duration \"%.*s\" is too large",
                         (int)(len > 40 ? 40 : len), text);
            return -1;
        }
        v = v * 10 + (text[i] - '0');
        i++;
    }
    if (i == 0) {
        ng_error_set(err, 0, 0,
                     "duration \"%.*s\" must be a whole number with ms, s "
                     "or m, such as 60s",
                     (int)(len > 40 ? 40 : len), text);
        return -1;
    }
    if (len - i == 2 && memcmp(text + i, "ms", 2) == 0)
        unit = 1;
    else if (len - i == 1 && text[i] == 's')
        unit = 1000;
    else if (len - i == 1 && text[i] == 'm')
        unit = 60000;
    else {
        ng_error_set(err, 0, 0,
                     "duration \"%.*s\" needs a unit: ms, s or m, such as "
                     "60s",
                     (int)(len > 40 ? 40 : len), text);
        return -1;
    }
    *ms = v * unit;
    return 0;
}

int
wd_duration_arg(const char *text, unsigned flags, int64_t *ms,
                struct ng_error *err)
{
    size_t len = strlen(text);
    int64_t v;

    if ((flags & WD_DURATION_ZERO) && strcmp(text, "0") == 0) {
        *ms = 0;
        return 0;
    }
    /* Hours too where asked: quarantine windows and expiries are long. */
    if ((flags & WD_DURATION_HOURS) && len > 1 && text[len - 1] == 'h') {
        char *end;
        long long h;

        errno = 0;
        h = strtoll(text, &end, 10);
        if (errno == 0 && end == text + len - 1 && h > 0 && h <= 24 * 365) {
            *ms = h * 3600 * 1000;
            return 0;
        }
    }
    if (wd_duration_parse(text, len, &v, err) != 0)
        return -1;
    if (v <= 0) {
        ng_error_set(err, 0, 0, "must be positive");
        return -1;
    }
    *ms = v;
    return 0;
}

/* Cores with up to three decimals -> millicores. */
static int
cores_parse(const char *t, size_t len, int64_t *milli)
{
    int64_t whole = 0, frac = 0;
    size_t i = 0, nd = 0;

    while (i < len && t[i] >= '0' && t[i] <= '9' && i < 7)
        whole = whole * 10 + (t[i++] - '0');
    if (i == 0)
        return -1;
    if (i < len && t[i] == '.') {
        i++;
        while (i < len && t[i] >= '0' && t[i] <= '9' && nd < 3) {
            frac = frac * 10 + (t[i++] - '0');
            nd++;
        }
        if (nd == 0)
            return -1;
        while (nd++ < 3)
            frac *= 10;
    }
    if (i != len)
        return -1;
    *milli = whole * 1000 + frac;
    return 0;
}

static int
bounded(struct ng_error *err, const char *key, int64_t v, int64_t lo,
        int64_t hi, const char *unit)
{
    if (v >= lo && v <= hi)
        return 0;
    ng_error_set(err, 0, 0, "%s must be between %lld%s and %lld%s, got %lld%s",
                 key, (long long)lo, unit, (long long)hi, unit, (long long)v,
                 unit);
    return -1;
}

/* One key=value pair into *s. */
static int
spec_set(struct wd_spec *s, const char *k, size_t kl, const char *v, size_t vl,
         struct ng_error *err)
{
    struct ng_error e;
    char tmp[WD_FILE_MAX + 1];
    int64_t x;

#define KEY(name) (kl == sizeof(name) - 1 && memcmp(k, name, kl) == 0)
    if (KEY("period") || KEY("grace") || KEY("term")) {
        const char *key = KEY("period")  ? "period"
                          : KEY("grace") ? "grace"
                                         : "term";

        if (wd_duration_parse(v, vl, &x, &e) != 0) {
            ng_error_set(err, 0, 0, "%s: %s", key, e.msg);
            return -1;
        }
        if (KEY("period")) {
            if (bounded(err, "period", x, WD_PERIOD_MIN_MS, WD_PERIOD_MAX_MS,
                        "ms") != 0)
                return -1;
            s->period_ms = x;
        } else if (KEY("grace")) {
            if (bounded(err, "grace", x, 0, WD_GRACE_MAX_MS, "ms") != 0)
                return -1;
            s->grace_ms = x;
        } else {
            if (bounded(err, "term", x, 0, WD_TERM_MAX_MS, "ms") != 0)
                return -1;
            s->term_ms = x;
        }
        return 0;
    }
    if (KEY("idle")) {
        x = 0;
        for (size_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9' || i >= 6) {
                ng_error_set(err, 0, 0,
                             "idle must be a whole number of periods, got "
                             "\"%.*s\"",
                             (int)(vl > 40 ? 40 : vl), v);
                return -1;
            }
            x = x * 10 + (v[i] - '0');
        }
        if (vl == 0 ||
            bounded(err, "idle", x, WD_IDLE_MIN, WD_IDLE_MAX, "") != 0) {
            if (vl == 0)
                ng_error_set(err, 0, 0, "idle must not be empty");
            return -1;
        }
        s->idle_periods = (int)x;
        return 0;
    }
    if (KEY("mincpu")) {
        if (cores_parse(v, vl, &x) != 0) {
            ng_error_set(err, 0, 0,
                         "mincpu must be cores such as 0.5 (at most three "
                         "decimals), got \"%.*s\"",
                         (int)(vl > 40 ? 40 : vl), v);
            return -1;
        }
        if (bounded(err, "mincpu", x, 0, WD_MIN_CPU_MAX_MILLI, "m") != 0)
            return -1;
        s->min_cpu_milli = x;
        return 0;
    }
    if (KEY("action")) {
        if (vl == 6 && memcmp(v, "report", 6) == 0)
            s->action = WD_ACTION_REPORT;
        else if (vl == 7 && memcmp(v, "restart", 7) == 0)
            s->action = WD_ACTION_RESTART;
        else {
            ng_error_set(err, 0, 0,
                         "action must be report or restart, got \"%.*s\"",
                         (int)(vl > 40 ? 40 : vl), v);
            return -1;
        }
        return 0;
    }
    if (KEY("signal")) {
        int sig;

        if (vl >= 16) {
            ng_error_set(err, 0, 0, "signal \"%.*s\" is not a signal name",
                         (int)(vl > 40 ? 40 : vl), v);
            return -1;
        }
        memcpy(tmp, v, vl);
        tmp[vl] = '\0';
        if (strcmp(tmp, "none") == 0) {
            s->checkpoint_signal = 0;
            return 0;
        }
        sig = wd_signal_from_name(tmp);
        if (sig == 0) {
            ng_error_set(err, 0, 0,
                         "signal must be none or one of SIGUSR1, SIGUSR2, "
                         "SIGHUP, SIGINT, SIGWINCH, SIGURG, SIGCONT, got "
                         "\"%s\"",
                         tmp);
            return -1;
        }
        s->checkpoint_signal = sig;
        return 0;
    }
    if (KEY("file")) {
        if (vl > WD_FILE_MAX) {
            ng_error_set(err, 0, 0, "file is longer than %d bytes",
                         WD_FILE_MAX);
            return -1;
        }
        if (vl > 0 && v[0] != '/') {
            ng_error_set(err, 0, 0,
                         "file must be an absolute path, got \"%.*s\"",
                         (int)(vl > 60 ? 60 : vl), v);
            return -1;
        }
        for (size_t i = 0; i < vl; i++) {
            if ((unsigned char)v[i] < 0x21 || v[i] == 0x7f) {
                ng_error_set(err, 0, 0,
                             "file must not contain spaces or control "
                             "characters");
                return -1;
            }
        }
        memcpy(s->checkpoint_file, v, vl);
        s->checkpoint_file[vl] = '\0';
        return 0;
    }
#undef KEY
    ng_error_set(err, 0, 0,
                 "unknown key \"%.*s\" (expected period, idle, mincpu, "
                 "action, signal, file, grace or term)",
                 (int)(kl > 40 ? 40 : kl), k);
    return -1;
}

int
wd_spec_parse(const char *buf, size_t len, struct wd_spec *out,
              struct ng_error *err)
{
    struct wd_spec s;
    unsigned seen = 0;
    size_t i = 0;

    if (len > 1024) {
        ng_error_set(err, 0, 0, "%s is longer than 1024 bytes", WD_ENV_NAME);
        return -1;
    }
    wd_spec_defaults(&s);
    while (i < len) {
        size_t start = i, eq = 0, end;
        bool has_eq = false;
        static const char *const keys[] = {"period", "idle", "mincpu", "action",
                                           "signal", "file", "grace",  "term"};

        while (i < len && buf[i] != ',') {
            if (buf[i] == '=' && !has_eq) {
                has_eq = true;
                eq = i;
            }
            if (buf[i] == '\0') {
                ng_error_set(err, 0, 0, "%s contains a NUL byte", WD_ENV_NAME);
                return -1;
            }
            i++;
        }
        end = i;
        if (i < len)
            i++; /* the comma */
        if (end == start)
            continue; /* tolerate ",," and a trailing comma */
        if (!has_eq) {
            ng_error_set(err, 0, 0, "\"%.*s\" is not key=value",
                         (int)(end - start > 40 ? 40 : end - start),
                         buf + start);
            return -1;
        }
        for (unsigned k = 0; k < 8; k++) {
            if (strlen(keys[k]) == eq - start &&
                memcmp(keys[k], buf + start, eq - start) == 0) {
                if (seen & (1u << k)) {
                    ng_error_set(err, 0, 0, "key \"%s\" is given twice",
                                 keys[k]);
                    return -1;
                }
                seen |= 1u << k;
            }
        }
        if (spec_set(&s, buf + start, eq - start, buf + eq + 1, end - eq - 1,
                     err) != 0)
            return -1;
    }
    *out = s;
    return 0;
}

/* A duration in the largest unit that divides it. */
static void
duration_format(int64_t ms, char *buf, size_t n)
{
    if (ms != 0 && ms % 60000 == 0)
        snprintf(buf, n, "%lldm", (long long)(ms / 60000));
    else if (ms % 1000 == 0)
        snprintf(buf, n, "%llds", (long long)(ms / 1000));
    else
        snprintf(buf, n, "%lldms", (long long)ms);
}

int
wd_spec_format(const struct wd_spec *s, char *buf, size_t n)
{
    char period[24], grace[24], term[24];
    const char *sig = wd_signal_name(s->checkpoint_signal);
    int w;

    duration_format(s->period_ms, period, sizeof(period));
    duration_format(s->grace_ms, grace, sizeof(grace));
    duration_format(s->term_ms, term, sizeof(term));
    w = snprintf(buf, n,
                 "period=%s,idle=%d,mincpu=%lld.%03lld,action=%s,signal=%s,"
                 "file=%s,grace=%s,term=%s",
                 period, s->idle_periods, (long long)(s->min_cpu_milli / 1000),
                 (long long)(s->min_cpu_milli % 1000),
                 s->action == WD_ACTION_RESTART ? "restart" : "report",
                 sig ? sig : "none", s->checkpoint_file, grace, term);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}
