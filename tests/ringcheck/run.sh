#!/usr/bin/env bash
# Integration tests of ncclguard-ringcheck: the real binary against the
# CUDA/NCCL test double (tests/fakes), one injected fault per case.
#
#   RINGCHECK=path/to/ncclguard-ringcheck FAKES=dir/with/fake/libs run.sh
# RINGCHECK_FAILFAST=1 stops at the first failure (make mutants).
set -u

: "${RINGCHECK:?set RINGCHECK to the binary}"
: "${FAKES:?set FAKES to the folder with the test double}"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ringcheck-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
OUT=$TMP/out
TL=$TMP/termination-log
REPORT=$TMP/report.json
CONF=$TMP/nccl.conf
ELAPSED=0
RC=0

ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $CASE: $*"
    echo "---- output of $CASE"
    sed -e 's/^/    /' "$OUT" | tail -40
    echo "----"
    # make mutants: the first failure is enough.
    if [ -n "${RINGCHECK_FAILFAST:-}" ]; then exit 1; fi
}

# rc ENV... -- ARGS...: runs the binary against the double with ENV.
run() {
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    rm -f "$TL" "$REPORT" "$CONF"
    mkdir -p "$TMP/shm"
    local t0 t1
    t0=$(date +%s%N)
    # The outer timeout only keeps a broken build from stalling the suite;
    # every case asserts its own, much shorter, limit.
    timeout -k 2 60 env LD_LIBRARY_PATH="$FAKES" LD_BIND_NOW=1 \
        FAKENCCL_DIR="$TMP/shm" NCCL_BUFFSIZE=1048576 "${envs[@]}" \
        "$RINGCHECK" --termination-log "$TL" --report "$REPORT" \
        --bw-bytes 1Mi "$@" >"$OUT" 2>&1
    RC=$?
    t1=$(date +%s%N)
    ELAPSED=$(( (t1 - t0) / 1000000 ))
}

expect_rc() { [ "$RC" -eq "$1" ] && ok || bad "exit code $RC, want $1"; }
expect_out() { grep -qE -- "$1" "$OUT" && ok || bad "output lacks /$1/"; }
expect_no_out() { grep -qE -- "$1" "$OUT" && bad "output has /$1/" || ok; }
expect_tl() {
    if [ -f "$TL" ] && grep -qE -- "$1" "$TL"; then ok
    else bad "termination log lacks /$1/: $(cat "$TL" 2>/dev/null)"; fi
}
# expect_json JQ_EXPR: the JSON summary line (stdout and --report) makes
# the jq expression true.
expect_json() {
    local line
    line=$(grep -E '^\{"ringcheck":' "$OUT" | tail -1)
    if [ -z "$line" ]; then bad "no JSON summary line"; return; fi
    if ! printf '%s\n' "$line" | jq -e "$1" >/dev/null 2>&1; then
        bad "JSON fails $1: $line"; return
    fi
    if [ "$(cat "$REPORT" 2>/dev/null)" != "$line" ]; then
        bad "--report differs from the JSON line"; return
    fi
    ok
}
# expect_within MS: the run took at most MS milliseconds.
expect_within() {
    [ "$ELAPSED" -le "$1" ] && ok || bad "took ${ELAPSED} ms, limit $1 ms"
}
expect_footer() {
    expect_out "^# Out of bounds values : $1\$"
    expect_out '^# Avg bus bandwidth    : [0-9.e+-]+ $'
}

CASE="the real build links the real libraries"
LD_OUT=$(env -u LD_LIBRARY_PATH ldd "$RINGCHECK" 2>&1)
echo "$LD_OUT" | grep -q 'libnccl\.so\.2 => /' && ok || bad "ldd: $LD_OUT"
echo "$LD_OUT" | grep -q 'libcudart\.so\.[0-9]* => /' && ok || bad "ldd: $LD_OUT"
echo "$LD_OUT" | grep -q 'fakes' && bad "ldd resolves to the double" || ok
readelf -d "$RINGCHECK" | grep -q RUNPATH && ok || bad "no RUNPATH"

CASE="the real libraries on a machine without a GPU"
if [ ! -e /dev/nvidiactl ]; then
    t0=$(date +%s%N)
    env -u LD_LIBRARY_PATH "$RINGCHECK" --expect-gpus 1 --timeout 10 \
        --termination-log "$TL" >"$OUT" 2>&1
    RC=$?
    ELAPSED=$(( ($(date +%s%N) - t0) / 1000000 ))
    expect_rc 9
    expect_within 1000
    expect_out 'no usable GPU or driver'
    expect_tl 'environment \(exit 9\) in phase 0 \(preflight\)'
    expect_tl 'no usable GPU or driver'
else
    echo "SKIP no-GPU case of the real build (/dev/nvidiactl exists)"
fi

CASE="usage errors"
"$RINGCHECK" --mode ring >"$OUT" 2>&1; RC=$?
expect_rc 6; expect_out '--mode: expected process or group, got "ring"'
"$RINGCHECK" --bw-bytes 1MB >"$OUT" 2>&1; RC=$?
expect_rc 6; expect_out '--bw-bytes: expected'
"$RINGCHECK" --timeout >"$OUT" 2>&1; RC=$?
expect_rc 6; expect_out '--timeout: missing value'
"$RINGCHECK" --expect-gpus 0 >"$OUT" 2>&1; RC=$?
expect_rc 6
"$RINGCHECK" --bogus >"$OUT" 2>&1; RC=$?
expect_rc 6; expect_out 'unknown option "--bogus"'
"$RINGCHECK" --help >"$OUT" 2>&1; RC=$?
expect_rc 0; expect_out '^usage: ncclguard-ringcheck'

CASE="pass, one process per GPU"
run FAKECUDA_DEVICES=2 -- --expect-gpus 2 --timeout 20
expect_rc 0
expect_footer "0 OK"
expect_out 'phase 2 topology'
expect_out '^GPU0 +X +NV +0'
expect_out '^ +1048576 +262144 +int32 +sum +-1 .* allreduce$'
expect_json '.ringcheck == "pass" and .exit == 0 and .gpus == 2 and .nccl_version == "2.28.9" and .busbw_gbps > 0 and .mode == "process"'
expect_tl '^ncclguard-ringcheck passed: 2 GPUs'
expect_no_out 'FAILED'

