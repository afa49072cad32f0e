# syntax=docker/dockerfile:1
# The ring-check init container, ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0.
# Build from the repository root:
#   docker build -f deploy/docker/ringcheck.Dockerfile -t ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0 .
# It runs on the workload's GPUs, so it needs the CUDA runtime and NCCL; the
# node's driver comes in through the NVIDIA container toolkit. Match
# CUDA_VERSION to what your nodes' drivers support.

ARG CUDA_VERSION=13.0.0
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev make libssl-dev \
 && rm -rf /var/lib/apt/lists/*
# The devel image installs NCCL (libnccl-dev) under /usr; the Makefile looks
# for it under CUDA_HOME, so link it there.
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

# The CUDA runtime image ships NCCL (libnccl2); install it only if a
# variant of the image lacks it (the image holds the version it ships).
FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU}
RUN ldconfig -p | grep -q 'libnccl\.so\.2 ' \
 || (apt-get update \
     && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libnccl2 \
     && rm -rf /var/lib/apt/lists/*)
# The rendezvous proves the job token with OpenSSL's HMAC (libcrypto).
RUN ldconfig -p | grep -q 'libcrypto\.so\.3 ' \
 || (apt-get update \
     && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libssl3t64 \
     && rm -rf /var/lib/apt/lists/*)
COPY --from=build /out/ncclguard-ringcheck /usr/local/bin/ncclguard-ringcheck
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/ncclguard-ringcheck"]
