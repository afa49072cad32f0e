/* Fuzz target: `ncclguard mutate`'s input path, YAML/JSON streams through
 * yamljson_load, every document through workload_mutate, and the result
 * back out through yamljson_emit. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/workload.h"
#include "cli/yamljson.h"
#include "fuzz_common.h"

static struct policy *pol;
static const struct mutate_options opts = {.own_namespace = "ncclguard"};

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    pol = fuzz_policy_load();
    return 0;
}

/* What the dry run prints must load back as the same documents. */
static void
check_roundtrip(const json_t *docs)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    json_t *again;
    struct ng_error err;

    FUZZ_ASSERT(f != NULL);
    FUZZ_ASSERT(yamljson_emit(docs, f) == 0);
    FUZZ_ASSERT(fclose(f) == 0);
    ng_error_clear(&err);
    again = yamljson_load(text, len, "emitted", NULL, &err);
    if (again == NULL || !json_equal(again, docs)) {
        char *want = json_dumps(docs, JSON_COMPACT | JSON_ENCODE_ANY);
        char *got = again ? json_dumps(again, JSON_COMPACT) : NULL;

        fprintf(stderr,
                "emitted YAML does not load back the same: %d:%d: %s\n"
                "emitted:\n%s\nwant: %s\ngot:  %s\n",
                err.line, err.col, err.msg, text, want ? want : "?",
                got ? got : "(load failed)");
        abort();
    }
    json_decref(again);
    free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ng_error err;
    json_t *docs, *warnings = NULL, *doc;
    size_t i;

    ng_error_clear(&err);
    docs =
        yamljson_load((const char *)data, size, "fuzz.yaml", &warnings, &err);
    if (docs == NULL) {
        FUZZ_ASSERT(err.msg[0] != '\0');
        FUZZ_ASSERT(warnings == NULL || json_is_array(warnings));
        json_decref(warnings);
        return 0;
    }
    FUZZ_ASSERT(json_is_array(docs));
    FUZZ_ASSERT(warnings == NULL || json_is_array(warnings));
    check_roundtrip(docs);
    json_array_foreach(docs, i, doc)
    {
        struct workload_report rep;

        if (!json_is_object(doc))
            continue;
        memset(&rep, 0, sizeof(rep));
        FUZZ_ASSERT(workload_mutate(doc, NULL, pol, &opts, &rep) == 0);
        for (size_t p = 0; p < rep.n_pods; p++) {
            const struct mutate_result *r = &rep.pods[p].result;

            FUZZ_ASSERT(json_is_array(r->patch));
            FUZZ_ASSERT((json_array_size(r->patch) > 0) ==
                        (r->status == MUTATE_PATCHED));
            FUZZ_ASSERT(mutate_status_name(r->status) != NULL);
        }
        workload_report_release(&rep);
    }
    check_roundtrip(docs);
    json_decref(docs);
    json_decref(warnings);
    return 0;
}
