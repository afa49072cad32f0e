"""A stand-in for the Kubernetes API server, for the node loop's tests.

It speaks the wire format the node loop uses, as the Kubernetes API
reference and "API Concepts" (kubernetes.io/docs/reference/using-api/
api-concepts/) describe it:

- GET /api/v1/pods?fieldSelector=spec.nodeName=N[&limit&continue]: a PodList
  with metadata.resourceVersion and, past `limit`, metadata.continue;
- the same with watch=1&resourceVersion=R: a chunked stream of one JSON
  object per line, {"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR,
  "object": ...}; events after R, then live ones; BOOKMARK events carrying
  only metadata.resourceVersion when allowWatchBookmarks=true; a
  resourceVersion older than the compaction mark gets an ERROR event with a
  Status of code 410 (reason Expired) and the stream ends, as the real
  server does after etcd compaction; timeoutSeconds ends the stream;
- GET /api/v1/nodes/N and GET /api/v1/nodes?labelSelector=k=v;
- PATCH /api/v1/nodes/N (the object: status changes are dropped) and
  PATCH /api/v1/nodes/N/status (the status subresource: only status
  changes are kept), with application/json-patch+json,
  application/merge-patch+json or application/strategic-merge-patch+json.
  Each patch is applied here (RFC 6902, RFC 7386, and strategic merge with
  the Node schema's merge keys: conditions merge by type, taints are
  replaced); run.sh applies every recorded patch again with `kubectl patch
  --local` and checks that both agree. A failed JSON-patch test answers
  422, as the real server does;
- POST /api/v1/namespaces/NS/events (409 AlreadyExists for a name it
  has), POST and DELETE /api/v1/namespaces/NS/pods;
- GET /api/v1/namespaces/NS/events?fieldSelector=... and GET
  /api/v1/namespaces/NS/pods?fieldSelector=metadata.name=X: an EventList or
  PodList of the matches. A field selector is terms "field=value" joined by
  commas, all of which must hold; the fields are the ones the API server
  lets a client select Events by (AddFieldLabelConversionsForEvent in
  kubernetes pkg/apis/core/v1/conversion.go: involvedObject.kind,
  involvedObject.name, reason, type, ...) and, for pods, metadata.name and
  spec.nodeName; another field answers 400, as the real server does.

Control endpoints for the test script, under /fake/: POST /fake/pod (create
or replace a pod: ADDED or MODIFIED), POST /fake/node (store a Node),
POST /fake/drop (cut every open watch mid-stream, without the final chunk,
hold new watches for `hold` seconds, then cut the next one after half a
chunk), POST /fake/garble {path, count} (the next count GETs of path answer
200 with an HTML page, as a proxy might), POST /fake/compact (every older
resourceVersion is gone: 410), GET /fake/state (nodes, pods, events,
patches, request counts).

argv[1]: a file to write the port to; argv[2]: a log of every patch (one
JSON line each: path, type, patch, before, after).
"""
import copy
import http.server
import json
import os
import sys
import threading
import time
import urllib.parse
import uuid

LOCK = threading.Condition()
STATE = {
    "rv": 100,
    "compacted": 0,
    "nodes": {},
    "pods": {},
    "events": {},
    "history": [],  # (rv, type, pod)
    "patches": [],
    "lists": 0,
    "watches": 0,
    "drop_gen": 0,
    "hold_until": 0.0,
    "garble": {},  # path -> GETs left that answer 200 with a non-JSON body
}
PAGE = int(os.environ.get("FAKE_PAGE", "500"))
# A bookmark a minute, as the real watch cache sends them
# (defaultBookmarkFrequency in k8s.io/apiserver pkg/storage/cacher/cacher.go):
# nothing the node loop does may depend on more watch traffic than that.
BOOKMARK_S = float(os.environ.get("FAKE_BOOKMARK_S", "60"))
PATCH_LOG = sys.argv[2]


def bump():
    STATE["rv"] += 1
    return str(STATE["rv"])


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason,
            "code": code}


def pointer(path):
    """RFC 6901: "/a/b~1c" -> ["a", "b/c"]."""
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError("bad JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~")
            for p in path[1:].split("/")]


