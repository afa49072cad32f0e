# syntax=docker/dockerfile:1
# The watchdog image, ghcr.io/ncclguard/ncclguard-watchdog:0.1.0. Build from
# the repository root:
#   docker build -f deploy/docker/watchdog.Dockerfile -t ghcr.io/ncclguard/ncclguard-watchdog:0.1.0 .
# No CUDA and no NVML in here: the NVIDIA container runtime mounts the
# node's libnvidia-ml.so.1 (runtimeClassName: nvidia), and the agent loads it
# with dlopen at run time. It ships two programs: the hang agent (the
# entrypoint) and the node loop, ncclguard-nodeloop (docs/nodeloop.md),
# which the node-health DaemonSet runs by its command.

FROM debian:bookworm-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev make pkg-config libjansson-dev libcurl4-openssl-dev \
      libmicrohttpd-dev libyaml-dev libssl-dev libgnutls28-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The build context has no .git, so `make images` passes the version that
# git describe gave on the host.
ARG VERSION=0.1.0
RUN make VERSION="$VERSION" BUILD=/out CFLAGS="-O2" /out/ncclguard-watchdog \
      /out/ncclguard-nodeloop \
 && strip /out/ncclguard-watchdog /out/ncclguard-nodeloop \
 && /out/ncclguard-watchdog --help >/dev/null \
 && /out/ncclguard-nodeloop --help >/dev/null

# Runtime: the packages of the libraries the binaries link directly
# (libyaml and GnuTLS, whose SHA-256 names the policy, for the policy the
# node loop reads; libcurl4 brings its own libssl3).
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libjansson4 libcurl4 libyaml-0-2 libgnutls30 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ncclguard-watchdog /usr/local/bin/ncclguard-watchdog
COPY --from=build /out/ncclguard-nodeloop /usr/local/bin/ncclguard-nodeloop
# Root on purpose: reading other users' /proc/PID/environ and signalling
# their processes needs uid 0 with SYS_PTRACE and KILL (capabilities
# added to a non-root container are not effective without ambient
# capabilities). The DaemonSet drops every other capability.
USER 0:0
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/ncclguard-watchdog"]
