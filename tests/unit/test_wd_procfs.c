/* Unit tests for watchdog/procfs.c: /proc/PID/stat with hostile command
 * names, environ lookup, SigCgt, net/tcp rows, and the live readers on this
 * process. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "watchdog/procfs.h"

static void
test_stat(void)
{
    /* Field 22 is the start time; 14 and 15 utime and stime. */
    static const char plain[] =
        "4242 (python3) S 1 4242 4242 0 -1 4194560 5000 0 0 0 "
        "150 25 0 0 20 0 12 0 987654 1000000 2000 18446744073709551615 "
        "1 1 0 0 0 0 0 16781312 17922 0 0 0 17 3 0 0 0 0 0\n";
    /* A command name may hold spaces and ") " itself. */
    static const char tricky[] =
        "77 (a) b (c) d) R 1 77 77 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 31337 0 "
        "0\n";
    struct wd_stat st;

    CHECK_INT(wd_stat_parse(plain, strlen(plain), &st), 0);
    CHECK_INT(st.state, 'S');
    CHECK_INT(st.cpu_ticks, 175);
    CHECK_INT(st.start, 987654);
    CHECK_INT(wd_stat_parse(tricky, strlen(tricky), &st), 0);
    CHECK_INT(st.state, 'R');
    CHECK_INT(st.cpu_ticks, 15);
    CHECK_INT(st.start, 31337);
    {
        /* The name's hash covers the whole name, ") " inside it too, and
         * changes with it (execve(2) renames, keeps the start time). */
        static const char renamed[] =
            "77 (a) b (c) e) R 1 77 77 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 31337 "
            "0 0\n";
        static const char same[] =
            "78 (a) b (c) d) S 1 78 78 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 0 "
            "0\n";
        uint32_t h = st.comm_hash;
        struct wd_stat st2;

        CHECK_INT(wd_stat_parse(renamed, strlen(renamed), &st2), 0);
        CHECK(st2.comm_hash != h);
        CHECK_INT(st2.start, st.start);
        CHECK_INT(wd_stat_parse(same, strlen(same), &st2), 0);
        CHECK(st2.comm_hash == h);
        CHECK_INT(wd_stat_parse(plain, strlen(plain), &st2), 0);
        CHECK(st2.comm_hash != h);
    }
    CHECK_INT(wd_stat_parse("1 (x) S 1 2 3", 13, &st), -1);
    CHECK_INT(wd_stat_parse("no paren", 8, &st), -1);
    CHECK_INT(wd_stat_parse("", 0, &st), -1);
}

static void
test_environ(void)
{
    static const char env[] = "PATH=/bin\0NCCLGUARD_WATCHDOG_X=no\0"
                              "NCCLGUARD_WATCHDOG=period=60s,idle=5\0"
                              "EMPTY=\0";
    size_t vl = 0;
    const char *v;

    v = wd_environ_find(env, sizeof(env) - 1, "NCCLGUARD_WATCHDOG", &vl);
    CHECK(v != NULL && vl == 17 && memcmp(v, "period=60s,idle=5", 17) == 0);
    CHECK(wd_environ_find(env, sizeof(env) - 1, "PAT", &vl) == NULL);
    v = wd_environ_find(env, sizeof(env) - 1, "EMPTY", &vl);
    CHECK(v != NULL && vl == 0);
    /* A block cut short (environ larger than the read) still parses. */
    CHECK(wd_environ_find(env, 12, "NCCLGUARD_WATCHDOG", &vl) == NULL);
}

static void
test_sigcgt(void)
{
    /* bit n-1 for signal n: 0x...4a02 = SIGINT(2), SIGUSR1(10),
     * SIGUSR2(12), SIGTERM(15). */
    static const char status[] = "Name:\tpython3\nSigBlk:\t0000000000000000\n"
                                 "SigIgn:\t0000000000001000\n"
                                 "SigCgt:\t0000000180004a02\n";

    CHECK(wd_status_catches(status, strlen(status), SIGUSR1));
    CHECK(wd_status_catches(status, strlen(status), SIGUSR2));
    CHECK(wd_status_catches(status, strlen(status), SIGINT));
    CHECK(wd_status_catches(status, strlen(status), SIGTERM));
    CHECK(!wd_status_catches(status, strlen(status), SIGHUP));
    CHECK(!wd_status_catches(status, strlen(status), SIGWINCH));
    CHECK(!wd_status_catches("Name:\tx\n", 8, SIGUSR1));
}

