"""ConfigMap creates against a kube-apiserver, N workers at once; prints p50/p99 and the rate.

    python3 load.py KUBECONFIG_DIR NAMESPACE PREFIX COUNT CONCURRENCY

KUBECONFIG_DIR is the directory of `e2e/cluster/cluster.sh up` (pki/ca.crt, pki/admin.crt and
pki/admin.key; the server is https://10.200.0.1:6443 unless CLUSTER_SERVER says otherwise). Each
worker keeps one TLS connection (as a client-go client does) and creates COUNT/CONCURRENCY
ConfigMaps one after the other; every create must answer 201, or the run fails. Prints one line:
`count=N p50_ms=X p99_ms=Y rate=Z`.
"""

import http.client
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse


def main():
    directory, namespace, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
    count, concurrency = int(sys.argv[4]), int(sys.argv[5])
    server = urllib.parse.urlsplit(os.environ.get("CLUSTER_SERVER", "https://10.200.0.1:6443"))
    context = ssl.create_default_context(cafile=f"{directory}/pki/ca.crt")
    context.load_cert_chain(f"{directory}/pki/admin.crt", f"{directory}/pki/admin.key")
    per_worker = count // concurrency
    latencies, failures = [], []
    lock = threading.Lock()

    def worker(w):
        connection = http.client.HTTPSConnection(server.hostname, server.port, context=context)
        mine = []
        for i in range(per_worker):
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": f"{prefix}-{w}-{i}"}, "data": {"k": "v"}})
            start = time.perf_counter()
            connection.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body,
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = response.read()
            mine.append(time.perf_counter() - start)
            if response.status != 201:
                with lock:
                    failures.append(f"{response.status} {answer[:300]!r}")
                return
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if failures:
        sys.exit(f"load.py: {len(failures)} create(s) failed, first: {failures[0]}")
    latencies.sort()
    n = len(latencies)
    p50 = latencies[n // 2] * 1000
    p99 = latencies[min(n - 1, (n * 99) // 100)] * 1000
    print(f"count={n} p50_ms={p50:.2f} p99_ms={p99:.2f} rate={n / elapsed:.0f}")


if __name__ == "__main__":
    main()
