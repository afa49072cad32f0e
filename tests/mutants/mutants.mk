# tests/mutants/: make mutants breaks the product on purpose, one change at
# a time, in a scratch copy of the tree (build/mutants/src), and runs the
# check each change must fail. Not part of make test: it takes minutes.
#   make mutants                       every entry of tests/mutants/mutants.txt
#   make mutants MUTANTS="a b"         only the entries named a and b
.PHONY: mutants
mutants: deps
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL tests/mutants/run.sh $(MUTANTS)
