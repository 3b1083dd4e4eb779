"""The container harness's kubelet, in the small: the chart rendered by Helm's engine, and a
pod of its Deployment turned into a `podman run` as the kubelet would run it.

    pod.py render CHART VALUES-JSON RELEASE NAMESPACE > docs.json
    pod.py podman-args DOCS-JSON POD-NAME POD-DIR NETNS-PATH API-HOST API-PORT > args (NUL-separated)
    pod.py probe DOCS-JSON readiness|liveness > "path port-number period initial-delay"
    pod.py port DOCS-JSON PORT-NAME > number
    pod.py arg DOCS-JSON FLAG > the value following FLAG in the container's args
    pod.py endpointslices SERVICES-JSON MANAGER [IP=DOCS-JSON]... > EndpointSlices (JSON lines)

`podman-args` refuses what it cannot run as the kubelet would (a volume, a securityContext field
or an env source it does not know) instead of dropping it: the pod under test is the pod the
chart renders, or the harness fails and says which field it cannot honour.
"""

import json
import sys

# The kubelet's mount of a ServiceAccount's projected token, CA and namespace
# (k8s.io/kubernetes pkg/kubelet, `serviceaccount.DefaultAPITokenMountPath`).
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def fail(message):
    print(f"pod.py: {message}", file=sys.stderr)
    sys.exit(2)


def render(chart, values, release, namespace):
    import yaml
    import helm_python as helm

    with helm.Chart.load(chart) as c:
        files = c.render(json.loads(values), name=release, namespace=namespace)
    docs = [
        d
        for path, text in sorted(files.items())
        if not path.endswith("NOTES.txt")
        for d in yaml.safe_load_all(text)
        if d
    ]
    json.dump(docs, sys.stdout)


def deployment(docs_path):
    with open(docs_path) as f:
        docs = json.load(f)
    found = [d for d in docs if d.get("kind") == "Deployment"]
    if len(found) != 1:
        fail(f"expected one Deployment in the rendered chart, found {len(found)}")
    return found[0]


def container(dep):
    containers = dep["spec"]["template"]["spec"]["containers"]
    if len(containers) != 1:
        fail(f"expected one container, found {len(containers)}")
    return containers[0]


def port_number(c, port):
    if isinstance(port, int):
        return port
    for p in c.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    fail(f"no container port named {port!r}")


def env_value(env, pod_name, namespace, pod_ip):
    if "value" in env:
        return env["value"]
    source = env.get("valueFrom", {})
    field = source.get("fieldRef", {}).get("fieldPath")
    # The downward API fields a pod of this chart may ask for.
    known = {
        "metadata.name": pod_name,
        "metadata.namespace": namespace,
        "status.podIP": pod_ip,
        "spec.serviceAccountName": None,
    }
    if field in known and known[field] is not None:
        return known[field]
    fail(f"env {env.get('name')}: cannot resolve {source}")


def security_flags(pod_ctx, ctx):
    """The podman flags of the pod's and the container's securityContext (the container's wins)."""
    merged = dict(pod_ctx or {})
    merged.update(ctx or {})
    flags = []
    handled = {"fsGroup", "runAsNonRoot"}
    user = merged.get("runAsUser")
    group = merged.get("runAsGroup", user)
    if user is not None:
        flags += ["--user", f"{user}:{group if group is not None else user}"]
        handled |= {"runAsUser", "runAsGroup"}
    if merged.get("runAsNonRoot") and not user:
        fail("runAsNonRoot without a numeric runAsUser: the kubelet would refuse to start it")
    if merged.get("readOnlyRootFilesystem"):
        # podman mounts tmpfs on /run, /tmp and /var/tmp of a read-only container unless told not
        # to; a pod has no such mounts, only its volumes.
        flags += ["--read-only", "--read-only-tmpfs=false"]
        handled.add("readOnlyRootFilesystem")
    if merged.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
        handled.add("allowPrivilegeEscalation")
    caps = merged.get("capabilities", {})
    for cap in caps.get("drop", []):
        flags += ["--cap-drop", cap.lower()]
    for cap in caps.get("add", []):
        flags += ["--cap-add", cap.lower()]
    handled.add("capabilities")
    seccomp = merged.get("seccompProfile", {}).get("type")
    if seccomp == "RuntimeDefault":
        pass  # podman's default seccomp profile is the runtime's default
    elif seccomp == "Unconfined":
        flags += ["--security-opt", "seccomp=unconfined"]
    elif seccomp is not None:
        fail(f"seccompProfile {seccomp} is not supported by the harness")
    handled.add("seccompProfile")
    if merged.get("privileged"):
        fail("privileged containers are not run by the harness")
    handled.add("privileged")
    unknown = set(merged) - handled
    if unknown:
        fail(f"securityContext fields the harness cannot honour: {sorted(unknown)}")
    if pod_ctx and pod_ctx.get("fsGroup") is not None:
        flags += ["--group-add", str(pod_ctx["fsGroup"])]
    return flags


