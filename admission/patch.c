/* RFC 6902 JSON Patch: operations, RFC 6901 pointers, local apply. */
#include "admission/patch.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admission/fastjson.h"
#include "admission/jsonwrite.h"
#include "base/jsonptr.h"

int
patch_pointer_escape(const char *token, char *buf, size_t n)
{
    return jsonptr_escape(token, buf, n);
}

int
patch_append(json_t *patch, const char *op, const char *path, json_t *value)
{
    json_t *o = json_object();

    if (o == NULL)
        goto fail;
    if (json_object_set_new_nocheck(o, "op", json_string(op)) != 0 ||
        json_object_set_new_nocheck(o, "path", json_string(path)) != 0)
        goto fail;
    if (value != NULL) {
        int rc = json_object_set_new_nocheck(o, "value", value);

        value = NULL;
        if (rc != 0)
            goto fail;
    }
    if (json_array_append_new(patch, o) != 0) {
        o = NULL;
        goto fail;
    }
    return 0;
fail:
    json_decref(o);
    json_decref(value);
    return -1;
}

json_t *
patch_pointer_get(json_t *doc, const char *pointer)
{
    return jsonptr_get(doc, pointer);
}

/*
 * How operations are applied. In copy-on-write mode (patch_check) the
 * document is the caller's and is never written: every container on the
 * way to a change is first replaced, in a private parent, by a shallow
 * copy, and added values are shared rather than copied. So checking a
 * patch costs what the patch touches, not the size of the pod.
 */
struct applier {
    json_t *doc; /* owned: the document, or in cow mode the private root */
    bool cow;
    bool strict;    /* refuse an add onto an existing object member */
    json_t **owned; /* cow: containers that are private copies */
    size_t n_owned, cap_owned;
};

static bool
owned_has(const struct applier *ap, const json_t *n)
{
    for (size_t i = 0; i < ap->n_owned; i++)
        if (ap->owned[i] == n)
            return true;
    return false;
}

static int
owned_add(struct applier *ap, json_t *n)
{
    if (ap->n_owned == ap->cap_owned) {
        size_t cap = ap->cap_owned ? ap->cap_owned * 2 : 32;
        json_t **o = realloc(ap->owned, cap * sizeof(*o));

        if (o == NULL)
            return -1;
        ap->owned = o;
        ap->cap_owned = cap;
    }
    ap->owned[ap->n_owned++] = n;
    return 0;
}

/* In cow mode, makes child (found in parent under tok) private. */
static json_t *
child_private(struct applier *ap, json_t *parent, const char *tok, size_t idx,
              json_t *child)
{
    json_t *copy;

    if (!ap->cow || owned_has(ap, child) ||
        (!json_is_object(child) && !json_is_array(child)))
        return child;
    copy = json_copy(child);
    if (copy == NULL || owned_add(ap, copy) != 0) {
        json_decref(copy);
        return NULL;
    }
    if (json_is_object(parent) ? json_object_set_new(parent, tok, copy)
                               : json_array_set_new(parent, idx, copy))
        return NULL;
    return copy;
}

/* Resolves the parent of pointer's last token, which goes to last. In cow
 * mode the parent and its ancestors are private copies. */
static json_t *
parent_get(struct applier *ap, const char *pointer, char *last, size_t n)
{
    char tok[JSONPTR_MAX_TOKEN];
    const char *slash = strrchr(pointer, '/');
    const char *p = slash;
    json_t *cur = ap->doc;

    if (slash == NULL || jsonptr_token_next(&p, last, n) < 0)
        return NULL;
    p = pointer;
    while (p < slash && cur != NULL) {
        json_t *child;
        size_t i = 0;

        if (jsonptr_token_next(&p, tok, sizeof(tok)) < 0)
            return NULL;
        if (json_is_object(cur)) {
            child = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            if (jsonptr_index(tok, json_array_size(cur), false, &i) != 0)
                return NULL;
            child = json_array_get(cur, i);
        } else {
            return NULL;
        }
        if (child == NULL)
            return NULL;
        cur = child_private(ap, cur, tok, i, child);
    }
    return cur;
}

