# syntax=docker/dockerfile:1
#
# The Switchboard node image: the `switchboard` binary on Debian slim, run by tini as a non-root
# user. Build and push it (README, "Kubernetes: container image and Helm chart"):
#
#   docker build -t REGISTRY/switchboard:TAG . && docker push REGISTRY/switchboard:TAG
#
# then set image.repository / image.tag in the Helm chart. tests/tests/helm_chart.rs checks this
# file against the chart (port, user, entrypoint).

# Builder and runtime share Debian 12 (bookworm), so the binary links against the glibc it runs on.
ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS builder
WORKDIR /src
COPY . .
# Cache mounts keep the registry and target/ between builds (BuildKit); the binary is copied out
# of the cached target/ in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p switchboard --bin switchboard \
    && install -D -m 0755 target/release/switchboard /out/switchboard

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
# tini runs as PID 1: it forwards SIGTERM to the node (which then drains) and reaps orphans.
# Processes that a stdio upstream child leaves behind when it exits or is stopped (a wrapper such
# as npx starting the real server) are re-parented to PID 1; the node as PID 1 would never wait
# for them, and they would stay zombies.
# ca-certificates: for https:// upstreams and rediss:// Redis.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 65532 switchboard \
    && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin switchboard
COPY --from=builder /out/switchboard /usr/local/bin/switchboard
# The node's default listener is 127.0.0.1:8080; in a container it must listen on every
# interface. The chart sets the same through its ConfigMap.
ENV SWITCHBOARD_HTTP__LISTEN=0.0.0.0:8080
# Numeric, so Kubernetes' runAsNonRoot can check it without reading /etc/passwd.
USER 65532:65532
# 8080: MCP endpoint, /healthz, /readyz; 9090: /metrics when metrics.listen is set (the chart
# sets it to 0.0.0.0:9090).
EXPOSE 8080 9090
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/switchboard"]
CMD ["serve"]
