#!/usr/bin/env python3
"""Who owns what in a shard ring, from its members' Leases, for e2e scenario 9; the standard
library only.

Each member's Lease (label informant.dev/ring=RING) carries, in the annotation
informant.dev/claims, the parts of the 64-bit hash space it acts on: `start-end` pairs of hex
digits, comma-separated. An object belongs to the member whose claims hold its hash, so the
ring gives every object exactly one member when the claims are disjoint and cover the space.

    shard.py check N OVERLAPS < kubectl-get-leases.json
        exit 0 when exactly N Leases have a holder and their claims are disjoint and cover the
        whole space; 1 otherwise (a hand-over still under way), printing why. Claims that
        intersect are also appended to the file OVERLAPS (one line each): two owners at once.
    shard.py owners LEASES.json OBJECTS.json METRICS
        for each object of OBJECTS.json (kubectl get -o json, sharded by uid), the members whose
        claims hold the 64-bit FNV-1a hash of its uid (KEP-5866's hash): exit 0 when it is
        exactly one for every object, and each member caches (informant_shard_objects for
        ConfigMap in METRICS, the members' /metrics texts each after a line "# member NAME")
        exactly the objects it owns; print "OBJECTS objects, owned per member: {...}"
"""

import json
import sys

CLAIMS = "informant.dev/claims"
SPACE = 1 << 64


def claims_of(lease):
    text = (lease["metadata"].get("annotations") or {}).get(CLAIMS, "")
    spans = []
    for pair in filter(None, (p.strip() for p in text.split(","))):
        start, end = pair.split("-")
        spans.append((int(start, 16), int(end, 16)))
    return spans


def check(expected, overlaps_path):
    leases = json.load(sys.stdin)["items"]
    members = []
    for lease in leases:
        holder = (lease.get("spec") or {}).get("holderIdentity")
        if holder:
            members.append((holder, claims_of(lease)))
    spans = sorted((s, e, m) for m, claims in members for s, e in claims)
    problems = []
    if len(members) != expected:
        problems.append(f"{len(members)} members, not {expected}: {sorted(m for m, _ in members)}")
    covered, holder = 0, None
    for s, e, m in spans:
        if s < covered:
            line = f"{holder} and {m} both claim [{s:x}, {min(e, covered):x})"
            with open(overlaps_path, "a", encoding="utf-8") as out:
                out.write(line + "\n")
            problems.append(line)
        elif s > covered:
            problems.append(f"[{covered:x}, {s:x}) is owned by no member")
        if e > covered:
            covered, holder = e, m
    if covered < SPACE:
        problems.append(f"[{covered:x}, {SPACE:x}) is owned by no member")
    if problems:
        print("; ".join(problems[:3]))
        return 1
    print(f"{expected} members, claims disjoint and covering the hash space")
    return 0


def fnv1a_64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) % SPACE
    return h


def cached(metrics_path):
    counts, member = {}, None
    with open(metrics_path, encoding="utf-8") as text:
        for line in text:
            if line.startswith("# member "):
                member = line.split(maxsplit=2)[2].strip()
                counts[member] = 0
            elif member and line.startswith("informant_shard_objects{") and "ConfigMap" in line:
                counts[member] += int(float(line.split()[-1]))
    return counts


def owners(leases_path, objects_path, metrics_path):
    with open(leases_path, encoding="utf-8") as f:
        leases = json.load(f)["items"]
    with open(objects_path, encoding="utf-8") as f:
        items = json.load(f)["items"]
    claims = {}
    for lease in leases:
        holder = (lease.get("spec") or {}).get("holderIdentity")
        if holder:
            claims[holder] = claims_of(lease)
    owned = {m: 0 for m in claims}
    problems = []
    for item in items:
        point = fnv1a_64(item["metadata"]["uid"])
        holders = [m for m, spans in claims.items() if any(s <= point < e for s, e in spans)]
        if len(holders) != 1:
            name = item["metadata"]["namespace"] + "/" + item["metadata"]["name"]
            problems.append(f"{name} is owned by {holders or 'no member'}")
        for m in holders:
            owned[m] += 1
    counts = cached(metrics_path)
    if counts != owned:
        problems.append(f"cached per member {counts} is not owned per member {owned}")
    print(f"{len(items)} objects, owned per member: {owned}")
    if problems:
        print("; ".join(problems[:3]), file=sys.stderr)
        return 1
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "check":
        return check(int(argv[2]), argv[3])
    if len(argv) == 5 and argv[1] == "owners":
        return owners(argv[2], argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
