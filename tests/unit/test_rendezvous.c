/* Tests of the cross-node rendezvous protocol: encode and parse of every
 * message, the header checks, garbage, and reads and writes bounded in
 * time. */
#include "ringcheck/rendezvous.h"

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static struct rdv_msg
sample(enum rdv_type t)
{
    struct rdv_msg m;

    memset(&m, 0, sizeof(m));
    m.type = t;
    switch (t) {
    case RDV_HELLO:
        snprintf(m.u.hello.job, sizeof(m.u.hello.job), "uid-1234");
        m.u.hello.node_rank = 3;
        m.u.hello.ngpus = 8;
        m.u.hello.local_code = -7;
        snprintf(m.u.hello.host, sizeof(m.u.hello.host), "gpu-node-3");
        snprintf(m.u.hello.iface, sizeof(m.u.hello.iface), "ib0");
        snprintf(m.u.hello.addr, sizeof(m.u.hello.addr), "10.0.0.3");
        snprintf(m.u.hello.transport, sizeof(m.u.hello.transport), "NET/IB");
        snprintf(m.u.hello.cure, sizeof(m.u.hello.cure), "NCCL_P2P_DISABLE=1");
        for (int i = 0; i < RDV_PROOF_BYTES; i++)
            m.u.hello.proof[i] = (unsigned char)(255 - i);
        break;
    case RDV_REJECT:
        snprintf(m.u.reject.reason, sizeof(m.u.reject.reason), "no");
        break;
    case RDV_RUN:
        m.u.run.round = 2;
        m.u.run.world = 16;
        m.u.run.rank_offset = 8;
        m.u.run.phase_ms = 3750;
        m.u.run.left_ms = 15000;
        snprintf(m.u.run.setting, sizeof(m.u.run.setting), "NCCL_IB_DISABLE=1");
        for (int i = 0; i < RDV_ID_BYTES; i++)
            m.u.run.id[i] = (unsigned char)(i * 7);
        break;
    case RDV_RESULT:
        m.u.result.round = 2;
        m.u.result.code = 3;
        m.u.result.busbw_mbps = 123456;
        m.u.result.wrong = 9;
        snprintf(m.u.result.what, sizeof(m.u.result.what), "it broke");
        break;
    case RDV_VERDICT:
        m.u.verdict.code = 4;
        snprintf(m.u.verdict.result, sizeof(m.u.verdict.result), "missing");
        snprintf(m.u.verdict.cure, sizeof(m.u.verdict.cure),
                 "NCCL_NET_GDR_LEVEL=LOC");
        snprintf(m.u.verdict.transport, sizeof(m.u.verdict.transport),
                 "GPUDirect RDMA");
        snprintf(m.u.verdict.what, sizeof(m.u.verdict.what), "node 2 absent");
        break;
    case RDV_CHALLENGE:
        for (int i = 0; i < RDV_NONCE_BYTES; i++)
            m.u.challenge.nonce[i] = (unsigned char)(i * 13 + 1);
        m.u.challenge.left_ms = 119500;
        break;
    }
    return m;
}

/* Every message survives encode then decode unchanged. */
static void
test_roundtrip(void)
{
    for (int t = RDV_HELLO; t <= RDV_CHALLENGE; t++) {
        struct rdv_msg in = sample((enum rdv_type)t), out;
        unsigned char buf[RDV_HEADER_LEN + RDV_MAX_PAYLOAD];
        size_t n = rdv_encode(&in, buf, sizeof(buf));
        enum rdv_type type;
        uint32_t plen;
        char err[200] = "";

        CHECK(n > RDV_HEADER_LEN);
        CHECK_INT(rdv_decode_header(buf, &type, &plen, err, sizeof(err)),
                  RDV_OK);
        CHECK_INT(type, t);
        CHECK_INT(plen, n - RDV_HEADER_LEN);
        CHECK_INT(rdv_decode_payload(type, buf + RDV_HEADER_LEN, plen, &out,
                                     err, sizeof(err)),
                  RDV_OK);
        CHECK(memcmp(&in, &out, sizeof(in)) == 0);
        /* One byte short, or one too many: garbage. */
        CHECK_INT(rdv_decode_payload(type, buf + RDV_HEADER_LEN, plen - 1, &out,
                                     err, sizeof(err)),
                  RDV_EPEER);
        buf[n] = 0;
        CHECK_INT(rdv_decode_payload(type, buf + RDV_HEADER_LEN, plen + 1, &out,
                                     err, sizeof(err)),
                  RDV_EPEER);
        CHECK(strstr(err, "bytes after its fields") != NULL);
    }
}

