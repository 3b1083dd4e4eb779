#!/usr/bin/env bash
# Checks that the API server of $KUBECONFIG is the real kube-apiserver VERSION over etcd:
#
#   bash e2e/cluster/real.sh v1.37.2
#
# `kubectl version` must name VERSION as the server's, and `kubectl get --raw '/livez?verbose'`
# must list a passing etcd check (kube-apiserver's storage; `informant apiserver` has none).
# Exits 1, saying what it saw, otherwise. KUBECTL names kubectl (default: the one on PATH).
set -euo pipefail
KUBECTL=${KUBECTL:-kubectl}
want=${1:?usage: real.sh VERSION}

fail() {
  echo "FAIL: not the real kube-apiserver $want: $*" >&2
  exit 1
}

json=$("$KUBECTL" version -o json 2>&1) || fail "kubectl version failed: $json"
server=$(printf '%s' "$json" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("serverVersion", {}).get("gitVersion", ""))')
[ "$server" = "$want" ] || fail "kubectl version names the server [$server]"
echo "ok: kubectl version names the server $server"

livez=$("$KUBECTL" get --raw '/livez?verbose' 2>&1) || fail "GET /livez?verbose failed: $livez"
grep -qx '\[+\]etcd ok' <<<"$livez" || fail "/livez?verbose has no passing etcd check: $(printf '%s' "$livez" | head -n 5 | paste -sd' ' -)"
echo "ok: /livez?verbose lists etcd ($(grep -c '^\[+\]' <<<"$livez") checks pass)"
