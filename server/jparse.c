/* A strict JSON parser over a buffer, building jansson values directly:
 * no per-character callbacks, strings validated and copied once. */
#include "jparse.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    const unsigned char *p, *end, *start;
    struct ng_error *err;
    char *scratch; /* unescaped string text */
    size_t scratch_cap;
};

/* Records why parsing stopped, at the current position. */
static void
fail(struct parser *ps, const char *why)
{
    int line = 1, col = 1;

    for (const unsigned char *c = ps->start; c < ps->p && c < ps->end; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    ng_error_set(ps->err, line, col, "%s", why);
}

static void
ws_skip(struct parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' ||
                               *ps->p == '\r' || *ps->p == '\t'))
        ps->p++;
}

static bool
scratch_fit(struct parser *ps, size_t n)
{
    char *np;
    size_t cap;

    if (n <= ps->scratch_cap)
        return true;
    cap = ps->scratch_cap ? ps->scratch_cap : 256;
    while (cap < n)
        cap *= 2;
    np = realloc(ps->scratch, cap);
    if (np == NULL)
        return false;
    ps->scratch = np;
    ps->scratch_cap = cap;
    return true;
}

/* Length of the valid UTF-8 sequence at p (before end), or 0. */
static size_t
utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t n;
    uint32_t cp;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    if ((size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

static int
hex4(const unsigned char *p, uint32_t *out)
{
    uint32_t v = 0;

    for (int i = 0; i < 4; i++) {
        unsigned c = p[i];

        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t
utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/*
 * Parses the string at ps->p (at its opening quote). On success *s points
 * either into the input (no escapes) or into the scratch buffer, with its
 * length in *n; both stay valid until the next string is parsed.
 */
static int
string_parse(struct parser *ps, const char **s, size_t *n)
{
    const unsigned char *q = ps->p + 1, *run;
    size_t o = 0;

    /* Fast path: scan for the end; most strings have no escapes. */
    run = q;
    while (q < ps->end && *q != '"' && *q != '\\') {
        if (*q < 0x20) {
            ps->p = q;
            fail(ps, "control character in a string");
            return -1;
        }
        if (*q < 0x80) {
            q++;
        } else {
            size_t k = utf8_len(q, ps->end);

            if (k == 0) {
                ps->p = q;
                fail(ps, "invalid UTF-8 in a string");
                return -1;
            }
            q += k;
        }
    }
    if (q < ps->end && *q == '"') {
        *s = (const char *)run;
        *n = (size_t)(q - run);
        ps->p = q + 1;
        return 0;
    }
    /* Slow path: copy into scratch, unescaping. */
    if (!scratch_fit(ps, (size_t)(q - run) + 64)) {
        fail(ps, "out of memory");
        return -1;
    }
    memcpy(ps->scratch, run, (size_t)(q - run));
    o = (size_t)(q - run);
    while (q < ps->end && *q != '"') {
        if (!scratch_fit(ps, o + 8)) {
            fail(ps, "out of memory");
            return -1;
        }
        if (*q == '\\') {
            uint32_t cp;

            if (q + 1 >= ps->end) {
                ps->p = q;
                fail(ps, "unterminated string");
                return -1;
            }
            switch (q[1]) {
            case '"':
            case '\\':
            case '/':
                ps->scratch[o++] = (char)q[1];
                break;
            case 'b':
                ps->scratch[o++] = '\b';
                break;
            case 'f':
                ps->scratch[o++] = '\f';
                break;
            case 'n':
                ps->scratch[o++] = '\n';
                break;
            case 'r':
                ps->scratch[o++] = '\r';
                break;
            case 't':
                ps->scratch[o++] = '\t';
                break;
            case 'u':
                if (ps->end - q < 6 || hex4(q + 2, &cp) != 0) {
                    ps->p = q;
                    fail(ps, "invalid \\u escape");
                    return -1;
                }
                q += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;

                    if (ps->end - q < 8 || q[2] != '\\' || q[3] != 'u' ||
                        hex4(q + 4, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF) {
                        ps->p = q;
                        fail(ps, "invalid Unicode surrogate pair");
                        return -1;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    q += 6;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    ps->p = q;
                    fail(ps, "lone Unicode low surrogate");
                    return -1;
                } else if (cp == 0) {
                    ps->p = q;
                    fail(ps, "\\u0000 is not allowed in a string");
                    return -1;
                }
                o += utf8_put(ps->scratch + o, cp);
                break;
            default:
                ps->p = q;
                fail(ps, "invalid escape in a string");
                return -1;
            }
            q += 2;
        } else if (*q < 0x20) {
            ps->p = q;
            fail(ps, "control character in a string");
            return -1;
        } else if (*q < 0x80) {
            ps->scratch[o++] = (char)*q++;
        } else {
            size_t k = utf8_len(q, ps->end);

            if (k == 0) {
                ps->p = q;
                fail(ps, "invalid UTF-8 in a string");
                return -1;
            }
            memcpy(ps->scratch + o, q, k);
            o += k;
            q += k;
        }
    }
    if (q >= ps->end) {
        ps->p = q;
        fail(ps, "unterminated string");
        return -1;
    }
    *s = ps->scratch;
    *n = o;
    ps->p = q + 1;
    return 0;
}

static json_t *
number_parse(struct parser *ps)
{
    const unsigned char *q = ps->p, *digits;
    bool neg = false, real = false;
    char buf[128];
    size_t len;

    if (*q == '-') {
        neg = true;
        q++;
    }
    digits = q;
    if (q < ps->end && *q == '0') {
        q++;
    } else if (q < ps->end && *q >= '1' && *q <= '9') {
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    } else {
        fail(ps, "invalid number");
        return NULL;
    }
    if (q < ps->end && *q == '.') {
        real = true;
        q++;
        if (q >= ps->end || *q < '0' || *q > '9') {
            ps->p = q;
            fail(ps, "invalid number");
            return NULL;
        }
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        real = true;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= ps->end || *q < '0' || *q > '9') {
            ps->p = q;
            fail(ps, "invalid number");
            return NULL;
        }
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    len = (size_t)(q - ps->p);
    if (!real) {
        /* Exact integer arithmetic; jansson rejects what does not fit. */
        uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX;

        for (const unsigned char *d = digits; d < q; d++) {
            if (v > (limit - (uint64_t)(*d - '0')) / 10) {
                fail(ps, "too big integer");
                return NULL;
            }
            v = v * 10 + (uint64_t)(*d - '0');
        }
        ps->p = q;
        return json_integer(neg ? (json_int_t)(0 - v) : (json_int_t)v);
    }
    if (len >= sizeof(buf)) {
        fail(ps, "real number too long");
        return NULL;
    }
    memcpy(buf, ps->p, len);
    buf[len] = '\0';
    {
        char *end;
        double d;

        errno = 0;
        d = strtod(buf, &end);
        if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL)) {
            fail(ps, "real number overflow");
            return NULL;
        }
        ps->p = q;
        return json_real(d);
    }
}

static bool
literal(struct parser *ps, const char *word, size_t n)
{
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return false;
    ps->p += n;
    return true;
}

static json_t *value_parse(struct parser *ps, int depth);

static json_t *
object_parse(struct parser *ps, int depth)
{
    json_t *obj = json_object();

    if (obj == NULL) {
        fail(ps, "out of memory");
        return NULL;
    }
    ps->p++; /* '{' */
    ws_skip(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return obj;
    }
    for (;;) {
        const char *k;
        size_t kn;
        char keybuf[256];
        char *key = keybuf;
        json_t *v;

        if (ps->p >= ps->end || *ps->p != '"') {
            fail(ps, "string or '}' expected");
            goto bad;
        }
        if (string_parse(ps, &k, &kn) != 0)
            goto bad;
        /* A key from the scratch buffer must outlive the value's own
         * strings; one from the input stays put. */
        if (k != ps->scratch) {
            key = (char *)(uintptr_t)k;
        } else if (kn >= sizeof(keybuf)) {
            key = malloc(kn + 1);
            if (key == NULL) {
                fail(ps, "out of memory");
                goto bad;
            }
        }
        if (key != k) {
            memcpy(key, k, kn);
            key[kn] = '\0';
        }
        ws_skip(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            fail(ps, "':' expected");
            if (key != keybuf && key != k)
                free(key);
            goto bad;
        }
        /* A review with a key twice is ambiguous: other readers may take
         * the first value where we take the last. */
        if (json_object_getn(obj, key, kn) != NULL) {
            fail(ps, "duplicate object key");
            if (key != keybuf && key != k)
                free(key);
            goto bad;
        }
        ps->p++;
        ws_skip(ps);
        v = value_parse(ps, depth + 1);
        if (v == NULL || json_object_setn_new_nocheck(obj, key, kn, v) != 0) {
            if (v != NULL)
                fail(ps, "out of memory");
            if (key != keybuf && key != k)
                free(key);
            goto bad;
        }
        if (key != keybuf && key != k)
            free(key);
        ws_skip(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            ws_skip(ps);
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') {
            ps->p++;
            return obj;
        }
        fail(ps, "',' or '}' expected");
        goto bad;
    }
bad:
    json_decref(obj);
    return NULL;
}

static json_t *
array_parse(struct parser *ps, int depth)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        fail(ps, "out of memory");
        return NULL;
    }
    ps->p++; /* '[' */
    ws_skip(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return arr;
    }
    for (;;) {
        json_t *v = value_parse(ps, depth + 1);

        if (v == NULL)
            goto bad;
        if (json_array_append_new(arr, v) != 0) {
            fail(ps, "out of memory");
            goto bad;
        }
        ws_skip(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            ws_skip(ps);
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']') {
            ps->p++;
            return arr;
        }
        fail(ps, "',' or ']' expected");
        goto bad;
    }
bad:
    json_decref(arr);
    return NULL;
}

static json_t *
value_parse(struct parser *ps, int depth)
{
    if (depth > JPARSE_MAX_DEPTH) {
        fail(ps, "nesting too deep");
        return NULL;
    }
    if (ps->p >= ps->end) {
        fail(ps, "unexpected end of input");
        return NULL;
    }
    switch (*ps->p) {
    case '{':
        return object_parse(ps, depth);
    case '[':
        return array_parse(ps, depth);
    case '"': {
        const char *s;
        size_t n;
        json_t *v;

        if (string_parse(ps, &s, &n) != 0)
            return NULL;
        v = json_stringn_nocheck(s, n);
        if (v == NULL)
            fail(ps, "out of memory");
        return v;
    }
    case 't':
        if (literal(ps, "true", 4))
            return json_true();
        break;
    case 'f':
        if (literal(ps, "false", 5))
            return json_false();
        break;
    case 'n':
        if (literal(ps, "null", 4))
            return json_null();
        break;
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            return number_parse(ps);
        break;
    }
    fail(ps, "invalid token");
    return NULL;
}

json_t *
jparse_load(const char *buf, size_t len, struct ng_error *err)
{
    struct parser ps = {
        .p = (const unsigned char *)buf,
        .end = (const unsigned char *)buf + len,
        .start = (const unsigned char *)buf,
        .err = err,
    };
    json_t *v = NULL;

    ws_skip(&ps);
    if (ps.p >= ps.end) {
        fail(&ps, "no JSON value");
        goto done;
    }
    if (*ps.p != '{' && *ps.p != '[') {
        fail(&ps, "'[' or '{' expected");
        goto done;
    }
    v = value_parse(&ps, 1);
    if (v == NULL)
        goto done;
    ws_skip(&ps);
    if (ps.p != ps.end) {
        fail(&ps, "end of input expected");
        json_decref(v);
        v = NULL;
    }
done:
    free(ps.scratch);
    return v;
}
