/* Reading a whole file into memory, with a size cap and clear errors. */
#ifndef NCCLGUARD_FILE_H
#define NCCLGUARD_FILE_H

#include <stddef.h>

#include "base/error.h"

/*
 * Reads the whole file at path into a malloc'd buffer followed by a NUL
 * that *len does not count (the bytes may hold NULs of their own). A file
 * of more than max bytes is refused, however it grows while being read:
 * at most max + 1 bytes are ever read. Returns the buffer, which the
 * caller frees with free(), or with file_free_secret() when it may hold a
 * secret; or NULL with err (may be NULL) saying what failed and naming
 * the path ("cannot open P: why", "cannot read P: why", "P is larger than
 * N bytes", "out of memory reading P"); *len is then untouched.
 *
 * Every intermediate buffer the reader lets go of is wiped first, so a
 * private key read through it leaves no stray copies on the heap.
 * Thread-safe.
 */
char *file_read(const char *path, size_t max, size_t *len, struct ng_error *err)
    __attribute__((warn_unused_result));

/*
 * As file_read(), from an open descriptor (stdin, a pipe) that the caller
 * keeps and closes; name stands for it in messages ("<stdin>").
 */
char *file_read_fd(int fd, const char *name, size_t max, size_t *len,
                   struct ng_error *err) __attribute__((warn_unused_result));

/* Wipes the len bytes of buf (explicit_bzero, which the compiler may not
 * drop) and frees it. For buffers from file_read() that held a private
 * key. NULL is a no-op. */
void file_free_secret(char *buf, size_t len);

#endif
