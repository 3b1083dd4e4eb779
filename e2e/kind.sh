#!/usr/bin/env bash
# The e2e scenarios (e2e/scenarios.sh) on a kind cluster, with informant installed as users
# install it: the container image (Dockerfile) and the Helm chart (charts/informant).
#
#   bash e2e/kind.sh
#   KIND_EXPERIMENTAL_PROVIDER=podman bash e2e/kind.sh    # podman, and a node image built here
#
# Steps: create a kind cluster (e2e/testdata/kind-cluster.yaml: Kubernetes' CronJob and Job
# controllers off, so that scenario 4's hook is the only CronJob watcher); `docker build` the
# image and `kind load docker-image` it (podman: build_image of e2e/lib/images.sh, `podman save`
# and `kind load image-archive`);
# `helm install` the chart with replicaCount=2 (leader election on) and the suite's CacheConfig
# spec (e2e/testdata/spec.json, through --set-json cacheConfig.spec=...); run the same scenarios
# as the embedded harness; collect logs; delete the cluster.
#
# Needs docker, kind (v0.20+), helm (v3.10+ for --set-json), kubectl, curl, python3 and cargo
# (the host's `informant` binary runs `simulate` for scenario 4).
#
# With KIND_EXPERIMENTAL_PROVIDER=podman (or no docker but podman): podman instead of docker,
# kind from PATH or target/cluster/kind (built from e2e/cluster/kind), a containers.conf of the
# run's own (runc, ulimits within the machine's hard limits: kind's `podman run` passes none),
# and, unless KIND_NODE_IMAGE names one, the node image of e2e/kind-node.sh with
# e2e/testdata/kind-cluster-local.yaml (no registry needed); the hook's python:3.13-slim is then
# the local Python image of e2e/lib/images.sh, loaded under that name. kind's podman provider
# mounts /lib/modules, which must exist on the host (an empty directory will do).
#
# Environment:
#   KIND_CLUSTER      cluster name (default informant-e2e); an existing cluster of that name is
#                     used as is and kept (its kube-controller-manager must run with
#                     --controllers=*,-cronjob-controller,-job-controller, as the config above)
#   KIND_NODE_IMAGE   node image, for a given Kubernetes version (default: kind's)
#   E2E_IMAGE         image name:tag built and loaded (default informant:e2e; podman:
#                     localhost/informant:e2e, the name podman stores it under)
#   E2E_IMAGE_BUILT   1: E2E_IMAGE is already built (podman), load it as it is
#   INFORMANT         the host's informant binary (default: cargo build's)
#   E2E_ARTIFACTS     where logs are collected (default $TMPDIR/informant-e2e-kind-<date>)
#   E2E_KEEP_CLUSTER  1: do not delete the cluster at the end (to poke at it with kubectl)
#
# What differs from the embedded harness, and why:
# - The chart renders --leader-elect only when replicaCount > 1, so the release is installed
#   with 2 replicas and scaled to 1 for scenarios 1-5 (so that /metrics, read through
#   port-forward, is the leader's: only the leader records Events and calls hooks), then back to
#   2 for scenario 6.
#   `kubectl scale` keeps the rendered arguments; `helm upgrade` would also reapply
#   cacheConfig.spec over the edits the scenarios made with kubectl.
# - The chart's RBAC is derived from cacheConfig.spec at install/upgrade time: a kubectl edit
#   that widens the scope (scenario 2 adds a namespace, scenario 7 a namespace selector) needs
#   more. The suite binds the release's
#   ServiceAccount to a ClusterRole of its own (list/watch of the kinds it uses), removed before
#   the uninstall check. Users widen the scope through `helm upgrade` instead.
# - The hook of scenario 4 is a webhook: the image has no Python, so examples/hooks/cronjob.py
#   runs behind examples/hooks/serve-exec.py in a python:3.13-slim pod of the namespace
#   e2e-hooks (both files from a ConfigMap), with a Service the manager calls; the chart's hook
#   policy allows that host over plain HTTP (hooks.allowURLs, hooks.allowHTTP).
# - LIST requests per resource are not counted (kube-apiserver has no /debug/requests); scenario
#   2 relies on informant_informer_restarts_total.
# - The Lease has controller-runtime's periods (15 s lease), so a hand-over takes up to ~20 s.
# - /metrics and the probes are reached through `kubectl port-forward` to the replica, metrics
#   over plain HTTP (metrics.secure=false: the scenarios read the counters with curl; secure
#   metrics, the chart's default, are proven by tests/manager/manager_secure_metrics.rs and the
#   chart RBAC scenario on the embedded API server).
# - Scenario 9 installs the chart again with sharding.enabled=true (one replica, so
#   sharding.allowSingleReplica=true) and scales the Deployment (kubectl scale) from 1 to 3
#   replicas and back; each replica's /metrics is read through a port-forward of its own.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=e2e/lib/common.sh
source e2e/lib/common.sh
# shellcheck source=e2e/scenarios.sh
source e2e/scenarios.sh
set -E
trap 'on_error "$LINENO" "$BASH_COMMAND" "$?"' ERR

