#!/usr/bin/env python3
"""JSON plumbing and times of e2e scenario 4, in the standard library only.

    events.py now
        the time now, in seconds since the epoch
    events.py time START I
        START + I seconds as a Kubernetes timestamp (RFC 3339, seconds, UTC)
    events.py since START
        the seconds from START to now, to the millisecond
    events.py job-complete START DONE
        the status merge patch of a Job that started at START and completed at DONE, as the Job
        controller writes it (SuccessCriteriaMet=True then Complete=True, succeeded 1,
        startTime <= completionTime): kube-apiserver refuses Complete=True without
        SuccessCriteriaMet=True
    events.py line T COMPONENT APIVERSION KIND NAMESPACE NAME UID TYPE REASON MESSAGE
        one event of an `informant simulate` input stream (tests/data/scenarios/README.md)
    events.py predicted < simulate-output.jsonl
        the Events the API server should hold once simulate's stream is written:
        one "count|message" line each, sorted; then "fates created=N patched=N skipped=N"
    events.py actual COMPONENT TYPE REASON < kubectl-get-events.json
        the Events from COMPONENT ("*": any) with that type and reason: "count|message"
        lines, sorted
"""

import json
import sys
import time


def stamp(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def job_complete(start, done):
    print(json.dumps({"status": {
        "startTime": stamp(float(start)),
        "completionTime": done,
        "active": 0,
        "succeeded": 1,
        "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": done,
                        "lastTransitionTime": done},
                       {"type": "Complete", "status": "True", "lastProbeTime": done,
                        "lastTransitionTime": done}],
    }}, separators=(",", ":")))


def line(args):
    t, component, api_version, kind, namespace, name, uid, etype, reason, message = args
    print(json.dumps({
        "t": float(t),
        "source": {"component": component, "host": ""},
        "involvedObject": {"kind": kind, "namespace": namespace, "name": name,
                           "uid": uid, "apiVersion": api_version},
        "type": etype,
        "reason": reason,
        "message": message,
    }, separators=(",", ":")))


def predicted():
    events = {}
    fates = {"create": 0, "patch": 0, "skip": 0}
    for raw in sys.stdin:
        if not raw.strip():
            continue
        out = json.loads(raw)
        fates[out["action"]] += 1
        if out["action"] in ("create", "patch"):
            events[out["name"]] = (out["count"], out["message"])
    for entry in sorted(f"{c}|{m}" for c, m in events.values()):
        print(entry)
    print(f"fates created={fates['create']} patched={fates['patch']} skipped={fates['skip']}")


def actual(component, etype, reason):
    items = json.load(sys.stdin).get("items", [])
    found = [
        f"{e.get('count', 1)}|{e.get('message', '')}"
        for e in items
        if component in ("*", e.get("source", {}).get("component"))
        and e.get("type") == etype
        and e.get("reason") == reason
    ]
    for entry in sorted(found):
        print(entry)


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "now":
        print(f"{time.time():.3f}")
    elif command == "time":
        print(stamp(float(args[0]) + int(args[1])))
    elif command == "since":
        print(f"{time.time() - float(args[0]):.3f}")
    elif command == "job-complete":
        job_complete(*args)
    elif command == "line":
        line(args)
    elif command == "predicted":
        predicted()
    elif command == "actual":
        actual(*args)
    else:
        sys.exit(f"events.py: unknown command {command}")


if __name__ == "__main__":
    main()
