/* Tests of multi-node job membership on the webhook side: gangs (the
 * Workload API's workloadRef and schedulingGroup, Volcano's and KAI's
 * PodGroups), the variables the ring check gets for them, and the job
 * token. */
#include "admission/jobmember.h"

#include <stdlib.h>

#include "harness.h"
#include "server_fixtures.h"

static struct policy *pol;

/* The value of env entry name (a literal or a fieldRef path), or NULL. */
static const char *
env_get(const json_t *env, const char *name)
{
    size_t i;
    json_t *e;

    json_array_foreach(env, i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));

        if (n == NULL || strcmp(n, name) != 0)
            continue;
        if (json_object_get(e, "value") != NULL)
            return json_string_value(json_object_get(e, "value"));
        return json_string_value(json_object_get(
            json_object_get(json_object_get(e, "valueFrom"), "fieldRef"),
            "fieldPath"));
    }
    return NULL;
}

/* Gangs as pods declare them, and what the check's env says. */
static void
test_gangs(void)
{
    static const struct {
        const char *what;
        const char *pod;
        enum mn_kind kind;
        const char *why;    /* substring of the note */
        const char *job;    /* NCCLGUARD_JOB_ID */
        const char *rank;   /* NCCLGUARD_NODE_RANK's fieldPath */
        const char *leader; /* NCCLGUARD_LEADER_ADDR */
    } cases[] = {
        {"1.35 workloadRef on an Indexed Job pod",
         "{'metadata':{'labels':{'batch.kubernetes.io/job-completion-index':"
         "'1'},'annotations':{'ncclguard.io/nodes':'4'},'ownerReferences':[{"
         "'kind':'Job','name':'train','uid':'u1','controller':true}]},"
         "'spec':{'subdomain':'train-svc','workloadRef':{'name':'train-wl',"
         "'podGroup':'workers'}}}",
         MN_GANG, "gang from spec.workloadRef", "workload:train-wl/workers",
         "metadata.labels['batch.kubernetes.io/job-completion-index']",
         "train-0.train-svc"},
        {"workloadRef with a replica key: a gang of its own",
         "{'metadata':{'labels':{'batch.kubernetes.io/job-completion-index':"
         "'0'},'annotations':{'ncclguard.io/nodes':'2'},'ownerReferences':[{"
         "'name':'train','controller':true}]},'spec':{'subdomain':'s',"
         "'workloadRef':{'name':'wl','podGroup':'workers',"
         "'podGroupReplicaKey':'1'}}}",
         MN_GANG, "spec.workloadRef", "workload:wl/workers/1",
         "metadata.labels['batch.kubernetes.io/job-completion-index']",
         "train-0.s"},
        {"1.36 schedulingGroup on a StatefulSet pod",
         "{'metadata':{'labels':{'apps.kubernetes.io/pod-index':'2'},"
         "'annotations':{'ncclguard.io/nodes':'3'},'ownerReferences':[{"
         "'kind':'StatefulSet','name':'infer','controller':true}]},"
         "'spec':{'subdomain':'infer-hl','schedulingGroup':{'podGroupName':"
         "'infer-pg-0'}}}",
         MN_GANG, "spec.schedulingGroup", "podgroup:infer-pg-0",
         "metadata.labels['apps.kubernetes.io/pod-index']", "infer-0.infer-hl"},
        {"Volcano PodGroup annotation on an Indexed Job pod",
         "{'metadata':{'labels':{'batch.kubernetes.io/job-completion-index':"
         "'0'},'annotations':{'scheduling.k8s.io/group-name':'pg-a',"
         "'ncclguard.io/nodes':'2'},'ownerReferences':[{'name':'j',"
         "'controller':true}]},'spec':{'subdomain':'j'}}",
         MN_GANG, "Volcano PodGroup", "volcano:pg-a",
         "metadata.labels['batch.kubernetes.io/job-completion-index']",
         "j-0.j"},
        {"Volcano's own annotation key",
         "{'metadata':{'labels':{'batch.kubernetes.io/job-completion-index':"
         "'0'},'annotations':{'scheduling.volcano.sh/group-name':'pg-b',"
         "'ncclguard.io/nodes':'2'},'ownerReferences':[{'name':'j',"
         "'controller':true}]},'spec':{'subdomain':'j'}}",
         MN_GANG, "Volcano PodGroup", "volcano:pg-b", NULL, "j-0.j"},
        {"KAI PodGroup annotation",
         "{'metadata':{'labels':{'batch.kubernetes.io/job-completion-index':"
         "'3'},'annotations':{'pod-group-name':'pg-kai',"
         "'ncclguard.io/nodes':'4'},'ownerReferences':[{'name':'k',"
         "'controller':true}]},'spec':{'subdomain':'k'}}",
         MN_GANG, "KAI PodGroup", "kai:pg-kai", NULL, "k-0.k"},
        {"a gang without an index label stays single-pod",
         "{'metadata':{'annotations':{'pod-group-name':'pg'}},'spec':{}}",
         MN_NONE, "without a node rank", NULL, NULL, NULL},
        {"an operator's own variables win over its gang",
         "{'metadata':{'labels':{'leaderworkerset.sigs.k8s.io/name':'v'},"
         "'annotations':{'pod-group-name':'pg'}},'spec':{}}",
         MN_LWS, "label leaderworkerset.sigs.k8s.io/name", NULL, NULL, NULL},
        {"a name that is not a DNS name is no gang",
         "{'metadata':{'annotations':{'pod-group-name':'a b'}},'spec':{}}",
         MN_NONE, "no job operator's labels", NULL, NULL, NULL},
    };
    const struct settings *s = policy_defaults(pol);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *pod = J(cases[i].pod), *env = json_array();
        struct jobmember m;
        char why[200] = "";
        int rc;

        jobmember_detect(pod, NULL, NULL, s, &m);
        if ((int)m.kind != (int)cases[i].kind ||
            strstr(m.why, cases[i].why) == NULL)
            fprintf(stderr, "case %s: kind %d, note \"%s\"\n", cases[i].what,
                    m.kind, m.why);
        CHECK_INT(m.kind, cases[i].kind);
        CHECK(strstr(m.why, cases[i].why) != NULL);
        rc = jobmember_env(&m, pod, s, env, why, sizeof(why));
        CHECK_INT(rc, 0);
        if (cases[i].job != NULL) {
            CHECK_STR(env_get(env, "NCCLGUARD_JOB_ID"), cases[i].job);
            CHECK_STR(env_get(env, "NCCLGUARD_LEADER_ADDR"), cases[i].leader);
            CHECK(env_get(env, "NCCLGUARD_NNODES") != NULL);
            CHECK(env_get(env, "NCCLGUARD_NODE_RANK") != NULL);
        }
        if (cases[i].rank != NULL)
            CHECK_STR(env_get(env, "NCCLGUARD_NODE_RANK"), cases[i].rank);
        if (m.kind != MN_GANG)
            CHECK(env_get(env, "NCCLGUARD_NODE_RANK") == NULL);
        json_decref(env);
        json_decref(pod);
    }
}

