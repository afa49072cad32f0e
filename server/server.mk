# server/: the transport. `ncclguard serve`: HTTPS, routes, reload, metrics
# and logs; each review goes to the admission core in admission/.
LIB_SRCS += server/serve.c
