/* The line protocol between the ring check's supervisor and its workers. */
#ifndef NCCLGUARD_RINGCHECK_PROTO_H
#define NCCLGUARD_RINGCHECK_PROTO_H

#include <stddef.h>

/*
 * Workers write one event per line to their event pipe; the first
 * character names it:
 *   P b|e PHASE                 phase begins or ends
 *   V NCCL RUNTIME DRIVER       versions (integer codes)
 *   N COUNT                     visible devices
 *   G DEV TOTAL_MIB BUSID UUID NAME...
 *   F DEV FREE_MIB              free memory after the device phase
 *   T DEV PEER ACCESS PERFRANK  one cell of the peer matrix
 *   U HEX                       the NCCL unique id (rank 0, process mode)
 *   R RANK OP BYTES COUNT ROOT TIME_US WRONG    one collective checked
 *   B RANK BYTES ITERS TIME_US  the bandwidth phase
 *   S RANK                      still busy when told to abort
 *   A                           communicators aborted
 *   E CODE PHASE MESSAGE        failure with its exit code
 *   I MESSAGE                   informational line
 *   X                           finished cleanly
 */

#define PROTO_LINE_MAX 1024

/* Formats one event, replaces any newline in it, appends '\n' and writes it
 * whole to fd. Returns 0, or -1 when the write fails. Async-signal-unsafe
 * (vsnprintf); call from normal context only. */
int proto_send(int fd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A per-pipe buffer that collects bytes into lines. Embedded, no heap. */
struct proto_buf {
    char data[PROTO_LINE_MAX * 4];
    size_t len;
};

/*
 * Reads what fd has now into b (fd is non-blocking). Returns 1 while the
 * pipe is open, 0 at end of file, -1 on error. Lines longer than
 * PROTO_LINE_MAX are cut. Not thread-safe per buffer.
 */
int proto_read(int fd, struct proto_buf *b);

/* Takes the next complete line (without '\n') into line; returns 1, or 0
 * when there is none. At end of file (eof != 0) a partial last line counts
 * as complete. */
int proto_next(struct proto_buf *b, int eof, char *line, size_t linelen);

#endif
