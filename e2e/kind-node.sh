#!/usr/bin/env bash
# A kind node image built here, for `kind create cluster --image` with the podman provider: no
# registry (kindest/base, kindest/node and registry.k8s.io are out of reach on the machines the
# suite runs on), the same Kubernetes build as the host node (the multi-call program of
# e2e/cluster/ built with -tags kindnode, which links kubeadm and kubectl too:
# `cluster.sh build-kind`, target/cluster/cluster-kind) and Debian's packages.
#
#   bash e2e/kind-node.sh build      # prints the image's name, localhost/kind-node:<version>
#   bash e2e/kind-node.sh remove     # the image and the intermediate ones this script made
#
# What is in the image (the layout kind expects of a node, read off kind v0.33.0's actions:
# /kind/version, kubeadm and kubectl on PATH, containerd's socket at /run/containerd,
# /etc/containerd/config.toml, systemd as PID 1):
# - Debian 12 with systemd, dbus, runc 1.1, containernetworking-plugins 1.1 (bridge, host-local,
#   loopback, portmap in /usr/lib/cni), iptables, conntrack, socat;
# - containerd 2.x, its runc shim, ctr and crictl (e2e/cluster/node.sh build); kubelet, kubeadm
#   and kubectl as links to target/cluster/cluster-kind (installed as /usr/local/bin/cluster);
# - systemd units of our own: containerd, kubelet (restarted until kubeadm has written its
#   configuration, as kubeadm's packages have it) and a oneshot before kubelet that makes the
#   kubelet's cgroup (/kubelet in every v1 hierarchy, or the unified one) and imports
#   /kind/images/*.tar into containerd's k8s.io namespace;
# - /kind/images: the images kubeadm runs for Kubernetes <version>, tagged as kubeadm expects
#   (`kubeadm config images list`): kube-apiserver, kube-controller-manager, kube-scheduler,
#   kube-proxy and etcd (one Debian image with the multi-call program; etcd through etcd's own
#   command line), CoreDNS and pause (one static binary each, as node.sh makes them);
# - a bridge CNI conflist (pods on cni0, 10.244.0.0/16): the cluster config turns kind's kindnet
#   off (networking.disableDefaultCNI), kindnetd being another registry image.
#
# The node differs from kindest/node in what this machine asks: the cgroupfs driver (set by
# e2e/testdata/kind-cluster-local.yaml, with failCgroupV1: false) and containerd's
# restrict_oom_score_adj (root lacks CAP_SYS_RESOURCE here), as on the host node.
#
# Environment: GO (default go), CLUSTER_BIN (default target/cluster).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CLUSTER_BIN:-$ROOT/target/cluster}
# shellcheck source=e2e/lib/images.sh
source "$ROOT/e2e/lib/images.sh"

say() { echo "kind-node: $*" >&2; }
die() {
  say "$*"
  exit 1
}

BASE=localhost/informant-local/kind-base:bookworm
COMPONENTS=localhost/informant-local/kind-components:e2e

kube_version() { "$BIN/cluster-kind" kubeadm version -o short; }

# base: Debian with systemd and the node's packages (no Kubernetes yet): rebuilt only when gone.
base() {
  podman image exists "$BASE" && return 0
  local_base
  local ctx
  ctx=$(mktemp -d)
  cat >"$ctx/Containerfile" <<EOF
FROM $LOCAL_BASE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
      systemd systemd-sysv dbus runc containernetworking-plugins iptables conntrack socat iproute2 \\
      ethtool util-linux mount kmod procps >/dev/null \\
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb
EOF
  say "building $BASE"
  podman build --runtime runc "${PODMAN_ULIMITS[@]}" --quiet -t "$BASE" "$ctx" >/dev/null
  rm -rf "$ctx"
}

