/* Unit tests for the policy (policy/policy.c, schema.c, decide.c): loading,
 * defaults, rules, the merge, decisions with annotation overrides, and lint
 * diagnostics. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "policy/policy.h"

#define HEAD "apiVersion: ncclguard.io/v1alpha1\nkind: Policy\n"

static struct policy *
load(const char *text, struct ng_error *e)
{
    ng_error_clear(e);
    return policy_load(text, strlen(text), "test.yaml", e);
}

/* Loads text that must fail; checks the first error's place and text. */
static void
expect_error(const char *text, int line, int col, const char *needle)
{
    struct ng_error e;
    struct policy *p = load(text, &e);

    CHECK(p == NULL);
    policy_free(p);
    if (strstr(e.msg, needle) == NULL || e.line != line || e.col != col)
        fprintf(stderr, "want %d:%d \"%s\", got %d:%d \"%s\"\n", line, col,
                needle, e.line, e.col, e.msg);
    CHECK_INT(e.line, line);
    CHECK_INT(e.col, col);
    CHECK(strstr(e.msg, needle) != NULL);
}

/* Counts the diagnostics of text whose message contains needle. */
static size_t
count_diags(const char *text, enum diag_severity sev, const char *needle)
{
    struct diags d = {0};
    struct policy *p = policy_check(text, strlen(text), &d);
    size_t n = 0;

    for (size_t i = 0; i < d.n; i++)
        if (d.v[i].severity == sev && strstr(d.v[i].msg, needle) != NULL)
            n++;
    policy_free(p);
    diags_release(&d);
    return n;
}

static void
test_defaults(void)
{
    struct ng_error e;
    struct policy *p, *q;
    const struct settings *s, *t;

    p = load(HEAD, &e);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    s = policy_defaults(p);
    CHECK_INT(s->n_gpu_resources, 1);
    CHECK_STR(s->gpu_resources[0], "nvidia.com/gpu");
    CHECK(s->profile.enabled && s->profile.optional);
    CHECK_STR(s->profile.name, "nccl-production-profile");
    CHECK(s->shm.enabled);
    CHECK_INT(s->shm.per_gpu, 4LL << 30);
    CHECK_INT(s->shm.min, 1LL << 30);
    CHECK_INT(s->shm.max, 64LL << 30);
    CHECK_INT(s->shm.existing, SHM_EXISTING_KEEP);
    CHECK_INT(s->shm.memory_limit, SHM_MEMLIMIT_WARN);
    CHECK_INT(s->ipc.n_capabilities, 0);
    CHECK(!s->ipc.host_ipc);
    CHECK(s->ringcheck.enabled);
    CHECK_STR(s->ringcheck.image,
              "ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0");
    CHECK_INT(s->ringcheck.timeout_seconds, 120);
    CHECK_INT(s->ringcheck.bandwidth_bytes, 256LL << 20);
    CHECK_INT(s->ringcheck.mode, RINGCHECK_MODE_PROCESS);
    CHECK_INT(s->ringcheck.on_failure, RINGCHECK_FALLBACK);
    CHECK(s->ringcheck.min_busbw_gbps == 0);
    CHECK(s->ringcheck.allow_opt_out);
    CHECK_STR(s->ringcheck.cpu_request, "250m");
    CHECK_STR(s->ringcheck.memory_request, "2Gi");
    CHECK_INT(s->ringcheck.min_gpus, 2);
    CHECK_INT(s->ringcheck.multi_node, RINGCHECK_MULTINODE_AUTO);
    CHECK_INT(s->ringcheck.rendezvous_port, 29450);
    CHECK_INT(s->ringcheck.multi_node_timeout, 300);
    CHECK_INT(s->ringcheck.on_missing, RINGCHECK_MISSING_WARN);
    CHECK(s->ringcheck.min_net_busbw_gbps == 0);
    CHECK(s->ringcheck.leader_address == NULL);
    CHECK_STR(s->ringcheck.nodes, "{annotation:ncclguard.io/nodes}");
    CHECK_INT(s->n_extra_env, 0);
    CHECK(s->debug.allow_annotation);
    CHECK_STR(s->debug.level, "INFO");
    CHECK_STR(s->debug.subsys, "INIT,COLL,ENV,NET");
    CHECK_INT(policy_rule_count(p), 0);

    /* policy/default.yaml spells out exactly the built-in values. */
    q = policy_load_file("policy/default.yaml", &e);
    CHECK(q != NULL);
    if (q != NULL) {
        t = policy_defaults(q);
        CHECK_STR(t->gpu_resources[0], s->gpu_resources[0]);
        CHECK_STR(t->profile.name, s->profile.name);
        CHECK_INT(t->shm.per_gpu, s->shm.per_gpu);
        CHECK_INT(t->shm.min, s->shm.min);
        CHECK_INT(t->shm.max, s->shm.max);
        CHECK_INT(t->shm.existing, s->shm.existing);
        CHECK_INT(t->shm.memory_limit, s->shm.memory_limit);
        CHECK_INT(t->ipc.n_capabilities, 0);
        CHECK_INT(t->ipc.host_ipc, 0);
        CHECK_STR(t->ringcheck.image, s->ringcheck.image);
        CHECK_INT(t->ringcheck.timeout_seconds, 120);
        CHECK_INT(t->ringcheck.bandwidth_bytes, s->ringcheck.bandwidth_bytes);
        CHECK_INT(t->ringcheck.on_failure, s->ringcheck.on_failure);
        CHECK_INT(t->ringcheck.allow_opt_out, 1);
        CHECK_STR(t->ringcheck.cpu_request, "250m");
        CHECK_STR(t->ringcheck.memory_request, "2Gi");
        CHECK_INT(t->ringcheck.min_gpus, s->ringcheck.min_gpus);
        CHECK_INT(t->ringcheck.multi_node, s->ringcheck.multi_node);
        CHECK_INT(t->ringcheck.rendezvous_port, s->ringcheck.rendezvous_port);
        CHECK_INT(t->ringcheck.multi_node_timeout,
                  s->ringcheck.multi_node_timeout);
        CHECK_INT(t->ringcheck.on_missing, s->ringcheck.on_missing);
        CHECK(t->ringcheck.leader_address == NULL);
        CHECK_STR(t->ringcheck.nodes, s->ringcheck.nodes);
        CHECK_STR(t->debug.level, "INFO");
        CHECK_STR(t->debug.subsys, "INIT,COLL,ENV,NET");
        /* Different text, different hash; same text, same hash. */
        CHECK(strcmp(policy_hash(p), policy_hash(q)) != 0);
        policy_free(q);
    }
    q = load(HEAD, &e);
    CHECK(q != NULL && strcmp(policy_hash(p), policy_hash(q)) == 0);
    /* SHA-256 of the text, in hex. */
    CHECK_STR(q != NULL ? policy_hash(q) : "(no policy)",
              "118ec7cc45399aeeedf14e30c16c12a8"
              "2d181df7090ba84e690672864f36d5cf");
    policy_free(q);
    /* References: the snapshot lives until the last one is dropped. */
    CHECK(policy_ref(p) == p);
    policy_free(p);
    CHECK_INT(policy_defaults(p)->shm.per_gpu, 4LL << 30);
    policy_free(p);
    policy_free(NULL);
    CHECK(policy_ref(NULL) == NULL);
}

