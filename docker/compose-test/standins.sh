# Base images for `make compose-test` (sourced by run.sh): the official ones when they can be
# had, else local stand-ins built from Debian packages and tagged with the official names.
#
# A machine with Docker Hub access pulls the real images and builds nothing here. Without it
# (our CI), debootstrap makes a minimal bookworm root filesystem, imported as an image, and the
# three Dockerfiles beside this file install Python, PostgreSQL and Redis from Debian into it.

CT_STANDIN_BASE="flightpipe-standin/debian:bookworm"

_standin_hash() {
  # Of the stand-in's Dockerfile and entrypoint, so an edited one is rebuilt.
  cat "$CT_HERE/standins/$1"[.-]* | sha256sum | cut -c1-12
}

_standin_kind() {
  case "$1" in python:*) echo python ;; postgres:*) echo postgres ;; redis:*) echo redis ;; esac
}

_standin_stale() {
  # A stand-in built from older files; official images carry no such label and are never stale.
  local built
  built=$(docker image inspect -f '{{ index .Config.Labels "flightpipe.standin" }}' "$1" 2>/dev/null)
  [ -n "$built" ] && [ "$built" != "$(_standin_hash "$(_standin_kind "$1")")" ]
}

_standin_rootfs() {
  # Minimal bookworm, with this host's CA certificates so TLS inside builds verifies here too.
  docker image inspect "$CT_STANDIN_BASE" >/dev/null 2>&1 && return 0
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends debootstrap >/dev/null || return 1
  local rootfs="$CT_WORK/rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "${COMPOSE_TEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}" \
    >"$CT_WORK/debootstrap.log" 2>&1 || { tail -5 "$CT_WORK/debootstrap.log" >&2; rm -rf "$rootfs"; return 1; }
  mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/usr/local/share/ca-certificates"
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/" 2>/dev/null || true
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/" 2>/dev/null || true
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import - "$CT_STANDIN_BASE" >/dev/null || return 1
  rm -rf "$rootfs"
}

_is_standin() {
  [ -n "$(docker image inspect -f '{{ index .Config.Labels "flightpipe.standin" }}' "$1" 2>/dev/null)" ]
}

base_images() {
  # Official images when present or pullable (a stand-in left by an earlier run gives way to a
  # pull that works); stand-ins, built when missing, for exactly the ones that cannot be pulled.
  local image kind standins="" build=""
  for image in "$CT_PYTHON_IMAGE" "$CT_POSTGRES_IMAGE" "$CT_REDIS_IMAGE"; do
    _standin_stale "$image" && docker rmi -f "$image" >/dev/null 2>&1
    if docker image inspect "$image" >/dev/null 2>&1 && ! _is_standin "$image"; then continue; fi
    timeout "$CT_PULL_TIMEOUT" docker pull -q "$image" >>"$CT_WORK/pull.log" 2>&1 && continue
    standins="$standins $image"
    docker image inspect "$image" >/dev/null 2>&1 || build="$build $image"
  done
  if [ -z "$standins" ]; then ct_say "official base images present or pulled; no stand-ins"; return 0; fi
  ct_say "official images cannot be pulled ($(tail -1 "$CT_WORK/pull.log" | cut -c1-80)...):" \
         "local stand-ins from Debian packages (Python 3.11.2, PostgreSQL 15, Redis 7.0) tagged" \
         "as${standins}; ${build:+building${build}}${build:-built by an earlier run}"
  [ -z "$build" ] || _standin_rootfs || return 1
  for image in $build; do
    kind=$(_standin_kind "$image")
    [ -n "$kind" ] || { ct_say "no stand-in for $image"; return 1; }
    DOCKER_BUILDKIT=0 docker build -q -t "$image" -f "$CT_HERE/standins/$kind.Dockerfile" \
      --label "flightpipe.standin=$(_standin_hash "$kind")" \
      "$CT_HERE/standins" >>"$CT_WORK/standins.log" 2>&1 \
      || { tail -20 "$CT_WORK/standins.log" >&2; return 1; }
  done
}