# component_images DIR VERSION: DIR/images.tar, every image kubeadm runs, under kubeadm's names.
component_images() {
  local dir=$1 version=$2 ctx name names=() pause="" dns=""
  ctx=$(mktemp -d)
  cp "$BIN/cluster-kind" "$ctx/cluster"
  cat >"$ctx/Containerfile" <<EOF
FROM $BASE
COPY cluster /usr/local/bin/cluster
RUN for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do \\
      ln -s cluster /usr/local/bin/\$c; done \\
 && printf '#!/bin/sh\nexec /usr/local/bin/cluster etcdmain "\$@"\n' >/usr/local/bin/etcd \\
 && chmod 755 /usr/local/bin/etcd
EOF
  podman build --runtime runc "${PODMAN_ULIMITS[@]}" --quiet -t "$COMPONENTS" "$ctx" >/dev/null
  rm -rf "$ctx"
  while read -r name; do
    case $name in
    */pause:*) pause=$name ;;
    */coredns:*) dns=$name ;;
    *) podman tag "$COMPONENTS" "$name" ;;
    esac
    names+=("$name")
  done < <("$BIN/cluster-kind" kubeadm config images list --kubernetes-version "$version")
  [ -n "$pause" ] && [ -n "$dns" ] || die "kubeadm lists no pause or CoreDNS image"
  one_binary_image "$pause" pause 65535:65535
  one_binary_image "$dns" dns 0:0 coredns
  echo "$pause" >"$dir/pause"
  podman save --multi-image-archive --quiet -o "$dir/images.tar" "${names[@]}"
  # The registry names are the node's business, not the host's.
  podman rmi "${names[@]}" >/dev/null
}

# one_binary_image NAME BINARY USER [PATH]: an image of one static binary at /PATH, its entrypoint.
one_binary_image() {
  local name=$1 binary=$2 user=$3 path=${4:-$2} ctx
  ctx=$(mktemp -d)
  cp "$BIN/$binary" "$ctx/$path"
  # The label keeps podman's build cache from answering with another script's image of the same
  # binary, which the `podman rmi` of the registry names would then delete.
  printf 'FROM scratch\nCOPY %s /%s\nUSER %s\nLABEL informant.dev/kind-node=%s\nENTRYPOINT ["/%s"]\n' \
    "$path" "$path" "$user" "$binary" "$path" >"$ctx/Containerfile"
  podman build --runtime runc --quiet -t "$name" "$ctx" >/dev/null
  rm -rf "$ctx"
}

