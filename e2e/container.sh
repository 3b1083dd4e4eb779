#!/usr/bin/env bash
# The e2e scenarios (e2e/scenarios.sh) on the image built from the Dockerfile, each replica run
# as the Helm chart's pod would run: the container harness.
#
#   bash e2e/run.sh container        (the same as bash e2e/container.sh)
#
# What it does, as a cluster would:
# - builds the image from the Dockerfile with podman (e2e/lib/images.sh: the real bases where a
#   registry serves them, local Debian stand-ins where none is reachable);
# - makes a node: a network namespace with a bridge (10.244.0.1/24) where the embedded API
#   server (`informant apiserver --authorization rbac`, HTTPS), kubectl and the scenarios' hook
#   server run; every pod gets a network namespace of its own on that bridge, its own address and
#   its own ports, as a pod does. Nothing leaves the namespaces this script made;
# - renders the chart with Helm's engine (e2e/lib/pod.py render) and applies its CRDs, RBAC,
#   ServiceAccount, CacheConfig, Deployment and Service;
# - runs each replica of the Deployment as the kubelet runs its pod (e2e/lib/pod.py
#   podman-args): the image, the rendered args and env (the pod name through the downward API),
#   the container securityContext (uid 65532, read-only root filesystem, every capability
#   dropped, no privilege escalation, the runtime's default seccomp), the /tmp emptyDir, and
#   in-cluster configuration only — the ServiceAccount's token (TokenRequest, rotated before it
#   expires as the kubelet rotates projected tokens), the server's CA and the namespace at
#   /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST and _PORT — and no
#   kubeconfig; polls the readiness probe from the rendered spec (path, port, period) as the
#   kubelet does, and readiness gates the scenarios;
# - checks what the pod may do: uid 65532, no capability, no new privileges, seccomp on, a
#   write anywhere but /tmp refused; the image's release binary refuses test-only flags;
# - runs the scenarios, the leader hand-over (two pods) and the shard scenario (three) included.
#
# Needs root (network namespaces, podman's rootful storage), podman with runc, iproute2, curl,
# kubectl, python3 with helm-python-sdk (INFORMANT_PYTHON, as scripts/test installs it), and
# debootstrap where no registry serves the Dockerfile's bases. `bash e2e/container.sh --check`
# says whether this machine can run it (exit 0) or why not (exit 3): scripts/test then reports
# the suite as skipped, never as passed.
#
# Environment:
#   E2E_IMAGE        image name:tag to build and run (default informant:e2e)
#   E2E_SKIP_BUILD   1: run the image E2E_IMAGE as it is (it must exist)
#   E2E_KEEP_LOGS    1: keep the work directory (logs, kubeconfig, pod dirs) when it fails
#   E2E_TOKEN_TTL    seconds each pod's token lives (default 90; needs the server's
#                    --token-min-expiration below it)
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=e2e/lib/common.sh
source e2e/lib/common.sh
# shellcheck source=e2e/lib/images.sh
source e2e/lib/images.sh

IMAGE=${E2E_IMAGE:-informant:e2e}
NODE_NS=informant-e2e-node
NODE_IP=10.244.0.1
API_PORT=6443
PYTHON=${INFORMANT_PYTHON:-python3}

# can_run: why this machine cannot run the harness, or nothing.
cannot_run() {
  if [ "$(id -u)" != 0 ]; then echo "not root (network namespaces and podman's storage need it)"; return; fi
  local tool
  for tool in podman runc ip nsenter curl "$KUBECTL"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found"; return; }
  done
  "$PYTHON" -c 'import helm_python, yaml' 2>/dev/null || { echo "$PYTHON cannot import helm_python (pip install helm-python-sdk)"; return; }
  ip netns list >/dev/null 2>&1 || { echo "ip netns does not work here"; return; }
  podman info >/dev/null 2>&1 || { echo "podman info fails: $(podman info 2>&1 | tail -n1)"; return; }
  if ! podman image exists "$LOCAL_BASE" && ! command -v debootstrap >/dev/null 2>&1 &&
    ! registry_reachable docker.io/library/rust:1.95-bookworm; then
    echo "no registry serves the Dockerfile's bases and debootstrap is missing"
    return
  fi
}

if [ "${1:-}" = --figures ]; then
  export E2E_FIGURES=1
  shift
