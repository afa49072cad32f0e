/* Kubernetes resource quantities, parsed and formatted the way Kubernetes
 * (k8s.io/apimachinery/pkg/api/resource) does. */
#ifndef NCCLGUARD_QUANTITY_H
#define NCCLGUARD_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/*
 * A parsed quantity. `value` is the quantity rounded up to an integer, the
 * way Kubernetes' Quantity.Value() rounds; `milli` is the value in
 * thousandths, rounded up (MilliValue()). Rounding is away from zero, after
 * Kubernetes' own rounding of non-zero amounts up to a whole nano.
 * Kubernetes caps magnitudes at 2^63-1: such quantities have `saturated`
 * set and value +-INT64_MAX. `milli` clamps to +-INT64_MAX when only it
 * overflows (from about 9.2e15 up), without setting `saturated`.
 * `integer` is true when the (nano-rounded) quantity is a whole number.
 */
struct quantity {
    int64_t value;
    int64_t milli;
    bool integer;
    bool negative;
    bool saturated;
};

/*
 * Parses the first len bytes of s as a Kubernetes quantity ("16Gi", "1.5",
 * "100m", "1e3", "+4"). Rejects exactly what Kubernetes rejects (empty
 * strings, spaces, unknown suffixes such as "Gb", "1.5.2"), and also
 * anything longer than 128 characters. On failure
 * returns -1, fills err with a message that names the input and, where it
 * can, a likely intended spelling ("4Gb is not a Kubernetes quantity; did
 * you mean 4Gi?"), and leaves *out untouched. Thread-safe.
 */
int quantity_parse(const char *s, size_t len, struct quantity *out,
                   struct ng_error *err) __attribute__((warn_unused_result));

/*
 * Writes bytes in canonical binary-SI form, the way Kubernetes canonicalises
 * a BinarySI quantity: the largest suffix (Ki..Ei) that divides it exactly,
 * else plain digits ("17179869184" -> "16Gi", "1536Mi", "1000").
 * Returns the number of characters written (snprintf semantics).
 */
int quantity_format_binary(int64_t bytes, char *buf, size_t n);

#endif
