/* The policy loader's validation helpers: positioned diagnostics, the
 * did-you-mean, typed getters and the checks of single values. */
#include "policy/loader.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"
#include "contract/ncclenv.h"
#include "contract/wdspec.h"
#include "policy/quantity.h"

/* Adds a diagnostic at node n (no position when n is NULL). */
static void
diag_at(struct loader *L, enum diag_severity sev, const struct ynode *n,
        const char *fmt, va_list ap)
{
    char msg[300];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    diags_add(L->d, sev, n ? n->line : 0, n ? n->col : 0, "%s", msg);
}

void
pl_err(struct loader *L, const struct ynode *n, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    diag_at(L, DIAG_ERROR, n, fmt, ap);
    va_end(ap);
}

void
pl_warn(struct loader *L, const struct ynode *n, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    diag_at(L, DIAG_WARNING, n, fmt, ap);
    va_end(ap);
}

const char *
pl_closest(const char *word, const char *const *names)
{
    const char *best = NULL;
    size_t bestd = 99, best_real = 99;
    size_t limit = strlen(word) / 3 + 1;

    if (limit < 2)
        limit = 2;
    for (size_t i = 0; names[i] != NULL; i++) {
        size_t real = text_edit_distance(word, names[i]), dd = real;
        size_t lw = strlen(word), ln = strlen(names[i]);

        /* "timeout" for "timeoutSeconds", "maximum" for "max". */
        if (lw >= 3 && ln >= 3 &&
            strncasecmp(word, names[i], lw < ln ? lw : ln) == 0)
            dd = 1;
        /* Only the case differs: that key, not a shorter prefix of it
         * ("multiNodeTimeOut" is "multiNodeTimeout", not "multiNode"). */
        if (strcasecmp(word, names[i]) == 0)
            dd = 0;
        /* Between equals, the closer spelling ("multiNodeTimout" is
         * "multiNodeTimeout", whose prefix "multiNode" also matches). */
        if (dd < bestd || (dd == bestd && real < best_real)) {
            bestd = dd;
            best_real = real;
            best = names[i];
        }
    }
    return bestd <= limit ? best : NULL;
}

bool
pl_want_map(struct loader *L, const struct ynode *n, const char *what)
{
    if (n->kind == YNODE_MAP)
        return true;
    pl_err(L, n, "%s must be a mapping, got %s", what, ynode_type_name(n));
    return false;
}

bool
pl_want_text(struct loader *L, const struct ynode *n, const char *what)
{
    if (n->kind != YNODE_SCALAR || n->null_tag) {
        pl_err(L, n, "%s must be a string, got %s", what, ynode_type_name(n));
        return false;
    }
    if (n->len > POLICY_MAX_STRING || strlen(n->str) != n->len) {
        pl_err(L, n, "%s is longer than %d bytes or contains NUL", what,
               POLICY_MAX_STRING);
        return false;
    }
    return true;
}

bool
pl_get_bool(struct loader *L, const struct ynode *n, const char *what,
            bool *out)
{
    static const char *const t[] = {"true", "True", "TRUE"};
    static const char *const f[] = {"false", "False", "FALSE"};
    static const char *const yaml11[] = {
        "yes", "Yes", "YES", "no",  "No", "NO", "on", "On",
        "ON",  "off", "Off", "OFF", "y",  "Y",  "n",  "N"};

    if (n->kind == YNODE_SCALAR && n->plain) {
        for (size_t i = 0; i < 3; i++) {
            if (strcmp(n->str, t[i]) == 0) {
                *out = true;
                return true;
            }
            if (strcmp(n->str, f[i]) == 0) {
                *out = false;
                return true;
            }
        }
        for (size_t i = 0; i < sizeof(yaml11) / sizeof(yaml11[0]); i++) {
            if (strcmp(n->str, yaml11[i]) == 0) {
                pl_err(L, n,
                       "%s: \"%s\" is a boolean only in YAML 1.1; write "
                       "true or false",
                       what, n->str);
                return false;
            }
        }
    }
    if (n->kind == YNODE_SCALAR && !n->plain &&
        (strcmp(n->str, "true") == 0 || strcmp(n->str, "false") == 0)) {
        pl_err(L, n,
               "%s must be a boolean, got the quoted string \"%s\"; "
               "drop the quotes",
               what, n->str);
        return false;
    }
    pl_err(L, n, "%s must be a boolean (true or false), got %s", what,
           ynode_type_name(n));
    return false;
}

