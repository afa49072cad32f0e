/* Unit tests of ringcheck/report.c: the JSON report always parses, even
 * when a string in it carries bytes that are not UTF-8 (an interface name,
 * a line of NCCL's log, a node name). */
#include "harness.h"
#include "ringcheck/report.h"

#include <jansson.h>
#include <string.h>

static void
report_base(struct rc_report *r, struct rc_opts *o)
{
    memset(r, 0, sizeof(*r));
    memset(o, 0, sizeof(*o));
    r->opts = o;
    r->result = "fail";
    r->pair[0] = r->pair[1] = -1;
    r->busbw = r->algbw = -1;
}

/* Bytes that start no well-formed sequence (a stray 0xff, a lead byte
 * without its continuation, an overlong '/', a surrogate) become U+FFFD;
 * well-formed multi-byte characters and escapes stay as they are. */
static void
test_not_utf8(void)
{
    static struct rc_report r;
    struct rc_opts o;
    static char buf[16384];
    json_t *doc;
    json_error_t e;

    report_base(&r, &o);
    snprintf(r.what, sizeof(r.what), "%s",
             "ib0\xff: \xc3( \xc0\xaf \xed\xa0\x80 \xe2\x82\xac \"q\"\t.");
    snprintf(r.warn, sizeof(r.warn), "%s", "\xf0\x9f\x98\x80 \xf4\x90\x80\x80");
    CHECK_INT(report_json(&r, buf, sizeof(buf)), 0);
    doc = json_loads(buf, 0, &e);
    if (doc == NULL)
        fprintf(stderr, "report does not parse: %s: %s\n", e.text, buf);
    CHECK(doc != NULL);
    CHECK_STR(json_string_value(json_object_get(doc, "message")),
              "ib0\xef\xbf\xbd: \xef\xbf\xbd( \xef\xbf\xbd\xef\xbf\xbd "
              "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xe2\x82\xac \"q\"\t.");
    /* A 4-byte character stays whole; one past U+10FFFF does not. */
    CHECK_STR(json_string_value(json_object_get(doc, "nccl_warn")),
              "\xf0\x9f\x98\x80 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
              "\xef\xbf\xbd");
    CHECK_STR(json_string_value(json_object_get(doc, "ringcheck")), "fail");
    json_decref(doc);
}

int
main(void)
{
    test_not_utf8();
    return harness_finish();
}
