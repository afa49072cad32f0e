/* The fast decoder: simdjson's DOM parser (Debian's libsimdjson, 3.x)
 * parses and validates the document; one walk over its tape checks what
 * simdjson does not (duplicate keys, "\u0000", integers beyond int64)
 * and builds jansson values for the parts the shape names only.
 *
 * The one C++ translation unit of the project. No exception crosses the C
 * boundary: simdjson is used through its error-code API, the file is
 * compiled with -fno-exceptions, and allocations use std::nothrow. */
#include "admission/fastjson.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <type_traits>

#include <simdjson.h>

extern "C" {
#include "admission/jsonwrite.h"
#include "base/buf.h"
}

/* One decode's lazy arrays (FASTJSON_LAZY) and the parser whose tape they
 * are read from, which it owns. */
struct fastjson_doc {
    simdjson::dom::parser *parser;
    const uint64_t *w;  /* the tape */
    const uint8_t *str; /* its string buffer */
    bool big;           /* over KEEP_MAX: the parser is not kept after */
    struct lazy {
        const json_t *arr; /* the array of nulls built for it */
        size_t first, n;   /* its elements' tape indices: elems[first..] */
    } * lz;
    size_t n_lz, cap_lz;
    size_t *elems;
    size_t n_el, cap_el;
    size_t *find; /* arr -> 1 + its index in lz, open addressing; 0 free */
    size_t find_cap;
};

namespace
{

/* The walk reads simdjson's tape directly (the layout simdjson documents
 * in doc/tape.md, stable across 1.x to 3.x): one 64-bit word per value,
 * its type in the top byte. Going through dom::element and its iterators
 * costs several loads and a type switch per step; this is one load. */
enum tape_t : char {
    T_ROOT = 'r',
    T_ARRAY = '[',
    T_OBJECT = '{',
    T_STRING = '"',
    T_INT64 = 'l',
    T_UINT64 = 'u',
    T_DOUBLE = 'd',
    T_TRUE = 't',
    T_FALSE = 'f',
    T_NULL = 'n',
};

/* The document as the walk sees it: the tape and the string buffer. */
struct tape {
    const uint64_t *w;
    const uint8_t *str;

    char
    type(size_t i) const
    {
        return (char)(w[i] >> 56);
    }
    /* The index after the value at i (past a container's closing word). */
    size_t
    after(size_t i) const
    {
        char t = type(i);

        if (t == T_ARRAY || t == T_OBJECT)
            return (uint32_t)w[i];
        if (t == T_INT64 || t == T_UINT64 || t == T_DOUBLE)
            return i + 2;
        return i + 1;
    }
    /* A container's closing word. */
    size_t
    end(size_t i) const
    {
        return (size_t)(uint32_t)w[i] - 1;
    }
    /* A container's count of members, saturated at 0xffffff. */
    size_t
    count(size_t i) const
    {
        return (size_t)((w[i] >> 32) & simdjson::internal::JSON_COUNT_MASK);
    }
    std::string_view
    string(size_t i) const
    {
        size_t off = (size_t)(w[i] & simdjson::internal::JSON_VALUE_MASK);
        uint32_t len;

        std::memcpy(&len, str + off, sizeof(len));
        return std::string_view((const char *)str + off + sizeof(len), len);
    }
    uint64_t
    payload(size_t i) const
    {
        return w[i + 1];
    }
};

/* A thread keeps its parser and buffers while the documents it sees stay
 * under this size (the parser takes about 30 bytes per input byte, paged in
 * as used); a larger one is parsed, then they are dropped. */
constexpr size_t KEEP_MAX = 256 * 1024;

/* Objects up to this many keys are checked for duplicates pairwise, as
 * the walk meets each key; a larger one goes through the hash set first. */
constexpr size_t PAIRWISE_MAX = 16;

/* The zeros after the copied document: simdjson's padding, and room for
 * has_escaped_nul() to read a whole step past the last byte. */
constexpr size_t PAD_TAIL = simdjson::SIMDJSON_PADDING + 16;
static_assert(FASTJSON_PADDING >= PAD_TAIL,
              "a padded text carries the pad's zeros");

const fastjson_shape shape_all = {FASTJSON_ALL, nullptr, nullptr, false};

/* One step of the path from the root, for the JSON pointer in an error. */
struct step {
    const char *key; /* nullptr: an array index */
    size_t len;      /* key length, or the index */
};

/* A key in the duplicate-key set: its offset from the object's first key
 * (simdjson writes an object's keys in order into one string buffer, so
 * later keys lie after it, and a document is under 4 GiB) and its length;
 * len UINT32_MAX marks a free slot. 8 bytes, so that a hostile object of a
 * million keys costs 16 MiB of set at most, for that one request. */
struct slot {
    uint32_t off;
    uint32_t len;
};

struct thread_state {
    /* The parser the next decode uses, and one spare: a document that
     * keeps its lazy arrays takes the parser with it (fastjson_doc), and
     * gives it back when released. */
    simdjson::dom::parser *parser = nullptr;
    simdjson::dom::parser *spare = nullptr;
    char *pad = nullptr; /* the document, copied with simdjson's padding */
    size_t pad_cap = 0;
    slot *slots = nullptr;    /* duplicate-key hash set */
    struct walk *w = nullptr; /* one decode's stacks, reused */
    size_t n_slots = 0;
    uint64_t seed = 0;

