#!/usr/bin/env python3
"""Writes the seed corpora of the node-side fuzz targets (ras, nccllog,
rcproto, rendezvous, nodeclass, nodeloop) under tests/fuzz/corpus/. The
inputs follow the formats the tests of each module use: RAS STATUS as
tests/watchdog/fake_ras.py writes it, NCCL 2.28 INFO lines as in
tests/unit/test_rcnccllog.c, worker events as in tests/unit/test_rcproto.c,
rendezvous frames as ringcheck/rendezvous.h lays them out, termination
messages as ringcheck/report.c report_verdict writes them, and watch events
as tests/nodeloop/fake_kube.py sends them. Run from the repository root;
the files are checked in, so this only needs rerunning to change them."""
import json
import os
import struct

ROOT = "tests/fuzz/corpus"


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- ras -----------------------------------------------------------------
FUNCS = ["Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce",
         "SendRecv", "Send", "Recv"]


def rank(r, host, pid, allreduce):
    counts = {f: 0 for f in FUNCS}
    counts["AllReduce"] = allreduce
    return {"rank": r, "host": host, "pid": pid, "cuda_dev": r % 2,
            "nvml_dev": r % 2,
            "status": {"init_state": 0, "async_error": 0,
                       "finalize_called": False, "destroy_flag": False,
                       "abort_flag": False},
            "collective_counts": counts}


def status(comms):
    return {"nccl_version": "2.28.3", "cuda_runtime_version": 12080,
            "cuda_driver_version": 12080,
            "timestamp": "2026-01-01 00:00:00",
            "communicators_count": len(comms), "communicators": comms,
            "ras": {"collection_time_sec": 0.012, "timeouts_count": 1}}


def comm(ranks, missing, size=None):
    return {"hash": "0x1234", "secondary_hash": "0xab:0xcd",
            "size": size or len(ranks) + len(missing),
            "ranks_count": len(ranks), "missing_ranks_count": len(missing),
            "ranks": ranks, "missing_ranks": missing}


def missing(r, host, pid, unresp=True, dead=False):
    return {"rank": r, "host": host, "pid": pid, "cuda_dev": 1, "nvml_dev": 1,
            "status": {"unresponsive": unresp, "considered_dead": dead}}


put("ras", "fake-ras", json.dumps(status([comm(
    [rank(0, "node-a", 100, 42), rank(1, "node-a", 101, 41),
     rank(2, "node-b", 4241, 42)], [missing(3, "node-b", 4242)])]), indent=2))
put("ras", "healthy", json.dumps(status([comm(
    [rank(i, "node-a", 100 + i, 7) for i in range(4)], [])])))
put("ras", "two-comms", json.dumps(status([
    comm([rank(0, "a", 10, 42), rank(1, "a", 11, 41)],
         [missing(3, "b", 13, True, False)]),
    comm([rank(0, "a", 10, 7), rank(1, "b", 12, 7)], [])])))
put("ras", "many-missing", json.dumps(status([comm(
    [rank(0, "a", 1, 5)],
    [missing(i, "h%d" % i, 100 + i, i % 2 == 0, i % 3 == 0)
     for i in range(1, 13)])])))
put("ras", "many-behind", json.dumps(status([comm(
    [rank(i, "n%d" % i, i, 100 - i) for i in range(12)], [])])))
put("ras", "dead", json.dumps(status([comm(
    [rank(0, "a", 1, 3)], [missing(1, "b", 2, False, True)])])))
put("ras", "odd-types", json.dumps({"communicators": [
    {"ranks": [{"rank": "0", "host": 5, "collective_counts": {"AllReduce":
                                                              -4}},
               {"rank": 2147483648, "pid": -1, "collective_counts": []},
               {"collective_counts": {"a": 9223372036854775807,
                                      "b": 9223372036854775807}}],
     "missing_ranks": {"rank": 1}},
    {"ranks": "x", "missing_ranks": [{"host": "h" * 200}, 3, None]},
    7, None, []]}))
put("ras", "long-host", json.dumps(status([comm(
    [rank(0, "x" * 100, 1, 2), rank(1, "\u00e9" * 40, 2, 1)], [])])))