def podman_args(docs_path, pod_name, pod_dir, netns, api_host, api_port, pod_ip=""):
    dep = deployment(docs_path)
    namespace = dep["metadata"]["namespace"]
    spec = dep["spec"]["template"]["spec"]
    c = container(dep)
    args = [
        "--name", pod_name,
        "--hostname", pod_name,
        "--network", f"ns:{netns}",
        "--env", f"KUBERNETES_SERVICE_HOST={api_host}",
        "--env", f"KUBERNETES_SERVICE_PORT={api_port}",
        "--env", "KUBERNETES_SERVICE_PORT_HTTPS=" + str(api_port),
    ]
    args += security_flags(spec.get("securityContext"), c.get("securityContext"))
    # The ServiceAccount's token, CA and namespace, read-only, as the kubelet projects them.
    if spec.get("automountServiceAccountToken", True):
        args += ["--volume", f"{pod_dir}/serviceaccount:{SA_MOUNT}:ro"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for mount in c.get("volumeMounts", []):
        volume = volumes.get(mount["name"])
        if volume is None:
            fail(f"volumeMount {mount['name']} names no volume")
        if "emptyDir" in volume:
            # A directory of the node, writable by the pod's fsGroup, as the kubelet makes it.
            args += ["--volume", f"{pod_dir}/volumes/{mount['name']}:{mount['mountPath']}:rw"]
        else:
            fail(f"volume {mount['name']}: only emptyDir is run by the harness: {volume}")
    for env in c.get("env", []):
        args += ["--env", f"{env['name']}={env_value(env, pod_name, namespace, pod_ip)}"]
    if c.get("envFrom"):
        fail("envFrom is not run by the harness")
    if c.get("command"):
        args += ["--entrypoint", json.dumps(c["command"])]
    grace = spec.get("terminationGracePeriodSeconds", 30)
    args += ["--stop-timeout", str(grace)]
    args.append(c["image"])
    args += c.get("args", [])
    sys.stdout.write("\0".join(str(a) for a in args))


def probe(docs_path, which):
    c = container(deployment(docs_path))
    p = c.get(f"{which}Probe")
    if p is None:
        fail(f"the container has no {which}Probe")
    get = p.get("httpGet")
    if get is None:
        fail(f"{which}Probe: only httpGet probes are run by the harness")
    print(
        get["path"],
        port_number(c, get["port"]),
        p.get("periodSeconds", 10),
        p.get("initialDelaySeconds", 0),
        get.get("scheme", "HTTP").lower(),
    )


def port(docs_path, name):
    print(port_number(container(deployment(docs_path)), name))


def arg(docs_path, flag):
    args = container(deployment(docs_path)).get("args", [])
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            print(args[i + 1])
            return
        if a.startswith(flag + "="):
            print(a.split("=", 1)[1])
            return
    sys.exit(1)


def has_arg(docs_path, flag):
    args = container(deployment(docs_path)).get("args", [])
    sys.exit(0 if flag in args else 1)


def endpointslices(services_path, manager, *pods):
    """What the EndpointSlice controller writes for a Service of Ready pods, for pods no node
    runs: one IPv4 EndpointSlice per Service with a selector, `<service>-<manager>`, labelled
    `kubernetes.io/service-name` (what kube-apiserver's webhook and aggregator routing select
    by: k8s.io/apiserver pkg/util/proxy/endpointslice.go) and
    `endpointslice.kubernetes.io/managed-by: MANAGER` (anything but
    `endpointslice-controller.k8s.io`, so that controller leaves it alone), with each pod
    IP=DOCS whose template labels the selector matches, Ready, on the Service's ports (each
    named as the Service's, at the container port its targetPort names)."""
    with open(services_path) as f:
        services = json.load(f)["items"]
    running = []
    for p in pods:
        ip, docs_path = p.split("=", 1)
        dep = deployment(docs_path)
        running.append((ip, dep))
    for svc in services:
        selector = svc["spec"].get("selector")
        if not selector:
            continue
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        endpoints, ports = [], None
        for ip, dep in running:
            labels = dep["spec"]["template"]["metadata"].get("labels", {})
            if dep["metadata"]["namespace"] != ns or any(labels.get(k) != v for k, v in selector.items()):
                continue
            c = container(dep)
            ports = [
                {"name": sp.get("name", ""), "protocol": sp.get("protocol", "TCP"),
                 "port": port_number(c, sp.get("targetPort", sp["port"]))}
                for sp in svc["spec"]["ports"]
            ]
            endpoints.append({"addresses": [ip], "conditions": {"ready": True, "serving": True, "terminating": False}})
        if ports is None:
            ports = [{"name": sp.get("name", ""), "protocol": sp.get("protocol", "TCP"), "port": None}
                     for sp in svc["spec"]["ports"]]
        print(json.dumps({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-{manager}", "namespace": ns,
                "labels": {"kubernetes.io/service-name": name,
                           "endpointslice.kubernetes.io/managed-by": manager},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                                     "uid": svc["metadata"]["uid"]}],
            },
            "addressType": "IPv4", "endpoints": endpoints, "ports": ports,
        }))


def main():
    if len(sys.argv) < 2:
        fail(__doc__)
    command, rest = sys.argv[1], sys.argv[2:]
    commands = {
        "render": render,
        "podman-args": podman_args,
        "probe": probe,
        "port": port,
        "arg": arg,
        "has-arg": has_arg,
        "endpointslices": endpointslices,
    }
    if command not in commands:
        fail(f"unknown command {command}")
    commands[command](*rest)


if __name__ == "__main__":
    main()