/* Inserts value (consumed) at pointer, as RFC 6902 "add". */
static int
op_add(struct applier *ap, const char *path, json_t *value, const char **why)
{
    char last[PATCH_MAX_POINTER];
    json_t *parent;

    if (value == NULL) {
        *why = "out of memory";
        return -1;
    }
    if (path[0] == '\0') {
        if (ap->cow) {
            json_t *copy = json_copy(value);

            json_decref(value);
            if (copy == NULL || owned_add(ap, copy) != 0) {
                json_decref(copy);
                *why = "out of memory";
                return -1;
            }
            value = copy;
        }
        json_decref(ap->doc);
        ap->doc = value;
        return 0;
    }
    parent = parent_get(ap, path, last, sizeof(last));
    if (parent == NULL) {
        *why = "parent does not exist";
        goto fail;
    }
    if (json_is_object(parent)) {
        if (ap->strict && json_object_get(parent, last) != NULL) {
            *why = "add onto existing key";
            goto fail;
        }
        if (json_object_set_new(parent, last, value) != 0) {
            *why = "out of memory";
            return -1;
        }
        return 0;
    }
    if (json_is_array(parent)) {
        size_t i;

        if (jsonptr_index(last, json_array_size(parent), true, &i) != 0) {
            *why = "array index out of range";
            goto fail;
        }
        if (json_array_insert_new(parent, i, value) != 0) {
            *why = "out of memory";
            return -1;
        }
        return 0;
    }
    *why = "parent is not an object or array";
fail:
    json_decref(value);
    return -1;
}

/* Removes what pointer names; the removed value goes to *out (owned) when
 * out is not NULL. */
static int
op_remove(struct applier *ap, const char *path, json_t **out, const char **why)
{
    char last[PATCH_MAX_POINTER];
    json_t *parent;

    if (path[0] == '\0') {
        *why = "cannot remove the whole document";
        return -1;
    }
    parent = parent_get(ap, path, last, sizeof(last));
    if (json_is_object(parent)) {
        json_t *v = json_object_get(parent, last);

        if (v == NULL) {
            *why = "path does not exist";
            return -1;
        }
        if (out != NULL)
            *out = json_incref(v);
        json_object_del(parent, last);
        return 0;
    }
    if (json_is_array(parent)) {
        size_t i;

        if (jsonptr_index(last, json_array_size(parent), false, &i) != 0) {
            *why = "array index out of range";
            return -1;
        }
        if (out != NULL)
            *out = json_incref(json_array_get(parent, i));
        json_array_remove(parent, i);
        return 0;
    }
    *why = "path does not exist";
    return -1;
}

/* A value to insert: shared in cow mode (a later change to it makes a
 * private copy first), else a deep copy the document owns. */
static json_t *
value_take(const struct applier *ap, json_t *v)
{
    return ap->cow ? json_incref(v) : json_deep_copy(v);
}

static int
op_one(struct applier *ap, const json_t *op, const char **why)
{
    const char *name = json_string_value(json_object_get(op, "op"));
    const char *path = json_string_value(json_object_get(op, "path"));
    json_t *value = json_object_get(op, "value");

    if (name == NULL || path == NULL) {
        *why = "operation lacks \"op\" or \"path\"";
        return -1;
    }
    if (path[0] != '\0' && path[0] != '/') {
        *why = "path is not a JSON pointer";
        return -1;
    }
    if (strcmp(name, "add") == 0 || strcmp(name, "replace") == 0 ||
        strcmp(name, "test") == 0) {
        if (value == NULL) {
            *why = "operation lacks \"value\"";
            return -1;
        }
    }
    if (strcmp(name, "add") == 0)
        return op_add(ap, path, value_take(ap, value), why);
    if (strcmp(name, "remove") == 0)
        return op_remove(ap, path, NULL, why);
    if (strcmp(name, "replace") == 0) {
        if (patch_pointer_get(ap->doc, path) == NULL) {
            *why = "path does not exist";
            return -1;
        }
        if (path[0] != '\0' && op_remove(ap, path, NULL, why) != 0)
            return -1;
        return op_add(ap, path, value_take(ap, value), why);
    }
    if (strcmp(name, "test") == 0) {
        json_t *cur = patch_pointer_get(ap->doc, path);

        if (cur == NULL || !json_equal(cur, value)) {
            *why = "test failed";
            return -1;
        }
        return 0;
    }
    if (strcmp(name, "move") == 0 || strcmp(name, "copy") == 0) {
        const char *from = json_string_value(json_object_get(op, "from"));
        json_t *v = NULL;
        size_t flen;

        if (from == NULL) {
            *why = "operation lacks \"from\"";
            return -1;
        }
        flen = strlen(from);
        if (strcmp(name, "move") == 0) {
            /* A location cannot be moved into one of its children. */
            if (strncmp(path, from, flen) == 0 && path[flen] == '/') {
                *why = "cannot move a value into one of its children";
                return -1;
            }
            if (op_remove(ap, from, &v, why) != 0)
                return -1;
        } else {
            json_t *src = patch_pointer_get(ap->doc, from);

            if (src == NULL) {
                *why = "\"from\" does not exist";
                return -1;
            }
            v = value_take(ap, src);
        }
        return op_add(ap, path, v, why);
    }
    *why = "unknown operation";
    return -1;
}