    thread_state() = default;
    ~thread_state()
    {
        delete parser;
        delete spare;
        std::free(pad);
        std::free(slots);
        std::free(w);
    }
    thread_state(const thread_state &) = delete;
    thread_state &operator=(const thread_state &) = delete;
};

thread_local std::unique_ptr<thread_state> tls;

/* One open container of the walk. */
struct frame {
    bool is_object;
    size_t pos, end; /* the next member's tape index; the closing word */
    const fastjson_shape *shape; /* nullptr: checked, not built */
    json_t *v;                   /* the container built, borrowed */
    size_t index;                /* the next array index */
    size_t keys_from;            /* a small object: its keys so far are
                                    walk.keys[keys_from .. walk.n_keys) */
    bool keys_checked; /* a large object: dup_keys() checked it first */
};

/* One decode's working state. */
struct walk {
    thread_state *ts;
    fastjson_doc *doc; /* where lazy arrays go; nullptr: built whole */
    tape t;
    bool check_nul; /* the text holds "\u0000" somewhere */
    fastjson_error *err;
    step path[FASTJSON_MAX_DEPTH + 2];
    frame frames[FASTJSON_MAX_DEPTH + 2];
    /* The keys of the small objects open, innermost last (an object's
     * keys are dropped when it closes, so this is a stack). */
    std::string_view keys[(FASTJSON_MAX_DEPTH + 2) * PAIRWISE_MAX];
    size_t n_keys;
    /* quiet_check()'s open containers. */
    struct level {
        size_t pos, end;  /* the next member's tape index; the closing word */
        size_t keys_from; /* an object: its keys in keys[keys_from..] */
        bool is_object;
        bool hashed; /* an object: dup_keys() checked its keys first */
    } levels[FASTJSON_MAX_DEPTH + 2];
    size_t depth; /* the place fail_at() names: path[1..depth] */
    size_t open;  /* containers open: frames[0..open-1] */
    /* While frames[0..quiet_below-1] are all that is open, quiet_check()
     * may be tried; inside a container it turned down, it is not tried
     * again (a deep nest with a refused value at its bottom would be
     * scanned once per level: quadratic). */
    size_t quiet_below;
    bool oom;
};

uint64_t
mix(uint64_t h)
{
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}

/* The hash of a key, eight bytes at a time, started from a per-thread
 * random seed so that colliding keys cannot be precomputed. */
uint64_t
key_hash(uint64_t seed, std::string_view k)
{
    const char *p = k.data();
    size_t n = k.size();
    uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);

    while (n >= 8) {
        uint64_t w;

        std::memcpy(&w, p, 8);
        h = mix(h ^ w);
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        uint64_t w = 0;

        std::memcpy(&w, p, n);
        h = mix(h ^ w ^ 0xff);
    }
    return mix(h);
}

/* Appends s to the pointer text in out (at *n of cap), escaped as RFC 6901
 * wants, and cut short (on a UTF-8 boundary) when out is full. */
void
pointer_put(char *out, size_t cap, size_t *n, const char *s, size_t len)
{
    for (size_t i = 0; i < len && *n + 3 < cap; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '~' || c == '/') {
            out[(*n)++] = '~';
            out[(*n)++] = c == '~' ? '0' : '1';
        } else if (c < 0x20) {
            out[(*n)++] = '?'; /* the line stays one line */
        } else {
            out[(*n)++] = (char)c;
        }
    }
    /* Never end inside a UTF-8 sequence. */
    size_t k = *n;
    while (k > 0 && ((unsigned char)out[k - 1] & 0xc0) == 0x80)
        k--;
    if (k > 0 && ((unsigned char)out[k - 1] & 0x80) != 0) {
        unsigned char lead = (unsigned char)out[k - 1];
        size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;

        if (*n - (k - 1) < want)
            *n = k - 1;
    }
    out[*n] = '\0';
}

/* The JSON pointer of the current position (up to depth d), at most about
 * 120 bytes. */
void
pointer_format(const walk &w, size_t d, char *out, size_t cap)
{
    size_t n = 0;

    out[0] = '\0';
    for (size_t i = 1; i <= d && i < FASTJSON_MAX_DEPTH + 2; i++) {
        char num[24];

        if (n + 2 >= cap)
            break;
        out[n++] = '/';
        out[n] = '\0';
        if (w.path[i].key != nullptr) {
            pointer_put(out, cap, &n, w.path[i].key, w.path[i].len);
        } else {
            int k = snprintf(num, sizeof(num), "%zu", w.path[i].len);
            pointer_put(out, cap, &n, num, k > 0 ? (size_t)k : 0);
        }
    }
    if (d == 0)
        snprintf(out, cap, "(the top level)");
}

__attribute__((noinline)) void
fail_at(walk &w, const char *what, std::string_view key)
{
    char ptr[128], k[48];
    size_t kn = 0;

    if (w.err->text[0] != '\0')
        return;
    pointer_format(w, w.depth, ptr, sizeof(ptr));
    k[0] = '\0';
    pointer_put(k, sizeof(k), &kn, key.data(), key.size());
    if (!key.empty() || std::strcmp(what, "duplicate object key") == 0)
        snprintf(w.err->text, sizeof(w.err->text), "%s \"%s\" at %s", what, k,
                 ptr);
    else
        snprintf(w.err->text, sizeof(w.err->text), "%s at %s", what, ptr);
}

