/* Fuzz target: the request decoder jparse_load, differentially against
 * jansson's json_loadb(JSON_REJECT_DUPLICATES), which its header says it
 * matches below JPARSE_MAX_DEPTH (a top-level array or object). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jparse.h"

/* Nesting depth of v: 0 for a scalar. */
static size_t
depth_of(const json_t *v)
{
    size_t d = 0, i;
    const char *k;
    json_t *c;

    if (json_is_array(v)) {
        json_array_foreach(v, i, c)
        {
            size_t cd = depth_of(c);
            d = cd > d ? cd : d;
        }
        return d + 1;
    }
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, c)
        {
            size_t cd = depth_of(c);
            d = cd > d ? cd : d;
        }
        return d + 1;
    }
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ng_error err;
    json_error_t jerr;
    json_t *mine, *ref;

    ng_error_clear(&err);
    mine = jparse_load((const char *)data, size, &err);
    ref = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (mine == NULL)
        FUZZ_ASSERT(err.msg[0] != '\0');
    if (mine != NULL && ref == NULL) {
        fprintf(stderr, "jparse accepted what jansson refuses: %s\n",
                jerr.text);
        abort();
    }
    if (mine == NULL && ref != NULL && depth_of(ref) <= JPARSE_MAX_DEPTH) {
        fprintf(stderr, "jparse refused what jansson accepts: %d:%d: %s\n",
                err.line, err.col, err.msg);
        abort();
    }
    if (mine != NULL && !json_equal(mine, ref)) {
        char *a = json_dumps(mine, JSON_COMPACT | JSON_ENCODE_ANY);
        char *b = json_dumps(ref, JSON_COMPACT | JSON_ENCODE_ANY);

        fprintf(stderr, "different values:\njparse  %s\njansson %s\n",
                a ? a : "?", b ? b : "?");
        abort();
    }
    json_decref(mine);
    json_decref(ref);
    return 0;
}
