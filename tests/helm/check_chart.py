"""Renders the Helm chart offline and checks what it renders; run by tests/tests/helm_chart.rs.

    check_chart.py REPO_ROOT SWITCHBOARD_BINARY

1. Renders helm/switchboard with its defaults and with every helm/switchboard/examples/*.yaml
   (helm-python-sdk: Helm's Go SDK in a shared library, no helm binary).
2. Lints it (`helm lint --strict`) and validates every object against the Kubernetes OpenAPI
   schemas (kubernetes-validate, strict: unknown fields refused) of KUBE_VERSIONS; the custom
   resources by crds.py.
3. Asserts what each value set must produce (assertions.py), and that wrong values fail.
4. Loads each render's node environment (the ConfigMap, the container's env, Secret values from
   SECRETS) through the real config loader, `switchboard config`, which must exit 0 and print
   every value back; the same for k8s/switchboard.yaml, whose objects are validated too.
5. Compares the default render with golden/default.yaml (UPDATE_GOLDEN=1 rewrites it).
Exits non-zero with a message on the first failure.
"""

import difflib
import os
import pathlib
import subprocess
import sys
import tempfile
import tomllib

import helm_python as helm
import kubernetes_validate
import yaml

import assertions
import crds

# The oldest Kubernetes the chart supports (the preStop sleep hook is on by default from 1.30)
# and a recent one.
KUBE_VERSIONS = ["1.30.0", "1.35.0"]
RELEASE, NAMESPACE = "switchboard", "default"
# Values of the Secrets the examples name, by (Secret, key): what the loader gets for them.
SECRETS = {
    ("switchboard-redis", "redis-url"): "redis://:example-password@redis:6379/0",
    ("redis-auth", "redis-password"): "example-password",
    ("redis-auth", "sentinel-password"): "example-sentinel-password",
    ("switchboard-mrtr", "mrtr-state-keys"): "Udu+pX/4MISTydcP6fR60nP4NQQ+5RWUmq1/6oT8/H4=",
    # A P-256 public key made for this test (openssl ecparam -name prime256v1 -genkey).
    ("switchboard-jwt", "jwt-public-keys.pem"): "-----BEGIN PUBLIC KEY-----\n"
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE4ZfczGZbLJmAR0s1w/SAle/YY6be\n"
    "ZMgYlxO5d7dVwcJjZ3uogupEuBlhmILFqXJtez57osRG8x3qnqU0mIeSjA==\n"
    "-----END PUBLIC KEY-----\n",
}
# Values that the chart must refuse to render, each with why.
REFUSED = [
    ({"terminationGracePeriodSeconds": 30}, "grace period not above preStop sleep + drain"),
    ({"config": {"metrics.listen": "0.0.0.0:1"}}, "metrics.listen is the chart's"),
    ({"ingress": {"enabled": True}, "config": {"http.max_body": "4 parsecs"}}, "unreadable http.max_body"),
    ({"metrics": {"port": 0, "serviceMonitor": {"enabled": True}}}, "ServiceMonitor without a metrics port"),
]


def fail(message):
    sys.exit(f"FAIL: {message}")


def render(chart_dir, values):
    """The chart's manifests for `values`: (text as `helm template` prints it, parsed objects)."""
    with helm.Chart.load(str(chart_dir)) as chart:
        manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE)
    parts = [f"---\n# Source: {name}\n{text.strip()}\n" for name, text in sorted(manifests.items()) if text.strip()]
    text = "".join(parts)
    return text, [obj for obj in yaml.safe_load_all(text) if obj]


def lint(chart_dir, values, where):
    """`helm lint --strict` of the chart with `values`: no warning, no error."""
    report = helm.lint(str(chart_dir), values, strict=True)
    findings = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    if findings:
        fail(f"{where}: helm lint: {findings}")


