# syntax=docker/dockerfile:1
# The ring-check init container, ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0.
# Build from the repository root:
#   docker build -f deploy/docker/ringcheck.Dockerfile -t ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0 .
# It runs on the workload's GPUs, so it needs the CUDA runtime and NCCL; the
# node's driver comes in through the NVIDIA container toolkit.

ARG CUDA_VERSION=13.0.0
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      make pkg-config libnccl-dev \
      libmicrohttpd-dev libjansson-dev libyaml-dev libssl-dev libgnutls28-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make BUILD=/out CUDA_HOME=/usr/local/cuda CFLAGS="-O2" ringcheck \
 && test -x /out/ncclguard-ringcheck

# The CUDA runtime image; libnccl2 is named so NCCL is there whatever the
# image's default set of libraries.
FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libnccl2 libjansson4 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ncclguard-ringcheck /usr/local/bin/ncclguard-ringcheck
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/ncclguard-ringcheck"]
