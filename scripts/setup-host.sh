#!/usr/bin/env bash
# Prepares a Debian host for the Docker-backed test suites: packages, a Docker
# engine, a loopback registry on 127.0.0.1:5000 and the test images in it (busybox
# and derived images, the CPU model server, and a Debian Jupyter image built with
# mmdebstrap from deb.debian.org), and a test name with two loopback addresses.
# Idempotent and quiet when everything is already up (it runs before every
# `npm test`), so each step first checks cheaply and only then acts.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKER_SOCK=/var/run/docker.sock
REGISTRY_ADDR=127.0.0.1:5000
REGISTRY_DIR=/var/lib/svc-registry
# dockerd lives in /usr/sbin, which minimal CI shells may not have on PATH.
export PATH="$PATH:/usr/sbin:/sbin"
PACKAGES=(docker.io docker-registry busybox-static openssh-client iproute2 iptables util-linux gcc libc6-dev curl mmdebstrap prometheus chromium poppler-utils postgresql-15 haproxy)

# shellcheck source=lib/publish-image.sh
source "$ROOT/scripts/lib/publish-image.sh"

log() { echo "setup-host: $*"; }
die() { echo "setup-host: ERROR: $*" >&2; exit 1; }

need_root() {
  [[ $(id -u) -eq 0 ]] || die "$1 needs root; run 'sudo bash scripts/setup-host.sh' once (the Docker-backed suites cannot run without it)"
}

