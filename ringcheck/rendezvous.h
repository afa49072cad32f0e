/* The cross-node ring check's rendezvous: a small versioned,
 * length-prefixed protocol over TCP between node rank 0 and the other
 * nodes of one job, with every read and write bounded in time and size. */
#ifndef NCCLGUARD_RINGCHECK_RENDEZVOUS_H
#define NCCLGUARD_RINGCHECK_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

/*
 * A frame is a 12-byte header and a payload:
 *   "NCGR"  magic
 *   u8      protocol version (RDV_VERSION)
 *   u8      message type (enum rdv_type)
 *   u16     zero
 *   u32     payload length, at most RDV_MAX_PAYLOAD
 * Integers are big-endian. In the payload, each field is a u32, a string
 * (u16 length, then that many bytes, no NUL, at most the field's size) or
 * a fixed number of raw bytes (the unique id, the nonce, the proof).
 * The payload must be consumed exactly; anything else is garbage and the
 * peer is treated as gone.
 */
#define RDV_MAGIC "NCGR"
/* Version 2 added CHALLENGE, the HELLO's cure and proof, and the RUN's
 * budgets. */
#define RDV_VERSION 2
#define RDV_HEADER_LEN 12
#define RDV_MAX_PAYLOAD 2048
#define RDV_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */
#define RDV_NONCE_BYTES 16
#define RDV_PROOF_BYTES 32 /* HMAC-SHA256 */
/* The job token: 64 lower-case hex digits (NCCLGUARD_JOB_TOKEN). */
#define RDV_TOKEN_HEX 64

/* Field sizes, with room for the NUL. */
#define RDV_JOB_MAX 129
#define RDV_HOST_MAX 65
#define RDV_IFACE_MAX 33
#define RDV_ADDR_MAX 48
#define RDV_WORD_MAX 33
#define RDV_SETTING_MAX 49
#define RDV_TEXT_MAX 512

enum rdv_type {
    RDV_HELLO = 1,     /* node -> leader: who I am */
    RDV_REJECT = 2,    /* leader -> node: you may not join, and why */
    RDV_RUN = 3,       /* leader -> node: run one cross-node round */
    RDV_RESULT = 4,    /* node -> leader: how the round went here */
    RDV_VERDICT = 5,   /* leader -> node: the job-wide verdict; the end */
    RDV_CHALLENGE = 6, /* leader -> node, on connect: a nonce to prove the
                          job token with, and the job's deadline */
};

struct rdv_challenge {
    unsigned char nonce[RDV_NONCE_BYTES];
    uint32_t left_ms; /* the job's deadline, from now */
};

struct rdv_hello {
    char job[RDV_JOB_MAX]; /* the job's identity; must match the leader's */
    uint32_t node_rank;
    uint32_t ngpus;     /* local GPUs (NCCL ranks) */
    int32_t local_code; /* the single-pod check's failure after its own
                           fallback: 0 when it passed, or passed with
                           cure */
    char host[RDV_HOST_MAX];
    char iface[RDV_IFACE_MAX];            /* interface NCCL picks here, or "" */
    char addr[RDV_ADDR_MAX];              /* its address */
    char transport[RDV_WORD_MAX];         /* "NET/IB", "NET/Socket" */
    char cure[RDV_SETTING_MAX];           /* the setting this pod's own fallback
                                             needs, or "" */
    unsigned char proof[RDV_PROOF_BYTES]; /* rdv_proof(); zeros without a
                                             token */
};

struct rdv_reject {
    char reason[RDV_TEXT_MAX];
};

struct rdv_run {
    uint32_t round;
    uint32_t world;                 /* ranks in the round's communicator */
    uint32_t rank_offset;           /* this node's first rank */
    uint32_t phase_ms;              /* each phase's timeout in this round */
    uint32_t left_ms;               /* the round's deadline, from now */
    char setting[RDV_SETTING_MAX];  /* "NAME=VALUE" to apply, or "" */
    unsigned char id[RDV_ID_BYTES]; /* the NCCL unique id */
};

struct rdv_result {
    uint32_t round;
    int32_t code;        /* RC_EXIT_* of this node's part */
    uint32_t busbw_mbps; /* bus bandwidth in MB/s; 0 not measured */
    uint32_t wrong;      /* wrong values seen here */
    char what[RDV_TEXT_MAX];
};

struct rdv_verdict {
    int32_t code;                 /* the job-wide failure, 0 none */
    char result[RDV_WORD_MAX];    /* "pass", "fail", "warn", ... */
    char cure[RDV_SETTING_MAX];   /* the setting every node must use */
    char transport[RDV_WORD_MAX]; /* what the cure turns off */
    char what[RDV_TEXT_MAX];
};

struct rdv_msg {
    enum rdv_type type;
    union {
        struct rdv_hello hello;
        struct rdv_reject reject;
        struct rdv_run run;
        struct rdv_result result;
        struct rdv_verdict verdict;
        struct rdv_challenge challenge;
    } u;
};

