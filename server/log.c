/* JSON log lines: one object per line on stderr, with time, level and msg. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;
static int out_fd = 2;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int
log_level_parse(const char *s, enum log_level *out)
{
    for (int i = LOG_DEBUG; i <= LOG_ERROR; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    if (strcmp(s, "warning") == 0) {
        *out = LOG_WARN;
        return 0;
    }
    return -1;
}

const char *
log_level_name(enum log_level level)
{
    if ((int)level < LOG_DEBUG || level > LOG_ERROR)
        return "info";
    return level_names[level];
}

void
log_level_set(enum log_level level)
{
    min_level = level;
}

bool
log_level_enabled(enum log_level level)
{
    return level >= min_level;
}

void
log_output_set(int fd)
{
    out_fd = fd;
}

/* Writes all of buf, retrying short writes and EINTR; errors are dropped
 * because there is nowhere left to report them. */
static void
write_all(const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(out_fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

/* RFC 3339 UTC time with milliseconds: 2026-11-30T12:00:00.123Z. */
static void
format_time(char *buf, size_t n)
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + k, n - k, ".%03dZ", (int)(ts.tv_nsec / 1000000L) % 1000);
}

void
log_fields_write(enum log_level level, const char *msg, const json_t *fields)
{
    char stamp[40];
    json_t *line = NULL;
    char *text = NULL;
    const char *key;
    json_t *value;

    if (!log_level_enabled(level))
        return;
    format_time(stamp, sizeof(stamp));
    line = json_object();
    if (line == NULL)
        goto fail;
    if (json_object_set_new(line, "time", json_string(stamp)) != 0 ||
        json_object_set_new(line, "level",
                            json_string(log_level_name(level))) != 0 ||
        json_object_set_new(line, "msg", json_string(msg ? msg : "")) != 0)
        goto fail;
    if (fields != NULL && json_is_object(fields)) {
        /* json_object_foreach wants a non-const object; it only reads. */
        json_t *f = (json_t *)fields;
        json_object_foreach(f, key, value)
        {
            if (strcmp(key, "time") == 0 || strcmp(key, "level") == 0 ||
                strcmp(key, "msg") == 0)
                continue;
            if (json_object_set(line, key, value) != 0)
                goto fail;
        }
    }
    text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text == NULL)
        goto fail;
    {
        size_t len = strlen(text);
        /* Append the newline in place of the terminating NUL. */
        text[len] = '\n';
        write_all(text, len + 1);
    }
    free(text);
    json_decref(line);
    return;
fail:
    free(text);
    json_decref(line);
    {
        char fallback[200];
        int n = snprintf(fallback, sizeof(fallback),
                         "{\"time\":\"%s\",\"level\":\"error\",\"msg\":"
                         "\"log line could not be built\"}\n",
                         stamp);
        if (n > 0 && (size_t)n < sizeof(fallback))
            write_all(fallback, (size_t)n);
    }
}

void
log_error_write(enum log_level level, const char *msg, const char *key,
                const char *value, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    json_t *fields;

    if (!log_level_enabled(level))
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    fields = json_object();
    if (fields != NULL) {
        if (key != NULL)
            json_object_set_new(fields, key, json_string(value ? value : ""));
        json_object_set_new(fields, "error", json_string(text));
    }
    log_fields_write(level, msg, fields);
    json_decref(fields);
}
