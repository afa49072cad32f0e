#!/usr/bin/env bash
# Mutation check: applies each entry of tests/mutants/mutants.txt, one at a
# time, to a scratch copy of the working tree and runs the check the entry
# names; that check must fail. The tree itself is never touched.
#
#   tests/mutants/run.sh [NAME...]      all entries, or only those named
#
# Environment: MUTANTS_DIR (default build/mutants), MUTANT_TIMEOUT seconds
# per check (default 600; a check that times out counts as a kill, since a
# hang is noticed too).
#
# Each entry is a block of "key: value" lines (blank lines between blocks):
#   name:    short-id
#   file:    path of the product file to change
#   find:    text that occurs exactly once in it (one line or part of one)
#   replace: what it becomes
#   test:    make target(s) that must fail on the change
# An entry whose find text is missing or not unique is an ERROR (the file
# changed under it: choose a new anchor), never a kill or a survivor. So is
# a change that does not build.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
list=${MUTANTS_LIST:-$root/tests/mutants/mutants.txt}
dir=${MUTANTS_DIR:-$root/build/mutants}
src=$dir/src
limit=${MUTANT_TIMEOUT:-600}
jobs=${MUTANT_JOBS:-2}
only=" $* "

names=() files=() finds=() repls=() tests=()
add_entry() {
    [ -n "$e_name$e_file$e_find$e_repl$e_test" ] || return 0
    if [ -z "$e_name" ] || [ -z "$e_file" ] || [ -z "$e_find" ] ||
        [ -z "$e_test" ]; then
        echo "mutants: $list: entry ending at line $lineno lacks name, file, find or test" >&2
        exit 2
    fi
    names+=("$e_name") files+=("$e_file") finds+=("$e_find")
    repls+=("$e_repl") tests+=("$e_test")
    e_name="" e_file="" e_find="" e_repl="" e_test=""
}
e_name="" e_file="" e_find="" e_repl="" e_test=""
lineno=0
while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    case $line in
    '#'*) continue ;;
    '') add_entry; continue ;;
    esac
    key=${line%%:*}
    val=${line#*:}
    val=${val#"${val%%[! ]*}"} # the spaces after the colon
    # A key given twice means two entries ran together (a blank line lost,
    # as a merge of the list can lose it): the first would be dropped.
    k0=$key
    [ "$key" = replace ] && key=repl
    case $key in
    name | file | find | repl | test)
        eval "[ -z \"\$e_$key\" ]" || {
            echo "mutants: $list:$lineno: '$k0' given twice in one entry (a blank line missing between entries?)" >&2
            exit 2
        } ;;
    esac
    case $key in
    name) e_name=$val ;;
    file) e_file=$val ;;
    find) e_find=$val ;;
    repl) e_repl=$val ;;
    test) e_test=$val ;;
    *) echo "mutants: $list:$lineno: unknown key '$k0'" >&2; exit 2 ;;
    esac
done <"$list"
add_entry

# anchor_check FILE FIND: 0 when FIND occurs exactly once in FILE, else
# prints why on stdout and returns 1.
anchor_check() {
    local n
    if [ ! -f "$1" ]; then echo "$1 does not exist"; return 1; fi
    # Anchors are one line (or part of one): grep counts them, where a
    # shell pattern over the whole file took seconds per entry.
    n=$(grep -F -o -e "$2" -- "$1" | wc -l)
    if [ "$n" -eq 0 ]; then echo "anchor not found in $1: $2"; return 1; fi
    if [ "$n" -gt 1 ]; then echo "anchor occurs more than once in $1: $2"; return 1; fi
    return 0
}

# --anchors: only check that every anchor still matches, in the tree itself.
if [ "${1:-}" = --anchors ]; then
    bad=0
    for i in "${!names[@]}"; do
        why=$(cd "$root" && anchor_check "${files[$i]}" "${finds[$i]}") ||
            { echo "ERROR    ${names[$i]}: $why"; bad=$((bad + 1)); }
    done
    echo "mutants: ${#names[@]} entries, $bad anchors broken"
    [ $bad -eq 0 ]
    exit
