/* Unit tests for server/log: one JSON object per line, levels, fields. */
#include "server/log.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* Reads everything written to the pipe so far. */
static size_t
drain(int fd, char *buf, size_t n)
{
    ssize_t got = read(fd, buf, n - 1);
    if (got < 0)
        got = 0;
    buf[got] = '\0';
    return (size_t)got;
}

/* Reads what the lines wrote to f's descriptor into a new buffer (*len
 * its size), then empties the file for the next line. Only the descriptor
 * is used: stdio's idea of the offset does not follow write(2). */
static char *
slurp(FILE *f, size_t *len)
{
    int fd = fileno(f);
    off_t n = lseek(fd, 0, SEEK_END);
    char *b;
    ssize_t got;

    *len = 0;
    if (n < 0 || (b = malloc((size_t)n + 1)) == NULL)
        return NULL;
    while (*len < (size_t)n &&
           (got = pread(fd, b + *len, (size_t)n - *len, (off_t)*len)) > 0)
        *len += (size_t)got;
    b[*len] = '\0';
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
        CHECK(0);
    return b;
}

/* A string of n bytes made of the UTF-8 character ch, repeated. */
static char *
repeat(const char *ch, size_t n)
{
    size_t k = strlen(ch);
    char *s = malloc(n + 1);

    for (size_t i = 0; i + k <= n; i += k)
        memcpy(s + i, ch, k);
    s[n - n % k] = '\0';
    return s;
}

static bool
ends_with_ellipsis(const char *s)
{
    size_t n = strlen(s);
    return n >= 3 && memcmp(s + n - 3, "\xe2\x80\xa6", 3) == 0;
}

/*
 * Regression: a 3 MB uid, namespace or generateName was echoed whole into
 * the admission line. Each string is now cut at LOG_FIELD_MAX bytes on a
 * character boundary, marked with an ellipsis, and the line stays JSON.
 */
