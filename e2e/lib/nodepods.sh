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

# --- 12, on the node: helm upgrade to a new image tag --------------------------------------------
#
# The Deployment controller rolls the release's two pods to the image `<tag>-next` (the same
# program, another image: e2e/lib/images.sh next_image) one at a time (maxSurge 1, maxUnavailable
# 0), while the CacheConfig is edited every second, so that whoever leads records
# ConfigReloaded through the hand-overs. Then:
#   - never two leaders: each pod's leadership, from its own log (`became leader` .. `stopped
#     leading`, which the manager logs before it releases the Lease), overlaps no other's
#     (e2e/lib/leaders.py, shown failing on the same logs with one interval moved);
#   - no event lost: each old pod's last line says recorded = the sum of its fates, and the
#     events the pods delivered (created and patched, the old pods' from their last line, minus
#     what they had delivered before the upgrade) are the Events' counts the API server gained.

# node_delivered METRICS-OR-FATES: created + patched + series_patched + series_counted, from
# /metrics text or a `fates=created=3,patched=1` list.
node_delivered() {
  python3 -c '
import re, sys
text = sys.argv[1]
fates = dict(re.findall(r"informant_events_total\{fate=\"(\w+)\"\} (\d+)", text))
if not fates:
    fates = dict(re.findall(r"(\w+)=(\d+)", text))
print(sum(int(fates.get(f, 0)) for f in ("created", "patched", "series_patched", "series_counted")))' "$1"
}
# node_pod_settled POD: the pod's /metrics says recorded = the sum over fates (nothing in flight).
node_pod_settled() {
  local text
  text=$(metrics_of "$1")
  [ -n "$text" ] &&
    [ "$(awk '$1 == "informant_events_recorded_total" { print $2 }' <<<"$text")" = "$(metric_sum_of "$text" informant_events_total fate=)" ]
}
# node_events_written: the sum of `count` over the Events the release's managers wrote (source
# component informant) about objects of its namespace and of scenario 11's.
node_events_written() {
  k get events -A -o json | python3 -c '
import json, sys
spaces = sys.argv[1:]
print(sum(e.get("count") or 1 for e in json.load(sys.stdin)["items"]
          if e["metadata"]["namespace"] in spaces
          and "informant" in ((e.get("source") or {}).get("component"), e.get("reportingComponent"))))' \
    "$HELM_NS" "$WIDGETS_NS"
}
node_release_pods() { # the release's running pods, oldest first
  local p
  node_pods_refresh
  for p in "${pods_running[@]}"; do [ "${pod_namespace[$p]}" = "$HELM_NS" ] && echo "$p"; done
  return 0
}
node_new_pods_delivered() {
  local p n=0
  for p in $(node_release_pods); do n=$((n + $(node_delivered "$(metrics_of "$p")"))); done
  [ "$n" -gt 0 ]
}
node_logs_ended() { local pid; for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 1; done; return 0; }

