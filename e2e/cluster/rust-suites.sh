#!/usr/bin/env bash
# The manager's own Rust test suites against the real control plane of e2e/cluster/cluster.sh.
#
#   bash e2e/cluster/rust-suites.sh [FILTER...]
#
# Builds the `manager` test binary, starts the control plane (`cluster.sh up`, stopped at exit,
# also on failure), and runs the binary inside the cluster's network namespace with the test
# support's one switch, INFORMANT_TEST_KUBECONFIG (the admin kubeconfig; tests/support/backend.rs
# says what it changes): one test at a time, each on a reset cluster, webhooks listening on the
# cluster's address so that the real kube-apiserver calls them. FILTERs are libtest filters
# (default: the finalizer helper's, the hook, admission and conversion tests and the manager's
# run, leader and status tests). A test that needs what only the embedded API server has ends
# with a message starting
# `skipped:` (a failure to libtest): counted here as skipped, never as passed. Prints the
# passed/skipped/failed counts; exits 1 if any test failed, 3 if this machine cannot run the
# cluster (the reason on standard error).
#
# Environment: KUBECTL and INFORMANT_PYTHON as for `cargo test`; CLUSTER_* as cluster.sh reads.
set -euo pipefail

cd "$(dirname "$0")/../.."
CLUSTER_SH=e2e/cluster/cluster.sh
DEFAULT_FILTERS=(controller_finalizer hooks_admission hooks_conversion hooks_exec hooks_manager
  manager_run manager_leader manager_status)

say() { echo "rust-suites: $*" >&2; }

if ! why=$(bash "$CLUSTER_SH" check); then
  say "cannot run: $why"
  exit 3
fi
filters=("$@")
if [ ${#filters[@]} -eq 0 ]; then filters=("${DEFAULT_FILTERS[@]}"); fi

bash "$CLUSTER_SH" build
say "building the manager test binary"
binary=$(nice -n 10 cargo test --locked --test manager --no-run 2>&1 |
  sed -n 's/.*Executable tests\/manager\/main.rs (\(.*\))$/\1/p' | tail -n1)
[ -x "$binary" ] || {
  say "no manager test binary built"
  exit 1
}

dir=$(mktemp -d "${TMPDIR:-/tmp}/informant-rust-suites.XXXXXX")
cleanup() {
  local status=$?
  bash "$CLUSTER_SH" down "$dir" || true
  if [ "$status" -ne 0 ] && [ -n "${E2E_KEEP_LOGS:-}" ]; then
    say "control plane logs and the test output kept in $dir"
  else
    rm -rf "$dir"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash "$CLUSTER_SH" up "$dir"
# shellcheck source=/dev/null
source "$dir/env"
say "running ${filters[*]} against kube-apiserver $CLUSTER_VERSION at $CLUSTER_SERVER"
start=$SECONDS
status=0
nsenter --net="/run/netns/$CLUSTER_NETNS" env INFORMANT_TEST_KUBECONFIG="$KUBECONFIG" \
  "$binary" --test-threads=1 "${filters[@]}" >"$dir/tests.log" 2>&1 || status=$?

# libtest's failures section: "---- NAME stdout ----", then the panic ("thread 'NAME' panicked
# at FILE:LINE:" and its message on the next line). A message starting "skipped:" is a skip.
skipped_names=$(awk '
  /^---- .* stdout ----$/ { name = $2; next }
  /panicked at/ { getline msg; if (msg ~ /^skipped:/) print name }
' "$dir/tests.log" | sort -u)
passed=$(grep -c '^test .* \.\.\. ok$' "$dir/tests.log" || true)
failed_names=$(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$dir/tests.log" | sort -u |
  comm -23 - <(printf '%s\n' "$skipped_names" | sed '/^$/d'))
skipped=$(printf '%s\n' "$skipped_names" | sed '/^$/d' | wc -l)
failed=$(printf '%s\n' "$failed_names" | sed '/^$/d' | wc -l)

if [ -n "$skipped_names" ]; then
  awk '/^---- .* stdout ----$/ { name = $2; next }
       /panicked at/ { getline msg; if (msg ~ /^skipped:/) print "  skipped " name ": " substr(msg, 10) }' \
    "$dir/tests.log" | sort -u >&2
fi
if [ "$failed" -gt 0 ]; then
  say "failed:"
  mapfile -t names <<<"$failed_names"
  printf '  %s\n' "${names[@]}" >&2
  # Only the failed tests' sections: a skip's panic is not a failure to read.
  awk -v names="$failed_names" '
    BEGIN { n = split(names, list, "\n"); for (i = 1; i <= n; i++) want[list[i]] = 1 }
    /^---- .* stdout ----$/ { on = ($2 in want) }
    /^failures:$/ { on = 0 }
    on' "$dir/tests.log" | grep -v '^   *[0-9]*: \|^  *at ' >&2 || true
fi
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ] && [ "$skipped" -eq 0 ]; then
  tail -n 30 "$dir/tests.log" >&2
  say "the test binary failed ($status) without a failed test"
  exit 1
fi
echo "rust suites on kube-apiserver $CLUSTER_VERSION: $passed passed, $skipped skipped, $failed failed ($((SECONDS - start)) s)"
[ "$failed" -eq 0 ]