/* The header checks, one field at a time. */
static void
test_header(void)
{
    static const struct {
        unsigned char hdr[RDV_HEADER_LEN];
        int want;
        const char *msg;
    } cases[] = {
        {{'N', 'C', 'G', 'R', 2, 1, 0, 0, 0, 0, 0, 4}, RDV_OK, ""},
        {{'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1'},
         RDV_EPEER,
         "bad magic"},
        /* Version 1 had no CHALLENGE and no proof: refused by name. */
        {{'N', 'C', 'G', 'R', 1, 1, 0, 0, 0, 0, 0, 4}, RDV_EPEER, "version 1"},
        {{'N', 'C', 'G', 'R', 3, 1, 0, 0, 0, 0, 0, 4}, RDV_EPEER, "version 3"},
        {{'N', 'C', 'G', 'R', 2, 0, 0, 0, 0, 0, 0, 4}, RDV_EPEER, "type 0"},
        {{'N', 'C', 'G', 'R', 2, 6, 0, 0, 0, 0, 0, 4}, RDV_OK, ""},
        {{'N', 'C', 'G', 'R', 2, 7, 0, 0, 0, 0, 0, 4}, RDV_EPEER, "type 7"},
        {{'N', 'C', 'G', 'R', 2, 1, 0, 1, 0, 0, 0, 4}, RDV_EPEER, "type 1"},
        {{'N', 'C', 'G', 'R', 2, 1, 0, 0, 0, 0, 8, 1}, RDV_EPEER, "2049 bytes"},
        {{'N', 'C', 'G', 'R', 2, 1, 0, 0, 0xff, 0xff, 0xff, 0xff},
         RDV_EPEER,
         "4294967295 bytes"},
        {{'N', 'C', 'G', 'R', 2, 5, 0, 0, 0, 0, 8, 0}, RDV_OK, ""},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enum rdv_type type;
        uint32_t plen;
        char err[200] = "";

        CHECK_INT(
            rdv_decode_header(cases[i].hdr, &type, &plen, err, sizeof(err)),
            cases[i].want);
        if (cases[i].want != RDV_OK && strstr(err, cases[i].msg) == NULL) {
            fprintf(stderr, "header case %zu: \"%s\" lacks \"%s\"\n", i, err,
                    cases[i].msg);
            CHECK(0);
        }
    }
}

/* Strings: too long for the field, non-printable, or past the payload. */
static void
test_bad_strings(void)
{
    struct rdv_msg m = sample(RDV_HELLO), out;
    unsigned char buf[RDV_HEADER_LEN + RDV_MAX_PAYLOAD];
    unsigned char p[64];
    char err[200];
    size_t n;

    /* The encoder refuses a string longer than its field. */
    memset(m.u.hello.job, 'j', sizeof(m.u.hello.job));
    CHECK_INT(rdv_encode(&m, buf, sizeof(buf)), 0);
    /* A buffer too small for the frame. */
    m = sample(RDV_HELLO);
    CHECK_INT(rdv_encode(&m, buf, 20), 0);

    /* A job id of 200 bytes claimed, 129 allowed. */
    memset(p, 0, sizeof(p));
    p[0] = 0;
    p[1] = 200;
    CHECK_INT(
        rdv_decode_payload(RDV_HELLO, p, sizeof(p), &out, err, sizeof(err)),
        RDV_EPEER);
    CHECK(strstr(err, "job id") != NULL);
    /* A newline inside a string could forge a report line. */
    n = 0;
    p[n++] = 0;
    p[n++] = 3;
    p[n++] = 'a';
    p[n++] = '\n';
    p[n++] = 'b';
    CHECK_INT(rdv_decode_payload(RDV_REJECT, p, n, &out, err, sizeof(err)),
              RDV_EPEER);
    CHECK(strstr(err, "reason") != NULL);
    /* A length that runs past the payload. */
    p[1] = 9;
    p[3] = 'x';
    CHECK_INT(rdv_decode_payload(RDV_REJECT, p, n, &out, err, sizeof(err)),
              RDV_EPEER);
    /* ... even when the bytes after the payload would be printable. */
    memset(p, 'A', sizeof(p));
    p[0] = 0;
    p[1] = 9;
    CHECK_INT(rdv_decode_payload(RDV_REJECT, p, 5, &out, err, sizeof(err)),
              RDV_EPEER);
    CHECK(strstr(err, "reason") != NULL);
    /* DEL and bytes above ASCII (a UTF-8 sequence, an escape's high half)
     * are not printable ASCII either. */
    for (int k = 0; k < 3; k++) {
        static const unsigned char odd[] = {0x7f, 0x80, 0xc3};

        n = 0;
        p[n++] = 0;
        p[n++] = 3;
        p[n++] = 'a';
        p[n++] = odd[k];
        p[n++] = 'b';
        CHECK_INT(rdv_decode_payload(RDV_REJECT, p, n, &out, err, sizeof(err)),
                  RDV_EPEER);
    }
    /* The printable range's ends are accepted. */
    n = 0;
    p[n++] = 0;
    p[n++] = 2;
    p[n++] = 0x20;
    p[n++] = 0x7e;
    CHECK_INT(rdv_decode_payload(RDV_REJECT, p, n, &out, err, sizeof(err)),
              RDV_OK);
    CHECK(strcmp(out.u.reject.reason, " ~") == 0);
    /* RUN without its unique id. */
    m = sample(RDV_RUN);
    n = rdv_encode(&m, buf, sizeof(buf));
    CHECK(n > 0);
    CHECK_INT(rdv_decode_payload(RDV_RUN, buf + RDV_HEADER_LEN,
                                 n - RDV_HEADER_LEN - RDV_ID_BYTES, &out, err,
                                 sizeof(err)),
              RDV_EPEER);
    CHECK(strstr(err, "unique id") != NULL);
}