bool
has_nul(std::string_view s)
{
    return std::memchr(s.data(), '\0', s.size()) != nullptr;
}

/* Whether the text holds "\u0000" (or "\\u0000", which is harmless: the
 * string checks after this sort it out). A NUL can only enter a string or
 * key through that escape: simdjson refuses raw control characters.
 *
 * text must be followed by PAD_TAIL readable bytes (the thread's pad):
 * the scan reads 64 bytes at a time, and 5 more past each step, without a
 * length check. One pass, no call per backslash (a pod whose args hold
 * escaped JSON has hundreds). */
bool
has_escaped_nul(const char *text, size_t len)
{
    /* 16 bytes: one SSE2 (or NEON) register, so the compiler keeps the
     * compares in vector instructions without target flags. */
    typedef unsigned char v16 __attribute__((vector_size(16)));
    typedef uint64_t w2 __attribute__((vector_size(16)));
    static_assert(PAD_TAIL >= 64 + 5,
                  "the scan reads past the text into the padding");

    /* 64 bytes a step: first only whether "\\u" starts in them (two loads
     * per 16 bytes, no branch per block: backslashes in escaped JSON come
     * at random); "\\u" is rare, and only then the four zeros. */
    for (size_t i = 0; i < len; i += 64) {
        v16 a, b, bu[4], any = {};

        for (size_t j = 0; j < 4; j++) {
            std::memcpy(&a, text + i + 16 * j, 16);
            std::memcpy(&b, text + i + 16 * j + 1, 16);
            bu[j] = (v16)(a == '\\') & (v16)(b == 'u');
            any |= bu[j];
        }
        w2 m = (w2)any;
        if ((m[0] | m[1]) == 0)
            continue;
        for (size_t j = 0; j < 4; j++) {
            v16 hit = bu[j];

            for (size_t k = 2; k <= 5; k++) {
                std::memcpy(&b, text + i + 16 * j + k, 16);
                hit &= (v16)(b == '0');
            }
            m = (w2)hit;
            /* A hit past len would start in the padding, which is
             * zeros: none. */
            if ((m[0] | m[1]) != 0)
                return true;
        }
    }
    return false;
}

/* Whether obj (more than PAIRWISE_MAX keys) names a key twice; reports it
 * when report is set. Linear: a hash set. (Smaller objects are checked by
 * walk_doc() as it meets their keys.) */
__attribute__((noinline)) bool
dup_keys(walk &w, size_t obj, bool report)
{
    const tape &t = w.t;
    const size_t end = t.end(obj);
    size_t n = t.count(obj); /* O(1) below 2^24 keys */

    if (n >= 0xffffff) { /* the tape's count saturates: count them */
        n = 0;
        for (size_t i = obj + 1; i < end; i = t.after(i + 1))
            n++;
    }
    thread_state *ts = w.ts;
    size_t want = 16;
    while (want < 2 * n)
        want *= 2;
    if (ts->n_slots < want) {
        std::free(ts->slots);
        ts->slots = static_cast<slot *>(std::malloc(want * sizeof(slot)));
        ts->n_slots = ts->slots != nullptr ? want : 0;
        if (ts->slots == nullptr) {
            w.oom = true;
            return true;
        }
    }
    for (size_t i = 0; i < want; i++)
        ts->slots[i].len = UINT32_MAX;
    const size_t mask = want - 1;
    const char *base = nullptr;
    bool dup = false;
    for (size_t at = obj + 1; at < end; at = t.after(at + 1)) {
        std::string_view key = t.string(at);
        size_t i = key_hash(ts->seed, key) & mask;

        if (base == nullptr)
            base = key.data();
        while (ts->slots[i].len != UINT32_MAX) {
            const slot &o = ts->slots[i];

            if (o.len == key.size() &&
                std::memcmp(base + o.off, key.data(), o.len) == 0) {
                if (report)
                    fail_at(w, "duplicate object key", key);
                dup = true;
                break;
            }
            i = (i + 1) & mask;
        }
        if (dup)
            break;
        ts->slots[i] =
            slot{(uint32_t)(key.data() - base), (uint32_t)key.size()};
    }
    return dup;
}

__attribute__((noinline)) const fastjson_shape *
field_shape(const fastjson_shape *shape, std::string_view key, bool *keep)
{
    *keep = false;
    if (key.empty())
        return nullptr;
    for (const fastjson_field *f = shape->fields; f->key != nullptr; f++)
        if (f->key[0] == key[0] &&
            std::strncmp(f->key, key.data(), key.size()) == 0 &&
            f->key[key.size()] == '\0') {
            *keep = true;
            return f->shape != nullptr ? f->shape : &shape_all;
        }
    return nullptr;
}

/* A scalar (not an object or array) at w.depth, built into *out when out
 * is not NULL. Returns false when refused or out of memory. */
