#!/usr/bin/env bash
# A real Kubernetes control plane for the e2e suite, built from Kubernetes' own Go modules
# (e2e/cluster/go.mod: k8s.io/kubernetes with each k8s.io/* staging module pinned to its v0.x),
# and the real helm CLI (e2e/cluster/helm/go.mod: helm.sh/helm/v3).
#
#   bash e2e/cluster/cluster.sh build      # target/cluster/{cluster,helm}; seconds when up to date
#   bash e2e/cluster/cluster.sh build-kind # target/cluster/cluster-kind: with kubeadm, kubectl and
#                                          # etcd's command line (-tags kindnode), for e2e/kind-node.sh
#   bash e2e/cluster/cluster.sh check      # exit 0, or 3 with the reason this machine cannot run it
#   bash e2e/cluster/cluster.sh up DIR     # start it; DIR/admin.kubeconfig, DIR/env
#   bash e2e/cluster/cluster.sh down DIR   # stop all that `up DIR` started, remove its namespace
#   bash e2e/cluster/cluster.sh exec DIR CMD...   # run CMD in the cluster's network namespace
#
# `up` makes a network namespace of its own (only loopback, with the cluster's address
# CLUSTER_IP on it: kube-apiserver refuses to advertise a loopback address) and runs in it, from
# the one multi-call binary: etcd (embedded, go.etcd.io/etcd/server/v3/embed), kube-apiserver
# (TLS with a CA of its own made by openssl, client certificates, ServiceAccount token signing
# and TokenRequest, Node,RBAC authorization, the default admission plugins, aggregator routing,
# the service CIDR 10.96.0.0/16, an audit log of ServiceAccounts' requests in DIR/audit.log),
# kube-controller-manager (every default controller but the
# CronJob and Job ones: e2e/testdata/kind-cluster.yaml says why) and kube-scheduler, each with a
# client certificate of its own. No node yet. It returns once /readyz is 200 and the controller
# manager and scheduler answer /healthz; anything failing on the way is stopped (`down`).
# Nothing leaves the namespace: reach the API server from inside it (`exec`, or nsenter
# --net=/run/netns/$CLUSTER_NETNS as DIR/env says).
#
# Environment: GO (default go), CLUSTER_BIN (default target/cluster), CLUSTER_WAIT (seconds each
# component may take to be ready, default 120).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$ROOT/e2e/cluster
BIN=${CLUSTER_BIN:-$ROOT/target/cluster}
GO=${GO:-go}
WAIT=${CLUSTER_WAIT:-120}
CLUSTER_IP=10.200.0.1
API_PORT=6443
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1

say() { echo "cluster: $*" >&2; }
die() {
  say "$*"
  exit 1
}

cannot_run() { # why this machine cannot run the cluster, or nothing
  if [ "$(id -u)" != 0 ]; then echo "not root (network namespaces need it)"; return; fi
  local tool
  for tool in "$GO" ip nsenter openssl curl; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found"; return; }
  done
  # The release's manager runs as pods (e2e/lib/pods.sh).
  command -v podman >/dev/null 2>&1 || { echo "podman not found (the release's pods need it)"; return; }
  ip netns list >/dev/null 2>&1 || { echo "ip netns does not work here"; return; }
  local have want
  have=$("$GO" env GOVERSION 2>/dev/null | sed 's/^go//')
  want=$(awk '$1 == "go" { print $2 }' "$SRC/go.mod")
  if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1)" != "$want" ]; then
    echo "go $have is older than the go $want Kubernetes needs"
    return
  fi
}

# The Kubernetes version the module pins, as its binaries report it (kubectl version).
kube_version() { (cd "$SRC" && "$GO" list -m -f '{{.Version}}' k8s.io/kubernetes); }

# The ldflags of the multi-call program: the version its components report, as Kubernetes'
# own build stamps it.
cluster_ldflags() {
  local version pkg ldflags="-s -w"
  version=$(kube_version)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitTreeState=clean"
  done
  echo "$ldflags"
}

build_kind() {
  mkdir -p "$BIN"
  local start=$SECONDS ldflags
  ldflags=$(cluster_ldflags)
  say "building the kind node's program (-tags kindnode) into $BIN/cluster-kind"
  (cd "$SRC" && nice -n 10 "$GO" build -trimpath -tags kindnode -ldflags="$ldflags" -o "$BIN/cluster-kind" .)
  say "built in $((SECONDS - start)) s"
}

