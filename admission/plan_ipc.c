/* IPC: capabilities for NCCL's transports, and spec.hostIPC. */
#include "admission/plan_ipc.h"

#include <string.h>
#include <strings.h>

static bool
cap_eq(const char *a, const char *b)
{
    if (strncasecmp(a, "CAP_", 4) == 0)
        a += 4;
    if (strncasecmp(b, "CAP_", 4) == 0)
        b += 4;
    return strcasecmp(a, b) == 0;
}

static bool
cap_has(const struct ctr *c, const char *cap)
{
    const json_t *lists[2] = {
        arr_get(obj_get(obj_get(c->c, "securityContext"), "capabilities"),
                "add"),
        c->cap_add};

    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *v;

        json_array_foreach(lists[l], i, v)
        {
            if (json_is_string(v) && cap_eq(json_string_value(v), cap))
                return true;
        }
    }
    return false;
}

/* Whether a container runs as non-root: runAsNonRoot, or a runAsUser other
 * than 0, at container level, else at pod level. */
static bool
runs_non_root(const struct plan *p, const struct ctr *c)
{
    const json_t *levels[2] = {obj_get(c->c, "securityContext"),
                               obj_get(p->spec, "securityContext")};
    bool have_nonroot = false, nonroot = false, have_user = false;
    json_int_t user = 0;

    for (int l = 0; l < 2; l++) {
        const json_t *sc = levels[l];
        const json_t *v;

        if (sc == NULL)
            continue;
        v = json_object_get(sc, "runAsNonRoot");
        if (!have_nonroot && json_is_boolean(v)) {
            have_nonroot = true;
            nonroot = json_is_true(v);
        }
        v = json_object_get(sc, "runAsUser");
        if (!have_user && json_is_integer(v)) {
            have_user = true;
            user = json_integer_value(v);
        }
    }
    return nonroot || (have_user && user != 0);
}

int
plan_ipc(struct plan *p)
{
    const struct settings *s = p->s;

    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];

        if (c->gpus == 0)
            continue;
        for (size_t k = 0; k < s->ipc.n_capabilities; k++) {
            const char *cap = s->ipc.capabilities[k];

            if (cap_has(c, cap))
                continue;
            if (json_array_append_new(add_list(&c->cap_add), jstr(cap)) != 0)
                return -1;
            injected_add(p->res, "capabilities");
            if (cap_eq(cap, "IPC_LOCK") && s->ipc.warn_non_root &&
                runs_non_root(p, c))
                plan_warn(p->res,
                          "IPC_LOCK in container \"%.30s\" has no effect: it "
                          "runs as non-root; run it as root or drop IPC_LOCK",
                          c->name);
        }
    }
    if (s->ipc.host_ipc && !json_is_true(json_object_get(p->spec, "hostIPC"))) {
        p->host_ipc_add = true;
        injected_add(p->res, "hostIPC");
    }
    return 0;
}
