/* ncclguard-microbench: times the review path in-process, without HTTP or
 * TLS: review_handle_padded() per review, as the server calls it (the body
 * followed by the decoder's padding), in ns/op and allocations/op, with the
 * per-request JSON arena open around it as the server has it, and its parts
 * through the public functions: decode (fastjson_decode into the pod view,
 * as review_handle does), decide (policy_decide), plan + patch (mutate_pod
 * on that view, which decides again and checks that the patch applies);
 * the rest is routing, the response and log record, and freeing. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "admission/fastjson.h"
#include "admission/jsonmem.h"
#include "admission/mutate.h"
#include "admission/review.h"
#include "policy/policy.h"

/*
 * Allocation counting. jansson allocates through json_set_alloc_funcs();
 * ncclguard's own malloc/calloc/realloc/strdup/posix_memalign calls are
 * redirected here at link time (-Wl,--wrap=...), so libc-internal
 * allocations are not seen.
 * Single-threaded, so plain counters suffice.
 */
static uint64_t n_allocs, n_frees, alloc_bytes;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void __real_free(void *p);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void __wrap_free(void *p);
int __wrap_posix_memalign(void **p, size_t align, size_t n);

void *
__wrap_malloc(size_t n)
{
    n_allocs++;
    alloc_bytes += n;
    return __real_malloc(n);
}

void *
__wrap_calloc(size_t n, size_t size)
{
    n_allocs++;
    alloc_bytes += n * size;
    return __real_calloc(n, size);
}

/* A realloc of a live block counts as one allocation and one free, so
 * that allocations minus frees stays the number of live blocks. */
void *
__wrap_realloc(void *p, size_t n)
{
    n_allocs++;
    alloc_bytes += n;
    if (p != NULL)
        n_frees++;
    return __real_realloc(p, n);
}

char *
__wrap_strdup(const char *s)
{
    n_allocs++;
    alloc_bytes += strlen(s) + 1;
    return __real_strdup(s);
}

char *
__wrap_strndup(const char *s, size_t n)
{
    n_allocs++;
    alloc_bytes += strnlen(s, n) + 1;
    return __real_strndup(s, n);
}

/* The arena's huge-page chunks. */
int
__wrap_posix_memalign(void **p, size_t align, size_t n)
{
    n_allocs++;
    alloc_bytes += n;
    return __real_posix_memalign(p, align, n);
}

void
__wrap_free(void *p)
{
    if (p != NULL)
        n_frees++;
    __real_free(p);
}

static void *
json_malloc_counted(size_t n)
{
    n_allocs++;
    alloc_bytes += n;
    return __real_malloc(n);
}

static void
json_free_counted(void *p)
{
    if (p != NULL)
        n_frees++;
    __real_free(p);
}

static double
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static char *
read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    char *buf = NULL;

    if (f == NULL || fstat(fileno(f), &st) != 0)
        goto fail;
    /* Followed by the decoder's padding, zeros, as the server's
     * connection buffer holds a body (review_handle_padded()). */
    buf = __real_malloc((size_t)st.st_size + REVIEW_BODY_PADDING);
    if (buf == NULL ||
        fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        goto fail;
    memset(buf + st.st_size, 0, REVIEW_BODY_PADDING);
    *len = (size_t)st.st_size;
    fclose(f);
    return buf;
fail:
    fprintf(stderr, "microbench: cannot read %s\n", path);
    __real_free(buf);
    if (f != NULL)
        fclose(f);
    return NULL;
}

struct stage {
    double ns;
    uint64_t allocs;
};

/* MICROBENCH_ITERS fixes the iteration count (for callgrind), else the
 * loop runs for MICROBENCH_SECONDS. */
static size_t fixed_iters;