PROVIDER=docker
if [ "${KIND_EXPERIMENTAL_PROVIDER:-}" = podman ] ||
  { ! command -v docker >/dev/null 2>&1 && command -v podman >/dev/null 2>&1; }; then
  PROVIDER=podman
  export KIND_EXPERIMENTAL_PROVIDER=podman
fi
# kind from PATH, else the one built from e2e/cluster/kind; called by its path (the function
# below is what the script calls `kind`).
KIND_BIN=$(command -v kind || true)
if [ -z "$KIND_BIN" ] && [ -x target/cluster/kind ]; then KIND_BIN=$PWD/target/cluster/kind; fi
kind() { "${KIND_BIN:-kind}" "$@"; }
tools=("$PROVIDER" "${KIND_BIN:-kind}" helm "$KUBECTL" curl python3)
if [ -z "${INFORMANT:-}" ]; then tools+=(cargo); fi
for tool in "${tools[@]}"; do
  require_command "$tool" "e2e/README.md lists what the kind suite needs"
done

CLUSTER=${KIND_CLUSTER:-informant-e2e}
IMAGE=informant:e2e
if [ "$PROVIDER" = podman ]; then IMAGE=localhost/informant:e2e; fi
IMAGE=${E2E_IMAGE:-$IMAGE}
RELEASE=informant
E2E_NS=informant-system
E2E_CC="" # set by harness_install from the release
E2E_LEASE=""
E2E_WAIT=${E2E_WAIT:-90}
E2E_TAKEOVER_TIMEOUT=90
E2E_SPEC=$PWD/e2e/testdata/spec.json
ARTIFACTS=${E2E_ARTIFACTS:-${TMPDIR:-/tmp}/informant-e2e-kind-$(date -u +%Y%m%dT%H%M%SZ)}
E2E_RBAC=informant-e2e-extra-read

work=$(mktemp -d)
created_cluster=""
created_network=""
forward_pid=""
metrics_port=""
health_port=""
deployment=""
manager_logs_collected=""

# The managers' logs (every container of the release, previous instances included) and every
# Event, while the pods still exist: before the uninstall, or at exit when the run stopped early.
collect_manager_logs() {
  mkdir -p "$ARTIFACTS"
  local pod
  for pod in $(live_pods 2>/dev/null || true); do
    k -n "$E2E_NS" logs "$pod" --all-containers --tail=-1 >"$ARTIFACTS/$pod.log" 2>&1 || true
    k -n "$E2E_NS" logs "$pod" --all-containers --previous --tail=-1 >"$ARTIFACTS/$pod.previous.log" 2>/dev/null ||
      rm -f "$ARTIFACTS/$pod.previous.log"
  done
  k get events -A -o wide >"$ARTIFACTS/events.txt" 2>&1 || true
  manager_logs_collected=1
}

stop_forward() {
  if [ -n "$forward_pid" ]; then
    kill "$forward_pid" 2>/dev/null || true
    wait "$forward_pid" 2>/dev/null || true
    forward_pid=""
  fi
}

cleanup() {
  stop_forward
  if [ -n "${KUBECONFIG:-}" ] && [ -f "$KUBECONFIG" ]; then
    if [ -z "$manager_logs_collected" ]; then collect_manager_logs; fi
    kind export logs "$ARTIFACTS/kind" --name "$CLUSTER" >/dev/null 2>&1 || true
    echo "logs collected in $ARTIFACTS"
  fi
  if [ -n "$created_cluster" ] && [ "${E2E_KEEP_CLUSTER:-}" != 1 ]; then
    kind delete cluster --name "$CLUSTER" || true
    if [ -n "$created_network" ]; then podman network rm kind >/dev/null || true; fi
  elif [ -n "$created_cluster" ]; then
    echo "cluster $CLUSTER kept: kind get kubeconfig --name $CLUSTER > kubeconfig"
  fi
  rm -rf "$work"
  rm -f "$E2E_FAIL_MARK"
}
trap cleanup EXIT
# A signal ends the script through exit, so the EXIT trap cleans up.
trap 'exit 130' INT
trap 'exit 143' TERM

