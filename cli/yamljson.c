/* YAML <-> JSON for the dry run: libyaml events to jansson values with
 * Kubernetes-style scalar typing, and jansson values back to YAML. */
#include "cli/yamljson.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "policy/diag.h"

/* Bounds on one input stream. Aliases are expanded into copies, so the
 * node bound also stops "billion laughs" inputs. */
#define YJ_MAX_BYTES (32u << 20)
#define YJ_MAX_DEPTH 100
#define YJ_MAX_NODES 2000000
#define YJ_MAX_ANCHORS 10000
#define YJ_MAX_DOCS 10000
#define YJ_MAX_WARNINGS 100

struct anchor {
    char *name;
    json_t *node; /* owned reference */
    size_t size;  /* nodes in it */
};

struct loader {
    yaml_parser_t parser;
    const char *name;
    json_t *warnings;
    struct ng_error *err;
    size_t nodes;
    struct anchor *anchors;
    size_t n_anchors, cap_anchors;
    const char *buf; /* the input, to name a tab after a syntax error */
    size_t len;
};

/* ---- scalar typing ---------------------------------------------------- */

enum scalar_kind {
    SCALAR_STRING,
    SCALAR_NULL,
    SCALAR_BOOL,
    SCALAR_INT,
    SCALAR_FLOAT
};

static bool
word_in(const char *s, size_t len, const char *const *words)
{
    for (; *words != NULL; words++)
        if (strlen(*words) == len && memcmp(*words, s, len) == 0)
            return true;
    return false;
}

static const char *const null_words[] = {"~", "null", "Null", "NULL", NULL};
static const char *const true_words[] = {"y",   "Y",    "yes",  "Yes",
                                         "YES", "true", "True", "TRUE",
                                         "on",  "On",   "ON",   NULL};
static const char *const false_words[] = {"n",   "N",     "no",    "No",
                                          "NO",  "false", "False", "FALSE",
                                          "off", "Off",   "OFF",   NULL};

/* Integers as YAML 1.1 (and Kubernetes' YAML decoder) reads them: an
 * optional sign, then decimal, 0x hex, 0o or leading-0 octal, 0b binary,
 * with '_' separators ignored. */
static bool
int_parse(const char *s, size_t len, int64_t *out)
{
    char buf[80];
    size_t n = 0;
    const char *p;
    int base = 10;
    bool neg = false;
    uint64_t v = 0, limit;

    for (size_t i = 0; i < len; i++) {
        if (s[i] == '_')
            continue;
        if (n + 1 >= sizeof(buf))
            return false;
        buf[n++] = s[i];
    }
    buf[n] = '\0';
    p = buf;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (*p == '\0')
        return false;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    } else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O')) {
        base = 8;
        p += 2;
    } else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B')) {
        base = 2;
        p += 2;
    } else if (p[0] == '0' && p[1] != '\0') {
        base = 8;
        p += 1;
    }
    if (*p == '\0')
        return false;
    for (; *p != '\0'; p++) {
        int d;

        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            return false;
        if (d >= base)
            return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return false;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (v > limit)
        return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* Decimal floats only: [-+]? (digits [. digits] | . digits) [e [-+] digits].
 * ".inf" and ".nan" stay strings: JSON cannot hold them. */
static bool
float_parse(const char *s, size_t len, double *out)
{
    char buf[80];
    size_t i = 0, digits = 0;
    char *end;

    if (len == 0 || len >= sizeof(buf))
        return false;
    if (s[i] == '+' || s[i] == '-')
        i++;
    while (i < len && isdigit((unsigned char)s[i]))
        i++, digits++;
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && isdigit((unsigned char)s[i]))
            i++, digits++;
    }
    if (digits == 0)
        return false;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        size_t exp = 0;

        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        while (i < len && isdigit((unsigned char)s[i]))
            i++, exp++;
        if (exp == 0)
            return false;
    }
    if (i != len)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    *out = strtod(buf, &end);
    return *end == '\0' && isfinite(*out);
}

