#!/usr/bin/env bash
# Admission through the real kube-apiserver: ConfigMap create p50/p99 with no hook, with a
# declared webhook hook and with a persistent exec hook, at concurrency 1 and 16. A benchmark,
# not a test: not run by scripts/test.
#
#   bash e2e/cluster/bench-admission.sh [COUNT]     # creates per figure (default 400)
#
# Starts the control plane of e2e/cluster/cluster.sh (stopped at exit, also on failure) and, in
# its network namespace, an `informant run` (the admin kubeconfig, `--cache-config
# bench/config`, `--webhook-service informant-bench` listening on the cluster's address, whose
# Service and EndpointSlice the script publishes so that kube-apiserver calls it with the
# managed certificate). For each hook a Controller of `bench` declares one Validating admission
# hook (failurePolicy Fail) of ConfigMaps: `webhook` calls e2e/cluster/bench/hook_server.py over
# HTTP on loopback, `persistent` runs e2e/cluster/bench/persistent.sh (`exec.mode: persistent`).
# Each hook denies a ConfigMap labelled deny=yes, which is how the script knows the hook is the
# one in the path before measuring (and that it is gone after). The creates are
# e2e/cluster/bench/load.py: N workers, one TLS connection each.
#
# Environment: INFORMANT (default target/release/informant if built, else target/debug/informant),
# PYTHON (default python3), KUBECTL (default kubectl).
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
CLUSTER_SH=e2e/cluster/cluster.sh
COUNT=${1:-400}
PYTHON=${PYTHON:-python3}
KUBECTL=${KUBECTL:-kubectl}
if [ -z "${INFORMANT:-}" ]; then
  INFORMANT=target/debug/informant
  if [ -x target/release/informant ]; then INFORMANT=target/release/informant; fi
fi
WEBHOOK_PORT=9443
HOOK_PORT=18080

say() { echo "bench-admission: $*" >&2; }
die() {
  say "$*"
  exit 1
}

if ! why=$(bash "$CLUSTER_SH" check); then
  say "cannot run: $why"
  exit 3
fi
[ -x "$INFORMANT" ] || die "no $INFORMANT (cargo build --release --bin informant)"
bash "$CLUSTER_SH" build

dir=$(mktemp -d "${TMPDIR:-/tmp}/informant-bench-admission.XXXXXX")
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  bash "$CLUSTER_SH" down "$dir" || true
  if [ -n "${E2E_KEEP_LOGS:-}" ]; then say "logs kept in $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash "$CLUSTER_SH" up "$dir"
# shellcheck source=/dev/null
source "$dir/env"
export KUBECONFIG CLUSTER_SERVER
in_ns() { nsenter --net="/run/netns/$CLUSTER_NETNS" "$@"; }
k() { in_ns "$KUBECTL" "$@"; }

# wait_for SECONDS WHAT CMD...: polls CMD every 0.2 s until it succeeds; on timeout shows what
# CMD (and the last probe) said, and the manager's last log lines.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      "$@" >&2 || true
      cat "$dir/probe.out" >&2 2>/dev/null || true
      tail -n 20 "$dir/manager.log" >&2 2>/dev/null || true
      die "timed out waiting for $what"
    fi
    sleep 0.2
  done
}

k apply -f crds/ >/dev/null
wait_for 30 "informant's CRDs established" k wait --for=condition=Established --timeout=1s \
  crd/cacheconfigs.informant.dev crd/controllers.informant.dev
cluster_ip=${CLUSTER_SERVER#https://}
cluster_ip=${cluster_ip%:*}
k create namespace bench >/dev/null
k apply -f - >/dev/null <<EOF
apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: config, namespace: bench}
spec:
  defaultNamespaces: {bench: {}}
