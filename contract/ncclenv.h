/* The catalog of real NCCL environment variables and the checks made
 * against it, shared by `policy lint` and the ring check's preflight. */
#ifndef NCCLGUARD_CONTRACT_NCCLENV_H
#define NCCLGUARD_CONTRACT_NCCLENV_H

#include <stddef.h>

enum ncclenv_severity {
    NCCLENV_OK = 0,
    NCCLENV_WARNING = 1, /* works, but probably not what was meant */
    NCCLENV_ERROR = 2    /* NCCL ignores it or rejects it */
};

struct ncclenv_finding {
    enum ncclenv_severity severity;
    char msg[256]; /* one line, no trailing full stop */
};

/* The NCCL release the catalog reflects, e.g. "2.28". Never NULL. */
const char *ncclenv_catalog_version(void);

/*
 * Checks one variable. name is the full name ("NCCL_P2P_LEVEL"); value may
 * be NULL when only the name is known. Names that do not start with NCCL_
 * or TORCH_NCCL_ are not NCCL's business and give NCCLENV_OK. Fills *out
 * and returns its severity. Thread-safe; no allocation.
 */
/* Number of variables in the catalog and the i-th name (NULL past the
 * end), for tools and tests. Static data; thread-safe. */
size_t ncclenv_catalog_size(void);
const char *ncclenv_catalog_name(size_t i);

enum ncclenv_severity ncclenv_check(const char *name, const char *value,
                                    struct ncclenv_finding *out);

#endif