CASE="pass, one process for all GPUs"
run FAKECUDA_DEVICES=3 -- --expect-gpus 3 --mode group --timeout 20
expect_rc 0
expect_footer "0 OK"
expect_json '.ringcheck == "pass" and .mode == "group" and .gpus == 3'
# busbw = algbw x 2(n-1)/n, as nccl-tests reports it: 4/3 for 3 GPUs. Both
# are printed to 3 decimals, so busbw may differ from algbw x 4/3 by half a
# unit of each rounding (0.0005 + 0.0005 x 4/3 < 0.0012). The double's speed
# depends on the machine's load (CI under make asan saw 0.049 GB/s), so the
# bound is on rounding, not on speed; at algbw >= 0.01 a wrong factor (1 or
# 2/3 for 3 GPUs) is off by 0.003 or more.
expect_json '.algbw_gbps >= 0.01 and (.busbw_gbps - .algbw_gbps * 4 / 3 | fabs) < 0.0012'

CASE="fallback after a pass writes a file with no settings"
run FAKECUDA_DEVICES=2 -- --expect-gpus 2 --timeout 20 \
    --on-failure fallback --fallback-conf "$CONF"
expect_rc 0
if [ -f "$CONF" ] && ! grep -q '=' "$CONF"; then ok; else bad "conf: $(cat "$CONF" 2>/dev/null)"; fi
expect_json '.ringcheck == "pass"'

CASE="NCCL variables checked against the catalog"
run FAKECUDA_DEVICES=2 NCCL_TIMEOUT=100 -- --expect-gpus 2 --timeout 20
expect_rc 0
expect_out 'phase 0 preflight: warning: NCCL_TIMEOUT=100'
expect_json '.warnings >= 1'

CASE="no devices"
run FAKECUDA_DEVICES=0 -- --expect-gpus 2 --timeout 20
expect_rc 9
expect_within 1000
expect_out 'no usable GPU or driver.*no CUDA-capable device is detected'
expect_json '.exit == 9 and .phase == 0 and .code_name == "environment"'
expect_tl 'environment \(exit 9\) in phase 0 \(preflight\)'

CASE="no driver"
run FAKECUDA_DRIVER=missing -- --expect-gpus 2 --timeout 20
expect_rc 9
expect_out 'CUDA driver version is insufficient'

CASE="cannot run here: a driver older than the runtime, named, exit 0 unless --on-failure fail"
run FAKECUDA_DRIVER_VERSION=12040 -- --expect-gpus 2 --timeout 20 \
    --on-failure fallback --fallback-conf "$CONF"
expect_rc 0
expect_within 1000
expect_out 'WARNING: the check cannot run here, so it did not judge this node'
expect_json '.ringcheck == "cannot-run" and .exit == 0 and .code == 9 and (.cannot_run | test("supports CUDA 12.4.*needs driver 580 or newer"))'
expect_tl 'WARNING: the check cannot run here'
expect_tl '^cannot run: the NVIDIA driver is too old'
run FAKECUDA_DRIVER_VERSION=12040 -- --expect-gpus 2 --timeout 20 --on-failure fail
expect_rc 9
expect_json '.ringcheck == "fail" and .exit == 9 and (.cannot_run | test("580"))'

CASE="cannot run here: no driver, and an AMD GPU, told apart from a bad node"
run FAKECUDA_DRIVER=missing -- --expect-gpus 2 --timeout 20 --on-failure warn
expect_rc 0
expect_json '.ringcheck == "cannot-run" and (.cannot_run | test("no NVIDIA driver"))'
mkdir -p "$TMP/dev"; touch "$TMP/dev/kfd"
run FAKECUDA_DRIVER=missing RINGCHECK_DEVROOT="$TMP/dev" -- --expect-gpus 2 \
    --timeout 20 --on-failure fallback --fallback-conf "$CONF"
expect_rc 0
expect_json '.ringcheck == "cannot-run" and (.cannot_run | test("not an NVIDIA one.*kfd"))'
# A bad node is judged: no device behind a working driver stays exit 9.
run FAKECUDA_DEVICES=0 -- --expect-gpus 2 --timeout 20 --on-failure warn
expect_rc 0
expect_json '.ringcheck == "warn" and .cannot_run == null'

CASE="cannot run here: NCCL built for a newer CUDA than the driver"
run FAKECUDA_DEVICES=2 FAKENCCL_CUDA_MISMATCH=1 -- --expect-gpus 2 \
    --timeout 20 --on-failure fallback --fallback-conf "$CONF"
expect_rc 0
expect_out 'diagnosis: skipped: the check cannot run here'
expect_json '.ringcheck == "cannot-run" and .code == 3 and .phase == 3 and (.cannot_run | test("NCCL and CUDA in the image do not match"))'

CASE="GPU count mismatch"
run FAKECUDA_DEVICES=2 -- --expect-gpus 4 --timeout 20
expect_rc 9
expect_tl 'GPU count mismatch: 2 visible, 4 expected'
expect_json '.exit == 9 and .gpus == 2 and .expected_gpus == 4'

CASE="MIG and time-slicing: one device for several requested is said so, not exit 9"
run FAKECUDA_DEVICES=1 NVIDIA_VISIBLE_DEVICES=MIG-4f8c2a1e-6b1d-5e2f-9a3c-1d2e3f4a5b6c,MIG-5a9d3b2f-7c2e-6f30-ab4d-2e3f4a5b6c7d \
    -- --expect-gpus 2 --timeout 20
expect_rc 0
expect_out 'warning: 2 GPUs requested, 1 visible: NVIDIA_VISIBLE_DEVICES names MIG instances, and CUDA enumerates one MIG instance per process'
expect_json '.ringcheck == "pass" and .gpu_sharing == "mig" and .gpus == 1 and .warnings >= 1'
expect_tl '^gpu sharing: mig: 2 requested, 1 visible'
run FAKECUDA_DEVICES=1 NVIDIA_VISIBLE_DEVICES=GPU-8e1f0c3a::0,GPU-8e1f0c3a::1 \
    -- --expect-gpus 2 --timeout 20
expect_rc 0
expect_json '.gpu_sharing == "time-slicing"'
run FAKECUDA_DEVICES=1 CUDA_VISIBLE_DEVICES=GPU-8e1f0c3a,GPU-8e1f0c3a \
    -- --expect-gpus 2 --timeout 20
expect_json '.gpu_sharing == "time-slicing"'
# Two different GPUs named and one seen: the node is wrong, exit 9.
run FAKECUDA_DEVICES=1 NVIDIA_VISIBLE_DEVICES=GPU-8e1f0c3a,GPU-77aa01b2 \
    -- --expect-gpus 2 --timeout 20
expect_rc 9
expect_json '.gpu_sharing == null'

