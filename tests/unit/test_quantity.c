/* Unit tests for policy/quantity.c. The accepted and rejected inputs come
 * from the cases in Kubernetes' own quantity tests
 * (k8s.io/apimachinery/pkg/api/resource), with the values Kubernetes gives
 * them worked out by hand: value() rounds up like Quantity.Value(), milli
 * like MilliValue(), after rounding non-zero amounts up to a whole nano. */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "policy/quantity.h"

struct ok_case {
    const char *in;
    int64_t value;
    int64_t milli;
    int integer;
};

static const struct ok_case ok_cases[] = {
    /* zeroes */
    {"0", 0, 0, 1},
    {"0n", 0, 0, 1},
    {"0u", 0, 0, 1},
    {"0m", 0, 0, 1},
    {"0Ki", 0, 0, 1},
    {"0k", 0, 0, 1},
    {"0Mi", 0, 0, 1},
    {"0M", 0, 0, 1},
    {"0Gi", 0, 0, 1},
    {"0G", 0, 0, 1},
    {"0Ti", 0, 0, 1},
    {"0T", 0, 0, 1},
    {"0.0", 0, 0, 1},
    {"-0", 0, 0, 1},
    {"00", 0, 0, 1},
    /* binary suffixes */
    {"1Ki", 1024, 1024000, 1},
    {"8Ki", 8192, 8192000, 1},
    {"7Mi", 7340032, 7340032000, 1},
    {"6Gi", 6442450944, 6442450944000, 1},
    {"5Ti", 5497558138880, 5497558138880000, 1},
    {"4Pi", 4503599627370496, 4503599627370496000, 1},
    {"3Ei", 3458764513820540928, INT64_MAX, 1},
    {"10Ti", 10995116277760, 10995116277760000, 1},
    {"100Ti", 109951162777600, 109951162777600000, 1},
    /* decimal suffixes */
    {"5n", 1, 1, 0},
    {"4u", 1, 1, 0},
    {"3m", 1, 3, 0},
    {"9", 9, 9000, 1},
    {"8k", 8000, 8000000, 1},
    {"50k", 50000, 50000000, 1},
    {"7M", 7000000, 7000000000, 1},
    {"6G", 6000000000, 6000000000000, 1},
    {"5T", 5000000000000, 5000000000000000, 1},
    {"40T", 40000000000000, 40000000000000000, 1},
    {"300T", 300000000000000, 300000000000000000, 1},
    {"2P", 2000000000000000, 2000000000000000000, 1},
    {"1E", 1000000000000000000, INT64_MAX, 1},
    /* decimal exponents */
    {"1E-3", 1, 1, 0},
    {"1e3", 1000, 1000000, 1},
    {"1E6", 1000000, 1000000000, 1},
    {"1e9", 1000000000, 1000000000000, 1},
    {"1E12", 1000000000000, 1000000000000000, 1},
    {"1e15", 1000000000000000, 1000000000000000000, 1},
    {"1E18", 1000000000000000000, INT64_MAX, 1},
    {"1e14", 100000000000000, 100000000000000000, 1},
    {"1e13", 10000000000000, 10000000000000000, 1},
    {"1e+3", 1000, 1000000, 1},
    /* nonstandard but parsable */
    {"100.035k", 100035, 100035000, 1},
    /* things that look like floating point */
    {"0.001", 1, 1, 0},
    {"0.0005k", 1, 500, 0},
    {"0.005", 1, 5, 0},
    {"0.05", 1, 50, 0},
    {"0.5", 1, 500, 0},
    {"0.00050k", 1, 500, 0},
    {"0.00500", 1, 5, 0},
    {"0.05000", 1, 50, 0},
    {"0.50000", 1, 500, 0},
    {"0.5e0", 1, 500, 0},
    {"0.5e-1", 1, 50, 0},
    {"0.5e-2", 1, 5, 0},
    {"10.035M", 10035000, 10035000000, 1},
    {"1.2e3", 1200, 1200000, 1},
    {"1.3E+6", 1300000, 1300000000, 1},
    {"1.40e9", 1400000000, 1400000000000, 1},
    {"1.53E12", 1530000000000, 1530000000000000, 1},
    {"1.6e15", 1600000000000000, 1600000000000000000, 1},
    {"1.7E18", 1700000000000000000, INT64_MAX, 1},
    {"9.01", 10, 9010, 0},
    {"8.1k", 8100, 8100000, 1},
    {"7.123456M", 7123456, 7123456000, 1},
    {"6.987654321G", 6987654321, 6987654321000, 1},
    {"5.444T", 5444000000000, 5444000000000000, 1},
    {"40.1T", 40100000000000, 40100000000000000, 1},
    {"300.2T", 300200000000000, 300200000000000000, 1},
    {"2.5P", 2500000000000000, 2500000000000000000, 1},
    {"1.01E", 1010000000000000000, INT64_MAX, 1},
    /* things that round up to a whole nano */
    {"3.001n", 1, 1, 0},
    {"1.1E-9", 1, 1, 0},
    {"0.0000000001", 1, 1, 0},
    {"0.0000000005", 1, 1, 0},
    {"0.00000000050", 1, 1, 0},
    {"0.5e-9", 1, 1, 0},
    {"0.9n", 1, 1, 0},
    {"0.00000012345", 1, 1, 0},
    {"0.00000012354", 1, 1, 0},
    {"2.9999999999", 3, 3000, 1}, /* 2.9999999999 rounds up to 3.000000000 */
    /* fractional binary amounts */
    {"100.035Ki", 102436, 102435840, 0},
    {"0.5Mi", 524288, 524288000, 1},
    {"0.05Gi", 53687092, 53687091200, 0},
    {"0.025Ti", 27487790695, 27487790694400, 0},
    {"1.5Gi", 1610612736, 1610612736000, 1},
    /* things written by trolls */
    {"0.000000000001Ki", 1, 1, 0},
    {".001", 1, 1, 0},
    {".0001k", 1, 100, 0},
    {"1.", 1, 1000, 1},
    {"1.G", 1000000000, 1000000000000, 1},
    /* Kubernetes takes a lone sign or dot as zero */
    {"-", 0, 0, 1},
    {"+", 0, 0, 1},
    {".", 0, 0, 1},
    /* exponents go through Go's int32() conversion, which wraps */
    {"1e4294967296", 1, 1000, 1},
    {"1e9223372036854775807", 1, 100, 0},
    {"1e-9223372036854775808", 1, 1000, 1},
    /* signs */
    {"+4", 4, 4000, 1},
    {"-1Gi", -1073741824, -1073741824000, 1},
    {"-9.01", -10, -9010, 0},
    {"-3m", -1, -3, 0},
    {"+16Gi", 17179869184, 17179869184000, 1},
    {"9223372036854775807", INT64_MAX, INT64_MAX, 1},
};

