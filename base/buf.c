/* A growable byte buffer with a fixed cap (see buf.h). */
#include "base/buf.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
buf_init(struct buf *b, size_t max)
{
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void
buf_release(struct buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
}

void
buf_reset(struct buf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = '\0';
}

/* Unused bytes past which buf_take() gives the block's tail back. */
#define TAKE_SLACK 1024u

char *
buf_take(struct buf *b, size_t *len)
{
    char *p = b->p;

    if (!p) {
        p = calloc(1, 1);
    } else if (b->cap - b->len > TAKE_SLACK) {
        /* Growth by doubling can leave up to half the block unused; the
         * bytes may be held a while (a response until it is sent), so the
         * block is cut to size (in place with glibc: no copy). */
        char *np = realloc(p, b->len + 1);

        if (np)
            p = np;
    }
    if (p && len)
        *len = b->len;
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

size_t
buf_reserve_size(const struct buf *b, size_t more)
{
    size_t need, cap;

    if (more > b->max || b->len > b->max - more ||
        b->len + more == SIZE_MAX) /* no room for the NUL */
        return 0;
    need = b->len + more + 1; /* the trailing NUL */
    if (need <= b->cap)
        return b->cap;
    cap = b->cap == 0 ? 256 : b->cap > SIZE_MAX / 2 ? need : b->cap * 2;
    if (cap < need)
        cap = need;
    if (b->max < SIZE_MAX && cap > b->max + 1)
        cap = b->max + 1;
    return cap;
}

/* Grows b to cap bytes, as buf_reserve_size() or buf_reserve_exact_size()
 * computed it (0: refused). */
static int
grow_to(struct buf *b, size_t cap)
{
    char *np;

    if (cap == 0)
        return -1;
    if (cap <= b->cap)
        return 0;
    np = realloc(b->p, cap);
    if (!np)
        return -1;
    b->p = np;
    b->cap = cap;
    return 0;
}

int
buf_reserve(struct buf *b, size_t more)
{
    return grow_to(b, buf_reserve_size(b, more));
}

size_t
buf_reserve_exact_size(const struct buf *b, size_t more)
{
    size_t cap = buf_reserve_size(b, more);

    /* Growth is to exactly what is needed; the cap check is the same. */
    if (cap == 0 || cap <= b->cap)
        return cap;
    return b->len + more + 1;
}

int
buf_reserve_exact(struct buf *b, size_t more)
{
    return grow_to(b, buf_reserve_exact_size(b, more));
}

int
buf_add(struct buf *b, const void *s, size_t n)
{
    if (buf_reserve(b, n) != 0)
        return -1;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int
buf_adds(struct buf *b, const char *s)
{
    return buf_add(b, s, strlen(s));
}

int
buf_addc(struct buf *b, char c)
{
    return buf_add(b, &c, 1);
}

int
buf_addvf(struct buf *b, const char *fmt, va_list ap)
{
    va_list again;
    char small[256];
    int n;

    va_copy(again, ap);
    n = vsnprintf(small, sizeof small, fmt, again);
    va_end(again);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof small)
        return buf_add(b, small, (size_t)n);
    if (buf_reserve(b, (size_t)n) != 0)
        return -1;
    va_copy(again, ap);
    n = vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again);
    va_end(again);
    if (n < 0) {
        b->p[b->len] = '\0';
        return -1;
    }
    b->len += (size_t)n;
    return 0;
}

int
buf_addf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = buf_addvf(b, fmt, ap);
    va_end(ap);
    return rc;
}

/* Base64 two characters at a time: b64_pairs[v] is the text of the 12
 * bits v (RFC 4648 alphabet), built once. */
static char b64_pairs[4096][2];
static pthread_once_t b64_once = PTHREAD_ONCE_INIT;
static const char b64_tab[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void
b64_pairs_build(void)
{
    for (unsigned v = 0; v < 4096; v++) {
        b64_pairs[v][0] = b64_tab[v >> 6];
        b64_pairs[v][1] = b64_tab[v & 63];
    }
}

int
buf_add_base64(struct buf *b, const void *s, size_t n)
{
    const unsigned char *in = s;
    size_t out, i = 0;
    char *o;

    if (n > (SIZE_MAX / 4) * 3 - 2)
        return -1;
    out = (n + 2) / 3 * 4;
    if (buf_reserve(b, out) != 0)
        return -1;
    (void)pthread_once(&b64_once, b64_pairs_build);
    o = b->p + b->len;
    /* Six bytes into eight characters per step: the top 48 bits of one
     * big-endian word, four table reads. Where eight bytes can be read,
     * the word is one load (two bytes of it unused) instead of six. */
    for (; i + 8 <= n; i += 6, o += 8) {
        uint64_t w;

        memcpy(&w, in + i, sizeof(w));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        memcpy(o, b64_pairs[w >> 52], 2);
        memcpy(o + 2, b64_pairs[(w >> 40) & 0xfff], 2);
        memcpy(o + 4, b64_pairs[(w >> 28) & 0xfff], 2);
        memcpy(o + 6, b64_pairs[(w >> 16) & 0xfff], 2);
    }
    for (; i + 6 <= n; i += 6, o += 8) {
        uint64_t w = (uint64_t)in[i] << 56 | (uint64_t)in[i + 1] << 48 |
                     (uint64_t)in[i + 2] << 40 | (uint64_t)in[i + 3] << 32 |
                     (uint64_t)in[i + 4] << 24 | (uint64_t)in[i + 5] << 16;

        memcpy(o, b64_pairs[w >> 52], 2);
        memcpy(o + 2, b64_pairs[(w >> 40) & 0xfff], 2);
        memcpy(o + 4, b64_pairs[(w >> 28) & 0xfff], 2);
        memcpy(o + 6, b64_pairs[(w >> 16) & 0xfff], 2);
    }
    for (; i + 3 <= n; i += 3, o += 4) {
        uint32_t v =
            (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

        memcpy(o, b64_pairs[v >> 12], 2);
        memcpy(o + 2, b64_pairs[v & 0xfff], 2);
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16;

        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        memcpy(o, b64_pairs[v >> 12], 2);
        o[2] = i + 1 < n ? b64_tab[(v >> 6) & 63] : '=';
        o[3] = '=';
    }
    b->len += out;
    b->p[b->len] = '\0';
    return 0;
}
