# shellcheck shell=bash
# Helpers shared by the e2e harnesses and scenarios: reporting, assertions, polling with a
# deadline (nothing sleeps a fixed time to synchronise), and reading Prometheus text.
#
# Sourced, not run. Expects $KUBECTL (default kubectl) and, for failure reports, a function
# `harness_logs` that prints what the harness knows (manager and server logs).

KUBECTL=${KUBECTL:-kubectl}

step() { echo "--- $* (at ${SECONDS}s)"; }
note() { echo "    $*"; }

# A file whose existence says a failure was reported (with the logs) already, also from a
# subshell; the harness removes it on exit.
E2E_FAIL_MARK=${E2E_FAIL_MARK:-$(mktemp -u "${TMPDIR:-/tmp}/informant-e2e-failed.XXXXXX")}
export E2E_FAIL_MARK

# report_failure MESSAGE: MESSAGE and, the first time only, the harness's logs.
report_failure() {
  echo "FAIL: $*" >&2
  if [ ! -e "$E2E_FAIL_MARK" ]; then
    : >"$E2E_FAIL_MARK"
    if declare -F harness_logs >/dev/null; then harness_logs >&2 || true; fi
  fi
}

fail() {
  report_failure "$@"
  exit 1
}

# on_error LINE COMMAND STATUS: the ERR trap of the harness scripts (`set -E`), so a command
# failing where nothing expected it is reported, with the logs, instead of ending the run
# silently.
on_error() { report_failure "line $1: \`$2\` exited $3"; }

expect_eq() { # expect_eq WHAT EXPECTED ACTUAL
  if [ "$2" != "$3" ]; then fail "$1: expected [$2], got [$3]"; fi
  echo "ok: $1"
}

expect_contains() { # expect_contains WHAT NEEDLE HAYSTACK
  case "$3" in *"$2"*) echo "ok: $1" ;; *) fail "$1: [$2] not in [$3]" ;; esac
}

expect_not_contains() { # expect_not_contains WHAT NEEDLE HAYSTACK
  case "$3" in *"$2"*) fail "$1: [$2] unexpectedly in [$3]" ;; *) echo "ok: $1" ;; esac
}

# poll_until SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds (0), for at most
# SECONDS (then 1).
poll_until() {
  local seconds=$1
  shift
  local deadline=$((SECONDS + seconds))
  while true; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if [ "$SECONDS" -ge "$deadline" ]; then return 1; fi
    sleep 0.1
  done
}

# wait_until SECONDS DESCRIPTION COMMAND...: poll_until, failing the suite with DESCRIPTION when
# the deadline passes.
wait_until() {
  local seconds=$1 what=$2
  shift 2
  poll_until "$seconds" "$@" || fail "timed out after ${seconds}s waiting for: $what"
}

k() { "$KUBECTL" "$@"; }

# metric TEXT NAME [LABELS]: the value of one sample of Prometheus/OpenMetrics TEXT, 0 when the
# series is absent. LABELS is the exact label set as printed, e.g. 'fate="created"'.
metric() {
  local text=$1 name=$2 labels=${3:-}
  local series=$name
  if [ -n "$labels" ]; then series="$name{$labels}"; fi
  printf '%s\n' "$text" | awk -v s="$series" '$1 == s { v = $2 } END { print (v == "" ? 0 : v + 0) }'
}

# metric_sum TEXT NAME: the sum of every sample of NAME (all label sets).
metric_sum() {
  printf '%s\n' "$1" | awk -v n="$2" 'index($1, n "{") == 1 || $1 == n { s += $2 } END { print s + 0 }'
}

require_command() { # require_command NAME HOW-TO-INSTALL
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "e2e: $1 not found ($2)" >&2
    exit 2
  fi
}
