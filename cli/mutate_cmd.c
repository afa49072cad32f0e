/* ncclguard mutate: the dry run. Reads manifests, sends every pod
 * (template) through the admission core as the AdmissionReview the
 * apiserver would send (see cli/workload.h), writes the result. */
#include "cli/cmd.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admission/mutate.h"
#include "base/file.h"
#include "cli/workload.h"
#include "cli/yamljson.h"
#include "policy/policy.h"

/* Largest manifest read, in bytes. */
#define MUTATE_CMD_MAX_INPUT (32u << 20)

enum output { OUT_YAML, OUT_JSON, OUT_PATCH, OUT_REVIEW, OUT_JSONPATCH };

struct cmd {
    const char *file;
    const char *name; /* for messages: the file, or <stdin> */
    const char *policy_file;
    const char *default_ns;
    enum output output;
    bool quiet;
    struct mutate_options mopt;
};

static void
usage(FILE *out)
{
    fprintf(
        out,
        "usage: ncclguard mutate [--policy FILE] [--namespace NS] "
        "[-o yaml|json|patch|review|jsonpatch] FILE|-\n"
        "\n"
        "Shows what the webhook does to the pods in FILE (a Pod, an\n"
        "AdmissionReview, or any workload with pod templates; YAML or\n"
        "JSON, several documents allowed). Warnings go to stderr.\n"
        "\n"
        "  --policy FILE      policy to apply (default: $NCCLGUARD_POLICY,\n"
        "                     else /etc/ncclguard/policy.yaml, else\n"
        "                     policy/default.yaml, else built-in defaults)\n"
        "  --namespace NS     namespace of objects that name none\n"
        "                     (default: default, as the apiserver)\n"
        "  --webhook-namespace NS\n"
        "                     the webhook's own namespace, skipped as the\n"
        "                     server skips it (default: $POD_NAMESPACE)\n"
        "  -o, --output FMT   yaml (default): the mutated objects\n"
        "                     json: the same as JSON (a List when several)\n"
        "                     patch: per pod, the JSON patch the server sends\n"
        "                     review: per pod, the AdmissionReview the\n"
        "                     apiserver would send, one per line\n"
        "                     jsonpatch: per pod, one line: the JSON patch\n"
        "                     byte for byte as the server sends it before\n"
        "                     base64 (an empty line when it sends none)\n"
        "  -q, --quiet        no per-pod summary lines on stderr\n"
        "\n"
        "Exit status: 0 done, 1 unreadable input or policy, 2 usage.\n");
}

static int
args_parse(struct cmd *c, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"policy", required_argument, NULL, 'p'},
        {"namespace", required_argument, NULL, 'n'},
        {"webhook-namespace", required_argument, NULL, 'w'},
        {"output", required_argument, NULL, 'o'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;

    c->mopt.own_namespace = getenv("POD_NAMESPACE");
    optind = 1;
    while ((ch = getopt_long(argc, argv, "p:n:o:qh", longopts, NULL)) != -1) {
        switch (ch) {
        case 'p':
            c->policy_file = optarg;
            break;
        case 'n':
            c->default_ns = optarg;
            break;
        case 'w':
            c->mopt.own_namespace = optarg;
            break;
        case 'o':
            if (strcmp(optarg, "yaml") == 0)
                c->output = OUT_YAML;
            else if (strcmp(optarg, "json") == 0)
                c->output = OUT_JSON;
            else if (strcmp(optarg, "patch") == 0)
                c->output = OUT_PATCH;
            else if (strcmp(optarg, "review") == 0)
                c->output = OUT_REVIEW;
            else if (strcmp(optarg, "jsonpatch") == 0)
                c->output = OUT_JSONPATCH;
            else {
                fprintf(stderr,
                        "ncclguard mutate: unknown output format '%s' "
                        "(yaml, json, patch, review or jsonpatch)\n",
                        optarg);
                return 2;
            }
            break;
        case 'q':
            c->quiet = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "ncclguard mutate: %s\n",
                optind >= argc ? "missing FILE (use - for stdin)"
                               : "more than one FILE given");
        usage(stderr);
        return 2;
    }
    c->file = argv[optind];
    c->name = strcmp(c->file, "-") == 0 ? "<stdin>" : c->file;
    return -1;
}

