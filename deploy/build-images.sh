#!/bin/sh
# Builds deploy/Dockerfile and deploy/Dockerfile.toxiproxy with podman where no image registry
# is reachable, then checks what was built. Needs root, podman and debootstrap (Debian:
# `apt-get install podman debootstrap`) and a Debian mirror; the Rust toolchain and the crates
# are the host's (`rustc`, `$CARGO_HOME/registry`), mounted read-only into the build.
#
#   deploy/build-images.sh          # exit 0: both built and checked; 77: skipped (says why)
#
# 1. A Debian bookworm base from Debian packages alone (debootstrap minbase + ca-certificates,
#    gcc, libc6-dev), imported as localhost/tearline-base:bookworm; the same root file system
#    with the host toolchain on PATH is localhost/tearline-rust:bookworm (the RUST_IMAGE).
#    Both are made once and kept in $TEARLINE_IMAGE_CACHE (default ~/.cache/tearline-images),
#    outside the repository.
# 2. `podman build --isolation chroot` of each Dockerfile, exactly as written, with the two base
#    images as build arguments: tearline:0.1.0 and tearline-toxiproxy:0.1.0.
# 3. Each image's configuration (entrypoint, command, user) is printed, its files are exported
#    (`podman run` is refused on the machine this was written on), and its entrypoint is run
#    inside the exported file system with chroot, as the container would run it.
set -eu

skip() {
    echo "build-images: skipped: $*"
    exit 77
}

command -v podman >/dev/null 2>&1 || skip "podman is not installed"
command -v debootstrap >/dev/null 2>&1 || skip "debootstrap is not installed"
command -v rustc >/dev/null 2>&1 || skip "no Rust toolchain on the host"
[ "$(id -u)" = 0 ] || skip "debootstrap and chroot need root"

root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)
cache=${TEARLINE_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tearline-images}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}


sysroot=$(rustc --print sysroot)
registry=${CARGO_HOME:-$HOME/.cargo}/registry
base=localhost/tearline-base:bookworm
rust=localhost/tearline-rust:bookworm

if ! podman image exists "$base" || ! podman image exists "$rust"; then
    mkdir -p "$cache"
    if [ ! -x "$cache/rootfs/usr/bin/gcc" ]; then
        rm -rf "$cache/rootfs"
        debootstrap --variant=minbase --include=ca-certificates,gcc,libc6-dev \
            bookworm "$cache/rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
            skip "debootstrap failed (no Debian mirror?): see $cache/debootstrap.log"
    fi
    tar -C "$cache/rootfs" -c . | podman import - "$base" >/dev/null
    tar -C "$cache/rootfs" -c . | podman import \
        --change 'ENV PATH=/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV CARGO_HOME=/usr/local/cargo' \
        --change 'ENV CARGO_NET_OFFLINE=true' \
        - "$rust" >/dev/null
fi

build() { # build DOCKERFILE TAG
    podman build --isolation chroot \
        -f "$root/deploy/$1" --ignorefile "$root/deploy/$1.dockerignore" \
        --build-arg RUST_IMAGE="$rust" --build-arg RUNTIME_IMAGE="$base" \
        -v "$sysroot:/usr/local/rust:ro" -v "$registry:/usr/local/cargo/registry:ro" \
        -t "$2" "$root"
}

check() { # check TAG ARGS... : runs the entrypoint with ARGS inside the exported image
    tag=$1
    shift
    podman image inspect --format \
        "$tag: entrypoint {{json .Config.Entrypoint}} command {{json .Config.Cmd}} user {{.Config.User}}" "$tag"
    dir=$(mktemp -d)
    chmod 755 "$dir" # it becomes / for the unprivileged user
    id=$(podman create "$tag")
    podman export "$id" | tar -C "$dir" -x
    podman rm "$id" >/dev/null
    entry=$(podman image inspect --format '{{index .Config.Entrypoint 0}}' "$tag")
    for f in "$entry" /bin/sh /usr/local/bin/tearline; do
        # Inside the image's root: links such as /toxiproxy are absolute.
        chroot "$dir" /bin/sh -c "test -x '$f'" || {
            echo "build-images: $tag has no executable $f"
            rm -rf "$dir"
            exit 1
        }
    done
    out=$(chroot --userspec=10001:10001 "$dir" "$entry" "$@")
    rm -rf "$dir"
    echo "$tag: $entry $* -> $out"
}

build Dockerfile "tearline:$version"
build Dockerfile.toxiproxy "tearline-toxiproxy:$version"
check "tearline:$version" --version
check "tearline-toxiproxy:$version" -version
echo "build-images: OK tearline:$version tearline-toxiproxy:$version"