bool
pl_get_string(struct loader *L, const struct ynode *n, const char *what,
              char **out)
{
    char *s;

    if (!pl_want_text(L, n, what))
        return false;
    s = pl_strdup(L->p, n->str);
    if (s == NULL)
        return false;
    *out = s;
    return true;
}

/* A plain integer; reports a negative number specifically. */
bool
pl_get_int(struct loader *L, const struct ynode *n, const char *what,
           int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long v;

    if (n->kind != YNODE_SCALAR || n->null_tag || !n->plain) {
        pl_err(L, n, "%s must be an integer, got %s", what, ynode_type_name(n));
        return false;
    }
    errno = 0;
    v = strtoll(n->str, &end, 10);
    if (n->len == 0 || *end != '\0' || errno != 0 ||
        isspace((unsigned char)n->str[0])) {
        pl_err(L, n, "%s must be an integer, got \"%.40s\"", what, n->str);
        return false;
    }
    if (v < 0 && lo >= 0) {
        pl_err(L, n, "%s must not be negative, got %lld", what, v);
        return false;
    }
    if (v < lo || v > hi) {
        pl_err(L, n, "%s must be between %lld and %lld, got %lld", what,
               (long long)lo, (long long)hi, v);
        return false;
    }
    *out = v;
    return true;
}

bool
pl_get_number(struct loader *L, const struct ynode *n, const char *what,
              double *out)
{
    char *end;
    double v;

    if (n->kind != YNODE_SCALAR || n->null_tag || !n->plain) {
        pl_err(L, n, "%s must be a number, got %s", what, ynode_type_name(n));
        return false;
    }
    errno = 0;
    v = strtod(n->str, &end);
    if (n->len == 0 || *end != '\0' || errno != 0 || !isfinite(v) ||
        isspace((unsigned char)n->str[0])) {
        pl_err(L, n, "%s must be a number, got \"%.40s\"", what, n->str);
        return false;
    }
    if (v < 0) {
        pl_err(L, n, "%s must not be negative, got %s", what, n->str);
        return false;
    }
    *out = v;
    return true;
}

/* A Kubernetes quantity that must be a whole, non-negative byte count. */
bool
pl_get_bytes(struct loader *L, const struct ynode *n, const char *what,
             int64_t *out)
{
    struct quantity q;
    struct ng_error e;
    char canon[40];

    if (n->kind != YNODE_SCALAR || n->null_tag) {
        pl_err(L, n, "%s must be a quantity such as 4Gi, got %s", what,
               ynode_type_name(n));
        return false;
    }
    if (quantity_parse(n->str, n->len, &q, &e) != 0) {
        pl_err(L, n, "%s: %s", what, e.msg);
        return false;
    }
    if (q.negative) {
        pl_err(L, n, "%s must not be negative, got %s", what, n->str);
        return false;
    }
    if (q.saturated) {
        pl_err(L, n, "%s %s is larger than Kubernetes can represent", what,
               n->str);
        return false;
    }
    if (!q.integer) {
        size_t l = n->len;

        if (l > 1 && n->str[l - 1] == 'm') {
            snprintf(canon, sizeof(canon), "%.*sMi", (int)(l - 1), n->str);
            pl_err(L, n,
                   "%s %s is a thousandth-unit quantity (m = milli), not "
                   "whole bytes; did you mean %s?",
                   what, n->str, canon);
        } else {
            pl_err(L, n, "%s %s is not a whole number of bytes", what, n->str);
        }
        return false;
    }
    *out = q.value;
    return true;
}

