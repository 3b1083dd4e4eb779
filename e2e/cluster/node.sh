#!/usr/bin/env bash
# The node of the e2e suite's real cluster: kubelet, containerd 2.x with runc, CNI, kube-proxy
# and the cluster DNS, joined to the control plane of e2e/cluster/cluster.sh, built here from
# their own Go modules (kubelet and kube-proxy in the multi-call program of e2e/cluster/,
# containerd, its runc shim, ctr, crictl, the sandbox's pause process and CoreDNS in
# e2e/cluster/node/). Images come from podman's storage, never a registry.
#
#   bash e2e/cluster/node.sh build             # target/cluster/{containerd,...,dns}; seconds when built
#   bash e2e/cluster/node.sh check             # exit 0, or 3 with the reason this machine cannot run it
#   bash e2e/cluster/node.sh up DIR            # DIR holds a cluster of `cluster.sh up DIR`; adds the node
#   bash e2e/cluster/node.sh images DIR IMAGE...   # podman images into the node's containerd (k8s.io)
#   bash e2e/cluster/node.sh down DIR          # stop all that `up DIR` started (cluster.sh down calls it)
#
# The node runs where the control plane runs (as a kind cluster's single node does): in the
# cluster's network namespace, and in a mount namespace of its own, so every mount the kubelet
# and containerd make (volumes, root filesystems, the pods' network namespaces) goes when the
# node stops. Pods get their own network namespaces on the bridge cni0 (10.244.0.0/24, CNI's
# bridge and host-local from Debian's containernetworking-plugins); kube-proxy (iptables) makes
# Services reachable inside the namespace; CoreDNS, a Deployment in kube-system behind the
# kube-dns Service 10.96.0.10, answers for cluster.local only (nothing leaves the namespace).
# The pods' cgroups live under one cgroup of the node's own (cgroupfs driver, cgroup v1 or v2),
# removed at `down`.
#
# What this machine asks of the node, and where it is said: kubelet 1.35+ refuses cgroup v1
# unless `failCgroupV1: false`; root lacks CAP_SYS_RESOURCE here, so containerd may not lower a
# sandbox's oom_score_adj below its own (`restrict_oom_score_adj`); the eviction thresholds
# are lowered so a full development disk does not evict the suite's pods. e2e/README.md says
# why Kubernetes 1.37 and containerd 2.4.
#
# Environment: GO (default go), CLUSTER_BIN (default target/cluster), CLUSTER_WAIT (seconds each
# component may take to be ready, default 120).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$ROOT/e2e/cluster/node
BIN=${CLUSTER_BIN:-$ROOT/target/cluster}
GO=${GO:-go}
WAIT=${CLUSTER_WAIT:-120}
NODE_NAME=informant-node
NODE_IP=10.200.0.1
POD_CIDR=10.244.0.0/24
DNS_IP=10.96.0.10
PAUSE_IMAGE=localhost/informant-local/pause:e2e
DNS_IMAGE=localhost/informant-local/coredns:e2e
CNI_BIN=${CNI_BIN:-/usr/lib/cni}
RUNC=${RUNC:-runc}

say() { echo "node: $*" >&2; }
die() {
  say "$*"
  exit 1
}

cannot_run() { # why this machine cannot run the node, or nothing
  if [ "$(id -u)" != 0 ]; then echo "not root (containers, mounts and cgroups need it)"; return; fi
  local tool
  for tool in "$GO" "$RUNC" podman iptables unshare nsenter openssl curl; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found"; return; }
  done
  for tool in bridge host-local loopback portmap; do
    [ -x "$CNI_BIN/$tool" ] || { echo "no CNI plugin $CNI_BIN/$tool (apt-get install containernetworking-plugins)"; return; }
  done
  [ -d /sys/fs/cgroup ] || { echo "no /sys/fs/cgroup"; return; }
}

# --- build ------------------------------------------------------------------------------------

build() {
  mkdir -p "$BIN"
  local start=$SECONDS
  say "building containerd, its runc shim, ctr, crictl, pause and CoreDNS into $BIN"
  (cd "$SRC" && nice -n 10 "$GO" build -trimpath -ldflags="-s -w" -o "$BIN/" \
    github.com/containerd/containerd/v2/cmd/containerd \
    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
    github.com/containerd/containerd/v2/cmd/ctr \
    sigs.k8s.io/cri-tools/cmd/crictl)
  (cd "$SRC" && CGO_ENABLED=0 nice -n 10 "$GO" build -trimpath -ldflags="-s -w" -o "$BIN/pause" ./pause)
  (cd "$SRC" && CGO_ENABLED=0 nice -n 10 "$GO" build -trimpath -ldflags="-s -w" -o "$BIN/dns" ./dns)
  say "built in $((SECONDS - start)) s"
}

