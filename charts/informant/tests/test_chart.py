"""The informant Helm chart, rendered and linted by Helm's own engine (helm-python-sdk), every
rendered manifest checked strictly against the Kubernetes 1.37 schemas (kubernetes-validate),
the CacheConfig against its CRD's own schema and by `informant validate`, and the rendered RBAC
against what `informant rbac` derives from the same CacheConfig.

Run from the repository root after a `cargo build` (scripts/test does both):

    python3 charts/informant/tests/test_chart.py

INFORMANT names the binary (default: target/debug/informant).
"""

import copy
import glob
import json
import os
import subprocess
import tempfile
import unittest

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CHART = os.path.join(ROOT, "charts", "informant")
INFORMANT = os.environ.get("INFORMANT", os.path.join(ROOT, "target", "debug", "informant"))
KUBERNETES_VERSION = "1.37.0"
RELEASE = "informant"
NAMESPACE = "informant-system"


def cases():
    """(name, values) of the default values and of every values file in ci/."""
    out = [("default", {})]
    for path in sorted(glob.glob(os.path.join(CHART, "ci", "*.yaml"))):
        with open(path) as f:
            out.append((os.path.basename(path), yaml.safe_load(f) or {}))
    return out


def render(values, name=RELEASE, namespace=NAMESPACE):
    """Every rendered document (NOTES.txt apart) and the NOTES text."""
    with helm.Chart.load(CHART) as chart:
        files = chart.render(values, name=name, namespace=namespace)
    docs, notes = [], ""
    for path, text in sorted(files.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs, notes


def merged(values):
    with helm.Chart.load(CHART) as chart:
        return chart.merge_values(values)


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def strict(schema):
    """A CRD's structural schema as strict JSON schema: unknown fields are errors (as
    `kubectl apply --validate=strict` makes them), except where the CRD preserves them."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if not isinstance(node, dict):
            return
        if node.get("type") == "object" and "properties" in node:
            if not node.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in node:
                node["additionalProperties"] = False
        # OpenAPI's nullable is JSON schema's null type.
        if node.get("nullable") and isinstance(node.get("type"), str):
            node["type"] = [node["type"], "null"]
        for key in ("properties",):
            for child in node.get(key, {}).values():
                walk(child)
        for key in ("items", "additionalProperties"):
            walk(node.get(key))
        for key in ("allOf", "anyOf", "oneOf"):
            for child in node.get(key, []):
                walk(child)

    walk(schema)
    return schema


def crd_schemas():
    """(group, version, kind) -> strict schema of every CRD in the chart's crds/."""
    out = {}
    for path in glob.glob(os.path.join(CHART, "crds", "*.yaml")):
        with open(path) as f:
            crd = yaml.safe_load(f)
        for version in crd["spec"]["versions"]:
            schema = strict(version["schema"]["openAPIV3Schema"])
            schema["properties"].update(
                {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}}
            )
            out[(crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"])] = schema
    return out


# The Prometheus Operator's ServiceMonitor is not a Kubernetes API and its CRD is not part of
# this repository: the fields the chart renders, typed as the monitoring.coreos.com/v1 API
# documents them, strict like the rest.
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}},
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string", "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
                            "scheme": {"enum": ["http", "https"]},
                            "bearerTokenFile": {"type": "string"},
                            "tlsConfig": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "insecureSkipVerify": {"type": "boolean"},
                                    "serverName": {"type": "string"},
                                    "ca": {
                                        "type": "object",
                                        "additionalProperties": False,
                                        "properties": {
                                            "secret": {
                                                "type": "object",
                                                "additionalProperties": False,
                                                "required": ["name", "key"],
                                                "properties": {"name": {"type": "string"}, "key": {"type": "string"}},
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


# cert-manager's Issuer and Certificate (webhook.certificates=certManager) are not Kubernetes
# APIs either, and cert-manager's CRDs are not in this repository nor in kubernetes-validate's
# schema set: like the ServiceMonitor, the fields the chart renders, typed as cert-manager's
# cert-manager.io/v1 API reference documents them, strict. What this does not check is that
# cert-manager itself would accept them (its webhook's own validation, e.g. of issuer kinds).
ISSUER_REF_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1}, "kind": {"type": "string"},
                   "group": {"type": "string"}},
}
CERT_MANAGER_SCHEMAS = {
    ("cert-manager.io", "v1", "Issuer"): {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "cert-manager.io/v1"},
            "kind": {"const": "Issuer"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "minProperties": 1,
                "maxProperties": 1,
                "properties": {
                    "selfSigned": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"crlDistributionPoints": {"type": "array", "items": {"type": "string"}}},
                    },
                },
            },
        },
    },
    ("cert-manager.io", "v1", "Certificate"): {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "cert-manager.io/v1"},
            "kind": {"const": "Certificate"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["secretName", "issuerRef"],
                "properties": {
                    "secretName": {"type": "string", "minLength": 1},
                    "dnsNames": {"type": "array", "items": {"type": "string"}},
                    "issuerRef": ISSUER_REF_SCHEMA,
                },
            },
        },
    },
}


def validate(doc, crds):
    """Validates one document strictly; raises on the first error."""
    api_version = doc["apiVersion"]
    group, _, version = api_version.rpartition("/")
    key = (group, version, doc["kind"])
    if key in crds or key == ("monitoring.coreos.com", "v1", "ServiceMonitor") or key in CERT_MANAGER_SCHEMAS:
        schema = crds.get(key) or CERT_MANAGER_SCHEMAS.get(key) or SERVICE_MONITOR_SCHEMA
        jsonschema.Draft7Validator(schema).validate(doc)
        # metadata is an ObjectMeta: check it with Kubernetes' own schema, on a ConfigMap.
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"]}, KUBERNETES_VERSION, strict=True
        )
    else:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def informant(*args):
    return subprocess.run([INFORMANT, *args], capture_output=True, text=True)