bool
pl_get_enum(struct loader *L, const struct ynode *n, const char *what,
            const char *const *names, int *out)
{
    const char *hint;
    char list[200] = "";
    size_t used = 0;

    if (!pl_want_text(L, n, what))
        return false;
    for (int i = 0; names[i] != NULL; i++) {
        if (strcmp(names[i], n->str) == 0) {
            *out = i;
            return true;
        }
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
                                 i ? ", " : "", names[i]);
        if (used >= sizeof(list))
            used = sizeof(list) - 1;
    }
    hint = pl_closest(n->str, names);
    if (hint != NULL)
        pl_err(L, n,
               "%s must be one of %s, got \"%.40s\"; did you mean "
               "\"%s\"?",
               what, list, n->str, hint);
    else
        pl_err(L, n, "%s must be one of %s, got \"%.40s\"", what, list, n->str);
    return false;
}

typedef bool (*pl_check_fn)(struct loader *L, const struct ynode *n,
                            const char *what);

bool
pl_get_string_list(struct loader *L, const struct ynode *n, const char *what,
                   pl_check_fn check, char ***out, size_t *count)
{
    char **v;
    bool ok = true;

    if (n->kind == YNODE_SCALAR && n->null_tag) {
        *out = NULL;
        *count = 0;
        return true;
    }
    if (n->kind != YNODE_SEQ) {
        pl_err(L, n, "%s must be a list, got %s", what, ynode_type_name(n));
        return false;
    }
    if (n->n > POLICY_MAX_LIST) {
        pl_err(L, n, "%s has %zu entries, more than %d", what, n->n,
               POLICY_MAX_LIST);
        return false;
    }
    v = pl_alloc(L->p, (n->n + 1) * sizeof(char *));
    if (v == NULL)
        return false;
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *it = n->items[i];

        if (!pl_get_string(L, it, what, &v[i])) {
            ok = false;
            continue;
        }
        if (check != NULL && !check(L, it, what))
            ok = false;
        for (size_t j = 0; j < i && ok; j++) {
            if (v[j] != NULL && strcmp(v[j], v[i]) == 0) {
                pl_err(L, it, "%s lists \"%.60s\" twice", what, v[i]);
                ok = false;
            }
        }
    }
    if (!ok)
        return false;
    *out = v;
    *count = n->n;
    return true;
}

/* ---- field validators --------------------------------------------- */

bool
pl_check_resource_name(struct loader *L, const struct ynode *n,
                       const char *what)
{
    const char *s = n->str;
    const char *slash = strchr(s, '/');

    for (const char *c = s; *c; c++) {
        if (!(isalnum((unsigned char)*c) || *c == '-' || *c == '.' ||
              *c == '_' || *c == '/')) {
            pl_err(L, n,
                   "%s: \"%.60s\" is not a resource name (character "
                   "0x%02x)",
                   what, s, (unsigned char)*c);
            return false;
        }
    }
    if (slash == NULL || slash == s || slash[1] == '\0' ||
        strchr(slash + 1, '/') != NULL) {
        pl_err(L, n,
               "%s: \"%.60s\" is not an extended resource name "
               "(expected domain/name, e.g. nvidia.com/gpu)",
               what, s);
        return false;
    }
    return true;
}

bool
pl_check_dns_name(struct loader *L, const struct ynode *n, const char *what)
{
    const char *s = n->str;
    size_t len = n->len;

    if (len == 0 || len > 253) {
        pl_err(L, n, "%s must be 1 to 253 characters", what);
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '.')) {
            pl_err(L, n,
                   "%s \"%.60s\" is not a valid Kubernetes object "
                   "name (lower-case letters, digits, '-' and '.')",
                   what, s);
            return false;
        }
    }
    if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[len - 1])) {
        pl_err(L, n, "%s \"%.60s\" must start and end with a letter or digit",
               what, s);
        return false;
    }
    return true;
}

