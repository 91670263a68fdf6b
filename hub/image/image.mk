# The single-user image (hub/image/Dockerfile) built on this machine, with no container registry:
# the base image is made from Debian's own packages (mmdebstrap: bookworm, whose Python is 3.11,
# with pip), and Debian's buildah builds every step of the Dockerfile on it.  Included by the
# Makefile.  As root on Debian or Ubuntu (apt installs the three tools when missing):
#   make image        build localhost/ipu-tutorial-lab:<version> (IMAGE= names it otherwise)
#   make test-image   build it, then tests/image/: its entry point, as the learner (uid 1000),
#                     gives the course and starts a Jupyter server that serves the lab
# `podman push` (or `buildah push`) then takes it to a registry for Zero to JupyterHub.
# How the build differs from `docker build` on a machine with Docker Hub:
# - chroot isolation: buildah's default runtime (crun) needs cgroups this machine may not give a
#   container, and the steps need no isolation beyond a chroot;
# - the host's network and its certificate authorities, for the build's steps only (mounted,
#   never in a layer): a network whose proxy inspects TLS, as here, is trusted as the host
#   trusts it, and the image keeps Debian's own list.
IMAGE_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= localhost/ipu-tutorial-lab:$(IMAGE_VERSION)
IMAGE_BASE ?= localhost/ipu-lab-base:bookworm
IMAGE_DIR := build/image
HOST_CA := /etc/ssl/certs/ca-certificates.crt

.PHONY: image image-tools image-base test-image

image-tools:
	@command -v buildah > /dev/null && command -v podman > /dev/null && command -v mmdebstrap > /dev/null \
		|| (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends buildah podman mmdebstrap uidmap)

# Debian bookworm's minimal system with Python 3.11 and pip.  pip installs system-wide here as it
# does in Docker Hub's python images (PIP_BREAK_SYSTEM_PACKAGES: the image is the learner's
# whole environment, and nothing of Debian's needs the packages pip replaces).
$(IMAGE_DIR)/base.tar: | image-tools
	@mkdir -p $(IMAGE_DIR)
	mmdebstrap --quiet --variant=minbase --format=tar \
		--include=python3,python3-pip,python-is-python3,ca-certificates bookworm $@.part
	@mv $@.part $@

image-base: $(IMAGE_DIR)/base.tar
	podman image exists $(IMAGE_BASE) || podman import --quiet \
		--change "ENV PIP_BREAK_SYSTEM_PACKAGES=1" --change 'CMD ["/bin/bash"]' \
		$(IMAGE_DIR)/base.tar $(IMAGE_BASE)

image: image-base
	buildah bud --isolation chroot --network host --layers \
		$(if $(wildcard $(HOST_CA)),--volume $(HOST_CA):$(HOST_CA):ro) \
		--ignorefile hub/image/Dockerfile.dockerignore -f hub/image/Dockerfile \
		--build-arg BASE=$(IMAGE_BASE) -t $(IMAGE) .

test-image: image $(STAMP)
	IPU_LAB_IMAGE=$(IMAGE) $(BIN)/python -m pytest -p no:cacheprovider tests/image
