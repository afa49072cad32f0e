/* `ncclguard policy test`: policy test files run through the webhook's own
 * mutation (workload_mutate), with assertions and expected objects. */
#ifndef NCCLGUARD_POLICYTEST_H
#define NCCLGUARD_POLICYTEST_H

/*
 * Runs `ncclguard policy test [-v] DIR|FILE...` (argv holds only the
 * arguments after "test"). Prints PASS/FAIL per case, with the reasons and
 * a diff of expected against actual objects, then "N passed, N failed".
 * Returns 0 when every case passes, 1 when any fails or a test file is
 * invalid, 2 on a usage error.
 */
int policytest_main(int argc, char **argv);

#endif
