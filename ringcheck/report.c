/* Tells what the ring check found: log lines, the nccl-tests table, the JSON
 * summary, the termination message and the fallback NCCL config file. */
#include "ringcheck/report.h"

#include "base/text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *
report_phase_name(int p)
{
    static const char *const names[] = {"preflight", "devices",     "topology",
                                        "nccl-init", "correctness", "bandwidth",
                                        "teardown",  "cross-node"};

    return p >= 0 && p < 8 ? names[p] : "none";
}

const char *
report_code_name(int code)
{
    switch (code) {
    case 0:
        return "pass";
    case 1:
        return "internal error";
    case 2:
        return "CUDA error";
    case 3:
        return "NCCL error";
    case 4:
        return "timeout or hang";
    case 6:
        return "usage error";
    case 7:
        return "wrong results";
    case 8:
        return "bandwidth below the threshold";
    case 9:
        return "environment";
    case 10:
        return "transport other than expected";
    default:
        return "unknown";
    }
}

void
report_log(const char *fmt, ...)
{
    struct timespec ts;
    struct tm tm;
    char stamp[32];
    va_list ap;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    printf("%s.%03ldZ ringcheck: ", stamp, ts.tv_nsec / 1000000);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

void
report_topology(const struct rc_report *r)
{
    const struct rc_run *p = &r->pre;

    printf("        ");
    for (int j = 0; j < r->ndev; j++)
        printf("GPU%-5d", r->dev[j]);
    printf("PCI bus id\n");
    for (int i = 0; i < r->ndev; i++) {
        int a = r->dev[i];

        printf("GPU%-5d", a);
        for (int j = 0; j < r->ndev; j++) {
            int b = r->dev[j];
            const char *link = r->link[a][b][0] != '\0' ? r->link[a][b] : "PCI";
            char cell[16];

            if (a == b)
                snprintf(cell, sizeof(cell), "X");
            else if (p->access[a][b] > 0)
                snprintf(cell, sizeof(cell), "%s", link);
            else
                snprintf(cell, sizeof(cell), "%s,NS", link);
            printf("%-8s", cell);
        }
        printf("%s\n", p->gpu[a].busid);
    }
    printf("\nLegend:\n  X    = self\n"
           "  NV   = NVLink (the pair has native peer atomics)\n"
           "  PIX  = PCIe through one switch at most\n"
           "  PXB  = PCIe through several switches\n"
           "  PHB  = PCIe through the host bridge (the CPU)\n"
           "  NODE = PCIe between host bridges of one NUMA node\n"
           "  SYS  = PCIe and the link between NUMA nodes\n"
           "  PCI  = PCIe, path unknown (no sysfs entry)\n"
           "  ,NS  = peer access not supported (cudaDeviceCanAccessPeer): "
           "NCCL goes through host memory or the network\n");
    fflush(stdout);
}

/* nccl-tests' factors (src/all_reduce.cu, all_gather.cu, broadcast.cu):
 * 2(n-1)/n and (n-1)/n are 0 with one rank. */
static double
row_busbw_factor(const struct rc_row *row, int n)
{
    if (n <= 1)
        return strcmp(row->op, "broadcast") == 0 ? 1.0 : 0.0;
    if (strcmp(row->op, "allreduce") == 0)
        return 2.0 * (n - 1) / n;
    if (strcmp(row->op, "allgather") == 0)
        return (double)(n - 1) / n;
    return 1.0;
}

/* Bytes a row's size column shows: AllGather counts what each rank
 * receives, as nccl-tests does. */
static size_t
row_size(const struct rc_row *row, int n)
{
    return strcmp(row->op, "allgather") == 0 ? row->bytes * (size_t)n
                                             : row->bytes;
}

void
report_table(const struct rc_report *r)
{
    const struct rc_run *g = &r->ring;
    int n = r->ndev;
    double sum = 0;
    int timed = 0;

    printf("#\n"
           "#                                                       "
           "out-of-place\n"
           "#       size         count      type   redop    root     time"
           "   algbw   busbw #wrong  op\n"
           "#        (B)    (elements)                               (us)"
           "  (GB/s)  (GB/s)\n");
    for (int i = 0; i < g->nrows; i++) {
        const struct rc_row *row = &g->rows[i];
        size_t size = row_size(row, n);
        double algbw = row->time_us > 0 ? (double)size / row->time_us / 1e3 : 0;
        double busbw = algbw * row_busbw_factor(row, n);
        const char *redop = strcmp(row->op, "allreduce") == 0 ? "sum" : "none";
        const char *type = row->type[0] != '\0' ? row->type : "int32";

        printf("%12zu  %12zu  %8s  %6s  %6d  %7.1f  %6.2f  %6.2f  %5ld  %s%s\n",
               size,
               strcmp(row->op, "allgather") == 0 ? row->count * (size_t)n
                                                 : row->count,
               type, redop, row->root, row->time_us, algbw, busbw, row->wrong,
               row->op, row->timed ? " (bandwidth)" : "");
        if (row->wrong > 0)
            printf("#  ^ %ld wrong values\n", row->wrong);
        if (row->timed) {
            sum += busbw;
            timed++;
        }
    }
    printf("# Out of bounds values : %ld %s\n", r->wrong_total,
           r->wrong_total == 0 ? "OK" : "FAILED");
    printf("# Avg bus bandwidth    : %g \n", timed > 0 ? sum / timed : 0.0);
    {
        char t[400];

        nccllog_summary(&g->nl, 0, n, t, sizeof(t));
        printf("# NCCL transport       : %s\n#\n", t);
    }
    fflush(stdout);
}

/* Appends to a bounded buffer; remembers overflow. */
struct out {
    char *buf;
    size_t len, cap;
    int overflow;
};

static void out_add(struct out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
out_add(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (o->overflow)
        return;
    va_start(ap, fmt);
    n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= o->cap - o->len) {
        o->overflow = 1;
        o->len = o->cap - 1;
        return;
    }
    o->len += (size_t)n;
}

/* A JSON string of s. JSON text is UTF-8 (RFC 8259, section 8.1), and the
 * strings here carry bytes from outside (an interface name, NCCL's log, a
 * node name): a byte that starts no well-formed UTF-8 sequence is written
 * as U+FFFD, so that the report always parses. */
static void
out_json_str(struct out *o, const char *s)
{
    out_add(o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0';) {
        size_t n = text_utf8_seq_len(p);

        if (*p == '"' || *p == '\\')
            out_add(o, "\\%c", *p);
        else if (*p < 0x20)
            out_add(o, "\\u%04x", *p);
        else if (n == 0)
            out_add(o, "\\ufffd");
        else
            out_add(o, "%.*s", (int)n, (const char *)p);
        p += n > 0 ? n : 1;
    }
    out_add(o, "\"");
}

static void
out_json_str_or_null(struct out *o, const char *s)
{
    if (s == NULL || *s == '\0')
        out_add(o, "null");
    else
        out_json_str(o, s);
}

static void
version_str(int code, int nccl, char *buf, size_t len)
{
    if (code <= 0)
        snprintf(buf, len, "unknown");
    else if (nccl)
        snprintf(buf, len, "%d.%d.%d", code / 10000, code / 100 % 100,
                 code % 100);
    else
        snprintf(buf, len, "%d.%d", code / 1000, code % 1000 / 10);
}

int
report_json(const struct rc_report *r, char *buf, size_t len)
{
    struct out o = {buf, 0, len, 0};
    char v[32];

    buf[0] = '\0';
    out_add(&o, "{\"ringcheck\":");
    out_json_str(&o, r->result);
    out_add(&o, ",\"exit\":%d,\"code\":%d,\"code_name\":", r->exit_code,
            r->code);
    out_json_str(&o, report_code_name(r->code));
    if (r->code != 0)
        out_add(&o, ",\"phase\":%d,\"phase_name\":\"%s\"", r->phase,
                report_phase_name(r->phase));
    else
        out_add(&o, ",\"phase\":null,\"phase_name\":null");
    out_add(&o, ",\"mode\":\"%s\",\"expected_gpus\":%d,\"gpus\":%d",
            r->opts->group ? "group" : "process", r->opts->expect_gpus,
            r->pre.ngpus);
    version_str(r->pre.nccl_version, 1, v, sizeof(v));
    out_add(&o, ",\"nccl_version\":\"%s\"", v);
    version_str(r->pre.cuda_runtime, 0, v, sizeof(v));
    out_add(&o, ",\"cuda_runtime\":\"%s\"", v);
    version_str(r->pre.cuda_driver, 0, v, sizeof(v));
    out_add(&o, ",\"cuda_driver\":\"%s\",\"message\":", v);
    out_json_str_or_null(&o, r->what);
    out_add(&o, ",\"ranks\":");
    out_json_str_or_null(&o, r->ranks);
    if (r->pair[0] >= 0)
        out_add(&o, ",\"gpu_pair\":[%d,%d]", r->pair[0], r->pair[1]);
    else
        out_add(&o, ",\"gpu_pair\":null");
    out_add(&o, ",\"transport\":");
    out_json_str_or_null(&o, r->transport);
    out_add(&o, ",\"cure\":");
    out_json_str_or_null(&o, r->cure);
    out_add(&o, ",\"diagnosis\":");
    out_json_str_or_null(&o, r->diag_note);
    out_add(&o, ",\"nccl_warn\":");
    out_json_str_or_null(&o, r->warn);
    out_add(&o, ",\"fix\":");
    out_json_str_or_null(&o, r->fix);
    out_add(&o, ",\"id_addr\":");
    out_json_str_or_null(&o, r->ring.id_addr);
    out_add(&o, ",\"gpu_sharing\":");
    out_json_str_or_null(&o, r->sharing);
    out_add(&o, ",\"cannot_run\":");
    out_json_str_or_null(&o, r->cannot_run);
    out_add(&o, ",\"on_no_cure\":\"%s\",\"no_cure_warn\":%s",
            r->opts->on_no_cure == RC_NOCURE_WARN ? "warn" : "fail",
            r->no_cure_warn ? "true" : "false");
    out_add(&o, ",\"out_of_bounds\":%ld", r->wrong_total);
    if (r->busbw >= 0)
        out_add(&o, ",\"bw_bytes\":%zu,\"algbw_gbps\":%.3f,\"busbw_gbps\":%.3f",
                r->bw_bytes, r->algbw, r->busbw);
    else
        out_add(&o,
                ",\"bw_bytes\":%zu,\"algbw_gbps\":null,"
                "\"busbw_gbps\":null",
                r->bw_bytes);
    if (r->opts->min_busbw > 0)
        out_add(&o, ",\"min_busbw_gbps\":%.3f", r->opts->min_busbw);
    out_add(&o, ",\"fallback_conf\":");
    out_json_str_or_null(&o,
                         r->fallback_written ? r->opts->fallback_conf : NULL);
    {
        static char t[2048];

        nccllog_json(&r->ring.nl, 0, r->ndev, t, sizeof(t));
        out_add(&o, ",\"nccl_transport\":%s", t);
    }
    if (r->opts->expect.intra[0] != '\0' || r->opts->expect.inter[0] != '\0') {
        out_add(&o, ",\"expect_transport\":{\"intra\":");
        out_json_str_or_null(&o, r->opts->expect.intra);
        out_add(&o, ",\"inter\":");
        out_json_str_or_null(&o, r->opts->expect.inter);
        out_add(&o, "}");
    } else {
        out_add(&o, ",\"expect_transport\":null");
    }
    out_add(&o, ",\"multinode\":%s",
            r->mn_json[0] != '\0' ? r->mn_json : "null");
    out_add(&o, ",\"warnings\":%d,\"elapsed_s\":%.3f}", r->nwarnings,
            r->elapsed_s);
    return o.overflow ? -1 : 0;
}

void
report_verdict(const struct rc_report *r, char *buf, size_t len)
{
    struct out o = {buf, 0, len < 4096 ? len : 4096, 0};
    char v[32], rt[32], drv[32];

    buf[0] = '\0';
    version_str(r->pre.nccl_version, 1, v, sizeof(v));
    version_str(r->pre.cuda_runtime, 0, rt, sizeof(rt));
    version_str(r->pre.cuda_driver, 0, drv, sizeof(drv));
    if (r->code == 0) {
        out_add(&o, "ncclguard-ringcheck passed: %d GPU%s, mode %s", r->ndev,
                r->ndev == 1 ? "" : "s", r->opts->group ? "group" : "process");
        if (r->busbw >= 0)
            out_add(&o, ", busbw %.2f GB/s at %zu B", r->busbw, r->bw_bytes);
        out_add(&o, "; NCCL %s, CUDA runtime %s, driver %s\n", v, rt, drv);
        if (r->ring.nl.lines > 0) {
            char t[400];

            nccllog_summary(&r->ring.nl, 0, r->ndev, t, sizeof(t));
            out_add(&o, "nccl transport: %s\n", t);
        }
        if (r->sharing[0] != '\0')
            out_add(&o,
                    "gpu sharing: %s: %d requested, %d visible; NCCL ran on "
                    "the visible ones only\n",
                    r->sharing, r->opts->expect_gpus, r->ndev);
        if (r->mn_text[0] != '\0')
            out_add(&o, "%s", r->mn_text);
        return;
    }
    if (strcmp(r->result, "fallback") == 0)
        out_add(&o,
                "ncclguard-ringcheck: FALLBACK: the pod starts with %s "
                "(written to %s)\n",
                r->cure, r->opts->fallback_conf);
    else if (strcmp(r->result, "cannot-run") == 0)
        out_add(&o, "ncclguard-ringcheck: WARNING: the check cannot run here "
                    "(the pod starts anyway; this node was not judged)\n");
    else if (strcmp(r->result, "warn") == 0)
        out_add(&o, "ncclguard-ringcheck: WARNING (the pod starts anyway)\n");
    out_add(&o, "ncclguard-ringcheck %s: %s (exit %d) in phase %d (%s)\n",
            strcmp(r->result, "fail") == 0 ? "FAILED" : "check failed",
            report_code_name(r->code), r->code, r->phase,
            report_phase_name(r->phase));
    out_add(&o, "what: %s\n", r->what);
    if (r->cannot_run[0] != '\0')
        out_add(&o, "cannot run: %s\n", r->cannot_run);
    if (r->gpus[0] != '\0')
        out_add(&o, "gpus: %s\n", r->gpus);
    if (r->transport[0] != '\0')
        out_add(&o, "transport: %s\n", r->transport);
    out_add(&o, "nccl: %s (CUDA runtime %s, driver %s)\n", v, rt, drv);
    if (r->ring.nl.lines > 0) {
        char t[400];

        nccllog_summary(&r->ring.nl, 0, r->ndev, t, sizeof(t));
        out_add(&o, "nccl transport: %s\n", t);
    }
    if (r->warn[0] != '\0')
        out_add(&o, "nccl warn: %s\n", r->warn);
    if (r->diag_note[0] != '\0')
        out_add(&o, "diagnosis: %s\n", r->diag_note);
    if (r->fix[0] != '\0')
        out_add(&o, "fix: %s\n", r->fix);
    if (r->mn_text[0] != '\0')
        out_add(&o, "%s", r->mn_text);
}

int
report_file_write(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t len = strlen(text), off = 0;
    int saved;

    if (fd < 0)
        return -1;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto fail;
        off += (size_t)w;
    }
    if (close(fd) != 0)
        return -1;
    return 0;
fail:
    saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

int
report_fallback_write(const struct rc_report *r, const char *path)
{
    char tmp[256], text[512];
    int n;

    n = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* NCCL reads the file line by line (setEnvFile in src/misc/param.cc):
     * it skips lines that start with '#' and lines without '='. */
    if (r->cure[0] != '\0')
        snprintf(text, sizeof(text),
                 "# written by ncclguard-ringcheck: the ring check passed "
                 "only with this setting\n"
                 "# (%s); variables set in the environment still win\n"
                 "%s\n",
                 r->transport, r->cure);
    else
        snprintf(text, sizeof(text),
                 "# written by ncclguard-ringcheck: the ring check passed "
                 "with the pod's own settings\n");
    if (report_file_write(tmp, text) != 0)
        return -1;
    if (rename(tmp, path) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}
