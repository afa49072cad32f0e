/* ncclguard policy lint | test: the policy authors' command line. */
#include "cli/cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "cli/policytest.h"
#include "contract/ncclenv.h"
#include "contract/profile_marker.h"
#include "policy/diag.h"
#include "policy/policy.h"
#include "policy/ytree.h"

/* ConfigMap profiles are small; this bounds what lint reads. */
#define PROFILE_MAX_BYTES (1024 * 1024)

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: ncclguard policy lint [--profile CONFIGMAP.yaml] "
            "[POLICY.yaml...]\n"
            "       ncclguard policy test [-v] DIR|FILE...\n"
            "\n"
            "lint   checks policy files (structure, types, quantities, "
            "globs, rule\n"
            "       order, NCCL variables in extraEnv) and, with --profile, "
            "the NCCL\n"
            "       variables of a ConfigMap profile against the NCCL %s "
            "catalog.\n"
            "       Prints FILE:LINE:COL: error|warning: MESSAGE. Exit 1 on "
            "any\n"
            "       error, 0 when there are only warnings.\n"
            "test   runs policy test files (every *.test.yaml under each "
            "DIR, and each\n"
            "       FILE; kind: PolicyTest) through the webhook's mutation "
            "and\n"
            "       compares the results; exit 1 on any failure.\n"
            "\n"
            "Exit 2 on a usage error.\n",
            ncclenv_catalog_version());
}

static void
print_diags(const char *file, const struct diags *d)
{
    for (size_t i = 0; i < d->n; i++) {
        const struct diag *g = &d->v[i];
        const char *sev = g->severity == DIAG_ERROR ? "error" : "warning";

        if (g->line > 0)
            printf("%s:%d:%d: %s: %s\n", file, g->line, g->col, sev, g->msg);
        else
            printf("%s: %s: %s\n", file, sev, g->msg);
    }
    if (d->n_errors + d->n_warnings > d->n)
        printf("%s: note: %zu more diagnostics not shown\n", file,
               d->n_errors + d->n_warnings - d->n);
}

/* The profile names the policies on the command line expect (their
 * defaults' profile.name), or the built-in default's when none is given. */
#define LINT_MAX_NAMES 16
struct profile_names {
    char *name[LINT_MAX_NAMES];
    size_t n;
};

static void
profile_names_add(struct profile_names *pn, const char *name)
{
    if (name == NULL || pn->n >= LINT_MAX_NAMES)
        return;
    for (size_t i = 0; i < pn->n; i++)
        if (strcmp(pn->name[i], name) == 0)
            return;
    pn->name[pn->n] = strdup(name);
    if (pn->name[pn->n] != NULL)
        pn->n++;
}

static void
lint_policy(const char *file, struct profile_names *pn, size_t *errors,
            size_t *warnings)
{
    struct diags d = {0};
    struct ng_error e;
    struct policy *p;
    char *buf;
    size_t len;

    buf = file_read(file, 1024 * 1024, &len, &e);
    if (buf == NULL) {
        printf("%s: error: %s\n", file, e.msg);
        (*errors)++;
        return;
    }
    p = policy_check(buf, len, &d);
    if (p != NULL && policy_defaults(p)->profile.enabled)
        profile_names_add(pn, policy_defaults(p)->profile.name);
    policy_free(p);
    free(buf);
    print_diags(file, &d);
    *errors += d.n_errors;
    *warnings += d.n_warnings;
    diags_release(&d);
}

/*
 * The profile's name and marker: metadata.name must be a name a policy
 * injects (else no pod ever loads this ConfigMap), and data should hold
 * PROFILE_MARKER_KEY with that name, so that the ring check can tell
 * that the profile reached the pod (contract/profile_marker.h).
 */
static void
lint_profile_name(const struct ynode *doc, const struct ynode *data,
                  const struct profile_names *pn, struct diags *d)
{
    const struct ynode *nm = ynode_get(ynode_get(doc, "metadata"), "name");
    const struct ynode *mk =
        data != NULL ? ynode_get(data, PROFILE_MARKER_KEY) : NULL;
    bool known = false;

    if (nm == NULL || nm->kind != YNODE_SCALAR) {
        diags_add(d, DIAG_ERROR, doc->line, doc->col,
                  "the profile ConfigMap has no metadata.name");
        return;
    }
    for (size_t i = 0; i < pn->n; i++)
        known = known || strcmp(pn->name[i], nm->str) == 0;
    if (!known && pn->n > 0)
        diags_add(d, DIAG_ERROR, nm->line, nm->col,
                  "ConfigMap \"%.60s\" is not the policy's profile.name "
                  "\"%.60s\": pods load only that one",
                  nm->str, pn->name[0]);
    if (mk == NULL)
        diags_add(d, DIAG_WARNING, nm->line, nm->col,
                  "no data key " PROFILE_MARKER_KEY ": add " PROFILE_MARKER_KEY
                  ": \"%.60s\" so that the ring check can tell the profile "
                  "reached the pod",
                  nm->str);
    else if (mk->kind != YNODE_SCALAR || strcmp(mk->str, nm->str) != 0)
        diags_add(d, DIAG_ERROR, mk->line, mk->col,
                  PROFILE_MARKER_KEY " must be the ConfigMap's own name "
                                     "\"%.60s\"",
                  nm->str);
}

/* Checks one ConfigMap's data against the NCCL catalog. */
static void
lint_configmap(const struct ynode *doc, const struct profile_names *pn,
               struct diags *d)
{
    const struct ynode *kind = ynode_get(doc, "kind");
    const struct ynode *data = ynode_get(doc, "data");

