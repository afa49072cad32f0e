/* The plan's shared helpers: its containers, JSON and text builders,
 * warnings, a container's mounts and env, quantities. */
#include "admission/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/jsonwrite.h"
#include "admission/plan_names.h"
#include "base/text.h"

/* A string for the patch. Everything the plan writes is valid UTF-8
 * already (constants, numbers, text from the policy or the decoded pod),
 * so jansson's check is skipped on this hot path. */
json_t *
jstr(const char *s)
{
    return s != NULL ? json_string_nocheck(s) : NULL;
}

/* {k1: v1[, k2: v2]}; the values are consumed, even on failure. */
json_t *
jobj(const char *k1, json_t *v1, const char *k2, json_t *v2)
{
    json_t *o = json_object();

    if (o == NULL || v1 == NULL || (k2 != NULL && v2 == NULL)) {
        json_decref(o);
        json_decref(v1);
        json_decref(v2);
        return NULL;
    }
    if (json_object_set_new_nocheck(o, k1, v1) != 0) {
        json_decref(o);
        json_decref(v2);
        return NULL;
    }
    if (k2 != NULL && json_object_set_new_nocheck(o, k2, v2) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* [v]; v is consumed, even on failure. */
json_t *
jlist(json_t *v)
{
    json_t *a = json_array();

    if (a == NULL || v == NULL || json_array_append_new(a, v) != 0) {
        json_decref(a);
        if (a == NULL)
            json_decref(v);
        return NULL;
    }
    return a;
}

/*
 * Writes the strings given, up to a NULL, one after the other into out (n
 * > 0 bytes), NUL-terminated and cut to n - 1 bytes: what snprintf(out, n,
 * "%s%s...") writes, without the format interpreter (the plan writes a
 * few dozen paths and names per pod).
 */
void __attribute__((sentinel)) join(char *out, size_t n, ...)
{
    size_t o = 0;
    const char *s;
    va_list ap;

    va_start(ap, n);
    while ((s = va_arg(ap, const char *)) != NULL) {
        size_t k = strlen(s);

        if (k > n - 1 - o)
            k = n - 1 - o;
        memcpy(out + o, s, k);
        o += k;
    }
    va_end(ap);
    out[o] = '\0';
}

/* v in decimal, as "%" PRId64 writes it, in t; returns where it starts. */
const char *
i64_text(int64_t v, char t[24])
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t i = 23;

    t[i] = '\0';
    do {
        t[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        t[--i] = '-';
    return t + i;
}

/* Appends s to the NUL-terminated text in buf (n bytes), truncating. */
void
buf_append(char *buf, size_t n, const char *s)
{
    size_t len = strlen(buf);

    if (len + 1 < n)
        join(buf + len, n - len, s, (char *)NULL);
}

/* Adds a warning "ncclguard: ..." of at most TEXT_WARNING_MAX bytes, cut
 * on a UTF-8 boundary (base/text.h). */
void __attribute__((format(printf, 2, 3)))
plan_warn(struct mutate_result *res, const char *fmt, ...)
{
    char buf[TEXT_WARNING_MAX + 1];
    va_list ap;

    if (json_array_size(res->warnings) >= MUTATE_MAX_WARNINGS)
        return;
    va_start(ap, fmt);
    text_vformat(buf, sizeof(buf), "ncclguard: ", fmt, ap);
    va_end(ap);
    json_array_append_new(res->warnings, jstr(buf));
}

/* Adds a policy-made warning, prefixing and cutting it as ours. */
void
plan_warn_text(struct mutate_result *res, const char *text)
{
    const char *p = "ncclguard: ";

    if (strncmp(text, p, strlen(p)) == 0)
        text += strlen(p);
    plan_warn(res, "%s", text);
}

void
injected_add(struct mutate_result *res, const char *what)
{
    size_t i;
    json_t *v;

    json_array_foreach(res->injected, i, v)
    {
        if (strcmp(json_string_value(v), what) == 0)
            return;
    }
    json_array_append_new(res->injected, jstr(what));
}

const char *
str_get(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

json_t *
obj_get(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    return json_is_object(v) ? v : NULL;
}

json_t *
arr_get(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    return json_is_array(v) ? v : NULL;
}

/* A list of additions to a container, created on first use (most
 * containers get none). NULL when out of memory; jansson's append then fails
 * cleanly. */
json_t *
add_list(json_t **list)
{
    if (*list == NULL)
        *list = json_array();
    return *list;
}

/* The next component of path at *p (no slashes, not "."), with its
 * length in *len; NULL at the end. */
static const char *
path_next(const char **p, size_t *len)
{
    for (;;) {
        const char *s = *p, *e;

        while (*s == '/')
            s++;
        if (*s == '\0')
            return NULL;
        for (e = s; *e != '\0' && *e != '/'; e++)
            ;
        *p = e;
        if (e - s == 1 && s[0] == '.')
            continue;
        *len = (size_t)(e - s);
        return s;
    }
}

/*
 * Mount paths compare equal when they name the same place once cleaned
 * the way the kubelet and the runtime clean them (filepath.Clean):
 * repeated slashes are one (//dev/shm, /dev//shm), trailing slashes and
 * "." components are dropped. Otherwise a pod mounting //dev/shm got a
 * second /dev/shm mount, which the apiserver refuses ("must be unique").
 */
static bool
path_eq(const char *a, const char *b)
{
    const char *ca, *cb;
    size_t la = 0, lb = 0;

    if ((a[0] == '/') != (b[0] == '/'))
        return false;
    for (;;) {
        ca = path_next(&a, &la);
        cb = path_next(&b, &lb);
        if (ca == NULL || cb == NULL)
            return ca == cb;
        if (la != lb || memcmp(ca, cb, la) != 0)
            return false;
    }
}

/* The volume name of c's mount at path, in the pod or planned; or NULL. */
const char *
mount_at(const struct ctr *c, const char *path)
{
    const struct pod_list own = pod_list_of(c, "volumeMounts");
    size_t n_add = json_array_size(c->mount_add);

    for (size_t i = 0; i < own.n + n_add; i++) {
        struct pod_value m =
            i < own.n ? pod_list_at(&own, i)
                      : pod_value_of(json_array_get(c->mount_add, i - own.n));
        const char *mp = pod_value_str(m, "mountPath");

        if (mp != NULL && path_eq(mp, path)) {
            const char *n = pod_value_str(m, "name");

            return n != NULL ? n : "";
        }
    }
    return NULL;
}

/* ---- a value of the pod, built or left on the decoder's tape ------------ */

struct pod_value
pod_value_of(const json_t *j)
{
    return (struct pod_value){j, {NULL, 0}};
}

int
pod_value_type(struct pod_value v)
{
    if (v.j != NULL)
        return (int)json_typeof(v.j);
    return fastjson_ref_type(v.r);
}

struct pod_value
pod_value_member(struct pod_value v, const char *key)
{
    if (v.j != NULL)
        return pod_value_of(json_object_get(v.j, key));
    return (struct pod_value){NULL, fastjson_ref_member(v.r, key)};
}

size_t
pod_value_size(struct pod_value v)
{
    if (v.j != NULL)
        return json_is_object(v.j) ? json_object_size(v.j)
                                   : json_array_size(v.j);
    return fastjson_ref_size(v.r);
}

const char *
pod_value_str(struct pod_value v, const char *key)
{
    if (v.j != NULL)
        return str_get(v.j, key);
    return fastjson_ref_string(fastjson_ref_member(v.r, key));
}

int
pod_value_write(struct buf *b, struct pod_value v)
{
    if (v.j != NULL)
        return jsonwrite_value(b, v.j);
    return fastjson_ref_write(b, v.r);
}

struct pod_list
pod_list_of(const struct ctr *c, const char *key)
{
    struct pod_list l = {arr_get(c->c, key), NULL, NULL, 0};

    if (fastjson_lazy_of(c->doc, l.j, &l.at, &l.n))
        l.doc = c->doc;
    else
        l.n = json_array_size(l.j);
    return l;
}

struct pod_value
pod_list_at(const struct pod_list *l, size_t i)
{
    if (i >= l->n)
        return pod_value_of(NULL);
    if (l->doc != NULL)
        return (struct pod_value){NULL, {l->doc, l->at[i]}};
    return pod_value_of(json_array_get(l->j, i));
}

const struct env_names *
env_names_of(struct ctr *c)
{
    struct env_names *v = &c->env;
    struct pod_list list;
    size_t n;

    if (v->built)
        return v;
    if (v->failed)
        return NULL;
    list = pod_list_of(c, "env");
    n = list.n;
    v->name = calloc(n ? n : 1, sizeof(*v->name));
    if (v->name == NULL || nameset_reserve(&v->set, n) != 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        v->name[i] = pod_value_str(pod_list_at(&list, i), "name");
        if (v->name[i] != NULL && nameset_add(&v->set, v->name[i]) != 0)
            goto fail;
    }
    v->n = n;
    v->built = true;
    return v;
fail:
    free(v->name);
    v->name = NULL;
    nameset_release(&v->set);
    v->failed = true;
    return NULL;
}

static bool
list_has(const json_t *list, const char *name)
{
    size_t i;
    json_t *e;

    json_array_foreach(list, i, e)
    {
        const char *n = str_get(e, "name");

        if (n != NULL && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

/* Whether c's own env has a variable called name, read entry by entry
 * (when its names could not be read at once). */
static bool
own_env_has(const struct ctr *c, const char *name)
{
    struct pod_list list = pod_list_of(c, "env");

    for (size_t i = 0; i < list.n; i++) {
        const char *n = pod_value_str(pod_list_at(&list, i), "name");

        if (n != NULL && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

bool
env_has(struct ctr *c, const char *name)
{
    const struct env_names *v = env_names_of(c);

    if (v != NULL ? nameset_has(&v->set, name) : own_env_has(c, name))
        return true;
    return list_has(c->env_add, name);
}

int
env_add(struct ctr *c, const char *name, const char *value)
{
    if (env_has(c, name))
        return 0;
    return json_array_append_new(
        add_list(&c->env_add), jobj("name", jstr(name), "value", jstr(value)));
}

int
mount_add(struct ctr *c, const char *volume, const char *path, bool ro)
{
    json_t *m;

    if (mount_at(c, path) != NULL)
        return 0; /* never two mounts at one path */
    m = jobj("name", jstr(volume), "mountPath", jstr(path));
    if (m == NULL)
        return -1;
    if (ro && json_object_set_new_nocheck(m, "readOnly", json_true()) != 0) {
        json_decref(m);
        return -1;
    }
    return json_array_append_new(add_list(&c->mount_add), m);
}

/* Parses a Kubernetes quantity held as a JSON string or number. */
int
quantity_of(const json_t *v, struct quantity *q)
{
    char buf[64];
    const char *s;
    size_t len;

    if (json_is_string(v)) {
        s = json_string_value(v);
        len = json_string_length(v);
    } else if (json_is_integer(v)) {
        len = (size_t)snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT,
                               json_integer_value(v));
        s = buf;
    } else if (json_is_real(v)) {
        int k = snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));

        if (k < 0 || (size_t)k >= sizeof(buf))
            return -1;
        len = (size_t)k;
        s = buf;
    } else {
        return -1;
    }
    return quantity_parse(s, len, q, NULL);
}

void
size_format(int64_t bytes, char *buf, size_t n)
{
    quantity_format_binary(bytes, buf, n);
}

/*
 * One request as the apiserver sees it after defaulting, in milli-units:
 * requests[name], else limits[name] (a missing request defaults to the
 * limit), of res (a container's or the pod's resources). Returns -1 when
 * neither is set or the value is not a quantity.
 */
int64_t
request_milli(const json_t *res, const char *name)
{
    const json_t *v = json_object_get(obj_get(res, "requests"), name);
    struct quantity q;

    if (v == NULL)
        v = json_object_get(obj_get(res, "limits"), name);
    if (v == NULL || quantity_of(v, &q) != 0 || q.negative)
        return -1;
    return q.milli;
}

void
milli_format(const char *name, int64_t milli, char *buf, size_t n)
{
    char t[24];

    if (strcmp(name, "memory") == 0)
        size_format(milli / 1000, buf, n);
    else
        join(buf, n, i64_text(milli, t), "m", (char *)NULL);
}

int
ctrs_collect(struct plan *p)
{
    static const char *const keys[2] = {"containers", "initContainers"};
    size_t total = json_array_size(arr_get(p->spec, keys[0])) +
                   json_array_size(arr_get(p->spec, keys[1]));

    if (total > MUTATE_MAX_CONTAINERS) {
        snprintf(p->res->reason, sizeof(p->res->reason),
                 "pod has more than %d containers", MUTATE_MAX_CONTAINERS);
        return -1;
    }
    if (total == 0)
        return 0;
    p->ctr = calloc(total, sizeof(*p->ctr));
    if (p->ctr == NULL)
        return -1;
    for (int k = 0; k < 2; k++) {
        json_t *list;
        size_t i;
        json_t *c;

        list = arr_get(p->spec, keys[k]);
        json_array_foreach(list, i, c)
        {
            struct ctr *t;
            char num[24];

            if (!json_is_object(c)) {
                snprintf(p->res->reason, sizeof(p->res->reason),
                         "spec.%s[%zu] is not an object", keys[k], i);
                return -1;
            }
            t = &p->ctr[p->n_ctr++];
            t->c = c;
            t->doc = p->opt != NULL ? p->opt->doc : NULL;
            join(t->base, sizeof(t->base), "/spec/", keys[k], "/",
                 i64_text((int64_t)i, num), (char *)NULL);
            t->name = str_get(c, "name") ? str_get(c, "name") : "";
            t->init = k == 1;
            t->sidecar = t->init && str_get(c, "restartPolicy") != NULL &&
                         strcmp(str_get(c, "restartPolicy"), "Always") == 0;
        }
    }
    return 0;
}

void
ctrs_release(struct plan *p)
{
    for (size_t i = 0; i < p->n_ctr; i++) {
        json_decref(p->ctr[i].env_add);
        json_decref(p->ctr[i].mount_add);
        json_decref(p->ctr[i].cap_add);
        free(p->ctr[i].env.name);
        nameset_release(&p->ctr[i].env.set);
    }
    free(p->ctr);
    nameset_release(&p->vol_names);
    nameset_release(&p->ctr_names);
    json_decref(p->vol_add);
    buf_release(&p->rc_text);
    json_decref(p->mn_env);
    json_decref(p->dra_claims);
    free(p->rc_env_facts);
}
