/* RFC 6901 JSON pointers over jansson trees (see jsonptr.h). */
#include "base/jsonptr.h"

#include <stdint.h>
#include <string.h>

int
jsonptr_token_next(const char **p, char *tok, size_t n)
{
    const char *s = *p;
    size_t o = 0;

    if (*s != '/' || n == 0)
        return -1;
    s++;
    while (*s != '\0' && *s != '/') {
        char c = *s++;

        if (c == '~') {
            if (*s == '0')
                c = '~';
            else if (*s == '1')
                c = '/';
            else
                return -1;
            s++;
        }
        if (o + 1 >= n)
            return -1;
        tok[o++] = c;
    }
    tok[o] = '\0';
    *p = s;
    return (int)o;
}

int
jsonptr_index(const char *tok, size_t size, bool end_ok, size_t *i)
{
    size_t v = 0, limit = end_ok ? size : size - 1;

    if (tok[0] == '-' && tok[1] == '\0') {
        if (!end_ok)
            return -1;
        *i = size;
        return 0;
    }
    if (!end_ok && size == 0)
        return -1;
    if (tok[0] == '\0' || (tok[0] == '0' && tok[1] != '\0'))
        return -1;
    for (const char *p = tok; *p != '\0'; p++) {
        unsigned d;

        if (*p < '0' || *p > '9')
            return -1;
        d = (unsigned)(*p - '0');
        /* Stops at the first digit that takes v past the limit, so the
         * work is bounded by the digits of the array's size. */
        if (v > (SIZE_MAX - 9) / 10 || v * 10 + d > limit)
            return -1;
        v = v * 10 + d;
    }
    *i = v;
    return 0;
}

json_t *
jsonptr_get(json_t *doc, const char *pointer)
{
    char tok[JSONPTR_MAX_TOKEN];
    const char *p = pointer;
    json_t *cur = doc;

    if (p == NULL || (*p != '\0' && *p != '/'))
        return NULL;
    while (*p != '\0' && cur != NULL) {
        if (jsonptr_token_next(&p, tok, sizeof(tok)) < 0)
            return NULL;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            size_t i;

            if (jsonptr_index(tok, json_array_size(cur), false, &i) != 0)
                return NULL;
            cur = json_array_get(cur, i);
        } else {
            return NULL;
        }
    }
    return cur;
}

int
jsonptr_escape(const char *token, char *buf, size_t n)
{
    size_t o = 0;

    if (n == 0)
        return -1;
    for (const char *p = token; *p != '\0'; p++) {
        char esc[2] = {*p, '\0'};
        size_t k = 1;

        if (*p == '~' || *p == '/') {
            esc[0] = '~';
            esc[1] = *p == '~' ? '0' : '1';
            k = 2;
        }
        if (o + k >= n) {
            buf[o] = '\0';
            return -1;
        }
        memcpy(buf + o, esc, k);
        o += k;
    }
    buf[o] = '\0';
    return 0;
}
