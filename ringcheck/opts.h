/* Command-line options of ncclguard-ringcheck. */
#ifndef NCCLGUARD_RINGCHECK_OPTS_H
#define NCCLGUARD_RINGCHECK_OPTS_H

#include <stddef.h>

enum rc_on_failure { RC_FAIL = 0, RC_WARN, RC_FALLBACK };
enum rc_on_missing { RC_MISSING_WARN = 0, RC_MISSING_FAIL };
/* --on-no-cure: a failure under --on-failure fallback that no single
 * setting cures (or whose deadline came first). */
enum rc_on_no_cure { RC_NOCURE_FAIL = 0, RC_NOCURE_WARN };

/* --expect-transport: what NCCL must have chosen. Words as in
 * rc_opts_usage; "" for no expectation. */
struct rc_expect {
    char intra[8]; /* "p2p", "nvlink", "shm", "net" or "" */
    char inter[8]; /* "ib-gdr", "ib", "socket", "net" or "" */
};

struct rc_opts {
    int expect_gpus;        /* 0: whatever is visible */
    double timeout_s;       /* the whole check */
    double phase_timeout_s; /* each phase */
    int group;              /* --mode group */
    size_t bw_bytes;        /* 0: skip the bandwidth phase */
    enum rc_on_failure on_failure;
    double min_busbw;     /* GB/s; 0: no threshold */
    double min_busbw_net; /* the same across nodes (--min-busbw-net) */
    int diagnose;
    int help;
    const char *fallback_conf;
    const char *report; /* NULL: none */
    const char *termination_log;
    int termination_log_given; /* the path came from the command line */
    /* the cross-node phase */
    int multi_node;              /* --multi-node auto */
    int rendezvous_port;         /* TCP port on node rank 0 */
    double multi_node_timeout_s; /* rendezvous and cross-node rounds */
    enum rc_on_missing on_missing;
    enum rc_on_no_cure on_no_cure;
    struct rc_expect expect;
};

/*
 * Parses argv into *o (defaults first). On a usage error returns -1 with a
 * lower-case message in err; *o may be partly filled. Strings in *o borrow
 * from argv. Not thread-safe (getopt).
 */
int rc_opts_parse(int argc, char **argv, struct rc_opts *o, char *err,
                  size_t errlen) __attribute__((warn_unused_result));

/* Parses a byte count: plain digits or with a Ki, Mi or Gi suffix. Returns
 * 0 and sets *out, or -1 when s is not one. Thread-safe. */
int rc_opts_parse_bytes(const char *s, size_t *out)
    __attribute__((warn_unused_result));

/* Prints the usage text to f. */
void rc_opts_usage(void *f);

#endif
