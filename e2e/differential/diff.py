#!/usr/bin/env python3
"""The differential fidelity suite: the same request sequences sent to the embedded API server
(`informant apiserver`) and to the real kube-apiserver, the answers compared once what
legitimately differs is normalised.

    diff.py --embedded KUBECONFIG --real KUBECONFIG [--known FILE] [--json OUT] [--only AREA]
    diff.py --self-test

Each case of cases.py is a function of a `Session`: it sends requests (`s.get`, `s.post`, ...),
each one an *exchange* recorded with its status code and normalised body, and may read the
answers to build the next request. A case runs once per backend, each in namespaces of its own
name (created by the case), and the two recordings are compared exchange by exchange.

Normalised (they differ between any two servers, or any two runs): uids, resourceVersions (an
opaque string to clients), timestamps, `continue` tokens, the random suffix of a generated name,
`managedFields[].time` (and so the entries' order, which follows their times). Everything else must be equal:
the status code, the body (a Status's reason, message, details and causes included), the order
of list items, and the Content-Type's media type.

`--known FILE`: the differences already named, one per line: `AREA/CASE#N`, a tab, `kept` (on
purpose: the embedded server answers so by design) or `open` (a fidelity gap, to fix), a tab,
why. The report counts, per area, identical exchanges, kept and open differences and
unexplained ones, prints every difference, and exits 1 when one is unexplained (or a named one
no longer differs: the file must stay true), 0 otherwise.
"""

import argparse
import base64
import copy
import json
import os
import re
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
OPAQUE_KEYS = {"uid", "resourceVersion", "continue", "selfLink", "token"}
TIME_KEYS = {
    "creationTimestamp",
    "deletionTimestamp",
    "time",
    "lastTransitionTime",
    "lastTimestamp",
    "firstTimestamp",
    "eventTime",
    "renewTime",
    "acquireTime",
    "lastHeartbeatTime",
    "expirationTimestamp",
}


class Backend:
    """An API server reached with the credentials of a kubeconfig (plain HTTP, or TLS with a
    client certificate or a token)."""

    def __init__(self, name, kubeconfig):
        self.name = name
        with open(kubeconfig) as f:
            config = yaml.safe_load(f)
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next((u["user"] for u in config.get("users", []) if u["name"] == context.get("user")), {}) or {}
        self.server = cluster["server"].rstrip("/")
        self.headers = {}
        self.context = None
        if self.server.startswith("https://"):
            self.context = ssl.create_default_context(cafile=self._file(cluster, "certificate-authority"))
            cert, key = self._file(user, "client-certificate"), self._file(user, "client-key")
            if cert and key:
                self.context.load_cert_chain(cert, key)
        if user.get("token"):
            self.headers["Authorization"] = "Bearer " + user["token"]

    @staticmethod
    def _file(section, key):
        if section.get(key):
            return section[key]
        data = section.get(key + "-data")
        if not data:
            return None
        f = tempfile.NamedTemporaryFile(delete=False, suffix=".pem")
        f.write(base64.b64decode(data))
        f.close()
        return f.name

    def request(self, method, path, body=None, content_type="application/json", accept="application/json", timeout=30):
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        for k, v in self.headers.items():
            req.add_header(k, v)
        if data is not None:
            req.add_header("Content-Type", content_type)
        req.add_header("Accept", accept)
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()


def decode(raw):
    """A body as JSON, else as text (None when empty)."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def media_type(headers):
    """The Content-Type's media type (header names are case-insensitive)."""
    value = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return value.split(";")[0].strip()


