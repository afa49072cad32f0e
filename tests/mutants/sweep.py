#!/usr/bin/env python3
"""Mechanical mutation sweep over the decision code (make mutants-sweep).

Where tests/mutants/mutants.txt lists mutations written by hand, this
generates them: in each file of FILES below, for every comparison, boolean
clause, bound and early return,

  cmp     flips < and <=, > and >=, == and !=;
  drop    drops the left or the right clause of an && or ||;
  const   replaces an integer constant that bounds something (an operand
          of a comparison, the value of a #define) with its neighbours,
          N-1 and N+1;
  return  deletes a return statement (it becomes {}).

Comments, string and character literals and preprocessor lines other than
"#define NAME N" are never touched. Each mutant is applied, one at a time,
to a scratch copy of the tree (as tests/mutants/run.sh does: tracked and
untracked-but-not-ignored files, uncommitted edits included; the tree
itself is never changed), the file's build targets are rebuilt, and the
narrowest checks that own the file are run. A mutant is

  killed      when a check fails (or times out: a hang is noticed too);
  survived    when every check passes;
  stillborn   when it does not build (the compiler caught it; not counted
              in the kill rate).

With --full, a mutant that survives its narrow checks is run against
`make test` too (about 9 minutes each on 2 CPUs).

  tests/mutants/sweep.py [--files F...] [--every N] [--offset K] [--full]
                         [--list] [--resume] [--timeout S] [--report]
                         [--ids ID...]

--every N --offset K keeps the mutants whose index (in the order listed,
per file) is K modulo N: a deterministic sample. Results are appended to
build/sweep/results.tsv (--resume skips those already there; --ids runs
the mutants named again, after a new test, and their new rows count) and
summed up in build/sweep/report.md (--report only writes the report).
"""

import argparse
import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# file -> (what to build, narrow checks in order). The checks are the
# make targets that own the file: its unit test first, then the
# integration checks that drive it.
FILES = {
    # test_mutate writes every patch through the text writer, under libc
    # and jansson allocation failure at each allocation.
    "admission/patch.c": (["build/tests/test_patch",
                           "build/tests/test_patch_check",
                           "build/tests/test_mutate"],
                          ["check-unit-patch", "check-unit-patch_check",
                           "check-unit-mutate"]),
    "admission/review.c": (["build/tests/test_review"],
                           ["check-unit-review"]),
    "admission/mutate.c": (["build/tests/test_mutate"],
                           ["check-unit-mutate"]),
    # The decoder's lazy arrays: read off the tape by test_fastjson, and
    # through the plan by test_review (review_handle() decodes lazily).
    "admission/fastjson.cc": (["build/tests/test_fastjson",
                               "build/tests/test_review"],
                              ["check-unit-fastjson", "check-unit-review"]),
    # plan.c and plan_ringcheck.c read a container's env and mounts off
    # the tape on the review path (test_review), built on the others.
    "admission/plan.c": (["build/tests/test_mutate", "build/tests/test_review"],
                         ["check-unit-mutate", "check-unit-review"]),
    "admission/plan_names.c": (["build/tests/test_mutate"],
                               ["check-unit-mutate"]),
    "admission/plan_gpus.c": (["build/tests/test_mutate"],
                              ["check-unit-mutate"]),
    "admission/plan_env.c": (["build/tests/test_mutate"],
                             ["check-unit-mutate"]),
    "admission/plan_shm.c": (["build/tests/test_mutate"],
                             ["check-unit-mutate"]),
    "admission/plan_ipc.c": (["build/tests/test_mutate"],
                             ["check-unit-mutate"]),
    "admission/plan_watchdog.c": (["build/tests/test_mutate"],
                                  ["check-unit-mutate"]),
    "admission/plan_ringcheck.c": (["build/tests/test_mutate",
                                    "build/tests/test_review"],
                                   ["check-unit-mutate", "check-unit-review"]),
    "admission/plan_emit.c": (["build/tests/test_mutate"],
                              ["check-unit-mutate"]),
    "certs/certs.c": (["build/tests/test_certs", "build/ncclguard"],
                      ["check-unit-certs", "check-certs"]),
    "server/http.c": (["build/tests/test_http", "build/ncclguard",
                       "build/tests/ncclguard-peer"],
                      # Cheapest first: most mutants fall to the first
                      # checks. Not test_shutdown.sh: it measures a 25 s
                      # cap against the wall clock, and fails unmutated on
                      # a loaded machine (32.7 s at a load of 13).
                      ["check-unit-http", "check-http-http",
                       "check-http-drain", "check-http-limits",
                       "check-http-routes", "check-bad-inputs",
                       "check-http-tls", "check-http-transport"]),
    # The ring check's own checks, narrowed: the whole of check-ringcheck
    # (gpu-smoke, single-pod, cross-node) takes about 4 minutes a mutant.
    # The rendezvous protocol by its unit test, then the cross-node cases
    # that speak it; the supervisor by the single-pod cases (stopping at
    # the first failure), then the cross-node ones.
    "ringcheck/rendezvous.c": (["build/tests/test_rendezvous", "ringcheck",
                                "build/tests/rdv-client"],
                               ["check-unit-rendezvous",
                                "check-ringcheck-multinode"]),
    "ringcheck/supervisor.c": (["ringcheck"],
                               ["check-ringcheck-fast",
                                "check-ringcheck-multinode"]),
    # The unit test first: without it only the agent's cases judged rule.c.
    "watchdog/rule.c": (["build/tests/test_wd_rule"],
                        ["check-unit-wd_rule", "check-watchdog"]),
    "watchdog/agent.c": (["all"], ["check-watchdog"]),
}

