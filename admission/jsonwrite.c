/* Compact JSON text of jansson values, written into a struct buf. */
#include "admission/jsonwrite.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/text.h"

#define JSONWRITE_MAX_DEPTH 2048

/* buf_addc without the call when there is room. Like the fast paths
 * below it leaves the trailing NUL unwritten: the entry points write it
 * once, through terminate() (see base/buf.h: the bytes are NUL-terminated
 * whenever a buffer function returns). */
static inline int
put_c(struct buf *b, char c)
{
    if (b->len + 1 < b->cap && b->len < b->max) {
        b->p[b->len++] = c;
        return 0;
    }
    return buf_addc(b, c);
}

/* Writes the NUL after the bytes and passes rc on. */
static int
terminate(struct buf *b, int rc)
{
    if (b->p != NULL)
        b->p[b->len] = '\0';
    return rc;
}

/* Bytes a JSON string cannot hold as they are: below 0x20, '"', '\\'. */
static const unsigned char special[256] = {
    [0x00] = 1, [0x01] = 1, [0x02] = 1, [0x03] = 1, [0x04] = 1, [0x05] = 1,
    [0x06] = 1, [0x07] = 1, [0x08] = 1, [0x09] = 1, [0x0a] = 1, [0x0b] = 1,
    [0x0c] = 1, [0x0d] = 1, [0x0e] = 1, [0x0f] = 1, [0x10] = 1, [0x11] = 1,
    [0x12] = 1, [0x13] = 1, [0x14] = 1, [0x15] = 1, [0x16] = 1, [0x17] = 1,
    [0x18] = 1, [0x19] = 1, [0x1a] = 1, [0x1b] = 1, [0x1c] = 1, [0x1d] = 1,
    [0x1e] = 1, [0x1f] = 1, ['"'] = 1,  ['\\'] = 1,
};

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Whether one of the eight bytes of w is below 0x20, '"' or '\\' (exact:
 * each test is the classic "has a byte below n" on w, w ^ '"' and w ^
 * '\\'). */
static inline bool
word_special(uint64_t w)
{
    uint64_t q = w ^ (ONES * '"'), bs = w ^ (ONES * '\\');

    return (((w - ONES * 0x20) & ~w) | ((q - ONES) & ~q) |
            ((bs - ONES) & ~bs)) &
           HIGHS;
}

/* The index of the first byte from i on that needs an escape, or n:
 * eight bytes at a time while none does. */
static inline size_t
plain_run(const char *s, size_t i, size_t n)
{
    while (i + 8 <= n) {
        uint64_t w;

        memcpy(&w, s + i, 8);
        if (word_special(w))
            break;
        i += 8;
    }
    while (i < n && !special[(unsigned char)s[i]])
        i++;
    return i;
}

/* A string's inside as jansson's encoder writes it: the short escapes for
 * '"', '\\', \b \f \n \r \t, \u00XX (upper-case hex) for other control
 * characters, every other byte as it is. */
static int
put_chars(struct buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i, run = 0;

    for (i = plain_run(s, 0, n); i < n; i = plain_run(s, i + 1, n)) {
        unsigned char c = (unsigned char)s[i];
        char esc[6] = {'\\', 'u', '0', '0', 0, 0};
        size_t elen = 2;

        if (buf_add(b, s + run, i - run) != 0)
            return -1;
        run = i + 1;
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        if (buf_add(b, esc, elen) != 0)
            return -1;
    }
    return buf_add(b, s + run, n - run);
}

static int
put_str(struct buf *b, const char *s, size_t n)
{
    /* Most strings need no escape and fit: copied as they are scanned,
     * eight bytes at a time, quotes around. */
    if (b->cap - b->len > n + 2 && b->max - b->len >= n + 2) {
        char *o = b->p + b->len + 1;
        size_t i = 0;

        o[-1] = '"';
        for (; i + 8 <= n; i += 8) {
            uint64_t w;

            memcpy(&w, s + i, 8);
            if (word_special(w))
                break;
            memcpy(o + i, &w, 8);
        }
        for (; i < n && !special[(unsigned char)s[i]]; i++)
            o[i] = s[i];
        if (i == n) {
            o[n] = '"';
            b->len += n + 2;
            return 0;
        }
        /* An escape at i: the plain bytes before it stay. */
        b->len += 1 + i;
        if (put_chars(b, s + i, n - i) != 0)
            return -1;
        return put_c(b, '"');
    }
    if (put_c(b, '"') != 0 || put_chars(b, s, n) != 0)
        return -1;
    return put_c(b, '"');
}

/* A real as jansson writes it: "%.17g", with ".0" added when the text
 * would read back as an integer, and the exponent without '+' or leading
 * zeros ("1e+300" becomes "1e300"). */
static int
put_real(struct buf *b, double d)
{
    char t[40];
    char *e;
    int n;

    if (!isfinite(d))
        return -1;
    n = snprintf(t, sizeof(t), "%.17g", d);
    if (n < 0 || (size_t)n >= sizeof(t) - 3)
        return -1;
    if (strchr(t, '.') == NULL && strchr(t, 'e') == NULL) {
        t[n++] = '.';
        t[n++] = '0';
        t[n] = '\0';
    }
    e = strchr(t, 'e');
    if (e != NULL) {
        /* keep: where the exponent's digits go; from: where they start. */
        char *keep = e + 1, *from = e + 1;

        if (*keep == '-')
            keep++, from++;
        else if (*from == '+')
            from++;
        while (*from == '0')
            from++;
        if (from != keep) {
            memmove(keep, from, strlen(from) + 1);
            n = (int)strlen(t);
        }
    }
    return buf_add(b, t, (size_t)n);
}

