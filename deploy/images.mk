# make images: build the webhook, ring-check and watchdog images with docker
# or podman, whichever is installed (CONTAINER_ENGINE=... to choose).
# Nothing is published under ghcr.io/ncclguard yet: build the images and
# push them to your own registry (docs/deploy.md, "Your own registry").
#
#   make images IMAGE_REGISTRY=registry.example.com/ml IMAGE_TAG=0.1.0
#
# The ring check is built twice (docs/deploy.md, "Driver matrix"): on
# CUDA 12, the default tag (also TAG-cuda12), which runs on drivers 525 and
# newer; and on CUDA 13, TAG-cuda13, for drivers 580 and newer.
IMAGE_REGISTRY ?= ghcr.io/ncclguard
IMAGE_TAG ?= $(VERSION_FALLBACK)
CONTAINER_ENGINE ?=
RINGCHECK_CUDA12 ?= 12.9.1
RINGCHECK_CUDA13 ?= 13.0.0

.PHONY: images check-images
images:
	@engine="$(CONTAINER_ENGINE)"; found=""; \
	if [ -z "$$engine" ]; then \
		for e in docker podman; do \
			command -v $$e >/dev/null 2>&1 || continue; \
			found="$$found $$e"; \
			$$e info >/dev/null 2>&1 && { engine=$$e; break; }; \
		done; \
	fi; \
	if [ -z "$$engine" ] && [ -n "$$found" ]; then \
		echo "SKIP make images ($$found installed but not answering:" \
			"start its daemon or service, or set CONTAINER_ENGINE)"; \
		exit 0; \
	elif [ -z "$$engine" ]; then \
		echo "SKIP make images (neither docker nor podman is installed;" \
			"install one, or set CONTAINER_ENGINE)"; \
		exit 0; \
	fi; \
	set -x; \
	$$engine build -f deploy/docker/webhook.Dockerfile \
		--build-arg VERSION="$(VERSION)" \
		-t $(IMAGE_REGISTRY)/ncclguard:$(IMAGE_TAG) . && \
	$$engine build -f deploy/docker/ringcheck.Dockerfile \
		--build-arg VERSION="$(VERSION)" \
		--build-arg CUDA_VERSION=$(RINGCHECK_CUDA12) \
		-t $(IMAGE_REGISTRY)/ncclguard-ringcheck:$(IMAGE_TAG) \
		-t $(IMAGE_REGISTRY)/ncclguard-ringcheck:$(IMAGE_TAG)-cuda12 . && \
	$$engine build -f deploy/docker/ringcheck.Dockerfile \
		--build-arg VERSION="$(VERSION)" \
		--build-arg CUDA_VERSION=$(RINGCHECK_CUDA13) \
		-t $(IMAGE_REGISTRY)/ncclguard-ringcheck:$(IMAGE_TAG)-cuda13 . && \
	$$engine build -f deploy/docker/watchdog.Dockerfile \
		--build-arg VERSION="$(VERSION)" \
		-t $(IMAGE_REGISTRY)/ncclguard-watchdog:$(IMAGE_TAG) .

# `make images` against a stand-in engine that records its arguments, and
# with none installed.
check-images:
	sh tests/deploy/images.sh

CHECKS += check-images