CASE="duplicate devices"
run FAKECUDA_DEVICES=2 FAKECUDA_DUPLICATE=0,1 -- --expect-gpus 2 --timeout 20
expect_rc 9
expect_tl 'duplicate devices: GPU 0 and GPU 1 are the same GPU'

CASE="/dev/shm too small for the NCCL buffers"
run FAKECUDA_DEVICES=2 NCCL_BUFFSIZE=1099511627776 -- --expect-gpus 2 --timeout 20
expect_rc 9
expect_tl '/dev/shm too small'
expect_tl 'fix: mount a memory-backed /dev/shm'

CASE="hang in init"
run FAKECUDA_DEVICES=2 FAKENCCL_HANG_INIT=0 -- --expect-gpus 2 --timeout 20 \
    --phase-timeout 2 --no-diagnose
expect_rc 4
expect_within 3000
expect_json '.exit == 4 and .phase == 3 and .phase_name == "nccl-init" and .ranks == "0,1"'
expect_tl 'timeout or hang \(exit 4\) in phase 3 \(nccl-init\)'
expect_tl 'did not finish within 2.0 s; stuck ranks: 0,1'

CASE="hang in a collective on one rank, one process per GPU"
run FAKECUDA_DEVICES=2 FAKENCCL_HANG_COLL=1 -- --expect-gpus 2 --timeout 20 \
    --phase-timeout 2 --no-diagnose
expect_rc 4
expect_within 3000
expect_json '.exit == 4 and .phase == 4 and .phase_name == "correctness"'
expect_tl 'in phase 4 \(correctness\)'
expect_tl 'stuck ranks'
expect_footer "0 OK"

CASE="hang in a collective on one rank, one process for all GPUs"
run FAKECUDA_DEVICES=2 FAKENCCL_HANG_COLL=1 -- --expect-gpus 2 --timeout 20 \
    --phase-timeout 2 --no-diagnose --mode group
expect_rc 4
expect_within 3000
expect_json '.exit == 4 and .phase == 4 and .mode == "group"'

CASE="a hang whose abort hangs too is killed"
# 2 s phase timeout, 1 s abort grace (one communicator), 0.25 s after SIGTERM.
run FAKECUDA_DEVICES=2 FAKENCCL_HANG_COLL=1 FAKENCCL_ABORT_HANG=1 -- \
    --expect-gpus 2 --timeout 20 --phase-timeout 2 --no-diagnose
expect_rc 4
expect_within 4000
expect_tl 'did not abort in time and were killed'

CASE="regression: SIGTERM comes early enough for its grace, in group mode with 8 GPUs"
# One process owns 8 communicators: an abort grace of 4.5 s, longer than a
# 4 s deadline leaves. The stop's SIGTERM must still come SV_TERM_GRACE_S
# + SV_KILL_WAIT_S before deadline + 0.8 s; each worker takes 50 ms to end
# on SIGTERM (as a CUDA process does while the driver tears it down), so
# only a SIGTERM that comes too late needs SIGKILL.
run FAKECUDA_DEVICES=8 FAKENCCL_HANG_COLL=1 FAKENCCL_ABORT_HANG=1 \
    FAKENCCL_TERM_S=0.05 -- --expect-gpus 8 --mode group --timeout 4 \
    --no-diagnose
expect_rc 4
expect_within 5300
expect_tl 'abort grace 4.50 s\): they ended on SIGTERM'
expect_no_out 'needed SIGKILL'

CASE="the whole check's deadline bounds the diagnosis"
run FAKECUDA_DEVICES=2 FAKENCCL_HANG_COLL=1 -- --expect-gpus 2 --timeout 3 \
    --phase-timeout 1
expect_rc 4
expect_within 4000
expect_json '.exit == 4 and .phase == 4 and (.diagnosis | test("incomplete"))'

CASE="a hang on one GPU of four is bisected to a pair"
# The four settings are already set, so diagnosis skips them and bisects.
# A 2 s phase timeout: with 1 s the healthy half timed out too on a loaded
# machine (four worker processes starting on 2 shared CPUs).
run FAKECUDA_DEVICES=4 FAKENCCL_HANG_COLL=3 NCCL_P2P_DISABLE=1 \
    NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 -- \
    --expect-gpus 4 --timeout 20 --phase-timeout 2
expect_rc 4
expect_out 'diagnosis: NCCL_P2P_DISABLE=1 is already set; skipped'
expect_out 'diagnosis: GPUs 0,1: pass \(first half\)'
expect_out 'diagnosis: GPUs 2,3: timeout or hang \(second half\)'
expect_json '.exit == 4 and .phase == 4 and .gpu_pair == [2,3] and .cure == null'
expect_tl 'gpus: pair GPU 2 \(00000000:1A:00.0\) - GPU 3 \(00000000:1B:00.0\)'

CASE="regression: on an NVSwitch node (sm90+, NVLink everywhere) NVLS is tried first"
# NVLS does not depend on NCCL_P2P_DISABLE: tried last, the P2P and SHM
# reruns each hung for a phase before it.
run FAKECUDA_DEVICES=4 FAKECUDA_MULTICAST=1 FAKENCCL_NVLS_HANG=1 -- \
    --expect-gpus 4 --timeout 30 --phase-timeout 4 --no-diagnose \
    --on-failure fallback --fallback-conf "$CONF"
expect_rc 0
expect_out 'NVSwitch node \(sm90\+, NVLink between all GPUs\): NVLS first'
first=$(grep -m1 -oE 'diagnosis: GPUs [0-9,]+ with NCCL_[A-Z_]+=[0-9]' "$OUT")
case "$first" in *NCCL_NVLS_ENABLE=0) ok ;; *) bad "first rerun: $first" ;; esac
expect_json '.ringcheck == "fallback" and .cure == "NCCL_NVLS_ENABLE=0" and .transport == "NVLS"'

CASE="regression: every diagnosis rerun has a short phase timeout of its own"
# Without NVSwitch the order is P2P, SHM, NVLS. With the check's 6 s phase
# timeout per rerun the two hanging reruns took 13 s and NVLS was never
# reached before the 18 s deadline; with 3 s each it is.
run FAKECUDA_DEVICES=2 FAKECUDA_MULTICAST=1 FAKECUDA_LINK=pcie \
    FAKENCCL_NVLS_HANG=1 -- --expect-gpus 2 --timeout 18 --phase-timeout 6