static void
test_caps(void)
{
    static const struct {
        const char *s;
        size_t len, max, want;
    } cuts[] = {
        {"abc", 3, 10, 3},               /* fits: kept whole */
        {"abcdefghijklmnop", 16, 10, 7}, /* 7 + 3 for the ellipsis */
        {"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 8, 6, 2},     /* not mid-"é" */
        {"\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 9, 8, 3}, /* whole "€" */
        {"\xf0\x9f\x98\x80\xf0\x9f\x98\x80", 8, 6, 0},
    };
    FILE *f = tmpfile();
    char *big_a = repeat("a", 3000000), *big_e = repeat("\xc3\xa9", 3000000);
    char *line;
    size_t len = 0;
    json_t *fields, *j, *arr;
    json_error_t je;
    const char *v;

    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
        CHECK_INT(log_cut_len(cuts[i].s, cuts[i].len, cuts[i].max),
                  cuts[i].want);
    if (f == NULL) {
        CHECK(0);
        return;
    }
    log_output_set(fileno(f));
    arr = json_array();
    for (int i = 0; i < 100; i++)
        json_array_append_new(arr, json_string("w"));
    fields = json_pack("{s:s,s:s,s:s,s:{s:s},s:o,s:i}", "uid", big_a,
                       "namespace", big_a, "generateName", big_e, "pod", "name",
                       big_a, "warnings", arr, "gpus", 8);
    log_fields_write(LOG_INFO, "admission", fields);
    line = slurp(f, &len);
    CHECK(line != NULL && len < 8192);
    j = line ? json_loads(line, 0, &je) : NULL;
    CHECK(j != NULL);
    v = json_string_value(json_object_get(j, "uid"));
    CHECK(v != NULL && strlen(v) == LOG_FIELD_MAX && ends_with_ellipsis(v));
    v = json_string_value(json_object_get(j, "namespace"));
    CHECK(v != NULL && strlen(v) == LOG_FIELD_MAX);
    /* 1,020 bytes of two-byte characters, then the ellipsis. */
    v = json_string_value(json_object_get(j, "generateName"));
    CHECK(v != NULL && strlen(v) == LOG_FIELD_MAX - 1 &&
          ends_with_ellipsis(v) && memcmp(v, big_e, strlen(v) - 3) == 0);
    v = json_string_value(json_object_get(json_object_get(j, "pod"), "name"));
    CHECK(v != NULL && strlen(v) == LOG_FIELD_MAX);
    CHECK_INT(json_array_size(json_object_get(j, "warnings")),
              LOG_ARRAY_MAX + 1);
    CHECK_STR(json_string_value(json_array_get(json_object_get(j, "warnings"),
                                               LOG_ARRAY_MAX)),
              "\xe2\x80\xa6 68 more");
    CHECK_INT(json_integer_value(json_object_get(j, "gpus")), 8);
    /* The caller's object is left as it was. */
    CHECK_INT(json_string_length(json_object_get(fields, "uid")), 3000000);
    json_decref(j);
    json_decref(fields);
    free(line);

    /* A formatted error cut by its buffer is cut between characters. */
    log_error_write(LOG_ERROR, "long", NULL, NULL, "%.2000s", big_e);
    line = slurp(f, &len);
    j = line ? json_loads(line, 0, &je) : NULL;
    CHECK(j != NULL);
    v = json_string_value(json_object_get(j, "error"));
    CHECK(v != NULL && ends_with_ellipsis(v) && strlen(v) <= 1023 + 3);
    json_decref(j);
    free(line);

    /* Members of a record go in whole up to LOG_MEMBERS_MAX bytes; past
     * it (a writer that forgot its caps) they are left out, counted. */
    {
        size_t n = LOG_MEMBERS_MAX;
        char *m = malloc(n + 2);

        memset(m, 'a', n + 1);
        memcpy(m, "\"k\":\"", 5);
        m[n - 1] = '"';
        m[n] = '"'; /* one byte more: the key's value ends there */
        log_members_write(LOG_INFO, "admission", m, n, "\"t\":1");
        line = slurp(f, &len);
        j = line ? json_loads(line, 0, &je) : NULL;
        CHECK(j != NULL &&
              json_string_length(json_object_get(j, "k")) == n - 6);
        CHECK(j != NULL && json_object_get(j, "members_dropped") == NULL);
        json_decref(j);
        free(line);
        m[n - 1] = 'a';
        log_members_write(LOG_INFO, "admission", m, n + 1, "\"t\":1");
        line = slurp(f, &len);
        CHECK(line != NULL && len < 200);
        j = line ? json_loads(line, 0, &je) : NULL;
        CHECK(j != NULL && json_object_get(j, "k") == NULL);
        CHECK_INT(json_integer_value(json_object_get(j, "members_dropped")),
                  n + 1);
        CHECK_INT(json_integer_value(json_object_get(j, "t")), 1);
        json_decref(j);
        free(line);
        free(m);
    }

    log_output_set(2);
    fclose(f);
    free(big_a);
    free(big_e);
}

/* The time of a line read back as milliseconds since the epoch, or -1
 * when the line has no time of the form 2026-11-30T12:00:00.123Z. */
static long long
line_ms(const char *line)
{
    const char *t = strstr(line, "\"time\":\"");
    struct tm tm;
    char *end;

    if (t == NULL)
        return -1;
    t += 8;
    memset(&tm, 0, sizeof(tm));
    end = strptime(t, "%Y-%m-%dT%H:%M:%S", &tm);
    if (end == NULL || end[0] != '.' || end[4] != 'Z' || end[5] != '"')
        return -1;
    for (int i = 1; i <= 3; i++)
        if (end[i] < '0' || end[i] > '9')
            return -1;
    return (long long)timegm(&tm) * 1000 + (end[1] - '0') * 100 +
           (end[2] - '0') * 10 + (end[3] - '0');
}

static long long
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Each line's time is the clock's when it was written, down to the
 * millisecond, across a change of second too: the date and time of day
 * are formatted once a second (server/log.c, format_time), and a kept
 * text that missed the change would repeat the second before. */
static void
test_time_follows_clock(int fd)
{
    char buf[1024];

    for (int round = 0; round < 3; round++) {
        long long before = now_ms(), at, after;
        struct timespec next;

        log_members_write(LOG_INFO, "tick", NULL, 0, NULL);
        after = now_ms();
        drain(fd, buf, sizeof(buf));
        at = line_ms(buf);
        CHECK(at >= before && at <= after);
        /* Sleep into the next second, 2 ms past its start. */
        next.tv_sec = 0;
        next.tv_nsec = (1000 - after % 1000 + 2) * 1000000L;
        nanosleep(&next, NULL);
    }
}

int
main(void)
{
    int p[2];
    char buf[8192];
    enum log_level lv = LOG_ERROR;
    json_t *j, *f;
    json_error_t je;

    CHECK_INT(log_level_parse("debug", &lv), 0);
    CHECK_INT(lv, LOG_DEBUG);
    CHECK_INT(log_level_parse("warning", &lv), 0);
    CHECK_INT(lv, LOG_WARN);
    CHECK_INT(log_level_parse("loud", &lv), -1);
    CHECK_INT(lv, LOG_WARN);
    CHECK_STR(log_level_name(LOG_ERROR), "error");

    if (pipe(p) != 0)
        return 1;
    log_output_set(p[1]);
    log_level_set(LOG_INFO);

    f = json_pack("{s:s,s:i,s:s,s:[s]}", "uid", "u-1", "gpus", 4, "msg",
                  "ignored", "injected", "envFrom");
    log_fields_write(LOG_INFO, "admission", f);
    json_decref(f);
    drain(p[0], buf, sizeof(buf));
    CHECK(strchr(buf, '\n') == buf + strlen(buf) - 1);
    j = json_loads(buf, 0, &je);
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_object_get(j, "level")), "info");
    CHECK_STR(json_string_value(json_object_get(j, "msg")), "admission");
    CHECK_STR(json_string_value(json_object_get(j, "uid")), "u-1");
    CHECK_INT(json_integer_value(json_object_get(j, "gpus")), 4);
    CHECK_INT(json_array_size(json_object_get(j, "injected")), 1);
    CHECK(strlen(json_string_value(json_object_get(j, "time"))) == 24);
    json_decref(j);

    /* Below the level: nothing written. */
    log_fields_write(LOG_DEBUG, "quiet", NULL);
    CHECK(!log_level_enabled(LOG_DEBUG));
    log_error_write(LOG_WARN, "reload failed", "path", "/etc/p.yaml",
                    "bad %s at %d", "indent", 3);
    drain(p[0], buf, sizeof(buf));
    CHECK(strstr(buf, "quiet") == NULL);
    j = json_loads(buf, 0, &je);
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_object_get(j, "level")), "warn");
    CHECK_STR(json_string_value(json_object_get(j, "path")), "/etc/p.yaml");
    CHECK_STR(json_string_value(json_object_get(j, "error")),
              "bad indent at 3");
    json_decref(j);

    /* Members and tail already in JSON: spliced as they are, in order, one
     * valid object. */
    {
        static const char rec[] = "\"uid\":\"u-2\",\"gpus\":2";
        const char *end;

        log_members_write(LOG_INFO, "admission", rec, strlen(rec),
                          "\"status\":200,\"duration_us\":41");
        drain(p[0], buf, sizeof(buf));
        j = json_loads(buf, 0, &je);
        CHECK(j != NULL);
        CHECK_STR(json_string_value(json_object_get(j, "uid")), "u-2");
        CHECK_INT(json_integer_value(json_object_get(j, "status")), 200);
        CHECK_INT(json_integer_value(json_object_get(j, "duration_us")), 41);
        json_decref(j);
        end = strstr(buf, "\"msg\":\"admission\",");
        CHECK(end != NULL &&
              strcmp(end, "\"msg\":\"admission\",\"uid\":\"u-2\",\"gpus\":2,"
                          "\"status\":200,\"duration_us\":41}\n") == 0);
    }
    /* len counts, not the NUL: a record need not end where it stops. */
    log_members_write(LOG_INFO, "no fields", NULL, 0, "\"n\":1");
    log_members_write(LOG_INFO, "empty", "\"k\":1,\"x\":2", 5, NULL);
    drain(p[0], buf, sizeof(buf));
    {
        char *nl = strchr(buf, '\n');
        CHECK(nl != NULL);
        if (nl != NULL) {
            *nl = '\0';
            j = json_loads(buf, 0, &je);
            CHECK(j != NULL &&
                  json_integer_value(json_object_get(j, "n")) == 1);
            json_decref(j);
            j = json_loads(nl + 1, 0, &je);
            CHECK(j != NULL &&
                  strcmp(json_string_value(json_object_get(j, "msg")),
                         "empty") == 0 &&
                  json_integer_value(json_object_get(j, "k")) == 1 &&
                  json_object_get(j, "x") == NULL);
            json_decref(j);
        }
    }

    /* A message that needs escaping is escaped. */
    log_fields_write(LOG_WARN, "say \"hi\"\n", NULL);
    drain(p[0], buf, sizeof(buf));
    j = json_loads(buf, 0, &je);
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_object_get(j, "msg")), "say \"hi\"\n");
    json_decref(j);

    /* Text that is not UTF-8 still yields one valid line. */
    log_error_write(LOG_ERROR, "odd", "path", "\xff\xfe", "x");
    drain(p[0], buf, sizeof(buf));
    j = json_loads(buf, 0, &je);
    CHECK(j != NULL);
    json_decref(j);

    test_time_follows_clock(p[0]);
    close(p[0]);
    close(p[1]);
    test_caps();
    return harness_finish();
}
