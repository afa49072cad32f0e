/* ncclguard policy test: runs policy test files through the server's own
 * mutation path and checks assertions and expected objects. */
#include "cli/policytest.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <jansson.h>

#include "admission/mutate.h"
#include "base/file.h"
#include "base/jsonptr.h"
#include "base/text.h"
#include "cli/workload.h"
#include "cli/yamljson.h"
#include "policy/diag.h"
#include "policy/policy.h"
#include "policy/quantity.h"
#include "policy/ytree.h"

#define TEST_MAX_BYTES (4 * 1024 * 1024)
#define TEST_MAX_FILES 1000
#define TEST_MAX_DEPTH 8
#define DIFF_MAX_LINES 2000

struct files {
    char **v;
    size_t n;
};

struct run {
    int verbose;
    size_t passed;
    size_t failed;
};

/* Why one case failed: lines collected, printed under FAIL. */
struct reasons {
    char *buf;
    size_t len;
    FILE *f;
    int n;
};

static void reason(struct reasons *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
reason(struct reasons *r, const char *fmt, ...)
{
    va_list ap;

    r->n++;
    if (r->f == NULL)
        return;
    fputs("    ", r->f);
    va_start(ap, fmt);
    vfprintf(r->f, fmt, ap);
    va_end(ap);
    fputc('\n', r->f);
}

/* ---- collecting files ---------------------------------------------- */

static int
has_suffix(const char *s, const char *suf)
{
    size_t ls = strlen(s), lf = strlen(suf);

    return ls >= lf && strcmp(s + ls - lf, suf) == 0;
}

static int
files_add(struct files *fs, const char *path)
{
    char **nv;
    char *c;

    if (fs->n >= TEST_MAX_FILES)
        return -1;
    nv = realloc(fs->v, (fs->n + 1) * sizeof(*nv));
    if (nv == NULL)
        return -1;
    fs->v = nv;
    c = strdup(path);
    if (c == NULL)
        return -1;
    fs->v[fs->n++] = c;
    return 0;
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds every *.test.yaml under dir, in name order. */
static int
files_walk(struct files *fs, const char *dir, int depth)
{
    DIR *d;
    struct dirent *e;
    struct files here = {NULL, 0};
    int rc = 0;

    if (depth > TEST_MAX_DEPTH)
        return 0;
    d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "ncclguard policy test: cannot open %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;

        if (e->d_name[0] == '.')
            continue;
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
            (int)sizeof(path))
            continue;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode) || has_suffix(e->d_name, ".test.yaml"))
            if (files_add(&here, path) != 0)
                rc = -1;
    }
    closedir(d);
    if (here.n > 0)
        qsort(here.v, here.n, sizeof(char *), cmp_str);
    for (size_t i = 0; i < here.n; i++) {
        struct stat st;

        if (rc == 0 && stat(here.v[i], &st) == 0) {
            if (S_ISDIR(st.st_mode))
                rc = files_walk(fs, here.v[i], depth + 1);
            else
                rc = files_add(fs, here.v[i]);
        }
        free(here.v[i]);
    }
    free(here.v);
    return rc;
}

/* ---- small JSON helpers --------------------------------------------- */

static const char *
jstr(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Checks that obj has only the given keys; reports the others. */
static int
check_keys(const json_t *obj, const char *const *keys, const char *where,
           struct reasons *r)
{
    const char *k;
    json_t *v;
    int bad = 0;

    json_object_foreach((json_t *)obj, k, v)
    {
        int known = 0;

        (void)v;
        for (size_t i = 0; keys[i] != NULL && !known; i++)
            known = strcmp(keys[i], k) == 0;
        if (!known) {
            reason(r, "%s: unknown key \"%s\"", where, k);
            bad = 1;
        }
    }
    return bad ? -1 : 0;
}

/* Parses a YAML file into its documents (an owned array) or NULL. */
static json_t *
load_yaml_file(const char *path, struct reasons *r)
{
    char *buf;
    size_t len;
    struct ng_error e;
    json_t *docs;
    char msg[700];

    buf = file_read(path, TEST_MAX_BYTES, &len, &e);
    if (buf == NULL) {
        reason(r, "%s", e.msg);
        return NULL;
    }
    ng_error_clear(&e);
    docs = yamljson_load(buf, len, path, NULL, &e);
    free(buf);
    if (docs == NULL)
        reason(r, "%s", ng_error_format(&e, path, msg, sizeof(msg)));
    return docs;
}

/* A path relative to the directory of the test file. */
static void
relative_to(const char *testfile, const char *p, char *out, size_t n)
{
    char tmp[4096];

    if (p[0] == '/') {
        snprintf(out, n, "%s", p);
        return;
    }
    snprintf(tmp, sizeof(tmp), "%s", testfile);
    snprintf(out, n, "%s/%s", dirname(tmp), p);
}

/* ---- YAML text and diffs -------------------------------------------- */

static char *
emit_yaml(const json_t *docs)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (f == NULL)
        return NULL;
    if (yamljson_emit(docs, f) != 0) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    return buf;
}

