/* /dev/shm sized per GPU, mounted in every GPU container, and the memory
 * limits its tmpfs pages count against. */
#include "admission/plan_shm.h"

#include <inttypes.h>
#include <string.h>

#include "admission/plan_names.h"

static int64_t
shm_size_compute(const struct plan *p, int64_t gpus)
{
    const struct settings *s = p->s;
    int64_t size;

    if (p->dec->shm_override >= 0)
        return p->dec->shm_override;
    if (s->shm.per_gpu > 0 && gpus > INT64_MAX / s->shm.per_gpu)
        size = INT64_MAX;
    else
        size = s->shm.per_gpu * gpus;
    if (size < s->shm.min)
        size = s->shm.min;
    if (s->shm.max > 0 && size > s->shm.max)
        size = s->shm.max;
    return size;
}

/* Looks at an existing /dev/shm volume: grow or warn when it is smaller. */
static void
shm_existing(struct plan *p, const char *vname)
{
    const json_t *vol = volume_find(p, vname);
    const json_t *ed;
    const json_t *lim;
    struct quantity q;
    char want[32], have[32];
    size_t idx = 0;

    if (vol == NULL) {
        plan_warn(p->res,
                  "/dev/shm mounts volume \"%.40s\", which the pod lacks; "
                  "add it to spec.volumes",
                  vname);
        return;
    }
    ed = json_object_get(vol, "emptyDir");
    if (!json_is_object(ed))
        return; /* hostPath or another source: the user's choice */
    if (str_get(ed, "medium") == NULL ||
        strcmp(str_get(ed, "medium"), "Memory") != 0) {
        plan_warn(p->res,
                  "/dev/shm volume \"%.40s\" is on disk; kept: set its "
                  "emptyDir medium: Memory",
                  vname);
        return;
    }
    lim = json_object_get(ed, "sizeLimit");
    if (lim == NULL || json_is_null(lim))
        return; /* bounded by the pod's memory limit only */
    if (quantity_of(lim, &q) != 0 || q.value >= p->shm_size)
        return;
    size_format(p->shm_size, want, sizeof(want));
    size_format(q.value, have, sizeof(have));
    if (p->s->shm.existing == SHM_EXISTING_GROW) {
        json_t *list;
        size_t i;
        json_t *v;

        list = arr_get(p->spec, "volumes");
        json_array_foreach(list, i, v)
        {
            if (v == vol)
                idx = i;
        }
        p->shm_grow = (long)idx;
        p->shm_applied = true;
        injected_add(p->res, "shm-grow");
        return;
    }
    plan_warn(p->res,
              "/dev/shm \"%.30s\" is %s, below the %s for %" PRId64
              " GPUs; kept: drop it or set shm.existing: grow",
              vname, have, want, p->res->gpus);
}

int
plan_shm(struct plan *p)
{
    const char *existing = NULL;

    for (size_t i = 0; i < p->n_ctr && existing == NULL; i++)
        existing = mount_at(&p->ctr[i], SHM_PATH);
    if (!p->s->shm.enabled) {
        /* Nothing to add, but the ring check still shares the pod's own
         * /dev/shm, if it has one. */
        if (existing != NULL)
            join(p->shm_volume, sizeof(p->shm_volume), existing, (char *)NULL);
        return 0;
    }
    p->shm_size = shm_size_compute(p, p->res->gpus);
    if (existing != NULL) {
        join(p->shm_volume, sizeof(p->shm_volume), existing, (char *)NULL);
        shm_existing(p, existing);
    } else {
        char size[32];
        json_t *v;

        if (volume_name_unique(p, "ncclguard-shm", p->shm_volume,
                               sizeof(p->shm_volume)) != 0)
            return -1;
        size_format(p->shm_size, size, sizeof(size));
        v = jobj("name", jstr(p->shm_volume), "emptyDir",
                 jobj("medium", jstr("Memory"), "sizeLimit", jstr(size)));
        if (v == NULL || json_array_append_new(p->vol_add, v) != 0)
            return -1;
        p->shm_applied = true;
        injected_add(p->res, "shm");
    }
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];
        size_t before = json_array_size(c->mount_add);

        if (c->gpus == 0)
            continue;
        if (mount_add(c, p->shm_volume, SHM_PATH, false) != 0)
            return -1;
        if (existing != NULL && json_array_size(c->mount_add) > before)
            injected_add(p->res, "shm-mount");
    }
    return 0;
}

