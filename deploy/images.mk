# make images: build the webhook and ring-check images with docker or
# podman, whichever is installed (CONTAINER_ENGINE=... to choose). Nothing
# is published under ghcr.io/ncclguard yet: build the images and push them
# to your own registry (docs/deploy.md, "Your own registry").
#
#   make images IMAGE_REGISTRY=registry.example.com/ml IMAGE_TAG=0.1.0
IMAGE_REGISTRY ?= ghcr.io/ncclguard
IMAGE_TAG ?= $(VERSION_FALLBACK)
CONTAINER_ENGINE ?=

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
		-t $(IMAGE_REGISTRY)/ncclguard-ringcheck:$(IMAGE_TAG) .

# `make images` against a stand-in engine that records its arguments, and
# with none installed.
check-images:
	sh tests/deploy/images.sh

CHECKS += check-images