static size_t
split_lines(char *text, char **lines, size_t max)
{
    size_t n = 0;
    char *p = text;

    while (*p != '\0' && n < max) {
        char *nl = strchr(p, '\n');

        lines[n++] = p;
        if (nl == NULL)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}

/* A line diff (longest common subsequence), "-" expected, "+" actual. */
static void
diff_docs(const json_t *expected, const json_t *actual, FILE *out)
{
    char *a = emit_yaml(expected), *b = emit_yaml(actual);
    char **la = NULL, **lb = NULL;
    unsigned short *t = NULL;
    size_t na, nb, i, j;

    if (a == NULL || b == NULL)
        goto done;
    la = calloc(DIFF_MAX_LINES, sizeof(char *));
    lb = calloc(DIFF_MAX_LINES, sizeof(char *));
    if (la == NULL || lb == NULL)
        goto done;
    na = split_lines(a, la, DIFF_MAX_LINES);
    nb = split_lines(b, lb, DIFF_MAX_LINES);
    t = calloc((na + 1) * (nb + 1), sizeof(*t));
    if (t == NULL)
        goto done;
#define T(x, y) t[(x) * (nb + 1) + (y)]
    for (i = na; i-- > 0;)
        for (j = nb; j-- > 0;)
            T(i, j) =
                strcmp(la[i], lb[j]) == 0
                    ? (unsigned short)(T(i + 1, j + 1) + 1)
                    : (T(i + 1, j) > T(i, j + 1) ? T(i + 1, j) : T(i, j + 1));
    fprintf(out, "    --- expected\n    +++ actual\n");
    i = j = 0;
    while (i < na || j < nb) {
        if (i < na && j < nb && strcmp(la[i], lb[j]) == 0) {
            fprintf(out, "     %s\n", la[i]);
            i++;
            j++;
        } else if (i < na && (j == nb || T(i + 1, j) >= T(i, j + 1))) {
            fprintf(out, "    -%s\n", la[i++]);
        } else {
            fprintf(out, "    +%s\n", lb[j++]);
        }
    }
#undef T
done:
    free(t);
    free(la);
    free(lb);
    free(a);
    free(b);
}

/* ---- assertions ----------------------------------------------------- */

static const char *
status_word(enum mutate_status s)
{
    return mutate_status_name(s);
}

/* Size of the /dev/shm emptyDir of one pod spec, or -1 when none. */
static int64_t
pod_shm_size(json_t *pod, char *text, size_t n)
{
    json_t *spec = json_object_get(pod, "spec");
    json_t *containers = json_object_get(spec, "containers");
    json_t *volumes = json_object_get(spec, "volumes");
    const char *vol = NULL;
    size_t i, k;
    json_t *c, *m, *v;

    snprintf(text, n, "none");
    json_array_foreach(containers, i, c)
    {
        json_array_foreach(json_object_get(c, "volumeMounts"), k, m)
        {
            const char *mp = jstr(m, "mountPath");

            if (mp != NULL &&
                (strcmp(mp, "/dev/shm") == 0 || strcmp(mp, "/dev/shm/") == 0))
                vol = jstr(m, "name");
        }
        if (vol != NULL)
            break;
    }
    if (vol == NULL)
        return -1;
    json_array_foreach(volumes, i, v)
    {
        const char *name = jstr(v, "name");
        json_t *ed = json_object_get(v, "emptyDir");
        const char *sl = jstr(ed, "sizeLimit");
        struct quantity q;

        if (name == NULL || strcmp(name, vol) != 0)
            continue;
        if (sl == NULL) {
            snprintf(text, n, "unbounded");
            return 0;
        }
        snprintf(text, n, "%s", sl);
        if (quantity_parse(sl, strlen(sl), &q, NULL) != 0)
            return -1;
        return q.value;
    }
    return -1;
}

/* GPU containers of one pod spec: those asking for a policy GPU resource. */
static int
is_gpu_container(const json_t *c, const struct settings *s)
{
    json_t *res = json_object_get(c, "resources");
    const char *where[] = {"limits", "requests"};

    for (size_t w = 0; w < 2; w++) {
        json_t *m = json_object_get(res, where[w]);

        for (size_t g = 0; g < s->n_gpu_resources; g++) {
            json_t *v = json_object_get(m, s->gpu_resources[g]);

            if ((json_is_integer(v) && json_integer_value(v) > 0) ||
                (json_is_string(v) && strcmp(json_string_value(v), "0")))
                return 1;
        }
    }
    return 0;
}

static void
assert_env(json_t *pod, const json_t *want, const struct settings *s,
           const char *where, struct reasons *r)
{
    json_t *cs = json_object_get(json_object_get(pod, "spec"), "containers");
    json_t *c;
    size_t i, checked = 0;

    json_array_foreach(cs, i, c)
    {
        const char *cname = jstr(c, "name");
        const char *k;
        json_t *wv;

        if (!is_gpu_container(c, s))
            continue;
        checked++;
        json_object_foreach((json_t *)want, k, wv)
        {
            json_t *e;
            size_t j;
            const char *got = NULL;
            const char *w = json_is_string(wv) ? json_string_value(wv) : NULL;

            json_array_foreach(json_object_get(c, "env"), j, e)
            {
                const char *n = jstr(e, "name");

                if (n != NULL && strcmp(n, k) == 0)
                    got = jstr(e, "value") ? jstr(e, "value") : "";
            }
            if (w == NULL && got != NULL)
                reason(r,
                       "env: container \"%s\" has %s=%s, expected it "
                       "unset (%s)",
                       cname ? cname : "?", k, got, where);
            else if (w != NULL && (got == NULL || strcmp(got, w) != 0))
                reason(r, "env: container \"%s\" has %s=%s, expected %s (%s)",
                       cname ? cname : "?", k, got ? got : "(unset)", w, where);
        }
    }
    if (checked == 0)
        reason(r, "env: no GPU container to check (%s)", where);
}

/* ---- assertions on the GPU containers: envSet, profile, watchdog,
 * memory ---------------------------------------------------------------- */

/* Whether container c's env sets name, by value or valueFrom. */
static int
env_set(const json_t *c, const char *name)
{
    json_t *e;
    size_t j;

    json_array_foreach(json_object_get(c, "env"), j, e)
    {
        const char *n = jstr(e, "name");

        if (n != NULL && strcmp(n, name) == 0)
            return 1;
    }
    return 0;
}

/* The memory quantity at resources.<kind>.memory of c as written, or
 * "none". */
static const char *
memory_text(const json_t *c, const char *kind, char *buf, size_t n)
{
    const json_t *v = json_object_get(
        json_object_get(json_object_get(c, "resources"), kind), "memory");

    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v)) {
        snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf;
    }
    return "none";
}

