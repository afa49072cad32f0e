/* Unit tests for patch_check (admission/patch.c): the check, fast (add
 * and replace only, against the pod as it is) or copy-on-write, must agree
 * with patch_apply on a deep copy, except that it refuses an add onto an
 * existing key, which patch_apply (RFC 6902) turns into a replace; and it
 * must leave both the document and the patch exactly as they were. */
#include "admission/patch.h"

#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *doc_text =
    "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"a\":\"1\"}},"
    "\"spec\":{\"containers\":[{\"name\":\"c0\",\"env\":[{\"name\":\"X\"}]},"
    "{\"name\":\"c1\",\"image\":\"i\"}],\"initContainers\":[{\"name\":\"i0\"}]}"
    "}";

/* ok: 1 when the check passes; STRICT when patch_apply applies the patch
 * but the check refuses it as an add onto an existing key. */
#define STRICT 2

static const struct {
    const char *patch;
    int ok;
} cases[] = {
    {"[]", 1},
    {"[{\"op\":\"add\",\"path\":\"/spec/containers/0/envFrom\",\"value\":[]}]",
     1},
    /* An insertion shifts indexes: the second op changes the element that
     * was at index 0, which must be copied at the time it is changed. */
    {"[{\"op\":\"add\",\"path\":\"/spec/initContainers/0\",\"value\":{\"name\":"
     "\"ring\"}},{\"op\":\"add\",\"path\":\"/spec/initContainers/1/env\","
     "\"value\":[]}]",
     1},
    /* Changing inside a value added earlier must not change the patch. */
    {"[{\"op\":\"add\",\"path\":\"/spec/"
     "volumes\",\"value\":[{\"name\":\"v\"}]},"
     "{\"op\":\"add\",\"path\":\"/spec/volumes/0/emptyDir\",\"value\":{}},"
     "{\"op\":\"add\",\"path\":\"/spec/volumes/"
     "-\",\"value\":{\"name\":\"w\"}}]",
     1},
    {"[{\"op\":\"replace\",\"path\":\"/spec/containers/0/env/0/name\","
     "\"value\":\"Y\"},{\"op\":\"remove\",\"path\":\"/metadata/annotations/"
     "a\"}]",
     1},
    {"[{\"op\":\"move\",\"from\":\"/spec/containers/1\",\"path\":"
     "\"/spec/initContainers/-\"},{\"op\":\"add\",\"path\":"
     "\"/spec/initContainers/1/command\",\"value\":[]}]",
     1},
    {"[{\"op\":\"copy\",\"from\":\"/spec/containers/0\",\"path\":"
     "\"/spec/containers/-\"},{\"op\":\"remove\",\"path\":"
     "\"/spec/containers/2/env/0\"}]",
     1},
    {"[{\"op\":\"add\",\"path\":\"\",\"value\":{\"a\":{\"b\":[]}}},"
     "{\"op\":\"add\",\"path\":\"/a/b/-\",\"value\":1}]",
     1},
    {"[{\"op\":\"test\",\"path\":\"/metadata/name\",\"value\":\"p\"}]", 1},
    /* Failures: missing parent, bad index, failed test, unknown op. */
    {"[{\"op\":\"add\",\"path\":\"/spec/nothing/x\",\"value\":1}]", 0},
    {"[{\"op\":\"add\",\"path\":\"/spec/containers/7/x\",\"value\":1}]", 0},
    {"[{\"op\":\"add\",\"path\":\"/spec/containers/0/x\",\"value\":1},"
     "{\"op\":\"test\",\"path\":\"/metadata/name\",\"value\":\"q\"}]",
     0},
    {"[{\"op\":\"frobnicate\",\"path\":\"/spec\"}]", 0},
    {"{\"op\":\"add\"}", 0},
    /* Patches of add and replace only, which the check answers without a
     * copy. Accepted: a replace of an existing key (as on a reinvoked
     * pod's annotations), adds of new keys, appends, a replace of what
     * exists, and several ops under one parent. */
    {"[{\"op\":\"replace\",\"path\":\"/metadata/annotations/a\","
     "\"value\":\"2\"},{\"op\":\"add\",\"path\":\"/metadata/annotations/b~1c\","
     "\"value\":\"3\"},{\"op\":\"add\",\"path\":\"/spec/containers/0/env/"
     "-\",\"value\":{}},{\"op\":\"add\",\"path\":\"/spec/containers/0/env/"
     "-\",\"value\":{}},{\"op\":\"replace\",\"path\":\"/spec/containers/1/"
     "name\",\"value\":\"c9\"},{\"op\":\"add\",\"path\":\"/spec/"
     "initContainers/-\",\"value\":{}},{\"op\":\"add\",\"path\":\"/spec/"
     "initContainers/0/env\",\"value\":[]},{\"op\":\"add\",\"path\":\"/spec/"
     "containers/0/env/0\",\"value\":{}},{\"op\":\"add\",\"path\":\"/spec/"
     "containers/0/env/1/x\",\"value\":1}]",
     1},
    /* An op on a path an earlier op added. */
    {"[{\"op\":\"add\",\"path\":\"/metadata/labels\",\"value\":{}},"
     "{\"op\":\"add\",\"path\":\"/metadata/labels/x\",\"value\":\"y\"},"
     "{\"op\":\"replace\",\"path\":\"/metadata/labels/x\",\"value\":\"z\"}]",
     1},
    /* Refused: an index out of range (add past the end, replace at the
     * end), a replace of what is missing, a parent that is not a
     * container. */
    {"[{\"op\":\"add\",\"path\":\"/spec/containers/3\",\"value\":{}}]", 0},
    {"[{\"op\":\"replace\",\"path\":\"/spec/containers/2\",\"value\":{}}]", 0},
    {"[{\"op\":\"add\",\"path\":\"/spec/containers/01\",\"value\":{}}]", 0},
    {"[{\"op\":\"replace\",\"path\":\"/metadata/labels\",\"value\":{}}]", 0},
    {"[{\"op\":\"add\",\"path\":\"/metadata/name/x\",\"value\":1}]", 0},
    /* Refused although the pod alone would allow it: the parent is a value
     * an earlier op put there, or an array an earlier op inserted into
     * moved the element the path names. */
    {"[{\"op\":\"replace\",\"path\":\"/metadata/annotations\",\"value\":"
     "\"s\"},{\"op\":\"add\",\"path\":\"/metadata/annotations/b\","
     "\"value\":1}]",
     0},
    {"[{\"op\":\"add\",\"path\":\"/spec/containers/0\",\"value\":"
     "{\"name\":\"n\"}},{\"op\":\"add\",\"path\":\"/spec/containers/0/env/"
     "-\",\"value\":{}}]",
     0},
    {"[{\"op\":\"add\",\"path\":\"/spec/containers/0\",\"value\":"
     "{\"name\":\"n\"}},{\"op\":\"replace\",\"path\":\"/spec/containers/1/"
     "image\",\"value\":\"j\"}]",
     0},
    /* Refused by the check alone (patch_apply replaces): an add onto an
     * existing key, fast (against the pod) or not (after a copy, a move,
     * or onto a key an earlier op put there); an escaped key; a key whose
     * value is null; a copy or move onto an existing key. */
    {"[{\"op\":\"add\",\"path\":\"/metadata/annotations/a\",\"value\":"
     "\"2\"}]",
     STRICT},
    {"[{\"op\":\"add\",\"path\":\"/metadata/annotations/n\",\"value\":"
     "\"1\"},{\"op\":\"add\",\"path\":\"/metadata/annotations/n\","
     "\"value\":\"2\"}]",
     STRICT},
    {"[{\"op\":\"add\",\"path\":\"/metadata/labels\",\"value\":{\"x\":"
     "\"1\"}},{\"op\":\"add\",\"path\":\"/metadata/labels/x\",\"value\":"
     "\"2\"}]",
     STRICT},
    {"[{\"op\":\"add\",\"path\":\"/metadata/annotations/b~1c\","
     "\"value\":\"1\"},{\"op\":\"add\",\"path\":\"/metadata/"
     "annotations/b~1c\",\"value\":\"2\"}]",
     STRICT},
    {"[{\"op\":\"replace\",\"path\":\"/spec/containers/1/image\","
     "\"value\":null},{\"op\":\"add\",\"path\":\"/spec/containers/1/image\","
     "\"value\":\"j\"}]",
     STRICT},
    {"[{\"op\":\"move\",\"from\":\"/spec/containers/1\",\"path\":"
     "\"/spec/initContainers/-\"},{\"op\":\"add\",\"path\":"
     "\"/spec/initContainers/1/image\",\"value\":\"x\"}]",
     STRICT},
    {"[{\"op\":\"copy\",\"from\":\"/metadata/name\",\"path\":"
     "\"/metadata/annotations/a\"}]",
     STRICT},
    {"[{\"op\":\"move\",\"from\":\"/metadata/name\",\"path\":"
     "\"/metadata/annotations/a\"}]",
     STRICT},
    /* Not onto a member, so accepted: an insert at an existing index, an
     * add at the root, a remove then an add of the same key, a key with
     * the same name in another object. */
    {"[{\"op\":\"add\",\"path\":\"/spec/containers/0\",\"value\":{}}]", 1},
    {"[{\"op\":\"add\",\"path\":\"\",\"value\":{}}]", 1},
    {"[{\"op\":\"remove\",\"path\":\"/metadata/annotations/a\"},{\"op\":"
     "\"add\",\"path\":\"/metadata/annotations/a\",\"value\":\"2\"}]",
     1},
    {"[{\"op\":\"add\",\"path\":\"/spec/containers/0/a\",\"value\":1},"
     "{\"op\":\"add\",\"path\":\"/spec/containers/1/a\",\"value\":1}]",
     1},
    /* Accepted although the pod alone would refuse it: a later op in an
     * element an earlier one appended. */
    {"[{\"op\":\"add\",\"path\":\"/spec/containers/-\",\"value\":"
     "{\"env\":[]}},{\"op\":\"add\",\"path\":\"/spec/containers/2/env/-\","
     "\"value\":{}},{\"op\":\"replace\",\"path\":\"/spec/containers/2/env/"
     "0\",\"value\":{}}]",
     1},
};

