/* Fuzz target: the NCCLGUARD_WATCHDOG parser the agent runs on every
 * opted-in process's environment, and the writer the webhook uses. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/wdspec.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wd_spec s, again;
    struct ng_error err;
    char buf[512];

    memset(&s, 0x5a, sizeof(s));
    ng_error_clear(&err);
    if (wd_spec_parse((const char *)data, size, &s, &err) != 0) {
        /* Every rejection says why, and leaves the output untouched. */
        FUZZ_ASSERT(err.msg[0] != '\0');
        FUZZ_ASSERT(((unsigned char *)&s)[0] == 0x5a);
        return 0;
    }
    /* Whatever parses is within the shared bounds... */
    FUZZ_ASSERT(s.period_ms >= WD_PERIOD_MIN_MS &&
                s.period_ms <= WD_PERIOD_MAX_MS);
    FUZZ_ASSERT(s.idle_periods >= WD_IDLE_MIN && s.idle_periods <= WD_IDLE_MAX);
    FUZZ_ASSERT(s.min_cpu_milli >= 0 &&
                s.min_cpu_milli <= WD_MIN_CPU_MAX_MILLI);
    FUZZ_ASSERT(s.grace_ms >= 0 && s.grace_ms <= WD_GRACE_MAX_MS);
    FUZZ_ASSERT(s.term_ms >= 0 && s.term_ms <= WD_TERM_MAX_MS);
    FUZZ_ASSERT(wd_signal_name(s.checkpoint_signal) != NULL);
    FUZZ_ASSERT(strlen(s.checkpoint_file) <= WD_FILE_MAX);
    /* ...and survives the webhook's writer and the agent's parser. */
    FUZZ_ASSERT(wd_spec_format(&s, buf, sizeof(buf)) == 0);
    if (wd_spec_parse(buf, strlen(buf), &again, &err) != 0 ||
        memcmp(&s, &again, sizeof(s)) != 0) {
        fprintf(stderr, "round trip failed: %s\n", buf);
        abort();
    }
    return 0;
}
