# syntax=docker/dockerfile:1
# The webhook image, ghcr.io/ncclguard/ncclguard:0.1.0. Build from the
# repository root:
#   docker build -f deploy/docker/webhook.Dockerfile -t ghcr.io/ncclguard/ncclguard:0.1.0 .
# No CUDA in here: the webhook only reads and writes JSON and YAML (the
# review path parses with simdjson, whose one C++ file needs g++).

FROM debian:bookworm-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc g++ libc6-dev make pkg-config \
      libmicrohttpd-dev libjansson-dev libyaml-dev libssl-dev libgnutls28-dev \
      libsimdjson-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The build context has no .git, so `make images` passes the version that
# git describe gave on the host (--version prints it).
ARG VERSION=0.1.0
RUN make VERSION="$VERSION" BUILD=/out CFLAGS="-O2" /out/ncclguard \
 && strip /out/ncclguard \
 && /out/ncclguard --help >/dev/null

# Runtime: Debian slim plus the packages of the shared libraries the binary
# links directly; apt adds their own dependencies (GnuTLS's nettle, p11-kit
# and so on). tests/deploy/check.sh compares this list with the binary's
# NEEDED entries.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12 libjansson4 libyaml-0-2 libssl3 libgnutls30 \
      libsimdjson14 libstdc++6 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ncclguard /usr/local/bin/ncclguard
# Non-root, numeric so that runAsNonRoot can check it.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/ncclguard"]
CMD ["serve", "--listen", "0.0.0.0:8443"]
