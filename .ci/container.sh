#!/usr/bin/env bash
# Build the repository's Dockerfile, as written, into the image tfviz:ci with podman, on a machine
# with no Docker engine and no Docker Hub (CI's machines; tests/test_container.py runs the image).
#
# What that takes here, and why (docs/docker.md, "Building with podman"):
# - python:3.11-slim cannot be pulled: a stand-in with Debian bookworm's Python 3.11 is made with
#   debootstrap from the machine's own apt mirror and imported under that name (once; cached);
# - torch comes from the machine's CPU wheel through a one-file index served on loopback
#   (TORCH_INDEX), its dependencies from PyPI; the machine's CA bundle and a pip.conf naming it
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

if ! podman image exists "$BASE"; then
  echo "container: making a stand-in for $BASE with debootstrap (bookworm, python3 3.11)"
  rm -rf "$WORK/rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    bookworm "$WORK/rootfs" http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; exit 1; }
  rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
  tar -C "$WORK/rootfs" -c . | podman import - "$BASE" >/dev/null
  rm -rf "$WORK/rootfs"
fi

# A one-file index for torch: the machine's CPU wheel of the pinned version.
wheel=$(ls /opt/wheels/torch-"$TORCH_PIN"+cpu-cp311-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  pip download --no-deps --dest "$WORK/wheels" "torch==$TORCH_PIN" >/dev/null
  wheel=$(ls "$WORK"/wheels/torch-"$TORCH_PIN"*.whl | head -1)
fi
rm -rf "$WORK/index" && mkdir -p "$WORK/index/torch"
ln -s "$wheel" "$WORK/index/torch/"
name=$(basename "$wheel")
printf '<!doctype html><a href="%s">%s</a>\n' "$name" "$name" >"$WORK/index/torch/index.html"
port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python -m http.server "$port" --bind 127.0.0.1 --directory "$WORK/index" >"$WORK/index.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT

ca=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\nextra-index-url = https://pypi.org/simple\n' \
  >"$WORK/pip.conf"

start=$(date +%s)
podman build --format docker --network host \
  -v "$WORK/pip.conf:/etc/pip.conf:ro" -v "$ca:/etc/ssl/certs/ca-certificates.crt:ro" \
  --build-arg TORCH_INDEX="http://127.0.0.1:$port/" -t "$IMAGE" . >"$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log"; exit 1; }
echo "container: built $IMAGE in $(($(date +%s) - start)) s, $(podman image inspect "$IMAGE" --format '{{.Size}}' | awk '{printf "%.2f GB", $1 / 1e9}')"