static enum scalar_kind
scalar_resolve(const char *s, size_t len, int64_t *iv, double *dv, bool *bv)
{
    if (len == 0 || word_in(s, len, null_words))
        return SCALAR_NULL;
    if (word_in(s, len, true_words)) {
        *bv = true;
        return SCALAR_BOOL;
    }
    if (word_in(s, len, false_words)) {
        *bv = false;
        return SCALAR_BOOL;
    }
    if (strchr("0123456789+-.", s[0]) == NULL)
        return SCALAR_STRING;
    if (int_parse(s, len, iv))
        return SCALAR_INT;
    if (float_parse(s, len, dv))
        return SCALAR_FLOAT;
    return SCALAR_STRING;
}

static json_t *
scalar_value(const yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    int64_t iv = 0;
    double dv = 0;
    bool bv = false;
    enum scalar_kind k = SCALAR_STRING;

    if (tag != NULL) {
        const char *t =
            strncmp(tag, "tag:yaml.org,2002:", 18) == 0 ? tag + 18 : NULL;

        if (t != NULL && (strcmp(t, "int") == 0 || strcmp(t, "float") == 0 ||
                          strcmp(t, "bool") == 0 || strcmp(t, "null") == 0))
            k = scalar_resolve(s, len, &iv, &dv, &bv);
    } else if (plain) {
        k = scalar_resolve(s, len, &iv, &dv, &bv);
    }
    switch (k) {
    case SCALAR_NULL:
        return json_null();
    case SCALAR_BOOL:
        return json_boolean(bv);
    case SCALAR_INT:
        return json_integer((json_int_t)iv);
    case SCALAR_FLOAT:
        return json_real(dv);
    case SCALAR_STRING:
        break;
    }
    return json_stringn(s, len);
}

/* ---- loading ---------------------------------------------------------- */

static void
mark_error(struct loader *ld, const yaml_mark_t *m, const char *fmt,
           const char *arg)
{
    ng_error_set(ld->err, (int)m->line + 1, (int)m->column + 1, fmt, arg);
}

static int
event_next(struct loader *ld, yaml_event_t *ev)
{
    if (yaml_parser_parse(&ld->parser, ev))
        return 0;
    {
        const yaml_parser_t *p = &ld->parser;
        const yaml_mark_t *m = &p->problem_mark;
        char msg[400];

        if (p->error == YAML_MEMORY_ERROR) {
            ng_error_set(ld->err, 0, 0, "out of memory");
            return -1;
        }
        {
            int tab_col;

            if (diag_yaml_tab(ld->buf, ld->len, m->line, m->index, &tab_col)) {
                ng_error_set(ld->err, (int)m->line + 1, tab_col, "%s",
                             DIAG_YAML_TAB_MSG);
                return -1;
            }
        }
        if (p->context != NULL)
            snprintf(msg, sizeof(msg), "%s: %s", p->context,
                     p->problem ? p->problem : "not YAML");
        else
            snprintf(msg, sizeof(msg), "%s",
                     p->problem ? p->problem : "not YAML");
        ng_error_set(ld->err, (int)m->line + 1, (int)m->column + 1, "%s", msg);
    }
    return -1;
}

static int
anchor_add(struct loader *ld, const char *name, json_t *node, size_t size)
{
    if (ld->n_anchors == ld->cap_anchors) {
        size_t cap = ld->cap_anchors ? ld->cap_anchors * 2 : 16;
        struct anchor *a;

        if (cap > YJ_MAX_ANCHORS)
            return -1;
        a = realloc(ld->anchors, cap * sizeof(*a));
        if (a == NULL)
            return -1;
        ld->anchors = a;
        ld->cap_anchors = cap;
    }
    ld->anchors[ld->n_anchors].name = strdup(name);
    if (ld->anchors[ld->n_anchors].name == NULL)
        return -1;
    ld->anchors[ld->n_anchors].node = json_incref(node);
    ld->anchors[ld->n_anchors].size = size;
    ld->n_anchors++;
    return 0;
}

static const struct anchor *
anchor_find(const struct loader *ld, const char *name)
{
    for (size_t i = ld->n_anchors; i-- > 0;)
        if (strcmp(ld->anchors[i].name, name) == 0)
            return &ld->anchors[i];
    return NULL;
}

static json_t *node_parse(struct loader *ld, yaml_event_t *ev, int depth,
                          size_t *size);

