/* Unit tests of ringcheck/proto.c: every message encodes and parses back,
 * and malformed lines are refused. */
#include "harness.h"
#include "ringcheck/proto.h"

#include <string.h>

/* Encodes m, checks the line, parses it back into *back. */
static void
roundtrip(const struct proto_msg *m, const char *want, struct proto_msg *back)
{
    char line[PROTO_LINE_MAX];
    int n = proto_encode(m, line, sizeof(line));

    CHECK(n > 0);
    if (n <= 0)
        return;
    CHECK(line[n - 1] == '\n');
    line[n - 1] = '\0';
    CHECK_STR(line, want);
    CHECK_INT(proto_parse(line, back), 0);
    CHECK_INT(back->kind, m->kind);
}

static void
test_each_message(void)
{
    struct proto_msg m, b;

    m = (struct proto_msg){.kind = 'P'};
    m.u.phase.begin = 1;
    m.u.phase.phase = 4;
    roundtrip(&m, "P b 4", &b);
    CHECK_INT(b.u.phase.begin, 1);
    CHECK_INT(b.u.phase.phase, 4);

    m = (struct proto_msg){.kind = 'V'};
    m.u.versions.nccl = 22809;
    m.u.versions.runtime = 13000;
    m.u.versions.driver = 13010;
    roundtrip(&m, "V 22809 13000 13010", &b);
    CHECK_INT(b.u.versions.nccl, 22809);
    CHECK_INT(b.u.versions.driver, 13010);

    m = (struct proto_msg){.kind = 'N'};
    m.u.ndev.count = 8;
    roundtrip(&m, "N 8", &b);
    CHECK_INT(b.u.ndev.count, 8);

    m = (struct proto_msg){.kind = 'G'};
    m.u.gpu.dev = 3;
    m.u.gpu.total_mib = 143771;
    snprintf(m.u.gpu.busid, sizeof(m.u.gpu.busid), "00000000:1B:00.0");
    snprintf(m.u.gpu.uuid, sizeof(m.u.gpu.uuid), "0a0b");
    snprintf(m.u.gpu.name, sizeof(m.u.gpu.name), "NVIDIA H200");
    roundtrip(&m, "G 3 143771 00000000:1B:00.0 0a0b NVIDIA H200", &b);
    CHECK_INT(b.u.gpu.dev, 3);
    CHECK_INT(b.u.gpu.total_mib, 143771);
    CHECK_STR(b.u.gpu.busid, "00000000:1B:00.0");
    CHECK_STR(b.u.gpu.name, "NVIDIA H200");

    m = (struct proto_msg){.kind = 'F'};
    m.u.free.dev = 1;
    m.u.free.free_mib = 81000;
    roundtrip(&m, "F 1 81000", &b);
    CHECK_INT(b.u.free.free_mib, 81000);

    m = (struct proto_msg){.kind = 'C'};
    m.u.cc.dev = 2;
    m.u.cc.major = 9;
    m.u.cc.minor = 0;
    roundtrip(&m, "C 2 9 0", &b);
    CHECK_INT(b.u.cc.major, 9);

    m = (struct proto_msg){.kind = 'T'};
    m.u.topo.dev = 0;
    m.u.topo.peer = 1;
    m.u.topo.access = 1;
    m.u.topo.perf = 0;
    m.u.topo.atomics = 1;
    roundtrip(&m, "T 0 1 1 0 1", &b);
    CHECK_INT(b.u.topo.peer, 1);
    CHECK_INT(b.u.topo.atomics, 1);

    m = (struct proto_msg){.kind = 'U'};
    snprintf(m.u.uid.hex, sizeof(m.u.uid.hex), "00ff10ab");
    roundtrip(&m, "U 00ff10ab", &b);
    CHECK_STR(b.u.uid.hex, "00ff10ab");

    m = (struct proto_msg){.kind = 'R'};
    m.u.result.rank = 1;
    snprintf(m.u.result.op, sizeof(m.u.result.op), "allreduce");
    snprintf(m.u.result.type, sizeof(m.u.result.type), "int32");
    m.u.result.bytes = 16777216;
    m.u.result.count = 4194304;
    m.u.result.root = -1;
    m.u.result.time_us = 812.5;
    m.u.result.wrong = 2;
    m.u.result.first = 8388608;
    roundtrip(&m, "R 1 allreduce int32 16777216 4194304 -1 812.5 2 8388608",
              &b);
    CHECK_STR(b.u.result.op, "allreduce");
    CHECK_STR(b.u.result.type, "int32");
    CHECK_INT(b.u.result.bytes, 16777216);
    CHECK_INT(b.u.result.root, -1);
    CHECK_INT(b.u.result.wrong, 2);
    CHECK_INT(b.u.result.first, 8388608);

    m = (struct proto_msg){.kind = 'B'};
    m.u.bw.rank = 0;
    m.u.bw.bytes = 268435456;
    m.u.bw.iters = 20;
    m.u.bw.time_us = 1500.25;
    m.u.bw.wrong = 0;
    m.u.bw.first = -1;
    roundtrip(&m, "B 0 268435456 20 1500.2 0 -1", &b);
    CHECK_INT(b.u.bw.bytes, 268435456);
    CHECK_INT(b.u.bw.first, -1);

    m = (struct proto_msg){.kind = 'S'};
    m.u.stuck.rank = -1;
    m.u.stuck.dev = 2;
    snprintf(m.u.stuck.what, sizeof(m.u.stuck.what), "cudaMemsetAsync");
    roundtrip(&m, "S -1 2 cudaMemsetAsync", &b);
    CHECK_INT(b.u.stuck.rank, -1);
    CHECK_STR(b.u.stuck.what, "cudaMemsetAsync");

    m = (struct proto_msg){.kind = 'A'};
    roundtrip(&m, "A", &b);
    m = (struct proto_msg){.kind = 'X'};
    roundtrip(&m, "X", &b);

    m = (struct proto_msg){.kind = 'E'};
    m.u.error.code = 3;
    m.u.error.phase = 4;
    snprintf(m.u.error.ranks, sizeof(m.u.error.ranks), "1,3");
    snprintf(m.u.error.msg, sizeof(m.u.error.msg),
             "ncclGroupEnd failed\non "
             "rank 1");
    roundtrip(&m, "E 3 4 1,3 ncclGroupEnd failed on rank 1", &b);
    CHECK_INT(b.u.error.code, 3);
    CHECK_STR(b.u.error.ranks, "1,3");
    CHECK_STR(b.u.error.msg, "ncclGroupEnd failed on rank 1");

    /* The whole worker: no rank list travels as "-". */
    m.u.error.ranks[0] = '\0';
    roundtrip(&m, "E 3 4 - ncclGroupEnd failed on rank 1", &b);
    CHECK_STR(b.u.error.ranks, "");

    m = (struct proto_msg){.kind = 'I'};
    snprintf(m.u.info.msg, sizeof(m.u.info.msg), "hello world");
    roundtrip(&m, "I hello world", &b);
    CHECK_STR(b.u.info.msg, "hello world");
}

