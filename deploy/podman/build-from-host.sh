#!/usr/bin/env bash
# Builds a Herald image with buildah WITHOUT pulling a base image: `buildah from scratch`, then
# the host's node binary and the shared libraries it links, /etc/passwd with the unprivileged
# `node` user (uid 1000), and the app as the Dockerfile's runtime stage has it (dist/ and a
# production-only node_modules). For machines that cannot reach an image registry; where one is
# reachable, `docker build .` / `podman build .` with the Dockerfile is the supported way.
#
#   deploy/podman/build-from-host.sh [image-name]     (default herald:scratch; run as root or
#                                                      inside `buildah unshare`)
#   podman run --rm --network host -e REDIS_URL=redis://127.0.0.1:6379 \
#     -e HERALD_SECRET_KEY="$(openssl rand -base64 32)" herald:scratch
set -euo pipefail
# HEALTHCHECK exists only in the docker image format.
export BUILDAH_FORMAT=docker
image="${1:-herald:scratch}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
node_bin="$(readlink -f "$(command -v node)")"

stage="$(mktemp -d)"
ctr=''
cleanup() {
  if [ -n "$ctr" ]; then buildah rm "$ctr" >/dev/null 2>&1 || true; fi
  rm -rf "$stage"
}
trap cleanup EXIT

# The runtime stage of the Dockerfile: built dist/ (bundled entry points) and production
# dependencies only.
(cd "$repo" && npm run --silent build)
cp "$repo/package.json" "$repo/package-lock.json" "$stage/"
cp -r "$repo/dist" "$stage/dist"
(cd "$stage" && npm ci --omit=dev --no-audit --no-fund --ignore-scripts --prefer-offline >/dev/null)

ctr="$(buildah from scratch)"
root="$(buildah mount "$ctr")"
mkdir -p "$root/usr/bin" "$root/etc" "$root/tmp" "$root/data" "$root/app"
chmod 1777 "$root/tmp"
cp "$node_bin" "$root/usr/bin/node"
# Every shared library node links (ldd prints "name => /path (addr)" or "/path (addr)").
for lib in $(ldd "$node_bin" | grep -o '/[^ ]*'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnode:x:1000:1000:node:/app:/usr/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnode:x:1000:\n' >"$root/etc/group"
# DNS for outbound deliveries: the runtime bind-mounts /etc/resolv.conf; Herald resolves
# user destinations itself (c-ares), so no nsswitch/libnss is needed.
cp -r "$stage/package.json" "$stage/dist" "$stage/node_modules" "$root/app/"
chown -R 1000:1000 "$root/data"
buildah umount "$ctr" >/dev/null

# The Dockerfile's HEALTHCHECK: node itself probes /healthz (the image has no shell and no curl).
# buildah parses the value like a shell line, hence the single quotes.
health_js='fetch("http://127.0.0.1:"+(process.env.PORT||3000)+"/healthz").then(r=>process.exit(r.ok?0:1),()=>process.exit(1))'
buildah config \
  --workingdir /app \
  --user 1000:1000 \
  --env NODE_ENV=production --env PORT=3000 --env HERALD_DATA_DIR=/data \
  --port 3000 \
  --healthcheck "CMD node -e '$health_js'" \
  --healthcheck-interval 15s --healthcheck-timeout 3s --healthcheck-start-period 20s --healthcheck-retries 3 \
  --cmd '["node", "dist/main.js"]' \
  --label org.opencontainers.image.title=herald \
  "$ctr"
buildah commit --format docker --rm "$ctr" "$image" >/dev/null
ctr=''
echo "built $image"