bool
leaf(walk &w, size_t e, json_t **out)
{
    json_t *v = nullptr;

    switch (w.t.type(e)) {
    case T_STRING: {
        std::string_view s = w.t.string(e);

        if (w.check_nul && has_nul(s)) {
            fail_at(w, "\\u0000 in a string", std::string_view());
            return false;
        }
        if (out != nullptr)
            v = json_stringn_nocheck(s.data(), s.size());
        break;
    }
    case T_INT64:
        if (out != nullptr)
            v = json_integer((json_int_t)(int64_t)w.t.payload(e));
        break;
    case T_UINT64:
        /* simdjson takes integers up to 2^64-1; jansson's json_int_t,
         * and so every reader after this one, stops at INT64_MAX. */
        fail_at(w, "integer too big for 64 bits", std::string_view());
        return false;
    case T_DOUBLE:
        if (out != nullptr) {
            uint64_t bits = w.t.payload(e);
            double d;

            std::memcpy(&d, &bits, sizeof(d));
            v = json_real(d);
        }
        break;
    case T_TRUE:
    case T_FALSE:
        if (out != nullptr)
            v = json_boolean(w.t.type(e) == T_TRUE);
        break;
    case T_NULL:
        if (out != nullptr)
            v = json_null();
        break;
    default:
        return false; /* not a scalar: the walk never asks */
    }
    if (out != nullptr) {
        if (v == nullptr) {
            w.oom = true;
            return false;
        }
        *out = v;
    }
    return true;
}

/* Adds child (owned) to the container being built at frame f, under the
 * key or index the path holds for depth d. Returns false when out of
 * memory (child is then released). */
bool
attach(walk &w, frame &f, size_t d, json_t *child)
{
    int rc;

    if (f.is_object)
        rc = json_object_setn_new_nocheck(f.v, w.path[d].key, w.path[d].len,
                                          child);
    else
        rc = json_array_append_new(f.v, child);
    if (rc != 0)
        w.oom = true;
    return rc == 0;
}

/*
 * Opens the container e, whose place is path[1..w.open]: checks an
 * object's keys for duplicates, makes the jansson container when shape is
 * not NULL (attached to the parent's, or *root at the top), and pushes its
 * frame. Returns false when refused or out of memory.
 */
bool
open_container(walk &w, size_t e, const fastjson_shape *shape, json_t **root)
{
    const size_t k = w.open;
    frame &f = w.frames[k];
    json_t *v = nullptr;

    w.depth = k;
    f.is_object = w.t.type(e) == T_OBJECT;
    f.pos = e + 1;
    f.end = w.t.end(e);
    if (f.is_object) {
        /* A few keys are compared one by one as the walk meets them;
         * more go through the hash set first. */
        f.keys_checked = w.t.count(e) > PAIRWISE_MAX;
        f.keys_from = w.n_keys;
        if (f.keys_checked && dup_keys(w, e, true))
            return false;
    }
    f.shape = shape;
    f.index = 0;
    if (shape != nullptr) {
        v = f.is_object ? json_object() : json_array();
        if (v == nullptr) {
            w.oom = true;
            return false;
        }
        if (k == 0)
            *root = v;
        else if (!attach(w, w.frames[k - 1], k, v))
            return false;
    }
    f.v = v;
    w.open++;
    return true;
}

/* Grows *p (of *cap elements of size sz) to hold one more than n. */
bool
grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return true;
    size_t want = *cap ? *cap * 2 : 16;
    void *q = std::realloc(*p, want * sz);

    if (q == nullptr)
        return false;
    *p = q;
    *cap = want;
    return true;
}

/*
 * The lazy array at tape index e, whose place is path[1..k+1] in the
 * container of frame f: built as as many nulls as it has elements,
 * attached, and registered in w.doc with its elements' tape indices. Its
 * elements are checked after, as any part not built. Returns false when
 * out of memory.
 */
bool
lazy_open(walk &w, frame &f, size_t k, size_t e)
{
    fastjson_doc *d = w.doc;
    json_t *arr = json_array(), *null_v = json_null();
    const size_t end = w.t.end(e);

    if (arr == nullptr || !attach(w, f, k + 1, arr) ||
        !grow((void **)&d->lz, &d->cap_lz, d->n_lz, sizeof(*d->lz))) {
        w.oom = true;
        return false;
    }
    fastjson_doc::lazy &l = d->lz[d->n_lz++];

    l = fastjson_doc::lazy{arr, d->n_el, 0};
    for (size_t i = e + 1; i < end; i = w.t.after(i)) {
        if (!grow((void **)&d->elems, &d->cap_el, d->n_el, sizeof(*d->elems)) ||
            json_array_append_new(arr, null_v) != 0) {
            w.oom = true;
            return false;
        }
        d->elems[d->n_el++] = i;
        l.n++;
    }
    return true;
}

/*
 * Whether the container at tape index e, which is not built, passes every
 * check: no key twice in one object, no integer beyond int64 (and the
 * caller has made sure the text holds no "\u0000"). One pass over its tape
 * words, without the walk's frames or paths. false means "maybe not", not
 * a refusal: the caller then walks it the general way, which says where.
 * (out of memory included: the walk meets it again and says so).
 */
