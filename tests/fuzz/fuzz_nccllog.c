/* Fuzz target: the ring check's reading of NCCL's INFO log, a file the
 * NCCL inside the tenant's pod writes (ringcheck/nccllog.c), fed line by
 * line as sv_log_read in ringcheck/supervisor.c feeds it; then the summary,
 * the JSON and the expectation check over whatever was read. */
#include "fuzz.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringcheck/nccllog.h"
#include "ringcheck/proto.h"

#define BOUNDED(a) FUZZ_ASSERT(memchr((a), '\0', sizeof(a)) != NULL)

/* The text is NUL-terminated inside len bytes. */
static void
check_text(const char *buf, size_t len)
{
    FUZZ_ASSERT(len == 0 || memchr(buf, '\0', len) != NULL);
}

static void
check_state(const struct nccllog *l)
{
    int worst;

    BOUNDED(l->p2p_kind);
    BOUNDED(l->socket_if);
    BOUNDED(l->ib_dev);
    BOUNDED(l->net_name);
    BOUNDED(l->trees);
    FUZZ_ASSERT(l->lines >= 0 && l->ring_lines >= 0 && l->tree_lines >= 0);
    FUZZ_ASSERT(l->ring_lines + l->tree_lines <= l->lines);
    /* Channel indices above 1024 are ignored. */
    FUZZ_ASSERT(l->nchannels >= 0 && l->nchannels <= 1025);
    for (int c = 0; c < NL_NCLASSES; c++)
        FUZZ_ASSERT(l->intra[c] >= 0 && l->inter[c] >= 0);
    for (int a = 0; a < NCCLLOG_MAX_LOCAL; a++)
        for (int b = 0; b < NCCLLOG_MAX_LOCAL; b++) {
            FUZZ_ASSERT((l->pair[a][b] >> NL_NCLASSES) == 0);
            FUZZ_ASSERT(l->pair[a][b] == l->pair[b][a]);
        }
    for (int inter = 0; inter < 2; inter++) {
        worst = nccllog_worst(l, inter);
        FUZZ_ASSERT(worst >= -1 && worst < NL_NCLASSES);
        FUZZ_ASSERT(strcmp(nccllog_class_name(worst), "") != 0);
    }
    FUZZ_ASSERT(nccllog_has_channels(l) ==
                (nccllog_worst(l, 0) >= 0 || nccllog_worst(l, 1) >= 0));
}

/* The JSON the report embeds: "null" or one whole object, valid UTF-8. */
static void
check_json(const struct nccllog *l, int lo, int n, size_t len)
{
    char *buf = malloc(len);
    json_error_t je;
    json_t *v;

    FUZZ_ASSERT(buf != NULL);
    nccllog_json(l, lo, n, buf, len);
    check_text(buf, len);
    if (strcmp(buf, "null") != 0 && len > 1) {
        v = json_loads(buf, 0, &je);
        if (!json_is_object(v)) {
            fprintf(stderr, "nccllog_json is not a JSON object (%s): %s\n",
                    je.text, buf);
            abort();
        }
        json_decref(v);
    }
    free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const intra[] = {"", "p2p", "nvlink", "shm", "net"};
    static const char *const inter[] = {"", "ib-gdr", "ib", "socket", "net"};
    static const size_t sizes[] = {1, 24, 160, 2048};
    unsigned char nv[NCCLLOG_MAX_LOCAL][NCCLLOG_MAX_LOCAL];
    char line[PROTO_LINE_MAX], why[512], sum[512];
    struct nccllog l;
    int lo = 0, n = 2;
    FILE *f;

    if (size == 0 || size > (1u << 20))
        return 0;
    /* An optional first line "#lo=N n=M" places this pod's ranks, within
     * the bounds the supervisor has (RINGCHECK_MAX_WORLD, MAX_GPUS). */
    if (size > 4 && memcmp(data, "#lo=", 4) == 0) {
        char head[64];
        size_t k = 0;

        while (k < size && k + 1 < sizeof(head) && data[k] != '\n') {
            head[k] = (char)data[k];
            k++;
        }
        head[k] = '\0';
        if (sscanf(head, "#lo=%d n=%d", &lo, &n) != 2 || lo < 0 ||
            lo > RINGCHECK_MAX_WORLD - 1 || n < 1 || n > RINGCHECK_MAX_GPUS)
            return 0;
    }
    f = fmemopen((void *)data, size, "r");
    if (f == NULL)
        return 0;
    nccllog_init(&l);
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        nccllog_line(&l, line, lo, n);
    }
    fclose(f);
    check_state(&l);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        nccllog_summary(&l, lo, n, sum, sizes[i]);
        check_text(sum, sizes[i]);
        check_json(&l, lo, n, sizes[i]);
    }
    /* NVLink between every even pair only. */
    for (int a = 0; a < NCCLLOG_MAX_LOCAL; a++)
        for (int b = 0; b < NCCLLOG_MAX_LOCAL; b++)
            nv[a][b] = (unsigned char)((a + b) % 2 == 0);
    for (size_t i = 0; i < sizeof(intra) / sizeof(intra[0]); i++)
        for (size_t j = 0; j < sizeof(inter) / sizeof(inter[0]); j++) {
            int rc =
                nccllog_expect(&l, intra[i], inter[j], (i + j) % 2 ? nv : NULL,
                               n, lo, why, sizeof(why));

            check_text(why, sizeof(why));
            /* A refusal says why; nothing expected never fails. */
            FUZZ_ASSERT(rc == 0 || (rc == -1 && why[0] != '\0'));
            FUZZ_ASSERT(rc == 0 || i + j > 0);
        }
    return 0;
}
