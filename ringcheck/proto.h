/* The line protocol between the ring check's supervisor and its workers:
 * every message's encoding and parsing, in one place. */
#ifndef NCCLGUARD_RINGCHECK_PROTO_H
#define NCCLGUARD_RINGCHECK_PROTO_H

#include <stddef.h>

/*
 * Workers write one message per line to their event pipe; the first
 * character names it:
 *   P b|e PHASE                  phase begins or ends
 *   V NCCL RUNTIME DRIVER        versions (integer codes)
 *   N COUNT                      visible devices
 *   G DEV TOTAL_MIB BUSID UUID NAME...
 *   F DEV FREE_MIB               free memory after the device phase
 *   C DEV MAJOR MINOR            compute capability
 *   T DEV PEER ACCESS PERFRANK ATOMICS   one cell of the peer matrix
 *   U HEX                        the NCCL unique id (rank 0, process mode)
 *   R RANK OP TYPE BYTES COUNT ROOT TIME_US WRONG FIRST   one checked
 *                                collective; FIRST is the byte offset of
 *                                the first wrong value, -1 when none
 *   B RANK BYTES ITERS TIME_US WRONG FIRST   the bandwidth phase, its
 *                                results checked after the timed loop
 *   S RANK DEV WHAT...           still busy when told to abort (RANK -1:
 *                                the devices worker), in call WHAT
 *   A                            communicators aborted
 *   E CODE PHASE RANKS MESSAGE   failure with its exit code; RANKS is a
 *                                comma list, or "-" for the whole worker
 *   I MESSAGE                    informational line
 *   X                            finished cleanly
 * The supervisor writes "U HEX" to the other ranks' command pipes.
 */

#define PROTO_LINE_MAX 1024
#define PROTO_UID_HEX 256 /* 2 x NCCL_UNIQUE_ID_BYTES */

struct proto_msg {
    char kind; /* the letter above */
    union {
        struct {
            int begin, phase;
        } phase;
        struct {
            int nccl, runtime, driver;
        } versions;
        struct {
            int count;
        } ndev;
        struct {
            int dev;
            unsigned long total_mib;
            char busid[32];
            char uuid[40];
            char name[64];
        } gpu;
        struct {
            int dev;
            unsigned long free_mib;
        } free;
        struct {
            int dev, major, minor;
        } cc;
        struct {
            int dev, peer, access, perf, atomics;
        } topo;
        struct {
            char hex[PROTO_UID_HEX + 1];
        } uid;
        struct {
            int rank;
            char op[16];
            char type[8];
            size_t bytes, count;
            int root;
            double time_us;
            long wrong;
            long long first;
        } result;
        struct {
            int rank;
            size_t bytes;
            int iters;
            double time_us;
            long wrong;
            long long first;
        } bw;
        struct {
            int rank, dev;
            char what[64];
        } stuck;
        struct {
            int code, phase;
            char ranks[96]; /* "" for the whole worker */
            char msg[800];
        } error;
        struct {
            char msg[PROTO_LINE_MAX];
        } info;
    } u;
};

/*
 * Encodes *m as one line (with '\n'; newlines inside strings become spaces)
 * into buf. Returns its length, or -1 when m->kind is unknown or buf is too
 * small. Thread-safe.
 */
int proto_encode(const struct proto_msg *m, char *buf, size_t len)
    __attribute__((warn_unused_result));

/*
 * Parses one line (without '\n') into *m. Returns 0, or -1 when the line is
 * not a well-formed message (*m then undefined). Strings that do not fit
 * are cut. Thread-safe.
 */
int proto_parse(const char *line, struct proto_msg *m)
    __attribute__((warn_unused_result));

/*
 * Encodes *m and writes the line whole to fd. Returns 0, or -1 when the
 * write fails: the reader is gone (EPIPE) or the pipe broke, and nothing
 * more can be reported on fd. Async-signal-unsafe; normal context only.
 */
int proto_send(int fd, const struct proto_msg *m)
    __attribute__((warn_unused_result));

/* A per-pipe buffer that collects bytes into lines. Embedded, no heap. */
struct proto_buf {
    char data[PROTO_LINE_MAX * 4];
    size_t len;
    int skip; /* a line longer than data was cut: drop up to its newline */
};

/*
 * Reads what fd has now into b (fd is non-blocking), stopping while b is
 * full of complete lines (take them with proto_next, then read again).
 * Returns 1 while the pipe is open, 0 at end of file, -1 on error. Lines
 * longer than PROTO_LINE_MAX are cut; the rest of such a line is dropped,
 * never taken for a line of its own. Not thread-safe per buffer.
 */
int proto_read(int fd, struct proto_buf *b);

/* Takes the next complete line (without '\n') into line; returns 1, or 0
 * when there is none. At end of file (eof != 0) a partial last line counts
 * as complete. */
int proto_next(struct proto_buf *b, int eof, char *line, size_t linelen);

#endif
