"""The differential suite's cases (diff.py runs each on both servers and compares): CASES is a
list of (area, name, function of a Session). Every case works in namespaces of its own, so the
order of cases does not matter, and reads back only what it wrote (a real cluster's controller
manager adds objects of its own: kube-root-ca.crt in every namespace, the default
ServiceAccount; lists here select by label)."""

import json

CASES = []


def case(area):
    def register(fn):
        CASES.append((area, fn.__name__, fn))
        return fn

    return register


def cm(name, data=None, labels=None, **meta):
    metadata = {"name": name, **meta}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data or {}}


def rv(obj):
    return (obj or {}).get("metadata", {}).get("resourceVersion", "")


# --- core: create, read, update, delete ------------------------------------------------------

CM = "/api/v1/namespaces/{ns}/configmaps"


def configmaps_in(s, ns):
    """Creates the case's namespace `ns` (not recorded); returns it and its ConfigMaps' path."""
    s.namespace(ns)
    return ns, CM.format(ns=ns)


@case("core")
def configmap_lifecycle(s):
    ns, base = configmaps_in(s, "d-core-life")
    _, created = s.post(base, cm("one", {"a": "1"}, {"app": "d"}))
    s.get(f"{base}/one")
    s.get(f"{base}/missing")
    s.post(base, cm("one", {"a": "1"}))
    stale = json.loads(json.dumps(created))
    _, updated = s.put(f"{base}/one", cm("one", {"a": "2"}, {"app": "d"}, resourceVersion=rv(created)))
    stale["data"] = {"a": "3"}
    s.put(f"{base}/one", stale, note="stale resourceVersion")
    s.put(f"{base}/one", cm("one", {"a": "4"}, {"app": "d"}), note="no resourceVersion: a ConfigMap allows it")
    s.put(f"{base}/two", cm("two", {"b": "1"}), note="update of a missing object")
    s.put(f"{base}/one", cm("other", {"a": "5"}), note="name in body differs from the path")
    s.delete(f"{base}/one")
    s.get(f"{base}/one")
    s.delete(f"{base}/one")


@case("core")
def create_refusals(s):
    ns, base = configmaps_in(s, "d-core-refuse")
    s.post(base, cm("Not_A_Name"), note="invalid name")
    s.post(base, cm(""), note="no name")
    s.post(base, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}, note="wrong kind")
    s.post(base, "{not json", note="malformed body")
    s.post(CM.format(ns="d-no-such-namespace"), cm("x"), note="namespace does not exist")
    s.post(base, cm("x", **{"namespace": "elsewhere"}), note="namespace in body differs")
    s.post(base, cm("big", {"k": "x" * (1024 * 1024 + 1)}), note="data over 1 MiB")
    s.post(base, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad-key"}, "data": {"no/slash": "v"}}, note="invalid data key")


@case("core")
def generate_name(s):
    ns, base = configmaps_in(s, "d-core-gen")
    s.post(base, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-", "labels": {"app": "gen"}}})
    s.post(base, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "Bad_"}}, note="invalid generateName")
    s.get(f"{base}?labelSelector=app%3Dgen")


@case("core")
def unknown_paths(s):
    s.get("/api/v1/namespaces/default/nothings")
    s.get("/apis/no.such.group/v1/things")
    s.get("/api/v1/namespaces/d-never-made/configmaps/x")
    s.send("PATCH", "/api/v1/namespaces/default/configmaps", {}, content_type="application/merge-patch+json", note="patch a collection")


# --- lists: selectors, pagination, resourceVersion semantics ---------------------------------


@case("lists")
def selectors(s):
    ns, base = configmaps_in(s, "d-list-sel")
    for name, app, tier in [("a", "web", "front"), ("b", "web", "back"), ("c", "db", "back")]:
        s.post(base, cm(name, labels={"app": app, "tier": tier, "suite": "d"}), record=False)
    s.get(f"{base}?labelSelector=app%3Dweb")
    s.get(f"{base}?labelSelector=suite%3Dd,tier!%3Dfront")
    s.get(f"{base}?labelSelector=app+in+(db,cache)")
    s.get(f"{base}?labelSelector=suite,!missing")
    s.get(f"{base}?labelSelector=app%3D", note="empty value")
    s.get(f"{base}?labelSelector=app+in+(", note="invalid label selector")
    s.get(f"{base}?fieldSelector=metadata.name%3Db")
    s.get(f"{base}?fieldSelector=metadata.name!%3Db&labelSelector=suite%3Dd")
    s.get(f"{base}?fieldSelector=data.x%3Dy", note="unsupported field")
    s.get(f"{base}?fieldSelector=metadata.name%3D%3D%3Db", note="invalid field selector")
    s.get("/api/v1/configmaps?labelSelector=suite%3Dd,app%3Ddb", note="all namespaces")