harness_logs() {
  echo "== manager logs (last 60 lines per pod)"
  k -n "$E2E_NS" logs -l "app.kubernetes.io/instance=$RELEASE" --all-containers --prefix --tail=60 2>&1 || true
}

# The release's pods, "name deletionTimestamp" per line (the second field only when terminating).
pods() {
  k -n "$E2E_NS" get pods -l "app.kubernetes.io/instance=$RELEASE" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}'
}
live_pods() { pods | awk 'NF == 1 { print $1 }'; }
# Exactly one pod, and none terminating.
one_pod() { [ "$(pods | grep -c .)" = 1 ] && [ "$(live_pods | grep -c .)" = 1 ]; }
forwarding() { [ "$(grep -c '^Forwarding from 127.0.0.1' "$work/forward.log")" -ge 2 ]; }

# port-forward to the one replica: metrics and health ports on free local ports.
start_forward() {
  local pod
  pod=$(live_pods | head -n1)
  k -n "$E2E_NS" wait --for=condition=Ready "pod/$pod" --timeout="${E2E_WAIT}s" >/dev/null
  # The container ports, from the manager's flags (":8080" -> 8080).
  local metrics health
  metrics=$(manager_arg --metrics-addr)
  health=$(manager_arg --health-addr)
  metrics=${metrics##*:}
  health=${health##*:}
  k -n "$E2E_NS" port-forward --address 127.0.0.1 "pod/$pod" ":$metrics" ":$health" >"$work/forward.log" 2>&1 &
  forward_pid=$!
  wait_until "$E2E_WAIT" "kubectl port-forward to $pod" forwarding
  metrics_port=$(sed -n "s/^Forwarding from 127.0.0.1:\([0-9]*\) -> $metrics\$/\1/p" "$work/forward.log")
  health_port=$(sed -n "s/^Forwarding from 127.0.0.1:\([0-9]*\) -> $health\$/\1/p" "$work/forward.log")
  note "port-forward to $pod: metrics 127.0.0.1:$metrics_port, probes 127.0.0.1:$health_port"
}

# The value following FLAG in the manager container's arguments.
manager_arg() {
  k -n "$E2E_NS" get "$deployment" -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}' |
    awk -v flag="$1" 'found { print; exit } $0 == flag { found = 1 }'
}

harness_install() {
  helm install "$RELEASE" charts/informant --namespace "$E2E_NS" --create-namespace \
    --set "image.repository=${IMAGE%:*}" --set "image.tag=${IMAGE##*:}" --set image.pullPolicy=Never \
    --set replicaCount=2 \
    --set metrics.secure=false --set metrics.port=8080 \
    --set-json "cacheConfig.spec=$(tr -d '\n' <"$E2E_SPEC")" \
    --set-json "hooks.allowURLs=[\"hook.$HOOK_NS.svc.cluster.local:8080\"]" --set hooks.allowHTTP=true \
    --wait --timeout "${E2E_WAIT}s"
  deployment=$(k -n "$E2E_NS" get deploy -l "app.kubernetes.io/instance=$RELEASE" -o name)
  local reference
  reference=$(manager_arg --cache-config)
  E2E_CC=${reference#*/}
  E2E_LEASE=$(manager_arg --lease-name)
  [ -n "$E2E_CC" ] && [ -n "$E2E_LEASE" ] || fail "cannot read --cache-config and --lease-name from $deployment"
  note "CacheConfig $E2E_NS/$E2E_CC, Lease $E2E_NS/$E2E_LEASE"
  local sa
  sa=$(k -n "$E2E_NS" get "$deployment" -o jsonpath='{.spec.template.spec.serviceAccountName}')
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
  k -n "$E2E_NS" scale "$deployment" --replicas=1 >/dev/null
  wait_until "$E2E_WAIT" "one replica left" one_pod
  start_forward
}

harness_metrics() { curl -sf "http://127.0.0.1:$metrics_port/metrics"; }

harness_health() {
  local code
  code=$(curl -s -o "$work/health.body" -w '%{http_code}' "http://127.0.0.1:$health_port$1") || return 1
  echo "$code $(cat "$work/health.body")"
}

harness_list_count() { :; }

harness_scale_out() {
  stop_forward
  k -n "$E2E_NS" scale "$deployment" --replicas=2 >/dev/null
  k -n "$E2E_NS" rollout status "$deployment" --timeout="${E2E_WAIT}s"
}

harness_stop_leader() {
  # client-go's identity is <hostname>_<uuid>, and a pod's hostname is its name.
  local pod=${1%_*}
  note "deleting pod $pod"
  k -n "$E2E_NS" delete pod "$pod" --wait=true >/dev/null
}

HOOK_NS=e2e-hooks

harness_hook_start() {
  k create namespace "$HOOK_NS" >/dev/null
  k -n "$HOOK_NS" create configmap hook --from-file=serve-exec.py=examples/hooks/serve-exec.py \
    --from-file=hook.py="$1" >/dev/null
  k -n "$HOOK_NS" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hook, labels: {app: hook}}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65534, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: hook
    image: python:3.13-slim
    command: [python3, /hooks/serve-exec.py, --host, 0.0.0.0, "8080", python3, /hooks/hook.py]
    ports: [{containerPort: 8080}]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}}
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
    volumeMounts: [{name: hooks, mountPath: /hooks}]
  volumes: [{name: hooks, configMap: {name: hook}}]
