/* YAML <-> JSON (jansson) for the dry run and the test tools: multi-document
 * streams, anchors and aliases, comments, null documents. */
#ifndef NCCLGUARD_YAMLJSON_H
#define NCCLGUARD_YAMLJSON_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "base/error.h"

/*
 * Parses every document of a YAML (or JSON) stream. Null/empty documents
 * are dropped. Scalars get Kubernetes-style typing (YAML 1.1 core: ints,
 * floats, booleans, null; quoted scalars stay strings). Duplicate mapping
 * keys are not fatal: each adds a "file:line:col: duplicate key ..." string
 * to *warnings (an array, returned owned; may be NULL to ignore them); the
 * last value wins, as in Kubernetes' decoder. On success returns an owned
 * array of documents; on failure NULL with err holding line:col.
 */
json_t *yamljson_load(const char *buf, size_t len, const char *name,
                      json_t **warnings, struct ng_error *err)
    __attribute__((warn_unused_result));

/* Writes docs (an array) as a YAML stream, "---" between documents.
 * Returns 0, or -1 on write failure. */
int yamljson_emit(const json_t *docs, FILE *out)
    __attribute__((warn_unused_result));

#endif