TOKEN = re.compile(
    r"[A-Za-z_]\w*|0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*|"
    r"<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!~]=|"
    r"[^\s\w]")
FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
CMP = set(FLIP)
ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
STOP = ASSIGN | {";", ",", "?", ":", "{", "}", "return", "case"}
OPEN, CLOSE = "([", ")]"


def mask(text):
    """The text with comments, literals and preprocessor lines blanked
    (same length, newlines kept), and the #define constants found."""
    out = list(text)
    defines = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":
            j = i
            while j < n and (text[j] != "\n" or text[j - 1] == "\\"):
                j += 1
            m = re.match(r"#\s*define\s+\w+\s+\(?(\d+)[uUlL]*\)?\s*(/\*.*)?$",
                         text[i:j])
            if m:
                defines.append((i + m.start(1), i + m.end(1)))
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        line_start = c == "\n"
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j += 1
        else:
            i += 1
            continue
        # A literal stays one token (an identifier of its length), so that
        # the clause around it keeps its bounds; a comment is blank.
        fill = "_" if c in "\"'" else " "
        for k in range(i, min(j, n)):
            if out[k] != "\n":
                out[k] = fill
        i = j
    return "".join(out), defines


def tokens(masked):
    return [(m.group(0), m.start(), m.end()) for m in TOKEN.finditer(masked)]


def clause_bounds(toks, k):
    """The token index ranges of the left and right operands of the
    logical operator at toks[k]."""
    op = toks[k][0]
    stops = {"||"} if op == "||" else {"&&", "||"}
    depth, i = 0, k - 1
    while i >= 0:
        t = toks[i][0]
        if t in CLOSE:
            depth += 1
        elif t in OPEN:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (t in stops or t in STOP):
            break
        i -= 1
    left = (i + 1, k - 1)
    depth, j = 0, k + 1
    while j < len(toks):
        t = toks[j][0]
        if t in OPEN:
            depth += 1
        elif t in CLOSE:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (t in stops or t in STOP):
            break
        j += 1
    right = (k + 1, j - 1)
    return left, right


def int_value(tok):
    m = re.match(r"(0[xX][0-9a-fA-F]+|\d+)([uUlL]*)$", tok)
    if not m:
        return None
    return int(m.group(1), 0), m.group(2), m.group(1).lower().startswith("0x")


def neighbours(tok):
    v = int_value(tok)
    if v is None:
        return []
    val, suffix, hexa = v
    out = []
    for w in (val - 1, val + 1):
        if w < 0:
            continue
        out.append((hex(w) if hexa else str(w)) + suffix)
    return out


def generate(path):
    """The mutants of one file: (line, kind, start, end, replacement,
    description), in file order."""
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    masked, defines = mask(text)
    toks = tokens(masked)
    muts = []

    def line_of(pos):
        return text.count("\n", 0, pos) + 1

    def add(kind, start, end, repl):
        orig = text[start:end]
        desc = "%s: '%s' -> '%s'" % (kind, " ".join(orig.split())[:80],
                                     " ".join(repl.split())[:80])
        muts.append((line_of(start), kind, start, end, repl, desc))

    for k, (t, s, e) in enumerate(toks):
        if t in CMP:
            add("cmp", s, e, FLIP[t])
            for side in (k - 1, k + 1):
                if 0 <= side < len(toks) and int_value(toks[side][0]):
                    nt, ns, ne = toks[side]
                    for w in neighbours(nt):
                        add("const", ns, ne, w)
        elif t in ("&&", "||"):
            (l0, l1), (r0, r1) = clause_bounds(toks, k)
            if l0 > l1 or r0 > r1:
                continue
            # Drop the left clause (keep the right) and the other way.
            add("drop", toks[l0][1], toks[r0][1], "")
            add("drop", toks[l1][2], toks[r1][2], "")
        elif t == "return":
            j = k
            depth = 0
            while j < len(toks):
                if toks[j][0] in OPEN:
                    depth += 1
                elif toks[j][0] in CLOSE:
                    depth -= 1
                elif toks[j][0] == ";" and depth == 0:
                    break
                j += 1
            if j < len(toks):
                add("return", s, toks[j][2], "{}")
    for s, e in defines:
        for w in neighbours(text[s:e]):
            add("const", s, e, w)
    muts.sort(key=lambda m: (m[2], m[1], m[4]))
    return text, muts


