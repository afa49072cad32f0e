/* RFC 6902 JSON Patch: operations, RFC 6901 pointers, local apply. */
#include "patch.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

int
patch_pointer_escape(const char *token, char *buf, size_t n)
{
    size_t o = 0;

    if (n == 0)
        return -1;
    for (const char *p = token; *p != '\0'; p++) {
        const char *rep = NULL;
        char one[2] = {*p, '\0'};

        if (*p == '~')
            rep = "~0";
        else if (*p == '/')
            rep = "~1";
        else
            rep = one;
        for (const char *r = rep; *r != '\0'; r++) {
            if (o + 1 >= n) {
                buf[o] = '\0';
                return -1;
            }
            buf[o++] = *r;
        }
    }
    buf[o] = '\0';
    return 0;
}

int
patch_append(json_t *patch, const char *op, const char *path, json_t *value)
{
    json_t *o = json_object();

    if (o == NULL)
        goto fail;
    if (json_object_set_new(o, "op", json_string(op)) != 0 ||
        json_object_set_new(o, "path", json_string(path)) != 0)
        goto fail;
    if (value != NULL) {
        int rc = json_object_set_new(o, "value", value);

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

/* Reads the next reference token of pointer p (which starts at a '/')
 * into tok, unescaping ~0 and ~1. Returns a pointer past the token, or
 * NULL on a bad escape or an over-long token. */
static const char *
token_next(const char *p, char *tok, size_t n)
{
    size_t o = 0;

    p++; /* the '/' */
    while (*p != '\0' && *p != '/') {
        char c = *p;

        if (c == '~') {
            if (p[1] == '0')
                c = '~';
            else if (p[1] == '1')
                c = '/';
            else
                return NULL;
            p++;
        }
        if (o + 1 >= n)
            return NULL;
        tok[o++] = c;
        p++;
    }
    tok[o] = '\0';
    return p;
}

/* Parses an array index token: digits, no leading zero (RFC 6901). */
static bool
index_parse(const char *tok, size_t *out)
{
    size_t v = 0;

    if (tok[0] == '\0' || (tok[0] == '0' && tok[1] != '\0'))
        return false;
    for (const char *p = tok; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return false;
        if (v > (SIZE_MAX - 9) / 10)
            return false;
        v = v * 10 + (size_t)(*p - '0');
    }
    *out = v;
    return true;
}

json_t *
patch_pointer_get(json_t *doc, const char *pointer)
{
    char tok[PATCH_MAX_POINTER];
    const char *p = pointer;
    json_t *cur = doc;

    if (p == NULL || (*p != '\0' && *p != '/'))
        return NULL;
    while (*p != '\0' && cur != NULL) {
        p = token_next(p, tok, sizeof(tok));
        if (p == NULL)
            return NULL;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            size_t i;

            if (!index_parse(tok, &i))
                return NULL;
            cur = json_array_get(cur, i);
        } else {
            return NULL;
        }
    }
    return cur;
}

/* Splits pointer into its parent node (resolved in doc) and last token. */
static json_t *
parent_get(json_t *doc, const char *pointer, char *last, size_t n)
{
    char parent[PATCH_MAX_POINTER];
    const char *slash = strrchr(pointer, '/');
    size_t plen;

    if (slash == NULL)
        return NULL;
    plen = (size_t)(slash - pointer);
    if (plen >= sizeof(parent))
        return NULL;
    memcpy(parent, pointer, plen);
    parent[plen] = '\0';
    if (token_next(slash, last, n) == NULL)
        return NULL;
    return patch_pointer_get(doc, parent);
}

/* Inserts value (consumed) at pointer, as RFC 6902 "add". */
static int
op_add(json_t **doc, const char *path, json_t *value, const char **why)
{
    char last[PATCH_MAX_POINTER];
    json_t *parent;

    if (path[0] == '\0') {
        json_decref(*doc);
        *doc = value;
        return 0;
    }
    parent = parent_get(*doc, path, last, sizeof(last));
    if (parent == NULL) {
        *why = "parent does not exist";
        goto fail;
    }
    if (json_is_object(parent)) {
        if (json_object_set_new(parent, last, value) != 0) {
            *why = "out of memory";
            return -1;
        }
        return 0;
    }
    if (json_is_array(parent)) {
        size_t i;

        if (strcmp(last, "-") == 0) {
            i = json_array_size(parent);
        } else if (!index_parse(last, &i) || i > json_array_size(parent)) {
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
op_remove(json_t *doc, const char *path, json_t **out, const char **why)
{
    char last[PATCH_MAX_POINTER];
    json_t *parent;

    if (path[0] == '\0') {
        *why = "cannot remove the whole document";
        return -1;
    }
    parent = parent_get(doc, path, last, sizeof(last));
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

        if (!index_parse(last, &i) || i >= json_array_size(parent)) {
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

/*
 * Applies one operation. With share, "add" and "replace" insert the
 * patch's own value by reference instead of a copy; only patch_apply_check
 * does that, and it copies any container before changing it.
 */
static int
op_one(json_t **doc, const json_t *op, bool share, const char **why)
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
    if (strcmp(name, "add") == 0 || strcmp(name, "replace") == 0) {
        json_t *v = share && path[0] != '\0' ? json_incref(value)
                                               : json_deep_copy(value);

        if (strcmp(name, "replace") == 0) {
            if (patch_pointer_get(*doc, path) == NULL) {
                *why = "path does not exist";
                json_decref(v);
                return -1;
            }
            if (path[0] != '\0' && op_remove(*doc, path, NULL, why) != 0) {
                json_decref(v);
                return -1;
            }
        }
        return op_add(doc, path, v, why);
    }
    if (strcmp(name, "remove") == 0)
        return op_remove(*doc, path, NULL, why);
    if (strcmp(name, "test") == 0) {
        json_t *cur = patch_pointer_get(*doc, path);

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
            if (op_remove(*doc, from, &v, why) != 0)
                return -1;
        } else {
            json_t *src = patch_pointer_get(*doc, from);

            if (src == NULL) {
                *why = "\"from\" does not exist";
                return -1;
            }
            v = json_deep_copy(src);
        }
        return op_add(doc, path, v, why);
    }
    *why = "unknown operation";
    return -1;
}

int
patch_apply(json_t **doc, const json_t *patch, struct ng_error *err)
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
        const char *path;

        if (json_is_object(op) && op_one(doc, op, false, &why) == 0)
            continue;
        path = json_string_value(json_object_get(op, "path"));
        ng_error_set(err, 0, 0, "operation %zu (%s %s): %s", i,
                     json_string_value(json_object_get(op, "op"))
                         ? json_string_value(json_object_get(op, "op"))
                         : "?",
                     path ? path : "?", why);
        return -1;
    }
    return 0;
}

/* Containers a check has already copied, so that none is copied twice. A
 * full set only costs extra copies: copying a private node is harmless. */
struct cow {
    const json_t *mine[256];
    size_t n;
};

static bool
cow_is_mine(const struct cow *c, const json_t *v)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->mine[i] == v)
            return true;
    return false;
}