/* Kubernetes caps magnitudes at 2^63-1. (Its int64 fast path keeps "12E"
 * exact instead; for sizes and counts both mean "far too big".) */
static const char *const saturating[] = {
    "9Ei",
    "9223372036854775807Ki",
    "12E",
    "9223372036854775808",
    "1e19",
    "99999999999999999999999999999999999999",
    /* 20 digits, past 64 bits: the bignum's, not the 128-bit fast path's */
    "18446744073709551617",
    /* 18 digits times 10^27 nano: past 128 bits, saturated on the way */
    "999999999999999999E",
    /* 2^59 Ei is 2^128 * 5^9 nano: it would wrap to 0 in 128 bits */
    "576460752303423488Ei",
};

static const char *const bad_cases[] = {
    /* Kubernetes' invalid list */
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    " 1",
    "1 ",
    /* more of what ParseQuantity rejects */
    "",
    "1K",
    "1ki",
    "1KI",
    "1KiB",
    "1Zi",
    "1Z",
    "1 Ki",
    "1e",
    "1e+",
    "1e-",
    "1e1.5",
    "1e.5",
    "1e3k",
    "1E3Ki",
    "1e+-3",
    "1..5",
    "1-",
    "++1",
    "--1",
    "1,5",
    "1_000",
    "0x10",
    "1/2",
    "Inf",
    "+Inf",
    "NaN",
    "Infinity",
    "1e9223372036854775808",
    "1e-9223372036854775809",
    "4Gb",
    "4GB",
    "16gi",
    "1\xc2\xb5",
};

struct suggest_case {
    const char *in;
    const char *msg;
};

static const struct suggest_case suggest_cases[] = {
    {"4Gb", "4Gb is not a Kubernetes quantity; did you mean 4Gi?"},
    {"4GB", "4GB is not a Kubernetes quantity; did you mean 4Gi?"},
    {"16gi", "16gi is not a Kubernetes quantity; did you mean 16Gi?"},
    {"4 Gi", "4 Gi is not a Kubernetes quantity; did you mean 4Gi?"},
    {"1KiB", "1KiB is not a Kubernetes quantity; did you mean 1Ki?"},
    {"512mb", "512mb is not a Kubernetes quantity; did you mean 512Mi?"},
    {"1 ", "1  is not a Kubernetes quantity; did you mean 1?"},
};

