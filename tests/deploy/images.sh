#!/bin/sh
# make images: builds the three Dockerfiles (the ring check twice, for CUDA 12
# and 13) with the engine it finds, tagged for
# the registry asked for and with the build's version; says SKIP, loudly,
# when there is no engine.
# shellcheck disable=SC2015,SC2016
set -u
cd "$(dirname "$0")/../.." || exit 1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
bad() { failed=$((failed + 1)); echo "FAIL - $1" >&2; }

# A stand-in engine: records each command line, builds nothing.
mkdir -p "$T/bin"
cat >"$T/bin/podman" <<EOS
#!/bin/sh
echo "\$*" >>"$T/calls"
EOS
chmod +x "$T/bin/podman"
ver=$(make -s --no-print-directory -f Makefile -f - print-version <<'EOM'
print-version:
	@echo $(VERSION)
EOM
)
if PATH="$T/bin:$PATH" CONTAINER_ENGINE=podman make -s images \
    IMAGE_REGISTRY=registry.example.com/ml IMAGE_TAG=9.9 >"$T/out" 2>&1; then
    ok "make images with podman exits 0"
else
    bad "make images with podman: $(cat "$T/out")"
fi
grep -qx "build -f deploy/docker/webhook.Dockerfile --build-arg VERSION=$ver -t registry.example.com/ml/ncclguard:9.9 ." "$T/calls" 2>/dev/null &&
    ok "webhook image built from webhook.Dockerfile, tagged and versioned" ||
    bad "webhook build call not as expected: $(cat "$T/calls" 2>/dev/null)"
# The ring check twice: CUDA 12 under the default tag (and -cuda12), for
# drivers 525 and newer; CUDA 13 under -cuda13, for 580 and newer.
grep -qx "build -f deploy/docker/ringcheck.Dockerfile --build-arg VERSION=$ver --build-arg CUDA_VERSION=12.9.1 -t registry.example.com/ml/ncclguard-ringcheck:9.9 -t registry.example.com/ml/ncclguard-ringcheck:9.9-cuda12 ." "$T/calls" 2>/dev/null &&
    ok "ring-check image on CUDA 12 under the default tag and -cuda12" ||
    bad "ring-check CUDA 12 build call not as expected: $(cat "$T/calls" 2>/dev/null)"
grep -qx "build -f deploy/docker/ringcheck.Dockerfile --build-arg VERSION=$ver --build-arg CUDA_VERSION=13.0.0 -t registry.example.com/ml/ncclguard-ringcheck:9.9-cuda13 ." "$T/calls" 2>/dev/null &&
    ok "ring-check image on CUDA 13 under -cuda13" ||
    bad "ring-check CUDA 13 build call not as expected: $(cat "$T/calls" 2>/dev/null)"
grep -qx "build -f deploy/docker/watchdog.Dockerfile --build-arg VERSION=$ver -t registry.example.com/ml/ncclguard-watchdog:9.9 ." "$T/calls" 2>/dev/null &&
    ok "watchdog image built from watchdog.Dockerfile, tagged and versioned" ||
    bad "watchdog build call not as expected: $(cat "$T/calls" 2>/dev/null)"
[ "$(wc -l <"$T/calls" 2>/dev/null)" = 4 ] &&
    ok "make images runs four builds" || bad "make images ran $(wc -l <"$T/calls" 2>/dev/null) builds, expected 4"
# The default CUDA of the Dockerfile is the CUDA 12 that make images uses,
# so a plain docker build gives the image for the older drivers.
RD=deploy/docker/ringcheck.Dockerfile
grep -qx 'ARG CUDA_VERSION=12.9.1' "$RD" &&
    ok "$RD defaults to CUDA 12" || bad "$RD does not default to CUDA 12.9.1"
# NCCL comes for the image's own CUDA major.minor, in both stages.
[ "$(grep -c '"libnccl2=${NCCL_VERSION}+cuda${cuda_mm}"' "$RD")" = 2 ] &&
    grep -q 'cuda_mm=$(echo "$CUDA_VERSION" | cut -d. -f1,2)' "$RD" &&
    ok "$RD installs NCCL built for its CUDA in both stages" ||
    bad "$RD does not pin NCCL to its CUDA version"
# The toolkit's NVIDIA_REQUIRE_CUDA check would stop the container, and the
# pod, on an older driver: the image turns it off in its last stage.
awk '/^FROM /{n++} n == 2' "$RD" | grep -qx 'ENV NVIDIA_DISABLE_REQUIRE=true' &&
    ok "$RD turns off the toolkit's driver refusal" ||
    bad "$RD keeps NVIDIA_REQUIRE_CUDA in force (a too-old driver would block the pod)"
for d in deploy/docker/webhook.Dockerfile deploy/docker/ringcheck.Dockerfile deploy/docker/watchdog.Dockerfile; do
    grep -q 'make VERSION="$VERSION"' "$d" && grep -q '^ARG VERSION=' "$d" &&
        ok "$d passes --build-arg VERSION to make" ||
        bad "$d ignores --build-arg VERSION"
done

# No engine: a SKIP line and exit 0. PATH keeps only what make and sh need.
mkdir -p "$T/noengine"
for tool in make sh dirname cat; do
    ln -s "$(command -v $tool)" "$T/noengine/$tool"
done
if PATH="$T/noengine" make -s images >"$T/out" 2>&1 &&
    grep -q '^SKIP make images (neither docker nor podman is installed' "$T/out"; then
    ok "without docker or podman, make images prints SKIP and exits 0"
else
    bad "make images without an engine: $(cat "$T/out")"
fi
# An engine that is installed but has no daemon: SKIP, naming it.
cat >"$T/noengine/docker" <<'EOS'
#!/bin/sh
echo "Cannot connect to the Docker daemon" >&2
exit 1
EOS
chmod +x "$T/noengine/docker"
if PATH="$T/noengine" make -s images >"$T/out" 2>&1 &&
    grep -q '^SKIP make images ( docker installed but not answering' "$T/out"; then
    ok "with docker installed but no daemon, make images prints SKIP naming it"
else
    bad "make images with a docker that does not answer: $(cat "$T/out")"
fi
echo "SKIP building the real images here (tests never start a container engine; run make images)"
echo "tests/deploy/images.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