expect_rc 4
expect_out 'diagnosis: rerunning in fresh workers to find what fails \(phase timeout 3.0 s per rerun\)'
expect_out 'diagnosis: GPUs 0,1 with NCCL_SHM_DISABLE=1: timeout or hang'
expect_json '.exit == 4 and .cure == "NCCL_NVLS_ENABLE=0"'
expect_within 18800

CASE="the bandwidth size is cut when GPU memory is short"
run FAKECUDA_DEVICES=2 FAKECUDA_MEM_MIB=520 -- --expect-gpus 2 --timeout 20 \
    --bw-bytes 1Gi
expect_rc 0
expect_out 'phase 5 bandwidth: memory is short \(8 MiB free\); using 2097152 bytes'
expect_json '.bw_bytes == 2097152 and .busbw_gbps > 0'

CASE="wrong result on one rank"
run FAKECUDA_DEVICES=2 FAKENCCL_WRONG=1 -- --expect-gpus 2 --timeout 20
expect_rc 7
expect_footer "4 FAILED"
expect_json '.exit == 7 and .phase == 4 and .out_of_bounds == 4 and .ranks == "1" and .gpu_pair == [0,1] and .cure == null'
expect_tl 'wrong results \(exit 7\) in phase 4 \(correctness\)'
expect_tl 'diagnosis: no single setting made it pass'
expect_tl 'fix: the GPUs return wrong data'

CASE="wrong result, one process for all GPUs, fallback finds nothing"
run FAKECUDA_DEVICES=2 FAKENCCL_WRONG=0 -- --expect-gpus 2 --timeout 20 \
    --mode group --on-failure fallback --fallback-conf "$CONF"
expect_rc 7
expect_json '.ringcheck == "fail" and .exit == 7 and .ranks == "0" and .fallback_conf == null'
[ ! -e "$CONF" ] && ok || bad "fallback file written although nothing passed"

CASE="fallback with no cure: --on-no-cure fail (the default) and warn"
run FAKECUDA_DEVICES=2 FAKENCCL_WRONG=0 -- --expect-gpus 2 --timeout 20 \
    --on-failure fallback --fallback-conf "$CONF" --on-no-cure fail
expect_rc 7
expect_json '.ringcheck == "fail" and .on_no_cure == "fail" and .no_cure_warn == false'
run FAKECUDA_DEVICES=2 FAKENCCL_WRONG=0 -- --expect-gpus 2 --timeout 20 \
    --on-failure fallback --fallback-conf "$CONF" --on-no-cure=warn
expect_rc 0
[ ! -e "$CONF" ] && ok || bad "a fallback file was written without a cure"
expect_out 'warning: fallback: no cure \(no single setting made it pass.*--on-no-cure warn'
expect_json '.ringcheck == "warn" and .exit == 0 and .code == 7 and .no_cure_warn == true and .fallback_conf == null'
expect_tl 'WARNING \(the pod starts anyway\)'
"$RINGCHECK" --on-no-cure maybe >"$OUT" 2>&1; RC=$?
expect_rc 6; expect_out '--on-no-cure: expected fail or warn, got "maybe"'

CASE="broken P2P between two of four GPUs, fallback"
run FAKECUDA_DEVICES=4 FAKENCCL_P2P_BROKEN=1,2 -- --expect-gpus 4 \
    --timeout 20 --phase-timeout 3 --on-failure fallback --fallback-conf "$CONF"
expect_rc 0
expect_out 'diagnosis: GPUs 0,1,2,3 with NCCL_P2P_DISABLE=1: pass'
expect_json '.ringcheck == "fallback" and .exit == 0 and .code == 3 and .phase == 4 and .cure == "NCCL_P2P_DISABLE=1" and .transport == "P2P" and .gpu_pair == [1,2] and (.nccl_warn | test("NCCL WARN"))'
if grep -qx 'NCCL_P2P_DISABLE=1' "$CONF" 2>/dev/null &&
    [ "$(grep -c '=' "$CONF")" -eq 1 ]; then ok
else bad "conf: $(cat "$CONF" 2>/dev/null)"; fi
expect_tl 'FALLBACK: the pod starts with NCCL_P2P_DISABLE=1'
expect_tl 'gpus: pair GPU 1 \(00000000:19:00.0\) - GPU 2 \(00000000:1A:00.0\)'
expect_tl '^transport: P2P'
expect_tl '^nccl: 2\.28\.9'
expect_tl '^nccl warn: NCCL WARN'
expect_tl '^fix: set NCCL_P2P_DISABLE=1'
[ "$(wc -c <"$TL")" -le 4096 ] && ok || bad "termination log over 4 KB"

CASE="broken P2P, one process for all GPUs, fail"
run FAKECUDA_DEVICES=2 FAKENCCL_P2P_BROKEN=0,1 -- --expect-gpus 2 \
    --timeout 20 --mode group
expect_rc 3
expect_json '.ringcheck == "fail" and .cure == "NCCL_P2P_DISABLE=1" and .gpu_pair == [0,1]'
expect_tl 'NCCL error \(exit 3\) in phase 4 \(correctness\)'

CASE="fallback file that cannot be written"
run FAKECUDA_DEVICES=2 FAKENCCL_P2P_BROKEN=0,1 -- --expect-gpus 2 \
    --timeout 20 --on-failure fallback --fallback-conf "$TMP/missing/nccl.conf"
expect_rc 1
expect_out 'fallback: cannot write .*/missing/nccl.conf: No such file or directory'
expect_tl 'fix: the check passes with NCCL_P2P_DISABLE=1 but cannot write'
expect_json '.ringcheck == "fail" and .exit == 1 and .code == 3'

CASE="broken P2P that hangs, warn"
run FAKECUDA_DEVICES=2 FAKENCCL_P2P_BROKEN=0,1,hang -- --expect-gpus 2 \
    --timeout 20 --phase-timeout 2 --on-failure warn
expect_rc 0
expect_json '.ringcheck == "warn" and .code == 4 and .cure == "NCCL_P2P_DISABLE=1"'
expect_tl 'WARNING \(the pod starts anyway\)'

CASE="fallback cannot beat the pod's own NCCL_P2P_DISABLE=0"
run FAKECUDA_DEVICES=2 FAKENCCL_P2P_BROKEN=0,1 NCCL_P2P_DISABLE=0 -- \
    --expect-gpus 2 --timeout 20 --on-failure fallback --fallback-conf "$CONF"
expect_rc 3
expect_tl 'fix: remove NCCL_P2P_DISABLE from the pod'
[ ! -e "$CONF" ] && ok || bad "fallback file written although env wins"

CASE="slow bandwidth"
run FAKECUDA_DEVICES=2 FAKENCCL_BUSBW_GBPS=0.5 -- --expect-gpus 2 \
    --timeout 20 --min-busbw 5 --no-diagnose