class Session:
    """One case on one backend: every request an exchange, recorded normalised."""

    def __init__(self, backend):
        self.backend = backend
        self.exchanges = []
        self.generated = {}

    def _record(self, request, note, status, headers, body):
        """Records one exchange (its body decoded), normalised; returns the status and body."""
        self.exchanges.append(
            {
                "request": request + (f" ({note})" if note else ""),
                "status": status,
                "media": media_type(headers),
                "body": normalise(body, self.generated),
            }
        )
        return status, body

    def send(self, method, path, body=None, content_type="application/json", note="", record=True):
        status, headers, raw = self.backend.request(method, path, body, content_type)
        decoded = decode(raw)
        if not record:
            return status, decoded
        return self._record(f"{method} {path}", note, status, headers, decoded)

    def get(self, path, **kw):
        return self.send("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.send("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.send("PUT", path, body, **kw)

    def delete(self, path, body=None, **kw):
        return self.send("DELETE", path, body, **kw)

    def patch(self, path, body, kind="merge", **kw):
        types = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "apply": "application/apply-patch+yaml",
        }
        return self.send("PATCH", path, body, content_type=types[kind], **kw)

    def watch(self, path, note=""):
        """A watch that ends by itself (`timeoutSeconds` in the path): its events, one exchange."""
        status, headers, raw = self.backend.request("GET", path, timeout=60)
        events = [decode(line) for line in raw.splitlines() if line.strip()]
        return self._record(f"WATCH {path}", note, status, headers, events)

    def until(self, what, check, timeout=30):
        """Polls `check()` (requests it makes are not recorded) until true."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.1)
        raise AssertionError(f"{self.backend.name}: timed out waiting for {what}")

    def namespace(self, name):
        """Creates the namespace `name` (not recorded: every case starts with its own)."""
        status, _ = self.send("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, record=False)
        if status not in (201, 409):
            raise AssertionError(f"{self.backend.name}: cannot create namespace {name}: {status}")


def normalise(value, generated, key=None):
    """`value` with what differs between servers replaced by placeholders."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in OPAQUE_KEYS and isinstance(v, str) and v:
                out[k] = f"<{k}>"
            elif k in TIME_KEYS and isinstance(v, str) and v:
                out[k] = "<time>"
            elif k == "managedFields" and isinstance(v, list):
                # Without their times, in an order that does not depend on them (servers sort
                # the entries by operation, time, manager, apiVersion and subresource).
                entries = [normalise({kk: vv for kk, vv in m.items() if kk != "time"}, generated) for m in v if isinstance(m, dict)]
                order = lambda m: tuple(str(m.get(f, "")) for f in ("operation", "manager", "apiVersion", "subresource"))
                out[k] = sorted(entries, key=order)
            else:
                out[k] = normalise(v, generated, k)
        # A generated name: the server's random suffix, numbered in order of appearance.
        name, prefix = out.get("name"), out.get("generateName")
        if isinstance(name, str) and isinstance(prefix, str) and name.startswith(prefix) and name != prefix:
            out["name"] = generated.setdefault(name, f"{prefix}<generated-{len(generated) + 1}>")
        return out
    if isinstance(value, list):
        return [normalise(v, generated, key) for v in value]
    if isinstance(value, str):
        if value in generated:
            return generated[value]
        if TIMESTAMP.match(value):
            return "<time>"
        # A uid inside a message (a refused ownerReferences printed back): each server's own.
        return UUID.sub("<uid>", value)
    return value


def differences(a, b, path=""):
    """The paths where the two normalised values differ, with both sides."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append((f"{path}.{k}", "<absent>", b[k]))
            elif k not in b:
                out.append((f"{path}.{k}", a[k], "<absent>"))
            else:
                out.extend(differences(a[k], b[k], f"{path}.{k}"))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [(f"{path}[]", f"{len(a)} items", f"{len(b)} items")]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out.extend(differences(x, y, f"{path}[{i}]"))
        return out
    return [] if a == b else [(path or ".", a, b)]


def compare(embedded, real):
    """Exchange by exchange: (index, request, [differences]) for each; a missing exchange (a case
    that stopped early on one side) is a difference too."""
    results = []
    for i in range(max(len(embedded), len(real))):
        e = embedded[i] if i < len(embedded) else None
        r = real[i] if i < len(real) else None
        if e is None or r is None:
            present = e or r
            results.append((i, present["request"], [("exchange", "<absent>" if e is None else "sent", "<absent>" if r is None else "sent")]))
            continue
        found = []
        if e["status"] != r["status"]:
            found.append(("status", e["status"], r["status"]))
        if e["media"] != r["media"]:
            found.append(("content-type", e["media"], r["media"]))
        found.extend(differences(e["body"], r["body"], "body"))
        results.append((i, r["request"], found))
    return results


def short(value, limit=160):
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def read_known(path):
    known = {}
    if path and os.path.exists(path):
        for line in open(path):
            line = line.rstrip("\n")
            if line and not line.startswith("#"):
                key, _, rest = line.partition("\t")
                kind, _, why = rest.partition("\t")
                if kind not in ("kept", "open"):
                    raise SystemExit(f"{path}: {key}: the kind must be kept or open, not {kind!r}")
                known[key.strip()] = (kind, why.strip())
    return known


def run(cases, embedded, real, known, only=None):
    """Runs every case on both backends; returns the report's rows."""
    rows = []
    for area, name, case in cases:
        if only and area != only:
            continue
        recordings = {}
        errors = {}
        for backend in (embedded, real):
            session = Session(backend)
            try:
                case(session)
            except Exception as e:  # a case stopped on one side: its exchanges so far still count
                errors[backend.name] = f"{type(e).__name__}: {e}"
            recordings[backend.name] = session.exchanges
        for i, request, found in compare(recordings["embedded"], recordings["real"]):
            key = f"{area}/{name}#{i + 1}"
            rows.append({"area": area, "case": name, "key": key, "request": request, "differences": found, "known": known.get(key)})
        for side, error in errors.items():
            rows.append({"area": area, "case": name, "key": f"{area}/{name}#error-{side}", "request": f"case stopped on {side}", "differences": [("error", error, "")], "known": known.get(f"{area}/{name}#error-{side}")})
    return rows