bool
quiet_check(walk &w, size_t e)
{
    const tape &t = w.t;
    walk::level *lv = w.levels;
    size_t d = 0, n_keys = w.n_keys;
    size_t v = e; /* the value to look at next */

    /* The containers open, innermost last; a member at a time: its key
     * (an object's) compared with the object's keys so far, then its
     * value, stepped over or opened. */
    for (;;) {
        switch (t.type(v)) {
        case T_OBJECT: {
            const size_t count = t.count(v);
            bool hashed = count > PAIRWISE_MAX;

            if (count == 0)
                break; /* {}: nothing to check (FieldsV1 is full of them) */
            if (hashed && dup_keys(w, v, false)) {
                w.oom = false; /* the walk tries again, and says so */
                return false;
            }
            lv[d++] = walk::level{v + 1, t.end(v), n_keys, true, hashed};
            break;
        }
        case T_ARRAY:
            if (t.count(v) > 0)
                lv[d++] = walk::level{v + 1, t.end(v), n_keys, false, false};
            break;
        case T_UINT64:
            return false;
        default: /* a string, a number, true, false, null */
            break;
        }
        /* The next member of the innermost open container, closing those
         * that are done. */
        if (d == 0)
            return true; /* e was empty */
        for (;;) {
            walk::level &top = lv[d - 1];

            if (top.pos < top.end)
                break;
            n_keys = top.keys_from;
            if (--d == 0)
                return true;
            /* The closed container was its parent's member: step past it. */
            lv[d - 1].pos = top.end + 1;
        }
        walk::level &top = lv[d - 1];

        if (top.is_object) {
            const size_t k = top.pos;

            if (!top.hashed) {
                std::string_view key = t.string(k);

                for (size_t j = top.keys_from; j < n_keys; j++)
                    if (w.keys[j].size() == key.size() &&
                        std::memcmp(w.keys[j].data(), key.data(), key.size()) ==
                            0)
                        return false;
                w.keys[n_keys++] = key;
            }
            v = k + 1;
        } else {
            v = top.pos;
        }
        /* Past the value now; a container's members move it again when it
         * closes. */
        top.pos = t.after(v);
    }
}

/* Whether the container x, next to be opened and not built, was checked
 * whole by quiet_check(); when not, the walk opens it, and quiet_check()
 * is not tried inside it. */
bool
quiet(walk &w, size_t x)
{
    if (w.check_nul || w.quiet_below != SIZE_MAX)
        return false;
    if (quiet_check(w, x))
        return true;
    w.quiet_below = w.open; /* the frame x is about to get */
    return false;
}

/*
 * Checks the document rooted at e and builds what shape names into *out.
 * Iterative, with one frame per open container on the heap, so a document
 * as deep as the cap costs no stack. Returns false when refused or out of
 * memory (w.err / w.oom say which); *out then holds what was built so far,
 * for the caller to release.
 */
bool
walk_doc(walk &w, size_t e, const fastjson_shape *shape, json_t **out)
{
    const tape &tp = w.t;
    char t = tp.type(e);

    *out = nullptr;
    w.depth = 0;
    w.open = 0;
    w.n_keys = 0;
    w.quiet_below = SIZE_MAX;
    if (t != T_OBJECT && t != T_ARRAY)
        return leaf(w, e, out);
    if (!open_container(w, e, shape, out))
        return false;
    while (w.open > 0) {
        const size_t k = w.open - 1; /* the innermost open container */
        frame &f = w.frames[k];
        const fastjson_shape *sub = nullptr;
        size_t x;
        bool keep;

        if (f.is_object) {
            if (f.pos == f.end) {
                w.n_keys = f.keys_from;
                if (--w.open <= w.quiet_below)
                    w.quiet_below = SIZE_MAX;
                continue;
            }
            std::string_view key = tp.string(f.pos);

            x = f.pos + 1;
            f.pos = tp.after(x);
            if (!f.keys_checked) {
                for (size_t i = f.keys_from; i < w.n_keys; i++)
                    if (w.keys[i].size() == key.size() &&
                        std::memcmp(w.keys[i].data(), key.data(), key.size()) ==
                            0) {
                        w.depth = k;
                        fail_at(w, "duplicate object key", key);
                        return false;
                    }
                w.keys[w.n_keys++] = key;
            }
            w.path[k + 1] = step{key.data(), key.size()};
            if (w.check_nul && has_nul(key)) {
                w.depth = k;
                fail_at(w, "\\u0000 in the key", std::string_view());
                return false;
            }
            keep = f.shape != nullptr;
            if (keep && f.shape->keep == FASTJSON_FIELDS)
                sub = field_shape(f.shape, key, &keep);
            else if (keep)
                sub = &shape_all;
        } else {
            if (f.shape != nullptr && f.shape->keep == FASTJSON_EACH &&
                f.shape->each != nullptr && f.shape->each->others_null) {
                /* A run of scalars where the elements are built as null
                 * unless objects (a hostile "volumes": [0,0,...] of 2
                 * million): one tight loop, nothing to check but their
                 * type. The rest goes through the general step below. */
                json_t *null_v = json_null();

                while (f.pos != f.end) {
                    char ty = tp.type(f.pos);

                    if (ty == T_OBJECT || ty == T_ARRAY || ty == T_UINT64 ||
                        (ty == T_STRING && w.check_nul))
                        break;
                    if (json_array_append_new(f.v, null_v) != 0) {
                        w.oom = true;
                        return false;
                    }
                    f.pos = tp.after(f.pos);
                    f.index++;
                }
            }
            if (f.pos == f.end) {
                if (--w.open <= w.quiet_below)
                    w.quiet_below = SIZE_MAX;
                continue;
            }
            x = f.pos;
            f.pos = tp.after(x);
            w.path[k + 1] = step{nullptr, f.index};
            keep = f.shape != nullptr &&
                   (f.shape->keep != FASTJSON_FIRST || f.index == 0);
            if (keep)
                sub = f.shape->keep == FASTJSON_EACH && f.shape->each != nullptr
                          ? f.shape->each
                          : &shape_all;
            f.index++;
        }
        t = tp.type(x);
        /* The common case of a value only checked: a number, a boolean or
         * null needs nothing but the int64 check. */
        if (!keep && t != T_OBJECT && t != T_ARRAY && t != T_UINT64 &&
            (t != T_STRING || !w.check_nul))
            continue;
        if (keep && sub->others_null && t != T_OBJECT) {
            /* Checked as usual, built as the null singleton. */
            if (t == T_ARRAY) {
                if (!quiet(w, x) && !open_container(w, x, nullptr, out))
                    return false;
                if (!attach(w, f, k + 1, json_null()))
                    return false;
                continue;
            }
            w.depth = k + 1;
            if ((t == T_UINT64 || (t == T_STRING && w.check_nul)) &&
                !leaf(w, x, nullptr))
                return false;
            if (!attach(w, f, k + 1, json_null()))
                return false;
            continue;
        }
        if (keep && t == T_ARRAY && sub->keep == FASTJSON_LAZY &&
            w.doc != nullptr) {
            /* Built as nulls, then checked as any part not built. */
            if (!lazy_open(w, f, k, x) ||
                (!quiet(w, x) && !open_container(w, x, nullptr, out)))
                return false;
            continue;
        }
        if (t == T_OBJECT || t == T_ARRAY) {
            if (!keep && quiet(w, x))
                continue; /* checked, and nothing to build */
            if (!open_container(w, x, keep ? sub : nullptr, out))
                return false;
            continue;
        }
        json_t *v = nullptr;

        w.depth = k + 1;
        if (!leaf(w, x, keep ? &v : nullptr) ||
            (keep && !attach(w, f, k + 1, v)))
            return false;
    }
    return true;
}

