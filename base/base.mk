# base/: what every folder shares: the error type, buffers, files, JSON
# pointers, warning text.
LIB_SRCS += base/error.c base/buf.c base/file.c base/jsonptr.c base/text.c
UNIT_TESTS += buf file jsonptr text
