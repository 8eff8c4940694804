#!/usr/bin/env bash
# Build the repository's Dockerfile, as written, into the image tfviz:ci with podman, on a machine
# with no Docker engine and no Docker Hub (CI's machines; tests/deploy/test_container.py runs the image).
#
# What that takes here, and why (docs/docker.md, "Building with podman"):
# - python:3.11-slim cannot be pulled: a stand-in with Debian bookworm's Python 3.11 is made with
#   debootstrap from the machine's own apt mirror and imported under that name (once; cached);
# - torch comes from the machine's CPU wheel through a one-file file:// index mounted into the
#   build (TORCH_INDEX), its dependencies from PyPI; the machine's CA bundle and a pip.conf naming it
#   are mounted into the build, for the TLS proxy in front of PyPI;
# - runc (crun fails here: "cgroups in hybrid mode not supported"), ulimits no higher than the
#   machine's own (root may not raise them), --format docker (the OCI format drops HEALTHCHECK),
#   and the host's network for the build.
# Prints the build time and the image size. Idempotent: a second run reuses the base and layers.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${TFVIZ_CONTAINER_WORK:-/var/tmp/tfviz-container}
BASE=docker.io/library/python:3.11-slim
IMAGE=${TFVIZ_IMAGE:-tfviz:ci}
TORCH_PIN=$(sed -n 's/^torch==\([0-9.]*\).*/\1/p' requirements.txt)

need=()
for cmd in podman debootstrap runc; do command -v "$cmd" >/dev/null 2>&1 || need+=("$cmd"); done
if ((${#need[@]})); then
  apt-get update && apt-get install -y "${need[@]}"
fi
mkdir -p "$WORK"

# podman's settings for this build only (CONTAINERS_CONF), not the machine's.
cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$WORK/containers.conf"

# The machine's own Debian mirror (deb822 "URIs:" or one-line "deb URL" entries), not Docker Hub.
mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | grep -v '^[[:space:]]*#' \
  | grep -o -E 'https?://[^ ]+/debian/?' | head -1 || true)
mirror=${TFVIZ_APT_MIRROR:-${mirror:-http://deb.debian.org/debian}}

# The rootfs tarball is kept too: where podman's storage is emptied but $WORK stays, the import
# takes seconds instead of a debootstrap.
if ! podman image exists "$BASE"; then
  if ! [ -s "$WORK/base.tar" ]; then
    echo "container: making a stand-in for $BASE with debootstrap (bookworm, python3 3.11, $mirror)"
    rm -rf "$WORK/rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
      bookworm "$WORK/rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
      || { tail -20 "$WORK/debootstrap.log"; exit 1; }
    rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
    tar -C "$WORK/rootfs" -cf "$WORK/base.tar.part" . && mv "$WORK/base.tar.part" "$WORK/base.tar"
    rm -rf "$WORK/rootfs"
  fi
  podman import --quiet "$WORK/base.tar" "$BASE" >/dev/null
fi

# A one-file index for torch: the machine's CPU wheel of the pinned version, as a PEP 503 folder
# mounted into the build and named by a file:// URL. The URL is the same on every run: TORCH_INDEX
# is a build argument, so a URL that changed (a loopback server on a random port) would miss the
# layer cache and reinstall everything on every run.
wheel=$(ls /opt/wheels/torch-"$TORCH_PIN"+cpu-cp311-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  pip download --no-deps --dest "$WORK/wheels" "torch==$TORCH_PIN" >/dev/null
  wheel=$(ls "$WORK"/wheels/torch-"$TORCH_PIN"*.whl | head -1)
fi
name=$(basename "$wheel")
if ! [ -f "$WORK/index/torch/$name" ] || [ -L "$WORK/index/torch/$name" ]; then
  rm -rf "$WORK/index" && mkdir -p "$WORK/index/torch"
  # A symlink would not resolve inside the build container: link the file, or copy it.
  ln "$wheel" "$WORK/index/torch/$name" 2>/dev/null || cp "$wheel" "$WORK/index/torch/$name"
  printf '<!doctype html><a href="%s">%s</a>\n' "$name" "$name" >"$WORK/index/torch/index.html"
fi

ca=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\nextra-index-url = https://pypi.org/simple\n' \
  >"$WORK/pip.conf"

before=$(podman image inspect "$IMAGE" --format '{{.Id}}' 2>/dev/null || true)
start=$(date +%s)
podman build --format docker --network host \
  -v "$WORK/pip.conf:/etc/pip.conf:ro" -v "$ca:/etc/ssl/certs/ca-certificates.crt:ro" \
  -v "$WORK/index:/torch-index:ro" --build-arg TORCH_INDEX=file:///torch-index/ -t "$IMAGE" . >"$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log"; exit 1; }
echo "container: built $IMAGE in $(($(date +%s) - start)) s, $(podman image inspect "$IMAGE" --format '{{.Size}}' | awk '{printf "%.2f GB", $1 / 1e9}')"
# The image this build replaced is untagged now: drop it, or every rebuild leaves 1.4 GB behind.
after=$(podman image inspect "$IMAGE" --format '{{.Id}}')
if [ -n "$before" ] && [ "$before" != "$after" ]; then
  podman rmi "$before" >/dev/null 2>&1 || true
fi
