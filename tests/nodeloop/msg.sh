# shellcheck shell=bash
# Termination messages the ring check writes, for the node loop's tests
# (tests/nodeloop/run.sh, tests/kube/nodeloop.sh). Source it with RINGCHECK,
# FAKES (the CUDA/NCCL test double) and MSGTMP (a scratch folder) set.
#
# msg NAME ENV... -- ARGS...: runs the check against the double and keeps
# its termination message and exit code in $MSGTMP/msg/NAME.tl and .rc.
mkdir -p "$MSGTMP/msg" "$MSGTMP/shm"
msg() {
    local name=$1 envs=()
    shift
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    timeout -k 2 60 env LD_LIBRARY_PATH="$FAKES" LD_BIND_NOW=1 \
        FAKENCCL_DIR="$MSGTMP/shm" NCCL_BUFFSIZE=1048576 "${envs[@]}" \
        "$RINGCHECK" --termination-log "$MSGTMP/msg/$name.tl" --bw-bytes 1Mi \
        "$@" >"$MSGTMP/msg/$name.out" 2>&1
    echo $? >"$MSGTMP/msg/$name.rc"
    [ -f "$MSGTMP/msg/$name.tl" ] || : >"$MSGTMP/msg/$name.tl"
}
