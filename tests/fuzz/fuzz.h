/* The libFuzzer entry points every fuzz target defines, declared for the
 * corpus replay driver and for -Wmissing-prototypes. */
#ifndef NCCLGUARD_FUZZ_H
#define NCCLGUARD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/*
 * Runs one input. data is borrowed and holds exactly size bytes (no NUL
 * terminator, so a read past the end is caught by ASan). Returns 0; an
 * invariant violation aborts, which libFuzzer and the replay driver report
 * as a crash. Called from one thread at a time.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Optional one-time set-up, called before the first input (libFuzzer calls
 * it when a target defines it; so does the replay driver).
 */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Aborts with a message naming the broken invariant. */
#define FUZZ_ASSERT(cond)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__,    \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

#endif
