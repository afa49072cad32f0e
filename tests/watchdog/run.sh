#!/usr/bin/env bash
# Integration tests of ncclguard-watchdog: the real agent against real child
# processes (tests/watchdog/wd_job.c) standing in for training ranks, and the
# fake NVML (tests/fakes/fake_nvml.c) loaded through the agent's dlopen path.
# Periods are 200 ms; every timing claim is checked on the monotonic clock
# that both the agent's log (mono_ms) and the job's signal log use.
#
# Each case runs in its own PID namespace (unshare --pid --mount-proc), so the
# agent sees only that case's processes and the PID-reuse case can hand a
# dead job's PID to another process on purpose.
#
#   WATCHDOG=... NCCLGUARD=... FAKE_NVML=... WD_JOB=... run.sh [CASE...]
#
# WD_FAILFAST=1 stops at the first failing case (the mutation sweep's
# narrowing, make check-watchdog-failfast): the cases after it do not run
# and the summary line says how many were left out. WD_FAILLOG=FILE
# appends the time and name of each failing case to FILE (which case killed a
# mutant, once its log is gone).
set -u

: "${WATCHDOG:?set WATCHDOG to build/ncclguard-watchdog}"
: "${NCCLGUARD:?set NCCLGUARD to build/ncclguard}"
: "${FAKE_NVML:?set FAKE_NVML to the fake libnvidia-ml.so.1}"
: "${WD_JOB:?set WD_JOB to build/tests/wd_job}"
HERE=$(cd "$(dirname "$0")" && pwd)
P=200 # the period, ms

