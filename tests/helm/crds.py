"""Checks of the custom resources the chart renders, whose schemas kubernetes-validate lacks.

Not the CRDs' full OpenAPI schemas: the fields the chart sets, their types and the required ones,
as the Prometheus Operator (monitoring.coreos.com/v1 ServiceMonitor) and Gateway API
(gateway.networking.k8s.io/v1 HTTPRoute) define them. Unknown fields under spec are refused, as
the API server's schema would prune or reject them.
"""

import re

# Prometheus Operator duration (e.g. 30s, 1m30s).
PROM_DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")
# Gateway API duration (GEP-2257): 1 to 4 of <number><unit>.
GATEWAY_DURATION = re.compile(r"^([0-9]{1,5}(h|m|s|ms)){1,4}$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class CrdError(Exception):
    """A custom resource that its CRD would refuse."""


def need(ok, what):
    if not ok:
        raise CrdError(what)


def only(obj, allowed, where):
    """Refuses keys of `obj` outside `allowed`."""
    need(isinstance(obj, dict), f"{where}: not a mapping")
    extra = set(obj) - set(allowed)
    need(not extra, f"{where}: unknown fields {sorted(extra)}")


def metadata(obj, kind):
    only(obj, {"apiVersion", "kind", "metadata", "spec"}, kind)
    name = obj.get("metadata", {}).get("name", "")
    need(DNS_LABEL.match(name) and len(name) <= 63, f"{kind}: bad metadata.name {name!r}")
    for key, value in obj["metadata"].get("labels", {}).items():
        need(isinstance(value, str), f"{kind}: label {key} is not a string")
    need(isinstance(obj.get("spec"), dict), f"{kind}: spec missing")


def service_monitor(obj):
    need(obj["apiVersion"] == "monitoring.coreos.com/v1", "ServiceMonitor: apiVersion")
    metadata(obj, "ServiceMonitor")
    spec = obj["spec"]
    only(spec, {"selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels"}, "ServiceMonitor.spec")
    selector = spec.get("selector")
    need(isinstance(selector, dict) and selector.get("matchLabels"), "ServiceMonitor: spec.selector.matchLabels required")
    endpoints = spec.get("endpoints")
    need(isinstance(endpoints, list) and endpoints, "ServiceMonitor: spec.endpoints required")
    for endpoint in endpoints:
        only(endpoint, {"port", "path", "interval", "scrapeTimeout", "scheme"}, "ServiceMonitor endpoint")
        need(isinstance(endpoint.get("port"), str), "ServiceMonitor endpoint: port (a Service port name) required")
        need(str(endpoint.get("path", "/metrics")).startswith("/"), "ServiceMonitor endpoint: path")
        for key in ("interval", "scrapeTimeout"):
            if key in endpoint:
                need(PROM_DURATION.match(str(endpoint[key])), f"ServiceMonitor endpoint: {key} {endpoint[key]!r}")


def http_route(obj):
    need(obj["apiVersion"] == "gateway.networking.k8s.io/v1", "HTTPRoute: apiVersion")
    metadata(obj, "HTTPRoute")
    spec = obj["spec"]
    only(spec, {"parentRefs", "hostnames", "rules"}, "HTTPRoute.spec")
    parents = spec.get("parentRefs")
    need(isinstance(parents, list) and 0 < len(parents) <= 32, "HTTPRoute: spec.parentRefs (1..32) required")
    for ref in parents:
        only(ref, {"group", "kind", "namespace", "name", "sectionName", "port"}, "HTTPRoute parentRef")
        need(isinstance(ref.get("name"), str) and ref["name"], "HTTPRoute parentRef: name required")
    for host in spec.get("hostnames", []):
        need(isinstance(host, str) and ":" not in host, f"HTTPRoute: hostname {host!r}")
    rules = spec.get("rules")
    need(isinstance(rules, list) and 0 < len(rules) <= 16, "HTTPRoute: spec.rules (1..16)")
    for rule in rules:
        only(rule, {"matches", "backendRefs", "timeouts", "filters"}, "HTTPRoute rule")
        for match in rule.get("matches", []):
            path = match.get("path", {})
            need(path.get("type") in ("Exact", "PathPrefix", "RegularExpression"), "HTTPRoute: path.type")
            need(str(path.get("value", "/")).startswith("/"), "HTTPRoute: path.value")
        for backend in rule.get("backendRefs", []):
            only(backend, {"group", "kind", "name", "namespace", "port", "weight"}, "HTTPRoute backendRef")
            need(isinstance(backend.get("name"), str), "HTTPRoute backendRef: name required")
            port = backend.get("port")
            need(isinstance(port, int) and 1 <= port <= 65535, "HTTPRoute backendRef: port (a Service's) required")
        timeouts = rule.get("timeouts", {})
        only(timeouts, {"request", "backendRequest"}, "HTTPRoute timeouts")
        for key, value in timeouts.items():
            need(GATEWAY_DURATION.match(str(value)), f"HTTPRoute timeouts.{key} {value!r}")


CHECKS = {"ServiceMonitor": service_monitor, "HTTPRoute": http_route}
