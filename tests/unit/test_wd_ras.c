/* Unit tests for watchdog/ras.c: the STATUS document of NCCL's RAS service
 * in JSON, laid out as NVIDIA/nccl src/ras/client_support.cc writes it. */
#include <string.h>

#include "harness.h"
#include "watchdog/ras.h"

static const char status[] =
    "{\"nccl_version\": \"2.28.3\", \"communicators_count\": 2,"
    " \"communicators\": ["
    "  {\"hash\": \"0x1\", \"size\": 4, \"ranks_count\": 3,"
    "   \"missing_ranks_count\": 1,"
    "   \"ranks\": ["
    "    {\"rank\": 0, \"host\": \"a\", \"pid\": 10, \"collective_counts\":"
    "     {\"AllReduce\": 42, \"Broadcast\": 1}},"
    "    {\"rank\": 1, \"host\": \"a\", \"pid\": 11, \"collective_counts\":"
    "     {\"AllReduce\": 41, \"Broadcast\": 1}},"
    "    {\"rank\": 2, \"host\": \"b\", \"pid\": 12, \"collective_counts\":"
    "     {\"AllReduce\": 42, \"Broadcast\": 1}}],"
    "   \"missing_ranks\": ["
    "    {\"rank\": 3, \"host\": \"b\", \"pid\": 13, \"status\":"
    "     {\"unresponsive\": true, \"considered_dead\": false}}]},"
    "  {\"hash\": \"0x2\", \"size\": 2, \"ranks_count\": 2,"
    "   \"missing_ranks_count\": 0,"
    "   \"ranks\": ["
    "    {\"rank\": 0, \"host\": \"a\", \"pid\": 10, \"collective_counts\":"
    "     {\"AllReduce\": 7}},"
    "    {\"rank\": 1, \"host\": \"b\", \"pid\": 12, \"collective_counts\":"
    "     {\"AllReduce\": 7}}],"
    "   \"missing_ranks\": []}],"
    " \"ras\": {\"collection_time_sec\": 0.01, \"timeouts_count\": 1}}";

static void
test_parse(void)
{
    struct wd_ras_result r;

    CHECK_INT(wd_ras_parse(status, sizeof(status) - 1, &r), 0);
    CHECK_INT(r.communicators, 2);
    CHECK_INT(r.n_missing, 1);
    CHECK_INT(r.missing[0].rank, 3);
    CHECK_STR(r.missing[0].host, "b");
    CHECK_INT(r.missing[0].pid, 13);
    CHECK(r.missing[0].unresponsive && !r.missing[0].dead);
    /* Only rank 1 of the first communicator trails (42 of 43). */
    CHECK_INT(r.n_behind, 1);
    CHECK_INT(r.behind[0].rank, 1);
    CHECK(r.behind[0].done == 42 && r.behind[0].most == 43);
}

static void
test_bad(void)
{
    static const char *const bad[] = {
        "",
        "not json",
        "[]",
        "{\"communicators\": 3}",
        "{\"nccl_version\": \"2.23\"}", /* no communicators: not STATUS */
    };
    struct wd_ras_result r;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_INT(wd_ras_parse(bad[i], strlen(bad[i]), &r), -1);
}

int
main(void)
{
    test_parse();
    test_bad();
    return harness_finish();
}