put("ras", "empty-comms", '{"communicators": []}')
put("ras", "no-comms", '{"nccl_version": "2.23"}')
put("ras", "comms-number", '{"communicators": 3}')
put("ras", "array", "[]")
put("ras", "not-json", "not json")
put("ras", "truncated", json.dumps(status([comm(
    [rank(0, "a", 1, 2)], [])]))[:120])
put("ras", "deep", '{"communicators": [' + "[" * 300 + "]" * 300 + "]}")
put("ras", "empty", "")

# --- nccllog ---------------------------------------------------------------
P = "node-a:100:101 [0] NCCL INFO "
put("nccllog", "p2p-ring", "\n".join([
    P + "comm 0x5555 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 "
        "MNNVL 0",
    P + "Channel 00/02 : 0 1",
    P + "Ring 00 : 1 -> 0 -> 1",
    "node-a:100:102 [1] NCCL INFO Ring 00 : 0 -> 1 -> 0",
    P + "Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1",
    P + "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
    P + "Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM",
    "node-a:100:102 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM",
    P + "NVLS multicast support is not available on dev 0 (NVLS_NCHANNELS "
        "0)",
    "node-a:100:101 [0] enqueue.cc:1412 NCCL WARN Cuda failure"]) + "\n")
put("nccllog", "socket-fallback", "\n".join([
    P + "NET/Socket : Using [0]eth0:10.0.0.2<0> [1]eth1:10.1.0.2<0>",
    P + "Using network Socket",
    P + "Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0",
    P + "Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0",
    P + "Channel 01 : 0[0] -> 1[1] via SHM/direct/direct"]) + "\n")
put("nccllog", "inter-gdr", "#lo=2 n=2\n" + "\n".join([
    P + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB "
        "eth0:10.0.0.2<0>",
    P + "Channel 00/0 : 2[0] -> 3[1] via P2P/IPC",
    P + "Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0/GDRDMA",
    P + "Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA",
    P + "Channel 01/0 : 3[1] -> 0[0] [send] via NET/IB/1(2)/GDRDMA(PCI)",
    P + "Connected NVLS tree",
    P + "CollNet 00/0 : 2 [send] via COLLNET/SHARP/0/GDRDMA"]) + "\n")
put("nccllog", "inter-nogdr", "#lo=2 n=2\n" + "\n".join([
    P + "Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0",
    P + "Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA"]) + "\n")
put("nccllog", "plugin", "#lo=0 n=4\n" + "\n".join([
    P + "Using network AWS Libfabric",
    P + "Channel 00/0 : 0[0] -> 4[0] [send] via NET/AWS Libfabric/0",
    P + "Channel 00/0 : 1[1] -> 2[2] via P2P/direct pointer",
    P + "Channel 00/0 : 2[2] -> 3[3] via P2P/indirect/1[1]",
    P + "NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 16)",
    P + "NVLS comm 0x55 headRank 0 nHeads 4 buffSize 1048576",
    P + "Connected CollNet"]) + "\n")
put("nccllog", "eight-ring", "#lo=0 n=8\n" + "".join(
    P + "Ring 00 : %d -> %d -> %d\n" % ((i - 1) % 8, i, (i + 1) % 8)
    for i in range(8)) + "".join(
    P + "Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM\n" %
    (c, i, i, (i + 1) % 8, (i + 1) % 8) for c in range(4) for i in range(8)))
put("nccllog", "ring-loop", "#lo=0 n=4\n" + P + "Ring 00 : 3 -> 0 -> 1\n" +
    P + "Ring 00 : 0 -> 1 -> 1\n" + P + "Ring 00 : 1 -> 2 -> 9\n" +
    P + "Ring 00 : 1 -> 3 -> -5\n")
put("nccllog", "odd-numbers", "\n".join([
    P + "Channel 99999999999/0 : 0[0] -> 1[1] via P2P/CUMEM",
    P + "Channel -3/0 : 0[0] -> 1[1] via P2P/CUMEM",
    P + "Channel 1024/0 : -2147483648[0] -> 2147483647[1] via SHM/x/y",
    P + "Channel 02 : 0[0] -> 0[0] via NET/Socket/0",
    P + "Ring 00 : 0 -> 2147483647 -> -2147483648"]) + "\n")
