"""Holds connections open against the watchdog's metrics port, for the
watchdog's tests: argv[2] idle connections that never send a request, and
one that asks for /metrics with a tiny receive buffer and never reads the
answer. Writes argv[3] once all are connected, then sleeps until killed."""
import socket
import sys
import time

port, n, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    held.append(s)
s = socket.socket()
s.settimeout(10)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256)
s.connect(("127.0.0.1", port))
s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
held.append(s)
open(ready, "w").close()
while True:
    time.sleep(1)
