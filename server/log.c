/* JSON log lines: one object per line on stderr, with time, level and msg. */
#include "server/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "admission/jsonmem.h"
#include "base/text.h"

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

/* True when fields has a key that the fixed part of the line owns. */
static bool
has_reserved_key(const json_t *fields)
{
    return json_object_get(fields, "time") != NULL ||
           json_object_get(fields, "level") != NULL ||
           json_object_get(fields, "msg") != NULL;
}

/* True when s can go between JSON quotes as it is. */
static bool
plain_string(const char *s)
{
    for (; *s; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20 ||
            (unsigned char)*s >= 0x7f)
            return false;
    return true;
}

/*
 * The fixed part of a line, {"time":...,"level":...,"msg":...}, into a new
 * buffer. Messages are nearly always constants from this program, written
 * directly; anything else goes through jansson for escaping.
 */
static char *
format_head(const char *stamp, enum log_level level, const char *msg)
{
    json_t *head;
    char *text;

    if (plain_string(msg)) {
        size_t n = strlen(msg) + 80;
        text = malloc(n);
        if (text != NULL)
            snprintf(text, n,
                     "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}", stamp,
                     log_level_name(level), msg);
        return text;
    }
    head = json_pack("{s:s,s:s,s:s}", "time", stamp, "level",
                     log_level_name(level), "msg", msg);
    if (head == NULL)
        return NULL;
    text = json_dumps(head, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(head);
    return text;
}

size_t
log_cut_len(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    return text_utf8_prefix(s, len, max >= 3 ? max - 3 : 0);
}

/* True when v holds a string or an array past the caps. */
static bool
over_caps(const json_t *v, int depth)
{
    const char *key;
    json_t *m;
    size_t i;

    if (depth > 16)
        return false;
    if (json_is_string(v))
        return json_string_length(v) > LOG_FIELD_MAX;
    if (json_is_array(v)) {
        if (json_array_size(v) > LOG_ARRAY_MAX)
            return true;
        json_array_foreach(v, i, m) if (over_caps(m, depth + 1)) return true;
        return false;
    }
    if (json_is_object(v))
        json_object_foreach((json_t *)v, key,
                            m) if (over_caps(m, depth + 1)) return true;
    return false;
}

/* A copy of v within the caps (a new reference), or NULL. */
static json_t *
capped_copy(json_t *v, int depth)
{
    const char *key;
    json_t *m, *out;
    size_t i;

    if (depth > 16 || !over_caps(v, depth))
        return json_incref(v);
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t keep = log_cut_len(s, json_string_length(v), LOG_FIELD_MAX);
        char buf[LOG_FIELD_MAX + 1];
        memcpy(buf, s, keep);
        memcpy(buf + keep, "\xe2\x80\xa6", 3); /* U+2026 */
        return json_stringn(buf, keep + 3);
    }
    if (json_is_array(v)) {
        out = json_array();
        if (out == NULL)
            return NULL;
        json_array_foreach(v, i, m)
        {
            if (i == LOG_ARRAY_MAX) {
                char more[64];
                snprintf(more, sizeof(more), "\xe2\x80\xa6 %zu more",
                         json_array_size(v) - LOG_ARRAY_MAX);
                if (json_array_append_new(out, json_string(more)) != 0)
                    goto fail;
                break;
            }
            if (json_array_append_new(out, capped_copy(m, depth + 1)) != 0)
                goto fail;
        }
        return out;
    }
    out = json_object();
    if (out == NULL)
        return NULL;
    json_object_foreach(
        v, key,
        m) if (json_object_set_new(out, key, capped_copy(m, depth + 1)) !=
               0) goto fail;
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* writev(2) all of iov, carrying on after short writes and EINTR. */
static void
writev_all(struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t done = writev(out_fd, iov, n);
        if (done < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        while (n > 0 && (size_t)done >= iov->iov_len) {
            done -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= (size_t)done;
        }
    }
}

/*
 * Writes {head members, field members, tail}: the three objects' members
 * spliced into one line with a single writev(2), so serialising the
 * caller's object as it is saves copying it into a new one.
 */
static void
write_line(enum log_level level, const char *msg, const json_t *fields,
           const char *tail)
{
    char stamp[40];
    json_t *copy = NULL;
    char *head_text = NULL, *field_text = NULL;
    size_t head_len, field_len = 0;
    struct iovec iov[6];
    int n = 0;

    format_time(stamp, sizeof(stamp));
    head_text = format_head(stamp, level, msg ? msg : "");
    if (head_text == NULL)
        goto fail;
    head_len = strlen(head_text);
    if (fields != NULL && json_is_object(fields) && json_object_size(fields)) {
        if (over_caps(fields, 0)) {
            copy = capped_copy((json_t *)fields, 0);
            if (copy == NULL)
                goto fail;
            fields = copy;
        }
        if (has_reserved_key(fields)) {
            json_t *c2 = json_copy((json_t *)fields);
            json_decref(copy);
            copy = c2;
            if (copy == NULL)
                goto fail;
            json_object_del(copy, "time");
            json_object_del(copy, "level");
            json_object_del(copy, "msg");
            fields = copy;
        }
        if (json_object_size(fields) > 0) {
            field_text = json_dumps(fields, JSON_COMPACT | JSON_PRESERVE_ORDER);
            if (field_text == NULL)
                goto fail;
            field_len = strlen(field_text);
        }
    }
    iov[n++] = (struct iovec){head_text, head_len - 1};
    if (field_len > 2) {
        iov[n++] = (struct iovec){(void *)",", 1};
        iov[n++] = (struct iovec){field_text + 1, field_len - 2};
    }
    if (tail != NULL && *tail != '\0') {
        iov[n++] = (struct iovec){(void *)",", 1};
        iov[n++] = (struct iovec){(void *)tail, strlen(tail)};
    }
    iov[n++] = (struct iovec){(void *)"}\n", 2};
    writev_all(iov, n);
    jsonmem_free(field_text);
    jsonmem_free(head_text);
    json_decref(copy);
    return;
fail:
    jsonmem_free(field_text);
    jsonmem_free(head_text);
    json_decref(copy);
    {
        char fallback[200];
        int len = snprintf(fallback, sizeof(fallback),
                           "{\"time\":\"%s\",\"level\":\"error\",\"msg\":"
                           "\"log line could not be built\"}\n",
                           stamp);
        if (len > 0 && (size_t)len < sizeof(fallback))
            write_all(fallback, (size_t)len);
    }
}

void
log_fields_write(enum log_level level, const char *msg, const json_t *fields)
{
    if (log_level_enabled(level))
        write_line(level, msg, fields, NULL);
}

void
log_fields_tail_write(enum log_level level, const char *msg,
                      const json_t *fields, const char *tail)
{
    if (log_level_enabled(level))
        write_line(level, msg, fields, tail);
}

void
log_error_write(enum log_level level, const char *msg, const char *key,
                const char *value, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    json_t *fields;
    int n;
    size_t len;

    if (!log_level_enabled(level))
        return;
    va_start(ap, fmt);
    n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    len = n > 0 ? (size_t)n : 0;
    if (len >= sizeof(text)) {
        /* Cut whole characters only, or jansson refuses the text. */
        len = log_cut_len(text, len, sizeof(text) - 1);
        memcpy(text + len, "\xe2\x80\xa6", 3);
        len += 3;
    }
    fields = json_object();
    if (fields != NULL) {
        if (key != NULL)
            json_object_set_new(fields, key, json_string(value ? value : ""));
        json_object_set_new(fields, "error", json_stringn(text, len));
    }
    log_fields_write(level, msg, fields);
    json_decref(fields);
}