static int
nodes_count(struct loader *ld, size_t n, const yaml_mark_t *m)
{
    ld->nodes += n;
    if (ld->nodes > YJ_MAX_NODES) {
        mark_error(ld, m, "more than %s nodes (aliases expand to copies)",
                   "2000000");
        return -1;
    }
    return 0;
}

/* Merges the mappings of a "<<" value into merged (keys not yet there). */
static int
merge_into(struct loader *ld, json_t *merged, json_t *v, const yaml_mark_t *m)
{
    const char *key;
    json_t *val;

    if (json_is_array(v)) {
        size_t i;
        json_t *item;

        json_array_foreach(v, i, item)
        {
            if (merge_into(ld, merged, item, m) != 0)
                return -1;
        }
        return 0;
    }
    if (!json_is_object(v)) {
        mark_error(ld, m, "merge key %s needs a mapping or a list of them",
                   "<<");
        return -1;
    }
    json_object_foreach(v, key, val)
    {
        if (json_object_get(merged, key) == NULL &&
            json_object_set(merged, key, val) != 0)
            return -1;
    }
    return 0;
}

static void
duplicate_warn(struct loader *ld, const yaml_mark_t *m, const char *key)
{
    char buf[600];

    if (ld->warnings == NULL ||
        json_array_size(ld->warnings) >= YJ_MAX_WARNINGS)
        return;
    snprintf(buf, sizeof(buf),
             "%s:%zu:%zu: duplicate key \"%.200s\"; the last value wins",
             ld->name ? ld->name : "<input>", m->line + 1, m->column + 1, key);
    json_array_append_new(ld->warnings, json_string(buf));
}

static json_t *
mapping_parse(struct loader *ld, int depth, size_t *size)
{
    json_t *obj = json_object(), *merged = NULL, *val = NULL;
    yaml_event_t ev;

    if (obj == NULL)
        return NULL;
    for (;;) {
        char *key = NULL;
        yaml_mark_t km;
        bool merge;
        size_t vs = 0;

        if (event_next(ld, &ev) != 0)
            goto fail;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        km = ev.start_mark;
        if (ev.type == YAML_SCALAR_EVENT) {
            key = strndup((const char *)ev.data.scalar.value,
                          ev.data.scalar.length);
            merge = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                    strcmp(key ? key : "", "<<") == 0;
            if (ev.data.scalar.anchor != NULL) {
                json_t *k = json_stringn((const char *)ev.data.scalar.value,
                                         ev.data.scalar.length);

                if (k == NULL ||
                    anchor_add(ld, (const char *)ev.data.scalar.anchor, k, 1) !=
                        0) {
                    json_decref(k);
                    free(key);
                    yaml_event_delete(&ev);
                    goto fail;
                }
                json_decref(k);
            }
        } else if (ev.type == YAML_ALIAS_EVENT) {
            const struct anchor *a =
                anchor_find(ld, (const char *)ev.data.alias.anchor);

            merge = false;
            if (a != NULL && json_is_string(a->node))
                key = strdup(json_string_value(a->node));
            else if (a != NULL && json_is_integer(a->node)) {
                char b[32];

                snprintf(b, sizeof(b), "%" JSON_INTEGER_FORMAT,
                         json_integer_value(a->node));
                key = strdup(b);
            }
            if (key == NULL) {
                mark_error(ld, &km, "alias %s cannot be used as a key here",
                           (const char *)ev.data.alias.anchor);
                yaml_event_delete(&ev);
                goto fail;
            }
        } else {
            mark_error(ld, &km, "%s", "complex mapping keys are not supported");
            yaml_event_delete(&ev);
            goto fail;
        }
        yaml_event_delete(&ev);
        if (key == NULL)
            goto fail;
        if (event_next(ld, &ev) != 0) {
            free(key);
            goto fail;
        }
        val = node_parse(ld, &ev, depth + 1, &vs);
        if (val == NULL) {
            free(key);
            goto fail;
        }
        *size += vs;
        if (merge) {
            if (merged == NULL && (merged = json_object()) == NULL) {
                free(key);
                goto fail;
            }
            if (merge_into(ld, merged, val, &km) != 0) {
                free(key);
                goto fail;
            }
            json_decref(val);
            val = NULL;
            free(key);
            continue;
        }
        if (json_object_get(obj, key) != NULL)
            duplicate_warn(ld, &km, key);
        if (json_object_set_new(obj, key, val) != 0) {
            val = NULL;
            free(key);
            goto fail;
        }
        val = NULL;
        free(key);
    }
    if (merged != NULL) {
        const char *k;
        json_t *v;

        json_object_foreach(merged, k, v)
        {
            if (json_object_get(obj, k) == NULL &&
                json_object_set(obj, k, v) != 0)
                goto fail;
        }
        json_decref(merged);
    }
    return obj;
fail:
    json_decref(val);
    json_decref(merged);
    json_decref(obj);
    return NULL;
}