static const char rules_policy[] =
    HEAD "defaults:\n"
         "  shm: {perGPU: 2Gi, max: 32Gi}\n"
         "  extraEnv: [{name: NCCL_SOCKET_IFNAME, value: eth0}]\n"
         "rules:\n"
         "  - name: monitoring\n"
         "    match: {namespaces: [monitoring]}\n"
         "    skip: true\n"
         "  - name: inference\n"
         "    match:\n"
         "      namespaces: [\"ai-serving\", \"team-*\"]\n"
         "      excludeNamespaces: [team-sandbox]\n"
         "      podLabels: {app.kubernetes.io/component: inference}\n"
         "      maxGPUs: 8\n"
         "    settings:\n"
         "      shm: {perGPU: 8Gi}\n"
         "      ringCheck: {enabled: false}\n"
         "  - name: training\n"
         "    match:\n"
         "      matchExpressions:\n"
         "        - {key: training.example.com/job, operator: Exists}\n"
         "      minGPUs: 2\n"
         "    settings:\n"
         "      shm: {max: 128Gi, existing: grow}\n"
         "      ipc: {capabilities: [IPC_LOCK]}\n"
         "      ringCheck: {allowOptOut: false, onFailure: fail}\n"
         "      debug: {allowAnnotation: false}\n"
         "      extraEnv: [{name: NCCL_IB_HCA, value: \"mlx5_0:1\"}]\n";