/* Reads and writes over a socket pair end by the deadline. */
static void
test_bounded_io(void)
{
    int sv[2];
    unsigned char buf[RDV_HEADER_LEN + RDV_MAX_PAYLOAD];
    struct rdv_msg in = sample(RDV_RESULT), out;
    char err[200];
    double t0;
    size_t n;

    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);

    /* A whole message arrives. */
    CHECK_INT(rdv_send(sv[0], &in, rdv_now() + 1, err, sizeof(err)), RDV_OK);
    CHECK_INT(rdv_recv(sv[1], &out, rdv_now() + 1, err, sizeof(err)), RDV_OK);
    CHECK(memcmp(&in, &out, sizeof(in)) == 0);

    /* Nothing arrives: the read gives up at the deadline, not later. */
    t0 = rdv_now();
    CHECK_INT(rdv_recv(sv[1], &out, t0 + 0.2, err, sizeof(err)), RDV_ETIME);
    CHECK(rdv_now() - t0 >= 0.19 && rdv_now() - t0 < 0.5);

    /* Half a frame, then silence (a slow peer): also the deadline. */
    n = rdv_encode(&in, buf, sizeof(buf));
    CHECK(write(sv[0], buf, n / 2) == (ssize_t)(n / 2));
    t0 = rdv_now();
    CHECK_INT(rdv_recv(sv[1], &out, t0 + 0.2, err, sizeof(err)), RDV_ETIME);
    CHECK(rdv_now() - t0 < 0.5);

    /* A write into a full socket stops at the deadline. */
    {
        static unsigned char big[1 << 22];
        t0 = rdv_now();
        CHECK_INT(rdv_write_full(sv[0], big, sizeof(big), t0 + 0.2), RDV_ETIME);
        CHECK(rdv_now() - t0 < 0.5);
    }
    close(sv[0]);
    close(sv[1]);

    /* Garbage then close: the peer is gone, with the reason. */
    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    CHECK(write(sv[0], "GET / HTTP/1.1\r\n\r\n", 18) == 18);
    CHECK_INT(rdv_recv(sv[1], &out, rdv_now() + 1, err, sizeof(err)),
              RDV_EPEER);
    CHECK(strstr(err, "bad magic") != NULL);
    close(sv[0]);
    CHECK_INT(rdv_recv(sv[1], &out, rdv_now() + 1, err, sizeof(err)),
              RDV_EPEER);
    CHECK(strstr(err, "closed") != NULL);
    close(sv[1]);
}

/* A name that never resolves ends at the deadline with the reason. */
static void
test_connect_unresolvable(void)
{
    char err[300];
    int attempts = 0;
    double t0 = rdv_now();
    int fd = rdv_connect("no-such-host.invalid", 1, t0 + 0.6, &attempts, err,
                         sizeof(err));

    CHECK_INT(fd, RDV_ETIME);
    CHECK(rdv_now() - t0 < 1.6);
    CHECK(attempts >= 1);
    CHECK(strstr(err, "no-such-host.invalid") != NULL);
}