/* The offset of the first byte that is not valid UTF-8 (overlong forms,
 * surrogates and code points past U+10FFFF included), or len. */
size_t
utf8_bad_offset(const unsigned char *s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        uint32_t cp, min;

        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1, cp = c & 0x1f, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2, cp = c & 0x0f, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return i;
        }
        if (len - i <= n)
            return i;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return i;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += n + 1;
    }
    return len;
}

/* What simdjson's syntax errors mean, in lower case. */
const char *
syntax_message(simdjson::error_code code)
{
    switch (code) {
    case simdjson::EMPTY:
        return "empty: no JSON value";
    case simdjson::TAPE_ERROR:
        return "malformed: a missing or extra comma, colon, brace or bracket";
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
        return "cut off: an array or object is not closed";
    case simdjson::TRAILING_CONTENT:
        return "more after the document";
    case simdjson::UNCLOSED_STRING:
        return "a string is not closed";
    case simdjson::UNESCAPED_CHARS:
        return "a control character inside a string";
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR:
        return "a bad literal (true, false or null)";
    default:
        return simdjson::error_message(code);
    }
}

thread_state *
state_get(void)
{
    if (!tls) {
        tls.reset(new (std::nothrow) thread_state());
        if (tls) {
            uint64_t a = (uint64_t)(uintptr_t)tls.get();

            /* Different per thread and per run (ASLR); the hash set only
             * needs its collisions not to be precomputable. */
            tls->seed =
                key_hash(a, std::string_view((const char *)&a, sizeof(a))) ^
                (uint64_t)(uintptr_t)&tls;
        }
    }
    return tls.get();
}

/* The parser for the next decode: the thread's, its spare, or a new one;
 * nullptr when out of memory. */
simdjson::dom::parser *
parser_get(thread_state *ts)
{
    if (ts->parser == nullptr) {
        ts->parser = ts->spare;
        ts->spare = nullptr;
    }
    if (ts->parser == nullptr) {
        ts->parser = new (std::nothrow) simdjson::dom::parser();
        if (ts->parser != nullptr &&
            ts->parser->allocate(4096, FASTJSON_MAX_DEPTH) !=
                simdjson::SUCCESS) {
            delete ts->parser;
            ts->parser = nullptr;
        }
    }
    return ts->parser;
}

void
doc_free(fastjson_doc *d)
{
    std::free(d->lz);
    std::free(d->elems);
    std::free(d->find);
    delete d;
}

size_t
ptr_slot(const json_t *arr, size_t mask)
{
    return (size_t)(((uint64_t)(uintptr_t)arr >> 4) * 0x9e3779b97f4a7c15ull >>
                    32) &
           mask;
}

/* Builds d's lookup from array to lazy entry. false when out of memory. */
bool
doc_index(fastjson_doc *d)
{
    size_t cap = 8;

    while (cap < 2 * d->n_lz)
        cap *= 2;
    d->find = static_cast<size_t *>(std::calloc(cap, sizeof(*d->find)));
    if (d->find == nullptr)
        return false;
    d->find_cap = cap;
    for (size_t k = 0; k < d->n_lz; k++) {
        size_t i = ptr_slot(d->lz[k].arr, cap - 1);

        while (d->find[i] != 0)
            i = (i + 1) & (cap - 1);
        d->find[i] = k + 1;
    }
    return true;
}

tape
doc_tape(const fastjson_doc *d)
{
    return tape{d->w, d->str};
}