# ---- inside one case (runs as PID 1's child in a fresh PID namespace) ----
if [ "${1:-}" = --case ]; then
    CASE=$2
    T=$3
    cd "$T" || exit 1
    fails=0
    ok() { :; }
    bad() {
        fails=$((fails + 1))
        echo "FAIL: $CASE: $*"
    }
    UID_A=aaaaaaaa-0000-4000-8000-00000000000a
    UID_B=bbbbbbbb-0000-4000-8000-00000000000b
    UID_C=cccccccc-0000-4000-8000-00000000000c

    # job NAME UID SPEC ARGS...: starts a rank of pod UID (its identity
    # stands in for the cgroup, --pod-from-env); SPEC "" = not opted in.
    job() {
        local name=$1 uid=$2 spec=$3
        shift 3
        if [ -n "$spec" ]; then
            env NCCLGUARD_WATCHDOG="$spec" NCCLGUARD_POD_UID="$uid" \
                NCCLGUARD_POD_NAME="pod-$name" NCCLGUARD_POD_NAMESPACE=ml \
                "$WD_JOB" --log "$T/$name.log" --ready "$T/$name.ready" "$@" &
        else
            env NCCLGUARD_POD_UID="$uid" NCCLGUARD_POD_NAME="pod-$name" \
                NCCLGUARD_POD_NAMESPACE=ml \
                "$WD_JOB" --log "$T/$name.log" --ready "$T/$name.ready" "$@" &
        fi
        eval "PID_$name=$!"
        for _ in $(seq 100); do [ -f "$T/$name.ready" ] && break; sleep 0.01; done
        touch "$T/$name.log"
    }
    gpus() { printf '%s\n' "$@" >"$T/nvml.new" && mv "$T/nvml.new" "$T/nvml"; }
    # agent DURATION_MS ARGS...: runs the agent in the background.
    # PFE: --pod-from-env (the test flag) unless set to "".
    PFE=--pod-from-env
    # A preloaded test double comes before a sanitized agent's runtime in
    # the library list, which ASan refuses unless told not to check.
    ASAN_PRELOAD="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
    agent() {
        local ms=$1
        shift
        FAKE_NVML_SCRIPT="$T/nvml" "$WATCHDOG" --nvml "$FAKE_NVML" \
            --scan 50ms --metrics-addr off --api-server off $PFE \
            --termination-log "" -v --run-for "${ms}ms" "$@" \
            >"$T/agent.log" 2>"$T/agent.err" &
        AGENT=$!
    }
    # no_hang CASE-VERDICTS: no hang line, no action, the job untouched,
    # and every period's verdict is one of the JSON array given.
    no_hang() {
        [ "$(ev hang | jq length)" = 0 ] && ok || bad "hang reported: $(ev hang .message)"
        [ "$(ev action | jq length)" = 0 ] && ok || bad "acted: $(ev action)"
        jq -e -s --argjson want "$1" '[.[] | select(.event == "period") | .verdict] |
            length >= 4 and all(. as $v | $want | index($v) != null)' "$T/agent.log" >/dev/null && ok ||
            bad "verdicts $(ev period .verdict), want only $1"
    }
    agent_wait() {
        wait "$AGENT"
        ARC=$?
        [ "$ARC" -eq 0 ] && ok || bad "agent exited $ARC: $(tail -3 "$T/agent.err")"
    }
    # ev EVENT [JQ-FILTER]: the agent's log lines of one kind, as a JSON array.
    ev() { jq -sc --arg e "$1" "[.[] | select(.event == \$e) | ${2:-.}]" "$T/agent.log"; }
    # first_mono EVENT [JQ-SELECT]
    first_mono() {
        jq -s --arg e "$1" "[.[] | select(.event == \$e) ${2:+| select($2)}][0].mono_ms // empty" "$T/agent.log"
    }
    sig_at() { awk -v s="$2" '$1 == s {print $2; exit}' "$T/$1.log"; }
    # within NAME VALUE LO HI: LO <= VALUE < HI
    within() {
        if [ -n "$2" ] && [ "$2" -ge "$3" ] && [ "$2" -lt "$4" ]; then ok; else
            bad "$1 = ${2:-missing}, want [$3, $4)"
        fi
    }
    # wait_for EVENT COUNT: until the agent logged COUNT lines of EVENT.
    wait_for() {
        for _ in $(seq 800); do
            [ "$(grep -c "\"event\":\"$1\"" "$T/agent.log" 2>/dev/null)" -ge "$2" ] && return 0
            sleep 0.01
        done
        return 1
    }
    alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
    # ras_on [OPTION...]: a stand-in NCCL RAS (fake_ras.py; by default
    # NCCL 2.28.9, JSON, counts that never move: the second signal that a
    # restart needs); the jobs started after it get its NCCL_RAS_ADDR.
    # RAS_NAME=NAME names its files ($T/port.NAME, $T/NAME.cmds; "ras").
    ras_on() {
        local n=${RAS_NAME:-ras}
        python3 "$HERE/fake_ras.py" "$T/port.$n" "$T/$n.cmds" "$@" &
        RAS=$!
        for _ in $(seq 300); do [ -s "$T/port.$n" ] && break; sleep 0.02; done
        export NCCL_RAS_ADDR="127.0.0.1:$(cat "$T/port.$n")"
    }
    # decided [DECISION]: the first decision line's mono_ms (of that kind).
    decided() { first_mono decision "${1:+.decision == \"$1\"}"; }

    # mincpu 0.02: one clock tick in a period is spinning, so that a rank the
    # loaded test machine starves for most of a period still counts as busy.
    RESTART="period=${P}ms,idle=3,mincpu=0.02,action=restart,signal=SIGUSR1,grace=600ms,term=400ms"
    case $CASE in
    hang-restart)
        # An idle, CPU-busy, stuck job: found after exactly 3 periods; its
        # RAS (the second signal) shows a rank behind and counts that do
        # not move over a period; then asked to checkpoint (SIGUSR1, which
        # it catches), SIGTERM 600 ms later.
        ras_on
        job a "$UID_A" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt"
        # A second rank without a SIGUSR1 handler: SIGUSR1 would kill it,
        # so it must not get one; it gets SIGTERM with the others.
        job c "$UID_A" "$RESTART" --spin
        gpus "gpu 0 $PID_a $PID_c"
        agent 3400 --termination-log "$T/termlog"
        agent_wait
        jq -e -s --argjson c "$PID_c" '[.[] | select(.event == "action" and
            .action == "checkpoint-signal" and .pid == $c)] | length == 1 and
            (.[0].result | startswith("not-sent"))' "$T/agent.log" >/dev/null && ok ||
            bad "checkpoint signal to the rank that does not catch it: $(ev action "select(.pid == $PID_c)")"
        [ "$(awk '{print $1}' "$T/c.log" | tr '\n' ' ')" = "TERM " ] && ok ||
            bad "the rank without a handler saw: $(cat "$T/c.log")"
        w=$(first_mono watch)
        h=$(first_mono hang)
        [ "$(ev hang '.idle_periods')" = "[3]" ] && ok || bad "hang lines: $(ev hang '.idle_periods')"
        within "hang after watch (ms)" "$((h - w))" $((3 * P)) $((4 * P))
        # The lines before the hang: exactly three periods, all idle.
        [ "$(jq -sc '(map(.event) | index("hang")) as $h | .[0:$h] |
            map(select(.event == "period") | .verdict)' "$T/agent.log")" = '["idle","idle","idle"]' ] && ok ||
            bad "periods before the hang: $(ev period .verdict)"
        u=$(sig_at a USR1)
        t=$(sig_at a TERM)
        d=$(decided restart)
        # Two RAS queries a period apart: the decision no sooner than a
        # period after the hang; the checkpoint request right after it.
        within "restart decision after the hang (ms)" "$((${d:-0} - h))" "$P" 1500
        within "SIGUSR1 after the decision (ms)" "$((${u:-0} - ${d:-0}))" 0 100
        [ "$(grep -c '^STATUS$' "$T/ras.cmds")" = 2 ] && ok || bad "RAS commands: $(cat "$T/ras.cmds")"
        # The agent's own clock: SIGTERM sent no sooner than grace after
        # the checkpoint request. The job's clock sees the same, give or
        # take the few ms a signal takes to be delivered under load.
        cs=$(first_mono action '.action == "checkpoint-signal"')
        ts=$(first_mono action '.action == "sigterm"')
        within "agent: SIGTERM after SIGUSR1 (ms)" "$((${ts:-0} - ${cs:-0}))" 600 $((600 + P))
        within "job: SIGTERM after SIGUSR1 (ms)" "$((${t:-0} - ${u:-0}))" 550 $((600 + P))
        [ -f "$T/ckpt" ] && ok || bad "the job wrote no checkpoint"
        grep -q 'NCCLHang: 1/1 GPUs idle 3x200ms' "$T/termlog" 2>/dev/null && ok ||
            bad "hang report not written to the termination log: $(cat "$T/termlog" 2>&1)"
        [ "$(ev action 'select(.action == "sigkill")' | jq length)" = 0 ] && ok ||
            bad "SIGKILL sent to a job that ended on SIGTERM"
        ;;
    sigkill)
        # No checkpoint configured: SIGTERM at once; the job ignores it, so
        # SIGKILL follows after term (the pod's termination grace).
        ras_on
        job a "$UID_A" "period=${P}ms,idle=2,mincpu=0.02,action=restart,term=400ms" \
            --spin --close-wait --ignore-term
        gpus "gpu 0 $PID_a"
        agent 2600
        agent_wait
        h=$(decided restart)
        t=$(sig_at a TERM)
        ts=$(first_mono action '.action == "sigterm"')
        k=$(first_mono action '.action == "sigkill" and .result == "sent"')
        within "SIGTERM after the restart decision (ms)" "$((${t:-0} - ${h:-0}))" 0 100
        # The log's mono_ms are whole milliseconds, each cut down on its
        # own, so a difference of exactly 400 ms can read as 399.
        within "SIGKILL after SIGTERM (ms)" "$((${k:-0} - ${ts:-0}))" 399 $((400 + P))
        # Bounded: a job that survived would otherwise block the case.
        for _ in $(seq 100); do alive "$PID_a" || break; sleep 0.02; done
        if alive "$PID_a"; then
            bad "the job that ignores SIGTERM is still alive"
        else
            wait "$PID_a" 2>/dev/null
            st=$?
            [ "$st" -eq 137 ] && ok || bad "job exit status $st, want 137 (SIGKILL)"
        fi
        ;;
    rewatch)
        # The restart worked: the container starts again in the same pod
        # (same UID) while the agent still waits to SIGKILL the old one.
        # The new process is watched afresh, never SIGKILLed for the old
        # hang, and a new hang is found on its own count.
        spec="period=${P}ms,idle=2,mincpu=0.02,action=restart,term=400ms"
        ras_on
        job a "$UID_A" "$spec" --spin --close-wait
        gpus "gpu 0 $PID_a"
        agent 3000
        wait_for action 1 || bad "no SIGTERM"
        wait "$PID_a" 2>/dev/null
        job b "$UID_A" "$spec" --spin --close-wait
        gpus "gpu 0 $PID_b"
        agent_wait
        [ "$(ev hang | jq length)" = 2 ] && ok || bad "hang lines: $(ev hang)"
        [ "$(ev action 'select(.action == "sigkill")' | jq length)" = 0 ] && ok ||
            bad "SIGKILL sent: $(ev action 'select(.action == "sigkill")')"
        h2=$(jq -s '[.[] | select(.event == "hang")][1].mono_ms // empty' "$T/agent.log")
        w2=$(jq -s '[.[] | select(.event == "watch" or .event == "rewatch") |
            select(.pid == '"$PID_b"')][0].mono_ms // empty' "$T/agent.log")
        within "second hang after the new process was found (ms)" "$((${h2:-0} - ${w2:-0}))" $((2 * P)) $((3 * P))
        tb=$(sig_at b TERM)
        [ -n "$tb" ] && [ "$tb" -ge "${h2:-0}" ] && ok || bad "the new process got SIGTERM at ${tb:-never}, second hang at ${h2:-never}"
        ;;
    rewatch-same-pid)
        # As rewatch, but the restarted container's process gets the old
        # one's PID (the kernel reuses PIDs; ns_last_pid hands this one
        # over). Its start time differs, so it is a new process: watched
        # afresh, never SIGKILLed for the old hang. A 1 s period: the next
        # sample, which would drop the pod once its only process is gone,
        # comes well after the new process starts.
        spec="period=1000ms,idle=1,mincpu=0.02,action=restart,term=400ms"
        ras_on
        job a "$UID_A" "$spec" --spin --close-wait
        gpus "gpu 0 $PID_a"
        agent 3500
        wait_for action 1 || bad "no SIGTERM"
        old=$PID_a
        wait "$old" 2>/dev/null
        echo $((old - 1)) >/proc/sys/kernel/ns_last_pid
        job b "$UID_A" "$spec" --spin --close-wait
        if [ "$PID_b" != "$old" ]; then
            echo "SKIP rewatch-same-pid (the kernel gave PID $PID_b, not $old through ns_last_pid)"
            kill "$PID_b"
            agent_wait
            exit 77
        fi
        gpus "gpu 0 $PID_b"
        agent_wait
        [ "$(ev rewatch .pid | jq -c .)" = "[$old]" ] && ok || bad "rewatch lines: $(ev rewatch)"
        [ "$(ev action 'select(.action == "sigkill")' | jq length)" = 0 ] && ok ||
            bad "SIGKILL sent: $(ev action 'select(.action == "sigkill")')"
        alive "$PID_b" || [ -n "$(sig_at b TERM)" ] && ok || bad "the new process was killed: $(cat "$T/b.log")"
        ;;
    exec-late)
        # A process first seen before it execs its real program, as a
        # container's runtime forks, sets up and only then execs the
        # entrypoint, whose environment alone carries the spec: the agent
        # must look again once the process has exec'd (same PID and start
        # time, another command name), not remember it as not opted in.
        agent 1500
        spec="period=${P}ms,idle=3,mincpu=0.02"
        sh -c 'sleep 0.4; exec env NCCLGUARD_WATCHDOG="$1" NCCLGUARD_POD_UID="$2" \
            NCCLGUARD_POD_NAME=pod-a NCCLGUARD_POD_NAMESPACE=ml "$3" --log "$4" --ready "$5" --spin' \
            sh "$spec" "$UID_A" "$WD_JOB" "$T/a.log" "$T/a.ready" &
        PID_a=$!
        gpus "gpu 100 $PID_a"
        agent_wait
        [ "$(ev watch .pid | jq -c .)" = "[$PID_a]" ] && ok || bad "watch lines: $(ev watch)"
        kill "$PID_a" 2>/dev/null
        ;;
    busy-gpu)
        # One of the pod's two GPUs works: never a hang.
        job a "$UID_A" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a" "gpu 35 $PID_a"
        agent 1700
        agent_wait
        [ "$(ev hang | jq length)" = 0 ] && ok || bad "hang reported: $(ev hang)"
        [ "$(ev period .verdict | jq -c unique)" = '["busy"]' ] && ok ||
            bad "verdicts $(ev period .verdict)"
        [ "$(ev period .gpus | jq -c unique)" = '[2]' ] && ok || bad "GPUs $(ev period .gpus)"
        [ ! -s "$T/a.log" ] && alive "$PID_a" && ok || bad "the job was signalled: $(cat "$T/a.log")"
        ;;
    cpu-idle)
        # GPU idle and CPU idle (data loading, checkpoint writing): left alone.
        job a "$UID_A" "period=${P}ms,idle=3,mincpu=0.2,action=restart,signal=SIGUSR1" \
            --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a"
        agent 1700
        agent_wait
        [ "$(ev hang | jq length)" = 0 ] && ok || bad "hang reported: $(ev hang)"
        [ "$(ev period .verdict | jq -c unique)" = '["cpu-idle"]' ] && ok ||
            bad "verdicts $(ev period .verdict)"
        [ ! -s "$T/a.log" ] && alive "$PID_a" && ok || bad "the job was signalled"
        ;;
    sockets-moving)
        # GPU idle, CPU busy, but no socket is stuck: left alone.
        job a "$UID_A" "$RESTART" --spin --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a"
        agent 1300
        agent_wait
        [ "$(ev hang | jq length)" = 0 ] && ok || bad "hang reported: $(ev hang)"
        [ "$(ev period .verdict | jq -c unique)" = '["sockets-moving"]' ] && ok ||
            bad "verdicts $(ev period .verdict)"
        ;;
    queue-moving)
        # An established connection whose receive queue grows (a peer
        # still sending, --trickle) while its send queue stays 0: the
        # queue moves, so it is not stuck and there is no hang. A period
        # the loaded machine starves the sender of may look stuck; three
        # in a row (idle=3) would be needed for a hang.
        job a "$UID_A" "$RESTART" --spin --catch-usr1 "$T/ckpt" --trickle
        gpus "gpu 0 $PID_a"
        agent 1300
        agent_wait
        [ "$(ev hang | jq length)" = 0 ] && ok || bad "hang reported: $(ev hang .message)"
        [ "$(ev period .sockets | jq -c unique)" = '[2]' ] && ok || bad "sockets: $(ev period .sockets)"
        [ "$(ev period 'select(.verdict == "sockets-moving")' | jq length)" -ge 3 ] && ok ||
            bad "verdicts $(ev period .verdict)"
        ;;
    recover)
        # idle=5; the GPU works again for one period before the count
        # reaches 5 (periods 3 or 4, whichever the switch lands in): the
        # count starts over, so the hang comes only 5 idle periods later.
        # Checked on the agent's own period lines, not on wall time.
        job a "$UID_A" "period=${P}ms,idle=5,mincpu=0.02,action=restart,signal=SIGUSR1,grace=5s" \
            --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a"
        agent 2900
        wait_for period 2 || bad "no second period"
        gpus "gpu 40 $PID_a"
        wait_for period 3 || bad "no third period"
        for _ in $(seq 50); do
            grep -q '"verdict":"busy"' "$T/agent.log" && break
            sleep 0.02
        done
        gpus "gpu 0 $PID_a"
        agent_wait
        # The busy stretch: the period with the switch and, as utilisation
        # is sampled over the whole period, at most the one after it; idle
        # before it, none hung.
        jq -e -s '[.[] | select(.event == "period" or .event == "hang")] as $l |
            ($l | map(.event) | index("hang")) as $h |
            ($l | map(.verdict) | index("busy")) as $b |
            ($l | map(.verdict) | rindex("busy")) as $e |
            $b != null and $h != null and $e < $h and $b <= 3 and $e - $b <= 1 and
            ($l[0:$b] | map(.idle_periods) | max >= 1) and
            $l[$b].idle_periods == 0 and
            ($l[$e + 1:$h] | length == 5 and all(.verdict == "idle")) and
            $l[$h].idle_periods == 5' "$T/agent.log" >/dev/null && ok ||
            bad "periods: $(ev period '[.verdict, .idle_periods]' | jq -c .)"
        ;;
    no-opt-in)
        # The same stuck job without NCCLGUARD_WATCHDOG: never touched.
        job a "$UID_A" "" --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a"
        agent 1300
        agent_wait
        [ "$(ev watch | jq length)" = 0 ] && ok || bad "watched: $(ev watch)"
        [ "$(ev action | jq length)" = 0 ] && ok || bad "acted: $(ev action)"
        [ ! -s "$T/a.log" ] && alive "$PID_a" && ok || bad "the job was signalled"
        ;;
    nvml-lost)
        # NVML fails for a while mid-run (idle=5): the agent survives, those
        # periods are unknown and reset the count (the idle periods before
        # the loss do not carry over), and it judges again once NVML is back.
        job a "$UID_A" "${RESTART/idle=3/idle=5}" --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a"
        agent 3000
        wait_for period 2 || bad "no second period"
        gpus lost
        wait_for nvml 2 || bad "no down line"
        wait_for period 4 || bad "no fourth period"
        gpus "gpu 0 $PID_a"
        agent_wait
        [ "$(ev nvml .state | jq -c .)" = '["up","down","up"]' ] && ok ||
            bad "NVML state lines $(ev nvml .state)"
        jq -e -s '[.[] | select(.event == "nvml" and .state == "down")][0].why | test("Unknown Error")' \
            "$T/agent.log" >/dev/null && ok || bad "the down line does not say why"
        jq -e -s 'map(select(.event == "period" or .event == "hang" or .event == "nvml")) as $l |
            ($l | map(.event) | index("hang")) as $h |
            ($l | map(select(.event == "nvml") | .state) ) as $s |
            ([$l | to_entries[] | select(.value.event == "nvml") | .key]) as $n |
            $h != null and $h > $n[2] and
            ($l[$n[1]:$n[2]] | map(select(.event == "period")) |
                length >= 1 and all(.verdict == "unknown" and .idle_periods == 0)) and
            ($l[$n[2] + 1:$h] | map(select(.event == "period")) |
                map(.idle_periods) | .[-5:] == [1, 2, 3, 4, 5])' "$T/agent.log" >/dev/null && ok ||
            bad "periods: $(jq -sc 'map(select(.event == "period" or .event == "nvml" or .event == "hang") | [.event, .verdict // .state, .idle_periods])' "$T/agent.log")"
        ;;
    no-nvml)
        # No driver at all: one line saying so, /metrics says nvml_up 0, the
        # agent keeps running, and nothing is judged.
        job a "$UID_A" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt"
        FAKE_NVML_SCRIPT=/nonexistent "$WATCHDOG" --nvml "$T/no/libnvidia-ml.so.1" \
            --scan 50ms --metrics-addr 127.0.0.1 --metrics-port 0 \
            --port-file "$T/port" --api-server off --pod-from-env -v \
            --run-for 1500ms >"$T/agent.log" 2>"$T/agent.err" &
        AGENT=$!
        wait_for period 3 || bad "no third period"
        curl -sf "http://127.0.0.1:$(cat "$T/port")/metrics" >"$T/metrics" || bad "no /metrics"
        agent_wait
        [ "$(ev nvml .state | jq -c .)" = '["down"]' ] && ok || bad "NVML lines $(ev nvml)"
        grep -qx 'ncclguard_watchdog_nvml_up 0' "$T/metrics" && ok || bad "metrics: $(head -5 "$T/metrics")"
        grep -qx 'ncclguard_watchdog_watched_pods 1' "$T/metrics" && ok || bad "watched_pods not 1"
        [ "$(ev period .verdict | jq -c unique)" = '["unknown"]' ] && ok || bad "verdicts $(ev period .verdict)"
        ;;
    exit-mid)
        # One of the pod's two ranks exits in the middle of period 2: the
        # agent drops it, keeps judging the other, and signals only that one.
        ras_on
        job a "$UID_A" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt"
        job b "$UID_A" "$RESTART" --spin --exit-after 300
        gpus "gpu 0 $PID_a $PID_b"
        agent 3000
        agent_wait
        x=$(first_mono exited ".pid == $PID_b")
        h=$(first_mono hang)
        [ -n "$x" ] && [ -n "$h" ] && [ "$x" -lt "$h" ] && ok ||
            bad "rank b's exit not seen before the hang: $(ev exited)"
        [ "$(ev exited .pid | jq -c '.[0]')" = "$PID_b" ] && ok || bad "exited lines $(ev exited)"
        [ "$(ev hang | jq length)" = 1 ] && ok || bad "hang lines $(ev hang)"
        [ "$(ev action '.pid' | jq -c unique)" = "[$PID_a]" ] && ok ||
            bad "signals went to $(ev action .pid)"
        [ -n "$(sig_at a TERM)" ] && ok || bad "the remaining rank got no SIGTERM"
        ;;
    pid-reuse)
        # The job dies after the hang and, before the SIGTERM is due, its PID
        # goes to an unrelated process. The agent checks the start time right
        # before the signal and leaves the newcomer alone.
        # A long period and a short grace: the SIGTERM falls due long before
        # the next sample would notice the job is gone.
        ras_on
        job a "$UID_A" "period=1500ms,idle=1,mincpu=0.02,action=restart,file=$T/ckpt-file,grace=300ms" \
            --spin --close-wait
        gpus "gpu 0 $PID_a"
        # One walk of /proc at the start only: a later walk would see the
        # job gone and drop it, which would leave the start-time check
        # before the signal untested.
        # 3.2 s: alive well past the SIGTERM (about 1.8 s) for /metrics; an
        # agent gone by then frees its PID, which the rewound ns_last_pid
        # hands to the next command, and bash forgets the agent's status.
        # The restart decision comes a period (1.5 s) after the hang, once
        # RAS answered twice; the SIGTERM 300 ms after it, long before the
        # sample after that.
        agent 4800 --scan 5s --metrics-addr 127.0.0.1 --metrics-port 0 --port-file "$T/port"
        wait_for decision 1 || bad "no decision"
        old=$PID_a
        kill -9 "$old"
        wait "$old" 2>/dev/null
        echo $((old - 1)) >/proc/sys/kernel/ns_last_pid
        "$WD_JOB" --log "$T/imp.log" --spin &
        imp=$!
        if [ "$imp" != "$old" ]; then
            echo "SKIP pid-reuse (the kernel gave PID $imp, not $old through ns_last_pid)"
            kill "$imp"
            agent_wait
            exit 77
        fi
        # The refused signal is counted: checkpoint-file, then sigterm.
        wait_for action 2 || bad "no sigterm line"
        curl -sf "http://127.0.0.1:$(cat "$T/port")/metrics" >"$T/metrics" || bad "no /metrics"
        grep -qx 'ncclguard_watchdog_pid_reused_total 1' "$T/metrics" && ok ||
            bad "metrics: $(grep pid_reused "$T/metrics")"
        agent_wait
        [ -f "$T/ckpt-file" ] && ok || bad "no checkpoint file"
        jq -e -s '[.[] | select(.event == "action" and .action == "sigterm")] |
            length == 1 and .[0].result == "pid-reused"' "$T/agent.log" >/dev/null && ok ||
            bad "sigterm lines: $(ev action 'select(.action == "sigterm")')"
        [ ! -s "$T/imp.log" ] && alive "$imp" && ok || bad "the newcomer was signalled: $(cat "$T/imp.log")"
        kill "$imp"
        ;;
    report-event)
        # action=report: log, metrics and a Kubernetes Event POSTed with the
        # service-account token to a local stand-in for the API server;
        # never a signal.
        echo "tok-$$-secret" >"$T/token"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" &
        API=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && break; sleep 0.02; done
        job a "$UID_A" "period=${P}ms,idle=3,mincpu=0.02,signal=SIGUSR1" \
            --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a"
        FAKE_NVML_SCRIPT="$T/nvml" "$WATCHDOG" --nvml "$FAKE_NVML" --scan 50ms \
            --metrics-addr 127.0.0.1 --metrics-port 0 --port-file "$T/port" \
            --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7 --pod-from-env -v \
            --run-for 1500ms >"$T/agent.log" 2>"$T/agent.err" &
        AGENT=$!
        wait_for event 1 || bad "no event line"
        curl -sf "http://127.0.0.1:$(cat "$T/port")/metrics" >"$T/metrics" || bad "no /metrics"
        agent_wait
        kill "$API"
        jq -e --arg tok "tok-$$-secret" --arg uid "$UID_A" '
            .path == "/api/v1/namespaces/ml/events" and
            .auth == "Bearer " + $tok and
            .body.kind == "Event" and .body.reason == "NCCLHang" and
            .body.type == "Warning" and
            .body.involvedObject == {apiVersion: "v1", kind: "Pod",
                name: "pod-a", namespace: "ml", uid: $uid} and
            .body.source.host == "node-7" and
            (.body.message | startswith("NCCLHang: 1/1 GPUs idle 3x200ms, CPU ")) and
            (.body.message | test("1 sockets CLOSE_WAIT"))' "$T/requests" >/dev/null && ok ||
            bad "the Event POST: $(cat "$T/requests" 2>&1)"
        [ "$(ev event .result | jq -c .)" = '["created"]' ] && ok || bad "event lines $(ev event)"
        for m in 'ncclguard_watchdog_hangs_total 1' 'ncclguard_watchdog_watched_pods 1' \
            'ncclguard_watchdog_actions_total{action="event"} 1' \
            'ncclguard_watchdog_actions_total{action="sigterm"} 0' \
            "ncclguard_watchdog_idle_periods{namespace=\"ml\",pod=\"pod-a\",pod_uid=\"$UID_A\"} 3"; do
            grep -qxF "$m" "$T/metrics" && ok || bad "/metrics lacks $m"
        done
        [ ! -s "$T/a.log" ] && alive "$PID_a" && ok || bad "report mode signalled the job"
        ;;
    e2e)
        # policy -> webhook env -> agent: a pod mutated by `ncclguard mutate`
        # under a policy that enables the watchdog carries the env the agent
        # parses, and a job started with that env is detected as the policy
        # says.
        "$NCCLGUARD" mutate --policy "$HERE/policy.yaml" -o json \
            "$HERE/pod.yaml" >"$T/mutated.json" 2>"$T/mutate.err" || bad "mutate failed: $(cat "$T/mutate.err")"
        spec=$(jq -r '.. | objects | select(has("containers")) | .containers[0].env[]? |
            select(.name == "NCCLGUARD_WATCHDOG") | .value' "$T/mutated.json" | head -1)
        [ -n "$spec" ] && ok || bad "no NCCLGUARD_WATCHDOG in the mutated pod"
        canon=$("$WATCHDOG" --check-spec "$spec" 2>&1)
        [ "$canon" = "$spec" ] && ok || bad "agent reads \"$spec\" as \"$canon\""
        [ "$spec" = "period=200ms,idle=2,mincpu=0.020,action=restart,signal=SIGUSR1,file=/run/ncclguard-watchdog/checkpoint,grace=1s,term=45s" ] && ok ||
            bad "the policy's settings did not reach the env: $spec"
        jq -e '.. | objects | select(has("containers")) | .containers[0].env |
            (map(select(.name == "NCCLGUARD_POD_NAME"))[0].valueFrom.fieldRef.fieldPath == "metadata.name") and
            (map(select(.name == "NCCLGUARD_POD_NAMESPACE"))[0].valueFrom.fieldRef.fieldPath == "metadata.namespace") and
            (map(select(.name == "NCCLGUARD_POD_UID"))[0].valueFrom.fieldRef.fieldPath == "metadata.uid")' \
            "$T/mutated.json" >/dev/null && ok || bad "the pod identity env is missing"
        jq -e '.. | objects | select(has("containers")) |
            (.volumes | map(select(.name == "ncclguard-watchdog"))[0].emptyDir != null) and
            (.containers[0].volumeMounts | map(select(.mountPath == "/run/ncclguard-watchdog"))[0].name == "ncclguard-watchdog")' \
            "$T/mutated.json" >/dev/null && ok || bad "the checkpoint volume is missing"
        ras_on
        job a "$UID_A" "$spec" --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a"
        agent 2200
        agent_wait
        # The agent runs the job under the policy's settings: the spec it
        # logs, and a hang after the policy's 2 idle periods.
        [ "$(ev watch .spec | jq -r '.[0]')" = "$spec" ] && ok || bad "agent's spec: $(ev watch .spec)"
        jq -e -s '[.[] | select(.event == "period" or .event == "hang")] as $l |
            ($l | map(.event) | index("hang")) as $h |
            $h != null and $l[$h].idle_periods == 2 and
            ($l[$h - 2:$h] | map(.verdict) == ["idle", "idle"])' "$T/agent.log" >/dev/null && ok ||
            bad "periods: $(ev period '[.verdict, .idle_periods]' | jq -c .)"
        [ -n "$(sig_at a USR1)" ] && ok || bad "no SIGUSR1"
        ;;
    spin-hang)
        # The common NCCL hang: a rank waits inside a collective, its kernel
        # spins. About 100 % utilisation at idle power, no memory traffic,
        # no NVLink or PCIe bytes (NVIDIA/nccl #968, #537, #1289). No TCP
        # socket at all, as over InfiniBand: the GPU signals find it, and
        # RAS (counts that do not move) confirms it before any signal.
        ras_on
        job a "$UID_A" "$RESTART" --spin --catch-usr1 "$T/ckpt"
        gpus "gpu util=100 power=60 limit=400 mem=0 nvlink=0 pcie=0 $PID_a"
        agent 3200
        agent_wait
        w=$(first_mono watch)
        h=$(first_mono hang)
        within "spinning hang after watch (ms)" "$((${h:-0} - w))" $((3 * P)) $((4 * P + P / 2))
        [ "$(ev hang .cause | jq -c .)" = '["spinning"]' ] && ok || bad "hang cause: $(ev hang .cause)"
        jq -e -s '[.[] | select(.event == "hang")][0].message |
            test("^NCCLHang: 1/1 GPUs spinning 3x200ms \\(utilisation 100%, power 1[456]% of limit, memory 0%, links still\\), CPU [0-9.]+ cores, no I/O")' \
            "$T/agent.log" >/dev/null && ok || bad "hang message: $(ev hang .message)"
        # Each signal's own verdict is in the period line.
        jq -e -s '[.[] | select(.event == "period")][0:3] | length == 3 and
            all(.verdict == "spinning" and .cpu == "busy" and .io == "still" and
                .sockets == 0 and (.gpu | length == 1) and
                (.gpu[0] | .verdict == "spinning" and .util == "high" and
                 .power == "near-idle" and .memory == "idle" and .links == "still"))' \
            "$T/agent.log" >/dev/null && ok || bad "period lines: $(ev period '[.verdict, .gpu]' | jq -c .)"
        [ -n "$(sig_at a USR1)" ] && ok || bad "no checkpoint request"
        ;;
    healthy-100)
        # A job at 100 % that draws power, reads memory and moves bytes over
        # NVLink and PCIe: working, however long it runs. It also holds a
        # CLOSE_WAIT socket (an HTTP pool), which alone proves nothing.
        job a "$UID_A" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu util=100 power=320 limit=400 mem=45 nvlink=2000 pcie=200 $PID_a"
        agent 1600
        agent_wait
        no_hang '["busy"]'
        jq -e -s '[.[] | select(.event == "period") | .gpu[0]] | all(.verdict == "working" and
            .util == "high" and .power == "working" and .memory == "working" and .links == "moving")' \
            "$T/agent.log" >/dev/null && ok || bad "GPU lines: $(ev period .gpu | jq -c .)"
        [ ! -s "$T/a.log" ] && alive "$PID_a" && ok || bad "the job was signalled"
        ;;
    links-moving)
        # 100 % at its own idle power with no memory traffic, but NVLink
        # bytes moving: a communication-bound step, not a spin. Left alone.
        job a "$UID_A" "$RESTART" --spin --catch-usr1 "$T/ckpt"
        gpus "gpu util=100 power=60 limit=400 mem=0 nvlink=500 pcie=0 $PID_a"
        agent 1600
        agent_wait
        no_hang '["busy"]'
        jq -e -s '[.[] | select(.event == "period") | .gpu[0]] | all(.verdict == "working" and
            .power == "near-idle" and .links == "moving")' "$T/agent.log" >/dev/null && ok ||
            bad "GPU lines: $(ev period .gpu | jq -c .)"
        ;;
    links-off-on)
        # The link counters stop answering for a while (NVML's per-field
        # return is NOT_SUPPORTED, the call itself succeeds) and come back.
        # A period that starts or ends without them cannot measure the
        # links: "unknown", never a rate from the part of the period that
        # had them. The counters go off just after a period line and come
        # back late in a period, so that such a part rate is far below the
        # scripted 500 MB/s each way. The GPU draws power and reads memory
        # throughout: working, whatever the links say.
        job a "$UID_A" "$RESTART" --spin --catch-usr1 "$T/ckpt"
        g="gpu util=100 power=320 limit=400 mem=45 nvlink=500 pcie=0"
        gpus "$g $PID_a"
        agent 3000
        periods() { grep -c '"event":"period"' "$T/agent.log" 2>/dev/null; }
        for _ in $(seq 300); do [ "$(periods)" -ge 2 ] && break; sleep 0.005; done
        gpus "$g links=off $PID_a"
        for _ in $(seq 300); do [ "$(periods)" -ge 5 ] && break; sleep 0.005; done
        sleep "$(awk -v p="$P" 'BEGIN { print p * 0.7 / 1000 }')"
        gpus "$g links=on $PID_a"
        agent_wait
        no_hang '["busy"]'
        # Moving at the scripted 1e9 bytes/s (TX and RX), within 20 %.
        jq -e -s '[.[] | select(.event == "period") | .gpu[0]] as $l |
            ($l | length) >= 8 and $l[0].links == "moving" and
            $l[-1].links == "moving" and
            ($l | map(.links) | index("unknown")) != null and
            ($l | all(.links == "unknown" or (.links == "moving" and
                .link_bytes_per_s >= 800000000 and
                .link_bytes_per_s <= 1200000000))) ' \
            "$T/agent.log" >/dev/null && ok ||
            bad "links by period: $(ev period '[.gpu[0].links, .gpu[0].link_bytes_per_s]')"
        ;;
    ckpt-write)
        # GPUs idle, CPU busy, a CLOSE_WAIT socket, but the job writes a
        # checkpoint (or loads data): its I/O moves, so it is left alone.
        job a "$UID_A" "$RESTART" --spin --close-wait --write "$T/big" --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a"
        agent 1600
        agent_wait
        no_hang '["io-moving"]'
        [ ! -s "$T/a.log" ] && alive "$PID_a" && ok || bad "the job was signalled"
        ;;
    spin-writing)
        # The spinning signature while the job writes (a rank that saves
        # while its peers wait): the I/O is progress, left alone.
        job a "$UID_A" "$RESTART" --spin --write "$T/big" --catch-usr1 "$T/ckpt"
        gpus "gpu util=100 power=60 limit=400 mem=0 nvlink=0 pcie=0 $PID_a"
        agent 1600
        agent_wait
        no_hang '["io-moving"]'
        ;;
    lost-mig)
        # Four GPUs: 0 runs pod A, hung (idle); 1 is in MIG mode under pod
        # B; 2 runs pod C and falls off the bus after a while; 3 is lost
        # from the start with nothing on it. A is judged and hangs on time,
        # B stays unknown, C's lost GPU is reported as its hang cause, and
        # NVML as a whole stays up.
        spec="period=${P}ms,idle=3,mincpu=0.02"
        job a "$UID_A" "$spec" --spin --close-wait
        # B and C need no CPU: their verdicts come from their GPUs alone.
        job b "$UID_B" "$spec" --close-wait
        job c "$UID_C" "$spec" --close-wait
        gpus "gpu 0 $PID_a" "gpu 0 state=mig $PID_b" "gpu 100 $PID_c" "gpu 0 state=lost"
        agent 3600
        for _ in $(seq 300); do
            [ "$(grep '"event":"period"' "$T/agent.log" | grep -c "$UID_C")" -ge 3 ] && break
            sleep 0.01
        done
        gpus "gpu 0 $PID_a" "gpu 0 state=mig $PID_b" "gpu 100 state=lost $PID_c" "gpu 0 state=lost"
        agent_wait
        [ "$(ev nvml .state | jq -c .)" = '["up"]' ] && ok || bad "NVML lines: $(ev nvml)"
        wa=$(first_mono watch ".pod_uid == \"$UID_A\"")
        ha=$(first_mono hang ".pod_uid == \"$UID_A\"")
        # On time: on pod A's own third period line, and within a bound
        # that a node-wide stall (the old rule's blind spot) would exceed.
        within "pod A hang after watch (ms)" "$((${ha:-0} - ${wa:-0}))" $((3 * P)) $((3 * P + 1500))
        jq -e -s --arg u "$UID_A" '[.[] | select((.event == "period" or .event == "hang") and .pod_uid == $u)] |
            (map(.event) | index("hang")) as $h | $h == 3 and (.[0:3] | map(.verdict) == ["idle", "idle", "idle"])' \
            "$T/agent.log" >/dev/null && ok || bad "pod A periods: $(ev period "select(.pod_uid == \"$UID_A\") | .verdict")"
        [ "$(ev hang "select(.pod_uid == \"$UID_A\") | .cause" | jq -c unique)" = '["idle"]' ] && ok ||
            bad "pod A hangs: $(ev hang "select(.pod_uid == \"$UID_A\")")"
        jq -e -s --arg u "$UID_B" '[.[] | select(.event == "period" and .pod_uid == $u)] |
            length >= 5 and all(.verdict == "unknown" and .gpus_unjudged == 1 and
                (.gpu[0] | .gpu == 1 and .verdict == "unjudged" and (.nvml | startswith("NOT_SUPPORTED"))))' \
            "$T/agent.log" >/dev/null && ok || bad "pod B periods: $(ev period "select(.pod_uid == \"$UID_B\") | [.verdict, .gpu]" | jq -c .)"
        [ "$(ev hang "select(.pod_uid == \"$UID_B\")" | jq length)" = 0 ] && ok || bad "pod B reported"
        jq -e -s --arg u "$UID_C" '[.[] | select(.event == "hang" and .pod_uid == $u)] |
            length == 1 and .[0].cause == "gpu-lost" and
            (.[0].message | startswith("NCCLHang: GPU 2 lost 3x200ms (NVML_ERROR_GPU_IS_LOST"))' \
            "$T/agent.log" >/dev/null && ok || bad "pod C hang: $(ev hang "select(.pod_uid == \"$UID_C\")")"
        jq -e -s --arg u "$UID_C" '[.[] | select(.event == "period" and .pod_uid == $u) | .verdict] |
            .[0:3] == ["busy", "busy", "busy"] and (.[-1] == "gpu-lost")' \
            "$T/agent.log" >/dev/null && ok || bad "pod C verdicts: $(ev period "select(.pod_uid == \"$UID_C\") | .verdict")"
        ;;
    lost-node-event)
        # A lost GPU is also an Event on the Node, which the node loop of
        # that Node counts as node-class evidence (contract/nodeevent.h,
        # docs/nodeloop.md); the pod gets its NCCLHang Event as before.
        echo "tok-$$" >"$T/token"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" &
        API=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && break; sleep 0.02; done
        job c "$UID_C" "period=${P}ms,idle=3,mincpu=0.02,action=report" --close-wait
        # Pod D's GPU is lost too, but its name and namespace are unknown
        # (its env names neither): no Node Event can name it, so none.
        UID_D=dddddddd-0000-4000-8000-00000000000d
        env NCCLGUARD_WATCHDOG="period=${P}ms,idle=3,mincpu=0.02,action=report" \
            NCCLGUARD_POD_UID="$UID_D" "$WD_JOB" --log "$T/d.log" --ready "$T/d.ready" --close-wait &
        PID_d=$!
        for _ in $(seq 100); do [ -f "$T/d.ready" ] && break; sleep 0.01; done
        gpus "gpu 100 $PID_c" "gpu 100 $PID_d"
        agent 2400 --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7
        for _ in $(seq 300); do
            [ "$(grep '"event":"period"' "$T/agent.log" | grep -c "$UID_C")" -ge 3 ] && break
            sleep 0.01
        done
        gpus "gpu 100 state=lost $PID_c" "gpu 100 state=lost $PID_d"
        agent_wait
        kill "$API"
        jq -e -s --arg u "$UID_C" '[.[] | select(.body.reason == "NCCLGPULost")] |
            length == 1 and .[0].path == "/api/v1/namespaces/default/events" and
            (.[0].body | .involvedObject == {apiVersion: "v1", kind: "Node", name: "node-7"} and
                .metadata.namespace == "default" and .type == "Warning" and
                .related == {apiVersion: "v1", kind: "Pod", name: "pod-c", namespace: "ml", uid: $u} and
                (.metadata.annotations["ncclguard.io/evidence"] | fromjson |
                    .key == ($u + "/gpu-lost") and .pod == "ml/pod-c" and
                    .node == "node-7" and .reason == "GPULost" and .gpus == "0" and .at > 0))' \
            "$T/requests" >/dev/null && ok || bad "the Node Event: $(cat "$T/requests" 2>&1)"
        jq -e -s '[.[] | select(.body.reason == "NCCLHang")] | length == 1 and
            .[0].path == "/api/v1/namespaces/ml/events"' "$T/requests" >/dev/null && ok ||
            bad "the pod Event: $(cat "$T/requests" 2>&1)"
        [ "$(ev hang .pod_uid | jq -c sort)" = "[\"$UID_C\",\"$UID_D\"]" ] && ok ||
            bad "hang lines: $(ev hang .pod_uid)"
        ;;
    bad-spec)
        # A malformed opt-in is logged once as bad-spec and never watched.
        job a "$UID_A" "period=banana,idle=3" --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a"
        agent 800
        agent_wait
        jq -e -s --argjson p "$PID_a" '[.[] | select(.event == "bad-spec")] |
            length == 1 and .[0].pid == $p and (.[0].error | test("period"))' \
            "$T/agent.log" >/dev/null && ok || bad "bad-spec lines: $(ev bad-spec)"
        [ "$(ev watch | jq length)" = 0 ] && ok || bad "watched: $(ev watch)"
        [ ! -s "$T/a.log" ] && alive "$PID_a" && ok || bad "the job was signalled"
        # Below the minimum period (200 ms): refused, by the agent and by
        # `policy lint` alike (one bound in contract/wdspec.h).
        "$WATCHDOG" --check-spec "period=150ms" >/dev/null 2>&1 && bad "period=150ms accepted" || ok
        ;;
    burst)
        # Utilisation is judged over the whole period, not one NVML window:
        # a 1 s period, no NVML read in between (one walk of /proc at the
        # start), and the GPU works for 400 ms in the middle of period 1.
        # Period 1 is busy; the hang comes 2 idle periods after it.
        job a "$UID_A" "period=1000ms,idle=2,mincpu=0.02" --spin --close-wait
        gpus "gpu 0 $PID_a"
        agent 3800 --scan 10s
        wait_for watch 1 || bad "not watched"
        sleep 0.3
        # No link traffic in the burst: only the utilisation samples can
        # tell that the GPU worked.
        gpus "gpu 100 nvlink=0 pcie=0 $PID_a"
        sleep 0.4
        gpus "gpu 0 $PID_a"
        agent_wait
        [ "$(ev period .verdict | jq -c '.[0:3]')" = '["busy","idle","idle"]' ] && ok ||
            bad "verdicts $(ev period .verdict), want busy, idle, idle"
        [ "$(ev hang .idle_periods | jq -c .)" = '[2]' ] && ok || bad "hangs: $(ev hang)"
        ;;
    not-a-pod)
        # The agent as it runs on a node (no --pod-from-env): the pod comes
        # from the cgroup path alone. Rank a lives in a kubelet-style cgroup
        # (cgroupfs driver: kubepods/besteffort/pod<uid>/<container id>);
        # rank b, opted in too, lives in a cgroup that names no pod, and its
        # env's pod UID is not believed.
        CG=/sys/fs/cgroup/pids
        cid=$(printf '%064x' $$)
        dir="$CG/kubepods/besteffort/pod$UID_A/$cid"
        if ! mkdir -p "$dir" 2>/dev/null; then
            echo "SKIP not-a-pod (cannot create a cgroup under $CG)"
            exit 77
        fi
        job a "$UID_B" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt"
        echo "$PID_a" >"$dir/cgroup.procs" || bad "cannot move rank a into $dir"
        job b "$UID_B" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt-b"
        gpus "gpu 0 $PID_a $PID_b"
        PFE=
        agent 1400
        agent_wait
        kill -9 "$PID_a" "$PID_b" 2>/dev/null
        wait "$PID_a" "$PID_b" 2>/dev/null
        for _ in $(seq 50); do rmdir "$dir" 2>/dev/null && break; sleep 0.02; done
        rmdir "$CG/kubepods/besteffort/pod$UID_A" 2>/dev/null
        # Rank a is watched once, from its cgroup; nothing is ever watched
        # under rank b's claimed UID. A process that appears in rank a's
        # cgroup after the SIGTERM is the pod's too, and is watched in
        # state "term": under ASan that is LeakSanitizer's tracer, a clone
        # of the exiting rank that shares its memory and so its environ
        # (seen in CI: pid 17, 4 ms after the SIGTERM to pid 6).
        jq -e -s --argjson p "$PID_a" --arg u "$UID_A" --arg c "$cid" '[.[] | select(.event == "watch")] |
            ([.[] | select(.state != "term")] | length == 1 and .[0].pid == $p) and
            all(.pod_uid == $u and .container == $c)' \
            "$T/agent.log" >/dev/null && ok || bad "watch lines: $(ev watch)"
        jq -e -s --argjson p "$PID_b" '[.[] | select(.event == "not-a-pod")] |
            length == 1 and .[0].pid == $p' "$T/agent.log" >/dev/null && ok ||
            bad "not-a-pod lines: $(ev not-a-pod)"
        [ "$(ev hang .pod_uid | jq -c .)" = "[\"$UID_A\"]" ] && ok || bad "hangs: $(ev hang)"
        ;;
    fifo)
        # A tenant turns the paths the agent writes into FIFOs: the
        # checkpoint file of pod A and the termination log. The agent opens
        # neither (an O_PATH look and fstat first), and pod B, hung at the
        # same time, is acted on as if nothing happened; /healthz answers
        # throughout.
        mkfifo "$T/ckpt-fifo" "$T/termfifo"
        ras_on
        job a "$UID_A" "period=${P}ms,idle=3,mincpu=0.02,action=restart,file=$T/ckpt-fifo,grace=600ms,term=400ms" \
            --spin --close-wait
        job b "$UID_B" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a" "gpu 0 $PID_b"
        agent 3400 --termination-log "$T/termfifo" --metrics-addr 127.0.0.1 \
            --metrics-port 0 --port-file "$T/port"
        for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.02; done
        wait_for hang 1 || bad "no hang"
        for _ in 1 2 3; do
            curl -sf --max-time 1 "http://127.0.0.1:$(cat "$T/port")/healthz" >/dev/null && ok ||
                bad "/healthz did not answer within 1 s"
            sleep 0.1
        done
        agent_wait
        jq -e -s '[.[] | select(.event == "action" and .action == "checkpoint-file")] |
            length == 1 and .[0].result == "refused: not a regular file"' "$T/agent.log" >/dev/null && ok ||
            bad "checkpoint-file lines: $(ev action 'select(.action == "checkpoint-file")')"
        jq -e -s '[.[] | select(.event == "action" and .action == "hang-report")] |
            length == 2 and all(.result == "refused: not a regular file")' "$T/agent.log" >/dev/null && ok ||
            bad "hang-report lines: $(ev action 'select(.action == "hang-report")')"
        wb=$(first_mono watch ".pod_uid == \"$UID_B\"")
        hb=$(first_mono hang ".pod_uid == \"$UID_B\"")
        # A blocked open would hold the loop for as long as the FIFO has no
        # reader; the writes cost at most their 500 ms limit each.
        within "pod B hang after watch (ms)" "$((${hb:-0} - ${wb:-0}))" $((3 * P)) $((3 * P + 1500))
        u=$(sig_at b USR1)
        db=$(first_mono decision ".pod_uid == \"$UID_B\" and .decision == \"restart\"")
        within "pod B SIGUSR1 after its restart decision (ms)" "$((${u:-0} - ${db:-0}))" 0 150
        [ -p "$T/ckpt-fifo" ] && [ -p "$T/termfifo" ] && ok || bad "a FIFO was replaced"
        ;;
    metrics-flood)
        # 80 idle connections (more than the server holds at once) and one
        # client that never reads its answer:
        # /healthz still answers at once, and the decision loop detects a
        # hang on time (the server has its own thread, non-blocking, with a
        # deadline per connection).
        job a "$UID_A" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu 0 $PID_a"
        agent 2400 --metrics-addr 127.0.0.1 --metrics-port 0 --port-file "$T/port"
        for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.02; done
        python3 "$HERE/flood.py" "$(cat "$T/port")" 80 "$T/flood.ready" &
        FLOOD=$!
        for _ in $(seq 200); do [ -f "$T/flood.ready" ] && break; sleep 0.01; done
        [ -f "$T/flood.ready" ] && ok || bad "the flood did not connect"
        for _ in 1 2 3; do
            curl -sf --max-time 1 "http://127.0.0.1:$(cat "$T/port")/healthz" >/dev/null && ok ||
                bad "/healthz did not answer within 1 s under the flood"
            curl -sf --max-time 1 "http://127.0.0.1:$(cat "$T/port")/metrics" | grep -q "^ncclguard_watchdog_nvml_up 1$" && ok ||
                bad "/metrics did not answer within 1 s under the flood"
        done
        agent_wait
        kill "$FLOOD"
        w=$(first_mono watch)
        h=$(first_mono hang)
        within "hang after watch under the flood (ms)" "$((${h:-0} - ${w:-0}))" $((3 * P)) $((5 * P))
        ;;
    churn)
        # A pod whose opted-in processes come and go (a child every 5 ms,
        # each living 20 ms): the table of watched processes holds the live
        # ones only, not every process ever seen. Its log lines are
        # limited (40, then one a second, the rest counted in log-limited
        # lines), so that pod B's hang line is still there, among few.
        job a "$UID_A" "$RESTART" --spin --churn 5
        job b "$UID_B" "period=${P}ms,idle=3,mincpu=0.02" --spin --close-wait
        gpus "gpu 100 $PID_a" "gpu 0 $PID_b"
        # 5 s: a sanitizer build sees about 17 of the children's lines a
        # second, well past the budget's 40 + 5 in that time.
        agent 5000 --metrics-addr 127.0.0.1 --metrics-port 0 --port-file "$T/port"
        sleep 4.5
        curl -sf --max-time 2 "http://127.0.0.1:$(cat "$T/port")/metrics" >"$T/metrics" || bad "no /metrics"
        agent_wait
        lines=$(ev watch "select(.pod_uid == \"$UID_A\")" | jq length)
        lines=$((lines + $(ev exited "select(.pod_uid == \"$UID_A\")" | jq length)))
        [ "$(ev log-limited | jq length)" -ge 1 ] && ok || bad "no log-limited line"
        dropped=$(awk '$1 == "ncclguard_watchdog_log_lines_dropped_total" {print $2}' "$T/metrics")
        seen=$((lines + ${dropped:-0}))
        # Past the log budget (40 lines, then one a second), even where a
        # sanitizer build sees fewer of the short-lived children; the
        # log-limited line above says the budget was used up.
        [ "$seen" -gt 55 ] && ok || bad "only $seen watch and exited lines, written or dropped: no churn to prune"
        [ "$lines" -le 47 ] && ok || bad "pod A wrote $lines watch and exited lines, want at most 40 + 1 a second"
        # Pod B (report mode) may hang, recover and hang again when the
        # churn starves its CPU for a period; its hang line is there.
        [ "$(ev hang '.pod_uid' | jq -c unique)" = "[\"$UID_B\"]" ] && ok || bad "hang lines: $(ev hang .pod_uid)"
        n=$(awk '$1 == "ncclguard_watchdog_watched_processes" {print $2}' "$T/metrics")
        [ -n "$n" ] && [ "$n" -le 30 ] && ok || bad "watched_processes = ${n:-missing} after $seen came and went"
        ;;
    events-restart)
        # The pod's Event limits live as long as its UID, not its
        # processes: the container hangs, exits (the pod is forgotten),
        # starts again under the same UID and hangs again for the same
        # cause within 10 minutes. One Event, the repeat deduplicated.
        echo tok >"$T/token"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" &
        API=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && break; sleep 0.02; done
        spec="period=${P}ms,idle=1,mincpu=0.02"
        job a "$UID_A" "$spec" --spin --close-wait
        gpus "gpu 0 $PID_a"
        agent 3000 --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7
        wait_for event 1 || bad "no first Event"
        kill -9 "$PID_a"
        wait "$PID_a" 2>/dev/null
        wait_for gone 1 || bad "the pod was not forgotten"
        job b "$UID_A" "$spec" --spin --close-wait
        gpus "gpu 0 $PID_b"
        wait_for event 2 || bad "no second event line"
        agent_wait
        kill "$API"
        [ "$(ev hang | jq length)" = 2 ] && ok || bad "hang lines: $(ev hang)"
        [ "$(grep -c . "$T/requests" 2>/dev/null)" = 1 ] && ok || bad "Event POSTs: $(grep -c . "$T/requests"), want 1"
        [ "$(ev event '.result' | jq -c '.[1]')" = '"deduplicated: the same cause was posted less than 10 minutes ago"' ] && ok ||
            bad "event lines: $(ev event .result)"
        ;;
    events-limit)
        # A pod that hangs, recovers and hangs again every few periods
        # (report mode, idle=1): each hang is logged, but the same cause is
        # posted as an Event once, and the repeats are counted.
        echo tok >"$T/token"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" &
        API=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && break; sleep 0.02; done
        # RAS too: asked for the first hang only, whose Event goes out;
        # the repeats' Events are deduplicated, so RAS is not asked again.
        ras_on
        job a "$UID_A" "period=${P}ms,idle=1,mincpu=0.02" --spin --close-wait
        gpus "gpu 0 $PID_a"
        agent 2600 --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7
        for k in 1 2 3 4 5; do
            wait_for hang "$k" || break
            gpus "gpu 100 $PID_a"
            wait_for recovered "$k" || break
            gpus "gpu 0 $PID_a"
        done
        agent_wait
        kill "$API"
        n=$(ev hang | jq length)
        [ "$n" -ge 3 ] && ok || bad "only $n hangs: the flapping did not happen"
        [ "$(grep -c . "$T/requests" 2>/dev/null)" = 1 ] && ok || bad "Event POSTs: $(cat "$T/requests" 2>&1 | wc -l), want 1"
        [ "$(ev event 'select(.result | startswith("deduplicated"))' | jq length)" = $((n - 1)) ] && ok ||
            bad "event lines: $(ev event .result)"
        [ "$(grep -c '^STATUS$' "$T/ras.cmds" 2>/dev/null)" -le 2 ] && ok ||
            bad "RAS asked $(grep -c '^STATUS$' "$T/ras.cmds") times for $n hangs and 1 Event"
        ;;
    identity)
        # On a node (no --pod-from-env) the pod's name and namespace come
        # from the API, by the UID in the cgroup path; the env is not
        # believed. Rank a says it is kube-system/coredns; the API says its
        # UID is ml/trainer-0. Rank b's UID is not on this node: no Event.
        CG=/sys/fs/cgroup/pids
        da="$CG/kubepods/burstable/pod$UID_A/$(printf '%064x' 1$$)"
        db="$CG/kubepods/burstable/pod$UID_B/$(printf '%064x' 2$$)"
        if ! mkdir -p "$da" "$db" 2>/dev/null; then
            echo "SKIP identity (cannot create a cgroup under $CG)"
            exit 77
        fi
        # RAS too: rank a's NCCL_RAS_ADDR names a host elsewhere
        # (192.0.2.1, TEST-NET-1); the agent takes only the port from it and
        # asks the pod's own IP, which the API gives.
        echo tok >"$T/token"
        printf '{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"trainer-0","namespace":"ml","uid":"%s"},"status":{"podIP":"127.0.0.1"}}]}\n' \
            "$UID_A" >"$T/pods.json"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" "$T/pods.json" &
        API=$!
        python3 "$HERE/fake_ras.py" "$T/port.ras" "$T/ras.cmds" &
        RAS=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && [ -s "$T/port.ras" ] && break; sleep 0.02; done
        env NCCLGUARD_WATCHDOG="period=${P}ms,idle=2,mincpu=0.02" NCCLGUARD_POD_NAME=coredns \
            NCCLGUARD_POD_NAMESPACE=kube-system NCCL_RAS_ADDR="192.0.2.1:$(cat "$T/port.ras")" \
            "$WD_JOB" --log "$T/a.log" --spin --close-wait &
        PID_a=$!
        echo "$PID_a" >"$da/cgroup.procs"
        env NCCLGUARD_WATCHDOG="period=${P}ms,idle=2,mincpu=0.02" NCCLGUARD_POD_NAME=coredns \
            NCCLGUARD_POD_NAMESPACE=kube-system "$WD_JOB" --log "$T/b.log" --spin --close-wait &
        PID_b=$!
        echo "$PID_b" >"$db/cgroup.procs"
        gpus "gpu 0 $PID_a" "gpu 0 $PID_b"
        PFE=
        agent 2500 --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7
        agent_wait
        kill "$API" "$RAS" 2>/dev/null
        kill -9 "$PID_a" "$PID_b" 2>/dev/null
        wait "$PID_a" "$PID_b" 2>/dev/null
        for d in "$da" "$db"; do
            for _ in $(seq 50); do rmdir "$d" 2>/dev/null && break; sleep 0.02; done
            rmdir "$(dirname "$d")" 2>/dev/null
        done
        jq -e -s --arg u "$UID_A" 'length == 1 and .[0].path == "/api/v1/namespaces/ml/events" and
            .[0].body.involvedObject.name == "trainer-0" and .[0].body.involvedObject.namespace == "ml" and
            .[0].body.involvedObject.uid == $u and
            (.[0].body.message | test("; RAS: rank 3 at address 10.0.0.2 \\(pid 4242\\) missing"))' "$T/requests" >/dev/null && ok ||
            bad "Event POSTs: $(cat "$T/requests" 2>&1)"
        grep -q 'kube-system' "$T/requests" && bad "an Event went to kube-system" || ok
        grep -qx '/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-7' "$T/requests.get" && ok ||
            bad "pod list GETs: $(cat "$T/requests.get" 2>&1)"
        jq -e -s --arg u "$UID_B" '[.[] | select(.event == "event" and .pod_uid == $u and
            (.result | startswith("deferred") | not))] |
            length >= 1 and all(.result | startswith("not-sent: the API lists no pod"))' \
            "$T/agent.log" >/dev/null && ok || bad "pod B event lines: $(ev event)"
        ;;
    identity-starve)
        # One pod cannot hold the pod list from the others. Pod C's
        # container restarts every half second and hangs each time (its
        # UID keeps the lookup it had); pod A starts later and hangs: its
        # Event still goes out under the name the API gives, although pod
        # C made the agent list the pods less than 10 s before.
        CG=/sys/fs/cgroup/pids
        da="$CG/kubepods/burstable/pod$UID_A/$(printf '%064x' 1$$)"
        dc="$CG/kubepods/burstable/pod$UID_C/$(printf '%064x' 3$$)"
        if ! mkdir -p "$da" "$dc" 2>/dev/null; then
            echo "SKIP identity-starve (cannot create a cgroup under $CG)"
            exit 77
        fi
        echo tok >"$T/token"
        printf '{"kind":"PodList","apiVersion":"v1","items":[%s,%s]}\n' \
            "{\"metadata\":{\"name\":\"trainer-0\",\"namespace\":\"ml\",\"uid\":\"$UID_A\"},\"status\":{\"podIP\":\"127.0.0.1\"}}" \
            "{\"metadata\":{\"name\":\"flapper\",\"namespace\":\"ml\",\"uid\":\"$UID_C\"},\"status\":{\"podIP\":\"127.0.0.2\"}}" \
            >"$T/pods.json"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" "$T/pods.json" &
        API=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && break; sleep 0.02; done
        spec="period=${P}ms,idle=1,mincpu=0.02"
        # in_cgroup DIR LOG: a rank that joins DIR before it execs.
        in_cgroup() {
            sh -c 'echo $$ >"$1/cgroup.procs" && exec env NCCLGUARD_WATCHDOG="$2" "$3" --log "$4" --spin --close-wait' \
                sh "$1" "$3" "$WD_JOB" "$2" &
        }
        in_cgroup "$dc" "$T/c0.log" "$spec"
        pc=$!
        gpus "gpu 0 $pc"
        PFE=
        agent 5000 --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7
        # Each time the pod is forgotten (its last process gone) before
        # its container starts again: a new entry, with no name yet.
        for k in 1 2 3; do
            sleep 0.5
            kill -9 "$pc" 2>/dev/null
            wait "$pc" 2>/dev/null
            wait_for gone "$k" || bad "pod C not forgotten ($k)"
            in_cgroup "$dc" "$T/c$k.log" "$spec"
            pc=$!
            gpus "gpu 0 $pc"
        done
        in_cgroup "$da" "$T/a.log" "$spec"
        pa=$!
        gpus "gpu 0 $pc" "gpu 0 $pa"
        agent_wait
        kill "$API" 2>/dev/null
        kill -9 "$pa" "$pc" 2>/dev/null
        wait "$pa" "$pc" 2>/dev/null
        for d in "$da" "$dc"; do
            for _ in $(seq 50); do rmdir "$d" 2>/dev/null && break; sleep 0.02; done
            rmdir "$(dirname "$d")" 2>/dev/null
        done
        [ "$(ev hang "select(.pod_uid == \"$UID_C\")" | jq length)" -ge 2 ] && ok ||
            bad "pod C hung $(ev hang "select(.pod_uid == \"$UID_C\")" | jq length) times: no flapping"
        jq -e -s --arg u "$UID_A" '[.[] | select(.body.involvedObject.uid == $u)] | length == 1 and
            .[0].body.involvedObject.name == "trainer-0"' "$T/requests" >/dev/null && ok ||
            bad "pod A's Events: $(jq -c .body.involvedObject "$T/requests" 2>&1); its event lines: $(ev event "select(.pod_uid == \"$UID_A\") | .result")"
        ;;
    shm)
        # Pod A's /dev/shm (a 1 MiB tmpfs, as the kubelet mounts a
        # memory-backed emptyDir) filled to 95 % by a segment it maps, plus
        # a segment nothing maps: the use is a metric, one Event goes out
        # at 90 % (not one per period), and the left-behind segment is
        # reported. Pod B at 50 %: no Event. Both jobs work (busy GPUs).
        echo tok >"$T/token"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" &
        API=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && break; sleep 0.02; done
        job a "$UID_A" "period=${P}ms,idle=3,mincpu=0.02" --shm-fill 95 --shm-orphan
        job b "$UID_B" "period=${P}ms,idle=3,mincpu=0.02" --shm-fill 50
        # Pod C's /dev/shm is a plain directory (no tmpfs): not sized, no
        # metric for it.
        mkdir -p "$T/plain"
        job c "$UID_C" "period=${P}ms,idle=3,mincpu=0.02" --shm-plain "$T/plain"
        gpus "gpu 100 $PID_a" "gpu 100 $PID_b" "gpu 100 $PID_c"
        agent 1800 --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7 \
            --metrics-addr 127.0.0.1 --metrics-port 0 --port-file "$T/port"
        wait_for period 8 || bad "no eighth period"
        curl -sf --max-time 2 "http://127.0.0.1:$(cat "$T/port")/metrics" >"$T/metrics" || bad "no /metrics"
        agent_wait
        kill "$API"
        jq -e --arg u "$UID_A" -s 'length == 1 and .[0].body.reason == "NCCLShmNearlyFull" and
            .[0].body.involvedObject.uid == $u and
            (.[0].body.message | test("^NCCLShmNearlyFull: /dev/shm 9[5-9]% full \\([0-9]+ of 1024 KiB\\)"))' \
            "$T/requests" >/dev/null && ok || bad "Event POSTs: $(cat "$T/requests" 2>&1)"
        used=$(awk -v u="$UID_A" 'index($0, "ncclguard_watchdog_shm_bytes{") == 1 && index($0, u) && /kind="used"/ {print $2}' "$T/metrics")
        size=$(awk -v u="$UID_A" 'index($0, "ncclguard_watchdog_shm_bytes{") == 1 && index($0, u) && /kind="size"/ {print $2}' "$T/metrics")
        [ "${size:-0}" = 1048576 ] && [ "$(( ${used:-0} * 100 / 1048576 ))" -ge 95 ] && ok ||
            bad "shm metric for pod A: used ${used:-missing} size ${size:-missing}"
        grep -q "ncclguard_watchdog_idle_periods{.*$UID_C" "$T/metrics" && ok || bad "pod C not watched"
        grep -q "ncclguard_watchdog_shm_bytes{.*$UID_C" "$T/metrics" &&
            bad "shm metric for pod C: $(grep "$UID_C" "$T/metrics")" || ok
        grep -q "ncclguard_watchdog_shm_orphan_segments{.*$UID_A\"} 1\$" "$T/metrics" && ok ||
            bad "orphan metric: $(grep orphan "$T/metrics")"
        jq -e -s --arg u "$UID_A" '[.[] | select(.event == "shm-orphan")] |
            length == 1 and .[0].pod_uid == $u and .[0].segment == "nccl-orphan"' \
            "$T/agent.log" >/dev/null && ok || bad "shm-orphan lines: $(ev shm-orphan)"
        ;;
    ras)
        # A hang in a job whose NCCL runs RAS (NCCL_RAS_ADDR set), report
        # mode: the agent asks RAS twice, a period apart, in NCCL's own
        # client protocol (2.28.9: JSON), and the Event names the missing
        # rank and the one behind at the addresses RAS prints.
        echo tok >"$T/token"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" &
        API=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && break; sleep 0.02; done
        ras_on
        job a "$UID_A" "period=${P}ms,idle=2,mincpu=0.02" --spin --close-wait
        gpus "gpu 0 $PID_a"
        agent 2000 --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7
        agent_wait
        kill "$API" "$RAS"
        c="CLIENT PROTOCOL 2|TIMEOUT 1|SET FORMAT json|STATUS|"
        [ "$(tr '\n' '|' <"$T/ras.cmds" 2>/dev/null)" = "$c$c" ] && ok ||
            bad "RAS commands: $(cat "$T/ras.cmds" 2>&1)"
        jq -e -s 'length == 1 and (.[0].body.message |
            test("; RAS: rank 3 at address 10.0.0.2 \\(pid 4242\\) missing \\(unresponsive\\); RAS: rank 1 at address 10.0.0.1 \\(pid 101\\) behind \\(41 of 42 collectives issued\\); RAS: no rank issued a collective in 200ms; action: report only$"))' \
            "$T/requests" >/dev/null && ok || bad "Event: $(jq -c .body.message "$T/requests" 2>&1)"
        [ "$(ev ras '[.result, .query, .format, .nccl]' | jq -c .)" = '[["answered",1,"json","2.28.9"],["answered",2,"json","2.28.9"]]' ] && ok ||
            bad "ras lines: $(ev ras)"
        ;;
    ras-text)
        # NCCL before 2.28.7 has no JSON: "SET FORMAT json" is answered
        # "ERROR: Unknown command ...", and STATUS comes in text. Three pods,
        # each with its own RAS: 2.24.3, 2.26.2 and 2.28.3. Each one's
        # mismatch block ("2 ranks have launched up to operation 42", rank 1
        # at 41) does not move between the two queries: each is restarted.
        spec="period=${P}ms,idle=2,mincpu=0.02,action=restart,term=400ms"
        RAS_NAME=r24 ras_on version=2.24.3
        job a "$UID_A" "$spec" --spin --close-wait
        RAS_NAME=r26 ras_on version=2.26.2
        job b "$UID_B" "$spec" --spin --close-wait
        RAS_NAME=r28 ras_on version=2.28.3
        job c "$UID_C" "$spec" --spin --close-wait
        gpus "gpu 0 $PID_a" "gpu 0 $PID_b" "gpu 0 $PID_c"
        agent 2600
        agent_wait
        c="CLIENT PROTOCOL 2|TIMEOUT 1|SET FORMAT json|STATUS|"
        for n in r24 r26 r28; do
            [ "$(tr '\n' '|' <"$T/$n.cmds" 2>/dev/null)" = "$c$c" ] && ok ||
                bad "$n commands: $(cat "$T/$n.cmds" 2>&1)"
        done
        for x in "a $UID_A 2.24.3" "b $UID_B 2.26.2" "c $UID_C 2.28.3"; do
            set -- $x
            [ "$(ev ras "select(.pod_uid == \"$2\") | [.result, .format, .nccl, .behind, .counts]" | jq -c .)" = \
                "[[\"answered\",\"text\",\"$3+cuda12.8\",1,2],[\"answered\",\"text\",\"$3+cuda12.8\",1,2]]" ] && ok ||
                bad "pod $1 ras lines: $(ev ras "select(.pod_uid == \"$2\")")"
            [ "$(ev decision "select(.pod_uid == \"$2\") | .decision" | jq -c .)" = '["restart"]' ] && ok ||
                bad "pod $1 decisions: $(ev decision "select(.pod_uid == \"$2\")")"
            [ -n "$(sig_at "$1" TERM)" ] && ok || bad "pod $1 got no SIGTERM"
        done
        ;;
    ras-moving)
        # RAS answers twice and the counts moved in between (each rank
        # issued collectives): NCCL's own docs call differing counts normal
        # as long as they increase. The NVML signature alone never acts:
        # report only, no signal.
        ras_on counts=moving
        job a "$UID_A" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt"
        gpus "gpu util=100 power=60 limit=400 mem=0 nvlink=0 pcie=0 $PID_a"
        agent 2200
        agent_wait
        [ "$(ev hang | jq length)" = 1 ] && ok || bad "hang lines: $(ev hang)"
        [ "$(ev decision '[.decision, .why]' | jq -c .)" = '[["report-only","RAS shows collectives issued between two queries"]]' ] && ok ||
            bad "decisions: $(ev decision)"
        [ "$(ev action | jq length)" = 0 ] && ok || bad "acted: $(ev action)"
        [ ! -s "$T/a.log" ] && ok || bad "the job was signalled: $(cat "$T/a.log")"
        ;;
    ras-slow)
        # RAS may answer after its timeout plus RAS_COLLECTIVE_EXTRA_TIMEOUT
        # (1 s + 5 s here): the agent waits for it on a thread of its own.
        # Meanwhile the loop goes on: pod B's periods keep coming 200 ms
        # apart, and the answer, 6 s late, still confirms pod A's hang.
        ras_on slow=6
        spec="period=${P}ms,idle=2,mincpu=0.02,action=restart,term=400ms"
        job a "$UID_A" "$spec" --spin --close-wait
        unset NCCL_RAS_ADDR
        job b "$UID_B" "period=${P}ms,idle=50,mincpu=0.02" --spin --close-wait
        gpus "gpu 0 $PID_a" "gpu 0 $PID_b"
        agent 8600
        agent_wait
        h=$(first_mono hang)
        d=$(decided restart)
        within "restart decision after the hang (ms)" "$((${d:-0} - ${h:-0}))" 6000 8000
        jq -e -s --arg u "$UID_B" --argjson h "${h:-0}" --argjson d "${d:-0}" '
            [.[] | select(.event == "period" and .pod_uid == $u and .mono_ms > $h and .mono_ms < $d) | .mono_ms] |
            length >= 20 and ([range(1; length) as $i | .[$i] - .[$i - 1]] | max) < 1000' \
            "$T/agent.log" >/dev/null && ok ||
            bad "pod B's periods during the RAS query: $(ev period "select(.pod_uid == \"$UID_B\") | .mono_ms" | jq -c .)"
        [ -n "$(sig_at a TERM)" ] && ok || bad "pod A got no SIGTERM"
        ;;
    no-second-signal)
        # The healthy set, no RAS at all: a long CPU phase (GPU idle, CPU
        # busy, one CLOSE_WAIT socket, no I/O: tokenising, evaluation on
        # the CPU) and an inference server whose GPU spins at idle power
        # with no input (zai-org/GLM-130B #32). Both look hung to NVML;
        # neither has a second signal, so both are reported, with why, and
        # never signalled. A third pod's RAS answers with no communicator
        # at all (a process with no NCCL job): nothing to compare either.
        # A fourth pod's RAS shows every rank at the same count, which does
        # not move: a pause between collectives looks the same, so that is
        # no proof either.
        echo tok >"$T/token"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" &
        API=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && break; sleep 0.02; done
        job a "$UID_A" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt-a"
        job b "$UID_B" "$RESTART" --spin --catch-usr1 "$T/ckpt-b"
        ras_on comms=0
        job c "$UID_C" "$RESTART" --spin --catch-usr1 "$T/ckpt-c"
        RAS_NAME=req ras_on counts=equal
        UID_D=dddddddd-0000-4000-8000-00000000000d
        job d "$UID_D" "$RESTART" --spin --close-wait --catch-usr1 "$T/ckpt-d"
        gpus "gpu 0 $PID_a" "gpu util=100 power=66 limit=300 mem=0 nvlink=0 pcie=0 $PID_b" \
            "gpu util=100 power=66 limit=300 mem=0 nvlink=0 pcie=0 $PID_c" "gpu 0 $PID_d"
        agent 2600 --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7
        agent_wait
        kill "$API"
        [ "$(ev hang '[.pod_uid, .cause]' | jq -c sort)" = "[[\"$UID_A\",\"idle\"],[\"$UID_B\",\"spinning\"],[\"$UID_C\",\"spinning\"],[\"$UID_D\",\"idle\"]]" ] && ok ||
            bad "hang lines: $(ev hang)"
        [ "$(ev decision '.decision' | jq -c unique)" = '["report-only"]' ] && ok || bad "decisions: $(ev decision)"
        jq -e -s '[.[] | select(.event == "decision")] | length == 4 and
            ([.[] | select(.why | startswith("no second signal (NCCL RAS not reachable)"))] | length == 2) and
            ([.[] | select(.why | test("no collective counts"))] | length == 1) and
            ([.[] | select(.why | test("no rank moved, but none is behind or missing"))] | length == 1)' \
            "$T/agent.log" >/dev/null && ok ||
            bad "why: $(ev decision .why)"
        [ "$(ev action | jq length)" = 0 ] && ok || bad "acted: $(ev action)"
        for j in a b c d; do [ ! -s "$T/$j.log" ] && ok || bad "job $j was signalled: $(cat "$T/$j.log")"; done
        # What the user sees: the Event says that nothing was done, and why.
        jq -e -s 'length == 4 and all(.body.message |
            test("; report only, no checkpoint signal or SIGTERM: "))' "$T/requests" >/dev/null && ok ||
            bad "Events: $(jq -c .body.message "$T/requests" 2>&1)"
        ;;
    shared-gpu)
        # Time-slicing: pods A (healthy) and B (hung) share GPU 0, which
        # spins at idle power. NVML's signals are the GPU's, not a pod's:
        # both are reported, with the GPU named as shared, and neither is
        # signalled, even though B's RAS would confirm its hang.
        ras_on
        job a "$UID_A" "$RESTART" --spin --catch-usr1 "$T/ckpt-a"
        job b "$UID_B" "$RESTART" --spin --catch-usr1 "$T/ckpt-b"
        gpus "gpu util=100 power=60 limit=400 mem=0 nvlink=0 pcie=0 $PID_a $PID_b"
        agent 2000
        agent_wait
        [ "$(ev hang '.shared' | jq -c .)" = '[true,true]' ] && ok || bad "hang lines: $(ev hang)"
        [ "$(ev decision '[.decision, .why]' | jq -c unique)" = '[["report-only","the GPU is shared, judged for reports only"]]' ] && ok ||
            bad "decisions: $(ev decision)"
        [ "$(ev action | jq length)" = 0 ] && ok || bad "acted: $(ev action)"
        [ ! -s "$T/a.log" ] && ok || bad "the healthy pod was signalled: $(cat "$T/a.log")"
        [ ! -s "$T/ras.cmds" ] && ok || bad "RAS asked for a shared GPU: $(cat "$T/ras.cmds")"
        ;;
    waiting-ranks)
        # Pod A's ranks wait in a collective (the spin signature) while the
        # rank they wait for, in pod B on this node (RAS names it behind,
        # at B's address), writes a checkpoint: B's period is io-moving, so
        # A's job waits, it is not stuck. A is reported, never signalled.
        # Pod B's address is its NCCL_RAS_ADDR's host (under
        # --pod-from-env; on a node, status.podIP from the API).
        b_ip=127.0.0.3
        NCCL_RAS_ADDR="$b_ip:28028" job b "$UID_B" "period=${P}ms,idle=50,mincpu=0.02" \
            --spin --write "$T/ckpt-out"
        ras_on behind=$b_ip
        job a "$UID_A" "$RESTART" --spin --catch-usr1 "$T/ckpt-a"
        gpus "gpu util=100 power=60 limit=400 mem=0 nvlink=0 pcie=0 $PID_a" "gpu 0 $PID_b"
        agent 2400
        agent_wait
        [ "$(ev period "select(.pod_uid == \"$UID_B\") | .verdict" | jq -c unique)" = '["io-moving"]' ] && ok ||
            bad "pod B verdicts: $(ev period "select(.pod_uid == \"$UID_B\") | .verdict")"
        jq -e -s --arg u "$UID_A" '[.[] | select(.event == "decision")] | length == 1 and
            .[0].pod_uid == $u and .[0].decision == "report-only" and
            (.[0].why | test("at 127.0.0.3, whose pod .* is not stalled \\(io-moving\\)"))' "$T/agent.log" >/dev/null && ok ||
            bad "decisions: $(ev decision)"
        [ "$(ev action | jq length)" = 0 ] && ok || bad "acted: $(ev action)"
        [ ! -s "$T/a.log" ] && ok || bad "the waiting pod was signalled: $(cat "$T/a.log")"
        ;;
    mps)
        # MPS: NVML lists the MPS server as the GPU's compute process and
        # the pod's rank only among the MPS clients
        # (nvmlDeviceGetMPSComputeRunningProcesses_v3). The pod maps to the
        # GPU through that list; the GPU is shared through MPS, so its hang
        # is reported and never acted on.
        ras_on
        job srv "" "" --spin
        job a "$UID_A" "$RESTART" --spin --catch-usr1 "$T/ckpt-a"
        gpus "gpu util=100 power=60 limit=400 mem=0 nvlink=0 pcie=0 $PID_srv mps=$PID_a"
        agent 2000
        agent_wait
        [ "$(ev period '.gpus' | jq -c unique)" = '[1]' ] && ok || bad "pod A's GPUs: $(ev period .gpus)"
        [ "$(ev hang '[.cause, .shared]' | jq -c .)" = '[["spinning",true]]' ] && ok || bad "hang lines: $(ev hang)"
        [ "$(ev hang '.shared_why' | jq -c .)" = '["GPU 0 is shared through an MPS server"]' ] && ok ||
            bad "hang lines: $(ev hang .shared_why)"
        [ "$(ev decision '.decision' | jq -c .)" = '["report-only"]' ] && ok || bad "decisions: $(ev decision)"
        [ "$(ev action | jq length)" = 0 ] && ok || bad "acted: $(ev action)"
        [ ! -s "$T/a.log" ] && ok || bad "the MPS client was signalled: $(cat "$T/a.log")"
        ;;
    ras-bad-addr)
        # NCCL_RAS_ADDR with a port no socket can listen on: 0 (bind(2)
        # would pick a port of its own, so NCCL's RAS cannot be there) and
        # 65536 (past a TCP port's 16 bits). Nothing is queried; the ras
        # line says why and shows the value.
        spec="period=${P}ms,idle=2,mincpu=0.02"
        NCCL_RAS_ADDR=127.0.0.1:0 job a "$UID_A" "$spec" --spin --close-wait
        NCCL_RAS_ADDR=127.0.0.1:65536 job b "$UID_B" "$spec" --spin --close-wait
        gpus "gpu 0 $PID_a" "gpu 0 $PID_b"
        agent 2000
        agent_wait
        [ "$(ev ras '[.pod_uid, .result, .value]' | jq -c sort)" = \
            "[[\"$UID_A\",\"not-queried: bad NCCL_RAS_ADDR\",\"127.0.0.1:0\"],[\"$UID_B\",\"not-queried: bad NCCL_RAS_ADDR\",\"127.0.0.1:65536\"]]" ] && ok ||
            bad "ras lines: $(ev ras)"
        ;;
    flight-recorder)
        # Two ranks run PyTorch's flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE
        # and TORCH_NCCL_DEBUG_INFO_PIPE_FILE set; the stand-in answers on
        # its FIFO as ProcessGroupNCCL does). On the hang the agent writes
        # to each rank's pipe, waits for the dumps, then posts the Event
        # saying where they are; the SIGTERM waits for the dumps too.
        echo tok >"$T/token"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" &
        API=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && break; sleep 0.02; done
        spec="period=${P}ms,idle=2,mincpu=0.02,action=restart,term=400ms"
        ras_on
        export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DEBUG_INFO_PIPE_FILE="$T/fr_pipe_" \
            TORCH_NCCL_DEBUG_INFO_TEMP_FILE="$T/fr_dump_"
        # Dumps of an earlier hang, a minute old, at the same paths: they
        # are not this hang's, so the agent waits for the new ones.
        printf 'old trace\n' | tee "$T/fr_dump_0" >"$T/fr_dump_1"
        touch -d "@$(($(date +%s) - 60))" "$T/fr_dump_0" "$T/fr_dump_1"
        RANK=0 job a "$UID_A" "$spec" --spin --close-wait --flight-recorder
        RANK=1 job b "$UID_A" "$spec" --spin --close-wait --flight-recorder
        unset TORCH_NCCL_TRACE_BUFFER_SIZE TORCH_NCCL_DEBUG_INFO_PIPE_FILE TORCH_NCCL_DEBUG_INFO_TEMP_FILE
        gpus "gpu 0 $PID_a $PID_b"
        agent 3800 --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7
        agent_wait
        kill "$API"
        [ -p "$T/fr_pipe_0.pipe" ] && [ -p "$T/fr_pipe_1.pipe" ] && ok || bad "the stand-in made no FIFOs"
        jq -e -s '[.[] | select(.event == "action" and .action == "flight-recorder")] |
            length == 2 and all(.result == "written")' "$T/agent.log" >/dev/null && ok ||
            bad "flight-recorder lines: $(ev action 'select(.action == "flight-recorder")')"
        [ -s "$T/fr_dump_0" ] && [ -s "$T/fr_dump_1" ] && ok || bad "no dumps"
        jq -e -s --arg d "$T/fr_dump_" 'length == 1 and (.[0].body.message |
            endswith("; flight recorder: dumped to " + $d + "0, " + $d + "1"))' \
            "$T/requests" >/dev/null && ok || bad "Event: $(jq -c .body.message "$T/requests" 2>&1)"
        fd=$(first_mono action '.action == "flight-recorder-dump"')
        for r in a b; do
            d=$(sig_at $r FRDUMP)
            t=$(sig_at $r TERM)
            [ -n "$d" ] && [ -n "$fd" ] && [ "$fd" -ge "$d" ] && ok ||
                bad "rank $r: dump at ${d:-never}, the agent saw the dumps at ${fd:-never}"
            [ -n "$d" ] && [ -n "$t" ] && [ "$t" -ge "$d" ] && ok ||
                bad "rank $r: dump at ${d:-never}, SIGTERM at ${t:-never}"
        done
        ;;
    flight-recorder-new)
        # PyTorch with the TORCH_FR_* names (torchtitan sets them from
        # torch 2.9), which it reads before the TORCH_NCCL_* ones. Rank 0:
        # TORCH_FR_BUFFER_SIZE=2000 over TORCH_NCCL_TRACE_BUFFER_SIZE=0 (on),
        # its dump at TORCH_FR_DUMP_TEMP_FILE, not at the
        # TORCH_NCCL_DEBUG_INFO_TEMP_FILE also set. Rank 1: no dump prefix
        # at all, so PyTorch's default, $HOME/.cache/torch/comm_lib_trace_rank_.
        # Report mode: the pipes written, the Event posted after both dumps,
        # saying where they are.
        echo tok >"$T/token"
        python3 "$HERE/fake_apiserver.py" "$T/port.api" "$T/requests" &
        API=$!
        for _ in $(seq 200); do [ -s "$T/port.api" ] && break; sleep 0.02; done
        spec="period=${P}ms,idle=2,mincpu=0.02"
        mkdir -p "$T/home"
        RANK=0 TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_TRACE_BUFFER_SIZE=0 \
            TORCH_NCCL_DEBUG_INFO_PIPE_FILE="$T/frp_" TORCH_FR_DUMP_TEMP_FILE="$T/frn_" \
            TORCH_NCCL_DEBUG_INFO_TEMP_FILE="$T/wrong_" \
            job a "$UID_A" "$spec" --spin --close-wait --flight-recorder-new
        RANK=1 HOME="$T/home" TORCH_NCCL_DEBUG_INFO_PIPE_FILE="$T/frp_" \
            job b "$UID_A" "$spec" --spin --close-wait --flight-recorder-new
        gpus "gpu 0 $PID_a $PID_b"
        agent 2400 --api-server "http://127.0.0.1:$(cat "$T/port.api")" \
            --token-file "$T/token" --node-name node-7
        agent_wait
        kill "$API"
        d1="$T/home/.cache/torch/comm_lib_trace_rank_1"
        [ -s "$T/frn_0" ] && [ -s "$d1" ] && [ ! -e "$T/wrong_0" ] && ok ||
            bad "dumps: $(ls -R "$T" | tr '\n' ' ')"
        jq -e -s --arg p "$T/frp_" '[.[] | select(.event == "action" and .action == "flight-recorder")] |
            length == 2 and all(.result == "written") and (map(.pipe) | sort) == [$p + "0.pipe", $p + "1.pipe"]' \
            "$T/agent.log" >/dev/null && ok ||
            bad "flight-recorder lines: $(ev action 'select(.action == "flight-recorder")')"
        jq -e -s --arg a "$T/frn_0" --arg b "$d1" 'length == 1 and (.[0].body.message |
            endswith("; flight recorder: dumped to " + $a + ", " + $b) or
            endswith("; flight recorder: dumped to " + $b + ", " + $a))' \
            "$T/requests" >/dev/null && ok || bad "Event: $(jq -c .body.message "$T/requests" 2>&1)"
        ;;
    stdin-closed)
        # The agent started with fd 0 closed (as a supervisor may start
        # it), so each fd it opens may be 0: pidfd_open, the container's
        # root for the checkpoint write. One walk of /proc only (as in
        # pid-reuse); rank a dies once the checkpoint is written and is
        # reaped before the SIGTERM, so its pidfd_open fails with ESRCH
        # right before rank b's returns fd 0. The checkpoint is written,
        # a is "exited", and b still gets its SIGTERM.
        spec="period=1500ms,idle=1,mincpu=0.02,action=restart,file=$T/ckpt-file,grace=300ms"
        ras_on
        job a "$UID_A" "$spec" --spin --close-wait
        job b "$UID_A" "$spec" --spin
        gpus "gpu 0 $PID_a $PID_b"
        # The restart decision a period after the hang (RAS asked twice).
        FAKE_NVML_SCRIPT="$T/nvml" "$WATCHDOG" --nvml "$FAKE_NVML" \
            --scan 5s --metrics-addr off --api-server off $PFE \
            --termination-log "" -v --run-for 4200ms \
            0<&- >"$T/agent.log" 2>"$T/agent.err" &
        AGENT=$!
        for _ in $(seq 500); do [ -f "$T/ckpt-file" ] && break; sleep 0.01; done
        [ -f "$T/ckpt-file" ] && ok || bad "no checkpoint file: $(ev action 'select(.action == "checkpoint-file")')"
        kill -9 "$PID_a"
        wait "$PID_a" 2>/dev/null
        agent_wait
        [ "$(ev action 'select(.action == "sigterm") | [.pid, .result]' | jq -c .)" = "[[$PID_a,\"exited\"],[$PID_b,\"sent\"]]" ] && ok ||
            bad "sigterm lines: $(ev action 'select(.action == "sigterm")')"
        [ -n "$(sig_at b TERM)" ] && ok || bad "rank b saw no SIGTERM: $(cat "$T/b.log")"
        ;;
    kill-fallback)
        # pidfd_open(2) refused (tests/fakes/no_pidfd.c: ENOSYS, as before
        # Linux 5.3): the agent checks the start time and signals with
        # kill(2) instead. The SIGTERM reaches the job and is logged sent.
        [ -f "$(dirname "$FAKE_NVML")/no_pidfd.so" ] || bad "no $(dirname "$FAKE_NVML")/no_pidfd.so"
        ras_on
        job a "$UID_A" "period=${P}ms,idle=2,mincpu=0.02,action=restart,term=400ms" --spin --close-wait
        gpus "gpu 0 $PID_a"
        LD_PRELOAD="$(dirname "$FAKE_NVML")/no_pidfd.so" ASAN_OPTIONS="$ASAN_PRELOAD" agent 2300
        agent_wait
        jq -e -s --argjson p "$PID_a" '[.[] | select(.event == "action" and
            .action == "sigterm")] | length == 1 and .[0].pid == $p and
            .[0].result == "sent"' "$T/agent.log" >/dev/null && ok ||
            bad "SIGTERM lines: $(ev action 'select(.action == "sigterm")')"
        [ -n "$(sig_at a TERM)" ] && ok || bad "the job saw no SIGTERM: $(cat "$T/a.log")"
        ;;
    realloc-fails)
        # Out of memory inside the scan: realloc(3) of 256 bytes fails
        # (tests/fakes/no_realloc.c), the size of the PID index's first
        # table (64 slots) and of the seen list's first 16 entries. The
        # agent goes on: lookups find nothing, so the job is taken for new
        # on every scan, but it never crashes and its periods go on.
        [ -f "$(dirname "$FAKE_NVML")/no_realloc.so" ] || bad "no $(dirname "$FAKE_NVML")/no_realloc.so"
        job a "$UID_A" "period=${P}ms,idle=20,mincpu=0.02" --spin --close-wait
        gpus "gpu 0 $PID_a"
        NO_REALLOC_SIZE=256 NO_REALLOC_LOG="$T/refused" \
            LD_PRELOAD="$(dirname "$FAKE_NVML")/no_realloc.so" ASAN_OPTIONS="$ASAN_PRELOAD" agent 1200
        agent_wait
        [ -s "$T/refused" ] && ok || bad "no realloc was refused: the case tests nothing"
        [ "$(ev period | jq length)" -ge 3 ] && ok || bad "periods: $(ev period .verdict)"
        [ "$(ev watch | jq length)" -ge 1 ] && ok || bad "the job was never watched"
        ;;
    idle-cpu)
        # Without --run-for, as deployed, the agent sleeps between scans
        # and periods: over 1.5 s it uses a few clock ticks. Its loop must
        # not take "now" for the wake time (a spin that every other case,
        # run with --run-for, would hide). Stopped by SIGTERM.
        job a "$UID_A" "period=${P}ms,idle=3,mincpu=0.02" --spin
        gpus "gpu 100 $PID_a"
        FAKE_NVML_SCRIPT="$T/nvml" "$WATCHDOG" --nvml "$FAKE_NVML" \
            --scan 50ms --metrics-addr off --api-server off $PFE \
            --termination-log "" -v >"$T/agent.log" 2>"$T/agent.err" &
        AGENT=$!
        sleep 1.5
        ticks=$(awk '{print $14 + $15}' "/proc/$AGENT/stat")
        kill -TERM "$AGENT"
        agent_wait
        hz=$(getconf CLK_TCK)
        # A spin costs about 1.5 s of ticks (150 at 100 Hz). A sanitizer
        # build's start and scans cost about three times a plain one's
        # (its --help alone takes 22 ms of CPU against 7), and measured 8
        # to 11 ticks on 2 CPUs, so it gets a quarter of a second: still a
        # sixth of a spin.
        limit=$((hz / 10))
        [ -n "${SANITIZED:-}" ] && limit=$((hz / 4))
        [ -n "$ticks" ] && [ "$ticks" -lt "$limit" ] && ok ||
            bad "the agent used ${ticks:-?} ticks (of $hz a second, limit $limit) in 1.5 s"
        [ "$(ev period | jq length)" -ge 5 ] && ok || bad "periods: $(ev period .verdict)"
        ;;
    fd-flood)
        # A tenant's pod whose three processes hold 15,000 open files each
        # (/dev/null; runtimes allow 1,048,576 per process): the agent
        # looks at 8192 of the pod's open files per period (POD_MAX_FDS)
        # and says so once, and another pod's hang is found on time.
        [ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 15100 ] ||
            { echo "SKIP fd-flood (hard open-file limit $(ulimit -Hn))"; exit 77; }
        for r in 1 2 3; do
            job "n$r" "$UID_B" "period=${P}ms,idle=50,mincpu=0.02" --spin --open-null 15000
        done
        job a "$UID_A" "period=${P}ms,idle=3,mincpu=0.02" --spin --close-wait
        gpus "gpu 0 $PID_a" "gpu 100 $PID_n1 $PID_n2 $PID_n3"
        agent 2000
        agent_wait
        [ "$(ev period "select(.pod_uid == \"$UID_B\") | .open_files_read" | jq -c 'max')" = 8192 ] && ok ||
            bad "pod B's open files read: $(ev period "select(.pod_uid == \"$UID_B\") | .open_files_read" | jq -c .)"
        [ "$(ev budget "select(.pod_uid == \"$UID_B\") | .max_open_files" | jq -c .)" = '[8192]' ] && ok ||
            bad "budget lines: $(ev budget)"
        wa=$(first_mono watch ".pod_uid == \"$UID_A\"")
        ha=$(first_mono hang ".pod_uid == \"$UID_A\"")
        within "pod A hang after watch (ms)" "$((${ha:-0} - ${wa:-0}))" $((3 * P)) $((3 * P + 1500))
        ;;
    node-budget)
        # The node's work budget (--max-procs 8 here, 4096 by default):
        # pods B and C fork 6 ranks each; past 8 watched processes each pod
        # is held to its share (8 over the pods watched so far, 2), so C
        # gets 4, and pod A, whose rank comes after them, still gets it
        # watched and its hang found.
        spec="period=${P}ms,idle=50,mincpu=0.02"
        # B's and C's ranks sleep: twelve spinning ones would starve pod A's
        # rank of the CPU on a small machine.
        for r in 1 2 3 4 5 6; do job "b$r" "$UID_B" "$spec"; done
        for r in 1 2 3 4 5 6; do job "c$r" "$UID_C" "$spec"; done
        # Pod A's rank starts last: /proc lists it after B's and C's.
        job a "$UID_A" "period=${P}ms,idle=3,mincpu=0.02" --spin --close-wait
        gpus "gpu 100 $PID_b1 $PID_b2 $PID_b3 $PID_b4 $PID_b5 $PID_b6 $PID_c1 $PID_c2 $PID_c3 $PID_c4 $PID_c5 $PID_c6" "gpu 0 $PID_a"
        agent 3000 --max-procs 8
        agent_wait
        [ "$(ev watch '.pod_uid' | jq -c 'group_by(.) | map(length)')" = '[1,6,4]' ] && ok ||
            bad "watched per pod (A, B, C): $(ev watch '.pod_uid' | jq -c 'group_by(.) | map(length)')"
        [ "$(ev budget '[.pod_uid, .node_max_processes]' | jq -c .)" = "[[\"$UID_C\",8]]" ] && ok ||
            bad "budget lines: $(ev budget)"
        wa=$(first_mono watch ".pod_uid == \"$UID_A\"")
        ha=$(first_mono hang ".pod_uid == \"$UID_A\"")
        within "pod A hang after watch (ms)" "$((${ha:-0} - ${wa:-0}))" $((3 * P)) $((3 * P + 1500))
        ;;
    socket-cap)
        # A rank holding more sockets than the agent reads (MAX_SOCKETS in
        # watchdog/agent.c, 4096, the size of its inode table): exactly
        # 4096 are counted each period, and one CLOSE_WAIT among them
        # still makes the hang. The fds beyond 4096 are read no further.
        ulimit -n 8192 2>/dev/null || { echo "SKIP socket-cap (ulimit -n 8192 refused)"; exit 77; }
        job a "$UID_A" "period=${P}ms,idle=2,mincpu=0.02" --spin --close-wait --listen 4200
        # 4200 binds take a while on a loaded machine: job waits 1 s only.
        for _ in $(seq 1000); do [ -f "$T/a.ready" ] && break; sleep 0.01; done
        [ -f "$T/a.ready" ] || bad "the job did not open its sockets in 10 s"
        gpus "gpu 0 $PID_a"
        agent 1100
        agent_wait
        [ "$(ev period .sockets | jq -c unique)" = '[4096]' ] && ok ||
            bad "sockets counted: $(ev period .sockets | jq -c unique)"
        [ "$(ev period .close_wait | jq -c unique)" = '[1]' ] && ok ||
            bad "CLOSE_WAIT counted: $(ev period .close_wait | jq -c unique)"
        [ "$(ev hang | jq length)" = 1 ] && ok || bad "hang lines: $(ev hang)"
        ;;
    *)
        echo "unknown case $CASE"
        exit 2
        ;;
    esac
    # Whatever is left of this case's processes goes with the namespace.
    exit $((fails > 0))