fi
if [ "${1:-}" = --check ]; then
  why=$(cannot_run)
  if [ -n "$why" ]; then
    echo "the container harness cannot run here: $why"
    exit 3
  fi
  exit 0
fi

if [ -z "${E2E_IN_NODE:-}" ]; then
  # The host's side: check, build the image (cargo reaches the crate registry from here), make
  # the node's network namespace, run the rest inside it, and remove the namespaces at exit.
  why=$(cannot_run)
  [ -z "$why" ] || { echo "e2e (container): cannot run: $why" >&2; exit 3; }
  if [ "${E2E_SKIP_BUILD:-}" != 1 ]; then
    step "build the image $IMAGE from the Dockerfile (podman)"
    build_start=$SECONDS
    build_image "$IMAGE"
    note "built in $((SECONDS - build_start)) s; $(podman image inspect "$IMAGE" --format '{{.Size}}' | awk '{ printf "%.1f MB", $1 / 1e6 }')"
  fi
  podman image exists "$IMAGE" || fail "no image $IMAGE"
  if [ ! -x "${INFORMANT:-target/debug/informant}" ]; then cargo build --quiet --bin informant; fi
  remove_namespaces() {
    local ns
    for ns in $(ip netns list | awk '{print $1}' | grep "^$NODE_NS"); do ip netns delete "$ns" 2>/dev/null || true; done
  }
  remove_namespaces
  trap remove_namespaces EXIT
  ip netns add "$NODE_NS"
  ip -n "$NODE_NS" link set lo up
  status=0
  # nsenter, not `ip netns exec`: that one mounts a new /sys, without the cgroup mounts podman
  # and runc need.
  E2E_IN_NODE=1 nsenter --net="/run/netns/$NODE_NS" bash "$0" "$@" || status=$?
  exit "$status"
fi

# --- inside the node's network namespace ---------------------------------------------------

# shellcheck source=e2e/scenarios.sh
source e2e/scenarios.sh
set -E
trap 'on_error "$LINENO" "$BASH_COMMAND" "$?"' ERR

INFORMANT=${INFORMANT:-target/debug/informant}
INFORMANT=$(cd "$(dirname "$INFORMANT")" && pwd)/$(basename "$INFORMANT")
RELEASE=informant
E2E_NS=informant-system
E2E_CC=""
E2E_LEASE=""
E2E_WAIT=${E2E_WAIT:-60}
E2E_TAKEOVER_TIMEOUT=60
E2E_SPEC=$PWD/e2e/testdata/spec.json
E2E_RBAC=informant-e2e-extra-read
TOKEN_TTL=${E2E_TOKEN_TTL:-90}

work=$(mktemp -d)
chmod 0755 "$work"
server_pid=""
hook_pid=""
release_docs="" # the rendered chart of the current release
# The pods (e2e/lib/pods.sh): on the node's bridge, calling the server at its address.
POD_NETNS=$NODE_NS
POD_GATEWAY=$NODE_IP
POD_API_HOST=$NODE_IP
POD_API_PORT=$API_PORT
POD_CA_FILE=$work/ca.crt
# shellcheck source=e2e/lib/pods.sh
source e2e/lib/pods.sh
pods_bridge # the node's bridge, where the server and every pod are

