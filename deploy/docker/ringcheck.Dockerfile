# syntax=docker/dockerfile:1
# The ring-check init container, ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0.
# It runs on the workload's GPUs, so it needs the CUDA runtime and NCCL; the
# node's driver comes in through the NVIDIA container toolkit. Two builds,
# for the driver branches clusters run (docs/deploy.md, "Driver matrix"):
#
#   CUDA 12 (the default tag, 0.1.0 and 0.1.0-cuda12): runs on drivers 525
#   and newer (535, 550, 570, 580, ...) through CUDA's minor version
#   compatibility: "CUDA 12.x >= 525" in
#   https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
#     docker build -f deploy/docker/ringcheck.Dockerfile \
#       -t ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0 .
#
#   CUDA 13 (0.1.0-cuda13): drivers 580 and newer only ("CUDA 13.x >= 580",
#   same page); for clusters that run 580 everywhere.
#     docker build -f deploy/docker/ringcheck.Dockerfile \
#       --build-arg CUDA_VERSION=13.0.0 \
#       -t ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0-cuda13 .
#
# `make images` builds both. NCCL is installed for the same CUDA major and
# minor as the runtime (NVIDIA's packages are named VERSION+cudaMAJOR.MINOR),
# so CUDA and NCCL never mismatch inside the image.

ARG CUDA_VERSION=12.9.1
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
ARG CUDA_VERSION
ARG NCCL_VERSION=2.28.9-1
# The devel image holds its own libnccl-dev; replace it with NCCL_VERSION
# built for this CUDA (the image marks the package held).
RUN cuda_mm=$(echo "$CUDA_VERSION" | cut -d. -f1,2) \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      --allow-change-held-packages --allow-downgrades \
      gcc libc6-dev make libssl-dev \
      "libnccl2=${NCCL_VERSION}+cuda${cuda_mm}" \
      "libnccl-dev=${NCCL_VERSION}+cuda${cuda_mm}" \
 && rm -rf /var/lib/apt/lists/*
# NCCL lives under /usr; the Makefile looks for it under CUDA_HOME, so link
# it there.
RUN multiarch=$(gcc -print-multiarch) \
 && test -f /usr/include/nccl.h \
 && ln -sf /usr/include/nccl.h /usr/local/cuda/include/nccl.h \
 && ln -sf /usr/lib/$multiarch/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2
WORKDIR /src
COPY . .
# The build context has no .git, so `make images` passes the version that
# git describe gave on the host (--version prints it).
ARG VERSION=0.1.0
RUN make VERSION="$VERSION" BUILD=/out CUDA_HOME=/usr/local/cuda CFLAGS="-O2" ringcheck \
 && test -x /out/ncclguard-ringcheck

FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU}
ARG CUDA_VERSION
ARG NCCL_VERSION=2.28.9-1
# The same NCCL as the build stage (libnccl2), for this CUDA.
RUN cuda_mm=$(echo "$CUDA_VERSION" | cut -d. -f1,2) \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      --allow-change-held-packages --allow-downgrades \
      "libnccl2=${NCCL_VERSION}+cuda${cuda_mm}" \
 && rm -rf /var/lib/apt/lists/*
# The rendezvous proves the job token with OpenSSL's HMAC (libcrypto).
RUN ldconfig -p | grep -q 'libcrypto\.so\.3 ' \
 || (apt-get update \
     && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libssl3t64 \
     && rm -rf /var/lib/apt/lists/*)
COPY --from=build /out/ncclguard-ringcheck /usr/local/bin/ncclguard-ringcheck
# The CUDA images carry NVIDIA_REQUIRE_CUDA, which makes the NVIDIA
# container toolkit refuse to start the container on a driver older than
# the image's CUDA. Then the init container, and with it the pod, never
# starts. Switch that refusal off (NVIDIA_DISABLE_REQUIRE, in the toolkit's
# "Constraints" environment variables): the check starts on any driver,
# minor version compatibility lets CUDA 12 run on 525 and newer, and on an
# older driver the check itself says that it cannot run there, without
# blocking the pod (docs/ringcheck.md).
ENV NVIDIA_DISABLE_REQUIRE=true
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/ncclguard-ringcheck"]