def summary(row):
    """A first reason for a new difference, from its first differing path (to be reworded)."""
    where, e, r = row["differences"][0]
    request = row["request"]
    note = request[request.rfind("(") + 1 : -1] if request.endswith(")") else ""
    paths = [w for w, _, _ in row["differences"]]
    if all(re.match(r"body\.items\[\d+\]\.(apiVersion|kind)$", w) for w in paths):
        return "list items of built-in kinds carry apiVersion and kind (kube-apiserver leaves them out)"
    empty_data = r"body(\.items\[\d+\])?\.(data|metadata\.managedFields\[\d+\]\.fieldsV1\.f:data)$"
    if all(re.match(empty_data, w) for w in paths):
        return "an empty data map is kept (kube-apiserver drops it)"
    set_items = lambda w: re.search(r"\.(v:|k:\{)|\.\.$", w)
    if all("managedFields" in w for w in paths) and any(set_items(w) for w in paths):
        return "managedFields: a list is one field here; kube-apiserver owns each item (v:<value>, k:{key})"
    if all("managedFields" in w for w in paths):
        return "managedFields differ: " + where
    if where == "status":
        return f"status {e}, kube-apiserver {r}" + (f": {note}" if note else "")
    if where.endswith("details.causes"):
        return "no details.causes in the Status (kube-apiserver lists each field's error)"
    if where == "body.details" and r == {}:
        return "Status without details: {} (kube-apiserver sends an empty details)"
    if where.endswith(".message"):
        return "the error message's wording differs from kube-apiserver's"
    return f"{where}: embedded {short(e, 60)}, kube-apiserver {short(r, 60)}"


def write_known(path, rows, known):
    """Rewrites the known list from this run: every difference keeps its line if it has one,
    a new one is `open` with a first reason; a named one that went away is dropped."""
    lines = [l for l in open(path) if l.startswith("#")] if os.path.exists(path) else []
    for row in rows:
        if row["differences"]:
            kind, why = known.get(row["key"]) or ("open", summary(row))
            lines.append(f"{row['key']}\t{kind}\t{why}\n")
    with open(path, "w") as f:
        f.writelines(lines)


def report(rows, known):
    """Prints the table per area and every difference; returns the exit status."""
    areas = {}
    for row in rows:
        a = areas.setdefault(row["area"], {"exchanges": 0, "identical": 0, "kept": 0, "open": 0, "unexplained": 0})
        a["exchanges"] += 1
        if not row["differences"]:
            a["identical"] += 1
        elif row["known"] is not None:
            a[row["known"][0]] += 1
        else:
            a["unexplained"] += 1
    print("| area | exchanges | identical | differing, kept on purpose | differing, open (to fix) | differing, unexplained |")
    print("|---|---|---|---|---|---|")
    total = {"exchanges": 0, "identical": 0, "kept": 0, "open": 0, "unexplained": 0}
    for area, a in areas.items():
        print(f"| {area} | {a['exchanges']} | {a['identical']} | {a['kept']} | {a['open']} | {a['unexplained']} |")
        for k in total:
            total[k] += a[k]
    print(f"| all | {total['exchanges']} | {total['identical']} | {total['kept']} | {total['open']} | {total['unexplained']} |")
    status = 0
    for row in rows:
        if not row["differences"]:
            if row["known"] is not None:
                print(f"NO LONGER DIFFERS (remove it from the known list): {row['key']} {row['request']}")
                status = 1
            continue
        label = f"{row['known'][0]}: {row['known'][1]}" if row["known"] is not None else "UNEXPLAINED"
        print(f"\n{row['key']} {row['request']} [{label}]")
        for where, e, r in row["differences"][:6]:
            print(f"    {where}: embedded {short(e)}")
            print(f"    {' ' * len(where)}  real     {short(r)}")
        if len(row["differences"]) > 6:
            print(f"    ... {len(row['differences']) - 6} more")
        if row["known"] is None:
            status = 1
    seen = {row["key"] for row in rows}
    for key in known:
        if key not in seen:
            print(f"KNOWN BUT NOT RUN (remove it from the known list): {key}")
            status = 1
    return status