expect_rc 8
expect_footer "0 OK"
expect_json '.exit == 8 and .phase == 5 and .busbw_gbps < 0.6 and .min_busbw_gbps == 5'
expect_tl 'bandwidth below the threshold \(exit 8\) in phase 5 \(bandwidth\)'

CASE="a rank crashes"
run FAKECUDA_DEVICES=2 FAKENCCL_CRASH=1 -- --expect-gpus 2 --timeout 20 \
    --phase-timeout 2 --no-diagnose
expect_rc 3
expect_within 2000
expect_tl 'rank 1 \(GPU 1\) crashed: killed by signal 11 \(SIGSEGV\) in phase 4'
expect_json '.exit == 3 and .ranks == "1"'

CASE="regression: a worker that cannot be reaped (D state) still gets a verdict by the deadline + 1 s"
# The double's tracer grandchild turns the worker driving GPU 1 into one
# that ignores the abort request and SIGTERM and, after SIGKILL, is never
# reaped. Before the fix the supervisor waited for it forever.
run FAKECUDA_DEVICES=2 FAKENCCL_HANG_COLL=1 FAKENCCL_UNKILLABLE=1 \
    FAKENCCL_UNKILLABLE_S=8 -- --expect-gpus 2 --timeout 3 --no-diagnose
if grep -q 'cannot ptrace this process' "$OUT"; then
    echo "SKIP $CASE (ptrace is not allowed here, the double cannot make an unkillable worker)"
else
    expect_rc 4
    expect_within 4000
    expect_json '.exit == 4 and .phase == 4 and (.message | test("not reaped"))'
    expect_tl 'timeout or hang \(exit 4\) in phase 4 \(correctness\)'
    expect_tl 'rank 1 \(GPU 1, pid [0-9]+\) was sent SIGKILL but is not reaped \(state [A-Za-z]'
    expect_tl 'dmesg'
fi

CASE="regression: an unkillable worker after a phase timeout ends the check, no diagnosis"
run FAKECUDA_DEVICES=2 FAKENCCL_HANG_COLL=1 FAKENCCL_UNKILLABLE=1 \
    FAKENCCL_UNKILLABLE_S=8 -- --expect-gpus 2 --timeout 20 --phase-timeout 1
if grep -q 'cannot ptrace this process' "$OUT"; then
    echo "SKIP $CASE (ptrace is not allowed here)"
else
    expect_rc 4
    expect_within 6000
    expect_no_out 'diagnosis: GPUs'
    expect_tl 'not reaped'
fi

CASE="SIGTERM stops the workers and still gives a verdict (as PID 1 it would otherwise be ignored)"
rm -f "$TL" "$REPORT"
t0=$(date +%s%N)
env LD_LIBRARY_PATH="$FAKES" FAKENCCL_DIR="$TMP/shm" FAKECUDA_DEVICES=2 \
    FAKENCCL_HANG_COLL=1 NCCL_BUFFSIZE=1048576 "$RINGCHECK" --expect-gpus 2 \
    --timeout 20 --no-diagnose --bw-bytes 1Mi --termination-log "$TL" \
    --report "$REPORT" >"$OUT" 2>&1 &
pid=$!
sleep 1
kill -TERM "$pid"
wait "$pid"
RC=$?
ELAPSED=$(( ($(date +%s%N) - t0) / 1000000 ))
expect_rc 4
expect_within 4000
expect_tl 'stopped by signal 15 \(SIGTERM: the pod is being deleted\) during phase 4'
expect_json '.exit == 4 and .diagnosis == null'

CASE="as PID 1 of a PID namespace (a container), SIGTERM still stops the check"
# The kernel drops a signal that PID 1 has no handler for; unshare makes the
# binary PID 1, as in the init container.
if unshare --pid --fork true 2>/dev/null; then
    rm -f "$TL" "$REPORT"
    t0=$(date +%s%N)
    unshare --pid --fork env LD_LIBRARY_PATH="$FAKES" FAKENCCL_DIR="$TMP/shm" \
        FAKECUDA_DEVICES=2 FAKENCCL_HANG_COLL=1 NCCL_BUFFSIZE=1048576 \
        "$RINGCHECK" --expect-gpus 2 --timeout 20 --no-diagnose \
        --bw-bytes 1Mi --termination-log "$TL" --report "$REPORT" \
        >"$OUT" 2>&1 &
    upid=$!
    sleep 1
    inner=$(pgrep -P "$upid" | head -1)
    kill -TERM "$inner"
    wait "$upid"
    RC=$?
    ELAPSED=$(( ($(date +%s%N) - t0) / 1000000 ))
    expect_rc 4
    expect_within 4000
    expect_tl 'stopped by signal 15'
else
    echo "SKIP $CASE (cannot create a PID namespace here)"
fi

CASE="regression: the bandwidth phase checks its results (wrong float sums)"
run FAKECUDA_DEVICES=2 FAKENCCL_WRONG=1,float -- --expect-gpus 2 \
    --timeout 20 --no-diagnose
expect_rc 7
expect_json '.exit == 7 and .phase == 5 and .ranks == "1"'
expect_tl 'wrong results \(exit 7\) in phase 5 \(bandwidth\)'
expect_tl 'allreduce float 1048576 B: first wrong value on rank 1 at byte offset 524288'

CASE="correctness runs past 1 MiB"
run FAKECUDA_DEVICES=2 -- --expect-gpus 2 --timeout 20
expect_rc 0
expect_out '^ +16777216 +4194304 +int32 +sum +-1 .* allreduce$'

CASE="regression: the abort grace grows with the communicators a worker owns"
# Two communicators in one process, 0.3 s each to abort: more than the old
# fixed 0.4 s grace, well inside the sized one.
run FAKECUDA_DEVICES=2 FAKENCCL_HANG_COLL=1 FAKENCCL_ABORT_S=0.3 -- \
    --expect-gpus 2 --mode group --timeout 20 --phase-timeout 1 --no-diagnose
expect_rc 4
expect_within 4000
expect_no_out 'did not abort'
expect_tl 'ranks 0,1 aborted their communicators'

CASE="regression: a copy that never finishes does not block the abort"
run FAKECUDA_DEVICES=2 FAKECUDA_HANG=1,copy -- --expect-gpus 2 --timeout 20 \
    --phase-timeout 1 --no-diagnose
expect_rc 4
expect_within 3000
expect_tl 'in phase 4 \(correctness\)'
expect_tl 'rank 1 \(GPU 1\) was waiting in cudaMemcpyAsync'
expect_no_out 'did not abort'