/* Whether the quantity texts a and b are the same amount ("none" only
 * equals "none"). */
static int
quantity_same_text(const char *a, const char *b)
{
    struct quantity qa, qb;

    if (strcmp(a, "none") == 0 || strcmp(b, "none") == 0)
        return strcmp(a, b) == 0;
    return quantity_parse(a, strlen(a), &qa, NULL) == 0 &&
           quantity_parse(b, strlen(b), &qb, NULL) == 0 && qa.milli == qb.milli;
}

/*
 * expect.envSet (a list: each variable set in every GPU container, any
 * value), expect.profile (the first envFrom ConfigMap of every GPU
 * container; "none": no GPU container has the policy's profile),
 * expect.watchdog (NCCLGUARD_WATCHDOG set in every GPU container, or in
 * none) and expect.memory ({limit, request}: each GPU container's memory,
 * "none" for unset).
 */
static void
assert_gpu_containers(json_t *pod, const json_t *exp, const struct settings *s,
                      const char *where, struct reasons *r)
{
    json_t *cs = json_object_get(json_object_get(pod, "spec"), "containers");
    const json_t *set = json_object_get(exp, "envSet");
    const char *profile = jstr(exp, "profile");
    const json_t *wd = json_object_get(exp, "watchdog");
    const json_t *mem = json_object_get(exp, "memory");
    json_t *c;
    size_t i, checked = 0;

    if (set == NULL && profile == NULL && wd == NULL && mem == NULL)
        return;
    json_array_foreach(cs, i, c)
    {
        const char *cname = jstr(c, "name") ? jstr(c, "name") : "?";
        json_t *n;
        size_t k;

        if (!is_gpu_container(c, s))
            continue;
        checked++;
        json_array_foreach((json_t *)set, k, n)
        {
            if (json_is_string(n) && !env_set(c, json_string_value(n)))
                reason(r, "envSet: container \"%s\" does not set %s (%s)",
                       cname, json_string_value(n), where);
        }
        if (profile != NULL) {
            const char *first =
                jstr(json_object_get(
                         json_array_get(json_object_get(c, "envFrom"), 0),
                         "configMapRef"),
                     "name");
            int has = 0;
            json_t *e;

            json_array_foreach(json_object_get(c, "envFrom"), k, e)
            {
                const char *nm =
                    jstr(json_object_get(e, "configMapRef"), "name");

                has = has || (nm != NULL && s->profile.name != NULL &&
                              strcmp(nm, s->profile.name) == 0);
            }
            if (strcmp(profile, "none") == 0
                    ? has
                    : first == NULL || strcmp(first, profile) != 0)
                reason(r,
                       "profile: container \"%s\" has %s first in envFrom, "
                       "expected %s (%s)",
                       cname, first ? first : "no ConfigMap", profile, where);
        }
        if (wd != NULL && env_set(c, "NCCLGUARD_WATCHDOG") != json_is_true(wd))
            reason(r, "watchdog: container \"%s\" %s NCCLGUARD_WATCHDOG (%s)",
                   cname, json_is_true(wd) ? "lacks" : "has", where);
        for (int m = 0; m < 2 && mem != NULL; m++) {
            static const char *const keys[2] = {"limit", "request"};
            static const char *const kinds[2] = {"limits", "requests"};
            const char *want = jstr(mem, keys[m]);
            char buf[32];
            const char *got = memory_text(c, kinds[m], buf, sizeof(buf));

            if (want != NULL && !quantity_same_text(want, got))
                reason(r,
                       "memory: container \"%s\" has %s %s, expected %s "
                       "(%s)",
                       cname, keys[m], got, want, where);
        }
    }
    if (checked == 0)
        reason(r,
               "envSet, profile, watchdog, memory: no GPU container to "
               "check (%s)",
               where);
}

static void
assert_caps(json_t *pod, const json_t *want, const struct settings *s,
            struct reasons *r)
{
    json_t *cs = json_object_get(json_object_get(pod, "spec"), "containers");
    json_t *c, *w;
    size_t i, k, checked = 0;

    json_array_foreach(cs, i, c)
    {
        json_t *add = json_object_get(
            json_object_get(json_object_get(c, "securityContext"),
                            "capabilities"),
            "add");

        if (!is_gpu_container(c, s))
            continue;
        checked++;
        json_array_foreach((json_t *)want, k, w)
        {
            json_t *a;
            size_t j;
            int found = 0;

            json_array_foreach(add, j, a) found = found || json_equal(a, w);
            if (!found)
                reason(r, "capabilities: container \"%s\" lacks %s",
                       jstr(c, "name") ? jstr(c, "name") : "?",
                       json_is_string(w) ? json_string_value(w) : "?");
        }
    }
    if (checked == 0)
        reason(r, "capabilities: no GPU container to check");
}

/*
 * Whether the init container c is a ring check of the webhook's, by the
 * admission core's own rule (ctr_is_ringcheck() in admission/mutate.c):
 * named ncclguard-ringcheck, or ncclguard-ringcheck-N (N from 1, no
 * leading zero; the name it takes when the pod already has a container
 * called ncclguard-ringcheck) with --expect-gpus as its first argument.
 */
