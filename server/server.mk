# server/: the transport. `ncclguard serve`: HTTPS, routes, reload, metrics
# and logs; each review goes to the admission core in admission/.
LIB_SRCS += server/serve.c
# The option table of `ncclguard serve` (tests/unit/test_serve.c).
UNIT_TESTS += serve