cleanup() {
  local status=$?
  harness_hook_stop
  pods_cleanup
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
trap 'exit 130' INT
trap 'exit 143' TERM

harness_logs() {
  echo "== server log (last 20 lines)"
  tail -n 20 "$work/server.log" 2>/dev/null || true
  echo "== hook server log (last 20 lines)"
  tail -n 20 "$work/hook.log" 2>/dev/null || true
  pods_logs
}


# render VALUES-JSON: the chart rendered by Helm's engine, as a file of JSON documents.
render() {
  local out="$work/chart-$((++render_count)).json"
  pod_py render charts/informant "$1" "$RELEASE" "$E2E_NS" >"$out"
  echo "$out"
}
render_count=0

# The chart's values for this harness: the image built here, never pulled.
values() { # values EXTRA-JSON
  printf '%s' "$1" | "$PYTHON" -c '
import json, sys
v = {"image": {"repository": sys.argv[1], "tag": sys.argv[2], "pullPolicy": "Never"}}
v.update(json.load(sys.stdin))
print(json.dumps(v))' "${IMAGE%:*}" "${IMAGE##*:}"
}

# apply_release DOCS: the objects of the rendered chart, as `helm install` creates them
# (kinds whose API the server does not serve, like a ServiceMonitor without its CRD, are
# skipped, as on a cluster without the Prometheus operator the chart would not render them).
apply_release() {
  "$PYTHON" -c '
import json, sys
for d in json.load(open(sys.argv[1])):
    if d["kind"] in ("ServiceMonitor",):
        continue
    print(json.dumps(d))' "$1" | k apply -f - >/dev/null
}

delete_release() {
  "$PYTHON" -c '
import json, sys
for d in json.load(open(sys.argv[1])):
    if d["kind"] in ("ServiceMonitor", "CustomResourceDefinition"):
        continue
    print(json.dumps(d))' "$1" | k delete --wait=true --ignore-not-found -f - >/dev/null
}

first_pod() { release_pods "$release_docs" | head -n1; }

# The metrics scheme, port and credentials of the rendered args: HTTPS with a bearer token when
# the chart runs --metrics-secure, plain HTTP otherwise.
METRICS_SA=e2e-metrics-reader
metrics_curl() { # metrics_curl POD PATH
  local pod=$1 addr port
  addr=$(pod_py arg "${pod_docs[$pod]}" --metrics-addr)
  port=${addr##*:}
  if pod_py has-arg "${pod_docs[$pod]}" --metrics-secure; then
    curl -sf -k -H "Authorization: Bearer $(cat "$work/metrics-token")" "https://${pod_ip[$pod]}:$port$2"
  else
    curl -sf "http://${pod_ip[$pod]}:$port$2"
  fi
}

harness_install() {
  # The chart's defaults (secure metrics, a restricted hook policy) but for the hook server of
  # scenario 4, which runs on the node and answers plain HTTP, as kind's values allow its own.
  release_docs=$(render "$(values "{\"replicaCount\": 2, \"hooks\": {\"allowURLs\": [\"$NODE_IP\"], \"allowHTTP\": true}, \"cacheConfig\": {\"spec\": $(tr -d '\n' <"$E2E_SPEC")}}")")
  k apply -f charts/informant/crds/ >/dev/null
  k wait --for condition=established --timeout="${E2E_WAIT}s" crd/cacheconfigs.informant.dev >/dev/null
  k create namespace "$E2E_NS" >/dev/null
  apply_release "$release_docs"
  E2E_CC=$(pod_py arg "$release_docs" --cache-config)
  E2E_CC=${E2E_CC#*/}
  E2E_LEASE=$(pod_py arg "$release_docs" --lease-name)
  note "CacheConfig $E2E_NS/$E2E_CC, Lease $E2E_NS/$E2E_LEASE"
  # As on kind: the scenarios' edits widen the scope beyond what the chart derived at install.
  local sa
  sa=$(deployment_value "$release_docs" 'd["spec"]["template"]["spec"].get("serviceAccountName", "default")')
  k apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: $E2E_RBAC}
rules:
- {apiGroups: [""], resources: [configmaps, secrets, namespaces], verbs: [get, list, watch]}
- {apiGroups: [batch], resources: [jobs, cronjobs], verbs: [get, list, watch]}
- {apiGroups: [batch], resources: [cronjobs/status], verbs: [patch]}
EOF
  k create clusterrolebinding "$E2E_RBAC" --clusterrole="$E2E_RBAC" --serviceaccount="$E2E_NS:$sa" >/dev/null
  grant_metrics_reader "$release_docs"
  # One replica for scenarios 1-5 (only the leader records Events and calls hooks, and /metrics
  # is read from one pod), a second for scenario 6, as on kind.
  start_pod "$release_docs"
  check_pod_confinement "$LAST_POD"
}

# grant_metrics_reader DOCS: who scrapes, as Prometheus does: a ServiceAccount bound to the
# release's metrics-reader ClusterRole, and its token for metrics_curl.
grant_metrics_reader() {
  k -n "$E2E_NS" create serviceaccount "$METRICS_SA" >/dev/null
  local reader
  reader=$("$PYTHON" -c 'import json,sys; print(next((d["metadata"]["name"] for d in json.load(open(sys.argv[1])) if d["kind"]=="ClusterRole" and d["metadata"]["name"].endswith("metrics-reader")), ""))' "$1")
  if [ -n "$reader" ]; then
    k create clusterrolebinding e2e-metrics-reader --clusterrole="$reader" --serviceaccount="$E2E_NS:$METRICS_SA" >/dev/null
  fi
  k -n "$E2E_NS" create token "$METRICS_SA" --duration 1h >"$work/metrics-token"
}

revoke_metrics_reader() {
  k delete clusterrolebinding e2e-metrics-reader --ignore-not-found >/dev/null
  k -n "$E2E_NS" delete serviceaccount "$METRICS_SA" --ignore-not-found >/dev/null
}

harness_metrics() { metrics_curl "$(first_pod)" /metrics; }

harness_health() {
  local pod code port
  pod=$(first_pod)
  port=$(pod_py port "${pod_docs[$pod]}" health)
  code=$(curl -s -o "$work/health.body" -w '%{http_code}' "http://${pod_ip[$pod]}:$port$1") || return 1
  echo "$code $(cat "$work/health.body")"
}

# LIST requests served per resource, from the embedded server's /debug/requests.
harness_list_count() {
  k get --raw /debug/requests |
    grep -o "\"verb\":\"list\",\"group\":\"[^\"]*\",\"resource\":\"$1\",\"count\":[0-9]*" |
    awk -F: '{ s += $NF } END { print s + 0 }'
}

harness_scale_out() { start_pod "$release_docs"; }

harness_stop_leader() {
  # client-go's identity is <hostname>_<uuid>, and a pod's hostname is its name.
  local pod=${1%_*}
  [ -n "${pod_ip[$pod]:-}" ] || fail "no running pod has the Lease identity $1"
  note "stopping pod $pod"
  stop_pod "$pod"
}

# The hook of scenario 4 as a webhook on the node (examples/hooks/serve-exec.py in front of the
# exec hook): the image has no Python, as on kind, where it runs in a pod of its own.
hook_listening() { grep -q '^[0-9]' "$work/hook.port" || ! kill -0 "$hook_pid" 2>/dev/null; }

harness_hook_start() {
  python3 examples/hooks/serve-exec.py --host "$NODE_IP" 0 python3 "$PWD/$1" >"$work/hook.port" 2>"$work/hook.log" &
  hook_pid=$!
  wait_until "$E2E_WAIT" "the hook server prints its port" hook_listening
  kill -0 "$hook_pid" 2>/dev/null || fail "the hook server exited: $(cat "$work/hook.log")"
  E2E_HOOK="{\"webhook\": {\"url\": \"http://$NODE_IP:$(head -n1 "$work/hook.port")/\", \"timeout\": \"10s\"}}"
}

harness_hook_stop() {
  if [ -n "$hook_pid" ]; then
    kill "$hook_pid" 2>/dev/null || true
    wait "$hook_pid" 2>/dev/null || true
    hook_pid=""
  fi
}

harness_uninstall() {
  local pod
  for pod in $(release_pods "$release_docs"); do stop_pod "$pod"; done
  k delete clusterrolebinding "$E2E_RBAC" --ignore-not-found >/dev/null
  k delete clusterrole "$E2E_RBAC" >/dev/null
  revoke_metrics_reader
  delete_release "$release_docs"
}

harness_leftovers() {
  local pod
  for pod in "${pods_running[@]}"; do echo "pod $pod"; done
  local selector="app.kubernetes.io/instance=$RELEASE"
  k -n "$E2E_NS" get deployments,services,serviceaccounts,roles,rolebindings,cacheconfigs -l "$selector" -o name
  k get clusterroles,clusterrolebindings -l "$selector" -o name
  k get clusterroles,clusterrolebindings -o name | grep -F "$E2E_RBAC" || true
  k get roles,rolebindings -A -l "$selector" -o name
}

shard_docs=""
harness_shard_install() {
  shard_docs=$(render "$(values "{\"replicaCount\": 1, \"sharding\": {\"enabled\": true, \"allowSingleReplica\": true, \"ring\": \"$SHARD_RING\", \"key\": \"$SHARD_KEY\"}, \"cacheConfig\": {\"spec\": $1}}")")
  apply_release "$shard_docs"
  grant_metrics_reader "$shard_docs"
  E2E_SHARD_CC=$(pod_py arg "$shard_docs" --cache-config)
  E2E_SHARD_CC=${E2E_SHARD_CC#*/}
  harness_shard_scale 1
}

harness_shard_scale() {
  local want=$1 have
  have=$(release_pods "$shard_docs" | grep -c . || true)
  while [ "$have" -lt "$want" ]; do
    start_pod "$shard_docs"
    have=$((have + 1))
  done
  # A Deployment scaled down removes its newest pods first.
  while [ "$have" -gt "$want" ]; do
    local newest
    newest=$(release_pods "$shard_docs" | tail -n1)
    note "stopping pod $newest"
    stop_pod "$newest"
    have=$((have - 1))
  done
}

harness_member_metrics() {
  local pod
  for pod in $(release_pods "$shard_docs"); do
    echo "# member $pod"
    metrics_curl "$pod" /metrics || true
  done
}

harness_shard_uninstall() {
  harness_shard_scale 0
  revoke_metrics_reader
  delete_release "$shard_docs"
}

# check_pod_confinement POD: what the chart's securityContext promises, read from the running
# process (/proc of its pid on the node) and tried from inside: uid and gid 65532, no
# capability in any set, no new privileges, seccomp filtering; a write anywhere but /tmp fails.
check_pod_confinement() {
  local pod=$1 pid status
  pid=$(podman inspect -f '{{.State.Pid}}' "$pod")
  status=$(cat "/proc/$pid/status")
  expect_eq "the pod's process runs as uid 65532" "65532 65532 65532 65532" "$(awk '/^Uid:/ {print $2, $3, $4, $5}' <<<"$status")"
  expect_eq "the pod's process runs as gid 65532" "65532" "$(awk '/^Gid:/ {print $2}' <<<"$status")"
  local set
  for set in CapInh CapPrm CapEff CapBnd CapAmb; do
    expect_eq "the pod's process holds no capability ($set)" "0000000000000000" "$(awk -v s="$set:" '$1 == s {print $2}' <<<"$status")"
  done
  expect_eq "the pod's process cannot gain privileges (NoNewPrivs)" "1" "$(awk '/^NoNewPrivs:/ {print $2}' <<<"$status")"
  expect_eq "the pod's process is filtered by seccomp (mode 2)" "2" "$(awk '/^Seccomp:/ {print $2}' <<<"$status")"
  # Writes, tried by the image's own binary in the pod (it has no shell): `informant apiserver
  # --kubeconfig-out` writes a file, and fails at once when it cannot.
  local target out
  for target in /kubeconfig /etc/kubeconfig /var/run/secrets/kubernetes.io/serviceaccount/kubeconfig; do
    out=$(podman exec "$pod" /informant apiserver --listen 127.0.0.1:0 --kubeconfig-out "$target" 2>&1) && code=0 || code=$?
    [ "$code" -ne 0 ] || fail "the pod wrote $target: the root filesystem is not read-only"
    expect_contains "a write to $target fails read-only" "Read-only file system" "$out"
  done
  podman exec -d "$pod" /informant apiserver --listen 127.0.0.1:0 --kubeconfig-out /tmp/e2e-write-check >/dev/null
  wait_until "$E2E_WAIT" "the pod writes /tmp (its emptyDir)" test -s "$work/pods/$pod/volumes/tmp/e2e-write-check"
  # That server has done its part: stop it from the node, as nothing in the image can.
  pkill -f -- '--kubeconfig-out /tmp/e2e-write-check' || true
  rm -f "$work/pods/$pod/volumes/tmp/e2e-write-check"
  note "confined: uid 65532, no capabilities, NoNewPrivs, seccomp, read-only but /tmp"
}

token_expired() { [ "$(date +%s)" -gt "$1" ]; }
token_rotated() { [ "$(grep -c . "$1/token-expiries")" -gt 1 ]; }

# Scenario 10 (this harness only): the kubelet replaced the leader's token file before the
# first token expired; once that token is dead, an edit still reaches the leader and its status
# write is accepted, so the manager re-read the file (kube-rs re-reads it about once a minute,
# as client-go does). Its log shows no refused request.
scenario_token_rotation() {
  step "10. token rotation: the leader outlives its first token and stays authenticated"
  local holder pod dir first
  holder=$(lease_holder)
  pod=${holder%_*}
  dir="$work/pods/$pod"
  [ -d "$dir" ] || fail "the Lease holder $holder is no pod of this harness"
  first=$(head -n1 "$dir/token-expiries")
  note "leader $pod; its first token expires at $(date -u -d "@$first" +%T) (now $(date -u +%T))"
  wait_until $((TOKEN_TTL + E2E_WAIT)) "the kubelet rotated $pod's token" token_rotated "$dir"
  wait_until $((TOKEN_TTL + E2E_WAIT)) "$pod's first token expired" token_expired "$first"
  edit '[{"op":"add","path":"/spec/syncPeriod","value":"10h"}]'
  wait_condition Valid True
  local refused
  refused=$(podman logs "$pod" 2>&1 | grep -i -m3 'unauthorized' || true)
  expect_eq "the leader was never refused (401) after its token rotated" "" "$refused"
  echo "ok: $pod wrote status $(($(date +%s) - first)) s after its first token expired"
}

step "start informant apiserver on the node ($NODE_IP:$API_PORT, RBAC)"
FIGURES_OBJECTS=${E2E_FIGURES_OBJECTS:-10000}
FIGURES_SPEC='{"byObject": [{"apiVersion": "v1", "kind": "ConfigMap", "namespaces": {"e2e-mem": {}}}]}'
seed=()
if [ "${E2E_FIGURES:-}" = 1 ]; then
  # FIGURES_OBJECTS ConfigMaps of about 1 KiB of JSON in e2e-mem, seeded at the server's start.
  "$PYTHON" -c '
import json, sys
n = int(sys.argv[1])
print(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "e2e-mem"}}))
for i in range(n):
    print("---")
    print(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": f"cm-{i:05d}", "namespace": "e2e-mem", "labels": {"app": "figures"}},
                      "data": {"payload": "x" * 900, "index": str(i)}}))' "$FIGURES_OBJECTS" >"$work/seed.yaml"
  seed=(--seed "$work/seed.yaml")