static int
ops_run(struct applier *ap, const json_t *patch, struct ng_error *err)
{
    size_t i;
    json_t *op;

    if (!json_is_array(patch)) {
        ng_error_set(err, 0, 0, "patch is not a JSON array");
        return -1;
    }
    if (json_array_size(patch) > PATCH_MAX_OPS) {
        ng_error_set(err, 0, 0, "patch has %zu operations, more than %d",
                     json_array_size(patch), PATCH_MAX_OPS);
        return -1;
    }
    json_array_foreach(patch, i, op)
    {
        const char *why = "bad operation";
        const char *path, *name;

        if (json_is_object(op) && op_one(ap, op, &why) == 0)
            continue;
        path = json_string_value(json_object_get(op, "path"));
        name = json_string_value(json_object_get(op, "op"));
        ng_error_set(err, 0, 0, "operation %zu (%s %s): %s", i,
                     name ? name : "?", path ? path : "?", why);
        return -1;
    }
    return 0;
}

int
patch_apply(json_t **doc, const json_t *patch, struct ng_error *err)
{
    struct applier ap = {.doc = *doc};
    int rc = ops_run(&ap, patch, err);

    *doc = ap.doc;
    return rc;
}

/*
 * The fast check: patches of "add" and "replace" only (all the webhook
 * writes) are checked against doc itself, with nothing copied. Such a
 * patch only grows the document: it adds keys and elements, and replaces
 * the values at its ops' paths. So an op resolves in the patched document
 * as in doc, provided its parent's path goes through no value an earlier
 * op put there (that value is not in doc) and through no array that an
 * earlier op inserted into before its end (the indices there moved); and
 * what exists in doc still exists after. Every op is checked against doc
 * under those two conditions: its parent exists (and is an object or
 * array), an array index is in range ("-" or up to the size for an add,
 * below it for a replace), a replaced key or element exists, and an added
 * key exists neither in doc nor at an earlier op's path (the strict rule
 * of patch_check()). Answers 0 when every op passes, or 1 (undecided) as
 * soon as one does not or an earlier op may change its answer:
 * patch_check() then runs the full copy-on-write apply, which also gives
 * its exact words. Cost: each op's path once, plus a comparison with each
 * earlier op's path (patches of at most FAST_MAX_OPS ops).
 */
#define FAST_MAX_OPS 128

struct fast_op {
    const char *path;
    size_t len;        /* strlen(path) */
    size_t parent_len; /* the parent's pointer is path[0 .. parent_len) */
    bool shifts;       /* an insert into an array before its end */
};

/* Whether pointer a (n bytes) is p itself or one of its ancestors: a
 * prefix of p that ends where a token does. */
static bool
ptr_covers(const char *a, size_t n, const char *p, size_t plen)
{
    return n <= plen && memcmp(a, p, n) == 0 && (n == plen || p[n] == '/');
}

/* One op as the fast check reads it: an add or a replace, at a path that
 * starts with '/'. */
struct fast_in {
    const char *path;
    size_t len; /* strlen(path) */
    bool add;
};

