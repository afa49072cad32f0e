/* Command-line values the node programs (ncclguard-watchdog,
 * ncclguard-nodeloop) read the same way: whole numbers in a range, and the
 * API server a pod finds in its environment. */
#ifndef NCCLGUARD_OPTS_H
#define NCCLGUARD_OPTS_H

#include <stddef.h>

/*
 * Parses v, a borrowed NUL-terminated option value, as a decimal number
 * from min to max into *out, as strtol(3) reads it: leading white space
 * and a sign are taken, and an empty v reads as 0 (which the callers then
 * hold to min). Returns 0, or -1 when v has anything after the number,
 * overflows a long or is out of range; *out is then left untouched. The
 * caller prints the message. Thread-safe.
 */
int opts_long(const char *v, long min, long max, long *out)
    __attribute__((warn_unused_result));

/*
 * The API server a pod reaches from inside the cluster, as client-go's
 * rest.InClusterConfig builds it: "https://HOST:PORT" from
 * KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, the host in
 * brackets when it holds a ':' (IPv6). Written into buf (n bytes, cut to
 * fit) and returned; NULL, with buf untouched, when either variable is
 * unset. Reads the environment: not safe beside a setenv(3) on another
 * thread.
 */
const char *opts_in_cluster_api(char *buf, size_t n);

#endif
