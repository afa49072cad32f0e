/* A tiny table-friendly unit-test harness; the last line it prints is
 * "N passed, N failed" and the exit status is non-zero on any failure. */
#ifndef NCCLGUARD_HARNESS_H
#define NCCLGUARD_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int harness_passed;
static int harness_failed;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (cond) {                                                            \
            harness_passed++;                                                  \
        } else {                                                               \
            harness_failed++;                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
        }                                                                      \
    } while (0)

#define CHECK_INT(a, b)                                                        \
    do {                                                                       \
        long long harness_a_ = (long long)(a), harness_b_ = (long long)(b);    \
        if (harness_a_ == harness_b_) {                                        \
            harness_passed++;                                                  \
        } else {                                                               \
            harness_failed++;                                                  \
            fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__,    \
                    __LINE__, #a, harness_a_, harness_b_);                     \
        }                                                                      \
    } while (0)

#define CHECK_STR(a, b)                                                        \
    do {                                                                       \
        const char *harness_a_ = (a), *harness_b_ = (b);                       \
        if (harness_a_ != NULL && harness_b_ != NULL &&                        \
            strcmp(harness_a_, harness_b_) == 0) {                             \
            harness_passed++;                                                  \
        } else {                                                               \
            harness_failed++;                                                  \
            fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n",          \
                    __FILE__, __LINE__, #a,                                    \
                    harness_a_ ? harness_a_ : "(null)",                        \
                    harness_b_ ? harness_b_ : "(null)");                       \
        }                                                                      \
    } while (0)

/* Prints the summary line and returns the process exit status. */
static inline int
harness_finish(void)
{
    printf("%d passed, %d failed\n", harness_passed, harness_failed);
    return harness_failed != 0;
}

#endif