int
main(void)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *doc = json_loads(doc_text, 0, NULL);
        json_t *patch = json_loads(cases[i].patch, 0, NULL);
        json_t *doc_before = json_deep_copy(doc);
        json_t *patch_before = json_deep_copy(patch);
        json_t *full = json_deep_copy(doc);
        struct ng_error e1, e2;
        int rc_check, rc_apply;

        ng_error_clear(&e1);
        ng_error_clear(&e2);
        rc_check = patch_check(doc, patch, &e1);
        rc_apply = patch_apply(&full, patch, &e2);
        if (cases[i].ok == STRICT) {
            if (rc_check == 0 || rc_apply != 0 ||
                strstr(e1.msg, "add onto existing key") == NULL)
                fprintf(stderr, "case %zu: check %d (%s), apply %d (%s)\n", i,
                        rc_check, e1.msg, rc_apply, e2.msg);
            CHECK_INT(rc_check, -1);
            CHECK_INT(rc_apply, 0);
            CHECK(strstr(e1.msg, "add onto existing key") != NULL);
        } else {
            if (rc_check != rc_apply || (rc_check == 0) != cases[i].ok)
                fprintf(stderr, "case %zu: check %d (%s), apply %d (%s)\n", i,
                        rc_check, e1.msg, rc_apply, e2.msg);
            CHECK_INT(rc_check, rc_apply);
            CHECK_INT(rc_check == 0, cases[i].ok);
            /* The same words as patch_apply on failure. */
            CHECK_STR(e1.msg, e2.msg);
        }
        CHECK(json_equal(doc, doc_before));
        CHECK(json_equal(patch, patch_before));
        json_decref(doc);
        json_decref(patch);
        json_decref(doc_before);
        json_decref(patch_before);
        json_decref(full);
    }
    printf("%d passed, %d failed\n", harness_passed, harness_failed);
    return harness_failed ? 1 : 0;
}