/* Nothing listens: refused, retried with a backoff until the deadline. */
static void
test_connect_refused(void)
{
    char err[300];
    int attempts = 0, lfd;
    double t0 = rdv_now();
    int fd;

    /* Find a free port, then close it so that nothing listens there. */
    lfd = rdv_listen(0, err, sizeof(err));
    CHECK(lfd >= 0);
    {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof(sa);
        int port = 0;

        if (getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0)
            port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
        close(lfd);
        fd = rdv_connect("127.0.0.1", port, t0 + 0.5, &attempts, err,
                         sizeof(err));
    }
    CHECK_INT(fd, RDV_ETIME);
    CHECK(attempts >= 3);
    CHECK(strstr(err, "refused") != NULL);
    CHECK(rdv_now() - t0 < 1.0);
}

/* No file descriptor left for the lookup's pipe (a pod at its open-files
 * limit): the lookup fails with the reason, and the retries end by the
 * deadline. */
static void
test_connect_no_fds(void)
{
    struct rlimit old, none;
    char err[300] = "";
    int attempts = 0, fd, top = dup(0);
    double t0;

    CHECK(top >= 0);
    CHECK_INT(getrlimit(RLIMIT_NOFILE, &old), 0);
    /* dup gives the lowest free descriptor: all up to top are in use, and
     * none above it may be opened. */
    none = old;
    none.rlim_cur = (rlim_t)top + 1;
    CHECK_INT(setrlimit(RLIMIT_NOFILE, &none), 0);
    t0 = rdv_now();
    fd = rdv_connect("127.0.0.1", 9, t0 + 0.3, &attempts, err, sizeof(err));
    CHECK_INT(setrlimit(RLIMIT_NOFILE, &old), 0);
    close(top);
    CHECK_INT(fd, RDV_ETIME);
    CHECK(strstr(err, "cannot resolve 127.0.0.1") != NULL);
    CHECK(strstr(err, strerror(EMFILE)) != NULL);
    CHECK(rdv_now() - t0 < 1.0);
}

/* One reader per connection: a frame that comes a byte at a time is
 * assembled without blocking, two frames back to back come apart, and a
 * close in the middle is the peer's end. */
static void
test_reader(void)
{
    int sv[2];
    unsigned char buf[RDV_HEADER_LEN + RDV_MAX_PAYLOAD];
    struct rdv_msg in = sample(RDV_HELLO), in2 = sample(RDV_CHALLENGE), out;
    struct rdv_reader rd;
    char err[200];
    size_t n;
    int r = RDV_AGAIN;

    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    memset(&rd, 0, sizeof(rd));
    CHECK_INT(rdv_reader_feed(&rd, sv[1], &out, err, sizeof(err)), RDV_AGAIN);
    n = rdv_encode(&in, buf, sizeof(buf));
    CHECK(n > RDV_HEADER_LEN);
    for (size_t i = 0; i < n; i++) {
        CHECK_INT(r, RDV_AGAIN);
        CHECK(write(sv[0], buf + i, 1) == 1);
        r = rdv_reader_feed(&rd, sv[1], &out, err, sizeof(err));
    }
    CHECK_INT(r, RDV_OK);
    CHECK(memcmp(&in, &out, sizeof(in)) == 0);
    /* Two frames in one write: the reader takes one frame at a time. */
    n = rdv_encode(&in2, buf, sizeof(buf));
    CHECK(write(sv[0], buf, n) == (ssize_t)n);
    n = rdv_encode(&in, buf, sizeof(buf));
    CHECK(write(sv[0], buf, n) == (ssize_t)n);
    CHECK_INT(rdv_reader_feed(&rd, sv[1], &out, err, sizeof(err)), RDV_OK);
    CHECK(memcmp(&in2, &out, sizeof(in2)) == 0);
    CHECK_INT(rdv_reader_feed(&rd, sv[1], &out, err, sizeof(err)), RDV_OK);
    CHECK(memcmp(&in, &out, sizeof(in)) == 0);
    /* Garbage is refused as soon as the header is in. */
    CHECK(write(sv[0], "GET / HTTP/1.1\r\n", 16) == 16);
    CHECK_INT(rdv_reader_feed(&rd, sv[1], &out, err, sizeof(err)), RDV_EPEER);
    CHECK(strstr(err, "bad magic") != NULL);
    close(sv[0]);
    close(sv[1]);
    /* Half a frame, then the close. */
    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    memset(&rd, 0, sizeof(rd));
    CHECK(write(sv[0], buf, n / 2) == (ssize_t)(n / 2));
    CHECK_INT(rdv_reader_feed(&rd, sv[1], &out, err, sizeof(err)), RDV_AGAIN);
    close(sv[0]);
    CHECK_INT(rdv_reader_feed(&rd, sv[1], &out, err, sizeof(err)), RDV_EPEER);
    CHECK(strstr(err, "in the middle of a message") != NULL);
    close(sv[1]);
}