/* Capabilities Pod Security "baseline" lets a container add. */
static const char *const baseline_caps[] = {
    "AUDIT_WRITE", "CHOWN",  "DAC_OVERRIDE",     "FOWNER",  "FSETID",
    "KILL",        "MKNOD",  "NET_BIND_SERVICE", "SETFCAP", "SETGID",
    "SETPCAP",     "SETUID", "SYS_CHROOT",       NULL};

bool
pl_check_capability(struct loader *L, const struct ynode *n, const char *what)
{
    const char *s = n->str;
    bool baseline = false;

    if (n->len == 0) {
        pl_err(L, n, "%s: empty capability name", what);
        return false;
    }
    for (const char *c = s; *c; c++) {
        if (!((*c >= 'A' && *c <= 'Z') || *c == '_' ||
              (*c >= '0' && *c <= '9'))) {
            pl_err(L, n,
                   "%s: \"%.40s\" is not a capability name (upper "
                   "case, e.g. IPC_LOCK)",
                   what, s);
            return false;
        }
    }
    if (strncmp(s, "CAP_", 4) == 0) {
        pl_err(L, n,
               "%s: write \"%s\" without the CAP_ prefix, as "
               "Kubernetes expects",
               what, s + 4);
        return false;
    }
    for (size_t i = 0; baseline_caps[i] != NULL; i++)
        baseline = baseline || strcmp(baseline_caps[i], s) == 0;
    if (!baseline)
        pl_warn(L, n,
                "%s: adding %s makes GPU pods fail Pod Security "
                "\"baseline\" in namespaces that enforce it",
                what, s);
    return true;
}

bool
pl_check_image(struct loader *L, const struct ynode *n, const char *what)
{
    if (n->len == 0) {
        pl_err(L, n, "%s must not be empty", what);
        return false;
    }
    for (const char *c = n->str; *c; c++) {
        if (isspace((unsigned char)*c) || !isprint((unsigned char)*c)) {
            pl_err(L, n,
                   "%s \"%.60s\" contains whitespace or control "
                   "characters",
                   what, n->str);
            return false;
        }
    }
    return true;
}

bool
pl_check_cpu_quantity(struct loader *L, const struct ynode *n, const char *what)
{
    struct quantity q;
    struct ng_error e;

    if (quantity_parse(n->str, n->len, &q, &e) != 0) {
        pl_err(L, n, "%s: %s", what, e.msg);
        return false;
    }
    if (q.negative) {
        pl_err(L, n, "%s must not be negative, got %s", what, n->str);
        return false;
    }
    return true;
}

/* Runs the NCCL catalog on NAME=VALUE; errors and warnings at n. */
bool
pl_check_nccl(struct loader *L, const struct ynode *n, const char *name,
              const char *value)
{
    struct ncclenv_finding f;

    switch (ncclenv_check(name, value, &f)) {
    case NCCLENV_OK:
        return true;
    case NCCLENV_WARNING:
        pl_warn(L, n, "%s", f.msg);
        return true;
    case NCCLENV_ERROR:
        pl_err(L, n, "%s", f.msg);
        return false;
    }
    return true;
}

bool
pl_check_env_name(struct loader *L, const struct ynode *n, const char *what)
{
    if (n->len == 0) {
        pl_err(L, n, "%s: empty variable name", what);
        return false;
    }
    for (const char *c = n->str; *c; c++) {
        if (*c == '=' || !isprint((unsigned char)*c) ||
            isspace((unsigned char)*c)) {
            pl_err(L, n,
                   "%s: \"%.60s\" is not a valid environment variable "
                   "name",
                   what, n->str);
            return false;
        }
    }
    return true;
}

/* Checks an address template (see policy_template_next()); errors at n. */
bool
pl_check_template(struct loader *L, const struct ynode *n, const char *what)
{
    const char *cur = n->str;
    struct policy_template_piece piece;
    char why[160];
    int rc;

    if (!pl_want_text(L, n, what))
        return false;
    if (n->len == 0) {
        pl_err(L, n, "%s must not be empty", what);
        return false;
    }
    while ((rc = policy_template_next(&cur, &piece, why, sizeof(why))) > 0)
        ;
    if (rc < 0) {
        pl_err(L, n, "%s: %s", what, why);
        return false;
    }
    return true;
}

