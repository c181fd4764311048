#!/usr/bin/env bash
# Builds a tiny image from Debian's busybox-static and pushes it to a registry, e.g. the one
# `hangar dev --registry` runs:   examples/containers/push-busybox.sh 127.0.0.1:8082
# The image is 127.0.0.1:8082/examples/busybox:1 (what examples/containers/*.yaml run). Needs
# podman and busybox-static (scripts/install-deps.sh --containers). Touches nothing outside a
# temp dir: podman gets a store of its own there.
set -euo pipefail
registry="${1:?usage: push-busybox.sh REGISTRY_HOST:PORT}"
ref="$registry/examples/busybox:1"
work="$(mktemp -d)"
trap 'podman --root "$work/storage" --runroot "$work/run" system reset --force >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir -p "$work/rootfs/bin"
cp /bin/busybox "$work/rootfs/bin/busybox"
for applet in $(/bin/busybox --list); do
  [[ "$applet" == busybox ]] || ln -s busybox "$work/rootfs/bin/$applet"
done
tar -C "$work/rootfs" -cf "$work/rootfs.tar" .
tls=()
case "$registry" in 127.0.0.1:*|localhost:*|\[::1\]:*) tls=(--tls-verify=false) ;; esac
podman --root "$work/storage" --runroot "$work/run" import --quiet "$work/rootfs.tar" "$ref" >/dev/null
podman --root "$work/storage" --runroot "$work/run" push --quiet "${tls[@]}" "$ref"
echo "pushed $ref"
