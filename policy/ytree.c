/* YAML to a positioned tree with caps on size, depth, nodes and aliases. */
#include "policy/ytree.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

struct anchor {
    char *name;
    struct ynode *node;
};

struct ytree {
    struct ynode **all; /* every node, for freeing */
    size_t n_all;
    size_t cap_all;
    struct ynode **docs;
    size_t n_docs;
    struct anchor *anchors;
    size_t n_anchors;
    size_t n_alias_uses;
};

/* ---- mis-indent hints ------------------------------------------------ */

/* One line of buf: where it starts, its indent (spaces), and its key (the
 * text before ": " or a final ':', trimmed, at most 40 bytes) or "". */
struct yline {
    size_t start, end;
    size_t indent;
    char key[41];
    bool has_value; /* "key: value" on the line itself */
    bool blank;     /* empty, or a comment only */
};

static void
yline_read(const char *buf, size_t len, size_t start, struct yline *l)
{
    size_t i = start, k;

    memset(l, 0, sizeof(*l));
    l->start = start;
    while (i < len && buf[i] == ' ')
        i++;
    l->indent = i - start;
    if (i < len && buf[i] == '-' && i + 1 < len && buf[i + 1] == ' ') {
        i += 2; /* "- key: v": the key's own column */
        while (i < len && buf[i] == ' ')
            i++;
        l->indent = i - start;
    }
    for (l->end = i; l->end < len && buf[l->end] != '\n'; l->end++)
        ;
    l->blank = i >= l->end || buf[i] == '#';
    for (k = i; k < l->end && buf[k] != ':'; k++)
        ;
    if (k < l->end && k - i <= 40) {
        memcpy(l->key, buf + i, k - i);
        l->key[k - i] = '\0';
        for (size_t v = k + 1; v < l->end && buf[v] != '#'; v++)
            if (buf[v] != ' ' && buf[v] != '\r')
                l->has_value = true;
    }
}

/*
 * A hint in the policy's own terms for libyaml's indentation errors ("did
 * not find expected key", "mapping values are not allowed"), which name
 * neither the key nor the column it belongs at: which key on which line
 * is off, and the indent that the keys beside it use. Walks back from
 * the problem line (0-based) once; writes "" when it has nothing to say.
 */
static void
indent_hint(const char *buf, size_t len, size_t line, char *out, size_t n)
{
    struct yline cur, prev, l;
    size_t at = 0, lno = 0;
    size_t prev_no = 0, parent_no = 0, sib_indent = 0;
    bool have_prev = false, have_parent = false, have_sib = false;
    char parent[41] = "";

    out[0] = '\0';
    /* The problem line's start, and each earlier line read on the way. */
    for (size_t i = 0; i < len && lno < line; i++)
        if (buf[i] == '\n') {
            lno++;
            at = i + 1;
        }
    if (lno != line || at >= len)
        return;
    yline_read(buf, len, at, &cur);
    if (cur.blank || cur.key[0] == '\0')
        return;
    /* Back over the earlier lines: the nearest non-blank one, the parent
     * (the nearest with a smaller indent), and a sibling's indent (a line
     * between them with the indent the parent's keys use). */
    for (size_t ln = line, pos = at; ln-- > 0;) {
        size_t s0 = pos - 1;

        while (s0 > 0 && buf[s0 - 1] != '\n')
            s0--;
        pos = s0;
        yline_read(buf, len, s0, &l);
        if (l.blank)
            continue;
        if (!have_prev) {
            prev = l;
            prev_no = ln;
            have_prev = true;
        }
        if (l.indent < cur.indent) {
            parent_no = ln;
            memcpy(parent, l.key, sizeof(parent));
            have_parent = true;
            break;
        }
        sib_indent = l.indent;
        have_sib = true;
    }
    if (!have_prev)
        return;
    if (cur.indent > prev.indent && prev.has_value) {
        snprintf(out, n,
                 "; line %zu (%s) is indented deeper than %s on line %zu, "
                 "which already has a value: start it at column %zu, as %s",
                 line + 1, cur.key, prev.key, prev_no + 1, prev.indent + 1,
                 prev.key);
        return;
    }
    if (have_parent && have_sib && sib_indent != cur.indent)
        snprintf(out, n,
                 "; line %zu (%s) starts at column %zu, but the keys under "
                 "%s (line %zu) start at column %zu: indent it like them",
                 line + 1, cur.key, cur.indent + 1,
                 parent[0] ? parent : "the item", parent_no + 1,
                 sib_indent + 1);
    else if (have_sib && sib_indent != cur.indent)
        snprintf(out, n,
                 "; line %zu (%s) starts at column %zu, but the keys above "
                 "it start at column %zu: indent it like them",
                 line + 1, cur.key, cur.indent + 1, sib_indent + 1);
}

