"""Never two leaders, read from the replicas' own logs.

    python3 e2e/lib/leaders.py LOG...        # one log per replica (a container's whole stderr)
    python3 e2e/lib/leaders.py --overlap LOG...

Each replica leads from its `became leader` line to its `stopped leading` line (logged before it
releases the Lease), or to the end of its log if it never stopped (a replica still running, or
one killed without a word). The replicas run on one node, so their timestamps share a clock.
Prints every interval; exits 1 if two intervals overlap. `--overlap` first moves the latest
`became leader` to just before the end of the interval before it, which must make it fail: the
checker shown able to fail on the very logs it passes.
"""

import re
import sys
from datetime import datetime, timedelta

LINE = re.compile(r"^(\d{4}-\d\d-\d\dT[\d:.]+Z)\s.*?\b(became leader|stopped leading)")


def parse(when):
    # Microseconds at most: datetime takes 6 digits.
    head, _, frac = when.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00")


def intervals(path):
    out, start, last = [], None, None
    with open(path, errors="replace") as log:
        for line in log:
            stamp = re.match(r"^(\d{4}-\d\d-\d\dT[\d:.]+Z)", line)
            if stamp:
                last = parse(stamp.group(1))
            m = LINE.match(line)
            if not m:
                continue
            at = parse(m.group(1))
            if m.group(2) == "became leader":
                start = at
            elif start is not None:
                out.append([start, at, path])
                start = None
    if start is not None:
        out.append([start, None, path])  # still leading when its log ends
    return out


def main(args):
    overlap = args[:1] == ["--overlap"]
    logs = args[1:] if overlap else args
    led = sorted((i for path in logs for i in intervals(path)), key=lambda i: i[0])
    if overlap:
        if len(led) < 2 or led[-2][1] is None:
            print("--overlap: fewer than two intervals to make overlap")
            return 2
        led[-1][0] = led[-2][1] - timedelta(microseconds=1)
    bad = 0
    for before, after in zip(led, led[1:]):
        if before[1] is None or after[0] < before[1]:
            print(f"two leaders: {before[2]} led {before[0]} .. {before[1]}, {after[2]} from {after[0]}")
            bad += 1
    for start, end, path in led:
        print(f"    {path.rsplit('/', 1)[-1]}: {start.time()} .. {end.time() if end else 'still leading'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
