/* NCCLGUARD_WATCHDOG: the opt-in the webhook writes into GPU containers and
 * the watchdog agent reads back from /proc/PID/environ. One module for both
 * sides, so the writer and the parser cannot drift. libc only. */
#ifndef NCCLGUARD_CONTRACT_WDSPEC_H
#define NCCLGUARD_CONTRACT_WDSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* The variable's name. */
#define WD_ENV_NAME "NCCLGUARD_WATCHDOG"

/* Bounds shared by `policy lint` and the agent. Periods below a second are
 * allowed so that tests can run in milliseconds; a real policy uses tens
 * of seconds. The floor, 200 ms, is above NVML's shortest sample period
 * (1/6 s), so that every period holds a utilisation sample, and it bounds
 * what a pod can make the agent do per second (each period reads the pod's
 * /proc files and TCP table). */
#define WD_PERIOD_MIN_MS 200
#define WD_PERIOD_MAX_MS (3600 * 1000)
#define WD_IDLE_MIN 1
#define WD_IDLE_MAX 1000
#define WD_MIN_CPU_MAX_MILLI (1024 * 1000) /* 1024 cores */
#define WD_GRACE_MAX_MS (3600 * 1000)
#define WD_TERM_MAX_MS (3600 * 1000)
#define WD_FILE_MAX 200

enum wd_action {
    WD_ACTION_REPORT = 0, /* log, metric, Event; never signals */
    WD_ACTION_RESTART = 1 /* checkpoint request, grace, SIGTERM, SIGKILL */
};

/* What one opted-in container asked for. */
struct wd_spec {
    int64_t period_ms;     /* length of one observation period */
    int idle_periods;      /* consecutive idle periods that make a hang */
    int64_t min_cpu_milli; /* the pod's processes burn at least this */
    enum wd_action action;
    int checkpoint_signal; /* 0 = none; else one of wd_signal_names() */
    char checkpoint_file[WD_FILE_MAX + 1]; /* "" = none; absolute path */
    int64_t grace_ms;                      /* checkpoint request -> SIGTERM */
    int64_t term_ms; /* SIGTERM -> SIGKILL (the pod's grace) */
};

/* Fills *s with the defaults: 60s, 5 periods, 0.5 cores, report, no
 * signal, no file, 120s grace, 30s termination grace. */
void wd_spec_defaults(struct wd_spec *s);

/*
 * Parses the variable's value (buf, len; need not be NUL-terminated):
 * comma-separated key=value pairs, keys period, idle, mincpu, action,
 * signal, file, grace, term; keys left out keep their defaults. Durations
 * are an integer with ms, s or m ("200ms", "60s", "2m"); mincpu is cores
 * with up to three decimals ("0.5"); signal is "none" or a name that
 * wd_signal_from_name() accepts. On failure returns -1, fills err with
 * what was wrong (the key, the value, what was expected) and leaves *out
 * untouched. Thread-safe.
 */
int wd_spec_parse(const char *buf, size_t len, struct wd_spec *out,
                  struct ng_error *err) __attribute__((warn_unused_result));

/*
 * Writes s as the variable's value into buf (n bytes), every key spelled
 * out, in the order the parser documents. Returns 0, or -1 when buf is too
 * small (buf then holds a truncated string). wd_spec_parse() of the output
 * gives back s. Thread-safe.
 */
int wd_spec_format(const struct wd_spec *s, char *buf, size_t n)
    __attribute__((warn_unused_result));

/*
 * The checkpoint signals the policy may name: SIGUSR1, SIGUSR2, SIGHUP,
 * SIGINT, SIGWINCH, SIGURG, SIGCONT (with or without the SIG prefix,
 * case-sensitive). Returns the signal number, or 0 when name is not one.
 * SIGTERM, SIGKILL and the other fatal signals are refused on purpose: the
 * restart itself sends SIGTERM after the grace period.
 */
int wd_signal_from_name(const char *name);

/* "SIGUSR1" for SIGUSR1, "none" for 0, NULL for a signal not accepted. */
const char *wd_signal_name(int sig);

/* NULL-terminated list of the accepted names, for did-you-mean. */
const char *const *wd_signal_names(void);

/* True when sig's default action ends the process (SIGUSR1, SIGHUP, ...):
 * the agent sends such a signal only to a process that catches it. */
bool wd_signal_kills_by_default(int sig);

/*
 * Parses a duration ("200ms", "60s", "2m") into milliseconds. Returns 0,
 * or -1 with err filled (what is wrong with text). Thread-safe.
 */
int wd_duration_parse(const char *text, size_t len, int64_t *ms,
                      struct ng_error *err) __attribute__((warn_unused_result));

/* What else wd_duration_arg() takes, or'ed together. */
#define WD_DURATION_ZERO 1u  /* "0" alone: 0 ms (an expiry that never comes) */
#define WD_DURATION_HOURS 2u /* "Nh", 1 to 8760 hours (a year) */

/*
 * Parses text, a borrowed NUL-terminated command-line value, as a duration
 * of more than 0 ms: wd_duration_parse()'s forms, and those that flags
 * add. Both node programs read their duration options with it. Returns 0,
 * or -1 with *ms untouched and err filled with what is wrong: the parser's
 * message, or "must be positive" for a 0 that flags do not allow. The
 * caller prints it after the option's name. Thread-safe.
 */
int wd_duration_arg(const char *text, unsigned flags, int64_t *ms,
                    struct ng_error *err) __attribute__((warn_unused_result));

#endif