static void
test_malformed(void)
{
    static const char *const bad[] = {
        "",
        "Q 1",
        "P x 3",
        "P b",
        "P b 3 4",
        "V 1 2",
        "N",
        "N 2 junk",
        "F 1",
        "T 0 1 1 0",
        "U",
        "U 00zz",
        "R 1 allreduce int32 8 2 -1 1.0 0", /* no FIRST */
        "B 0 8 20 1.0",
        "S 1",
        "A junk",
        "X 1",
        "E 3",
        "E 3 4",
        "Ifoo",
    };
    struct proto_msg m;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int r = proto_parse(bad[i], &m);

        if (r != -1)
            fprintf(stderr, "accepted malformed line \"%s\"\n", bad[i]);
        CHECK_INT(r, -1);
    }
}

/* A line that does not fit is refused, never cut mid-structure. */
static void
test_too_long(void)
{
    struct proto_msg m = {.kind = 'I'};
    char small[8];

    snprintf(m.u.info.msg, sizeof(m.u.info.msg), "a long message");
    CHECK_INT(proto_encode(&m, small, sizeof(small)), -1);
    m.kind = 'Z';
    CHECK_INT(proto_encode(&m, small, sizeof(small)), -1);
}

int
main(void)
{
    test_each_message();
    test_malformed();
    test_too_long();
    return harness_finish();
}
