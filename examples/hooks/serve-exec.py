#!/usr/bin/env python3
"""Serves any exec hook as a webhook hook: each POST runs COMMAND with the request body on
standard input and answers with what it wrote on standard output.

informant's image has no interpreter, so an exec hook written in Python or shell runs in-cluster
as a webhook: this server in a pod of its own (e.g. python:3-slim with the hook mounted from a
ConfigMap) and `hook: {webhook: {url: http://SERVICE:PORT/}}` in the Controller.

    serve-exec.py [--host HOST] PORT COMMAND [ARG...]

PORT 0 picks a free port; the port is printed on the first line of standard output. HOST is
127.0.0.1 unless given (0.0.0.0 in a pod). A non-zero exit answers 500 with the command's
standard error, which informant counts as a failed call (`failure="http"`) and retries with
backoff. GET /healthz answers 200, for a readiness probe. Calls run concurrently, one process
each, as informant's exec hooks do.
"""
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def usage():
    sys.exit("usage: serve-exec.py [--host HOST] PORT COMMAND [ARG...]")


args = sys.argv[1:]
host = "127.0.0.1"
if args[:1] == ["--host"]:
    if len(args) < 2:
        usage()
    host, args = args[1], args[2:]
if len(args) < 2 or not args[0].isdigit():
    usage()
port, command = int(args[0]), args[1:]


class Hook(BaseHTTPRequestHandler):
    def answer(self, code, body, content_type):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/healthz":
            self.answer(200, b"ok", "text/plain")
        else:
            self.answer(404, b"POST a hook request", "text/plain")

    def do_POST(self):
        request = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        done = subprocess.run(command, input=request, capture_output=True, check=False)
        if done.returncode == 0:
            self.answer(200, done.stdout, "application/json")
        else:
            text = f"{command[0]} exited {done.returncode}: ".encode() + done.stderr[-4096:]
            self.answer(500, text, "text/plain")

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer((host, port), Hook)
print(server.server_address[1], flush=True)
server.serve_forever()