/* What a failed call saw: a lower-case message and whether the peer was
 * merely slow (RDV_ETIME) or gone or lying (RDV_EPEER). */
enum { RDV_OK = 0, RDV_EPEER = -1, RDV_ETIME = -2, RDV_AGAIN = 1 };

/* Seconds on the monotonic clock (the supervisor's clock). */
double rdv_now(void);

/*
 * Encodes *m as a whole frame into buf (len bytes). Returns the frame's
 * length, or 0 when a string is longer than its field allows or buf is too
 * small. Thread-safe.
 */
size_t rdv_encode(const struct rdv_msg *m, unsigned char *buf, size_t len)
    __attribute__((warn_unused_result));

/*
 * Checks a frame header. Returns RDV_OK and sets *type and *plen, or
 * RDV_EPEER with a message in err (bad magic, other version, unknown type,
 * payload too long). Thread-safe.
 */
int rdv_decode_header(const unsigned char *hdr, enum rdv_type *type,
                      uint32_t *plen, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Decodes the payload p (len bytes) of a frame of the given type into *m.
 * Returns RDV_OK, or RDV_EPEER with a message in err; *m is then partly
 * filled. Strings come back NUL-terminated. Thread-safe.
 */
int rdv_decode_payload(enum rdv_type type, const unsigned char *p, size_t len,
                       struct rdv_msg *m, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Reads exactly n bytes from the non-blocking socket fd before deadline
 * (rdv_now's clock). Returns RDV_OK, RDV_ETIME, or RDV_EPEER (closed,
 * error). Thread-safe per fd.
 */
int rdv_read_full(int fd, void *buf, size_t n, double deadline)
    __attribute__((warn_unused_result));

/* Writes n bytes the same way. */
int rdv_write_full(int fd, const void *buf, size_t n, double deadline)
    __attribute__((warn_unused_result));

/* Sends one message on fd before deadline. Returns RDV_OK, RDV_ETIME or
 * RDV_EPEER, with a message in err. */
int rdv_send(int fd, const struct rdv_msg *m, double deadline, char *err,
             size_t errlen) __attribute__((warn_unused_result));

/* Receives one message from fd before deadline, as above. Garbage (a bad
 * header or payload) is RDV_EPEER. */
int rdv_recv(int fd, struct rdv_msg *m, double deadline, char *err,
             size_t errlen) __attribute__((warn_unused_result));

/*
 * Listens on TCP port on every address (IPv6 and IPv4 where it can).
 * Returns the non-blocking, close-on-exec socket, or -1 with a message in
 * err.
 */
int rdv_listen(int port, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Connects to host:port, resolving the name again and retrying with a
 * backoff (0.1 s doubling to 1 s) until deadline. Each name lookup runs in
 * a child process so that a slow resolver cannot pass the deadline.
 * Returns the non-blocking socket, or RDV_ETIME with the last reason in
 * err: "name X does not resolve: ...", "connection to A port P refused",
 * and so on. *attempts counts the tries (may be NULL). Not thread-safe
 * (forks).
 */
int rdv_connect(const char *host, int port, double deadline, int *attempts,
                char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * One frame read in pieces from a non-blocking socket, so that one poll
 * loop can serve many connections: each connection gets its own reader,
 * bounded to one frame. Embedded, no heap.
 */
struct rdv_reader {
    unsigned char buf[RDV_HEADER_LEN + RDV_MAX_PAYLOAD];
    size_t got;         /* bytes in buf */
    size_t need;        /* bytes of the whole frame once the header is in */
    enum rdv_type type; /* valid once got >= RDV_HEADER_LEN */
};

/*
 * Reads what fd has now, never more than the frame still needs. Returns
 * RDV_OK with the message in *m (the reader is then reset for the next
 * frame), RDV_AGAIN when the frame is not complete yet, or RDV_EPEER with
 * a message in err (closed, garbage). Not thread-safe per reader.
 */
int rdv_reader_feed(struct rdv_reader *r, int fd, struct rdv_msg *m, char *err,
                    size_t errlen) __attribute__((warn_unused_result));

/*
 * Whether s is a job token: RDV_TOKEN_HEX lower-case hex digits.
 * Thread-safe.
 */
int rdv_token_valid(const char *s);

/*
 * The proof that a node holds the job's token (RDV_TOKEN_HEX hex digits,
 * as the webhook wrote it): HMAC-SHA256 under the token of a context
 * string, the leader's nonce, the job id and the node rank. Returns 0, or
 * -1 when OpenSSL fails. Thread-safe.
 */
int rdv_proof(const char *token, const unsigned char *nonce, const char *job,
              uint32_t node_rank, unsigned char *out)
    __attribute__((warn_unused_result));

/* Compares two proofs in constant time; 1 when equal. Thread-safe. */
int rdv_proof_equal(const unsigned char *a, const unsigned char *b);

/* The name of a message type ("HELLO"), never NULL. */
const char *rdv_type_name(enum rdv_type t);

#endif
