/* What the watchdog reads from /proc: a process's start time and CPU time,
 * its environment, the signals it catches, and its TCP sockets. The /proc
 * root is a parameter so that tests can point it elsewhere. */
#ifndef NCCLGUARD_WD_PROCFS_H
#define NCCLGUARD_WD_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The fields of /proc/PID/stat the watchdog uses. */
struct wd_stat {
    char state;         /* field 3: R, S, D, Z, ... */
    uint64_t cpu_ticks; /* fields 14 + 15: utime + stime, clock ticks */
    uint64_t start;     /* field 22: start time, ticks after boot */
    uint32_t comm_hash; /* field 2, the command name, hashed: it changes at
                           execve(2) (to the new file's name), the start
                           time does not */
};

/*
 * Parses the text of /proc/PID/stat (buf, len). The command name (field 2)
 * may hold spaces and parentheses, so fields are counted from the last
 * ')'. Returns 0, or -1 on malformed text (*st untouched). Thread-safe.
 */
int wd_stat_parse(const char *buf, size_t len, struct wd_stat *st)
    __attribute__((warn_unused_result));

/* Reads and parses <root>/<pid>/stat; -1 when the process is gone. */
int wd_proc_stat(const char *root, pid_t pid, struct wd_stat *st)
    __attribute__((warn_unused_result));

/*
 * Reads <root>/<pid>/<file> into buf (cap bytes, NUL-terminated, at most
 * cap - 1 bytes of content). Returns the length read, or -1 (errno set).
 */
ssize_t wd_proc_read(const char *root, pid_t pid, const char *file, char *buf,
                     size_t cap) __attribute__((warn_unused_result));

/*
 * Looks up name in an environ block (NUL-separated NAME=value entries,
 * buf/len). Returns a pointer into buf to the value and its length in
 * *vlen, or NULL when name is not set. Thread-safe.
 */
const char *wd_environ_find(const char *buf, size_t len, const char *name,
                            size_t *vlen);

/*
 * True when the process catches sig, from the SigCgt mask of the text of
 * /proc/PID/status (buf, len). False when the line is missing.
 */
bool wd_status_catches(const char *buf, size_t len, int sig);

/*
 * Parses the text of /proc/PID/io (buf, len) into *bytes: rchar + wchar,
 * every byte the process read or wrote through read/write-like calls,
 * files and sockets alike. Returns 0, or -1 when either line is missing
 * (*bytes untouched). Thread-safe.
 */
int wd_io_parse(const char *buf, size_t len, uint64_t *bytes)
    __attribute__((warn_unused_result));

/* One row of /proc/PID/net/tcp or tcp6. */
struct wd_tcp {
    uint64_t inode;
    int state; /* kernel TCP state: 1 ESTABLISHED, 8 CLOSE_WAIT, ... */
    uint32_t tx_queue;
    uint32_t rx_queue;
};

#define WD_TCP_ESTABLISHED 1
#define WD_TCP_CLOSE_WAIT 8
#define WD_TCP_LISTEN 10

/*
 * Parses the text of /proc/PID/net/tcp or tcp6 (buf, len; the header line
 * is skipped) into rows (at most cap). Returns the number of rows stored;
 * rows past cap are counted in *dropped (may be NULL). Malformed lines are
 * skipped. Thread-safe.
 */
size_t wd_tcp_parse(const char *buf, size_t len, struct wd_tcp *rows,
                    size_t cap, size_t *dropped);

/*
 * Lists the socket inodes of <root>/<pid>/fd into inodes (at most cap),
 * sorted and without duplicates. Every entry of the folder looked at, of
 * whatever kind, takes one from *entries_left (NULL: no limit), and the
 * listing stops when it is 0: a process with a million open files costs
 * what the caller allows. Returns how many, or -1 when the folder cannot
 * be read (process gone, no permission).
 */
ssize_t wd_proc_socket_inodes(const char *root, pid_t pid, uint64_t *inodes,
                              size_t cap, size_t *entries_left)
    __attribute__((warn_unused_result));

#endif