def validate(obj, where):
    """Schema check of one object: Kubernetes' own kinds by kubernetes-validate, CRDs by crds.py."""
    kind = obj.get("kind")
    try:
        if kind in crds.CHECKS:
            crds.CHECKS[kind](obj)
            return
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(obj, version, strict=True)
    except (crds.CrdError, kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as error:
        fail(f"{where}: {kind} {obj.get('metadata', {}).get('name')}: {error}")


def node_environment(objects, files_dir):
    """The node container's environment as Kubernetes builds it: envFrom (the ConfigMap) first,
    then env, which wins; Secret references from SECRETS; the config file written to files_dir."""
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    container = by_kind["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    maps = {m["metadata"]["name"]: m.get("data", {}) for m in by_kind["ConfigMap"]}
    env = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]])
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "secretKeyRef" in var.get("valueFrom", {}):
            ref = var["valueFrom"]["secretKeyRef"]
            if (ref["name"], ref["key"]) not in SECRETS:
                fail(f"no test value for Secret {ref['name']} key {ref['key']}: add it to SECRETS")
            env[var["name"]] = SECRETS[(ref["name"], ref["key"])]
    if "SWITCHBOARD_CONFIG" in env:
        # The mounted file: the ConfigMap that the config-file volume names.
        volumes = by_kind["Deployment"][0]["spec"]["template"]["spec"].get("volumes", [])
        source = next(v["configMap"]["name"] for v in volumes if v["name"] == "config-file")
        path = pathlib.Path(files_dir) / "switchboard.toml"
        path.write_text(maps[source]["switchboard.toml"])
        env["SWITCHBOARD_CONFIG"] = str(path)
    return env


def printed(value):
    """A value of `switchboard config`'s TOML as the variable spells it."""
    if isinstance(value, list):
        return ",".join(str(item).strip() for item in value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def load_config(binary, env, where):
    """Runs `switchboard config` with `env` alone; it must exit 0 and echo every SWITCHBOARD_ value."""
    run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    try:
        out = subprocess.run([binary, "config"], env=run_env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        fail(f"{where}: switchboard config did not finish within 30 s")
    if out.returncode != 0:
        fail(f"{where}: switchboard config exited {out.returncode}:\n{out.stderr}")
    tree = tomllib.loads(out.stdout)
    for name, value in env.items():
        if not name.startswith("SWITCHBOARD_") or name == "SWITCHBOARD_CONFIG":
            continue
        node = tree
        for part in name.removeprefix("SWITCHBOARD_").lower().split("__"):
            if part not in node:
                fail(f"{where}: switchboard config does not print the key of {name}")
            node = node[part]
        shown = printed(node)
        if "***" in shown:
            continue  # secrets are masked in the output
        if isinstance(node, float) and float(value) == node:
            continue  # Helm writes the number 1.0 as "1"; the node reads it back as 1.0
        if shown != ",".join(item.strip() for item in value.split(",")):
            fail(f"{where}: {name}={value!r} but switchboard config prints {shown!r}")
    return tree


def value_sets(chart_dir):
    """(name, values) of the defaults and every example values file."""
    yield "default", {}
    for path in sorted((chart_dir / "examples").glob("*.yaml")):
        yield path.stem, yaml.safe_load(path.read_text()) or {}


def main():
    root, binary = pathlib.Path(sys.argv[1]), sys.argv[2]
    chart_dir = root / "helm" / "switchboard"
    count = 0
    with tempfile.TemporaryDirectory() as files_dir:
        for name, values in value_sets(chart_dir):
            text, objects = render(chart_dir, values)
            lint(chart_dir, values, name)
            for obj in objects:
                validate(obj, name)
            tree = load_config(binary, node_environment(objects, files_dir), f"render {name}")
            assertions.check(name, objects, tree)
            count += len(objects)
            print(f"ok {name}: {len(objects)} objects valid, config loads")
            if name == "default":
                golden(root, text)
        for values, why in REFUSED:
            try:
                render(chart_dir, values)
            except helm.HelmError:
                print(f"ok refused: {why}")
                continue
            fail(f"the chart rendered values it must refuse ({why}): {values}")
        k8s = []
        for path in sorted((root / "k8s").glob("*.yaml")):
            k8s += [obj for obj in yaml.safe_load_all(path.read_text()) if obj]
        for obj in k8s:
            validate(obj, "k8s/")
        manifest = [obj for obj in k8s if obj["metadata"]["name"] == "switchboard"]
        load_config(binary, node_environment(manifest, files_dir), "k8s/switchboard.yaml")
        print(f"ok k8s/: {len(k8s)} objects valid, config loads")
    print(f"chart checks done: {count} rendered objects, Kubernetes {', '.join(KUBE_VERSIONS)}")


def golden(root, text):
    """The default render against golden/default.yaml; UPDATE_GOLDEN=1 rewrites the file."""
    path = root / "tests" / "helm" / "golden" / "default.yaml"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"ok golden: rewrote {path.relative_to(root)}")
    elif not path.exists() or path.read_text() != text:
        old = path.read_text().splitlines(keepends=True) if path.exists() else []
        diff = "".join(difflib.unified_diff(old, text.splitlines(keepends=True), "golden", "render"))
        fail(f"the default render differs from {path.relative_to(root)} (UPDATE_GOLDEN=1 rewrites it):\n{diff}")
    else:
        print("ok golden: the default render matches")


if __name__ == "__main__":
    main()
