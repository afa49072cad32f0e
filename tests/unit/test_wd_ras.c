/* Unit tests for watchdog/ras.c: the STATUS answer of NCCL's RAS service
 * in JSON (NCCL 2.28.7 and later) and in text (v2.24.3 to v2.28.3), laid
 * out as NVIDIA/nccl src/ras/client_support.cc writes them, and the
 * comparison of two answers. */
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

/* A text report with the lines client_support.cc prints (its format
 * strings at v2.24.3, v2.26.2 and v2.28.3): a process missing in two
 * sections, one considered dead, and a MISMATCH block where 2 ranks issued
 * up to operation M, rank 1 fewer, and rank 5 is an outlier of the group. */
static const char text_fmt[] =
    "NCCL version 2.24.3+cuda12.8 compiled with CUDA 12.8\n"
    "CUDA runtime version 12080, driver version 12080\n\n"
    "Job summary\n===========\n\n"
    "\nGathering data about the RAS network (timeout 1s)... obtained a "
    "result in 0.01s\n"
    " Warning: missing data from 1 process (received from 3, expected 4)\n"
    "  The missing process:\n"
    "  Process 4242 on node 10.0.0.2 managing GPU 1\n"
    "\nErrors\n======\n\n"
    "INCOMPLETE\n  Missing communicator data from 1 job process\n"
    "  Process 4242 on node 10.0.0.2 managing GPU 1\n\n"
    "DEAD\n  1 job process is considered dead (unreachable via the RAS "
    "network)\n"
    "  Process 77 on node 10.0.0.3 managing GPUs 0,1\n\n"
    "Warnings\n========\n\n"
    "#0-0 (0000000000001234) MISMATCH\n"
    "  Communicator ranks have different collective operation counts\n"
    "  2 ranks have launched up to operation %d\n"
    "  Rank 5 -- GPU 0 managed by process 105 on node 10.0.0.4\n"
    "  Rank 1 has launched up to operation %d -- GPU 1 managed by process "
    "101 on node 10.0.0.1\n\n";

static void
test_text(void)
{
    struct wd_ras_result r, r2;
    char buf[2048];
    int n = snprintf(buf, sizeof(buf), text_fmt, 42, 41);

    CHECK_INT(wd_ras_parse_text(buf, (size_t)n, &r), 0);
    CHECK(r.text);
    CHECK_STR(r.version, "2.24.3+cuda12.8");
    CHECK_INT(r.communicators, 1);
    /* 4242 is listed twice and counted once; 77 is dead. */
    CHECK_INT(r.n_missing, 2);
    CHECK_INT(r.missing[0].pid, 4242);
    CHECK_INT(r.missing[0].rank, -1);
    CHECK_STR(r.missing[0].host, "10.0.0.2");
    CHECK(r.missing[0].unresponsive && !r.missing[0].dead);
    CHECK_INT(r.missing[1].pid, 77);
    CHECK(r.missing[1].dead);
    /* Rank 1 trails; rank 5 belongs to the group at 42. */
    CHECK_INT(r.n_behind, 1);
    CHECK_INT(r.behind[0].rank, 1);
    CHECK_INT(r.behind[0].pid, 101);
    CHECK_STR(r.behind[0].host, "10.0.0.1");
    CHECK(r.behind[0].done == 41 && r.behind[0].most == 42);
    CHECK_INT((int)r.n_counts, 2);
    /* The same report again: nothing moved. */
    CHECK_INT(wd_ras_parse_text(buf, (size_t)n, &r2), 0);
    CHECK_INT(wd_ras_compare(&r, &r2), WD_RAS_STILL);
    /* Rank 1 issued one more collective: moved. */
    n = snprintf(buf, sizeof(buf), text_fmt, 42, 40);
    CHECK_INT(wd_ras_parse_text(buf, (size_t)n, &r2), 0);
    CHECK_INT(wd_ras_compare(&r, &r2), WD_RAS_MOVED);
    n = snprintf(buf, sizeof(buf), text_fmt, 43, 41);
    CHECK_INT(wd_ras_parse_text(buf, (size_t)n, &r2), 0);
    CHECK_INT(wd_ras_compare(&r, &r2), WD_RAS_MOVED);
}

/* Text without a MISMATCH block: every rank issued the same count, which
 * the text format does not print; nothing to compare. */
static void
test_text_no_counts(void)
{
    static const char t[] = "NCCL version 2.28.3+cuda12.9 compiled with "
                            "CUDA 12.9\n\nErrors\n======\n\n"
                            "Warnings\n========\n\n";
    struct wd_ras_result r;

    CHECK_INT(wd_ras_parse_text(t, sizeof(t) - 1, &r), 0);
    CHECK_INT((int)r.n_counts, 0);
    CHECK_INT(r.n_missing, 0);
    CHECK_INT(wd_ras_compare(&r, &r), WD_RAS_NO_COUNTS);
    /* Not a report: the JSON document, an error line. */
    CHECK_INT(wd_ras_parse_text(status, sizeof(status) - 1, &r), -1);
    CHECK_INT(wd_ras_parse_text("ERROR: Unknown command x\n", 25, &r), -1);
}

/* JSON: the counts are per rank; the same document twice did not move, a
 * rank that issued one more did. */
static void
test_json_compare(void)
{
    struct wd_ras_result a, b;
    char moved[sizeof(status)];
    char *p;

    CHECK_INT(wd_ras_parse(status, sizeof(status) - 1, &a), 0);
    CHECK_INT((int)a.n_counts, 5);
    CHECK_STR(a.version, "2.28.3");
    CHECK(!a.text);
    CHECK_INT(wd_ras_parse(status, sizeof(status) - 1, &b), 0);
    CHECK_INT(wd_ras_compare(&a, &b), WD_RAS_STILL);
    memcpy(moved, status, sizeof(status));
    p = strstr(moved, "\"AllReduce\": 7}}]");
    CHECK(p != NULL);
    if (p != NULL)
        p[13] = '8';
    CHECK_INT(wd_ras_parse(moved, sizeof(status) - 1, &b), 0);
    CHECK_INT(wd_ras_compare(&a, &b), WD_RAS_MOVED);
}

int
main(void)
{
    test_parse();
    test_bad();
    test_text();
    test_text_no_counts();
    test_json_compare();
    return harness_finish();
}