put("nccllog", "long-names", "\n".join([
    P + "NET/Socket : Using [0]" + "e" * 100 + ":10.0.0.1<0>",
    P + "NET/IB : Using [0]" + "m" * 100 + ":1/IB",
    P + "Using network " + "n" * 100,
    P + "Trees " + "[0] 1/-1/-1->0->-1 " * 20,
    P + "Channel 00/0 : 0[0] -> 1[1] via P2P/" + "k" * 60]) + "\n")
put("nccllog", "control-chars", (P + "Trees [0] \"quote\" \\ \x01\x1f\x7f"
                                 "\n" + P + "Using network \"x\\\n").encode()
    + (P + "Trees \xc3\xa9\xe2\x82\xac\n").encode("latin-1"))
put("nccllog", "utf8-cut", "#lo=0 n=2\n" + P + "Trees " + "\u00e9" * 80 +
    "\n" + P + "Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0\n" + P +
    "NET/Socket : Using [0]" + "\u00e9" * 20 + ":1<0>\n")
put("nccllog", "not-info", "plain output line\nnode:1:2 [0] NCCL WARN x\n"
    "NCCL INFO\nNCCL INFO \n")
put("nccllog", "long-line", P + "Trees " + "x" * 3000 + "\n" + P +
    "Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n")
put("nccllog", "no-newline", P + "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC")
put("nccllog", "nul-inside", (P + "Channel 00/0 : 0[0] -> 1[1] via "
                              "P2P/IPC\x00 via NET/Socket/0\n").encode())

# --- rcproto ---------------------------------------------------------------
put("rcproto", "device-phase",
    "P b 0\nV 22803 12080 12080\nN 2\n"
    "G 0 81559 00000000:18:00.0 GPU-1234abcd NVIDIA H100 80GB HBM3\n"
    "G 1 81559 00000000:2a:00.0 GPU-5678ef01 NVIDIA H100 80GB HBM3\n"
    "F 0 80000\nF 1 80000\nC 0 9 0\nC 1 9 0\nT 0 1 1 0 1\nT 1 0 1 0 1\n"
    "P e 0\nX\n")
put("rcproto", "ring-phase",
    "P b 3\nU " + "0123456789abcdef" * 16 + "\n"
    "R 0 allreduce float 4194304 1048576 -1 812.5 0 -1\n"
    "R 1 broadcast int8 1024 1024 0 12.0 3 17\n"
    "B 0 67108864 20 31250.0 0 -1\nP e 3\nX\n")
put("rcproto", "failure",
    "I worker 0 starting\nS 0 0 ncclAllReduce\nS -1 1 cudaSetDevice\nA\n"
    "E 3 4 0,1 ncclCommInitRank: unhandled system error\n"
    "E 4 3 - the whole worker timed out\n")
put("rcproto", "malformed",
    "P x 1\nP b\nV 1 2\nN\nG 0\nF 1\nC 1 2\nT 1 2 3 4\nU XYZ\nR 0 a b\n"
    "B 1\nS\nA extra\nX extra\nE 1\nI\nIx\nZ 1\n\n \n")
put("rcproto", "numbers",
    "N -2147483649\nN 99999999999999999999\nF 0 18446744073709551616\n"
    "R 0 op type -1 -1 0 nan 0 0\nR 0 op type 1 1 0 -inf 1 1\n"
    "B 0 1 1 1e308 9223372036854775807 -9223372036854775808\n"
    "R 0 op type 1 1 0 1e300 0 0\n")
put("rcproto", "cut-fields",
    "G 0 1 " + "b" * 40 + " " + "u" * 50 + " " + "n" * 100 + "\n"
    "R 0 " + "o" * 30 + " " + "t" * 20 + " 1 1 0 1.0 0 -1\n"
    "E 1 2 " + "r" * 120 + " " + "m" * 900 + "\n"
    "S 0 0 " + "w" * 100 + "\n" "S 0 0   spaced\tand\ttabs\r\n")
