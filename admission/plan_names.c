/* Names in one pod: the name set, unique volume names, container names,
 * a ring check of ours recognised by its name and first argument. */
#include "admission/plan_names.h"

#include <stdlib.h>
#include <string.h>

static uint64_t
name_hash(const char *s)
{
    uint64_t h = 14695981039346656037ULL; /* FNV-1a, 64 bits */

    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

bool
nameset_has(const struct nameset *set, const char *name)
{
    if (set->cap == 0)
        return false;
    for (size_t i = name_hash(name) & (set->cap - 1); set->slot[i] != NULL;
         i = (i + 1) & (set->cap - 1))
        if (strcmp(set->slot[i], name) == 0)
            return true;
    return false;
}

/* Grows set to cap slots (a power of two, at least twice the names it
 * holds). Returns 0, or -1 when out of memory. */
static int
nameset_grow(struct nameset *set, size_t cap)
{
    size_t i;
    const char **slot = calloc(cap, sizeof(*slot));

    if (slot == NULL)
        return -1;
    for (size_t k = 0; k < set->cap; k++) {
        if (set->slot[k] == NULL)
            continue;
        for (i = name_hash(set->slot[k]) & (cap - 1); slot[i] != NULL;
             i = (i + 1) & (cap - 1))
            ;
        slot[i] = set->slot[k];
    }
    free(set->slot);
    set->slot = slot;
    set->cap = cap;
    return 0;
}

/* At most 65,536 names are reserved (a long list of non-objects names
 * nothing). */
int
nameset_reserve(struct nameset *set, size_t n)
{
    size_t cap = 16;

    if (n > 65536)
        n = 65536;
    while (cap < 2 * (set->n + n))
        cap *= 2;
    return cap > set->cap ? nameset_grow(set, cap) : 0;
}

/* Adds name (borrowed) unless present. Returns 0, or -1 when out of
 * memory. */
int
nameset_add(struct nameset *set, const char *name)
{
    size_t i;

    if (2 * (set->n + 1) > set->cap &&
        nameset_grow(set, set->cap ? 2 * set->cap : 16) != 0)
        return -1;
    for (i = name_hash(name) & (set->cap - 1); set->slot[i] != NULL;
         i = (i + 1) & (set->cap - 1))
        if (strcmp(set->slot[i], name) == 0)
            return 0;
    set->slot[i] = name;
    set->n++;
    return 0;
}

void
nameset_release(struct nameset *set)
{
    free(set->slot);
    memset(set, 0, sizeof(*set));
}

/* Builds p->vol_names from spec.volumes, once. Returns 0, or -1 when out
 * of memory. */
static int
volume_names_build(struct plan *p)
{
    json_t *list;
    size_t i;
    json_t *v;

    if (p->vol_names_built)
        return 0;
    list = arr_get(p->spec, "volumes");
    if (nameset_reserve(&p->vol_names, json_array_size(list)) != 0)
        return -1;
    json_array_foreach(list, i, v)
    {
        /* (The view builds a volume that is not an object as null.) */
        const char *n = json_is_object(v) ? str_get(v, "name") : NULL;

        if (n != NULL && nameset_add(&p->vol_names, n) != 0)
            return -1;
    }
    p->vol_names_built = true;
    return 0;
}

/* Whether a volume of the pod, or one the plan adds (a handful), is called
 * name. Call volume_names_build() first. */
static bool
volume_name_taken(const struct plan *p, const char *name)
{
    size_t i;
    json_t *v;

    if (nameset_has(&p->vol_names, name))
        return true;
    json_array_foreach(p->vol_add, i, v)
    {
        const char *n = str_get(v, "name");

        if (n != NULL && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

const json_t *
volume_find(const struct plan *p, const char *name)
{
    json_t *list;
    size_t i;
    json_t *v;

    list = arr_get(p->spec, "volumes");
    json_array_foreach(list, i, v)
    {
        const char *n = json_is_object(v) ? str_get(v, "name") : NULL;

        if (n != NULL && strcmp(n, name) == 0)
            return v;
    }
    return NULL;
}

/* Picks base, or base-2, base-3, ... that no volume uses yet. Kubernetes
 * refuses a pod whose volume names repeat (ValidateVolumes in
 * pkg/apis/core/validation/validation.go: "must be unique"). Each candidate
 * is one set lookup, so a pod holding a long run of the candidates costs
 * time linear in its size. */
int
volume_name_unique(struct plan *p, const char *base, char *out, size_t n)
{
    if (volume_names_build(p) != 0)
        return -1;
    join(out, n, base, (char *)NULL);
    for (int i = 2; volume_name_taken(p, out); i++) {
        char t[24];

        if (i > 1000)
            return -1;
        join(out, n, base, "-", i64_text(i, t), (char *)NULL);
    }
    return 0;
}

/*
 * Whether c is a ring check this webhook injected: an init container named
 * ncclguard-ringcheck, or ncclguard-ringcheck-N (the name taken when the
 * pod already had a container called ncclguard-ringcheck) whose first
 * argument is the one ringcheck_args() always writes first. A later review
 * of the same pod (reinvocation) then finds its check and adds no other.
 */
bool
ctr_is_ringcheck(const struct ctr *c)
{
    const size_t n = strlen(RINGCHECK_NAME);
    const json_t *arg0 = json_array_get(arr_get(c->c, "args"), 0);
    const char *rest;

    if (!c->init || strncmp(c->name, RINGCHECK_NAME, n) != 0)
        return false;
    rest = c->name + n;
    if (*rest == '\0')
        return true;
    if (*rest != '-' || rest[1] < '1' || rest[1] > '9')
        return false;
    for (rest++; *rest != '\0'; rest++)
        if (*rest < '0' || *rest > '9')
            return false;
    return json_is_string(arg0) &&
           strcmp(json_string_value(arg0), RINGCHECK_FIRST_ARG) == 0;
}

/* Builds p->ctr_names, once: every container name of the pod, ephemeral
 * containers included, since Kubernetes wants them all distinct
 * (validateContainers / validateInitContainers in
 * pkg/apis/core/validation/validation.go check one set of names across
 * containers, init containers and ephemeral containers). */
int
ctr_names_build(struct plan *p)
{
    json_t *list;
    size_t i;
    json_t *c;

    if (p->ctr_names_built)
        return 0;
    for (size_t k = 0; k < p->n_ctr; k++)
        if (nameset_add(&p->ctr_names, p->ctr[k].name) != 0)
            return -1;
    list = arr_get(p->spec, "ephemeralContainers");
    json_array_foreach(list, i, c)
    {
        const char *n = str_get(c, "name");

        if (n != NULL && nameset_add(&p->ctr_names, n) != 0)
            return -1;
    }
    p->ctr_names_built = true;
    return 0;
}