static int
is_ringcheck(const json_t *c)
{
    static const char base[] = "ncclguard-ringcheck";
    const char *n = jstr(c, "name");
    const char *arg0 =
        json_string_value(json_array_get(json_object_get(c, "args"), 0));

    if (n == NULL || strncmp(n, base, sizeof(base) - 1) != 0)
        return 0;
    n += sizeof(base) - 1;
    if (*n == '\0')
        return 1;
    if (n[0] != '-' || n[1] < '1' || n[1] > '9')
        return 0;
    for (n += 2; *n != '\0'; n++)
        if (*n < '0' || *n > '9')
            return 0;
    return arg0 != NULL && strcmp(arg0, "--expect-gpus") == 0;
}

static int
has_ringcheck(json_t *pod)
{
    json_t *ics =
        json_object_get(json_object_get(pod, "spec"), "initContainers");
    json_t *c;
    size_t i;

    json_array_foreach(ics, i, c)
    {
        if (is_ringcheck(c))
            return 1;
    }
    return 0;
}

static const char *const expect_keys[] = {
    "rule",         "mutated", "status",    "shmSize",  "warnings",
    "env",          "envSet",  "profile",   "watchdog", "memory",
    "capabilities", "hostIPC", "ringCheck", NULL};

/* The expect: keys read from the mutated pod itself. */
static const char *const pod_keys[] = {
    "shmSize", "env",          "envSet",  "profile",   "watchdog",
    "memory",  "capabilities", "hostIPC", "ringCheck", NULL};

/* Names a pod for messages: "Pod p", "Deployment d /spec/template",
 * "input document 2" when the object has neither kind nor name. */
static const char *
pod_where(const json_t *doc, const struct workload_pod *wp, size_t d, char *buf,
          size_t n)
{
    const char *kind = jstr(doc, "kind");
    const json_t *meta = json_object_get(doc, "metadata");
    const char *name = jstr(meta, "name");

    if (name == NULL)
        name = jstr(meta, "generateName");
    if (kind == NULL && name == NULL)
        snprintf(buf, n, "input document %zu%s%s", d + 1,
                 wp->pointer[0] ? " " : "", wp->pointer);
    else
        snprintf(buf, n, "%s%s%s%s%s", kind ? kind : "object", name ? " " : "",
                 name ? name : "", wp->pointer[0] ? " " : "", wp->pointer);
    return buf;
}

/* Checks the expect: block against every pod the inputs held. */
static void
check_expect(const json_t *exp, json_t *actual, struct workload_report *reps,
             size_t nreps, const struct settings *defaults, struct reasons *r)
{
    json_t *v;
    size_t npods = 0, patched = 0;
    json_t *all_warnings = json_array();
    json_t *warning_pods = json_array(); /* the pod of each warning */

    if (check_keys(exp, expect_keys, "expect", r) != 0 ||
        all_warnings == NULL || warning_pods == NULL) {
        json_decref(all_warnings);
        json_decref(warning_pods);
        return;
    }
    for (size_t d = 0; d < nreps; d++) {
        for (size_t p = 0; p < reps[d].n_pods; p++) {
            struct workload_pod *wp = &reps[d].pods[p];
            json_t *pod = jsonptr_get(json_array_get(actual, d), wp->pointer);
            const char *s;
            json_t *w;
            size_t i;
            char where[600];

            pod_where(json_array_get(actual, d), wp, d, where, sizeof(where));
            npods++;
            if (pod == NULL)
                for (const char *const *k = pod_keys; *k != NULL; k++)
                    if (json_object_get(exp, *k) != NULL)
                        reason(r,
                               "%s: cannot check, the mutated object has "
                               "no pod at %s",
                               *k, wp->pointer[0] ? wp->pointer : "/");
            if (wp->result.status == MUTATE_PATCHED)
                patched++;
            json_array_foreach(wp->result.warnings, i, w)
            {
                json_array_append(all_warnings, w);
                json_array_append_new(warning_pods, json_string(where));
            }
            if ((s = jstr(exp, "rule")) != NULL &&
                strcmp(s, wp->result.rule) != 0)
                reason(r, "rule: expected \"%s\", got \"%s\" (%s)", s,
                       wp->result.rule, where);
            if ((s = jstr(exp, "status")) != NULL &&
                strcmp(s, status_word(wp->result.status)) != 0)
                reason(r, "status: expected %s, got %s (%s%s%s)", s,
                       status_word(wp->result.status), where,
                       wp->result.reason[0] ? ": " : "", wp->result.reason);
            if ((s = jstr(exp, "shmSize")) != NULL && pod != NULL) {
                struct quantity q;
                char got[64];
                int64_t size = pod_shm_size(pod, got, sizeof(got));

                if (strcmp(s, "none") == 0
                        ? size != -1
                        : quantity_parse(s, strlen(s), &q, NULL) != 0 ||
                              q.value != size)
                    reason(r, "shmSize: expected %s, got %s (%s)", s, got,
                           where);
            }
            if ((v = json_object_get(exp, "env")) != NULL && pod != NULL)
                assert_env(pod, v, defaults, where, r);
            if (pod != NULL)
                assert_gpu_containers(pod, exp, defaults, where, r);
            if ((v = json_object_get(exp, "capabilities")) != NULL &&
                pod != NULL)
                assert_caps(pod, v, defaults, r);
            if ((v = json_object_get(exp, "hostIPC")) != NULL && pod != NULL) {
                json_t *h =
                    json_object_get(json_object_get(pod, "spec"), "hostIPC");
                int got = json_is_true(h);

                if (got != json_is_true(v))
                    reason(r, "hostIPC: expected %s, got %s",
                           json_is_true(v) ? "true" : "false",
                           got ? "true" : "false");
            }
            if ((v = json_object_get(exp, "ringCheck")) != NULL &&
                pod != NULL && has_ringcheck(pod) != json_is_true(v))
                reason(r,
                       "ringCheck: expected %s ncclguard-ringcheck init "
                       "container (%s)",
                       json_is_true(v) ? "an" : "no", where);
        }
    }
    if (npods == 0)
        reason(r, "the input holds no pod or pod template");
    if ((v = json_object_get(exp, "mutated")) != NULL &&
        (patched > 0) != json_is_true(v))
        reason(r, "mutated: expected %s, got %s",
               json_is_true(v) ? "true" : "false",
               patched > 0 ? "true" : "false");
    if ((v = json_object_get(exp, "warnings")) != NULL) {
        size_t i;
        json_t *w;

        if (!json_is_array(v)) {
            reason(r, "expect.warnings must be a list of substrings");
        } else if (json_array_size(v) != json_array_size(all_warnings)) {
            reason(r, "warnings: expected %zu, got %zu", json_array_size(v),
                   json_array_size(all_warnings));
            json_array_foreach(all_warnings, i, w)
                reason(r, "  got: %s (%s)",
                       json_is_string(w) ? json_string_value(w) : "?",
                       json_string_value(json_array_get(warning_pods, i)));
        } else {
            json_array_foreach(v, i, w)
            {
                const char *got =
                    json_string_value(json_array_get(all_warnings, i));
                const char *want = json_string_value(w);

                if (want == NULL || got == NULL || strstr(got, want) == NULL)
                    reason(r,
                           "warnings[%zu]: expected it to contain \"%s\", "
                           "got \"%s\" (%s)",
                           i, want ? want : "?", got ? got : "?",
                           json_string_value(json_array_get(warning_pods, i)));
            }
        }
    }
    json_decref(all_warnings);
    json_decref(warning_pods);
}

