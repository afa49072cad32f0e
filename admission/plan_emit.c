/* The emit pass: the planned additions as patch operations, in one fixed
 * order, and the ncclguard.io/ annotations. */
#include "admission/plan_emit.h"

#include <string.h>

#include "admission/patch.h"
#include "admission/plan_env.h"
#include "admission/plan_shm.h"

/*
 * The op that sets member key of parent to a new value: "replace" where
 * the pod has that key already, whatever its value (null, a string where
 * an object belongs), else "add". patch_check() refuses an add onto an
 * existing key, so every emitter that writes a whole member asks here.
 * parent may be NULL (then "add": its own add makes it).
 */
static const char *
member_op(const json_t *parent, const char *key)
{
    return json_object_get(parent, key) != NULL ? "replace" : "add";
}

/* Emits a planned list of additions: the whole list in one op when the
 * pod has none (a replace when it has null or another non-list), else one
 * append per item. list is borrowed. */
static int
emit_list(struct plan *p, json_t *parent, const char *base, const char *key,
          json_t *list)
{
    char path[256];
    size_t i;
    json_t *v;

    if (json_array_size(list) == 0)
        return 0;
    /* The planned lists are written as they are. */
    if (arr_get(parent, key) == NULL) {
        join(path, sizeof(path), base, "/", key, (char *)NULL);
        return patch_text_append(&p->pt, member_op(parent, key), path,
                                 json_incref(list));
    }
    join(path, sizeof(path), base, "/", key, "/-", (char *)NULL);
    json_array_foreach(list, i, v)
    {
        if (patch_text_append(&p->pt, "add", path, json_incref(v)) != 0)
            return -1;
    }
    return 0;
}

static int
emit_caps(struct plan *p, struct ctr *c)
{
    json_t *sc = obj_get(c->c, "securityContext");
    json_t *caps = obj_get(sc, "capabilities");
    char path[160];

    if (json_array_size(c->cap_add) == 0)
        return 0;
    if (sc == NULL) {
        join(path, sizeof(path), c->base, "/securityContext", (char *)NULL);
        return patch_text_append(
            &p->pt, member_op(c->c, "securityContext"), path,
            jobj("capabilities",
                 jobj("add", json_incref(c->cap_add), NULL, NULL), NULL, NULL));
    }
    if (caps == NULL) {
        join(path, sizeof(path), c->base, "/securityContext/capabilities",
             (char *)NULL);
        return patch_text_append(
            &p->pt, member_op(sc, "capabilities"), path,
            jobj("add", json_incref(c->cap_add), NULL, NULL));
    }
    join(path, sizeof(path), c->base, "/securityContext/capabilities",
         (char *)NULL);
    return emit_list(p, caps, path, "add", c->cap_add);
}

/* Records what was done in the pod's annotations and the audit record. */
static int
emit_annotations(struct plan *p)
{
    char mutated[256] = "", gpus[32], shm[32], t[24];
    size_t i;
    json_t *v;
    json_t *add = NULL;
    const char *key;

    json_array_foreach(p->res->injected, i, v)
    {
        if (mutated[0] != '\0')
            buf_append(mutated, sizeof(mutated), ",");
        buf_append(mutated, sizeof(mutated), json_string_value(v));
    }
    join(gpus, sizeof(gpus), i64_text(p->res->gpus, t), (char *)NULL);
    add = jobj(ANN_MUTATED, jstr(mutated), ANN_GPUS, jstr(gpus));
    if (add == NULL)
        return -1;
    /* The rule name was cut to fit: checked, not assumed, UTF-8. */
    if (json_object_set_new_nocheck(add, ANN_RULE, json_string(p->res->rule)) !=
        0)
        goto fail;
    if (p->shm_applied) {
        size_format(p->shm_size, shm, sizeof(shm));
        if (json_object_set_new_nocheck(add, ANN_SHM, jstr(shm)) != 0)
            goto fail;
        if (json_object_set_new_nocheck(p->res->audit, "shm-size", jstr(shm)))
            goto fail;
    }
    if (json_object_set_new_nocheck(p->res->audit, "mutated",
                                    json_string(mutated)) ||
        json_object_set_new_nocheck(p->res->audit, "gpus", jstr(gpus)))
        goto fail;

    if (p->meta == NULL) {
        if (patch_text_append(
                &p->pt, member_op(p->pod, "metadata"), "/metadata",
                jobj("annotations", json_incref(add), NULL, NULL)))
            goto fail;
    } else if (p->annotations == NULL) {
        if (patch_text_append(&p->pt, member_op(p->meta, "annotations"),
                              "/metadata/annotations", json_incref(add)))
            goto fail;
    } else {
        json_object_foreach(add, key, v)
        {
            char esc[256], path[300];
            const json_t *cur = json_object_get(p->annotations, key);

            if (json_is_string(cur) &&
                strcmp(json_string_value(cur), json_string_value(v)) == 0)
                continue;
            if (patch_pointer_escape(key, esc, sizeof(esc)) != 0)
                goto fail;
            join(path, sizeof(path), "/metadata/annotations/", esc,
                 (char *)NULL);
            /* A reviewed-again pod whose value changed (or is no string):
             * replaced. */
            if (patch_text_append(&p->pt, cur != NULL ? "replace" : "add", path,
                                  json_incref(v)))
                goto fail;
        }
    }
    json_decref(add);
    return 0;
fail:
    json_decref(add);
    return -1;
}