    if (doc->kind != YNODE_MAP || kind == NULL || kind->kind != YNODE_SCALAR ||
        strcmp(kind->str, "ConfigMap") != 0) {
        diags_add(d, DIAG_ERROR, doc->line, doc->col,
                  "a profile must be a ConfigMap (kind: ConfigMap)");
        return;
    }
    if (data != NULL && data->kind != YNODE_MAP) {
        diags_add(d, DIAG_ERROR, data->line, data->col,
                  "ConfigMap data must be a mapping");
        return;
    }
    lint_profile_name(doc, data, pn, d);
    if (data == NULL)
        return;
    for (size_t i = 0; i < data->n; i++) {
        const struct ynode *k = data->keys[i], *v = data->items[i];
        struct ncclenv_finding f;

        if (k->kind != YNODE_SCALAR || v->kind != YNODE_SCALAR) {
            diags_add(d, DIAG_ERROR, v->line, v->col,
                      "ConfigMap data values must be strings");
            continue;
        }
        if (v->plain && !v->null_tag &&
            strcmp(ynode_type_name(v), "a string") != 0) {
            /* Kubernetes rejects non-string data values. */
            diags_add(d, DIAG_ERROR, v->line, v->col,
                      "%.80s: ConfigMap data values must be strings; "
                      "write \"%.40s\" in quotes",
                      k->str, v->str);
            continue;
        }
        if (strcmp(k->str, PROFILE_MARKER_KEY) == 0)
            continue; /* ours, checked above */
        switch (ncclenv_check(k->str, v->str, &f)) {
        case NCCLENV_OK:
            break;
        case NCCLENV_WARNING:
            diags_add(d, DIAG_WARNING, k->line, k->col, "%s", f.msg);
            break;
        case NCCLENV_ERROR:
            diags_add(d, DIAG_ERROR, k->line, k->col, "%s", f.msg);
            break;
        }
    }
}

static void
lint_profile(const char *file, const struct profile_names *pn, size_t *errors,
             size_t *warnings)
{
    static const struct ytree_caps caps = {PROFILE_MAX_BYTES, 32, 50000, 64};
    struct diags d = {0};
    struct ng_error e;
    struct ytree *t;
    char *buf;
    size_t len;

    buf = file_read(file, PROFILE_MAX_BYTES, &len, &e);
    if (buf == NULL) {
        printf("%s: error: %s\n", file, e.msg);
        (*errors)++;
        return;
    }
    t = ytree_parse(buf, len, &caps, &d);
    free(buf);
    if (t != NULL) {
        if (ytree_ndocs(t) == 0)
            diags_add(&d, DIAG_ERROR, 0, 0, "no ConfigMap in the file");
        for (size_t i = 0; i < ytree_ndocs(t); i++)
            lint_configmap(ytree_doc(t, i), pn, &d);
        ytree_free(t);
    }
    diags_sort(&d);
    print_diags(file, &d);
    *errors += d.n_errors;
    *warnings += d.n_warnings;
    diags_release(&d);
}

/* The built-in default policy's profile name, for --profile without a
 * policy file. */
static void
profile_names_builtin(struct profile_names *pn)
{
    static const char text[] = "apiVersion: ncclguard.io/v1alpha1\n"
                               "kind: Policy\n";
    struct diags d = {0};
    struct policy *p = policy_check(text, sizeof(text) - 1, &d);

    if (p != NULL)
        profile_names_add(pn, policy_defaults(p)->profile.name);
    policy_free(p);
    diags_release(&d);
}

static int
cmd_policy_lint(int argc, char **argv)
{
    size_t errors = 0, warnings = 0, files = 0;
    struct profile_names pn = {{NULL}, 0};
    int rc;

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
    }
    /* Two passes: the policies first, so that each --profile is checked
     * against the profile names they inject, whatever the order. */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && pn.n == 0)
            profile_names_builtin(&pn);
        for (int i = 0; i < argc; i++) {
            if (strcmp(argv[i], "--profile") == 0 ||
                strncmp(argv[i], "--profile=", 10) == 0) {
                const char *f = argv[i][9] == '=' ? argv[i] + 10 : NULL;

                if (f == NULL) {
                    if (i + 1 >= argc) {
                        fprintf(stderr, "ncclguard policy lint: --profile "
                                        "needs a file\n");
                        rc = 2;
                        goto done;
                    }
                    f = argv[++i];
                }
                if (pass == 1) {
                    lint_profile(f, &pn, &errors, &warnings);
                    files++;
                }
            } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
                fprintf(stderr, "ncclguard policy lint: unknown option %s\n",
                        argv[i]);
                usage(stderr);
                rc = 2;
                goto done;
            } else if (pass == 0) {
                lint_policy(argv[i], &pn, &errors, &warnings);
                files++;
            }
        }
    }
    if (files == 0) {
        fprintf(stderr, "ncclguard policy lint: no file given: name one or "
                        "more policy files (or --profile FILE)\n");
        usage(stderr);
        rc = 2;
        goto done;
    }
    printf("%zu error%s, %zu warning%s\n", errors, errors == 1 ? "" : "s",
           warnings, warnings == 1 ? "" : "s");
    rc = errors ? 1 : 0;
done:
    for (size_t i = 0; i < pn.n; i++)
        free(pn.name[i]);
    return rc;
}

int
cmd_policy(int argc, char **argv)
{
    /* argv[0] is "policy". */
    if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "lint") == 0)
        return cmd_policy_lint(argc - 2, argv + 2);
    if (strcmp(argv[1], "test") == 0)
        return policytest_main(argc - 2, argv + 2);
    fprintf(stderr, "ncclguard policy: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