/* ---- one case ------------------------------------------------------- */

static const char *const case_keys[] = {"name",         "namespace", "input",
                                        "inputFile",    "expect",    "expected",
                                        "expectedFile", NULL};

static void
run_case(struct run *run, const char *file, const json_t *c, size_t idx,
         const struct policy *pol)
{
    struct reasons r = {NULL, 0, NULL, 0};
    const char *name = jstr(c, "name");
    const char *ns = jstr(c, "namespace");
    json_t *inputs = NULL, *actual = NULL, *expected = NULL;
    struct workload_report *reps = NULL;
    struct mutate_options opt = {0};
    char label[300], path[4096];
    size_t n = 0;
    const json_t *v;

    snprintf(label, sizeof(label), "%s", name ? name : "");
    if (name == NULL)
        snprintf(label, sizeof(label), "case %zu", idx + 1);
    r.f = open_memstream(&r.buf, &r.len);
    if (!json_is_object(c)) {
        reason(&r, "a case must be a mapping");
        goto report;
    }
    if (check_keys(c, case_keys, "case", &r) != 0)
        goto report;
    if ((v = json_object_get(c, "input")) != NULL) {
        inputs = json_is_array(v) ? json_deep_copy(v) : json_pack("[O]", v);
    } else if ((v = json_object_get(c, "inputFile")) != NULL &&
               json_is_string(v)) {
        relative_to(file, json_string_value(v), path, sizeof(path));
        inputs = load_yaml_file(path, &r);
        if (inputs == NULL)
            goto report;
    } else {
        reason(&r, "a case needs input (an object) or inputFile (a path)");
        goto report;
    }
    if (json_object_get(c, "expect") == NULL &&
        json_object_get(c, "expected") == NULL &&
        json_object_get(c, "expectedFile") == NULL) {
        reason(&r, "a case needs expect (assertions), expected or "
                   "expectedFile");
        goto report;
    }
    if (inputs == NULL || (actual = json_deep_copy(inputs)) == NULL) {
        reason(&r, "out of memory");
        goto report;
    }
    n = json_array_size(actual);
    reps = calloc(n ? n : 1, sizeof(*reps));
    if (reps == NULL) {
        reason(&r, "out of memory");
        goto report;
    }
    for (size_t i = 0; i < n; i++) {
        if (!json_is_object(json_array_get(actual, i))) {
            reason(&r, "input document %zu is not an object", i + 1);
            goto report;
        }
        if (workload_mutate(json_array_get(actual, i), ns, pol, &opt,
                            &reps[i]) != 0) {
            reason(&r, "the mutation failed (out of memory)");
            goto report;
        }
    }
    if ((v = json_object_get(c, "expect")) != NULL) {
        if (!json_is_object(v))
            reason(&r, "expect must be a mapping");
        else
            check_expect(v, actual, reps, n, policy_defaults(pol), &r);
    }
    if ((v = json_object_get(c, "expected")) != NULL) {
        expected = json_is_array(v) ? json_deep_copy(v) : json_pack("[O]", v);
    } else if ((v = json_object_get(c, "expectedFile")) != NULL &&
               json_is_string(v)) {
        relative_to(file, json_string_value(v), path, sizeof(path));
        expected = load_yaml_file(path, &r);
    }
    if (expected != NULL && !json_equal(expected, actual)) {
        reason(&r, "the mutated objects differ from the expected ones:");
        if (r.f != NULL)
            diff_docs(expected, actual, r.f);
    }
report:
    if (r.f != NULL)
        fclose(r.f);
    if (r.n == 0) {
        run->passed++;
        printf("PASS %s: %s\n", file, label);
    } else {
        run->failed++;
        printf("FAIL %s: %s\n%s", file, label, r.buf ? r.buf : "");
    }
    if (run->verbose && r.n == 0 && actual != NULL) {
        char *y = emit_yaml(actual);

        if (y != NULL)
            printf("%s", y);
        free(y);
    }
    for (size_t i = 0; i < n && reps != NULL; i++)
        workload_report_release(&reps[i]);
    free(reps);
    free(r.buf);
    json_decref(inputs);
    json_decref(actual);
    json_decref(expected);
}