static void
test_tcp(void)
{
    /* Two rows from /proc/net/tcp: a listener and a CLOSE_WAIT socket
     * with 5 bytes unread, then one from tcp6 with a send queue. */
    static const char tcp[] =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when "
        "retrnsmt   uid  timeout inode\n"
        "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 "
        "00000000     0        0 31337 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0100007F:A1B2 0100007F:1F90 08 00000000:00000005 00:00000000 "
        "00000000  1000        0 424242 1 0000000000000000 20 4 30 10 -1\n"
        "   2: 00000000000000000000000001000000:1F90 "
        "00000000000000000000000001000000:D431 01 0001F400:00000000 "
        "01:00000014 00000000     0        0 99 1 0 20 4 30 10 -1\n"
        "   3: garbage\n";
    struct wd_tcp rows[4];
    size_t dropped = 9;
    size_t n = wd_tcp_parse(tcp, strlen(tcp), rows, 4, &dropped);

    CHECK_INT(n, 3);
    CHECK_INT(dropped, 0);
    CHECK_INT(rows[0].state, WD_TCP_LISTEN);
    CHECK_INT(rows[0].inode, 31337);
    CHECK_INT(rows[1].state, WD_TCP_CLOSE_WAIT);
    CHECK_INT(rows[1].rx_queue, 5);
    CHECK_INT(rows[1].tx_queue, 0);
    CHECK_INT(rows[1].inode, 424242);
    CHECK_INT(rows[2].state, WD_TCP_ESTABLISHED);
    CHECK_INT(rows[2].tx_queue, 0x1F400);
    CHECK_INT(rows[2].inode, 99);
    CHECK_INT(wd_tcp_parse(tcp, strlen(tcp), rows, 1, &dropped), 1);
    CHECK_INT(dropped, 2);
}

/* /proc/PID/io: rchar + wchar, as the kernel prints them
 * (Documentation/filesystems/proc.rst, "/proc/<pid>/io"). */
static void
test_io(void)
{
    static const char io[] = "rchar: 323934931\nwchar: 323929600\n"
                             "syscr: 632687\nsyscw: 632675\n"
                             "read_bytes: 0\nwrite_bytes: 323932160\n"
                             "cancelled_write_bytes: 0\n";
    uint64_t b = 7;

    CHECK_INT(wd_io_parse(io, sizeof(io) - 1, &b), 0);
    CHECK(b == 323934931ULL + 323929600ULL);
    b = 7;
    CHECK_INT(wd_io_parse("rchar: 5\n", 9, &b), -1); /* no wchar */
    CHECK(b == 7);
    CHECK_INT(wd_io_parse("xrchar: 5\nwchar: 1\n", 19, &b), -1);
    CHECK_INT(wd_io_parse("rchar: \nwchar: 1\n", 17, &b), -1);
    CHECK_INT(wd_io_parse("rchar: 99999999999999999999\nwchar: 1\n", 37, &b),
              -1);
}

static void
test_live(void)
{
    struct wd_stat st;
    uint64_t inodes[64];
    char buf[64];
    int sv[2];
    ssize_t n, m;

    CHECK_INT(wd_proc_stat("/proc", getpid(), &st), 0);
    CHECK(st.start > 0);
    CHECK_INT(wd_proc_stat("/proc", -5, &st), -1);
    n = wd_proc_socket_inodes("/proc", getpid(), inodes, 64, NULL);
    CHECK(n >= 0);
    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    m = wd_proc_socket_inodes("/proc", getpid(), inodes, 64, NULL);
    CHECK_INT(m, n + 2);
    for (ssize_t i = 1; i < m; i++)
        CHECK(inodes[i - 1] < inodes[i]);
    /* An entry budget: every fd looked at takes one, sockets or not, and
     * the listing stops at 0. With none left nothing is read; with many
     * the budget shrinks by at least the two sockets' entries. */
    {
        size_t left = 0, before;

        CHECK_INT(wd_proc_socket_inodes("/proc", getpid(), inodes, 64, &left),
                  0);
        left = before = 100000;
        CHECK_INT(wd_proc_socket_inodes("/proc", getpid(), inodes, 64, &left),
                  m);
        CHECK(before - left >= 2 && before - left < 1000);
    }
    close(sv[0]);
    close(sv[1]);
    /* A read never overflows the buffer and is NUL-terminated. */
    n = wd_proc_read("/proc", getpid(), "status", buf, sizeof(buf));
    CHECK_INT(n, (ssize_t)sizeof(buf) - 1);
    CHECK_INT(buf[sizeof(buf) - 1], '\0');
}

int
main(void)
{
    test_stat();
    test_environ();
    test_sigcgt();
    test_tcp();
    test_io();
    test_live();
    return harness_finish();
}