CASE="regression: a GPU that stops in the devices phase is named, not killed"
run FAKECUDA_DEVICES=2 FAKECUDA_HANG=1 -- --expect-gpus 2 --timeout 20 \
    --phase-timeout 1 --no-diagnose
expect_rc 4
expect_within 3000
expect_tl 'in phase 1 \(devices\)'
expect_tl 'GPU 1 was waiting in cudaMemsetAsync'
expect_no_out 'did not abort'

CASE="regression: no sleep between timed iterations (small sizes are not under-reported)"
# One GPU, 4 KiB: each iteration is a launch of about 20 us in the double.
# A 100 us sleep per iteration caps algbw at 0.041 GB/s; a busy machine can
# slow a run (on 2 CPUs shared with other builds three slow runs in a row
# were seen), so the best of six counts. Also: the double starts a
# thread at every non-blocking ncclGroupEnd, as NCCL 2.28 does
# (src/group.cc); one group per timed iteration measured that thread (about
# 0.005 GB/s here), so the iterations go in one group.
best=0
for try in 1 2 3 4 5 6; do
    run FAKECUDA_DEVICES=1 -- --expect-gpus 1 --timeout 20 --bw-bytes 4Ki
    line=$(grep -E '^\{"ringcheck":' "$OUT" | tail -1)
    if printf '%s\n' "$line" | jq -e '.algbw_gbps > 0.05' >/dev/null 2>&1; then
        best=1; break
    fi
done
[ "$best" -eq 1 ] && ok || bad "algbw at 4 KiB stayed at or below 0.05 GB/s in 6 runs: $line"

CASE="regression: the timed iterations are one group, not one non-blocking group end each"
# Each non-blocking ncclGroupEnd starts a launch thread in NCCL 2.28
# (src/group.cc); the double's launch then takes FAKENCCL_LAUNCH_US. At
# 2 ms per launch, one group per iteration costs at least 2000 us per
# iteration; the 20 iterations in one group pay it once (about 100 us each).
run FAKECUDA_DEVICES=1 FAKENCCL_LAUNCH_US=2000 -- --expect-gpus 1 --timeout 20 \
    --bw-bytes 4Ki
expect_rc 0
us=$(awk '/allreduce \(bandwidth\)$/ { print int($6) }' "$OUT")
[ -n "$us" ] && [ "$us" -lt 1500 ] && ok ||
    bad "a timed iteration took ${us:-?} us, at least one launch (2000 us) each"

CASE="busbw is 0 with one rank, as nccl-tests reports it"
run FAKECUDA_DEVICES=1 -- --expect-gpus 1 --timeout 20
expect_rc 0
expect_json '.busbw_gbps == 0 and .algbw_gbps > 0'
expect_out '^# Avg bus bandwidth    : 0 $'

CASE="regression: a failing ncclCommGetAsyncError is not reported as \"no error\""
run FAKECUDA_DEVICES=2 FAKENCCL_ASYNCERR_FAIL=1 -- --expect-gpus 2 \
    --timeout 20 --no-diagnose
expect_rc 3
expect_tl 'ncclCommGetAsyncError failed on rank 1 \(GPU 1\)'
expect_no_out 'no error'

CASE="regression: a failed ncclGroupEnd names the rank that failed"
run FAKECUDA_DEVICES=2 FAKENCCL_LAUNCH_FAIL=1 -- --expect-gpus 2 \
    --mode group --timeout 20 --no-diagnose
expect_rc 3
expect_json '.exit == 3 and .ranks == "1"'
expect_tl 'ncclGroupEnd failed on rank 1 \(GPU 1\)'

CASE="preflight: NCCL_SOCKET_IFNAME names an interface the pod lacks"
run FAKECUDA_DEVICES=2 NCCL_SOCKET_IFNAME=nosuch0,lo -- --expect-gpus 2 \
    --timeout 20
expect_rc 3
expect_within 1000
expect_json '.exit == 3 and .phase == 0'
expect_tl 'NCCL_SOCKET_IFNAME=nosuch0,lo: no interface matches "nosuch0"; this pod has: .*lo'

CASE="preflight: NCCL_SOCKET_IFNAME prefix and exact forms"
run FAKECUDA_DEVICES=2 NCCL_SOCKET_IFNAME=l -- --expect-gpus 2 --timeout 20
expect_rc 0
run FAKECUDA_DEVICES=2 NCCL_SOCKET_IFNAME==l -- --expect-gpus 2 --timeout 20
expect_rc 3
expect_tl 'no interface is exactly "l"'
run FAKECUDA_DEVICES=2 NCCL_SOCKET_IFNAME==lo -- --expect-gpus 2 --timeout 20
expect_rc 0

CASE="preflight: NCCL_SOCKET_IFNAME excludes every interface"
all=$(ls /sys/class/net | paste -sd, -)
run FAKECUDA_DEVICES=2 NCCL_SOCKET_IFNAME="^$all" -- --expect-gpus 2 --timeout 20
expect_rc 3
expect_tl 'excludes every interface'

CASE="preflight: NCCL_IB_HCA against /sys/class/infiniband"
SYS=$TMP/sys
mkdir -p "$SYS/class/infiniband/mlx5_0/ports/1" "$SYS/class/infiniband/mlx5_1/ports/1"
run FAKECUDA_DEVICES=2 RINGCHECK_SYSFS="$SYS" NCCL_IB_HCA=mlx5_4 -- \
    --expect-gpus 2 --timeout 20
expect_rc 3
expect_tl 'NCCL_IB_HCA=mlx5_4: no HCA matches "mlx5_4"; this pod has: mlx5_0, mlx5_1'
run FAKECUDA_DEVICES=2 RINGCHECK_SYSFS="$SYS" NCCL_IB_HCA=mlx5 -- \
    --expect-gpus 2 --timeout 20
expect_rc 0
run FAKECUDA_DEVICES=2 RINGCHECK_SYSFS="$SYS" NCCL_IB_HCA==mlx5_0:2 -- \
    --expect-gpus 2 --timeout 20
expect_rc 3
expect_tl 'no port 2'
run FAKECUDA_DEVICES=2 RINGCHECK_SYSFS="$SYS" NCCL_IB_HCA=^mlx5_1 -- \
    --expect-gpus 2 --timeout 20
expect_rc 0
run FAKECUDA_DEVICES=2 RINGCHECK_SYSFS="$TMP/nosys" NCCL_IB_HCA=mlx5_0 -- \
    --expect-gpus 2 --timeout 20