node_files() { # node_files DIR VERSION PAUSE
  local dir=$1 version=$2 pause=$3
  mkdir -p "$dir/etc/containerd" "$dir/etc/cni/net.d" "$dir/etc/systemd/system/kubelet.service.d" \
    "$dir/kind/bin" "$dir/kind/images"
  echo "$version" >"$dir/kind/version"
  cat >"$dir/etc/containerd/config.toml" <<EOF
version = 3
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$pause"
[plugins.'io.containerd.cri.v1.runtime']
  # Root has no CAP_SYS_RESOURCE on some machines: a sandbox's oom_score_adj no lower than ours.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "/etc/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
EOF
  cat >"$dir/etc/cni/net.d/10-bridge.conflist" <<'EOF'
{"cniVersion": "1.0.0", "name": "kind-local", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOF
  echo "runtime-endpoint: unix:///run/containerd/containerd.sock" >"$dir/etc/crictl.yaml"
  cat >"$dir/etc/systemd/system/containerd.service" <<'EOF'
[Unit]
Description=containerd
After=network.target
[Service]
ExecStart=/usr/local/bin/containerd
Delegate=yes
KillMode=process
Restart=always
RestartSec=1
LimitNOFILE=infinity
[Install]
WantedBy=multi-user.target
EOF
  # kind waits for "Reached target Multi-User System" before it runs kubeadm: the import (about
  # 15 s) and the kubelet start with graphical.target (the default), after it, not before.
  cat >"$dir/etc/systemd/system/kind-prepare.service" <<'EOF'
[Unit]
Description=the kubelet's cgroup and the preloaded images
After=containerd.service
Requires=containerd.service
Before=kubelet.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/kind/bin/prepare
[Install]
WantedBy=graphical.target
EOF
  cat >"$dir/kind/bin/prepare" <<'EOF'
#!/bin/sh
# The kubelet's cgroupRoot (/kubelet, kind's) in every writable hierarchy, cpuset's filled from
# its parent as a child needs; then the images kubeadm runs, into containerd's k8s.io namespace.
set -eu
for d in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
  [ -L "${d%/}" ] && continue
  [ -f "$d/cgroup.procs" ] || continue
  mkdir -p "$d/kubelet"
  if [ -f "$d/cpuset.cpus" ] && [ -z "$(cat "$d/kubelet/cpuset.cpus")" ]; then
    cat "$d/cpuset.cpus" >"$d/kubelet/cpuset.cpus"
    cat "$d/cpuset.mems" >"$d/kubelet/cpuset.mems"
  fi
done
i=0
until ctr version >/dev/null 2>&1; do
  i=$((i + 1))
  [ "$i" -lt 300 ] || { echo "containerd not up" >&2; exit 1; }
  sleep 0.2
done
for image in /kind/images/*.tar; do
  ctr --namespace k8s.io images import "$image"
done
EOF
  cat >"$dir/etc/systemd/system/kubelet.service" <<'EOF'
[Unit]
Description=kubelet
After=containerd.service kind-prepare.service
Requires=containerd.service kind-prepare.service
# It fails until kubeadm has written its configuration: never give up restarting it.
StartLimitIntervalSec=0
[Service]
ExecStart=/usr/local/bin/kubelet
Restart=always
RestartSec=1
[Install]
WantedBy=graphical.target
EOF
  # kubeadm writes kubeadm-flags.env and config.yaml, then restarts the kubelet.
  cat >"$dir/etc/systemd/system/kubelet.service.d/10-kubeadm.conf" <<'EOF'
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
ExecStart=
ExecStart=/usr/local/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
EOF
  # The node container's entrypoint: shared mounts (the kubelet's volumes propagate), forwarding
  # for the pods' bridge, then systemd.
  cat >"$dir/kind/bin/entrypoint" <<'EOF'
#!/bin/sh
set -eu
mount --make-rshared /
echo 1 >/proc/sys/net/ipv4/ip_forward
exec /sbin/init "$@"
EOF
  chmod 755 "$dir/kind/bin/prepare" "$dir/kind/bin/entrypoint"
}

build() {
  bash "$ROOT/e2e/cluster/cluster.sh" build-kind
  local tool
  for tool in containerd containerd-shim-runc-v2 ctr crictl pause dns; do
    [ -x "$BIN/$tool" ] || die "no $BIN/$tool: bash e2e/cluster/node.sh build"
  done
  local version image ctx start=$SECONDS
  version=$(kube_version)
  image=localhost/kind-node:$version
  base
  ctx=$(mktemp -d)
  say "images kubeadm runs for $version"
  component_images "$ctx" "$version"
  node_files "$ctx/files" "$version" "$(cat "$ctx/pause")"
  mv "$ctx/images.tar" "$ctx/files/kind/images/"
  local t
  for t in containerd containerd-shim-runc-v2 ctr crictl; do cp "$BIN/$t" "$ctx/$t"; done
  cp "$BIN/cluster-kind" "$ctx/cluster"
  cat >"$ctx/Containerfile" <<EOF
FROM $BASE
COPY containerd containerd-shim-runc-v2 ctr crictl cluster /usr/local/bin/
COPY files/ /
RUN for c in kubelet kubeadm kubectl; do ln -s cluster /usr/local/bin/\$c; done \\
 && mkdir -p /etc/kubernetes/manifests \\
 && echo "ReadKMsg=no" >>/etc/systemd/journald.conf \\
 && systemctl enable containerd.service kind-prepare.service kubelet.service \\
 && systemctl mask systemd-binfmt.service
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/kind/bin/entrypoint"]
EOF
  say "building $image"
  podman build --runtime runc "${PODMAN_ULIMITS[@]}" --quiet -t "$image" "$ctx" >/dev/null
  rm -rf "$ctx"
  say "built $image in $((SECONDS - start)) s"
  echo "$image"
}

remove() {
  local image
  for image in "localhost/kind-node:$(kube_version)" "$COMPONENTS" "$BASE"; do
    podman image exists "$image" && podman rmi "$image" >/dev/null
  done
  return 0
}

case ${1:-} in
build) build ;;
remove) remove ;;
*) die "usage: e2e/kind-node.sh {build|remove}" ;;
esac