static struct policy *
policy_open(const struct cmd *c)
{
    const char *path = c->policy_file;
    struct ng_error err;
    struct policy *pol;
    char msg[700];

    if (path == NULL)
        path = getenv("NCCLGUARD_POLICY");
    if (path == NULL || path[0] == '\0') {
        static const char builtin[] = "apiVersion: ncclguard.io/v1alpha1\n"
                                      "kind: Policy\n";

        if (access("/etc/ncclguard/policy.yaml", R_OK) == 0) {
            path = "/etc/ncclguard/policy.yaml";
        } else if (access("policy/default.yaml", R_OK) == 0) {
            path = "policy/default.yaml";
        } else {
            /* Every setting has a built-in default, the values
             * policy/default.yaml spells out. */
            if (!c->quiet)
                fprintf(stderr, "ncclguard mutate: no policy file given or "
                                "found; using the built-in defaults\n");
            ng_error_clear(&err);
            pol = policy_load(builtin, sizeof(builtin) - 1, "built-in", &err);
            if (pol == NULL)
                fprintf(stderr, "ncclguard mutate: built-in policy: %s\n",
                        err.msg);
            return pol;
        }
    }
    ng_error_clear(&err);
    pol = policy_load_file(path, &err);
    if (pol == NULL)
        fprintf(stderr, "ncclguard mutate: %s\n",
                ng_error_format(&err, path, msg, sizeof(msg)));
    return pol;
}

static const char *
doc_name(const json_t *doc)
{
    return workload_object_name(doc);
}

static const char *
doc_kind(const json_t *doc)
{
    const char *k = json_string_value(json_object_get(doc, "kind"));

    return k != NULL ? k : "object";
}

static bool
doc_holds_template(const json_t *doc)
{
    const char *k = json_string_value(json_object_get(doc, "kind"));

    return k != NULL && strcmp(k, "Pod") != 0 &&
           strcmp(k, "AdmissionReview") != 0 && strcmp(k, "List") != 0;
}

/*
 * Where a pod is, for messages: "FILE: document N: KIND NAME POINTER",
 * leaving out what is empty. An item of a List is named by its own kind
 * and name ("Pod a (List /items/0)").
 */
static void
pod_label(const struct cmd *c, size_t d, const json_t *doc, const char *pointer,
          char *buf, size_t n)
{
    const char *kind = doc_kind(doc), *name = doc_name(doc);
    unsigned long item;
    char *end;

    if (strcmp(kind, "List") == 0 && strncmp(pointer, "/items/", 7) == 0) {
        item = strtoul(pointer + 7, &end, 10);
        if (end != pointer + 7 && (*end == '\0' || *end == '/')) {
            const json_t *it =
                json_array_get(json_object_get(doc, "items"), item);

            if (json_is_object(it)) {
                kind = doc_kind(it);
                name = doc_name(it);
            }
        }
    }
    snprintf(buf, n, "%s: document %zu: %s%s%s%s%s%s%s", c->name, d + 1, kind,
             name[0] ? " " : "", name, pointer[0] ? " " : "",
             strcmp(kind, doc_kind(doc)) != 0 ? "(List " : "", pointer,
             strcmp(kind, doc_kind(doc)) != 0 ? ")" : "");
}

static void
report_print(const struct cmd *c, size_t d, const json_t *doc,
             const struct workload_pod *wp)
{
    const struct mutate_result *r = &wp->result;
    size_t i;
    json_t *w;
    char what[256] = "", where[900];

    pod_label(c, d, doc, wp->pointer, where, sizeof(where));
    json_array_foreach(r->warnings, i, w)
        fprintf(stderr, "%s: %s\n", where, json_string_value(w));
    if (wp->derived != NULL)
        fprintf(stderr,
                "%s: no pod template here; the webhook will see the pods "
                "%s creates from this and mutate them then; for a pod "
                "with these containers:\n",
                where,
                wp->controller != NULL ? wp->controller : "a controller");
    if (c->quiet)
        return;
    json_array_foreach(r->injected, i, w)
    {
        size_t len = strlen(what);

        snprintf(what + len, sizeof(what) - len, "%s%s", len ? "," : "",
                 json_string_value(w));
    }
    fprintf(stderr, "%s: %s (%lld GPU%s, rule %s)%s%s%s%s%s%s\n", where,
            mutate_status_name(r->status), (long long)r->gpus,
            r->gpus == 1 ? "" : "s", r->rule, what[0] ? ": " : "", what,
            r->reason[0] ? ": " : "", r->reason,
            r->ringcheck[0] ? "; ring check: " : "", r->ringcheck);
}

