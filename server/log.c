/* JSON log lines: one object per line on stderr, with time, level and msg. */
#include "server/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "admission/jsonwrite.h"
#include "base/buf.h"
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

/* The time of a line down to the second, formatted once a second per
 * thread: gmtime_r() and strftime() cost more than the rest of an
 * admission's line (bench/RESULTS.md, round 3). */
static _Thread_local time_t stamp_sec;
static _Thread_local size_t stamp_len;
static _Thread_local char stamp_text[32];

/* RFC 3339 UTC time with milliseconds: 2026-11-30T12:00:00.123Z, into buf
 * (n >= 40, as every caller's). */
static void
format_time(char *buf, size_t n)
{
    struct timespec ts;
    struct tm tm;
    int ms;

    clock_gettime(CLOCK_REALTIME, &ts);
    if (stamp_len == 0 || ts.tv_sec != stamp_sec) {
        gmtime_r(&ts.tv_sec, &tm);
        stamp_len =
            strftime(stamp_text, sizeof(stamp_text), "%Y-%m-%dT%H:%M:%S", &tm);
        stamp_sec = ts.tv_sec;
    }
    if (stamp_len + 6 > n) {
        snprintf(buf, n, "?");
        return;
    }
    memcpy(buf, stamp_text, stamp_len);
    ms = (int)(ts.tv_nsec / 1000000L) % 1000;
    buf[stamp_len] = '.';
    buf[stamp_len + 1] = (char)('0' + ms / 100);
    buf[stamp_len + 2] = (char)('0' + ms / 10 % 10);
    buf[stamp_len + 3] = (char)('0' + ms % 10);
    buf[stamp_len + 4] = 'Z';
    buf[stamp_len + 5] = '\0';
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

size_t
log_cut_len(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    return text_utf8_prefix(s, len, max >= 3 ? max - 3 : 0);
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

/* The line that replaces one that could not be built. */
static void
write_fallback(const char *stamp)
{
    char fallback[200];
    int len = snprintf(fallback, sizeof(fallback),
                       "{\"time\":\"%s\",\"level\":\"error\",\"msg\":"
                       "\"log line could not be built\"}\n",
                       stamp);

    if (len > 0 && (size_t)len < sizeof(fallback))
        write_all(fallback, (size_t)len);
}

/* Copies the n bytes at s to *p and moves *p past them, when they fit in
 * the *room bytes left; false when they do not. */
static bool
put(char **p, size_t *room, const char *s, size_t n)
{
    if (n > *room)
        return false;
    memcpy(*p, s, n);
    *p += n;
    *room -= n;
    return true;
}

/*
 * {"time":"<stamp>","level":"<level>","msg":"<msg>" into head (size n) for
 * a msg that needs no escaping: the bytes snprintf() gave, copied without
 * parsing a format on every admission. Returns the length, or -1 when it
 * does not fit.
 */
static int
head_plain(char *head, size_t n, const char *stamp, const char *level,
           const char *msg)
{
    char *p = head;
    size_t room = n - 1;

    if (!put(&p, &room, "{\"time\":\"", 9) ||
        !put(&p, &room, stamp, strlen(stamp)) ||
        !put(&p, &room, "\",\"level\":\"", 11) ||
        !put(&p, &room, level, strlen(level)) ||
        !put(&p, &room, "\",\"msg\":\"", 9) ||
        !put(&p, &room, msg, strlen(msg)) || !put(&p, &room, "\"", 1))
        return -1;
    *p = '\0';
    return (int)(p - head);
}

/* A line's text may not grow past this (each part is capped already). */
#define LOG_LINE_MAX (4u * 1024u * 1024u)

/*
 * Writes {"time", "level", "msg", members, tail}\n: the fixed part is
 * formatted here (on the stack for this program's own short, plain
 * messages), members and tail go out from where they are, all in one
 * writev(2).
 */
static void
write_line(enum log_level level, const char *msg, const char *members,
           size_t len, const char *tail)
{
    char stamp[40], head[256], dropped[48];
    struct buf hb;
    const char *h = head;
    size_t head_len;
    struct iovec iov[6];
    int n = 0, k = -1;

    buf_init(&hb, LOG_LINE_MAX);
    format_time(stamp, sizeof(stamp));
    if (msg == NULL)
        msg = "";
    if (plain_string(msg))
        k = head_plain(head, sizeof(head), stamp, log_level_name(level), msg);
    if (k >= 0) {
        head_len = (size_t)k;
    } else {
        /* Escaped as jansson escapes; text that is not UTF-8 cannot be
         * a JSON string, so the line is replaced. */
        if (!text_utf8_valid(msg) ||
            buf_addf(&hb, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":", stamp,
                     log_level_name(level)) != 0 ||
            jsonwrite_string(&hb, msg, strlen(msg)) != 0) {
            buf_release(&hb);
            write_fallback(stamp);
            return;
        }
        h = hb.p;
        head_len = hb.len;
    }
    iov[n++] = (struct iovec){(void *)h, head_len};
    if (members != NULL && len > LOG_MEMBERS_MAX) {
        k = snprintf(dropped, sizeof(dropped), ",\"members_dropped\":%zu", len);
        iov[n++] = (struct iovec){dropped, (size_t)k};
    } else if (members != NULL && len > 0) {
        iov[n++] = (struct iovec){(void *)",", 1};
        iov[n++] = (struct iovec){(void *)members, len};
    }
    if (tail != NULL && *tail != '\0') {
        iov[n++] = (struct iovec){(void *)",", 1};
        iov[n++] = (struct iovec){(void *)tail, strlen(tail)};
    }
    iov[n++] = (struct iovec){(void *)"}\n", 2};
    writev_all(iov, n);
    buf_release(&hb);
}

/* True for a key that the fixed part of the line owns. */
static bool
reserved_key(const char *key)
{
    return strcmp(key, "time") == 0 || strcmp(key, "level") == 0 ||
           strcmp(key, "msg") == 0;
}

/*
 * fields' members, reserved keys left out, as JSON text within the caps
 * into b (the same bytes json_dumps() gives for the capped object). Returns
 * 0, or -1 when out of memory.
 */
static int
fields_text(struct buf *b, const json_t *fields)
{
    json_t *o = (json_t *)fields; /* jansson's iterator API is not const */

    for (void *it = json_object_iter(o); it != NULL;
         it = json_object_iter_next(o, it)) {
        const char *key = json_object_iter_key(it);

        if (reserved_key(key))
            continue;
        if ((b->len > 0 && buf_addc(b, ',') != 0) ||
            jsonwrite_string(b, key, json_object_iter_key_len(it)) != 0 ||
            buf_addc(b, ':') != 0 ||
            jsonwrite_capped(b, json_object_iter_value(it), LOG_FIELD_MAX,
                             LOG_ARRAY_MAX) != 0)
            return -1;
    }
    return 0;
}

void
log_fields_write(enum log_level level, const char *msg, const json_t *fields)
{
    struct buf fb;
    char stamp[40];

    if (!log_level_enabled(level))
        return;
    buf_init(&fb, LOG_LINE_MAX);
    if (json_is_object(fields) && fields_text(&fb, fields) != 0) {
        buf_release(&fb);
        format_time(stamp, sizeof(stamp));
        write_fallback(stamp);
        return;
    }
    write_line(level, msg, fb.p, fb.len, NULL);
    buf_release(&fb);
}

void
log_members_write(enum log_level level, const char *msg, const char *members,
                  size_t len, const char *tail)
{
    if (log_level_enabled(level))
        write_line(level, msg, members, len, tail);
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
