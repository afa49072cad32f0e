#!/usr/bin/env bash
# Every example in README.md and docs/*.md is checked, so the docs cannot
# drift from the code. Fenced blocks, by their info word:
#
#   yaml     must parse. A Policy is linted (`ncclguard policy lint`, no
#            errors); a PolicyTest is run (`ncclguard policy test`); any
#            other object with apiVersion, kind and spec is dry-run
#            (`ncclguard mutate`, exit 0); a Kustomization is rendered
#            (`kubectl kustomize`) where it has a file: marker.
#   json     must parse.
#   sh       run with bash -e; must exit 0.
#   console  each `$ command` is run; every output line shown under it
#            (except `...`) must appear in the real output, in order; a
#            command shown without output must exit 0.
#
# An HTML comment on the last non-blank line before a fence changes that:
#
#   <!-- not run: REASON -->   prints SKIP with the reason (needs a kubelet,
#                              a registry, a container engine)
#   <!-- on the test apiserver -->  the sh block runs against a real
#                              kube-apiserver and etcd (tests/kube/cluster.sh,
#                              KUBE_RELEASE, 1.37 by default), started for
#                              that Markdown file and stopped after it;
#                              KUBECONFIG points at it as the administrator.
#                              There is no kubelet or controller manager:
#                              objects are stored, nothing runs them
#   <!-- on the test apiserver, after: CMD -->  the same, CMD run first in
#                              the workspace (it must exit 0)
#   <!-- on the test apiserver, after: CMD, then: CHECK -->  and CHECK run
#                              after the block must exit 0 too: what the
#                              block's text says follows from it.
#                              A process that CMD leaves running writes its
#                              pid to $DOCS_PIDS; it is stopped with the
#                              control plane
#   <!-- file: PATH -->        the yaml block is (also) written to PATH
#   <!-- output of: CMD -->    the yaml block is what CMD prints; compared
#                              as data, after running CMD
#   <!-- part of output of: CMD -->  every field the block shows is in what
#                              CMD prints (lists may be cut short)
#
# Blocks of one Markdown file run in order in a scratch copy of the
# repository ($W/ncclguard, with build/ on PATH), so that a later block can
# use a file an earlier one wrote, and `..` is a folder next to the clone
# (as in `kubectl kustomize ../my-cluster`).
set -u
export LC_ALL=C
: "${NCCLGUARD:?set NCCLGUARD to the ncclguard binary}"
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
BUILD=$(cd "$(dirname "$NCCLGUARD")" && pwd)
T=$(mktemp -d)
# shellcheck source=tests/kube/cluster.sh
. "$ROOT/tests/kube/cluster.sh"
KUBE_STARTED=0
trap 'kube_down; rm -rf "$T"' EXIT
passed=0
failed=0
skipped=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
bad() {
    failed=$((failed + 1))
    echo "FAIL - $1"
    [ -n "${2:-}" ] && sed 's/^/       /' "$2" | head -n 40
    return 0
}
skip() { skipped=$((skipped + 1)); echo "SKIP $1"; }

# A control plane for the current Markdown file, started at its first
# block that needs one; its state is that file's alone.
cluster_start() {
    [ "$KUBE_STARTED" = 1 ] && return 0
    rm -rf "$T/kube"
    kube_up "$T/kube" "${KUBE_RELEASE:-1.37}" 2>"$T/kube-up.log" || {
        cat "$T/kube-up.log" >&2
        return 1
    }
    KUBE_STARTED=1
    export DOCS_PIDS=$T/kube/pids
}
cluster_stop() {
    local p
    [ "$KUBE_STARTED" = 1 ] || return 0
    if [ -f "$DOCS_PIDS" ]; then
        while read -r p; do kube_stop "$p"; done <"$DOCS_PIDS"
    fi
    kube_down
    unset KUBECONFIG
    KUBE_STARTED=0
}

# cluster_block BODY WHERE MARKER: an sh block on the test apiserver.
cluster_block() {
    local body=$1 where=$2 marker=$3 setup="" then=""
    case $marker in *", after: "*) setup=${marker#*, after: } ;; esac
    case $setup in *", then: "*) then=${setup#*, then: } setup=${setup%%, then: *} ;; esac
    if ! cluster_start; then
        bad "$where: the test apiserver did not start" "$T/kube-up.log"
    elif [ -n "$setup" ] && ! RUN_TIMEOUT=180 run_in_ws "$T/out" bash -e -c "$setup"; then
        bad "$where: its setup \`$setup\` fails on the test apiserver" "$T/out"
    elif ! run_in_ws "$T/out" bash -e "$body"; then
        bad "$where: sh block fails on the test apiserver" "$T/out"
    elif [ -n "$then" ] && ! RUN_TIMEOUT=180 run_in_ws "$T/out" bash -e -c "$then"; then
        bad "$where: after the block, \`$then\` fails on the test apiserver" "$T/out"
    else
        ok "$where: sh block runs on the test apiserver ($(kubectl version -o json 2>/dev/null | jq -r .serverVersion.gitVersion))${then:+, and \`$then\` holds after it}"
    fi
}