def mutant_id(path, idx, m):
    return "%s:%d:%s#%d" % (path, m[0], m[1], idx)


def make(src, targets, timeout, log):
    cmd = ["make", "-C", src, "--no-print-directory"] + targets
    env = dict(os.environ)
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        env.pop(k, None)
    # A session of its own, so that a timeout ends the whole tree: killing
    # make alone left a mutant's spinning test binary running for good.
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True)
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            return 124


def copy_tree(src):
    if os.path.isdir(src):
        shutil.rmtree(src)
    os.makedirs(src)
    files = subprocess.run(["git", "ls-files", "-z", "-co",
                            "--exclude-standard"], cwd=ROOT, check=True,
                           stdout=subprocess.PIPE).stdout
    tar = subprocess.Popen(["tar", "--null", "-T", "-", "-cf", "-"],
                           cwd=ROOT, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)
    untar = subprocess.Popen(["tar", "-C", src, "-xf", "-"],
                             stdin=tar.stdout)
    tar.stdin.write(files)
    tar.stdin.close()
    tar.stdout.close()
    if untar.wait() != 0 or tar.wait() != 0:
        sys.exit("sweep: cannot copy the tree to " + src)
    # The tree's own build, when there is one, saves the first full build:
    # tar kept the sources' times, so make rebuilds only what is stale.
    build = os.path.join(ROOT, "build")
    if os.path.isdir(build):
        shutil.copytree(build, os.path.join(src, "build"), symlinks=True,
                        ignore=lambda d, names: [
                            x for x in names if d == build and
                            (x in ("mutants", "checks") or
                             x.startswith("sweep"))])


def read_results(path):
    res = {}
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 4:
                res[f[0]] = f
    return res


