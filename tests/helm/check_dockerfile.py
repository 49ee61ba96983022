"""Checks the Dockerfile against what the chart expects of the image; run by tests/tests/helm_chart.rs.

    check_dockerfile.py REPO_ROOT

No image can be built here, so the file is parsed (dockerfile-parse) and its final stage checked:
a multi-stage build whose builder runs `cargo build --release -p switchboard`; a Debian slim or
distroless base; the binary copied from the builder; tini installed and the entrypoint
`tini -- switchboard` with `serve` as the default argument; a numeric non-root USER equal to the
chart's runAsUser; EXPOSE of the chart's containerPort and metrics port. Also .dockerignore keeps
target/ out of the build context.
"""

import json
import pathlib
import re
import shlex
import sys

import yaml
from dockerfile_parse import DockerfileParser


def need(ok, what):
    if not ok:
        sys.exit(f"FAIL: Dockerfile: {what}")


def stages(parser):
    """The instructions of each stage (a list per FROM), comments left out."""
    result = []
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            result.append([])
        if result and instruction["instruction"] != "COMMENT":
            result[-1].append((instruction["instruction"], instruction["value"]))
    return result


def values_of(stage, name):
    return [value for instruction, value in stage if instruction == name]


def exec_form(value, what):
    """A JSON-array ENTRYPOINT or CMD (the exec form: no shell in between)."""
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = None
    need(isinstance(parsed, list), f"{what} must be in exec form (a JSON array), got {value!r}")
    return parsed


def main():
    root = pathlib.Path(sys.argv[1])
    parser = DockerfileParser(str(root / "Dockerfile"))
    values = yaml.safe_load((root / "helm" / "switchboard" / "values.yaml").read_text())
    all_stages = stages(parser)
    need(parser.is_multistage and len(all_stages) >= 2, "a multi-stage build")
    builder, final = all_stages[0], all_stages[-1]
    builder_name = values_of(builder, "FROM")[0].split()[-1]
    need(any("cargo build --release" in run and "-p switchboard" in run for run in values_of(builder, "RUN")),
         "the builder runs cargo build --release -p switchboard")

    base = parser.baseimage
    need(re.match(r"^(debian:[a-z]+-slim|gcr\.io/distroless/)", base), f"final base Debian slim or distroless, got {base}")
    if base.startswith("debian:"):
        release = base.removeprefix("debian:").removesuffix("-slim")
        need(parser.parent_images[0].endswith(f"-{release}"),
             f"the builder on the runtime's Debian release, {release} (the binary needs its glibc)")

    copies = [shlex.split(value) for value in values_of(final, "COPY")]
    need(any(f"--from={builder_name}" in c and c[-1].endswith("/switchboard") for c in copies),
         "the final stage copies the switchboard binary from the builder")
    binary = next(c[-1] for c in copies if f"--from={builder_name}" in c)

    need(any("tini" in run.split() for run in values_of(final, "RUN")), "tini is installed in the final stage")
    (entrypoint,) = values_of(final, "ENTRYPOINT") or [None]
    need(entrypoint, "an ENTRYPOINT")
    entry = exec_form(entrypoint, "ENTRYPOINT")
    need(len(entry) == 3 and entry[0].endswith("/tini") and entry[1] == "--" and entry[2] == binary,
         f"ENTRYPOINT [tini, --, {binary}], got {entry}")
    need(exec_form(parser.cmd, "CMD") == ["serve"], f"CMD [serve], got {parser.cmd}")

    users = values_of(final, "USER")
    need(users, "a USER in the final stage")
    user = users[-1].split(":")[0]
    need(user.isdigit() and int(user) != 0, f"a numeric non-root USER (runAsNonRoot checks uids), got {users[-1]}")
    need(int(user) == values["podSecurityContext"]["runAsUser"], "USER equals the chart's podSecurityContext.runAsUser")

    exposed = {int(port.split("/")[0]) for value in values_of(final, "EXPOSE") for port in value.split()}
    need(values["containerPort"] in exposed, f"EXPOSE {values['containerPort']} (the chart's containerPort)")
    need(values["metrics"]["port"] in exposed, f"EXPOSE {values['metrics']['port']} (the chart's metrics.port)")
    listen = parser.envs.get("SWITCHBOARD_HTTP__LISTEN", "")
    need(listen == f"0.0.0.0:{values['containerPort']}", f"the image listens on the exposed port, got {listen!r}")

    ignored = (root / ".dockerignore").read_text().split()
    need("target/" in ignored or "target" in ignored, ".dockerignore leaves target/ out")
    print(f"ok Dockerfile: {len(all_stages)} stages, {base}, USER {users[-1]}, EXPOSE {sorted(exposed)}, {entry} {parser.cmd}")


if __name__ == "__main__":
    main()