static int
check_fast_ops(const json_t *doc, const struct fast_in *in, size_t n)
{
    struct fast_op seen[FAST_MAX_OPS];
    char tok[JSONPTR_MAX_TOKEN];

    for (size_t i = 0; i < n; i++) {
        const char *path = in[i].path, *slash, *p;
        bool add = in[i].add, again = false;
        size_t qlen, plen = in[i].len, at;
        json_t *cur = (json_t *)doc;

        slash = strrchr(path, '/');
        qlen = (size_t)(slash - path);
        for (size_t k = 0; k < i; k++) {
            const struct fast_op *e = &seen[k];

            /* Through, or onto the parent of, a value put there. */
            if (ptr_covers(e->path, e->len, path, qlen))
                return 1;
            /* Through an array whose indices moved. */
            if (e->shifts && e->parent_len < qlen &&
                ptr_covers(e->path, e->parent_len, path, qlen))
                return 1;
            /* The same path again: in an object, a key an earlier op
             * may have put there. */
            if (e->len == plen && memcmp(e->path, path, plen) == 0)
                again = true;
        }
        for (p = path; p < slash;) {
            if (jsonptr_token_next(&p, tok, sizeof(tok)) < 0)
                return 1;
            if (json_is_object(cur)) {
                cur = json_object_get(cur, tok);
            } else if (json_is_array(cur)) {
                if (jsonptr_index(tok, json_array_size(cur), false, &at) != 0)
                    return 1;
                cur = json_array_get(cur, at);
            } else {
                return 1;
            }
        }
        p = slash;
        if (jsonptr_token_next(&p, tok, sizeof(tok)) < 0)
            return 1;
        seen[i] = (struct fast_op){path, plen, qlen, false};
        if (json_is_object(cur)) {
            if (add ? again || json_object_get(cur, tok) != NULL
                    : json_object_get(cur, tok) == NULL)
                return 1;
        } else if (json_is_array(cur)) {
            size_t size = json_array_size(cur);

            if (jsonptr_index(tok, size, add, &at) != 0)
                return 1;
            seen[i].shifts = add && at < size;
        } else {
            return 1;
        }
    }
    return 0;
}

static int
check_fast(const json_t *doc, const json_t *patch)
{
    struct fast_in in[FAST_MAX_OPS];
    size_t n_ops = json_array_size(patch);

    if (!json_is_array(patch) || n_ops > FAST_MAX_OPS)
        return 1;
    for (size_t i = 0; i < n_ops; i++) {
        const json_t *op = json_array_get(patch, i);
        const char *name = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        bool add;

        if (name == NULL || path == NULL || path[0] != '/' ||
            json_object_get(op, "value") == NULL)
            return 1;
        add = strcmp(name, "add") == 0;
        if (!add && strcmp(name, "replace") != 0)
            return 1;
        in[i] = (struct fast_in){path, strlen(path), add};
    }
    return check_fast_ops(doc, in, n_ops);
}

int
patch_check(const json_t *doc, const json_t *patch, struct ng_error *err)
{
    struct applier ap = {.cow = true, .strict = true};
    int rc = -1;

    if (check_fast(doc, patch) == 0)
        return 0;

    ap.doc = json_copy((json_t *)doc);
    if (ap.doc == NULL || owned_add(&ap, ap.doc) != 0) {
        ng_error_set(err, 0, 0, "out of memory");
        goto done;
    }
    rc = ops_run(&ap, patch, err);
done:
    json_decref(ap.doc);
    free(ap.owned);
    return rc;
}

/* ---- a patch written as text ----------------------------------------- */

/* The first allocation of a patch's text. */
#define PATCH_TEXT_FIRST 6144u

void
patch_text_init(struct patch_text *pt)
{
    memset(pt, 0, sizeof(*pt));
    buf_init(&pt->text, SIZE_MAX);
    buf_init(&pt->paths, SIZE_MAX);
}

void
patch_text_release(struct patch_text *pt)
{
    buf_release(&pt->text);
    buf_release(&pt->paths);
    free(pt->ops);
    pt->ops = NULL;
    pt->n_ops = pt->cap_ops = 0;
}