def self_test():
    """The comparison can fail: a changed status, message, item order or missing field is found;
    what only normalisation hides is not."""
    g = {}
    a = normalise({"metadata": {"name": "x-abcde", "generateName": "x-", "uid": "1", "resourceVersion": "5", "creationTimestamp": "2026-01-01T00:00:00Z"}, "data": {"k": "v"}}, g)
    b = normalise({"metadata": {"name": "x-fghij", "generateName": "x-", "uid": "2", "resourceVersion": "9", "creationTimestamp": "2026-02-02T10:00:00Z"}, "data": {"k": "v"}}, {})
    assert differences(a, b) == [], differences(a, b)
    base = {"request": "GET /x", "status": 404, "media": "application/json", "body": {"kind": "Status", "reason": "NotFound", "message": "a"}}
    for change, expected in [
        ({"status": 403}, "status"),
        ({"media": "text/plain"}, "content-type"),
        ({"body": {"kind": "Status", "reason": "NotFound", "message": "b"}}, "body.message"),
        ({"body": {"kind": "Status", "reason": "NotFound"}}, "body.message"),
    ]:
        other = copy.deepcopy(base)
        other.update(change)
        found = compare([base], [other])[0][2]
        assert any(w == expected for w, _, _ in found), (change, found)
    uid_a, uid_b = "dc8a0983-a412-46eb-a6fc-1db5962f9201", "bbd24b23-7874-4c55-89f3-22b70c530e8c"
    said = lambda uid, name: normalise({"message": f'Invalid value: [{{"name":"{name}","uid":"{uid}"}}]'}, {})
    assert differences(said(uid_a, "a"), said(uid_b, "a")) == [], "a uid in a message is each server's own"
    assert differences(said(uid_a, "a"), said(uid_b, "b")), "the rest of the message still counts"
    items = lambda names: {"items": [{"metadata": {"name": n}} for n in names]}
    assert differences(items(["a", "b"]), items(["b", "a"])), "item order must count"
    rows = [{"area": "t", "case": "c", "key": "t/c#1", "request": "GET /x", "differences": [("status", 1, 2)], "known": None}]
    saved = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        assert report(rows, {}) == 1, "an unexplained difference must fail"
        rows[0]["known"] = ("kept", "on purpose")
        assert report(rows, {"t/c#1": rows[0]["known"]}) == 0
        rows[0]["differences"] = []
        assert report(rows, {"t/c#1": rows[0]["known"]}) == 1, "a known difference that went away must fail"
    finally:
        sys.stdout.close()
        sys.stdout = saved
    print("self-test passed: differences in status, media type, message, absent fields and item order are found")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedded")
    parser.add_argument("--real")
    parser.add_argument("--known")
    parser.add_argument("--json")
    parser.add_argument("--only")
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--write-known", action="store_true", help="rewrite --known from this run (keeps the reasons it has)")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return 0
    if not args.embedded or not args.real:
        parser.error("--embedded and --real are required")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cases

    known = read_known(args.known)
    rows = run(cases.CASES, Backend("embedded", args.embedded), Backend("real", args.real), known, args.only)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    if args.write_known and args.known:
        write_known(args.known, rows, known)
        known = read_known(args.known)
        for row in rows:
            row["known"] = known.get(row["key"])
    return report(rows, known)


if __name__ == "__main__":
    sys.exit(main())
