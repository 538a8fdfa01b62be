#!/usr/bin/python3
"""server.py PORTFILE LOGFILE — a node inventory for the nodes.inventory
tests: an HTTP server on 127.0.0.1 (a free port, written to PORTFILE once
it listens) that answers fixed JSON documents by path, and logs one line
per request to LOGFILE: "METHOD PATH AUTHORIZATION ACCEPT".

  /list        ["n1", "n2", "n3"]
  /objects     {"nodes": [objects with name, slots, state, rack, labels,
                tags]}
  /secret      /objects, only with "Authorization: Bearer s3cret" (else 401)
  /redirect    302 to /objects
  /away        302 to http://127.0.0.2:PORT/secret (another host)
  /slow        answers after 60 s (far past the tests' nodes.command_timeout)
  /huge        17 MiB of JSON
  /notjson     text
  /bad-name    a host name with a blank
  /bad-slots   "slots": 0
  /empty       []
  /error       500

It exits when its parent (the test script) has gone.
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OBJECTS = {"nodes": [
    {"name": "gpu01", "slots": 8, "state": "ready", "rack": 1,
     "labels": {"zone": "a"}, "tags": ["a100", "ib"]},
    {"hostname": "gpu02", "slots": 8, "state": "drain", "rack": 1,
     "labels": {"zone": "a"}, "tags": ["a100"]},
    {"host": "gpu03", "state": "ready", "rack": 2,
     "labels": {"zone": "b"}, "tags": ["h100", "ib"]},
    {"name": "gpu04", "slots": 4, "state": "ready", "rack": 2,
     "labels": {"zone": "b"}, "tags": ["h100"], "healthy": True},
]}

DOCS = {
    "/list": json.dumps(["n1", "n2", "n3"]),
    "/objects": json.dumps(OBJECTS),
    "/notjson": "<html>not json</html>",
    "/bad-name": json.dumps(["ok1", "bad name"]),
    "/bad-slots": json.dumps([{"name": "n1", "slots": 0}]),
    "/empty": "[]",
}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send(self, code, body, ctype="application/json", extra=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        auth = self.headers.get("Authorization", "-")
        with open(sys.argv[2], "a") as log:
            log.write(f"GET {self.path} {auth.replace(' ', '_')} "
                      f"{self.headers.get('Accept', '-')}\n")
        path = self.path.split("?")[0]
        if path in DOCS:
            self.send(200, DOCS[path])
        elif path == "/secret":
            if auth == "Bearer s3cret":
                self.send(200, DOCS["/objects"])
            else:
                self.send(401, '{"error": "token"}')
        elif path == "/redirect":
            self.send(302, "", extra=[("Location", "/objects")])
        elif path == "/away":
            port = self.server.server_address[1]
            self.send(302, "", extra=[
                ("Location", f"http://127.0.0.2:{port}/secret")])
        elif path == "/slow":
            time.sleep(60)
            self.send(200, DOCS["/list"])
        elif path == "/huge":
            self.send(200, "[" + ",".join(['"n"'] * (17 << 19)) + "]")
        elif path == "/error":
            self.send(500, '{"error": "down"}')
        else:
            self.send(404, '{"error": "no such path"}')


# 0.0.0.0 would reach beyond loopback; 127.0.0.0/8 is all loopback, so
# listening on each of two addresses keeps the test on this machine.
class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass    # herd hanging up on /huge or /slow is what the test wants


servers = []
srv = Server(("127.0.0.1", 0), Handler)
servers.append(srv)
servers.append(Server(("127.0.0.2", srv.server_address[1]),
                                   Handler))
for s in servers:
    s.daemon_threads = True
    threading.Thread(target=s.serve_forever, daemon=True).start()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
# Ends with the test script that started it, however that ends.
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.2)