/* A gang whose pods do not name node rank 0 cannot join, and says why. */
static void
test_gang_without_leader(void)
{
    json_t *pod =
        J("{'metadata':{'labels':{'batch.kubernetes.io/job-completion-index':"
          "'0'},'annotations':{'pod-group-name':'pg','ncclguard.io/nodes':"
          "'2'}},'spec':{}}");
    json_t *env = json_array();
    struct jobmember m;
    char why[200] = "";

    jobmember_detect(pod, NULL, NULL, policy_defaults(pol), &m);
    CHECK_INT(m.kind, MN_GANG);
    CHECK_INT(
        jobmember_env(&m, pod, policy_defaults(pol), env, why, sizeof(why)), 1);
    CHECK(strstr(why, "spec.subdomain") != NULL);
    json_decref(env);
    json_decref(pod);
}

/* In a dry run the workload stands in for the index label and the owner:
 * an Indexed Job's template, or a StatefulSet's. */
static void
test_gang_dry_run(void)
{
    json_t *tmpl = J("{'metadata':{'annotations':{'ncclguard.io/nodes':'2'}},"
                     "'spec':{'subdomain':'svc','workloadRef':{'name':'wl',"
                     "'podGroup':'g'}}}");
    json_t *job = J("{'apiVersion':'batch/v1','kind':'Job','metadata':{"
                    "'name':'train'},'spec':{'completionMode':'Indexed'}}");
    json_t *nonidx = J("{'apiVersion':'batch/v1','kind':'Job','metadata':{"
                       "'name':'train'},'spec':{}}");
    json_t *sts = J("{'apiVersion':'apps/v1','kind':'StatefulSet','metadata':"
                    "{'name':'db'},'spec':{'serviceName':'db-hl'}}");
    json_t *env = json_array();
    struct jobmember m;
    char why[200] = "";

    jobmember_detect(tmpl, NULL, job, policy_defaults(pol), &m);
    CHECK_INT(m.kind, MN_GANG);
    CHECK_STR(m.leader, "train-0.svc");
    CHECK_INT(
        jobmember_env(&m, tmpl, policy_defaults(pol), env, why, sizeof(why)),
        0);
    CHECK_STR(env_get(env, "NCCLGUARD_NODE_RANK"),
              "metadata.labels['batch.kubernetes.io/job-completion-index']");
    jobmember_detect(tmpl, NULL, nonidx, policy_defaults(pol), &m);
    CHECK_INT(m.kind, MN_NONE);
    jobmember_detect(tmpl, NULL, sts, policy_defaults(pol), &m);
    CHECK_INT(m.kind, MN_GANG);
    CHECK_STR(m.leader, "db-0.db-hl");
    json_decref(env);
    json_decref(tmpl);
    json_decref(job);
    json_decref(nonidx);
    json_decref(sts);
}

/* The job token: HMAC-SHA256 of the job id (RFC 4231 test case 2 checks
 * the primitive), the same for every pod of a job, and only where the
 * webhook has a key and knows the id's value. */