@case("lists")
def pagination(s):
    ns, base = configmaps_in(s, "d-list-page")
    for i in range(5):
        s.post(base, cm(f"p{i}", labels={"suite": "page"}), record=False)
    _, first = s.get(f"{base}?labelSelector=suite%3Dpage&limit=2")
    token = (first or {}).get("metadata", {}).get("continue", "")
    _, second = s.get(f"{base}?labelSelector=suite%3Dpage&limit=2&continue={token}")
    token = (second or {}).get("metadata", {}).get("continue", "")
    s.get(f"{base}?labelSelector=suite%3Dpage&limit=2&continue={token}")
    s.get(f"{base}?labelSelector=suite%3Dpage&limit=2&continue=not-a-token", note="invalid continue token")
    s.get(f"{base}?labelSelector=suite%3Dpage&limit=0", note="limit 0: everything")
    s.get(f"{base}?labelSelector=suite%3Dpage&limit=-1", note="negative limit")


@case("lists")
def resource_versions(s):
    ns, base = configmaps_in(s, "d-list-rv")
    _, made = s.post(base, cm("x", labels={"suite": "rv"}))
    s.get(f"{base}?labelSelector=suite%3Drv&resourceVersion=0")
    s.get(f"{base}?labelSelector=suite%3Drv&resourceVersion={rv(made)}&resourceVersionMatch=NotOlderThan")
    s.get(f"{base}?labelSelector=suite%3Drv&resourceVersionMatch=NotOlderThan", note="match without a version")
    s.get(f"{base}?labelSelector=suite%3Drv&resourceVersion={rv(made)}&resourceVersionMatch=Sideways", note="unknown match")
    s.get(f"{base}?labelSelector=suite%3Drv&resourceVersion=not-a-number", note="invalid version")
    s.get(f"{base}/x?resourceVersion=0")


# --- patches ---------------------------------------------------------------------------------


@case("patch")
def patch_kinds(s):
    ns, base = configmaps_in(s, "d-patch")
    s.post(base, cm("p", {"a": "1", "b": "2"}, {"app": "d"}), record=False)
    s.patch(f"{base}/p", {"data": {"a": None, "c": "3"}}, "merge")
    s.patch(f"{base}/p", [{"op": "add", "path": "/data/d", "value": "4"}], "json")
    s.patch(f"{base}/p", [{"op": "test", "path": "/data/d", "value": "nope"}], "json", note="failing test op")
    s.patch(f"{base}/p", [{"op": "remove", "path": "/data/zzz"}], "json", note="remove a missing path")
    s.patch(f"{base}/p", [{"op": "jump", "path": "/data"}], "json", note="unknown op")
    s.patch(f"{base}/p", {"data": {"e": "5"}}, "strategic")
    s.patch(f"{base}/p", "{broken", "merge", note="malformed merge patch")
    s.patch(f"{base}/p", {"metadata": {"name": "renamed"}}, "merge", note="rename by patch")
    s.patch(f"{base}/missing", {"data": {"a": "1"}}, "merge", note="patch of a missing object")
    s.send("PATCH", f"{base}/p", {"data": {}}, content_type="application/x-unknown", note="unsupported patch type")