/* An object that asks for GPUs but holds no pod template ncclguard can
 * read: say so, with the paths, rather than print nothing. */
static void
gpu_paths_print(const struct cmd *c, size_t d, const json_t *doc,
                const struct workload_report *rep)
{
    char where[900];

    if (rep->n_gpu_paths == 0)
        return;
    pod_label(c, d, doc, "", where, sizeof(where));
    fprintf(stderr,
            "%s: asks for GPUs at %s%s%s but holds no pod template "
            "ncclguard can read; nothing changed here: the webhook will "
            "see the pods its controller creates and mutate them then "
            "(to see how, run ncclguard mutate on one of them: kubectl get "
            "pod NAME -o yaml)\n",
            where, rep->gpu_paths[0], rep->n_gpu_paths > 1 ? " and " : "",
            rep->n_gpu_paths > 1 ? "more:" : "");
    for (size_t i = 1; i < rep->n_gpu_paths; i++)
        fprintf(stderr, "%s:   also %s\n", where, rep->gpu_paths[i]);
    if (rep->gpu_paths_truncated)
        fprintf(stderr, "%s:   and more (first %d shown)\n", where,
                WORKLOAD_MAX_GPU_PATHS);
}

static json_t *
patch_entry(size_t d, const json_t *doc, const struct workload_pod *wp)
{
    const struct mutate_result *r = &wp->result;
    json_t *e = json_pack(
        "{s:I, s:s, s:s, s:s, s:s, s:s, s:I, s:O, s:O, s:O}", "document",
        (json_int_t)(d + 1), "kind", doc_kind(doc), "name", doc_name(doc),
        "pointer", wp->pointer, "result", mutate_status_name(r->status), "rule",
        r->rule, "gpus", (json_int_t)r->gpus, "patch", r->patch, "warnings",
        r->warnings, "injected", r->injected);

    if (e != NULL &&
        (json_object_set_new(e, "ringCheck", json_string(r->ringcheck)) != 0 ||
         json_object_set_new(e, "multiNode", json_boolean(r->multinode)) !=
             0)) {
        json_decref(e);
        return NULL;
    }
    /* A derived pod's patch applies to that pod, not to this object. */
    if (e != NULL && wp->derived != NULL &&
        (json_object_set(e, "derivedPod", wp->derived) != 0 ||
         json_object_set_new(
             e, "controller",
             json_string(wp->controller ? wp->controller : "")) != 0)) {
        json_decref(e);
        return NULL;
    }
    return e;
}

static int
write_json(const json_t *v, size_t flags)
{
    if (json_dumpf(v, stdout, flags) != 0)
        return -1;
    return fputc('\n', stdout) == EOF ? -1 : 0;
}