/* The profile's configMapRef, first in c's envFrom (the list itself when
 * c has none). */
static int
emit_profile(struct plan *p, const struct ctr *c)
{
    bool have_list = arr_get(c->c, "envFrom") != NULL;
    json_t *v = profile_ref(p->s);
    char path[96];

    if (!have_list)
        v = jlist(v);
    join(path, sizeof(path), c->base, "/envFrom", have_list ? "/0" : "",
         (char *)NULL);
    if (v == NULL)
        return -1;
    /* An insert at the head of the list, else the list itself (replacing
     * an envFrom: null). */
    return patch_text_append(
        &p->pt, have_list ? "add" : member_op(c->c, "envFrom"), path, v);
}

/* The ring-check init container, last of the init containers. */
static int
emit_ringcheck(struct plan *p)
{
    const struct buf *rc = &p->rc_text;

    if (arr_get(p->spec, "initContainers") != NULL)
        return patch_text_append_raw(&p->pt, "add", "/spec/initContainers/-",
                                     rc->p, rc->len, false);
    return patch_text_append_raw(&p->pt, member_op(p->spec, "initContainers"),
                                 "/spec/initContainers", rc->p, rc->len, true);
}
/*
 * The emit pass: the one place that writes patch operations. The plan_*
 * steps only fill struct plan (and the warnings, the injected list and
 * the ring-check note); this writes what they planned, in this fixed
 * order:
 *
 *   1. envFrom: the profile's configMapRef, per GPU container, in the
 *      order of spec.containers then spec.initContainers (ctr order);
 *   2. the sizeLimit of the pod's own /dev/shm emptyDir (shm.existing:
 *      grow);
 *   3. per container, its memory limit then its memory request
 *      (shm.memoryLimit: raise);
 *   4. spec.hostIPC;
 *   5. the ring-check init container, appended to initContainers;
 *   6. per container, its env, then volumeMounts, then capabilities;
 *   7. spec.volumes;
 *   8. the ncclguard.io/ annotations, only when 1-7 wrote something.
 *
 * No op inserts before an index that a later op names: the ring check goes
 * at the end of initContainers and the profile at the head of one
 * container's envFrom, so every path computed from the pod stays valid.
 * An op that writes a whole member (a list, securityContext, hostIPC, an
 * annotation) is a "replace" where the pod has that member already (null,
 * false, a changed value on a pod reviewed again), else an "add"
 * (member_op()): patch_check() refuses an add onto an existing key.
 * Returns 0 (an empty patch: nothing to do), or -1 when out of memory.
 */
int
plan_emit(struct plan *p)
{
    char path[128], t[24];

    for (size_t i = 0; i < p->n_ctr; i++)
        if (p->ctr[i].profile_add && emit_profile(p, &p->ctr[i]) != 0)
            return -1;
    if (p->shm_grow >= 0) {
        char want[32];

        size_format(p->shm_size, want, sizeof(want));
        join(path, sizeof(path), "/spec/volumes/", i64_text(p->shm_grow, t),
             "/emptyDir/sizeLimit", (char *)NULL);
        if (patch_text_append(&p->pt, "replace", path, jstr(want)) != 0)
            return -1;
    }
    for (size_t i = 0; i < p->n_ctr; i++) {
        const struct ctr *c = &p->ctr[i];

        for (int k = 0; k < 2; k++) {
            if (c->mem_new[k][0] == '\0')
                continue;
            join(path, sizeof(path), c->base, "/resources/", mem_kinds[k],
                 "/memory", (char *)NULL);
            if (patch_text_append(&p->pt, "replace", path, jstr(c->mem_new[k])))
                return -1;
        }
    }
    if (p->host_ipc_add &&
        patch_text_append(&p->pt, member_op(p->spec, "hostIPC"),
                          "/spec/hostIPC", json_true()) != 0)
        return -1;
    if (p->rc_text.len > 0 && emit_ringcheck(p) != 0)
        return -1;
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];

        if (emit_list(p, c->c, c->base, "env", c->env_add) != 0 ||
            emit_list(p, c->c, c->base, "volumeMounts", c->mount_add) != 0 ||
            emit_caps(p, c) != 0)
            return -1;
    }
    if (emit_list(p, p->spec, "/spec", "volumes", p->vol_add) != 0)
        return -1;
    if (p->pt.n_ops == 0)
        return 0;
    return emit_annotations(p);
}