struct format_case {
    int64_t in;
    const char *out;
};

static const struct format_case format_cases[] = {
    {17179869184, "16Gi"},
    {1610612736, "1536Mi"},
    {1000, "1000"},
    {0, "0"},
    {1024, "1Ki"},
    {1025, "1025"},
    {6 * 1024, "6Ki"},
    {300LL * 1024 * 1024, "300Mi"},
    {1001LL * 1024 * 1024 * 1024, "1001Gi"},
    {1LL << 40, "1Ti"},
    {1LL << 62, "4Ei"},
    {-1024, "-1Ki"},
    {INT64_MIN, "-8Ei"},
    {INT64_MAX, "9223372036854775807"},
};

int
main(void)
{
    char buf[64];

    for (size_t i = 0; i < sizeof(ok_cases) / sizeof(ok_cases[0]); i++) {
        const struct ok_case *c = &ok_cases[i];
        struct quantity q;
        struct ng_error e;
        int rc = quantity_parse(c->in, strlen(c->in), &q, &e);

        if (rc != 0) {
            fprintf(stderr, "input \"%s\": %s\n", c->in, e.msg);
            CHECK_INT(rc, 0);
            continue;
        }
        if (q.value != c->value || q.milli != c->milli ||
            q.integer != (c->integer != 0) || q.saturated)
            fprintf(stderr,
                    "input \"%s\": value %" PRId64 " milli %" PRId64
                    " integer %d saturated %d\n",
                    c->in, q.value, q.milli, q.integer, q.saturated);
        CHECK_INT(q.value, c->value);
        CHECK_INT(q.milli, c->milli);
        CHECK_INT(q.integer, c->integer != 0);
        CHECK_INT(q.saturated, 0);
        CHECK_INT(q.negative, c->value < 0 || c->milli < 0);
    }
    for (size_t i = 0; i < sizeof(saturating) / sizeof(saturating[0]); i++) {
        struct quantity q;
        int rc = quantity_parse(saturating[i], strlen(saturating[i]), &q, NULL);

        CHECK_INT(rc, 0);
        CHECK_INT(q.saturated, 1);
        CHECK_INT(q.value, INT64_MAX);
    }
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        struct quantity q = {42, 42, false, false, false};
        struct ng_error e;
        int rc = quantity_parse(bad_cases[i], strlen(bad_cases[i]), &q, &e);

        if (rc == 0)
            fprintf(stderr, "input \"%s\" parsed unexpectedly\n", bad_cases[i]);
        CHECK_INT(rc, -1);
        CHECK_INT(q.value, 42); /* output untouched on failure */
        CHECK(strstr(e.msg, "is not a Kubernetes quantity") != NULL);
    }
    for (size_t i = 0; i < sizeof(suggest_cases) / sizeof(suggest_cases[0]);
         i++) {
        struct quantity q;
        struct ng_error e;

        CHECK_INT(quantity_parse(suggest_cases[i].in,
                                 strlen(suggest_cases[i].in), &q, &e),
                  -1);
        CHECK_STR(e.msg, suggest_cases[i].msg);
    }
    /* Parsing respects len: the bytes after it are not read. */
    {
        struct quantity q;

        CHECK_INT(quantity_parse("16Gi trailing", 4, &q, NULL), 0);
        CHECK_INT(q.value, 17179869184);
        CHECK_INT(quantity_parse("4Gbi", 3, &q, NULL), -1);
    }
    for (size_t i = 0; i < sizeof(format_cases) / sizeof(format_cases[0]);
         i++) {
        int n = quantity_format_binary(format_cases[i].in, buf, sizeof(buf));

        CHECK_STR(buf, format_cases[i].out);
        CHECK_INT(n, (int)strlen(format_cases[i].out));
    }
    /* Round trip: formatting a parsed binary quantity gives it back. */
    {
        static const char *const rt[] = {"16Gi", "1536Mi", "64Gi",
                                         "1Ki",  "1000",   "7Ei"};

        for (size_t i = 0; i < sizeof(rt) / sizeof(rt[0]); i++) {
            struct quantity q;

            CHECK_INT(quantity_parse(rt[i], strlen(rt[i]), &q, NULL), 0);
            quantity_format_binary(q.value, buf, sizeof(buf));
            CHECK_STR(buf, rt[i]);
        }
    }
    /* snprintf semantics when the buffer is short. */
    CHECK_INT(quantity_format_binary(17179869184, buf, 3), 4);
    CHECK_STR(buf, "16");
    return harness_finish();
}
