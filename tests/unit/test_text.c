/* Unit tests for base/text.c: bounded warnings cut on UTF-8 boundaries. */
#include "base/text.h"

#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* "é" is 2 bytes, "€" 3, "😀" 4. */
#define E2 "\xc3\xa9"
#define EURO "\xe2\x82\xac"
#define FACE "\xf0\x9f\x98\x80"

/* Returns whether s is well-formed UTF-8 (text_utf8_fix() changes
 * nothing). */
static int
valid_utf8(const char *s)
{
    char copy[600];

    snprintf(copy, sizeof(copy), "%s", s);
    return text_utf8_fix(copy) == 0;
}

/* Cuts in an 8-byte buffer: at most 7 bytes, 4 of text and "..." when
 * cut. Each multi-byte character sits across the cut point. */
static void
test_cut_point(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"abcdefg", "abcdefg"},            /* fits exactly: no mark */
        {"ab" EURO "de", "ab" EURO "de"},  /* 7 bytes, fits */
        {"abcdefgh", "abcd..."},           /* one byte over */
        {"abc" E2 "xyzw", "abc..."},       /* é across byte 4 */
        {"abcd" E2 "xyz", "abcd..."},      /* é starts at the cut */
        {"abc" EURO "zzz", "abc..."},      /* € across byte 4 */
        {"ab" EURO "zzz", "ab..."},        /* € across byte 4 */
        {"a" EURO "zzzz", "a" EURO "..."}, /* € ends at the cut */
        {"ab" FACE "zz", "ab..."},         /* 😀 across bytes 4, 5 */
        {"a" FACE "zzz", "a..."},          /* 😀 ends past the cut */
        {FACE FACE, FACE "..."},           /* 4 + 3: one face fits */
        {"abcde" EURO, "abcd..."},         /* vsnprintf split the € */
        {E2 E2 E2 E2, E2 E2 "..."},
        {"", ""},
    };
    char buf[8];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = text_format(buf, sizeof(buf), NULL, "%s", cases[i].in);

        CHECK_STR(buf, cases[i].out);
        CHECK_INT(len, strlen(cases[i].out));
        CHECK(valid_utf8(buf));
    }
}

/* A warning of the admission API's size, with a prefix, a long value of
 * two-byte characters, and a "%.Ns" that splits a character. */
static void
test_warning(void)
{
    char buf[TEXT_WARNING_MAX + 1], many[401];
    size_t len;

    for (size_t i = 0; i < 200; i++)
        memcpy(many + 2 * i, E2, 2);
    many[400] = '\0';
    len = text_format(buf, sizeof(buf), "ncclguard: ", "value %s", many);
    CHECK(len <= TEXT_WARNING_MAX);
    CHECK_INT(len, strlen(buf));
    CHECK(strncmp(buf, "ncclguard: value " E2, 19) == 0);
    CHECK(len >= 3 && strcmp(buf + len - 3, "...") == 0);
    CHECK(valid_utf8(buf));
    /* 11 + 6 = 17 bytes before the é run; 117 - 17 = 100 = 50 whole é. */
    CHECK_INT(len, 17 + 100 + 3);

    /* "%.3s" keeps é and half of €: the half becomes '?', nothing else. */
    len = text_format(buf, sizeof(buf), "p: ", "[%.3s]", E2 EURO);
    CHECK_STR(buf, "p: [" E2 "?]");
    CHECK_INT(len, strlen(buf));

    /* A prefix longer than the buffer is cut like the rest. */
    len = text_format(buf, 8, "ncclguard: ", "%s", "x");
    CHECK_STR(buf, "nccl...");
    /* Too small for the mark: nothing. */
    buf[0] = 'z';
    CHECK_INT(text_format(buf, 3, NULL, "%s", "abc"), 0);
    CHECK_STR(buf, "");
}

static void
test_fix(void)
{
    static const struct {
        const char *in, *out;
        size_t fixed;
    } cases[] = {
        {"plain", "plain", 0},
        {E2 EURO FACE, E2 EURO FACE, 0},
        {"a\xff"
         "b",
         "a?b", 1},
        {"\x80x", "?x", 1},              /* lone continuation */
        {"\xc0\xaf", "??", 2},           /* overlong '/' */
        {"\xe0\x80\xaf", "???", 3},      /* overlong, 3 bytes */
        {"\xed\xa0\x80", "???", 3},      /* a UTF-16 surrogate */
        {"\xf4\x90\x80\x80", "????", 4}, /* past U+10FFFF */
        {"\xe2\x82", "??", 2},           /* cut short by the NUL */
        {"\xc3"
         "a",
         "?a", 1},
    };
    char buf[32];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(buf, sizeof(buf), "%s", cases[i].in);
        /* Valid exactly when nothing needs fixing. */
        CHECK(text_utf8_valid(buf) == (cases[i].fixed == 0));
        CHECK_INT(text_utf8_fix(buf), cases[i].fixed);
        CHECK_STR(buf, cases[i].out);
        CHECK(text_utf8_valid(buf));
    }
    CHECK(text_utf8_valid(""));
}