fi

# The scratch copy: tracked and untracked-but-not-ignored files, as they
# are in the working tree now (uncommitted edits included).
echo "mutants: copying the tree to $src"
rm -rf "$src"
mkdir -p "$src"
(cd "$root" && git ls-files -z -co --exclude-standard |
    tar --null -T - -cf -) | tar -C "$src" -xf - || exit 2
# The CUDA runtime and NCCL that make deps unpacked (build/deps), shared
# with the copy rather than unpacked again.
if [ -d "$root/build/deps" ]; then
    mkdir -p "$src/build"
    ln -s "$root/build/deps" "$src/build/deps"
fi
mk() { make -C "$src" --no-print-directory "$@"; }
# What every check needs, built once; a mutant rebuilds what it touches.
prebuild() {
    mk -s -j"$jobs" all ringcheck check-unit-bins
}
echo "mutants: building the unmutated copy"
prebuild >"$dir/build.log" 2>&1 || {
    echo "mutants: the unmutated copy does not build:" >&2
    tail -30 "$dir/build.log" >&2
    exit 2
}

selected=()
for i in "${!names[@]}"; do
    [ "$only" = "  " ] || [[ $only == *" ${names[$i]} "* ]] || continue
    selected+=("$i")
done
[ ${#selected[@]} -gt 0 ] || { echo "mutants: no entry named:$only" >&2; exit 2; }

# Every check named must pass on the unmutated copy first, or a "kill"
# would mean nothing.
declare -A baseline
for i in "${selected[@]}"; do
    for t in ${tests[$i]}; do
        [ -n "${baseline[$t]:-}" ] && continue
        if timeout "$limit" make -C "$src" --no-print-directory "$t" \
            >"$dir/baseline-$t.log" 2>&1; then
            baseline[$t]=ok
            echo "mutants: baseline $t passes"
        else
            echo "mutants: baseline $t FAILS without any mutation; see $dir/baseline-$t.log" >&2
            exit 2
        fi
    done
done

killed=0 survived=0 errors=0
: >"$dir/results.txt"
report() { echo "$*" | tee -a "$dir/results.txt"; }
for i in "${selected[@]}"; do
    n=${names[$i]} f=${files[$i]} find=${finds[$i]} repl=${repls[$i]}
    target=$src/$f
    if ! why=$(cd "$src" && anchor_check "$f" "$find"); then
        report "ERROR    $n: $why"
        errors=$((errors + 1))
        continue
    fi
    content=$(cat "$target"; printf x)
    content=${content%x}
    rest=${content#*"$find"}
    cp -p "$target" "$dir/orig"
    printf '%s' "${content%%"$find"*}$repl$rest" >"$target"
    start=$SECONDS
    if ! prebuild >"$dir/$n.build.log" 2>&1; then
        report "ERROR    $n: the mutant does not build (see $dir/$n.build.log)"
        errors=$((errors + 1))
    else
        verdict=survived
        for t in ${tests[$i]}; do
            timeout "$limit" make -C "$src" --no-print-directory "$t" \
                >"$dir/$n.log" 2>&1
            rc=$?
            if [ $rc -ne 0 ]; then
                verdict=killed
                [ $rc -eq 124 ] && verdict="killed (timeout)"
                break
            fi
        done
        if [ "$verdict" = survived ]; then
            report "SURVIVED $n: $f: '$find' -> '$repl' passes ${tests[$i]}"
            survived=$((survived + 1))
        else
            report "$(printf 'killed   %s by %s (%d s)' "$n" "$t" $((SECONDS - start)))"
            killed=$((killed + 1))
        fi
    fi
    # Back to the original; the new mtime makes the next build redo it.
    cp "$dir/orig" "$target"
    touch "$target"
done
total=${#selected[@]}
report "mutants: $total entries: $killed killed, $survived survived, $errors errors ($(date -u +%Y-%m-%d))"
[ $survived -eq 0 ] && [ $errors -eq 0 ]
