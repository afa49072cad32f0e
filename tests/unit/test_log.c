/* Unit tests for server/log: one JSON object per line, levels, fields. */
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

    /* Pre-formatted members go after the fields, one valid object. */
    f = json_pack("{s:s}", "uid", "u-2");
    log_fields_tail_write(LOG_INFO, "admission", f,
                          "\"status\":200,\"duration_us\":41");
    json_decref(f);
    drain(p[0], buf, sizeof(buf));
    j = json_loads(buf, 0, &je);
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_object_get(j, "uid")), "u-2");
    CHECK_INT(json_integer_value(json_object_get(j, "status")), 200);
    CHECK_INT(json_integer_value(json_object_get(j, "duration_us")), 41);
    json_decref(j);
    log_fields_tail_write(LOG_INFO, "no fields", NULL, "\"n\":1");
    f = json_object();
    log_fields_tail_write(LOG_INFO, "empty", f, NULL);
    json_decref(f);
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
                         "empty") == 0);
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

    close(p[0]);
    close(p[1]);
    return harness_finish();
}
