"""A stand-in for NCCL's RAS service, for the watchdog's tests.
It speaks the protocol of NCCL's own client (NVIDIA/nccl src/ras/client.cc):
"CLIENT PROTOCOL 2" is answered "SERVER PROTOCOL 2" and "TIMEOUT S" "OK".
"SET FORMAT json" is answered "OK" by 2.28.9, and by the older versions
(2.24.3, 2.26.2, 2.28.3), which have no such command, with
"ERROR: Unknown command <the line>" (the "ERROR: Unknown command %s" of
client_support.cc), after which STATUS comes in the text format.
"STATUS" is answered with the report, then the connection closes.

The reports are written here from the format strings of
src/ras/client_support.cc at each tag (rasOutAppend calls for text;
jsonWriteHeader, jsonStartCommunicator, jsonWriteRankData,
jsonWriteMissingRank for JSON). The job they describe: one communicator
(hash 0x1234) of 4 ranks; rank 3 (pid 4242 at 10.0.0.2) is missing, and
rank 1 (pid 101 at 10.0.0.1) has issued one collective fewer than ranks 0
and 2. "host" is an IP address, as RAS prints it (inet_ntop).

argv[1]: where to write the port; argv[2]: each command, one per line;
then options: version=2.24.3|2.26.2|2.28.3|2.28.9 (2.28.9), counts=still|
moving|equal (still: every STATUS the same; moving: every rank issued one
more collective at each STATUS; equal: every rank of the job there and at
the same count, which does not move: a pause between collectives), slow=SECONDS (the first STATUS is answered
that late, as RAS may answer after its timeout plus
RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC), behind=IP (rank 1, the one behind, is at
IP rather than 10.0.0.1), comms=0 (no communicator at all: a process with
no NCCL communicator, an inference server)."""
import json
import os
import socketserver
import sys
import threading
import time

OPTS = dict(a.split("=", 1) if "=" in a else (a, "1") for a in sys.argv[3:])
VERSION = OPTS.get("version", "2.28.9")
MOVING = OPTS.get("counts", "still") == "moving"
EQUAL = OPTS.get("counts", "still") == "equal"
SLOW = float(OPTS.get("slow", "0"))
BEHIND = OPTS.get("behind", "10.0.0.1")
NO_COMMS = OPTS.get("comms", "1") == "0"
JSON = VERSION == "2.28.9"
FUNCS = ["Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce",
         "SendRecv", "Send", "Recv"]
lock = threading.Lock()
statuses = [0]


def rank(r, host, pid, allreduce):
    counts = {f: 0 for f in FUNCS}
    counts["AllReduce"] = allreduce
    return {"rank": r, "host": host, "pid": pid, "cuda_dev": r % 2,
            "nvml_dev": r % 2,
            "status": {"init_state": 0, "async_error": 0,
                       "finalize_called": False, "destroy_flag": False,
                       "abort_flag": False},
            "collective_counts": counts}


def status_json(k):
    if NO_COMMS:
        return json.dumps({
            "nccl_version": VERSION, "cuda_runtime_version": 12080,
            "cuda_driver_version": 12080,
            "timestamp": "2026-01-01 00:00:00", "communicators_count": 0,
            "communicators": [],
            "ras": {"collection_time_sec": 0.01, "timeouts_count": 0}},
            indent=2)
    return json.dumps({
        "nccl_version": VERSION, "cuda_runtime_version": 12080,
        "cuda_driver_version": 12080, "timestamp": "2026-01-01 00:00:00",
        "communicators_count": 1,
        "communicators": [{
            "hash": "0x1234", "secondary_hash": "0xab:0xcd", "size": 4,
            "ranks_count": 4 if EQUAL else 3,
            "missing_ranks_count": 0 if EQUAL else 1,
            "ranks": [rank(0, "10.0.0.1", 100, 42 + k),
                      rank(1, BEHIND, 101, 42 if EQUAL else 41 + k),
                      rank(2, "10.0.0.2", 4241, 42 + k)] +
                     ([rank(3, "10.0.0.2", 4242, 42)] if EQUAL else []),
            "missing_ranks": [] if EQUAL else [
                {"rank": 3, "host": "10.0.0.2", "pid": 4242,
                 "cuda_dev": 1, "nvml_dev": 1,
                 "status": {"unresponsive": True,
                            "considered_dead": False}}]}],
        "ras": {"collection_time_sec": 0.012, "timeouts_count": 1}},
        indent=2)


def status_text(k):
    # Line by line the rasOutAppend format strings of client_support.cc.
    return (
        "NCCL version %s+cuda12.8 compiled with CUDA 12.8\n"
        "CUDA runtime version 12080, driver version 12080\n\n"
        "Job summary\n===========\n\n"
        "  Nodes  Processes         GPUs  Processes     GPUs\n"
        "(total)   per node  per process    (total)  (total)\n"
        "%7d  %9d  %11d  %9d  %7d\n"
        "\nGathering data about the RAS network (timeout 1s)..."
        " obtained a result in 0.01s\n"
        " Warning: missing data from 1 process (received from 3, expected 4)\n"
        "  The missing process:\n"
        "  Process 4242 on node 10.0.0.2 managing GPU 1\n"
        " Collected data about 6 unidirectional connections\n"
        " Travel times (valid only if system clocks are synchronized between"
        " nodes):\n  Minimum 0.000010s, maximum 0.000100s, average 0.000050s\n"
        "\nGathering data about the NCCL communicators (timeout 1s)..."
        " (0.02s)\n=============\n\n"
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status"
        "  Errors\n"
        "    #  in group  per comm  per node  per comm  in group\n"
        "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s\n"
        "\nErrors\n======\n\n"
        "INCOMPLETE\n  Missing communicator data from 1 job process\n"
        "  Process 4242 on node 10.0.0.2 managing GPU 1\n\n"
        "#0-0 (0000000000001234) INCOMPLETE\n"
        "  Missing communicator data from 1 rank\n"
        "  The missing rank: 3\n\n"
        "Warnings\n========\n\n"
        "#0-0 (0000000000001234) MISMATCH\n"
        "  Communicator ranks have different collective operation counts\n"
        "  2 ranks have launched up to operation %d\n"
        "  Rank 1 has launched up to operation %d -- GPU 1 managed by"
        " process 101 on node %s\n\n"
    ) % (VERSION, 2, 2, 1, 4, 4, 0, 1, 2, "1-2", 4, 3, "RUNNING",
         "INCOMPLETE,MISMATCH", 42 + k, 41 + k, BEHIND)


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            line = raw.decode().strip()
            with open(sys.argv[2], "a") as f:
                f.write(line + "\n")
            if line.startswith("CLIENT PROTOCOL "):
                self.wfile.write(b"SERVER PROTOCOL 2\n")
            elif line.startswith("TIMEOUT "):
                self.wfile.write(b"OK\n")
            elif line.lower() == "set format json" and JSON:
                self.wfile.write(b"OK\n")
            elif line.upper() in ("STATUS", "VERBOSE STATUS"):
                with lock:
                    n = statuses[0]
                    statuses[0] += 1
                if n == 0 and SLOW > 0:
                    time.sleep(SLOW)
                k = n if MOVING else 0
                out = status_json(k) if JSON else status_text(k)
                self.wfile.write(out.encode())
                return
            else:
                self.wfile.write(("ERROR: Unknown command %s\n" % line).encode())


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True


srv = Server(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
