/* Fuzz target: Kubernetes quantity parsing and canonical formatting. */
#include "fuzz.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/quantity.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct quantity q, again;
    struct ng_error err;
    char buf[64];
    int n;

    memset(&q, 0x5a, sizeof(q));
    ng_error_clear(&err);
    if (quantity_parse((const char *)data, size, &q, &err) != 0) {
        /* Every rejection says why, and names no position past the input. */
        FUZZ_ASSERT(err.msg[0] != '\0');
        FUZZ_ASSERT(strlen(err.msg) < sizeof(err.msg));
        return 0;
    }
    if (q.value < 0 || q.milli < 0)
        FUZZ_ASSERT(q.negative);
    if (q.saturated || q.negative || !q.integer)
        return 0;
    /* An exact non-negative integer survives format -> parse unchanged. */
    n = quantity_format_binary(q.value, buf, sizeof(buf));
    FUZZ_ASSERT(n > 0 && (size_t)n < sizeof(buf));
    FUZZ_ASSERT(quantity_parse(buf, (size_t)n, &again, &err) == 0);
    if (again.value != q.value) {
        fprintf(stderr, "%" PRId64 " formatted as %s parses as %" PRId64 "\n",
                q.value, buf, again.value);
        abort();
    }
    FUZZ_ASSERT(again.integer && !again.saturated);
    return 0;
}
