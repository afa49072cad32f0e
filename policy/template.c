/* Address templates of the ring check (ringCheck.leaderAddress,
 * ringCheck.nodes): the reader of their pieces, policy_template_next(). */
#include "policy/policy.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* A label or annotation key: [prefix/]name of letters, digits, "-", "_",
 * "." (Kubernetes' qualified name, length checked by the apiserver). An
 * env name: no "=", no space, no braces. */
static bool
template_key_ok(enum policy_template_kind k, const char *s, size_t len)
{
    size_t slashes = 0;

    if (len == 0 || len > 317)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (k == POLICY_TMPL_ENV) {
            if (c == '=' || c == '$' || c == '(' || c == ')' || isspace(c) ||
                !isprint(c))
                return false;
            continue;
        }
        if (c == '/') {
            slashes++;
            continue;
        }
        if (!isalnum(c) && c != '-' && c != '_' && c != '.')
            return false;
    }
    return slashes <= 1 && s[0] != '/' && s[len - 1] != '/';
}

int
policy_template_next(const char **cur, struct policy_template_piece *out,
                     char *why, size_t why_len)
{
    static const struct {
        const char *name;
        enum policy_template_kind kind;
    } refs[] = {{"label:", POLICY_TMPL_LABEL},
                {"annotation:", POLICY_TMPL_ANNOTATION},
                {"env:", POLICY_TMPL_ENV},
                {"namespace", POLICY_TMPL_NAMESPACE}};
    const char *s = *cur, *close;
    size_t n;

    if (*s == '\0')
        return 0;
    if (*s != '{') {
        n = strcspn(s, "{}$");
        if (n == 0) {
            snprintf(why, why_len,
                     "\"%c\" outside a reference at \"%.40s\" (references are "
                     "{label:KEY}, {annotation:KEY}, {env:NAME}, {namespace})",
                     *s, s);
            return -1;
        }
        out->kind = POLICY_TMPL_TEXT;
        out->s = s;
        out->len = n;
        *cur = s + n;
        return 1;
    }
    close = strchr(s, '}');
    if (close == NULL) {
        snprintf(why, why_len, "unclosed \"{\" at \"%.40s\"", s);
        return -1;
    }
    for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
        size_t k = strlen(refs[i].name);
        const char *key = s + 1 + k;

        if (strncmp(s + 1, refs[i].name, k) != 0)
            continue;
        if (refs[i].kind == POLICY_TMPL_NAMESPACE) {
            if (key != close)
                continue;
        } else if (!template_key_ok(refs[i].kind, key, (size_t)(close - key))) {
            snprintf(why, why_len, "bad key in \"%.*s\"",
                     (int)(close - s + 1 > 60 ? 60 : close - s + 1), s);
            return -1;
        }
        out->kind = refs[i].kind;
        out->s = key;
        out->len = (size_t)(close - key);
        *cur = close + 1;
        return 1;
    }
    snprintf(why, why_len,
             "unknown reference \"%.*s\"; expected {label:KEY}, "
             "{annotation:KEY}, {env:NAME} or {namespace}",
             (int)(close - s + 1 > 60 ? 60 : close - s + 1), s);
    return -1;
}
