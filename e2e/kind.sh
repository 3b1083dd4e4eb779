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
# kind from PATH or target/cluster/kind (built from e2e/cluster/kind), helm from PATH or
# target/cluster/helm (cluster.sh build), a containers.conf of the
# run's own (runc, ulimits within the machine's hard limits: kind's `podman run` passes none),
# and, unless KIND_NODE_IMAGE names one, the node image of e2e/kind-node.sh with
# e2e/testdata/kind-cluster-local.yaml (no registry needed); the hook's image is then
# python:3.13-slim where podman has it, else the local Python image of e2e/lib/images.sh. kind's podman provider
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
# Scenarios 1-8 run the release's pods as e2e/lib/release.sh says (what differs from the embedded
# harness is written there: one replica for scenarios 1-5, the suite's extra read access, the hook
# as a pod, port-forward, controller-runtime's lease periods). Besides:
# - LIST requests per resource are not counted (kube-apiserver has no /debug/requests); scenario
#   2 relies on informant_informer_restarts_total.
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
# A tool from PATH, else the one built into target/cluster (kind from e2e/cluster/kind, helm by
# `cluster.sh build`), else empty; called by its path (the functions below are what the script
# calls `kind` and `helm`).
built_or_path() {
  command -v "$1" || { [ -x "target/cluster/$1" ] && echo "$PWD/target/cluster/$1"; } || true
}
KIND_BIN=$(built_or_path kind)
HELM_BIN=$(built_or_path helm)
kind() { "${KIND_BIN:-kind}" "$@"; }
helm() { "${HELM_BIN:-helm}" "$@"; }
RELEASE_HELM=${RELEASE_HELM:-${HELM_BIN:-helm}}
tools=("$PROVIDER" "${KIND_BIN:-kind}" "${HELM_BIN:-helm}" "$KUBECTL" curl python3)
if [ -z "${INFORMANT:-}" ]; then tools+=(cargo); fi
for tool in "${tools[@]}"; do
  require_command "$tool" "e2e/README.md lists what the kind suite needs"
done

CLUSTER=${KIND_CLUSTER:-informant-e2e}
IMAGE=informant:e2e
if [ "$PROVIDER" = podman ]; then IMAGE=localhost/informant:e2e; fi
IMAGE=${E2E_IMAGE:-$IMAGE}
E2E_WAIT=${E2E_WAIT:-90}
ARTIFACTS=${E2E_ARTIFACTS:-${TMPDIR:-/tmp}/informant-e2e-kind-$(date -u +%Y%m%dT%H%M%SZ)}
RELEASE_ARTIFACTS=$ARTIFACTS

work=$(mktemp -d)
created_cluster=""
created_network=""
# shellcheck source=e2e/lib/release.sh
source e2e/lib/release.sh

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

harness_list_count() { :; }
# kube-proxy's rules, on the cluster's one node (e2e/lib/release.sh waits on them).
node_nat_rules() { "$PROVIDER" exec "$CLUSTER-control-plane" iptables-save -t nat; }

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
  # The hook's image (e2e/lib/release.sh's HOOK_IMAGE): the registry's python:3.13-slim where
  # podman has it, else the local Python of e2e/lib/images.sh.
  if podman image exists docker.io/library/python:3.13-slim; then
    HOOK_IMAGE=docker.io/library/python:3.13-slim
  else
    local_python
    HOOK_IMAGE=localhost/$LOCAL_PYTHON
  fi
  podman save --quiet -o "$work/hook.tar" "$HOOK_IMAGE"
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
