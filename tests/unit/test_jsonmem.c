/* Unit tests for the per-request jansson arena (admission/jsonmem.c). */
#include "admission/jsonmem.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "harness.h"

/* A value made before the arena opens is plain heap memory: freeing it
 * inside the arena must really free it (valgrind/ASan would see a leak or
 * a bad free otherwise), and it stays valid until then. */
static void
test_outside_values(void)
{
    json_t *before = json_pack("{s:s}", "a", "b");

    jsonmem_begin();
    CHECK_STR(json_string_value(json_object_get(before, "a")), "b");
    json_decref(before);
    jsonmem_end();
    CHECK_INT(jsonmem_used(), 0);
}

/* Values made inside carry their data, the dumped text is freed with
 * jsonmem_free, and closing the arena hands everything back. */
static void
test_inside_values(void)
{
    char *text;
    json_t *v;

    jsonmem_begin();
    v = json_loads("{\"kind\":\"Pod\",\"n\":[1,2,3]}", 0, NULL);
    CHECK(v != NULL);
    if (jsonmem_installed())
        CHECK(jsonmem_used() > 0);
    else
        CHECK_INT(jsonmem_used(), 0);
    text = json_dumps(v, JSON_COMPACT);
    CHECK_STR(text, "{\"kind\":\"Pod\",\"n\":[1,2,3]}");
    jsonmem_free(text);
    json_decref(v);
    jsonmem_end();
    CHECK_INT(jsonmem_used(), 0);
}

/* An allocation larger than a chunk gets its own, and is not kept. */
static void
test_big_value(void)
{
    size_t n = 3u * 1024u * 1024u;
    char *s = malloc(n + 1);
    json_t *v;

    CHECK(s != NULL);
    if (s == NULL)
        return;
    memset(s, 'x', n);
    s[n] = '\0';
    jsonmem_begin();
    v = json_string(s);
    CHECK(v != NULL);
    CHECK_INT(json_string_length(v), n);
    if (jsonmem_installed())
        CHECK(jsonmem_used() >= n);
    json_decref(v);
    jsonmem_end();
    CHECK_INT(jsonmem_used(), 0);
    free(s);
}

/* An array grown past the huge-page size (a hostile review's volumes)
 * lives in chunks of whole huge pages: its elements stay right while the
 * table moves from chunk to chunk, and closing the arena frees them all
 * (ASan's leak check). */
static void
test_huge_array(void)
{
    const size_t n = 600000; /* a 4.8 MB table, copied as it doubles */
    json_t *a;
    bool ok = true;

    jsonmem_begin();
    a = json_array();
    CHECK(a != NULL);
    for (size_t i = 0; i < n && a != NULL; i++)
        if (json_array_append_new(a, json_integer((json_int_t)i)) != 0) {
            ok = false;
            break;
        }
    CHECK(ok);
    CHECK_INT(json_array_size(a), n);
    for (size_t i = 0; i < n && ok; i += 9973)
        ok = json_integer_value(json_array_get(a, i)) == (json_int_t)i;
    CHECK(ok);
    CHECK(json_integer_value(json_array_get(a, n - 1)) == (json_int_t)(n - 1));
    if (jsonmem_installed())
        CHECK(jsonmem_used() >= n * sizeof(json_t *));
    jsonmem_end();
    CHECK_INT(jsonmem_used(), 0);
}

/* Many requests in a row reuse the arena; values stay correct. */
static void
test_reuse(void)
{
    int bad = 0;

    for (int i = 0; i < 2000; i++) {
        json_t *v;

        jsonmem_begin();
        v = json_pack("{s:i,s:[s,s]}", "i", i, "l", "x", "y");
        if (v == NULL || json_integer_value(json_object_get(v, "i")) != i)
            bad++;
        json_decref(v);
        jsonmem_end();
    }
    CHECK_INT(bad, 0);
}

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif

#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>

/* Under ASan the arena is the allocator in use, and it poisons: the red
 * zone after a value, a value after json_decref(), and everything once the
 * arena is closed. (Asked of ASan directly: touching the bytes would end
 * the test.) */
static void
test_poisoning(void)
{
    json_t *keep, *drop;
    const char *k, *d;

    CHECK(jsonmem_installed());
    CHECK(jsonmem_poisoning());
    jsonmem_begin();
    keep = json_string("kept until the arena closes");
    drop = json_string("dropped at once");
    CHECK(keep != NULL && drop != NULL);
    if (keep == NULL || drop == NULL)
        return;
    k = json_string_value(keep);
    d = json_string_value(drop);
    CHECK(!__asan_address_is_poisoned(k));
    CHECK(!__asan_address_is_poisoned(k + strlen(k)));    /* its NUL */
    CHECK(__asan_address_is_poisoned(k + strlen(k) + 1)); /* red zone */
    json_decref(drop);
    CHECK(__asan_address_is_poisoned(d));
    CHECK(!__asan_address_is_poisoned(k));
    jsonmem_end();
    CHECK(__asan_address_is_poisoned(k));
    /* Reused for the next request: live again only once handed out. */
    jsonmem_begin();
    keep = json_string("next request");
    CHECK(keep != NULL);
    CHECK(!__asan_address_is_poisoned(json_string_value(keep)));
    json_decref(keep);
    jsonmem_end();
}
#else
static void
test_poisoning(void)
{
    CHECK(!jsonmem_poisoning());
}
#endif

/* Every value the arena hands out is aligned for a double and a pointer,
 * whatever length of string came before it, and the reals read back. */
static void
test_alignment(void)
{
    char text[48];
    json_t *a;
    bool aligned = true, exact = true;

    memset(text, 'x', sizeof(text));
    jsonmem_begin();
    a = json_array();
    CHECK(a != NULL);
    for (size_t n = 0; a != NULL && n < sizeof(text); n++) {
        json_t *s = json_stringn(text, n), *r = json_real((double)n + 0.5);

        if (s == NULL || r == NULL) {
            CHECK(false);
            break;
        }
        if ((uintptr_t)s % _Alignof(double) != 0 ||
            (uintptr_t)r % _Alignof(double) != 0 ||
            (uintptr_t)r % _Alignof(void *) != 0 ||
            (uintptr_t)json_string_value(s) % _Alignof(void *) != 0)
            aligned = false;
        if (json_real_value(r) != (double)n + 0.5)
            exact = false;
        CHECK_INT(json_array_append_new(a, s), 0);
        CHECK_INT(json_array_append_new(a, r), 0);
    }
    CHECK(aligned);
    CHECK(exact);
    json_decref(a);
    jsonmem_end();
}

int
main(void)
{
    jsonmem_install();
    jsonmem_free(NULL);
    test_outside_values();
    test_inside_values();
    test_big_value();
    test_huge_array();
    test_reuse();
    test_poisoning();
    test_alignment();
    return harness_finish();
}
