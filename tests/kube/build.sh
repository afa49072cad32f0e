#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kubectl for one Kubernetes release from
# their Go modules (tests/kube/k8s-X.Y/go.mod pins k8s.io/kubernetes, every
# k8s.io staging module at the matching v0.X.Y, and the etcd server that
# release's go.mod requires) into KUBE_CACHE/<release>/bin, outside the
# build folder so that `make clean` keeps it. A second call with the same
# go.sum builds nothing.
#
#   tests/kube/build.sh 1.37      prints the bin folder
set -euo pipefail
rel=${1:?usage: build.sh RELEASE (1.37, 1.34)}
here=$(cd "$(dirname "$0")" && pwd)
mod=$here/k8s-$rel
[ -f "$mod/go.mod" ] || { echo "kube build: no module for $rel ($mod/go.mod)" >&2; exit 1; }
cache=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard/kube}
ver=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$mod/go.mod")
[ -n "$ver" ] || { echo "kube build: $mod/go.mod names no k8s.io/kubernetes version" >&2; exit 1; }
out=$cache/$ver
key=$(cat "$mod/go.mod" "$mod/go.sum" "$0" | sha256sum | cut -c1-16)
if [ -f "$out/.key" ] && [ "$(cat "$out/.key")" = "$key" ] &&
    [ -x "$out/bin/kube-apiserver" ] && [ -x "$out/bin/etcd" ] && [ -x "$out/bin/kubectl" ]; then
    echo "$out/bin"
    exit 0
fi
command -v go >/dev/null || { echo "kube build: go not found (Go 1.26 or later builds Kubernetes 1.37)" >&2; exit 1; }
want_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$mod/go.mod")
have_go=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$want_go" "$have_go" | sort -V | head -n 1)" != "$want_go" ]; then
    echo "kube build: $mod/go.mod needs Go $want_go; $(command -v go) is $have_go" >&2
    exit 1
fi
major=${ver#v}; major=${major%%.*}
minor=${ver#v*.}; minor=${minor%%.*}
# The version the binaries report (kubectl version, /version): a module
# build has no git tree to read it from.
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$ver -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    ld="$ld -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
start=$(date +%s)
echo "kube build: etcd, kube-apiserver and kubectl $ver into $out/bin (first build: several minutes)" >&2
mkdir -p "$out/bin.new"
(cd "$mod" && go build -ldflags "$ld" \
    -o "$out/bin.new/" go.etcd.io/etcd/server/v3 \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl) >&2
for n in server v3; do
    [ -e "$out/bin.new/$n" ] && mv "$out/bin.new/$n" "$out/bin.new/etcd"
done
rm -rf "${out:?}/bin"
mv "$out/bin.new" "$out/bin"
echo "$key" >"$out/.key"
echo "kube build: $ver built in $(( $(date +%s) - start )) s" >&2
echo "$out/bin"