/* A peer that resets its connection (TCP RST: a process killed with its
 * socket lingering 0, a node's firewall) is gone at once: an error other
 * than "no data yet" ends the reader, not its time budget. */
static void
test_reader_reset(void)
{
    struct sockaddr_in a;
    socklen_t al = sizeof(a);
    struct linger lg = {1, 0};
    struct rdv_reader rd;
    struct rdv_msg out;
    char err[200];
    int l, c, s, r = RDV_AGAIN;

    l = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(l >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_INT(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    CHECK_INT(listen(l, 1), 0);
    CHECK_INT(getsockname(l, (struct sockaddr *)&a, &al), 0);
    c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_INT(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
    s = accept(l, NULL, NULL);
    CHECK(s >= 0);
    fcntl(s, F_SETFL, O_NONBLOCK);
    memset(&rd, 0, sizeof(rd));
    CHECK_INT(rdv_reader_feed(&rd, s, &out, err, sizeof(err)), RDV_AGAIN);
    CHECK(write(c, "NCGR", 4) == 4);
    CHECK_INT(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    close(c);
    /* The four bytes, then the reset. */
    for (int i = 0; i < 200 && r == RDV_AGAIN; i++) {
        r = rdv_reader_feed(&rd, s, &out, err, sizeof(err));
        if (r == RDV_AGAIN)
            usleep(5000);
    }
    CHECK_INT(r, RDV_EPEER);
    CHECK(strstr(err, "connection failed") != NULL);
    close(s);
    close(l);
}

/* The job token's proof: the same inputs give the same proof, and each
 * input changes it; tokens are checked for their form. */
static void
test_proof(void)
{
    static const char tok[] =
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    static const char tok2[] =
        "10112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    unsigned char nonce[RDV_NONCE_BYTES], nonce2[RDV_NONCE_BYTES];
    unsigned char a[RDV_PROOF_BYTES], b[RDV_PROOF_BYTES];

    memset(nonce, 7, sizeof(nonce));
    memcpy(nonce2, nonce, sizeof(nonce));
    nonce2[15] ^= 1;
    CHECK(rdv_token_valid(tok));
    CHECK(!rdv_token_valid(""));
    CHECK(!rdv_token_valid("00112233"));
    CHECK(!rdv_token_valid(
        "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff"));
    CHECK(!rdv_token_valid(
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff0"));
    CHECK_INT(rdv_proof(tok, nonce, "job-1", 1, a), 0);
    CHECK_INT(rdv_proof(tok, nonce, "job-1", 1, b), 0);
    CHECK(rdv_proof_equal(a, b));
    CHECK_INT(rdv_proof(tok2, nonce, "job-1", 1, b), 0);
    CHECK(!rdv_proof_equal(a, b));
    CHECK_INT(rdv_proof(tok, nonce2, "job-1", 1, b), 0);
    CHECK(!rdv_proof_equal(a, b));
    CHECK_INT(rdv_proof(tok, nonce, "job-12", 1, b), 0);
    CHECK(!rdv_proof_equal(a, b));
    CHECK_INT(rdv_proof(tok, nonce, "job-1", 2, b), 0);
    CHECK(!rdv_proof_equal(a, b));
    /* One bit differs, anywhere: not equal. */
    memcpy(b, a, sizeof(a));
    b[RDV_PROOF_BYTES - 1] ^= 0x80;
    CHECK(!rdv_proof_equal(a, b));
}

int
main(void)
{
    test_reader();
    test_reader_reset();
    test_proof();
    test_roundtrip();
    test_header();
    test_bad_strings();
    test_bounded_io();
    test_connect_unresolvable();
    test_connect_refused();
    test_connect_no_fds();
    return harness_finish();
}