@case("apply")
def server_side_apply(s):
    ns, base = configmaps_in(s, "d-apply")
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "namespace": ns}, "data": {"a": "1"}}
    s.patch(f"{base}/s?fieldManager=one", json.dumps(doc), "apply", note="apply creates")
    doc2 = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "namespace": ns}, "data": {"a": "2", "b": "1"}}
    s.patch(f"{base}/s?fieldManager=two", json.dumps(doc2), "apply", note="conflict with one")
    s.patch(f"{base}/s?fieldManager=two&force=true", json.dumps(doc2), "apply", note="forced")
    s.patch(f"{base}/s?fieldManager=one", json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "namespace": ns}, "data": {"c": "1"}}), "apply", note="one gives up a")
    s.patch(f"{base}/s", json.dumps(doc), "apply", note="no fieldManager")
    s.patch(f"{base}/s?fieldManager=one&force=true", "{not yaml: [", "apply", note="malformed")
    s.patch(f"{base}/s?fieldManager=one", json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}), "apply", note="kind differs")
    s.patch(f"{base}/s?fieldManager=u", {"data": {"u": "1"}}, "merge", note="an update manager")
    s.get(f"{base}/s")


# --- optimistic concurrency and status ---------------------------------------------------------


@case("status")
def deployment_status_reset_on_create(s):
    ns = "d-status"
    s.namespace(ns)
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "example.invalid/c:1"}]}},
        },
        "status": {"replicas": 7, "observedGeneration": 9},
    }
    s.post(f"/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All", body, note="dry run: status dropped, nothing stored")
    s.get(f"/apis/apps/v1/namespaces/{ns}/deployments/web")
    bad = json.loads(json.dumps(body))
    bad["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    s.post(f"/apis/apps/v1/namespaces/{ns}/deployments", bad, note="selector does not match the template")


# --- custom resources: schemas, pruning, defaulting, CEL, status ----------------------------

CRD_NAME = "gadgets.diff.informant.dev"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": "diff.informant.dev",
        "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "x-kubernetes-validations": [{"rule": "self.size <= self.max", "message": "size must not exceed max"}],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 0},
                                    "max": {"type": "integer", "default": 10},
                                    "color": {"type": "string", "enum": ["red", "blue"]},
                                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                                },
                            },
                            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                        },
                    }
                },
            }
        ],
    },
}


def gadget(name, spec, status=None):
    body = {"apiVersion": "diff.informant.dev/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}
    if status is not None:
        body["status"] = status
    return body


def ensure_crd(s):
    status, _ = s.send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD, record=False)
    if status not in (201, 409):
        raise AssertionError(f"cannot create the CRD: {status}")

    def established():
        code, crd = s.send("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}", record=False)
        conditions = (crd or {}).get("status", {}).get("conditions", []) if code == 200 else []
        served, _ = s.send("GET", "/apis/diff.informant.dev/v1", record=False)
        return served == 200 and any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    s.until("the CRD established and served", established)


def gadgets_in(s, ns):
    """Creates the case's namespace `ns` and the Gadget CRD (neither recorded); returns the
    path of the namespace's Gadgets."""
    s.namespace(ns)
    ensure_crd(s)
    return f"/apis/diff.informant.dev/v1/namespaces/{ns}/gadgets"


@case("crd")
def custom_resources(s):
    base = gadgets_in(s, "d-crd")
    s.post(base, gadget("g1", {"size": 3, "unknown": "pruned"}, {"phase": "set-on-create"}), note="defaulted, pruned, status dropped")
    s.get(f"{base}/g1")
    s.post(base, gadget("g2", {"size": 30}), note="CEL rule fails")
    s.post(base, gadget("g3", {"size": -1, "color": "green"}), note="minimum and enum")
    s.post(base, gadget("g4", {}), note="required field missing")
    s.post(base, gadget("g5", {"size": "three"}), note="wrong type")
    s.post(base, gadget("g6", {"size": 1, "tags": ["a", "a"]}), note="duplicate in a set")
    _, g1 = s.get(f"{base}/g1")
    body = json.loads(json.dumps(g1 or {}))
    body["status"] = {"phase": "Ready"}
    s.put(f"{base}/g1/status", body, note="status written through the subresource")
    body2 = json.loads(json.dumps(g1 or {}))
    body2.setdefault("spec", {})["size"] = 4
    body2["status"] = {"phase": "ignored"}
    s.put(f"{base}/g1", body2, note="stale version")
    _, g1 = s.get(f"{base}/g1")
    body3 = json.loads(json.dumps(g1 or {}))
    body3.setdefault("spec", {})["size"] = 5
    body3["status"] = {"phase": "ignored"}
    s.put(f"{base}/g1", body3, note="main resource ignores status")
    s.patch(f"{base}/g1", {"spec": {"size": 6}}, "strategic", note="strategic merge on a custom resource")
    s.patch(f"{base}/g1", {"spec": {"size": 11}}, "merge", note="CEL rule on update")
    s.put(f"{base}/g1", {k: v for k, v in gadget("g1", {"size": 1}).items()}, note="no resourceVersion: custom resources refuse it")
    s.get(f"{base}?limit=1")