put("rcproto", "long-info", "I " + "i" * 1500 + "\nX\n")
put("rcproto", "longer-than-buffer", "I " + "a" * 5000 + "\nX\n")
put("rcproto", "no-newline", "P b 1\nX")
# More than one proto_buf of ordinary lines at once (a busy supervisor).
put("rcproto", "burst", "P b 4\n" + "".join(
    "R %d allreduce float 4194304 1048576 -1 812.5 0 -1\n" % (i % 8)
    for i in range(120)) + "P e 4\nX\n")
put("rcproto", "uid-max", "U " + "f" * 256 + "\nU " + "f" * 257 + "\n")

# --- rendezvous ------------------------------------------------------------


def frame(typ, payload, version=2, pad=0):
    return b"NCGR" + struct.pack(">BBHI", version, typ, pad,
                                 len(payload)) + payload


def s(text):
    b = text.encode()
    return struct.pack(">H", len(b)) + b


def u32(v):
    return struct.pack(">I", v & 0xffffffff)


def hello(job="default/train", rank=1, ngpus=8, code=0, host="node-b",
          iface="eth0", addr="10.0.0.2", transport="NET/IB", cure="",
          proof=bytes(32)):
    return frame(1, s(job) + u32(rank) + u32(ngpus) + u32(code) + s(host) +
                 s(iface) + s(addr) + s(transport) + s(cure) + proof)


CHAL = frame(6, bytes(range(16)) + u32(120000))
RUN = frame(3, u32(1) + u32(16) + u32(8) + u32(10000) + u32(60000) +
            s("NCCL_P2P_DISABLE=1") + bytes(range(128)))
RESULT = frame(4, u32(1) + u32(0) + u32(180000) + u32(0) + s("ring passed"))
VERDICT = frame(5, u32(0) + s("pass") + s("") + s("") + s("all 2 nodes"))
REJECT = frame(2, s('job id "other" is not this job\'s'))
put("rendezvous", "hello", hello())
put("rendezvous", "hello-proof", hello(proof=bytes(range(32)),
                                        cure="NCCL_IB_DISABLE=1", code=3))
put("rendezvous", "hello-max", hello(job="j" * 128, host="h" * 64,
                                      iface="i" * 32, addr="a" * 47,
                                      transport="t" * 32, cure="c" * 48))
put("rendezvous", "hello-too-long", hello(job="j" * 129))
put("rendezvous", "hello-ctrl", hello(host="bad\x01host"))
put("rendezvous", "hello-high", hello(host="h\u00e9"))
put("rendezvous", "hello-short", hello()[:40])
put("rendezvous", "hello-extra", frame(1, hello()[12:] + b"x"))
put("rendezvous", "challenge-hello", CHAL + hello())
put("rendezvous", "leader-flow", CHAL + RUN + VERDICT)
put("rendezvous", "follower-flow", hello() + RESULT + RESULT)
put("rendezvous", "reject", REJECT)
put("rendezvous", "empty-payloads", b"".join(frame(t, b"")
                                             for t in range(1, 7)))
put("rendezvous", "bad-magic", b"NCGX" + hello()[4:])
put("rendezvous", "bad-version", frame(1, hello()[12:], version=1))
put("rendezvous", "bad-type", frame(9, b""))
put("rendezvous", "bad-pad", frame(1, hello()[12:], pad=1))
put("rendezvous", "too-long", b"NCGR" + struct.pack(">BBHI", 2, 1, 0, 2049))
put("rendezvous", "max-payload", frame(2, struct.pack(">H", 2046) +
                                       b"r" * 2046))
