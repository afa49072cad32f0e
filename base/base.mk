# base/: what every folder shares: the error type, buffers, files, JSON
# pointers, warning text.
LIB_SRCS += base/error.c base/buf.c
UNIT_TESTS += buf
