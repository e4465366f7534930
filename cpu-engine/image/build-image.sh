#!/usr/bin/env bash
# Builds the CPU engine image FROM scratch and pushes it to the loopback
# registry: the host's node binary and the shared libraries it and the
# llama.cpp addon need, the bundled engine (/app/main.js), its node_modules and
# the tiny test models (/models). Skips everything but a cheap check when the
# registry already holds this recipe (a hash of every byte that goes in).
#   usage: build-image.sh <registry>/<repo>:<tag>      (called by scripts/setup-host.sh)
set -euo pipefail

IMAGE=${1:?usage: build-image.sh <registry>/<repo>:<tag>}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ENGINE="$ROOT/cpu-engine"
REGISTRY="${IMAGE%%/*}"
IMAGE_PATH="${IMAGE#"$REGISTRY"/}"   # svc/cpu-engine:3
IMAGE_REPO="${IMAGE_PATH%:*}"
IMAGE_TAG="${IMAGE_PATH##*:}"
LABEL=org.svc.cpu-engine.recipe

# shellcheck source=../../scripts/lib/publish-image.sh
source "$ROOT/scripts/lib/publish-image.sh"

log() { echo "cpu-engine image: $*"; }
die() { echo "cpu-engine image: ERROR: $*" >&2; exit 1; }

ESBUILD="$ROOT/node_modules/.bin/esbuild"
TSX="$ROOT/node_modules/.bin/tsx"
[[ -x $ESBUILD && -x $TSX ]] || die "esbuild/tsx missing from node_modules; run 'node scripts/ensure-deps.mjs' first"
NODE_BIN="$(readlink -f "$(command -v node)")"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
rootfs="$stage/rootfs"
mkdir -p "$rootfs"/{app,models,tmp,etc,usr/local/bin}

# --- the parts that are cheap to make: they go into the recipe hash ---------
"$ESBUILD" "$ENGINE/src/main.ts" --bundle --platform=node --format=esm --target=node20 \
  --external:node-llama-cpp --legal-comments=none --log-level=warning --outfile="$rootfs/app/main.js"
printf '{"type":"module","private":true}\n' >"$rootfs/app/package.json"
"$TSX" "$ENGINE/models/write-test-models.ts" "$rootfs/models" >/dev/null

# System libraries, as ldd names them: node's, plus libstdc++'s (the llama.cpp
# binaries link libstdc++ and libgcc_s; checked against the addon below).
system_libs() {
  { ldd "$NODE_BIN"; ldd /lib/x86_64-linux-gnu/libstdc++.so.6; } |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/lib64\// { print $1 }' | sort -u
}
mapfile -t LIBS < <(system_libs)

recipe_hash="$(
  {
    (cd "$rootfs" && find app models -type f -print0 | sort -z | xargs -0 sha256sum)
    # Contents only: the same inputs give the same hash from any checkout path.
    for f in "$ENGINE/package.json" "$ENGINE/package-lock.json" "${BASH_SOURCE[0]}" "$NODE_BIN" "${LIBS[@]}"; do
      sha256sum <"$f"
    done
  } | sha256sum | cut -c1-16
)"
recipe_tag="recipe-$recipe_hash"

accept='Accept: application/vnd.docker.distribution.manifest.v2+json'
digest() {
  { curl -fsSI --max-time 5 -H "$accept" "http://$REGISTRY/v2/$IMAGE_REPO/manifests/$1" 2>/dev/null || true; } |
    tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p'
}
want="$(digest "$recipe_tag")"
have="$(digest "$IMAGE_TAG")"
if [[ -n $want && $want == "$have" ]]; then
  exit 0
fi

# --- the expensive part -------------------------------------------------------
started=$SECONDS
cp "$ENGINE/package.json" "$ENGINE/package-lock.json" "$stage/"
# The same install as scripts/ensure-deps.mjs does for cpu-engine/ (see the reasons there).
(cd "$stage" && npm install --omit=optional --ignore-scripts --no-save --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null) ||
  die "npm install of cpu-engine/package-lock.json failed"
mv "$stage/node_modules" "$rootfs/app/node_modules"
# llama.cpp's source (a git bundle, only for building from source, which the image never does).
rm -f "$rootfs/app/node_modules/node-llama-cpp/llama/gitRelease.bundle"

addon_dir="$rootfs/app/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
[[ -f $addon_dir/llama-addon.node ]] || die "no llama-addon.node in $addon_dir"
# Every system library the addon or its ggml backends load must be in the list above.
for f in "$addon_dir"/*.node "$addon_dir"/*.so; do
  for lib in $(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | grep -v "^$addon_dir/"); do
    printf '%s\n' "${LIBS[@]}" | grep -qxF "$lib" || die "$(basename "$f") needs $lib, which the image does not carry"
  done
done

install -m 0755 "$NODE_BIN" "$rootfs/usr/local/bin/node"
for lib in "${LIBS[@]}"; do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"

recipe_image="$REGISTRY/$IMAGE_REPO:$recipe_tag"
tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$rootfs" -c . |
  docker import \
    --change 'ENTRYPOINT ["/usr/local/bin/node", "/app/main.js"]' \
    --change 'CMD ["--model", "/models/tiny-chat-q4_0.gguf", "--served-model-name", "tiny-chat", "--task", "generate"]' \
    --change 'ENV HOME=/tmp' \
    --change 'WORKDIR /app' \
    --change 'USER 65534:65534' \
    --change 'EXPOSE 8000' \
    --change "LABEL $LABEL=$recipe_hash" \
    - "$recipe_image" >/dev/null
publish_image "$recipe_image" "$IMAGE" "$LABEL"
size="$(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{ printf "%d MB", $1 / 1e6 }')"
log "built and pushed $IMAGE ($recipe_tag, $size) in $((SECONDS - started)) s"