/* ---- the test file's own shape, with positions ---------------------- */

/*
 * Before anything runs, the test file itself is checked against its
 * schema with line:column for each mistake, as `policy lint` checks a
 * policy: unknown keys (with a did-you-mean), expectations of the wrong
 * type ("mutated: yes" as a string), shmSize values that are not
 * quantities. A test that cannot fail because of a typo is worse than
 * none.
 */
struct tcheck {
    struct diags *d;
};

static void __attribute__((format(printf, 3, 4)))
terr(struct tcheck *t, const struct ynode *n, const char *fmt, ...)
{
    char msg[300];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    diags_add(t->d, DIAG_ERROR, n ? n->line : 0, n ? n->col : 0, "%s", msg);
}

/* The known key nearest to word (edit distance, a prefix counts as 1). */
static const char *
nearest_key(const char *word, const char *const *keys)
{
    const char *best = NULL;
    size_t bestd = strlen(word) / 3 + 2;

    for (size_t i = 0; keys[i] != NULL; i++) {
        size_t la = strlen(word), lb = strlen(keys[i]), d;

        if (la >= TEXT_DISTANCE_MAXLEN || lb >= TEXT_DISTANCE_MAXLEN)
            continue;
        d = text_edit_distance(word, keys[i]);
        if (la >= 3 && strncasecmp(word, keys[i], la < lb ? la : lb) == 0)
            d = 1;
        if (d < bestd) {
            bestd = d;
            best = keys[i];
        }
    }
    return best;
}

static void
tkeys(struct tcheck *t, const struct ynode *m, const char *const *keys,
      const char *where)
{
    for (size_t i = 0; i < m->n; i++) {
        const char *k = m->keys[i]->str;
        const char *near;
        bool known = false;

        for (size_t j = 0; keys[j] != NULL && !known; j++)
            known = strcmp(keys[j], k) == 0;
        if (known)
            continue;
        near = nearest_key(k, keys);
        if (near != NULL)
            terr(t, m->keys[i],
                 "unknown key \"%.60s\" in %s; did you mean "
                 "\"%s\"?",
                 k, where, near);
        else
            terr(t, m->keys[i], "unknown key \"%.60s\" in %s", k, where);
    }
}

static bool
is_plain(const struct ynode *n, const char *const *words)
{
    if (n->kind != YNODE_SCALAR || !n->plain)
        return false;
    for (size_t i = 0; words[i] != NULL; i++)
        if (strcmp(n->str, words[i]) == 0)
            return true;
    return false;
}

static const char *const yaml_true[] = {"true", "True", "TRUE", NULL};
static const char *const yaml_false[] = {"false", "False", "FALSE", NULL};

static void
tbool(struct tcheck *t, const struct ynode *n, const char *what)
{
    if (is_plain(n, yaml_true) || is_plain(n, yaml_false))
        return;
    if (n->kind == YNODE_SCALAR && !n->null_tag && !n->plain &&
        (strcmp(n->str, "true") == 0 || strcmp(n->str, "false") == 0))
        terr(t, n,
             "expect.%s must be true or false, got the string "
             "\"%s\"; drop the quotes",
             what, n->str);
    else if (n->kind == YNODE_SCALAR && !n->null_tag)
        terr(t, n, "expect.%s must be true or false, got %s\"%.40s\"", what,
             n->plain ? "" : "the string ", n->str);
    else
        terr(t, n, "expect.%s must be true or false, got %s", what,
             ynode_type_name(n));
}

/* A plain scalar YAML reads as a number (1, 2.5, 1e3, 0x1f). */
static bool
plain_number(const struct ynode *n)
{
    char *end;

    if (n->kind != YNODE_SCALAR || !n->plain || n->len == 0)
        return false;
    (void)strtod(n->str, &end);
    return *end == '\0';
}

static void
tstring(struct tcheck *t, const struct ynode *n, const char *what)
{
    if (n->kind == YNODE_SCALAR && !n->null_tag && !plain_number(n) &&
        !is_plain(n, yaml_true) && !is_plain(n, yaml_false))
        return;
    if (n->kind == YNODE_SCALAR && !n->null_tag)
        terr(t, n, "%s must be a string, got %s %s; write \"%s\" in quotes",
             what, plain_number(n) ? "the number" : "the boolean", n->str,
             n->str);
    else
        terr(t, n, "%s must be a string, got %s", what, ynode_type_name(n));
}

static void
tstring_list(struct tcheck *t, const struct ynode *n, const char *what)
{
    if (n->kind != YNODE_SEQ) {
        terr(t, n, "%s must be a list of strings, got %s", what,
             ynode_type_name(n));
        return;
    }
    for (size_t i = 0; i < n->n; i++)
        tstring(t, n->items[i], what);
}

static const char *const expect_status[] = {"patched", "unchanged", "skipped",
                                            "not_gpu", "error",     NULL};

