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

/* The interfaces of this network namespace that NCCL's socket code
 * considers (findInterfaces in src/misc/socket.cc, NCCL 2.28): running
 * (IFF_RUNNING), with an IPv4 or IPv6 address that is not IPv6 loopback.
 * Returns 0, or -1 with errno when getifaddrs fails. */
int netcheck_interfaces(struct netcheck_names *out)
    __attribute__((warn_unused_result));

/* One address of one interface, as getifaddrs gives it. */
struct netcheck_if {
    char name[NETCHECK_NAME_LEN];
    int family;         /* AF_INET or AF_INET6 */
    unsigned int flags; /* IFF_* */
    int loopback6;      /* the IPv6 loopback address ::1 */
    char addr[64];      /* numeric */
};

/* This namespace's addresses, at most max, in getifaddrs' order. Returns
 * the count, or -1 with errno. */
int netcheck_if_list(struct netcheck_if *out, int max)
    __attribute__((warn_unused_result));

/*
 * The interface NCCL's bootstrap and socket transport pick from ifs, as
 * ncclFindInterfaces does (src/misc/socket.cc, NCCL 2.28): NCCL_SOCKET_IFNAME
 * (ifname, when longer than one character) alone; else "ib" first, then
 * anything but docker, lo and virbr, then docker, then lo, then virbr. Only
 * running interfaces count, IPv6 as well as IPv4 (family: AF_INET or
 * AF_INET6 as NCCL_SOCKET_FAMILY forces it, or 0), never IPv6 loopback.
 * Returns the index into ifs, or -1 when none fits. Thread-safe.
 */
int netcheck_pick(const struct netcheck_if *ifs, int n, const char *ifname,
                  int family);

/*
 * Whether NCCL's IB transport can use this pod's HCAs: they are listed in
 * SYSFS/class/infiniband (the host's, even in a pod without them) and the
 * pod has their verbs devices, DEVROOT/infiniband/uverbs*. Returns the HCA
 * count when both, 0 with the reason in why (may be NULL) when not.
 */
int netcheck_ib_usable(const char *sysfs_root, const char *dev_root, char *why,
                       size_t whylen);

/*
 * The address an NCCL unique id carries: NCCL's ncclBootstrapHandle (src/
 * include/bootstrap.h) is a 64-bit magic and then the root's socket address
 * (union ncclSocketAddress, an IPv4 or IPv6 sockaddr). Writes "ADDR:PORT"
 * ("[ADDR]:PORT" for IPv6) into out and returns 0, or -1 when the bytes
 * hold no such address. Thread-safe.
 */
int netcheck_id_addr(const unsigned char *id, size_t len, char *out,
                     size_t outlen) __attribute__((warn_unused_result));

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
