#!/usr/bin/env python3
"""A ConfigMap -> Secret copier as an informant webhook hook (Python's http.server).

Each ConfigMap the Controller selects gets a Secret of the same name holding the same data;
when the ConfigMap goes, Kubernetes' garbage collector deletes the Secret (its owner).
Usage: copier.py PORT (0 picks a free port; the port is printed on the first line).
"""
import base64
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        configmap = request["object"]
        data = {k: base64.b64encode(v.encode()).decode()
                for k, v in (configmap.get("data") or {}).items()}
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": configmap["metadata"]["name"]}, "data": data}
        body = json.dumps({"children": [secret]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8080), Hook)
print(server.server_address[1], flush=True)
server.serve_forever()
