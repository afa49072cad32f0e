/* One connection's outgoing TLS records, with the record of an answer's
 * header held back to go out with the body's first record in one
 * sendmsg(2) (server/http.c installs heldsend_push() as GnuTLS's push
 * function). */
#ifndef NCCLGUARD_HELDSEND_H
#define NCCLGUARD_HELDSEND_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The largest record held back: the answers' headers are a few hundred
 * bytes; a larger record is sent as it comes. */
#define HELDSEND_MAX 1024

struct heldsend {
    int fd;
    bool hold_next; /* hold the next record: an answer with a body is queued */
    size_t n_held, off; /* held[off..n_held) is still to be sent */
    char held[HELDSEND_MAX];
};

/*
 * Sends one record of len bytes from data on h->fd, non-blocking, as a
 * GnuTLS push function: returns the bytes of data taken (the whole record
 * when it is held), or -1 with *err an errno value (EAGAIN included).
 *
 * When hold_next is set, the record is held (hold_next is cleared either
 * way). Otherwise held bytes go first, with data, in one sendmsg: when the
 * socket takes only held bytes, -1 with EAGAIN says that data was not
 * sent, and the caller's next push sends the rest of them first. Bytes
 * are never reordered, dropped or sent twice.
 */
ssize_t heldsend_push(struct heldsend *h, const void *data, size_t len,
                      int *err);

/*
 * Sends what is still held, waiting for room up to timeout_ms in all
 * (for an answer that was sent without its body); then nothing is held.
 * Returns 0, or -1 when the socket failed or stayed full (the connection
 * is failing: its owner closes it).
 */
int heldsend_flush(struct heldsend *h, int timeout_ms);

#endif
