/* Set-up shared by the fuzz targets that need a policy snapshot. */
#ifndef NCCLGUARD_FUZZ_COMMON_H
#define NCCLGUARD_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "policy/policy.h"

/*
 * Loads the policy the targets mutate with: $NCCLGUARD_FUZZ_POLICY, else
 * policy/default.yaml relative to the working directory (the repository
 * root under make). Aborts when it cannot, because every input would then
 * test nothing. The snapshot lives until the process exits.
 */
static inline struct policy *
fuzz_policy_load(void)
{
    const char *path = getenv("NCCLGUARD_FUZZ_POLICY");
    struct ng_error err;
    struct policy *p;

    if (path == NULL || path[0] == '\0')
        path = "policy/default.yaml";
    ng_error_clear(&err);
    p = policy_load_file(path, &err);
    if (p == NULL) {
        fprintf(stderr, "fuzz: cannot load policy %s: %d:%d: %s\n", path,
                err.line, err.col, err.msg);
        abort();
    }
    return p;
}

#endif