# A scratch copy of the repository's sources (not build/ or .git).
fresh_workspace() {
    rm -rf "$T/w"
    mkdir -p "$T/w/ncclguard"
    W=$T/w
    (cd "$ROOT" && git ls-files -z 2>/dev/null || find . -type f -print0) |
        (cd "$ROOT" && xargs -0 cp --parents -t "$W/ncclguard" 2>/dev/null)
    # Untracked files of this checkout (new docs, new examples) too.
    (cd "$ROOT" && git ls-files -z --others --exclude-standard 2>/dev/null) |
        (cd "$ROOT" && xargs -0 -r cp --parents -t "$W/ncclguard" 2>/dev/null)
    ln -s "$BUILD" "$W/ncclguard/build"
}

# run_in_ws LOG CMD...: runs in the workspace with the built binaries first
# on PATH, at most RUN_TIMEOUT seconds (60).
run_in_ws() {
    local log=$1
    shift
    (cd "$W/ncclguard" && PATH="$BUILD:$PATH" timeout "${RUN_TIMEOUT:-60}" "$@") >"$log" 2>&1
}

yaml_block() { # yaml_block BODY WHERE MARKER
    local body=$1 where=$2 marker=$3 kinds f
    if ! yq -s . "$body" >"$T/doc.json" 2>"$T/err"; then
        bad "$where: yaml does not parse" "$T/err"
        return
    fi
    case $marker in
    "file: "*)
        f=$W/ncclguard/${marker#file: }
        mkdir -p "$(dirname "$f")" && cp "$body" "$f"
        ;;
    *) f=$T/block.yaml && cp "$body" "$f" ;;
    esac
    case $marker in
    "part of output of: "*)
        local cmd=${marker#part of output of: }
        if ! run_in_ws "$T/out" bash -c "$cmd 2>/dev/null"; then
            bad "$where: \`$cmd\` failed" "$T/out"
        elif yq -s . "$T/out" >"$T/got.json" 2>"$T/err" &&
            jq -e -n --slurpfile want "$T/doc.json" --slurpfile got "$T/got.json" '
                # Every key and value shown is in the real output; lists
                # shown may stop early but keep the real order.
                def within($a; $b):
                  if ($a | type) == "object" then
                    ($b | type) == "object" and
                    ([$a | keys[] as $k | ($b | has($k)) and within($a[$k]; $b[$k])] | all)
                  elif ($a | type) == "array" then
                    ($b | type) == "array" and ($a | length) <= ($b | length) and
                    ([range($a | length) as $i | within($a[$i]; $b[$i])] | all)
                  else $a == $b end;
                within($want[0]; $got[0])' >/dev/null; then
            ok "$where: every field shown is in what \`$cmd\` prints"
        else
            { echo "doc shows:"; cat "$body"; echo "real output:"; cat "$T/out"; } >"$T/diff"
            bad "$where: shows fields that \`$cmd\` does not print" "$T/diff"
        fi
        return
        ;;
    "output of: "*)
        local cmd=${marker#output of: }
        if ! run_in_ws "$T/out" bash -c "$cmd 2>/dev/null"; then
            bad "$where: \`$cmd\` failed" "$T/out"
        elif yq -s -S . "$T/out" >"$T/got.json" 2>"$T/err" &&
            jq -S . "$T/doc.json" >"$T/want.json" &&
            diff -u "$T/want.json" "$T/got.json" >"$T/diff"; then
            ok "$where: is what \`$cmd\` prints"
        else
            bad "$where: differs from what \`$cmd\` prints (- doc, + real)" "$T/diff"
        fi
        return
        ;;
    esac
    kinds=$(jq -r '[.[] | objects | .kind // empty] | unique | join(" ")' "$T/doc.json")
    case " $kinds " in
    *" Policy "*)
        if run_in_ws "$T/out" ncclguard policy lint "$f"; then
            ok "$where: Policy passes policy lint"
        else
            bad "$where: Policy fails policy lint" "$T/out"
        fi
        ;;
    *" PolicyTest "*)
        if run_in_ws "$T/out" ncclguard policy test "$f"; then
            ok "$where: PolicyTest passes"
        else
            bad "$where: PolicyTest fails" "$T/out"
        fi
        ;;
    *" Kustomization "* | *" Component "*)
        if [ "$f" = "$T/block.yaml" ]; then
            skip "$where: kustomization not rendered (no <!-- file: PATH --> marker)"
        elif [ "$kinds" = Component ]; then
            ok "$where: Component written to ${marker#file: } (rendered where an overlay uses it)"
        elif run_in_ws "$T/out" kubectl kustomize "$(dirname "$f")"; then
            ok "$where: kubectl kustomize renders it"
        else
            bad "$where: kubectl kustomize fails" "$T/out"
        fi
        ;;
    *)
        if jq -e '[.[] | objects | select(.apiVersion and .kind and .spec)] |
                  length > 0' "$T/doc.json" >/dev/null; then
            if run_in_ws "$T/out" ncclguard mutate "$f"; then
                ok "$where: manifest ($kinds) passes ncclguard mutate"
            else
                bad "$where: ncclguard mutate fails" "$T/out"
            fi
        else
            ok "$where: yaml parses (a fragment)"
        fi
        ;;
    esac
}

