/* A stranger on the rendezvous port, for tests/ringcheck/multinode.sh: it
 * speaks the protocol as a node would, but says whatever the test wants
 * (any job id, node rank, GPU count, token), and prints what the leader
 * answered.
 *
 *   rdv-client HOST PORT JOB RANK NGPUS [TOKEN|- [CURE]]
 *
 * A CURE is sent as a pod's own fallback cure, with a failed local check.
 * Prints "REJECT: reason", "RUN world W offset O", "CLOSED: why" or
 * "TIMEOUT", and exits 0 when the leader answered at all, 2 on a usage or
 * connection error. */
#include "ringcheck/rendezvous.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int
parse_u32(const char *s, uint32_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v > 0xffffffffULL)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int
main(int argc, char **argv)
{
    struct rdv_msg m, h;
    char err[300];
    uint32_t port, rank, ngpus;
    double t0 = rdv_now();
    int fd, r;

    if (argc < 6 || argc > 8 || parse_u32(argv[2], &port) != 0 ||
        parse_u32(argv[4], &rank) != 0 || parse_u32(argv[5], &ngpus) != 0 ||
        strlen(argv[3]) >= RDV_JOB_MAX) {
        fprintf(stderr, "usage: rdv-client HOST PORT JOB RANK NGPUS "
                        "[TOKEN|- [CURE]]\n");
        return 2;
    }
    fd = rdv_connect(argv[1], (int)port, t0 + 5, NULL, err, sizeof(err));
    if (fd < 0) {
        fprintf(stderr, "rdv-client: %s\n", err);
        return 2;
    }
    if (rdv_recv(fd, &m, t0 + 5, err, sizeof(err)) != RDV_OK ||
        m.type != RDV_CHALLENGE) {
        printf("CLOSED: no CHALLENGE: %s\n", err);
        return 0;
    }
    memset(&h, 0, sizeof(h));
    h.type = RDV_HELLO;
    snprintf(h.u.hello.job, sizeof(h.u.hello.job), "%s", argv[3]);
    h.u.hello.node_rank = rank;
    h.u.hello.ngpus = ngpus;
    snprintf(h.u.hello.host, sizeof(h.u.hello.host), "stranger");
    snprintf(h.u.hello.transport, sizeof(h.u.hello.transport), "NET/Socket");
    if (argc == 8) {
        h.u.hello.local_code = 3;
        snprintf(h.u.hello.cure, sizeof(h.u.hello.cure), "%.48s", argv[7]);
    }
    if (argc >= 7 && strcmp(argv[6], "-") != 0 &&
        rdv_proof(argv[6], m.u.challenge.nonce, argv[3], rank,
                  h.u.hello.proof) != 0) {
        fprintf(stderr, "rdv-client: cannot compute the proof\n");
        return 2;
    }
    if (rdv_send(fd, &h, t0 + 5, err, sizeof(err)) != RDV_OK) {
        printf("CLOSED: %s\n", err);
        return 0;
    }
    r = rdv_recv(fd, &m, rdv_now() + 3, err, sizeof(err));
    if (r == RDV_ETIME)
        printf("TIMEOUT\n");
    else if (r != RDV_OK)
        printf("CLOSED: %s\n", err);
    else if (m.type == RDV_REJECT)
        printf("REJECT: %s\n", m.u.reject.reason);
    else if (m.type == RDV_RUN)
        printf("RUN world %u offset %u\n", m.u.run.world, m.u.run.rank_offset);
    else
        printf("%s\n", rdv_type_name(m.type));
    close(fd);
    return 0;
}
