#!/usr/bin/env bash
# The option table of `ncclguard serve`, through the real binary: every
# option --help shows with bounds refuses a value just outside them, from
# the flag and from its environment variable, with exactly
# "ncclguard serve: LABEL: V is out of range LO..HI" and exit status 2, and
# takes the bounds themselves; docs/serve.md's flag table names the same
# flags, variables and defaults as --help, which is written from the table.
set -u
. "$(dirname "$0")/lib.sh"
ng_setup

help=$("$NCCLGUARD" serve --help)
ng_eq "--help exits 0" $? 0

# "1Ki" -> 1024, "1048576Gi" -> 2^50.
to_num() {
    case $1 in
    *Ki) echo $((${1%Ki} * 1024)) ;;
    *Mi) echo $((${1%Mi} * 1024 * 1024)) ;;
    *Gi) echo $((${1%Gi} * 1024 * 1024 * 1024)) ;;
    *) echo "$1" ;;
    esac
}

# One line per option: FLAG ENV TAIL, where TAIL is the text between the
# last parentheses of its help line ("default 1024; 1..1000000").
options=$(awk '
    /^  --/ {
        if (flag != "") print flag, "-", tail
        flag = substr($1, 3); tail = ""
        if (match($0, /\([^()]*\)$/)) tail = substr($0, RSTART + 1, RLENGTH - 2)
        next
    }
    /^ +env NCCLGUARD_/ && flag != "" { print flag, $2, tail; flag = "" }
    END { if (flag != "") print flag, "-", tail }' <<<"$help")
ng_check "--help lists at least 18 options" \
    test "$(wc -l <<<"$options")" -ge 18

# Runs serve with a value; what it says on stderr, and its status.
run_value() { # run_value FLAG|ENV VALUE
    local err
    if [ "${1#--}" != "$1" ]; then
        err=$("$NCCLGUARD" serve --cert "$NG_TMP/none.crt" \
            --key "$NG_TMP/none.key" --policy "$NG_TMP/none.yaml" \
            "$1" "$2" 2>&1 >/dev/null)
    else
        err=$(env "$1=$2" "$NCCLGUARD" serve --cert "$NG_TMP/none.crt" \
            --key "$NG_TMP/none.key" --policy "$NG_TMP/none.yaml" 2>&1 >/dev/null)
    fi
    echo "$? $err"
}

ranged=0
while read -r flag env tail; do
    [ "$flag" = help ] && continue
    ng_eq "--$flag: its variable is named after it" "$env" \
        "NCCLGUARD_$(tr 'a-z-' 'A-Z_' <<<"$flag")"
    range=$(grep -oE '(^|; )[0-9]+(Ki|Mi|Gi)?\.\.[0-9]+(Ki|Mi|Gi)?' <<<"$tail" |
        sed 's/^; //')
    [ -n "$range" ] || continue
    ranged=$((ranged + 1))
    lo=${range%..*}
    hi=${range#*..}
    lo_n=$(to_num "$lo")
    hi_n=$(to_num "$hi")
    bad=$((hi_n + 1))
    [ "$lo_n" -gt 0 ] && bad="$((lo_n - 1)) $bad"
    for v in $bad; do
        for label in "--$flag" "$env"; do
            ng_eq "$label $v is refused with its bounds" "$(run_value "$label" "$v")" \
                "2 ncclguard serve: $label: $v is out of range $range"
        done
    done
    # The bounds themselves pass parsing: serve gets as far as reading the
    # (missing) certificate and exits 1, not 2.
    for v in "$lo" "$hi"; do
        got=$(run_value "--$flag" "$v")
        ng_eq "--$flag $v is accepted" "${got%% *}" 1
    done
done <<<"$options"
ng_check "$ranged options have bounds (at least 9)" test "$ranged" -ge 9

# A flag left without its value is named.
err=$("$NCCLGUARD" serve --policy p --key k --cert 2>&1 >/dev/null)
ng_eq "a flag without its value exits 2" $? 2
ng_eq "a flag without its value is named" "$(head -n 1 <<<"$err")" \
    "ncclguard serve: --cert needs a value"

# The defaults --help shows are the ones docs/serve.md's table shows.
doc=$NG_ROOT/docs/serve.md
while read -r flag env tail; do
    [ "$flag" = help ] && continue
    row=$(grep -E "^\| \`--$flag [A-Z]+\` \|" "$doc")
    ng_check "docs/serve.md has a row for --$flag" test -n "$row"
    ng_contains "docs/serve.md: --$flag reads $env" "$row" "| \`$env\` |"
    def=${tail%%;*}
    case $def in
    required) want="| required |" ;;
    "default: "*) continue ;; # computed at start; described in words
    "default "*) want="| \`${def#default }\` |" ;;
    *) want="| none |" ;;
    esac
    ng_contains "docs/serve.md: --$flag defaults as --help says" "$row" "$want"
done <<<"$options"
ng_eq "docs/serve.md lists no flag --help does not" \
    "$(grep -oE '^\| `--[a-z-]+' "$doc" | sed 's/^| `--//' | sort)" \
    "$(awk '$1 != "help" { print $1 }' <<<"$options" | sort)"

ng_summary
