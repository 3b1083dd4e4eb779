"""A tiny admission webhook hook for the benchmark: allows every call, but denies one whose
object is labelled `deny: "yes"` (the bench's probe that this hook is the one in the path).

    python3 hook_server.py ADDR PORT

Prints `listening` once it accepts connections.
"""

import http.server
import sys


class Hook(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go in two writes: without TCP_NODELAY, Nagle's algorithm holds
    # the body until the caller's delayed acknowledgement (40 ms a call).
    disable_nagle_algorithm = True

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if b'"deny":"yes"' in body:
            answer = b'{"allowed": false, "message": "denied by the bench webhook hook"}'
        else:
            answer = b'{"allowed": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Hook)
print("listening", flush=True)
server.serve_forever()
