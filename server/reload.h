/* The policy and serving-certificate snapshots in force, and the watcher
 * that replaces them when their files change (inotify, SIGHUP, polling). */
#ifndef NCCLGUARD_RELOAD_H
#define NCCLGUARD_RELOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "policy/policy.h"
#include "server/tlspair.h"

/*
 * An immutable policy snapshot. Requests hold a reference from the moment
 * they start until their answer is queued, so a reload never frees a
 * policy that is still in use.
 */
struct policy_snap {
    struct policy *pol;
    uint64_t generation; /* 1 for the policy loaded at start */
    char hash[72];       /* policy_hash() of pol */
    atomic_uint refs;
};

/* An immutable certificate snapshot; TLS connections hold a reference
 * from their handshake until they close. */
struct cert_snap {
    struct tlspair *pair;
    uint64_t generation;
    atomic_uint refs;
};

struct reload_config {
    const char *policy_path;
    const char *cert_path;
    const char *key_path;
    unsigned int
        interval_seconds; /* poll period; 0 = inotify and SIGHUP only */
};

struct reload;

/* Largest policy file read. */
#define RELOAD_MAX_POLICY_BYTES (4 * 1024 * 1024)

/*
 * Loads the policy and the certificate pair named in cfg (paths are
 * copied). Returns NULL with err naming the file and the problem when
 * either fails: the server does not start without both. Not thread-safe;
 * call once at start.
 */
struct reload *reload_new(const struct reload_config *cfg, struct ng_error *err)
    __attribute__((warn_unused_result));

/*
 * Starts the watcher thread: inotify on the files' directories (so that
 * the symlink swap of a Kubernetes ConfigMap or Secret update is seen),
 * the interval poll, and reload_request(). Returns 0, or -1 with err set.
 */
int reload_start(struct reload *r, struct ng_error *err)
    __attribute__((warn_unused_result));

/*
 * Asks the watcher to re-read both files now (SIGHUP). Async-signal-safe:
 * it only writes to an eventfd.
 */
void reload_request(struct reload *r);

/*
 * Re-reads both files in the calling thread, swapping in what changed and
 * loads. force re-reads even content seen before. Used by the watcher and
 * by tests. Not to be called concurrently with itself.
 */
void reload_check(struct reload *r, bool force);

/*
 * Takes a reference to the policy in force; never NULL after reload_new().
 * Release it with reload_policy_release(). Thread-safe.
 */
struct policy_snap *reload_policy_acquire(struct reload *r);
void reload_policy_release(struct policy_snap *s);

/* As above for the certificate pair. Thread-safe. */
struct cert_snap *reload_cert_acquire(struct reload *r);
void reload_cert_release(struct cert_snap *s);

/* Stops the watcher and frees the snapshots in force. Snapshots still
 * referenced by callers are freed by their last release. */
void reload_free(struct reload *r);

#endif