# --- deletion: finalizers, dry run, propagation ------------------------------------------------


@case("delete")
def finalizers_and_options(s):
    ns, base = configmaps_in(s, "d-delete")
    s.post(base, cm("f", labels={"app": "d"}, finalizers=["diff.informant.dev/hold"]))
    s.delete(f"{base}/f", note="with a finalizer: marked, kept")
    s.get(f"{base}/f")
    s.patch(f"{base}/f", {"data": {"x": "1"}}, "merge", note="update while deleting")
    s.patch(f"{base}/f", {"metadata": {"finalizers": ["diff.informant.dev/hold", "diff.informant.dev/new"]}}, "merge", note="add a finalizer while deleting")
    s.patch(f"{base}/f", {"metadata": {"finalizers": None}}, "merge", note="finalizers removed: gone")
    s.get(f"{base}/f")
    s.post(base, cm("dry", labels={"app": "d"}), record=False)
    s.delete(f"{base}/dry?dryRun=All", note="dry run")
    s.get(f"{base}/dry")
    s.delete(f"{base}/dry?dryRun=Maybe", note="invalid dry run")
    s.delete(f"{base}/dry", {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Sideways"}, note="invalid propagation policy")
    s.delete(f"{base}/dry", {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}, note="uid precondition fails")
    s.delete(f"{base}/dry", {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "propagationPolicy": "Orphan"})
    s.post(base, cm("c1", labels={"app": "col"}), record=False)
    s.post(base, cm("c2", labels={"app": "col"}), record=False)
    s.delete(f"{base}?labelSelector=app%3Dcol", note="delete a collection")
    s.get(f"{base}?labelSelector=app%3Dcol")


@case("delete")
def deletion_bumps_generation(s):
    base = gadgets_in(s, "d-delete-gen")
    held = gadget("held", {"size": 1, "max": 10})
    held["metadata"]["finalizers"] = ["diff.informant.dev/hold"]
    s.post(base, held)
    s.delete(f"{base}/held", note="with a finalizer: marked, generation 1 -> 2")
    s.delete(f"{base}/held", note="marked again: generation kept")
    s.patch(f"{base}/held", {"metadata": {"finalizers": None}}, "merge", note="finalizers removed: gone")
    s.post(base, gadget("free", {"size": 1, "max": 10}), record=False)
    s.delete(f"{base}/free", note="no finalizer: gone at once")


@case("delete")
def one_controller_owner(s):
    ns, base = configmaps_in(s, "d-owners")

    def owner(name, controller):
        # Owners that exist: the garbage collector would delete a dependent of missing ones.
        _, made = s.post(base, cm(name, labels={"app": "owner"}), record=False)
        uid = ((made or {}).get("metadata") or {}).get("uid", "")
        return {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid, "controller": controller, "blockOwnerDeletion": True}

    a, b, c = owner("a", True), owner("b", True), owner("c", False)
    s.post(base, cm("two", labels={"app": "o"}, ownerReferences=[a, b]), note="two controller references")
    s.post(base, cm("one", labels={"app": "o"}, ownerReferences=[a, c]), note="one controller and one other owner")
    s.patch(f"{base}/one", {"metadata": {"ownerReferences": [a, b]}}, "merge", note="a second controller by patch")
    s.get(f"{base}/one")


# --- watch ---------------------------------------------------------------------------------


@case("watch")
def watch_from_a_version(s):
    ns, base = configmaps_in(s, "d-watch")
    _, made = s.post(base, cm("w", {"a": "1"}, {"suite": "watch"}))
    s.patch(f"{base}/w", {"data": {"a": "2"}}, "merge")
    s.delete(f"{base}/w")
    s.watch(f"{base}?watch=true&labelSelector=suite%3Dwatch&resourceVersion={rv(made)}&timeoutSeconds=1", note="changes after the create")
    s.watch(f"{base}?watch=true&labelSelector=suite%3Dwatch&timeoutSeconds=1", note="no version: the current state, then changes")
    s.get(f"{base}?watch=true&resourceVersion=not-a-number&timeoutSeconds=1", note="invalid version")
    s.get(f"{base}?watch=true&sendInitialEvents=true&timeoutSeconds=1", note="sendInitialEvents without resourceVersionMatch")


# --- coordination, events, authorization -----------------------------------------------------


@case("leases")
def leases(s):
    ns = "d-lease"
    s.namespace(ns)
    base = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    _, lease = s.post(base, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})
    s.post(base, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "bad"}, "spec": {"leaseDurationSeconds": -1}}, note="negative duration")
    body = json.loads(json.dumps(lease or {}))
    body.setdefault("spec", {})["holderIdentity"] = "b"
    s.put(f"{base}/l", body)
    s.put(f"{base}/l", body, note="same version again")