fi

# ---- the runner --------------------------------------------------------------
CASES="hang-restart sigkill rewatch rewatch-same-pid exec-late busy-gpu cpu-idle sockets-moving queue-moving recover no-opt-in nvml-lost no-nvml exit-mid pid-reuse report-event e2e
spin-hang healthy-100 links-moving links-off-on ckpt-write spin-writing lost-mig lost-node-event bad-spec not-a-pod
fifo metrics-flood churn events-restart events-limit identity burst shm ras flight-recorder socket-cap kill-fallback stdin-closed ras-bad-addr realloc-fails idle-cpu
ras-text ras-moving ras-slow no-second-signal shared-gpu waiting-ranks mps flight-recorder-new fd-flood identity-starve node-budget"
[ $# -gt 0 ] && CASES="$*"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/watchdog-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# Every case ends within a minute: the namespace's init is killed (and with
# it every process of the case) when the time is up.
if unshare --kill-child --pid --fork --mount-proc true 2>/dev/null; then
    ISOLATE="timeout -s KILL 60 unshare --kill-child --pid --fork --mount-proc"
else
    ISOLATE="timeout -s KILL 60"
    echo "WARNING: unshare --pid is not permitted here: cases share /proc" \
        "with the machine, and pid-reuse is skipped"
fi
export WATCHDOG NCCLGUARD FAKE_NVML WD_JOB
pass=0
fail=0
skip=0
for c in $CASES; do
    mkdir -p "$TMP/$c"
    if [ "$ISOLATE" = "timeout -s KILL 60" ] && [ "$c" = pid-reuse ]; then
        echo "SKIP pid-reuse (needs a private PID namespace)"
        skip=$((skip + 1))
        continue
    fi
    $ISOLATE bash "$0" --case "$c" "$TMP/$c" >"$TMP/$c.out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
        pass=$((pass + 1))
        echo "ok   $c"
    elif [ "$rc" -eq 77 ]; then
        skip=$((skip + 1))
        cat "$TMP/$c.out"
    else
        fail=$((fail + 1))
        echo "FAIL $c"
        [ -n "${WD_FAILLOG:-}" ] && echo "$(date -u +%T) $c" >>"$WD_FAILLOG"
        sed 's/^/    /' "$TMP/$c.out"
        echo "    ---- agent log (last 15 lines)"
        tail -15 "$TMP/$c/agent.log" 2>/dev/null | cut -c1-400 | sed 's/^/    /'
        if [ -n "${WD_FAILFAST:-}" ]; then
            left=$(($(echo $CASES | wc -w) - pass - fail - skip))
            echo "tests/watchdog: WD_FAILFAST: stopped at $c; not run: $left"
            break
        fi
    fi
done
echo "tests/watchdog: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
