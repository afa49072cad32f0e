/* Preflight checks of NCCL's network selection variables against what the
 * pod has: NCCL_SOCKET_IFNAME against the interfaces of its network
 * namespace, NCCL_IB_HCA against /sys/class/infiniband. */
#ifndef NCCLGUARD_RINGCHECK_NETCHECK_H
#define NCCLGUARD_RINGCHECK_NETCHECK_H

#include <stddef.h>

#define NETCHECK_MAX_NAMES 64
#define NETCHECK_NAME_LEN 64

/* A list of names (interfaces or HCAs), sorted. Embedded, no heap. */
struct netcheck_names {
    char name[NETCHECK_MAX_NAMES][NETCHECK_NAME_LEN];
    int n;
};

/* The sysfs root: $RINGCHECK_SYSFS (for tests) or "/sys". Never NULL. */
const char *netcheck_sysfs_root(void);

/* The interfaces of this network namespace that have an IPv4 or IPv6
 * address, the ones NCCL's socket code considers (getifaddrs). Returns 0,
 * or -1 with errno when getifaddrs fails. */
int netcheck_interfaces(struct netcheck_names *out)
    __attribute__((warn_unused_result));

/* The HCAs under SYSFS/class/infiniband; none when the folder is absent. */
void netcheck_hcas(const char *sysfs_root, struct netcheck_names *out);

/* Whether NCCL would consider interface name under the NCCL_SOCKET_IFNAME
 * value spec (the same syntax as netcheck_ifname): 1 or 0. */
int netcheck_ifname_match(const char *name, const char *spec);

/*
 * Checks an NCCL_SOCKET_IFNAME value as NCCL reads it (src/misc/socket.cc
 * and src/misc/utils.cc in NCCL 2.28): a leading '^' excludes, then a
 * leading '=' asks for exact names instead of prefixes, then a comma list
 * of names, each optionally ":port". Every name of an including list must
 * match an interface in *have; an excluding list must leave one. Returns 0,
 * or -1 with the problem in err (what was wrong and what the pod has).
 */
int netcheck_ifname(const char *spec, const struct netcheck_names *have,
                    char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Checks an NCCL_IB_HCA value (same syntax; src/transport/net_ib.cc) against
 * the HCAs in *have: every included name must match one, and a ":port"
 * must exist as SYSFS/class/infiniband/HCA/ports/PORT. An excluding list is
 * not checked (NCCL then falls back to sockets, it does not hang).
 * Returns 0, or -1 with the problem in err.
 */
int netcheck_hca(const char *spec, const char *sysfs_root,
                 const struct netcheck_names *have, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
