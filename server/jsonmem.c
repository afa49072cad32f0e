/* A per-thread bump arena for jansson values during one admission. */
#include "jsonmem.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#if defined(__SANITIZE_ADDRESS__)
#define JSONMEM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JSONMEM_SANITIZED 1
#endif
#endif

/* One request's tree for a 1-2 KB review takes about 40 KB; a chunk of
 * this size serves most reviews, and larger ones chain more chunks. */
#define CHUNK_SIZE (256u * 1024u)
/* A chunk larger than this (made for a huge review) is not kept. */
#define CHUNK_KEEP_MAX (1024u * 1024u)
#define ALIGN 16u

struct chunk {
    struct chunk *next;
    size_t size;
    size_t used;
    _Alignas(16) unsigned char data[];
};

struct arena {
    struct chunk *head;
    bool open;
};

static _Thread_local struct arena arena;
static bool installed;

static bool
arena_owns(const void *p)
{
    const unsigned char *q = p;

    for (const struct chunk *c = arena.head; c != NULL; c = c->next)
        if (q >= c->data && q < c->data + c->size)
            return true;
    return false;
}

/* Unused in sanitizer builds, which keep jansson on plain malloc. */
static __attribute__((unused)) void *
jm_malloc(size_t n)
{
    struct chunk *c = arena.head;
    void *p;

    if (!arena.open)
        return malloc(n);
    if (n > SIZE_MAX - ALIGN - sizeof(struct chunk))
        return NULL;
    n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (c == NULL || c->size - c->used < n) {
        size_t size = n > CHUNK_SIZE ? n : CHUNK_SIZE;

        c = malloc(sizeof(*c) + size);
        if (c == NULL)
            return NULL;
        c->size = size;
        c->used = 0;
        c->next = arena.head;
        arena.head = c;
    }
    p = c->data + c->used;
    c->used += n;
    return p;
}

static void
jm_free(void *p)
{
    /* Arena memory is reclaimed all at once by jsonmem_end(). */
    if (p == NULL || (arena.head != NULL && arena_owns(p)))
        return;
    free(p);
}

void
jsonmem_install(void)
{
#ifndef JSONMEM_SANITIZED
    const char *env = getenv("NCCLGUARD_JSON_ARENA");

    if (env != NULL && env[0] == '0')
        return;
    json_set_alloc_funcs(jm_malloc, jm_free);
    installed = true;
#endif
}

void
jsonmem_begin(void)
{
    arena.open = true;
}

void
jsonmem_end(void)
{
    struct chunk *c, *next, *keep = NULL;

    arena.open = false;
    for (c = arena.head; c != NULL; c = next) {
        next = c->next;
        if (keep == NULL && c->size <= CHUNK_KEEP_MAX) {
            keep = c;
            continue;
        }
        free(c);
    }
    if (keep != NULL) {
        keep->next = NULL;
        keep->used = 0;
    }
    arena.head = keep;
}

void
jsonmem_free(void *p)
{
    jm_free(p);
}

bool
jsonmem_installed(void)
{
    return installed;
}

size_t
jsonmem_used(void)
{
    size_t n = 0;

    for (const struct chunk *c = arena.head; c != NULL; c = c->next)
        n += c->used;
    return n;
}
