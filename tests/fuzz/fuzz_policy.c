/* Fuzz target: policy YAML loading and one decision per loaded policy. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/policy.h"

static json_t *labels, *annotations;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    labels = json_pack("{s:s, s:s}", "app", "vllm", "team", "a");
    annotations = json_pack("{s:s, s:s, s:s}", "ncclguard.io/shm-size", "8Gi",
                            "ncclguard.io/debug", "true",
                            "ncclguard.io/ring-check", "false");
    if (labels == NULL || annotations == NULL)
        abort();
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ng_error err;
    struct policy *p;
    const struct settings *s;
    struct decision d;
    static const char *namespaces[] = {NULL, "", "default", "kube-system"};
    static const int64_t gpus[] = {0, 1, 8, 1 << 20};

    ng_error_clear(&err);
    p = policy_load((const char *)data, size, "fuzz.yaml", &err);
    if (p == NULL) {
        FUZZ_ASSERT(err.msg[0] != '\0');
        FUZZ_ASSERT(err.line >= 0 && err.col >= 0);
        return 0;
    }
    s = policy_defaults(p);
    FUZZ_ASSERT(s != NULL);
    FUZZ_ASSERT(policy_hash(p) != NULL && strlen(policy_hash(p)) == 64);
    FUZZ_ASSERT(s->shm.min <= s->shm.max);
    for (size_t i = 0; i < 4; i++) {
        memset(&d, 0, sizeof(d));
        policy_decide(p, namespaces[i], labels, i % 2 ? annotations : NULL,
                      gpus[i], &d);
        FUZZ_ASSERT(d.settings != NULL && d.rule != NULL);
        FUZZ_ASSERT(d.n_warnings <= POLICY_MAX_WARNINGS);
        for (size_t w = 0; w < d.n_warnings; w++)
            FUZZ_ASSERT(memchr(d.warnings[w], '\0', sizeof(d.warnings[w])));
    }
    policy_free(p);
    return 0;
}