/*
 * Writes one op into pt: '[' or ',', then {"op":op,"path":path,"value":
 * and either value written by jsonwrite_value() or raw (raw_len bytes of
 * JSON, inside [ ] when list), then '}' (the bytes jsonwrite_value()
 * writes for the op as a jansson object). Returns as patch_text_append().
 */
static int
text_op(struct patch_text *pt, const char *op, const char *path,
        const json_t *value, const char *raw, size_t raw_len, bool list)
{
    size_t paths_len = pt->paths.len, plen;
    bool add = strcmp(op, "add") == 0;
    struct patch_text_op *o;

    if ((value == NULL && raw == NULL) || path[0] != '/' ||
        (!add && strcmp(op, "replace") != 0))
        return -1;
    if (pt->n_ops == pt->cap_ops) {
        size_t cap = pt->cap_ops != 0 ? 2 * pt->cap_ops : 16;

        o = realloc(pt->ops, cap * sizeof(*o));
        if (o == NULL)
            return -1;
        pt->ops = o;
        pt->cap_ops = cap;
    }
    plen = strlen(path);
    /* One block for a GPU pod's whole patch (3 to 5 KiB with the ring
     * check), rather than five doublings from 256 bytes. (Its paths fit
     * the first 256 bytes.) */
    if (pt->text.cap == 0 && buf_reserve(&pt->text, PATCH_TEXT_FIRST) != 0)
        return -1;
    if (buf_addc(&pt->text, pt->n_ops == 0 ? '[' : ',') ||
        BUF_LIT(&pt->text, "{\"op\":\"") || buf_adds(&pt->text, op) ||
        BUF_LIT(&pt->text, "\",\"path\":") ||
        jsonwrite_string(&pt->text, path, plen) ||
        BUF_LIT(&pt->text, ",\"value\":"))
        return -1;
    if (value != NULL ? jsonwrite_value(&pt->text, value) != 0
                      : (list && buf_addc(&pt->text, '[')) ||
                            buf_add(&pt->text, raw, raw_len) ||
                            (list && buf_addc(&pt->text, ']')))
        return -1;
    if (buf_addc(&pt->text, '}') || buf_add(&pt->paths, path, plen + 1))
        return -1;
    pt->ops[pt->n_ops++] = (struct patch_text_op){add, paths_len, plen};
    return 0;
}

int
patch_text_append(struct patch_text *pt, const char *op, const char *path,
                  json_t *value)
{
    int rc = value != NULL ? text_op(pt, op, path, value, NULL, 0, false) : -1;

    json_decref(value);
    return rc;
}

int
patch_text_append_raw(struct patch_text *pt, const char *op, const char *path,
                      const char *json, size_t len, bool list)
{
    return json != NULL ? text_op(pt, op, path, NULL, json, len, list) : -1;
}

int
patch_text_close(struct patch_text *pt)
{
    return pt->n_ops == 0 ? BUF_LIT(&pt->text, "[]") : buf_addc(&pt->text, ']');
}

int
patch_text_check(const json_t *doc, const struct patch_text *pt,
                 struct ng_error *err)
{
    struct fastjson_error ferr;
    json_t *patch;
    int rc;

    if (pt->n_ops <= FAST_MAX_OPS) {
        struct fast_in in[FAST_MAX_OPS];

        for (size_t i = 0; i < pt->n_ops; i++)
            in[i] = (struct fast_in){pt->paths.p + pt->ops[i].path_off,
                                     pt->ops[i].path_len, pt->ops[i].add};
        if (check_fast_ops(doc, in, pt->n_ops) == 0)
            return 0;
    }
    /* jansson's own loader drops bytes when an allocation fails (in its
     * load.c, lex_save() ignores what strbuffer_append_byte() returns: a
     * key "containers" came back "containes"), so the text is loaded by
     * the review's decoder, which fails whole. */
    patch = fastjson_decode(pt->text.p, pt->text.len, NULL, &ferr);
    if (patch == NULL) {
        ng_error_set(err, 0, 0, "out of memory");
        return -1;
    }
    rc = patch_check(doc, patch, err);
    json_decref(patch);
    return rc;
}
