#!/usr/bin/env python3
"""The CronJob watcher (Kubernetes' CronJob controller's SawCompletedJob Events) as an informant
exec hook.

Called with one CronJob and its Jobs (children by owner reference) from the cache tree, it
records SawCompletedJob on the CronJob for each Job that completed since the last one it saw,
and remembers that time in the CronJob's status.lastSuccessfulTime. It returns no `children`,
so the Jobs (created by Kubernetes' own CronJob controller) are left alone.
"""
import json
import sys

request = json.load(sys.stdin)
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
json.dump({"events": events, "status": status}, sys.stdout)