# scratch_image NAME BINARY USER: an image of one static binary (CGO_ENABLED=0) (the sandbox's pause, CoreDNS),
# made by podman from nothing, as the node's registry-free images are.
scratch_image() {
  local name=$1 binary=$2 user=$3 ctx
  podman image exists "$name" && [ "$(podman image inspect -f '{{index .Labels "informant.dev/binary"}}' "$name")" = "$(sha256sum <"$BIN/$binary" | cut -c1-64)" ] &&
    return 0
  ctx=$(mktemp -d)
  cp "$BIN/$binary" "$ctx/$binary"
  printf 'FROM scratch\nCOPY %s /%s\nUSER %s\nLABEL informant.dev/binary=%s\nENTRYPOINT ["/%s"]\n' \
    "$binary" "$binary" "$user" "$(sha256sum <"$BIN/$binary" | cut -c1-64)" "$binary" >"$ctx/Containerfile"
  podman build --runtime runc --quiet -t "$name" "$ctx" >/dev/null
  rm -rf "$ctx"
}

# --- the node's processes -----------------------------------------------------------------------

start() { # start NAME CMD...: CMD in the cluster's network namespace and the node's mount namespace, logging to NODE/NAME.log
  local name=$1
  shift
  nsenter --net="/run/netns/$NETNS" --mount="/proc/$(cat "$NODE/pids/holder")/ns/mnt" "$@" \
    >"$NODE/$name.log" 2>&1 &
  echo "$!" >"$NODE/pids/$name"
  say "$name: pid $!"
}

running() { kill -0 "$(cat "$NODE/pids/$1")" 2>/dev/null; }

wait_ready() { # wait_ready NAME SECONDS COMMAND...
  local name=$1 seconds=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    running "$name" || die "$name exited: $(tail -n 20 "$NODE/$name.log")"
    [ "$SECONDS" -lt "$deadline" ] || die "$name not ready after ${seconds}s: $(tail -n 20 "$NODE/$name.log")"
    sleep 0.2
  done
}

holder_ready() { [ "$(cat "/proc/$(cat "$NODE/pids/holder")/comm")" = sleep ]; }

kubectl_() { nsenter --net="/run/netns/$NETNS" env KUBECONFIG="$DIR/admin.kubeconfig" "${KUBECTL:-kubectl}" "$@"; }
ctr_() { "$BIN/ctr" --address "$NODE/containerd.sock" --namespace k8s.io "$@" 2> >(grep -v DEPRECATION >&2); }
crictl_() { "$BIN/crictl" --runtime-endpoint "unix://$NODE/containerd.sock" "$@"; }

# The pods' cgroup: CGROUP under the root of every cgroup hierarchy (v1: one per controller;
# v2: the unified one), cpuset's filled from its parent's, as a child needs.
cgroup_dirs() {
  local dir
  for dir in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [ -f "$dir/cgroup.procs" ] && [ -w "$dir" ] && echo "${dir%/}/$CGROUP"
  done
}
make_cgroups() {
  local dir
  while read -r dir; do
    mkdir -p "$dir"
    if [ -f "$dir/cpuset.cpus" ] && [ -z "$(cat "$dir/cpuset.cpus")" ]; then
      cat "$(dirname "$dir")/cpuset.cpus" >"$dir/cpuset.cpus"
      cat "$(dirname "$dir")/cpuset.mems" >"$dir/cpuset.mems"
    fi
  done < <(cgroup_dirs)
}
remove_cgroups() {
  local dir
  while read -r dir; do
    [ -d "$dir" ] && find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done < <(cgroup_dirs)
}

cert() { # cert NAME CN ORG: a client certificate from the cluster's CA
  local subject="/CN=$2"
  [ -z "$3" ] || subject="/O=$3$subject"
  openssl genrsa -out "$NODE/$1.key" 2048 2>/dev/null
  openssl req -new -key "$NODE/$1.key" -subj "$subject" -out "$NODE/$1.csr" 2>/dev/null
  openssl x509 -req -in "$NODE/$1.csr" -CA "$DIR/pki/ca.crt" -CAkey "$DIR/pki/ca.key" \
    -CAcreateserial -days 2 -out "$NODE/$1.crt" 2>/dev/null
  cat >"$NODE/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$CLUSTER_SERVER", certificate-authority: "$DIR/pki/ca.crt"}}]
