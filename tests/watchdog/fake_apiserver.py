"""A stand-in for the Kubernetes API server's Event endpoint, for the
watchdog's tests: it binds 127.0.0.1 on a free port, writes the port to
argv[1], and for each POST appends {path, auth, body} as one JSON line to
argv[2], answering 201 Created like the real server. With argv[3], a
GET of /api/v1/pods answers that file's content (a PodList), as the real
server answers a list, and each GET's path is appended to argv[2] + ".get"."""
import http.server
import json
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        rec = {"path": self.path,
               "auth": self.headers.get("Authorization", ""),
               "content_type": self.headers.get("Content-Type", ""),
               "body": json.loads(body)}
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps(rec) + "\n")
        out = json.dumps(rec["body"]).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self):
        with open(sys.argv[2] + ".get", "a") as f:
            f.write(self.path + "\n")
        if len(sys.argv) < 4 or not self.path.startswith("/api/v1/pods"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(sys.argv[3], "rb") as f:
            out = f.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