/* r as compact JSON (fastjson_ref_write()). */
int
write_at(buf *b, const tape &t, size_t i)
{
    switch (t.type(i)) {
    case T_OBJECT:
    case T_ARRAY: {
        const bool obj = t.type(i) == T_OBJECT;
        const size_t end = t.end(i);
        char sep = obj ? '{' : '[';

        for (size_t at = i + 1; at < end;) {
            if (buf_addc(b, sep) != 0)
                return -1;
            sep = ',';
            if (obj) {
                std::string_view k = t.string(at);

                if (jsonwrite_string(b, k.data(), k.size()) != 0 ||
                    buf_addc(b, ':') != 0)
                    return -1;
                at++;
            }
            if (write_at(b, t, at) != 0)
                return -1;
            at = t.after(at);
        }
        if (sep != ',' && buf_addc(b, sep) != 0)
            return -1;
        return buf_addc(b, obj ? '}' : ']');
    }
    case T_STRING: {
        std::string_view v = t.string(i);

        return jsonwrite_string(b, v.data(), v.size());
    }
    case T_INT64:
        return jsonwrite_integer(b, (json_int_t)(int64_t)t.payload(i));
    case T_DOUBLE: {
        uint64_t bits = t.payload(i);
        double d;

        std::memcpy(&d, &bits, sizeof(d));
        return jsonwrite_real(b, d);
    }
    case T_TRUE:
        return buf_add(b, "true", 4);
    case T_FALSE:
        return buf_add(b, "false", 5);
    case T_NULL:
        return buf_add(b, "null", 4);
    default: /* an integer past int64: the decoder refuses it */
        return -1;
    }
}

/* fastjson_decode(), and fastjson_decode_doc() when doc_out is not
 * nullptr; padded: text is followed by FASTJSON_PADDING zeros, and is
 * parsed where it is instead of copied into the thread's pad. */
json_t *
decode(const char *text, size_t len, const struct fastjson_shape *shape,
       fastjson_doc **doc_out, struct fastjson_error *err, bool padded)
{
    thread_state *ts = state_get();
    simdjson::dom::parser *parser = nullptr;
    simdjson::dom::element root;
    fastjson_doc *doc = nullptr;
    json_t *out = nullptr;
    const char *src = nullptr; /* text, followed by PAD_TAIL zeros */

    err->text[0] = '\0';
    err->oom = false;
    err->syntax = false;
    err->depth = false;
    if (doc_out != nullptr)
        *doc_out = nullptr;
    if (ts == nullptr || (parser = parser_get(ts)) == nullptr)
        goto oom;
    if (padded) {
        src = text;
    } else {
        if (ts->pad_cap < len + PAD_TAIL) {
            size_t cap = len + PAD_TAIL;
            char *p = static_cast<char *>(std::malloc(cap));

            if (p == nullptr)
                goto oom;
            std::free(ts->pad);
            ts->pad = p;
            ts->pad_cap = cap;
        }
        if (len > 0)
            std::memcpy(ts->pad, text, len);
        std::memset(ts->pad + len, 0, PAD_TAIL);
        src = ts->pad;
    }
    {
        auto code = parser->parse(src, len, false).get(root);

        if (code != simdjson::SUCCESS) {
            if (code == simdjson::MEMALLOC || code == simdjson::CAPACITY)
                goto oom;
            if (code == simdjson::UTF8_ERROR)
                snprintf(err->text, sizeof(err->text),
                         "invalid UTF-8 at byte %zu",
                         utf8_bad_offset((const unsigned char *)text, len));
            else if (code == simdjson::DEPTH_ERROR)
                snprintf(err->text, sizeof(err->text),
                         "nested deeper than %d levels", FASTJSON_MAX_DEPTH);
            else if (code == simdjson::NUMBER_ERROR)
                snprintf(err->text, sizeof(err->text),
                         "a number that does not fit (an integer beyond 64 "
                         "bits or a real beyond double)");
            else if (code == simdjson::STRING_ERROR)
                snprintf(err->text, sizeof(err->text),
                         "a bad string escape (a lone UTF-16 surrogate or an "
                         "unknown escape)");
            else
                snprintf(err->text, sizeof(err->text), "%s",
                         syntax_message(code));
            err->syntax =
                code != simdjson::UTF8_ERROR && code != simdjson::DEPTH_ERROR;
            err->depth = code == simdjson::DEPTH_ERROR;
            goto done;
        }
    }
    {
        /* The path and frame stacks (about 100 KiB) live with the thread's
         * parser, not on a server thread's 1 MiB stack. */
        if (ts->w == nullptr) {
            void *mem = std::malloc(sizeof(walk));

            if (mem == nullptr)
                goto oom;
            ts->w = new (mem) walk; /* trivially destructible: free() */
        }
        static_assert(std::is_trivially_destructible<walk>::value,
                      "walk is released with free()");
        walk &w = *ts->w;

        if (doc_out != nullptr) {
            doc = new (std::nothrow) fastjson_doc();
            if (doc == nullptr)
                goto oom;
            doc->parser = parser;
            doc->w = parser->doc.tape.get();
            doc->str = parser->doc.string_buf.get();
            doc->big = len > KEEP_MAX;
        }
        w.ts = ts;
        w.doc = doc;
        /* The root value is the tape's second word, after the root word
         * (as dom::document::root() reads it). */
        w.t = tape{parser->doc.tape.get(), parser->doc.string_buf.get()};
        w.err = err;
        w.depth = 0;
        w.oom = false;
        w.check_nul = has_escaped_nul(src, len);
        if (!walk_doc(w, 1, shape != nullptr ? shape : &shape_all, &out)) {
            json_decref(out);
            out = nullptr;
            if (w.oom)
                goto oom;
        } else if (doc != nullptr && !doc_index(doc)) {
            goto oom;
        }
    }
    goto done;
oom:
    json_decref(out);
    out = nullptr;
    snprintf(err->text, sizeof(err->text), "out of memory");
    err->oom = true;
done:
    if (doc != nullptr && out != nullptr) {
        /* The next decode takes the spare parser or a new one. */
        ts->parser = nullptr; /* the doc owns it now */
        *doc_out = doc;
    } else if (doc != nullptr) {
        doc_free(doc);
    }
    if (len > KEEP_MAX)
        tls.reset();
    return out;
}

} // namespace