def write_report(out_dir, results, runs):
    per = {}
    for mid, f in results.items():
        path = mid.split(":", 1)[0]
        per.setdefault(path, []).append(f)
    lines = ["# Mutation sweep: results", "",
             "Written by tests/mutants/sweep.py from %s." %
             os.path.join(out_dir, "results.tsv"), ""]
    for r in runs:
        lines.append("- " + r)
    lines += ["", "| file | mutants run | killed | survived | stillborn |"
              " kill rate |", "| --- | --- | --- | --- | --- | --- |"]
    for path in sorted(per):
        rows = per[path]
        k = sum(1 for f in rows if f[1].startswith("killed"))
        s = sum(1 for f in rows if f[1] == "survived")
        b = sum(1 for f in rows if f[1] == "stillborn")
        rate = "%.1f %%" % (100.0 * k / (k + s)) if k + s else "-"
        lines.append("| %s | %d | %d | %d | %d | %s |" %
                     (path, len(rows), k, s, b, rate))
    lines += ["", "## Survivors", ""]
    for mid in sorted(results, key=sort_key):
        f = results[mid]
        if f[1] == "survived":
            lines.append("- `%s` %s (passes %s)" % (mid, f[3], f[2]))
    with open(os.path.join(out_dir, "report.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def sort_key(mid):
    path, rest = mid.split(":", 1)
    return path, int(rest.split("#")[1])


def emit(plan, results, test):
    """Prints the planned mutants as mutants.txt entries: the anchor is the
    line that holds the change, without its indentation, which must occur
    once in the file; a change over several lines, or on a line that is
    not unique, is left out with a note on stderr."""
    for f, idx, m, text in plan:
        mid = mutant_id(f, idx, m)
        ls = text.rfind("\n", 0, m[2]) + 1
        le = text.find("\n", m[3])
        le = len(text) if le < 0 else le
        line = text[ls:le]
        if "\n" in line:
            print("sweep: %s spans lines; left out" % mid, file=sys.stderr)
            continue
        anchor = line.strip()
        if text.count(anchor) != 1:
            print("sweep: %s: its line is not unique; left out" % mid,
                  file=sys.stderr)
            continue
        new_line = text[ls:m[2]] + m[4] + text[m[3]:le]
        row = results.get(mid)
        t = test or (row[2].split()[0] if row and
                     row[1].startswith("killed") else None)
        if t is None:
            print("sweep: %s was not killed; left out" % mid,
                  file=sys.stderr)
            continue
        stem = os.path.splitext(os.path.basename(f))[0]
        print("name:    sweep-%s-%d-%s%d" % (stem, m[0], m[1], idx))
        print("file:    %s" % f)
        print("find:    %s" % anchor)
        print("replace: %s" % new_line.strip())
        print("test:    %s" % t)
        print()
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", nargs="*", default=None)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--emit", action="store_true",
                    help="print the mutants named by --ids as entries of "
                    "tests/mutants/mutants.txt, each with the check named "
                    "in the results (or --emit-test)")
    ap.add_argument("--emit-test", default=None)
    ap.add_argument("--ids", nargs="*", default=None,
                    help="run only these mutants again (their new rows "
                    "replace the old ones in the results)")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--dir", default=os.path.join(ROOT, "build", "sweep"))
    a = ap.parse_args()
    files = a.files if a.files else list(FILES)
    for f in files:
        if f not in FILES:
            sys.exit("sweep: %s is not a swept file (%s)" %
                     (f, ", ".join(FILES)))
    os.makedirs(a.dir, exist_ok=True)
    res_path = os.path.join(a.dir, "results.tsv")
    runs_path = os.path.join(a.dir, "runs.txt")
    if a.report:
        runs = open(runs_path).read().splitlines() \
            if os.path.exists(runs_path) else []
        write_report(a.dir, read_results(res_path), runs)
        return 0

    plan = []
    for f in files:
        text, muts = generate(f)
        for idx, m in enumerate(muts):
            if a.ids is not None:
                if mutant_id(f, idx, m) in a.ids:
                    plan.append((f, idx, m, text))
            elif idx % a.every == a.offset % a.every:
                plan.append((f, idx, m, text))
    if a.emit:
        return emit(plan, read_results(res_path), a.emit_test)
    if a.list:
        for f, idx, m, _ in plan:
            print("%s\t%s" % (mutant_id(f, idx, m), m[5]))
        print("sweep: %d mutants" % len(plan))
        return 0

    keep = a.resume or a.ids is not None
    done = read_results(res_path) if a.resume else {}
    if not keep and os.path.exists(res_path):
        os.remove(res_path)
    src = os.path.join(a.dir, "src")
    print("sweep: copying the tree to %s" % src, flush=True)
    copy_tree(src)
    need = sorted({t for f in files for t in FILES[f][0]} | {"all"})
    print("sweep: building the unmutated copy", flush=True)
    if make(src, ["-j2"] + need, 3600, os.path.join(a.dir, "build.log")):
        sys.exit("sweep: the unmutated copy does not build; see " +
                 os.path.join(a.dir, "build.log"))
    for t in sorted({t for f in files for t in FILES[f][1]}):
        if make(src, [t], a.timeout, os.path.join(a.dir, "base-%s.log" % t)):
            sys.exit("sweep: baseline %s FAILS without any mutation" % t)
        print("sweep: baseline %s passes" % t, flush=True)
    with open(runs_path, "a") as fh:
        fh.write("%s: %s, every %d (offset %d)%s, %d mutants\n" %
                 (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
                  " ".join(files), a.every, a.offset,
                  ", then make test" if a.full else "", len(plan)))

    with open(res_path, "a") as out:
        for f, idx, m, text in plan:
            mid = mutant_id(f, idx, m)
            if mid in done:
                continue
            target = os.path.join(src, f)
            mutated = text[:m[2]] + m[4] + text[m[3]:]
            with open(target, "w") as fh:
                fh.write(mutated)
            start = time.time()
            log = os.path.join(a.dir, "last.log")
            builds, checks = FILES[f]
            verdict, by = "survived", " ".join(checks)
            if make(src, ["-j2"] + builds, a.timeout, log) != 0:
                verdict, by = "stillborn", "build"
            else:
                for t in checks:
                    rc = make(src, [t], a.timeout, log)
                    if rc:
                        verdict = "killed" if rc != 124 else "killed-timeout"
                        by = t
                        break
                if verdict == "survived" and a.full:
                    rc = make(src, ["test"], 4 * a.timeout, log)
                    if rc:
                        verdict, by = "killed", "test"
                    else:
                        by += " test"
            with open(target, "w") as fh:
                fh.write(text)
            os.utime(target)
            row = [mid, verdict, by, m[5], "%d" % (time.time() - start)]
            out.write("\t".join(row) + "\n")
            out.flush()
            print("%-10s %s %s (%s)" % (verdict, mid, m[5], by), flush=True)
    runs = open(runs_path).read().splitlines()
    write_report(a.dir, read_results(res_path), runs)
    print("sweep: report in %s" % os.path.join(a.dir, "report.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