static void
tcheck_expect(struct tcheck *t, const struct ynode *e)
{
    static const char *const expect_keys_[] = {
        "rule",         "mutated", "status",    "shmSize",  "warnings",
        "env",          "envSet",  "profile",   "watchdog", "memory",
        "capabilities", "hostIPC", "ringCheck", NULL};
    const struct ynode *v;

    if (e->kind != YNODE_MAP) {
        terr(t, e, "expect must be a mapping of assertions, got %s",
             ynode_type_name(e));
        return;
    }
    tkeys(t, e, expect_keys_, "expect");
    if ((v = ynode_get(e, "rule")) != NULL)
        tstring(t, v, "expect.rule");
    if ((v = ynode_get(e, "mutated")) != NULL)
        tbool(t, v, "mutated");
    if ((v = ynode_get(e, "hostIPC")) != NULL)
        tbool(t, v, "hostIPC");
    if ((v = ynode_get(e, "ringCheck")) != NULL)
        tbool(t, v, "ringCheck");
    if ((v = ynode_get(e, "watchdog")) != NULL)
        tbool(t, v, "watchdog");
    if ((v = ynode_get(e, "profile")) != NULL)
        tstring(t, v, "expect.profile");
    if ((v = ynode_get(e, "envSet")) != NULL)
        tstring_list(t, v, "expect.envSet");
    if ((v = ynode_get(e, "memory")) != NULL) {
        static const char *const mem_keys[] = {"limit", "request", NULL};

        if (v->kind != YNODE_MAP) {
            terr(t, v,
                 "expect.memory must be a mapping {limit, request} of "
                 "sizes or none, got %s",
                 ynode_type_name(v));
        } else {
            tkeys(t, v, mem_keys, "expect.memory");
            for (size_t i = 0; i < v->n; i++)
                tstring(t, v->items[i], "expect.memory value");
        }
    }
    if ((v = ynode_get(e, "status")) != NULL) {
        bool ok = false;

        for (size_t i = 0; v->kind == YNODE_SCALAR && expect_status[i]; i++)
            ok = ok || strcmp(v->str, expect_status[i]) == 0;
        if (!ok)
            terr(t, v,
                 "expect.status must be one of patched, unchanged, "
                 "skipped, not_gpu, error; got %s%.40s%s",
                 v->kind == YNODE_SCALAR ? "\"" : "",
                 v->kind == YNODE_SCALAR ? v->str : ynode_type_name(v),
                 v->kind == YNODE_SCALAR ? "\"" : "");
    }
    if ((v = ynode_get(e, "shmSize")) != NULL) {
        struct quantity q;
        struct ng_error qe;

        ng_error_clear(&qe);
        if (v->kind != YNODE_SCALAR || v->null_tag)
            terr(t, v,
                 "expect.shmSize must be a size such as 32Gi, or "
                 "none; got %s",
                 ynode_type_name(v));
        else if (strcmp(v->str, "none") != 0 &&
                 quantity_parse(v->str, v->len, &q, &qe) != 0)
            terr(t, v, "expect.shmSize: %s", qe.msg);
    }
    if ((v = ynode_get(e, "warnings")) != NULL)
        tstring_list(t, v, "expect.warnings");
    if ((v = ynode_get(e, "capabilities")) != NULL)
        tstring_list(t, v, "expect.capabilities");
    if ((v = ynode_get(e, "env")) != NULL) {
        if (v->kind != YNODE_MAP) {
            terr(t, v,
                 "expect.env must be a mapping NAME: value (null = "
                 "unset), got %s",
                 ynode_type_name(v));
        } else {
            for (size_t i = 0; i < v->n; i++)
                if (!v->items[i]->null_tag)
                    tstring(t, v->items[i], "expect.env value");
        }
    }
}

static void
tcheck_case(struct tcheck *t, const struct ynode *c)
{
    static const char *const case_keys_[] = {
        "name",   "namespace", "input",        "inputFile",
        "expect", "expected",  "expectedFile", NULL};
    const struct ynode *v;

    if (c->kind != YNODE_MAP) {
        terr(t, c, "a case must be a mapping, got %s", ynode_type_name(c));
        return;
    }
    tkeys(t, c, case_keys_, "a case");
    if ((v = ynode_get(c, "name")) != NULL)
        tstring(t, v, "name");
    if ((v = ynode_get(c, "namespace")) != NULL)
        tstring(t, v, "namespace");
    if ((v = ynode_get(c, "inputFile")) != NULL)
        tstring(t, v, "inputFile");
    if ((v = ynode_get(c, "expectedFile")) != NULL)
        tstring(t, v, "expectedFile");
    if ((v = ynode_get(c, "input")) != NULL && v->kind == YNODE_SCALAR)
        terr(t, v,
             "input must be an object (or a list of them), got %s; "
             "use inputFile for a path",
             ynode_type_name(v));
    if ((v = ynode_get(c, "expect")) != NULL)
        tcheck_expect(t, v);
}

/* Checks a test file's text; errors go to *d. */
static void
test_file_check(const char *buf, size_t len, struct diags *d)
{
    static const struct ytree_caps caps = {TEST_MAX_BYTES, 64, 200000, 64};
    static const char *const test_keys_[] = {"apiVersion", "kind",  "metadata",
                                             "policy",     "cases", NULL};
    struct tcheck t = {d};
    struct ytree *tree = ytree_parse(buf, len, &caps, d);

    if (tree == NULL)
        return;
    for (size_t i = 0; i < ytree_ndocs(tree); i++) {
        const struct ynode *doc = ytree_doc(tree, i);
        const struct ynode *cases;

        if (doc->kind != YNODE_MAP)
            continue; /* reported by the run, as before */
        tkeys(&t, doc, test_keys_, "the test");
        cases = ynode_get(doc, "cases");
        if (cases != NULL && cases->kind == YNODE_SEQ)
            for (size_t k = 0; k < cases->n; k++)
                tcheck_case(&t, cases->items[k]);
    }
    ytree_free(tree);
}