expect_rc 3
expect_tl 'this pod has: none'

CASE="regression: NCCL_COMM_ID from the pod is not passed to the workers"
# With NCCL_COMM_ID every unique id carries that one address and rank 0
# binds it (bootstrap.cc, init.cc): on any pod but the one that owns the
# address the init fails. The check makes its own ids.
run FAKECUDA_DEVICES=2 NCCL_COMM_ID=192.0.2.1:29500 -- --expect-gpus 2 \
    --timeout 20 --no-diagnose
expect_rc 0
expect_out 'phase 0 preflight: warning: NCCL_COMM_ID=192.0.2.1:29500 is set'
expect_json '.ringcheck == "pass" and .warnings >= 1'
expect_no_out 'bind failed'

CASE="the NCCL profile that did not reach the pod is named (envFrom is optional)"
run FAKECUDA_DEVICES=2 NCCLGUARD_PROFILE_EXPECTED=nccl-production-profile -- \
    --expect-gpus 2 --timeout 20 --no-diagnose
expect_rc 0
expect_out 'phase 0 preflight: warning: the NCCL profile nccl-production-profile did not reach this pod'
expect_json '.ringcheck == "pass" and .warnings >= 1'
run FAKECUDA_DEVICES=2 NCCLGUARD_PROFILE_EXPECTED=nccl-production-profile \
    NCCLGUARD_PROFILE=nccl-dev-profile -- --expect-gpus 2 --timeout 20 --no-diagnose
expect_rc 0
expect_out 'NCCLGUARD_PROFILE=nccl-dev-profile, but the policy expects the NCCL profile nccl-production-profile'
run FAKECUDA_DEVICES=2 NCCLGUARD_PROFILE_EXPECTED=nccl-production-profile \
    NCCLGUARD_PROFILE=nccl-production-profile -- --expect-gpus 2 --timeout 20 --no-diagnose
expect_rc 0
expect_no_out 'NCCL profile'

CASE="what NCCL chose: the INFO log per rank, parsed into rings and channel transports"
run FAKECUDA_DEVICES=2 -- --expect-gpus 2 --timeout 20
expect_rc 0
expect_out 'phase 3 nccl-init: NCCL chose: intra P2P/CUMEM \(4 channel lines\), inter none; 2 channels; ring 0: 0 1; NVLS no'
expect_out '^# NCCL transport       : intra P2P/CUMEM'
expect_json '.nccl_transport.intra == "P2P" and .nccl_transport.p2p == "P2P/CUMEM" and .nccl_transport.channels == 2 and .nccl_transport.ring0 == [0,1] and .nccl_transport.intra_counts.p2p == 4'
expect_tl '^nccl transport: intra P2P/CUMEM'
# The interface NCCL picks, and the address the unique id carries.
expect_out "phase 0 preflight: NCCL's bootstrap and socket interface: [a-z0-9]+ \\("
expect_out 'phase 3 nccl-init: the unique id carries [0-9a-f.:]+:[0-9]+ \([a-z0-9]+\)'
expect_json '.id_addr | test(":[0-9]+$")'
# NCCL's INFO lines go to the per-rank files, not to the check's output.
expect_no_out 'NCCL INFO'
ls -d /dev/shm/ncclguard-nccl.* "${TMPDIR:-/tmp}"/ncclguard-nccl.* >/dev/null 2>&1 \
    && bad "the NCCL log folder was left behind" || ok
run FAKECUDA_DEVICES=3 -- --expect-gpus 3 --mode group --timeout 20
expect_json '.nccl_transport.p2p == "P2P/direct pointer" and .nccl_transport.ring0 == [0,1,2]'
run FAKECUDA_DEVICES=2 NCCL_P2P_DISABLE=1 -- --expect-gpus 2 --timeout 20
expect_json '.nccl_transport.intra == "SHM"'
run FAKECUDA_DEVICES=2 NCCL_DEBUG=INFO -- --expect-gpus 2 --timeout 20
expect_out '\[rank 0\] .* NCCL INFO Ring 00 : 1 -> 0 -> 1'

CASE="a silent fallback to sockets: warned about, and its own failure with --expect-transport"
run FAKECUDA_DEVICES=2 FAKENCCL_FALLBACK=socket -- --expect-gpus 2 --timeout 20
expect_rc 0
expect_out 'warning: the ring works but over NET/Socket on [a-z0-9]+ between this pod.s own GPUs'
expect_json '.ringcheck == "pass" and .nccl_transport.intra == "NET/Socket" and .warnings >= 1'
run FAKECUDA_DEVICES=2 FAKENCCL_FALLBACK=socket -- --expect-gpus 2 --timeout 20 \
    --expect-transport intra=p2p --on-failure fallback --fallback-conf "$CONF"
expect_rc 10
expect_out 'diagnosis: skipped: the ring works'
expect_json '.exit == 10 and .code_name == "transport other than expected" and .phase == 3 and .expect_transport.intra == "p2p" and (.message | test("the ring works but over NET/Socket on [a-z0-9]+ between ranks 0 and 1, not P2P"))'
expect_tl 'transport other than expected \(exit 10\) in phase 3'
run FAKECUDA_DEVICES=2 FAKENCCL_FALLBACK=shm -- --expect-gpus 2 --timeout 20 \
    --expect-transport intra=shm
expect_rc 0
run FAKECUDA_DEVICES=2 FAKECUDA_LINK=pcie -- --expect-gpus 2 --timeout 20 \
    --expect-transport intra=nvlink
expect_rc 10
expect_tl 'over P2P through PCIe between ranks 0 and 1, not NVLink'
run FAKECUDA_DEVICES=2 -- --expect-gpus 2 --timeout 20 --expect-transport intra=nvlink,inter=ib-gdr
expect_rc 0
expect_out 'the transport is as expected \(--expect-transport intra=nvlink inter=ib-gdr\)'
"$RINGCHECK" --expect-transport intra=ib >"$OUT" 2>&1; RC=$?
expect_rc 6; expect_out '--expect-transport: expected intra=p2p'

CASE="a driver whose initialisation hangs: phase 0's own timeout"
# The first CUDA call of the preflight never returns (a GPU that fell off
# the bus). Phase 0 has its own timeout too, long before --timeout.
run FAKECUDA_DEVICES=2 FAKECUDA_INIT_HANG=1 -- --expect-gpus 2 \
    --timeout 30 --phase-timeout 3 --no-diagnose
