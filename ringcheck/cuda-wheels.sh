#!/usr/bin/env bash
# Installs the pinned CUDA runtime and NCCL wheels (ringcheck/cuda-wheels.txt)
# into DEST as a toolkit-shaped folder: DEST/include (CUDA runtime, crt,
# CCCL, nccl.h) and DEST/lib64 (libcudart.so.13 with its unversioned link,
# libnccl.so.2). The wheels are only unpacked: nothing is installed into a
# Python environment or the system. pip's cache keeps them, so a second
# install after `make clean` needs no network.
#
#   ringcheck/cuda-wheels.sh DEST
set -euo pipefail
dest=${1:?usage: cuda-wheels.sh DEST}
here=$(cd "$(dirname "$0")" && pwd)
req=$here/cuda-wheels.txt
stamp=$dest/.installed
if [ -f "$stamp" ] && cmp -s "$stamp" "$req"; then
    exit 0
fi
py=$(command -v python3 || true)
[ -n "$py" ] || { echo "cuda-wheels: python3 not found (make deps installs it)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "cuda-wheels: installing $(grep -o '^[a-z0-9-]*==[0-9.]*' "$req" | tr '\n' ' ')into $dest"
"$py" -m pip download -q --disable-pip-version-check --no-deps \
    --only-binary=:all: --require-hashes -r "$req" -d "$tmp/whl"
mkdir -p "$tmp/unpacked"
for w in "$tmp"/whl/*.whl; do
    "$py" -m zipfile -e "$w" "$tmp/unpacked"
done
rm -rf "$dest.new"
mkdir -p "$dest.new/include" "$dest.new/lib64"
cp -a "$tmp"/unpacked/nvidia/cu13/include/. "$dest.new/include/"
cp -a "$tmp"/unpacked/nvidia/nccl/include/. "$dest.new/include/"
cp -a "$tmp"/unpacked/nvidia/cu13/lib/. "$dest.new/lib64/"
cp -a "$tmp"/unpacked/nvidia/nccl/lib/. "$dest.new/lib64/"
ln -sf libcudart.so.13 "$dest.new/lib64/libcudart.so"
ln -sf libnccl.so.2 "$dest.new/lib64/libnccl.so"
for f in include/cuda_runtime_api.h include/crt/host_defines.h \
        include/nv/target include/nccl.h lib64/libcudart.so.13 \
        lib64/libnccl.so.2; do
    [ -e "$dest.new/$f" ] || { echo "cuda-wheels: $f missing from the wheels" >&2; exit 1; }
done
cp "$req" "$dest.new/.installed"
rm -rf "$dest"
mv "$dest.new" "$dest"