def json_patch(obj, ops):
    """RFC 6902 add, remove, replace and test, as the API server applies
    application/json-patch+json (a failed test fails the whole patch)."""
    obj = copy.deepcopy(obj)
    for op in ops:
        parts = pointer(op["path"])
        parent = obj
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1] if parts else None
        kind = op["op"]
        if kind == "test":
            cur = parent[int(last)] if isinstance(parent, list) else \
                parent.get(last, object())
            if cur != op["value"]:
                raise ValueError("testing value %s failed" % op["path"])
        elif kind == "add":
            if isinstance(parent, list):
                i = len(parent) if last == "-" else int(last)
                parent.insert(i, copy.deepcopy(op["value"]))
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif kind == "replace":
            if isinstance(parent, list):
                parent[int(last)] = copy.deepcopy(op["value"])
            else:
                if last not in parent:
                    raise ValueError("replace of missing %s" % op["path"])
                parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        else:
            raise ValueError("unsupported op %r" % kind)
    return obj


# Lists that a strategic-merge patch merges by key in a Node (the Node
# schema's patchMergeKey; NodeStatus.conditions and addresses merge on
# type); every other list is replaced, spec.taints included.
MERGE_KEYS = {("status", "conditions"): "type",
              ("status", "addresses"): "type"}


def merge(dst, patch, path=(), strategic=False):
    """RFC 7386 merge patch, or a strategic-merge patch when strategic."""
    out = copy.deepcopy(dst) if isinstance(dst, dict) else {}
    for k, v in patch.items():
        here = path + (k,)
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            out[k] = merge(out.get(k), v, here, strategic)
        elif strategic and isinstance(v, list) and here in MERGE_KEYS:
            key = MERGE_KEYS[here]
            cur = copy.deepcopy(out.get(k) or [])
            for item in v:
                for i, c in enumerate(cur):
                    if c.get(key) == item.get(key):
                        cur[i] = merge(c, item, here, strategic)
                        break
                else:
                    cur.append(copy.deepcopy(item))
            out[k] = cur
        else:
            out[k] = copy.deepcopy(v)
    return out


def apply_patch(obj, ptype, patch):
    """Applies patch to obj; returns (obj, err). tests/nodeloop/run.sh
    applies every recorded patch again with `kubectl patch --local` and
    compares: this code must agree with kubectl's."""
    try:
        body = json.loads(patch)
        if ptype == "application/json-patch+json":
            return json_patch(obj, body), None
        if ptype == "application/merge-patch+json":
            return merge(obj, body), None
        if ptype == "application/strategic-merge-patch+json":
            return merge(obj, body, strategic=True), None
        return None, "unsupported patch type %r" % ptype
    except (ValueError, KeyError, IndexError, TypeError) as e:
        return None, str(e)


def matches_labels(obj, selector):
    if not selector:
        return True
    labels = obj.get("metadata", {}).get("labels", {}) or {}
    for term in selector.split(","):
        k, _, v = term.partition("=")
        if labels.get(k) != v:
            return False
    return True


EVENT_FIELDS = {
    "involvedObject.kind": lambda e: e.get("involvedObject", {}).get("kind"),
    "involvedObject.name": lambda e: e.get("involvedObject", {}).get("name"),
    "involvedObject.namespace":
        lambda e: e.get("involvedObject", {}).get("namespace"),
    "involvedObject.uid": lambda e: e.get("involvedObject", {}).get("uid"),
    "reason": lambda e: e.get("reason"),
    "type": lambda e: e.get("type"),
    "reportingComponent": lambda e: e.get("reportingComponent"),
    "source": lambda e: e.get("source", {}).get("component"),
    "metadata.name": lambda e: e.get("metadata", {}).get("name"),
}
POD_FIELDS = {
    "metadata.name": lambda p: p.get("metadata", {}).get("name"),
    "spec.nodeName": lambda p: p.get("spec", {}).get("nodeName"),
}


def field_filter(fields, selector):
    """The predicate of a field selector, or None for an unknown field."""
    terms = []
    for term in filter(None, (selector or "").split(",")):
        k, _, v = term.partition("=")
        if k not in fields:
            return None
        terms.append((fields[k], v))
    return lambda o: all((get(o) or "") == v for get, v in terms)


def on_node(pod, node):
    return pod.get("spec", {}).get("nodeName") == node