static void
test_token(void)
{
    static const char key[] = "an-example-key-of-at-least-32-bytes!!";
    char tok[65], tok2[65];
    json_t *pod =
        J("{'metadata':{'labels':{'jobset.sigs.k8s.io/jobset-name':'t',"
          "'jobset.sigs.k8s.io/jobset-uid':'uid-7'},'annotations':{"
          "'ncclguard.io/nodes':'2'}},'spec':{}}");
    json_t *lws = J("{'metadata':{'labels':{"
                    "'leaderworkerset.sigs.k8s.io/name':'v'}},'spec':{}}");
    json_t *env;
    struct jobmember m;
    char why[200] = "";

    CHECK_INT(jobmember_token((const unsigned char *)"Jefe", 4,
                              "what do ya want for nothing?", tok),
              0);
    CHECK_STR(
        tok,
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    CHECK_INT(
        jobmember_token((const unsigned char *)key, strlen(key), "uid-7", tok),
        0);
    CHECK_INT(
        jobmember_token((const unsigned char *)key, strlen(key), "uid-8", tok2),
        0);
    CHECK(strcmp(tok, tok2) != 0);

    /* No key: no token. */
    unsetenv(JM_TOKEN_KEY_ENV);
    env = json_array();
    jobmember_detect(pod, NULL, NULL, policy_defaults(pol), &m);
    CHECK_INT(
        jobmember_env(&m, pod, policy_defaults(pol), env, why, sizeof(why)), 0);
    CHECK(env_get(env, "NCCLGUARD_JOB_TOKEN") == NULL);
    json_decref(env);
    /* A key: the token of the JobSet's uid, which every pod carries. */
    setenv(JM_TOKEN_KEY_ENV, key, 1);
    env = json_array();
    CHECK_INT(
        jobmember_env(&m, pod, policy_defaults(pol), env, why, sizeof(why)), 0);
    CHECK_STR(env_get(env, "NCCLGUARD_JOB_TOKEN"), tok);
    json_decref(env);
    /* LWS's group key comes from LWS's own webhook: no token over it. */
    env = json_array();
    jobmember_detect(lws, NULL, NULL, policy_defaults(pol), &m);
    CHECK_INT(
        jobmember_env(&m, lws, policy_defaults(pol), env, why, sizeof(why)), 0);
    CHECK(env_get(env, "NCCLGUARD_JOB_TOKEN") == NULL);
    json_decref(env);
    /* A key too short to be one is refused, loudly. */
    setenv(JM_TOKEN_KEY_ENV, "short", 1);
    env = json_array();
    jobmember_detect(pod, NULL, NULL, policy_defaults(pol), &m);
    CHECK_INT(
        jobmember_env(&m, pod, policy_defaults(pol), env, why, sizeof(why)), 1);
    CHECK(strstr(why, "shorter than 32 bytes") != NULL);
    json_decref(env);
    unsetenv(JM_TOKEN_KEY_ENV);
    json_decref(pod);
    json_decref(lws);
}

/* ringCheck.minNetBusBandwidthGBps reaches the check as --min-busbw-net,
 * for pods that join a multi-node check only. */
static void
test_min_busbw_net(void)
{
    struct policy *p =
        fixture_policy(POLICY_HEAD "defaults:\n  ringCheck:\n"
                                   "    minNetBusBandwidthGBps: 25\n");
    static const char *const pods[2] = {
        "{'metadata':{'name':'w','labels':{"
        "'leaderworkerset.sigs.k8s.io/name':'v'}},'spec':{'containers':[{"
        "'name':'c','env':[{'name':'LWS_LEADER_ADDRESS','value':'v-0.v'},"
        "{'name':'LWS_GROUP_SIZE','value':'2'},{'name':'LWS_WORKER_INDEX',"
        "'value':'1'}],'resources':{'limits':{'nvidia.com/gpu':8}}}]}}",
        "{'metadata':{'name':'s'},'spec':{'containers':[{'name':'c',"
        "'resources':{'limits':{'nvidia.com/gpu':8}}}]}}",
    };

    for (int i = 0; i < 2; i++) {
        json_t *pod = J(pods[i]);
        struct mutate_result r;
        char *text;

        CHECK_INT(mutate_pod(pod, "ml", p, NULL, &r), 0);
        text = json_dumps(r.patch, JSON_COMPACT);
        CHECK(text != NULL);
        if (text != NULL) {
            CHECK((strstr(text, "\"--min-busbw-net\",\"25\"") != NULL) ==
                  (i == 0));
            CHECK(strstr(text, "--multi-node") != NULL || i == 1);
        }
        free(text);
        mutate_result_release(&r);
        json_decref(pod);
    }
    policy_free(p);
}

int
main(void)
{
    pol = fixture_policy(POLICY_HEAD);
    test_gangs();
    test_gang_without_leader();
    test_gang_dry_run();
    test_token();
    test_min_busbw_net();
    policy_free(pol);
    return harness_finish();
}
