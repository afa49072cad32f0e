/* Fuzz target: the node loop's classification of termination messages
 * (nodeloop/nodeclass.c). A ring-check init container's message is text
 * that whoever runs a container of that name in a pod can write; the
 * first byte of the input is its exit code ('0'..'9', else the byte as a
 * signed number), the rest the message, in an exactly-sized buffer with
 * no NUL after it. */
#include "fuzz.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nodeloop/nodeclass.h"

#define BOUNDED(a) FUZZ_ASSERT(memchr((a), '\0', sizeof(a)) != NULL)

/* Whether s (a C string) is valid UTF-8: jansson checks it. */
static int
utf8_ok(const char *s)
{
    json_t *v = json_string(s);

    json_decref(v);
    return v != NULL;
}

static int
utf8_okn(const char *s, size_t n)
{
    json_t *v = json_stringn(s, n);
    int ok;

    ok = v != NULL;
    json_decref(v);
    return ok;
}

/* What every classification holds, and what the Event and the node's
 * state are built from: bounded strings, valid UTF-8 whenever the
 * message was (the API server's JSON and the Event body must be). */
static void
check_result(const struct nc_result *r, int text_utf8)
{
    BOUNDED(r->cure);
    BOUNDED(r->reason);
    BOUNDED(r->summary);
    FUZZ_ASSERT(r->reason[0] != '\0');
    FUZZ_ASSERT(r->summary[0] != '\0');
    FUZZ_ASSERT(r->cls >= NC_CLASS_NONE && r->cls <= NC_CLASS_UNKNOWN);
    FUZZ_ASSERT(r->verdict >= NC_VERDICT_PASS &&
                r->verdict <= NC_VERDICT_LOST_GPU);
    FUZZ_ASSERT(r->phase >= -1 && r->phase <= 9999);
    /* A pass blames nobody, and only a pass blames nobody. */
    FUZZ_ASSERT((r->cls == NC_CLASS_NONE) == (r->verdict == NC_VERDICT_PASS));
    if (text_utf8) {
        if (!utf8_ok(r->summary) || !utf8_ok(r->cure)) {
            fprintf(stderr, "not UTF-8: summary \"%s\" cure \"%s\"\n",
                    r->summary, r->cure);
            abort();
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nc_result r;
    const char *msg;
    size_t len;
    int exit_code, utf8;

    if (size == 0)
        return 0;
    exit_code = data[0] >= '0' && data[0] <= '9' ? data[0] - '0'
                                                 : (int)(signed char)data[0];
    msg = (const char *)data + 1;
    len = size - 1;
    /* The node loop passes what jansson decoded: UTF-8 without NULs. */
    utf8 = memchr(msg, '\0', len) == NULL && utf8_okn(msg, len);
    memset(&r, 0x5a, sizeof(r));
    nc_classify_ringcheck(exit_code, msg, len, &r);
    check_result(&r, utf8);
    FUZZ_ASSERT(r.verdict != NC_VERDICT_HANG &&
                r.verdict != NC_VERDICT_LOST_GPU);
    FUZZ_ASSERT(r.verdict != NC_VERDICT_PASS || exit_code == 0);
    /* Only the check's own failure lines can blame the node or a pair. */
    if (r.cls == NC_CLASS_NODE || r.cls == NC_CLASS_PAIR)
        FUZZ_ASSERT(r.verdict == NC_VERDICT_FAIL ||
                    r.verdict == NC_VERDICT_FALLBACK ||
                    r.verdict == NC_VERDICT_WARN);
    /* The same text as a main container's message: a hang report or
     * nothing, and never held against the node. */
    memset(&r, 0x5a, sizeof(r));
    if (nc_classify_hang_report(msg, len, &r) == 0) {
        check_result(&r, utf8);
        FUZZ_ASSERT((r.verdict == NC_VERDICT_HANG ||
                     r.verdict == NC_VERDICT_LOST_GPU) &&
                    r.cls == NC_CLASS_UNKNOWN);
    } else {
        FUZZ_ASSERT(((unsigned char *)&r)[0] == 0x5a);
    }
    /* The hosts of the failing pairs: bounded, distinct, each a name
     * without separators. */
    {
        char hosts[NC_PAIR_HOSTS][NC_HOST_MAX];
        int nh = nc_pair_hosts(msg, len, hosts, NC_PAIR_HOSTS);

        FUZZ_ASSERT(nh >= 0 && nh <= NC_PAIR_HOSTS);
        for (int i = 0; i < nh; i++) {
            size_t hl = strnlen(hosts[i], NC_HOST_MAX);

            FUZZ_ASSERT(hl > 0 && hl < NC_HOST_MAX);
            FUZZ_ASSERT(strpbrk(hosts[i], ", \n") == NULL);
            for (int j = 0; j < i; j++)
                FUZZ_ASSERT(strcmp(hosts[i], hosts[j]) != 0);
        }
        FUZZ_ASSERT(nc_pair_hosts(msg, len, hosts, 0) == 0);
    }
    /* No message at all. */
    nc_classify_ringcheck(exit_code, NULL, 0, &r);
    check_result(&r, 1);
    return 0;
}
