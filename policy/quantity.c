/* Kubernetes resource quantities: the parser and the binary-SI formatter. */
#include "policy/quantity.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/*
 * Longest quantity text accepted. Kubernetes has no limit, but nothing a
 * policy or a pod spec means to say needs more, and it bounds the bignum.
 */
#define QUANTITY_MAX_LEN 128

/* Base-1e9 little-endian natural numbers, big enough for 128 digits
 * times 2^60 times 10^40. */
#define BIG_LIMBS 40
#define BIG_BASE 1000000000u

struct big {
    uint32_t limb[BIG_LIMBS];
    int n; /* limbs in use; 0 means zero */
};

static int
big_mul_small(struct big *b, uint32_t m)
{
    uint64_t carry = 0;

    for (int i = 0; i < b->n; i++) {
        uint64_t v = (uint64_t)b->limb[i] * m + carry;
        b->limb[i] = (uint32_t)(v % BIG_BASE);
        carry = v / BIG_BASE;
    }
    while (carry != 0) {
        if (b->n == BIG_LIMBS)
            return -1;
        b->limb[b->n++] = (uint32_t)(carry % BIG_BASE);
        carry /= BIG_BASE;
    }
    return 0;
}

/* Divides by m; returns the remainder. */
static uint32_t
big_div_small(struct big *b, uint32_t m)
{
    uint64_t rem = 0;

    for (int i = b->n - 1; i >= 0; i--) {
        uint64_t v = rem * BIG_BASE + b->limb[i];
        b->limb[i] = (uint32_t)(v / m);
        rem = v % m;
    }
    while (b->n > 0 && b->limb[b->n - 1] == 0)
        b->n--;
    return (uint32_t)rem;
}

static int
big_add_small(struct big *b, uint32_t a)
{
    uint64_t carry = a;

    for (int i = 0; i < b->n && carry != 0; i++) {
        uint64_t v = (uint64_t)b->limb[i] + carry;
        b->limb[i] = (uint32_t)(v % BIG_BASE);
        carry = v / BIG_BASE;
    }
    if (carry != 0) {
        if (b->n == BIG_LIMBS)
            return -1;
        b->limb[b->n++] = (uint32_t)carry;
    }
    return 0;
}

/* b = v. */
static void
big_set_u64(struct big *b, uint64_t v)
{
    b->n = 0;
    while (v != 0) {
        b->limb[b->n++] = (uint32_t)(v % BIG_BASE);
        v /= BIG_BASE;
    }
}

/* The value if it fits in 128 bits below limit, else -1 via *over. */
static unsigned __int128
big_to_u128(const struct big *b, int *over)
{
    unsigned __int128 v = 0;
    const unsigned __int128 lim = ((unsigned __int128)1 << 126);

    *over = 0;
    for (int i = b->n - 1; i >= 0; i--) {
        if (v > lim / BIG_BASE) {
            *over = 1;
            return 0;
        }
        v = v * BIG_BASE + b->limb[i];
    }
    return v;
}

static int
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The suffix table Kubernetes uses: base 10 or 2 and the exponent. */
static int
suffix_lookup(const char *s, size_t n, int *base, int32_t *exp)
{
    static const struct {
        const char *s;
        int base;
        int exp;
    } tab[] = {
        {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"", 10, 0},
        {"k", 10, 3},  {"M", 10, 6},  {"G", 10, 9},  {"T", 10, 12},
        {"P", 10, 15}, {"E", 10, 18}, {"Ki", 2, 10}, {"Mi", 2, 20},
        {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60},
    };

    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
        if (strlen(tab[i].s) == n && memcmp(tab[i].s, s, n) == 0) {
            *base = tab[i].base;
            *exp = tab[i].exp;
            return 0;
        }
    }
    /* "e<int64>" / "E<int64>": Go's strconv.ParseInt, then int32(). */
    if (n > 1 && (s[0] == 'e' || s[0] == 'E')) {
        size_t i = 1;
        int neg = 0;
        uint64_t v = 0;

        if (s[i] == '+' || s[i] == '-') {
            neg = s[i] == '-';
            i++;
        }
        if (i == n)
            return -1;
        for (; i < n; i++) {
            if (!is_digit(s[i]))
                return -1;
            v = v * 10 + (uint64_t)(s[i] - '0');
            if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
                return -1;
        }
        /* Kubernetes converts with int32(parsed), which wraps. */
        *base = 10;
        *exp = (int32_t)(uint32_t)(neg ? (0 - v) : v);
        return 0;
    }
    return -1;
}

