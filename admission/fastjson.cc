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

#include <simdjson.h>

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

/* A thread keeps its parser and buffers while the documents it sees stay
 * under this size; a larger one is parsed, then they are dropped. */
constexpr size_t KEEP_MAX = 1024 * 1024;

/* Objects up to this many keys are checked for duplicates pairwise; a
 * larger one goes through the hash set. */
constexpr size_t PAIRWISE_MAX = 16;

const fastjson_shape shape_all = {FASTJSON_ALL, nullptr, nullptr};

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
    simdjson::dom::parser parser;
    char *pad = nullptr; /* the document, copied with simdjson's padding */
    size_t pad_cap = 0;
    slot *slots = nullptr; /* duplicate-key hash set */
    size_t n_slots = 0;
    uint64_t seed = 0;

    thread_state() = default;
    ~thread_state()
    {
        std::free(pad);
        std::free(slots);
    }
    thread_state(const thread_state &) = delete;
    thread_state &operator=(const thread_state &) = delete;
};

thread_local std::unique_ptr<thread_state> tls;

/* One decode's working state. */
struct walk {
    thread_state *ts;
    bool check_nul; /* the text holds "\u0000" somewhere */
    fastjson_error *err;
    step path[FASTJSON_MAX_DEPTH + 2];
    size_t depth;
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

void
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
        snprintf(w.err->text, sizeof(w.err->text), "%s \"%s\" at %s", what,
                 k, ptr);
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
 * key through that escape: simdjson refuses raw control characters. */
bool
has_escaped_nul(const char *text, size_t len)
{
    const char *p = text, *end = text + len;

    while (end - p >= 6) {
        const char *q =
            static_cast<const char *>(std::memchr(p, '\\', (size_t)(end - p - 5)));

        if (q == nullptr)
            return false;
        if (std::memcmp(q + 1, "u0000", 5) == 0)
            return true;
        p = q + 1;
    }
    return false;
}

/* Whether obj (n keys) names a key twice; reports it. Linear: pairwise
 * for a few keys, a hash set beyond. */
__attribute__((noinline)) bool
dup_keys(walk &w, simdjson::dom::object obj)
{
    size_t n = obj.size(); /* from the tape: O(1) below 2^24 keys */
    std::string_view few[PAIRWISE_MAX];

    if (n < 2)
        return false;
    if (n <= PAIRWISE_MAX) {
        n = 0;
        for (auto kv : obj) {
            for (size_t j = 0; j < n; j++)
                if (few[j].size() == kv.key.size() &&
                    std::memcmp(few[j].data(), kv.key.data(),
                                kv.key.size()) == 0) {
                    fail_at(w, "duplicate object key", kv.key);
                    return true;
                }
            few[n++] = kv.key;
        }
        return false;
    }
    if (n >= 0xffffff) { /* the tape's count saturates: count them */
        n = 0;
        for (auto kv : obj) {
            (void)kv;
            n++;
        }
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
    for (auto kv : obj) {
        size_t i = key_hash(ts->seed, kv.key) & mask;

        if (base == nullptr)
            base = kv.key.data();
        while (ts->slots[i].len != UINT32_MAX) {
            const slot &o = ts->slots[i];

            if (o.len == kv.key.size() &&
                std::memcmp(base + o.off, kv.key.data(), o.len) == 0) {
                fail_at(w, "duplicate object key", kv.key);
                dup = true;
                break;
            }
            i = (i + 1) & mask;
        }
        if (dup)
            break;
        ts->slots[i] = slot{(uint32_t)(kv.key.data() - base),
                            (uint32_t)kv.key.size()};
    }
    return dup;
}

const fastjson_shape *
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

/*
 * Checks e (at w.depth) and, when out is not NULL, builds it as shape
 * says into *out. Returns false when the document is refused or memory
 * ran out (w.err / w.oom say which).
 */
bool
visit(walk &w, element e, const fastjson_shape *shape, json_t **out)
{
    json_t *v = nullptr;

    switch (e.type()) {
    case element_type::OBJECT: {
        simdjson::dom::object obj = e.get_object().value_unsafe();
        bool fields = out != nullptr && shape->keep == FASTJSON_FIELDS;

        if (dup_keys(w, obj))
            return false;
        if (out != nullptr) {
            v = json_object();
            if (v == nullptr)
                goto oom;
        }
        w.depth++;
        for (auto kv : obj) {
            const fastjson_shape *sub = out != nullptr ? &shape_all : nullptr;
            json_t *child = nullptr;
            bool keep = out != nullptr;

            w.path[w.depth] = step{kv.key.data(), kv.key.size()};
            if (w.check_nul && has_nul(kv.key)) {
                w.depth--;
                fail_at(w, "\\u0000 in the key", std::string_view());
                goto fail;
            }
            if (fields)
                sub = field_shape(shape, kv.key, &keep);
            if (!visit(w, kv.value, keep ? sub : nullptr,
                       keep ? &child : nullptr))
                goto fail_deeper;
            if (keep && json_object_setn_new_nocheck(v, kv.key.data(),
                                                     kv.key.size(), child)) {
                w.oom = true;
                goto fail_deeper;
            }
        }
        w.depth--;
        break;
    }
    case element_type::ARRAY: {
        simdjson::dom::array arr = e.get_array().value_unsafe();
        const fastjson_shape *each = nullptr;
        size_t i = 0;

        if (out != nullptr) {
            v = json_array();
            if (v == nullptr)
                goto oom;
            each = &shape_all;
            if (shape->keep == FASTJSON_EACH && shape->each != nullptr)
                each = shape->each;
        }
        w.depth++;
        for (element x : arr) {
            bool keep = out != nullptr &&
                        (shape->keep != FASTJSON_FIRST || i == 0);
            json_t *child = nullptr;

            w.path[w.depth] = step{nullptr, i};
            if (!visit(w, x, keep ? each : nullptr, keep ? &child : nullptr))
                goto fail_deeper;
            if (keep && json_array_append_new(v, child) != 0) {
                w.oom = true;
                goto fail_deeper;
            }
            i++;
        }
        w.depth--;
        break;
    }
    case element_type::STRING: {
        std::string_view s = e.get_string().value_unsafe();

        if (w.check_nul && has_nul(s)) {
            fail_at(w, "\\u0000 in a string", std::string_view());
            return false;
        }
        if (out != nullptr) {
            v = json_stringn_nocheck(s.data(), s.size());
            if (v == nullptr)
                goto oom;
        }
        break;
    }
    case element_type::INT64:
        if (out != nullptr) {
            v = json_integer((json_int_t)e.get_int64().value_unsafe());
            if (v == nullptr)
                goto oom;
        }
        break;
    case element_type::UINT64:
        /* simdjson takes integers up to 2^64-1; jansson's json_int_t,
         * and so every reader after this one, stops at INT64_MAX. */
        fail_at(w, "integer too big for 64 bits", std::string_view());
        return false;
    case element_type::DOUBLE:
        if (out != nullptr) {
            v = json_real(e.get_double().value_unsafe());
            if (v == nullptr)
                goto oom;
        }
        break;
    case element_type::BOOL:
        if (out != nullptr) {
            v = json_boolean(e.get_bool().value_unsafe());
        }
        break;
    case element_type::NULL_VALUE:
        if (out != nullptr)
            v = json_null();
        break;
    }
    if (out != nullptr)
        *out = v;
    return true;
fail_deeper:
    w.depth--;
fail:
    json_decref(v);
    return false;
oom:
    w.oom = true;
    return false;
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

thread_state *
state_get(void)
{
    if (!tls) {
        tls.reset(new (std::nothrow) thread_state());
        if (tls && tls->parser.allocate(4096, FASTJSON_MAX_DEPTH) !=
                       simdjson::SUCCESS)
            tls.reset();
        if (tls) {
            uint64_t a = (uint64_t)(uintptr_t)tls.get();

            /* Different per thread and per run (ASLR); the hash set only
             * needs its collisions not to be precomputable. */
            tls->seed = key_hash(a, std::string_view((const char *)&a,
                                                      sizeof(a))) ^
                        (uint64_t)(uintptr_t)&tls;
        }
    }
    return tls.get();
}

} // namespace

extern "C" json_t *
fastjson_decode(const char *text, size_t len,
                const struct fastjson_shape *shape, struct fastjson_error *err)
{
    thread_state *ts = state_get();
    std::unique_ptr<walk> owned;
    element root;
    json_t *out = nullptr;

    err->text[0] = '\0';
    err->oom = false;
    if (ts == nullptr)
        goto oom;
    if (ts->pad_cap < len + simdjson::SIMDJSON_PADDING) {
        size_t cap = len + simdjson::SIMDJSON_PADDING;
        char *p = static_cast<char *>(std::malloc(cap));

        if (p == nullptr)
            goto oom;
        std::free(ts->pad);
        ts->pad = p;
        ts->pad_cap = cap;
    }
    if (len > 0)
        std::memcpy(ts->pad, text, len);
    std::memset(ts->pad + len, 0, simdjson::SIMDJSON_PADDING);
    {
        auto code = ts->parser.parse(ts->pad, len, false).get(root);

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
                         simdjson::error_message(code));
            goto done;
        }
    }
    {
        /* The path stack is 16 KiB: on the heap, not on a server thread's
         * 1 MiB stack, which the recursion below already uses. */
        owned.reset(new (std::nothrow) walk);
        if (!owned)
            goto oom;
        walk &w = *owned;

        w.ts = ts;
        w.err = err;
        w.depth = 0;
        w.oom = false;
        w.check_nul = has_escaped_nul(text, len);
        if (!visit(w, root, shape != nullptr ? shape : &shape_all, &out)) {
            out = nullptr;
            if (w.oom)
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
    if (len > KEEP_MAX)
        tls.reset();
    return out;
}

extern "C" void
fastjson_thread_release(void)
{
    tls.reset();
}
