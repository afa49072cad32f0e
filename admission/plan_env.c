/* Env and the profile: envFrom first, the policy's extra env and debug
 * variables, NCCL_CONF_FILE under onFailure: fallback. */
#include "admission/plan_env.h"

#include <string.h>

#include "admission/plan_ringcheck.h"

json_t *
profile_ref(const struct settings *s)
{
    return jobj("configMapRef",
                jobj("name", jstr(s->profile.name), "optional",
                     json_boolean(s->profile.optional)),
                NULL, NULL);
}

bool
profile_present(const json_t *c, const char *name)
{
    json_t *list;
    size_t i;
    json_t *e;

    list = arr_get(c, "envFrom");
    json_array_foreach(list, i, e)
    {
        const char *n = str_get(obj_get(e, "configMapRef"), "name");

        if (n != NULL && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

/* envFrom: the profile first, so that the user's own sources win. */
void
plan_profile(struct plan *p)
{
    const struct settings *s = p->s;

    if (!s->profile.enabled || s->profile.name == NULL ||
        s->profile.name[0] == '\0')
        return;
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];

        if (c->gpus == 0 || profile_present(c->c, s->profile.name))
            continue;
        c->profile_add = true;
        injected_add(p->res, "envFrom");
    }
}

int
plan_env(struct plan *p)
{
    const struct settings *s = p->s;
    bool fallback = (p->rc_inject || ringcheck_present(p)) &&
                    s->ringcheck.on_failure == RINGCHECK_FALLBACK;

    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];
        size_t before = json_array_size(c->env_add);

        if (c->gpus == 0)
            continue;
        for (size_t k = 0; k < s->n_extra_env; k++)
            if (env_add(c, s->extra_env[k].name, s->extra_env[k].value) != 0)
                return -1;
        if (p->dec->debug) {
            if (s->debug.level != NULL && s->debug.level[0] != '\0' &&
                env_add(c, "NCCL_DEBUG", s->debug.level) != 0)
                return -1;
            if (s->debug.subsys != NULL && s->debug.subsys[0] != '\0' &&
                env_add(c, "NCCL_DEBUG_SUBSYS", s->debug.subsys) != 0)
                return -1;
        }
        if (fallback && env_add(c, "NCCL_CONF_FILE", RUN_CONF) != 0)
            return -1;
        if (json_array_size(c->env_add) > before)
            injected_add(p->res, "env");
    }
    return 0;
}
