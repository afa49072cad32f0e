# tests/mutants/: make mutants breaks the product on purpose, one change at
# a time, in a scratch copy of the tree (build/mutants/src), and runs the
# check each change must fail. Not part of make test: it takes minutes.
#   make mutants                       every entry of tests/mutants/mutants.txt
#   make mutants MUTANTS="a b"         only the entries named a and b
.PHONY: mutants
mutants: deps
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL tests/mutants/run.sh $(MUTANTS)

# The mechanical sweep (tests/mutants/sweep.py): every comparison, clause,
# bound and early return of the decision code, mutated one at a time and
# run against the checks that own the file. Hours on 2 CPUs; not part of
# make test. Results in build/sweep/report.md; tests/mutants/SWEEP.md
# records the last run.
#   make mutants-sweep                                  every listed file
#   make mutants-sweep SWEEP_ARGS="--files admission/patch.c --every 2"
#   make mutants-sweep SWEEP_ARGS="--full"              then make test too
.PHONY: mutants-sweep
mutants-sweep:
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL python3 tests/mutants/sweep.py \
		$(SWEEP_ARGS)

# Every entry's anchor still names exactly one place in its file: an edit
# under an entry would otherwise show only at the next make mutants, as an
# ERROR. Reads the tree, builds nothing.
.PHONY: check-mutant-anchors
check-mutant-anchors:
	tests/mutants/run.sh --anchors

CHECKS += check-mutant-anchors
