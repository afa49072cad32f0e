/* A per-thread bump arena for jansson values during one admission. */
#include "admission/jsonmem.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <jansson.h>

#if defined(__SANITIZE_ADDRESS__)
#define JSONMEM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JSONMEM_SANITIZED 1
#endif
#endif

/*
 * Under AddressSanitizer the arena poisons what no live value owns: a new
 * chunk is poisoned whole, each allocation unpoisons exactly its bytes and
 * leaves a red zone after them, freeing a value poisons it again, and
 * closing the arena poisons the chunk it keeps. So an overflow, a use after
 * json_decref() or a value used after jsonmem_end() is reported as it
 * would be with malloc, while the allocator production uses is the one
 * under test.
 */
#ifdef JSONMEM_SANITIZED
#include <sanitizer/asan_interface.h>
#define REDZONE 16u
#define POISON(p, n) jm_poison((p), (n))
#define UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))

/* Not inlined, and with GCC's maybe-uninitialized check off: GCC takes the
 * const pointer parameter for a read of the fresh, uninitialised chunk. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
static __attribute__((noinline)) void
jm_poison(void *p, size_t n)
{
    __asan_poison_memory_region(p, n);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#else
#define REDZONE 0u
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* One request's tree for a 1-2 KB review takes about 40 KB; a chunk of
 * this size serves most reviews, and larger ones chain more chunks. */
#define CHUNK_SIZE (256u * 1024u)
/* A chunk larger than this (made for a huge review) is not kept. */
#define CHUNK_KEEP_MAX (1024u * 1024u)
/* Values are aligned for the strictest member jansson's allocations hold
 * (pointers, size_t, json_int_t, double), not for max_align_t: no
 * long double lives in them, and 8 instead of 16 makes a large review's
 * tree 7% smaller (725,584 -> 672,752 bytes for bench/reviews/large.json
 * loaded whole). */
#define ALIGN 8u
_Static_assert(_Alignof(void *) <= ALIGN && _Alignof(size_t) <= ALIGN &&
                   _Alignof(json_int_t) <= ALIGN && _Alignof(double) <= ALIGN,
               "arena alignment below a jansson member's");
/* A chunk this large or larger (one huge array of a hostile review: a
 * million volumes) is allocated in whole huge pages and marked for
 * transparent huge pages, where the kernel offers them for madvise()d
 * memory: a few faults instead of one per 4 KiB page, which cost as much
 * as building the array. */
#define HUGE_PAGE (2u * 1024u * 1024u)

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

/* The chunk a thread keeps between requests is freed when the thread
 * exits (the server's workers at shutdown), through a key destructor. */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void
arena_thread_exit(void *unused)
{
    struct chunk *c, *next;

    (void)unused;
    for (c = arena.head; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    arena.head = NULL;
}

static void
exit_key_create(void)
{
    /* Without the key a thread's last chunk is only lost at its exit. */
    (void)pthread_key_create(&exit_key, arena_thread_exit);
}

/* The chunk holding p, or NULL when p is not arena memory. */
static struct chunk *
arena_owner(const void *p)
{
    const unsigned char *q = p;

    for (struct chunk *c = arena.head; c != NULL; c = c->next)
        if (q >= c->data && q < c->data + c->size)
            return c;
    return NULL;
}

/* A chunk with room for size bytes (freed with free()), or NULL. */
static struct chunk *
chunk_new(size_t size)
{
    void *mem;
    size_t len;

    if (size < HUGE_PAGE || size > SIZE_MAX - HUGE_PAGE - sizeof(struct chunk))
        return malloc(sizeof(struct chunk) + size);
    len = (sizeof(struct chunk) + size + HUGE_PAGE - 1) &
          ~(size_t)(HUGE_PAGE - 1);
    if (posix_memalign(&mem, HUGE_PAGE, len) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(mem, len, MADV_HUGEPAGE); /* advice: may be refused */
#endif
    return mem;
}

static void *
jm_malloc(size_t n)
{
    struct chunk *c = arena.head;
    size_t want = n;
    void *p;

    if (!arena.open)
        return malloc(n);
    if (n > SIZE_MAX - ALIGN - REDZONE - sizeof(struct chunk))
        return NULL;
    n = (n + REDZONE + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (c == NULL || c->size - c->used < n) {
        size_t size = n > CHUNK_SIZE ? n : CHUNK_SIZE;

        c = chunk_new(size);
        if (c == NULL)
            return NULL;
        if (arena.head == NULL) {
            pthread_once(&exit_once, exit_key_create);
            (void)pthread_setspecific(exit_key, c);
        }
        c->size = size;
        c->used = 0;
        c->next = arena.head;
        arena.head = c;
        POISON(c->data, size);
    }
    p = c->data + c->used;
    c->used += n;
    UNPOISON(p, want);
    return p;
}

static void
jm_free(void *p)
{
    struct chunk *c;

    if (p == NULL)
        return;
    c = arena.head != NULL ? arena_owner(p) : NULL;
    if (c == NULL) {
        free(p);
        return;
    }
    /* Arena memory is reclaimed all at once by jsonmem_end(); under ASan
     * the value is poisoned now, up to its red zone. */
#ifdef JSONMEM_SANITIZED
    {
        unsigned char *end = c->data + c->used;
        void *first =
            __asan_region_is_poisoned(p, (size_t)(end - (unsigned char *)p));

        POISON(p, (size_t)((first != NULL ? (unsigned char *)first : end) -
                           (unsigned char *)p));
    }
#endif
}

void
jsonmem_install(void)
{
    const char *env = getenv("NCCLGUARD_JSON_ARENA");

    if (env != NULL && env[0] == '0')
        return;
    json_set_alloc_funcs(jm_malloc, jm_free);
    installed = true;
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
        POISON(keep->data, keep->size);
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

bool
jsonmem_poisoning(void)
{
#ifdef JSONMEM_SANITIZED
    return installed;
#else
    return false;
#endif
}

size_t
jsonmem_used(void)
{
    size_t n = 0;

    for (const struct chunk *c = arena.head; c != NULL; c = c->next)
        n += c->used;
    return n;
}
