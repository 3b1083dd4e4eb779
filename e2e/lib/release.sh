# shellcheck shell=bash disable=SC2034,SC2154,SC2329
# (Sourced by e2e/kind.sh, and by e2e/lib/cluster.sh on the real node; the E2E_* variables set
# here are read by e2e/scenarios.sh. Linted on its own and through kind.sh and run.sh.)
# Scenarios 1-8 with the manager as the chart's pods on a real node: every harness_* function of
# e2e/scenarios.sh but harness_list_count and scenario 9's, for a harness where a kubelet runs
# the release (kind, or the node of e2e/cluster/node.sh). The chart is installed as users
# install it, with the image already in the node's runtime:
#
#   helm install informant charts/informant --namespace informant-system --create-namespace \
#     --set image.repository=... --set image.tag=... --set image.pullPolicy=$RELEASE_PULL_POLICY \
#     --set replicaCount=2 --set-json "cacheConfig.spec=$(cat e2e/testdata/spec.json)" --wait
#
# What differs from the local-process harness (e2e/lib/local.sh), and why:
# - The chart renders --leader-elect only when replicaCount > 1, so the release is installed
#   with 2 replicas and scaled to 1 for scenarios 1-5 (so that /metrics, read through
#   port-forward, is the leader's: only the leader records Events and calls hooks), then back to
#   2 for scenario 6. `kubectl scale` keeps the rendered arguments; `helm upgrade` would also
#   reapply cacheConfig.spec over the edits the scenarios made with kubectl.
# - The chart's RBAC is derived from cacheConfig.spec at install/upgrade time: a kubectl edit
#   that widens the scope (scenario 2 adds a namespace, scenario 7 a namespace selector) needs
#   more. The suite binds the release's ServiceAccount to a ClusterRole of its own (list/watch
#   of the kinds it uses), removed before the uninstall check. Users widen the scope through
#   `helm upgrade` instead.
# - The hook of scenario 4 is a webhook: the image has no Python, so examples/hooks/cronjob.py
#   runs behind examples/hooks/serve-exec.py in a pod of HOOK_IMAGE (a Python image) in the
#   namespace e2e-hooks (both files from a ConfigMap), Ready by its readiness probe, behind the
#   Service `hook` that the manager calls by name through the cluster DNS; the chart's hook
#   policy allows that host over plain HTTP (hooks.allowURLs, hooks.allowHTTP).
# - The Lease has controller-runtime's periods (15 s lease), so a hand-over takes up to ~20 s.
# - /metrics and the probes are reached through `kubectl port-forward` to the replica, metrics
#   over plain HTTP (metrics.secure=false: the scenarios read the counters with curl; secure
#   metrics, the chart's default, are proven by tests/manager/manager_secure_metrics.rs and by
#   the release scenarios of e2e/lib/cluster.sh).
#
# Set before the first scenario: `work` (a directory), KUBECONFIG, IMAGE (NAME:TAG in the node's
# runtime), and, when their defaults do not fit, RELEASE_HELM (the helm program),
# RELEASE_PULL_POLICY, HOOK_IMAGE and RELEASE_ARTIFACTS (where the managers' logs go).

RELEASE=informant
E2E_NS=informant-system
E2E_CC="" # set by harness_install from the release
E2E_LEASE=""
E2E_TAKEOVER_TIMEOUT=90
E2E_SPEC=$PWD/e2e/testdata/spec.json
E2E_RBAC=informant-e2e-extra-read
HOOK_NS=e2e-hooks
RELEASE_HELM=${RELEASE_HELM:-helm}
RELEASE_PULL_POLICY=${RELEASE_PULL_POLICY:-Never}
HOOK_IMAGE=${HOOK_IMAGE:-python:3.13-slim}
forward_pid=""
metrics_port=""
health_port=""
deployment=""
manager_logs_collected=""

release_helm() { "$RELEASE_HELM" "$@"; }

# The managers' logs (every container of the release, previous instances included) and every
# Event, while the pods still exist: before the uninstall, or at exit when the run stopped early.
collect_manager_logs() {
  mkdir -p "$RELEASE_ARTIFACTS"
  local pod
  for pod in $(live_pods 2>/dev/null || true); do
    k -n "$E2E_NS" logs "$pod" --all-containers --tail=-1 >"$RELEASE_ARTIFACTS/$pod.log" 2>&1 || true
    k -n "$E2E_NS" logs "$pod" --all-containers --previous --tail=-1 >"$RELEASE_ARTIFACTS/$pod.previous.log" 2>/dev/null ||
      rm -f "$RELEASE_ARTIFACTS/$pod.previous.log"
  done
  k get events -A -o wide >"$RELEASE_ARTIFACTS/events.txt" 2>&1 || true
  manager_logs_collected=1
}

stop_forward() {
  if [ -n "$forward_pid" ]; then
    kill "$forward_pid" 2>/dev/null || true
    wait "$forward_pid" 2>/dev/null || true
    forward_pid=""
  fi
}

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
# Exactly N pods, and none terminating.
pod_count() { [ "$(pods | grep -c .)" = "$1" ] && [ "$(live_pods | grep -c .)" = "$1" ]; }
one_pod() { pod_count 1; }
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
  release_helm install "$RELEASE" charts/informant --namespace "$E2E_NS" --create-namespace \
    --set "image.repository=${IMAGE%:*}" --set "image.tag=${IMAGE##*:}" --set "image.pullPolicy=$RELEASE_PULL_POLICY" \
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
    image: $HOOK_IMAGE
    imagePullPolicy: IfNotPresent
    command: [python3, /hooks/serve-exec.py, --host, 0.0.0.0, "8080", python3, /hooks/hook.py]
    ports: [{containerPort: 8080}]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
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
  # A first run on kind pulls the image.
  k -n "$HOOK_NS" wait --for=condition=Ready pod/hook --timeout=300s >/dev/null ||
    fail "the hook pod never became Ready: $(k -n "$HOOK_NS" describe pod hook | tail -n 15)"
  # A Ready pod is not yet a reachable Service: until kube-proxy has written the ClusterIP's rules,
  # a call fails (the node answers "Network is unreachable") and the manager records HookFailed.
  wait_until "$E2E_WAIT" "kube-proxy programs the Service $HOOK_NS/hook" service_programmed "$HOOK_NS" hook
  E2E_HOOK="{\"webhook\": {\"url\": \"http://hook.$HOOK_NS.svc.cluster.local:8080/\", \"timeout\": \"10s\"}}"
  note "the hook runs as the pod $HOOK_NS/hook ($HOOK_IMAGE) behind the Service hook, called by name"
}

# service_programmed NS NAME: kube-proxy (iptables mode, pkg/proxy/iptables/proxier.go) has
# written the Service NS/NAME's ClusterIP rule and a jump to an endpoint behind it, in the node's
# nat rules (node_nat_rules, the harness's: iptables-save -t nat where kube-proxy runs).
service_programmed() {
  local rules
  rules=$(node_nat_rules) || return 1
  grep -qF -- "--comment \"$1/$2 cluster IP\"" <<<"$rules" && grep -qF -- "--comment \"$1/$2 -> " <<<"$rules"
}

harness_hook_stop() { k delete namespace "$HOOK_NS" --wait=true --ignore-not-found >/dev/null 2>&1 || true; }

harness_uninstall() {
  stop_forward
  collect_manager_logs
  k delete clusterrolebinding "$E2E_RBAC" >/dev/null
  k delete clusterrole "$E2E_RBAC" >/dev/null
  release_helm uninstall "$RELEASE" --namespace "$E2E_NS" --wait --timeout "${E2E_WAIT}s"
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
