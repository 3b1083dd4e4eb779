# shellcheck shell=bash
# The image of the container harness, built from the project's Dockerfile with podman.
#
#   build_image NAME:TAG      sets nothing; fails when the build fails
#
# The Dockerfile's bases are `rust:1.95-bookworm` (the build stage) and distroless
# `cc-debian12:nonroot` (the image). Where a registry serves them, they are used as they are.
# Where none is reachable (a machine whose only network is its package mirrors), local stand-ins
# are made once and kept in podman's storage:
#
#   informant-local/debian:bookworm   Debian 12 minbase (debootstrap) with CA certificates: glibc,
#                                     libgcc and a CA bundle, what distroless cc ships (plus a
#                                     shell and dpkg, which distroless does not have)
#   informant-local/rust:<version>    that base with gcc and the machine's own Rust toolchain
#                                     (rustup's, the one the test suite runs on)
#
# The build runs the Dockerfile unchanged, with its RUST_IMAGE and BASE_IMAGE arguments naming the
# stand-ins, the host's network (cargo fetches crates), and the machine's CA bundle mounted over
# the image's when SSL_CERT_FILE names one (a machine behind an intercepting proxy). podman runs
# with runc (crun refuses hybrid cgroups) and ulimits within the machine's hard limits (podman's
# defaults exceed them on some machines); PODMAN_FLAGS holds both.

PODMAN_FLAGS=(--runtime runc)
# podman's defaults (nofile 1048576, nproc 4194304) exceed the hard limits of some machines.
podman_ulimits() {
  local nofile nproc
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  [ "$nofile" = unlimited ] && nofile=1048576
  [ "$nproc" = unlimited ] && nproc=4194304
  [ "$nofile" -gt 1048576 ] && nofile=1048576
  [ "$nproc" -gt 8192 ] && nproc=8192
  echo "--ulimit nofile=$nofile:$nofile --ulimit nproc=$nproc:$nproc"
}
# shellcheck disable=SC2207 # two words per flag, none with spaces
PODMAN_ULIMITS=($(podman_ulimits))

LOCAL_BASE=informant-local/debian:bookworm
RUST_VERSION=$(rustc --version 2>/dev/null | awk '{print $2}')
LOCAL_RUST=informant-local/rust:${RUST_VERSION:-unknown}

# registry_reachable IMAGE: the image is here, or a registry serves it within a minute.
registry_reachable() {
  podman image exists "$1" 2>/dev/null && return 0
  timeout 60 podman pull --quiet "$1" >/dev/null 2>&1
}

local_base() {
  podman image exists "$LOCAL_BASE" && return 0
  local root
  root=$(mktemp -d)
  echo "images: debootstrap Debian 12 minbase into $root" >&2
  debootstrap --variant=minbase --include=ca-certificates bookworm "$root" http://deb.debian.org/debian >"$root.log" 2>&1 ||
    { tail -n 20 "$root.log" >&2; rm -rf "$root" "$root.log"; return 1; }
  # Like distroless: no package lists or caches in the image.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -c . | podman import --quiet - "$LOCAL_BASE" >/dev/null
  rm -rf "$root" "$root.log"
}

local_rust() {
  podman image exists "$LOCAL_RUST" && return 0
  local toolchain ctx
  toolchain=$(rustc --print sysroot)
  ctx=$(mktemp -d)
  echo "images: $LOCAL_RUST from $LOCAL_BASE, gcc and the toolchain at $toolchain" >&2
  # cargo and rustc with their libraries and the host's standard library; no docs, no sources.
  mkdir -p "$ctx/rust/bin"
  cp -a "$toolchain/bin/cargo" "$toolchain/bin/rustc" "$ctx/rust/bin/"
  cp -a "$toolchain/lib" "$ctx/rust/lib"
  cat >"$ctx/Containerfile" <<EOF
FROM $LOCAL_BASE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null \\
    && rm -rf /var/lib/apt/lists/*
COPY rust /usr/local/rust
ENV CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN mkdir -p /usr/local/cargo/bin && cargo --version && rustc --version
EOF
  podman build "${PODMAN_FLAGS[@]}" "${PODMAN_ULIMITS[@]}" --network host --quiet \
    -t "$LOCAL_RUST" "$ctx" >/dev/null || { rm -rf "$ctx"; return 1; }
  rm -rf "$ctx"
}

# local_python: the Python of the hooks that run as pods (the node's scenario 11), from the local
# base and Debian's python3; kept in podman's storage.
LOCAL_PYTHON=informant-local/python:bookworm
local_python() {
  podman image exists "$LOCAL_PYTHON" && return 0
  local_base || return 1
  local ctx
  ctx=$(mktemp -d)
  cat >"$ctx/Containerfile" <<EOF
FROM $LOCAL_BASE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null \\
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
EOF
  podman build "${PODMAN_FLAGS[@]}" "${PODMAN_ULIMITS[@]}" --network host --quiet \
    -t "$LOCAL_PYTHON" "$ctx" >/dev/null || { rm -rf "$ctx"; return 1; }
  rm -rf "$ctx"
}

build_image() {
  local image=$1 args=() volumes=()
  if registry_reachable docker.io/library/rust:1.95-bookworm && registry_reachable gcr.io/distroless/cc-debian12:nonroot; then
    args=(--build-arg RUST_IMAGE=docker.io/library/rust:1.95-bookworm --build-arg BASE_IMAGE=gcr.io/distroless/cc-debian12:nonroot)
  else
    echo "images: no registry serves the Dockerfile's bases; using local stand-ins" >&2
    local_base && local_rust || return 1
    args=(--build-arg "RUST_IMAGE=$LOCAL_RUST" --build-arg "BASE_IMAGE=$LOCAL_BASE")
  fi
  if [ -n "${SSL_CERT_FILE:-}" ] && [ -f "$SSL_CERT_FILE" ]; then
    volumes=(-v "$SSL_CERT_FILE:/etc/ssl/certs/ca-certificates.crt:ro")
  fi
  podman build "${PODMAN_FLAGS[@]}" "${PODMAN_ULIMITS[@]}" --network host --layers \
    "${args[@]}" "${volumes[@]}" -t "$image" -f Dockerfile .
}

# next_image NAME:TAG: NAME:TAG-next, the same program as another image (one label more, so a
# new image ID): what a release's next version is to the Deployment controller.
next_image() {
  local context status=0
  context=$(mktemp -d "${TMPDIR:-/tmp}/informant-next-image.XXXXXX")
  printf 'FROM %s\nLABEL dev.informant.e2e.next="true"\n' "$1" >"$context/Containerfile"
  podman build "${PODMAN_FLAGS[@]}" "${PODMAN_ULIMITS[@]}" --quiet -t "$1-next" "$context" >/dev/null || status=$?
  rm -rf "$context"
  return "$status"
}
