"""A stand-in for NCCL's RAS service (NCCL 2.24+), for the watchdog's tests.
It speaks the protocol of NCCL's own client (NVIDIA/nccl src/ras/client.cc):
"CLIENT PROTOCOL 2" is answered "SERVER PROTOCOL 2", "TIMEOUT S" and
"SET FORMAT json" are answered "OK", and "STATUS" is answered with a JSON
document laid out as src/ras/client_support.cc writes it (jsonWriteHeader,
jsonStartCommunicator, jsonWriteRankData, jsonWriteMissingRank,
jsonWriteFooter), then the connection closes. The job it describes: one
communicator of 4 ranks; rank 3 on node-b is missing (unresponsive) and
rank 1 on node-a has completed one collective fewer than ranks 0 and 2.
argv[1]: where to write the port; argv[2]: each command, one per line."""
import json
import socketserver
import sys

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


STATUS = {
    "nccl_version": "2.28.3", "cuda_runtime_version": 12080,
    "cuda_driver_version": 12080, "timestamp": "2026-01-01 00:00:00",
    "communicators_count": 1,
    "communicators": [{
        "hash": "0x1234", "secondary_hash": "0xab:0xcd", "size": 4,
        "ranks_count": 3, "missing_ranks_count": 1,
        "ranks": [rank(0, "node-a", 100, 42), rank(1, "node-a", 101, 41),
                  rank(2, "node-b", 4241, 42)],
        "missing_ranks": [{"rank": 3, "host": "node-b", "pid": 4242,
                           "cuda_dev": 1, "nvml_dev": 1,
                           "status": {"unresponsive": True,
                                      "considered_dead": False}}]}],
    "ras": {"collection_time_sec": 0.012, "timeouts_count": 1}}


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            line = raw.decode().strip()
            with open(sys.argv[2], "a") as f:
                f.write(line + "\n")
            if line.startswith("CLIENT PROTOCOL "):
                self.wfile.write(b"SERVER PROTOCOL 2\n")
            elif line.startswith("TIMEOUT ") or line == "SET FORMAT json":
                self.wfile.write(b"OK\n")
            elif line in ("STATUS", "VERBOSE STATUS"):
                self.wfile.write(json.dumps(STATUS, indent=2).encode())
                return
            else:
                self.wfile.write(b"ERROR unknown command\n")
                return


srv = socketserver.TCPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