node_scenario_image_upgrade() {
  step "12. (node) helm upgrade to a new image tag: the pods roll one by one, never two leaders, every event recorded ends in a fate and the Events add up"
  local old=() p before_pods=0 before_api streams=() start took tag sync
  mapfile -t old < <(node_release_pods)
  [ "${#old[@]}" = 2 ] || fail "expected the release's 2 pods before the image upgrade, found: ${old[*]}"
  for p in "${old[@]}"; do wait_until "$E2E_WAIT" "$p: every recorded event has its fate" node_pod_settled "$p"; done
  for p in "${old[@]}"; do before_pods=$((before_pods + $(node_delivered "$(metrics_of "$p")"))); done
  before_api=$(node_events_written)
  # Each old pod's log to its end (the pod goes with the rollout, and its log with it).
  for p in "${old[@]}"; do
    k -n "$HELM_NS" logs -f "$p" >"$work/upgrade-$p.log" 2>&1 &
    streams+=($!)
  done
  tag=$(k -n "$HELM_NS" get deploy "$HELM_RELEASE" -o jsonpath='{.spec.template.spec.containers[0].image}')
  tag="${tag##*:}-next"
  sync=$(k -n "$HELM_NS" get cacheconfig "$HELM_RELEASE" -o jsonpath='{.spec.syncPeriod}')
  start=$(date +%s%N)
  helm_ upgrade "$HELM_RELEASE" charts/informant -n "$HELM_NS" --reuse-values --set "image.tag=$tag" >"$work/helm-upgrade-image.txt"
  expect_contains "helm upgrade to image tag $tag: deployed" "STATUS: deployed" "$(cat "$work/helm-upgrade-image.txt")"
  # Edits while the pods roll: each applied reload is a ConfigReloaded whoever leads records.
  (
    local n=0
    while [ ! -e "$work/upgrade-done" ]; do
      n=$((n + 1))
      k -n "$HELM_NS" patch cacheconfig "$HELM_RELEASE" --type merge -p "{\"spec\":{\"syncPeriod\":\"$((10 + n % 2))h\"}}" >/dev/null 2>&1 || true
      sleep 1 # the edits' pace, not a wait for anything
    done
  ) &
  local editor=$!
  wait_until "$E2E_WAIT" "2 Ready pods of image $tag, no old pod left" node_release_settled "$HELM_NS" "$HELM_RELEASE" 2
  took=$((($(date +%s%N) - start) / 1000000))
  # The edits go on until the new pods have delivered events of their own too.
  rollout "$(deployment_docs)" 2
  wait_until "$E2E_WAIT" "the new pods deliver events of their own" node_new_pods_delivered
  touch "$work/upgrade-done"
  wait "$editor"
  if [ -n "$sync" ]; then
    k -n "$HELM_NS" patch cacheconfig "$HELM_RELEASE" --type merge -p "{\"spec\":{\"syncPeriod\":\"$sync\"}}" >/dev/null
  else
    k -n "$HELM_NS" patch cacheconfig "$HELM_RELEASE" --type json -p '[{"op":"remove","path":"/spec/syncPeriod"}]' >/dev/null
  fi
  rollout "$(deployment_docs)" 2
  note "rolling update to $tag: $took ms from helm upgrade to 2 Ready pods of the new image and none of the old"
  expect_eq "the pods run image $tag" "$tag $tag" \
    "$(k -n "$HELM_NS" get pods -l "app.kubernetes.io/instance=$HELM_RELEASE" -o jsonpath='{range .items[*]}{.spec.containers[0].image}{" "}{end}' | sed 's/[^ ]*://g; s/ $//')"
  wait_until "$E2E_WAIT" "the old pods' logs end with their containers" node_logs_ended "${streams[@]}"
  wait "${streams[@]}" 2>/dev/null || true

  # Never two leaders.
  local new=() logs=() out
  mapfile -t new < <(node_release_pods)
  for p in "${new[@]}"; do
    wait_until "$E2E_WAIT" "$p: every recorded event has its fate" node_pod_settled "$p"
    k -n "$HELM_NS" logs "$p" >"$work/upgrade-$p.log" 2>&1
  done
  for p in "${old[@]}" "${new[@]}"; do logs+=("$work/upgrade-$p.log"); done
  out=$(python3 e2e/lib/leaders.py "${logs[@]}") || fail "two leaders in the rolling update:
$out"
  printf '%s\n' "$out"
  if python3 e2e/lib/leaders.py --overlap "${logs[@]}" >"$work/leaders-overlap.txt"; then
    fail "leaders.py passed logs with two overlapping leaders: $(cat "$work/leaders-overlap.txt")"
  fi
  echo "ok: never two leaders through the rolling update (and the check fails with one interval moved)"

  # No event lost: per old pod recorded = sum of fates at its stop; the pods' deliveries = the
  # Events the API server gained.
  local line recorded events fates after_pods=0 after_api
  for p in "${old[@]}"; do
    line=$(grep 'manager stopped' "$work/upgrade-$p.log" | tail -n1)
    [ -n "$line" ] || fail "$p: no 'manager stopped' line: it did not stop cleanly ($(tail -n3 "$work/upgrade-$p.log"))"
    recorded=$(sed -n 's/.*recorded=\([0-9]*\).*/\1/p' <<<"$line")
    events=$(sed -n 's/.* events=\([0-9]*\).*/\1/p' <<<"$line")
    fates=$(sed -n 's/.*fates=\([a-z_=0-9,]*\).*/\1/p' <<<"$line")
    expect_eq "$p stopped with every recorded event in a fate (recorded = sum of fates; $fates)" "$recorded" "$events"
    after_pods=$((after_pods + $(node_delivered "$fates")))
  done
  for p in "${new[@]}"; do after_pods=$((after_pods + $(node_delivered "$(metrics_of "$p")"))); done
  after_api=$(node_events_written)
  note "events delivered during the upgrade: pods $((after_pods - before_pods)), Events' counts in the API server +$((after_api - before_api))"
  [ $((after_api - before_api)) -gt 0 ] || fail "no event was written during the rolling update: nothing was checked"
  expect_eq "the events the old and new pods delivered = the Events' counts the API server gained" \
    "$((after_api - before_api))" "$((after_pods - before_pods))"
  echo "ok: helm upgrade to $tag rolled the pods in $took ms; never two leaders; every event the pods recorded ended in a fate, and the delivered ones are in the API server"
}