@case("events")
def events(s):
    ns = "d-events"
    s.namespace(ns)
    core = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "namespace": ns},
        "reason": "Tested",
        "message": "a message",
        "type": "Normal",
        "source": {"component": "diff"},
        "count": 1,
    }
    s.post(f"/api/v1/namespaces/{ns}/events", core)
    bad = json.loads(json.dumps(core))
    bad["metadata"]["name"] = "e2"
    bad["type"] = "Odd"
    s.post(f"/api/v1/namespaces/{ns}/events", bad, note="unknown type")
    v1 = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e3"},
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "namespace": ns},
        "reason": "Tested",
        "note": "a note",
        "type": "Normal",
        "action": "Testing",
        "reportingController": "diff.informant.dev/suite",
        "reportingInstance": "diff-1",
        "eventTime": "2026-01-01T00:00:00.000000Z",
    }
    s.post(f"/apis/events.k8s.io/v1/namespaces/{ns}/events", v1)
    missing = json.loads(json.dumps(v1))
    missing["metadata"]["name"] = "e4"
    del missing["eventTime"]
    s.post(f"/apis/events.k8s.io/v1/namespaces/{ns}/events", missing, note="no eventTime")


@case("authorization")
def access_reviews(s):
    review = lambda attrs: {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": attrs}}
    s.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review({"verb": "get", "resource": "configmaps", "namespace": "default"}))
    s.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}}, note="no attributes")
    s.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "d-reader"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]})
    s.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "d-empty-verbs"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": []}]}, note="a rule without verbs")


# --- immutability, secrets, validation of metadata ----------------------------------------------