def manager_cluster_roles(docs):
    """The ClusterRoles bound to the manager: all but the metrics reader of secure metrics."""
    return [d for d in of_kind(docs, "ClusterRole") if not d["metadata"]["name"].endswith("-metrics-reader")]


def without_labels(doc):
    doc = copy.deepcopy(doc)
    doc["metadata"].pop("labels", None)
    return doc


def rbac_of(docs):
    """The RBAC documents by (kind, namespace, name), labels removed."""
    kinds = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    return {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): without_labels(d)
        for d in docs
        if d["kind"] in kinds
    }


# The `informant run` flags `informant rbac` takes too: those that decide the webhook's RBAC.
WEBHOOK_RBAC_FLAGS = ("--webhook-service", "--webhook-service-namespace", "--webhook-cert-dir",
                      "--webhook-cert-secret", "--webhook-configuration", "--webhook-inject")


# What secure metrics add to the manager's ClusterRole: the reviews of each request.
REVIEW_RULES = [
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
]


class ChartTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rendered = {name: render(values) for name, values in cases()}
        cls.crds = crd_schemas()

    def test_there_are_the_default_values_and_at_least_four_ci_files(self):
        names = [name for name, _ in cases()]
        self.assertEqual(names[0], "default")
        for wanted in ("multi-namespace", "by-object", "ha", "metrics", "sharded", "webhook", "webhook-cert-manager"):
            self.assertIn(f"{wanted}-values.yaml", names)

    def test_lint_reports_no_errors(self):
        for name, values in cases():
            with self.subTest(name):
                report = helm.lint(CHART, values, strict=True, kube_version="v" + KUBERNETES_VERSION)
                self.assertEqual(report["errors"], [])
                self.assertEqual([m for m in report["messages"] if m["severity"] >= 2], [])

    def test_every_rendered_document_validates_strictly(self):
        for name, (docs, _) in self.rendered.items():
            for doc in docs:
                with self.subTest(name, kind=doc["kind"], object=doc["metadata"].get("name")):
                    validate(doc, self.crds)

    def test_the_validator_rejects_an_unknown_field(self):
        docs, _ = self.rendered["default"]
        deployment = copy.deepcopy(of_kind(docs, "Deployment")[0])
        deployment["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
        with self.assertRaises(kubernetes_validate.ValidationError):
            validate(deployment, self.crds)
        config = copy.deepcopy(of_kind(docs, "CacheConfig")[0])
        config["spec"]["byObjects"] = []
        with self.assertRaises(jsonschema.ValidationError):
            validate(config, self.crds)

    def test_every_rendered_cacheconfig_passes_informant_validate(self):
        self.assertTrue(os.access(INFORMANT, os.X_OK), f"{INFORMANT} missing: run cargo build first")
        with tempfile.TemporaryDirectory() as tmp:
            for name, (docs, _) in self.rendered.items():
                configs = of_kind(docs, "CacheConfig")
                self.assertEqual(len(configs), 1, name)
                path = os.path.join(tmp, "cacheconfig.yaml")
                with open(path, "w") as f:
                    yaml.safe_dump(configs[0], f)
                result = informant("validate", "--config", path)
                with self.subTest(name):
                    self.assertEqual(result.returncode, 0, result.stderr)
                    self.assertIn(" is valid\n", result.stdout)

    def test_a_wrong_type_in_values_fails_at_render_and_at_lint(self):
        for bad in ({"replicaCount": "three"}, {"cacheConfig": {"spec": ["not", "a", "map"]}},
                    {"leaderElection": {"enabled": "yes"}},
                    {"metrics": {"port": "http"}}, {"serviceMonitor": {"enabled": "yes"}},
                    {"metrics": {"secure": "yes"}}, {"metrics": {"certSecret": "Not_A_Name"}}):
            with self.subTest(bad):
                with self.assertRaises(helm.HelmValuesError):
                    render(bad)
                self.assertNotEqual(helm.lint(CHART, bad)["errors"], [])

    def test_crds_are_byte_identical_to_the_repository_ones(self):
        ours = sorted(os.path.basename(p) for p in glob.glob(os.path.join(CHART, "crds", "*")))
        repo = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "crds", "*")))
        self.assertEqual(ours, repo)
        for name in repo:
            with open(os.path.join(CHART, "crds", name), "rb") as a, open(os.path.join(ROOT, "crds", name), "rb") as b:
                self.assertEqual(a.read(), b.read(), f"charts/informant/crds/{name} differs from crds/{name}")

    def test_leader_election_is_on_by_default_even_for_one_replica(self):
        for name, values in cases():
            docs, _ = self.rendered[name]
            m = merged(values)
            deployment = of_kind(docs, "Deployment")[0]
            self.assertEqual(deployment["spec"]["replicas"], m["replicaCount"])
            args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            with self.subTest(name, replicas=m["replicaCount"]):
                self.assertEqual("--leader-elect" in args, m["leaderElection"]["enabled"])
                at = args.index("--cache-config")
                self.assertEqual(args[at + 1], f"{NAMESPACE}/{RELEASE}")
                if m["leaderElection"]["enabled"]:
                    self.assertEqual(args[args.index("--lease-name") + 1], RELEASE)
                    self.assertEqual(args[args.index("--lease-namespace") + 1], NAMESPACE)
                    # The Lease is the release's, so `helm uninstall` deletes it; no spec, so
                    # an upgrade leaves the holder alone.
                    leases = of_kind(docs, "Lease")
                    self.assertEqual([(d["metadata"]["name"], d["metadata"]["namespace"]) for d in leases],
                                     [(RELEASE, NAMESPACE)])
                    self.assertNotIn("spec", leases[0])
        default = merged({})
        self.assertEqual(default["replicaCount"], 1)
        self.assertIs(default["leaderElection"]["enabled"], True, "kubebuilder's default")
        deployment = of_kind(self.rendered["default"][0], "Deployment")[0]
        self.assertIn("--leader-elect", deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    def test_the_hook_policy_is_restricted_by_default_and_lists_what_values_allow(self):
        def hook_args(docs):
            args = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
            return [a for a in args if a.startswith("--hook-")]

        for name, (docs, _) in self.rendered.items():
            with self.subTest(name):
                self.assertIn("--hook-policy=restricted", hook_args(docs))
        self.assertEqual(hook_args(self.rendered["default"][0]),
                         ["--hook-policy=restricted", "--hook-max-response-bytes=4194304"],
                         "no command, no URL, no plain HTTP, no Secrets")
        values = {"hooks": {"allowExec": ["/hooks/", "/opt/sync"],
                            "allowURLs": ["cronjob-hook.ops.svc:8443", "10.20.0.0/16"],
                            "allowHTTP": True, "allowSecrets": True, "maxResponseBytes": 1048576}}
        docs, _ = render(values)
        args = hook_args(docs)
        self.assertEqual(args, [
            "--hook-policy=restricted",
            "--hook-allow-exec=/hooks/", "--hook-allow-exec=/opt/sync",
            "--hook-allow-url=cronjob-hook.ops.svc:8443", "--hook-allow-url=10.20.0.0/16",
            "--hook-allow-http", "--hook-allow-secrets",
            "--hook-max-response-bytes=1048576",
        ])
        # informant parses them (and stops at the missing kubeconfig, not at a usage error).
        self.assertTrue(os.access(INFORMANT, os.X_OK), f"{INFORMANT} missing: run cargo build first")
        with tempfile.TemporaryDirectory() as tmp:
            result = informant("run", "--cache-config", "ns/cc", "--kubeconfig",
                               os.path.join(tmp, "missing"), *args)
        self.assertEqual(result.returncode, 66, result.stderr)
        bad = informant("run", "--cache-config", "ns/cc", "--hook-allow-exec=relative")
        self.assertEqual(bad.returncode, 64, bad.stderr)
        for wrong in ({"hooks": {"allowExec": ["relative/path"]}}, {"hooks": {"allowHTTP": "yes"}},
                      {"hooks": {"maxResponseBytes": 0}}, {"hooks": {"allowAll": True}}):
            with self.subTest(wrong):
                with self.assertRaises(helm.HelmValuesError):
                    render(wrong)

    def test_leader_election_can_be_off_only_for_one_replica(self):
        docs, _ = render({"leaderElection": {"enabled": False}})
        args = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertNotIn("--leader-elect", args)
        leases = [r for d in of_kind(docs, "Role") for r in d["rules"] if "leases" in r.get("resources", [])]
        self.assertEqual(leases, [], "no Lease rights without leader election")
        self.assertEqual(of_kind(docs, "Lease"), [], "no Lease without leader election")
        with self.assertRaises(helm.HelmError) as refused:
            render({"leaderElection": {"enabled": False}, "replicaCount": 2})
        self.assertIn("leaderElection.enabled=false needs replicaCount 1", str(refused.exception))

    def test_the_pod_is_hardened_and_probed(self):
        for name, values in cases():
            docs, _ = self.rendered[name]
            spec = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]
            container = spec["containers"][0]
            health = merged(values)["health"]["port"]
            with self.subTest(name):
                self.assertTrue(spec["securityContext"]["runAsNonRoot"])
                self.assertEqual(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault")
                sc = container["securityContext"]
                self.assertIs(sc["allowPrivilegeEscalation"], False)
                self.assertIs(sc["readOnlyRootFilesystem"], True)
                self.assertIs(sc["runAsNonRoot"], True)
                self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
                self.assertEqual(sc["seccompProfile"]["type"], "RuntimeDefault")
                self.assertIn({"name": "tmp", "mountPath": "/tmp"}, container["volumeMounts"])
                ports = {p["name"]: p["containerPort"] for p in container["ports"]}
                self.assertEqual(ports["health"], health)
                self.assertEqual(container["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "health"})
                self.assertEqual(container["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "health"})

    def test_optional_objects_follow_their_values(self):
        for name, values in cases():
            docs, notes = self.rendered[name]
            m = merged(values)
            with self.subTest(name):
                self.assertEqual(len(of_kind(docs, "ServiceMonitor")), int(m["serviceMonitor"]["enabled"]))
                majority = m["sharding"]["enabled"] and m["replicaCount"] > 1
                self.assertEqual(len(of_kind(docs, "PodDisruptionBudget")),
                                 int(m["podDisruptionBudget"]["enabled"] or majority))
                env = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0].get("env", [])
                otlp = [e["value"] for e in env if e["name"] == "OTEL_EXPORTER_OTLP_ENDPOINT"]
                self.assertEqual(otlp, [m["otlp"]["endpoint"]] if m["otlp"]["endpoint"] else [])
                self.assertIn(f"get cc {RELEASE}", notes)
                self.assertIn("port-forward", notes)
                self.assertIn("after that an invalid edit keeps it Ready", notes)
                self.assertIn("informant_config_last_reload_successful (0 while the latest edit is invalid", notes)
        self.assertFalse(merged({})["serviceMonitor"]["enabled"], "the ServiceMonitor is off by default")

    def test_rbac_is_what_informant_rbac_derives_from_the_same_cacheconfig(self):
        runs = [(name, values, RELEASE, NAMESPACE) for name, values in cases()]
        # Another release name and namespace, so names are not compared by luck.
        runs.append(("by-object as shop in ops", dict(cases())["by-object-values.yaml"], "shop", "ops"))
        runs.append(("webhook as shop in ops", dict(cases())["webhook-values.yaml"], "shop", "ops"))
        runs.append(("webhook, cluster-wide, two CRDs", {"webhook": {"enabled": True, "injectCRDs": [
            "b.example.com", "a.example.com"]}}, RELEASE, NAMESPACE))
        # Secrets listed and watched already: by the ClusterRole, by the release's Role, by an
        # extra rule; so the certificates' Secret is not granted list and watch again.
        secrets = {"apiVersion": "v1", "kind": "Secret"}
        for spec, rbac in (({"byObject": [dict(secrets, namespaces={})]}, {}),
                           ({"defaultNamespaces": {NAMESPACE: {}}, "byObject": [secrets]}, {}),
                           ({"defaultNamespaces": {NAMESPACE: {}}},
                            {"extraRules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]}]})):
            runs.append((f"webhook, Secrets watched already: {spec} {rbac}",
                         {"webhook": {"enabled": True}, "cacheConfig": {"spec": spec}, "rbac": rbac},
                         RELEASE, NAMESPACE))
        with tempfile.TemporaryDirectory() as tmp:
            for name, values, release, namespace in runs:
                docs, _ = render(values, name=release, namespace=namespace)
                m = merged(values)
                fullname = of_kind(docs, "Deployment")[0]["metadata"]["name"]
                account = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["serviceAccountName"]
                config = os.path.join(tmp, "cacheconfig.yaml")
                with open(config, "w") as f:
                    yaml.safe_dump(of_kind(docs, "CacheConfig")[0], f)
                args = ["rbac", "-o", "json", "--config", config, "--namespace", namespace, "--name", fullname,
                        "--service-account", account, "--lease-name", fullname]
                if m["leaderElection"]["enabled"]:
                    args.append("--leader-elect")
                if m["metrics"]["secure"]:
                    args.append("--metrics-secure")
                for kind in m["rbac"]["extraKinds"]:
                    args += ["--kind", f"{kind['apiVersion']}/{kind['kind']}"]
                if m["rbac"]["extraRules"]:
                    rules = os.path.join(tmp, "rules.yaml")
                    with open(rules, "w") as f:
                        yaml.safe_dump(m["rbac"]["extraRules"], f)
                    args += ["--extra-rules", rules]
                # The webhook flags that decide its RBAC, exactly as the Deployment passes them to
                # `informant run`.
                container = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
                args += [a for a in container["args"] if a.split("=")[0] in WEBHOOK_RBAC_FLAGS]
                self.assertEqual(any(a.startswith("--webhook-service=") for a in args), m["webhook"]["enabled"])
                result = informant(*args)
                with self.subTest(name):
                    self.assertEqual(result.returncode, 0, result.stderr)
                    derived = rbac_of(json.loads(result.stdout)["items"])
                    self.assertEqual(rbac_of(docs), derived)
                    self.assertIn(("Role", namespace, fullname), derived)

    def test_rbac_is_namespaced_for_a_namespace_scoped_config(self):
        docs, _ = self.rendered["multi-namespace-values.yaml"]
        cluster_rules = [r for d in manager_cluster_roles(docs) for r in d["rules"]]
        self.assertEqual(cluster_rules, REVIEW_RULES,
                         "a namespace-scoped config needs no ClusterRole but for the reviews of secure metrics")
        roles = {d["metadata"]["namespace"]: d["rules"] for d in of_kind(docs, "Role")}
        self.assertEqual(sorted(roles), ["informant-system", "team-a", "team-b"])
        self.assertIn({"apiGroups": [""], "resources": ["configmaps", "pods"], "verbs": ["list", "watch"]},
                      roles["team-a"])
        self.assertIn({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]},
                      roles["team-b"])
        # The manager adds and removes the release finalizer of its namespace's Controllers.
        self.assertIn({"apiGroups": ["informant.dev"], "resources": ["controllers"],
                       "verbs": ["get", "list", "watch", "patch"]},
                      roles["informant-system"])

    def test_a_namespace_selector_reads_cluster_wide_watches_namespaces_and_says_why(self):
        docs, _ = self.rendered["namespace-selector-values.yaml"]
        (cluster_role,) = manager_cluster_roles(docs)
        rules = cluster_role["rules"]
        self.assertIn({"apiGroups": [""], "resources": ["configmaps", "namespaces", "secrets"],
                       "verbs": ["list", "watch"]}, rules)
        self.assertIn({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                       "verbs": ["list", "watch"]}, rules)
        self.assertIn({"apiGroups": ["shop.example.com"], "resources": ["carts"], "verbs": ["list", "watch"]}, rules)
        roles = {d["metadata"]["namespace"]: d["rules"] for d in of_kind(docs, "Role")}
        self.assertIn({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]},
                      roles["shop"], "a kind with its own listed namespaces keeps its Role")
        values = dict(cases())["namespace-selector-values.yaml"]
        with helm.Chart.load(CHART) as chart:
            text = chart.render(values, name=RELEASE, namespace=NAMESPACE)["informant/templates/rbac.yaml"]
        self.assertIn("\n# namespaceSelector: the namespaces are chosen by label while the manager runs", text)
        self.assertIn("\n# byObject lists custom kinds: customresourcedefinitions are listed and watched", text)

    def test_sharding_renders_the_ring_each_replicas_identity_and_a_majority_budget(self):
        docs, notes = self.rendered["sharded-values.yaml"]
        (config,) = of_kind(docs, "CacheConfig")
        self.assertEqual(config["spec"]["sharding"], {"ring": "shop", "key": "namespace"})
        self.assertEqual(config["spec"]["byObject"][0], {"apiVersion": "v1", "kind": "ConfigMap"})
        container = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
        identity = [e for e in container["env"] if e["name"] == "INFORMANT_SHARD_IDENTITY"]
        self.assertEqual(identity, [{"name": "INFORMANT_SHARD_IDENTITY",
                                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])
        self.assertEqual(container["args"][container["args"].index("--lease-namespace") + 1], NAMESPACE)
        (budget,) = of_kind(docs, "PodDisruptionBudget")
        self.assertEqual(budget["spec"]["minAvailable"], 2, "a majority of 3")
        self.assertIn("kubectl -n informant-system get leases -l informant.dev/ring=shop", notes)
        values = dict(cases())["sharded-values.yaml"]
        for replicas, majority in ((2, 2), (4, 3), (5, 3), (6, 4)):
            with self.subTest(replicas=replicas):
                docs, _ = render({**values, "replicaCount": replicas})
                (budget,) = of_kind(docs, "PodDisruptionBudget")
                self.assertEqual(budget["spec"], {"minAvailable": majority, "selector": budget["spec"]["selector"]})
        own = {**values, "podDisruptionBudget": {"enabled": True, "maxUnavailable": 1}}
        (budget,) = of_kind(render(own)[0], "PodDisruptionBudget")
        self.assertEqual(budget["spec"]["maxUnavailable"], 1, "an enabled podDisruptionBudget is the user's")
        self.assertNotIn("minAvailable", budget["spec"])
        # Unsharded, nothing of it.
        docs, notes = self.rendered["default"]
        self.assertNotIn("sharding", of_kind(docs, "CacheConfig")[0]["spec"])
        env = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
        self.assertNotIn("INFORMANT_SHARD_IDENTITY", [e["name"] for e in env])
        self.assertNotIn("informant.dev/ring", notes)

    def test_the_ring_defaults_to_the_full_name_and_the_key_may_be_uid(self):
        docs, _ = render({"replicaCount": 2, "sharding": {"enabled": True, "key": "uid"}}, name="shop")
        self.assertEqual(of_kind(docs, "CacheConfig")[0]["spec"], {"sharding": {"ring": "shop-informant", "key": "uid"}})
        (cluster_role,) = manager_cluster_roles(docs)
        self.assertNotIn("namespaces", [r for rule in cluster_role["rules"] for r in rule["resources"]],
                         "by uid nothing follows the namespaces")

    def test_sharding_refuses_fewer_than_two_replicas_unless_allowed_and_spec_sharding(self):
        with self.assertRaises(helm.HelmError) as refused:
            render({"sharding": {"enabled": True}})
        self.assertIn("sharding.enabled needs replicaCount 2 or more (it is 1)", str(refused.exception))
        self.assertIn("sharding.allowSingleReplica=true", str(refused.exception))
        docs, _ = render({"sharding": {"enabled": True, "allowSingleReplica": True}})
        self.assertEqual(of_kind(docs, "CacheConfig")[0]["spec"]["sharding"]["key"], "namespace")
        self.assertEqual(of_kind(docs, "PodDisruptionBudget"), [], "no majority to keep of one replica")
        with self.assertRaises(helm.HelmError) as refused:
            render({"cacheConfig": {"spec": {"sharding": {"ring": "shop"}}}})
        self.assertIn("cacheConfig.spec.sharding: set sharding.enabled", str(refused.exception))
        for bad in ({"sharding": {"enabled": True, "key": "uuid"}}, {"sharding": {"ring": "Shop"}},
                    {"sharding": {"enabled": "yes"}}, {"sharding": {"members": 3}}):
            with self.subTest(bad):
                with self.assertRaises(helm.HelmValuesError):
                    render({**bad, "replicaCount": 2})

    def test_sharding_rbac_grants_the_member_leases_and_by_namespace_the_namespace_watch(self):
        docs, _ = self.rendered["sharded-values.yaml"]
        roles = {d["metadata"]["namespace"]: d["rules"] for d in of_kind(docs, "Role")}
        member = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                  "verbs": ["get", "list", "create", "update", "delete"]}
        self.assertIn(member, roles[NAMESPACE])
        self.assertEqual([ns for ns, rules in roles.items() if member in rules], [NAMESPACE])
        (cluster_role,) = manager_cluster_roles(docs)
        self.assertIn({"apiGroups": [""], "resources": ["configmaps", "namespaces", "nodes"],
                       "verbs": ["list", "watch"]}, cluster_role["rules"])
        self.assertEqual(len(of_kind(docs, "ClusterRoleBinding")), 1)
        with helm.Chart.load(CHART) as chart:
            text = chart.render(dict(cases())["sharded-values.yaml"], name=RELEASE,
                                namespace=NAMESPACE)["informant/templates/rbac.yaml"]
        self.assertIn("\n# sharding by namespace: each replica caches the namespaces it owns", text)
        self.assertIn("\n# sharding: each replica creates, renews and at shutdown deletes a member Lease", text)


class SecureMetricsTest(unittest.TestCase):
    """metrics.secure (the default): HTTPS on 8443 with the API server's reviews, the
    reviewers' rights, a metrics-reader ClusterRole, a ServiceMonitor scraping with a token;
    the health probes plain HTTP."""

    def container(self, docs):
        return of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]

    def test_secure_metrics_are_the_default_with_a_self_signed_certificate(self):
        self.assertIs(merged({})["metrics"]["secure"], True)
        docs, notes = render({"serviceMonitor": {"enabled": True}})
        container = self.container(docs)
        args = container["args"]
        self.assertEqual(args[args.index("--metrics-addr") + 1], ":8443")
        self.assertIn("--metrics-secure", args)
        self.assertNotIn("--metrics-cert-dir", args, "self-signed by default")
        self.assertEqual(container["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "health"},
                         "the kubelet probes plain HTTP on the health port")
        self.assertNotIn("scheme", container["readinessProbe"]["httpGet"])
        (cluster_role,) = [d for d in of_kind(docs, "ClusterRole") if d["metadata"]["name"] == RELEASE]
        self.assertEqual(cluster_role["rules"][-2:], REVIEW_RULES)
        (reader,) = [d for d in of_kind(docs, "ClusterRole") if d["metadata"]["name"] == f"{RELEASE}-metrics-reader"]
        self.assertEqual(reader["rules"], [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
        bound = [b["roleRef"]["name"] for b in of_kind(docs, "ClusterRoleBinding")]
        self.assertNotIn(f"{RELEASE}-metrics-reader", bound, "bound to no one: the user binds Prometheus")
        (endpoint,) = of_kind(docs, "ServiceMonitor")[0]["spec"]["endpoints"]
        self.assertEqual(endpoint["scheme"], "https")
        self.assertEqual(endpoint["bearerTokenFile"], "/var/run/secrets/kubernetes.io/serviceaccount/token")
        self.assertEqual(endpoint["tlsConfig"], {"insecureSkipVerify": True})
        self.assertIn(f"--clusterrole={RELEASE}-metrics-reader", notes)
        self.assertIn("https://localhost:8443/metrics", notes)
        self.assertIn("--metrics-secure", notes)

    def test_a_certificate_secret_is_mounted_watched_and_verified_by_the_service_monitor(self):
        docs, _ = render({"metrics": {"certSecret": "metrics-cert"}, "serviceMonitor": {"enabled": True}})
        container = self.container(docs)
        args = container["args"]
        self.assertEqual(args[args.index("--metrics-cert-dir") + 1], "/tmp/k8s-metrics-server/metrics-certs")
        self.assertIn({"name": "metrics-certs", "mountPath": "/tmp/k8s-metrics-server/metrics-certs", "readOnly": True},
                      container["volumeMounts"])
        volumes = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["volumes"]
        self.assertIn({"name": "metrics-certs", "secret": {"secretName": "metrics-cert"}}, volumes)
        (endpoint,) = of_kind(docs, "ServiceMonitor")[0]["spec"]["endpoints"]
        self.assertEqual(endpoint["tlsConfig"], {
            "ca": {"secret": {"name": "metrics-cert", "key": "ca.crt"}},
            "serverName": f"{RELEASE}-metrics.{NAMESPACE}.svc",
        })

    def test_plain_metrics_have_no_tls_no_reviews_and_no_reader(self):
        docs, notes = render({"metrics": {"secure": False, "port": 8080}, "serviceMonitor": {"enabled": True}})
        args = self.container(docs)["args"]
        self.assertNotIn("--metrics-secure", args)
        rules = [r for d in of_kind(docs, "ClusterRole") for r in d["rules"]]
        for rule in REVIEW_RULES:
            self.assertNotIn(rule, rules)
        self.assertEqual([d for d in of_kind(docs, "ClusterRole") if d["metadata"]["name"].endswith("-metrics-reader")], [])
        (endpoint,) = of_kind(docs, "ServiceMonitor")[0]["spec"]["endpoints"]
        self.assertNotIn("scheme", endpoint)
        self.assertIn("curl -s localhost:8080/metrics", notes)


class WebhookTest(unittest.TestCase):
    """webhook.*: the endpoint's Service, port and flags, managed certificates (the Secret and
    the CRDs the manager injects, granted by name) or cert-manager's (a Certificate, mounted,
    injected by the cainjector), and the values refused."""

    CONFIGURATIONS = ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]

    def pod(self, docs):
        return of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]

    def flags(self, docs):
        args = self.pod(docs)["containers"][0]["args"]
        return {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if a.startswith("--webhook-")}

    def secret_rules(self, docs):
        return [r for d in of_kind(docs, "Role") for r in d["rules"] if "secrets" in r["resources"]]

    def test_off_by_default_nothing_of_it(self):
        self.assertIs(merged({})["webhook"]["enabled"], False)
        docs, notes = render({})
        self.assertEqual(self.flags(docs), {})
        self.assertNotIn("webhook", [p["name"] for p in self.pod(docs)["containers"][0]["ports"]])
        self.assertEqual([d["metadata"]["name"] for d in of_kind(docs, "Service")], [f"{RELEASE}-metrics"])
        rules = [r for d in manager_cluster_roles(docs) for r in d["rules"]]
        self.assertFalse([r for r in rules if r["apiGroups"] == ["admissionregistration.k8s.io"]])
        self.assertEqual(self.secret_rules(docs), [])
        self.assertNotIn("--webhook-service", notes)

    def test_managed_certificates_serve_behind_the_service_and_own_their_secret(self):
        docs, notes = render(dict(cases())["webhook-values.yaml"])
        service = f"{RELEASE}-webhook"
        self.assertEqual(self.flags(docs), {
            "--webhook-service": service,
            "--webhook-service-namespace": NAMESPACE,
            "--webhook-service-port": "443",
            "--webhook-addr": ":9443",
            "--webhook-configuration": service,
            "--webhook-cert-secret": f"{service}-cert",
            "--webhook-inject": "customresourcedefinition/carts.shop.example.com",
        })
        container = self.pod(docs)["containers"][0]
        self.assertIn({"name": "webhook", "containerPort": 9443, "protocol": "TCP"}, container["ports"])
        (svc,) = [d for d in of_kind(docs, "Service") if d["metadata"]["name"] == service]
        self.assertEqual(svc["spec"]["ports"], [{"name": "webhook", "port": 443, "targetPort": "webhook",
                                                 "protocol": "TCP"}])
        self.assertEqual(svc["spec"]["selector"], of_kind(docs, "Deployment")[0]["spec"]["selector"]["matchLabels"])
        self.assertEqual(of_kind(docs, "Certificate"), [])
        # The Secret the leader fills is the release's, so `helm uninstall` deletes it; without
        # a cluster (lookup finds nothing) its two keys render empty.
        (secret,) = [d for d in of_kind(docs, "Secret") if d["metadata"]["name"] == f"{service}-cert"]
        self.assertEqual((secret["type"], secret["metadata"]["namespace"], secret["data"]),
                         ("kubernetes.io/tls", NAMESPACE, {"tls.crt": "", "tls.key": ""}))
        self.assertEqual([v["name"] for v in self.pod(docs)["volumes"]], ["tmp"], "nothing mounted")
        (cluster_role,) = manager_cluster_roles(docs)
        self.assertEqual(cluster_role["rules"][-3:], [
            {"apiGroups": ["admissionregistration.k8s.io"], "resources": self.CONFIGURATIONS, "verbs": ["create"]},
            {"apiGroups": ["admissionregistration.k8s.io"], "resources": self.CONFIGURATIONS,
             "resourceNames": [service], "verbs": ["get", "update", "delete"]},
            {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
             "resourceNames": ["carts.shop.example.com"], "verbs": ["get", "patch"]},
        ])
        roles = {d["metadata"]["namespace"]: d["rules"] for d in of_kind(docs, "Role")}
        self.assertEqual(roles[NAMESPACE][-2:], [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [f"{service}-cert"],
             "verbs": ["get", "list", "watch", "update"]},
        ])
        self.assertEqual(len(self.secret_rules(docs)), 2, "the Secret in the release namespace alone")
        self.assertIn(f"kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations {service}", notes)
        self.assertIn("--webhook-service informant-webhook --webhook-inject customresourcedefinition/carts.shop.example.com",
                      notes)

    def test_the_secret_is_not_watched_twice(self):
        docs, _ = render({"webhook": {"enabled": True},
                          "cacheConfig": {"spec": {"byObject": [{"apiVersion": "v1", "kind": "Secret", "namespaces": {}}]}}})
        named = [r for r in self.secret_rules(docs) if r.get("resourceNames")]
        self.assertEqual(named, [{"apiGroups": [""], "resources": ["secrets"],
                                  "resourceNames": [f"{RELEASE}-webhook-cert"], "verbs": ["get", "update"]}],
                         "the ClusterRole lists and watches every Secret already")

    def test_ports_follow_the_values(self):
        docs, _ = render({"webhook": {"enabled": True, "port": 10250, "service": {"port": 8443}}})
        self.assertEqual(self.flags(docs)["--webhook-addr"], ":10250")
        self.assertEqual(self.flags(docs)["--webhook-service-port"], "8443")
        ports = {p["name"]: p["containerPort"] for p in self.pod(docs)["containers"][0]["ports"]}
        self.assertEqual(ports["webhook"], 10250)
        (svc,) = [d for d in of_kind(docs, "Service") if d["metadata"]["name"].endswith("-webhook")]
        self.assertEqual(svc["spec"]["ports"][0]["port"], 8443)

    def test_cert_manager_issues_a_mounted_certificate_and_the_cainjector_injects_it(self):
        service = f"{RELEASE}-webhook"
        docs, notes = render({"webhook": {"enabled": True, "certificates": "certManager"}})
        flags = self.flags(docs)
        self.assertEqual(flags["--webhook-cert-dir"], "/tmp/k8s-webhook-server/serving-certs")
        self.assertEqual(flags["--webhook-inject-ca-from"], f"{NAMESPACE}/{service}")
        self.assertNotIn("--webhook-cert-secret", flags)
        self.assertNotIn("--webhook-inject", flags)
        (issuer,) = of_kind(docs, "Issuer")
        self.assertEqual(issuer["spec"], {"selfSigned": {}})
        (certificate,) = of_kind(docs, "Certificate")
        self.assertEqual(certificate["metadata"]["name"], service)
        self.assertEqual(certificate["spec"], {
            "secretName": f"{service}-tls",
            "dnsNames": [f"{service}.{NAMESPACE}.svc", f"{service}.{NAMESPACE}.svc.cluster.local"],
            "issuerRef": {"name": issuer["metadata"]["name"], "kind": "Issuer", "group": "cert-manager.io"},
        })
        container = self.pod(docs)["containers"][0]
        self.assertIn({"name": "webhook-certs", "mountPath": "/tmp/k8s-webhook-server/serving-certs",
                       "readOnly": True}, container["volumeMounts"])
        self.assertIn({"name": "webhook-certs", "secret": {"secretName": f"{service}-tls"}}, self.pod(docs)["volumes"])
        self.assertIs(container["securityContext"]["readOnlyRootFilesystem"], True)
        self.assertEqual(self.secret_rules(docs), [], "the kubelet mounts the Secret: the manager reads none")
        rules = [r for d in manager_cluster_roles(docs) for r in d["rules"]]
        self.assertNotIn("customresourcedefinitions", [x for r in rules for x in r["resources"]])
        self.assertIn({"apiGroups": ["admissionregistration.k8s.io"], "resources": self.CONFIGURATIONS,
                       "resourceNames": [service], "verbs": ["get", "update", "delete"]}, rules)
        self.assertIn("cert-manager's cainjector", notes)
        # A given issuer: no Issuer of the chart's.
        docs, _ = render(dict(cases())["webhook-cert-manager-values.yaml"])
        self.assertEqual(of_kind(docs, "Issuer"), [])
        self.assertEqual(of_kind(docs, "Certificate")[0]["spec"]["issuerRef"],
                         {"name": "internal-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"})

    def test_values_without_effect_are_refused_every_one_at_once(self):
        with self.assertRaises(helm.HelmError) as refused:
            render({"webhook": {"certificates": "certManager", "injectCRDs": ["a.example.com"]}})
        text = str(refused.exception)
        self.assertIn("invalid webhook values (3)", text)
        self.assertIn("webhook.certificates=certManager: needs webhook.enabled=true", text)
        self.assertIn("webhook.injectCRDs: needs webhook.enabled=true", text)
        self.assertIn("annotate the CRDs with cert-manager.io/inject-ca-from: informant-system/informant-webhook", text)
        with self.assertRaises(helm.HelmError) as refused:
            render({"webhook": {"enabled": True, "certManager": {"issuerRef": {"name": "ca"}}}})
        self.assertIn("webhook.certManager.issuerRef: only with webhook.certificates=certManager", str(refused.exception))
        for bad in ({"certificates": "cert-manager"}, {"injectCRDs": ["Carts"]}, {"injectCRDs": ["carts"]},
                    {"injectCRDs": ["a.b", "a.b"]}, {"port": 0}, {"service": {"port": "https"}},
                    {"certManager": {"issuerRef": {"kind": "ClusterIssuer"}}}, {"enable": True}):
            with self.subTest(bad):
                with self.assertRaises(helm.HelmValuesError):
                    render({"webhook": {"enabled": True, **bad}})


class NetworkTest(unittest.TestCase):
    """webhook.clientCA and networkPolicy.*: who may reach the endpoint, by certificate and by
    address."""

    def pod(self, docs):
        return of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]

    def test_a_client_ca_configmap_is_mounted_and_named_by_the_flag(self):
        docs, _ = render({"webhook": {"enabled": True, "clientCA": {"configMap": "apiserver-ca", "key": "bundle.pem"}}})
        container = self.pod(docs)["containers"][0]
        self.assertIn("--webhook-client-ca=/etc/informant/webhook-client-ca/bundle.pem", container["args"])
        self.assertIn({"name": "webhook-client-ca", "mountPath": "/etc/informant/webhook-client-ca", "readOnly": True},
                      container["volumeMounts"])
        self.assertIn({"name": "webhook-client-ca", "configMap": {"name": "apiserver-ca"}}, self.pod(docs)["volumes"])
        docs, _ = render({"webhook": {"enabled": True}})
        self.assertFalse([a for a in self.pod(docs)["containers"][0]["args"] if a.startswith("--webhook-client-ca")])
        with self.assertRaises(helm.HelmError) as refused:
            render({"webhook": {"clientCA": {"configMap": "apiserver-ca"}}})
        self.assertIn("webhook.clientCA.configMap: needs webhook.enabled=true", str(refused.exception))
        for bad in ({"configMap": "Bad_Name"}, {"key": ""}, {"secret": "x"}):
            with self.subTest(bad):
                with self.assertRaises(helm.HelmValuesError):
                    render({"webhook": {"enabled": True, "clientCA": bad}})

    def test_a_token_lifetime_mounts_the_projected_token_in_place_of_the_kubelets(self):
        docs, _ = render({"serviceAccount": {"tokenExpirationSeconds": 600}})
        pod = self.pod(docs)
        self.assertIs(pod["automountServiceAccountToken"], False)
        self.assertIn({"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                       "readOnly": True}, pod["containers"][0]["volumeMounts"])
        volume = next(v for v in pod["volumes"] if v["name"] == "kube-api-access")["projected"]
        self.assertEqual(volume["sources"][0], {"serviceAccountToken": {"path": "token", "expirationSeconds": 600}})
        self.assertEqual([sorted(s) for s in volume["sources"]], [["serviceAccountToken"], ["configMap"], ["downwardAPI"]])
        # The default: the kubelet's own mount, nothing of the chart's.
        pod = self.pod(render({})[0])
        self.assertNotIn("automountServiceAccountToken", pod)
        self.assertFalse([v for v in pod["volumes"] if v["name"] == "kube-api-access"])
        with self.assertRaises(helm.HelmError) as refused:
            render({"serviceAccount": {"tokenExpirationSeconds": 599}})
        self.assertIn("serviceAccount.tokenExpirationSeconds: 599 is below 600", str(refused.exception))
        with self.assertRaises(helm.HelmValuesError):
            render({"serviceAccount": {"tokenExpirationSeconds": -1}})

    def test_off_by_default_no_network_policy(self):
        self.assertIs(merged({})["networkPolicy"]["enabled"], False)
        for name, (docs, _) in ((n, render(v)) for n, v in cases() if n != "network-policy-values.yaml"):
            with self.subTest(name):
                self.assertEqual(of_kind(docs, "NetworkPolicy"), [])

    def test_the_network_policy_admits_only_the_named_peers_to_each_port(self):
        docs, _ = render(dict(cases())["network-policy-values.yaml"])
        (policy,) = of_kind(docs, "NetworkPolicy")
        deployment = of_kind(docs, "Deployment")[0]
        self.assertEqual(policy["spec"]["podSelector"], deployment["spec"]["selector"])
        self.assertEqual(policy["spec"]["policyTypes"], ["Ingress"])
        self.assertEqual(policy["spec"]["ingress"], [
            {"from": [{"ipBlock": {"cidr": "10.0.0.0/24"}}], "ports": [{"port": "webhook", "protocol": "TCP"}]},
            {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
             "ports": [{"port": "metrics", "protocol": "TCP"}]},
        ])
        ports = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
        self.assertLessEqual({"webhook", "metrics"}, ports, "the policy names the container's ports")
        # Without peers a port has no rule (a rule without `from` would admit everyone).
        docs, _ = render({"networkPolicy": {"enabled": True}})
        (policy,) = of_kind(docs, "NetworkPolicy")
        self.assertEqual(policy["spec"]["ingress"], [])

    def test_the_network_policy_refuses_values_that_would_cut_off_or_open_the_endpoint(self):
        with self.assertRaises(helm.HelmError) as refused:
            render({"webhook": {"enabled": True}, "networkPolicy": {"enabled": True}})
        self.assertIn("networkPolicy.webhook.from: name the API server's addresses", str(refused.exception))
        with self.assertRaises(helm.HelmError) as refused:
            render({"networkPolicy": {"enabled": True, "webhook": {"from": [{"ipBlock": {"cidr": "10.0.0.0/24"}}]}}})
        self.assertIn("networkPolicy.webhook.from: needs webhook.enabled=true", str(refused.exception))
        for bad in ({"webhook": {"from": [{}]}}, {"metrics": {"from": [{"ports": [80]}]}}, {"enable": True}):
            with self.subTest(bad):
                with self.assertRaises(helm.HelmValuesError):
                    render({"networkPolicy": {"enabled": True, **bad}})


if __name__ == "__main__":
    unittest.main(verbosity=2)