expect_rc 4
expect_json '.phase == 0 and .phase_name == "preflight"'
expect_out 'FAILED: timeout or hang \(exit 4\) in phase 0 \(preflight\)'
expect_out 'what: phase 0 \(preflight\) did not finish within 3\.0 s'
[ "$ELAPSED" -lt 12000 ] && ok || bad "took ${ELAPSED} ms, want well under the 30 s --timeout"

CASE="a teardown that hangs: ncclCommFinalize stuck is phase 6's own timeout"
# ncclCommFinalize waits for every rank's work to flush (src/init.cc): one
# rank that never flushes holds all of them. Phase 6 has its own timeout,
# as every phase has; before the overall deadline, with the stuck calls
# named.
run FAKECUDA_DEVICES=2 FAKENCCL_HANG_FINALIZE=1 -- --expect-gpus 2 \
    --timeout 30 --phase-timeout 3 --no-diagnose
expect_rc 4
expect_json '.phase == 6 and .phase_name == "teardown" and .ranks == "0,1"'
expect_out 'phase 6 \(teardown\) did not finish within 3\.0 s; stuck ranks: 0,1; rank 0 \(GPU 0\) was waiting in ncclCommFinalize; rank 1 \(GPU 1\) was waiting in ncclCommFinalize'
[ "$ELAPSED" -lt 15000 ] && ok || bad "took ${ELAPSED} ms, want well under the 30 s --timeout"

CASE="the time is averaged over the ranks, as nccl-tests does (one late rank)"
# nccl-tests averages each rank's own time over the ranks (-m average, its
# default: src/common.cu). Rank 1 of 2 sees the end of the timed batch of
# 20 late by 4 s, so its own time is about 200 ms an iteration longer than
# rank 0's: the average is rank 0's time + 100 ms. Rank 0's time alone
# would show about 0 ms more, the maximum (or the last rank's) 200 ms.
run FAKECUDA_DEVICES=2 FAKENCCL_LATE_RANK=1:4000 -- --expect-gpus 2 \
    --timeout 40 --phase-timeout 15
expect_rc 0
bw_us=$(awk '/allreduce \(bandwidth\)$/ { print $6 }' "$OUT")
if [ -n "$bw_us" ] && awk -v t="$bw_us" 'BEGIN { exit !(t > 70000 && t < 150000) }'; then ok
else bad "bandwidth row time '${bw_us}' us, want the ranks' average (about 100000 us more than rank 0's)"; fi
# The same with the late rank first: rank 0 is then the slow one.
run FAKECUDA_DEVICES=2 FAKENCCL_LATE_RANK=0:4000 -- --expect-gpus 2 \
    --timeout 40 --phase-timeout 15
bw_us=$(awk '/allreduce \(bandwidth\)$/ { print $6 }' "$OUT")
if [ -n "$bw_us" ] && awk -v t="$bw_us" 'BEGIN { exit !(t > 70000 && t < 150000) }'; then ok
else bad "bandwidth row time '${bw_us}' us with rank 0 late, want the average"; fi

CASE="the warm-ups are not timed, as in nccl-tests"
# At 0.01 GB/s an iteration of 1 MiB over 2 ranks (bus factor 1) takes
# 1048576 B / 0.01 GB/s = 104.9 ms. nccl-tests runs its warm-ups and waits
# for them before it starts the clock (src/common.cu); timing from before
# the 5 warm-ups would show 25/20 of that, 131 ms.
run FAKECUDA_DEVICES=2 FAKENCCL_BUSBW_GBPS=0.01 -- --expect-gpus 2 \
    --timeout 40 --phase-timeout 15
expect_rc 0
bw_us=$(awk '/allreduce \(bandwidth\)$/ { print $6 }' "$OUT")
if [ -n "$bw_us" ] && awk -v t="$bw_us" 'BEGIN { exit !(t > 100000 && t < 118000) }'; then ok
else bad "bandwidth row time '${bw_us}' us, want about 104858 us (the timed iterations alone)"; fi

CASE="regression: IB counts only when the pod has /dev/infiniband/uverbs* too"
# /sys/class/infiniband shows the host's HCAs in any pod.
mkdir -p "$TMP/dev-noib" "$TMP/dev-ib/infiniband"
touch "$TMP/dev-ib/infiniband/uverbs0"
run FAKECUDA_DEVICES=2 RINGCHECK_SYSFS="$SYS" RINGCHECK_DEVROOT="$TMP/dev-noib" \
    -- --expect-gpus 2 --timeout 20
expect_rc 0
expect_out 'warning: InfiniBand is not usable here: .*class/infiniband lists mlx5_0, mlx5_1, but this pod has no .*/infiniband/uverbs\* device'
expect_no_out 'InfiniBand (is )?enabled'
run FAKECUDA_DEVICES=2 RINGCHECK_SYSFS="$SYS" RINGCHECK_DEVROOT="$TMP/dev-ib" \
    -- --expect-gpus 2 --timeout 20
expect_rc 0
expect_out 'InfiniBand (is )?enabled \(2 devices\)'
expect_no_out 'not usable'

CASE="topology: PCIe paths through the CPU are warned about"
# GPU 0 (18:00.0) and GPU 1 (19:00.0) under two root complexes on two NUMA
# nodes; GPU 2 (1a:00.0) behind the same switch as GPU 0.
mk_pci() { # mk_pci ROOT PATH... : the device folder and its bus link
    local dir="$SYS/devices/$1"
    mkdir -p "$dir"
    echo "$2" >"$dir/numa_node"
    mkdir -p "$SYS/bus/pci/devices"
    ln -sfn "$dir" "$SYS/bus/pci/devices/$(basename "$1")"
}
mk_pci pci0000:17/0000:17:00.0/0000:18:00.0 0
mk_pci pci0000:3a/0000:3a:00.0/0000:19:00.0 1
mk_pci pci0000:17/0000:17:00.0/0000:1a:00.0 0
run FAKECUDA_DEVICES=3 FAKECUDA_LINK=pcie RINGCHECK_SYSFS="$SYS" -- \
    --expect-gpus 3 --timeout 20
expect_rc 0
expect_out '^GPU0 +X +SYS +PIX'
expect_out '^GPU1 +SYS +X +SYS'
expect_out 'warning: GPU 0 and GPU 1 are connected through SYS'
expect_no_out 'warning: GPU 0 and GPU 2'
run FAKECUDA_DEVICES=3 RINGCHECK_SYSFS="$SYS" -- --expect-gpus 3 --timeout 20
expect_rc 0
expect_out '^GPU0 +X +NV +NV'
expect_no_out 'are connected through'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
