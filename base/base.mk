# base/: what every folder shares: the error type, buffers, files, JSON
# pointers, warning text, the node programs' option values (opts.c).
LIB_SRCS += base/error.c base/buf.c base/file.c base/jsonptr.c base/text.c \
	base/opts.c
UNIT_TESTS += buf file jsonptr text opts
