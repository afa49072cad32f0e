#!/bin/sh
# Keeps the admission core's headers includable from C++ (the fast
# parser's wrapper is a C++ translation unit): each header named on the
# command line must compile alone as C++, and no C source or header of the
# product may use the C++ keyword `namespace` as a name (comments and
# string literals may say it).
# Usage: CXX=g++ CPPFLAGS="-I. ..." tests/cxx/check.sh HEADER...
# Run from the repository root.
set -u

CXX=${CXX:-g++}
failures=0

for h in "$@"; do
    # shellcheck disable=SC2086
    if ! $CXX -std=c++17 -fsyntax-only -x c++ ${CPPFLAGS:-} "$h"; then
        echo "cxx: FAIL: $h does not compile as C++" >&2
        failures=$((failures + 1))
    fi
done

# Comments go with the preprocessor's -fpreprocessed pass (nothing is
# expanded or included), string and character literals with sed; what is
# left is code.
for f in $(find admission policy server cli base certs watchdog ringcheck \
    -name '*.[ch]' | sort); do
    hits=$(${CC:-cc} -fpreprocessed -dD -E -P -w -x c "$f" 2>/dev/null |
        sed -e 's/"\([^"\\]\|\\.\)*"//g' \
            -e "s/'\\([^'\\\\]\\|\\\\.\\)*'//g" |
        grep -w namespace)
    if [ -n "$hits" ]; then
        printf 'cxx: FAIL: %s names something `namespace` (a C++ keyword; use ns):\n%s\n' \
            "$f" "$hits" >&2
        failures=$((failures + 1))
    fi
done

if [ "$failures" -ne 0 ]; then
    echo "cxx: $failures failure(s)" >&2
    exit 1
fi
echo "cxx: $# headers compile as C++; no C file uses namespace as a name"