static json_t *
sequence_parse(struct loader *ld, int depth, size_t *size)
{
    json_t *arr = json_array();
    yaml_event_t ev;

    if (arr == NULL)
        return NULL;
    for (;;) {
        json_t *v;
        size_t vs = 0;

        if (event_next(ld, &ev) != 0)
            goto fail;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return arr;
        }
        v = node_parse(ld, &ev, depth + 1, &vs);
        if (v == NULL)
            goto fail;
        *size += vs;
        if (json_array_append_new(arr, v) != 0)
            goto fail;
    }
fail:
    json_decref(arr);
    return NULL;
}

/* Builds the node that starts with *ev (consumed). */
static json_t *
node_parse(struct loader *ld, yaml_event_t *ev, int depth, size_t *size)
{
    json_t *v = NULL;
    char *anchor = NULL;
    yaml_mark_t m = ev->start_mark;

    *size = 1;
    if (depth > YJ_MAX_DEPTH) {
        mark_error(ld, &m, "nesting deeper than %s levels", "100");
        yaml_event_delete(ev);
        return NULL;
    }
    if (nodes_count(ld, 1, &m) != 0) {
        yaml_event_delete(ev);
        return NULL;
    }
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        v = scalar_value(ev);
        if (ev->data.scalar.anchor)
            anchor = strdup((const char *)ev->data.scalar.anchor);
        break;
    case YAML_ALIAS_EVENT: {
        const struct anchor *a =
            anchor_find(ld, (const char *)ev->data.alias.anchor);

        if (a == NULL) {
            mark_error(ld, &m, "unknown alias *%s",
                       (const char *)ev->data.alias.anchor);
            break;
        }
        if (nodes_count(ld, a->size, &m) != 0)
            break;
        *size = a->size;
        v = json_deep_copy(a->node);
        break;
    }
    case YAML_SEQUENCE_START_EVENT:
        if (ev->data.sequence_start.anchor)
            anchor = strdup((const char *)ev->data.sequence_start.anchor);
        yaml_event_delete(ev);
        v = sequence_parse(ld, depth, size);
        goto anchored;
    case YAML_MAPPING_START_EVENT:
        if (ev->data.mapping_start.anchor)
            anchor = strdup((const char *)ev->data.mapping_start.anchor);
        yaml_event_delete(ev);
        v = mapping_parse(ld, depth, size);
        goto anchored;
    default:
        mark_error(ld, &m, "unexpected %s", "YAML event");
        break;
    }
    yaml_event_delete(ev);
anchored:
    if (v != NULL && anchor != NULL && anchor_add(ld, anchor, v, *size) != 0) {
        ng_error_set(ld->err, (int)m.line + 1, (int)m.column + 1,
                     "more than %d anchors", YJ_MAX_ANCHORS);
        json_decref(v);
        v = NULL;
    }
    free(anchor);
    return v;
}

/* A stream that starts with '{' or '[' is read as JSON documents first:
 * faster, and tabs are fine in JSON. NULL when it is not plain JSON. */
static json_t *
json_stream_load(const char *buf, size_t len)
{
    json_t *docs = json_array();
    size_t off = 0;

    while (docs != NULL) {
        json_error_t jerr;
        json_t *d;

        while (off < len && isspace((unsigned char)buf[off]))
            off++;
        if (off == len)
            return docs;
        if (buf[off] != '{' && buf[off] != '[')
            break;
        d = json_loadb(buf + off, len - off,
                       JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &jerr);
        if (d == NULL || json_array_size(docs) >= YJ_MAX_DOCS) {
            json_decref(d);
            break;
        }
        off += (size_t)jerr.position;
        if (json_array_append_new(docs, d) != 0)
            break;
    }
    json_decref(docs);
    return NULL;
}