static int
bench_one(const char *path, const struct policy *pol, double seconds)
{
    /* As the server calls the core (server/http.c). */
    const struct mutate_options opt = {.own_namespace = "ncclguard",
                                       .patch_text_only = true};
    size_t len, iters = 0;
    char *body = read_file(path, &len);
    struct stage total = {0}, decode = {0}, decide = {0}, plan = {0};
    const char *result = "?";
    size_t ops = 0;
    int64_t gpus = 0;
    uint64_t leaked;
    double t_end, t;

    if (body == NULL)
        return -1;
    /* Warm up and learn what the review does; with a fixed iteration
     * count (a slow hostile review), warm up no longer than that. */
    for (size_t i = 0;
         i < (fixed_iters > 0 && fixed_iters < 100 ? fixed_iters : 100); i++) {
        struct review_outcome out = {0};
        jsonmem_begin();
        if (review_handle_padded(body, len, pol, &opt, &out) != 0)
            return -1;
        result = review_result_name(out.result);
        ops = out.patch_ops;
        review_outcome_release(&out);
        jsonmem_end();
    }
    uint64_t frees0 = n_frees, allocs0 = n_allocs;
    t_end = now_ns() + seconds * 1e9;
    while ((t = now_ns()) < t_end || (fixed_iters > 0 && iters < fixed_iters)) {
        if (fixed_iters > 0 && iters >= fixed_iters)
            break;
        struct review_outcome out = {0};
        json_t *doc, *req, *obj, *meta;
        struct fastjson_doc *tape = NULL;
        struct mutate_options popt = opt;
        struct mutate_result res = {0};
        struct decision d;
        struct fastjson_error ferr;
        uint64_t a;
        double t1;

        a = n_allocs;
        jsonmem_begin();
        if (review_handle_padded(body, len, pol, &opt, &out) != 0)
            return -1;
        review_outcome_release(&out);
        jsonmem_end();
        t1 = now_ns();
        total.ns += t1 - t;
        total.allocs += n_allocs - a;

        a = n_allocs;
        jsonmem_begin();
        /* As review_handle_padded() decodes: the lists the shape leaves
         * lazy stay on the document's tape, which the plan then reads. */
        doc =
            fastjson_decode_doc_padded(body, len, &review_shape, &tape, &ferr);
        popt.doc = tape;
        t = now_ns();
        decode.ns += t - t1;
        decode.allocs += n_allocs - a;
        req = json_object_get(doc, "request");
        obj = json_object_get(req, "object");
        meta = json_object_get(obj, "metadata");
        if (obj != NULL) {
            a = n_allocs;
            t1 = now_ns();
            if (mutate_pod(obj,
                           json_string_value(json_object_get(req, "namespace")),
                           pol, &popt, &res) != 0)
                return -1;
            t = now_ns();
            plan.ns += t - t1;
            plan.allocs += n_allocs - a;
            gpus = res.gpus;
            mutate_result_release(&res);
            a = n_allocs;
            t1 = now_ns();
            policy_decide(pol,
                          json_string_value(json_object_get(req, "namespace")),
                          json_object_get(meta, "labels"),
                          json_object_get(meta, "annotations"), gpus, &d);
            decide.ns += now_ns() - t1;
            decide.allocs += n_allocs - a;
        }
        if (jsonmem_used() == 0) /* else the arena reclaims it whole */
            json_decref(doc);
        fastjson_doc_release(tape);
        jsonmem_end();
        iters++;
    }
    leaked = (n_allocs - allocs0) - (n_frees - frees0);
    /* The op count sits next to the time: a review that gets the ring
     * check writes about twice the ops of one that does not, and its time
     * is read against that. */
    printf("%-18s %7zu B %-9s | review_handle %9.0f ns/op for %3zu ops, "
           "%6.1f allocs/op | decode %8.0f ns %6.1f a | decide %6.0f ns %4.1f "
           "a | "
           "plan+patch %8.0f ns %6.1f a | rest (route, encode, log, free) "
           "%8.0f ns "
           "| "
           "%zu iterations, %" PRIu64 " unfreed\n",
           strrchr(path, '/') ? strrchr(path, '/') + 1 : path, len, result,
           total.ns / (double)iters, ops, (double)total.allocs / (double)iters,
           decode.ns / (double)iters, (double)decode.allocs / (double)iters,
           decide.ns / (double)iters, (double)decide.allocs / (double)iters,
           plan.ns / (double)iters, (double)plan.allocs / (double)iters,
           (total.ns - decode.ns - plan.ns) / (double)iters, iters, leaked);
    __real_free(body);
    return 0;
}

int
main(int argc, char **argv)
{
    struct ng_error err;
    struct policy *pol;
    double seconds = 1.0;
    const char *s = getenv("MICROBENCH_SECONDS");
    int rc = 0;

    if (argc < 3) {
        fprintf(stderr, "usage: ncclguard-microbench POLICY REVIEW.json...\n");
        return 2;
    }
    if (s != NULL)
        seconds = strtod(s, NULL);
    s = getenv("MICROBENCH_ITERS");
    if (s != NULL) {
        fixed_iters = strtoul(s, NULL, 10);
        seconds = 1e9;
    }
    /* As the server: jansson allocates from the per-request arena, whose
     * chunks come from the (counted) malloc; NCCLGUARD_JSON_ARENA=0 counts
     * every jansson allocation instead. */
    json_set_alloc_funcs(json_malloc_counted, json_free_counted);
    jsonmem_install();
    pol = policy_load_file(argv[1], &err);
    if (pol == NULL) {
        fprintf(stderr, "microbench: %s:%d:%d: %s\n", argv[1], err.line,
                err.col, err.msg);
        return 1;
    }
    for (int i = 2; i < argc; i++)
        if (bench_one(argv[i], pol, seconds) != 0)
            rc = 1;
    policy_free(pol);
    return rc;
}