/* Splits s the way Kubernetes' parseQuantityString does. */
struct qparts {
    int negative;
    const char *num; /* digits without leading zeros; may be empty */
    size_t num_len;
    const char *den;
    size_t den_len;
    const char *suf;
    size_t suf_len;
};

static int
qparts_split(const char *s, size_t len, struct qparts *p)
{
    size_t pos = 0;

    memset(p, 0, sizeof(*p));
    p->suf = s + len;
    if (pos < len && (s[pos] == '-' || s[pos] == '+')) {
        p->negative = s[pos] == '-';
        pos++;
    }
    while (pos < len && s[pos] == '0')
        pos++;
    p->num = s + pos;
    while (pos < len && is_digit(s[pos]))
        pos++;
    p->num_len = (size_t)(s + pos - p->num);
    if (pos < len && s[pos] == '.') {
        pos++;
        p->den = s + pos;
        while (pos < len && is_digit(s[pos]))
            pos++;
        p->den_len = (size_t)(s + pos - p->den);
    }
    p->suf = s + pos;
    p->suf_len = len - pos;
    /* The suffix is letters from "eEinumkKMGTP", then an optional sign and
     * digits; anything after that is malformed. */
    {
        size_t i = pos;

        while (i < len && strchr("eEinumkKMGTP", s[i]) != NULL)
            i++;
        if (i < len && (s[i] == '-' || s[i] == '+'))
            i++;
        while (i < len && is_digit(s[i]))
            i++;
        if (i < len)
            return -1;
    }
    return 0;
}

/* Suggests the binary spelling someone probably meant ("4Gb" -> "4Gi"). */
static int
quantity_suggest(const char *s, size_t len, char *out, size_t n)
{
    size_t i = 0, numend, j;
    char unit;
    struct quantity q;

    while (i < len &&
           (is_digit(s[i]) || s[i] == '.' || s[i] == '+' || s[i] == '-'))
        i++;
    numend = i;
    if (numend == 0)
        return -1;
    while (i < len && s[i] == ' ')
        i++;
    if (i == len) {
        if (numend == len)
            return -1;
        /* Only trailing or inner spaces: drop them. */
        snprintf(out, n, "%.*s", (int)numend, s);
    } else {
        unit = (char)toupper((unsigned char)s[i]);
        if (strchr("KMGTPE", unit) == NULL)
            return -1;
        j = i + 1;
        if (j < len && (s[j] == 'i' || s[j] == 'I'))
            j++;
        if (j < len && (s[j] == 'b' || s[j] == 'B'))
            j++;
        if (j != len)
            return -1;
        snprintf(out, n, "%.*s%ci", (int)numend, s, unit);
    }
    if (quantity_parse(out, strlen(out), &q, NULL) != 0)
        return -1;
    return 0;
}

static void
quantity_fail(const char *s, size_t len, struct ng_error *err, const char *why)
{
    char sug[QUANTITY_MAX_LEN + 8];
    int shown = len > 40 ? 40 : (int)len;

    if (err == NULL)
        return;
    if (len == 0) {
        ng_error_set(err, 0, 0, "empty string is not a Kubernetes quantity");
        return;
    }
    if (why != NULL)
        ng_error_set(err, 0, 0, "%.*s%s is not a Kubernetes quantity: %s",
                     shown, s, (size_t)shown < len ? "..." : "", why);
    else if (quantity_suggest(s, len, sug, sizeof(sug)) == 0)
        ng_error_set(err, 0, 0,
                     "%.*s is not a Kubernetes quantity; did you mean %s?",
                     shown, s, sug);
    else
        ng_error_set(err, 0, 0,
                     "%.*s%s is not a Kubernetes quantity (expected a number "
                     "with an optional suffix such as 4Gi, 500M or 100m)",
                     shown, s, (size_t)shown < len ? "..." : "");
}

int
quantity_parse(const char *s, size_t len, struct quantity *out,
               struct ng_error *err)
{
    struct qparts p;
    int base;
    int32_t exp;
    int64_t scale10;
    struct big b = {{0}, 0};
    size_t sig;
    uint64_t small = 0;
    const char *digits[2];
    size_t dlen[2];
    unsigned __int128 nano = 0, cap;
    struct quantity q;
    int over = 0, inexact = 0;

    if (len == 0) {
        quantity_fail(s, len, err, NULL);
        return -1;
    }
    if (len > QUANTITY_MAX_LEN) {
        quantity_fail(s, len, err, "longer than 128 characters");
        return -1;
    }
    if (qparts_split(s, len, &p) != 0 ||
        suffix_lookup(p.suf, p.suf_len, &base, &exp) != 0) {
        quantity_fail(s, len, err, NULL);
        return -1;
    }

