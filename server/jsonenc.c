/* Compact JSON encoding of jansson values for the request path. */
#include "jsonenc.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* As jansson's JSON_PARSER_MAX_DEPTH: deeper values cannot come from the
 * decoder, and the recursion stays bounded. */
#define JSONENC_MAX_DEPTH 2048

struct out {
    char *buf;
    size_t len, cap;
};

static int
out_reserve(struct out *o, size_t more)
{
    size_t cap;
    char *p;

    if (o->cap - o->len > more)
        return 0;
    if (more > SIZE_MAX / 2 - o->len)
        return -1;
    cap = o->cap ? o->cap : 256;
    while (cap - o->len <= more)
        cap *= 2;
    p = realloc(o->buf, cap);
    if (p == NULL)
        return -1;
    o->buf = p;
    o->cap = cap;
    return 0;
}

static int
out_put(struct out *o, const char *s, size_t n)
{
    if (out_reserve(o, n) != 0)
        return -1;
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    return 0;
}

/* Escapes as jansson does without flags: the two-character escapes, other
 * control characters as \u00XX, everything else (UTF-8 included) as is. */
static int
put_string(struct out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t start = 0;

    if (out_reserve(o, n + 2) != 0)
        return -1;
    o->buf[o->len++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[6];
        size_t elen = 2;

        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if (out_put(o, s + start, i - start) != 0)
            return -1;
        start = i + 1;
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 0xf];
            elen = 6;
        }
        if (out_put(o, esc, elen) != 0)
            return -1;
    }
    if (out_put(o, s + start, n - start) != 0 || out_reserve(o, 1) != 0)
        return -1;
    o->buf[o->len++] = '"';
    return 0;
}

/* jansson's real format: %.17g, then ".0" when it would read back as an
 * integer, and a positive exponent without '+' or leading zeros. */
static int
put_real(struct out *o, double d)
{
    char tmp[64], fixed[64];
    size_t n, j = 0;
    int w;

    if (!isfinite(d))
        return -1;
    w = snprintf(tmp, sizeof(tmp), "%.17g", d);
    if (w < 0 || (size_t)w >= sizeof(tmp) - 3)
        return -1;
    n = (size_t)w;
    if (strchr(tmp, '.') == NULL && strchr(tmp, 'e') == NULL) {
        tmp[n++] = '.';
        tmp[n++] = '0';
        tmp[n] = '\0';
    }
    for (size_t i = 0; i < n; i++) {
        fixed[j++] = tmp[i];
        if (tmp[i] == 'e') {
            i++;
            if (tmp[i] == '-')
                fixed[j++] = tmp[i++];
            else if (tmp[i] == '+')
                i++;
            while (tmp[i] == '0' && i + 1 < n)
                i++;
            while (i < n)
                fixed[j++] = tmp[i++];
            break;
        }
    }
    return out_put(o, fixed, j);
}

static int
put_value(struct out *o, const json_t *v, int depth)
{
    char num[32];
    int w;

    if (depth > JSONENC_MAX_DEPTH)
        return -1;
    switch (json_typeof(v)) {
    case JSON_NULL:
        return out_put(o, "null", 4);
    case JSON_TRUE:
        return out_put(o, "true", 4);
    case JSON_FALSE:
        return out_put(o, "false", 5);
    case JSON_INTEGER:
        w = snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
                     json_integer_value(v));
        if (w < 0 || (size_t)w >= sizeof(num))
            return -1;
        return out_put(o, num, (size_t)w);
    case JSON_REAL:
        return put_real(o, json_real_value(v));
    case JSON_STRING:
        return put_string(o, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        if (out_put(o, "[", 1) != 0)
            return -1;
        for (size_t i = 0; i < n; i++) {
            if ((i > 0 && out_put(o, ",", 1) != 0) ||
                put_value(o, json_array_get(v, i), depth + 1) != 0)
                return -1;
        }
        return out_put(o, "]", 1);
    }
    case JSON_OBJECT: {
        const char *key;
        size_t key_len;
        json_t *val;
        int first = 1;

        if (out_put(o, "{", 1) != 0)
            return -1;
        /* json_object_foreach wants a non-const object; it only reads. */
        json_object_keylen_foreach((json_t *)v, key, key_len, val)
        {
            if ((!first && out_put(o, ",", 1) != 0) ||
                put_string(o, key, key_len) != 0 ||
                out_put(o, ":", 1) != 0 || put_value(o, val, depth + 1) != 0)
                return -1;
            first = 0;
        }
        return out_put(o, "}", 1);
    }
    }
    return -1;
}

char *
jsonenc_dumps(const json_t *v, size_t *len)
{
    struct out o = {0};

    if (v == NULL || put_value(&o, v, 0) != 0 || out_reserve(&o, 1) != 0)
        goto fail;
    o.buf[o.len] = '\0';
    if (len != NULL)
        *len = o.len;
    return o.buf;
fail:
    free(o.buf);
    return NULL;
}
