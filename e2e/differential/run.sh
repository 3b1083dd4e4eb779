#!/usr/bin/env bash
# The differential fidelity suite (e2e/differential/diff.py, cases in cases.py): the same request
# sequences sent to the embedded API server and to the real kube-apiserver of
# e2e/cluster/cluster.sh, the answers compared.
#
#   bash e2e/differential/run.sh [--only AREA]
#
# Starts the control plane (cluster.sh up; stopped at exit, also on failure) and, in its network
# namespace, `informant apiserver` on loopback; runs diff.py against both with the known
# differences of e2e/differential/known.tsv, and prints the table per area and every difference.
# Exits 1 when a difference is not in known.tsv (or a known one went away), 3 when this machine
# cannot run the control plane (the reason on standard error).
#
# Environment: INFORMANT (default target/debug/informant, built when missing), INFORMANT_PYTHON
# (a python3 with PyYAML), DIFF_JSON (a file for every exchange's result), E2E_KEEP_LOGS.
set -euo pipefail
cd "$(dirname "$0")/../.."
CLUSTER_SH=e2e/cluster/cluster.sh
PYTHON=${INFORMANT_PYTHON:-python3}
INFORMANT=${INFORMANT:-target/debug/informant}

if ! why=$(bash "$CLUSTER_SH" check); then
  echo "differential: cannot run: ${why#the cluster harness cannot run here: }" >&2
  exit 3
fi
"$PYTHON" -c 'import yaml' 2>/dev/null || {
  echo "differential: cannot run: $PYTHON has no yaml (pip install pyyaml)" >&2
  exit 3
}
"$PYTHON" e2e/differential/diff.py --self-test
if [ ! -x "$INFORMANT" ]; then cargo build --quiet --bin informant; fi
INFORMANT=$(cd "$(dirname "$INFORMANT")" && pwd)/$(basename "$INFORMANT")
bash "$CLUSTER_SH" build

dir=$(mktemp -d "${TMPDIR:-/tmp}/informant-differential.XXXXXX")
server_pid=""
cleanup() {
  local status=$?
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  bash "$CLUSTER_SH" down "$dir" >/dev/null 2>&1 || true
  if [ "$status" -ne 0 ] && [ -n "${E2E_KEEP_LOGS:-}" ]; then
    echo "differential: logs kept in $dir" >&2
  else
    rm -rf "$dir"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash "$CLUSTER_SH" up "$dir" >&2
# shellcheck source=/dev/null
source "$dir/env"
in_cluster() { nsenter --net="/run/netns/$CLUSTER_NETNS" "$@"; }
# Not through in_cluster: a function run in the background is a subshell, and $! would be its
# pid, not the server's (nsenter execs the server, so killing $! stops it).
nsenter --net="/run/netns/$CLUSTER_NETNS" "$INFORMANT" apiserver --listen 127.0.0.1:0 \
  --kubeconfig-out "$dir/embedded.kubeconfig" >"$dir/embedded.addr" 2>"$dir/embedded.log" &
server_pid=$!
for _ in $(seq 300); do
  if grep -q '^http://' "$dir/embedded.addr" 2>/dev/null; then break; fi
  kill -0 "$server_pid" 2>/dev/null || { echo "differential: informant apiserver exited: $(cat "$dir/embedded.log")" >&2; exit 1; }
  sleep 0.1
done
grep -q '^http://' "$dir/embedded.addr" || { echo "differential: informant apiserver printed no address" >&2; exit 1; }
echo "differential: embedded $(head -n1 "$dir/embedded.addr"), real kube-apiserver $CLUSTER_VERSION at $CLUSTER_SERVER" >&2
json=()
if [ -n "${DIFF_JSON:-}" ]; then json=(--json "$DIFF_JSON"); fi
in_cluster "$PYTHON" e2e/differential/diff.py --embedded "$dir/embedded.kubeconfig" --real "$KUBECONFIG" \
  --known e2e/differential/known.tsv "${json[@]}" "$@"
