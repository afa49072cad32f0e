/* Short human text in bounded buffers (see text.h). */
#include "base/text.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

size_t
text_utf8_prefix(const char *s, size_t len, size_t max)
{
    size_t n = max;

    if (len <= max)
        return len;
    /* s[n] is the first byte dropped: while it continues a character, that
     * character started earlier and goes too. */
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

size_t
text_utf8_cut(char *s, size_t max)
{
    size_t n = text_utf8_prefix(s, strlen(s), max);

    s[n] = '\0';
    return n;
}

size_t
text_utf8_seq_len(const unsigned char *p)
{
    size_t n;
    uint32_t cp;

    if (*p < 0x80)
        return 1;
    if (*p >= 0xC2 && *p <= 0xDF)
        n = 2, cp = *p & 0x1F;
    else if (*p >= 0xE0 && *p <= 0xEF)
        n = 3, cp = *p & 0x0F;
    else if (*p >= 0xF0 && *p <= 0xF4)
        n = 4, cp = *p & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) /* the NUL stops here too */
            return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

bool
text_utf8_valid_len(const char *s, size_t *len)
{
    const size_t n = strlen(s);
    const unsigned char *p = (const unsigned char *)s, *end = p + n;

    *len = n;
    /* Plain ASCII, eight bytes at a time (within the string: strlen has
     * found its end); the first byte with its high bit set goes through
     * the sequence check, and so does every byte after it. */
    while (end - p >= 8) {
        uint64_t w;

        memcpy(&w, p, 8);
        if ((w & 0x8080808080808080ull) != 0)
            break;
        p += 8;
    }
    while (p < end) {
        size_t k = text_utf8_seq_len(p);

        if (k == 0)
            return false;
        p += k;
    }
    return true;
}

bool
text_utf8_valid(const char *s)
{
    size_t n;

    return text_utf8_valid_len(s, &n);
}

size_t
text_utf8_fix(char *s)
{
    unsigned char *p = (unsigned char *)s;
    size_t fixed = 0;

    while (*p != '\0') {
        size_t n = text_utf8_seq_len(p);

        if (n == 0) {
            *p++ = '?';
            fixed++;
        } else {
            p += n;
        }
    }
    return fixed;
}

size_t
text_vformat(char *buf, size_t n, const char *prefix, const char *fmt,
             va_list ap)
{
    const size_t mark = sizeof(TEXT_CUT_MARK) - 1;
    size_t len = 0;
    bool cut = false;

    if (n < mark + 1) {
        if (n > 0)
            buf[0] = '\0';
        return 0;
    }
    if (prefix != NULL) {
        len = strlen(prefix);
        if (len > n - 1) {
            len = n - 1;
            cut = true;
        }
        memcpy(buf, prefix, len);
    }
    buf[len] = '\0';
    if (!cut) {
        int k = vsnprintf(buf + len, n - len, fmt, ap);

        if (k < 0)
            buf[len] = '\0';
        else if ((size_t)k >= n - len)
            cut = true;
    }
    /* Mend first: a byte that starts no character is one character of its
     * own, so the cut below cannot be fooled into keeping half of one. */
    text_utf8_fix(buf);
    if (!cut)
        return strlen(buf);
    len = text_utf8_cut(buf, n - 1 - mark);
    memcpy(buf + len, TEXT_CUT_MARK, mark + 1);
    return len + mark;
}

size_t
text_format(char *buf, size_t n, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    size_t len;

    va_start(ap, fmt);
    len = text_vformat(buf, n, prefix, fmt, ap);
    va_end(ap);
    return len;
}

size_t
text_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[TEXT_DISTANCE_MAXLEN + 1];

    if (la >= TEXT_DISTANCE_MAXLEN || lb >= TEXT_DISTANCE_MAXLEN)
        return TEXT_DISTANCE_FAR;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];

        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (tolower((unsigned char)a[i - 1]) !=
                                  tolower((unsigned char)b[j - 1]));

            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}
