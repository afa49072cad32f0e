/* ncclguard serve's options: one table of flags, environment variables,
 * defaults and bounds, from which --help is written and every value is
 * parsed. The command itself is cmd_serve() in cli/cmd.h. */
#ifndef NCCLGUARD_SERVE_H
#define NCCLGUARD_SERVE_H

#include <stdbool.h>
#include <stddef.h>

/* What an option's value is. */
enum serve_opt_kind {
    SERVE_OPT_TEXT,   /* a string, checked where it is used */
    SERVE_OPT_NUMBER, /* a whole number within [min, max] */
    SERVE_OPT_BYTES,  /* bytes, optionally with Ki, Mi or Gi, in [min, max] */
    SERVE_OPT_LEVEL,  /* debug, info, warn or error */
    SERVE_OPT_SWITCH  /* takes no value (--help) */
};

/*
 * One option. Its default is exactly one of: def (fixed, spelled as a user
 * would write it, and parsed like a user's value), def_env (another
 * environment variable), def_fn (computed at start; bounds do not apply
 * and 0 means "unknown"), or none (required, or optional and off). def_doc
 * describes a default that is not fixed, for --help.
 */
struct serve_option {
    const char *flag; /* long flag without "--": "max-connections" */
    const char *env;  /* NCCLGUARD_MAX_CONNECTIONS; NULL for SWITCH */
    const char *arg;  /* name of the value in --help; NULL for SWITCH */
    enum serve_opt_kind kind;
    bool required;
    const char *def;
    const char *def_env;
    unsigned long long (*def_fn)(void);
    const char *def_doc;
    unsigned long long min, max; /* NUMBER and BYTES */
    const char *zero;            /* what 0 means, when it means more */
    const char *help;
};

/* The option table, *n entries, in --help order; static and immutable. */
const struct serve_option *serve_options(size_t *n);

/*
 * Parses value as option o would. Returns 0 with the number (NUMBER and
 * BYTES only) in *out, or -1 with msg (NUL-terminated, n bytes at most)
 * saying what is wrong, led by label, the flag ("--max-connections") or
 * the environment variable the value came from: "--max-connections: 0 is
 * out of range 1..1000000". TEXT values are not checked here. Thread-safe.
 */
int serve_option_parse(const struct serve_option *o, const char *label,
                       const char *value, unsigned long long *out, char *msg,
                       size_t n) __attribute__((warn_unused_result));

#endif