static struct ynode *
ynode_new(struct ytree *t, enum ynode_kind kind, const yaml_mark_t *m)
{
    struct ynode *n;

    if (t->n_all == t->cap_all) {
        size_t ncap = t->cap_all ? t->cap_all * 2 : 64;
        struct ynode **nv = realloc(t->all, ncap * sizeof(*nv));

        if (nv == NULL)
            return NULL;
        t->all = nv;
        t->cap_all = ncap;
    }
    n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    n->kind = kind;
    n->line = (int)m->line + 1;
    n->col = (int)m->column + 1;
    t->all[t->n_all++] = n;
    return n;
}

static int
ynode_push(struct ynode *parent, struct ynode *key, struct ynode *item)
{
    if ((parent->n & (parent->n - 1)) == 0) {
        size_t ncap = parent->n ? parent->n * 2 : 4;
        struct ynode **ni = realloc(parent->items, ncap * sizeof(*ni));

        if (ni == NULL)
            return -1;
        parent->items = ni;
        if (parent->kind == YNODE_MAP) {
            struct ynode **nk = realloc(parent->keys, ncap * sizeof(*nk));

            if (nk == NULL)
                return -1;
            parent->keys = nk;
        }
    }
    if (parent->kind == YNODE_MAP)
        parent->keys[parent->n] = key;
    parent->items[parent->n++] = item;
    return 0;
}

static int
ytree_anchor_add(struct ytree *t, const char *name, struct ynode *n)
{
    struct anchor *na;
    char *copy;

    /* A later anchor with the same name shadows the earlier one. */
    na = realloc(t->anchors, (t->n_anchors + 1) * sizeof(*na));
    if (na == NULL)
        return -1;
    t->anchors = na;
    copy = strdup(name);
    if (copy == NULL)
        return -1;
    t->anchors[t->n_anchors].name = copy;
    t->anchors[t->n_anchors].node = n;
    t->n_anchors++;
    return 0;
}

static struct ynode *
ytree_anchor_find(const struct ytree *t, const char *name)
{
    for (size_t i = t->n_anchors; i > 0; i--)
        if (strcmp(t->anchors[i - 1].name, name) == 0)
            return t->anchors[i - 1].node;
    return NULL;
}

static int
scalar_is_null(const yaml_event_t *ev)
{
    const char *v = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;

    if (ev->data.scalar.tag != NULL)
        return strcmp((const char *)ev->data.scalar.tag,
                      "tag:yaml.org,2002:null") == 0;
    if (!ev->data.scalar.plain_implicit)
        return 0;
    return len == 0 || (len == 1 && v[0] == '~') ||
           (len == 4 &&
            (memcmp(v, "null", 4) == 0 || memcmp(v, "Null", 4) == 0 ||
             memcmp(v, "NULL", 4) == 0));
}

/* Keys are compared by text; only scalar keys can be duplicates. */
static void
check_duplicate_key(const struct ynode *map, const struct ynode *key,
                    struct diags *d)
{
    if (key->kind != YNODE_SCALAR)
        return;
    for (size_t i = 0; i < map->n; i++) {
        const struct ynode *k = map->keys[i];

        if (k->kind == YNODE_SCALAR && k->len == key->len &&
            memcmp(k->str, key->str, key->len) == 0) {
            diags_add(d, DIAG_ERROR, key->line, key->col,
                      "duplicate key \"%.60s\" (first at %d:%d)", key->str,
                      k->line, k->col);
            return;
        }
    }
}

#define YTREE_STACK 256
#define YTREE_MAX_ALIASES 256
#define YTREE_MAX_MAP_KEYS 1024

struct frame {
    struct ynode *node;
    struct ynode *pending_key; /* maps: key waiting for its value */
};

/* Adds a finished node to the collection on top of the stack. */
static int
attach(struct ytree *t, struct frame *stack, int depth, struct ynode *n,
       struct diags *d)
{
    struct frame *f;