build() {
  mkdir -p "$BIN"
  local version ldflags start=$SECONDS
  version=$(kube_version)
  ldflags=$(cluster_ldflags)
  say "building the control plane (k8s.io/kubernetes $version) into $BIN/cluster"
  (cd "$SRC" && nice -n 10 "$GO" build -trimpath -ldflags="$ldflags" -o "$BIN/cluster" .)
  # Helm's Makefile's ldflags: its version, and the Kubernetes version `helm template` assumes
  # without a cluster (from its client-go v0.X: 1.X; left unset it is 1.20, below the chart's
  # kubeVersion).
  local helm_version client_go helm_ldflags
  helm_version=$(cd "$SRC/helm" && "$GO" list -m -f '{{.Version}}' helm.sh/helm/v3)
  client_go=$(cd "$SRC/helm" && "$GO" list -m -f '{{.Version}}' k8s.io/client-go)
  helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    helm_ldflags+=" -X $pkg.k8sVersionMajor=$(( $(echo "$client_go" | cut -d. -f1 | tr -d v) + 1 ))"
    helm_ldflags+=" -X $pkg.k8sVersionMinor=$(echo "$client_go" | cut -d. -f2)"
  done
  say "building helm $helm_version into $BIN/helm"
  (cd "$SRC/helm" && nice -n 10 "$GO" build -trimpath -ldflags="$helm_ldflags" \
    -o "$BIN/helm" helm.sh/helm/v3/cmd/helm)
  say "built in $((SECONDS - start)) s"
}

netns_of() { # the namespace of the cluster in DIR
  echo "informant-cluster-$(printf '%s' "$1" | cksum | cut -d' ' -f1)"
}

in_ns() { nsenter --net="/run/netns/$NETNS" "$@"; }

# --- certificates -------------------------------------------------------------------------