extern "C" json_t *
fastjson_decode(const char *text, size_t len,
                const struct fastjson_shape *shape, struct fastjson_error *err)
{
    return decode(text, len, shape, nullptr, err, false);
}

extern "C" json_t *
fastjson_decode_doc(const char *text, size_t len,
                    const struct fastjson_shape *shape,
                    struct fastjson_doc **doc, struct fastjson_error *err)
{
    return decode(text, len, shape, doc, err, false);
}

extern "C" json_t *
fastjson_decode_doc_padded(const char *text, size_t len,
                           const struct fastjson_shape *shape,
                           struct fastjson_doc **doc,
                           struct fastjson_error *err)
{
    return decode(text, len, shape, doc, err, true);
}

extern "C" void
fastjson_doc_release(struct fastjson_doc *doc)
{
    thread_state *ts = tls.get();

    if (doc == nullptr)
        return;
    if (!doc->big && ts != nullptr && ts->parser == nullptr)
        ts->parser = doc->parser;
    else if (!doc->big && ts != nullptr && ts->spare == nullptr)
        ts->spare = doc->parser;
    else
        delete doc->parser;
    doc_free(doc);
}

extern "C" bool
fastjson_lazy_of(const struct fastjson_doc *doc, const json_t *arr,
                 const size_t **at, size_t *n)
{
    if (doc == nullptr || arr == nullptr || doc->find_cap == 0)
        return false;
    const size_t mask = doc->find_cap - 1;

    for (size_t s = ptr_slot(arr, mask); doc->find[s] != 0;
         s = (s + 1) & mask) {
        const fastjson_doc::lazy &l = doc->lz[doc->find[s] - 1];

        if (l.arr == arr) {
            *at = doc->elems + l.first;
            *n = l.n;
            return true;
        }
    }
    return false;
}

extern "C" int
fastjson_ref_type(struct fastjson_ref r)
{
    if (r.doc == nullptr || r.at == 0)
        return -1;
    switch (doc_tape(r.doc).type(r.at)) {
    case T_OBJECT:
        return JSON_OBJECT;
    case T_ARRAY:
        return JSON_ARRAY;
    case T_STRING:
        return JSON_STRING;
    case T_INT64:
    case T_UINT64:
        return JSON_INTEGER;
    case T_DOUBLE:
        return JSON_REAL;
    case T_TRUE:
        return JSON_TRUE;
    case T_FALSE:
        return JSON_FALSE;
    case T_NULL:
        return JSON_NULL;
    default:
        return -1;
    }
}

extern "C" struct fastjson_ref
fastjson_ref_member(struct fastjson_ref r, const char *key)
{
    if (fastjson_ref_type(r) != JSON_OBJECT)
        return fastjson_ref{r.doc, 0};
    const tape t = doc_tape(r.doc);
    const std::string_view k(key);
    const size_t end = t.end(r.at);

    for (size_t at = r.at + 1; at < end; at = t.after(at + 1))
        if (t.string(at) == k)
            return fastjson_ref{r.doc, at + 1};
    return fastjson_ref{r.doc, 0};
}

extern "C" size_t
fastjson_ref_size(struct fastjson_ref r)
{
    int ty = fastjson_ref_type(r);

    if (ty != JSON_OBJECT && ty != JSON_ARRAY)
        return 0;
    const tape t = doc_tape(r.doc);
    size_t n = t.count(r.at);

    if (n >= 0xffffff) { /* the tape's count saturates: count them */
        const size_t end = t.end(r.at);

        n = 0;
        for (size_t at = r.at + 1; at < end;
             at = ty == JSON_OBJECT ? t.after(at + 1) : t.after(at))
            n++;
    }
    return n;
}

extern "C" const char *
fastjson_ref_string(struct fastjson_ref r)
{
    if (fastjson_ref_type(r) != JSON_STRING)
        return nullptr;
    /* simdjson ends each string in its buffer with a NUL. */
    return doc_tape(r.doc).string(r.at).data();
}

extern "C" int
fastjson_ref_write(struct buf *b, struct fastjson_ref r)
{
    if (fastjson_ref_type(r) < 0)
        return -1;
    return write_at(b, doc_tape(r.doc), r.at);
}

extern "C" void
fastjson_thread_release(void)
{
    tls.reset();
}