static void
test_utf8_cut(void)
{
    static const struct {
        const char *in;
        size_t max;
        const char *out;
    } cases[] = {
        {"abc", 5, "abc"},   {"abc", 3, "abc"},  {"abc", 2, "ab"},
        {E2 E2, 3, E2},      {E2 E2, 1, ""},     {FACE "x", 3, ""},
        {FACE "x", 4, FACE}, {"x" EURO, 3, "x"}, {"", 0, ""},
    };
    char buf[32];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(buf, sizeof(buf), "%s", cases[i].in);
        CHECK_INT(text_utf8_cut(buf, cases[i].max), strlen(cases[i].out));
        CHECK_STR(buf, cases[i].out);
    }
}

/* A prefix of bytes with no NUL after them (a JSON string's length). */
static void
test_utf8_prefix(void)
{
    static const char s[] = "ab" E2 EURO "z"; /* a b é € z: 8 bytes */
    static const struct {
        size_t len, max, want;
    } cases[] = {
        {8, 8, 8}, {8, 9, 8}, {8, 7, 7}, {8, 6, 4}, {8, 5, 4}, {8, 4, 4},
        {8, 3, 2}, {8, 2, 2}, {8, 0, 0}, {3, 2, 2}, {3, 3, 3}, /* len <= max:
                                                                  kept whole,
                                                                  even half a
                                                                  character */
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_INT(text_utf8_prefix(s, cases[i].len, cases[i].max),
                  cases[i].want);
}

/* The did-you-mean distance: letters without case, one edit each for an
 * insertion, a deletion and a substitution, and far for long words. */
static void
test_edit_distance(void)
{
    char long_word[TEXT_DISTANCE_MAXLEN + 1];

    CHECK_INT(text_edit_distance("shm", "SHM"), 0);
    CHECK_INT(text_edit_distance("kitten", "sitting"), 3);
    CHECK_INT(text_edit_distance("perGPU", "perGPUs"), 1);
    CHECK_INT(text_edit_distance("perGPUs", "perGPU"), 1);
    CHECK_INT(text_edit_distance("minGpus", "minGPUs"), 0);
    CHECK_INT(text_edit_distance("", "abc"), 3);
    CHECK_INT(text_edit_distance("abc", ""), 3);
    CHECK_INT(text_edit_distance("ab", "ba"), 2);
    memset(long_word, 'a', TEXT_DISTANCE_MAXLEN - 1);
    long_word[TEXT_DISTANCE_MAXLEN - 1] = '\0';
    CHECK_INT(text_edit_distance(long_word, long_word), 0);
    memset(long_word, 'a', TEXT_DISTANCE_MAXLEN);
    long_word[TEXT_DISTANCE_MAXLEN] = '\0';
    CHECK_INT(text_edit_distance(long_word, long_word), TEXT_DISTANCE_FAR);
}

/* The eight-byte ASCII path of text_utf8_valid_len(): one bad byte (a lone
 * continuation byte, 0xff) or a good two-byte sequence at every place of a
 * 40-byte string, and the length counted. */
static void
test_utf8_valid_len(void)
{
    char s[41];
    size_t n = 0;

    for (size_t at = 0; at + 1 < sizeof(s) - 1; at++) {
        memset(s, 'a', sizeof(s) - 1);
        s[sizeof(s) - 1] = '\0';
        s[at] = (char)0x80;
        CHECK(!text_utf8_valid_len(s, &n));
        CHECK_INT((int)n, 40);
        s[at] = (char)0xff;
        CHECK(!text_utf8_valid(s));
        s[at] = (char)0xc3; /* é */
        s[at + 1] = (char)0xa9;
        CHECK(text_utf8_valid_len(s, &n));
        CHECK_INT((int)n, 40);
    }
    CHECK(text_utf8_valid_len("", &n));
    CHECK_INT((int)n, 0);
}

int
main(void)
{
    test_utf8_valid_len();
    test_cut_point();
    test_warning();
    test_fix();
    test_utf8_cut();
    test_utf8_prefix();
    test_edit_distance();
    return harness_finish();
}
