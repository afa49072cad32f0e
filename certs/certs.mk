# certs/: the OpenSSL certificate tool.
LIB_SRCS += certs/certs_cmd.c
