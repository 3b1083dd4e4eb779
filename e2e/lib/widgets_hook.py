"""The webhook hook of the cluster harness's hook Controller (e2e/lib/cluster.sh, scenario 11),
for the Widgets of e2e/testdata/widgets-crd.yaml (e2e.informant.dev, v1alpha1 and v1):

- admission `deny-forbidden` (Validating): refuses a Widget with spec.forbidden: true, with a
  message the client must print;
- admission `default-size` (Mutating): a Widget without spec.size gets size 3;
- conversion between v1alpha1 (spec.replicas) and v1 (spec.size);
- reconcile: each Widget has one child ConfigMap `<widget>-child` carrying its size.

    python3 widgets_hook.py HOST PORT   (prints the port it listens on, then serves)
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_SIZE = 3


def convert(obj, to):
    version = to.split("/", 1)[1]
    out = json.loads(json.dumps(obj))
    spec = out.setdefault("spec", {})
    if version == "v1" and "replicas" in spec:
        spec["size"] = spec.pop("replicas")
    elif version == "v1alpha1" and "size" in spec:
        spec["replicas"] = spec.pop("size")
    out["apiVersion"] = to
    return out


def answer(req):
    if "conversion" in req:
        return {"objects": [convert(o, req["conversion"]["to"]) for o in req["objects"]]}
    if "admission" in req:
        obj = req["request"].get("object") or {}
        spec = obj.get("spec") or {}
        if req["admission"]["name"] == "deny-forbidden":
            if spec.get("forbidden"):
                name = obj["metadata"]["name"]
                return {"allowed": False, "message": f"widget {name}: forbidden widgets are refused by the e2e hook"}
            return {"allowed": True}
        if "size" not in spec:
            obj.setdefault("spec", {})["size"] = DEFAULT_SIZE
            return {"allowed": True, "object": obj}
        return {"allowed": True}
    obj = req["object"]
    if req.get("finalizing"):
        return {}
    name = obj["metadata"]["name"]
    size = (obj.get("spec") or {}).get("size", DEFAULT_SIZE)
    return {"children": [{"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": f"{name}-child"}, "data": {"size": str(size)}}]}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            out = json.dumps(answer(json.loads(body))).encode()
            code = 200
        except (ValueError, KeyError, TypeError, IndexError) as error:
            out, code = str(error).encode(), 400
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, fmt, *args):
        sys.stderr.write("widgets hook: " + fmt % args + "\n")


def main():
    server = ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
