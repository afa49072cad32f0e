/* Fuzz target: the node agent's reading of a RAS STATUS reply, which the
 * RAS thread of a tenant's job sends (watchdog/ras.c wd_ras_parse for
 * JSON, wd_ras_parse_text for the text of NCCL before 2.28.7). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watchdog/ras.h"

static void
check_rank(const struct wd_ras_rank *r)
{
    /* The host is always a bounded, NUL-terminated string. */
    FUZZ_ASSERT(memchr(r->host, '\0', sizeof(r->host)) != NULL);
    FUZZ_ASSERT(r->host[0] != '\0');
}

/* The text reading: bounded arrays, counts sorted, behind strictly
 * behind; a comparison with itself never says moved. */
static void
check_text(const uint8_t *data, size_t size)
{
    struct wd_ras_result r;

    if (wd_ras_parse_text((const char *)data, size, &r) != 0)
        return;
    FUZZ_ASSERT(r.text);
    FUZZ_ASSERT(memchr(r.version, '\0', sizeof(r.version)) != NULL);
    FUZZ_ASSERT(r.n_counts <= WD_RAS_MAX_COUNTS);
    for (size_t i = 1; i < r.n_counts; i++)
        FUZZ_ASSERT(r.counts[i - 1].comm < r.counts[i].comm ||
                    (r.counts[i - 1].comm == r.counts[i].comm &&
                     r.counts[i - 1].who <= r.counts[i].who));
    for (int i = 0; i < r.n_missing && i < WD_RAS_MAX_RANKS; i++)
        check_rank(&r.missing[i]);
    for (int i = 0; i < r.n_behind && i < WD_RAS_MAX_RANKS; i++) {
        check_rank(&r.behind[i]);
        FUZZ_ASSERT(r.behind[i].done < r.behind[i].most);
    }
    FUZZ_ASSERT(wd_ras_compare(&r, &r) != WD_RAS_MOVED);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wd_ras_result r;

    if (size > WD_RAS_ANSWER_MAX)
        return 0;
    check_text(data, size);
    memset(&r, 0x5a, sizeof(r));
    if (wd_ras_parse((const char *)data, size, &r) != 0) {
        /* A document that is not STATUS leaves the result alone. */
        FUZZ_ASSERT(((unsigned char *)&r)[0] == 0x5a &&
                    ((unsigned char *)&r)[sizeof(r) - 1] == 0x5a);
        return 0;
    }
    FUZZ_ASSERT(r.communicators >= 0);
    FUZZ_ASSERT(r.n_missing >= 0 && r.n_behind >= 0);
    for (int i = 0; i < r.n_missing && i < WD_RAS_MAX_RANKS; i++) {
        check_rank(&r.missing[i]);
        FUZZ_ASSERT(r.missing[i].done == 0 && r.missing[i].most == 0);
    }
    for (int i = 0; i < r.n_behind && i < WD_RAS_MAX_RANKS; i++) {
        check_rank(&r.behind[i]);
        /* Behind means strictly fewer collectives than the most done. */
        FUZZ_ASSERT(r.behind[i].done < r.behind[i].most);
    }
    /* Nothing is behind in a job without communicators. */
    FUZZ_ASSERT(r.communicators > 0 || (r.n_missing == 0 && r.n_behind == 0));
    return 0;
}
