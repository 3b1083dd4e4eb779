#!/usr/bin/env bash
# The real node, from nothing: build it (e2e/cluster/node.sh build), start the control plane and
# join the node (cluster.sh up, node.sh up), check that it is real and that pods run as a cluster
# runs them, stop everything (also on failure).
#
#   bash e2e/cluster/node-smoke.sh
#
# Each check fails with what it saw:
# - `kubectl get node` Ready, its kubelet the built version, its runtime containerd 2.x;
# - the image of the Dockerfile (E2E_IMAGE, default localhost/informant:e2e, from podman's storage) runs as
#   a pod: `kubectl logs` (the kubelet streaming through kube-apiserver) prints its version, and
#   `crictl ps -a` on the node lists its container;
# - a pod resolves kubernetes.default.svc.cluster.local to the Service's ClusterIP (CoreDNS, a
#   Deployment, behind the kube-dns Service that kube-proxy programs).
# Prints the figures: build, control plane up, node Ready, CoreDNS available.
# Environment: E2E_IMAGE, KUBECTL, E2E_KEEP_LOGS (1: keep the cluster's directory on failure).
set -euo pipefail
cd "$(dirname "$0")/../.."
KUBECTL=${KUBECTL:-kubectl}
IMAGE=${E2E_IMAGE:-localhost/informant:e2e}
BASE=localhost/informant-local/debian:bookworm

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
note() { echo "  $*"; }

status=0
dir=$(mktemp -d "${TMPDIR:-/tmp}/informant-node.XXXXXX")
cleanup() {
  status=$?
  bash e2e/cluster/cluster.sh down "$dir" >/dev/null 2>&1 || true
  if [ "$status" -ne 0 ] && [ -n "${E2E_KEEP_LOGS:-}" ]; then
    echo "logs kept in $dir" >&2
  else
    rm -rf "$dir"
  fi
}
trap cleanup EXIT

start=$SECONDS
bash e2e/cluster/cluster.sh build
bash e2e/cluster/node.sh build
note "build: $((SECONDS - start)) s"
podman image exists "$IMAGE" || fail "no image $IMAGE in podman's storage (e2e/container.sh builds it)"
podman image exists "$BASE" || fail "no image $BASE in podman's storage (e2e/container.sh makes it)"
start=$SECONDS
bash e2e/cluster/cluster.sh up "$dir"
note "control plane up: $((SECONDS - start)) s"
start=$SECONDS
bash e2e/cluster/node.sh up "$dir"
note "node up (Ready, kube-proxy, CoreDNS): $((SECONDS - start)) s"
bash e2e/cluster/node.sh images "$dir" "$IMAGE" "$BASE"
# shellcheck source=/dev/null
source "$dir/env"
k() { nsenter --net="/run/netns/$CLUSTER_NETNS" env KUBECONFIG="$KUBECONFIG" "$KUBECTL" "$@"; }

ready=$(k get node "$CLUSTER_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')
[ "$ready" = True ] || fail "node $CLUSTER_NODE not Ready: $ready"
kubelet=$(k get node "$CLUSTER_NODE" -o jsonpath='{.status.nodeInfo.kubeletVersion}')
[ "$kubelet" = "$CLUSTER_VERSION" ] || fail "the node's kubelet is [$kubelet], not the built $CLUSTER_VERSION"
runtime=$(k get node "$CLUSTER_NODE" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')
case "$runtime" in containerd://2.*) ;; *) fail "the node's runtime is [$runtime], not containerd 2.x" ;; esac
echo "ok: node $CLUSTER_NODE Ready, kubelet $kubelet, $runtime"

k run informant-version --image="$IMAGE" --image-pull-policy=Never --restart=Never -- --version >/dev/null
k run dns-check --image="$BASE" --image-pull-policy=Never --restart=Never --command -- \
  getent hosts kubernetes.default.svc.cluster.local >/dev/null
k wait --for=jsonpath='{.status.phase}'=Succeeded pod/informant-version pod/dns-check --timeout=120s >/dev/null ||
  fail "the pods did not succeed: $(k get pods -o wide 2>&1 | paste -sd' ' -)"
version=$(k logs informant-version)
case "$version" in informant\ *) ;; *) fail "kubectl logs of the image's pod said [$version]" ;; esac
echo "ok: the image runs as a pod; kubectl logs: $version"
containers=$("$CLUSTER_BIN_DIR/crictl" --runtime-endpoint "unix://$CLUSTER_NODE_DIR/containerd.sock" ps -a -o json)
grep -q '"name": "informant-version"' <<<"$containers" || fail "crictl ps -a lists no informant-version container"
echo "ok: crictl ps -a on the node lists the pod's container"
service_ip=$(k get service kubernetes -o jsonpath='{.spec.clusterIP}')
resolved=$(k logs dns-check | awk '{print $1}')
[ "$resolved" = "$service_ip" ] || fail "kubernetes.default.svc.cluster.local resolved to [$resolved], not $service_ip"
echo "ok: a pod resolves kubernetes.default.svc.cluster.local to $service_ip (CoreDNS, kube-proxy)"