---
apiVersion: v1
kind: Service
metadata: {name: informant-bench, namespace: bench}
spec:
  ports: [{name: https, port: 443, targetPort: $WEBHOOK_PORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: informant-bench
  namespace: bench
  labels: {kubernetes.io/service-name: informant-bench}
addressType: IPv4
endpoints: [{addresses: ["$cluster_ip"], conditions: {ready: true}}]
ports: [{name: https, port: $WEBHOOK_PORT, protocol: TCP}]
EOF

# nsenter execs the program: $! is the process to stop.
nsenter --net="/run/netns/$CLUSTER_NETNS" "$PYTHON" e2e/cluster/bench/hook_server.py 127.0.0.1 "$HOOK_PORT" >"$dir/hook.log" 2>&1 &
pids+=($!)
wait_for 10 "the webhook hook listening" grep -q listening "$dir/hook.log"

nsenter --net="/run/netns/$CLUSTER_NETNS" "$INFORMANT" run --cache-config bench/config --health-addr 127.0.0.1:18081 \
  --metrics-addr 127.0.0.1:18082 --webhook-service informant-bench \
  --webhook-service-namespace bench --webhook-addr "$cluster_ip:$WEBHOOK_PORT" \
  --hook-allow-url "127.0.0.1:$HOOK_PORT" --hook-allow-http \
  --hook-allow-exec "$ROOT/e2e/cluster/bench/" >"$dir/manager.log" 2>&1 &
pids+=($!)
ready() { [ "$(in_ns curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18081/readyz)" = 200 ]; }
wait_for 60 "the manager's /readyz" ready

# deny_probe: a dry-run create of a ConfigMap labelled deny=yes is refused by a bench hook.
deny_probe() {
  k -n bench create --dry-run=server -f - >"$dir/probe.out" 2>&1 <<'EOF' || true
apiVersion: v1
kind: ConfigMap
metadata: {name: probe, namespace: bench, labels: {deny: "yes"}}
EOF
  grep -q 'denied by the bench' "$dir/probe.out"
}
not_denied() { ! deny_probe; }

# controller [HOOK]: the Controller `bench` of ConfigMaps (its own hook reconcile.sh, persistent:
# one cheap call per created ConfigMap, the same in every figure), with one Validating admission
# hook HOOK (YAML flow) if given. Server-side apply by one field manager: a figure's hook is the
# only one.
controller() {
  local admission=""
  if [ -n "${1:-}" ]; then
    admission="  admission: [{name: allow, type: Validating, failurePolicy: Fail, hook: $1}]"
  fi
  k apply --server-side --force-conflicts -f - >/dev/null <<EOF
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: bench, namespace: bench}
spec:
  for: {apiVersion: v1, kind: ConfigMap}
  hook: {exec: {command: [$ROOT/e2e/cluster/bench/reconcile.sh], mode: persistent}}
$admission
EOF
}

results=()
# measure LABEL: a warm-up, then COUNT creates at concurrency 1 and at 16.
measure() {
  local label=$1 c line
  in_ns env CLUSTER_SERVER="$CLUSTER_SERVER" "$PYTHON" e2e/cluster/bench/load.py "$dir" bench \
    "warm-$label" 32 16 >/dev/null
  for c in 1 16; do
    line=$(in_ns env CLUSTER_SERVER="$CLUSTER_SERVER" "$PYTHON" e2e/cluster/bench/load.py "$dir" \
      bench "$label-c$c" "$COUNT" "$c")
    say "$label, concurrency $c: $line"
    results+=("$label $c $line")
  done
}

controller
wait_for 60 "the bench Controller Ready" k -n bench wait --for=condition=Ready --timeout=1s \
  controller/bench
measure none
controller "{webhook: {url: \"http://127.0.0.1:$HOOK_PORT/\"}}"
wait_for 60 "the webhook hook in the admission path" deny_probe
measure webhook
controller
wait_for 60 "the webhook hook out of the path" not_denied
controller "{exec: {command: [$ROOT/e2e/cluster/bench/persistent.sh], mode: persistent}}"
wait_for 60 "the persistent hook in the admission path" deny_probe
measure persistent
fates=$(in_ns curl -s http://127.0.0.1:18082/metrics | grep '^informant_admission_total' || true)
# Every create measured with a hook (and its warm-up) is one review with one fate, `allowed`.
expected=0
for r in "${results[@]}"; do
  read -r label _ rest <<<"$r"
  if [ "$label" != none ]; then expected=$((expected + $(sed -n 's/.*count=\([0-9]*\).*/\1/p' <<<"$rest"))); fi
done
expected=$((expected + 2 * 32))
allowed=$(sed -n 's/.*fate="allowed"} \([0-9]*\)$/\1/p' <<<"$fates")
[ "${allowed:-0}" = "$expected" ] ||
  die "the hooks allowed ${allowed:-0} creates, not the $expected measured (and warm-ups): $fates"

echo
echo "Admission through kube-apiserver $CLUSTER_VERSION ($INFORMANT; $COUNT creates a figure)"
echo "| hook | concurrency | create p50 | create p99 | creates/s |"
echo "|---|---|---|---|---|"
for r in "${results[@]}"; do
  read -r label c rest <<<"$r"
  p50=$(sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p' <<<"$rest")
  p99=$(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<<"$rest")
  rate=$(sed -n 's/.*rate=\([0-9]*\).*/\1/p' <<<"$rest")
  n=$(sed -n 's/.*count=\([0-9]*\).*/\1/p' <<<"$rest")
  echo "| $label | $c | $p50 ms | $p99 ms | $rate ($n creates) |"
done
echo
echo "The manager's admission fates (informant_admission_total; $expected creates went through a hook):"
echo "$fates"
