/* The NCCL double's network mode: a communicator whose ranks exchange
 * their data over TCP through a hub in rank 0's process, on the interface
 * NCCL_SOCKET_IFNAME selects, so that a wrong interface or an unreachable
 * peer fails as it does with the real library. Not NCCL API. */
#ifndef NCCLGUARD_FAKE_NET_H
#define NCCLGUARD_FAKE_NET_H

#include <stdatomic.h>
#include <stddef.h>

struct fakenet;

/* Network mode is on (FAKENCCL_NET=1). */
int fakenet_enabled(void);

/* id names a network communicator ("tcp:ADDR:PORT"). */
int fakenet_is_net_id(const char *id);

/*
 * Picks the interface as NCCL does and starts the hub listening on it;
 * writes the id (NUL-terminated) into id (len bytes). Returns 0, or -1 with
 * a message in err (no interface matches NCCL_SOCKET_IFNAME, ...).
 */
int fakenet_make_id(char *id, size_t len, char *err, size_t errlen);

/*
 * Joins the communicator id as rank of nranks: binds the interface NCCL
 * would pick here, connects to the hub (retrying a refused connection a
 * few seconds, as NCCL's bootstrap does) and waits until every rank has
 * joined. Polls *aborting. Returns 0 and *out, or -1 with a message in
 * err. The caller frees *out with fakenet_close.
 */
int fakenet_join(const char *id, int rank, int nranks, atomic_int *aborting,
                 struct fakenet **out, char *err, size_t errlen);

/*
 * One step of a collective: sends len bytes of contrib (zeros when NULL)
 * and receives every rank's len bytes into all (nranks * len, rank-major).
 * Polls the abort flag given to fakenet_join. Returns 0, or -1 with a
 * message in err (a peer went away, abort). die_midway != 0: the process
 * kills itself with SIGKILL after sending half of its data.
 */
int fakenet_step(struct fakenet *n, const void *contrib, size_t len, void *all,
                 int die_midway, char *err, size_t errlen);

/* Closes the connection; NULL is a no-op. */
void fakenet_close(struct fakenet *n);

#endif
