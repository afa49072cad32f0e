/* Unit tests for policy/policy.c: loading, defaults, merge, decisions. */
#include <string.h>

#include "harness.h"
#include "policy.h"

static struct policy *
load(const char *text, struct ng_error *e)
{
    return policy_load(text, strlen(text), "test.yaml", e);
}

int
main(void)
{
    struct ng_error e;
    struct policy *p;
    const struct settings *s;

    /* Built-in defaults equal what default.yaml documents. */
    p = load("apiVersion: ncclguard.io/v1alpha1\nkind: Policy\n", &e);
    CHECK(p != NULL);
    if (p != NULL) {
        s = policy_defaults(p);
        CHECK_INT(s->n_gpu_resources, 1);
        CHECK_STR(s->gpu_resources[0], "nvidia.com/gpu");
        CHECK_STR(s->profile.name, "nccl-production-profile");
        CHECK_INT(s->shm.per_gpu, 4LL << 30);
        CHECK_INT(s->shm.max, 64LL << 30);
        CHECK_STR(s->ringcheck.image,
                  "ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0");
        CHECK_INT(s->ringcheck.on_failure, RINGCHECK_FALLBACK);
        CHECK_STR(s->debug.subsys, "INIT,COLL,ENV,NET");
        CHECK_INT(strlen(policy_hash(p)), 64);
        policy_free(p);
    }
    return harness_finish();
}
