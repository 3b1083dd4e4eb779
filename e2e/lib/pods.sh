# shellcheck shell=bash disable=SC2034,SC2154,SC2329
# (Sourced by e2e/container.sh and e2e/lib/cluster.sh, which set the variables below and call
# these functions. Linted on its own and through them.)
# Pods as the kubelet runs them, for the harnesses that have no node: each replica of a
# Deployment's pod template is run with podman in a network namespace of its own on a bridge,
# with in-cluster configuration only (the ServiceAccount's token from TokenRequest, rotated as
# the kubelet rotates projected tokens; the CA; the namespace; KUBERNETES_SERVICE_HOST and
# _PORT), the rendered args, env and securityContext (e2e/lib/pod.py podman-args), and its
# readiness probe polled as the kubelet polls it.
#
# The caller sets, before the first pod:
#   work                 its work directory (pods live in $work/pods/<pod>)
#   PYTHON               a python3 with PyYAML (pod.py)
#   POD_NETNS            the prefix of the pods' network namespace names (<prefix>-p<n>)
#   POD_GATEWAY          the bridge's address, the pods' default route (a /24: pods get .11 on)
#   POD_API_HOST, POD_API_PORT   KUBERNETES_SERVICE_HOST and _PORT of every pod
#   POD_CA_FILE          the API server's CA, projected as ca.crt
#   TOKEN_TTL            seconds each pod's token lives
#   E2E_WAIT             seconds a pod may take to be ready
# and defines pod_started POD and pod_stopped POD if it wants to hear of them (the cluster
# harness publishes the Ready pods as the endpoints of the release's Services).
# The bridge is made by pods_bridge (in the current network namespace); every pod is stopped and
# its namespace removed by pods_cleanup.

kubelet_pid=""
pod_count=0
declare -gA pod_ip=()   # pod name -> address
declare -gA pod_docs=() # pod name -> the rendered chart (a JSON list with its Deployment) it runs
declare -gA pod_terminating=() # pod name -> 1 once its stop began (no longer Ready)
pods_running=()        # pod names, in start order; removed when stopped

pod_py() { "$PYTHON" e2e/lib/pod.py "$@"; }

# pods_bridge: the node's bridge br0 with POD_GATEWAY/24, in the current network namespace. A
# fixed MAC: a bridge otherwise takes the lowest of its ports', so removing a pod's veth can
# change it under the other pods' ARP caches and cut them off from the node for a while (seen:
# a shard member lost its Leases when another pod stopped).
pods_bridge() {
  ip link add br0 address 02:00:0a:f4:00:01 type bridge
  ip addr add "$POD_GATEWAY/24" dev br0
  ip link set br0 up
}

pods_cleanup() {
  if [ -n "$kubelet_pid" ]; then kill "$kubelet_pid" 2>/dev/null || true; fi
  local pod
  for pod in "${pods_running[@]}"; do
    podman logs "$pod" >"$work/$pod.log" 2>&1 || true
    podman rm -f -t 0 "$pod" >/dev/null 2>&1 || true
    ip netns delete "$POD_NETNS-p${pod##*-p}" 2>/dev/null || true
  done
}

# pods_logs: the last lines of each running pod's log (for the failure reports).
pods_logs() {
  local pod
  for pod in "${pods_running[@]}"; do
    echo "== pod $pod (last 40 lines)"
    podman logs --tail 40 "$pod" 2>&1 || true
  done
}

deployment_value() { # deployment_value DOCS PYTHON-EXPRESSION-OF-d: a value of its Deployment
  "$PYTHON" -c 'import json,sys; d=[x for x in json.load(open(sys.argv[1])) if x["kind"]=="Deployment"][0]; print(eval(sys.argv[2]))' "$1" "$2"
}

# issue_token POD-DIR: a token of the pod's ServiceAccount, as the kubelet projects it (written
# to a new file, then renamed over the old one, as the kubelet's atomic writer does).
issue_token() {
  local dir=$1
  k -n "$(cat "$dir/serviceaccount/namespace")" create token "$(cat "$dir/sa")" \
    --duration "${TOKEN_TTL}s" >"$dir/serviceaccount/.token.new"
  chmod 0644 "$dir/serviceaccount/.token.new"
  mv -f "$dir/serviceaccount/.token.new" "$dir/serviceaccount/token"
  date +%s >"$dir/token-issued"
  echo "$(($(date +%s) + TOKEN_TTL))" >>"$dir/token-expiries"
}