json_t *
yamljson_load(const char *buf, size_t len, const char *name, json_t **warnings,
              struct ng_error *err)
{
    struct loader ld;
    json_t *docs = NULL;
    yaml_event_t ev;
    bool done = false;
    size_t i;

    if (warnings != NULL)
        *warnings = NULL;
    if (len > YJ_MAX_BYTES) {
        ng_error_set(err, 0, 0, "input is %zu bytes, more than %u", len,
                     YJ_MAX_BYTES);
        return NULL;
    }
    for (i = 0; i < len && isspace((unsigned char)buf[i]); i++)
        ;
    if (i < len && (buf[i] == '{' || buf[i] == '[')) {
        docs = json_stream_load(buf, len);
        if (docs != NULL) {
            if (warnings != NULL)
                *warnings = json_array();
            return docs;
        }
    }
    memset(&ld, 0, sizeof(ld));
    ld.name = name;
    ld.err = err;
    ld.warnings = json_array();
    docs = json_array();
    if (ld.warnings == NULL || docs == NULL ||
        !yaml_parser_initialize(&ld.parser)) {
        ng_error_set(err, 0, 0, "out of memory");
        goto fail_noparser;
    }
    yaml_parser_set_input_string(&ld.parser, (const unsigned char *)buf, len);
    ld.buf = buf;
    ld.len = len;
    while (!done) {
        if (event_next(&ld, &ev) != 0)
            goto fail;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            yaml_event_delete(&ev);
            break;
        case YAML_DOCUMENT_START_EVENT: {
            json_t *root;
            size_t size = 0;

            yaml_event_delete(&ev);
            if (event_next(&ld, &ev) != 0)
                goto fail;
            root = node_parse(&ld, &ev, 0, &size);
            if (root == NULL)
                goto fail;
            if (json_is_null(root)) {
                json_decref(root);
            } else if (json_array_size(docs) >= YJ_MAX_DOCS) {
                json_decref(root);
                ng_error_set(err, 0, 0, "more than %d documents", YJ_MAX_DOCS);
                goto fail;
            } else if (json_array_append_new(docs, root) != 0) {
                goto fail;
            }
            if (event_next(&ld, &ev) != 0) /* document end */
                goto fail;
            yaml_event_delete(&ev);
            /* Anchors do not cross documents. */
            for (size_t a = 0; a < ld.n_anchors; a++) {
                free(ld.anchors[a].name);
                json_decref(ld.anchors[a].node);
            }
            ld.n_anchors = 0;
            break;
        }
        default:
            yaml_event_delete(&ev);
            break;
        }
    }
    yaml_parser_delete(&ld.parser);
    for (size_t a = 0; a < ld.n_anchors; a++) {
        free(ld.anchors[a].name);
        json_decref(ld.anchors[a].node);
    }
    free(ld.anchors);
    if (warnings != NULL)
        *warnings = ld.warnings;
    else
        json_decref(ld.warnings);
    return docs;
fail:
    yaml_parser_delete(&ld.parser);
fail_noparser:
    for (size_t a = 0; a < ld.n_anchors; a++) {
        free(ld.anchors[a].name);
        json_decref(ld.anchors[a].node);
    }
    free(ld.anchors);
    json_decref(ld.warnings);
    json_decref(docs);
    if (err != NULL && err->msg[0] == '\0')
        ng_error_set(err, 0, 0, "cannot read YAML");
    return NULL;
}

/* ---- emitting --------------------------------------------------------- */

static int
emit(yaml_emitter_t *em, yaml_event_t *ev)
{
    return yaml_emitter_emit(em, ev) ? 0 : -1;
}

static int
emit_scalar(yaml_emitter_t *em, const char *s, size_t len,
            yaml_scalar_style_t style)
{
    yaml_event_t ev;

    if (!yaml_scalar_event_initialize(&ev, NULL, NULL,
                                      (yaml_char_t *)(uintptr_t)s, (int)len, 1,
                                      1, style))
        return -1;
    return emit(em, &ev);
}