# --- a figure on the node: the manager's pods with 10,000 ConfigMaps cached ------------------------
#
# A namespace of 10,000 ConfigMaps (1,000 bytes of data each, as the container harness's figure)
# added to the release's CacheConfig by `helm upgrade`; once each pod's informant_cache_objects says 10,000 there,
# each pod's RSS (VmRSS of the manager's process, found through crictl); then the namespace
# leaves the CacheConfig and the cluster.
NODE_RSS_NS=e2e-rss
NODE_RSS_OBJECTS=${E2E_RSS_OBJECTS:-10000}
# node_pod_caches POD: how many ConfigMaps of NODE_RSS_NS the pod caches (the namespace's
# kube-root-ca.crt, which kube-controller-manager publishes, among them).
node_pod_caches() { metric_sum_of "$(metrics_of "$1")" informant_cache_objects "kind=\"ConfigMap\",namespace=\"$NODE_RSS_NS\""; }
node_pod_caches_all() { [ "$(node_pod_caches "$1")" -ge "$NODE_RSS_OBJECTS" ]; }
node_pod_caches_none() { [ "$(node_pod_caches "$1")" = 0 ]; }
node_rss_values() { # node_rss_values add|remove FILE: the release's CacheConfig spec with(out) NODE_RSS_NS
  helm_ get values "$HELM_RELEASE" -n "$HELM_NS" -o json | python3 -c '
import json, sys
spec = json.load(sys.stdin)["cacheConfig"]["spec"]
for entry in spec["byObject"]:
    if entry["kind"] == "ConfigMap":
        if sys.argv[1] == "add":
            entry["namespaces"][sys.argv[2]] = {}
        else:
            entry["namespaces"].pop(sys.argv[2], None)
json.dump({"cacheConfig": {"spec": spec}}, open(sys.argv[3], "w"))' "$1" "$NODE_RSS_NS" "$2"
}
node_rss_figure() {
  step "figure: the manager's pods with $NODE_RSS_OBJECTS ConfigMaps cached (RSS)"
  local pods=() p chunk start container
  k create namespace "$NODE_RSS_NS" >/dev/null
  start=$SECONDS
  python3 -c '
import json, sys
n, chunks = int(sys.argv[1]), 4
for c in range(chunks):
    items = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i:05d}"},
              "data": {"payload": "x" * 1000}} for i in range(c, n, chunks)]
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(f"{sys.argv[2]}/rss-{c}.json", "w"))
' "$NODE_RSS_OBJECTS" "$work"
  for chunk in 0 1 2 3; do k -n "$NODE_RSS_NS" create -f "$work/rss-$chunk.json" >/dev/null & done
  wait
  note "$NODE_RSS_OBJECTS ConfigMaps created in $((SECONDS - start)) s"
  # Through the chart, which grants the release's ServiceAccount what the spec reads (a Role
  # per namespace it names).
  node_rss_values add "$work/values-rss.json"
  helm_ upgrade "$HELM_RELEASE" charts/informant -n "$HELM_NS" --reuse-values -f "$work/values-rss.json" >/dev/null
  mapfile -t pods < <(node_release_pods)
  for p in "${pods[@]}"; do
    wait_until "$E2E_WAIT" "$p caches the $NODE_RSS_OBJECTS ConfigMaps of $NODE_RSS_NS" node_pod_caches_all "$p"
    container=$(container_of "$p")
    note "pod $p ($( [ "$p" = "$(lease_pod)" ] && echo leader || echo standby)), $NODE_RSS_OBJECTS ConfigMaps cached: RSS $(rss_mib "$(container_pid "$container")") MiB"
  done
  node_rss_values remove "$work/values-rss-back.json"
  helm_ upgrade "$HELM_RELEASE" charts/informant -n "$HELM_NS" --reuse-values -f "$work/values-rss-back.json" >/dev/null
  k delete namespace "$NODE_RSS_NS" --wait=false >/dev/null
  for p in "${pods[@]}"; do wait_until "$E2E_WAIT" "$p lets the ConfigMaps of $NODE_RSS_NS go" node_pod_caches_none "$p"; done
  echo "ok: the RSS of each pod with $NODE_RSS_OBJECTS ConfigMaps cached is above"
}