static void
test_rules(void)
{
    struct ng_error e;
    struct policy *p = load(rules_policy, &e);
    json_t *inf =
        json_pack("{s:s}", "app.kubernetes.io/component", "inference");
    json_t *train = json_pack("{s:s}", "training.example.com/job", "llm");
    json_t *ann;
    struct decision d;

    if (p == NULL)
        fprintf(stderr, "rules policy: %d:%d %s\n", e.line, e.col, e.msg);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    CHECK_INT(policy_rule_count(p), 3);
    CHECK_STR(policy_rule_name(p, 2), "training");
    CHECK(policy_rule_name(p, 3) == NULL);

    /* No rule matches: defaults, with the file's own overrides. */
    policy_decide(p, "default", NULL, NULL, 1, &d);
    CHECK_STR(d.rule, "default");
    CHECK(!d.skip);
    CHECK(d.settings == policy_defaults(p));
    CHECK_INT(d.settings->shm.per_gpu, 2LL << 30);
    CHECK_INT(d.settings->shm.min, 1LL << 30); /* untouched default */
    CHECK_INT(d.settings->shm.max, 32LL << 30);
    CHECK(d.ringcheck);
    CHECK_INT(d.shm_override, -1);
    CHECK_INT(d.n_warnings, 0);

    /* skip */
    policy_decide(p, "monitoring", inf, NULL, 4, &d);
    CHECK_STR(d.rule, "monitoring");
    CHECK(d.skip);

    /* first match wins; field-by-field merge over the defaults */
    policy_decide(p, "team-a", inf, NULL, 4, &d);
    CHECK_STR(d.rule, "inference");
    CHECK_INT(d.settings->shm.per_gpu, 8LL << 30);
    CHECK_INT(d.settings->shm.max, 32LL << 30); /* from defaults */
    CHECK(!d.settings->ringcheck.enabled);
    CHECK(!d.ringcheck);
    CHECK_STR(d.settings->ringcheck.image,
              "ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0");
    CHECK_INT(d.settings->n_extra_env, 1); /* inherited list */
    CHECK_STR(d.settings->extra_env[0].name, "NCCL_SOCKET_IFNAME");
    /* excluded namespace, too many GPUs, missing label: not inference */
    policy_decide(p, "team-sandbox", inf, NULL, 4, &d);
    CHECK_STR(d.rule, "default");
    policy_decide(p, "team-a", inf, NULL, 16, &d);
    CHECK_STR(d.rule, "default");
    policy_decide(p, "team-a", train, NULL, 1, &d);
    CHECK_STR(d.rule, "default");

    policy_decide(p, "research", train, NULL, 2, &d);
    CHECK_STR(d.rule, "training");
    CHECK_INT(d.settings->shm.max, 128LL << 30);
    CHECK_INT(d.settings->shm.per_gpu, 2LL << 30);
    CHECK_INT(d.settings->shm.existing, SHM_EXISTING_GROW);
    CHECK_INT(d.settings->ipc.n_capabilities, 1);
    CHECK_STR(d.settings->ipc.capabilities[0], "IPC_LOCK");
    CHECK_INT(d.settings->ringcheck.on_failure, RINGCHECK_FAIL);
    CHECK_INT(d.settings->n_extra_env, 1); /* a list replaces the default */
    CHECK_STR(d.settings->extra_env[0].name, "NCCL_IB_HCA");
    /* the defaults themselves are unchanged by the merge */
    CHECK_INT(policy_defaults(p)->ipc.n_capabilities, 0);
    CHECK_INT(policy_defaults(p)->ringcheck.on_failure, RINGCHECK_FALLBACK);

    /* annotation overrides, accepted */
    ann = json_pack("{s:s, s:s, s:s}", "ncclguard.io/shm-size", "48Gi",
                    "ncclguard.io/ring-check", "false", "ncclguard.io/debug",
                    "true");
    policy_decide(p, "default", NULL, ann, 1, &d);
    CHECK_INT(d.shm_override, -1);
    CHECK_INT(d.n_warnings, 1); /* 48Gi is over the default 32Gi max */
    CHECK_STR(d.warnings[0], "ncclguard: shm-size 48Gi refused: above the "
                             "policy maximum 32Gi (rule \"default\")");
    CHECK(!d.ringcheck && d.debug);
    json_decref(ann);

    ann = json_pack("{s:s, s:s, s:s}", "ncclguard.io/shm-size", "16Gi",
                    "ncclguard.io/ring-check", "false", "ncclguard.io/debug",
                    "true");
    policy_decide(p, "default", NULL, ann, 1, &d);
    CHECK_INT(d.shm_override, 16LL << 30);
    CHECK(!d.ringcheck);
    CHECK(d.debug);
    CHECK_INT(d.n_warnings, 0);
    /* same annotations under a rule that forbids opting out and debug */
    policy_decide(p, "research", train, ann, 2, &d);
    CHECK_INT(d.shm_override, 16LL << 30);
    CHECK(d.ringcheck);
    CHECK(!d.debug);
    CHECK_INT(d.n_warnings, 2);
    /* Each refusal says how to fix it. */
    CHECK_STR(d.warnings[0], "ncclguard: ring-check opt-out refused: rule "
                             "\"training\" does not allow it; remove the "
                             "annotation");
    CHECK_STR(d.warnings[1], "ncclguard: debug refused: rule \"training\" "
                             "allows no NCCL debug output; remove the "
                             "annotation");
    json_decref(ann);

    /* refused shm sizes, each with its reason, within 120 characters */
    {
        static const struct {
            const char *v;
            const char *want;
        } refused[] = {
            {"200Gi", "ncclguard: shm-size 200Gi refused: above the policy "
                      "maximum 128Gi (rule \"training\")"},
            {"512Mi", "ncclguard: shm-size 512Mi refused: below the policy "
                      "minimum 1Gi (rule \"training\")"},
            {"16GB", "ncclguard: shm-size \"16GB\" refused: not a whole "
                     "positive quantity such as 16Gi"},
            {"-1Gi", "ncclguard: shm-size \"-1Gi\" refused: not a whole "
                     "positive quantity such as 16Gi"},
            {"1.5m", "ncclguard: shm-size \"1.5m\" refused: not a whole "
                     "positive quantity such as 16Gi"},
            {"\x01\x02xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
             "ncclguard: shm-size \"??xxxxxxxxxxxxxx...\" refused: not a "
             "whole positive quantity such as 16Gi"},
        };

        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
            ann = json_pack("{s:s}", "ncclguard.io/shm-size", refused[i].v);
            policy_decide(p, "research", train, ann, 2, &d);
            CHECK_INT(d.shm_override, -1);
            CHECK_INT(d.n_warnings, 1);
            CHECK_STR(d.warnings[0], refused[i].want);
            CHECK(strlen(d.warnings[0]) <= 120);
            json_decref(ann);
        }
    }
    /* shm-size where the rule does not manage /dev/shm; odd values */
    ann = json_pack("{s:s, s:s, s:i}", "ncclguard.io/ring-check", "maybe",
                    "ncclguard.io/debug", "yes", "ncclguard.io/shm-size", 5);
    policy_decide(p, "default", NULL, ann, 1, &d);
    CHECK_INT(d.n_warnings, 2); /* a non-string shm-size is ignored */
    CHECK_STR(d.warnings[0], "ncclguard: ring-check \"maybe\" ignored: "
                             "expected \"true\" or \"false\"");
    CHECK_STR(d.warnings[1], "ncclguard: debug \"yes\" ignored: expected "
                             "\"true\" or \"false\"");
    CHECK(d.ringcheck && !d.debug);
    json_decref(ann);
    /* a skipped pod gets no overrides and no warnings */
    ann = json_pack("{s:s}", "ncclguard.io/shm-size", "999Ti");
    policy_decide(p, "monitoring", NULL, ann, 1, &d);
    CHECK(d.skip);
    CHECK_INT(d.n_warnings, 0);
    json_decref(ann);

    json_decref(inf);
    json_decref(train);
    policy_free(p);
}