console_block() { # console_block BODY WHERE
    local body=$1 where=$2 cmd="" n=0
    : >"$T/expect"
    flush() {
        [ -n "$cmd" ] || return 0
        n=$((n + 1))
        run_in_ws "$T/out" bash -c "$cmd"
        local rc=$?
        # A command shown without output must succeed; one shown with
        # output (an error message, a lint report) may exit non-zero.
        if [ $rc -ne 0 ] && ! grep -qv '^\.\.\.$' "$T/expect"; then
            bad "$where: \`$cmd\` exits $rc" "$T/out"
        # Every expected line, in order, somewhere in the real output.
        elif awk -v want="$T/expect" '
            BEGIN { while ((getline l < want) > 0) if (l != "...") w[++nw] = l }
            { if (i < nw && $0 == w[i + 1]) i++ }
            END { exit !(i == nw) }' "$T/out"; then
            ok "$where: \`$cmd\` prints what the doc shows"
        else
            { echo "doc shows:"; cat "$T/expect"; echo "real output:"; cat "$T/out"; } >"$T/diff"
            bad "$where: \`$cmd\` output differs" "$T/diff"
        fi
        cmd=""
        : >"$T/expect"
    }
    local cont=0 line
    while IFS= read -r line || [ -n "$line" ]; do
        if [ $cont = 1 ]; then
            cmd="$cmd"$'\n'"$line"
            case $line in *\\) ;; *) cont=0 ;; esac
        elif [ "${line#\$ }" != "$line" ]; then
            flush
            cmd=${line#\$ }
            case $line in *\\) cont=1 ;; esac
        else
            printf '%s\n' "$line" >>"$T/expect"
        fi
    done <"$body"
    flush
    [ $n -gt 0 ] || bad "$where: console block without a \`\$ command\` line"
}

shopt -s nullglob
FILES=(README.md docs/*.md)
for md in "${FILES[@]}"; do
    echo "== $md"
    fresh_workspace
    rm -rf "$T/blocks" && mkdir -p "$T/blocks"
    awk -v dir="$T/blocks" -f tests/docs/extract.awk "$md" >"$T/index"
    while IFS=$'\t' read -r n file line lang marker; do
        where="$file:$line"
        body=$T/blocks/$n.body
        case $marker in
        "not run: "*)
            skip "$where: $lang block (${marker#not run: })"
            continue
            ;;
        "on the test apiserver" | "on the test apiserver, after: "*)
            case $lang in
            sh | bash | shell) cluster_block "$body" "$where" "$marker" ;;
            *) bad "$where: only sh blocks run on the test apiserver, not $lang" ;;
            esac
            continue
            ;;
        esac
        case $lang in
        UNCLOSED) bad "$where: a code fence is never closed" ;;
        yaml | yml) yaml_block "$body" "$where" "$marker" ;;
        json)
            if jq -s . "$body" >/dev/null 2>"$T/err"; then
                ok "$where: json parses"
            else
                bad "$where: json does not parse" "$T/err"
            fi
            ;;
        sh | bash | shell)
            if run_in_ws "$T/out" bash -e "$body"; then
                ok "$where: sh block runs"
            else
                bad "$where: sh block fails" "$T/out"
            fi
            ;;
        console) console_block "$body" "$where" ;;
        *) ;; # diagrams, plain text
        esac
    done <"$T/index"
    cluster_stop
done
echo "tests/docs: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