# Tests import the image name from test/support/images.ts; read it from there
# so the name lives in exactly one place.
IMAGE="$(sed -n "s/^export const BUSYBOX_IMAGE = '\(.*\)';.*/\1/p" "$ROOT/test/support/images.ts")"
[[ -n $IMAGE ]] || die "cannot read BUSYBOX_IMAGE from test/support/images.ts"
[[ $IMAGE == "$REGISTRY_ADDR"/*:* ]] || die "BUSYBOX_IMAGE ($IMAGE) must live in $REGISTRY_ADDR"
IMAGE_PATH="${IMAGE#"$REGISTRY_ADDR"/}"   # svc/busybox:1
IMAGE_REPO="${IMAGE_PATH%:*}"             # svc/busybox
IMAGE_TAG="${IMAGE_PATH##*:}"             # 1

# Concurrent runs (parallel CI jobs on one host) would race to start daemons.
# (The braces keep `2>/dev/null` from applying to the rest of the script.)
{ exec 9>/run/lock/svc-setup-host.lock; } 2>/dev/null || exec 9>/tmp/svc-setup-host.lock
flock 9

# --- packages ---------------------------------------------------------------
missing=()
for pkg in "${PACKAGES[@]}"; do
  [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true) == "ii " ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  need_root "installing ${missing[*]}"
  command -v apt-get >/dev/null || die "apt-get not found; install ${missing[*]} by hand (Debian/Ubuntu expected)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    die "apt-get install ${missing[*]} failed"
  log "packages: installed ${missing[*]}"
fi

# --- a name with two addresses ----------------------------------------------
# node-agent/src/transport/dns-failover.test.ts dials one name that resolves to two
# loopback addresses, as a control plane behind a DNS name with several A records
# would. /etc/hosts gives a name every line it has ("multi on", Debian's host.conf);
# RFC 6761 reserves .test for names like this one.
MULTI_A_NAME=cp-replicas.svc.test
for addr in 127.0.0.1 127.0.0.3; do
  if ! grep -qE "^${addr//./\\.}[[:space:]]+${MULTI_A_NAME//./\\.}\$" /etc/hosts; then
    # Only that one suite needs the name: a host that will not take it fails that suite
    # (saying why), not the whole run.
    # A file whose last line has no newline would get ours glued onto it.
    if { [[ -z $(tail -c1 /etc/hosts) ]] || echo; } 2>/dev/null >>/etc/hosts && echo "$addr $MULTI_A_NAME" 2>/dev/null >>/etc/hosts; then
      log "/etc/hosts: $addr $MULTI_A_NAME"
    else
      log "WARNING: cannot add '$addr $MULTI_A_NAME' to /etc/hosts (not root?); the DNS failover test will fail"
    fi
  fi
done

# --- docker engine ----------------------------------------------------------
docker_up() { curl -fsS --max-time 2 --unix-socket "$DOCKER_SOCK" http://localhost/_ping >/dev/null 2>&1; }

# Polls $1 (a command) until it succeeds; $2 names the service, $3 its log,
# $4 the pid to watch so a crashed daemon fails fast instead of after 60 s.
wait_for() {
  local check=$1 name=$2 logfile=$3 pid=$4 i
  for ((i = 0; i < 300; i++)); do
    $check && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$logfile" >&2 || true
      die "$name exited during startup (log: $logfile)"
    fi
    sleep 0.2
  done
  tail -n 20 "$logfile" >&2 || true
  die "$name did not answer within 60 s (log: $logfile)"
}

if ! docker_up; then
  need_root "starting dockerd"
  # setsid: the daemon must outlive this script and npm's process group.
  # 9>&-: a daemon inheriting the lock fd would hold the lock forever.
  setsid nohup dockerd --host "unix://$DOCKER_SOCK" >>/var/log/svc-dockerd.log 2>&1 </dev/null 9>&- &
  wait_for docker_up dockerd /var/log/svc-dockerd.log $!
  log "docker: started ($(docker version -f '{{.Server.Version}}, {{.Server.APIVersion}}' 2>/dev/null || echo '?'))"
fi

# Containers inherit containerd's limits and cannot raise them: with these three unlimited
# the agent gives every container unlimited ones, so no tenant can starve another of
# root's host-wide counts of queued signals, message queues and locked shared memory
# (node-agent/src/host-facts/shared-rlimits.ts; the agent raises them too, at its start).
if [ "$(id -u)" = 0 ] && command -v prlimit >/dev/null; then
  for pid in $(pidof containerd 2>/dev/null); do
    prlimit --pid "$pid" --sigpending=unlimited:unlimited --msgqueue=unlimited:unlimited --memlock=unlimited:unlimited || true
  done
fi

# --- loopback registry ------------------------------------------------------
registry_up() { curl -fsS --max-time 2 -o /dev/null "http://$REGISTRY_ADDR/v2/" 2>/dev/null; }

if ! registry_up; then
  need_root "starting the registry"
  mkdir -p "$REGISTRY_DIR/data"
  cat >"$REGISTRY_DIR/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $REGISTRY_DIR/data
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
EOF
  setsid nohup docker-registry serve "$REGISTRY_DIR/config.yml" >>/var/log/svc-registry.log 2>&1 </dev/null 9>&- &
  wait_for registry_up registry /var/log/svc-registry.log $!
  log "registry: up on $REGISTRY_ADDR"
fi

# --- test image -------------------------------------------------------------
# Everything that goes into the image; its source and the busybox binary make
# up the recipe hash, so changing either rebuilds the image.
build_rootfs() {
  local dir=$1 applet
  mkdir -p "$dir"/{bin,etc,tmp,root,proc,sys,dev,usr,home}
  cp /bin/busybox "$dir/bin/busybox"
  for applet in $("$dir/bin/busybox" --list); do
    [[ $applet == busybox ]] || ln -sf busybox "$dir/bin/$applet"
  done
  # Scripts use /usr/bin/env and /sbin paths; one bin directory serves all.
  ln -s bin "$dir/sbin"
  ln -s ../bin "$dir/usr/bin"
  ln -s ../bin "$dir/usr/sbin"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$dir/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$dir/etc/group"
  chmod 1777 "$dir/tmp"
  chmod 700 "$dir/root"
}

recipe_hash="$( { declare -f build_rootfs; sha256sum </bin/busybox; } | sha256sum | cut -c1-16)"
recipe_tag="recipe-$recipe_hash"
accept='Accept: application/vnd.docker.distribution.manifest.v2+json'
repo_digest() {
  # A missing tag (404) is an answer here, not an error.
  { curl -fsSI --max-time 5 -H "$accept" "http://$REGISTRY_ADDR/v2/$1/manifests/$2" 2>/dev/null || true; } |
    tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p'
}
manifest_digest() { repo_digest "$IMAGE_REPO" "$1"; }

# Up to date when the recipe tag exists and the public tag points at it.
want="$(manifest_digest "$recipe_tag")"
have="$(manifest_digest "$IMAGE_TAG")"
if [[ -z $want || $want != "$have" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  build_rootfs "$tmp/rootfs"
  recipe_image="$REGISTRY_ADDR/$IMAGE_REPO:$recipe_tag"
  tar --numeric-owner --owner=0 --group=0 -C "$tmp/rootfs" -c . |
    docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["sh"]' \
      --change "LABEL org.svc.recipe=$recipe_hash" \
      - "$recipe_image" >/dev/null
  publish_image "$recipe_image" "$IMAGE" org.svc.recipe
  log "image: built and pushed $IMAGE ($recipe_tag)"
fi

# --- derived test images ----------------------------------------------------
# Busybox with a default command, for workloads that must run until signalled (the
# instance API takes no command, as on other GPU clouds: the image decides).
image_from_support() {
  sed -n "s/^export const $1 = '\(.*\)';.*/\1/p" "$ROOT/test/support/images.ts"
}
# derive_image IMAGE JSON [INSTRUCTION [BASE]]: BASE (default the busybox image) plus one
# Dockerfile instruction: CMD by default, ENTRYPOINT for images whose command arguments
# are appended.
derive_image() {
  local image=$1 cmd=$2 instruction=${3:-CMD} base=${4:-$IMAGE} path repo tag hash recipe base_path
  [[ -n $image ]] || die "a derived image name is missing from test/support/images.ts"
  path="${image#"$REGISTRY_ADDR"/}"; repo="${path%:*}"; tag="${path##*:}"
  base_path="${base#"$REGISTRY_ADDR"/}"
  # (CMD images hash as they always did, so adding ENTRYPOINT rebuilt none of them.)
  [[ $instruction == CMD ]] || cmd="$instruction $cmd"
  hash="$(printf '%s\n%s\n' "$(repo_digest "${base_path%:*}" "${base_path##*:}")" "$cmd" | sha256sum | cut -c1-16)"
  recipe="recipe-$hash"
  local want have
  want="$(repo_digest "$repo" "$recipe")"
  have="$(repo_digest "$repo" "$tag")"
  [[ -n $want && $want == "$have" ]] && return 0
  [[ $instruction == CMD ]] && cmd="CMD $cmd"
  printf 'FROM %s\n%s\n' "$base" "$cmd" |
    DOCKER_BUILDKIT=0 docker build -q -t "$REGISTRY_ADDR/$repo:$recipe" - >/dev/null 2>&1 ||
    die "building $image failed"
  publish_image "$REGISTRY_ADDR/$repo:$recipe" "$image"
  log "image: built and pushed $image"
}
derive_image "$(image_from_support SLEEPER_IMAGE)" '["sh", "-c", "trap \"echo bye; exit 0\" TERM; echo ready; while true; do sleep 0.1; done"]'
derive_image "$(image_from_support STUBBORN_IMAGE)" '["sh", "-c", "trap \"\" TERM; echo ready; while true; do sleep 0.1; done"]'
# The sleeper with two programs named jupyter-notebook that the agent's Jupyter finder runs
# (`--version`): one prints without end, the other never ends. The instance must still be ready.
derive_image "$(image_from_support JUPYTER_HANG_IMAGE)" '["sh", "-c", "mkdir -p /usr/local/bin && printf \"#!/bin/sh\\nexec yes\\n\" > /usr/local/bin/jupyter-notebook && printf \"#!/bin/sh\\nexec sleep 100000\\n\" > /usr/bin/jupyter-notebook && chmod +x /usr/local/bin/jupyter-notebook /usr/bin/jupyter-notebook"]' RUN "$(image_from_support SLEEPER_IMAGE)"
# An image whose command is not in it (a typo in a Dockerfile): its instance fails to start, unbilled.
derive_image "$(image_from_support MISSING_COMMAND_IMAGE)" '["serve", "--port", "8000"]'
# A process that a process listing shows as `jupyter-notebook` ($0 of sh -c) and that never
# serves: an instance whose Jupyter never answers is ready without it after the bound.
derive_image "$(image_from_support JUPYTER_SILENT_IMAGE)" '["sh", "-c", "trap \"exit 0\" TERM; while true; do sleep 0.1; done", "jupyter-notebook"]'
# A stand-in model server for the replica suites (lighter than the CPU engine): a real HTTP server (busybox httpd) on port 8000 that answers /health 200 one
# second after start, writes the arguments it was given to /args, serves /v1/models, and
# exits 0 on SIGTERM. ENTRYPOINT, so the engine adapter's arguments reach it as "$@".
derive_image "$(image_from_support MODEL_SERVER_STANDIN_IMAGE)" '["sh", "-c", "mkdir -p /www/v1; echo \"$@\" > /www/args; echo {\\\"object\\\":\\\"list\\\",\\\"data\\\":[]} > /www/v1/models; httpd -f -p 8000 -h /www & pid=$!; trap \"kill $pid; exit 0\" TERM; sleep 1; echo ok > /www/health; wait $pid", "model-server-standin"]' ENTRYPOINT

# --- cpu engine image -------------------------------------------------------
# The project's CPU model server with the tiny test models (cpu-engine/README.md).
# The script skips the build when the registry already holds this recipe.
bash "$ROOT/cpu-engine/image/build-image.sh" "$(image_from_support CPU_ENGINE_IMAGE)"

# --- Jupyter test image -----------------------------------------------------
# Debian's classic notebook (jupyter-notebook: python3, ipykernel) extracted with
# mmdebstrap from deb.debian.org (no Docker Hub needed), plus busybox for a shell. The
# extract variant only unpacks packages (no maintainer scripts, no chroot), which is the
# fast path: ~45 s cold on 2 cores, then ~20 s to import and push; cached by recipe hash.
JUPYTER_IMAGE="$(image_from_support JUPYTER_IMAGE)"
JUPYTER_SUITE=bookworm
JUPYTER_PACKAGES=jupyter-notebook
DEBIAN_MIRROR="${SVC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
build_jupyter_rootfs() {
  local dir=$1 applet exclude
  local excludes=(/usr/share/doc/\* /usr/share/man/\* /usr/share/info/\* /usr/share/locale/\* /usr/share/lintian/\*)
  local opts=()
  for exclude in "${excludes[@]}"; do opts+=("--dpkgopt=path-exclude=$exclude"); done
  mmdebstrap --quiet --variant=extract --include="$JUPYTER_PACKAGES" "${opts[@]}" \
    "$JUPYTER_SUITE" "$dir" "$DEBIAN_MIRROR" >"$dir.log" 2>&1 || { tail -n 20 "$dir.log" >&2; return 1; }
  # What maintainer scripts and base-passwd would have made: users, home, /tmp, a shell.
  mkdir -p "$dir"/{root,tmp,proc,sys,dev,etc,bin}
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$dir/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$dir/etc/group"
  chmod 1777 "$dir/tmp"
  chmod 700 "$dir/root"
  cp /bin/busybox "$dir/bin/busybox"
  for applet in $("$dir/bin/busybox" --list); do
    [[ -e $dir/bin/$applet || -e $dir/usr/bin/$applet || -L $dir/bin/$applet ]] || ln -s busybox "$dir/bin/$applet"
  done
}
jupyter_path="${JUPYTER_IMAGE#"$REGISTRY_ADDR"/}"
jupyter_repo="${jupyter_path%:*}"
jupyter_tag="${jupyter_path##*:}"
jupyter_hash="$( { declare -f build_jupyter_rootfs; echo "$JUPYTER_SUITE $JUPYTER_PACKAGES"; sha256sum </bin/busybox; } | sha256sum | cut -c1-16)"
jupyter_want="$(repo_digest "$jupyter_repo" "recipe-$jupyter_hash")"
jupyter_have="$(repo_digest "$jupyter_repo" "$jupyter_tag")"
if [[ -z $jupyter_want || $jupyter_want != "$jupyter_have" ]]; then
  started=$SECONDS
  jtmp="$(mktemp -d)"
  build_jupyter_rootfs "$jtmp/rootfs" || { rm -rf "$jtmp"; die "mmdebstrap could not build the Jupyter image from $DEBIAN_MIRROR (set SVC_DEBIAN_MIRROR for another mirror)"; }
  recipe_image="$REGISTRY_ADDR/$jupyter_repo:recipe-$jupyter_hash"
  tar --numeric-owner -C "$jtmp/rootfs" -c . |
    docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' \
      --change 'WORKDIR /root' \
      --change 'CMD ["sh", "-c", "trap \"exit 0\" TERM; while true; do sleep 1; done"]' \
      --change "LABEL org.svc.recipe=$jupyter_hash" \
      - "$recipe_image" >/dev/null
  rm -rf "$jtmp"
  publish_image "$recipe_image" "$JUPYTER_IMAGE"
  log "image: built and pushed $JUPYTER_IMAGE in $((SECONDS - started)) s"
fi
# The same image when it runs Jupyter itself, the way docs/ssh-jupyter.md asks images to.
derive_image "$(image_from_support JUPYTER_SELF_IMAGE)" \
  '["sh", "-c", "exec jupyter-notebook --no-browser --allow-root --ip=0.0.0.0 --port=\"$SVC_JUPYTER_PORT\" --NotebookApp.base_url=\"$SVC_JUPYTER_BASE_URL\" --NotebookApp.allow_remote_access=True"]' \
  CMD "$JUPYTER_IMAGE"
