/* Fixtures shared by the server-side unit tests: policies from inline YAML,
 * pods from inline JSON (single quotes stand for double quotes), and
 * checks on mutation results. */
#ifndef NCCLGUARD_SERVER_FIXTURES_H
#define NCCLGUARD_SERVER_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "admission/mutate.h"
#include "admission/patch.h"
#include "harness.h"
#include "policy/policy.h"

#define POLICY_HEAD "apiVersion: ncclguard.io/v1alpha1\nkind: Policy\n"

/* Loads a policy from YAML text; aborts on error (a broken fixture). */
static inline struct policy *
fixture_policy(const char *yaml)
{
    struct ng_error err;
    struct policy *p;

    ng_error_clear(&err);
    p = policy_load(yaml, strlen(yaml), "fixture.yaml", &err);
    if (p == NULL) {
        fprintf(stderr, "fixture policy: %d:%d: %s\n%s\n", err.line, err.col,
                err.msg, yaml);
        abort();
    }
    return p;
}

/* Parses JSON written with ' for ". Returns an owned value; aborts on a
 * broken fixture. */
static inline json_t *
J(const char *text)
{
    size_t n = strlen(text);
    char *buf = malloc(n + 1);
    json_error_t jerr;
    json_t *v;

    if (buf == NULL)
        abort();
    for (size_t i = 0; i <= n; i++)
        buf[i] = text[i] == '\'' ? '"' : text[i];
    v = json_loads(buf, JSON_DECODE_ANY, &jerr);
    if (v == NULL) {
        fprintf(stderr, "fixture JSON: %s at %d:%d\n%s\n", jerr.text, jerr.line,
                jerr.column, buf);
        abort();
    }
    free(buf);
    return v;
}

/* Every warning is at most 120 bytes and starts with "ncclguard: ". */
static inline void
check_warnings_form(const json_t *warnings)
{
    size_t i;
    json_t *w;

    CHECK(json_is_array(warnings));
    json_array_foreach(warnings, i, w)
    {
        const char *s = json_string_value(w);

        CHECK(s != NULL);
        if (s == NULL)
            continue;
        CHECK(strlen(s) <= 120);
        CHECK(strncmp(s, "ncclguard: ", 11) == 0);
        {
            /* json_string() accepts valid UTF-8 only. */
            json_t *copy = json_string(s);

            CHECK(copy != NULL);
            json_decref(copy);
        }
    }
}

/* Whether some warning contains needle. */
static inline int
warnings_have(const json_t *warnings, const char *needle)
{
    size_t i;
    json_t *w;

    json_array_foreach(warnings, i, w)
    {
        if (strstr(json_string_value(w), needle) != NULL)
            return 1;
    }
    return 0;
}

/* The pod with the result's patch applied (owned), or NULL. */
static inline json_t *
patched_copy(const json_t *pod, const struct mutate_result *r)
{
    json_t *copy = json_deep_copy(pod);
    struct ng_error err;

    if (patch_apply(&copy, r->patch, &err) != 0) {
        fprintf(stderr, "patch does not apply: %s\n", err.msg);
        json_decref(copy);
        return NULL;
    }
    return copy;
}

/* Value at a JSON pointer as a string, or NULL. */
static inline const char *
str_at(json_t *doc, const char *pointer)
{
    return json_string_value(patch_pointer_get(doc, pointer));
}

#endif