fi
"$INFORMANT" apiserver --listen "$NODE_IP:$API_PORT" --authorization rbac "${seed[@]}" \
  --token-min-expiration 30s --kubeconfig-out "$work/kubeconfig" >"$work/addr" 2>"$work/server.log" &
server_pid=$!
wait_until "$E2E_WAIT" "the server prints its address" grep -q '^https://' "$work/addr"
export KUBECONFIG="$work/kubeconfig"
note "server at $(head -n1 "$work/addr")"
# The server's CA, which every pod gets as its ca.crt.
"$PYTHON" -c 'import base64,sys,yaml; c=yaml.safe_load(open(sys.argv[1])); sys.stdout.write(base64.b64decode(c["clusters"][0]["cluster"]["certificate-authority-data"]).decode())' \
  "$KUBECONFIG" >"$POD_CA_FILE"
kubelet_start

# --- figures (bash e2e/container.sh --figures): the image, measured -----------------------

vm_rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
readyz_200() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$1")" = 200 ]; }
cm_objects() { # cm_objects NAME: the ConfigMap informer's object count in the CacheConfig NAME's status
  k -n "$E2E_NS" get cc "$1" -o 'jsonpath={.status.informers[?(@.kind=="ConfigMap")].objects}'
}
has_objects() { [ "$(cm_objects "$1")" = "$2" ]; }
now_ms() { date +%s%3N; }