@case("validation")
def immutable_and_secret_rules(s):
    ns, base = configmaps_in(s, "d-immutable")
    _, frozen = s.post(base, {**cm("frozen", {"a": "1"}, {"app": "i"}), "immutable": True})
    body = json.loads(json.dumps(frozen or {}))
    body["data"] = {"a": "2"}
    s.put(f"{base}/frozen", body, note="data of an immutable ConfigMap")
    s.patch(f"{base}/frozen", {"immutable": False}, "merge", note="immutable set back to false")
    s.patch(f"{base}/frozen", {"metadata": {"labels": {"app": "j"}}}, "merge", note="metadata of an immutable ConfigMap may change")
    secrets = f"/api/v1/namespaces/{ns}/secrets"
    s.post(secrets, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "plain"}, "stringData": {"user": "admin"}, "data": {"pass": "c2VjcmV0"}}, note="stringData merged into data")
    s.patch(f"{secrets}/plain", {"type": "kubernetes.io/tls"}, "merge", note="type is immutable")
    s.post(secrets, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "data": {}}, note="tls without its keys")
    s.post(secrets, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad64"}, "data": {"k": "not base64!"}}, note="data not base64")


@case("validation")
def metadata_rules(s):
    ns, base = configmaps_in(s, "d-meta")
    s.post(base, cm("long-label", labels={"app": "x" * 64}), note="label value over 63 characters")
    s.post(base, cm("bad-label", labels={"-app": "x"}), note="label key must start alphanumeric")
    s.post(base, cm("big-notes", annotations={"a": "x" * (256 * 1024)}), note="annotations over 256 KiB")
    s.post(base, cm("bad-finalizer", finalizers=["no-slash"]), note="a finalizer without a domain")
    s.post(base, cm("x" * 254), note="name over 253 characters")
    s.post(base, cm("ok-name.with.dots", labels={"app": "m"}), note="a DNS subdomain name")
    s.post(base, cm("with-rv", resourceVersion="12"), note="resourceVersion on create")


# --- dry run and subresources ---------------------------------------------------------------------


@case("dryrun")
def dry_run_writes(s):
    ns, base = configmaps_in(s, "d-dry")
    s.post(f"{base}?dryRun=All", cm("ghost", {"a": "1"}, {"app": "dry"}), note="create, dry run")
    s.get(f"{base}/ghost", note="not stored")
    _, real = s.post(base, cm("real", {"a": "1"}, {"app": "dry"}))
    body = json.loads(json.dumps(real or {}))
    body["data"] = {"a": "2"}
    s.put(f"{base}/real?dryRun=All", body, note="update, dry run")
    s.patch(f"{base}/real?dryRun=All", {"data": {"a": "3"}}, "merge", note="patch, dry run")
    s.get(f"{base}/real", note="unchanged")
    s.get(f"{base}/real/status", note="a ConfigMap has no status subresource")
    s.get(f"{base}/real/scale", note="nor a scale subresource")
    s.patch(f"{base}/real", [{"op": "test", "path": "/data/a", "value": "9"}, {"op": "replace", "path": "/data/a", "value": "4"}], "json", note="a failed test op")
    s.patch(f"{base}/real", [{"op": "remove", "path": "/data/missing"}], "json", note="remove of a missing path")


# --- service account tokens and who am I ----------------------------------------------------------


@case("tokens")
def token_requests_and_reviews(s):
    ns = "d-tokens"
    s.namespace(ns)
    sas = f"/api/v1/namespaces/{ns}/serviceaccounts"
    s.post(sas, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})
    request = lambda seconds, audiences=None: {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds, **({"audiences": audiences} if audiences is not None else {})},
    }
    _, issued = s.post(f"{sas}/robot/token", request(3600), note="a token for an hour")
    s.post(f"{sas}/robot/token", request(60), note="under the 10-minute minimum")
    s.post(f"{sas}/nobody/token", request(3600), note="no such ServiceAccount")
    token = ((issued or {}).get("status") or {}).get("token", "")
    review = lambda t: {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": t}}
    s.post("/apis/authentication.k8s.io/v1/tokenreviews", review(token), note="the issued token")
    s.post("/apis/authentication.k8s.io/v1/tokenreviews", review("not-a-token"), note="garbage")
    s.post("/apis/authentication.k8s.io/v1/tokenreviews", {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}}, note="no token")
    s.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, note="who am I")


# --- namespaces and garbage collection ------------------------------------------------------------


@case("lifecycle")
def namespace_and_foreground_deletion(s):
    ns, base = configmaps_in(s, "d-fore")
    _, owner = s.post(base, cm("owner", labels={"app": "fg"}))
    uid = ((owner or {}).get("metadata") or {}).get("uid", "")
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid, "blockOwnerDeletion": True}
    s.post(base, cm("child", labels={"app": "fg"}, ownerReferences=[ref]), record=False)
    s.delete(f"{base}/owner", {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"}, note="foreground: marked with foregroundDeletion")
    s.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d-doomed", "labels": {"app": "doomed"}}})
    s.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad_Name"}}, note="invalid namespace name")
    s.delete("/api/v1/namespaces/d-doomed", note="a namespace is marked Terminating")
    s.delete("/api/v1/namespaces/default", note="default cannot be deleted")
    s.delete("/api/v1/namespaces/kube-system", note="nor kube-system")


# --- watch lists ---------------------------------------------------------------------------------


@case("watch")
def watch_list_initial_events(s):
    ns, base = configmaps_in(s, "d-watchlist")
    s.post(base, cm("a", {"x": "1"}, {"suite": "wl"}), record=False)
    s.post(base, cm("b", {"x": "2"}, {"suite": "wl"}), record=False)
    s.watch(f"{base}?watch=true&labelSelector=suite%3Dwl&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1", note="initial events, then the bookmark that ends them")
    s.get(f"{base}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1", note="sendInitialEvents without allowWatchBookmarks")
    s.get(f"{base}?watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&allowWatchBookmarks=true&timeoutSeconds=1", note="resourceVersionMatch Exact on a watch")
