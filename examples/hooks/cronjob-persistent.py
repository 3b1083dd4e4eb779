#!/usr/bin/env python3
"""The CronJob watcher of cronjob.py as a persistent exec hook (`exec.mode: persistent`).

One process answers every call: each line on standard input is
{"id": N, "request": <hooks.informant.dev/v1 request>}, and each answer is one line on standard
output, {"id": N, "response": <hooks.informant.dev/v1 response>}, flushed at once. Standard
error goes to informant's log, at the level a line starts with (`level=debug ...`). The process
ends when its standard input does (informant stopped it, or informant is gone).
"""
import json
import sys


def watch(request):
    """The answer for one CronJob and its Jobs: cronjob.py's logic."""
    cronjob = request["object"]
    status = dict(cronjob.get("status") or {})
    seen = status.get("lastSuccessfulTime", "")
    events, latest = [], seen
    for job in request["children"].get("Job.batch/v1", []):
        done = (job.get("status") or {}).get("completionTime")
        if done and done > seen:
            events.append({"type": "Normal", "reason": "SawCompletedJob",
                           "message": f"Saw completed job: {job['metadata']['name']}, status: Complete"})
            latest = max(latest, done)
    if latest != seen:
        status["lastSuccessfulTime"] = latest
    return {"events": events, "status": status}


print("level=info cronjob watcher ready", file=sys.stderr, flush=True)
for line in sys.stdin:
    message = json.loads(line)
    request = message["request"]
    name = request["object"]["metadata"]["name"]
    print(f"level=debug watching {name}", file=sys.stderr, flush=True)
    answer = {"id": message["id"], "response": watch(request)}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