/*
 * Makes private every container that pointer passes through below root
 * (all but its last token): each is replaced in its parent, already
 * private, by a shallow copy. Stops where the pointer leaves the document;
 * the operation itself then reports why. Returns 0, or -1 when out of
 * memory.
 */
static int
cow_path(struct cow *c, json_t *root, const char *pointer)
{
    char tok[PATCH_MAX_POINTER];
    const char *p = pointer;
    json_t *cur = root;

    if (p == NULL || *p != '/')
        return 0;
    for (;;) {
        const char *next = token_next(p, tok, sizeof(tok));
        json_t *child, *copy;
        size_t idx = 0;
        int bad;

        if (next == NULL || *next == '\0')
            return 0; /* the last token names the target, not a parent */
        if (json_is_object(cur)) {
            child = json_object_get(cur, tok);
        } else if (json_is_array(cur) && index_parse(tok, &idx)) {
            child = json_array_get(cur, idx);
        } else {
            return 0;
        }
        if (child == NULL || !(json_is_object(child) || json_is_array(child)))
            return 0;
        if (!cow_is_mine(c, child)) {
            copy = json_copy(child);
            if (copy == NULL)
                return -1;
            bad = json_is_object(cur) ? json_object_set_new(cur, tok, copy)
                                      : json_array_set_new(cur, idx, copy);
            if (bad)
                return -1;
            if (c->n < sizeof(c->mine) / sizeof(c->mine[0]))
                c->mine[c->n++] = copy;
            child = copy;
        }
        cur = child;
        p = next;
    }
}

int
patch_apply_check(const json_t *doc, const json_t *patch, struct ng_error *err)
{
    struct cow *c = NULL;
    json_t *copy = NULL, *op;
    size_t i;
    int rc = -1;

    if (!json_is_array(patch) || json_array_size(patch) > PATCH_MAX_OPS) {
        /* patch_apply() words these errors; nothing is changed. */
        copy = json_null();
        rc = patch_apply(&copy, patch, err);
        goto done;
    }
    c = calloc(1, sizeof(*c));
    /* jansson has no const variant; json_copy only reads doc. */
    copy = json_copy((json_t *)doc);
    if (c == NULL || copy == NULL) {
        ng_error_set(err, 0, 0, "out of memory");
        goto done;
    }
    c->mine[c->n++] = copy;
    json_array_foreach(patch, i, op)
    {
        const char *why = "bad operation";
        const char *path = json_string_value(json_object_get(op, "path"));
        const char *kind = json_string_value(json_object_get(op, "op"));

        if (cow_path(c, copy, path) != 0 ||
            cow_path(c, copy,
                     json_string_value(json_object_get(op, "from"))) != 0) {
            ng_error_set(err, 0, 0, "out of memory");
            goto done;
        }
        if (json_is_object(op) && op_one(&copy, op, true, &why) == 0) {
            /* A new root (add or replace at "") is private already. */
            if (path != NULL && path[0] == '\0')
                c->n = 0;
            continue;
        }
        ng_error_set(err, 0, 0, "operation %zu (%s %s): %s", i,
                     kind ? kind : "?", path ? path : "?", why);
        goto done;
    }
    rc = 0;
done:
    json_decref(copy);
    free(c);
    return rc;
}