# cert NAME CN O [SAN]: NAME.key and NAME.crt signed by ca (client and server use).
cert() {
  local name=$1 cn=$2 o=$3 san=${4:-} subj
  subj="/CN=$cn"
  if [ -n "$o" ]; then subj="/O=$o$subj"; fi
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    if [ -n "$san" ]; then echo "subjectAltName=$san"; fi
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/${CA:-ca}.crt" -CAkey "$PKI/${CA:-ca}.key" \
    -CAcreateserial -days 2 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

ca() { # ca NAME CN
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.crt" \
    -days 2 -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}

kubeconfig() { # kubeconfig NAME USER: DIR/NAME.kubeconfig with PKI/NAME.{crt,key}
  cat >"$DIR/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: informant-e2e
  cluster:
    server: https://$CLUSTER_IP:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $2
  user:
    client-certificate: $PKI/$1.crt
    client-key: $PKI/$1.key
contexts:
- name: $2@informant-e2e
  context: {cluster: informant-e2e, user: $2}
current-context: $2@informant-e2e
EOF
}

make_pki() {
  PKI=$DIR/pki
  mkdir -p "$PKI"
  ca ca informant-e2e-ca
  ca front-proxy-ca informant-e2e-front-proxy-ca
  cert apiserver kube-apiserver "" \
    "IP:$CLUSTER_IP,IP:$SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin kubernetes-admin system:masters
  # kube-apiserver's identity towards kubelets (logs, exec, port-forward), as kubeadm's
  # apiserver-kubelet-client.
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert controller-manager system:kube-controller-manager ""
  cert scheduler system:kube-scheduler ""
  CA=front-proxy-ca cert front-proxy-client front-proxy-client ""
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  kubeconfig admin kubernetes-admin
  kubeconfig controller-manager system:kube-controller-manager
  kubeconfig scheduler system:kube-scheduler
}

# --- processes ----------------------------------------------------------------------------

start() { # start NAME ARGS...: BIN/cluster NAME ARGS in the namespace, logging to DIR/NAME.log
  local name=$1
  # nsenter itself, not in_ns: a function in the background is a subshell, whose pid is not the
  # component's. nsenter execs the component (no --fork), so $! is its pid.
  nsenter --net="/run/netns/$NETNS" "$BIN/cluster" "$@" >"$DIR/$name.log" 2>&1 &
  echo "$!" >"$DIR/pids/$name"
  say "$name: pid $!"
}

running() { kill -0 "$(cat "$DIR/pids/$1")" 2>/dev/null; }

# wait_ready NAME SECONDS COMMAND...: poll COMMAND every 0.1 s until it succeeds; fail when NAME
# exits or the deadline passes.
wait_ready() {
  local name=$1 seconds=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    running "$name" || die "$name exited: $(tail -n 20 "$DIR/$name.log")"
    [ "$SECONDS" -lt "$deadline" ] || die "$name not ready after ${seconds}s: $(tail -n 20 "$DIR/$name.log")"
    sleep 0.1
  done
}

healthy() { # healthy URL [curl args]: 200 from URL inside the namespace
  local url=$1
  shift
  [ "$(in_ns curl -s -o /dev/null -w '%{http_code}' "$@" "$url")" = 200 ]
}

up_failed() {
  local status=$?
  if [ "$status" != 0 ]; then
    say "up failed (exit $status): stopping what it started; logs in $DIR"
    down
  fi
}

up() {
  [ ! -e "$DIR/env" ] || die "$DIR/env exists: a cluster runs there already (down it first)"
  local why
  why=$(cannot_run)
  [ -z "$why" ] || die "cannot run here: $why"
  [ -x "$BIN/cluster" ] || die "no $BIN/cluster: run \`$0 build\` first"
  mkdir -p "$DIR/pids" "$DIR/etcd"
  trap 'up_failed' EXIT
  local start=$SECONDS
  make_pki
  ip netns add "$NETNS"
  echo "$NETNS" >"$DIR/netns"
  ip -n "$NETNS" link set lo up
  ip -n "$NETNS" addr add "$CLUSTER_IP/32" dev lo

  start etcd --data-dir "$DIR/etcd" --listen-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380
  wait_ready etcd "$WAIT" healthy http://127.0.0.1:2379/health

  # The audit log names the token of every request of a ServiceAccount outside kube-system (its
  # JTI, user.extra authentication.kubernetes.io/credential-id): what the harness reads to see
  # which token a pod's manager is using (e2e/lib/cluster.sh, the token rotation of scenario 10).
  cat >"$DIR/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    userGroups: ["system:serviceaccounts:kube-system"]
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
POLICY
  start kube-apiserver \
    --etcd-servers=http://127.0.0.1:2379 \
    --advertise-address="$CLUSTER_IP" --bind-address=0.0.0.0 --secure-port="$API_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --authorization-mode=Node,RBAC \
    --enable-aggregator-routing=true \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-username-headers=X-Remote-User \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" \
    --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --allow-privileged=true \
    --audit-policy-file="$DIR/audit-policy.yaml" --audit-log-path="$DIR/audit.log" \
    --audit-log-format=json --audit-log-maxsize=200 --audit-log-maxbackup=1 \
    --profiling=false
  local admin=(--cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
  wait_ready kube-apiserver "$WAIT" healthy "https://$CLUSTER_IP:$API_PORT/readyz" "${admin[@]}"
  say "kube-apiserver ready in $((SECONDS - start)) s"

  local cm=$DIR/controller-manager.kubeconfig
  start kube-controller-manager \
    --kubeconfig="$cm" --authentication-kubeconfig="$cm" --authorization-kubeconfig="$cm" \
    --bind-address=127.0.0.1 --secure-port=10257 \
    --controllers='*,-cronjob-controller,-job-controller' \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --leader-elect=false --profiling=false
  local sched=$DIR/scheduler.kubeconfig
  start kube-scheduler \
    --kubeconfig="$sched" --authentication-kubeconfig="$sched" --authorization-kubeconfig="$sched" \
    --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --profiling=false
  wait_ready kube-controller-manager "$WAIT" healthy https://127.0.0.1:10257/healthz -k
  wait_ready kube-scheduler "$WAIT" healthy https://127.0.0.1:10259/healthz -k

  cat >"$DIR/env" <<EOF
# The cluster of \`e2e/cluster/cluster.sh up $DIR\`. Reach it from its network namespace:
#   nsenter --net=/run/netns/\$CLUSTER_NETNS kubectl ...   (or: cluster.sh exec $DIR kubectl ...)
CLUSTER_NETNS=$NETNS
CLUSTER_SERVER=https://$CLUSTER_IP:$API_PORT
CLUSTER_VERSION=$(kube_version)
KUBECONFIG=$DIR/admin.kubeconfig
CLUSTER_AUDIT_LOG=$DIR/audit.log
EOF
  trap - EXIT
  say "up in $((SECONDS - start)) s (nothing to /readyz, controller manager and scheduler healthy): $DIR/env"
}

# stop NAME: SIGTERM, then SIGKILL after 20 s; only a process that is ours (its command line
# names DIR), so a recycled pid is never signalled.
stop() {
  local file=$DIR/pids/$1 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$DIR"; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      say "$1 (pid $pid) ignored SIGTERM for 20 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$file"
}

down() {
  local name
  # The node of e2e/cluster/node.sh, if one joined, goes first.
  if [ -d "$DIR/node/pids" ]; then bash "$ROOT/e2e/cluster/node.sh" down "$DIR" || true; fi
  for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$name"; done
  if [ -f "$DIR/netns" ]; then
    ip netns delete "$(cat "$DIR/netns")" 2>/dev/null || true
    rm -f "$DIR/netns"
  fi
  rm -f "$DIR/env"
}

command=${1:-}
case "$command" in
  build) build ;;
  build-kind) build_kind ;;
  check)
    why=$(cannot_run)
    if [ -n "$why" ]; then
      echo "the cluster harness cannot run here: $why"
      exit 3
    fi
    ;;
  up | down | exec)
    [ -n "${2:-}" ] || die "usage: $0 $command DIR"
    mkdir -p "$2"
    DIR=$(cd "$2" && pwd)
    NETNS=$(netns_of "$DIR")
    PKI=$DIR/pki
    case "$command" in
      up) up ;;
      down) down ;;
      exec)
        [ -f "$DIR/env" ] || die "no cluster runs in $DIR"
        shift 2
        KUBECONFIG=$DIR/admin.kubeconfig in_ns "$@"
        ;;
    esac
    ;;
  *)
    echo "usage: $0 build | check | up DIR | down DIR | exec DIR CMD..." >&2
    exit 64
    ;;
esac
