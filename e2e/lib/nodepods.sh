# shellcheck shell=bash disable=SC2034,SC2154,SC2329
# (Sourced by e2e/lib/cluster.sh when E2E_NODE=1, after e2e/lib/pods.sh, whose functions it
# replaces. Linted on its own and through run.sh.)
# The release's pods on the real node (e2e/cluster/node.sh: kubelet, containerd, CNI,
# kube-proxy, CoreDNS), in place of the podman stand-in of e2e/lib/pods.sh: the Deployment's
# pods are made by the real ReplicaSet controller, scheduled by kube-scheduler, run by the
# kubelet with its projected token, gated on readiness by the kubelet's probes, and published by
# the EndpointSlice controller. The harness only reads them: the same names as pods.sh
# (pods_running, pod_ip, pod_docs; rollout, start_pod, stop_pod, release_pods), so the
# scenarios read the same either way.
#
# pod_docs of a pod is the rendered Deployment it runs (deployment_docs of its release) when it
# belongs to the Deployment's current ReplicaSet, "old" otherwise.

declare -gA pod_namespace=() # pod name -> namespace
declare -gA pod_ip pod_docs  # pods.sh's, filled here from the API server

# node_pods_refresh: pods_running (the chart's Running pods not being deleted, oldest first; but
# those of the releases NODE_PODS_OWN_ONLY names, space-separated, which their own checks
# read), pod_ip, pod_namespace, pod_docs from the API server.
node_pods_refresh() {
  k get pods -A -l app.kubernetes.io/name=informant -o json >"$work/node-pods.json"
  k get deployments,replicasets -A -l app.kubernetes.io/name=informant -o json >"$work/node-workloads.json"
  pods_running=()
  pod_ip=()
  pod_docs=()
  pod_namespace=()
  local ns name ip current deployment
  declare -A docs_of=()
  while read -r ns name ip current deployment; do
    pods_running+=("$name")
    pod_ip[$name]=$ip
    pod_namespace[$name]=$ns
    if [ "$current" = yes ]; then
      [ -n "${docs_of[$ns/$deployment]:-}" ] || docs_of[$ns/$deployment]=$(deployment_docs "$ns" "$deployment")
      pod_docs[$name]=${docs_of[$ns/$deployment]}
    else
      pod_docs[$name]=old
    fi
  done < <(python3 -c '
import json, sys
pods = json.load(open(sys.argv[1]))["items"]
workloads = json.load(open(sys.argv[2]))["items"]
revision = lambda o: o["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision")
deployments = {(o["metadata"]["namespace"], o["metadata"]["name"]): revision(o) for o in workloads if o["kind"] == "Deployment"}
replicasets = {}
for o in workloads:
    if o["kind"] == "ReplicaSet":
        owner = next((r["name"] for r in o["metadata"].get("ownerReferences", []) if r["kind"] == "Deployment"), None)
        replicasets[(o["metadata"]["namespace"], o["metadata"]["name"])] = (owner, revision(o))
ignored = sys.argv[3].split()
for p in sorted(pods, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"])):
    m = p["metadata"]
    if m.get("labels", {}).get("app.kubernetes.io/instance") in ignored:
        continue
    if m.get("deletionTimestamp") or p["status"].get("phase") != "Running" or not p["status"].get("podIP"):
        continue
    rs = next((r["name"] for r in m.get("ownerReferences", []) if r["kind"] == "ReplicaSet"), None)
    owner, rev = replicasets.get((m["namespace"], rs), (None, None))
    current = "yes" if owner and rev and deployments.get((m["namespace"], owner)) == rev else "no"
    print(m["namespace"], m["name"], p["status"]["podIP"], current, owner or "-")
' "$work/node-pods.json" "$work/node-workloads.json" "${NODE_PODS_OWN_ONLY:-}")
}

# node_release_settled NS DEPLOYMENT N: the Deployment rolled out with N Ready pods, and no other
# pod of it left (terminating ones included).
node_release_settled() {
  local ns=$1 name=$2 want=$3
  k -n "$ns" get deploy "$name" -o json >"$work/node-deploy.json" || return 1
  k -n "$ns" get pods -l "app.kubernetes.io/instance=$name" -o json >"$work/node-release-pods.json" || return 1
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
pods = json.load(open(sys.argv[2]))["items"]
want = int(sys.argv[3])
s = d["status"]
ready = [p for p in pods if not p["metadata"].get("deletionTimestamp") and any(
    c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))]
ok = (s.get("observedGeneration") == d["metadata"]["generation"] and s.get("updatedReplicas", 0) == want
      and s.get("readyReplicas", 0) == want and s.get("replicas", 0) == want and len(pods) == want
      and len(ready) == want)
sys.exit(0 if ok else 1)' "$work/node-deploy.json" "$work/node-release-pods.json" "$want"
}

# rollout DOCS N: the Deployment controller rolls DOCS's Deployment out; returns once N pods of
# its template are Ready and no other pod of it is left.
rollout() {
  local docs=$1 want=$2 ns name
  ns=$(deployment_value "$docs" 'd["metadata"]["namespace"]')
  name=$(deployment_value "$docs" 'd["metadata"]["name"]')
  wait_until "$E2E_WAIT" "$want Ready pod(s) of Deployment $ns/$name, rolled out by the cluster" \
    node_release_settled "$ns" "$name" "$want"
  node_pods_refresh
  local p
  for p in "${pods_running[@]}"; do
    if [ "${pod_namespace[$p]}" = "$ns" ]; then note "pod $p ready at ${pod_ip[$p]} (kubelet, node $CLUSTER_NODE)"; fi
  done
}

# stop_pod POD: `kubectl delete pod` (the kubelet sends SIGTERM, then SIGKILL after the grace
# period); returns once the pod is gone. Its ReplicaSet makes another.
stop_pod() {
  local pod=$1 ns=${pod_namespace[$1]:-}
  [ -n "$ns" ] || return 0 # gone since the list was read
  k -n "$ns" logs "$pod" >"$work/$pod.log" 2>&1 || true
  k -n "$ns" delete pod "$pod" --wait=false --ignore-not-found >/dev/null
  k -n "$ns" wait --for=delete "pod/$pod" --timeout="${E2E_WAIT}s" >/dev/null 2>&1 || true
  node_pods_refresh
}

start_pod() { fail "start_pod: on the real node the ReplicaSet controller makes pods"; }

release_pods() { # release_pods DOCS: the running pods of DOCS's template
  local p
  for p in "${pods_running[@]}"; do [ "${pod_docs[$p]}" = "$1" ] && echo "$p"; done
  return 0
}

pod_log() { k -n "${pod_namespace[$1]}" logs "$1" 2>&1; }

# The pods' logs for failure reports, and what the node keeps at the end (nothing to stop: the
# node goes with the cluster).
pods_logs() {
  node_pods_refresh 2>/dev/null || return 0
  local pod
  for pod in "${pods_running[@]}"; do
    echo "== pod $pod (last 40 lines)"
    k -n "${pod_namespace[$pod]}" logs --tail 40 "$pod" 2>&1 || true
  done
}
pods_cleanup() { :; }