    if (depth == 0) {
        struct ynode **nd = realloc(t->docs, (t->n_docs + 1) * sizeof(*nd));

        if (nd == NULL)
            return -1;
        t->docs = nd;
        t->docs[t->n_docs++] = n;
        return 0;
    }
    f = &stack[depth - 1];
    if (f->node->kind == YNODE_SEQ)
        return ynode_push(f->node, NULL, n);
    if (f->pending_key == NULL) {
        f->pending_key = n;
        return 0;
    }
    if (f->node->n >= YTREE_MAX_MAP_KEYS) {
        /* Duplicate detection is quadratic; nothing legitimate is this
         * wide. */
        diags_add(d, DIAG_ERROR, f->pending_key->line, f->pending_key->col,
                  "mapping has more than %d keys", YTREE_MAX_MAP_KEYS);
        return -1;
    }
    check_duplicate_key(f->node, f->pending_key, d);
    if (ynode_push(f->node, f->pending_key, n) != 0)
        return -1;
    f->pending_key = NULL;
    return 0;
}

struct ytree *
ytree_parse(const char *buf, size_t len, const struct ytree_caps *caps,
            struct diags *d)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    struct ytree *t;
    struct frame stack[YTREE_STACK];
    int depth = 0, done = 0, failed = 0;
    size_t errors_before = d->n_errors;
    int max_depth =
        caps->max_depth < YTREE_STACK ? caps->max_depth : YTREE_STACK;

    if (len > caps->max_bytes) {
        diags_add(d, DIAG_ERROR, 0, 0,
                  "file is %zu bytes, over the %zu-byte limit", len,
                  caps->max_bytes);
        return NULL;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        diags_add(d, DIAG_ERROR, 0, 0, "out of memory");
        return NULL;
    }
    if (!yaml_parser_initialize(&parser)) {
        free(t);
        diags_add(d, DIAG_ERROR, 0, 0, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);

    while (!done && !failed) {
        struct ynode *n = NULL;
        const char *anchor = NULL;

        if (!yaml_parser_parse(&parser, &ev)) {
            int tab_col;

            if (diag_yaml_tab(buf, len, parser.problem_mark.line,
                              parser.problem_mark.index, &tab_col))
                diags_add(d, DIAG_ERROR, (int)parser.problem_mark.line + 1,
                          tab_col, DIAG_YAML_TAB_MSG);
            else {
                char hint[400] = "";
                size_t hl = parser.problem_mark.line;

                /* libyaml finds a block mapping's bad key when it reads
                 * the token after it: for "did not find expected key"
                 * the key at fault can be the line before the mark. */
                if (parser.problem != NULL &&
                    (strstr(parser.problem, "did not find expected key") ||
                     strstr(parser.problem, "did not find expected '-'") ||
                     strstr(parser.problem, "mapping values are not "
                                            "allowed"))) {
                    indent_hint(buf, len, hl, hint, sizeof(hint));
                    if (hint[0] == '\0' && hl > 0)
                        indent_hint(buf, len, hl - 1, hint, sizeof(hint));
                }
                diags_add(d, DIAG_ERROR, (int)parser.problem_mark.line + 1,
                          (int)parser.problem_mark.column + 1, "%s%s%s%s",
                          parser.problem ? parser.problem : "YAML syntax error",
                          parser.context ? " " : "",
                          parser.context ? parser.context : "", hint);
            }
            failed = 1;
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (t->n_docs >= caps->max_docs) {
                diags_add(d, DIAG_ERROR, (int)ev.start_mark.line + 1,
                          (int)ev.start_mark.column + 1,
                          "more than %zu YAML documents", caps->max_docs);
                failed = 1;
            }
            break;
        case YAML_ALIAS_EVENT:
            n = ytree_anchor_find(t, (const char *)ev.data.alias.anchor);
            if (n == NULL) {
                diags_add(d, DIAG_ERROR, (int)ev.start_mark.line + 1,
                          (int)ev.start_mark.column + 1, "unknown alias *%.60s",
                          (const char *)ev.data.alias.anchor);
                failed = 1;
                break;
            }
            /* Aliases share nodes; capping their number keeps every walk
             * over the tree bounded even for "billion laughs" inputs. */
            if (++t->n_alias_uses > YTREE_MAX_ALIASES) {
                diags_add(d, DIAG_ERROR, (int)ev.start_mark.line + 1,
                          (int)ev.start_mark.column + 1, "more than %d aliases",
                          YTREE_MAX_ALIASES);
                failed = 1;
                break;
            }
            if (attach(t, stack, depth, n, d) != 0)
                failed = 1;
            break;
        case YAML_SCALAR_EVENT:
            n = ynode_new(t, YNODE_SCALAR, &ev.start_mark);
            if (n == NULL) {
                failed = 1;
                break;
            }
            n->str = malloc(ev.data.scalar.length + 1);
            if (n->str == NULL) {
                failed = 1;
                break;
            }
            memcpy(n->str, ev.data.scalar.value, ev.data.scalar.length);
            n->str[ev.data.scalar.length] = '\0';
            n->len = ev.data.scalar.length;
            n->plain = ev.data.scalar.plain_implicit &&
                       ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
            n->null_tag = scalar_is_null(&ev) != 0;
            anchor = (const char *)ev.data.scalar.anchor;
            if (anchor != NULL && ytree_anchor_add(t, anchor, n) != 0)
                failed = 1;
            else if (attach(t, stack, depth, n, d) != 0)
                failed = 1;
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (depth >= max_depth) {
                diags_add(d, DIAG_ERROR, (int)ev.start_mark.line + 1,
                          (int)ev.start_mark.column + 1,
                          "nesting deeper than %d levels", max_depth);
                failed = 1;
                break;
            }
            n = ynode_new(
                t, ev.type == YAML_SEQUENCE_START_EVENT ? YNODE_SEQ : YNODE_MAP,
                &ev.start_mark);
            if (n == NULL) {
                failed = 1;
                break;
            }
            anchor = ev.type == YAML_SEQUENCE_START_EVENT
                         ? (const char *)ev.data.sequence_start.anchor
                         : (const char *)ev.data.mapping_start.anchor;
            if (anchor != NULL && ytree_anchor_add(t, anchor, n) != 0) {
                failed = 1;
                break;
            }
            stack[depth].node = n;
            stack[depth].pending_key = NULL;
            depth++;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            if (attach(t, stack, depth, stack[depth].node, d) != 0)
                failed = 1;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
        if (!failed && t->n_all > caps->max_nodes) {
            diags_add(d, DIAG_ERROR, 0, 0, "more than %zu YAML nodes",
                      caps->max_nodes);
            failed = 1;
        }
    }
    yaml_parser_delete(&parser);
    if (failed || d->n_errors != errors_before) {
        if (failed && d->n_errors == errors_before)
            diags_add(d, DIAG_ERROR, 0, 0, "out of memory");
        ytree_free(t);
        return NULL;
    }
    return t;
}

size_t
ytree_ndocs(const struct ytree *t)
{
    return t->n_docs;
}

const struct ynode *
ytree_doc(const struct ytree *t, size_t i)
{
    return i < t->n_docs ? t->docs[i] : NULL;
}

void
ytree_free(struct ytree *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n_all; i++) {
        free(t->all[i]->str);
        free(t->all[i]->items);
        free(t->all[i]->keys);
        free(t->all[i]);
    }
    for (size_t i = 0; i < t->n_anchors; i++)
        free(t->anchors[i].name);
    free(t->anchors);
    free(t->all);
    free(t->docs);
    free(t);
}

const struct ynode *
ynode_get(const struct ynode *n, const char *key)
{
    size_t klen = strlen(key);

    if (n == NULL || n->kind != YNODE_MAP)
        return NULL;
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *k = n->keys[i];

        if (k->kind == YNODE_SCALAR && k->len == klen &&
            memcmp(k->str, key, klen) == 0)
            return n->items[i];
    }
    return NULL;
}

const char *
ynode_type_name(const struct ynode *n)
{
    const char *s;
    size_t i = 0;

    if (n->kind == YNODE_SEQ)
        return "a list";
    if (n->kind == YNODE_MAP)
        return "a mapping";
    if (n->null_tag)
        return "null";
    if (!n->plain)
        return "a string";
    s = n->str;
    if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0 ||
        strcmp(s, "True") == 0 || strcmp(s, "False") == 0 ||
        strcmp(s, "TRUE") == 0 || strcmp(s, "FALSE") == 0)
        return "a boolean";
    if (s[i] == '-' || s[i] == '+')
        i++;
    if (s[i] >= '0' && s[i] <= '9')
        return "a number";
    return "a string";
}