/* A duration such as 60s within [lo, hi] ms, with the agent's parser. */
/* ", such as 30s" for the same duration in a unit the agent knows, for
 * "30sec", "2min", "2h"; "" when the unit is not one of those. */
static const char *
duration_suggest(const char *text, size_t digits, char *buf, size_t n)
{
    static const struct {
        const char *unit;
        const char *to;
        int times;
    } alt[] = {
        {"sec", "s", 1},     {"secs", "s", 1},    {"second", "s", 1},
        {"seconds", "s", 1}, {"min", "m", 1},     {"mins", "m", 1},
        {"minute", "m", 1},  {"minutes", "m", 1}, {"h", "m", 60},
        {"hr", "m", 60},     {"hour", "m", 60},   {"hours", "m", 60},
        {"msec", "ms", 1},   {"millis", "ms", 1},
    };
    const char *u = text + digits;
    long long v = 0;

    for (size_t i = 0; i < digits && v < 1000000; i++)
        v = v * 10 + (text[i] - '0');
    for (size_t i = 0; i < sizeof(alt) / sizeof(alt[0]); i++)
        if (strcmp(u, alt[i].unit) == 0) {
            snprintf(buf, n, ", such as %lld%s", v * alt[i].times, alt[i].to);
            return buf;
        }
    return "";
}

bool
pl_get_duration(struct loader *L, const struct ynode *n, const char *what,
                int64_t lo, int64_t hi, int64_t *out)
{
    struct ng_error e;
    int64_t ms;

    if (!pl_want_text(L, n, what))
        return false;
    if (wd_duration_parse(n->str, n->len, &ms, &e) != 0) {
        size_t d = 0;
        char sugg[64];

        /* A number with a unit the agent does not know ("30sec",
         * "2min", "1h"): name that unit and the valid ones. */
        while (d < n->len && n->str[d] >= '0' && n->str[d] <= '9')
            d++;
        if (d > 0 && d < n->len && isalpha((unsigned char)n->str[d]))
            pl_err(L, n,
                   "%s: unit \"%.10s\" in \"%.40s\" is not one of ms, s, "
                   "m (milliseconds, seconds, minutes)%s",
                   what, n->str + d, n->str,
                   duration_suggest(n->str, d, sugg, sizeof(sugg)));
        else
            pl_err(L, n, "%s: %s", what, e.msg);
        return false;
    }
    if (ms < lo || ms > hi) {
        pl_err(L, n, "%s must be between %lldms and %llds, got %s", what,
               (long long)lo, (long long)hi / 1000, n->str);
        return false;
    }
    *out = ms;
    return true;
}

/* A bound in the largest of m, s, ms that writes it whole. */
const char *
pl_duration_text(int64_t ms, char *buf, size_t n)
{
    if (ms % Q_MINUTE_MS == 0)
        snprintf(buf, n, "%lldm", (long long)(ms / Q_MINUTE_MS));
    else if (ms % 1000 == 0)
        snprintf(buf, n, "%llds", (long long)(ms / 1000));
    else
        snprintf(buf, n, "%lldms", (long long)ms);
    return buf;
}

/* A duration within [lo, hi] ms, the bounds written in minutes. */
bool
pl_get_duration_minutes(struct loader *L, const struct ynode *n,
                        const char *what, int64_t lo, int64_t hi, int64_t *out)
{
    char a[32], b[32];
    int64_t ms;

    if (!pl_get_duration(L, n, what, 0, INT64_MAX, &ms))
        return false;
    if (ms < lo || ms > hi) {
        pl_err(L, n, "%s must be between %s and %s, got %s", what,
               pl_duration_text(lo, a, sizeof(a)),
               pl_duration_text(hi, b, sizeof(b)), n->str);
        return false;
    }
    *out = ms;
    return true;
}
