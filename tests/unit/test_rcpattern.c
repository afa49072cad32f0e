/* Unit tests of ringcheck/pattern.h: the sums of the check's data stay exact
 * up to the largest world the limits allow. */
#include "harness.h"
#include "ringcheck/pattern.h"

/* Regression: with a period of 61 the float sums stopped being exact past
 * about 740 ranks; the limits allow 2048. Each sum is accumulated rank by
 * rank in float, as a reduction does, and compared with the exact one. */
static void
test_bw_exact(void)
{
    int bad = 0;

    CHECK_INT(RC_PATTERN_MAX_RANKS, 2048);
    for (int n = 1; n <= RC_PATTERN_MAX_RANKS; n += n < 64 ? 1 : 61)
        for (size_t i = 0; i < RC_BW_PERIOD; i++) {
            float acc = 0, racc = 0;

            for (int r = 0; r < n; r++)
                acc += rc_bw_value(r, i);
            for (int r = n - 1; r >= 0; r--)
                racc += rc_bw_value(r, i);
            if (acc != rc_bw_sum(n, i) || racc != rc_bw_sum(n, i) ||
                (double)rc_bw_sum(n, i) !=
                    (double)n * (n + 1) / 2 * (double)(i % RC_BW_PERIOD + 1))
                bad++;
        }
    CHECK_INT(bad, 0);
    {
        int n = RC_PATTERN_MAX_RANKS;
        float acc = 0;

        for (int r = 0; r < n; r++)
            acc += rc_bw_value(r, RC_BW_PERIOD - 1);
        CHECK(acc == rc_bw_sum(n, RC_BW_PERIOD - 1));
        CHECK((double)acc <= 16777216.0);
    }
}

static void
test_check_no_overflow(void)
{
    long long n = RC_PATTERN_MAX_RANKS;
    long long worst = n * (n + 1) / 2 * RC_CHECK_PERIOD;

    CHECK(worst <= INT32_MAX);
    CHECK_INT(rc_check_sum(n, RC_CHECK_PERIOD - 1), worst);
    CHECK_INT(rc_check_value(0, 0), 1);
}

int
main(void)
{
    test_bw_exact();
    test_check_no_overflow();
    return harness_finish();
}