# The kubelet's token rotation: each pod's token is replaced once it is past half its lifetime
# (the kubelet replaces a projected token at 80% of its lifetime or after 24 h; half leaves a
# minute-long token room for client-go's and kube-rs's once-a-minute re-read).
kubelet_rotate() {
  local dir issued
  while true; do
    for dir in "$work"/pods/*/; do
      [ -f "$dir/serviceaccount/token" ] && [ ! -f "$dir/stopped" ] || continue
      issued=$(cat "$dir/token-issued")
      if [ $(($(date +%s) - issued)) -ge $((TOKEN_TTL / 2)) ]; then
        issue_token "$dir" 2>>"$work/kubelet.log" || true
      fi
    done
    sleep 1 # the kubelet's own timer, not a synchronisation: nothing waits on it
  done
}

kubelet_start() {
  mkdir -p "$work/pods"
  kubelet_rotate >"$work/kubelet.log" 2>&1 &
  kubelet_pid=$!
}

probe_ok() { # probe_ok POD readiness|liveness: the probe's path and port answer 200
  local path port period delay scheme
  read -r path port period delay scheme < <(pod_py probe "${pod_docs[$1]}" "$2")
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$scheme://${pod_ip[$1]}:$port$path")" = 200 ]
}

# wait_ready POD: the kubelet's readiness: the first probe after initialDelaySeconds, then one
# every periodSeconds, until one passes (or the deadline).
wait_ready() {
  local pod=$1 path port period delay scheme deadline
  read -r path port period delay scheme < <(pod_py probe "${pod_docs[$pod]}" readiness)
  if [ -n "${FAST_PROBE:-}" ]; then period=0.1 delay=0; fi # figures: the manager's start, not the probe's period
  deadline=$((SECONDS + E2E_WAIT))
  sleep "$delay" # initialDelaySeconds, as the kubelet waits it
  while ! probe_ok "$pod" readiness; do
    podman container exists "$pod" && [ "$(podman inspect -f '{{.State.Running}}' "$pod")" = true ] ||
      fail "pod $pod exited: $(podman logs --tail 20 "$pod" 2>&1)"
    [ "$SECONDS" -lt "$deadline" ] || fail "pod $pod not ready after ${E2E_WAIT}s: $(podman logs --tail 20 "$pod" 2>&1)"
    sleep "$period" # periodSeconds, as the kubelet probes
  done
  note "pod $pod ready at ${pod_ip[$pod]} (probe $path on $port, every ${period}s)"
}

# start_pod DOCS: one replica of DOCS's Deployment, as a new pod (a new name, address and
# network namespace; pods are never reused); returns once it is Ready. LAST_POD names it.
start_pod() {
  local docs=$1 n pod dir netns ip name
  n=$((++pod_count))
  name=$(deployment_value "$docs" 'd["metadata"]["name"]')
  # <deployment>-<template hash>-p<n>: a Deployment's pods share the hash of their template.
  pod="$name-$(deployment_value "$docs" 'json.dumps(d["spec"]["template"], sort_keys=True)' | md5sum | cut -c1-8)-p$n"
  dir="$work/pods/$pod"
  netns="$POD_NETNS-p$n"
  ip="${POD_GATEWAY%.*}.$((10 + n))"
  mkdir -p "$dir/serviceaccount" "$dir/volumes/tmp"
  # The emptyDir: the pod's fsGroup owns it (setgid), as the kubelet prepares it.
  chown 65532:65532 "$dir/volumes/tmp"
  chmod 2775 "$dir/volumes/tmp"
  deployment_value "$docs" 'd["spec"]["template"]["spec"].get("serviceAccountName", "default")' >"$dir/sa"
  deployment_value "$docs" 'd["metadata"]["namespace"]' | tr -d '\n' >"$dir/serviceaccount/namespace"
  cp "$POD_CA_FILE" "$dir/serviceaccount/ca.crt"
  issue_token "$dir"
  chmod 0755 "$dir" "$dir/serviceaccount"
  chmod 0644 "$dir/serviceaccount/"*
  # The pod's network: its own namespace, a veth on the node's bridge, its own address.
  ip netns add "$netns"
  ip link add "vp$n" type veth peer name eth0 netns "$netns"
  ip link set "vp$n" master br0 up
  ip -n "$netns" link set lo up
  ip -n "$netns" addr add "$ip/24" dev eth0
  ip -n "$netns" link set eth0 up
  ip -n "$netns" route add default via "$POD_GATEWAY"
  local args=()
  mapfile -d '' args < <(pod_py podman-args "$docs" "$pod" "$dir" "/run/netns/$netns" "$POD_API_HOST" "$POD_API_PORT" "$ip")
  podman run -d "${PODMAN_FLAGS[@]}" "${PODMAN_ULIMITS[@]}" "${args[@]}" >/dev/null
  pod_ip[$pod]=$ip
  pod_docs[$pod]=$docs
  pods_running+=("$pod")
  note "pod $pod started (uid $(podman top "$pod" huser 2>/dev/null | tail -n1 | tr -d ' '), $ip)"
  wait_ready "$pod"
  LAST_POD=$pod
  if declare -F pod_started >/dev/null; then pod_started "$pod"; fi
}

# stop_pod POD: as the kubelet stops a pod: SIGTERM, SIGKILL after the grace period.
stop_pod() {
  local pod=$1 grace
  grace=$(deployment_value "${pod_docs[$pod]}" 'd["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)')
  # The endpoints go first: a terminating pod is not Ready. It stays in pods_running until it
  # is removed, so that pods_cleanup removes it if anything fails on the way.
  pod_terminating[$pod]=1
  if declare -F pod_stopped >/dev/null; then pod_stopped "$pod"; fi
  podman stop -t "$grace" "$pod" >/dev/null
  podman logs "$pod" >"$work/$pod.log" 2>&1 || true
  podman rm -f "$pod" >/dev/null
  touch "$work/pods/$pod/stopped"
  ip netns delete "$POD_NETNS-p${pod##*-p}" 2>/dev/null || true
  local kept=() p
  for p in "${pods_running[@]}"; do [ "$p" = "$pod" ] || kept+=("$p"); done
  pods_running=("${kept[@]}")
}

pod_log() { podman logs "$1" 2>&1; } # pod_log POD: its log so far

# The pods of a rendered release still running.
release_pods() { # release_pods DOCS
  local p
  for p in "${pods_running[@]}"; do [ "${pod_docs[$p]}" = "$1" ] && echo "$p"; done
  return 0
}