/* YAML 1.1 infinities and NaN: strings here, floats to other readers. */
static bool
special_float(const char *s, size_t len)
{
    static const char *const words[] = {
        ".inf",  ".Inf",  ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF", ".nan", ".NaN",  ".NAN",  NULL};

    return word_in(s, len, words);
}

/* A string goes out plain only when reading it back gives a string;
 * other YAML readers (kubectl) must read the same value. */
static yaml_scalar_style_t
string_style(const char *s, size_t len)
{
    int64_t iv;
    double dv;
    bool bv;

    if (memchr(s, '\n', len) != NULL)
        return YAML_LITERAL_SCALAR_STYLE;
    if (len == 0 || scalar_resolve(s, len, &iv, &dv, &bv) != SCALAR_STRING ||
        strcmp(s, "<<") == 0 || special_float(s, len))
        return YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    return YAML_ANY_SCALAR_STYLE;
}

static int
emit_value(yaml_emitter_t *em, const json_t *v, int depth)
{
    yaml_event_t ev;
    char buf[64];

    if (depth > YJ_MAX_DEPTH)
        return -1;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *val;

        if (!yaml_mapping_start_event_initialize(
                &ev, NULL, NULL, 1,
                json_object_size(v) ? YAML_BLOCK_MAPPING_STYLE
                                    : YAML_FLOW_MAPPING_STYLE) ||
            emit(em, &ev))
            return -1;
        json_object_foreach((json_t *)v, key, val)
        {
            if (emit_scalar(em, key, strlen(key),
                            string_style(key, strlen(key))) ||
                emit_value(em, val, depth + 1))
                return -1;
        }
        if (!yaml_mapping_end_event_initialize(&ev))
            return -1;
        return emit(em, &ev);
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *item;

        if (!yaml_sequence_start_event_initialize(
                &ev, NULL, NULL, 1,
                json_array_size(v) ? YAML_BLOCK_SEQUENCE_STYLE
                                   : YAML_FLOW_SEQUENCE_STYLE) ||
            emit(em, &ev))
            return -1;
        json_array_foreach(v, i, item)
        {
            if (emit_value(em, item, depth + 1) != 0)
                return -1;
        }
        if (!yaml_sequence_end_event_initialize(&ev))
            return -1;
        return emit(em, &ev);
    }
    case JSON_STRING:
        return emit_scalar(
            em, json_string_value(v), json_string_length(v),
            string_style(json_string_value(v), json_string_length(v)));
    case JSON_INTEGER:
        snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(v));
        return emit_scalar(em, buf, strlen(buf), YAML_PLAIN_SCALAR_STYLE);
    case JSON_REAL: {
        double d = json_real_value(v);

        /* The shortest text that reads back as the same double. */
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, sizeof(buf), "%.*g", prec, d);
            if (strtod(buf, NULL) == d)
                break;
        }
        if (strpbrk(buf, ".eEn") == NULL && strlen(buf) + 2 < sizeof(buf))
            memcpy(buf + strlen(buf), ".0", 3);
        return emit_scalar(em, buf, strlen(buf), YAML_PLAIN_SCALAR_STYLE);
    }
    case JSON_TRUE:
        return emit_scalar(em, "true", 4, YAML_PLAIN_SCALAR_STYLE);
    case JSON_FALSE:
        return emit_scalar(em, "false", 5, YAML_PLAIN_SCALAR_STYLE);
    case JSON_NULL:
        return emit_scalar(em, "null", 4, YAML_PLAIN_SCALAR_STYLE);
    }
    return -1;
}

int
yamljson_emit(const json_t *docs, FILE *out)
{
    yaml_emitter_t em;
    yaml_event_t ev;
    size_t i;
    json_t *d;
    int rc = -1;

    if (!yaml_emitter_initialize(&em))
        return -1;
    yaml_emitter_set_output_file(&em, out);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1);
    yaml_emitter_set_indent(&em, 2);
    if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) ||
        emit(&em, &ev))
        goto done;
    json_array_foreach(docs, i, d)
    {
        if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL,
                                                  i == 0) ||
            emit(&em, &ev) || emit_value(&em, d, 0) ||
            !yaml_document_end_event_initialize(&ev, 1) || emit(&em, &ev))
            goto done;
    }
    if (!yaml_stream_end_event_initialize(&ev) || emit(&em, &ev))
        goto done;
    if (!yaml_emitter_flush(&em))
        goto done;
    rc = 0;
done:
    yaml_emitter_delete(&em);
    return rc;
}