/* The resources kinds memory_raise() works on, indexing ctr.mem_new. */
const char *const mem_kinds[2] = {"limits", "requests"};

/* Plans delta more bytes for the memory quantity at
 * base/resources/<mem_kinds[k]>/memory, where it is set. */
static void
memory_raise(struct plan *p, struct ctr *c, int k, int64_t delta)
{
    const json_t *v = json_object_get(
        obj_get(obj_get(c->c, "resources"), mem_kinds[k]), "memory");
    struct quantity q;

    if (v == NULL || json_is_null(v) || quantity_of(v, &q) != 0)
        return; /* only where it is set */
    if (q.value > INT64_MAX - delta)
        return;
    size_format(q.value + delta, c->mem_new[k], sizeof(c->mem_new[k]));
    injected_add(p->res, "memory");
}

/*
 * shm.memoryLimit: raise, for a container whose memory limit (*lim) the
 * shm size exceeds: the limit grows by the shm size, so that the workload
 * keeps its own memory beside a full /dev/shm. The request stays, unless
 * it equals the limit: then it grows too, so that a Guaranteed pod stays
 * Guaranteed (a request is never needed above its old value otherwise).
 */
static void
memory_raise_limit(struct plan *p, struct ctr *c, const struct quantity *lim)
{
    const json_t *rv = json_object_get(
        obj_get(obj_get(c->c, "resources"), "requests"), "memory");
    struct quantity rq;

    memory_raise(p, c, 0, p->shm_size);
    if (rv != NULL && !json_is_null(rv) && quantity_of(rv, &rq) == 0 &&
        rq.milli == lim->milli)
        memory_raise(p, c, 1, p->shm_size);
}

/* tmpfs pages count against the memory limit of the container writing
 * them: warn, or raise the limit where the shm size exceeds it. */
void
plan_memory(struct plan *p)
{
    char shm[32], lim[32];
    const bool pod_memory =
        request_milli(obj_get(p->spec, "resources"), "memory") >= 0;

    if (!p->shm_applied)
        return;
    size_format(p->shm_size, shm, sizeof(shm));
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];
        const json_t *v;
        struct quantity q;

        if (c->gpus == 0)
            continue;
        if (p->s->shm.memory_limit == SHM_MEMLIMIT_RAISE && pod_memory &&
            request_milli(obj_get(c->c, "resources"), "memory") >= 0) {
            /* Raising a container's memory could push the aggregate of
             * requests past spec.resources.requests.memory, or its limit
             * past spec.resources.limits.memory, both of which the
             * apiserver refuses (validatePodResourceConsistency). */
            plan_warn(
                p->res,
                "/dev/shm %s not added to \"%.20s\"'s memory: the pod sets "
                "spec.resources memory; make sure it covers /dev/shm",
                shm, c->name);
            continue;
        }
        v = json_object_get(obj_get(obj_get(c->c, "resources"), "limits"),
                            "memory");
        if (v == NULL || quantity_of(v, &q) != 0 || p->shm_size <= q.value)
            continue;
        if (p->s->shm.memory_limit == SHM_MEMLIMIT_RAISE) {
            memory_raise_limit(p, c, &q);
            continue;
        }
        size_format(q.value, lim, sizeof(lim));
        plan_warn(p->res,
                  "/dev/shm %s exceeds the %s memory limit of \"%.20s\"; "
                  "raise it or set shm.memoryLimit: raise",
                  shm, lim, c->name);
    }
}