def record(typ, pod):
    rv = bump()
    pod["metadata"]["resourceVersion"] = rv
    STATE["history"].append((int(rv), typ, copy.deepcopy(pod)))
    LOCK.notify_all()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, code, obj):
        out = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def body(self):
        n = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(n).decode() if n else ""

    # --- GET ------------------------------------------------------------
    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        parts = u.path.strip("/").split("/")
        with LOCK:
            left = STATE["garble"].get(u.path, 0)
            if left > 0:
                STATE["garble"][u.path] = left - 1
        if left > 0:
            # What a proxy in front of the apiserver may answer.
            out = b"<html><body>502 Bad Gateway</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        if u.path == "/fake/state":
            with LOCK:
                s = {k: STATE[k] for k in ("nodes", "patches", "lists",
                                           "watches", "rv")}
                s["pods"] = list(STATE["pods"].values())
                s["events"] = list(STATE["events"].values())
                self.send_json(200, s)
            return
        if u.path == "/api/v1/pods":
            sel = q.get("fieldSelector", "")
            node = sel[len("spec.nodeName="):] \
                if sel.startswith("spec.nodeName=") else None
            if q.get("watch") in ("1", "true"):
                self.watch(node, q)
            else:
                self.list_pods(node, q)
            return
        if u.path == "/api/v1/nodes":
            with LOCK:
                items = [n for n in STATE["nodes"].values()
                         if matches_labels(n, q.get("labelSelector"))]
                self.send_json(200, {"kind": "NodeList", "apiVersion": "v1",
                                     "metadata": {"resourceVersion":
                                                  str(STATE["rv"])},
                                     "items": items})
            return
        if len(parts) == 5 and parts[:2] == ["api", "v1"] and \
                parts[2] == "namespaces" and parts[4] in ("events", "pods"):
            events = parts[4] == "events"
            keep = field_filter(EVENT_FIELDS if events else POD_FIELDS,
                                q.get("fieldSelector"))
            if keep is None:
                self.send_json(400, status(400, "BadRequest",
                                           "field label not supported"))
                return
            with LOCK:
                src = STATE["events"] if events else STATE["pods"]
                items = [o for (ns, _), o in sorted(src.items())
                         if ns == parts[3] and keep(o)]
                self.send_json(200, {"kind": "EventList" if events else
                                     "PodList", "apiVersion": "v1",
                                     "metadata": {"resourceVersion":
                                                  str(STATE["rv"])},
                                     "items": items})
            return
        if len(parts) == 4 and parts[:3] == ["api", "v1", "nodes"]:
            with LOCK:
                n = STATE["nodes"].get(parts[3])
                if n is None:
                    self.send_json(404, status(404, "NotFound",
                                               "nodes %r not found" % parts[3]))
                else:
                    self.send_json(200, n)
            return
        self.send_json(404, status(404, "NotFound", self.path))

    def list_pods(self, node, q):
        with LOCK:
            STATE["lists"] += 1
            items = sorted((p for p in STATE["pods"].values()
                            if node is None or on_node(p, node)),
                           key=lambda p: p["metadata"]["name"])
            limit = min(int(q.get("limit", "500")), PAGE)
            start = int(q.get("continue", "0") or "0")
            page = items[start:start + limit]
            meta = {"resourceVersion": str(STATE["rv"])}
            if start + limit < len(items):
                meta["continue"] = str(start + limit)
            self.send_json(200, {"kind": "PodList", "apiVersion": "v1",
                                 "metadata": meta, "items": page})

    def chunk(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, node, q):
        with LOCK:
            STATE["watches"] += 1
            hold = STATE["hold_until"] - time.time()
        if hold > 0:
            time.sleep(hold)
        since = int(q.get("resourceVersion", "0") or "0")
        bookmarks = q.get("allowWatchBookmarks") == "true"
        end = time.time() + float(q.get("timeoutSeconds", "30"))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with LOCK:
            gen = STATE["drop_gen"]
            if STATE.get("drop_pending"):
                # The cut a dropped connection leaves: half a chunk, then
                # nothing.
                STATE["drop_pending"] = False
                self.wfile.write(b"40\r\n{\"type\": \"ADD")
                self.wfile.flush()
                self.close_connection = True
                return
            if since < STATE["compacted"]:
                self.chunk({"type": "ERROR", "object": status(
                    410, "Expired", "too old resource version: %d (%d)" %
                    (since, STATE["compacted"]))})
                self.wfile.write(b"0\r\n\r\n")
                return
        last_bookmark = time.time()
        try:
            while time.time() < end:
                with LOCK:
                    if STATE["drop_gen"] != gen:
                        # Cut mid-stream: no final chunk, as a dropped
                        # connection looks to the client.
                        self.close_connection = True
                        return
                    batch = [(rv, t, p) for rv, t, p in STATE["history"]
                             if rv > since and (node is None or
                                                on_node(p, node))]
                    if not batch:
                        LOCK.wait(0.2)
                for rv, t, p in batch:
                    self.chunk({"type": t, "object": p})
                    since = rv
                if bookmarks and time.time() - last_bookmark > BOOKMARK_S:
                    with LOCK:
                        cur = STATE["rv"]
                    self.chunk({"type": "BOOKMARK", "object": {
                        "kind": "Pod", "apiVersion": "v1",
                        "metadata": {"resourceVersion": str(cur)}}})
                    since = max(since, cur)
                    last_bookmark = time.time()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    # --- writes -----------------------------------------------------------
    def do_PATCH(self):
        u = urllib.parse.urlsplit(self.path)
        parts = u.path.strip("/").split("/")
        ptype = self.headers.get("Content-Type", "")
        patch = self.body()
        if not (len(parts) in (4, 5) and parts[:3] == ["api", "v1", "nodes"]):
            self.send_json(404, status(404, "NotFound", self.path))
            return
        sub = parts[4] if len(parts) == 5 else None
        with LOCK:
            node = STATE["nodes"].get(parts[3])
            if node is None:
                self.send_json(404, status(404, "NotFound", parts[3]))
                return
            after, err = apply_patch(node, ptype, patch)
            if err is not None:
                code = 422
                self.send_json(code, status(code, "Invalid", err))
                return
            if sub == "status":
                new = copy.deepcopy(node)
                new["status"] = after.get("status", {})
            else:
                new = after
                new["status"] = copy.deepcopy(node.get("status", {}))
            new["metadata"]["resourceVersion"] = bump()
            rec = {"path": u.path, "type": ptype, "patch": json.loads(patch),
                   "before": node, "after": new}
            STATE["patches"].append(rec)
            with open(PATCH_LOG, "a") as f:
                f.write(json.dumps(rec) + "\n")
            STATE["nodes"][parts[3]] = new
            self.send_json(200, new)

    def do_POST(self):
        u = urllib.parse.urlsplit(self.path)
        parts = u.path.strip("/").split("/")
        body = self.body()
        obj = json.loads(body) if body else {}
        with LOCK:
            if u.path == "/fake/pod" and "metadata" not in obj:
                self.send_json(400, status(400, "BadRequest", "no metadata"))
            elif u.path == "/fake/pod":
                key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                obj["metadata"].setdefault("uid", str(uuid.uuid4()))
                typ = "MODIFIED" if key in STATE["pods"] else "ADDED"
                STATE["pods"][key] = obj
                record(typ, obj)
                self.send_json(200, obj)
            elif u.path == "/fake/node":
                obj["metadata"]["resourceVersion"] = bump()
                STATE["nodes"][obj["metadata"]["name"]] = obj
                self.send_json(200, obj)
            elif u.path == "/fake/drop":
                STATE["drop_gen"] += 1
                STATE["drop_pending"] = True
                STATE["hold_until"] = time.time() + float(obj.get("hold", 0))
                LOCK.notify_all()
                self.send_json(200, {})
            elif u.path == "/fake/garble":
                STATE["garble"][obj["path"]] = int(obj.get("count", 1))
                self.send_json(200, {})
            elif u.path == "/fake/compact":
                STATE["compacted"] = STATE["rv"] + 1
                bump()
                STATE["drop_gen"] += 1
                LOCK.notify_all()
                self.send_json(200, {})
            elif len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] \
                    and parts[4] == "events":
                name = obj.get("metadata", {}).get("name", "")
                key = (parts[3], name)
                if key in STATE["events"]:
                    self.send_json(409, status(409, "AlreadyExists",
                                               "events %r already exists" %
                                               name))
                    return
                obj["metadata"]["resourceVersion"] = bump()
                STATE["events"][key] = obj
                self.send_json(201, obj)
            elif len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] \
                    and parts[4] == "pods":
                key = (parts[3], obj["metadata"]["name"])
                if key in STATE["pods"]:
                    self.send_json(409, status(409, "AlreadyExists",
                                               "pods %r already exists" %
                                               key[1]))
                    return
                obj["metadata"]["uid"] = str(uuid.uuid4())
                obj["status"] = {"phase": "Pending"}
                STATE["pods"][key] = obj
                record("ADDED", obj)
                self.send_json(201, obj)
            else:
                self.send_json(404, status(404, "NotFound", self.path))

    def do_DELETE(self):
        parts = urllib.parse.urlsplit(self.path).path.strip("/").split("/")
        with LOCK:
            if len(parts) == 6 and parts[4] == "pods":
                pod = STATE["pods"].pop((parts[3], parts[5]), None)
                if pod is None:
                    self.send_json(404, status(404, "NotFound", parts[5]))
                    return
                record("DELETED", pod)
                self.send_json(200, pod)
            else:
                self.send_json(404, status(404, "NotFound", self.path))


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    srv.serve_forever()


if __name__ == "__main__":
    main()