put("rendezvous", "http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
put("rendezvous", "header-only", b"NCGR\x02\x01\x00\x00")

# --- nodeclass -------------------------------------------------------------
NC = "nccl: 2.28.3 (CUDA runtime 12.8, driver 12.8)\n"
TR = ("nccl transport: intra P2P/CUMEM (4 channel lines); 2 channels; "
      "ring 0: 0 1; NVLS no; CollNet no\n")


def fail(code, name, phase, pname, what, extra="", head="", word="FAILED"):
    return (head + "ncclguard-ringcheck %s: %s (exit %d) in phase %d (%s)\n"
            % (word, name, code, phase, pname) + "what: " + what + "\n" +
            NC + extra)


put("nodeclass", "pass", "0ncclguard-ringcheck passed: 2 GPUs, mode process, "
    "busbw 180.25 GB/s at 1048576 B; NCCL 2.28.3, CUDA runtime 12.8, "
    "driver 12.8\n" + TR)
put("nodeclass", "pass-nonzero-exit", "1ncclguard-ringcheck passed: 2 GPUs")
put("nodeclass", "p2p-fallback", "0" + fail(
    3, "nccl-error", 4, "ring", "the ring hangs between GPUs 1 and 2",
    "diagnosis: passes with NCCL_P2P_DISABLE=1\n",
    head="ncclguard-ringcheck: FALLBACK: the pod starts with "
         "NCCL_P2P_DISABLE=1 (written to /etc/nccl.conf)\n",
    word="check failed"))
put("nodeclass", "p2p-fail", "3" + fail(
    3, "nccl-error", 4, "ring", "ncclAllReduce failed",
    "diagnosis: passes with NCCL_P2P_DISABLE=1\nfix: set NCCL_P2P_DISABLE=1"
    "\n"))
put("nodeclass", "p2p-warn", "0" + fail(
    4, "timeout", 4, "ring", "hung", "diagnosis: passes with "
    "NCCL_P2P_DISABLE=1\n",
    head="ncclguard-ringcheck: WARNING (the pod starts anyway)\n",
    word="check failed"))
put("nodeclass", "wrong", "7" + fail(7, "wrong-results", 4, "ring",
                                     "rank 1 returned wrong values"))
put("nodeclass", "pair-hang", "4" + fail(
    4, "timeout", 4, "ring", "hung", "diagnosis: no setting helps; failing "
    "pair GPU 1 - GPU 3\n"))
put("nodeclass", "ifname", "3" + fail(3, "nccl-error", 0, "preflight",
                                      "NCCL_SOCKET_IFNAME=net9 names no "
                                      "interface"))
put("nodeclass", "nodev", "9" + fail(9, "no-gpu", 0, "preflight",
                                     "no usable GPU or driver"))
put("nodeclass", "mismatch", "9" + fail(9, "no-gpu", 0, "preflight",
                                        "GPU count mismatch: 2 visible, 4 "
                                        "expected"))
put("nodeclass", "dup", "9" + fail(9, "no-gpu", 0, "preflight",
                                   "duplicate devices 0 and 1"))
put("nodeclass", "shm", "9" + fail(9, "no-gpu", 0, "preflight",
                                   "/dev/shm too small for NCCL_BUFFSIZE"))
put("nodeclass", "slow", "8" + fail(8, "slow", 5, "bandwidth",
                                    "bus bandwidth 0.50 GB/s below 5.00"))
put("nodeclass", "crash", "3" + fail(3, "nccl-error", 3, "init",
                                     "worker 0 died of signal 11"))
put("nodeclass", "unreaped", "4" + fail(4, "timeout", 3, "init",
                                        "worker 1 not reaped (D state)"))
put("nodeclass", "signal", "4" + fail(4, "timeout", 3, "init",
                                      "stopped by signal 15"))
put("nodeclass", "cross-node", "3" + fail(
    3, "nccl-error", 7, "cross-node", "the cross-node ring failed",
    "cross-node diagnosis: failing pairs: node-a - node-c\n"))
put("nodeclass", "cross-node-peer", "3" + fail(
    3, "nccl-error", 7, "cross-node", "node 2 never joined"))
put("nodeclass", "cannot-run", "0ncclguard-ringcheck: WARNING: the check "
    "cannot run here (the pod starts anyway; this node was not judged)\n" +
    fail(9, "no-gpu", 0, "preflight", "no usable GPU or driver",
         word="check failed") + "cannot run: no driver\n")
put("nodeclass", "usage", "6")
put("nodeclass", "killed", "\x89")
put("nodeclass", "hang-report", "0ncclguard-watchdog: NCCLHang: 2/2 GPUs "
    "idle 5x60s, CPU 1.0 cores, 1 sockets CLOSE_WAIT, 0 queues stuck; no "
    "checkpoint configured; SIGTERM now\npod ml/t uid u\n")
put("nodeclass", "utf8-what", "3" + fail(3, "nccl-error", 4, "ring",
                                         "x" + "\u00e9" * 150))
put("nodeclass", "utf8-cure", "0ncclguard-ringcheck: FALLBACK: the pod "
    "starts with NCCL_" + "\u00e9" * 30 + "\n" +
    fail(3, "nccl-error", 4, "ring", "y", word="check failed"))
put("nodeclass", "numbers", "3ncclguard-ringcheck FAILED: x (exit 99999) in "
    "phase 99999 (z)\n")
put("nodeclass", "long", "3" + fail(3, "nccl-error", 4, "ring", "w" * 5000))

# --- nodeloop --------------------------------------------------------------


def nc(name):
    """A termination message of the nodeclass seeds: (exit code, text)."""
    with open(os.path.join(ROOT, "nodeclass", name), "rb") as f:
        raw = f.read()
    c = raw[0]
    code = c - 48 if 48 <= c <= 57 else (c if c < 128 else c - 256)
    return code, raw[1:].decode("utf-8", "replace")


def pod(name, msg, restarts=0, last=None, phase="Pending", ns="ml",
        node="gpu-1", labels=None, main=None, gpus="4"):
    code, text = nc(msg)
    st = {"name": "ncclguard-ringcheck", "restartCount": restarts,
          "ready": False,
          "state": {"terminated": {
              "exitCode": code, "reason": "Error", "message": text,
              "startedAt": "2026-12-01T21:40:25Z",
              "finishedAt": "2026-12-01T21:40:29Z"}},
          "lastState": {}}
    if last is not None:
        lcode, ltext = nc(last)
        st["lastState"] = {"terminated": {
            "exitCode": lcode, "reason": "Error", "message": ltext,
            "finishedAt": "2026-12-01T21:39:00.123456Z"}}
    status = {"phase": phase, "initContainerStatuses": [st]}
    if main is not None:
        mcode, mtext = nc(main)
        status["containerStatuses"] = [{
            "name": "train", "restartCount": 0,
            "state": {"terminated": {"exitCode": 143, "message": mtext,
                                     "finishedAt": "2026-12-01T22:00:00Z"}}}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns,
                         "uid": "uid-" + name, "resourceVersion": "12",
                         "labels": labels or {}},
            "spec": {"nodeName": node,
                     "initContainers": [{
                         "name": "ncclguard-ringcheck", "image": "rc",
                         "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
                     "containers": [{
                         "name": "train", "image": "t",
                         "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
            "status": status}


def ev(typ, obj):
    return json.dumps({"type": typ, "object": obj}) + "\n"


BOOKMARK = ev("BOOKMARK", {"kind": "Pod", "apiVersion": "v1",
                           "metadata": {"resourceVersion": "40"}})
GONE = ev("ERROR", {"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "message": "too old resource "
                    "version: 1 (5)", "reason": "Expired", "code": 410})
put("nodeloop", "pass", ev("ADDED", pod("p1", "pass", phase="Running")))
put("nodeloop", "two-node-verdicts", ev("ADDED", pod("a", "p2p-fail")) +
    ev("MODIFIED", pod("b", "wrong")) + BOOKMARK)
put("nodeloop", "quarantine", "Q\n" + ev("ADDED", pod("a", "nodev")) +
    ev("ADDED", pod("b", "mismatch", restarts=1, last="dup")) +
    ev("DELETED", pod("a", "nodev")))
put("nodeloop", "restarts", ev("MODIFIED", pod("r", "p2p-fallback",
                                                restarts=2, last="p2p-warn")))
put("nodeloop", "job-class", ev("ADDED", pod("j", "ifname")) +
    ev("ADDED", pod("k", "usage")) + ev("ADDED", pod("l", "killed")))
put("nodeloop", "hang-main", ev("MODIFIED", pod("h", "pass", phase="Failed",
                                                 main="hang-report")))
put("nodeloop", "cross-node", ev("ADDED", pod("x", "cross-node")) +
    ev("ADDED", pod("y", "cross-node-peer")))
put("nodeloop", "utf8", ev("ADDED", pod("u", "utf8-what")) +
    ev("ADDED", pod("v", "utf8-cure")))
put("nodeloop", "gone", ev("ADDED", pod("a", "nodev")) + GONE)
put("nodeloop", "list", "L " + json.dumps({
    "kind": "PodList", "apiVersion": "v1",
    "metadata": {"resourceVersion": "33", "continue": "abc"},
    "items": [pod("l1", "pass", phase="Succeeded"), pod("l2", "slow"),
              pod("l3", "pair-hang")]}) + "\n" + BOOKMARK)
put("nodeloop", "node-tainted", "N " + json.dumps({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "gpu-1", "uid": "u", "resourceVersion": "9",
                 "annotations": {"other": "x"}},
    "spec": {"taints": [{"key": "ncclguard.io/nccl-unhealthy",
                         "value": "node", "effect": "NoSchedule"}]},
    "status": {"allocatable": {"nvidia.com/gpu": 8},
               "conditions": [{"type": "NCCLHealthy", "status": "False",
                               "lastTransitionTime":
                               "2026-12-01T00:00:00Z"}]}}) + "\n" +
    "C " + json.dumps({"items": [
        {"metadata": {"name": "gpu-%d" % i},
         "spec": {"taints": [{"key": "ncclguard.io/nccl-unhealthy"}]}}
        for i in range(1, 5)]}) + "\nQ\n" + ev("ADDED", pod("t", "wrong")))
STATE = {"v": 1, "state": "quarantined", "class": "node",
         "since": 1764625225000, "quarantinedAt": 1764625225000,
         "nextCheck": 1, "fails": 0, "validation": "",
         "evidence": [{"key": "uid-a/ncclguard-ringcheck/0", "pod": "ml/a",
                       "class": "node", "reason": "P2PBroken",
                       "at": 1764625225000}]}
put("nodeloop", "state-validation", "Q\nS " + json.dumps(STATE) + "\n" +
    BOOKMARK + ev("MODIFIED", pod(
        "ncclguard-validate-gpu-1-1", "pass", ns="ncclguard-watchdog",
        phase="Succeeded",
        labels={"ncclguard.io/validation-for": "gpu-1"})))
put("nodeloop", "state-bad", "S " + json.dumps(dict(STATE, fails=5000)) +
    "\nS {\"v\":1}\nS [1]\nS " + json.dumps(dict(
        STATE, evidence=[STATE["evidence"][0]] * 40)) + "\n")
put("nodeloop", "gpu-counts", ev("ADDED", pod("g", "nodev", gpus="99999")) +
    ev("ADDED", pod("h", "nodev", gpus="-3")) +
    ev("ADDED", pod("i", "nodev", gpus="2x")))
put("nodeloop", "odd-events", "\n{}\n[]\n{\"type\":1}\n{\"type\":\"ADDED\"}\n"
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"n\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"code\":500}}\nnot json\n")
# GPU counts as JSON numbers, two INT_MAX containers per pod: the sum
# overflowed an int before the counts were bounded.
BIG = {"limits": {"nvidia.com/gpu": 2147483647}}
put("nodeloop", "gpu-overflow", "".join(ev("ADDED", {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": n, "namespace": "ml", "uid": "uid-" + n},
    "spec": {"containers": [{"name": "a", "resources": BIG},
                            {"name": "b", "resources": BIG}]},
    "status": {"phase": "Running"}}) for n in ("o", "o2")))
# A Node without a resourceVersion: node_get failed and leaked it.
put("nodeloop", "node-no-rv", "N " + json.dumps({
    "apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"},
    "spec": {"taints": [{"key": "nvidia.com/gpu"}]},
    "status": {"allocatable": {"nvidia.com/gpu": "8"}}}) + "\n" + BOOKMARK)