/* ---- one file ------------------------------------------------------- */

static const char *const test_keys[] = {"apiVersion", "kind",  "metadata",
                                        "policy",     "cases", NULL};

static struct policy *
test_policy_load(const char *file, const json_t *pv, struct reasons *r)
{
    struct ng_error e;
    struct policy *p = NULL;
    char path[4096], msg[700];

    ng_error_clear(&e);
    if (json_is_string(pv)) {
        relative_to(file, json_string_value(pv), path, sizeof(path));
        p = policy_load_file(path, &e);
        if (p == NULL && e.line > 0)
            reason(r, "policy: %s",
                   ng_error_format(&e, path, msg, sizeof(msg)));
        else if (p == NULL)
            reason(r, "policy: %s", e.msg);
    } else if (json_is_object(pv)) {
        json_t *one = json_pack("[O]", pv);
        char *text = one ? emit_yaml(one) : NULL;

        if (text != NULL)
            p = policy_load(text, strlen(text), file, &e);
        if (p == NULL)
            reason(r, "inline policy: %s", e.msg[0] ? e.msg : "out of memory");
        free(text);
        json_decref(one);
    } else {
        reason(r, "policy must be a file name or an inline policy mapping");
    }
    return p;
}

static void
run_file(struct run *run, const char *file)
{
    struct reasons r = {NULL, 0, NULL, 0};
    json_t *docs = NULL, *doc;
    size_t i;

    r.f = open_memstream(&r.buf, &r.len);
    {
        char *text;
        size_t len;
        struct ng_error e;
        struct diags d = {0};

        text = file_read(file, TEST_MAX_BYTES, &len, &e);
        if (text != NULL) {
            test_file_check(text, len, &d);
            free(text);
        }
        diags_sort(&d);
        for (size_t k = 0; k < d.n; k++)
            reason(&r, "%s:%d:%d: error: %s", file, d.v[k].line, d.v[k].col,
                   d.v[k].msg);
        if (d.n_errors > d.n)
            reason(&r, "... and %zu more errors", d.n_errors - d.n);
        diags_release(&d);
        if (r.n > 0)
            goto report;
    }
    docs = load_yaml_file(file, &r);
    json_array_foreach(docs, i, doc)
    {
        const char *kind = jstr(doc, "kind");
        const char *api = jstr(doc, "apiVersion");
        json_t *cases = json_object_get(doc, "cases");
        struct policy *pol;
        size_t k;
        json_t *c;

        if (!json_is_object(doc) || kind == NULL ||
            strcmp(kind, "PolicyTest") != 0 || api == NULL ||
            strcmp(api, "ncclguard.io/v1alpha1") != 0) {
            reason(&r,
                   "document %zu: expected apiVersion: "
                   "ncclguard.io/v1alpha1 and kind: PolicyTest",
                   i + 1);
            continue;
        }
        if (check_keys(doc, test_keys, "test", &r) != 0)
            continue;
        if (!json_is_array(cases) || json_array_size(cases) == 0) {
            reason(&r, "document %zu: cases must be a non-empty list", i + 1);
            continue;
        }
        pol = test_policy_load(file, json_object_get(doc, "policy"), &r);
        if (pol == NULL)
            continue;
        json_array_foreach(cases, k, c) run_case(run, file, c, k, pol);
        policy_free(pol);
    }
    if (docs != NULL && json_array_size(docs) == 0)
        reason(&r, "no PolicyTest document");
report:
    if (r.f != NULL)
        fclose(r.f);
    if (r.n > 0) {
        run->failed++;
        printf("FAIL %s: invalid test file\n%s", file, r.buf ? r.buf : "");
    }
    free(r.buf);
    json_decref(docs);
}

int
policytest_main(int argc, char **argv)
{
    struct run run = {0, 0, 0};
    struct files fs = {NULL, 0};
    int rc = 0;

    for (int i = 0; i < argc; i++) {
        struct stat st;

        if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--verbose") == 0) {
            run.verbose = 1;
            continue;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: ncclguard policy test [-v] DIR|FILE...\n"
                   "Runs every *.test.yaml under each DIR, and each FILE "
                   "(kind: PolicyTest),\nthrough the webhook's mutation; "
                   "-v prints the mutated objects of passing\ncases. Exit 1 "
                   "on any failure, 2 on a usage error.\n");
            return 0;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "ncclguard policy test: unknown option %s\n",
                    argv[i]);
            rc = 2;
            goto done;
        }
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "ncclguard policy test: %s: %s\n", argv[i],
                    strerror(errno));
            rc = 2;
            goto done;
        }
        if (S_ISDIR(st.st_mode) ? files_walk(&fs, argv[i], 0)
                                : files_add(&fs, argv[i])) {
            rc = 2;
            goto done;
        }
    }
    if (fs.n == 0) {
        fprintf(stderr, "usage: ncclguard policy test [-v] DIR|FILE...\n%s",
                argc > 0 ? "no *.test.yaml files found\n" : "");
        rc = 2;
        goto done;
    }
    for (size_t i = 0; i < fs.n; i++)
        run_file(&run, fs.v[i]);
    printf("%zu passed, %zu failed\n", run.passed, run.failed);
    rc = run.failed ? 1 : 0;
done:
    for (size_t i = 0; i < fs.n; i++)
        free(fs.v[i]);
    free(fs.v);
    return rc;
}