    memset(&q, 0, sizeof(q));
    q.negative = p.negative;

    /* Value = D * 10^scale10 * 2^exp2 with D = num.den as an integer. */
    scale10 = (base == 10 ? (int64_t)exp : 0) - (int64_t)p.den_len;
    digits[0] = p.num;
    dlen[0] = p.num_len;
    digits[1] = p.den;
    dlen[1] = p.den_len;
    /* D's first 18 significant digits go into small (every quantity a pod
     * spec writes has no more); a longer D continues in the bignum. */
    sig = 0;
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < dlen[k]; i++) {
            int d = digits[k][i] - '0';

            if (sig == 0 && d == 0)
                continue;
            if (++sig <= 18) {
                small = small * 10 + (uint64_t)d;
                continue;
            }
            if (sig == 19)
                big_set_u64(&b, small);
            if (big_mul_small(&b, 10) != 0 ||
                big_add_small(&b, (uint32_t)d) != 0)
                return quantity_fail(s, len, err, "too many digits"), -1;
        }
    }
    /* A short D, with an exponent in the range the bignum works out below:
     * D < 10^18 and D * 2^60 < 2^123, so the value is worked out in
     * unsigned __int128 with the same steps and rounding. */
    cap = (unsigned __int128)INT64_MAX * 1000000000u;
    if (sig > 0 && sig <= 18 && (int64_t)sig + scale10 <= 40 &&
        (int64_t)sig + scale10 >= -40) {
        int64_t s9 = scale10 + 9;

        nano = small;
        if (base == 2)
            nano <<= exp;
        for (; s9 > 0 && !over; s9--) {
            if (nano > cap)
                over = 1; /* only grows from here: saturated */
            else
                nano *= 10;
        }
        for (; s9 < 0; s9++) {
            if (nano % 10 != 0)
                inexact = 1;
            nano /= 10;
        }
        if (inexact)
            nano++;
        goto have_value;
    }
    if (sig <= 18)
        big_set_u64(&b, small);
    if (sig == 0) {
        /* Zero, whatever the suffix ("0Gi", "-0", ".", "+"). */
        q.negative = false;
        q.integer = true;
        *out = q;
        return 0;
    }
    /* Kubernetes caps magnitudes at 2^63-1 and rounds non-zero ones up to
     * a whole nano. Work in nano units: n = ceil(D * 10^(scale10+9) * 2^e2),
     * short-cutting exponents far outside what int64 can hold. */
    if ((int64_t)sig + scale10 > 40) {
        over = 1;
    } else if ((int64_t)sig + scale10 < -40) {
        nano = 1;
        goto have_nano;
    } else {
        int64_t s9 = scale10 + 9;

        if (base == 2) {
            for (int i = 0; i < exp; i++)
                if (big_mul_small(&b, 2) != 0)
                    over = 1;
        }
        for (; s9 > 0 && !over; s9--)
            if (big_mul_small(&b, 10) != 0)
                over = 1;
        for (; s9 < 0; s9++)
            if (big_div_small(&b, 10) != 0)
                inexact = 1;
    }
    if (!over) {
        nano = big_to_u128(&b, &over);
        if (inexact)
            nano++;
    }
have_value:
    if (over || nano > cap) {
        nano = cap;
        q.saturated = true;
    }
have_nano : {
    unsigned __int128 v = (nano + 999999999u) / 1000000000u;
    unsigned __int128 m = (nano + 999999u) / 1000000u;

    q.integer = nano % 1000000000u == 0;
    q.value = (int64_t)v;
    q.milli = m > (unsigned __int128)INT64_MAX ? INT64_MAX : (int64_t)m;
    if (q.negative) {
        q.value = -q.value;
        q.milli = -q.milli;
    }
}
    *out = q;
    return 0;
}

int
quantity_format_binary(int64_t bytes, char *buf, size_t n)
{
    static const char *const suffix[] = {"",   "Ki", "Mi", "Gi",
                                         "Ti", "Pi", "Ei"};
    uint64_t mag;
    int k = 0;
    const char *sign = "";

    if (bytes < 0) {
        sign = "-";
        mag = (uint64_t)0 - (uint64_t)bytes;
    } else {
        mag = (uint64_t)bytes;
    }
    while (mag != 0 && mag % 1024 == 0 && k < 6) {
        mag /= 1024;
        k++;
    }
    return snprintf(buf, n, "%s%" PRIu64 "%s", sign, mag, suffix[k]);
}