/* An integer in decimal, as "%lld" writes it. */
static int
put_int(struct buf *b, json_int_t i)
{
    char t[24];
    size_t n = sizeof(t);
    /* The magnitude as unsigned, so INT64_MIN needs no special case. */
    unsigned long long u =
        i < 0 ? 0ull - (unsigned long long)i : (unsigned long long)i;

    do {
        t[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (i < 0)
        t[--n] = '-';
    return buf_add(b, t + n, sizeof(t) - n);
}

int
jsonwrite_integer(struct buf *b, json_int_t i)
{
    return put_int(b, i);
}

int
jsonwrite_real(struct buf *b, double d)
{
    return put_real(b, d);
}

static int
put_value(struct buf *b, const json_t *v, int depth)
{
    if (depth > JSONWRITE_MAX_DEPTH)
        return -1;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        json_t *o = (json_t *)v; /* jansson's iterator API is not const */
        char sep = '{';

        for (void *it = json_object_iter(o); it != NULL;
             it = json_object_iter_next(o, it)) {
            if (put_c(b, sep) != 0 ||
                put_str(b, json_object_iter_key(it),
                        json_object_iter_key_len(it)) != 0 ||
                put_c(b, ':') != 0 ||
                put_value(b, json_object_iter_value(it), depth + 1) != 0)
                return -1;
            sep = ',';
        }
        return sep == '{' ? buf_add(b, "{}", 2) : put_c(b, '}');
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *x;

        if (put_c(b, '[') != 0)
            return -1;
        json_array_foreach(v, i, x)
        {
            if ((i > 0 && put_c(b, ',') != 0) ||
                put_value(b, x, depth + 1) != 0)
                return -1;
        }
        return put_c(b, ']');
    }
    case JSON_STRING:
        return put_str(b, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        return put_int(b, json_integer_value(v));
    case JSON_REAL:
        return put_real(b, json_real_value(v));
    case JSON_TRUE:
        return buf_add(b, "true", 4);
    case JSON_FALSE:
        return buf_add(b, "false", 5);
    case JSON_NULL:
        return buf_add(b, "null", 4);
    }
    return -1;
}

int
jsonwrite_value(struct buf *b, const json_t *v)
{
    if (v == NULL)
        return -1;
    return terminate(b, put_value(b, v, 0));
}

int
jsonwrite_string(struct buf *b, const char *s, size_t n)
{
    return terminate(b, put_str(b, s, n));
}

/* Levels below the value handed to jsonwrite_capped() that still get the
 * caps (server/log.c capped 16 levels of a line's fields before). */
#define JSONWRITE_CAPPED_DEPTH 16

static int
put_capped(struct buf *b, const json_t *v, size_t str_max, size_t array_max,
           int depth)
{
    if (depth > JSONWRITE_CAPPED_DEPTH)
        return put_value(b, v, depth);
    switch (json_typeof(v)) {
    case JSON_STRING: {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v), keep;

        if (n <= str_max)
            return put_str(b, s, n);
        keep = text_utf8_prefix(s, n, str_max - 3);
        if (put_c(b, '"') != 0 || put_chars(b, s, keep) != 0)
            return -1;
        return buf_add(b, "\xe2\x80\xa6\"", 4); /* U+2026 */
    }
    case JSON_ARRAY: {
        size_t i, size = json_array_size(v);
        json_t *x;

        if (put_c(b, '[') != 0)
            return -1;
        json_array_foreach(v, i, x)
        {
            if (i == array_max)
                return buf_addf(b, "%s\"\xe2\x80\xa6 %zu more\"]",
                                i > 0 ? "," : "", size - array_max);
            if ((i > 0 && put_c(b, ',') != 0) ||
                put_capped(b, x, str_max, array_max, depth + 1) != 0)
                return -1;
        }
        return put_c(b, ']');
    }
    case JSON_OBJECT: {
        json_t *o = (json_t *)v; /* jansson's iterator API is not const */
        char sep = '{';

        for (void *it = json_object_iter(o); it != NULL;
             it = json_object_iter_next(o, it)) {
            if (put_c(b, sep) != 0 ||
                put_str(b, json_object_iter_key(it),
                        json_object_iter_key_len(it)) != 0 ||
                put_c(b, ':') != 0 ||
                put_capped(b, json_object_iter_value(it), str_max, array_max,
                           depth + 1) != 0)
                return -1;
            sep = ',';
        }
        return sep == '{' ? buf_add(b, "{}", 2) : put_c(b, '}');
    }
    default:
        return put_value(b, v, depth);
    }
}

int
jsonwrite_capped(struct buf *b, const json_t *v, size_t str_max,
                 size_t array_max)
{
    if (v == NULL || str_max < 3)
        return -1;
    return terminate(b, put_capped(b, v, str_max, array_max, 0));
}