---
apiVersion: v1
kind: Service
metadata: {name: hook}
spec:
  selector: {app: hook}
  ports: [{port: 8080}]
EOF
  # The first run pulls the image.
  k -n "$HOOK_NS" wait --for=condition=Ready pod/hook --timeout=300s >/dev/null ||
    fail "the hook pod never became Ready: $(k -n "$HOOK_NS" describe pod hook)"
  E2E_HOOK="{\"webhook\": {\"url\": \"http://hook.$HOOK_NS.svc.cluster.local:8080/\", \"timeout\": \"10s\"}}"
}

harness_hook_stop() { k delete namespace "$HOOK_NS" --wait=true --ignore-not-found >/dev/null; }

harness_uninstall() {
  stop_forward
  collect_manager_logs
  k delete clusterrolebinding "$E2E_RBAC" >/dev/null
  k delete clusterrole "$E2E_RBAC" >/dev/null
  helm uninstall "$RELEASE" --namespace "$E2E_NS" --wait --timeout "${E2E_WAIT}s"
}

# Scenario 9: the chart again, sharding on, one replica to begin with.
harness_shard_install() {
  helm install "$RELEASE" charts/informant --namespace "$E2E_NS" \
    --set "image.repository=${IMAGE%:*}" --set "image.tag=${IMAGE##*:}" --set image.pullPolicy=Never \
    --set replicaCount=1 --set sharding.enabled=true --set sharding.allowSingleReplica=true \
    --set metrics.secure=false --set metrics.port=8080 \
    --set "sharding.ring=$SHARD_RING" --set "sharding.key=$SHARD_KEY" \
    --set-json "cacheConfig.spec=$1" \
    --set-json "hooks.allowURLs=[\"hook.$HOOK_NS.svc.cluster.local:8080\"]" --set hooks.allowHTTP=true \
    --wait --timeout "${E2E_WAIT}s"
  deployment=$(k -n "$E2E_NS" get deploy -l "app.kubernetes.io/instance=$RELEASE" -o name)
  local reference
  reference=$(manager_arg --cache-config)
  E2E_SHARD_CC=${reference#*/}
  [ -n "$E2E_SHARD_CC" ] || fail "cannot read --cache-config from $deployment"
}

pod_count() { [ "$(pods | grep -c .)" = "$1" ] && [ "$(live_pods | grep -c .)" = "$1" ]; }

harness_shard_scale() {
  k -n "$E2E_NS" scale "$deployment" --replicas="$1" >/dev/null
  k -n "$E2E_NS" rollout status "$deployment" --timeout="${E2E_WAIT}s" >/dev/null
  wait_until "$E2E_WAIT" "exactly $1 replica(s), none terminating" pod_count "$1"
}

harness_member_metrics() {
  local pod port metrics pid
  metrics=$(manager_arg --metrics-addr)
  metrics=${metrics##*:}
  for pod in $(live_pods); do
    k -n "$E2E_NS" port-forward --address 127.0.0.1 "pod/$pod" ":$metrics" >"$work/member-forward.log" 2>&1 &
    pid=$!
    poll_until "$E2E_WAIT" grep -q '^Forwarding from 127.0.0.1' "$work/member-forward.log" || true
    port=$(sed -n "s/^Forwarding from 127.0.0.1:\([0-9]*\) -> $metrics\$/\1/p" "$work/member-forward.log")
    echo "# member $pod"
    curl -sf "http://127.0.0.1:$port/metrics" || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

harness_shard_uninstall() {
  helm uninstall "$RELEASE" --namespace "$E2E_NS" --wait --timeout "${E2E_WAIT}s"
}

harness_leftovers() {
  local selector="app.kubernetes.io/instance=$RELEASE"
  k -n "$E2E_NS" get deployments,replicasets,pods,services,serviceaccounts,roles,rolebindings,configmaps,secrets,poddisruptionbudgets,cacheconfigs \
    -l "$selector" -o name
  k get clusterroles,clusterrolebindings -l "$selector" -o name
  k get clusterroles,clusterrolebindings -o name | grep -F "$E2E_RBAC" || true
  # Roles the chart puts in the watched namespaces.
  k get roles,rolebindings -A -l "$selector" -o name
}

step "create the kind cluster $CLUSTER"
export KUBECONFIG="$work/kubeconfig"
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  kind get kubeconfig --name "$CLUSTER" >"$KUBECONFIG"
  note "using the existing cluster"
  if ! k -n kube-system get pods -l component=kube-controller-manager -o jsonpath='{..command}' | grep -qF -- '-cronjob-controller'; then
    fail "the cluster $CLUSTER runs Kubernetes' CronJob controller; create it with e2e/testdata/kind-cluster.yaml (or delete it and let kind.sh create it)"
  fi
else
  node_image=()
  kind_config=e2e/testdata/kind-cluster.yaml
  if [ -n "${KIND_NODE_IMAGE:-}" ]; then
    node_image=(--image "$KIND_NODE_IMAGE")
  elif [ "$PROVIDER" = podman ]; then
    step "build the kind node image (e2e/kind-node.sh)"
    node_image=(--image "$(bash e2e/kind-node.sh build)")
    kind_config=e2e/testdata/kind-cluster-local.yaml
  fi
  if [ "$PROVIDER" = podman ]; then
    [ -d /lib/modules ] || fail "kind's podman provider mounts /lib/modules, which this host lacks: mkdir /lib/modules"
    if [ -z "${CONTAINERS_CONF:-}" ]; then
      # shellcheck source=e2e/lib/images.sh
      source e2e/lib/images.sh
      printf '[containers]\ndefault_ulimits = ["nofile=%s", "nproc=%s"]\n[engine]\nruntime = "runc"\n' \
        "${PODMAN_ULIMITS[1]#nofile=}" "${PODMAN_ULIMITS[3]#nproc=}" >"$work/containers.conf"
      export CONTAINERS_CONF=$work/containers.conf
    fi
    podman network exists kind || created_network=1
  fi
  kind create cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG" --config "$kind_config" \
    --wait 180s "${node_image[@]}"
  created_cluster=1
fi

step "build and load the image $IMAGE"
if [ "$PROVIDER" = docker ]; then
  docker build -t "$IMAGE" .
  kind load docker-image "$IMAGE" --name "$CLUSTER"
else
  # shellcheck source=e2e/lib/images.sh
  source e2e/lib/images.sh
  [ "${E2E_IMAGE_BUILT:-}" = 1 ] || build_image "$IMAGE"
  podman save --quiet -o "$work/image.tar" "$IMAGE"
  kind load image-archive "$work/image.tar" --name "$CLUSTER"
  # The hook's image, by the name the hook pod asks for: the registry's where it is here, else
  # the local Python under that name.
  hook_image=docker.io/library/python:3.13-slim
  if podman image exists "$hook_image"; then
    podman save --quiet -o "$work/hook.tar" "$hook_image"
  else
    local_python
    podman tag "$LOCAL_PYTHON" "$hook_image"
    podman save --quiet -o "$work/hook.tar" "$hook_image"
    podman untag "$LOCAL_PYTHON" "$hook_image"
  fi
  kind load image-archive "$work/hook.tar" --name "$CLUSTER"
  rm -f "$work/image.tar" "$work/hook.tar"
fi

if [ -z "${INFORMANT:-}" ]; then
  step "build the host's informant (simulate for scenario 4)"
  cargo build --quiet --bin informant
  INFORMANT=$PWD/target/debug/informant
fi

run_scenarios "$work"
echo "PASS: e2e (kind), ${SECONDS}s"
