# tests/fuzz/: libFuzzer targets, corpus replay, make fuzz, make valgrind.
