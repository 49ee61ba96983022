"""What each value set of the chart must render (check_chart.py runs these after validation).

`check(name, objects, tree)`: `objects` are the rendered objects, `tree` the config that
`switchboard config` printed for the render. Raises SystemExit naming the first wrong field.
"""

import sys


def need(ok, what):
    if not ok:
        sys.exit(f"FAIL: {what}")


def one(objects, kind):
    found = [obj for obj in objects if obj["kind"] == kind]
    need(len(found) == 1, f"expected one {kind}, found {len(found)}")
    return found[0]


def env_of(container):
    return {var["name"]: var for var in container.get("env", [])}


def secret_ref(env, name):
    """(Secret, key) that variable `name` comes from."""
    need(name in env, f"container lacks {name}")
    ref = env[name].get("valueFrom", {}).get("secretKeyRef")
    need(ref is not None, f"{name} is not from a Secret")
    return ref["name"], ref["key"]


def every_render(objects, tree):
    """Holds for every value set: hardening, drain timing, ports, the ConfigMap loading."""
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    need(pod["securityContext"]["runAsNonRoot"] is True, "pod runAsNonRoot")
    need(pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", "pod seccomp RuntimeDefault")
    security = container["securityContext"]
    need(security["readOnlyRootFilesystem"] is True, "readOnlyRootFilesystem")
    need(security["allowPrivilegeEscalation"] is False, "allowPrivilegeEscalation false")
    need(security["capabilities"]["drop"] == ["ALL"], "capabilities drop ALL")
    need(security["seccompProfile"]["type"] == "RuntimeDefault", "container seccomp RuntimeDefault")
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds")
    need(pre_stop == 5, f"preStop sleep 5 s, got {pre_stop}")
    drain = int(tree["cluster"]["drain_timeout"].removesuffix("s"))
    need(pod["terminationGracePeriodSeconds"] > pre_stop + drain, "grace period above preStop + drain")
    spread = {c["topologyKey"]: c["whenUnsatisfiable"] for c in pod["topologySpreadConstraints"]}
    need(spread == {"kubernetes.io/hostname": "ScheduleAnyway", "topology.kubernetes.io/zone": "ScheduleAnyway"},
         f"topology spread over hosts and zones, ScheduleAnyway: {spread}")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    need(ports == {"http": 8080, "metrics": 9090}, f"container ports {ports}")
    need(tree["http"]["listen"] == "0.0.0.0:8080", "the node listens on the container port")
    need(any(m["mountPath"] == "/tmp" for m in container["volumeMounts"]), "writable /tmp")
    service = one(objects, "Service")
    need(service["spec"]["sessionAffinity"] == "None", "no session affinity")
    need({p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {"http": "http", "metrics": "metrics"},
         "Service ports http and metrics")
    config = one([o for o in objects if o["metadata"]["name"] == "switchboard"], "ConfigMap")["data"]
    need(config["SWITCHBOARD_METRICS__LISTEN"] == "0.0.0.0:9090", "metrics.listen on the metrics port")
    need(tree["log"]["format"] == "json", "JSON logs")


def default(objects, tree):
    kinds = sorted(obj["kind"] for obj in objects)
    need(kinds == ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service"], f"default kinds {kinds}")
    deployment = one(objects, "Deployment")
    need(deployment["spec"]["replicas"] == 3, "3 replicas")
    env = env_of(deployment["spec"]["template"]["spec"]["containers"][0])
    need(not any(name.startswith("OTEL_") for name in env), "OpenTelemetry off by default")
    need(env["SWITCHBOARD_REDIS__URL"]["value"] == "redis://redis:6379", "default Redis URL")
    need(tree["redis"]["mode"] == "standalone", "standalone Redis")


def ingress_nginx(objects, tree):
    annotations = one(objects, "Ingress")["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    expected = {"proxy-buffering": "off", "proxy-read-timeout": "3600", "proxy-send-timeout": "3600",
                "proxy-body-size": "8m"}
    for key, value in expected.items():
        need(annotations.get(prefix + key) == value, f"Ingress {prefix}{key}: {annotations.get(prefix + key)!r}")
    need(tree["http"]["max_body"] == "8MiB", "proxy-body-size follows http.max_body (8MiB = nginx 8m)")
    # Snippets are refused by default ingress-nginx controllers: gzip off only on request.
    need(prefix + "configuration-snippet" not in annotations, "no configuration-snippet by default")
    need(annotations["cert-manager.io/cluster-issuer"] == "letsencrypt", "user annotations kept")
    backend = one(objects, "Ingress")["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    need(backend == {"name": "switchboard", "port": {"name": "http"}}, f"Ingress backend {backend}")


def gateway_api(objects, tree):
    route = one(objects, "HTTPRoute")
    rule = route["spec"]["rules"][0]
    need(rule["backendRefs"] == [{"name": "switchboard", "port": 80}], "HTTPRoute to the Service's port")
    need(rule["timeouts"] == {"request": "0s"}, "no request timeout on streams")
    need(tree["http"]["allowed_hosts"] == ["mcp.example.com"], "allowed host")


def monitoring_hpa(objects, tree):
    monitor = one(objects, "ServiceMonitor")
    need(monitor["spec"]["endpoints"][0]["port"] == "metrics", "ServiceMonitor scrapes the metrics port")
    need(monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack", "ServiceMonitor labels")
    hpa = one(objects, "HorizontalPodAutoscaler")
    names = [m.get("resource", m.get("pods", {}).get("metric", {})).get("name") for m in hpa["spec"]["metrics"]]
    need(names == ["cpu", "switchboard_streams_open"], f"HPA metrics {names}")
    deployment = one(objects, "Deployment")
    need("replicas" not in deployment["spec"], "the HPA owns the replica count")
    env = env_of(deployment["spec"]["template"]["spec"]["containers"][0])
    need(env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://otel-collector.observability:4318", "OTLP endpoint")
    need(env["OTEL_SERVICE_NAME"]["value"] == "switchboard", "OTEL_SERVICE_NAME")
    need(env["OTEL_RESOURCE_ATTRIBUTES"]["value"]
         == "k8s.namespace.name=$(POD_NAMESPACE),k8s.pod.name=$(POD_NAME),deployment.environment=production",
         "OTEL_RESOURCE_ATTRIBUTES")
    need(list(env).index("POD_NAME") < list(env).index("OTEL_RESOURCE_ATTRIBUTES"), "POD_NAME defined before use")


def auth_secrets(objects, tree):
    env = env_of(one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0])
    need(secret_ref(env, "SWITCHBOARD_AUTH__JWT_PUBLIC_KEYS_PEM") == ("switchboard-jwt", "jwt-public-keys.pem"),
         "JWT public keys from their Secret")
    need(secret_ref(env, "SWITCHBOARD_STATELESS__MRTR__STATE_KEYS") == ("switchboard-mrtr", "mrtr-state-keys"),
         "MRTR keys from their Secret")
    need(secret_ref(env, "SWITCHBOARD_REDIS__URL") == ("switchboard-redis", "redis-url"), "Redis URL from a Secret")
    config = one([o for o in objects if o["metadata"]["name"] == "switchboard"], "ConfigMap")["data"]
    for name in ("SWITCHBOARD_AUTH__JWT_PUBLIC_KEYS_PEM", "SWITCHBOARD_STATELESS__MRTR__STATE_KEYS"):
        need(name not in config, f"{name} left the ConfigMap")
    need(len(tree["auth"]["jwt_public_keys_pem"]) == 1, "the public key loads")
    need(len(tree["stateless"]["mrtr"]["state_keys"]) == 1, "the MRTR key loads")
    need(tree["auth"]["resource_url"] == "https://mcp.example.com/mcp", "auth on")


def redis_sentinel(objects, tree):
    env = env_of(one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0])
    need("SWITCHBOARD_REDIS__URL" not in env, "Sentinel without a URL")
    need(secret_ref(env, "SWITCHBOARD_REDIS__PASSWORD") == ("redis-auth", "redis-password"), "data password")
    need(secret_ref(env, "SWITCHBOARD_REDIS__SENTINEL_PASSWORD") == ("redis-auth", "sentinel-password"),
         "sentinel password")
    need(tree["redis"]["mode"] == "sentinel" and tree["redis"]["master_name"] == "mymaster", "Sentinel mode")
    need(len(tree["redis"]["nodes"]) == 3, "three sentinels")
    need(tree["redis"]["password"] == "***", "the password reached the loader (printed masked)")


def redis_cluster(objects, tree):
    env = env_of(one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0])
    need("SWITCHBOARD_REDIS__URL" not in env, "Cluster takes no URL")
    need(tree["redis"]["mode"] == "cluster" and tree["redis"]["min_replicas_acked"] == 1, "Cluster mode")


def networkpolicy(objects, tree):
    spec = one(objects, "NetworkPolicy")["spec"]
    need(spec["policyTypes"] == ["Ingress", "Egress"], "ingress and egress policy")
    ports = [rule["ports"][0]["port"] for rule in spec["ingress"]]
    need(ports == ["http", "metrics"], f"ingress ports {ports}")
    egress = [p["port"] for rule in spec["egress"] for p in rule["ports"]]
    need(egress == [53, 53, 6379, 26379, 8000], f"egress ports {egress}")


def upstreams_file(objects, tree):
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    need(mounts.get("config-file") == "/etc/switchboard", "config file mounted")
    need([u["name"] for u in tree["upstreams"]] == ["weather"], "the file's upstream loads")


BY_NAME = {
    "default": default,
    "ingress-nginx": ingress_nginx,
    "gateway-api": gateway_api,
    "monitoring-hpa": monitoring_hpa,
    "auth-secrets": auth_secrets,
    "redis-sentinel": redis_sentinel,
    "redis-cluster": redis_cluster,
    "networkpolicy": networkpolicy,
    "upstreams-file": upstreams_file,
}


def check(name, objects, tree):
    """Runs the checks every render gets, then this value set's own (each example has some)."""
    every_render(objects, tree)
    need(name in BY_NAME, f"examples/{name}.yaml has no checks in assertions.py")
    BY_NAME[name](objects, tree)