users: [{name: u, user: {client-certificate: "$NODE/$1.crt", client-key: "$NODE/$1.key"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
EOF
}

write_configs() {
  cat >"$NODE/containerd.toml" <<EOF
version = 3
root = "$NODE/containerd"
state = "$NODE/containerd-state"
[grpc]
  address = "$NODE/containerd.sock"
[ttrpc]
  address = "$NODE/containerd.sock.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PAUSE_IMAGE"
[plugins.'io.containerd.cri.v1.runtime']
  # Root has no CAP_SYS_RESOURCE on some machines: a sandbox's oom_score_adj no lower than ours.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$CNI_BIN"]
    conf_dir = "$NODE/cni"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$(command -v "$RUNC")"
        SystemdCgroup = false
EOF
  mkdir -p "$NODE/cni"
  cat >"$NODE/cni/10-informant.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "informant-e2e", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$NODE/cni-ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOF
  # No upstream resolver: nothing leaves the namespace.
  : >"$NODE/resolv.conf"
  cat >"$NODE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP
# kubelet 1.35+ refuses cgroup v1 unless told (KEP-5573; removal no earlier than 1.38).
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$NODE/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$DIR/pki/ca.crt"}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [$DNS_IP]
resolvConf: $NODE/resolv.conf
podLogsDir: $NODE/pod-logs
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
# A development disk is often fuller than the defaults (imagefs.available<15%) allow.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
  cat >"$NODE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
clientConnection: {kubeconfig: "$NODE/kube-proxy.kubeconfig"}
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# The machine's conntrack table is not ours to size.
conntrack: {maxPerCore: 0}
EOF
}

dns_manifest() {
  cat <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- {apiGroups: [""], resources: [services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
        loop
        reload
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      containers:
      - name: coredns
        image: $DNS_IMAGE
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /health, port: 8080}, periodSeconds: 10}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: $DNS_IP
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF
}

node_ready() {
  [ "$(kubectl_ get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
healthy() { [ "$(nsenter --net="/run/netns/$NETNS" curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ]; }

# images IMAGE...: each podman image into the node's containerd, unless it holds it already.
images() {
  local image archive id
  for image in "$@"; do
    id=$(podman image inspect -f '{{.Id}}' "$image") || die "no image $image in podman's storage"
    if ctr_ images ls -q 2>/dev/null | grep -qx "sha256:$id"; then continue; fi
    archive=$(mktemp "${TMPDIR:-/tmp}/informant-node-image.XXXXXX")
    podman save --quiet --format oci-archive -o "$archive" "$image"
    ctr_ images import --local "$archive" >/dev/null
    rm -f "$archive"
  done
}

up_failed() {
  local status=$?
  if [ "$status" != 0 ]; then
    say "up failed (exit $status): stopping what it started; logs in $NODE"
    down
  fi
}

up() {
  [ -f "$DIR/env" ] || die "no cluster runs in $DIR (cluster.sh up $DIR first)"
  [ ! -e "$NODE/pids" ] || die "$NODE runs a node already (down it first)"
  local why
  why=$(cannot_run)
  [ -z "$why" ] || die "cannot run here: $why"
  for why in cluster containerd containerd-shim-runc-v2 ctr crictl pause dns; do
    [ -x "$BIN/$why" ] || die "no $BIN/$why: run \`$0 build\` first"
  done
  mkdir -p "$NODE/pids"
  trap 'up_failed' EXIT
  local start=$SECONDS
  cert kubelet "system:node:$NODE_NAME" system:nodes
  cert kube-proxy system:kube-proxy ""
  write_configs
  make_cgroups
  # The node's mount namespace: held by a process of its own, gone with the node. The kubelet
  # links every container's log into /var/log/containers, a path it does not let us choose: a
  # tmpfs there keeps the links in the node.
  unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=16m tmpfs /var/log && exec sleep infinity' \
    >"$NODE/holder.log" 2>&1 &
  echo "$!" >"$NODE/pids/holder"
  # unshare(1) enters the new namespace after it starts, and sh mounts before it execs sleep:
  # until the holder is `sleep`, /proc/PID/ns/mnt may still be this shell's, and a process
  # entering it then lives in another mount namespace than the kubelet's (seen: containerd in the
  # host's, so a pod's projected token, mounted by the kubelet in the node's, was not in the
  # container: CoreDNS crash-looping on a missing serviceaccount/token, in 2 runs of about 15).
  wait_ready holder "$WAIT" holder_ready
  # runc, the shim and CNI's plugins are found on PATH.
  start containerd env PATH="$BIN:$CNI_BIN:$PATH" "$BIN/containerd" --config "$NODE/containerd.toml"
  wait_ready containerd "$WAIT" test -S "$NODE/containerd.sock"
  wait_ready containerd "$WAIT" ctr_ version
  scratch_image "$PAUSE_IMAGE" pause 65535:65535
  scratch_image "$DNS_IMAGE" dns 0:0
  images "$PAUSE_IMAGE" "$DNS_IMAGE"
  start kubelet env PATH="$BIN:$CNI_BIN:$PATH" "$BIN/cluster" kubelet --config "$NODE/kubelet.yaml" \
    --kubeconfig "$NODE/kubelet.kubeconfig" --root-dir "$NODE/kubelet" --cert-dir "$NODE/kubelet-pki" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
  wait_ready kubelet "$WAIT" node_ready
  say "node Ready in $((SECONDS - start)) s"
  start kube-proxy "$BIN/cluster" kube-proxy --config "$NODE/kube-proxy.yaml"
  wait_ready kube-proxy "$WAIT" healthy http://127.0.0.1:10256/healthz
  dns_manifest | kubectl_ apply -f - >/dev/null
  wait_ready kubelet "$WAIT" kubectl_ -n kube-system wait --for=condition=Available deploy/coredns --timeout=2s
  cat >>"$DIR/env" <<EOF
CLUSTER_NODE=$NODE_NAME
CLUSTER_NODE_DIR=$NODE
CLUSTER_BIN_DIR=$BIN
EOF
  trap - EXIT
  say "up in $((SECONDS - start)) s (nothing to node Ready, kube-proxy healthy, CoreDNS available)"
}

# stop NAME: SIGTERM, then SIGKILL after 20 s.
stop() {
  local file=$NODE/pids/$1 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

# The shims containerd started for this node (they outlive it by design): by their address.
shims() { pgrep -f "containerd-shim-runc-v2 .*-address $NODE/containerd.sock" || true; }

down() {
  [ -d "$NODE/pids" ] || return 0
  stop kube-proxy
  stop kubelet
  if [ -f "$NODE/pids/containerd" ] && running containerd; then
    crictl_ rmp --all --force >/dev/null 2>&1 || true
  fi
  stop containerd
  local pid
  for pid in $(shims); do kill -KILL "$pid" 2>/dev/null || true; done
  # Whatever is left in the pods' cgroups (a container whose shim was killed) goes too.
  local dir
  while read -r dir; do
    [ -f "$dir/cgroup.procs" ] || continue
    local pids
    pids=$(find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null || true)
    # shellcheck disable=SC2086 # one word per pid
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  done < <(cgroup_dirs)
  stop holder
  local deadline=$((SECONDS + 20))
  while [ -n "$(find "$(cgroup_dirs | head -n1)" -name cgroup.procs -exec cat {} + 2>/dev/null)" ] &&
    [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
  remove_cgroups
  rm -rf "$NODE/pids"
}

command=${1:-}
case "$command" in
  build) build ;;
  check)
    why=$(cannot_run)
    if [ -n "$why" ]; then
      echo "the node cannot run here: $why"
      exit 3
    fi
    ;;
  up | down | images)
    [ -n "${2:-}" ] || die "usage: $0 $command DIR"
    DIR=$(cd "$2" && pwd)
    NODE=$DIR/node
    mkdir -p "$NODE"
    NETNS=$(cat "$DIR/netns" 2>/dev/null || true)
    [ -n "$NETNS" ] || [ "$command" = down ] || die "no cluster runs in $DIR"
    CGROUP=informant-e2e-node-$(printf '%s' "$DIR" | cksum | cut -d' ' -f1)
    if [ -f "$DIR/env" ]; then
      # shellcheck source=/dev/null
      source "$DIR/env"
    fi
    shift 2
    case "$command" in
      up) up ;;
      down) down ;;
      images) images "$@" ;;
    esac
    ;;
  *)
    echo "usage: $0 build | check | up DIR | images DIR IMAGE... | down DIR" >&2
    exit 64
    ;;
esac