int
cmd_mutate(int argc, char **argv)
{
    struct cmd c;
    struct policy *pol = NULL;
    char *buf = NULL;
    size_t len = 0;
    json_t *docs = NULL, *dupes = NULL, *out = NULL;
    struct ng_error err;
    char msg[700];
    int rc = 1, a;
    size_t d;
    json_t *doc;

    memset(&c, 0, sizeof(c));
    a = args_parse(&c, argc, argv);
    if (a >= 0)
        return a;
    ng_error_clear(&err);
    if (strcmp(c.file, "-") == 0)
        buf = file_read_fd(STDIN_FILENO, c.name, MUTATE_CMD_MAX_INPUT, &len,
                           &err);
    else
        buf = file_read(c.file, MUTATE_CMD_MAX_INPUT, &len, &err);
    if (buf == NULL) {
        fprintf(stderr, "ncclguard mutate: %s\n", err.msg);
        goto done;
    }
    ng_error_clear(&err);
    docs = yamljson_load(buf, len, c.name, &dupes, &err);
    if (docs == NULL) {
        fprintf(stderr, "ncclguard mutate: %s\n",
                ng_error_format(&err, c.name, msg, sizeof(msg)));
        goto done;
    }
    json_array_foreach(dupes, d, doc)
        fprintf(stderr, "ncclguard mutate: %s\n", json_string_value(doc));
    pol = policy_open(&c);
    if (pol == NULL)
        goto done;
    out = json_array();
    if (out == NULL)
        goto done;

    json_array_foreach(docs, d, doc)
    {
        struct workload_report rep;
        const char *ns = json_string_value(
            json_object_get(json_object_get(doc, "metadata"), "namespace"));

        if (!json_is_object(doc)) {
            fprintf(stderr,
                    "ncclguard mutate: %s: document %zu is not an "
                    "object; written back unchanged\n",
                    c.name, d + 1);
            continue;
        }
        /* A workload's template stands for the pods its operator makes;
         * a Pod or an AdmissionReview is the pod itself. */
        c.mopt.workload = doc_holds_template(doc) ? doc : NULL;
        if (workload_mutate_document(doc, d, ns != NULL ? NULL : c.default_ns,
                                     pol, &c.mopt, &rep) != 0) {
            fprintf(stderr, "ncclguard mutate: out of memory\n");
            goto done;
        }
        for (size_t i = 0; i < rep.n_pods; i++) {
            const struct workload_pod *wp = &rep.pods[i];
            json_t *e = NULL;

            report_print(&c, d, doc, wp);
            if (c.output == OUT_PATCH)
                e = patch_entry(d, doc, wp);
            else if (c.output == OUT_REVIEW)
                e = json_incref(wp->review);
            else if (c.output == OUT_JSONPATCH)
                e = json_stringn(
                    wp->result.patch_text != NULL ? wp->result.patch_text : "",
                    wp->result.patch_len);
            if (e != NULL && json_array_append_new(out, e) != 0) {
                workload_report_release(&rep);
                goto done;
            }
        }
        gpu_paths_print(&c, d, doc, &rep);
        workload_report_release(&rep);
    }
    /* Reviews are JSON lines: one AdmissionReview per pod, which is what
     * the server takes per request. */
    if (c.output == OUT_REVIEW && json_array_size(out) > 1)
        fprintf(stderr,
                "ncclguard mutate: %zu reviews, one per line; post each on "
                "its own (for example: while read -r r; do printf '%%s' "
                "\"$r\" | curl ... --data-binary @- URL; done)\n",
                json_array_size(out));

    switch (c.output) {
    case OUT_YAML:
        if (yamljson_emit(docs, stdout) != 0)
            goto write_fail;
        break;
    case OUT_JSON:
        if (json_array_size(docs) == 1) {
            a = write_json(json_array_get(docs, 0), JSON_INDENT(2));
        } else {
            json_t *list = json_pack("{s:s, s:s, s:O}", "apiVersion", "v1",
                                     "kind", "List", "items", docs);

            a = list != NULL ? write_json(list, JSON_INDENT(2)) : -1;
            json_decref(list);
        }
        if (a != 0)
            goto write_fail;
        break;
    case OUT_PATCH:
        if (write_json(out, JSON_INDENT(2)) != 0)
            goto write_fail;
        break;
    case OUT_REVIEW:
        json_array_foreach(out, d, doc)
        {
            if (write_json(doc, JSON_COMPACT) != 0)
                goto write_fail;
        }
        break;
    case OUT_JSONPATCH:
        /* The core's own bytes, not re-encoded: what the server's
         * response carries base64-encoded. */
        json_array_foreach(out, d, doc)
        {
            if (fwrite(json_string_value(doc), 1, json_string_length(doc),
                       stdout) != json_string_length(doc) ||
                fputc('\n', stdout) == EOF)
                goto write_fail;
        }
        break;
    }
    if (fflush(stdout) != 0)
        goto write_fail;
    rc = 0;
    goto done;
write_fail:
    fprintf(stderr, "ncclguard mutate: cannot write output: %s\n",
            strerror(errno));
done:
    free(buf);
    json_decref(docs);
    json_decref(dupes);
    json_decref(out);
    policy_free(pol);
    return rc;
}