# One manager, in the pod or on the node: start to /readyz 200 (polled every 0.1 s), RSS at idle
# (an empty CacheConfig), then RSS with FIGURES_OBJECTS ConfigMaps cached once the informer
# counts them all in status.
figures_run() { # figures_run pod|host
  local where=$1 docs pid start ready addr cc
  # The chart derives its RBAC from the spec it installs: install the one that caches the
  # ConfigMaps, then empty the spec for the idle figure.
  docs=$(render "$(values "{\"replicaCount\": 1, \"cacheConfig\": {\"spec\": $FIGURES_SPEC}}")")
  apply_release "$docs"
  cc=$(pod_py arg "$docs" --cache-config)
  cc=${cc#*/}
  k -n "$E2E_NS" patch cc "$cc" --type json -p '[{"op": "replace", "path": "/spec", "value": {}}]' >/dev/null
  start=$(now_ms)
  if [ "$where" = pod ]; then
    local saved_wait=$E2E_WAIT
    start_pod_quiet "$docs"
    pid=$(podman inspect -f '{{.State.Pid}}' "$LAST_POD")
    addr="http://${pod_ip[$LAST_POD]}:$(pod_py port "$docs" health)/readyz"
    E2E_WAIT=$saved_wait
  else
    local args=()
    # The chart's args but its listen addresses, which the node's loopback replaces.
    mapfile -t args < <("$PYTHON" -c '
import json, sys
d = [x for x in json.load(open(sys.argv[1])) if x["kind"] == "Deployment"][0]
args, out, skip = d["spec"]["template"]["spec"]["containers"][0]["args"], [], False
for a in args:
    if skip:
        skip = False
    elif a in ("--metrics-addr", "--health-addr"):
        skip = True
    else:
        out.append(a)
print("\n".join(out))' "$docs")
    local port
    port=$(pod_py port "$docs" health)
    # The image's own binary, with the chart's args, a kubeconfig instead of in-cluster config.
    TMPDIR=$work "$work/informant-image" "${args[@]}" --kubeconfig "$KUBECONFIG" \
      --health-addr "127.0.0.1:$port" --metrics-addr 127.0.0.1:0 >"$work/host-manager.log" 2>&1 &
    pid=$!
    addr="http://127.0.0.1:$port/readyz"
  fi
  wait_until 120 "$where: /readyz 200" readyz_200 "$addr"
  ready=$(now_ms)
  local idle
  idle=$(vm_rss_kb "$pid")
  k -n "$E2E_NS" patch cc "$cc" --type json -p "[{\"op\": \"replace\", \"path\": \"/spec\", \"value\": $FIGURES_SPEC}]" >/dev/null
  wait_until 300 "$where: $FIGURES_OBJECTS ConfigMaps cached" has_objects "$cc" "$FIGURES_OBJECTS"
  local full
  full=$(vm_rss_kb "$pid")
  awk -v w="$where" -v ms=$((ready - start)) -v idle="$idle" -v n="$FIGURES_OBJECTS" -v full="$full" 'BEGIN {
    printf "%-5s start to /readyz 200: %5d ms   RSS idle: %6.1f MiB   RSS with %d ConfigMaps: %6.1f MiB\n", w, ms, idle / 1024, n, full / 1024 }'
  if [ "$where" = pod ]; then stop_pod "$LAST_POD"; else kill "$pid"; wait "$pid" 2>/dev/null || true; fi
  delete_release "$docs"
}

# start_pod with the readiness probe polled every 0.1 s instead of periodSeconds, so the figure
# is the manager's start, not the probe's period.
start_pod_quiet() {
  FAST_PROBE=1 start_pod "$1" >/dev/null
}

if [ "${E2E_FIGURES:-}" = 1 ]; then
  step "figures: the image $IMAGE"
  podman image inspect "$IMAGE" --format '{{.Size}}' | awk '{ printf "image size: %.1f MB (%d bytes)\n", $1 / 1e6, $1 }'
  podman create --name informant-figures-copy "$IMAGE" >/dev/null
  podman cp informant-figures-copy:/informant "$work/informant-image"
  podman rm informant-figures-copy >/dev/null
  stat -c %s "$work/informant-image" | awk '{ printf "binary: %.1f MB\n", $1 / 1e6 }'
  k apply -f charts/informant/crds/ >/dev/null
  k wait --for condition=established --timeout="${E2E_WAIT}s" crd/cacheconfigs.informant.dev >/dev/null
  k create namespace "$E2E_NS" >/dev/null
  figures_run pod
  figures_run host
  exit 0
fi

step "the image's release binary refuses the test-only --shard-skip-handover"
out=$(podman run --rm "${PODMAN_FLAGS[@]}" "${PODMAN_ULIMITS[@]}" --network none "$IMAGE" run --shard-skip-handover 2>&1) && code=0 || code=$?
expect_eq "informant run --shard-skip-handover exits 2 (usage) in the image" "2" "$code"
expect_contains "and says the flag is unknown" "unexpected argument '--shard-skip-handover'" "$out"

# The scenarios of run_scenarios, with the token rotation (the leader outlives its first token)
# between the namespace scenario and the uninstall, while a leader still runs.
scenario_install
scenario_reload
scenario_invalid
scenario_cronjob "$work"
scenario_fates
scenario_leader
scenario_namespaces "$work"
scenario_token_rotation
scenario_uninstall
scenario_shard "$work"

echo "PASS: e2e (container), ${SECONDS}s"