/* Address templates: each piece in order, or the reason it is refused. */
static void
test_templates(void)
{
    static const struct {
        const char *tmpl;
        const char *pieces; /* "kind:text|..." (T L A E N), or NULL */
        const char *error;  /* substring, when pieces is NULL */
    } cases[] = {
        {"plain.host", "T:plain.host|", NULL},
        {"{label:jobset.sigs.k8s.io/jobset-name}-0.{namespace}",
         "L:jobset.sigs.k8s.io/jobset-name|T:-0.|N:|", NULL},
        {"{annotation:ncclguard.io/nodes}", "A:ncclguard.io/nodes|", NULL},
        {"{env:MY_LEADER}:29400", "E:MY_LEADER|T::29400|", NULL},
        {"", "", NULL},
        {"{lable:x}", NULL, "unknown reference \"{lable:x}\""},
        {"{label:x", NULL, "unclosed \"{\""},
        {"a}b", NULL, "\"}\" outside a reference"},
        {"$(X)", NULL, "\"$\" outside a reference"},
        {"{label:}", NULL, "bad key"},
        {"{label:a b}", NULL, "bad key"},
        {"{env:A=B}", NULL, "bad key"},
        {"{namespace:x}", NULL, "unknown reference"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *cur = cases[i].tmpl;
        struct policy_template_piece piece;
        char got[300] = "", why[160] = "";
        int rc;

        while ((rc = policy_template_next(&cur, &piece, why, sizeof(why))) >
               0) {
            size_t n = strlen(got);

            snprintf(got + n, sizeof(got) - n, "%c:%.*s|", "TLAEN"[piece.kind],
                     (int)piece.len, piece.s);
        }
        if (cases[i].pieces != NULL) {
            CHECK_INT(rc, 0);
            CHECK_STR(got, cases[i].pieces);
        } else {
            CHECK_INT(rc, -1);
            CHECK(strstr(why, cases[i].error) != NULL);
            if (strstr(why, cases[i].error) == NULL)
                fprintf(stderr, "template %s: %s\n", cases[i].tmpl, why);
        }
    }
}

static void
test_errors(void)
{
    char *big;

    expect_error("", 1, 1, "empty policy");
    expect_error("- a\n", 1, 1, "a policy must be a mapping");
    expect_error("kind: Policy\n", 1, 1, "missing apiVersion");
    expect_error("apiVersion: v1\nkind: Policy\n", 1, 13,
                 "apiVersion must be ncclguard.io/v1alpha1");
    expect_error(HEAD "defaults:\n  shm:\n    perGpu: 4Gi\n", 5, 5,
                 "unknown key \"perGpu\" in shm; did you mean \"perGPU\"?");
    expect_error(HEAD "defaults:\n  perGPU: 4Gi\n", 4, 3,
                 "unknown key \"perGPU\" in defaults; it belongs under shm");
    expect_error(HEAD "defaults:\n  shm: {perGPU: 4Gb}\n", 4, 17,
                 "4Gb is not a Kubernetes quantity; did you mean 4Gi?");
    expect_error(HEAD "defaults:\n  shm: {perGPU: 4m}\n", 4, 17,
                 "did you mean 4Mi?");
    expect_error(HEAD "defaults:\n  shm: {min: 8Gi, max: 4Gi}\n", 4, 24,
                 "shm.min 8Gi is greater than shm.max 4Gi");
    expect_error(HEAD "defaults:\n  shm: {min: -1Gi}\n", 4, 14,
                 "must not be negative");
    expect_error(HEAD "defaults:\n  ringCheck: {timeoutSeconds: -5}\n", 4, 31,
                 "must not be negative, got -5");
    expect_error(HEAD "defaults:\n  ringCheck: {timeoutSeconds: \"5\"}\n", 4,
                 31, "must be an integer");
    expect_error(HEAD "defaults:\n  ringCheck: {enabled: \"false\"}\n", 4, 24,
                 "drop the quotes");
    expect_error(HEAD "defaults:\n  ringCheck: {enabled: yes}\n", 4, 24,
                 "YAML 1.1");
    expect_error(HEAD "defaults:\n  ringCheck: {onFailure: fallbak}\n", 4, 26,
                 "did you mean \"fallback\"?");
    expect_error(HEAD "defaults:\n  ringCheck: {minGPUs: 33}\n", 4, 24,
                 "ringCheck.minGPUs must be between 1 and 32, got 33");
    expect_error(HEAD "defaults:\n  ringCheck: {multiNode: automatic}\n", 4, 26,
                 "did you mean \"auto\"?");
    expect_error(HEAD "defaults:\n  ringCheck: {onMissing: ignore}\n", 4, 26,
                 "ringCheck.onMissing must be one of warn, fail");
    expect_error(HEAD "defaults:\n  ringCheck: {rendezvousPort: 0}\n", 4, 31,
                 "between 1 and 65535");
    expect_error(HEAD "defaults:\n  ringCheck: {multiNodeTimout: 60}\n", 4, 15,
                 "did you mean \"multiNodeTimeout\"?");
    expect_error(HEAD "defaults:\n  ringCheck: {nodes: '{label:a/b/c}'}\n", 4,
                 22, "bad key in \"{label:a/b/c}\"");
    expect_error(HEAD "defaults:\n  ringCheck: {leaderAddress: ''}\n", 4, 30,
                 "must not be empty");
    expect_error(HEAD "defaults:\n  gpuResources: nvidia.com/gpu\n", 4, 17,
                 "gpuResources must be a list, got a string");
    expect_error(HEAD "defaults:\n  gpuResources: [gpu]\n", 4, 18,
                 "not an extended resource name");
    expect_error(HEAD "defaults:\n  ipc: {capabilities: [CAP_IPC_LOCK]}\n", 4,
                 24, "without the CAP_ prefix");
    expect_error(HEAD "defaults:\n  profile: {name: My_Profile}\n", 4, 19,
                 "not a valid Kubernetes object name");
    expect_error(HEAD "defaults:\n  extraEnv:\n  - {name: NCCL_TIMEOUT, "
                      "value: \"60\"}\n",
                 5, 12, "NCCL has no timeout variable");
    expect_error(HEAD "defaults:\n  extraEnv:\n  - {name: A, value: x}\n  - "
                      "{name: A, value: y}\n",
                 6, 12, "extraEnv sets A twice");
    expect_error(HEAD "defaults:\n  debug: {level: LOUD}\n", 4, 18,
                 "NCCL_DEBUG=LOUD");
    expect_error(HEAD "defaults: {}\ndefaults: {}\n", 4, 1,
                 "duplicate key \"defaults\" (first at 3:1)");
    expect_error(HEAD "rules:\n- name: a\n  match: {namespaces: [\"team-[\"]}"
                      "\n",
                 5, 24, "bad glob \"team-[\"");
    expect_error(HEAD "rules:\n- name: a\n  match: {minGPUs: 4, maxGPUs: 2}\n",
                 5, 32, "minGPUs 4 is greater than maxGPUs 2");
    expect_error(HEAD "rules:\n- name: a\n  match: {namespaces: [x]}\n"
                      "- name: a\n  match: {namespaces: [y]}\n",
                 6, 9, "duplicate rule name \"a\" (first at line 4)");
    expect_error(HEAD "rules:\n- name: all\n- name: later\n  match: "
                      "{namespaces: [x]}\n",
                 5, 3, "rule \"later\" can never match: rule \"all\"");
    expect_error(HEAD "rules:\n- name: default\n", 4, 9, "reserved");
    expect_error(HEAD "rules:\n- match: {namespaces: [x]}\n", 4, 3,
                 "rule needs a name");
    expect_error(HEAD "rules:\n- name: a\n  match:\n    matchExpressions:\n"
                      "    - {key: team, operator: In}\n",
                 7, 7, "needs a non-empty values list");
    expect_error(HEAD "rules:\n- name: a\n  settings: {shm: {min: 100Gi}}\n", 5,
                 25, "rule \"a\": shm.min 100Gi is greater than shm.max");
    expect_error(HEAD "x: &a [1]\ny: *b\n", 4, 4, "unknown alias *b");
    expect_error(HEAD "defaults: [\n", 4, 1, "");

    /* caps: size, depth, rules */
    big = malloc(2 * 1024 * 1024);
    if (big != NULL) {
        memset(big, ' ', 2 * 1024 * 1024);
        big[2 * 1024 * 1024 - 1] = '\0';
        expect_error(big, 0, 0, "over the 1048576-byte limit");
        free(big);
    }
    {
        char deep[400];
        size_t n = 0;

        n += (size_t)snprintf(deep, sizeof(deep), "%s", HEAD "x: ");
        for (int i = 0; i < 40; i++)
            deep[n++] = '[';
        deep[n] = '\0';
        expect_error(deep, 3, 35, "nesting deeper than 32 levels");
    }
    {
        size_t cap = 300 * 40 + 100, n = 0;
        char *many = malloc(cap);

        if (many != NULL) {
            n += (size_t)snprintf(many, cap, "%srules:\n", HEAD);
            for (int i = 0; i < 300; i++)
                n += (size_t)snprintf(many + n, cap - n,
                                      "- {name: r%d, skip: true}\n", i);
            expect_error(many, 4, 1, "300 rules, more than the limit of 256");
            free(many);
        }
    }

    /* Mappings are capped (duplicate detection is quadratic). */
    {
        size_t cap = 1100 * 16 + 100, n = 0;
        char *wide = malloc(cap);

        if (wide != NULL) {
            n += (size_t)snprintf(wide, cap, "%smetadata:\n", HEAD);
            for (int k = 0; k < 1100; k++)
                n += (size_t)snprintf(wide + n, cap - n, "  k%d: v\n", k);
            expect_error(wide, 1028, 3, "mapping has more than 1024 keys");
            free(wide);
        }
    }

    /* The unreachable-rule check runs on a budget (regression: 185 rules
     * listing the same 256 namespaces took 40 s to lint). */
    {
        size_t cap = 64 * 2600 + 200, n = 0;
        char *many = malloc(cap);

        if (many != NULL) {
            n += (size_t)snprintf(many, cap, "%srules:\n", HEAD);
            for (int r = 0; r < 64; r++) {
                n += (size_t)snprintf(many + n, cap - n,
                                      "- name: r%d\n  match:\n    "
                                      "podLabels: {k%d: v}\n    namespaces: [",
                                      r, r);
                for (int k = 0; k < 256; k++)
                    n += (size_t)snprintf(many + n, cap - n, "%sn%d",
                                          k ? "," : "", k);
                n += (size_t)snprintf(many + n, cap - n, "]\n");
            }
            CHECK(n < cap);
            CHECK_INT(count_diags(many, DIAG_WARNING, "were not checked"), 1);
            CHECK_INT(count_diags(many, DIAG_ERROR, ""), 0);
            free(many);
        }
    }

    /* warnings do not stop loading */
    CHECK_INT(count_diags(HEAD "defaults:\n  ipc: {capabilities: [IPC_LOCK], "
                               "hostIPC: true}\n",
                          DIAG_WARNING, "Pod Security"),
              2);
    CHECK_INT(count_diags(HEAD "defaults:\n  extraEnv:\n  - {name: "
                               "NCCL_P2P_DISABLE, value: \"0\"}\n",
                          DIAG_WARNING, "overrides NCCL_CONF_FILE"),
              1);
    {
        struct ng_error e;
        struct policy *p = load(HEAD "defaults:\n  extraEnv:\n  - {name: "
                                     "NCCL_IB_DISABLE, value: \"0\"}\n",
                                &e);

        CHECK(p != NULL);
        policy_free(p);
    }
    /* every error is reported, not just the first */
    CHECK_INT(count_diags(HEAD "defaults:\n  shm: {perGPU: 4Gb, min: 1GB}\n"
                               "  ringCheck: {mode: procss}\n",
                          DIAG_ERROR, ""),
              3);
    /* anchors and aliases are followed */
    {
        struct ng_error e;
        struct policy *p = load(HEAD "defaults:\n  shm: &big {perGPU: 8Gi}\n"
                                     "rules:\n- name: a\n  match: "
                                     "{namespaces: [x]}\n  settings: {shm: "
                                     "*big}\n",
                                &e);

        CHECK(p != NULL);
        policy_free(p);
    }
}

/* Many threads deciding on one shared snapshot while taking and dropping
 * references, as the server does across a reload. */
struct worker {
    struct policy *p;
    int mismatches;
};

static void *
worker_run(void *arg)
{
    struct worker *w = arg;
    json_t *train = json_pack("{s:s}", "training.example.com/job", "x");
    json_t *ann = json_pack("{s:s}", "ncclguard.io/shm-size", "16Gi");

    for (int i = 0; i < 2000; i++) {
        struct policy *mine = policy_ref(w->p);
        struct decision d;

        policy_decide(mine, i % 2 ? "research" : "monitoring", train, ann, 2,
                      &d);
        if (strcmp(d.rule, i % 2 ? "training" : "monitoring") != 0 ||
            (i % 2 && d.shm_override != (16LL << 30)))
            w->mismatches++;
        policy_free(mine);
    }
    json_decref(train);
    json_decref(ann);
    return NULL;
}

static void
test_threads(void)
{
    struct ng_error e;
    struct policy *p = load(rules_policy, &e);
    pthread_t t[4];
    struct worker w[4];

    CHECK(p != NULL);
    if (p == NULL)
        return;
    for (int i = 0; i < 4; i++) {
        w[i].p = p;
        w[i].mismatches = 0;
        CHECK_INT(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_INT(w[i].mismatches, 0);
    }
    /* Every reference the workers took was dropped: one left, ours. */
    policy_free(p);
}

/* One field of two settings: names it when the values differ. */
static void
same_int(const char *field, long long a, long long b)
{
    if (a != b)
        fprintf(stderr,
                "policy/default.yaml and the built-in defaults "
                "differ: %s is %lld in the file, %lld built in\n",
                field, a, b);
    CHECK(a == b);
}

static void
same_str(const char *field, const char *a, const char *b)
{
    bool same = (a == NULL && b == NULL) ||
                (a != NULL && b != NULL && strcmp(a, b) == 0);

    if (!same)
        fprintf(stderr,
                "policy/default.yaml and the built-in defaults "
                "differ: %s is \"%s\" in the file, \"%s\" built in\n",
                field, a ? a : "(none)", b ? b : "(none)");
    CHECK(same);
}

#define SAME_INT(f) same_int(#f, (long long)(a->f), (long long)(b->f))
#define SAME_STR(f) same_str(#f, a->f, b->f)

/*
 * Every field of struct settings. A field added there must be added here
 * (and spelled out in policy/default.yaml): on LP64 the size check below
 * fails until it is.
 */
static void
settings_same(const struct settings *a, const struct settings *b)
{
#if UINTPTR_MAX == UINT64_MAX
    _Static_assert(sizeof(struct settings) == 360,
                   "struct settings changed: compare the new field in "
                   "settings_same() and spell it in policy/default.yaml");
#endif
    SAME_INT(n_gpu_resources);
    for (size_t i = 0; i < a->n_gpu_resources && i < b->n_gpu_resources; i++)
        SAME_STR(gpu_resources[i]);
    SAME_INT(profile.enabled);
    SAME_STR(profile.name);
    SAME_INT(profile.optional);
    SAME_INT(shm.enabled);
    SAME_INT(shm.per_gpu);
    SAME_INT(shm.min);
    SAME_INT(shm.max);
    SAME_INT(shm.existing);
    SAME_INT(shm.memory_limit);
    SAME_INT(ipc.n_capabilities);
    for (size_t i = 0; i < a->ipc.n_capabilities && i < b->ipc.n_capabilities;
         i++)
        SAME_STR(ipc.capabilities[i]);
    SAME_INT(ipc.host_ipc);
    SAME_INT(ipc.warn_non_root);
    SAME_INT(ringcheck.enabled);
    SAME_STR(ringcheck.image);
    SAME_INT(ringcheck.timeout_seconds);
    SAME_INT(ringcheck.bandwidth_bytes);
    SAME_INT(ringcheck.mode);
    SAME_INT(ringcheck.on_failure);
    SAME_INT(ringcheck.on_no_cure);
    same_int("ringcheck.min_busbw_gbps (x1000)",
             (long long)(a->ringcheck.min_busbw_gbps * 1000),
             (long long)(b->ringcheck.min_busbw_gbps * 1000));
    SAME_INT(ringcheck.allow_opt_out);
    SAME_STR(ringcheck.cpu_request);
    SAME_STR(ringcheck.memory_request);
    SAME_STR(ringcheck.cpu_limit);
    SAME_STR(ringcheck.memory_limit);
    SAME_INT(ringcheck.min_gpus);
    SAME_INT(ringcheck.multi_node);
    SAME_INT(ringcheck.rendezvous_port);
    SAME_INT(ringcheck.multi_node_timeout);
    SAME_INT(ringcheck.on_missing);
    same_int("ringcheck.min_net_busbw_gbps (x1000)",
             (long long)(a->ringcheck.min_net_busbw_gbps * 1000),
             (long long)(b->ringcheck.min_net_busbw_gbps * 1000));
    SAME_STR(ringcheck.leader_address);
    SAME_STR(ringcheck.nodes);
    SAME_STR(ringcheck.expect_intra);
    SAME_STR(ringcheck.expect_inter);
    SAME_INT(n_extra_env);
    for (size_t i = 0; i < a->n_extra_env && i < b->n_extra_env; i++) {
        SAME_STR(extra_env[i].name);
        SAME_STR(extra_env[i].value);
    }
    SAME_INT(debug.allow_annotation);
    SAME_STR(debug.level);
    SAME_STR(debug.subsys);
    SAME_INT(watchdog.enabled);
    SAME_INT(watchdog.period_ms);
    SAME_INT(watchdog.idle_periods);
    SAME_INT(watchdog.min_cpu_milli);
    SAME_INT(watchdog.restart);
    SAME_INT(watchdog.checkpoint_signal);
    SAME_STR(watchdog.checkpoint_file);
    SAME_INT(watchdog.grace_ms);
}

/* The node-level quarantine block, field by field. */
static void
quarantine_same(const struct policy_quarantine *a,
                const struct policy_quarantine *b)
{
#if UINTPTR_MAX == UINT64_MAX
    _Static_assert(sizeof(struct policy_quarantine) == 48,
                   "struct policy_quarantine changed: compare the new field "
                   "in quarantine_same() and spell it in policy/default.yaml");
#endif
    SAME_INT(mode);
    SAME_INT(threshold);
    SAME_INT(window_ms);
    SAME_INT(cooldown_ms);
    SAME_INT(cooldown_max_ms);
    SAME_INT(expiry_ms);
    SAME_INT(max_share_permille);
}

/*
 * policy/default.yaml spells out the defaults that policy/schema.c builds in (a
 * policy that names no setting gets those). They once drifted: a comment
 * said the ring check's memory was 256Mi while the code and the file said
 * 2Gi. Loading the shipped file must give exactly the built-in defaults,
 * field by field, and no rule. Run from the repository root, as make does.
 */
static void
test_default_yaml_is_builtin(void)
{
    const char *path = "policy/default.yaml";
    struct ng_error e;
    struct policy *file, *builtin;

    ng_error_clear(&e);
    file = policy_load_file(path, &e);
    if (file == NULL)
        fprintf(stderr, "%s: %s\n", path, e.msg);
    CHECK(file != NULL);
    builtin = load(HEAD, &e);
    CHECK(builtin != NULL);
    if (file != NULL && builtin != NULL) {
        settings_same(policy_defaults(file), policy_defaults(builtin));
        quarantine_same(policy_quarantine(file), policy_quarantine(builtin));
        CHECK_INT(policy_rule_count(file), 0);
    }
    policy_free(file);
    policy_free(builtin);
}

/* defaults.quarantine: the built-in values, each key, each error. */
static void
test_quarantine(void)
{
    struct ng_error e;
    struct policy *p;
    const struct policy_quarantine *q;

    p = load(HEAD, &e);
    CHECK(p != NULL);
    if (p != NULL) {
        q = policy_quarantine(p);
        CHECK_INT(q->mode, QUARANTINE_OBSERVE);
        CHECK_INT(q->threshold, 2);
        CHECK_INT(q->window_ms, 3600 * 1000LL);
        CHECK_INT(q->cooldown_ms, 1800 * 1000LL);
        CHECK_INT(q->cooldown_max_ms, 8 * 3600 * 1000LL);
        CHECK_INT(q->expiry_ms, 24 * 3600 * 1000LL);
        CHECK_INT(q->max_share_permille, 100);
    }
    policy_free(p);

    p = load(HEAD "defaults:\n  quarantine:\n    mode: quarantine\n"
                  "    threshold: 3\n    window: 90s\n    cooldown: 5m\n"
                  "    cooldownMax: 60m\n    expiry: 0\n"
                  "    maxSharePercent: 2.5\n",
             &e);
    CHECK(p != NULL);
    if (p == NULL)
        fprintf(stderr, "quarantine policy: %d:%d %s\n", e.line, e.col, e.msg);
    if (p != NULL) {
        q = policy_quarantine(p);
        CHECK_INT(q->mode, QUARANTINE_TAINT);
        CHECK_INT(q->threshold, 3);
        CHECK_INT(q->window_ms, 90 * 1000LL);
        CHECK_INT(q->cooldown_ms, 5 * 60 * 1000LL);
        CHECK_INT(q->cooldown_max_ms, 3600 * 1000LL);
        CHECK_INT(q->expiry_ms, 0);
        CHECK_INT(q->max_share_permille, 25);
        /* Node-level: the rules' settings have nothing of it. */
        CHECK_INT(policy_rule_count(p), 0);
    }
    policy_free(p);
    /* expiry 0 written with a unit is never too. */
    p = load(HEAD "defaults:\n  quarantine: {expiry: 0m}\n", &e);
    CHECK(p != NULL && policy_quarantine(p)->expiry_ms == 0);
    policy_free(p);

#define QHEAD HEAD "defaults:\n  quarantine:\n"
    expect_error(QHEAD "    mode: taint\n", 5, 11,
                 "quarantine.mode must be one of observe, quarantine, got "
                 "\"taint\"");
    expect_error(QHEAD "    mode: quarantin\n", 5, 11,
                 "did you mean \"quarantine\"?");
    expect_error(QHEAD "    threshold: 0\n", 5, 16,
                 "quarantine.threshold must be between 1 and 100, got 0");
    expect_error(QHEAD "    threshold: 101\n", 5, 16,
                 "quarantine.threshold must be between 1 and 100, got 101");
    expect_error(QHEAD "    window: 30s\n", 5, 13,
                 "quarantine.window must be between 1m and 10080m, got 30s");
    expect_error(QHEAD "    window: 10081m\n", 5, 13,
                 "quarantine.window must be between 1m and 10080m");
    expect_error(QHEAD "    window: 1h\n", 5, 13,
                 "unit \"h\" in \"1h\" is not one of ms, s, m "
                 "(milliseconds, seconds, minutes), such as 60m");
    expect_error(QHEAD "    cooldown: 60\n", 5, 15,
                 "quarantine.cooldown: duration \"60\" needs a unit");
    expect_error(QHEAD "    cooldown: 20000m\n", 5, 15,
                 "quarantine.cooldown must be between 1m and 10080m");
    expect_error(QHEAD "    cooldownMax: 43201m\n", 5, 18,
                 "quarantine.cooldownMax must be between 1m and 43200m");
    expect_error(QHEAD "    cooldown: 60m\n    cooldownMax: 30m\n", 6, 18,
                 "quarantine.cooldownMax 30m is shorter than cooldown 60m");
    expect_error(QHEAD "    cooldown: 600m\n", 5, 15,
                 "quarantine.cooldownMax 480m is shorter than cooldown 600m");
    expect_error(QHEAD "    expiry: 30s\n", 5, 13,
                 "quarantine.expiry must be 0 (never) or between 1m and "
                 "43200m, got 30s");
    expect_error(QHEAD "    expiry: never\n", 5, 13,
                 "quarantine.expiry: duration \"never\" must be a whole "
                 "number");
    expect_error(QHEAD "    maxSharePercent: 0\n", 5, 22,
                 "quarantine.maxSharePercent 0 would hold every taint");
    expect_error(QHEAD "    maxSharePercent: 101\n", 5, 22,
                 "quarantine.maxSharePercent must be a percentage above 0 "
                 "and at most 100 with at most one decimal, got 101");
    expect_error(QHEAD "    maxSharePercent: 2.55\n", 5, 22,
                 "with at most one decimal, got 2.55");
    expect_error(QHEAD "    maxSharePercent: -5\n", 5, 22,
                 "quarantine.maxSharePercent must not be negative");
    expect_error(QHEAD "    threshhold: 3\n", 5, 5,
                 "unknown key \"threshhold\" in quarantine; did you mean "
                 "\"threshold\"?");
#undef QHEAD
    expect_error(HEAD "defaults:\n  quarantine: observe\n", 4, 15,
                 "quarantine must be a mapping, got a string");
    /* Node-level: not in a rule, not at the top. */
    expect_error(HEAD "rules:\n- name: a\n  settings:\n    quarantine: "
                      "{mode: quarantine}\n",
                 6, 5,
                 "quarantine is node-level: it belongs under defaults:, not "
                 "in a rule's settings");
    expect_error(HEAD "quarantine: {mode: observe}\n", 3, 1,
                 "unknown key \"quarantine\" in the policy; it belongs under "
                 "defaults");
    expect_error(HEAD "defaults:\n  watchdog: {threshold: 3}\n", 4, 14,
                 "unknown key \"threshold\" in watchdog; it belongs under "
                 "quarantine");
    /* Warnings: the policy loads. */
    CHECK_INT(count_diags(HEAD "defaults:\n  quarantine: {threshold: 1}\n",
                          DIAG_WARNING, "threshold 1 acts as 2"),
              1);
    CHECK_INT(count_diags(HEAD "defaults:\n  quarantine: {expiry: 20m}\n",
                          DIAG_WARNING,
                          "quarantine.expiry 20m is not longer than "
                          "cooldown 30m"),
              1);
    CHECK_INT(count_diags(HEAD "defaults:\n  quarantine: {expiry: 20m}\n",
                          DIAG_ERROR, ""),
              0);
}

int
main(void)
{
    test_defaults();
    test_default_yaml_is_builtin();
    test_rules();
    test_errors();
    test_templates();
    test_quarantine();
    test_threads();
    return harness_finish();
}
